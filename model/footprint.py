"""Footprints: which parts of the world a transition may read or write, from the step table.

A footprint is a set of ``(Touch, instance)`` pairs: ``ROW`` and ``RUN_INPUTS`` name the run
the transition carries (``ANY`` when it carries none: a reaper's tick reads every row),
``SELF`` the acting process; every other part is one (instance ``ANY``). What a step touches
is derived from its declaration in ``model.steps`` and declared there only where the
declaration does not imply it:

* every process step reads and writes its own process (``SELF``), its run's row, the marks,
  the catalogue and the clock (a store statement stamps or compares a lease);
* a step with fault kinds spends the fault budget (``BUDGET``), and so does every branch of
  the step (its fault branches are enabled or not by the budget);
* a step that may end its process (``END`` in ``then``) changes which processes exist and
  adds an outcome (and, nested in a reaper's sync dispatch, moves the reaper on);
* the cost class names the store it waits on: an audit insert writes the events, a tool the
  ledger, a dispatch the bus (and on the sync transport runs the handler: a new process);
* ``touches=`` of ``@action`` / ``Other`` adds the rest.

:data:`FIELDS` maps each part to the World fields it is. Partial-order reduction
(spec/por.py) reads the footprints for its dependence and its visibility;
tests/test_footprints.py walks the model and checks that every fired transition changes
nothing outside its footprint.
"""

from __future__ import annotations

from typing import Any

from . import steps
from .steps import (
    ACTIONS,
    AUDIT,
    DISPATCH,
    END,
    FAULTS,
    OTHER_TRANSITIONS,
    PROCESS,
    REAPER_ACTIONS,
    REAPER_TICK,
    TOOL,
    Action,
    Other,
)
from .vocab import Touch, TransitionName

__all__ = ["ANY", "FIELDS", "PER_RUN", "Footprint", "declared", "footprint", "kinds"]

ANY: Any = -1  # the instance of a part that is one (or: every run)
PER_RUN = frozenset({Touch.ROW, Touch.RUN_INPUTS})

# part -> the World fields it is
FIELDS: dict[Touch, tuple[str, ...]] = {
    Touch.ROW: ("rows",),
    Touch.RUN_INPUTS: ("started", "cancels", "decisions", "resumes"),
    Touch.SELF: ("procs",),
    Touch.PROCS: ("procs",),
    Touch.EVENTS: ("events",),
    Touch.LEDGER: ("ledger",),
    Touch.OUTCOMES: ("outcomes",),
    Touch.MESSAGES: ("messages",),
    Touch.CLOCK: ("clock",),
    Touch.MARKS: ("marks",),
    Touch.CATALOGUE: ("removed",),
    Touch.REAPERS: ("reapers",),
    Touch.BUDGET: ("faults",),
    Touch.COMMANDS: ("commands",),
    Touch.ASKED: ("asked",),
    Touch.MADE: ("made",),
}

Footprint = frozenset[tuple[Touch, Any]]

_PROCESS_STEP = (Touch.SELF, Touch.ROW, Touch.MARKS, Touch.CATALOGUE, Touch.CLOCK)
_BY_COST = {
    AUDIT: (Touch.EVENTS,),
    TOOL: (Touch.LEDGER,),
    DISPATCH: (Touch.MESSAGES, Touch.PROCS, Touch.OUTCOMES, Touch.REAPERS),
}
_ENDS = (Touch.PROCS, Touch.OUTCOMES, Touch.REAPERS)


def _of_step(a: Action) -> frozenset[Touch]:
    out = set(Touch.of(x) for x in a.touches)
    if a.actor == PROCESS:
        out.update(_PROCESS_STEP)
    if a.faults:
        out.add(Touch.BUDGET)
    if END in a.then:
        out.update(_ENDS)
    out.update(_BY_COST.get(a.cost, ()))
    return frozenset(out)


def _of_other(name: str, o: Other) -> frozenset[Touch]:
    out = set(Touch.of(x) for x in o.touches)
    if o.faults or name in FAULTS:
        out.add(Touch.BUDGET)
    return frozenset(out)


_derived: tuple[int, dict[int, frozenset[Touch]], dict[str, frozenset[Touch]]] = (-1, {}, {})


def _tables() -> tuple[dict[int, frozenset[Touch]], dict[str, frozenset[Touch]]]:
    """Per declared step (by identity) and per other transition, its parts; derived again
    after a declaration changes (``steps.generation``)."""
    global _derived
    steps._declared()
    if _derived[0] != steps.generation:
        by_step = {id(a): _of_step(a) for a in steps.steps()}
        by_other = {n: _of_other(n, o) for n, o in OTHER_TRANSITIONS.items()}
        _derived = (steps.generation, by_step, by_other)
    return _derived[1], _derived[2]


def declared(w: Any, t: Any) -> Action | Other:
    """The declaration ``t`` fires in ``w``: the step the acting process (or reaper) is at,
    or the other transition of its name (a crash; an idle reaper's tick refused, which its
    tick step does not fire)."""
    if t.name != TransitionName.CRASH:
        p = w.proc(t.actor)
        if p is not None:
            return ACTIONS[p.pc]
        if t.actor in _reaper_names(w):
            r = w.reaper(t.actor)
            a = REAPER_ACTIONS[REAPER_TICK if r is None else r.pc]
            if t.name in a.fires:
                return a
    return OTHER_TRANSITIONS[t.name]


def _reaper_names(w: Any) -> tuple[str, ...]:
    from .names import reaper_names

    return reaper_names(w.config)


def kinds(w: Any, t: Any) -> frozenset[Touch]:
    """The parts ``t`` touches in ``w``, without their instances."""
    by_step, by_other = _tables()
    d = declared(w, t)
    if isinstance(d, Other):
        return by_other[t.name]
    return by_step[id(d)]


def footprint(w: Any, t: Any) -> Footprint:
    """``t``'s footprint in ``w`` (enabled there): each part with its instance."""
    run = t.arg("run")
    i = ANY if run is None else w.config.run_index(run)
    out = set()
    for k in kinds(w, t):
        if k in PER_RUN:
            out.add((k, i))
        elif k == Touch.SELF:
            out.add((k, t.actor))
        else:
            out.add((k, ANY))
    return frozenset(out)


def fields(fp: Footprint) -> frozenset[str]:
    """The World fields a footprint may change."""
    return frozenset(f for k, _ in fp for f in FIELDS[k])
