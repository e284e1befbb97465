"""The simulator's fast paths agree with the definitions they shortcut.

* ``enabled(world, actor)`` computes only that actor's part of the world's list: it must be
  the world's list filtered to the actor, in the same order; with ``run``, that list
  filtered to the run;
* ``one_order`` lists one order of a reaper tick over tied stale rows: the full list with the
  other orders left out (the first listed, which is the one the simulator takes);
* the tie orders (r-permutations of the groups the reaper's limit reaches) are exactly the
  distinct cut orders of all permutations, in the same sequence;
* the simulator's steps replay through the validating ``model.apply`` (cross-checked on every
  step of test runs), and a step the simulator insists on but the model does not enable
  raises ``SimulationError``;
* the history's hand-written canonical lines are byte for byte the JSON definition's.
"""

from __future__ import annotations

import itertools
import random
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.model import enabled, fire, load_world, read_toml, reaper, runtime  # noqa: E402
from failclosed.model.state import RUNNING, Row  # noqa: E402
from failclosed.model.transition import Transition  # noqa: E402
from failclosed.sim import config as sconfig  # noqa: E402
from failclosed.sim.engine import Simulation, SimulationError  # noqa: E402
from failclosed.sim.history import History, _canonical_json, canonical  # noqa: E402

STANDARD = read_toml(str(Path(__file__).parent / "data" / "standard.toml"))
FAULTY = {**STANDARD, "model": {**STANDARD["model"], "fault_budget": 6}}


def _actors(w) -> set[str]:
    return ({"caller", "bus", "operator", "reaper", "clock", "nobody"} | set(w.config.workers)
            | {p.name for p in w.procs} | {t.actor for t in enabled(w)})


SYNC = {**FAULTY, "model": {**FAULTY["model"], "transport": "sync"}}


def _walk_worlds(policy: str, seed: int, steps: int, data: dict = FAULTY):
    rng = random.Random(seed)
    w0 = load_world(data, policy)
    w = w0
    for k in range(steps):
        yield w
        en = enabled(w)
        if not en or k % 150 == 149:
            w = w0
            continue
        w = fire(w, rng.choice(en))


@pytest.mark.parametrize("policy", ["current", "adr-104", "adr-111", "proposed", "sync"])
def test_enabled_for_an_actor_is_the_worlds_list_filtered(policy):
    # "sync": current on the sync transport, where the reaper and the enqueue callers run
    # nested pick-ups under their own names
    data = SYNC if policy == "sync" else FAULTY
    pol = "current" if policy == "sync" else policy
    seen: set[str] = set()
    nested = False
    worlds = itertools.chain.from_iterable(
        _walk_worlds(pol, seed=k, steps=1500, data=data) for k in range(4)
    )
    for w in worlds:
        nested = nested or any(p.name == "reaper" for p in w.procs)
        full = enabled(w)
        runs = [r.id for r in w.config.runs] + ["no-such-run"]
        for a in _actors(w):
            mine = enabled(w, a)
            assert mine == [t for t in full if t.actor == a], (a, w)
            seen.update(t.name for t in mine)
            for r in runs:
                assert enabled(w, a, run=r) == [t for t in mine if t.arg("run") == r], (a, r, w)
        for r in runs:
            assert enabled(w, run=r) == [t for t in full if t.arg("run") == r], (r, w)
    want = {"run_queued", "enqueue_run", "start_run", "cancel", "remove_tool",
            "find_stale_running"}
    if policy == "sync":
        assert nested, "no run nested in the reaper reached"
    else:
        want.add("duplicate_message")
    assert want <= seen, want - seen


def _first_orders_only(full: list[Transition]) -> list[Transition]:
    out, first = [], True
    for t in full:
        if t.name == "find_stale_running" and t.arg("order") is not None:
            if not first:
                continue
            first = False
        out.append(t)
    return out


def _tied_world(rng: random.Random, n: int, limit: int):
    w = load_world(STANDARD, "current")
    runs = tuple(replace(w.config.runs[0], id=f"r{i}") for i in range(n))
    spec = replace(w.config, runs=runs, reaper_limit=limit)
    rows = tuple(
        Row(status=RUNNING, claimed_by="x", lease_expires=rng.choice([5, 5, 7, 9, 9, 9, 30]))
        if rng.random() < 0.8 else None
        for _ in range(n)
    )
    z = (0,) * n
    return replace(w, config=spec, rows=rows, clock=20, procs=(), messages=(), started=(True,) * n,
                   cancels=z, decisions=z, resumes=z)


def _orders_by_all_permutations(w) -> list[tuple[str, ...]]:
    """The definition: every permutation within each tie group, cut at the limit, distinct."""
    stale = sorted((r.lease_expires, i) for i, r in enumerate(w.rows)
                   if r is not None and r.status == RUNNING and 0 < r.lease_expires < w.clock)
    groups = [list(g) for _, g in itertools.groupby(stale, key=lambda t: t[0])]
    orders: list[tuple[str, ...]] = []
    for combo in itertools.product(*(itertools.permutations(g) for g in groups)):
        o = tuple(w.run_id(i) for g in combo for _, i in g)[: w.config.reaper_limit]
        if o not in orders:
            orders.append(o)
    return orders


def test_tie_orders_are_all_permutations_cut_at_the_limit_in_the_same_sequence():
    rng = random.Random(5)
    tied_seen = 0
    for _ in range(300):
        w = _tied_world(rng, rng.randint(1, 7), rng.choice([0, 1, 2, 3, 4, 50]))
        want = _orders_by_all_permutations(w)
        orders, tied = reaper.stale_orders(w)
        assert orders == want and tied == (len(want) > 1)
        first, tied1 = reaper.stale_orders(w, first_only=True)
        assert first == want[:1] and tied1 == tied
        full = enabled(w, "reaper")
        one = enabled(w, "reaper", one_order=True)
        assert one == _first_orders_only(full)
        assert enabled(w, one_order=True) == _first_orders_only(enabled(w))
        tied_seen += tied
    assert tied_seen > 50


def test_one_order_keeps_a_dozen_tied_rows_cheap():
    """13 rows stale at the same second (seen under adr-104 in the default workload) have
    13! orders; the simulator asks for one."""
    w = _tied_world(random.Random(0), 13, 50)
    w = replace(w, rows=tuple(Row(status=RUNNING, claimed_by="x", lease_expires=5) for _ in range(13)))
    one = enabled(w, "reaper", one_order=True)
    ticks = [t for t in one if t.name == "find_stale_running" and t.fault is None]
    assert [t.arg("order") for t in ticks] == [",".join(f"r{i}" for i in range(13))]


# -- the simulator against the validating apply ----------------------------------------------
def _small():
    from tests.test_sim import SMALL, _raw

    return _raw(SMALL)


@pytest.mark.parametrize("policy,seed", [("current", 1), ("adr-111", 2), ("adr-104", 3), ("proposed", 4)])
def test_every_simulated_step_replays_through_apply(policy, seed):
    cfg = sconfig.load(_small())
    sim = Simulation(cfg, policy=policy, seed=seed, keep_going=True, crosscheck_every=1).run()
    assert sim.checked > 300 and len(sim.records) == cfg.runs


def test_default_workload_steps_replay_through_apply_every_seventh():
    cfg = sconfig.load(read_toml(sconfig.default_path()))
    sim = Simulation(cfg, seed=2, runs=40, keep_going=True, crosscheck_every=7).run()
    assert sim.checked > 7 * 100


def test_a_step_the_simulator_insists_on_but_the_model_does_not_enable_raises():
    """A worker given a message that is not in the world: run_queued is not enabled."""
    cfg = sconfig.load(_small())
    sim = Simulation(cfg, seed=1, keep_going=True)
    sim.mailbox.put((0, "r-never", 0))
    with pytest.raises(SimulationError, match="run_queued"):
        sim.run()


def test_crosscheck_catches_a_list_that_is_not_the_worlds(monkeypatch):
    cfg = sconfig.load(_small())
    real = runtime.enabled

    def lying(w, actor=None, **kw):
        out = real(w, actor, **kw)
        return out if actor is None else out + [Transition("crash", actor)]

    monkeypatch.setattr("failclosed.sim.engine.enabled", lying)
    with pytest.raises(SimulationError):
        Simulation(cfg, seed=1, keep_going=True, crosscheck_every=1).run()


# -- the history's canonical lines -----------------------------------------------------------
def test_canonical_lines_are_the_json_definition_byte_for_byte():
    odd = [
        Transition("x", "y", ()),
        Transition("record_step", "resume:r1#1", (("run", "r1"), ("step", 3), ("tool", 'q"\\é\n'))),
        Transition("a", "b", (("fault", None), ("n", -5), ("ok", True), ("z", False))),
        Transition("x", "y", (("t", "shadows the time"),)),
        Transition("x", "y", (("name", "shadows the name"),)),
        Transition("x", "y", (("delay", 1.5),)),
        Transition("x", "y", (("a", 1), ("a", 2))),
    ]
    cfg = sconfig.load(_small())
    sim = Simulation(cfg, seed=5, keep_going=True, keep_history=True).run()
    recs = sim.history.records + [(t, x) for x in odd for t in (0, 1.5, 3, 12345.1234567)]
    h = History()
    import hashlib

    sha = hashlib.sha256()
    for time, t in recs:
        line = _canonical_json(time, t)
        assert canonical(time, t) == line
        h.add(time, t)
        sha.update((line + "\n").encode())
    assert h.hexdigest() == sha.hexdigest()


# -- per-step property checks ------------------------------------------------------------------
def _violations(sim) -> dict[tuple[str, str], float]:
    return {(v.property, r): v.time for v in sim.violations for r in v.runs}


@pytest.mark.parametrize("text,policy,seed", [("OUTLIVES", "owner-guard", 1), ("SMALL", "adr-111", 3),
                                               ("SMALL", "owner-guard", 1)])
def test_check_steps_reports_each_violation_at_the_step_it_happens(text, policy, seed):
    """check_steps (the default: the touched runs' projections after every step, the
    properties whose declared inputs changed) reports exactly what checking the whole world
    after every step reports, at the same instants; the archive schedule alone (at archive,
    every 2000 transitions) reports the same runs, later."""
    import tests.test_sim as ts

    cfg = sconfig.load(ts._raw(getattr(ts, text)))
    oracle = Simulation(cfg, policy=policy, seed=seed, keep_going=True, check_every=1,
                        check_steps=False).run()
    steps = Simulation(cfg, policy=policy, seed=seed, keep_going=True).run()
    default = Simulation(cfg, policy=policy, seed=seed, keep_going=True,
                         check_steps=False).run()
    assert _violations(steps) == _violations(oracle) and _violations(steps)
    assert steps.history.hexdigest() == oracle.history.hexdigest() == default.history.hexdigest()
    late = _violations(default)
    assert set(late) == set(_violations(steps))
    assert all(late[k] >= t for k, t in _violations(steps).items())
    assert any(late[k] > t for k, t in _violations(steps).items())


def test_check_steps_stops_at_the_first_violation_step():
    import tests.test_sim as ts

    cfg = sconfig.load(ts._raw(ts.OUTLIVES))
    steps = Simulation(cfg, seed=1).run()
    oracle = Simulation(cfg, seed=1, check_every=1, check_steps=False).run()
    assert [(v.property, v.runs, v.time) for v in steps.violations] == [
        (v.property, v.runs, v.time) for v in oracle.violations]
    assert steps.fired == oracle.fired < Simulation(cfg, seed=1, check_steps=False).run().fired
