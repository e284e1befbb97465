"""The step table: every step a process of the runtime can take, declared once.

A process (a segment, an enqueue caller, the reaper) has a program counter, ``pc``: the label
of the step it takes next, named after what the step does (PlusCal style: one atomic step per
label). Each step is declared once, by the :func:`action` decorator on the function that is
its effect (``model/runtime.py``)::

    @action("stamp", fires="mark_pending_effect", faults=STORE_FAULTS, cost=STORE,
            place="7.3", then=("invoke",), args=("effect",), move=_stamp_move)
    def _h_stamp(w, p, t): ...

The declaration names

* ``pc``: the label (``Proc.pc``, or ``ReaperState.pc`` for the reaper's steps);
* ``fires``: the transition(s) the step fires, spelled as docs/RUNTIME.md spells the
  statement (a step that may fire one of several, e.g. ``suspend`` / ``suspend_for_input``,
  lists them all; ``move`` picks one);
* ``faults``: the fault kinds the step may take (``faults_now`` narrows them by state);
* ``cost``: what the step waits on in the simulator (a store statement, an audit insert, the
  provider, a tool, a dispatch, or nothing): the simulator draws its latency and its fault
  from the component this names;
* ``place``: the docs/RUNTIME.md section;
* ``then``: the labels the process may take next (``END``: the process ends); a test walks
  the model and checks every move it sees is declared;
* ``args``: the arguments the fired transition carries besides ``run`` and ``fault``;
* ``move``: the transition enabled at this label (default: ``fires[0]`` with ``run``);
* ``effect``: the function decorated, ``(world, proc, transition) -> world``.

Everything else is derived from this table: ``runtime.enabled`` (the guard is "the process is
at this label"), ``runtime.fire`` (the effect), the transition vocabulary
(``model.names.TRANSITIONS``, which the coverage reports and the scenario format read) and the
simulator's latency and fault classes. The transitions no process step fires (a caller's
commands, the clock, the bus, the operator) are declared in :data:`OTHER_TRANSITIONS` below.

docs/CHANGING.md is the recipe for adding a transition, a fault, a property or a switch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from . import store

# cost classes: the environment component a step waits on (the simulator's latency and fault)
STORE = "store"  # a store statement (T1-T13, find_run, max_sequence)
AUDIT = "audit"  # an audit insert (record_step, record_approval, record_input)
PROVIDER = "provider"  # the provider call
TOOL = "tool"  # a tool's invoke
DISPATCH = "dispatch"  # a dispatch onto the message bus
NONE = "none"  # local work (the observer hook)
COST_CLASSES = (STORE, AUDIT, PROVIDER, TOOL, DISPATCH, NONE)

END = "end"  # in ``then``: the process ends (returns its outcome)
PROCESS = "process"  # a segment or an enqueue caller (``Proc``)
REAPER = "reaper"  # the reaper (``ReaperState``)

STORE_FAULTS = ("store_error",)

# The labels and transitions the properties and the simulator name, each read from here:
PICK_UP = "run_queued"  # pick-up step 1 (6.2): a free worker's delivery, or nested in a sync dispatch
STAMP = "stamp"  # the before-tool hook's T5 stamp of a write (7.3)
REAPER_DECISION = "row"  # the reaper's per-row decision on its snapshot (10 branches 1-4)
REAPER_TICK = "tick"  # the reaper's SELECT (T10)
REAPER_REDISPATCH = "redispatch"  # proposal P6: the sweep's T15 on an overdue QUEUED row
REAPER_RESEND = "resend"  # proposal P6: the sweep's dispatch of that row
SETTLE = "settle"  # a segment's settle (T8 via 4.3), the last step of an arm of the ladder


@dataclass(frozen=True, slots=True)
class Fault:
    """A fault kind (RUNTIME 1.3): the environment component it breaks and what happens."""

    component: str  # a cost class, or "process" / "bus" / "clock"
    meaning: str


# Fault kinds a configuration may enable (``Config.faults``), each owned by the component it
# breaks; the steps that can take one name it in their ``faults``.
FAULTS: dict[str, Fault] = {
    "store_error": Fault(STORE, "a store statement errors: the caller gets false / null / [] (4.4)"),
    "audit_insert_fails": Fault(AUDIT, "record_step / record_approval / record_input stores nothing"),
    "ambiguous_commit": Fault(AUDIT, "the audit insert stores the event but reports failure"),
    "dispatch_fails": Fault(DISPATCH, "the message is not sent"),
    "crash": Fault("process", "a process dies at any point (1.3 process death)"),
    "provider_error": Fault(PROVIDER, "a provider call fails with a failure class (Config.provider_faults)"),
    "observer_error": Fault(NONE, "the step observer raises (7.2 step 1)"),
    "decode_error": Fault(STORE, "a stored payload fails to decode"),
    "tool_error": Fault(TOOL, "the tool raises; its effect does not land"),
    "duplicate_message": Fault("bus", "the bus delivers a message twice (6.3)"),
    "slow_operation": Fault("clock", "a provider or tool call outlives the lease (time passes while it runs)"),
    "pause": Fault("clock", "a process stalls outside a provider or tool call long enough to lose its lease"),
}


def fault_kinds() -> tuple[str, ...]:
    """Every fault kind a configuration may enable (``Config.faults``), in declaration order:
    :data:`FAULTS`' keys, read now (a kind declared at run time is in at once)."""
    return tuple(FAULTS)


@dataclass(frozen=True, slots=True)
class Action:
    """One step of a process: see the module docstring."""

    pc: str
    fires: tuple[str, ...]
    faults: tuple[str, ...]
    cost: str
    place: str
    effect: Callable[..., Any]
    move: Callable[..., Any] | None = None
    faults_now: Callable[..., tuple[str, ...]] | None = None
    then: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    actor: str = PROCESS
    # a step of a step boundary (7.2) before its event is stored: a tool's application is
    # not yet judged audited or not while its segment is at such a label
    boundary: bool = False


@dataclass(frozen=True, slots=True)
class Other:
    """A transition no process step fires: who fires it, its faults, place and arguments."""

    actor: str
    faults: tuple[str, ...]
    place: str
    args: tuple[str, ...] = ()


class _Table(dict):  # type: ignore[type-arg]
    """label -> step; every change of a declaration bumps :data:`generation`, so what is
    derived from the table (the vocabulary, the boundary labels) is derived again."""

    def __setitem__(self, key: str, value: Action) -> None:
        global generation
        generation += 1
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        global generation
        generation += 1
        super().__delitem__(key)

    def clear(self) -> None:
        global generation
        generation += 1
        super().clear()

    def update(self, *args: Any, **kw: Any) -> None:
        global generation
        generation += 1
        super().update(*args, **kw)


generation = 0  # bumped by every change of a step declaration (``_Table``)

@dataclass(frozen=True, slots=True)
class Actor:
    """One kind of actor (RUNTIME 1.2): the processes, the callers, the free workers, the bus,
    the reaper, the operator, the clock. ``answers(world, name)``: this actor acts under
    ``name`` now; ``moves(world, name, one_order, slots)``: its enabled transitions (``name``
    None: every actor of the kind; ``slots``: only those run slots', where it can narrow
    them); ``fire(world, transition)``: the effect; ``instances(config)``: the names the
    kind's actors act under in a configuration (its workers, its reapers, every process it
    can start, or the kind's one name), which every layer that lists actors reads (fairness,
    the scenario format, the simulator, the swimlanes). ``runtime.enabled`` lists the actors'
    moves in declaration order and ``runtime.fire`` dispatches on the first that answers."""

    kind: str
    place: str
    answers: Callable[..., bool]
    moves: Callable[..., list[Any]]
    fire: Callable[..., Any]
    instances: Callable[..., tuple[str, ...]]


# kind -> actor, in the order ``enabled`` lists their moves; filled by model/runtime.py
ACTORS: dict[str, Actor] = {}


def declare_actor(kind: str, *, place: str, answers: Callable[..., bool],
                  moves: Callable[..., list[Any]], fire: Callable[..., Any],
                  instances: Callable[..., tuple[str, ...]] | None = None) -> None:
    """Declare an actor kind (model/runtime.py does, once per kind, in listing order).
    ``instances``: the names its actors take in a configuration (default: one actor named
    as the kind, as the clock, the bus, the operator and the callers are)."""
    if kind in ACTORS:
        raise ValueError(f"actor {kind!r} is declared twice")
    if instances is None:
        def instances(config: Any) -> tuple[str, ...]:
            return (kind,)
    ACTORS[kind] = Actor(kind, place, answers, moves, fire, instances)


def actor_instances(config: Any) -> dict[str, tuple[str, ...]]:
    """Kind -> the names of its actors in ``config``, in declaration order."""
    _declared()
    return {k: a.instances(config) for k, a in ACTORS.items()}


# label -> step, per kind of process; filled by @action as model/runtime.py is imported
ACTIONS: dict[str, Action] = _Table()
REAPER_ACTIONS: dict[str, Action] = _Table()

OTHER_TRANSITIONS: dict[str, Other] = _Table({
    # callers (6.1, 11, 12)
    store.START_RUN: Other("caller", STORE_FAULTS, "T1"),
    store.ENQUEUE_RUN: Other("caller", STORE_FAULTS, "T2"),
    store.CANCEL: Other("caller", STORE_FAULTS, "T13"),
    "approve": Other("caller", (), "12.2", ("permitted", "configured")),
    "deny": Other("caller", (), "12.2", ("permitted", "configured")),
    "submit_input": Other("caller", (), "12.3", ("valid", "configured")),
    # a free worker takes a delivered message (async transport; 6.2 step 1)
    PICK_UP: Other("worker", STORE_FAULTS, "6.2 step 1 (async: a delivery)", ("not_before",)),
    # the environment and its faults (1.3)
    "advance_time": Other("clock", ("slow_operation", "pause"),
                          "conventions: one clock; 1.3 slow operation", ("to",)),
    "crash": Other("any process", (), "1.3 process death"),
    "duplicate_message": Other("bus", (), "1.3, 6.3", ("not_before",)),
    "remove_tool": Other("operator", (), "14.2 a tool removed between attempts", ("tool",)),
})


def action(
    pc: str, *, fires: str | tuple[str, ...], cost: str, place: str,
    faults: tuple[str, ...] = (), then: tuple[str, ...] = (), args: tuple[str, ...] = (),
    move: Callable[..., Any] | None = None,
    faults_now: Callable[..., tuple[str, ...]] | None = None, actor: str = PROCESS,
    boundary: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the decorated function as the effect of the step labelled ``pc``."""
    if cost not in COST_CLASSES:
        raise ValueError(f"step {pc!r}: cost {cost!r} is not one of {COST_CLASSES}")
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        raise ValueError(f"step {pc!r}: unknown fault kinds {unknown}; declare them in FAULTS")
    table = REAPER_ACTIONS if actor == REAPER else ACTIONS
    if pc in table:
        raise ValueError(f"step {pc!r} is declared twice")
    names = (fires,) if isinstance(fires, str) else tuple(fires)

    def declare(effect: Callable[..., Any]) -> Callable[..., Any]:
        table[pc] = Action(pc, names, tuple(faults), cost, place, effect, move, faults_now,
                           tuple(then), tuple(args), actor, boundary)
        return effect

    return declare


def _declared() -> None:
    """The steps are declared as model/runtime.py is imported: make sure it is."""
    if not ACTIONS:
        from . import runtime  # noqa: F401


def steps() -> Iterator[Action]:
    """Every declared step: the processes' first, then the reaper's."""
    _declared()
    yield from ACTIONS.values()
    yield from REAPER_ACTIONS.values()


_boundary: tuple[int, frozenset[str]] = (-1, frozenset())


def boundary_labels() -> frozenset[str]:
    """The labels of a step boundary before its event is stored (``boundary=True``): where a
    segment's tool application waits on its audit event. Derived again after a change."""
    global _boundary
    _declared()
    if _boundary[0] != generation:
        _boundary = (generation, frozenset(a.pc for a in ACTIONS.values() if a.boundary))
    return _boundary[1]


def costs() -> dict[str, str]:
    """Each process label's cost class, read from the table now (the simulator's components)."""
    _declared()
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
        _declared()
        if self._of != generation:
            self._derived = self._derive()
            self._of = generation
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
