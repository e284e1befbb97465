"""The clock (conventions: one clock; 1.3 slow operation, pause): time moves to the next
instant an actor declared it may act at (model/next.py ``waiting_instants``) and nowhere
else, up to the horizon. Moving it past a live segment's lease is a fault: a slow operation
if the segment waits on the provider or a tool, a pause otherwise."""

from __future__ import annotations

from . import store
from .frames import T, can
from .process import SLOW_OPERATIONS
from .state import World, replace
from .transition import Transition
from .vocab import ActorKind, FaultKind, TransitionName


def answers(w: World, name: str) -> bool:
    return name == ActorKind.CLOCK


def moves(w: World, instants: list[int]) -> list[Transition]:
    """Time moves to each of ``instants`` (the instants the actors wait on, ascending) up to
    the horizon, with the fault ``lapsed_by`` names where the budget allows it. The checker
    needs no other instant; the simulator and scenarios may move time to any later instant
    (``runtime.apply`` accepts it). Time does not move when nothing waits on it."""
    h = w.config.horizon
    out = []
    for to in instants:
        if h is not None and to > h:
            continue
        t = clock_move(w, to)
        if t.fault is None or can(w, t.fault):
            out.append(t)
    return out


def fire(w: World, t: Transition) -> World:
    """Time is ``to`` now."""
    return replace(w, clock=t.arg("to"))


def lapsed_by(w: World, to: int) -> str | None:
    """Which fault moving the clock to ``to`` is: ``None`` when no live segment's lease lapses,
    ``slow_operation`` when every segment whose lease lapses is inside a provider or tool
    call (RUNTIME 1.3 "a provider or tool call outlives the lease"), ``pause`` when one
    is anywhere else (the process stalls). Both are faults of 1.3: each spends the budget."""
    fault = None
    for p in w.procs:
        if not p.owner:
            continue
        row = w.rows[p.run]
        if row is not None and row.claimed_by == p.owner and store.stale(w, row, to):
            if p.pc not in SLOW_OPERATIONS:
                return FaultKind.PAUSE
            fault = FaultKind.SLOW_OPERATION
    return fault


def clock_move(w: World, to: int) -> Transition:
    """The transition that moves time to ``to``, with the fault branch ``lapsed_by`` names."""
    return T(TransitionName.ADVANCE_TIME, ActorKind.CLOCK, to=to, fault=lapsed_by(w, to))


def at_bound(w: World, instants: list[int]) -> bool:
    """The model's bound, not the system, stops time here: something waits on an instant
    later than the horizon, which the clock may not reach."""
    h = w.config.horizon
    return h is not None and any(t > h for t in instants)


def takes(t: Transition, name: str) -> bool:
    """Fairness: time moves on (while something waits on it: the clock is enabled only then)."""
    return t.actor == name
