"""The process actor (RUNTIME 5; 1.3 process death): every live process (a segment, an enqueue
caller, a resume) takes the step declared at its label, or dies. Its step table is the union
of the step tables of model/pickup.py, model/segment.py and model/resume.py; it acts in time
where the lease of a row it claimed lapses."""

from __future__ import annotations

from . import pickup, resume, segment, store
from .frames import T, can, die, with_faults
from .state import RUNNING, Proc, World
from .table import PICK_UP, PROVIDER, TOOL, Action, table
from .transition import Transition
from .vocab import FaultKind, TransitionName

# label -> step: the steps of a pick-up, a segment and a resume, in the order the vocabulary
# lists their transitions (the nested pick-up first, the claim and position read after the
# loop: model.names.TRANSITIONS and the coverage reports read this order)
ACTIONS: dict[str, Action] = table(
    pickup.STEPS[:1] + segment.STEPS + pickup.STEPS[1:] + resume.STEPS)

# Where a segment waits on a slow operation (1.3): time may pass its lease there unfaulted.
# The labels whose step waits on the provider or a tool (the step table's cost classes).
SLOW_OPERATIONS = frozenset(a.pc for a in ACTIONS.values() if a.cost in (PROVIDER, TOOL))


def answers(w: World, name: str) -> bool:
    """A live process acts under its own name."""
    return w.proc(name) is not None


def moves(w: World, name: str | None, one_order: bool, slots: list[int] | None) -> list[Transition]:
    """Each live process's step (the one declared at its label, with the fault branches it
    may take now) and its death."""
    out: list[Transition] = []
    crash = can(w, FaultKind.CRASH)
    for p in w.procs if name is None else (w.proc(name),):
        assert p is not None  # answered: the process is live
        out.extend(_step_moves(w, p))
        if crash:
            out.append(T(TransitionName.CRASH, p.name, run=w.run_id(p.run)))
    return out


def _step_moves(w: World, p: Proc) -> list[Transition]:
    """The process is at label ``p.pc``: the step declared there, with its fault branches."""
    a = ACTIONS[p.pc]
    t = a.move(w, p) if a.move is not None else T(a.fires[0], p.name, run=w.run_id(p.run))
    return with_faults(w, t, a.faults if a.faults_now is None else a.faults_now(w, p))


def fire(w: World, t: Transition) -> World:
    """The step at the process's label, or its death."""
    p = w.proc(t.actor)
    assert p is not None  # answered: the process is live
    if t.name == TransitionName.CRASH:
        return die(w, p)
    return ACTIONS[p.pc].effect(w, p, t)


def takes(t: Transition, name: str) -> bool:
    """Fairness: a step of the process ``name`` without a fault; a free worker taking a
    message (run_queued with not_before) is the worker's step, but a pick-up nested in a sync
    dispatch (no not_before) is the dispatching process's own next step."""
    return (t.actor == name and t.fault is None and t.name != TransitionName.CRASH
            and not (t.name == PICK_UP and t.arg("not_before") is not None))


def instants(w: World) -> list[int]:
    """The later instants at which a RUNNING row's lease has lapsed (``store.lapses_at``):
    from then the segment that holds it can no longer renew it, and the reaper may take the
    row. And one second on where a renewal in the same second would fail (before commit
    2029c781)."""
    now = w.clock
    out = []
    for row in w.rows:
        if row is not None and row.status == RUNNING:
            at = store.lapses_at(w, row)
            if at > now:
                out.append(at)
    lease_now = now + w.config.constants.LEASE_SECONDS
    if out and not w.config.policy.noop_renew_recheck and any(
        r is not None and r.status == RUNNING and r.lease_expires == lease_now for r in w.rows
    ):
        out.append(now + 1)  # before 2029c781 a renewal in the same second fails
    return out
