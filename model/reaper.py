"""The reaper (RUNTIME 10): a tick's SELECT (T10, and T14 under proposal P6), then per row of
its snapshot a decision (T11 requeue or T12 dead-letter), a dispatch of a requeued row, and
under P6 the overdue sweep's redispatch (T15) and resend. Each step one function; the table
at the foot. Its instants: the overdue deadlines of queued rows (P6)."""

from __future__ import annotations

import itertools

from . import identities as names
from . import rules, store
from .frames import T, can, dispatch_queued, reaper_next, row_label, step_faults, with_faults
from .state import (
    FAILED,
    NO_TRANSPORT,
    QUEUED,
    CommandResult,
    Config,
    OverdueRow,
    ReaperState,
    StaleRow,
    World,
    replace,
)
from .table import (
    DISPATCH,
    END,
    REAPER,
    REAPER_DECISION,
    REAPER_REDISPATCH,
    REAPER_RESEND,
    REAPER_TICK,
    STORE,
    STORE_FAULTS,
    Action,
    Step,
    table,
)
from .transition import Transition
from .vocab import FaultKind, Label, OutcomeName, TransitionName


def _queue_on(w: World) -> bool:
    pol = w.config.policy
    return pol.reaper and pol.queue


def answers(w: World, name: str) -> bool:
    """A declared reaper acts under its name (``names.reaper_names``)."""
    return name in names.reaper_names(w.config)


def instances(config: Config) -> tuple[str, ...]:
    """The configuration's reapers (``Config.reapers``)."""
    return names.reaper_names(config)


def moves(w: World, name: str | None, one_order: bool, slots: list[int] | None) -> list[Transition]:
    """Each declared reaper's moves (``names.reaper_names``: the configuration's count), or
    those of the reaper ``name``."""
    if not _queue_on(w):
        return []
    out: list[Transition] = []
    for n in names.reaper_names(w.config) if name is None else (name,):
        out.extend(_reaper_moves(w, n, one_order))
    return out


def _reaper_moves(w: World, name: str, one_order: bool = False) -> list[Transition]:
    r = w.reaper(name)
    if r is None:
        if w.config.transport == NO_TRANSPORT:  # 6.4: the tick fails before its SELECT
            return [T(TransitionName.TICK_REFUSED, name)]
        return _tick_moves(w, name, one_order)
    if r.pc == Label.NESTED:
        return []  # sync: blocked in its dispatch; the nested segment's moves are a proc's
    else:
        a = REAPER_ACTIONS[r.pc]
        run = r.rows[r.idx][0]
        t = a.move(w, r) if a.move is not None else T(a.fires[0], name, run=w.run_id(run))
        out = with_faults(w, t, step_faults(w, a, r))
    if can(w, FaultKind.CRASH):
        out.append(T(TransitionName.CRASH, name))
    return out


def _tick_moves(w: World, name: str, one_order: bool) -> list[Transition]:
    """T10, and the orders it may return rows of equal lease in (no defined order)."""
    kinds = step_faults(w, REAPER_ACTIONS[REAPER_TICK], None)
    orders, tied = stale_orders(w, one_order)
    if not tied:
        return with_faults(w, T(store.FIND_STALE_RUNNING, name), kinds)
    out = [T(store.FIND_STALE_RUNNING, name, order=",".join(o)) for o in orders]
    for k in kinds:
        if can(w, k, store.FIND_STALE_RUNNING):
            out.append(T(store.FIND_STALE_RUNNING, name, fault=k))
    # an idle reaper's crash changes nothing but the fault budget; it is listed only here
    # (kept as the model has always had it: the recorded behaviour digests include it)
    if can(w, FaultKind.CRASH):
        out.append(T(TransitionName.CRASH, name))
    return out


def stale_orders(w: World, first_only: bool = False) -> tuple[list[tuple[str, ...]], bool]:
    """The orders T10 may return the stale rows in: ascending ``lease_expires``, ties in any
    order, cut at the reaper's limit; and whether there is more than one. Only the tie groups
    that reach into the first ``limit`` rows matter, and of a group the cut splits only which
    of its rows come first: its r-permutations (the same orders in the same sequence as all
    permutations with duplicates dropped). ``first_only``: the first order (ties by slot)."""
    stale = sorted(
        (r.lease_expires, i) for i, r in enumerate(w.rows)
        if r is not None and store.stale(w, r, w.clock)  # stale() is False for no row
    )
    if not stale:
        return [()], False
    limit = w.config.reaper_limit
    groups = []
    pos = 0
    for _, g in itertools.groupby(stale, key=lambda t: t[0]):
        if pos >= limit:
            break
        members = list(g)
        groups.append((members, min(len(members), limit - pos)))
        pos += len(members)
    tied = any(len(g) > 1 for g, _ in groups)
    if not tied or first_only:
        return [tuple(w.run_id(i) for _, i in stale[:limit])], tied
    perms = itertools.product(*(itertools.permutations(g, r) for g, r in groups))
    return [tuple(w.run_id(i) for g in combo for _, i in g) for combo in perms], True


def _reaper_branch(w: World, pending: str, has_request: bool, count: int) -> tuple[str, str | None]:
    """Section 10 branches 1-4, decided on the SELECT snapshot."""
    pol = w.config.policy
    if pol.write_fence and not rules.may_retry_after_fence(pending, pol):
        return store.DEAD_LETTER_STALE, "not_retryable"
    if pol.reaper_no_request_branch and not has_request:
        return store.DEAD_LETTER_STALE, "not_retryable"
    if count >= w.config.constants.MAX_REQUEUES:
        return store.DEAD_LETTER_STALE, "retries_exhausted"
    return store.REQUEUE_STALE, None


def fire(w: World, t: Transition) -> World:
    """The reaper's step at its label (its tick when idle), its refused tick, or its death."""
    if t.name == TransitionName.CRASH:
        return w.set_reaper(t.actor, None)
    if t.name == TransitionName.TICK_REFUSED:
        return _tick_refused(w, t.actor)
    r = w.reaper(t.actor)
    if r is None:
        return REAPER_ACTIONS[REAPER_TICK].effect(w, None, t)
    return REAPER_ACTIONS[r.pc].effect(w, r, t)


def tick_selects(config: Config) -> tuple[TransitionName, ...]:
    """The SELECTs one reaper tick (its transition ``find_stale_running``) issues, in order:
    T10, then, under proposal P6, T14 in the same read transaction."""
    if config.policy.overdue_queued_redispatched:
        return (store.FIND_STALE_RUNNING, store.FIND_OVERDUE_QUEUED)
    return (store.FIND_STALE_RUNNING,)


def tick(w: World, r: None, t: Transition) -> World:
    if t.fault:
        return w  # [] : the tick does nothing
    config = w.config
    rows: tuple[StaleRow | OverdueRow, ...] = store.find_stale_running(w, w.clock, config.reaper_limit)
    order = t.arg("order")
    if order is not None:  # ties in lease_expires: the order this transition names
        rows = tuple(
            StaleRow(i, row.pending_effect, row.queued_request, row.requeue_count)
            for i, row in ((i, w.rows[i]) for i in map(config.run_index, order.split(",")))
            if row is not None  # always: the order names stale rows (T10)
        )
    if store.FIND_OVERDUE_QUEUED in tick_selects(config):
        # proposal P6: T14 in the tick's read transaction (one snapshot with T10); its rows
        # follow the stale ones, each redispatched in turn (T15, then a dispatch)
        rows += store.find_overdue_queued(w, w.clock, config.reaper_limit)
    if not rows:
        return w
    return w.set_reaper(t.actor, ReaperState(name=t.actor, pc=row_label(rows[0]), now=w.clock,
                                             rows=rows))


def _tick_refused(w: World, reaper: str) -> World:
    """6.4: without a transport the reaper's command fails before its SELECT (no T10, no
    row touched; NO_MESSAGE_BUS). Recorded once per reaper: each later tick is refused the
    same way and changes nothing."""
    done = CommandResult(reaper, TransitionName.TICK_REFUSED, "", OutcomeName.NO_MESSAGE_BUS)
    return w if done in w.commands else replace(w, commands=w.commands + (done,))


def _row_move(w: World, r: ReaperState) -> Transition:
    row = r.rows[r.idx]
    assert isinstance(row, StaleRow)  # the decision's label is a stale row's (row_label)
    run, pending, has_request, count = row
    name, reason = _reaper_branch(w, pending, has_request, count)
    return T(name, r.name, run=w.run_id(run), reason=reason)


def decide_row(w: World, r: ReaperState, t: Transition) -> World:
    if t.fault:
        return reaper_next(w, r)
    run = r.rows[r.idx][0]
    if t.name == store.REQUEUE_STALE:
        w, ok = store.requeue_stale(w, run, r.now)
        if ok:
            return w.set_reaper(r.name, replace(r, pc=Label.DISPATCH))
        return reaper_next(w, r)
    w, ok = store.dead_letter_stale(w, run, r.now, t.arg("reason"))
    return reaper_next(w, r)


def dispatch(w: World, r: ReaperState, t: Transition) -> World:
    if t.fault:
        if w.config.policy.reaper_dispatch_failclosed:
            return w.set_reaper(r.name, replace(r, pc=Label.MAX_SEQUENCE))
        return reaper_next(w, r)
    w, nested = dispatch_queued(w, r.rows[r.idx][0], r.name, w.clock)
    if nested:  # sync: the reclaimed run executes inside the reaper's process
        return w.set_reaper(r.name, replace(r, pc=Label.NESTED))
    return reaper_next(w, r)


def max_sequence(w: World, r: ReaperState, t: Transition) -> World:
    if t.fault:
        return reaper_next(w, r)
    return w.set_reaper(r.name, replace(r, pc=Label.SETTLE))


def _settle_move(w: World, r: ReaperState) -> Transition:
    return T(TransitionName.SETTLE_FAILED, r.name, run=w.run_id(r.rows[r.idx][0]), reason="provider_failed")


def settle(w: World, r: ReaperState, t: Transition) -> World:
    if not t.fault:
        w, _ = store.finish_run(w, r.rows[r.idx][0], FAILED, "provider_failed", "DispatchFailed")
    return reaper_next(w, r)


def redispatch(w: World, r: ReaperState, t: Transition) -> World:
    """Proposal P6: T15 moves an overdue row's deadline on; matched, the row is dispatched
    again. A store error, or a row claimed or settled since T14, skips it."""
    ok = False
    if not t.fault:
        w, ok = store.redispatch_queued(w, r.rows[r.idx][0], r.now)
    if ok:
        return w.set_reaper(r.name, replace(r, pc=REAPER_RESEND))
    return reaper_next(w, r)


def resend(w: World, r: ReaperState, t: Transition) -> World:
    """Proposal P6: dispatch ``queued(uuid)`` without a delay. A failed dispatch settles
    nothing: the row stays QUEUED with its new deadline and the next sweep after it tries
    again."""
    if t.fault:
        return reaper_next(w, r)
    w, nested = dispatch_queued(w, r.rows[r.idx][0], r.name, w.clock)
    if nested:  # sync: the run executes inside the reaper's process
        return w.set_reaper(r.name, replace(r, pc=Label.NESTED))
    return reaper_next(w, r)


def takes(t: Transition, name: str) -> bool:
    """Fairness: a step of the reaper ``name`` without a fault (tick, per-row decision, dispatch)."""
    return t.actor == name and t.fault is None and t.name != TransitionName.CRASH


def instants(w: World) -> list[int]:
    """Proposal P6: the first instant a QUEUED row with no message on the bus is overdue
    (``store.overdue``). The model assumes the bus delivers a message within the grace of its
    deadline, so a row whose message is pending waits on its delivery, not on its deadline (a
    late second delivery is the fault ``duplicate_message``); time moved on for another
    reason still lets the sweep find such a row overdue."""
    if not w.config.policy.overdue_queued_redispatched:
        return []
    now = w.clock
    pending = {m.run for m in w.messages}
    return [
        row.dispatch_deadline + 1 for i, row in enumerate(w.rows)
        if row is not None and row.status == QUEUED and row.dispatch_deadline > 0
        and i not in pending and row.dispatch_deadline + 1 > now
    ]


# the step table of this module: label, the step, what it fires, its faults, cost, place, then
STEPS: tuple[Action, ...] = (
    Step(REAPER_TICK, tick,
         actor=REAPER, fires=store.FIND_STALE_RUNNING,
         faults=(FaultKind.STORE_ERROR, FaultKind.DECODE_ERROR), cost=STORE,
         then=(REAPER_DECISION, REAPER_REDISPATCH, END), args=("order",), place="T10; 10"),
    Step(REAPER_DECISION, decide_row,
         actor=REAPER, fires=(store.REQUEUE_STALE, store.DEAD_LETTER_STALE), faults=STORE_FAULTS,
         cost=STORE, then=(Label.DISPATCH, REAPER_DECISION, REAPER_REDISPATCH, END),
         args=("reason",), move=_row_move, place="T11, T12; 10 branches 1-4"),
    Step(Label.DISPATCH, dispatch,
         actor=REAPER, fires=TransitionName.DISPATCH, faults=(FaultKind.DISPATCH_FAILS,),
         cost=DISPATCH,
         then=(Label.MAX_SEQUENCE, Label.NESTED, REAPER_DECISION, REAPER_REDISPATCH, END),
         place="10 branch 5"),
    Step(Label.MAX_SEQUENCE, max_sequence,
         actor=REAPER, fires=TransitionName.MAX_SEQUENCE, faults=STORE_FAULTS, cost=STORE,
         then=(Label.SETTLE, REAPER_DECISION, REAPER_REDISPATCH, END),
         place="4.2; 10 branch 5 (fail-closed dispatch)"),
    Step(Label.SETTLE, settle,
         actor=REAPER, fires=TransitionName.SETTLE_FAILED, faults=STORE_FAULTS, cost=STORE,
         then=(REAPER_DECISION, REAPER_REDISPATCH, END), args=("reason",), move=_settle_move,
         place="T8 via 4.3; 10 branch 5 (fail-closed dispatch)"),
    Step(REAPER_REDISPATCH, redispatch,
         actor=REAPER, fires=store.REDISPATCH_QUEUED, faults=STORE_FAULTS, cost=STORE,
         then=(REAPER_RESEND, REAPER_DECISION, REAPER_REDISPATCH, END),
         place="proposal P6 (the overdue sweep's guarded update)"),
    Step(REAPER_RESEND, resend,
         actor=REAPER, fires=TransitionName.DISPATCH, faults=(FaultKind.DISPATCH_FAILS,),
         cost=DISPATCH, then=(Label.NESTED, REAPER_DECISION, REAPER_REDISPATCH, END),
         place="proposal P6 (the overdue sweep's dispatch)"),
)
REAPER_ACTIONS: dict[str, Action] = table(STEPS)  # label -> step
