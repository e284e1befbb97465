"""The run window: a fixed pool of run slots in the model's World, admission into a free slot,
and the archive of finished runs.

The model's ``World`` refers to runs by index into a static ``Config.runs``. For scale the
simulator pre-sizes a pool of run *slots*: an arriving run takes a free slot (its ``RunSpec``
is swapped into the config: ``replace(world, config=...)``; the config takes no part in
equality), and a finished run (terminal row, no process or message refers to it) is
*archived*: its row, events, ledger entries, outcomes and marks are taken out of the world
for metrics and the slot is freed. Runs never interact through anything but shared processes
(workers, reaper, bus), so this is a window onto the same semantics, not a change of it:
every fired transition is still enabled in the world it fires in. An arrival that finds no
free slot waits (admission wait, reported separately from queue wait).

:class:`Window` keeps the live runs' records and traces: it updates them after each step
(:meth:`Window.account`) and hands a run's record, trace and projection over when the run is
archived (:meth:`Window.close`, then :meth:`Window.release` of its slot).
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import simpy
from failclosed.model import rules, steps, store
from failclosed.model.runtime import tick_selects
from failclosed.model.state import (
    AWAITING,
    ENQUEUE,
    RUNNING,
    TERMINAL,
    Proc,
    ReaperState,
    Row,
    RunSpec,
    World,
    replace,
)
from failclosed.model.transition import Transition
from failclosed.model.vocab import OutcomeName

from .invariants import project
from .records import Culprit, RunRecord, Step

# the reaper's own moves of a stale row (T11, T12)
_REAPER_SETTLES = (store.REQUEUE_STALE, store.DEAD_LETTER_STALE)

# the cost classes whose transitions are statements the runtime issues: a run-store
# statement, an audit insert, a dispatch onto the bus (the simulator counts them per run)
STATEMENT_COSTS = (steps.STORE, steps.AUDIT, steps.DISPATCH)


def transition_costs() -> dict[str, str]:
    """Each transition name's cost class, read from the step table as it is now: the cost of
    the process or reaper step that fires it (``Action.fires``), else that of a transition no
    step fires (``OTHER_TRANSITIONS``). Only the statement classes (``STATEMENT_COSTS``)."""
    out: dict[str, str] = {}
    for a in (*steps.ACTIONS.values(), *steps.REAPER_ACTIONS.values()):
        for name in a.fires:
            out.setdefault(name, a.cost)
    for name, o in steps.OTHER_TRANSITIONS.items():
        out.setdefault(name, o.cost)
    return {n: c for n, c in out.items() if c in STATEMENT_COSTS}


class Closed(NamedTuple):
    """A run taken out of the window (:meth:`Window.close`)."""

    culprit: Culprit  # its slot, id, record and trace
    projection: World  # the world restricted to it, when it was closed
    other_events: tuple  # the world's events and ledger entries without its own
    other_ledger: tuple


class Window:
    def __init__(self, env: simpy.Environment, slots: int):
        self.free = simpy.Store(env)  # free slot numbers
        for i in range(slots):
            self.free.put(i)
        self.slot_of: dict[str, int] = {}  # live run id -> slot
        self.records: dict[str, RunRecord] = {}  # every admitted run, by id
        self.live: dict[int, RunRecord] = {}  # slot -> the record of the run in it
        self.trace: dict[int, list[Step]] = {}  # slot -> the steps of the run in it
        self.archived = 0
        self.busy: dict[str, float] = {}  # provider + tool seconds of each live segment
        self.costs = transition_costs()  # transition name -> its statement class
        # statements no run's record holds: the reaper's SELECTs (T10, T14), by class
        self.unattributed: Counter[str] = Counter()

    def count_statement(self, w: World, w2: World, t: Transition, i: int | None, now: float) -> None:
        """Count ``t`` as a statement of the run in slot ``i`` (or of none) when its cost
        class is a statement's, and, for the sweep's T15 that matched (proposal P6), the
        seconds since the row's dispatch deadline passed."""
        cost = self.costs.get(t.name)
        if cost is None:
            return
        rec = self.live.get(i) if i is not None else None
        if rec is None:
            # a reaper tick issues T10 and, under P6, T14 (an errored T10: that one alone)
            tick = t.name == store.FIND_STALE_RUNNING and t.fault is None
            self.unattributed[cost] += len(tick_selects(w.config)) if tick else 1
            return
        rec.statements[cost] = rec.statements.get(cost, 0) + 1
        if t.name == store.REDISPATCH_QUEUED and t.fault is None and i is not None:
            r0, r1 = w.rows[i], w2.rows[i]
            if r0 is not None and r1 is not r0 and r1 is not None \
                    and r1.dispatch_deadline != r0.dispatch_deadline:
                rec.redispatch_waits.append(now - r0.dispatch_deadline)

    def admit(self, w: World, i: int, rs: RunSpec, arrival: float, now: float) -> World:
        """``w`` with the run ``rs`` in the free slot ``i`` (not started yet)."""
        runs = list(w.config.runs)
        runs[i] = rs
        config = replace(w.config, runs=tuple(runs))
        rec = RunRecord(id=rs.id, entry=rs.entry, arrival=arrival, spec=rs, admitted=now)
        self.records[rs.id] = rec
        self.live[i] = rec
        self.slot_of[rs.id] = i
        self.trace[i] = []
        return replace(w, config=config, started=_set(w.started, i, False))

    def finished(self, w: World, i: int) -> bool:
        """Whether the run in slot ``i`` is done: started, its row terminal (or never
        stored), and no process or message refers to it."""
        row = w.rows[i]
        if row is not None and row.status not in TERMINAL:
            return False
        if any(p.run == i for p in w.procs) or any(m.run == i for m in w.messages):
            return False
        return w.started[i]

    # -- after a step ------------------------------------------------------------------------
    def account(self, w: World, w2: World, t: Transition, i: int, fired: int, now: float) -> bool:
        """The trace and record of the run in slot ``i`` after its transition ``t`` (``w`` to
        ``w2``). True: the run has just come to await a decision (start its approver)."""
        self.trace[i].append(Step(fired, w2.clock, t, now))
        rec = self.live[i]
        r0, r1 = w.rows[i], w2.rows[i]
        awaiting = False
        if r1 is not None and r1 is not r0:
            awaiting = self._row_moved(rec, t, r0, r1, w2, i, now)
        if t.name == store.RENEW_LEASE and t.fault is None:
            rec.renewals += 1
        if len(w2.outcomes) > len(w.outcomes):
            self._ended(w2.outcomes[len(w.outcomes):])
        return awaiting

    @staticmethod
    def _row_moved(rec: RunRecord, t: Transition, r0: Row | None, r1: Row, w2: World, i: int, now: float) -> bool:
        if rec.first_claim is None and r1.status == RUNNING and t.name == store.CLAIM_QUEUED:
            rec.first_claim = now
        if r1.status in TERMINAL and rec.terminal_at is None:
            rec.terminal_at = now
        if (
            t.name in _REAPER_SETTLES  # not a run nested in the reaper
            and r0 is not None
            and r0.status == RUNNING
            and r1.status != RUNNING
            and any(p.run == i and p.kind != ENQUEUE for p in w2.procs)
        ):
            rec.reaped_alive += 1
        return r1.status in AWAITING and (r0 is None or r0.status not in AWAITING)

    def _ended(self, outcomes: tuple) -> None:
        """Segments that just ended: their outcomes, and their busy time (wasted when the
        segment lost its lease)."""
        for seg, run, kind, outcome in outcomes:
            rec = self.live.get(run)
            if rec is None:
                continue
            busy = self.busy.pop(seg, 0.0)
            if outcome == OutcomeName.LEASE_LOST:
                rec.wasted += busy
            rec.outcomes.append((seg, kind, outcome))

    def note_tick(self, w2: World, t: Transition, fired: int, now: float) -> None:
        """A reaper tick: a step of every run among its rows."""
        step = Step(fired, w2.clock, t, now)
        for run, *_ in w2.reaper(t.actor).rows:  # type: ignore[union-attr]
            tr = self.trace.get(run)
            if tr is not None:
                tr.append(step)

    def add_work(self, proc: Proc, work: float) -> None:
        """``work`` provider or tool seconds spent by ``proc``'s segment."""
        seg = proc.seg or proc.name
        self.busy[seg] = self.busy.get(seg, 0.0) + work
        rec = self.live.get(proc.run)
        if rec is not None:
            rec.busy += work

    # -- archive -----------------------------------------------------------------------------
    def close(self, w: World, i: int, final: bool = False) -> Closed:
        """Take the run in slot ``i`` out of the live runs: its record completed from ``w``
        (``final``: the simulation ends with the run unfinished)."""
        rec = self.live.pop(i)
        row = w.rows[i]
        rec.finished = not final
        if row is not None:
            rec.status, rec.reason, rec.error_class = row.status, row.termination_reason, row.error_class
            rec.requeues, rec.attempts = row.requeue_count, row.attempts
        else:
            rec.status, rec.reason = "never_stored", ""
        events, other_events = _split(w.events, i)
        ledger, other_ledger = _split(w.ledger, i)
        audited = {(e.turn, e.call, e.seg) for e in events if e.kind == "tool"}
        rec.applications = [
            (a.turn, a.call, a.tool, a.effect, a.seg, (a.turn, a.call, a.seg) in audited)
            for a in ledger
        ]
        rec.made = [(m.by, str(m.request), rules.may(w.config, m.by, m.request, i))
                    for m in w.made if m.run == i]
        pw = project(w, i, events=events, ledger=ledger)
        return Closed(Culprit(i, rec.id, rec, self.trace.pop(i)), pw, other_events, other_ledger)

    def release(self, w: World, closed: Closed) -> World:
        """``w`` without the closed run: its slot empty (started, so that no caller
        transition is offered for it) for the next arrival to take."""
        i, rid = closed.culprit.slot, closed.culprit.id
        suffix = ":" + rid
        w = replace(
            w,
            rows=_set(w.rows, i, None),
            events=closed.other_events,
            ledger=closed.other_ledger,
            outcomes=tuple(o for o in w.outcomes if o[1] != i),  # (segment, run, kind, OUTCOME)
            marks=frozenset(m for m in w.marks if not m.endswith(suffix)),
            cancels=_set(w.cancels, i, 0),
            decisions=_set(w.decisions, i, 0),
            resumes=_set(w.resumes, i, 0),
            started=_set(w.started, i, True),
            asked=frozenset(a for a in w.asked if a.run != i),
            made=tuple(m for m in w.made if m.run != i),
        )
        del self.slot_of[rid]
        self.archived += 1
        return w


def reaper_slot(r: ReaperState) -> int:
    """The run slot of the reaper's current row (a row: (run, pending_effect, queued_request,
    requeue_count))."""
    run, *_ = r.rows[r.idx]
    return run


def _split(items: tuple, i: int) -> tuple[tuple, tuple]:
    """``items`` (events or ledger entries) of run slot ``i``, and the others, in order."""
    mine: list = []
    rest: list = []
    for x in items:
        (mine if x.run == i else rest).append(x)
    return tuple(mine), (tuple(rest) if mine else items)


def _set(tup: tuple, i: int, v) -> tuple:
    lst = list(tup)
    lst[i] = v
    return tuple(lst)
