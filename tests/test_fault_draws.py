"""The simulator draws every fault kind the step table declares, wherever a step declares it
(sim/processes.py ``fault_of``: the component the step's cost class names, the kinds its
``faults`` / ``faults_now`` give for the state), and says how often it drew each one:

* every shipped fault kind (``model.steps.fault_kinds()``, read now) is drawn by a shipped
  or test workload that enables it;
* a fault declared on a reaper step (the reaper dies between selecting a stale run and
  requeuing it: the change once listed as enabled and drawn 0 times) is drawn on the
  reaper's decisions with nothing changed in sim/ but its probability in ``[faults]``;
* an enabled kind that is never drawn is reported (``never_drawn``; from
  ``NEVER_DRAWN_RUNS`` runs a warning, in the JSON and the text output).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
from failclosed.model import frames, steps
from failclosed.model.config import ConfigError, read_toml
from failclosed.model.runtime import enabled
from failclosed.model.steps import (
    FAULTS,
    OTHER_TRANSITIONS,
    REAPER,
    REAPER_ACTIONS,
    REAPER_DECISION,
    Fault,
)
from failclosed.sim import config as sconfig
from failclosed.sim import engine
from failclosed.sim.batch import simulate_one
from failclosed.sim.engine import Simulation

DATA = Path(__file__).resolve().parent / "data"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_sim import OUTLIVES  # noqa: E402


def _toml(text: str) -> dict:
    import tomllib

    return tomllib.loads(text)


# -- every shipped kind is drawn ---------------------------------------------------------------
def test_every_shipped_fault_kind_is_drawn_by_a_workload_that_enables_it():
    workloads = {"shipped default (300 runs)": (read_toml(sconfig.default_path()), 300),
                 "tests/data/every_fault.toml": (read_toml(str(DATA / "every_fault.toml")), None)}
    drawn_by: dict[str, list[str]] = {}
    enabled_by: dict[str, list[str]] = {}
    for name, (raw, runs) in workloads.items():
        res, _ = simulate_one(raw, runs=runs, keep_going=True, scenarios=0)
        for kind, n in res["faults"]["drawn"].items():
            enabled_by.setdefault(kind, []).append(name)
            if n > 0:
                drawn_by.setdefault(kind, []).append(name)
    missing = [k for k in steps.fault_kinds() if k not in drawn_by]
    assert not missing, (
        f"fault kinds no workload draws: {missing} (enabled by {[enabled_by.get(k) for k in missing]}); "
        "give the kind a probability in tests/data/every_fault.toml ([faults] or its component's "
        "knob), and make sure a step the simulator takes declares it")


# -- a fault on a reaper step --------------------------------------------------------------------
REAPER_DIES = "reaper_dies"


def declare_reaper_dies(faults_now=None) -> None:
    """The change: a new kind, on the reaper's per-row decision; taking it, the reaper's
    process dies between selecting the stale run and requeuing it, and its restart goes on
    with the next row of the snapshot (the row stays stale for the next tick)."""
    from failclosed.model import vocab

    vocab.extend(vocab.FaultKind, REAPER_DIES)  # a real change adds the member to FaultKind
    FAULTS[REAPER_DIES] = Fault("process", "the reaper dies between selecting a stale run and requeuing it")
    row = REAPER_ACTIONS[REAPER_DECISION]

    def effect(w, r, t):
        if t.fault == REAPER_DIES:
            return frames.reaper_next(w, r)
        return row.effect(w, r, t)

    REAPER_ACTIONS[REAPER_DECISION] = dataclasses.replace(
        row, faults=row.faults + (REAPER_DIES,), effect=effect, faults_now=faults_now)


def _reaper_workload(p: float) -> dict:
    return sconfig.with_overrides(_toml(OUTLIVES), {"runs.count": 8, "runs.slots": 8,
                                                    "arrivals.size": 8, f"faults.{REAPER_DIES}": p})


def _decisions(sim: Simulation) -> list:
    fires = REAPER_ACTIONS[REAPER_DECISION].fires
    return [t for _, t in sim.history.records if t.actor == REAPER and t.name in fires]


def test_a_fault_declared_on_a_reaper_step_is_drawn_on_its_decisions(restore_tables):
    declare_reaper_dies()
    sim = Simulation(sconfig.load(_reaper_workload(0.5)), seed=1, keep_going=True, keep_history=True).run()
    decisions = _decisions(sim)
    died = [t for t in decisions if t.fault == REAPER_DIES]
    assert 0 < len(died) < len(decisions), (len(died), len(decisions))
    assert sim.drawn[REAPER_DIES] == len(died)
    report = sim.fault_report()
    assert report["drawn"][REAPER_DIES] == len(died) and REAPER_DIES not in report["never_drawn"]


def test_a_reaper_step_honours_faults_now_in_the_model_and_the_simulator(restore_tables, monkeypatch):
    declare_reaper_dies(faults_now=lambda w, r: steps.STORE_FAULTS)  # never the new kind
    monkeypatch.setattr(engine, "NEVER_DRAWN_RUNS", 1)
    sim = Simulation(sconfig.load(_reaper_workload(0.5)), seed=1, keep_going=True, keep_history=True)
    offered = []
    step = sim.step

    def watch(actor, fault=None, pred=None, run=None):  # what the model offers the reaper
        if actor == REAPER and sim.world.reaper(REAPER) is not None:
            offered.extend(t.fault for t in enabled(sim.world, REAPER, one_order=True))
        return step(actor, fault, pred, run)

    sim.step = watch
    sim.run()
    assert _decisions(sim) and offered and REAPER_DIES not in offered
    report = sim.fault_report()
    assert report["drawn"][REAPER_DIES] == 0 and REAPER_DIES in report["never_drawn"]
    assert REAPER_DIES in report["warning"]


def test_a_fault_declared_on_a_callers_decision_is_offered_and_drawn(restore_tables):
    """The same for an actor that is no process: a kind on the approver's ``approve`` (its
    declaration in OTHER_TRANSITIONS) is a branch of the model's move and drawn by the
    simulator from ``[faults]`` alone."""
    from failclosed.model import vocab

    vocab.extend(vocab.FaultKind, "decision_lost")  # a real change adds the member to FaultKind
    FAULTS["decision_lost"] = Fault(steps.AUDIT, "the approval is taken but its record is lost")
    OTHER_TRANSITIONS["approve"] = dataclasses.replace(OTHER_TRANSITIONS["approve"],
                                                      faults=("decision_lost",))
    raw = sconfig.with_overrides(read_toml(str(DATA / "every_fault.toml")),
                                 {"runs.count": 40, "faults.decision_lost": 0.5})
    sim = Simulation(sconfig.load(raw), seed=1, keep_going=True, keep_history=True).run()
    approvals = [t for _, t in sim.history.records if t.name == "approve"]
    lost = [t for t in approvals if t.fault == "decision_lost"]
    assert 0 < len(lost) < len(approvals) and sim.drawn["decision_lost"] == len(lost)


def test_a_fault_that_ends_the_reapers_tick_is_drawn_and_its_replay_limit_named(restore_tables):
    """A kind whose effect ends the tick (the reaper dies and restarts at its next period)
    couples the runs of one tick: the rows after it are not decided. The simulator draws it;
    a violation's runs replayed alone cannot reproduce that, and it says so."""
    declare_reaper_dies()
    row = REAPER_ACTIONS[REAPER_DECISION]
    REAPER_ACTIONS[REAPER_DECISION] = dataclasses.replace(
        row, effect=lambda w, r, t: w.set_reaper(r.name, None) if t.fault else row.effect(w, r, t))
    from failclosed.sim.records import SimulationError

    sim = Simulation(sconfig.load(_reaper_workload(0.5)), seed=1, keep_going=True)
    with pytest.raises(SimulationError, match="a fault ended that tick"):
        sim.run()
    assert sim.drawn[REAPER_DIES] > 0


# -- the report -----------------------------------------------------------------------------------
def test_an_enabled_kind_never_drawn_is_reported_from_the_threshold_on(monkeypatch):
    """observer_error is enabled ([faults]) but no step of this workload may take it: no run
    has a step observer (``workload.observer_fraction`` is 0, and every run is queued: a
    worker's segment has none), so no segment reaches the observer hook."""
    raw = sconfig.with_overrides(_toml(OUTLIVES), {"faults.observer_error": 1.0})
    res, _ = simulate_one(raw, keep_going=True, scenarios=0)
    assert res["faults"]["drawn"]["observer_error"] == 0
    assert "observer_error" in res["faults"]["never_drawn"]
    assert res["faults"]["warning"] is None  # fewer runs than NEVER_DRAWN_RUNS: no warning
    monkeypatch.setattr(engine, "NEVER_DRAWN_RUNS", res["runs_simulated"])
    res, _ = simulate_one(raw, keep_going=True, scenarios=0)
    assert "observer_error" in res["faults"]["warning"]
    # with observers (which a caller's segment runs, not a worker's), the same kind is drawn:
    # the zero was the workload's, not chance
    raw = sconfig.with_overrides(raw, {"workload.observer_fraction": 1.0, "workload.queued_fraction": 0.0})
    res, _ = simulate_one(raw, keep_going=True, scenarios=0)
    assert res["faults"]["drawn"]["observer_error"] > 0


def test_simulate_json_and_text_report_the_draws(tmp_path, capsys, monkeypatch):
    from failclosed.cli import main

    monkeypatch.setenv("FAILCLOSED_PROGRESS_INTERVAL", "3600")
    monkeypatch.setattr(engine, "NEVER_DRAWN_RUNS", 1)
    cfg = tmp_path / "w.toml"
    cfg.write_text(OUTLIVES + "\n[faults]\ndecode_error = 1.0\n[run_store]\nerror_probability = 0.2\n")
    out_json = tmp_path / "r.json"
    code = main(["simulate", str(cfg), "--json", str(out_json)])
    out = capsys.readouterr().out
    res = json.loads(out_json.read_text())
    drawn = res["faults"]["drawn"]
    assert set(drawn) == {"store_error", "decode_error", "slow_operation", "pause"}
    assert drawn["store_error"] > 0
    assert code == (1 if res["violations"] else 0)  # a warning, not an error: no code of its own
    flat = " ".join(out.split())
    assert f"faults drawn ({res['policy']}): " in flat and f"store_error {drawn['store_error']}" in flat
    for kind in res["faults"]["never_drawn"]:
        assert kind in res["faults"]["warning"]
    assert "warning:" in flat and "never drawn" in flat


# -- the configuration ----------------------------------------------------------------------------
@pytest.mark.parametrize("faults, needle", [
    ({"store_error": 0.1}, "faults.store_error: run_store.error_probability sets it"),
    ({"decod_error": 0.1}, "faults.decod_error: unknown fault kind; did you mean 'decode_error'"),
    ({"decode_error": 1.5}, "faults.decode_error: probability 1.5 outside [0, 1]"),
])
def test_faults_table_refuses_what_it_cannot_set(faults, needle):
    raw = dict(_toml(OUTLIVES), faults=faults)
    with pytest.raises(ConfigError) as e:
        sconfig.load(raw)
    assert str(e.value).startswith(needle) and "\n" not in str(e.value)


def test_simulate_refuses_a_bad_faults_table_in_one_line_before_any_work(tmp_path, capsys):
    from failclosed.cli import main

    cfg = tmp_path / "w.toml"
    cfg.write_text(OUTLIVES + "\n[faults]\ndispatch_fails = 0.1\n")
    out_json = tmp_path / "r.json"
    code = main(["simulate", str(cfg), "--json", str(out_json)])
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err
    assert "faults.dispatch_fails: bus.dispatch_failure_probability sets it" in lines[0]
    assert not out_json.exists()


def test_a_kind_declared_at_run_time_is_accepted_and_no_configuration_moves_no_history(restore_tables):
    before = simulate_one(_toml(OUTLIVES), keep_going=True, scenarios=0)[0]["history_sha256"]
    declare_reaper_dies()
    cfg = sconfig.load(_reaper_workload(0.0))
    assert cfg.fault_probabilities == ((REAPER_DIES, 0.0),)
    after = simulate_one(_toml(OUTLIVES), keep_going=True, scenarios=0)[0]["history_sha256"]
    assert after == before
