"""The simulator's checks by kind (issue 12): a *stable* safety property (once violated on a
run, violated until the run is archived) is checked when the run is archived, a transient
one after every step; the violation records are the same as with every property checked
after every step."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from failclosed.model.config import initial_world, parse_config, read_toml  # noqa: E402
from failclosed.model.runtime import successors  # noqa: E402
from failclosed.sim import config as sconfig  # noqa: E402
from failclosed.sim.engine import Simulation  # noqa: E402
from failclosed.spec import engine  # noqa: E402
from failclosed.spec.checker import CONFIG_DIR  # noqa: E402
from failclosed.spec.properties import SAFETY  # noqa: E402

STABLE = [n for n, p in SAFETY.items() if p.stable]


@pytest.mark.parametrize("config", [
    "tiny", "small-zombie", "small-history-zombie", "small-history-suspend",
    pytest.param("small-interactive", marks=pytest.mark.slow),
    pytest.param("small-sync", marks=pytest.mark.slow),
])
@pytest.mark.parametrize("policy", ["adr-092", "adr-102", "adr-104", "current"])
def test_stable_properties_stay_violated_along_every_edge(config, policy):
    """On every edge of the explored state graph, a stable property violated at the source
    is violated at the target: the model never undoes what they read."""
    spec, budget = parse_config(read_toml(str(CONFIG_DIR / f"{config}.toml")), policy)
    ex = engine.explore([initial_world(spec, budget)], successors, invariants={},
                        keep_graph=True, max_states=20_000, keep_worlds=True)
    bad = {n: [not SAFETY[n].check(w) for w in ex.worlds] for n in STABLE}
    violated = 0
    for n, v in bad.items():
        for s, d in zip(ex.edges_src, ex.edges_dst, strict=True):
            assert not v[s] or v[d], (n, ex.worlds[s], ex.worlds[d])
        violated += any(v)
    if (config, policy) in {("small-history-zombie", "adr-104"), ("small-history-suspend", "adr-092")}:
        assert violated >= 3  # the check has something to check


def _records(sim: Simulation) -> tuple:
    return (
        sim.history.hexdigest(),
        [(v.property, v.runs, v.time, v.scenario) for v in sim.violations],
        {r.id: r.violations for r in sim.all_records()},
    )


def _compare(raw: dict, policy: str, seeds, runs: int | None) -> int:
    cfg = sconfig.load(raw)
    found = 0
    for seed in seeds:
        late = Simulation(cfg, policy=policy, seed=seed, runs=runs, keep_going=True).run()
        every = Simulation(cfg, policy=policy, seed=seed, runs=runs, keep_going=True,
                           defer_stable=False).run()
        assert late.checks.deferred and not every.checks.deferred
        assert _records(late) == _records(every), (policy, seed)
        found += sum(v.property in late.checks.deferred for v in late.violations)
    return found


@pytest.mark.parametrize("policy", ["current", "adr-104", "adr-102"])
def test_stable_properties_checked_at_archive_give_the_same_violation_records(policy):
    """Over many seeds: the same violations (property, runs, time, scenario), in the same
    order, the same per-run lists and the same history, whether the stable properties are
    checked after every step or at the run's archive and dated back."""
    raw = read_toml(sconfig.default_path())
    found = _compare(raw, policy, range(1, 9), runs=100)
    assert found >= 3  # stable violations were found late and dated back


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["current", "proposed", "adr-104", "adr-102", "owner-guard"])
def test_stable_properties_checked_at_archive_many_seeds_full_workload(policy):
    raw = read_toml(sconfig.default_path())
    _compare(raw, policy, range(1, 9), runs=None)


def test_a_stopping_simulation_checks_every_property_after_every_step():
    """Without keep-going the run stops at its first violation, at the step that made it:
    nothing is deferred, and the history is the keep-going one's prefix."""
    cfg = sconfig.load(read_toml(sconfig.default_path()))
    stop = Simulation(cfg, policy="current", seed=1, runs=200, keep_history=True).run()
    assert not stop.checks.deferred and len(stop.violations) >= 1
    go = Simulation(cfg, policy="current", seed=1, runs=200, keep_going=True,
                    keep_history=True).run()
    assert go.checks.deferred
    assert stop.history.records == go.history.records[: len(stop.history.records)]
    first = go.violations[0]
    assert (stop.violations[0].property, stop.violations[0].runs, stop.violations[0].time) == (
        first.property, first.runs, first.time)
    assert stop.violations[0].scenario == first.scenario


def test_a_reaper_step_is_checked_on_the_run_at_the_reapers_row():
    """A tick names no run, and the reaper's next row may be another run's: the property is
    checked after the step on the run whose projection now holds the reaper. A property that
    reads only the reaper (violated while the reaper is on a run's row) is found at the same
    steps, on the same runs, as by a whole-world check after every step."""
    import types

    cfg = sconfig.load(read_toml(sconfig.default_path()))
    idle = types.SimpleNamespace(check=lambda w: w.reaper("reaper") is None, reads=("reapers",), stable=False)
    found = 0
    for seed in (1, 2, 3):
        steps = Simulation(cfg, policy="current", seed=seed, runs=60, keep_going=True,
                           properties={"reaper_idle": idle}).run()
        every = Simulation(cfg, policy="current", seed=seed, runs=60, keep_going=True, check_every=1,
                           properties={"reaper_idle": idle}).run()
        got = [(v.property, v.runs, v.time) for v in steps.violations]
        assert got == [(v.property, v.runs, v.time) for v in every.violations], seed
        found += len(got)
    assert found >= 3  # the reaper did reach rows


def test_without_step_checks_the_archive_finds_the_same_violations_later():
    """``check_steps=False`` leaves the archive (and the periodic whole-world) checks: the same
    (property, runs) as with the checks after every step, none found earlier, listed in the
    order of the steps that found them."""
    cfg = sconfig.load(read_toml(sconfig.default_path()))
    steps = Simulation(cfg, policy="current", seed=1, runs=100, keep_going=True).run()
    late = Simulation(cfg, policy="current", seed=1, runs=100, keep_going=True, check_steps=False).run()
    first = {(v.property, tuple(v.runs)): v.time for v in steps.violations}
    assert len(first) >= 2
    assert [(v.property, tuple(v.runs)) for v in late.violations] == list(first)
    times = [v.time for v in late.violations]
    assert all(isinstance(t, float) for t in times) and times == sorted(times)
    assert all(v.time >= first[(v.property, tuple(v.runs))] for v in late.violations)


def test_a_whole_world_check_after_every_step_finds_what_the_step_checks_find():
    """The periodic whole-world check attributes a failure to the live runs whose projections
    fail: run after every step alone (no step checks), it finds the same violations, on the
    same runs, at the same times, in the same order."""
    cfg = sconfig.load(read_toml(sconfig.default_path()))
    steps = Simulation(cfg, policy="current", seed=1, runs=100, keep_going=True).run()
    world = Simulation(cfg, policy="current", seed=1, runs=100, keep_going=True, check_steps=False,
                       check_every=1).run()
    got = [(v.property, v.runs, v.time) for v in steps.violations]
    assert len(got) >= 2
    assert [(v.property, v.runs, v.time) for v in world.violations] == got


def test_the_first_three_violations_of_a_property_carry_scenarios_and_each_run_lists_its_own():
    """``settle``: in step order, the first three violations of each property get their
    scenarios (the others none); each run's record names every property it violated, once."""
    cfg = sconfig.load(read_toml(sconfig.default_path()))
    sim = Simulation(cfg, policy="current", seed=1, runs=300, keep_going=True).run()
    seen: dict[str, int] = {}
    for v in sim.violations:
        seen[v.property] = seen.get(v.property, 0) + 1
        assert (v.scenario is not None) == (seen[v.property] <= 3), (v.property, seen[v.property])
    assert max(seen.values()) > 3
    per_run: dict[str, list[str]] = {}
    for v in sim.violations:
        for rid in v.runs:
            per_run.setdefault(rid, []).append(v.property)
    got = {r.id: r.violations for r in sim.all_records() if r.violations}
    assert got == {rid: list(dict.fromkeys(ps)) for rid, ps in per_run.items()}


@pytest.mark.parametrize("keep_going", [False, True])
def test_a_property_that_declares_no_reads_is_checked_after_every_step(keep_going):
    # a property without ``reads`` reads everything: the steps that change only fields no
    # other property declares must still check it, so it is found at the step that made it
    from types import SimpleNamespace

    def no_event(w):
        return not w.events

    cfg = sconfig.load(read_toml(sconfig.default_path()))
    undeclared = {"no_event_stored": SimpleNamespace(check=no_event, reads=None, stable=False)}
    declared = {"no_event_stored": SimpleNamespace(check=no_event, reads=("events",), stable=False)}
    runs = [Simulation(cfg, seed=1, runs=20, keep_going=keep_going, properties=props).run()
            for props in (undeclared, declared)]
    assert runs[0].violations, "an event is stored: the property is violated"
    assert _records(runs[0]) == _records(runs[1])
    assert runs[0].fired == runs[1].fired
