"""What each proposal costs in the simulator (``failclosed proposals --cost``, issue 28 item 4):
the statements the runtime issues, counted from the simulation's transitions, and the wait of
an orphaned QUEUED row for the overdue sweep (P6) against the reaper's period."""

from __future__ import annotations

import csv

import pytest
from failclosed.cli.app import main
from failclosed.cli.proposals_cost import COST_COLUMNS, cost_policies
from failclosed.model import store
from failclosed.model.config import read_toml
from failclosed.model.policy import proposal_switches
from failclosed.model.steps import AUDIT, DISPATCH, STORE
from failclosed.sim import config as sconfig
from failclosed.sim.batch import simulate_one

P6 = "overdue_queued_redispatched"
P2 = "fallback_settles_requeued_row"


def _default(**over) -> dict:
    return sconfig.with_overrides(read_toml(sconfig.default_path()), over)


def _quiet_workload(runs: int) -> dict:
    """The shipped workload with no fault that could orphan a row or stall a segment: the
    sweep then finds nothing overdue, and P6 changes no transition of the history."""
    return _default(**{"runs.count": runs, "bus.dispatch_failure_probability": 0.0,
                       "crashes.worker_rate_per_hour": 0.0, "pauses.probability": 0.0,
                       "run_store.error_probability": 0.0})


def test_the_sweep_costs_one_select_per_tick_and_nothing_else_when_nothing_is_overdue():
    raw = _quiet_workload(40)
    with_p6, sim6 = simulate_one(raw, policy="proposed", seed=2, keep_going=True, keep_history=True, scenarios=0)
    without, _ = simulate_one(raw, policy=f"proposed-{P6}", seed=2, keep_going=True, scenarios=0)
    assert with_p6["history_sha256"] == without["history_sha256"]  # the same transitions
    ticks = sum(1 for _t, tr in sim6.history.records if tr.name == store.FIND_STALE_RUNNING and tr.fault is None)
    assert ticks > 10
    a, b = with_p6["metrics"]["statements"], without["metrics"]["statements"]
    assert a[STORE]["total"] - b[STORE]["total"] == ticks  # T14 beside each tick's T10
    assert a[STORE]["of_runs"] == b[STORE]["of_runs"]
    assert (a[AUDIT], a[DISPATCH]) == (b[AUDIT], b[DISPATCH])
    assert with_p6["metrics"]["redispatches"]["count"] == 0
    assert a[STORE]["total"] - a[STORE]["of_runs"] == 2 * ticks  # the reaper's SELECTs: T10 and T14


def test_every_statement_a_run_issues_is_counted_on_it():
    """Each run's store statements are the store transitions naming it in the history: its
    claims, renewals, stamps, settles, and the reaper's moves of its row."""
    raw = _default(**{"runs.count": 30})
    res, sim = simulate_one(raw, policy="current", seed=3, keep_going=True, keep_history=True, scenarios=0)
    by_id = {r.id: r for r in sim.all_records()}
    named = {rid: 0 for rid in by_id}
    for _t, tr in sim.history.records:
        if tr.name in sim.window.costs and sim.window.costs[tr.name] == STORE and tr.arg("run") in named:
            named[tr.arg("run")] += 1
    assert named == {rid: r.statements.get(STORE, 0) for rid, r in by_id.items()}
    assert res["metrics"]["statements"][STORE]["of_runs"] == sum(named.values())


def test_an_orphaned_row_waits_at_most_one_reaper_period_for_the_sweep():
    """Without P2 a recovery whose dispatch fails leaves the row QUEUED with no message; P6's
    sweep re-dispatches it at its first tick after the row's deadline (its T15 waits the tick's
    statements: a second or two; the clock is whole seconds)."""
    period = 30.0
    raw = _default(**{"runs.count": 60, "bus.dispatch_failure_probability": 0.5,
                      "run_store.error_probability": 0.0, "reaper.period_seconds": period})
    waits = []
    for seed in (1, 2, 3):
        res, sim = simulate_one(raw, policy=f"proposed-{P2}", seed=seed, keep_going=True, scenarios=0)
        waits += [w for r in sim.all_records() for w in r.redispatch_waits]
        rd = res["metrics"]["redispatches"]
        assert rd["reaper_period_s"] == period
        assert rd["count"] == sum(len(r.redispatch_waits) for r in sim.all_records())
    assert waits, "no row was orphaned: the workload no longer exercises the sweep"
    assert all(0 < w <= period + 2 for w in waits), waits
    # under current nothing sweeps: the same orphans stay queued, and no wait is recorded
    res, sim = simulate_one(raw, policy="current", seed=3, keep_going=True, scenarios=0)
    assert res["metrics"]["redispatches"]["count"] == 0


def test_cost_policies_are_current_proposed_and_proposed_without_each_switch():
    assert cost_policies(None) == ["current", "proposed"] + [f"proposed-{s}" for s in proposal_switches()]
    assert cost_policies(f"{P6}, {P6}") == ["current", "proposed", f"proposed-{P6}"]


def test_proposals_cost_prints_a_table_per_policy_and_resumes(tmp_path, capsys):
    out = tmp_path / "cost.csv"
    argv = ["proposals", "--cost", "--seeds", "2", "--runs", "15", "--without", P6, "--out", str(out),
            "--jobs", "1", "--quiet"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    rows = [ln for ln in text.splitlines() if ln.startswith("| `")]
    assert [r.split("|")[1].strip() for r in rows] == ["`current`", "`proposed`", f"`proposed-{P6}`"]
    header = next(ln for ln in text.splitlines() if ln.startswith("| policy"))
    assert all(h in header for h, _m, _k in COST_COLUMNS)
    assert all(len(r.split("|")) == len(header.split("|")) for r in rows)
    assert "reaper period 60 s, lease 900 s" in text and "Student t over seeds" in text
    with open(out, newline="") as f:
        got = list(csv.DictReader(f))
    assert len(got) == 6 and {r["param:policy"] for r in got} == {"current", "proposed", f"proposed-{P6}"}
    # current's extra statements are 0 by definition; proposed's sweep adds its T14s
    assert rows[0].split("|")[3].strip() == "0"
    assert main(argv) == 0  # a rerun simulates nothing
    assert "0 run now, 6 already in" in capsys.readouterr().out
    # a sweep CSV where no simulation re-dispatched (no longest wait) summarizes as any other
    assert main(["summarize", str(out), "--metric", "redispatch_wait_max_s"]) == 0


@pytest.mark.parametrize(("argv", "needle"), [
    (["--without", "no_such_switch"], "--without no_such_switch: not a switch proposed turns on"),
    (["--config", "tiny"], "--config applies to the check, not to --cost"),
    (["--param", "runs.count=5"], "--param runs.count: set by --cost itself; give --runs"),
    (["--param", "reaper.period_seconds=30,60"], "--cost takes one value per key"),
    (["--param", "reaper.period_seconds=-1"], "reaper.period_seconds"),
    (["--workload", "no_such_workload"], "no_such_workload"),
    (["--out", "x.txt"], "--out x.txt: unsupported file type"),
])
def test_proposals_cost_bad_input_is_one_line_exit_2(argv, needle, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["proposals", "--cost", "--seeds", "2", "--runs", "5", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # nothing written
