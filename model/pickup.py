"""A queued run's pick-up (RUNTIME 6.2): a free worker takes a delivered message (the worker
actor), or on the sync transport the handler runs nested in the dispatching process (its
``run_queued`` step); then the claim (T3) and the position read, after which the segment's
loop (model/segment.py) runs. The worker actor's instants: the messages not yet
deliverable."""

from __future__ import annotations

from . import store
from .frames import T, end, other_faults, pick_up, put, remove_message, spawn, with_faults
from .segment import BOUNDARY, enter_round, to_settle
from .state import FAILED, QUEUED, WORKER, Config, Message, Proc, World, replace
from .table import END, PICK_UP, STORE, STORE_FAULTS, Action, Step
from .transition import Transition
from .vocab import FaultKind, Label, OutcomeName, TransitionName


def _workers_free(w: World) -> list[str]:
    busy = {p.worker for p in w.procs if p.kind == WORKER}
    return [x for x in w.config.workers if x not in busy]


def moves(w: World, only: str | None, one_order: bool, runs: list[int] | None) -> list[Transition]:
    """The worker actor: free workers pick up deliverable messages (``only``: that worker's
    pick-ups; ``runs``: messages of those run slots only)."""
    out: list[Transition] = []
    if not w.messages:
        return out
    free = _workers_free(w)
    if only is not None:
        free = [x for x in free if x == only]
    if free:
        seen: set[Message] = set()
        for m in w.messages:
            if m.not_before <= w.clock and (runs is None or m.run in runs) and m not in seen:
                seen.add(m)
                for wk in free:
                    out.extend(
                        with_faults(
                            w,
                            T(PICK_UP, wk, run=w.run_id(m.run), not_before=m.not_before),
                            other_faults(PICK_UP),
                        )
                    )
    return out


def deliver(w: World, t: Transition) -> World:
    """Async: a free worker takes a delivered message and runs pick-up step 1."""
    i = w.config.run_index(t.arg("run"))
    w = remove_message(w, Message(i, t.arg("not_before")))
    if t.fault or not _pick_up_finds(w.rows[i]):
        return w  # NONE: find_run failed, or a duplicate or stale message
    return spawn(w, pick_up(w, i, t.actor, Label.CLAIM_QUEUED))


def answers(w: World, name: str) -> bool:
    """A free worker acts under its name."""
    return name in w.config.workers and w.proc(name) is None


def instances(config: Config) -> tuple[str, ...]:
    """The configuration's workers."""
    return tuple(config.workers)


def instants(w: World) -> list[int]:
    """The later instants a message on the bus becomes deliverable (its ``not_before``)."""
    now = w.clock
    return [m.not_before for m in w.messages if m.not_before > now]


def takes(t: Transition, name: str) -> bool:
    """Fairness: some free worker takes some deliverable message (the workers are one class)."""
    return t.name == PICK_UP and t.fault is None


def run_queued(w: World, p: Proc, t: Transition) -> World:
    """Sync: pick-up step 1 of the handler nested in the dispatching process."""
    if t.fault or not _pick_up_finds(w.rows[p.run]):
        return end(w, p, None)  # NONE: back to the dispatcher
    return put(w, replace(p, pc=Label.CLAIM_QUEUED))


def _pick_up_finds(row) -> bool:
    """6.2 step 1: the row exists, is queued and holds a stored request."""
    return row is not None and row.status == QUEUED and row.queued_request


def claim_queued(w: World, p: Proc, t: Transition) -> World:
    ok = False
    if not t.fault:
        w, ok = store.claim_queued(w, p.run, p.identity)
    if not ok:
        return end(w, p, None)  # NONE
    row = w.rows[p.run]
    assert row is not None  # the claim matched it
    p = replace(p, pc=Label.PICKUP_POSITION, epoch=row.epoch, claim_requeues=row.requeue_count,
                seg=f"{p.worker}/{w.run_id(p.run)}#{row.attempts}")
    return put(w, p)


def pickup_position(w: World, p: Proc, t: Transition) -> World:
    if t.fault:  # settle_failed without an owner (proposal P4: guarded by its own claim)
        own = w.config.policy.failure_settles_own_claim
        p = replace(p, handle=0, guard=p.identity if own else p.guard)
        err = "StateUnavailable" if t.fault == FaultKind.STORE_ERROR else "ConfigurationGone"
        return to_settle(w, p, TransitionName.SETTLE_FAILED, FAILED, "provider_failed", err, own, OutcomeName.FAILED,
                       OutcomeName.LEASE_LOST if own else OutcomeName.FAILED)
    p = replace(p, handle=store.max_sequence(w, p.run) + 1, turn=0, rounds=0)
    return enter_round(w, p)


# the step table of this module: label, the step, what it fires, its faults, cost, place, then
STEPS: tuple[Action, ...] = (
    Step(PICK_UP, run_queued,
         fires=PICK_UP, faults=STORE_FAULTS, cost=STORE, then=(Label.CLAIM_QUEUED, END),
         place="6.2 step 1; 6.3 sync: nested in the dispatching process"),
    Step(Label.CLAIM_QUEUED, claim_queued,
         fires=store.CLAIM_QUEUED, faults=STORE_FAULTS, cost=STORE,
         then=(Label.PICKUP_POSITION, END), place="T3, 6.2 step 2"),
    Step(Label.PICKUP_POSITION, pickup_position,
         fires=TransitionName.MAX_SEQUENCE, faults=(FaultKind.STORE_ERROR, FaultKind.DECODE_ERROR),
         cost=STORE, then=BOUNDARY + (Label.SETTLE,), place="4.2, 6.2 steps 3-5"),
)
