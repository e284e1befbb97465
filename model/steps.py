"""The step tables and the actors, as the other layers read them: a facade over the actor
modules (each lists its steps at its foot: model/segment.py, model/pickup.py,
model/resume.py, model/reaper.py), model/next.py (the actor kinds in their fixed order, with
their fairness) and model/table.py (what a step and an actor are, the fault kinds, the
transitions no process step fires).

* :data:`ACTIONS`: label -> step of a process (a segment, an enqueue caller, a resume);
  :data:`REAPER_ACTIONS`: the reaper's; :data:`ACTORS`: kind -> actor, in Next's order;
* :data:`FAULTS`: the fault kinds a configuration may enable; :data:`OTHER_TRANSITIONS`;
* everything derived from them: ``model.names.TRANSITIONS`` (:class:`Vocabulary`), the
  boundary labels, the simulator's cost classes, the argument keys.

Nothing is registered at import. A change to the runtime is made in its actor's module
(docs/CHANGING.md); a test that makes a change in a fixture extends the tables at run time
inside :func:`extended` (``with steps.extended(): ...``), which restores them on exit:
:func:`action` declares a step, :func:`declare_actor` an actor kind, and the tables may be
assigned to directly (``ACTIONS[label] = dataclasses.replace(ACTIONS[label], ...)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from . import table as _table
from .next import ACTORS as ACTORS
from .process import ACTIONS as ACTIONS
from .reaper import REAPER_ACTIONS as REAPER_ACTIONS
from .table import AUDIT as AUDIT
from .table import COST_CLASSES as COST_CLASSES
from .table import DISPATCH as DISPATCH
from .table import END as END
from .table import FAULTS as FAULTS
from .table import NONE as NONE
from .table import OTHER_TRANSITIONS as OTHER_TRANSITIONS
from .table import PICK_UP as PICK_UP
from .table import PROCESS as PROCESS
from .table import PROVIDER as PROVIDER
from .table import REAPER as REAPER
from .table import REAPER_DECISION as REAPER_DECISION
from .table import REAPER_REDISPATCH as REAPER_REDISPATCH
from .table import REAPER_RESEND as REAPER_RESEND
from .table import REAPER_TICK as REAPER_TICK
from .table import SETTLE as SETTLE
from .table import STAMP as STAMP
from .table import STORE as STORE
from .table import STORE_FAULTS as STORE_FAULTS
from .table import TOOL as TOOL
from .table import Action as Action
from .table import Actor as Actor
from .table import Fair as Fair
from .table import Fault as Fault
from .table import Other as Other
from .table import Step as Step
from .table import fault_kinds as fault_kinds
from .table import injected as injected

# the closed vocabularies the tables are written in (declared in model/vocab.py), re-exported
from .vocab import ActorKind as ActorKind
from .vocab import FaultKind as FaultKind
from .vocab import Label as Label
from .vocab import TransitionName as TransitionName

_TABLES: tuple[dict[str, Any], ...] = (ACTIONS, REAPER_ACTIONS, ACTORS, FAULTS, OTHER_TRANSITIONS)


@contextmanager
def extended() -> Iterator[None]:
    """The tables (the steps, the actors, the fault kinds, the other transitions) as they are,
    restored on exit: a fixture that makes a change at run time (docs/CHANGING.md's recipes
    in tests) declares it inside, and nothing of it outlives the test."""
    saved = [dict(t) for t in _TABLES]
    try:
        yield
    finally:
        for t, old in zip(_TABLES, saved, strict=True):
            t.clear()
            t.update(old)


def action(
    pc: str, *, fires: str | tuple[str, ...], cost: str, place: str,
    faults: tuple[str, ...] = (), then: tuple[str, ...] = (), args: tuple[str, ...] = (),
    move: Callable[..., Any] | None = None,
    faults_now: Callable[..., tuple[str, ...]] | None = None, actor: str = PROCESS,
    boundary: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A fixture's step: the decorated function, declared now as the step labelled ``pc``
    (:func:`table.Step` parses every name) into the process's or the reaper's table. Use it
    inside :func:`extended`; a change to the model itself lists its step in its module's
    ``STEPS``."""
    step = Step(pc, _unset, fires=fires, cost=cost, place=place, faults=faults, then=then,
                args=args, move=move, faults_now=faults_now, actor=actor, boundary=boundary)
    into = REAPER_ACTIONS if step.actor == REAPER else ACTIONS
    if step.pc in into:
        raise ValueError(f"step {step.pc!r} is declared twice")

    def declare(effect: Callable[..., Any]) -> Callable[..., Any]:
        into[step.pc] = Action(step.pc, step.fires, step.faults, step.cost, step.place, effect,
                               step.move, step.faults_now, step.then, step.args, step.actor,
                               step.boundary)
        return effect

    return declare


def _unset(*args: Any) -> Any:  # pragma: no cover - replaced as the step is declared
    raise AssertionError("a step declared without its effect")


def declare_actor(kind: str, **declared: Any) -> None:
    """A fixture's actor kind, added after Next's, declared as :func:`table.actor` declares
    one (its instances, default one actor named as the kind; its fairness; ``instants``, the
    instants it may act at, where the clock then stops). Use it inside :func:`extended`; a
    change to the model itself adds its kind to model/next.py."""
    a = _table.actor(kind, **declared)
    if a.kind in ACTORS:
        raise ValueError(f"actor {a.kind!r} is declared twice")
    ACTORS[a.kind] = a


def actor_instances(config: Any) -> dict[str, tuple[str, ...]]:
    """Kind -> the names of its actors in ``config``, in Next's order."""
    return {k: a.instances(config) for k, a in ACTORS.items()}


def steps() -> Iterator[Action]:
    """Every declared step: the processes' first, then the reaper's."""
    yield from ACTIONS.values()
    yield from REAPER_ACTIONS.values()


_boundary: tuple[int, frozenset[str]] = (-1, frozenset())


def boundary_labels() -> frozenset[str]:
    """The labels of a step boundary before its event is stored (``boundary=True``): where a
    segment's tool application waits on its audit event. Derived again after a change."""
    global _boundary
    if _boundary[0] != _table.generation:
        _boundary = (_table.generation, frozenset(a.pc for a in ACTIONS.values() if a.boundary))
    return _boundary[1]


def costs() -> dict[str, str]:
    """Each process label's cost class, read from the table now (the simulator's components)."""
    return {a.pc: a.cost for a in ACTIONS.values()}


class Vocabulary(Mapping[str, tuple[str, tuple[str, ...]]]):
    """Transition name -> (docs/RUNTIME.md places, fault kinds), derived from the step table
    and :data:`OTHER_TRANSITIONS` each time it is read (a step added at run time, as the
    recipe's test does, is in it at once). Several steps may fire one transition (``find_run``
    is the cancel probe, the recovery read and a resume's read): its places and faults are
    the union over them, in declaration order. The derived table is kept until a declaration
    changes."""

    def __init__(self) -> None:
        self._of = -1  # the generation of the declarations the table was derived from
        self._derived: dict[str, tuple[str, tuple[str, ...]]] = {}

    def _table(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """The derived table, derived again only when a declaration was added or replaced."""
        if self._of != _table.generation:
            self._derived = self._derive()
            self._of = _table.generation
        return self._derived

    def _derive(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        places: dict[str, list[str]] = {}
        faults: dict[str, list[str]] = {}
        declared = [(n, a.place, a.faults) for a in steps() for n in a.fires]
        declared += [(n, o.place, o.faults) for n, o in OTHER_TRANSITIONS.items()]
        for name, place, kinds in declared:
            ps = places.setdefault(name, [])
            ps.extend(x for x in place.split("; ") if x not in ps)
            fs = faults.setdefault(name, [])
            fs.extend(f for f in kinds if f not in fs)
        return {n: ("; ".join(places[n]), tuple(faults[n])) for n in places}

    def __getitem__(self, name: str) -> tuple[str, tuple[str, ...]]:
        return self._table()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())

    def __contains__(self, name: object) -> bool:
        return name in self._table()


def arg_keys() -> frozenset[str]:
    """Every argument key a transition may carry."""
    keys = {"run", "fault"}
    for a in steps():
        keys.update(a.args)
    for o in OTHER_TRANSITIONS.values():
        keys.update(o.args)
    return frozenset(keys)
