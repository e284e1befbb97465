r"""Next: the model's transition relation, as TLA+ writes it, one disjunct per actor kind, with
each kind's fairness beside it.

    Next == Caller \/ Process \/ Worker \/ Bus \/ Reaper \/ Operator \/ Clock
    Fairness == WF(Process) /\ WF(Worker) /\ WF(Reaper) /\ WF(Clock)

The order is fixed: ``runtime.enabled`` lists the kinds' moves in it (state ids, tie-breaks,
trace hashes and the simulator's draws depend on it) and ``runtime.fire`` dispatches on the
first kind that answers. Each kind is one module (its steps, each one function, and its step
table at its foot); nothing registers itself. A kind that acts in time declares its instants
(``instants``): the clock stops at every declared instant and moves nowhere else.
"""

from __future__ import annotations

from . import bus, caller, clock, identities, operator, pickup, process, reaper
from .state import World
from .table import Actor, Fair, actor
from .transition import Transition
from .vocab import ActorKind, Keyed


def waiting_instants(w: World) -> list[int]:
    """The later instants some actor waits on, ascending: the union of every declared kind's
    ``instants`` (a lease that lapses, a message that becomes deliverable, a deadline that
    passes). Between those instants only the order of events matters. Empty when nothing
    waits on time."""
    out: set[int] = set()
    for a in ACTORS.values():
        if a.instants is not None:
            out.update(a.instants(w))
    return sorted(out)


def at_bound(w: World) -> bool:
    """The model's bound, not the system, stops time here: something waits on an instant
    later than the horizon, which the clock may not reach."""
    return clock.at_bound(w, waiting_instants(w))


def _clock_moves(w: World, name: str | None, one_order: bool, slots: list[int] | None,
                 ) -> list[Transition]:
    """Time moves to the instants the actors wait on (:func:`waiting_instants`)."""
    return clock.moves(w, waiting_instants(w))


NEXT: tuple[Actor, ...] = (
    actor(ActorKind.CALLER, place="6.1, 11, 12",
          answers=caller.answers, moves=caller.moves, fire=caller.fire),
    actor(ActorKind.PROCESS, place="5; 1.3 process death",
          answers=process.answers, moves=process.moves, fire=process.fire,
          instances=identities.process_names, instants=process.instants,
          fairness=Fair.WEAK, takes=process.takes,
          says="the process's next step without a fault"),
    actor(ActorKind.WORKER, place="6.2 step 1 (async: a delivery)",
          answers=pickup.answers, moves=pickup.moves, fire=pickup.deliver,
          instances=pickup.instances, instants=pickup.instants,
          fairness=Fair.WEAK, takes=pickup.takes, fair_each=False,
          says="some free worker takes some deliverable message"),
    actor(ActorKind.BUS, place="6.3; 1.3 a duplicate message",
          answers=bus.answers, moves=bus.moves, fire=bus.fire),
    actor(ActorKind.REAPER, place="10",
          answers=reaper.answers, moves=reaper.moves, fire=reaper.fire,
          instances=reaper.instances, instants=reaper.instants,
          fairness=Fair.WEAK, takes=reaper.takes,
          says="a reaper step without a fault (tick, per-row decision, dispatch)"),
    actor(ActorKind.OPERATOR, place="14.2 a tool removed between attempts; 11 the cancel command",
          answers=operator.answers, moves=operator.moves, fire=operator.fire),
    actor(ActorKind.CLOCK, place="conventions: one clock",
          answers=clock.answers, moves=_clock_moves, fire=clock.fire,
          fairness=Fair.WEAK, takes=clock.takes,
          says="time moves on while something waits on it"),
)



def formula(actors: tuple[Actor, ...] = NEXT) -> str:
    """Next and its fairness as TLA+ writes them, read from ``actors`` (spec/SPEC.md and this
    module's docstring quote it; tests/test_spec_md.py checks both)."""
    kinds = [a.kind.capitalize() for a in actors]
    fair = [f"{a.fairness}({a.kind.capitalize()})" for a in actors if a.fairness is not Fair.NONE]
    disjunction = " \\/ ".join(kinds)
    conjunction = " /\\ ".join(fair)
    return f"Next == {disjunction}\nFairness == {conjunction}"


# kind -> actor, in the order of NEXT (a fixture may add one: model/steps.py ``extended``)
ACTORS: dict[str, Actor] = Keyed(ActorKind, {a.kind: a for a in NEXT})
