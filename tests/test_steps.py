"""The step table (model/steps.py): every step declared once, and everything derived from it.

* the moves the model makes between labels are the ones the table declares (``then``);
* the vocabulary, the scenario format, the checker's coverage and the simulator's cost
  classes are read from the table;
* docs/CHANGING.md's recipe holds: a new transition is a store statement plus one
  declaration (plus the line in its predecessor that goes to it), shown by building one.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from failclosed.model import names, steps, store
from failclosed.model.config import initial_world, parse_config
from failclosed.model.runtime import enabled, fire
from failclosed.model.state import World
from failclosed.model.steps import ACTIONS, END, REAPER_ACTIONS, fault_kinds
from failclosed.spec.checker import CONFIG_DIR, load_config

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
    if names.is_reaper(t.actor) and (w.reaper(t.actor) is None or w.reaper(t.actor).pc != "nested"):
        r, r2 = w.reaper(t.actor), w2.reaper(t.actor)
        return ("reaper", r.pc if r else "tick", r2.pc if r2 else END)
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
               steps.DISPATCH: sim.faults.bus, steps.NONE: sim.faults.local}
    for pc, cost in steps.costs().items():
        assert sim.components.get(pc) is by_cost.get(cost), pc
    assert sim.components["clear"] is sim.faults.store  # the proposal's T5 clear is a store statement too


# -- the recipes (docs/CHANGING.md) are made in tests/test_recipes.py ---------------------
def test_recipe_fixtures_leave_the_tables_as_they_were():
    assert "touch" not in ACTIONS and "touch_run" not in names.TRANSITIONS
    assert "touch_run" not in store.STATEMENTS and "stale_read" not in steps.FAULTS
