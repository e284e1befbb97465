"""Every actor a declared instance: ``[model] reapers = N`` (RUNTIME 10: a deployment that runs
the scheduler on several hosts runs a reaper on each) is read by every layer: the model's
``enabled`` and ``fire``, the properties, symmetry, fairness, the checker and its trace diffs,
the scenario format, the simulator and the swimlanes. The reapers are named by
``model.names.reaper_name``; nothing here spells the second one's name."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from failclosed.model import apply, enabled, load_world, names
from failclosed.model.config import ConfigError
from failclosed.model.runtime import clock_move
from failclosed.model.scenario import replay, scenario_from_dict
from failclosed.model.state import World
from failclosed.model.store import FIND_STALE_RUNNING, REQUEUE_STALE
from failclosed.model.transition import Transition
from failclosed.spec.checker import CONFIG_DIR, ConfigPart, check, diff_worlds
from failclosed.spec.properties import SAFETY, explain, fairness
from failclosed.spec.symmetry import shift_time

FIRST, SECOND = names.reaper_name(1), names.reaper_name(2)
ROOT = Path(__file__).resolve().parents[1]


def data(reapers: int = 2, **switches: bool) -> dict[str, Any]:
    d: dict[str, Any] = {
        "policy": "current",
        "model": {"workers": 1, "faults": ["slow_operation", "pause"], "fault_budget": 4,
                  "reapers": reapers},
        "runs": [{"id": "r1", "plan": [{"final": "completed"}]}],
    }
    if switches:
        d["switches"] = switches
    return d


def do(w: World, name: str, actor: str, **args: Any) -> World:
    cands = [t for t in enabled(w) if t.name == name and t.actor == actor and t.fault is None
             and all(t.arg(k) == v for k, v in args.items())]
    assert len(cands) == 1, (name, actor, [str(t) for t in enabled(w)])
    return apply(w, cands[0])


def until(w: World, actor: str, name: str) -> World:
    for _ in range(100):
        moves = [t for t in enabled(w) if t.actor == actor and t.fault is None and t.name != "crash"]
        if any(t.name == name for t in moves):
            return w
        assert len(moves) == 1, (actor, name, [str(t) for t in moves])
        w = apply(w, moves[0])
    raise AssertionError(f"{actor} never reached {name}")


def stale(reapers: int = 2, **switches: bool) -> World:
    """r1 claimed by w1, which is inside its provider call when its lease lapses."""
    w = load_world(data(reapers, **switches))
    w = do(w, "enqueue_run", "caller", run="r1")
    w = do(w, "dispatch", "enqueue:r1")
    w = do(w, "run_queued", "w1", run="r1")
    w = do(w, "claim_queued", "w1")
    w = until(w, "w1", "provider_call")
    return apply(w, clock_move(w, w.rows[0].lease_expires + 1))


def test_the_configuration_gives_the_count_and_each_reaper_is_an_actor():
    for n in (1, 2, 3):
        w = stale(n)
        ticks = [t.actor for t in enabled(w) if t.name == FIND_STALE_RUNNING and t.fault is None]
        assert ticks == list(names.reaper_names(w.config)) == [names.reaper_name(k + 1) for k in range(n)]


@pytest.mark.parametrize("config", ["small-sync", "small-approval", "cancel-probe"])
def test_every_actor_that_moves_is_a_declared_instance(config: str):
    """Walks: the actor of every enabled transition is one of ``steps.actor_instances``
    (an actor kind declared without its instances, or a process its kind does not list,
    fails here naming it)."""
    import random

    from failclosed.model.config import initial_world, parse_config
    from failclosed.model.steps import actor_instances
    from failclosed.spec.checker import load_config

    _, parts = load_config(CONFIG_DIR / f"{config}.toml")
    rng = random.Random(3)
    for part in parts:
        for reapers in (1, 2):
            d = {**part.data, "model": {**part.data.get("model", {}), "reapers": reapers}}
            cfg, budget = parse_config(d)
            known = {n for ns in actor_instances(cfg).values() for n in ns}
            for _ in range(20):
                w = initial_world(cfg, budget)
                for _ in range(60):
                    en = enabled(w)
                    if not en:
                        break
                    stray = sorted({t.actor for t in en} - known)
                    assert not stray, (f"{part.name}: actors {stray} move but no declared actor "
                                       "kind lists them: give declare_actor(..., instances=...)")
                    w = apply(w, rng.choice(en))


def test_a_bad_count_or_a_worker_named_as_a_reaper_is_one_error_line():
    with pytest.raises(ConfigError, match=r"^model\.reapers: must be 1 to \d+, got 0$"):
        load_world(data(0))
    bad = data(2)
    bad["model"]["workers"] = [SECOND]
    with pytest.raises(ConfigError, match=r"^model\.workers: .* names a reaper's process"):
        load_world(bad)


def test_two_reapers_race_on_one_row_and_the_guarded_requeue_counts_it_once():
    w = stale()
    w = do(w, FIND_STALE_RUNNING, FIRST)
    w = do(w, FIND_STALE_RUNNING, SECOND)  # both SELECTs saw the row stale
    assert {r.name for r in w.reapers} == {FIRST, SECOND}
    w = do(w, REQUEUE_STALE, FIRST, run="r1")
    assert w.rows[0].status == "queued" and w.rows[0].requeue_count == 1
    w = do(w, REQUEUE_STALE, SECOND, run="r1")  # T11's stale guard: it matches nothing now
    assert w.rows[0].requeue_count == 1 and w.reaper(SECOND) is None
    assert all(SAFETY[n].check(w) for n in SAFETY)


def test_the_second_reapers_decision_is_judged_by_race_safe_staleness():
    for switches, safe in (({}, True), ({"mutant_reaper_trusts_snapshot": True}, False)):
        w = stale(**switches)
        w = do(w, FIND_STALE_RUNNING, SECOND)
        w = do(w, "provider_call", "w1")
        w = until(w, "w1", "record_step")  # w1's llm boundary renewed: the row is not stale
        assert w.reaper(FIRST) is None and w.reaper(SECOND).pc == "row"
        assert SAFETY["race_safe_staleness"].check(w) is safe
        if not safe:
            assert f"{SECOND}'s requeue_stale" in explain("race_safe_staleness", w)


def test_symmetry_shifts_every_reapers_tick_with_the_clock():
    w = do(stale(), FIND_STALE_RUNNING, SECOND)
    w = apply(w, clock_move(w, w.clock + 3))
    s = shift_time(w)
    assert s.clock < w.clock
    assert w.reaper(SECOND).now - w.clock == s.reaper(SECOND).now - s.clock


def test_fairness_has_a_weak_class_per_reaper():
    cfg = stale(2).config
    fair = fairness(cfg)
    for r in names.reaper_names(cfg):
        tick = Transition.make(FIND_STALE_RUNNING, r)
        assert [f.name for f in fair if f.applies(tick)] == [r]


def test_the_checker_explores_the_second_reaper_and_its_diffs_name_it():
    tiny = tomllib.loads((CONFIG_DIR / "tiny.toml").read_text())
    results = {}
    for n in (1, 2):
        d = {**tiny, "model": {**tiny["model"], "reapers": n}}
        results[n] = check(None, ConfigPart(f"tiny-{n}", "", d), coverage=False, witnesses=False)
    assert results[2].states > results[1].states
    # a second reaper is one more interleaving of the same T10-T12: no guarantee moves
    assert ({k for k, v in results[1].properties.items() if v.holds}
            == {k for k, v in results[2].properties.items() if v.holds})
    w = stale()
    w2 = do(w, FIND_STALE_RUNNING, SECOND)
    assert f"{SECOND}: idle -> row" in diff_worlds(w, w2)


def test_a_scope_product_gives_the_reaper_count_as_an_axis(tmp_path):
    from failclosed.model.config import parse_config
    from failclosed.spec.scope import load_scope

    quick = (ROOT / "spec" / "scopes" / "quick.toml").read_text()
    one = load_scope(ROOT / "spec" / "scopes" / "quick.toml")
    p = tmp_path / "two.toml"
    p.write_text(quick.replace('name = "queued"\nworkers = [1, 2]',
                               'name = "queued"\nworkers = [1, 2]\nreapers = [1, 2]', 1))
    two = load_scope(p)
    before = {m.name for m in one.members}
    after = {m.name for m in two.members}
    assert before < after  # every member of before is still there, under its own name
    added = sorted(after - before)
    assert added and all(n.endswith("-r2") for n in added)
    for m in two.members:
        if m.name in added:
            assert parse_config(m.data)[0].reapers == 2


def test_a_scenario_drives_and_expects_the_second_reaper():
    sc = scenario_from_dict({
        **data(2),
        "runs": [{"id": "r1", "row": {"status": "running", "claimed_by": "worker:gone",
                                      "lease_expires": 100, "queued_request": True}}],
        "steps": [
            {"do": "advance_time", "actor": "clock", "to": 101},
            {"do": FIND_STALE_RUNNING, "actor": SECOND},
            {"do": FIND_STALE_RUNNING, "actor": FIRST},
            {"actor": FIRST, "until": "end"},
            {"actor": SECOND, "until": "end"},
        ],
        "expect": [{"rows": {"r1": {"status": "queued", "requeue_count": 1}},
                    "reaper": {"name": SECOND, "ticks": 1, "finished": True, "skipped": 1}}],
    }, "two-reapers")
    res = replay(sc)
    assert res.ok, res.failures


def test_the_simulator_runs_one_reaper_per_count_and_draws_a_lane_for_each():
    from failclosed.sim import config as sconfig
    from failclosed.sim.engine import Simulation
    from failclosed.sim.plots import _lanes

    raw = tomllib.loads(_SIM)
    actors = {}
    for n in (1, 2):
        raw["reaper"]["count"] = n
        sim = Simulation(sconfig.load(raw), policy="current", seed=1, keep_history=True,
                         keep_going=True).run()
        ticks = [(time, t.actor) for time, t in sim.history.records if t.name == FIND_STALE_RUNNING]
        actors[n] = {a for _, a in ticks}
    assert actors[1] == {FIRST} and actors[2] == {FIRST, SECOND}
    # two hosts out of phase: the second reaper's first tick falls between the first's two
    first = [time for time, a in ticks if a == FIRST]
    second = [time for time, a in ticks if a == SECOND]
    assert first[0] < second[0] < first[1]
    lanes = _lanes([{"actor": a} for a in (FIRST, SECOND, "w1")])
    assert lanes.index(FIRST) < lanes.index(SECOND) < lanes.index("w1")


_SIM = """
policy = "current"
[runs]
count = 6
slots = 4
drain_seconds = 3600
[arrivals]
kind = "poisson"
rate_per_hour = 600
[workers]
count = 2
[reaper]
period_seconds = 30
[crashes]
worker_rate_per_hour = 30.0
restart_delay = 10
[provider]
latency = {dist = "lognormal", median = 2, p99 = 30}
[[tools]]
name = "ticket"
effect = "non_idempotent_write"
latency = {dist = "lognormal", median = 20, p99 = 1500}
[workload]
queued_fraction = 1.0
rounds = 2
tool_mix = {ticket = 1}
"""


def test_the_clock_stops_at_the_instants_an_actor_declares():
    """The clock moves only to the instants the actor kinds declare (model/next.py
    ``waiting_instants``): a segment inside its provider call waits on its lease's lapse
    alone, so time jumps past the lease in one step; an actor kind that acts in time (a
    heartbeat that would renew while the call is in flight) declares an instant before the
    lapse and the clock stops there first, unfaulted. Declared in a fixture, it is gone after."""
    from failclosed.model import runtime, steps, vocab

    w = load_world(data(1))
    w = do(w, "enqueue_run", "caller", run="r1")
    w = do(w, "dispatch", "enqueue:r1")
    w = do(w, "run_queued", "w1", run="r1")
    w = do(w, "claim_queued", "w1")
    w = until(w, "w1", "provider_call")
    lapse = w.rows[0].lease_expires + 1

    def clock_targets(w: World) -> list[tuple[int, str | None]]:
        return [(t.arg("to"), t.fault) for t in enabled(w, "clock")]

    assert runtime.waiting_instants(w) == [lapse]
    assert clock_targets(w) == [(lapse, "slow_operation")]
    beat = lapse - 2
    with vocab.extended([(vocab.ActorKind, "heartbeat")]), steps.extended():
        steps.declare_actor("heartbeat", place="(a fixture)", answers=lambda w, n: False,
                            moves=lambda w, n, o, s: [], fire=lambda w, t: w,
                            instants=lambda w: [beat] if w.clock < beat else [])
        assert runtime.waiting_instants(w) == [beat, lapse]
        assert clock_targets(w) == [(beat, None), (lapse, "slow_operation")]
        w2 = apply(w, clock_move(w, beat))
        assert w2.clock == beat and w2.faults == w.faults
    assert "heartbeat" not in steps.ACTORS
    assert runtime.waiting_instants(w) == [lapse]
