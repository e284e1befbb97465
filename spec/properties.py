"""What must hold: the guarantees of RUNTIME 16 as named predicates over the World.

Each safety property is a predicate ``World -> bool`` (True = holds) registered in ``SAFETY``
in a fixed order; each liveness property is a goal predicate registered in ``LIVENESS``,
checked by the engine's SCC analysis under the weak fairness of ``fairness(spec)``, the one
place fairness is defined. spec/SPEC.md states every property in mathematical form beside
the transitions it constrains, the ghost state it reads, and the reading taken where the
records are ambiguous.

The checks run on every explored state, so each one exits early on the common case (an
empty ledger, no marks, fewer than two events) and scans the world at most a few times.
``explain(name, world)`` re-runs the search of a check and names the run, segment and call
that violate it, for counterexample output.

Ghost state read here (written by the model, read by no guard; docs/MODEL_GUIDE.md):
``Row.epoch``, ``Row.attempts``, ``Proc.epoch``, ``Event.seg``, ``Application.seg``,
``World.outcomes``, ``World.marks``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from failclosed.model import rules, runtime
from failclosed.model import scenario as _scenario
from failclosed.model.state import (
    AWAITING,
    CANCELLED,
    COMPLETED,
    IDEMPOTENT_WRITE,
    NON_IDEMPOTENT_WRITE,
    QUEUED,
    RESUME,
    RUNNING,
    SYNCHRONOUS,
    TERMINAL,
    WORKER,
    Application,
    Config,
    World,
)
from failclosed.model.transition import Transition

__all__ = [
    "FAIRNESS",
    "LIVENESS",
    "evaluate",
    "SAFETY",
    "Fairness",
    "LivenessProperty",
    "Property",
    "at_bound",
    "explain",
    "fairness",
    "fairness_predicates",
]

Finder = Callable[[World], "str | None"]


@dataclass(frozen=True, slots=True)
class Property:
    """A safety property: ``check(world)`` is True when the property holds in ``world``."""

    name: str
    check: Callable[[World], bool]
    statement: str  # the formal statement, one line
    source: str  # decision records / docs/RUNTIME.md section
    # the World fields ``check`` reads (None: all of them); the checker skips a successor
    # that shares these objects with its parent (spec.engine.explore, ``reads``)
    reads: tuple[str, ...] | None = None
    # stable: once violated on a run's projection, violated on every later projection of
    # that run until it is archived (it reads only what the run's life only adds to: marks,
    # the ledger, the events, the ghost attempt count). The simulator checks a stable
    # property at the run's archive instead of after every step (sim.engine ``check_steps``).
    stable: bool = False


@dataclass(frozen=True, slots=True)
class Fairness:
    """One weakly fair class of transitions: if some transition of the class stays enabled,
    one of the class is eventually taken."""

    name: str
    applies: Callable[[Transition], bool]
    statement: str


@dataclass(frozen=True, slots=True)
class LivenessProperty:
    """``true ~> goal``: from every reachable state every weakly fair path reaches ``goal``.

    ``fairness(spec)`` gives the classes (the same for every liveness property: see
    :func:`fairness`); ``ignore_deadlock`` marks states where the model's time bound, not the
    system, stops progress (pass it to ``check_liveness``)."""

    name: str
    goal: Callable[[World], bool]
    statement: str
    source: str
    fairness: Callable[[Config], tuple[Fairness, ...]]
    ignore_deadlock: Callable[[World], bool]

    def predicates(self, spec: Config) -> list[Callable[[Transition], bool]]:
        return [f.applies for f in self.fairness(spec)]


# =========================================================================================
# helpers
# =========================================================================================
def _key(a: Application) -> tuple[int, int, int, str]:
    return (a.run, a.turn, a.call, a.seg)


_BOUNDARY_PCS = frozenset({"on_step", "probe", "renew", "persist"})


def _audited(w: World) -> set[tuple[int, int, int, str]]:
    """(run, turn, call, seg) of every application that is audited or not yet judged: a
    stored ``tool`` event (an ambiguous commit stores the event, so it counts), or the live
    segment that landed it is still inside that call's own boundary, where its event is about
    to be stored. Such an application is judged when its segment leaves the boundary: it
    stores the event, or it stops (death, lost lease, audit failure) without it, and the
    exploration reaches both successors."""
    out = {(e.run, e.turn, e.call, e.seg) for e in w.events if e.kind == "tool"}
    for p in w.procs:
        st = p.step
        if st and st[0] == "tool" and p.pc in _BOUNDARY_PCS:
            out.add((p.run, st[1], st[2], p.seg))
    return out


def _call(w: World, a: Application) -> str:
    return f"{w.run_id(a.run)} turn {a.turn} call {a.call} ({a.tool}, {a.effect}) by {a.seg}"


def _mark(w: World, prefix: str) -> str | None:
    if not w.marks:
        return None
    for m in sorted(w.marks):
        if m.startswith(prefix):
            return m
    return None


def _resume_decision(w: World, a_run: int, seg: str) -> str:
    """The k-th resume process of a run (label ``resume:<run>#<k>``) consumed the run's k-th
    caller decision (approve / deny / submit_input each start exactly one resume)."""
    try:
        k = int(seg.rsplit("#", 1)[1])
    except ValueError:
        return ""
    decisions = w.config.runs[a_run].decisions
    return decisions[k - 1] if 0 < k <= len(decisions) else ""


def _outcome(w: World, seg: str) -> str | None:
    for s, _run, _kind, out in w.outcomes:
        if s == seg:
            return out
    return None


_SEGMENT_KINDS = (WORKER, SYNCHRONOUS, RESUME)


# =========================================================================================
# safety: the write ledger against the audit log
# =========================================================================================
def _find_unaudited_write_settled(w: World) -> str | None:
    ledger = w.ledger
    if not ledger:
        return None
    rows = w.rows
    audited: set | None = None
    for k, a in enumerate(ledger):
        row = rows[a.run]
        if row is None or row.status != COMPLETED:
            continue
        if audited is None:
            audited = _audited(w)
        if _key(a) in audited:
            continue
        if a.effect == IDEMPOTENT_WRITE and any(
            b.run == a.run and b.turn == a.turn and b.call == a.call and _key(b) in audited
            for b in ledger[k + 1:]
        ):
            continue  # the same idempotent call re-applied later, with its event
        return f"run {w.run_id(a.run)} is completed over the unaudited write {_call(w, a)}"
    return None


def no_unaudited_write_settles_successfully(w: World) -> bool:
    """□ ∀ a ∈ ledger: status(a.run) = completed ⇒ audited(a) ∨ (a.effect = idempotent_write
    ∧ ∃ b after a in the ledger: call(b) = call(a) ∧ audited(b)).

    audited(a) ⟺ ∃ e ∈ events: e.kind = tool ∧ (e.run, e.turn, e.call, e.seg) =
    (a.run, a.turn, a.call, a.seg). ADR-111 (fail-closed audit for write steps), 16.10."""
    return _find_unaudited_write_settled(w) is None


def _ni_calls(w: World) -> dict[tuple[int, int, int], list[Application]]:
    out: dict[tuple[int, int, int], list[Application]] = {}
    for a in w.ledger:
        if a.effect == NON_IDEMPOTENT_WRITE:
            out.setdefault((a.run, a.turn, a.call), []).append(a)
    return out


def _find_twice_without_audit(w: World) -> str | None:
    if len(w.ledger) < 2:
        return None
    audited: set | None = None
    for apps in _ni_calls(w).values():
        if len(apps) < 2:
            continue
        if audited is None:
            audited = _audited(w)
        missing = [a for a in apps if _key(a) not in audited]
        if missing:
            a = apps[0]
            return (
                f"non-idempotent call {w.run_id(a.run)} turn {a.turn} call {a.call} ({a.tool}) "
                f"applied {len(apps)} times by {', '.join(b.seg for b in apps)}; "
                f"unaudited: {', '.join(b.seg for b in missing)}"
            )
    return None


def no_write_applied_twice_without_audit(w: World) -> bool:
    """□ ∀ logical non-idempotent call c = (run, turn, call):
    |{a ∈ ledger : call(a) = c}| ≥ 2 ⇒ ∀ such a: audited(a).

    A repeated non-idempotent effect is at least visible in the audit log. ADR-111, ADR-112,
    16.8, 16.10."""
    return _find_twice_without_audit(w) is None


def _find_ni_twice(w: World) -> str | None:
    if len(w.ledger) < 2:
        return None
    for apps in _ni_calls(w).values():
        if len(apps) >= 2:
            a = apps[0]
            return (
                f"non-idempotent call {w.run_id(a.run)} turn {a.turn} call {a.call} ({a.tool}) "
                f"applied {len(apps)} times by {', '.join(b.seg for b in apps)}"
            )
    return None


def non_idempotent_write_at_most_once(w: World) -> bool:
    """□ ∀ logical non-idempotent call c: |{a ∈ ledger : call(a) = c}| ≤ 1.

    Exactly-once is NOT claimed by the records (ADR-104 admits at-least-once; ADR-112 and
    ADR-141 say "not exactly-once"); this property measures how far a policy is from it
    (RUNTIME 16.8 states the limit)."""
    return _find_ni_twice(w) is None


# Outcomes by which a segment reports success or carries the run on (8, 9).
_CONTINUING = frozenset({
    "COMPLETED", "AWAITING_APPROVAL", "AWAITING_INPUT", "REQUEUED", "GUARDRAIL_BLOCKED",
    "GUARDRAIL_APPROVAL_REQUIRED",
})


def _find_success_over_unrecorded(w: World) -> str | None:
    ledger = w.ledger
    if not ledger:
        return None
    audited = _audited(w)
    for a in ledger:
        if _key(a) in audited:
            continue
        pos = (a.turn, a.call)
        for p in w.procs:
            if p.seg == a.seg and (p.turn, p.call) > pos:
                return f"segment {a.seg} carried on past its unrecorded write {_call(w, a)}"
        for e in w.events:
            if e.seg == a.seg and e.run == a.run and (e.turn, e.call) > pos:
                return (
                    f"segment {a.seg} stored {e.kind} (turn {e.turn}) after its unrecorded "
                    f"write {_call(w, a)}"
                )
        out = _outcome(w, a.seg)
        if out in _CONTINUING:
            return f"segment {a.seg} ended {out} after its unrecorded write {_call(w, a)}"
    return None


def no_success_over_unrecorded_write(w: World) -> bool:
    """□ ∀ a ∈ ledger: ¬audited(a) ⇒ the segment s = a.seg neither carried on nor reported
    success: no live proc of s is past a's call ((turn, call) > (a.turn, a.call)), no event
    of s is stored at a later position, and outcome(s) ∉ {COMPLETED, AWAITING_APPROVAL,
    AWAITING_INPUT, REQUEUED, GUARDRAIL_BLOCKED, GUARDRAIL_APPROVAL_REQUIRED}.

    Per segment (the run-level claim is no_unaudited_write_settles_successfully). ADR-111,
    16.10."""
    return _find_success_over_unrecorded(w) is None


# =========================================================================================
# safety: rows, claims and ownership (marks written by model/store.py)
# =========================================================================================
def _find_terminal_changed(w: World) -> str | None:
    if not w.marks:
        return None
    m = _mark(w, "terminal_overwritten:") or _mark(w, "resurrection:")
    if m is None:
        return None
    what, run = m.split(":", 1)
    if what == "resurrection":
        return f"run {run}: a suspend (T6) moved its terminal row back to waiting"
    return f"run {run}: a settle or cancel (T8/T13) overwrote its terminal row"


def terminal_is_absorbing(w: World) -> bool:
    """□ ∀ run r: no statement matches r's row once it is terminal (no mark
    terminal_overwritten:r from T8/T13, no mark resurrection:r from T6).

    ADR-092 (T8 requires a non-terminal status), ADR-101 (T6 requires running), 16.1."""
    return _find_terminal_changed(w) is None


def _find_double_claim(w: World) -> str | None:
    procs = w.procs
    if len(procs) < 2:
        return None
    held: dict[tuple[int, int], str] = {}
    for p in procs:
        if p.epoch and p.kind in _SEGMENT_KINDS:
            k = (p.run, p.epoch)
            if k in held:
                return (
                    f"run {w.run_id(p.run)}: live segments {held[k]} and {p.seg or p.name} "
                    f"both hold claim {p.epoch}"
                )
            held[k] = p.seg or p.name
    return None


def exclusive_claim(w: World) -> bool:
    """□ ∀ live segments p ≠ q: p.epoch > 0 ∧ q.epoch > 0 ⇒ (p.run, p.epoch) ≠ (q.run, q.epoch).

    Each claim (T1, T3, T7) is won by one caller: a single conditional statement. ADR-084,
    ADR-102, 16.2."""
    return _find_double_claim(w) is None


def _mark_finder(prefix: str, text: str) -> Finder:
    def find(w: World) -> str | None:
        if not w.marks:
            return None
        m = _mark(w, prefix)
        return None if m is None else f"run {m.split(':', 1)[1]}: {text}"

    return find


_find_foreign_owner = _mark_finder(
    "foreign_owner_mutation:", "a segment that lost its claim renewed or stamped (T4/T5)"
)
_find_zombie_append = _mark_finder(
    "zombie_append:", "a segment that lost its claim persisted a step"
)
_find_zombie_settle = _mark_finder(
    "zombie_settle:", "a segment that lost its claim settled, requeued or suspended the row"
)
_find_retry_non_retryable = _mark_finder(
    "retry_of_non_retryable:", "recovery requeued a failure of a non-retryable class"
)
_find_resurrection = _mark_finder(
    "resurrection:", "a suspend (T6) moved a terminal row back to waiting"
)


def owner_only_mutation(w: World) -> bool:
    """□ no mark foreign_owner_mutation:r: an owner-guarded renewal or stamp (T4, T5) matches
    only for the segment holding the row's current claim (p.epoch = row.epoch).

    ADR-102, ADR-104, commit 3c1f5699, ADR-141, 16.3. (The owner-guarded T8 and T9 of 16.3
    are checked by no_zombie_settle.)"""
    return _find_foreign_owner(w) is None


def no_zombie_append(w: World) -> bool:
    """□ no mark zombie_append:r: record_step stores no event for a segment p with
    p.epoch ≠ row.epoch. Renew before persist, ADR-104, 16.4."""
    return _find_zombie_append(w) is None


def no_zombie_settle(w: World) -> bool:
    """□ no mark zombie_settle:r: no T6, T8 or T9 by a segment p with p.epoch ≠ row.epoch
    changes the row. Owner-guarded settles, commit 3c1f5699 (workers), ADR-141 (all), 16.5."""
    return _find_zombie_settle(w) is None


def _find_stream_disorder(w: World) -> str | None:
    events = w.events
    if len(events) < 2:
        return None
    last_seq: dict[int, int] = {}  # run -> last stored sequence
    current: dict[int, str] = {}  # run -> segment that appended last
    done: set[tuple[int, str]] = set()  # segments another segment has appended after
    for e in events:
        run = e.run
        prev = last_seq.get(run)
        if prev is not None and e.seq <= prev:
            other = current[run]
            how = "within its segment" if other == e.seg else f"after {other}"
            return (
                f"run {w.run_id(run)}: {e.seg} stored {e.kind} at sequence {e.seq} {how} "
                f"(previous sequence {prev})"
            )
        if (run, e.seg) in done:
            return (
                f"run {w.run_id(run)}: {e.seg} appended again at sequence {e.seq} after "
                f"{current[run]} had begun appending"
            )
        cur = current.get(run)
        if cur is not None and cur != e.seg:
            done.add((run, cur))
        current[run] = e.seg
        last_seq[run] = e.seq
    return None


def stream_order(w: World) -> bool:
    """□ ∀ run r, with r's events e₀, e₁, … in insert order: e_i.seq < e_{i+1}.seq (so
    sequences are unique and increase within a segment), and e_i.seg = e_k.seg with i < j < k
    ⇒ e_j.seg = e_i.seg (a segment never appends once a later segment has begun).

    Position max+1 resolved after the claim (ADR-101, ADR-104) plus renew-before-persist;
    the store has no unique index. 16.17."""
    return _find_stream_disorder(w) is None


def _find_too_many_attempts(w: World) -> str | None:
    bound = w.config.constants.MAX_REQUEUES + 1
    for i, row in enumerate(w.rows):
        if row is not None and row.attempts > bound:
            return f"run {w.run_id(i)} executed {row.attempts} times (bound {bound})"
    return None


def bounded_attempts(w: World) -> bool:
    """□ ∀ rows: attempts ≤ MAX_REQUEUES + 1 (attempts = T3 claims of the stored request).

    One shared requeue_count, never reset; both deciders refuse at ≥ MAX_REQUEUES. ADR-104,
    16.6."""
    return _find_too_many_attempts(w) is None


def no_retry_of_non_retryable(w: World) -> bool:
    """□ no mark retry_of_non_retryable:r: recovery's T9 never fires for a failure whose class
    is auth, configuration, clientError or unknown. ADR-095, ADR-104, ADR-111, 16.7."""
    return _find_retry_non_retryable(w) is None


# =========================================================================================
# safety: the write fence, approval and cancellation
# =========================================================================================
def _find_interrupted_repeated(w: World) -> str | None:
    ledger = w.ledger
    if not ledger:
        return None
    audited: set | None = None
    for k, a in enumerate(ledger):
        if a.effect != NON_IDEMPOTENT_WRITE:
            continue
        if audited is None:
            audited = _audited(w)
        if _key(a) in audited:
            continue  # its tool boundary completed: the fence was cleared and the step stored
        for b in ledger[k + 1:]:
            if b.run == a.run and b.turn == a.turn and b.call == a.call:
                return f"the interrupted write {_call(w, a)} was applied again by {b.seg}"
        n = a.attempt
        row = w.rows[a.run]
        if row is not None and row.attempts > n:
            return (
                f"run {w.run_id(a.run)} was claimed again (attempt {row.attempts}) after the "
                f"interrupted write {_call(w, a)}"
            )
    return None


def interrupted_non_idempotent_write_not_repeated(w: World) -> bool:
    """□ ∀ a ∈ ledger: a.effect = non_idempotent_write ∧ ¬audited(a) ⇒
    (∄ b after a in the ledger: call(b) = call(a)) ∧ row(a.run).attempts = a.attempt.

    "Interrupted" = the call's tool boundary never stored its event (it stopped before the
    clear, or between the clear and the insert); a.attempt is the ghost ``Row.attempts``
    (T3 claims) when the write landed, so a later T3 claim is a repetition for every
    segment kind. T5 stamp + may_retry_after_fence in the reaper and in
    recovery, ADR-112, ADR-141; ADR-111 ("never retried automatically"); 16.8."""
    return _find_interrupted_repeated(w) is None


def _find_unfenced_write(w: World) -> str | None:
    for a in w.ledger:
        if not a.fenced:
            if w.rows[a.run] is None:
                return f"the write {_call(w, a)} ran with no persisted run"
            return f"the write {_call(w, a)} started unfenced: no T5 stamp of its own matched before it ran"
    return None


def writes_only_under_fence(w: World) -> bool:
    """□ ∀ a ∈ ledger: a.fenced, where the ghost a.fenced holds iff the landing segment's T5
    stamp for this very call matched before the tool started (so the segment held a persisted
    run and a lease, and ``pending_effect = a.effect`` was written).

    Before-tool hook, WriteWithoutDurableExecution, ADR-112, ADR-141, 16.9."""
    return _find_unfenced_write(w) is None


def _find_unrecorded_approval(w: World) -> str | None:
    ledger = w.ledger
    if not ledger:
        return None
    for a in ledger:
        seg = a.seg
        if not seg.startswith("resume:") or _resume_decision(w, a.run, seg) != "approve":
            continue
        if any(e.kind == "approval" and e.seg == seg for e in w.events):
            continue
        # the approved turn is where the resume segment began: its smallest turn
        first = min(
            [b.turn for b in ledger if b.seg == seg]
            + [e.turn for e in w.events if e.seg == seg]
        )
        if a.turn == first:
            return f"the write {_call(w, a)} ran in an approved turn with no approval event"
    return None


def no_write_without_recorded_approval(w: World) -> bool:
    """□ ∀ a ∈ ledger: a.seg is a resume segment whose decision is approve ∧ a.turn is the
    approved turn ⇒ ∃ e ∈ events: e.kind = approval ∧ e.seg = a.seg (stored before any call
    of the segment runs, by construction of the resume).

    Gate 3 of the resume (record_approval fail-closed for approved write turns), ADR-132,
    16.11."""
    return _find_unrecorded_approval(w) is None


def _find_unsafe_staleness(w: World) -> str | None:
    r = w.reaper
    if r is None or r.pc != "row":
        return None
    run = r.rows[r.idx][0]
    row = w.rows[run]
    if row is None or (row.status == RUNNING and 0 < row.lease_expires < r.now):
        return None  # still stale by the tick's clock: the reaper may act
    rid = w.run_id(run)
    for t in (
        Transition.make("requeue_stale", "reaper", run=rid),
        Transition.make("dead_letter_stale", "reaper", run=rid, reason="not_retryable"),
    ):
        if runtime.fire(w, t).rows[run] != row:
            return (
                f"run {rid}: the reaper's {t.name} (tick now={r.now}) would change a row "
                f"renewed or moved since its SELECT (lease_expires={row.lease_expires}, "
                f"status={row.status})"
            )
    return None


def race_safe_staleness(w: World) -> bool:
    """□ reaper.pc = row ∧ ¬stale(row_r, reaper.now) ⇒ T11(r, reaper.now) and
    T12(r, reaper.now) leave row_r unchanged (r = the snapshot row being decided).

    A renewal after the SELECT sets lease_expires = now' + LEASE ≥ reaper.now, so the row is
    no longer stale by the tick's clock; the stale predicate inside T11/T12 must then refuse.
    A one-step look-ahead through model.runtime.fire. ADR-104, 16.14."""
    return _find_unsafe_staleness(w) is None


def _find_cancel_broken(w: World) -> str | None:
    for i, row in enumerate(w.rows):
        if row is not None and row.termination_reason == "cancelled" and row.status != CANCELLED:
            return f"run {w.run_id(i)} was cancelled but is now {row.status}"
    if w.marks:
        m = _mark(w, "past_cancel:")
        if m is not None:
            return f"run {m.split(':', 1)[1]}: a segment started work past a cancelled boundary"
    for p in w.procs:
        if p.pc != "stamp":
            continue
        row = w.rows[p.run]
        if row is None or row.status != CANCELLED:
            continue
        rid = w.run_id(p.run)
        name = w.config.runs[p.run].answer(p.turn).calls[p.call]
        eff = rules.resolve_by_name(w.config, w.removed, name)
        t = Transition.make("mark_pending_effect", p.name, run=rid, effect=eff)
        if runtime.fire(w, t).rows[p.run] != row:
            return f"run {rid}: {p.seg} stamped a write on the cancelled row"
    return None


def cooperative_cancel(w: World) -> bool:
    """□ (termination_reason = cancelled ⇒ status = cancelled) ∧ (a stamp T5 by a live segment
    on a cancelled row matches nothing) ∧ no mark past_cancel:r (ghost: a segment went on past
    a boundary that began after the cancel committed, to a provider call or a tool).

    T13 (ADR-092), the probe (ADR-103), the status guard of T5; 16.15."""
    return _find_cancel_broken(w) is None


def no_resurrection_by_suspend(w: World) -> bool:
    """□ no mark resurrection:r: T6 never matches a terminal row. ADR-101, 16.16."""
    return _find_resurrection(w) is None


# =========================================================================================
# registry
# =========================================================================================
def _p(check: Callable[[World], bool], statement: str, source: str,
       reads: tuple[str, ...] | None, stable: bool = False) -> Property:
    return Property(check.__name__, check, statement, source, reads, stable)


_AUDIT = ("ledger", "events", "procs")  # what _audited(w) reads, with the ledger
_MARKS = ("marks",)


SAFETY: dict[str, Property] = {
    p.name: p
    for p in (
        _p(
            no_unaudited_write_settles_successfully,
            "□ ∀a∈L: status(a.run)=completed ⇒ aud(a) ∨ (idem(a) ∧ ∃b>a: call(b)=call(a) ∧ aud(b))",
            "ADR-111; RUNTIME 16.10",
            _AUDIT + ("rows",),
        ),
        _p(
            no_write_applied_twice_without_audit,
            "□ ∀c non-idempotent: |L_c| ≥ 2 ⇒ ∀a∈L_c: aud(a)",
            "ADR-111, ADR-112; RUNTIME 16.8, 16.10",
            _AUDIT,
        ),
        _p(
            non_idempotent_write_at_most_once,
            "□ ∀c non-idempotent: |L_c| ≤ 1",
            "not claimed (ADR-104, ADR-112, ADR-141: not exactly-once); RUNTIME 16.8 limits",
            ("ledger",),
            stable=True,
        ),
        _p(
            no_success_over_unrecorded_write,
            "□ ∀a∈L: ¬aud(a) ⇒ ¬continued(a.seg, a) ∧ outcome(a.seg) ∉ SUCCESS",
            "ADR-111; RUNTIME 16.10",
            _AUDIT + ("outcomes",),
        ),
        _p(
            terminal_is_absorbing,
            "□ ∀r: terminal_overwritten:r ∉ marks ∧ resurrection:r ∉ marks",
            "ADR-092, ADR-101; RUNTIME 16.1",
            _MARKS,
            stable=True,
        ),
        _p(
            exclusive_claim,
            "□ ∀p≠q live segments: p.epoch>0 ⇒ (p.run,p.epoch) ≠ (q.run,q.epoch)",
            "ADR-084, ADR-102; RUNTIME 16.2",
            ("procs",),
        ),
        _p(
            owner_only_mutation,
            "□ ∀r: foreign_owner_mutation:r ∉ marks",
            "ADR-102, ADR-104, 3c1f5699, ADR-141; RUNTIME 16.3",
            _MARKS,
            stable=True,
        ),
        _p(
            no_zombie_append,
            "□ ∀r: zombie_append:r ∉ marks",
            "ADR-104 (renew before persist); RUNTIME 16.4",
            _MARKS,
            stable=True,
        ),
        _p(
            no_zombie_settle,
            "□ ∀r: zombie_settle:r ∉ marks",
            "commit 3c1f5699, ADR-141; RUNTIME 16.5",
            _MARKS,
            stable=True,
        ),
        _p(
            stream_order,
            "□ ∀r: seq strictly increasing in insert order ∧ no segment appends after a later one",
            "ADR-101, ADR-104; RUNTIME 16.17",
            ("events",),
            stable=True,
        ),
        _p(
            bounded_attempts,
            "□ ∀r: attempts(r) ≤ MAX_REQUEUES + 1",
            "ADR-104; RUNTIME 16.6",
            ("rows",),
            stable=True,
        ),
        _p(
            no_retry_of_non_retryable,
            "□ ∀r: retry_of_non_retryable:r ∉ marks",
            "ADR-095, ADR-104, ADR-111; RUNTIME 16.7",
            _MARKS,
            stable=True,
        ),
        _p(
            interrupted_non_idempotent_write_not_repeated,
            "□ ∀a∈L: nonidem(a) ∧ ¬aud(a) ⇒ ∄b>a: call(b)=call(a) ∧ attempts(a.run)=att(a.seg)",
            "ADR-112, ADR-141 (ADR-111); RUNTIME 16.8",
            _AUDIT + ("rows",),
        ),
        _p(
            writes_only_under_fence,
            "□ ∀a∈L: row(a.run)≠⊥ ∧ (holds(seg(a)) at a's boundary ⇒ leased ∧ pending=a.effect)",
            "ADR-112, ADR-141; RUNTIME 16.9",
            ("ledger", "rows"),
            stable=True,
        ),
        _p(
            no_write_without_recorded_approval,
            "□ ∀a∈L: approve-resume(a.seg) ∧ a.turn=approved ⇒ ∃e: e.kind=approval ∧ e.seg=a.seg",
            "ADR-132; RUNTIME 16.11",
            ("ledger", "events"),
        ),
        _p(
            race_safe_staleness,
            "□ reaper.pc=row ∧ ¬stale(row_r, reaper.now) ⇒ T11, T12 leave row_r unchanged",
            "ADR-104; RUNTIME 16.14",
            ("reaper", "rows", "clock"),  # T11/T12 of the reaper's row, by fire
        ),
        _p(
            cooperative_cancel,
            "□ (reason=cancelled ⇒ status=cancelled) ∧ T5 on cancelled rows fails ∧ past_cancel∉marks",
            "ADR-092, ADR-103; RUNTIME 16.15",
            ("rows", "marks", "procs", "removed", "clock"),  # and T5 of a stamp, by fire
        ),
        _p(
            no_resurrection_by_suspend,
            "□ ∀r: resurrection:r ∉ marks",
            "ADR-101; RUNTIME 16.16",
            _MARKS,
            stable=True,
        ),
    )
}

_FINDERS: dict[str, Finder] = {
    "no_unaudited_write_settles_successfully": _find_unaudited_write_settled,
    "no_write_applied_twice_without_audit": _find_twice_without_audit,
    "non_idempotent_write_at_most_once": _find_ni_twice,
    "no_success_over_unrecorded_write": _find_success_over_unrecorded,
    "terminal_is_absorbing": _find_terminal_changed,
    "exclusive_claim": _find_double_claim,
    "owner_only_mutation": _find_foreign_owner,
    "no_zombie_append": _find_zombie_append,
    "no_zombie_settle": _find_zombie_settle,
    "stream_order": _find_stream_disorder,
    "bounded_attempts": _find_too_many_attempts,
    "no_retry_of_non_retryable": _find_retry_non_retryable,
    "interrupted_non_idempotent_write_not_repeated": _find_interrupted_repeated,
    "writes_only_under_fence": _find_unfenced_write,
    "no_write_without_recorded_approval": _find_unrecorded_approval,
    "race_safe_staleness": _find_unsafe_staleness,
    "cooperative_cancel": _find_cancel_broken,
    "no_resurrection_by_suspend": _find_resurrection,
}


# =========================================================================================
# liveness and fairness
# =========================================================================================
def _process_actors(spec: Config) -> tuple[str, ...]:
    """Every process name a configuration can create (runtime.py names them so)."""
    names = list(spec.workers)
    for r in spec.runs:
        names.append(f"caller:{r.id}" if r.entry == "interactive" else f"enqueue:{r.id}")
        names.extend(f"resume:{r.id}#{k}" for k in range(1, len(r.decisions) + 1))
    return tuple(names)


def _reaper_step(t: Transition) -> bool:
    return t.actor == "reaper" and t.fault is None and t.name != "crash"


def _pick_up(t: Transition) -> bool:
    return t.name == "run_queued" and t.fault is None


def _clock(t: Transition) -> bool:
    return t.actor == "clock"


def _process_step(actor: str) -> Callable[[Transition], bool]:
    # A free worker taking a message (run_queued with not_before) is the pick_up class, not a
    # process's next step; a pick-up nested in a sync dispatch (no not_before) is one.
    def step(t: Transition) -> bool:
        return (
            t.actor == actor and t.fault is None and t.name != "crash"
            and not (t.name == "run_queued" and t.arg("not_before") is not None)
        )

    step.__name__ = f"process_step[{actor}]"
    return step


FAIRNESS: tuple[Fairness, ...] = (
    Fairness("reaper", _reaper_step,
             "WF(reaper): a reaper step without a fault (tick, per-row decision, dispatch)"),
    Fairness("pick_up", _pick_up,
             "WF(run_queued): some free worker takes some deliverable message"),
    Fairness("clock", _clock, "WF(advance_time): time moves on while something waits on it"),
)
"""The fixed classes; ``fairness(spec)`` adds one class per process of the configuration."""


def fairness(spec: Config) -> tuple[Fairness, ...]:
    """THE fairness of every liveness property (spec/SPEC.md, "Fairness"): weak fairness for
    reaper steps, for a free worker taking a pending message, for time, and for each
    process's next non-fault step. Faults (every transition with a fault argument, and
    ``crash``) get none: the fault budget makes them finite. Callers (start, enqueue, cancel,
    approve, deny, submit input), the operator and the bus get none either."""
    procs = tuple(
        Fairness(f"process:{a}", _process_step(a),
                 f"WF({a}): the process's next step without a fault")
        for a in _process_actors(spec)
    )
    return FAIRNESS + procs


def fairness_predicates(spec: Config) -> list[Callable[[Transition], bool]]:
    """``fairness(spec)`` as the list of transition predicates ``check_liveness`` takes."""
    return [f.applies for f in fairness(spec)]


def at_bound(w: World) -> bool:
    """The model's bound, not the system, stops time here: something waits on an instant (a
    lease going stale, a delayed message) later than ``spec.horizon``, which the clock may not
    reach (``model.runtime._time_targets`` jumps straight to such instants)."""
    h = w.config.horizon
    if h is None:
        return False
    now = w.clock
    for row in w.rows:
        if (
            row is not None
            and row.status == RUNNING
            and row.lease_expires >= now
            and row.lease_expires + 1 > h
        ):
            return True
    return any(m.not_before > h for m in w.messages)


def _owned(w: World, i: int, epoch: int) -> bool:
    return any(p.run == i and p.epoch == epoch and p.kind in _SEGMENT_KINDS for p in w.procs)


def no_abandoned_leased_row(w: World) -> bool:
    """Goal of leased_runs_leave_running: no RUNNING row with lease_expires > 0 whose claim
    (row.epoch) no live segment holds."""
    for i, row in enumerate(w.rows):
        if (
            row is not None
            and row.status == RUNNING
            and row.lease_expires > 0
            and not _owned(w, i, row.epoch)
        ):
            return False
    return True


def no_queued_row(w: World) -> bool:
    """Goal of no_orphan_queued_run: no row is QUEUED."""
    return all(row is None or row.status != QUEUED for row in w.rows)


def every_run_settled(w: World) -> bool:
    """Goal of every_run_terminates: every started run's row is terminal or waiting for a
    caller (or was never stored), and no process of it is alive."""
    live = {p.run for p in w.procs}
    for i, row in enumerate(w.rows):
        if not w.started[i]:
            continue
        if i in live:
            return False
        if row is not None and row.status not in TERMINAL and row.status not in AWAITING:
            return False
    return True


def _l(goal: Callable[[World], bool], name: str, statement: str, source: str) -> LivenessProperty:
    return LivenessProperty(name, goal, statement, source, fairness, at_bound)


LIVENESS: dict[str, LivenessProperty] = {
    p.name: p
    for p in (
        _l(
            no_abandoned_leased_row,
            "leased_runs_leave_running",
            "true ~> ∀r: ¬(status=running ∧ lease_expires>0 ∧ ∄ live p: p.run=r ∧ p.epoch=epoch)",
            "ADR-104, ADR-141; RUNTIME 16.12",
        ),
        _l(
            no_queued_row,
            "no_orphan_queued_run",
            "true ~> ∀r: status(r) ≠ queued",
            "ADR-102, commit a7e1a954, section 9 step 8; RUNTIME 16.13",
        ),
        _l(
            every_run_settled,
            "every_run_terminates",
            "true ~> ∀r started: status(r) ∈ TERMINAL ∪ AWAITING ∧ no live process of r",
            "ADR-092, ADR-104; RUNTIME 8, 16.12, 16.13",
        ),
    )
}

def evaluate(world: World, name: str) -> tuple[bool, str]:
    """A safety property by name on one world, for a scenario's ``holds`` / ``violates``:
    (holds, which run or segment violates it). ``LookupError`` names the valid ones."""
    if name not in SAFETY:
        raise LookupError(f"no safety property {name!r}; use one of {', '.join(SAFETY)}")
    ok = SAFETY[name].check(world)
    return ok, "" if ok else explain(name, world)


_scenario.register_property_evaluator(evaluate)


def explain(name: str, world: World) -> str:
    """Which run, segment or call violates property ``name`` in ``world`` ("holds" if none)."""
    if name in _FINDERS:
        why = _FINDERS[name](world)
        return "holds" if why is None else why
    if name in LIVENESS:
        goal = LIVENESS[name].goal
        if goal(world):
            return "holds (goal reached)"
        return _explain_goal(name, world)
    raise KeyError(f"unknown property {name!r}: use one of {', '.join([*SAFETY, *LIVENESS])}")


def _explain_goal(name: str, w: World) -> str:
    out = []
    for i, row in enumerate(w.rows):
        rid = w.run_id(i)
        if name == "leased_runs_leave_running":
            if row is not None and row.status == RUNNING and row.lease_expires > 0 and not _owned(
                w, i, row.epoch
            ):
                out.append(f"run {rid} is RUNNING (lease {row.lease_expires}) with no live owner")
        elif name == "no_orphan_queued_run":
            if row is not None and row.status == QUEUED:
                msgs = sum(1 for m in w.messages if m.run == i)
                out.append(f"run {rid} is QUEUED with {msgs} pending message(s)")
        elif w.started[i]:
            procs = [p.name for p in w.procs if p.run == i]
            if procs or (row is not None and row.status not in TERMINAL | AWAITING):
                status = row.status if row is not None else "no row"
                out.append(f"run {rid} is {status}, live: {', '.join(procs) or 'none'}")
    return "; ".join(out) or "goal not reached"
