"""The runtime's transitions: ``enabled(world)`` and ``apply(world, t)``, both pure.

One semantics for the whole project (docs/DESIGN.md): the checker enumerates these, the
simulator samples them, scenarios replay them. Granularity follows docs/RUNTIME.md: every
store statement is its own transition, and so is every point a segment can stop or time
can pass in between. Local computation (the ladder's arm choice, the approval scan,
classify, the reaper's branch choice on its snapshot) is folded into the transition that
precedes it.

The transitions are the actors' (model/next.py: Next, the actor kinds in their fixed order
with their fairness); each kind is a module of its own, each step one function in it:

* model/caller.py: a run's start or enqueue, cancels, decisions, named principals' requests;
* model/process.py: a live process's step at its label, or its death; the steps are those
  of model/pickup.py (6.2), model/segment.py (7-9: the loop, the ladder, recovery) and
  model/resume.py (12.2, 12.3);
* model/pickup.py: a free worker takes a delivered message;
* model/bus.py: a message delivered twice;
* model/reaper.py: the reaper's tick and its rows (10, proposal P6);
* model/operator.py: a tool removed, the cancel command;
* model/clock.py: time moves to the next instant an actor waits on.

This module lists their moves (``enabled``) and applies one (``apply``, ``fire``), and
re-exports the names the other layers read.
"""

from __future__ import annotations

from . import identities as names
from .caller import REQUEST_ONLY as REQUEST_ONLY
from .caller import unreachable_in as unreachable_in
from .clock import clock_move as clock_move
from .clock import lapsed_by as lapsed_by
from .frames import can
from .frames import step_faults as step_faults
from .next import ACTORS
from .next import at_bound as at_bound
from .next import waiting_instants as waiting_instants
from .process import ACTIONS
from .process import SLOW_OPERATIONS as SLOW_OPERATIONS
from .reaper import REAPER_ACTIONS
from .reaper import tick_selects as tick_selects
from .segment import stamp_move as stamp_move
from .state import Proc, ReaperState, World, replace
from .table import FAULTS, REAPER_TICK, Action
from .transition import Transition
from .vocab import ActorKind, TransitionName

__all__ = [
    "GuardFailed", "apply", "at_bound", "clock_move", "enabled", "fire",
    "lapsed_by", "successors", "waiting_instants",
]


class GuardFailed(ValueError):
    """``apply`` was given a transition that is not enabled."""

    def __init__(self, t: Transition, guard: str, enabled: list[Transition]):
        self.transition = t
        self.guard = guard
        self.enabled = enabled
        super().__init__(f"{t}: guard does not hold: {guard}")


def next_step(w: World, name: str) -> tuple[Action, Proc | ReaperState | None] | None:
    """The step the process ``name`` (a segment, an enqueue caller, or the reaper) takes
    next, with its state; None when it has none (no such process, or a reaper blocked in a
    sync dispatch, whose nested segment is a process of its own)."""
    p = w.proc(name)
    if p is not None:
        return ACTIONS[p.pc], p
    if name not in names.reaper_names(w.config):
        return None
    r = w.reaper(name)
    if r is None:
        return REAPER_ACTIONS[REAPER_TICK], None
    a = REAPER_ACTIONS.get(r.pc)
    return (a, r) if a is not None else None


def enabled(
    w: World, actor: str | None = None, *, one_order: bool = False, run: str | None = None
) -> list[Transition]:
    """Every transition enabled in ``w``, faults included, in a deterministic order.

    With ``actor``, only that actor's transitions (the simulator asks per process). With
    ``one_order``, a reaper tick over stale rows of equal lease (T10 returns ties in any
    order) is listed in its first order only, ties by slot, the one a sampled store returns:
    the list is then the full list with the other orders left out (the simulator's choice;
    the orders of k tied rows are k!). With ``run`` (a run id), only the transitions whose
    ``run`` argument is that run."""
    if run is not None:
        slots = [i for i, r in enumerate(w.config.runs) if r.id == run]
        if not slots:
            return []
        return [t for t in _moves(w, actor, one_order, slots) if t.arg("run") == run]
    return _moves(w, actor, one_order, None)


def _moves(w: World, actor: str | None, one_order: bool, slots: list[int] | None) -> list[Transition]:
    """Every actor's moves in declaration order (``model.steps.ACTORS``), or those of the
    first actor that answers to ``actor``."""
    if actor is None:
        out: list[Transition] = []
        for a in ACTORS.values():
            out.extend(a.moves(w, None, one_order, slots))
        return out
    for a in ACTORS.values():
        if a.answers(w, actor):
            return a.moves(w, actor, one_order, slots)
    return []


def apply(w: World, t: Transition) -> World:
    """The next world. Raises ``GuardFailed`` (naming the guard) if ``t`` is not enabled.

    ``advance_time`` is enabled for any ``to`` later than now (up to the horizon);
    ``enabled`` lists only the instants where something can change, which is all the
    checker needs and what a scenario usually names."""
    if t.name == TransitionName.ADVANCE_TIME and t.actor == ActorKind.CLOCK:
        to = t.arg("to")
        h = w.config.horizon
        if (
            isinstance(to, int)
            and to > w.clock
            and (h is None or to <= h)
            and t == clock_move(w, to)
            and (t.fault is None or can(w, t.fault))
        ):
            return fire(w, t)
    en = enabled(w, t.actor)
    if t not in en:
        raise GuardFailed(t, _why_not(w, t, en), enabled(w))
    return fire(w, t)


def successors(w: World) -> list[tuple[Transition, World]]:
    return [(t, fire(w, t)) for t in enabled(w)]


def _why_not(w: World, t: Transition, en: list[Transition]) -> str:
    same_actor = [e for e in en if e.actor == t.actor]
    if t.fault and t.fault not in FAULTS and t.fault not in w.config.provider_faults:
        return f"unknown fault {t.fault!r}"
    if t.fault and (w.faults <= 0 or (t.fault not in w.config.faults and t.fault not in w.config.provider_faults)):
        return f"fault budget: {w.faults} left, faults allowed {sorted(w.config.faults)}"
    p = w.proc(t.actor)
    if p is not None:
        nxt = sorted({e.name for e in same_actor})
        return f"{t.actor} is at {p.pc!r}; its next step is {' or '.join(nxt)}"
    if t.name == TransitionName.ADVANCE_TIME:
        return f"time can move to {[e.arg('to') for e in same_actor]} only"
    if t.name == TransitionName.RUN_QUEUED:
        return "a free worker and a deliverable message (not_before <= now) for that run"
    if same_actor:
        return f"{t.actor} can only do {', '.join(sorted({e.name for e in same_actor}))} now"
    return f"no actor {t.actor!r} can act now"


def _spend(w: World, t: Transition) -> World:
    if t.fault is None and t.name not in (TransitionName.CRASH, TransitionName.DUPLICATE_MESSAGE):
        return w
    return replace(w, faults=w.faults - 1)


def fire(w: World, t: Transition) -> World:
    """Apply an enabled transition (no re-check: use ``apply`` for untrusted input): the
    effect of the first actor that answers to ``t.actor`` (``model.steps.ACTORS``)."""
    w = _spend(w, t)
    actor = t.actor
    for a in ACTORS.values():
        if a.answers(w, actor):
            return a.fire(w, t)
    raise AssertionError(t)  # pragma: no cover - apply checks the actor first
