"""The four changes issue 41 held out against docs/CHANGING.md, each made in a fixture by its
recipe and followed through every layer: the checker, fairness, traces, the swimlane, the
simulator's processes and its liveness judgement, the properties.

* a new fault on the dispatch step (the bus takes the message and loses it): drawn by its
  own kind, never as "dispatch failed";
* a switch that stores a step's event twice: caught by ``one_event_per_step``;
* a new actor kind, a lease heartbeat renewing while a call is in flight: it declares its
  instants, the clock stops there, and it renews before the lease lapses, in the checker
  and in the simulator (which runs the generic process for it);
* a new liveness property: checked by the checker under the declared fairness, judged by
  the simulator at each run's end, or named as not judged.

Each part either is right or fails here saying what to add.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
from failclosed.model import runtime, steps, store, vocab
from failclosed.model.config import initial_world, parse_config
from failclosed.model.runtime import fire
from failclosed.model.state import RUNNING, World, replace
from failclosed.model.steps import (
    ACTIONS,
    ACTORS,
    DISPATCH,
    FAULTS,
    OTHER_TRANSITIONS,
    Fair,
    Fault,
    Other,
    declare_actor,
)
from failclosed.model.transition import Transition
from failclosed.model.vocab import ActorKind, FaultKind, TransitionName
from failclosed.sim import config as sconfig
from failclosed.sim import plots
from failclosed.sim.engine import Simulation
from failclosed.sim.liveness import Liveness, summary_lines
from failclosed.sim.processes import HANDWRITTEN
from failclosed.sim.records import SimulationError
from failclosed.spec import engine, properties
from failclosed.spec.checker import CONFIG_DIR, check, diff_worlds, load_config
from failclosed.spec.declare import Fairness
from failclosed.spec.vocab import PropertyName

sys.path.insert(0, str(Path(__file__).resolve().parent))
import behaviour_digests as bd  # noqa: E402


@pytest.fixture
def changed(restore_tables):
    """The tables a change declares into (conftest's ``restore_tables``) and the actor table,
    restored afterwards in their order."""
    actors = dict(ACTORS)
    yield
    ACTORS.clear()
    ACTORS.update(actors)


def _tiny(**model) -> dict:
    """tiny.toml's one part, its [model] table updated."""
    _, parts = load_config(CONFIG_DIR / "tiny.toml")
    data = dict(parts[0].data)
    data["model"] = dict(data["model"], **model)
    return data


def _part(data: dict):
    _, parts = load_config(CONFIG_DIR / "tiny.toml")
    return parts[0].__class__("changed", "a part of the change's test", data)


def _sim(raw: dict, policy: str = "current", **kw) -> Simulation:
    return Simulation(sconfig.load(raw), policy, seed=1, keep_going=True, keep_history=True,
                      **kw).run()


def _without_fault(t: Transition) -> Transition:
    return t._replace(args=tuple(a for a in t.args if a[0] != "fault"))


# =========================================================================================
# 1. a new fault on the dispatch step: the bus accepts the message and loses it
# =========================================================================================
LOST = "dispatch_lost"


def declare_lost_dispatch() -> None:
    """The recipe "Add a fault": the member, its row of FAULTS (the component it breaks: the
    dispatch), the step that may take it and its effect (the process goes on as if sent;
    no message is ever delivered)."""
    vocab.extend(FaultKind, LOST)
    FAULTS[LOST] = Fault(DISPATCH, "the bus accepts the message and loses it")
    d = ACTIONS[TransitionName.DISPATCH]

    def effect(w, p, t):
        if t.fault == LOST:
            return replace(d.effect(w, p, _without_fault(t)), messages=w.messages)
        return d.effect(w, p, t)

    ACTIONS[TransitionName.DISPATCH] = dataclasses.replace(d, faults=d.faults + (LOST,),
                                                           effect=effect)


def _dispatch_record(fault: str | None) -> dict:
    return {"t": 3.0, "name": TransitionName.DISPATCH, "actor": "enqueue:r1", "run": "r1",
            **({"fault": fault} if fault else {})}


def test_a_new_dispatch_fault_is_drawn_by_its_kind_not_as_dispatch_failed(changed):
    declare_lost_dispatch()
    lost = plots._markers(_dispatch_record(LOST), "enqueue:r1")
    failed = plots._markers(_dispatch_record(FaultKind.DISPATCH_FAILS), "enqueue:r1")
    # on the bus's lane (the component the kind breaks), each with its own kind
    assert [(m[1], m[2]) for m in lost] == [(ActorKind.BUS, LOST)]
    assert [(m[1], m[2]) for m in failed] == [(ActorKind.BUS, FaultKind.DISPATCH_FAILS)]
    style = plots._style(LOST)
    assert LOST in style["label"] and "dispatch failed" not in style["label"]
    assert (style["marker"], style["color"]) not in {
        (s["marker"], s["color"]) for s in plots._MARKER_STYLE.values()}, "a look of its own"


def test_a_new_dispatch_fault_in_the_checker_its_trace_and_the_simulator(changed, tmp_path):
    declare_lost_dispatch()
    # the checker branches on it, and its counterexample names the kind
    r = check("current", _part(_tiny(faults=[LOST], fault_budget=1)),
              [PropertyName.NO_ORPHAN_QUEUED_RUN], witnesses=False, coverage=True)
    assert r.coverage.taken.get(f"dispatch[{LOST}]", 0) > 0
    verdict = r.properties[PropertyName.NO_ORPHAN_QUEUED_RUN]
    assert not verdict.holds, "a message lost for good leaves its run QUEUED"
    assert any(t.fault == LOST for t, _w in verdict.trace)
    # the simulator draws it from [faults] alone, at the dispatch; the swimlane of that
    # history draws it on the bus by its kind; the liveness judgement sees the runs left
    raw = sconfig.with_overrides(bd.sim_workloads()["small"], {f"faults.{LOST}": 0.5})
    hist = tmp_path / "h.jsonl"
    sim = Simulation(sconfig.load(raw), "current", seed=1, keep_going=True,
                     history_path=str(hist)).run()
    assert sim.fault_report()["drawn"][LOST] > 0
    recs = plots.load_records(str(hist))
    drawn = {(m[1], m[2]) for r in recs for m in plots._markers(r, r["actor"])}
    assert (ActorKind.BUS, LOST) in drawn
    assert (ActorKind.BUS, FaultKind.DISPATCH_FAILS) not in {
        (m[1], m[2]) for r in recs if r.get("fault") == LOST for m in plots._markers(r, r["actor"])}
    plots.swimlane(str(hist), str(tmp_path / "lost.png"))
    left = sim.checks.liveness.report()["judged"][PropertyName.NO_ORPHAN_QUEUED_RUN]
    assert left["unreached"] > 0, "a run whose message was lost ends QUEUED"


# =========================================================================================
# 2. a switch that stores a step's event twice
# =========================================================================================
def declare_event_stored_twice() -> None:
    """The switch's reading, on the persist step: the step's event is inserted a second time
    (the handle advancing past both, so the sequences still increase)."""
    persist = ACTIONS["persist"]

    def effect(w, p, t):
        w2 = persist.effect(w, p, t)
        new = w2.events[len(w.events):]
        q = w2.proc(p.name)
        if len(new) == 1 and q is not None and q.handle == new[0].seq + 1:
            again = replace(new[0], seq=q.handle)
            w2 = replace(w2, events=w2.events + (again,)).set_proc(replace(q, handle=q.handle + 1))
        return w2

    ACTIONS["persist"] = dataclasses.replace(persist, effect=effect)


def test_an_event_stored_twice_is_caught_by_one_property(changed):
    before = check("current", CONFIG_DIR / "tiny.toml", None, witnesses=False, coverage=False)
    declare_event_stored_twice()
    after = check("current", CONFIG_DIR / "tiny.toml", None, witnesses=False, coverage=False)
    caught = after.properties[PropertyName.ONE_EVENT_PER_STEP]
    assert before.properties[PropertyName.ONE_EVENT_PER_STEP].holds and not caught.holds
    assert caught.trace[-1][0].name == TransitionName.RECORD_STEP
    # the property that says so is the only one whose verdict moved
    moved = [n for n, p in after.properties.items() if p.holds != before.properties[n].holds]
    assert moved == [PropertyName.ONE_EVENT_PER_STEP]


def test_an_event_stored_twice_is_caught_by_the_simulator(changed):
    declare_event_stored_twice()
    sim = _sim(bd.sim_workloads()["small"])
    assert PropertyName.ONE_EVENT_PER_STEP in {v.property for v in sim.violations}


# =========================================================================================
# 3. a new actor kind: a lease heartbeat renewing while a call is in flight
# =========================================================================================
HEARTBEAT = "heartbeat"
# the labels where a segment waits on a provider or a tool: the model's own list
IN_FLIGHT = runtime.SLOW_OPERATIONS


def _in_flight(w: World):
    """(slot, process) of each segment inside a call whose lease it still holds."""
    for p in w.procs:
        row = w.rows[p.run]
        if (p.pc in IN_FLIGHT and p.owner and row is not None and row.status == RUNNING
                and row.claimed_by == p.owner and not store.stale(w, row, w.clock)):
            yield p.run, p


def _heartbeat_moves(w, name, one_order, slots):
    """Due: the lease's last instant (the clock is at lease_expires) while its call runs."""
    return [Transition.make(HEARTBEAT, HEARTBEAT, run=w.run_id(i))
            for i, p in _in_flight(w) if w.clock == w.rows[i].lease_expires
            and (slots is None or i in slots)]


def _heartbeat_fire(w, t):
    i = w.config.run_index(t.arg("run"))
    p = next(p for j, p in _in_flight(w) if j == i)
    w2, _ok = store.renew_lease(w, i, p.owner, p)
    return w2


def _heartbeat_instants(w):
    """The later instants the heartbeat acts at: each in-flight lease's last instant."""
    return {w.rows[i].lease_expires for i, _p in _in_flight(w) if w.rows[i].lease_expires > w.clock}


def declare_heartbeat(instants: bool = True, transitions: bool = True) -> None:
    """The recipe "Add an actor": the kind's member, its transition (a row of
    OTHER_TRANSITIONS naming the kind), ``declare_actor`` with its moves, effect and the
    instants it acts at (``instants=False``: the change made without them)."""
    vocab.extend(ActorKind, HEARTBEAT)
    vocab.extend(TransitionName, HEARTBEAT)
    if transitions:
        OTHER_TRANSITIONS[HEARTBEAT] = Other(HEARTBEAT, (), "(the recipe's lease heartbeat)")
    declare_actor(HEARTBEAT, place="(the recipe's lease heartbeat)",
                  answers=lambda w, name: name == HEARTBEAT, moves=_heartbeat_moves,
                  fire=_heartbeat_fire, instants=_heartbeat_instants if instants else None)


def _slow_call_config() -> dict:
    """tiny with a lease of 3 s: a call may outlive it (slow_operation), and the heartbeat
    is due at its last instant, which is not an instant anything else waits on."""
    data = _tiny(faults=["slow_operation"], fault_budget=1, horizon=8)
    data["constants"] = dict(data["constants"], LEASE_SECONDS=3)
    return data


def _renewed_in_flight(config: dict) -> bool:
    """A reachable step where the heartbeat renewed a lease during a call, before it lapsed."""
    r = check("current", _part(config), [PropertyName.EXCLUSIVE_CLAIM], witnesses=False,
              coverage=True)
    return r.coverage.taken.get(HEARTBEAT, 0) > 0


def _walk_to_a_heartbeat(cfg) -> tuple[World, list[tuple[Transition, World]]]:
    """One walk of the model: normal steps, time moved on whenever a segment is inside a
    call, until the heartbeat acts (the trace ends with its step) or nothing more happens."""
    w = initial_world(cfg, 1)
    start, trace = w, []
    for _ in range(200):
        en = runtime.enabled(w)
        normal = [t for t in en if t.fault is None and t.name != TransitionName.CRASH]
        hb = [t for t in normal if t.actor == HEARTBEAT]
        clock = [t for t in normal if t.actor == ActorKind.CLOCK]
        pick = hb or (clock if clock and any(_in_flight(w)) else normal)
        if not pick:
            break
        w = fire(w, pick[0])
        trace.append((pick[0], w))
        if hb:
            break
    return start, trace


def test_the_heartbeat_with_its_instants_renews_during_a_slow_call_in_the_checker(changed):
    declare_heartbeat()
    assert _renewed_in_flight(_slow_call_config())
    # the clock stops at the lease's last instant, the heartbeat renews, and the call goes
    # on under a lease that has not lapsed; the trace shows the step as any other
    cfg, _ = parse_config(_slow_call_config(), "current")
    start, trace = _walk_to_a_heartbeat(cfg)
    t, w = trace[-1]
    assert t.actor == HEARTBEAT, "the clock never stopped where the heartbeat acts"
    i = cfg.run_index(t.arg("run"))
    before = trace[-2][1]
    assert w.rows[i].lease_expires > before.rows[i].lease_expires == before.clock
    assert any(p.pc in IN_FLIGHT for p in w.procs) and not store.stale(w, w.rows[i], w.clock)
    text = engine.trace_table(trace, start, diff_worlds)
    assert f"| {HEARTBEAT} " in text and "lease_expires: 3 -> 6" in text


def test_the_heartbeat_without_its_instants_never_acts_in_the_checker(changed):
    declare_heartbeat(instants=False)
    assert not _renewed_in_flight(_slow_call_config()), (
        "without instants the clock jumps past the lease in one step")


def test_the_heartbeat_in_fairness_and_the_safety_verdicts(changed):
    before = check("current", _part(_slow_call_config()), None, witnesses=False, coverage=False)
    declare_heartbeat()
    cfg, _ = parse_config(_slow_call_config(), "current")
    assert HEARTBEAT not in {f.kind for f in properties.fairness(cfg)}  # Fair.NONE: unfair
    assert HEARTBEAT in properties.declared_fairness().split("unfair: ")[1]
    assert steps.actor_instances(cfg)[HEARTBEAT] == (HEARTBEAT,)
    after = check("current", _part(_slow_call_config()), None, witnesses=False, coverage=False)
    violated = {n for n, v in after.properties.items() if not v.holds and n in properties.SAFETY}
    assert violated <= {n for n, v in before.properties.items() if not v.holds}, (
        "a heartbeat that renews only its owner's lease makes no safety property fail")


def _slow_workload() -> dict:
    """The small workload with every ticket call outliving the lease."""
    raw = bd.sim_workloads()["small"]
    raw = sconfig.with_overrides(raw, {"constants.LEASE_SECONDS": 60, "runs.count": 8})
    for t in raw["tools"]:
        if t["name"] == "ticket":
            t["latency"] = 200
    return raw


def test_the_simulator_runs_the_heartbeat_and_it_renews_before_the_lease_lapses(changed, tmp_path):
    without = _sim(_slow_workload())
    assert without.drawn[FaultKind.SLOW_OPERATION] > 0, "the ticket call outlives its lease"
    declare_heartbeat()
    assert HEARTBEAT not in HANDWRITTEN
    hist = tmp_path / "hb.jsonl"
    sim = Simulation(sconfig.load(_slow_workload()), "current", seed=1, keep_going=True,
                     keep_history=True, history_path=str(hist)).run()
    assert sim.procs.acting_kinds == (HEARTBEAT,)
    beats = [(at, t) for at, t in sim.history.records if t.actor == HEARTBEAT]
    assert beats, "the simulator ran no process for the heartbeat"
    assert sim.drawn[FaultKind.SLOW_OPERATION] < without.drawn[FaultKind.SLOW_OPERATION]
    recs = plots.load_records(str(hist))
    assert HEARTBEAT in plots._lanes(recs)  # its own swimlane, its steps drawn on it
    assert {(m[1], m[2]) for r in recs if r["actor"] == HEARTBEAT
            for m in plots._markers(r, HEARTBEAT)} == {(HEARTBEAT, plots.STEP + HEARTBEAT)}
    plots.swimlane(str(hist), str(tmp_path / "hb.png"))


def test_an_actor_kind_the_simulator_cannot_run_is_refused_naming_what_to_add(changed):
    declare_heartbeat(transitions=False)
    with pytest.raises(SimulationError, match="actor kind 'heartbeat'.*OTHER_TRANSITIONS"):
        _sim(bd.sim_workloads()["small"])


def test_every_shipped_actor_kind_has_a_simulator_process_or_none_by_declaration():
    assert set(ACTORS) <= set(HANDWRITTEN), (
        "a shipped actor kind runs the generic process: list it in sim/processes.py HANDWRITTEN")


# =========================================================================================
# 4. a new liveness property
# =========================================================================================
NEW = "every_run_leaves_running"


def declare_liveness(assumes: tuple = ()) -> None:
    vocab.extend(PropertyName, NEW)

    @properties.leads_to(NEW, "true ~> ∀r: row(r).status ≠ running",
                         source="(the recipe's liveness property)",
                         describe=lambda w: "a run is RUNNING", assumes=assumes)
    def _goal(w):
        return all(row is None or row.status != RUNNING for row in w.rows)


def test_a_new_liveness_property_in_the_checker_under_the_declared_fairness(changed):
    declare_liveness()
    r = check("current", CONFIG_DIR / "tiny.toml", [NEW], witnesses=False, coverage=False)
    assert NEW in r.properties
    assert properties.LIVENESS[NEW].under == properties.declared_fairness()


def test_a_new_liveness_property_is_judged_by_the_simulator(changed):
    declare_liveness()
    sim = _sim(bd.sim_workloads()["small"])
    report = sim.checks.liveness.report()
    assert NEW in report["judged"] and report["judged"][NEW]["reached"] == report["runs"] > 0
    assert any(NEW in line for line in summary_lines(report, "current"))


def test_a_liveness_property_the_simulator_cannot_judge_is_named(changed):
    caller_decides = Fairness("caller decides", lambda t: t.actor == ActorKind.CALLER,
                              "a caller eventually decides", Fair.STRONG, "assumption")
    declare_liveness(assumes=(caller_decides,))
    report = Liveness().report()
    assert NEW not in report["judged"] and "SF(caller decides)" in report["not_judged"][NEW]
    lines = summary_lines(report, "current")
    assert any(line.startswith("liveness not judged (current): " + NEW) for line in lines)
