"""The step table (model/steps.py): every step declared once, and everything derived from it.

* the moves the model makes between labels are the ones the table declares (``then``);
* the vocabulary, the scenario format, the checker's coverage and the simulator's cost
  classes are read from the table;
* docs/CHANGING.md's recipe holds: a new transition is a store statement plus one
  declaration (plus the line in its predecessor that goes to it), shown by building one.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import pytest
from failclosed.model import names, steps, store
from failclosed.model.config import initial_world, parse_config
from failclosed.model.runtime import apply, enabled, fire
from failclosed.model.scenario import replay, scenario_from_dict
from failclosed.model.state import RUNNING, World, replace
from failclosed.model.steps import ACTIONS, END, REAPER_ACTIONS, STORE, action, fault_kinds
from failclosed.spec.checker import CONFIG_DIR, load_config
from failclosed.spec.coverage import expected_labels

# configurations x policies walked breadth-first (a bounded prefix of each state space)
WALKS = [
    ("small", "current"), ("small", "proposed"), ("small", "adr-092"),
    ("cancel-probe", "current"), ("cancel-probe-sync", "current"),
    ("small-approval", "current"), ("small-input", "current"),
    ("small", "current+fence_cleared_after_audit"),
]
WALK_STATES = 3000


def _label_move(w: World, t, w2: World) -> tuple[str, str, str] | None:
    """(table, label before, label after or END) for a process's or the reaper's step."""
    if t.name == "crash":
        return None
    if t.actor == "reaper" and (w.reaper is None or w.reaper.pc != "nested"):
        return ("reaper", w.reaper.pc if w.reaper else "tick", w2.reaper.pc if w2.reaper else END)
    p = w.proc(t.actor)
    if p is None:
        return None
    q = w2.proc(t.actor)
    return ("process", p.pc, q.pc if q is not None else END)


def _walk(config: str, policy: str, limit: int = WALK_STATES) -> dict[tuple[str, str], set[str]]:
    _, parts = load_config(CONFIG_DIR / f"{config}.toml")
    moves: dict[tuple[str, str], set[str]] = defaultdict(set)
    for part in parts:
        cfg, budget = parse_config(part.data, policy)
        w0 = initial_world(cfg, budget)
        seen = {w0}
        frontier = [w0]
        while frontier and len(seen) < limit:
            nxt = []
            for w in frontier:
                for t in enabled(w):
                    w2 = fire(w, t)
                    m = _label_move(w, t, w2)
                    if m is not None:
                        moves[m[:2]].add(m[2])
                    if w2 not in seen:
                        seen.add(w2)
                        nxt.append(w2)
            frontier = nxt
    return moves


@pytest.mark.parametrize(("config", "policy"), WALKS, ids=[f"{c}|{p}" for c, p in WALKS])
def test_every_move_between_labels_is_declared(config, policy):
    """A step's effect goes on only to the labels its declaration's ``then`` names."""
    for (table, label), after in _walk(config, policy).items():
        decl = (REAPER_ACTIONS if table == "reaper" else ACTIONS)[label]
        undeclared = sorted(after - set(decl.then))
        assert not undeclared, f"{table} step {label!r} went on to {undeclared}: add them to its then"


def test_then_names_only_declared_labels():
    for a in steps.steps():
        table = REAPER_ACTIONS if a.actor == steps.REAPER else ACTIONS
        unknown = [x for x in a.then if x != END and x not in table and x != "nested"]
        assert not unknown, f"{a.pc}: then names unknown labels {unknown}"


def test_vocabulary_is_derived_from_the_table():
    for a in steps.steps():
        for name in a.fires:
            place, faults = names.TRANSITIONS[name]
            assert a.place.split("; ")[0] in place
            assert set(a.faults) <= set(faults)
        assert set(a.faults) <= set(fault_kinds()) | {"provider_error"}, a.pc
        assert a.cost in steps.COST_CLASSES
    assert set(steps.OTHER_TRANSITIONS) <= set(names.TRANSITIONS)


def test_the_simulator_picks_each_steps_component_by_its_cost_class():
    from failclosed.sim import config as sconfig
    from failclosed.sim.engine import Simulation

    sim = Simulation(sconfig.load_file(sconfig.default_path()), "current", seed=1)
    by_cost = {steps.STORE: sim.faults.store, steps.AUDIT: sim.faults.audit,
               steps.PROVIDER: sim.faults.provider, steps.TOOL: sim.faults.tools,
               steps.DISPATCH: sim.faults.bus}
    for pc, cost in steps.costs().items():
        assert sim.components.get(pc) is by_cost.get(cost), pc
    assert sim.components["clear"] is sim.faults.store  # the proposal's T5 clear is a store statement too


# -- the recipe (docs/CHANGING.md), done once ----------------------------------------------
def touch_run(w: World, i: int, me: str) -> tuple[World, bool]:
    """A new store statement: ``UPDATE runs SET pending_effect = 'touched' WHERE id = ? AND
    status = 'running' AND claimed_by = ?`` (owner-guarded like T4)."""
    row = w.rows[i]
    if not store.owner_guard(row, me, w):
        return w, False
    return w.set_row(i, replace(row, pending_effect="touched")), True


@pytest.fixture
def extra_step():
    """Declare a step ``touch`` (it fires ``touch_run``) between the cancel probe and the
    persist, as a change to the runtime would; the table is restored afterwards."""
    saved, saved_reaper = dict(ACTIONS), dict(REAPER_ACTIONS)

    # 1. the declaration, on its effect
    @action("touch", fires="touch_run", faults=("store_error",), cost=STORE,
            place="(a test's own statement)", then=("persist", END))
    def _h_touch(w, p, t):
        ok = False
        if not t.fault:
            w, ok = touch_run(w, p.run, p.owner)
        if not ok:
            return w.set_proc(replace(p, pc="persist"))  # in a real change: the ladder
        return w.set_proc(replace(p, pc="persist"))

    # 2. the predecessor goes to it: the probe's effect, where it would have gone to persist
    probe = ACTIONS["probe"]

    def probe_then_touch(w, p, t):
        w2 = probe.effect(w, p, t)
        q = w2.proc(p.name)
        if q is not None and q.pc == "persist" and q.owner:
            w2 = w2.set_proc(replace(q, pc="touch"))
        return w2

    ACTIONS["probe"] = dataclasses.replace(probe, effect=probe_then_touch, then=probe.then + ("touch",))
    yield
    ACTIONS.clear()
    ACTIONS.update(saved)
    REAPER_ACTIONS.clear()
    REAPER_ACTIONS.update(saved_reaper)


def _world(policy: str = "current+cancel_probe-renew_before_persist") -> World:
    _, parts = load_config(CONFIG_DIR / "small.toml")
    cfg, _ = parse_config(parts[0].data, policy)
    cfg = dataclasses.replace(cfg, faults=cfg.faults | {"store_error"}, fault_ops=None)
    return initial_world(cfg, 1)


def _run_to(w: World, name: str, limit: int = 60) -> World:
    """Fire normal (unfaulted) steps, first listed first, until ``name`` is enabled."""
    for _ in range(limit):
        en = enabled(w)
        if any(t.name == name for t in en):
            return w
        w = fire(w, next(t for t in en if t.fault is None and t.name != "crash"))
    raise AssertionError(f"{name} never enabled")


def test_recipe_a_new_transition_is_one_declaration(extra_step):
    # the vocabulary, the scenario format and the coverage report know it at once
    assert names.TRANSITIONS["touch_run"] == ("(a test's own statement)", ("store_error",))
    w = _run_to(_world(), "touch_run")
    en = [t for t in enabled(w) if t.name == "touch_run"]
    assert [t.fault for t in en] == [None, "store_error"]  # its fault branch, from the table
    assert "touch_run[store_error]" in expected_labels([w.config])
    # the checker's guard and effect: apply() accepts it and the statement ran
    w2 = apply(w, en[0])
    run = w.config.run_index(en[0].arg("run"))
    assert w2.rows[run].status == RUNNING and w2.rows[run].pending_effect == "touched"
    assert w2.proc(en[0].actor).pc == "persist"
    # the simulator's cost class: a store statement, whose latency and store_error the
    # simulator's run-store component draws for it
    from failclosed.sim import config as sconfig
    from failclosed.sim.engine import Simulation

    assert steps.costs()["touch"] == STORE
    sim = Simulation(sconfig.load_file(sconfig.default_path()), "current", seed=1)
    assert sim.components["touch"] is sim.components["renew"]
    # a scenario may name it
    sc = scenario_from_dict({
        "policy": "current+cancel_probe-renew_before_persist",
        "runs": [{"id": "r1", "entry": "queued"}],
        "steps": [{"do": "enqueue_run", "actor": "caller", "run": "r1"},
                  {"actor": "enqueue:r1", "until": "end"},
                  {"do": "run_queued", "actor": "w1", "run": "r1"},
                  {"actor": "w1", "until": "touch_run"},
                  {"do": "touch_run", "actor": "w1"}],
        "expect": [{"rows": {"r1": {"status": "running", "pending_effect": "touched"}}}],
    })
    res = replay(sc)
    assert res.ok, (res.failures, res.stopped)


def test_recipe_fixture_leaves_the_table_as_it_was():
    assert "touch" not in ACTIONS and "touch_run" not in names.TRANSITIONS
