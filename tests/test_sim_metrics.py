"""The simulator's statistics (sim/metrics.py) on hand-made run records whose every figure is
known: Wilson intervals against published values, bootstrap percentile intervals around
their estimate, the per-call write counts, the failure tables, and the flat sweep row."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.model.state import IDEMPOTENT_WRITE, NON_IDEMPOTENT_WRITE  # noqa: E402
from failclosed.sim.metrics import (  # noqa: E402
    FLAT_COLUMNS,
    compute,
    failure_rows,
    failures,
    flat,
    outcomes,
)
from failclosed.sim.records import RunRecord  # noqa: E402
from failclosed.sim.stats import wilson  # noqa: E402

NI, IW = NON_IDEMPOTENT_WRITE, IDEMPOTENT_WRITE


# -- intervals -------------------------------------------------------------------------------
@pytest.mark.parametrize(("k", "n", "lo", "hi"), [
    # Wilson score intervals at 95 % (Newcombe 1998, table I; Brown, Cai & DasGupta 2001)
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
    (29, 29, 0.8830, 1.0),
])
def test_wilson_matches_published_intervals(k, n, lo, hi):
    w = wilson(k, n)
    assert w.n == n and w.estimate == pytest.approx(k / n)
    assert w.lo == pytest.approx(lo, abs=1e-4) and w.hi == pytest.approx(hi, abs=1e-4)


def test_wilson_of_nothing_is_no_estimate():
    w = wilson(0, 0)
    assert (w.estimate, w.lo, w.hi, w.n) == (None, None, None, 0)


def test_wilson_is_symmetric_and_clipped():
    a, b = wilson(3, 10), wilson(7, 10)
    assert a.lo == pytest.approx(1 - b.hi) and a.hi == pytest.approx(1 - b.lo)
    assert wilson(0, 5).lo == 0.0 and wilson(5, 5).hi == pytest.approx(1.0)


def rec(i: int, **kw) -> RunRecord:
    base = {"id": f"r{i}", "entry": "queued", "arrival": 0.0, "spec": None}
    return RunRecord(**(base | kw))


def runs() -> list[RunRecord]:
    return [
        # completed; one non-idempotent call applied twice (one of them unaudited), one
        # idempotent call once; a provider error on the way
        rec(1, arrival=0.0, admitted=1.0, first_claim=3.0, terminal_at=10.0, finished=True,
            status="completed", busy=8.0, wasted=2.0, renewals=3, requeues=1,
            applications=[(0, 0, "t", NI, "s1", True), (0, 0, "t", NI, "s2", False),
                          (0, 1, "u", IW, "s2", True)],
            outcomes=[("s1", "worker", "LEASE_LOST"), ("s2", "worker", "SETTLED")],
            provider_errors=[("http_429", "rateLimit")], reaped_alive=1),
        # failed for good (dead letter), two provider errors of one class
        rec(2, arrival=2.0, admitted=2.0, first_claim=4.0, terminal_at=20.0, finished=True,
            status="failed", reason="retries_exhausted", busy=4.0, renewals=1,
            applications=[(0, 0, "t", NI, "s3", True), (1, 0, "t", NI, "s4", True)],
            outcomes=[("s3", "worker", "SETTLED")],
            provider_errors=[("http_429", "rateLimit"), ("http_503", "serverError")],
            tool_errors=[("t", "timeout", "connection"), ("t", "", "")]),
        # failed for a reason that is no dead letter
        rec(3, entry="interactive", arrival=5.0, admitted=6.0, terminal_at=8.0, finished=True,
            status="failed", reason="policy_stopped"),
        # never finished
        rec(4, arrival=9.0, admitted=12.0, first_claim=None, status="queued"),
    ]


def test_outcomes_count_status_and_reason():
    assert outcomes(runs()) == {"completed": 1, "failed/policy_stopped": 1,
                                "failed/retries_exhausted": 1, "unfinished/queued": 1}


def test_compute_every_figure():
    m = compute(runs(), seed=3, lease_seconds=30)
    assert (m["runs"], m["finished"], m["unfinished"]) == (4, 3, 1)
    assert m["by_status"] == {"completed": 1, "failed": 2, "queued": 1}
    assert m["by_reason"] == {"-": 1, "retries_exhausted": 1, "policy_stopped": 1}
    assert (m["dead_letter"]["k"], m["dead_letter"]["n"]) == (1, 3)
    assert (m["completed"]["k"], m["completed"]["n"]) == (1, 3)
    assert (m["stuck"]["k"], m["stuck"]["n"]) == (1, 4)
    ni, iw = m["writes"][NI], m["writes"][IW]
    # run 1: call (0,0) twice; run 2: calls (0,0) and (1,0) once each
    assert (ni["logical_calls"], ni["applications"], ni["per_call"]) == (3, 4, pytest.approx(4 / 3))
    assert (ni["double"]["k"], ni["double"]["n"]) == (1, 3)
    assert (iw["logical_calls"], iw["applications"], iw["per_call"]) == (1, 1, 1.0)
    assert iw["double"]["k"] == 0
    assert (m["unaudited_applications"]["k"], m["unaudited_applications"]["n"]) == (1, 5)
    assert (m["runs_with_double_non_idempotent"]["k"], m["runs_with_double_non_idempotent"]["n"]) == (1, 4)
    assert (m["reaped_while_alive"]["k"], m["reaped_while_alive"]["n"]) == (1, 4)
    assert m["wasted_work"] == {"seconds": 2.0, "busy_seconds": 12.0, "fraction": pytest.approx(2 / 12)}
    assert m["renewals"] == {"total": 4, "per_run": 1.0}
    assert m["requeues"] == {"total": 1}
    assert m["segments"] == {"LEASE_LOST": 1, "SETTLED": 2}
    # queue wait: queued runs with a first claim (run 1: 3-1, run 2: 4-2)
    assert m["queue_wait_s"]["n"] == 2 and m["queue_wait_s"]["mean"] == 2.0
    # end to end: 10-0, 20-2, 8-5
    assert m["end_to_end_s"]["n"] == 3 and m["end_to_end_s"]["mean"] == pytest.approx(31 / 3)
    assert m["end_to_end_s"]["p50"][0] == 10.0
    assert m["admission_wait_s"] == {"mean": pytest.approx((1 + 0 + 1 + 3) / 4), "max": 3.0}
    # 95 % of three finished runs: all three, the last ending at 20 (first arrival 0)
    assert m["throughput_per_hour"] == pytest.approx(3 / 20 * 3600)
    assert m["span_s"] == 20.0 and m["lease_seconds"] == 30


def test_throughput_ignores_the_last_five_percent():
    rs = [rec(i, arrival=0.0, terminal_at=float(i + 1), finished=True, status="completed")
          for i in range(40)]
    rs.append(rec(99, arrival=0.0, terminal_at=10_000.0, finished=True, status="completed"))
    m = compute(rs, seed=1, lease_seconds=1)
    n95 = math.ceil(0.95 * 41)  # 39: the 39th end is at 39 s
    assert m["throughput_per_hour"] == pytest.approx(n95 / 39.0 * 3600)
    assert m["span_s"] == 10_000.0


def test_compute_of_no_finished_run():
    m = compute([rec(1, status="queued")], seed=1, lease_seconds=1)
    assert m["throughput_per_hour"] == 0.0 and "span_s" not in m
    assert m["wasted_work"]["fraction"] is None and m["dead_letter"]["p"] is None
    assert {k: v for k, v in m["writes"][NI].items() if k != "double"} == {"logical_calls": 0, "applications": 0, "per_call": None}
    double = m["writes"][NI]["double"]
    assert (double["k"], double["n"], double["p"], double["lo"], double["hi"]) == (0, 0, None, None, None)
    empty = compute([], seed=1, lease_seconds=1)
    assert empty["renewals"]["per_run"] is None and empty["admission_wait_s"] == {"mean": None, "max": None}


def test_failures_by_class_and_error():
    f = failures(runs())
    prov = f["provider"]
    assert prov["count"] == 3
    rl = prov["by_class"]["rateLimit"]
    assert (rl["count"], rl["runs"], rl["retryable"]) == (2, 2, True)
    assert rl["run_outcomes"] == {"completed": 1, "failed/retries_exhausted": 1}
    assert prov["by_class"]["serverError"]["count"] == 1
    e = prov["by_error"]["http_429"]
    assert (e["count"], e["runs"], e["class"]) == (2, 2, "rateLimit")
    tool = f["tool"]
    assert tool["count"] == 2  # a tool error without a name counts here
    assert tool["by_tool"]["t"]["count"] == 2 and tool["by_tool"]["t"]["runs"] == 1
    assert list(tool["by_error"]) == ["timeout"]  # named ones only
    assert tool["by_class"]["connection"]["run_outcomes"] == {"failed/retries_exhausted": 1}


def test_a_run_with_two_failures_of_one_key_counts_once_as_a_run():
    r = rec(1, finished=True, status="completed",
            provider_errors=[("http_429", "rateLimit"), ("http_429", "rateLimit")])
    e = failures([r])["provider"]["by_error"]["http_429"]
    assert (e["count"], e["runs"], e["run_outcomes"]) == (2, 1, {"completed": 1})


def test_failure_rows():
    m = compute(runs(), seed=1, lease_seconds=1)
    rows = failure_rows(m)
    assert rows[0] == ("provider errors by class", "(runs completed)")
    assert ("  rateLimit", "2 (50%)") in rows and ("  serverError", "1 (0%)") in rows
    assert ("provider errors by error", "(runs completed)") in rows
    assert ("  http_429 (rateLimit)", "2 (50%)") in rows
    # the per-class form (every key is its own class) lists no concrete errors
    per_class = rec(1, finished=True, status="completed", provider_errors=[("auth", "auth")])
    rows = failure_rows(compute([per_class], seed=1, lease_seconds=1))
    assert rows == [("provider errors by class", "(runs completed)"), ("  auth", "1 (100%)")]
    assert failure_rows({}) == []


def test_flat_keeps_the_sweep_columns():
    m = compute(runs(), seed=3, lease_seconds=30)
    row = flat(m)
    assert tuple(row) == FLAT_COLUMNS
    assert {k: row[k] for k in (
        "finished", "unfinished", "dead_letters", "p_dead_letter", "nonidem_calls",
        "nonidem_double", "p_double_nonidem", "idem_calls", "idem_double", "applications",
        "unaudited", "reaped_alive", "wasted_s", "busy_s", "throughput_per_hour", "e2e_p50_s",
        "e2e_p99_s")} == {
        "finished": 3, "unfinished": 1, "dead_letters": 1, "p_dead_letter": pytest.approx(1 / 3),
        "nonidem_calls": 3, "nonidem_double": 1, "p_double_nonidem": pytest.approx(1 / 3),
        "idem_calls": 1, "idem_double": 0, "applications": 5, "unaudited": 1, "reaped_alive": 1,
        "wasted_s": 2.0, "busy_s": 12.0, "throughput_per_hour": pytest.approx(540.0),
        "e2e_p50_s": 10.0, "e2e_p99_s": pytest.approx(float(np.percentile([10, 18, 3], 99))),
    }
    none = flat(compute([rec(1, status="queued")], seed=1, lease_seconds=1))
    assert none["e2e_p50_s"] is None and none["e2e_p99_s"] is None


def test_counts_add_up_over_runs():
    rs = [rec(i, finished=True, status="completed", provider_errors=[("http_429", "rateLimit")])
          for i in range(3)] + [rec(9, status="queued"), rec(8, status="queued")]
    assert outcomes(rs) == {"completed": 3, "unfinished/queued": 2}
    e = failures(rs)["provider"]["by_class"]["rateLimit"]
    assert e == {"count": 3, "runs": 3, "run_outcomes": {"completed": 3}, "retryable": True}


def test_failure_tables_carry_the_class_only_where_it_names_an_error():
    f = failures(runs())
    assert set(f["provider"]["by_class"]["rateLimit"]) == {"count", "runs", "run_outcomes",
                                                             "retryable"}
    assert f["provider"]["by_error"]["http_503"] == {
        "count": 1, "runs": 1, "run_outcomes": {"failed/retries_exhausted": 1},
        "class": "serverError"}
    assert f["tool"]["by_tool"]["t"] == {"count": 2, "runs": 1,
                                         "run_outcomes": {"failed/retries_exhausted": 1}}
    assert f["tool"]["by_class"] == {"connection": {
        "count": 1, "runs": 1, "run_outcomes": {"failed/retries_exhausted": 1}}}
    assert f["tool"]["by_error"] == {"timeout": {
        "count": 1, "runs": 1, "run_outcomes": {"failed/retries_exhausted": 1},
        "class": "connection"}}


def test_two_calls_of_one_tool_in_a_turn_are_two_logical_calls():
    r = rec(1, finished=True, status="completed", terminal_at=1.0,
            applications=[(0, 0, "t", NI, "s", True), (0, 1, "t", NI, "s", True)])
    m = compute([r], seed=1, lease_seconds=1)
    assert m["writes"][NI]["logical_calls"] == 2 and m["writes"][NI]["double"]["k"] == 0
    assert m["runs_with_double_non_idempotent"]["k"] == 0


def test_throughput_and_span_count_from_the_first_arrival():
    one = rec(1, arrival=100.0, admitted=100.0, terminal_at=100.5, finished=True,
              status="completed")
    m = compute([one], seed=1, lease_seconds=1)
    assert m["throughput_per_hour"] == pytest.approx(1 / 0.5 * 3600)  # one run in 0.5 s
    assert m["span_s"] == pytest.approx(0.5)
    two = [one, rec(2, arrival=150.0, terminal_at=400.0, finished=True, status="completed")]
    m = compute(two, seed=1, lease_seconds=1)
    assert m["span_s"] == pytest.approx(300.0)
    assert m["throughput_per_hour"] == pytest.approx(2 / 300.0 * 3600)


def test_unaudited_applications_split_by_how_their_run_ended():
    # the central guarantee reads off this split: an unaudited application in a completed
    # run is the violation; in a failed or dead-lettered run it is not settled successfully
    done = {"finished": True, "arrival": 0.0, "terminal_at": 1.0}
    audited = rec(1, status="completed", applications=[(0, 0, "t", NI, "s1", True)], **done)
    unaudited = rec(2, status="completed", **done,
                    applications=[(0, 0, "t", NI, "s2", True), (0, 1, "t", NI, "s2", False)])
    dead = rec(3, status="failed", reason="retries_exhausted", **done,
               applications=[(0, 0, "t", NI, "s3", False), (1, 0, "t", NI, "s4", False)])
    m = compute([audited, unaudited, dead, rec(4, status="queued")], seed=1, lease_seconds=30)
    assert m["unaudited_by_outcome"] == {"completed": 1, "failed": 0, "dead_lettered": 2, "unfinished": 0}
    assert (m["completed_unaudited"]["k"], m["completed_unaudited"]["n"]) == (1, 3)


def test_statements_and_redispatches_per_run():
    """The statements of each class: the runs' own plus those naming no run (the reaper's
    SELECTs), in total and per run; the sweep's re-dispatches (P6) with their waits."""
    rs = [rec(1, finished=True, status="completed", statements={"store": 7, "audit": 3, "dispatch": 1},
              redispatch_waits=[12.0, 50.0]),
          rec(2, finished=True, status="completed", statements={"store": 5, "audit": 2},
              redispatch_waits=[2.0])]
    m = compute(rs, seed=1, lease_seconds=1, unattributed={"store": 4}, reaper_period=60.0)
    st = m["statements"]
    assert st["store"] == {"total": 16, "of_runs": 12, "per_run": 8.0}
    assert st["audit"] == {"total": 5, "of_runs": 5, "per_run": 2.5}
    assert st["dispatch"] == {"total": 1, "of_runs": 1, "per_run": 0.5}
    rd = m["redispatches"]
    assert (rd["count"], rd["runs"], rd["per_run"], rd["reaper_period_s"]) == (3, 2, 1.5, 60.0)
    assert rd["wait_s"]["mean"] == pytest.approx(64.0 / 3) and rd["wait_s"]["max"] == 50.0
    assert rd["wait_s"]["p50"] == 12.0
    row = flat(m)
    assert (row["store_statements"], row["audit_inserts"], row["dispatches"]) == (16, 5, 1)
    assert row["reaper_selects"] == 4  # the statements no run's record holds
    assert (row["redispatches"], row["redispatch_wait_max_s"]) == (3, 50.0)
    assert row["redispatch_wait_s"] == pytest.approx(64.0)  # a sum: the summary divides by the count
    # no re-dispatch: no wait, and a zero sum the summary's ratio skips
    none = flat(compute([rec(3, status="queued")], seed=1, lease_seconds=1))
    assert (none["redispatches"], none["redispatch_wait_s"], none["redispatch_wait_max_s"]) == (0, 0.0, None)
    assert none["store_statements"] == 0


def test_the_summary_divides_the_statements_by_the_runs_over_seeds():
    from failclosed.sim import stats
    from failclosed.sim.batch import sweep_columns

    header = sweep_columns(["policy"])
    base = dict.fromkeys(header, "")
    rows = [base | {"param:policy": "p", "seed": str(s), "runs": str(n), "store_statements": str(k),
                    "redispatches": str(r), "redispatch_wait_s": str(w)}
            for s, n, k, r, w in ((1, 10, 200, 2, 30.0), (2, 20, 500, 0, 0.0), (3, 10, 260, 1, 40.0))]
    (s,) = stats.summarize(rows, header)
    assert s["store_statements_per_run"] == pytest.approx(960 / 40)
    assert s["store_statements_per_run_lo"] <= 960 / 40 <= s["store_statements_per_run_hi"]
    assert s["redispatches_per_run"] == pytest.approx(3 / 40)
    assert s["redispatch_wait_s"] == pytest.approx(70.0 / 3)  # over the re-dispatches, not the seeds
