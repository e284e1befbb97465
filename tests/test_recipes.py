"""docs/CHANGING.md's four recipes, each made in a fixture as a change to the runtime would be:

* a new store statement at a step boundary (just before the worker renews);
* a new fault on an existing step (a stale read on the cancel probe);
* a new property;
* a switch on a shared predicate (a grace second on the stale predicate).

For each: the checker, scope generation, the scenario format and the simulator pick the change
up from its declaration alone (the simulator draws a new fault from its ``[faults]``
probability); a variant that changes no behaviour moves no verdict, trace or
history hash; and a deliberately incomplete change fails a test whose message says what to add.
"""

from __future__ import annotations

import dataclasses
import random
import sys
from pathlib import Path

import pytest
from failclosed.model import names, rules, segment, steps, store, vocab
from failclosed.model.config import initial_world, parse_config
from failclosed.model.runtime import enabled, fire
from failclosed.model.scenario import replay, scenario_from_dict
from failclosed.model.state import RUNNING, Row, World, replace
from failclosed.model.steps import ACTIONS, END, FAULTS, STORE, Fault, action
from failclosed.model.vocab import FaultKind, Label, TransitionName
from failclosed.spec import properties
from failclosed.spec.checker import CONFIG_DIR, check, load_config
from failclosed.spec.scope import load_scope
from failclosed.spec.vocab import PropertyName

from failclosed import build_info

sys.path.insert(0, str(Path(__file__).resolve().parent))
import behaviour_digests as bd  # noqa: E402

# the readers of store.lapses_at (store.stale, the lease instants in model.process): where
# either module is compiled, it calls the function natively and a monkeypatch is not seen
COMPILED = bool({"failclosed.model.store", "failclosed.model.process"}
                & set(build_info().compiled))
needs_pure = pytest.mark.skipif(COMPILED, reason="patches a model function, which a compiled "
                                "build calls natively (the step-table fixtures run on both)")


def _tiny_digest() -> dict:
    return {p: bd.checker_digest("tiny", p) for p in ("current", "proposed")}


def _sim_hash() -> str:
    return bd.sim_digest(bd.sim_workloads()["small"], "current", 1)["history_sha256"]


# =========================================================================================
# 1. a new store statement at a step boundary
# =========================================================================================
def touch_run(w: World, i: int, owner: str) -> tuple[World, bool]:
    """``UPDATE runs SET lease_expires = lease_expires WHERE id = ? AND status = 'running' AND
    claimed_by = ?``: an owner-guarded touch that changes no field (reports the match)."""
    return w, store.owner_guard(w.rows[i], owner, w)


def declare_touch(boundary: bool = True) -> None:
    """The recipe: the statement (and its row of the statement table), one ``@action``, and
    the predecessor (the probe) going to it where it would have gone to the renewal."""
    # the recipe's first step: the new names join their vocabularies (a real change adds
    # the members to Label and TransitionName in model/vocab.py)
    vocab.extend(Label, "touch")
    vocab.extend(TransitionName, "touch_run")
    store.STATEMENTS["touch_run"] = store.Statement(
        "touch_run", "T4'", ("run", "owner"), ("run", "owner"), {}, touch_run)

    @action("touch", fires="touch_run", faults=steps.STORE_FAULTS, cost=STORE, boundary=boundary,
            place="(the recipe's statement)", then=("renew", END))
    def _h_touch(w, p, t):
        ok = False
        if not t.fault:
            w, ok = touch_run(w, p.run, p.owner)
        if not ok:
            return segment.ladder(w, p, rules.LEASE_LOST, "")
        return w.set_proc(replace(p, pc="renew"))

    probe = ACTIONS["probe"]

    def probe_then_touch(w, p, t):
        w2 = probe.effect(w, p, t)
        q = w2.proc(p.name)
        if q is not None and q.pc == "renew" and p.pc == "probe":
            w2 = w2.set_proc(replace(q, pc="touch"))
        return w2

    ACTIONS["probe"] = dataclasses.replace(probe, effect=probe_then_touch,
                                           then=probe.then + ("touch",))


def boundary_violations(config: str, policy: str, walks: int = 60, depth: int = 120) -> list[str]:
    """Random walks: every label a segment is at between entering a step boundary (its step
    set) and that step's ``record_step`` must be declared ``boundary=True``; the labels that
    are not, with where they were seen."""
    out: set[str] = set()
    _, parts = load_config(CONFIG_DIR / f"{config}.toml")
    rng = random.Random(7)
    for part in parts:
        cfg, budget = parse_config(part.data, policy)
        for _ in range(walks):
            w = initial_world(cfg, budget)
            inside: dict[str, list[str]] = {}
            for _ in range(depth):
                en = [t for t in enabled(w) if t.fault is None and t.name != "crash"]
                if not en:
                    break
                t = rng.choice(en)
                p = w.proc(t.actor)
                w2 = fire(w, t)
                q = w2.proc(t.actor)
                if p is not None and t.name == "record_step":
                    out.update(x for x in inside.pop(p.name, []) if x not in steps.boundary_labels())
                elif q is not None and q.handle >= 0 and q.step and (p is None or q.step != p.step):
                    inside[q.name] = [q.pc]
                elif q is not None and q.name in inside:
                    inside[q.name].append(q.pc)
                if q is None:
                    inside.pop(t.actor, None)
                w = w2
    return sorted(out)


def test_every_label_inside_a_step_boundary_is_declared_so():
    assert boundary_violations("small-zombie", "current") == []


def test_recipe_boundary_statement_is_picked_up(restore_tables):
    declare_touch()
    # the vocabulary, the coverage labels and the boundary know it from the declaration
    assert names.TRANSITIONS["touch_run"] == ("(the recipe's statement)", ("store_error",))
    assert "touch" in steps.boundary_labels()
    _, parts = load_config(CONFIG_DIR / "small-zombie.toml")
    cfg, _ = parse_config(parts[0].data, "current")
    from failclosed.spec.coverage import expected_labels

    assert {"touch_run", "touch_run[store_error]"} <= set(expected_labels([cfg]))
    # the scenario format: the statement runs directly, and a segment walks through the step
    sc = scenario_from_dict({
        "policy": "current", "runs": [{"id": "r1", "entry": "queued"}],
        "steps": [{"do": "enqueue_run", "actor": "caller", "run": "r1"},
                  {"actor": "enqueue:r1", "until": "end"},
                  {"do": "run_queued", "actor": "w1", "run": "r1"},
                  {"actor": "w1", "until": "touch_run"},
                  {"do": "touch_run", "actor": "w1"},
                  {"store": "touch_run", "run": "r1", "owner": "worker:w1",
                   "expect": {"result": True}}],
        "expect": [{"rows": {"r1": {"status": RUNNING}}, "procs": ["w1"]}],
    })
    res = replay(sc)
    assert res.ok, (res.failures, res.stopped)
    # the checker: it fires the step, and F1 is still F1, one step longer (no false verdict)
    r = check("current", CONFIG_DIR / "small-zombie.toml",
              ["no_write_applied_twice_without_audit", "no_unaudited_write_settles_successfully"],
              witnesses=False, coverage=True)
    assert r.coverage.taken.get("touch_run", 0) > 0
    f1 = r.properties["no_write_applied_twice_without_audit"]
    recorded = (Path(__file__).resolve().parents[1] / "spec" / "findings" /
                "no_write_applied_twice_without_audit--current.txt").read_text()
    assert not f1.holds and f1.trace_length > int(recorded.split(", ")[1].split()[0])
    # the simulator: the step waits on the run store, and no false violation comes of it
    from failclosed.sim import config as sconfig
    from failclosed.sim.engine import Simulation

    sim = Simulation(sconfig.load(bd.sim_workloads()["small"]), "proposed", seed=1,
                     keep_going=True, keep_history=True)
    assert sim.components["touch"] is sim.faults.store
    sim.run()
    assert any(t.name == "touch_run" for _, t in sim.history.records)
    assert [v.property for v in sim.violations
            if v.property.startswith(("no_write_applied", "no_unaudited"))] == []


def test_recipe_boundary_statement_without_its_flag_is_named(restore_tables):
    declare_touch(boundary=False)
    assert boundary_violations("small-zombie", "current") == ["touch"], (
        "a label inside a step boundary that is not declared boundary=True")


def test_recipe_unreached_statement_changes_nothing(restore_tables):
    before, sim_before = _tiny_digest(), _sim_hash()
    vocab.extend(Label, "touch")
    vocab.extend(TransitionName, "touch_run")
    store.STATEMENTS["touch_run"] = store.Statement(
        "touch_run", "T4'", ("run", "owner"), ("run", "owner"), {}, touch_run)
    action("touch", fires="touch_run", cost=STORE, place="(unreached)", then=(END,))(
        lambda w, p, t: w)
    assert _tiny_digest() == before and _sim_hash() == sim_before


# =========================================================================================
# 2. a new fault on an existing step: the cancel probe reads a stale row
# =========================================================================================
def declare_stale_read() -> None:
    vocab.extend(FaultKind, "stale_read")  # a real change adds the member to FaultKind
    FAULTS["stale_read"] = Fault(STORE, "the probe reads a row from before the cancel")
    probe = ACTIONS["probe"]

    def effect(w, p, t):
        if t.fault == "stale_read":
            return segment.after_probe(w, p)  # the cancel is not seen
        return probe.effect(w, p, t)

    ACTIONS["probe"] = dataclasses.replace(probe, faults=probe.faults + ("stale_read",),
                                           effect=effect)


def test_recipe_fault_is_picked_up(restore_tables):
    declare_stale_read()
    assert "stale_read" in names.TRANSITIONS["find_run"][1]
    # a configuration may enable it, and the checker branches on it
    _, parts = load_config(CONFIG_DIR / "cancel-probe-sync.toml")
    data = dict(parts[0].data, model=dict(parts[0].data["model"], faults=["stale_read"]))
    cfg, budget = parse_config(data, "current")
    assert "stale_read" in cfg.faults
    r = check("current", parts[0].__class__("stale", "x", data), ["cooperative_cancel"],
              witnesses=False, coverage=True)
    assert r.coverage.taken.get("find_run[stale_read]", 0) > 0
    # a scope's "every" explores it
    scope = load_scope(CONFIG_DIR.parent / "scopes" / "standard.toml", reduce=False)
    assert any("stale_read" in m.data["model"]["faults"] for m in scope.members)
    # a scenario names it
    sc = scenario_from_dict({
        "policy": "current", "model": {"faults": ["stale_read"], "fault_budget": 1},
        "runs": [{"id": "r1", "entry": "queued", "cancels": 1}],
        "steps": [{"do": "enqueue_run", "actor": "caller", "run": "r1"},
                  {"actor": "enqueue:r1", "until": "end"},
                  {"do": "run_queued", "actor": "w1", "run": "r1"},
                  {"actor": "w1", "until": "find_run"},
                  {"do": "cancel", "actor": "caller", "run": "r1"},
                  {"do": "find_run", "actor": "w1", "fault": "stale_read"}],
        "expect": [{"procs": ["w1"], "rows": {"r1": {"status": "cancelled"}}}],
    })
    res = replay(sc)
    assert res.ok, (res.failures, res.stopped)


def test_recipe_fault_is_drawn_by_the_simulator_from_its_probability_alone(restore_tables):
    """Nothing in sim/: ``[faults] stale_read`` and the probe's component (the run store)
    draws it at the probe, and the report counts it."""
    declare_stale_read()
    from failclosed.sim import config as sconfig
    from failclosed.sim.engine import Simulation

    raw = sconfig.with_overrides(bd.sim_workloads()["small"], {"faults.stale_read": 0.3})
    sim = Simulation(sconfig.load(raw), "current", seed=1, keep_going=True, keep_history=True).run()
    taken = [t for _, t in sim.history.records if t.fault == "stale_read"]
    assert taken and {t.name for t in taken} == {"find_run"}
    assert sim.fault_report()["drawn"]["stale_read"] == len(taken)


def test_recipe_fault_the_simulator_draws_but_does_not_enable_is_named(restore_tables):
    declare_stale_read()
    from failclosed.sim import config as sconfig
    from failclosed.sim.engine import Simulation
    from failclosed.sim.records import SimulationError

    raw = bd.sim_workloads()["small"]
    sim = Simulation(sconfig.load(raw), "current", seed=1, keep_going=True)
    sim.faults.store.fault = lambda rng, proc=None, world=None: (
        "stale_read" if proc is not None and proc.pc == "probe" else None)
    with pytest.raises(SimulationError, match="name it in the kinds"):
        sim.run()


def test_recipe_fault_no_configuration_enables_changes_nothing(restore_tables):
    before, sim_before = _tiny_digest(), _sim_hash()
    declare_stale_read()
    assert _tiny_digest() == before and _sim_hash() == sim_before


# =========================================================================================
# 3. a new property
# =========================================================================================
def declare_property() -> None:
    vocab.extend(PropertyName, "no_cancelled_write")  # a real one: a member of PropertyName

    @properties.always("no_cancelled_write", "□ ∀a∈L: row(a.run).status ≠ cancelled",
                       source="(the recipe's property); RUNTIME 16.15", reads=("ledger", "rows"))
    def _find(w):
        for a in w.ledger:
            row = w.rows[a.run]
            if row is not None and row.status == "cancelled":
                return f"run {w.run_id(a.run)} was cancelled after a write"
        return None


def test_recipe_property_is_picked_up(restore_tables):
    declare_property()
    r = check("current", CONFIG_DIR / "tiny.toml", None, witnesses=False, coverage=False)
    assert "no_cancelled_write" in r.properties
    from failclosed.sim.invariants import load_safety

    assert "no_cancelled_write" in load_safety()[0]  # the simulator's per-step checks
    sc = scenario_from_dict({"policy": "current", "runs": [{"id": "r1"}], "steps": [],
                             "expect": [{"holds": ["no_cancelled_write"]}]})
    assert replay(sc).ok


def test_recipe_property_without_its_spec_md_entry_prints_the_block(restore_tables):
    declare_property()
    import test_spec_md

    with pytest.raises(AssertionError) as e:
        test_spec_md.test_spec_md_lists_exactly_the_registry("Safety properties")
    assert "**no_cancelled_write** ((the recipe's property); RUNTIME 16.15)" in str(e.value)
    assert "    □ ∀a∈L: row(a.run).status ≠ cancelled" in str(e.value)


def test_recipe_property_leaves_the_other_verdicts_alone(restore_tables):
    before = _tiny_digest()
    declare_property()
    after = _tiny_digest()
    for p in after:
        after[p].pop("no_cancelled_write")
    assert after == before


# =========================================================================================
# 4. a switch on a shared predicate: a grace second on the stale predicate
# =========================================================================================
def _verdicts(policy: str = "current") -> dict[str, bool]:
    r = check(policy, CONFIG_DIR / "tiny.toml", None, witnesses=False, coverage=False)
    return {n: p.holds for n, p in r.properties.items()}


@needs_pure
def test_recipe_grace_second_moves_every_reader_of_the_predicate(monkeypatch):
    held = _verdicts()
    real = store.lapses_at
    monkeypatch.setattr(store, "lapses_at", lambda w, row: real(w, row) + 1)
    graced = _verdicts()
    # the reaper waits a second more: the same guarantees fail and hold (F1 stays found; no
    # liveness breaks because the clock's instants and the bound move with the guard)
    assert graced == held and not graced["no_write_applied_twice_without_audit"]


def test_the_stale_predicate_and_its_first_instant_agree():
    """``store.stale`` and ``store.lapses_at`` are one predicate: a row is stale at ``now``
    exactly from the instant lapses_at names (the clock's instants and the model's bound are
    read from lapses_at; change the predicate in both or the clock misses it)."""
    _, parts = load_config(CONFIG_DIR / "tiny.toml")
    cfg, budget = parse_config(parts[0].data, "current")
    w = initial_world(cfg, budget)
    for lease in (0, 1, 5, 90):
        for status in ("running", "queued"):
            row = Row(status=status, lease_expires=lease)
            for now in range(0, 100, 3):
                leased = status == RUNNING and lease > 0
                assert store.stale(w, row, now) == (leased and now >= store.lapses_at(w, row)), (
                    "store.stale and store.lapses_at disagree: the clock moves to lapses_at, so "
                    f"change both (lease {lease}, {status}, now {now})")


@needs_pure
def test_recipe_switch_that_is_off_changes_nothing(monkeypatch):
    before, sim_before = _tiny_digest(), _sim_hash()
    real = store.lapses_at
    monkeypatch.setattr(store, "lapses_at", lambda w, row: real(w, row) + 0)
    assert _tiny_digest() == before and _sim_hash() == sim_before
