"""Metrics of one simulation, computed from its archived runs (the history's per-run digest).

The runs of one simulation are not independent (they share workers, the queue, outages and
stalls), so its intervals are batch means by sectioning (``sim.stats.sectioned``): the runs,
in arrival order, cut into ``sim.stats.SECTIONS`` sections of consecutive runs; the estimate
is the whole simulation's and the Student t interval comes from the spread of the sections'
estimates. Each interval names its ``method``. Across seeds (a sweep), the summary's
intervals are over seeds (``sim.stats.summarize``, from the per-seed ``flat`` rows).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from failclosed.model.classify import retryable
from failclosed.model.state import (
    APPROVER_NOT_PERMITTED,
    IDEMPOTENT_WRITE,
    NON_IDEMPOTENT_WRITE,
    SELF_APPROVAL_DENIED,
    SUBMITTER_NOT_PERMITTED,
)
from failclosed.model.steps import AUDIT, DISPATCH, STORE
from failclosed.model.vocab import OutcomeName

from . import stats
from .records import RunRecord
from .summary import SUMMARY_METRICS as SUMMARY_METRICS  # read as metrics.SUMMARY_METRICS too
from .window import STATEMENT_COSTS


def proportion(records: list[RunRecord], k: Callable[[RunRecord], int], n: Callable[[RunRecord], int]
               ) -> dict[str, Any]:
    """``{"k", "n", "p", "lo", "hi", "method"}``: sum of ``k(run)`` over sum of ``n(run)``, with
    the batch-means interval over sections of consecutive runs (``records`` in arrival order);
    and ``"clipped"`` when a bound was clipped to [0, 1] (where it was before)."""
    def counts(rs):
        return sum(k(r) for r in rs), sum(n(r) for r in rs)

    def ratio(rs):
        a, b = counts(rs)
        return a / b if b else None

    kk, nn = counts(records)
    iv = stats.sectioned(records, ratio, kind="proportion", counts=counts)
    out = {"k": kk, "n": nn, "p": (kk / nn) if nn else None, "lo": iv.lo, "hi": iv.hi, "method": iv.method}
    if iv.clipped:  # the bounds the interval had past [0, 1] before it was clipped to it
        out["clipped"] = iv.clipped
    return out


def percentiles(records: list[RunRecord], value: Callable[[RunRecord], float | None],
                qs=(50, 90, 99)) -> dict[str, Any]:
    """Percentiles of ``value(run)`` over the runs (``records`` in arrival order; None: the run
    has no value), each ``[estimate, lo, hi]`` with the batch-means interval by sectioning."""
    vals = [value(r) for r in records]
    xs = [v for v in vals if v is not None]
    if not xs:
        return {"n": 0}
    out: dict[str, Any] = {"n": len(xs), "mean": float(np.mean(xs))}
    for q in qs:
        def pq(rs, q=q):
            v = [x for x in (value(r) for r in rs) if x is not None]
            return float(np.percentile(v, q)) if v else None

        iv = stats.sectioned(records, pq)
        lo = None if iv.lo is None else max(iv.lo, min(xs))  # a percentile lies within the data
        out[f"p{q}"] = [iv.estimate, lo, iv.hi]
        out["method"] = iv.method
    return out


DEAD_LETTER = ("not_retryable", "retries_exhausted")


def outcomes(records: list[RunRecord]) -> dict[str, int]:
    c: Counter[str] = Counter()
    for r in records:
        if r.finished:
            c[f"{r.status}/{r.reason}" if r.reason else r.status] += 1
        else:
            c[f"unfinished/{r.status}"] += 1
    return dict(sorted(c.items()))


def _outcome(r: RunRecord) -> str:
    if r.finished:
        return f"{r.status}/{r.reason}" if r.reason else r.status
    return f"unfinished/{r.status}"


def failures(records: list[RunRecord]) -> dict[str, Any]:
    """The failures the runs met, by class (RUNTIME 13) and by concrete error: how many
    were drawn, how many runs met one, and how those runs ended (``status/reason`` counts).
    A run that met several failures counts once under each of their keys. Provider errors
    of the per-class form are listed under their class name in ``by_error`` too; a tool
    error without an ``error_mix`` is counted under ``tool`` only."""
    def table(items: list[tuple[str, str, RunRecord]], with_class: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, cls, r in items:
            e = out.setdefault(key, {"count": 0, "runs": set(), "run_outcomes": Counter()})
            if with_class:
                e["class"] = cls
            e["count"] += 1
            if r.id not in e["runs"]:
                e["runs"].add(r.id)
                e["run_outcomes"][_outcome(r)] += 1
        return {k: {**v, "runs": len(v["runs"]), "run_outcomes": dict(sorted(v["run_outcomes"].items()))}
                for k, v in sorted(out.items())}

    prov = [(err, cls, r) for r in records for err, cls in r.provider_errors]
    tools = [(err, cls, r) for r in records for _tool, err, cls in r.tool_errors if err]
    by_class = table([(c, c, r) for _e, c, r in prov], False)
    for c, v in by_class.items():
        v["retryable"] = retryable(c)
    return {
        "provider": {"count": len(prov), "by_class": by_class, "by_error": table(prov, True)},
        "tool": {
            "count": sum(len(r.tool_errors) for r in records),
            "by_tool": table([(t, "", r) for r in records for t, _e, _c in r.tool_errors], False),
            "by_class": table([(c, c, r) for _e, c, r in tools], False),
            "by_error": table(tools, True),
        },
    }


def failure_rows(m: dict[str, Any]) -> list[tuple[str, str]]:
    """Report lines: per provider failure class, then per concrete error, how many were
    drawn and the share of the runs that met one which completed."""
    rows = []
    f = m.get("failures", {}).get("provider", {})
    for head, key in (("provider errors by class", "by_class"), ("provider errors by error", "by_error")):
        tab = f.get(key, {})
        if not tab or (key == "by_error" and all(k == v.get("class") for k, v in tab.items())):
            continue  # the per-class form names no concrete error
        rows.append((head, "(runs completed)"))
        for k, v in tab.items():
            done = sum(n for o, n in v["run_outcomes"].items() if o.startswith("completed"))
            label = f"  {k}" + (f" ({v['class']})" if key == "by_error" else "")
            rows.append((label, f"{v['count']} ({100 * done / v['runs']:.0f}%)"))
    return rows


def run_outcome(r: RunRecord) -> str:
    """How a run ended, for splitting its figures: ``completed``, ``dead_lettered`` (failed
    ``not_retryable`` / ``retries_exhausted``), ``failed`` (any other reason), another
    terminal status (``cancelled``, ...), or ``unfinished``."""
    if not r.finished:
        return "unfinished"
    if r.status == "failed":
        return "dead_lettered" if r.reason in DEAD_LETTER else "failed"
    return r.status


UNAUDITED_OUTCOMES = ("completed", "failed", "dead_lettered")  # the split the report shows first


def _double_calls(r: RunRecord, effect: str) -> tuple[int, int]:
    """(logical calls of ``effect`` applied more than once, logical calls of ``effect``)."""
    calls = Counter((a[0], a[1]) for a in r.applications if a[3] == effect)
    return sum(n > 1 for n in calls.values()), len(calls)


def statements(records: list[RunRecord], unattributed: Mapping[str, int] | None = None
               ) -> dict[str, Any]:
    """The statements the runtime issued, by class (``sim.window.STATEMENT_COSTS``: run-store
    statements, audit inserts, dispatches): the runs' own plus ``unattributed`` (the
    reaper's SELECTs, T10 and T14, which name no run), in total and per run."""
    extra = dict(unattributed or {})
    out: dict[str, Any] = {}
    for cost in STATEMENT_COSTS:
        own = sum(r.statements.get(cost, 0) for r in records)
        total = own + extra.get(cost, 0)
        out[cost] = {"total": total, "of_runs": own,
                     "per_run": (total / len(records)) if records else None}
    return out


def redispatches(records: list[RunRecord], reaper_period: float | None = None) -> dict[str, Any]:
    """Proposal P6's sweep: how many times it re-dispatched a QUEUED row (T15 matched), per
    run, and the distribution of the wait from the row's dispatch deadline passing (its
    orphaning) to that T15, over every re-dispatch; beside it the reaper's period, which
    bounds the wait of a row the sweep finds at its first tick after the deadline."""
    waits = sorted(w for r in records for w in r.redispatch_waits)
    out: dict[str, Any] = {"count": len(waits), "runs": sum(bool(r.redispatch_waits) for r in records),
                           "per_run": (len(waits) / len(records)) if records else None,
                           "reaper_period_s": reaper_period}
    if waits:
        out["wait_s"] = {"mean": float(np.mean(waits)),
                         **{f"p{q}": float(np.percentile(waits, q)) for q in (50, 90, 99)},
                         "max": waits[-1]}
    return out


def compute(records: list[RunRecord], seed: int, lease_seconds: int,
            unattributed: Mapping[str, int] | None = None,
            reaper_period: float | None = None) -> dict[str, Any]:
    """The metrics of one simulation (``seed`` is recorded; the intervals are batch means
    over sections of consecutive runs, ``sim.stats.sectioned``). ``unattributed``: the
    statements no run's record holds (``Window.unattributed``); ``reaper_period``: the
    reaper's period, reported beside the sweep's waits."""
    records = sorted(records, key=lambda r: r.arrival)
    fin = [r for r in records if r.finished]
    m: dict[str, Any] = {"runs": len(records), "finished": len(fin), "unfinished": len(records) - len(fin),
                         "seed": seed}
    m.update(_endings(records, fin))  # how the runs ended
    m.update(_write_metrics(records))  # the write calls, applied twice, unaudited
    m.update(_work(records))  # wasted work, renewals, requeues, segments
    m.update(_times(records, fin))  # waits, end to end, throughput
    m["lease_seconds"] = lease_seconds
    m["statements"] = statements(records, unattributed)
    m["redispatches"] = redispatches(records, reaper_period)
    m["failures"] = failures(records)
    if any(r.spec is not None and r.spec.requests for r in records):  # [workload.strangers]
        m["access"] = access(records)
    return m


def _endings(records: list[RunRecord], fin: list[RunRecord]) -> dict[str, Any]:
    """How the runs ended: by status, by reason, and the dead-lettered, completed and stuck
    shares."""
    m: dict[str, Any] = {}
    m["by_status"] = dict(Counter(r.status for r in records))
    m["by_reason"] = dict(Counter(r.reason or "-" for r in fin))
    m["dead_letter"] = proportion(records, lambda r: int(run_outcome(r) == "dead_lettered"), lambda r: int(r.finished))
    m["completed"] = proportion(records, lambda r: int(run_outcome(r) == "completed"), lambda r: int(r.finished))
    m["stuck"] = proportion(records, lambda r: int(not r.finished), lambda r: 1)
    return m


def _write_metrics(records: list[RunRecord]) -> dict[str, Any]:
    """The write calls: applications per logical call by effect class, the unaudited
    applications (by how their run ended), and the runs reaped while alive."""
    m: dict[str, Any] = {}
    per_call: dict[str, list[int]] = defaultdict(list)
    for r in records:
        calls: Counter[tuple[int, int, str]] = Counter((a[0], a[1], a[3]) for a in r.applications)
        for (_t, _c, effect), n in calls.items():
            per_call[effect].append(n)
    writes: dict[str, Any] = {}
    for effect in (IDEMPOTENT_WRITE, NON_IDEMPOTENT_WRITE):
        ns = per_call.get(effect, [])
        writes[effect] = {
            "logical_calls": len(ns),
            "applications": int(sum(ns)),
            "per_call": (sum(ns) / len(ns)) if ns else None,
            "double": proportion(records, lambda r, e=effect: _double_calls(r, e)[0],
                                 lambda r, e=effect: _double_calls(r, e)[1]),
        }
    m["writes"] = writes
    m["unaudited_applications"] = proportion(records, lambda r: sum(not a[5] for a in r.applications),
                                             lambda r: len(r.applications))
    # the central guarantee reads off this split: no unaudited application in a completed run
    by_outcome: Counter[str] = Counter()
    for r in records:
        by_outcome[run_outcome(r)] += sum(not a[5] for a in r.applications)
    m["unaudited_by_outcome"] = {o: by_outcome.get(o, 0) for o in UNAUDITED_OUTCOMES} | {
        o: n for o, n in sorted(by_outcome.items()) if o not in UNAUDITED_OUTCOMES}
    m["completed_unaudited"] = proportion(
        records, lambda r: int(run_outcome(r) == "completed" and any(not a[5] for a in r.applications)),
        lambda r: int(r.finished))
    m["runs_with_double_non_idempotent"] = proportion(
        records, lambda r: int(_double_calls(r, NON_IDEMPOTENT_WRITE)[0] > 0), lambda r: 1)
    m["reaped_while_alive"] = proportion(records, lambda r: int(r.reaped_alive > 0), lambda r: 1)
    return m


def _work(records: list[RunRecord]) -> dict[str, Any]:
    """The work the runs took: wasted seconds of busy ones, renewals, requeues, segments."""
    busy = sum(r.busy for r in records)
    wasted = sum(r.wasted for r in records)
    return {
        "wasted_work": {"seconds": wasted, "busy_seconds": busy, "fraction": (wasted / busy) if busy else None},
        "renewals": {"total": sum(r.renewals for r in records),
                     "per_run": (sum(r.renewals for r in records) / len(records)) if records else None},
        "requeues": {"total": sum(r.requeues for r in records)},
        "segments": dict(Counter(o[2] for r in records for o in r.outcomes)),
    }


def _times(records: list[RunRecord], fin: list[RunRecord]) -> dict[str, Any]:
    """The waits (in the queue, to be admitted), the end-to-end time and the throughput."""
    m: dict[str, Any] = {}
    m["queue_wait_s"] = percentiles(records, lambda r: (r.first_claim - r.admitted)
                                    if r.entry == "queued" and r.first_claim is not None else None)
    m["end_to_end_s"] = percentiles(records, lambda r: (r.terminal_at - r.arrival)
                                    if r.finished and r.terminal_at is not None else None)
    adm = [r.admitted - r.arrival for r in records]
    m["admission_wait_s"] = {"mean": (sum(adm) / len(adm)) if adm else None, "max": max(adm) if adm else None}
    ends = sorted(r.terminal_at for r in fin if r.terminal_at is not None)
    if ends:
        # runs finished per hour from the first arrival until 95 % of the finished runs had
        # finished: one straggler (a run waiting hours for an approver) does not set the rate
        t0 = min(r.arrival for r in records)
        n95 = max(1, math.ceil(0.95 * len(ends)))
        span = max(ends[n95 - 1] - t0, 1e-9)
        m["throughput_per_hour"] = n95 / span * 3600.0
        m["span_s"] = ends[-1] - t0
    else:
        m["throughput_per_hour"] = 0.0
    return m


# what a request of section 16.18 may be refused with, or answered as for an unknown run
ACCESS_REFUSALS: tuple[str, ...] = (
    OutcomeName.ACCESS_DENIED, OutcomeName.RETURNED_FALSE, OutcomeName.RETURNED_NOTHING,
    SELF_APPROVAL_DENIED, APPROVER_NOT_PERMITTED, SUBMITTER_NOT_PERMITTED,
)


def access(records: list[RunRecord]) -> dict[str, Any]:
    """The requests by other principals: how many runs had them, how many of those runs'
    requests were refused (``refused``), by kind (``refused_by_kind``: the access rule's
    AccessDenied, a cancel's false and a read's nothing, the four-eyes rule, gate 2, the
    submitter gate; every kind listed, 0 when none), how many took effect, and of those how
    many the access rule does not let their principal make (a landed refusal: 0 unless the
    check is broken)."""
    made = [x for r in records for x in r.made]
    by_kind = {str(k): 0 for k in ACCESS_REFUSALS}
    for r in records:
        if r.spec is not None and r.spec.requests:
            for o in r.outcomes:
                if o[2] in by_kind:
                    by_kind[o[2]] += 1
    return {
        "runs": sum(1 for r in records if r.spec is not None and r.spec.requests),
        "refused": sum(by_kind.values()),
        "refused_by_kind": by_kind,
        "took_effect": len(made),
        "landed_without_access": sum(1 for _by, _req, ok in made if not ok),
    }


FLAT_COLUMNS = (
    "finished", "unfinished", "completed", "failed", "dead_letters", "p_dead_letter", "nonidem_calls",
    "nonidem_double", "p_double_nonidem", "idem_calls", "idem_double", "applications", "unaudited",
    "unaudited_in_completed", "unaudited_in_failed", "unaudited_in_dead_lettered", "completed_unaudited",
    "reaped_alive", "wasted_s", "busy_s", "throughput_per_hour", "e2e_p50_s", "e2e_p99_s",
    "store_statements", "reaper_selects", "audit_inserts", "dispatches", "redispatches", "redispatch_wait_s",
    "redispatch_wait_max_s",
)


def flat(m: dict[str, Any]) -> dict[str, Any]:
    """The numbers a sweep row keeps for one simulation (counts, so that the summary's
    intervals are over seeds: ``SUMMARY_METRICS``); its keys are ``FLAT_COLUMNS``, in order."""
    ni = m["writes"][NON_IDEMPOTENT_WRITE]
    iw = m["writes"][IDEMPOTENT_WRITE]
    u = m["unaudited_by_outcome"]
    rd = m["redispatches"]
    return {
        "finished": m["finished"],
        "unfinished": m["unfinished"],
        "completed": m["completed"]["k"],
        "failed": m["by_status"].get("failed", 0),
        "dead_letters": m["dead_letter"]["k"],
        "p_dead_letter": m["dead_letter"]["p"],
        "nonidem_calls": ni["logical_calls"],
        "nonidem_double": ni["double"]["k"],
        "p_double_nonidem": ni["double"]["p"],
        "idem_calls": iw["logical_calls"],
        "idem_double": iw["double"]["k"],
        "applications": sum(w["applications"] for w in m["writes"].values()),
        "unaudited": m["unaudited_applications"]["k"],
        "unaudited_in_completed": u["completed"],
        "unaudited_in_failed": u["failed"],
        "unaudited_in_dead_lettered": u["dead_lettered"],
        "completed_unaudited": m["completed_unaudited"]["k"],
        "reaped_alive": m["reaped_while_alive"]["k"],
        "wasted_s": m["wasted_work"]["seconds"],
        "busy_s": m["wasted_work"]["busy_seconds"],
        "throughput_per_hour": m["throughput_per_hour"],
        "e2e_p50_s": (m["end_to_end_s"].get("p50") or [None])[0],
        "e2e_p99_s": (m["end_to_end_s"].get("p99") or [None])[0],
        "store_statements": m["statements"][STORE]["total"],
        "reaper_selects": m["statements"][STORE]["total"] - m["statements"][STORE]["of_runs"],
        "audit_inserts": m["statements"][AUDIT]["total"],
        "dispatches": m["statements"][DISPATCH]["total"],
        "redispatches": rd["count"],
        "redispatch_wait_s": rd["wait_s"]["mean"] * rd["count"] if rd["count"] else 0.0,
        "redispatch_wait_max_s": rd["wait_s"]["max"] if rd["count"] else None,
    }
