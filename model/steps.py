"""The step table: every step a process of the runtime can take, declared once.

A process (a segment, an enqueue caller, the reaper) has a program counter, ``pc``: the label
of the step it takes next, named after what the step does (PlusCal style: one atomic step per
label). Each step is declared once, by the :func:`action` decorator on the function that is
its effect (``model/runtime.py``)::

    @action(Label.STAMP, fires=TransitionName.MARK_PENDING_EFFECT, faults=STORE_FAULTS,
            cost=STORE, place="7.3", then=(Label.INVOKE,), args=("effect",), move=_stamp_move)
    def _h_stamp(w, p, t): ...

Every name in it is a member of a closed vocabulary (model/vocab.py: ``Label``,
``TransitionName``, ``FaultKind``, ``ActorKind``), re-exported here; ``action`` parses each
into its vocabulary and refuses an undeclared one, naming it. The declaration names

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

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from . import store

# the closed vocabularies this table is written in (declared in model/vocab.py), re-exported
from .vocab import ActorKind as ActorKind
from .vocab import Closed, Keyed
from .vocab import FaultKind as FaultKind
from .vocab import Label as Label
from .vocab import TransitionName as TransitionName

# cost classes: the environment component a step waits on (the simulator's latency and fault)
STORE = "store"  # a store statement (T1-T13, find_run, max_sequence)
AUDIT = "audit"  # an audit insert (record_step, record_approval, record_input)
PROVIDER = "provider"  # the provider call
TOOL = "tool"  # a tool's invoke
DISPATCH = "dispatch"  # a dispatch onto the message bus
NONE = "none"  # local work (the observer hook)
COST_CLASSES = (STORE, AUDIT, PROVIDER, TOOL, DISPATCH, NONE)

END = "end"  # in ``then``: the process ends (returns its outcome)
PROCESS = ActorKind.PROCESS  # a segment or an enqueue caller (``Proc``)
REAPER = ActorKind.REAPER  # the reaper (``ReaperState``)

STORE_FAULTS = (FaultKind.STORE_ERROR,)

# The labels and transitions the properties and the simulator name, each read from here:
PICK_UP = Label.RUN_QUEUED  # pick-up step 1 (6.2): a free worker's delivery, or nested in a
# sync dispatch; also the name of the transition it fires (TransitionName.RUN_QUEUED)
STAMP = Label.STAMP  # the before-tool hook's T5 stamp of a write (7.3)
REAPER_DECISION = Label.ROW  # the reaper's per-row decision on its snapshot (10 branches 1-4)
REAPER_TICK = Label.TICK  # the reaper's SELECT (T10)
REAPER_REDISPATCH = Label.REDISPATCH  # proposal P6: the sweep's T15 on an overdue QUEUED row
REAPER_RESEND = Label.RESEND  # proposal P6: the sweep's dispatch of that row
SETTLE = Label.SETTLE  # a segment's settle (T8 via 4.3), the last step of an arm of the ladder


@dataclass(frozen=True, slots=True)
class Fault:
    """A fault kind (RUNTIME 1.3): the environment component it breaks and what happens."""

    component: str  # a cost class, or an actor kind (process, bus, clock)
    meaning: str


# Fault kinds a configuration may enable (``Config.faults``), each owned by the component it
# breaks; the steps that can take one name it in their ``faults``. Keyed by FaultKind: a key
# that is not a member is refused as it is stored.
F = FaultKind
FAULTS: dict[str, Fault] = Keyed(FaultKind, {
    F.STORE_ERROR: Fault(STORE, "a store statement errors: the caller gets false / null / [] (4.4)"),
    F.AUDIT_INSERT_FAILS: Fault(AUDIT, "record_step / record_approval / record_input stores nothing"),
    F.AMBIGUOUS_COMMIT: Fault(AUDIT, "the audit insert stores the event but reports failure"),
    F.DISPATCH_FAILS: Fault(DISPATCH, "the message is not sent"),
    F.CRASH: Fault(ActorKind.PROCESS, "a process dies at any point (1.3 process death)"),
    F.PROVIDER_ERROR: Fault(PROVIDER, "a provider call fails with a failure class (Config.provider_faults)"),
    F.OBSERVER_ERROR: Fault(NONE, "the step observer raises (7.2 step 1)"),
    F.DECODE_ERROR: Fault(STORE, "a stored payload fails to decode"),
    F.TOOL_ERROR: Fault(TOOL, "the tool raises; its effect does not land"),
    F.DUPLICATE_MESSAGE: Fault(ActorKind.BUS, "the bus delivers a message twice (6.3)"),
    F.SLOW_OPERATION: Fault(ActorKind.CLOCK, "a provider or tool call outlives the lease (time passes while it runs)"),
    F.PAUSE: Fault(ActorKind.CLOCK, "a process stalls outside a provider or tool call long enough to lose its lease"),
})


def injected(t: Any) -> str | None:
    """The fault kind a fired transition ``t`` injects, None for none: its fault branch (a
    provider failure class is ``FaultKind.PROVIDER_ERROR``), or the transition itself where a kind
    is a transition of its own (``crash``, ``duplicate_message``). The simulator counts its
    draws with it."""
    f = t.fault
    if f is None:
        return t.name if t.name in FAULTS else None
    return f if f in FAULTS else FaultKind.PROVIDER_ERROR


def fault_kinds() -> tuple[FaultKind, ...]:
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

    @property
    def cost(self) -> str:
        """What the transition waits on in the simulator: the component its fault kinds break
        (:data:`FAULTS`; the first that is a cost class), NONE when none is."""
        for k in self.faults:
            c = FAULTS[k].component
            if c in COST_CLASSES:
                return c
        return NONE


class _Table(Keyed):
    """label -> step (keyed by the members of a vocabulary: ``Keyed``); every change of a
    declaration bumps :data:`generation`, so what is derived from the table (the
    vocabulary, the boundary labels) is derived again."""

    def __init__(self, vocabulary: type[Closed], *args: Any) -> None:
        super().__init__(vocabulary, *args)

    def __setitem__(self, key: str, value: Any) -> None:
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

    def setdefault(self, key: str, default: Any = None) -> Any:
        global generation
        generation += 1
        return super().setdefault(key, default)


generation = 0  # bumped by every change of a step declaration (``_Table``)

class Fair(StrEnum):
    """How an actor kind is scheduled, as TLA+ writes fairness beside ``Next``: ``NONE`` (it
    may stop acting for ever), ``WEAK`` (WF: a step of it enabled without a break is
    eventually taken) or ``STRONG`` (SF: a step of it enabled again and again is eventually
    taken). The value is how a verdict line prints it."""

    NONE = "none"
    WEAK = "WF"
    STRONG = "SF"


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
    moves in declaration order and ``runtime.fire`` dispatches on the first that answers.

    Fairness (the liveness properties' assumption, spec/properties.py ``fairness``):
    ``fairness`` is the kind's; a fair kind has one class per instance (``fair_each``; or
    one class for the whole kind: some free worker takes some message), and ``takes(transition,
    instance)`` says whether a transition is a step of that instance the fairness covers (a
    fault is never one: the fault budget makes faults finite); ``says`` is what such a step
    is, for the class's statement."""

    kind: str
    place: str
    answers: Callable[..., bool]
    moves: Callable[..., list[Any]]
    fire: Callable[..., Any]
    instances: Callable[[Any], tuple[str, ...]]
    fairness: Fair = Fair.NONE
    takes: Callable[[Any, str], bool] | None = None
    says: str = ""
    fair_each: bool = True
    # an actor that acts in time: the instants it acts at in a world (the clock stops there)
    instants: Callable[[Any], Iterable[int]] | None = None

    def fair_instances(self, config: Any) -> tuple[str, ...]:
        """The instances a fairness class is formed for (none if the kind has no fairness;
        the kind alone if its fairness is of the kind as a whole)."""
        if self.fairness is Fair.NONE:
            return ()
        return self.instances(config) if self.fair_each else (self.kind,)


# kind -> actor, in the order ``enabled`` lists their moves; filled by model/runtime.py
ACTORS: dict[str, Actor] = Keyed(ActorKind)


def declare_actor(kind: str, *, place: str, answers: Callable[..., bool],
                  moves: Callable[..., list[Any]], fire: Callable[..., Any],
                  instances: Callable[[Any], tuple[str, ...]] | None = None,
                  fairness: Fair = Fair.NONE,
                  takes: Callable[[Any, str], bool] | None = None, says: str = "",
                  fair_each: bool = True,
                  instants: Callable[[Any], Iterable[int]] | None = None) -> None:
    """Declare an actor kind (model/runtime.py does, once per kind, in listing order), with
    its instances (default: one actor named as the kind, as the clock, the bus, the operator
    and the callers are) and its fairness (see :class:`Actor`)."""
    kind = ActorKind.of(kind, "declare_actor:")
    if kind in ACTORS:
        raise ValueError(f"actor {kind!r} is declared twice")
    if fairness is not Fair.NONE and takes is None:
        raise ValueError(f"actor {kind!r}: fairness {fairness} needs takes=, the steps it covers")
    if instances is None:
        def instances(config: Any) -> tuple[str, ...]:
            return (kind,)
    ACTORS[kind] = Actor(kind, place, answers, moves, fire, instances, fairness, takes, says,
                         fair_each, instants)


def actor_instances(config: Any) -> dict[str, tuple[str, ...]]:
    """Kind -> the names of its actors in ``config``, in declaration order."""
    _declared()
    return {k: a.instances(config) for k, a in ACTORS.items()}


# label -> step, per kind of process; filled by @action as model/runtime.py is imported
ACTIONS: dict[str, Action] = _Table(Label)
REAPER_ACTIONS: dict[str, Action] = _Table(Label)

N, A = TransitionName, ActorKind
OTHER_TRANSITIONS: dict[str, Other] = _Table(TransitionName, {
    # callers (6.1, 11, 12)
    store.START_RUN: Other(A.CALLER, STORE_FAULTS, "T1"),
    # (without a transport the enqueue fails up front: its outcome, 6.4)
    store.ENQUEUE_RUN: Other(A.CALLER, STORE_FAULTS, "T2"),
    # (``by``: a named principal's request, RunSpec.requests; none: the run's owner's. A
    # request is made once (``asked``), enabled once its run is started; what a cancel or a
    # read returned when it changed or read nothing is an outcome, what it changed or read a
    # ``made``)
    store.CANCEL: Other(A.CALLER, STORE_FAULTS, "T13; 11 step 1", ("by",)),
    N.APPROVE: Other(A.CALLER, (), "12.2", ("permitted", "configured", "by")),
    N.DENY: Other(A.CALLER, (), "12.2", ("permitted", "configured", "by")),
    N.SUBMIT_INPUT: Other(A.CALLER, (), "12.3", ("valid", "configured", "by")),
    # a principal's reads: they change nothing but what it has seen (17)
    N.READ_STATUS: Other(A.CALLER, (), "16.18 the status view", ("by",)),
    N.READ_EVENTS: Other(A.CALLER, (), "16.18 the events read", ("by", "after_sequence")),
    # a free worker takes a delivered message (async transport; 6.2 step 1)
    N.RUN_QUEUED: Other(A.WORKER, STORE_FAULTS, "6.2 step 1 (async: a delivery)", ("not_before",)),
    # the environment and its faults (1.3); the clock reads every lease and every process's
    # label (which lapse is a slow operation, which a pause)
    N.ADVANCE_TIME: Other(A.CLOCK, (F.SLOW_OPERATION, F.PAUSE),
                          "conventions: one clock; 1.3 slow operation", ("to",)),
    N.CRASH: Other("any process", (), "1.3 process death"),
    N.DUPLICATE_MESSAGE: Other(A.BUS, (), "1.3, 6.3", ("not_before",)),
    N.REMOVE_TOOL: Other(A.OPERATOR, (), "14.2 a tool removed between attempts", ("tool",)),
    # the runtime's console commands (model/commands.py: their outcomes' exit codes); the
    # operator's next cancel is the one after those ended (``commands``), a refused tick is
    # a reaper's while it is idle
    N.CANCEL_COMMAND: Other(A.OPERATOR, STORE_FAULTS, "11 the cancel command; T13", ("uuid",)),
    N.TICK_REFUSED: Other(A.REAPER, (), "6.4 no transport: the reaper's tick fails before T10"),
})


def action(
    pc: str, *, fires: str | tuple[str, ...], cost: str, place: str,
    faults: tuple[str, ...] = (), then: tuple[str, ...] = (), args: tuple[str, ...] = (),
    move: Callable[..., Any] | None = None,
    faults_now: Callable[..., tuple[str, ...]] | None = None, actor: str = PROCESS,
    boundary: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the decorated function as the effect of the step labelled ``pc``. Every name
    is parsed into its vocabulary (model/vocab.py) here: the label, the transitions it fires,
    its faults, the labels it moves to and its actor; an undeclared one is refused, named."""
    pc = Label.of(pc, "@action:")
    where = f"step {pc!r}:"
    if cost not in COST_CLASSES:
        raise ValueError(f"{where} cost {cost!r} is not one of {COST_CLASSES}")
    kinds = tuple(FaultKind.of(f, where) for f in faults)
    unknown = [f for f in kinds if f not in FAULTS]
    if unknown:
        raise ValueError(f"{where} unknown fault kinds {unknown}; declare them in FAULTS")
    actor = ActorKind.of(actor, where)
    names = tuple(TransitionName.of(n, where)
                  for n in ((fires,) if isinstance(fires, str) else fires))
    nexts = tuple(x if x == END else Label.of(x, where) for x in then)
    table = REAPER_ACTIONS if actor == REAPER else ACTIONS
    if pc in table:
        raise ValueError(f"step {pc!r} is declared twice")

    def declare(effect: Callable[..., Any]) -> Callable[..., Any]:
        table[pc] = Action(pc, names, kinds, cost, place, effect, move, faults_now,
                           nexts, tuple(args), actor, boundary)
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
