"""What every process of the model is made of: its moves with their fault branches, its frames
(a process starts, goes to a label, ends, dies; a handler nested in a sync dispatch returns to
its dispatcher), and the dispatch of a queued run (6.3), which a segment, an enqueue caller
and the reaper share. The actor modules (model/segment.py, model/pickup.py, model/resume.py,
model/reaper.py, model/caller.py, ...) are written in these; nothing here is a step."""

from __future__ import annotations

from . import identities as names
from .rules import INPUT_REQUIRED
from .state import (
    ENQUEUE,
    SYNC,
    WORKER,
    Made,
    Message,
    Outcome,
    OverdueRow,
    Proc,
    ReaperState,
    StaleRow,
    WorkerPart,
    World,
    replace,
)
from .table import OTHER_TRANSITIONS, PICK_UP, REAPER_DECISION, REAPER_REDISPATCH, Action
from .transition import Transition
from .vocab import Decision, FaultKind, Label, OutcomeName

T = Transition.make


def can(w: World, kind: str, op: str = "") -> bool:
    spec = w.config
    if w.faults <= 0 or kind not in spec.faults:
        return False
    if kind == FaultKind.STORE_ERROR and spec.fault_ops is not None and op not in spec.fault_ops:
        return False
    return True


def with_faults(w: World, t: Transition, kinds: tuple[str, ...]) -> list[Transition]:
    """``t`` and its fault branches (a provider error branches once per failure class)."""
    out = [t]
    for k in kinds:
        if can(w, k, t.name):
            if k == FaultKind.PROVIDER_ERROR:
                out.extend(_faulted(t, c) for c in w.config.provider_faults)
            else:
                out.append(_faulted(t, k))
    return out


def _faulted(t: Transition, fault: str) -> Transition:
    return _new_t(Transition, (t.name, t.actor, tuple(sorted(t.args + (("fault", fault),)))))


_new_t = tuple.__new__  # Transition(...) without the NamedTuple's Python-level __new__


def step_faults(w: World, a: Action, state: Proc | ReaperState | None) -> tuple[str, ...]:
    """The fault kinds step ``a`` may take now: its ``faults``, narrowed by its ``faults_now``
    for this state (``state``: the process at the step, the reaper's state, or None for the
    tick of an idle reaper). The moves below and the simulator's draws read it."""
    return a.faults if a.faults_now is None else a.faults_now(w, state)


def other_faults(name: str) -> tuple[str, ...]:
    """The fault kinds a transition no process step fires may take (``OTHER_TRANSITIONS``,
    where they are declared: the simulator draws them from there too)."""
    return OTHER_TRANSITIONS[name].faults


def input_side(p: Proc) -> bool:
    """Which suspend/claim statement a suspend or resume uses."""
    return p.error == INPUT_REQUIRED or p.decision == Decision.INPUT


def call_name(w: World, p: Proc) -> str:
    return w.config.runs[p.run].answer(p.turn).calls[p.call]


def add_message(w: World, m: Message) -> World:
    return replace(w, messages=tuple(sorted(w.messages + (m,), key=lambda m: (m.run, m.not_before))))


def remove_message(w: World, m: Message) -> World:
    msgs = list(w.messages)
    msgs.remove(m)
    return replace(w, messages=tuple(msgs))


def set_tuple(tup: tuple, i: int, v) -> tuple:
    lst = list(tup)
    lst[i] = v
    return tuple(lst)


def end(w: World, p: Proc, outcome: str | None) -> World:
    """``p`` returns ``outcome`` (None: NONE, or an enqueue caller). A handler run nested in a
    sync dispatch returns to its dispatcher, which goes on from the step after the dispatch."""
    w = drop(w, p, outcome)
    if p.outer or names.is_reaper(p.name):
        return _after_nested(w, p)
    return w


def drop(w: World, p: Proc, outcome: str | None) -> World:
    procs = tuple(q for q in w.procs if q.name != p.name)
    w = replace(w, procs=procs)
    if outcome is not None and p.kind != ENQUEUE:
        w = replace(w, outcomes=w.outcomes + (Outcome(p.seg or p.name, p.run, p.kind, outcome),))
    return w


def spawn(w: World, p: Proc) -> World:
    """Add a new process. ``procs`` is a set kept sorted by name, so two histories that
    start the same processes in a different order reach the same world."""
    procs = w.procs
    k = 0
    while k < len(procs) and procs[k].name < p.name:
        k += 1
    return replace(w, procs=procs[:k] + (p,) + procs[k:])


def _after_nested(w: World, p: Proc) -> World:
    """6.3 sync: the handler nested in a dispatch has finished. Recovery's dispatch (9 step
    7) then returns REQUEUED, enqueue (6.1 step 5) returns, the reaper (10 branch 5) goes on
    with its next row. Each is local work after the handler, folded into this transition."""
    if p.outer:
        up = replace(p.outer[0], outer=p.outer[1:])
        return end(w, up, OutcomeName.REQUEUED if up.kind == WORKER else None)
    r = w.reaper(p.name)
    if r is not None and r.pc == Label.NESTED:
        return reaper_next(w, r)
    return w


def die(w: World, p: Proc) -> World:
    """1.3 process death: no arm runs, rows stay. On the sync transport the process is one
    process: the dispatchers it is nested in die with it (each frame ends DIED), and so
    does a reaper whose dispatch runs it."""
    w = drop(w, p, "DIED")
    for f in p.outer:
        w = drop(w, f, "DIED")
    if names.is_reaper(p.name):  # sync: the reaper whose dispatch runs the segment
        w = w.set_reaper(p.name, None)
    return w


def put(w: World, p: Proc) -> World:
    return w.set_proc(p)


def made(w: World, m: Made) -> World:
    """Record what a named principal's request changed or read (the access properties)."""
    return replace(w, made=w.made + (m,))


def cap(w: World, i: int) -> int:
    c = w.config.runs[i].cap
    k = w.config.constants
    return k.DEFAULT_ROUND_CAP if c is None else min(c, k.MAX_ITERATIONS)


def pick_up(w: World, i: int, process: str, pc: str, outer: tuple[Proc, ...] = ()) -> Proc:
    """A queued-worker pick-up in ``process``, with that process's ``worker:`` identity (5:
    on the sync transport a dispatcher's nested pick-up uses it too)."""
    identity = names.worker_identity(process)
    pol = w.config.policy
    return Proc(
        name=process, kind=WORKER, run=i, pc=pc, seg=process, identity=identity,
        owner=identity if pol.heartbeat else "",
        guard=identity if pol.owner_guarded_settle_workers else "",
        cap=cap(w, i), outer=outer, part=WorkerPart(process, hook=pol.retry),
    )


def dispatch_queued(w: World, i: int, process: str, not_before: int,
                     outer: tuple[Proc, ...] = ()) -> tuple[World, bool]:
    """Dispatch ``queued(uuid)`` (6.1 step 4, 9 step 7, 10 branch 5). Async: a message with
    ``not_before``; the dispatcher goes on. Sync (6.3): the handler runs inline in the
    dispatching ``process``, ignoring the delay: its pick-up starts at step 1 and ``outer``
    (the dispatcher's frames) wait for it. Returns whether the dispatcher now waits."""
    if w.config.transport != SYNC:
        return add_message(w, Message(i, not_before)), False
    p = pick_up(w, i, process, PICK_UP, outer)
    if w.proc(process) is not None:
        return w.set_proc(p), True
    return spawn(w, p), True


def row_label(row: StaleRow | OverdueRow) -> Label:
    """The reaper's label for a row of its snapshot: a stale row's decision (T11 / T12), or
    an overdue row's redispatch (T15, P6)."""
    return REAPER_REDISPATCH if isinstance(row, OverdueRow) else REAPER_DECISION


def reaper_next(w: World, r: ReaperState) -> World:
    """Reaper ``r`` goes on with its next row, or its tick ends after the last."""
    if r.idx + 1 >= len(r.rows):
        return w.set_reaper(r.name, None)
    return w.set_reaper(r.name, replace(r, pc=row_label(r.rows[r.idx + 1]), idx=r.idx + 1))
