"""How a property is declared: the two kinds (:class:`Property`, ``□ P``, by :func:`always`;
:class:`LivenessProperty`, ``true ~> goal``, by :func:`leads_to`), the registries they fill in
declaration order (``SAFETY``, ``LIVENESS``), and the fairness every liveness property is
checked under (:func:`fairness`, derived from the actor table). The properties themselves are
declared in spec/properties.py, which re-exports these names.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

from failclosed.model import runtime, steps
from failclosed.model.state import Config, World
from failclosed.model.steps import Fair
from failclosed.model.transition import Transition

from .vocab import PropertyName

__all__ = [
    "LIVENESS",
    "SAFETY",
    "Fairness",
    "Finder",
    "LivenessProperty",
    "Property",
    "always",
    "at_bound",
    "declared_fairness",
    "fairness",
    "fairness_predicates",
    "leads_to",
]

Finder = Callable[[World], "str | None"]


@dataclass(frozen=True, slots=True)
class Property:
    """A safety property ``□ P``, declared by :func:`always`. ``find(world)`` names what
    violates it in ``world`` (None: it holds); ``check(world)`` is True when it holds, derived
    from ``find``."""

    name: str
    statement: str  # the formula, as spec/SPEC.md shows it
    source: str  # decision records / docs/RUNTIME.md section
    find: Finder
    check: Callable[[World], bool]
    # the World fields ``find`` reads (None: all of them); the checker skips a successor
    # that shares these objects with its parent (spec.engine.explore, ``reads``)
    reads: tuple[str, ...] | None = None
    # stable: once violated on a run's projection, violated on every later projection of
    # that run until it is archived (it reads only what the run's life only adds to: marks,
    # the ledger, the events, the ghost attempt count). The simulator checks a stable
    # property at the run's archive instead of after every step (sim.engine ``check_steps``).
    stable: bool = False


@dataclass(frozen=True, slots=True)
class Fairness:
    """One fair class of transitions: weak (``Fair.WEAK``: if some transition of the class
    stays enabled, one of the class is eventually taken) or strong (``Fair.STRONG``: if one is
    enabled again and again, one is eventually taken). ``kind``: the actor kind it is the
    fairness of (the terse form of a verdict line groups by it), or, for a property's own
    assumption, what the assumption is about."""

    name: str
    applies: Callable[[Transition], bool]
    statement: str
    strength: Fair = Fair.WEAK
    kind: str = ""

    @property
    def text(self) -> str:
        """``WF(name)`` / ``SF(name)``."""
        return f"{self.strength}({self.name})"


@dataclass(frozen=True, slots=True)
class LivenessProperty:
    """``true ~> goal``: from every reachable state every fair path reaches ``goal``; declared
    by :func:`leads_to`.

    ``fairness(spec)`` gives the classes the spec declares (the same for every liveness
    property: see :func:`fairness`), ``assumes`` the classes this property needs besides
    (e.g. callers eventually decide); ``ignore_deadlock`` marks states where the model's time
    bound, not the system, stops progress (pass it to ``check_liveness``);
    ``describe(world)`` names the rows that keep ``goal`` from holding."""

    name: str
    goal: Callable[[World], bool]
    statement: str  # the formula, as spec/SPEC.md shows it
    source: str
    fairness: Callable[[Config], tuple[Fairness, ...]]
    ignore_deadlock: Callable[[World], bool]
    describe: Callable[[World], str]
    assumes: tuple[Fairness, ...] = ()

    def classes(self, spec: Config) -> tuple[Fairness, ...]:
        """Every class the property is checked under: the declared ones, then its own."""
        return self.fairness(spec) + self.assumes

    def predicates(self, spec: Config) -> list[Callable[[Transition], bool]]:
        """The weakly fair classes as the predicates ``check_liveness`` takes."""
        return [f.applies for f in self.classes(spec) if f.strength is Fair.WEAK]

    def strong_predicates(self, spec: Config) -> list[Callable[[Transition], bool]]:
        """The strongly fair classes (``check_liveness``'s ``strong``)."""
        return [f.applies for f in self.classes(spec) if f.strength is Fair.STRONG]

    @property
    def under(self) -> str:
        """The fairness it is checked under, tersely, for a verdict line: the declared
        fairness per actor kind, the kinds with none, and the property's own assumption
        (``WF(process, worker, reaper, clock), unfair: caller, bus, operator + assumed
        SF(caller decides)``)."""
        mine = f" + assumed {', '.join(a.text for a in self.assumes)}" if self.assumes else ""
        return declared_fairness() + mine


# =========================================================================================
# declaration: one per property; the registries are filled in declaration order
# =========================================================================================
SAFETY: dict[str, Property] = {}
LIVENESS: dict[str, LivenessProperty] = {}


def _formula(text: str) -> str:
    # a formula written as an indented block (first line empty) keeps SPEC.md's layout
    return inspect.cleandoc(text)


def _holds(find: Finder, name: str, doc: str) -> Callable[[World], bool]:
    """The bool form of a finder: ``find(w) is None``, as a function named ``name``."""

    def holds(w: World) -> bool:
        return find(w) is None

    holds.__name__ = name
    holds.__doc__ = doc
    return holds


def _register(table: dict, name: str, prop: object) -> None:
    if not PropertyName.known(name):
        raise ValueError(f"@always / @leads_to: unknown property {name!r}: add it to "
                         "PropertyName in spec/vocab.py")
    if name in SAFETY or name in LIVENESS:
        raise ValueError(f"property {name!r} declared twice")
    table[name] = prop


def always(
    name: str, formula: str, *, source: str, reads: tuple[str, ...] | None = None,
    stable: bool = False,
) -> Callable[[Finder], Finder]:
    """Declare the safety property ``name`` (``formula``: ``□ P``, as spec/SPEC.md shows it),
    decided by the decorated finder, which is returned unchanged. ``reads`` and ``stable``:
    see :class:`Property`."""

    def declare(find: Finder) -> Finder:
        statement = _formula(formula)
        member = PropertyName(name) if PropertyName.known(name) else name
        check = _holds(find, name, f"{statement}\n\n{source}")
        _register(SAFETY, member, Property(member, statement, source, find, check, reads, stable))
        return find

    return declare


def leads_to(
    name: str, formula: str, *, source: str, describe: Callable[[World], str],
    assumes: tuple[Fairness, ...] = (),
) -> Callable[[Callable[[World], bool]], Callable[[World], bool]]:
    """Declare the liveness property ``name`` (``formula`` = ``true ~> goal``) whose goal is
    the decorated predicate, under :func:`fairness` and the property's own ``assumes`` (the
    extra fair classes it needs, e.g. callers eventually decide), with :func:`at_bound` as
    the states where the model's bound stops time; the goal is returned unchanged."""

    def declare(goal: Callable[[World], bool]) -> Callable[[World], bool]:
        member = PropertyName(name) if PropertyName.known(name) else name
        _register(LIVENESS, member, LivenessProperty(
            member, goal, _formula(formula), source, fairness, at_bound, describe,
            tuple(assumes)))
        return goal

    return declare


# =========================================================================================
# fairness
# =========================================================================================
def fairness(spec: Config) -> tuple[Fairness, ...]:
    """THE fairness of every liveness property (spec/SPEC.md, "Fairness"), derived from the
    actor table (model/steps.py ``declare_actor(..., fairness=...)``): one class per instance
    of each fair actor kind (per process, per reaper, the workers' pick-up, the clock), weak
    or strong as the kind declares, in the table's order. Faults get none (the kinds'
    ``takes`` leave them out: the fault budget makes them finite); kinds declared without
    fairness (callers, the operator, the bus) get none either: they may never act."""
    out = []
    for actor in steps.ACTORS.values():
        takes = actor.takes
        for inst in actor.fair_instances(spec):
            assert takes is not None  # declare_actor refuses a fair kind without it
            out.append(Fairness(inst, _step_of(takes, inst),
                                f"{actor.fairness}({inst}): {actor.says}", actor.fairness,
                                actor.kind))
    return tuple(out)


def _step_of(takes: Callable[[Transition, str], bool], inst: str) -> Callable[[Transition], bool]:
    """The class predicate of instance ``inst``: ``takes(t, inst)``."""

    def applies(t: Transition) -> bool:
        return takes(t, inst)

    applies.__name__ = f"step[{inst}]"
    return applies


def declared_fairness() -> str:
    """The declared fairness by actor kind, tersely: ``WF(process, worker, reaper, clock),
    unfair: caller, bus, operator``."""
    by: dict[Fair, list[str]] = {}
    for actor in steps.ACTORS.values():
        by.setdefault(actor.fairness, []).append(actor.kind)
    parts = [f"{f}({', '.join(by[f])})" for f in (Fair.WEAK, Fair.STRONG) if f in by]
    if Fair.NONE in by:
        parts.append(f"unfair: {', '.join(by[Fair.NONE])}")
    return ", ".join(parts)


def fairness_predicates(spec: Config) -> list[Callable[[Transition], bool]]:
    """``fairness(spec)``'s weakly fair classes as the transition predicates
    ``check_liveness`` takes (its strongly fair ones go to its ``strong``)."""
    return [f.applies for f in fairness(spec) if f.strength is Fair.WEAK]


at_bound = runtime.at_bound  # the model's time bound (model/runtime.py)
