"""Metrics of one simulation, computed from its archived runs (the history's per-run digest).

Proportions carry Wilson score intervals (95 %), percentiles carry bootstrap intervals
(95 %, numpy, seeded from the simulation seed so the report is reproducible).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

import numpy as np
from failclosed.model.state import IDEMPOTENT_WRITE, NON_IDEMPOTENT_WRITE

from .engine import RunRecord

Z = 1.959963984540054


def wilson(k: int, n: int) -> dict[str, float | int | None]:
    """``{"k", "n", "p", "lo", "hi"}``: the Wilson score interval of k successes in n."""
    if n == 0:
        return {"k": k, "n": n, "p": None, "lo": None, "hi": None}
    p = k / n
    d = 1 + Z * Z / n
    c = (p + Z * Z / (2 * n)) / d
    h = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / d
    return {"k": k, "n": n, "p": p, "lo": max(0.0, c - h), "hi": min(1.0, c + h)}


def percentiles(xs: list[float], seed: int, qs=(50, 90, 99), boots: int = 400) -> dict[str, Any]:
    """Percentiles of ``xs`` with bootstrap 95 % intervals: ``{"p50": [est, lo, hi], ...}``."""
    if not xs:
        return {"n": 0}
    a = np.asarray(xs, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(boots, len(a)))
    samples = np.percentile(a[idx], qs, axis=1)
    out: dict[str, Any] = {"n": len(a), "mean": float(a.mean())}
    for q, s in zip(qs, samples, strict=True):
        out[f"p{q}"] = [float(np.percentile(a, q)), float(np.quantile(s, 0.025)), float(np.quantile(s, 0.975))]
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
    from failclosed.model.classify import retryable

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


def compute(records: list[RunRecord], seed: int, lease_seconds: int) -> dict[str, Any]:
    fin = [r for r in records if r.finished]
    m: dict[str, Any] = {"runs": len(records), "finished": len(fin), "unfinished": len(records) - len(fin)}
    m["by_status"] = dict(Counter(r.status for r in records))
    m["by_reason"] = dict(Counter(r.reason or "-" for r in fin))
    m["dead_letter"] = wilson(sum(r.status == "failed" and r.reason in DEAD_LETTER for r in fin), len(fin))
    m["completed"] = wilson(sum(r.status == "completed" for r in fin), len(fin))
    m["stuck"] = wilson(len(records) - len(fin), len(records))

    # applications per logical write call, by effect class
    per_call: dict[str, list[int]] = defaultdict(list)
    unaudited = 0
    apps = 0
    for r in records:
        calls: Counter[tuple[int, int, str]] = Counter()
        for turn, call, _tool, effect, _seg, audited in r.applications:
            calls[(turn, call, effect)] += 1
            apps += 1
            unaudited += not audited
        for (_t, _c, effect), n in calls.items():
            per_call[effect].append(n)
    writes: dict[str, Any] = {}
    for effect in (IDEMPOTENT_WRITE, NON_IDEMPOTENT_WRITE):
        ns = per_call.get(effect, [])
        writes[effect] = {
            "logical_calls": len(ns),
            "applications": int(sum(ns)),
            "per_call": (sum(ns) / len(ns)) if ns else None,
            "double": wilson(sum(n > 1 for n in ns), len(ns)),
        }
    m["writes"] = writes
    m["unaudited_applications"] = wilson(unaudited, apps)
    m["runs_with_double_non_idempotent"] = wilson(
        sum(any(n > 1 for n in Counter((a[0], a[1]) for a in r.applications if a[3] == NON_IDEMPOTENT_WRITE).values())
            for r in records),
        len(records),
    )
    m["reaped_while_alive"] = wilson(sum(r.reaped_alive > 0 for r in records), len(records))
    busy = sum(r.busy for r in records)
    wasted = sum(r.wasted for r in records)
    m["wasted_work"] = {"seconds": wasted, "busy_seconds": busy, "fraction": (wasted / busy) if busy else None}
    m["renewals"] = {"total": sum(r.renewals for r in records),
                     "per_run": (sum(r.renewals for r in records) / len(records)) if records else None}
    m["requeues"] = {"total": sum(r.requeues for r in records)}
    m["segments"] = dict(Counter(o[2] for r in records for o in r.outcomes))
    qw = [r.first_claim - r.admitted for r in records if r.entry == "queued" and r.first_claim is not None]
    m["queue_wait_s"] = percentiles(qw, seed)
    e2e = [r.terminal_at - r.arrival for r in fin if r.terminal_at is not None]
    m["end_to_end_s"] = percentiles(e2e, seed + 1)
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
    m["lease_seconds"] = lease_seconds
    m["failures"] = failures(records)
    return m


FLAT_COLUMNS = (
    "finished", "unfinished", "dead_letters", "p_dead_letter", "nonidem_calls", "nonidem_double",
    "p_double_nonidem", "idem_calls", "idem_double", "applications", "unaudited", "reaped_alive",
    "wasted_s", "busy_s", "throughput_per_hour", "e2e_p50_s", "e2e_p99_s",
)


def flat(m: dict[str, Any]) -> dict[str, Any]:
    """The few numbers a sweep row keeps (counts too, so intervals can be pooled over seeds);
    its keys are ``FLAT_COLUMNS``, in that order."""
    ni = m["writes"][NON_IDEMPOTENT_WRITE]
    iw = m["writes"][IDEMPOTENT_WRITE]
    return {
        "finished": m["finished"],
        "unfinished": m["unfinished"],
        "dead_letters": m["dead_letter"]["k"],
        "p_dead_letter": m["dead_letter"]["p"],
        "nonidem_calls": ni["logical_calls"],
        "nonidem_double": ni["double"]["k"],
        "p_double_nonidem": ni["double"]["p"],
        "idem_calls": iw["logical_calls"],
        "idem_double": iw["double"]["k"],
        "applications": sum(w["applications"] for w in m["writes"].values()),
        "unaudited": m["unaudited_applications"]["k"],
        "reaped_alive": m["reaped_while_alive"]["k"],
        "wasted_s": m["wasted_work"]["seconds"],
        "busy_s": m["wasted_work"]["busy_seconds"],
        "throughput_per_hour": m["throughput_per_hour"],
        "e2e_p50_s": (m["end_to_end_s"].get("p50") or [None])[0],
        "e2e_p99_s": (m["end_to_end_s"].get("p99") or [None])[0],
    }
