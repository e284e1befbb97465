"""The store statements T1..T13 (RUNTIME section 4), as pure functions on the world.

Each is one atomic conditional statement: if the guard holds every listed field is written
at once; if the guard fails nothing changes. A store error is decided by the caller (the
transition's fault branch) and never reaches these functions: the caller then gets the
same ``False`` a failed guard gives (4.4).

Every function returns ``(world, matched)``. The ghost fields (``Row.epoch``,
``Row.attempts``, ``World.marks``) record what the spec needs and are read by no guard.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .identities import caller_identity
from .state import (
    CANCELLED,
    QUEUED,
    RUNNING,
    TERMINAL,
    WAITING_FOR_APPROVAL,
    WAITING_FOR_INPUT,
    Event,
    OverdueRow,
    Proc,
    Row,
    StaleRow,
    World,
    replace,
)
from .vocab import Keyed, Mark, TransitionName

# The names of the statements other modules name a transition by (the table at the end is
# keyed by every statement's name, a TransitionName member): read them here.
START_RUN = TransitionName.START_RUN
ENQUEUE_RUN = TransitionName.ENQUEUE_RUN
CLAIM_QUEUED = TransitionName.CLAIM_QUEUED
RENEW_LEASE = TransitionName.RENEW_LEASE
MARK_PENDING_EFFECT = TransitionName.MARK_PENDING_EFFECT
FIND_STALE_RUNNING = TransitionName.FIND_STALE_RUNNING
REQUEUE_STALE = TransitionName.REQUEUE_STALE
DEAD_LETTER_STALE = TransitionName.DEAD_LETTER_STALE
CANCEL = TransitionName.CANCEL
FIND_OVERDUE_QUEUED = TransitionName.FIND_OVERDUE_QUEUED
REDISPATCH_QUEUED = TransitionName.REDISPATCH_QUEUED


def _lease(w: World) -> int:
    return w.clock + w.config.constants.LEASE_SECONDS


def owner_guard(row: Row | None, me: str, w: World | None = None) -> bool:
    """``status = 'running' AND claimed_by = <me>`` (the mutant
    mutant_owner_guard_ignores_claim drops the second conjunct)."""
    if w is not None and w.config.policy.mutant_owner_guard_ignores_claim:
        return row is not None and row.status == RUNNING
    return row is not None and row.status == RUNNING and row.claimed_by == me


def lapses_at(w: World, row: Row) -> int:
    """The first instant at which the lease of the RUNNING ``row`` has lapsed: the instant
    :func:`stale` turns true for a leased row (T10's ``lease_expires < now``, strict). The
    clock's next instants and the model's time bound are read from here
    (model/process.py ``instants``, the clock's next instants)."""
    return row.lease_expires + 1


def stale(w: World, row: Row | None, now: int) -> bool:
    """The stale predicate of T10-T12: ``status = 'running' AND lease_expires > 0 AND
    lease_expires < now`` (strict); the one definition the reaper's guard, the clock, the
    properties and the scenarios read."""
    return (
        row is not None and row.status == RUNNING and row.lease_expires > 0
        and now >= lapses_at(w, row)
    )


def _ghost_owner(w: World, i: int, p: Proc | None, what: Mark) -> World:
    """Record a mutation by a segment that no longer holds the row's current claim."""
    row = w.rows[i]
    if p is not None and p.epoch and row is not None and row.epoch != p.epoch:
        return w.mark(what.fact(w.run_id(i)))
    return w


# T1
def start_run(w: World, i: int, identity: str, leased: bool) -> tuple[World, bool]:
    row = Row(
        status=RUNNING,
        claimed_by=identity if leased else "",
        lease_expires=_lease(w) if leased else 0,
        epoch=1,
    )
    return w.set_row(i, row), True


def dispatch_deadline(w: World, delay: int = 0) -> int:
    """Proposal P6: what T2, T9, T11 and T15 write into ``dispatch_deadline``, the instant by
    which the message they are followed by (due in ``delay`` seconds) must have been taken:
    ``now + delay + LEASE_SECONDS`` (one lease of grace). 0 without the proposal."""
    if not w.config.policy.overdue_queued_redispatched:
        return 0
    return w.clock + delay + w.config.constants.LEASE_SECONDS


def migrated(w: World) -> World:
    """The rows as the new code finds them after P6's migration (docs/PROPOSALS.md
    "Migration"), which gives every row without a wake-up one: a row QUEUED without a
    deadline gets one a lease from now, so that a row an earlier version left QUEUED with no
    message (FINDINGS.md 3) is swept once its deadline passes; a row RUNNING without a lease
    (written before ADR-141, RUNTIME 16.12: it "stayed RUNNING until it was purged") gets a
    lease from now, so that the reaper takes it once the lease lapses (no process of the old
    version survives the deployment to renew it). Without the proposal, the world unchanged."""
    if not w.config.policy.overdue_queued_redispatched:
        return w
    for i, row in enumerate(w.rows):
        if row is not None and row.status == QUEUED and row.dispatch_deadline == 0:
            w = w.set_row(i, replace(row, dispatch_deadline=dispatch_deadline(w)))
        elif row is not None and row.status == RUNNING and row.lease_expires == 0:
            w = w.set_row(i, replace(row, lease_expires=_lease(w)))
    return w


def overdue(w: World, row: Row | None, now: int) -> bool:
    """The overdue predicate of T14 / T15 (P6): ``status = 'queued' AND dispatch_deadline > 0
    AND dispatch_deadline < now`` (strict, as the stale predicate)."""
    return (
        row is not None and row.status == QUEUED and row.dispatch_deadline > 0
        and now > row.dispatch_deadline
    )


# T2
def enqueue_run(w: World, i: int) -> tuple[World, bool]:
    row = Row(status=QUEUED, queued_request=True, dispatch_deadline=dispatch_deadline(w))
    return w.set_row(i, row), True


def _claimable(w: World, row: Row | None, from_status: str) -> bool:
    """The claim guard of T3 / T7: ``status = <from_status>`` (the mutant
    mutant_claim_ignores_status: any non-terminal status)."""
    if row is None:
        return False
    if w.config.policy.mutant_claim_ignores_status:
        return row.status not in TERMINAL
    return row.status == from_status


def _claim_epoch(row: Row) -> int:
    """Ghost: ``epoch`` counts the transitions INTO running (16.2: "at most one caller wins
    each QUEUED->RUNNING and WAITING->RUNNING transition"). A claim that matches a row that
    is already running (only under mutant_claim_ignores_status) wins no new transition: it
    shares the current claim with the segment that won it."""
    return row.epoch if row.status == RUNNING else row.epoch + 1


# T3
def claim_queued(w: World, i: int, worker: str) -> tuple[World, bool]:
    row = w.rows[i]
    if not _claimable(w, row, QUEUED):
        return w, False
    assert row is not None  # _claimable is False for no row
    return w.set_row(
        i,
        replace(
            row,
            status=RUNNING,
            claimed_by=worker,
            lease_expires=_lease(w),
            dispatch_deadline=0,
            epoch=_claim_epoch(row),
            attempts=row.attempts + 1,
        ),
    ), True


def _renewal(w: World, i: int, me: str, p: Proc | None, **writes) -> tuple[World, bool]:
    """T4 and T5 share this: owner guard, then the rows-changed rule of 4.1."""
    row = w.rows[i]
    if not owner_guard(row, me, w):
        return w, False
    new = replace(row, lease_expires=_lease(w), **writes)
    if new == row and not w.config.policy.noop_renew_recheck:
        return w, False  # a same-second renewal changes no row and reports 0 (before 2029c781)
    w = _ghost_owner(w, i, p, Mark.FOREIGN_OWNER_MUTATION)
    return w.set_row(i, new), True


# T4
def renew_lease(w: World, i: int, me: str, p: Proc | None = None) -> tuple[World, bool]:
    return _renewal(w, i, me, p)


# T5
def mark_pending_effect(
    w: World, i: int, me: str, effect: str, p: Proc | None = None
) -> tuple[World, bool]:
    row = w.rows[i]
    if (
        w.config.policy.fence_kept_after_non_idempotent_write
        and row is not None
        and row.pending_effect == "non_idempotent_write"
    ):
        effect = "non_idempotent_write"  # proposal: once stamped, kept until the run settles
    return _renewal(w, i, me, p, pending_effect=effect)


# T6
def suspend(
    w: World, i: int, status: str, turn: int, p: Proc | None = None
) -> tuple[World, bool]:
    row = w.rows[i]
    if row is None:
        return w, False
    if w.config.policy.suspend_requires_running and row.status != RUNNING:
        return w, False
    if w.config.policy.suspend_guarded_by_claim and p is not None and p.owner \
            and row.claimed_by != p.owner:
        return w, False  # proposal P5: a segment holding a lease suspends only its own claim
    if row.status in TERMINAL:
        w = w.mark(Mark.RESURRECTION.fact(w.run_id(i)))
    w = _ghost_owner(w, i, p, Mark.ZOMBIE_SETTLE)
    return w.set_row(
        i, replace(row, status=status, suspended_state=turn, claimed_by="", lease_expires=0)
    ), True


# T7
def claim_for_resume(
    w: World, i: int, from_status: str, me: str, leased: bool
) -> tuple[World, bool]:
    row = w.rows[i]
    if not _claimable(w, row, from_status):
        return w, False
    assert row is not None  # _claimable is False for no row
    return w.set_row(
        i,
        replace(
            row,
            status=RUNNING,
            claimed_by=me if leased else "",
            lease_expires=_lease(w) if leased else 0,
            epoch=_claim_epoch(row),
        ),
    ), True


# T8
def finish_run(
    w: World,
    i: int,
    status: str,
    reason: str,
    error_class: str,
    owner: str = "",
    p: Proc | None = None,
    expect_status: str = "",
) -> tuple[World, bool]:
    row = w.rows[i]
    if row is None:
        return w, False
    if w.config.policy.terminal_guard and row.status in TERMINAL:
        return w, False
    if owner and row.claimed_by != owner:
        return w, False
    if expect_status and row.status != expect_status:
        return w, False  # the proposal fallback_settles_requeued_row
    if row.status in TERMINAL:
        w = w.mark(Mark.TERMINAL_OVERWRITTEN.fact(w.run_id(i)))
    w = _ghost_owner(w, i, p, Mark.ZOMBIE_SETTLE)
    return w.set_row(
        i,
        replace(
            row,
            status=status,
            termination_reason=reason,
            error_class=error_class,
            suspended_state=-1,
            queued_request=False,
            claimed_by="",
            lease_expires=0,
        ),
    ), True


def _requeued(w: World, row: Row, delay: int = 0) -> Row:
    return replace(
        row,
        status=QUEUED,
        requeue_count=row.requeue_count + (0 if w.config.policy.mutant_requeue_keeps_count else 1),
        claimed_by="",
        lease_expires=0,
        pending_effect="" if w.config.policy.clear_fence_on_requeue else row.pending_effect,
        dispatch_deadline=dispatch_deadline(w, delay),
    )


# T9
def requeue(
    w: World, i: int, me: str, p: Proc | None = None, delay: int = 0
) -> tuple[World, bool]:
    """``delay``: the backoff of the dispatch that follows (9 step 7), for P6's deadline."""
    row = w.rows[i]
    if not owner_guard(row, me, w):
        return w, False
    assert row is not None  # owner_guard is False for no row
    w = _ghost_owner(w, i, p, Mark.ZOMBIE_SETTLE)
    return w.set_row(i, _requeued(w, row, delay)), True


# T10 (a read): the reaper's SELECT, oldest lease first, at most ``limit`` rows.
def find_stale_running(w: World, now: int, limit: int) -> tuple[StaleRow, ...]:
    rows = [(r.lease_expires, i, r) for i, r in enumerate(w.rows) if r is not None and stale(w, r, now)]
    rows.sort(key=lambda t: (t[0], t[1]))
    return tuple(StaleRow(i, r.pending_effect, r.queued_request, r.requeue_count) for _, i, r in rows[:limit])


def _stale_in_statement(w: World, row: Row | None, now: int) -> bool:
    """The guard of T11 / T12: the stale predicate re-checked inside the statement (the
    mutant mutant_reaper_trusts_snapshot: ``WHERE id = ?`` only, acting on the SELECT)."""
    if w.config.policy.mutant_reaper_trusts_snapshot:
        return row is not None
    return stale(w, row, now)


# T11
def requeue_stale(w: World, i: int, now: int) -> tuple[World, bool]:
    row = w.rows[i]
    if not _stale_in_statement(w, row, now):
        return w, False
    assert row is not None  # _stale_in_statement is False for no row
    return w.set_row(i, _requeued(w, row)), True


# T12
def dead_letter_stale(w: World, i: int, now: int, reason: str) -> tuple[World, bool]:
    row = w.rows[i]
    if not _stale_in_statement(w, row, now):
        return w, False
    return w.set_row(
        i,
        replace(
            row,
            status="failed",
            termination_reason=reason,
            error_class="",
            suspended_state=-1,
            queued_request=False,
            claimed_by="",
            lease_expires=0,
        ),
    ), True


# T14 (a read, proposal P6): the sweep's SELECT, ``ORDER BY dispatch_deadline, uuid``,
# at most ``limit`` rows.
def find_overdue_queued(w: World, now: int, limit: int) -> tuple[OverdueRow, ...]:
    rows = sorted(
        (r.dispatch_deadline, i) for i, r in enumerate(w.rows)
        if r is not None and overdue(w, r, now)
    )
    return tuple(OverdueRow(i) for _, i in rows[:limit])


# T15 (proposal P6)
def redispatch_queued(w: World, i: int, now: int) -> tuple[World, bool]:
    """``UPDATE run SET dispatch_deadline = :now + LEASE_SECONDS WHERE uuid = ? AND`` the
    overdue predicate, re-checked inside the statement: of reapers racing on one row one
    wins, and a row claimed since the SELECT is left alone."""
    row = w.rows[i]
    if not overdue(w, row, now):
        return w, False
    assert row is not None  # overdue is False for no row
    return w.set_row(i, replace(row, dispatch_deadline=now + w.config.constants.LEASE_SECONDS)), True


# T13
def cancel(w: World, i: int) -> tuple[World, bool]:
    row = w.rows[i]
    if row is None:
        return w, False
    if row.status in TERMINAL:
        if w.config.policy.terminal_guard:
            return w, False
        w = w.mark(Mark.TERMINAL_OVERWRITTEN.fact(w.run_id(i)))
    return w.set_row(
        i,
        replace(
            row,
            status=CANCELLED,
            termination_reason="cancelled",
            error_class="",
            suspended_state=-1,
            queued_request=False,
            claimed_by="",
            lease_expires=0,
        ),
    ), True


# 4.2 (a read): the row by uuid, or None
def find_run(w: World, i: int) -> Row | None:
    return w.rows[i]


def max_sequence(w: World, i: int) -> int:
    """``max(stored sequence)``, or -1 with no events (the handle is at ``max + 1``)."""
    m = -1
    for e in w.events:
        if e.run == i and e.seq > m:
            m = e.seq
    return m


# -- the event insert (4.2 record_step, record_approval, record_input) ------------------------
# What an insert did: stored the event, stored nothing because the row is no longer the
# segment's (proposal P7), or stored nothing because its (run, sequence) is taken (P8).
INSERT_STORED = "stored"
INSERT_REFUSED = "refused"
INSERT_CONFLICT = "conflict"


def claim_live(w: World, row: Row | None, me: str, now: int) -> bool:
    """The guard of an owner-guarded event insert (P7): the owner guard and a live lease,
    ``status = 'running' AND claimed_by = :me AND lease_expires >= :now`` (the stale
    predicate's complement for a row with a lease)."""
    return owner_guard(row, me, w) and not stale(w, row, now)


def sequence_taken(w: World, i: int, seq: int) -> bool:
    """An event of run ``i`` holds sequence ``seq`` (the UNIQUE key of P8)."""
    return any(e.run == i and e.seq == seq for e in w.events)


def append_event(
    w: World, i: int, event: Event, owner: str = "", cancelled: bool = False
) -> tuple[World, str]:
    """The event insert. Without the proposals a plain insert that always stores. With
    ``event_insert_owner_guarded`` and a segment that has a lease ``owner``: ``INSERT ...
    SELECT ... FROM run WHERE`` :func:`claim_live` (or, on the cancellation probe's path,
    ``status = 'cancelled'``, which the probe has just read and nothing moves on), in one
    transaction with the row. With ``event_sequence_unique``: a taken ``(run, sequence)`` is
    a duplicate key and nothing is stored. Returns (world, ``INSERT_*``)."""
    pol = w.config.policy
    if pol.event_insert_owner_guarded and owner:
        row = w.rows[i]
        if cancelled:
            owned = row is not None and row.status == CANCELLED
        else:
            owned = claim_live(w, row, owner, w.clock)
        if not owned:
            return w, INSERT_REFUSED
    if pol.event_sequence_unique and sequence_taken(w, i, event.seq):
        return w, INSERT_CONFLICT
    return replace(w, events=w.events + (event,)), INSERT_STORED


def _append_statement(
    w: World, i: int, seq: int, kind: str, owner: str
) -> tuple[World, bool]:
    """:func:`append_event` as a scenario runs it (``store = "append_event"``): an event of
    ``kind`` at ``seq``, by no segment; matched = stored."""
    w, got = append_event(w, i, Event(i, seq, kind, 0, -1, "", ""), owner)
    return w, got == INSERT_STORED


APPEND_EVENT = TransitionName.APPEND_EVENT


# =========================================================================================
# the statement table: what a scenario may run directly (``store = "<name>"``)
# =========================================================================================
@dataclass(frozen=True, slots=True)
class Statement:
    """One store statement as a scenario names it: its RUNTIME 4 label, the arguments it
    takes besides the world (``run`` is the row; the rest are passed in ``args`` order), the
    ones it requires, and the default of each optional one (a value, or a function of the
    world and the arguments given). ``call(world, run index, arguments)`` runs it and returns
    (world, what it returned): ``matched`` for a write, the row / rows / position for a read."""

    name: str
    label: str
    args: tuple[str, ...]
    required: tuple[str, ...]
    defaults: dict[str, Any]
    fn: Callable[..., Any]
    fixed: tuple[Any, ...] = ()  # positional arguments the variant fixes, before ``args``
    read: bool = False  # a read: the world is unchanged and the result is what it returns

    def default(self, w: World, a: dict[str, Any]) -> dict[str, Any]:
        """``a`` with the defaults of the optional arguments it leaves out."""
        for k, d in self.defaults.items():
            if k not in a:
                a[k] = d(w, a) if callable(d) else d
        return a

    def call(self, w: World, i: int, a: dict[str, Any]) -> tuple[World, Any]:
        head = (w, i) if "run" in self.required else (w,)
        out = self.fn(*head, *self.fixed, *(a[k] for k in self.args if k != "run"))
        return (w, out) if self.read else out


def _leased(w: World, a: dict[str, Any]) -> bool:
    return w.config.policy.lease_all_segments


def _now(w: World, a: dict[str, Any]) -> int:
    return w.clock


def _limit(w: World, a: dict[str, Any]) -> int:
    return w.config.reaper_limit


def _interactive(w: World, a: dict[str, Any]) -> str:
    return caller_identity(a["run"])


def _table(*rows: Statement) -> dict[str, Statement]:
    return Keyed(TransitionName, {r.name: r for r in rows})


S = Statement
STATEMENTS: dict[str, Statement] = _table(
    S(START_RUN, "T1", ("run", "owner", "leased"), ("run",),
      {"owner": _interactive, "leased": _leased}, start_run),
    S(ENQUEUE_RUN, "T2", ("run",), ("run",), {}, enqueue_run),
    S(CLAIM_QUEUED, "T3", ("run", "owner"), ("run", "owner"), {}, claim_queued),
    S(RENEW_LEASE, "T4", ("run", "owner"), ("run", "owner"), {}, renew_lease),
    S(MARK_PENDING_EFFECT, "T5", ("run", "owner", "effect"), ("run", "owner", "effect"), {},
      mark_pending_effect),
    S(TransitionName.SUSPEND, "T6", ("run", "turn"), ("run",), {"turn": 0}, suspend, (WAITING_FOR_APPROVAL,)),
    S(TransitionName.SUSPEND_FOR_INPUT, "T6", ("run", "turn"), ("run",), {"turn": 0}, suspend,
      (WAITING_FOR_INPUT,)),
    S(TransitionName.CLAIM_FOR_RESUME, "T7", ("run", "owner", "leased"), ("run", "owner"),
      {"leased": _leased}, claim_for_resume, (WAITING_FOR_APPROVAL,)),
    S(TransitionName.CLAIM_FOR_RESUME_FROM_INPUT, "T7", ("run", "owner", "leased"), ("run", "owner"),
      {"leased": _leased}, claim_for_resume, (WAITING_FOR_INPUT,)),
    S(TransitionName.FINISH_RUN, "T8", ("run", "status", "reason", "error_class", "owner"),
      ("run", "status", "reason"), {"error_class": "", "owner": ""}, finish_run),
    S(TransitionName.REQUEUE, "T9", ("run", "owner"), ("run", "owner"), {}, requeue),
    S(FIND_STALE_RUNNING, "T10", ("now", "limit"), (), {"now": _now, "limit": _limit},
      find_stale_running, read=True),
    S(REQUEUE_STALE, "T11", ("run", "now"), ("run",), {"now": _now}, requeue_stale),
    S(DEAD_LETTER_STALE, "T12", ("run", "now", "reason"), ("run", "reason"), {"now": _now},
      dead_letter_stale),
    S(CANCEL, "T13", ("run",), ("run",), {}, cancel),
    S(FIND_OVERDUE_QUEUED, "T14", ("now", "limit"), (), {"now": _now, "limit": _limit},
      find_overdue_queued, read=True),
    S(REDISPATCH_QUEUED, "T15", ("run", "now"), ("run",), {"now": _now}, redispatch_queued),
    S(TransitionName.FIND_RUN, "4.2", ("run",), ("run",), {}, find_run, read=True),
    S(TransitionName.MAX_SEQUENCE, "4.2", ("run",), ("run",), {}, max_sequence, read=True),
    S(APPEND_EVENT, "4.2", ("run", "seq", "kind", "owner"), ("run", "seq"),
      {"kind": "llm", "owner": ""}, _append_statement),
)
"""Every store statement a scenario may run, in RUNTIME 4 order (the scenario format's
``store`` steps, their keys and defaults are read from here)."""
