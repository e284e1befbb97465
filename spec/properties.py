"""What must hold: the guarantees of RUNTIME 16 as named properties over the World.

Each property is declared ONCE, on the function that decides it::

    @always("exclusive_claim",
            "□ ∀p≠q ∈ live segments: p.epoch > 0 ∧ q.epoch > 0 ⇒ (p.run,p.epoch) ≠ (q.run,q.epoch)",
            source="ADR-084, ADR-102; RUNTIME 16.2", reads=("procs",))
    def _find_double_claim(w: World) -> str | None:  # what violates it; None: it holds

The declaration gives the name, the formula exactly as spec/SPEC.md shows it
(tests/test_spec_md.py holds the two equal), the source (decision records, RUNTIME section),
the World fields the finder reads, and the finder. Everything else is derived from it: the
bool form ``Property.check`` (``find(w) is None``, built to cost what a hand-written wrapper
costs: see ``_holds``), the registry ``SAFETY`` (declaration order), ``explain`` and the
scenario evaluator. A liveness property is declared the same way by ``@leads_to`` on its goal
predicate (``LIVENESS``); it is checked by the engine's SCC analysis under the fairness of
``fairness(spec)``, derived from the actor table (each actor kind declares its fairness in
model/runtime.py), plus the property's own ``assumes``. The two kinds, their decorators, the
registries and the fairness are spec/declare.py (re-exported here); the properties are here.
spec/SPEC.md states every property beside the transitions it constrains, the ghost state it
reads, and the reading taken where the records are ambiguous.

The checks run on every explored state, so each one exits early on the common case (an
empty ledger, no marks, fewer than two events) and scans the world at most a few times.
``explain(name, world)`` runs the finder (or describes the rows that keep a liveness goal
from holding) and names the run, segment and call that violate it, for counterexample
output.

Ghost state read here (written by the model, read by no guard; docs/MODEL_GUIDE.md):
``Row.epoch``, ``Row.attempts``, ``Proc.epoch``, ``Event.seg``, ``Application.seg``,
``Application.fenced``, ``Application.attempt``, ``World.outcomes``, ``World.marks``.
"""

from __future__ import annotations

from collections.abc import Callable

from failclosed.model import names, rules, runtime, steps, store
from failclosed.model import scenario as _scenario
from failclosed.model.state import (
    APPLICATION_KINDS,
    AWAITING,
    CANCELLED,
    COMPLETED,
    IDEMPOTENT_WRITE,
    NON_IDEMPOTENT_WRITE,
    QUEUED,
    RESUME,
    RUNNING,
    STATUS_VIEW,
    SUSPENDED_FIELDS,
    SYNCHRONOUS,
    TERMINAL,
    WORKER,
    Application,
    ReaperState,
    World,
)
from failclosed.model.transition import Transition
from failclosed.model.vocab import Decision, Mark, OutcomeName, PrincipalKind, Request

from .declare import (
    LIVENESS,
    SAFETY,
    Fairness,
    Finder,
    LivenessProperty,
    Property,
    always,
    at_bound,
    declared_fairness,
    fairness,
    fairness_predicates,
    leads_to,
)
from .vocab import PropertyName

P = PropertyName

__all__ = [
    "LIVENESS",
    "evaluate",
    "SAFETY",
    "Fairness",
    "LivenessProperty",
    "Property",
    "PropertyName",
    "always",
    "at_bound",
    "explain",
    "fairness",
    "declared_fairness",
    "fairness_predicates",
    "leads_to",
]


# =========================================================================================
# helpers
# =========================================================================================
def _key(a: Application) -> tuple[int, int, int, str]:
    return (a.run, a.turn, a.call, a.seg)


def _audited(w: World) -> set[tuple[int, int, int, str]]:
    """(run, turn, call, seg) of every application that is audited or not yet judged: a
    stored ``tool`` event (an ambiguous commit stores the event, so it counts), or the live
    segment that landed it is still inside that call's own boundary, where its event is about
    to be stored. Such an application is judged when its segment leaves the boundary: it
    stores the event, or it stops (death, lost lease, audit failure) without it, and the
    exploration reaches both successors. A write-ahead ``intent`` event of the call by the same
    segment (stored before its invoke: proposal write_intent_recorded, spec/SPEC.md) records
    the application too: it says the write may have landed, which is what happened."""
    out = {(e.run, e.turn, e.call, e.seg) for e in w.events if e.kind in APPLICATION_KINDS}
    boundary = steps.boundary_labels()
    for p in w.procs:
        st = p.step
        if st and st[0] == "tool" and p.pc in boundary:
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


def _mark_finder(prefix: str, text: str) -> Finder:
    def find(w: World) -> str | None:
        if not w.marks:
            return None
        m = _mark(w, prefix)
        return None if m is None else f"run {m.split(':', 1)[1]}: {text}"

    return find


def _never_marked(name: str, prefix: str, text: str, *, source: str) -> Finder:
    """Declare ``□ ∀r: <prefix>r ∉ marks`` (a history fact model/store.py or model/runtime.py
    writes); its finder names the first such mark with ``text``."""
    return always(name, f"□ ∀r: {prefix}r ∉ marks", source=source, reads=_MARKS,
                  stable=True)(_mark_finder(prefix, text))


def _resume_decision(w: World, a_run: int, seg: str) -> str:
    """The k-th resume process of a run (label ``resume:<run>#<k>``) made the run's k-th
    resume decision (approve / deny / submit_input each start exactly one resume: the
    owner's decisions, then the named principals' requests, ``RunSpec.resume_decisions``)."""
    k = names.resume_number(seg)
    if k is None:
        return ""
    decisions = w.config.runs[a_run].resume_decisions
    return decisions[k - 1] if 0 < k <= len(decisions) else ""


def _outcome(w: World, seg: str) -> str | None:
    for s, _run, _kind, out in w.outcomes:
        if s == seg:
            return out
    return None


_SEGMENT_KINDS = (WORKER, SYNCHRONOUS, RESUME)
_AUDIT = ("ledger", "events", "procs")  # what _audited(w) reads, with the ledger
_MARKS = ("marks",)


# =========================================================================================
# safety: the write ledger against the audit log
# =========================================================================================
@always(
    P.NO_UNAUDITED_WRITE_SETTLES_SUCCESSFULLY,
    "□ ∀a∈L: row(a.run).status = completed ⇒ aud(a) ∨ (idem(a) ∧ ∃b∈L: b≠a ∧ call(b)=call(a) ∧ aud(b))",
    source="ADR-111; RUNTIME 16.10; ADR-112, RUNTIME 14.1, 16.8 (an idempotent write may land twice)",
    reads=_AUDIT + ("rows",),
)
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
            j != k and b.run == a.run and b.turn == a.turn and b.call == a.call
            and _key(b) in audited
            for j, b in enumerate(ledger)
        ):
            continue  # the same idempotent call applied again, before or after, with its event
        return f"run {w.run_id(a.run)} is completed over the unaudited write {_call(w, a)}"
    return None


def _ni_calls(w: World) -> dict[tuple[int, int, int], list[Application]]:
    out: dict[tuple[int, int, int], list[Application]] = {}
    for a in w.ledger:
        if a.effect == NON_IDEMPOTENT_WRITE:
            out.setdefault((a.run, a.turn, a.call), []).append(a)
    return out


@always(
    P.NO_WRITE_APPLIED_TWICE_WITHOUT_AUDIT,
    "□ ∀c: |N_c| ≥ 2 ⇒ ∀a∈N_c: aud(a)",
    source="ADR-111, ADR-112; RUNTIME 16.8, 16.10",
    reads=_AUDIT,
)
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


@always(
    P.NON_IDEMPOTENT_WRITE_AT_MOST_ONCE,
    "□ ∀c: |N_c| ≤ 1",
    source="not claimed (ADR-104, ADR-112, ADR-141: not exactly-once); RUNTIME 16.8 limits",
    reads=("ledger",),
    stable=True,
)
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


# Outcomes by which a segment reports success or carries the run on (8, 9).
_CONTINUING = frozenset({
    OutcomeName.COMPLETED, OutcomeName.AWAITING_APPROVAL, OutcomeName.AWAITING_INPUT, OutcomeName.REQUEUED,
    OutcomeName.GUARDRAIL_BLOCKED, OutcomeName.GUARDRAIL_APPROVAL_REQUIRED,
})


@always(
    P.NO_SUCCESS_OVER_UNRECORDED_WRITE,
    """
    □ ∀a∈L, s = a.seg: ¬aud(a) ⇒
        (∄p∈live: p.seg = s ∧ (p.turn,p.call) > (a.turn,a.call))
      ∧ (∄e∈E: e.seg = s ∧ (e.turn,e.call) > (a.turn,a.call))
      ∧ outcome(s) ∉ {COMPLETED, AWAITING_APPROVAL, AWAITING_INPUT, REQUEUED,
                      GUARDRAIL_BLOCKED, GUARDRAIL_APPROVAL_REQUIRED}
    """,
    source="ADR-111; RUNTIME 16.10",
    reads=_AUDIT + ("outcomes",),
)
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


# =========================================================================================
# safety: rows, claims and ownership (marks written by model/store.py)
# =========================================================================================
@always(
    P.TERMINAL_IS_ABSORBING,
    "□ ∀r: terminal_overwritten:r ∉ marks ∧ resurrection:r ∉ marks",
    source="ADR-092, ADR-101; RUNTIME 16.1",
    reads=_MARKS,
    stable=True,
)
def _find_terminal_changed(w: World) -> str | None:
    if not w.marks:
        return None
    m = _mark(w, Mark.TERMINAL_OVERWRITTEN.prefix) or _mark(w, Mark.RESURRECTION.prefix)
    if m is None:
        return None
    what, run = m.split(":", 1)
    if what == Mark.RESURRECTION:
        return f"run {run}: a suspend (T6) moved its terminal row back to waiting"
    return f"run {run}: a settle or cancel (T8/T13) overwrote its terminal row"


@always(
    P.EXCLUSIVE_CLAIM,
    "□ ∀p≠q ∈ live segments: p.epoch > 0 ∧ q.epoch > 0 ⇒ (p.run,p.epoch) ≠ (q.run,q.epoch)",
    source="ADR-084, ADR-102; RUNTIME 16.2",
    reads=("procs",),
)
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


_never_marked(
    P.OWNER_ONLY_MUTATION, Mark.FOREIGN_OWNER_MUTATION.prefix,
    "a segment that lost its claim renewed or stamped (T4/T5)",
    source="ADR-102, ADR-104, commit 3c1f5699, ADR-141; RUNTIME 16.3",
)
_never_marked(
    P.NO_ZOMBIE_APPEND, Mark.ZOMBIE_APPEND.prefix, "a segment that lost its claim persisted a step",
    source="ADR-104 (renew before persist); RUNTIME 16.4",
)
_never_marked(
    P.NO_ZOMBIE_SETTLE, Mark.ZOMBIE_SETTLE.prefix,
    "a segment that lost its claim settled, requeued or suspended the row",
    source="commit 3c1f5699, ADR-141; RUNTIME 16.5",
)


@always(
    P.STREAM_ORDER,
    """
    □ ∀r, with r's events e₀ e₁ … in insert order:
        e_i.seq < e_{i+1}.seq
      ∧ (i < j < k ∧ e_i.seg = e_k.seg ⇒ e_j.seg = e_i.seg)
    """,
    source="ADR-101, ADR-104; RUNTIME 16.17",
    reads=("events",),
    stable=True,
)
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


@always(
    P.BOUNDED_ATTEMPTS,
    "□ ∀r: row(r).attempts ≤ MAX_REQUEUES + 1",
    source="ADR-104; RUNTIME 16.6",
    reads=("rows",),
    stable=True,
)
def _find_too_many_attempts(w: World) -> str | None:
    bound = w.config.constants.MAX_REQUEUES + 1
    for i, row in enumerate(w.rows):
        if row is not None and row.attempts > bound:
            return f"run {w.run_id(i)} executed {row.attempts} times (bound {bound})"
    return None


_never_marked(
    P.NO_RETRY_OF_NON_RETRYABLE, Mark.RETRY_OF_NON_RETRYABLE.prefix,
    "recovery requeued a failure of a non-retryable class",
    source="ADR-095, ADR-104, ADR-111; RUNTIME 16.7",
)


# =========================================================================================
# safety: the write fence, approval and cancellation
# =========================================================================================
@always(
    P.INTERRUPTED_NON_IDEMPOTENT_WRITE_NOT_REPEATED,
    """
    □ ∀a∈L: nonidem(a) ∧ ¬aud(a) ⇒
        (∄b>a: call(b) = call(a)) ∧ (row(a.run) = ⊥ ∨ row(a.run).attempts ≤ a.attempt)
    """,
    source="ADR-112, ADR-141 (ADR-111); RUNTIME 16.8",
    reads=_AUDIT + ("rows",),
)
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


@always(
    P.WRITES_ONLY_UNDER_FENCE,
    "□ ∀a∈L: a.fenced",
    source="ADR-112, ADR-141; RUNTIME 16.9",
    reads=("ledger", "rows"),
    stable=True,
)
def _find_unfenced_write(w: World) -> str | None:
    for a in w.ledger:
        if not a.fenced:
            if w.rows[a.run] is None:
                return f"the write {_call(w, a)} ran with no persisted run"
            return f"the write {_call(w, a)} started unfenced: no T5 stamp of its own matched before it ran"
    return None


@always(
    P.NO_WRITE_WITHOUT_RECORDED_APPROVAL,
    """
    □ ∀a∈L: a.seg = resume:<r>#k ∧ decisions(r)[k-1] = approve ∧ a.turn = first_turn(a.seg)
        ⇒ ∃e∈E: e.kind = approval ∧ e.seg = a.seg
    """,
    source="ADR-132; RUNTIME 16.11",
    reads=("ledger", "events"),
)
def _find_unrecorded_approval(w: World) -> str | None:
    ledger = w.ledger
    if not ledger:
        return None
    for a in ledger:
        seg = a.seg
        if _resume_decision(w, a.run, seg) != Decision.APPROVE:
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


@always(
    P.RACE_SAFE_STALENESS,
    """
    □ ∀k∈reapers: k.pc = row ∧ r = k.rows[k.idx].run ∧ row(r) ≠ ⊥ ∧ ¬stale(row(r), k.now)
        ⇒ fire(k: requeue_stale r).row(r) = row(r) ∧ fire(k: dead_letter_stale r).row(r) = row(r)
    """,
    source="ADR-104; RUNTIME 16.14",
    reads=("reapers", "rows", "clock"),  # T11/T12 of each reaper's row, by fire
)
def _find_unsafe_staleness(w: World) -> str | None:
    for r in w.reapers:  # every reaper's decision is judged (10: reapers may race)
        found = _unsafe_decision(w, r)
        if found is not None:
            return found
    return None


def _unsafe_decision(w: World, r: ReaperState) -> str | None:
    """Reaper ``r``'s decision, if it is at one, would change a row that is no longer stale
    by its tick's clock."""
    if r.pc != steps.REAPER_DECISION:
        return None
    run = r.rows[r.idx][0]
    row = w.rows[run]
    if row is None or store.stale(w, row, r.now):
        return None  # still stale by the tick's clock: the reaper may act
    rid = w.run_id(run)
    who = "the reaper" if w.config.reapers == 1 else r.name
    # each branch the decision may take (T11, T12), whichever the snapshot chose
    for name in steps.REAPER_ACTIONS[r.pc].fires:
        t = Transition.make(name, r.name, run=rid, reason="not_retryable")
        if runtime.fire(w, t).rows[run] != row:
            return (
                f"run {rid}: {who}'s {t.name} (tick now={r.now}) would change a row "
                f"renewed or moved since its SELECT (lease_expires={row.lease_expires}, "
                f"status={row.status})"
            )
    return None


@always(
    P.COOPERATIVE_CANCEL,
    """
    □ ∀r: row(r).termination_reason = cancelled ⇒ row(r).status = cancelled
    □ ∀p∈live: p.pc = stamp ∧ row(p.run).status = cancelled ⇒ fire(p's stamp).row = row
    □ ∀r: past_cancel:r ∉ marks
    """,
    source="ADR-092, ADR-103; RUNTIME 16.15",
    reads=("rows", "marks", "procs", "removed", "clock"),  # and T5 of a stamp, by fire
)
def _find_cancel_broken(w: World) -> str | None:
    for i, row in enumerate(w.rows):
        if row is not None and row.termination_reason == "cancelled" and row.status != CANCELLED:
            return f"run {w.run_id(i)} was cancelled but is now {row.status}"
    if w.marks:
        m = _mark(w, Mark.PAST_CANCEL.prefix)
        if m is not None:
            return f"run {m.split(':', 1)[1]}: a segment started work past a cancelled boundary"
    for p in w.procs:
        if p.pc != steps.STAMP:
            continue
        row = w.rows[p.run]
        if row is None or row.status != CANCELLED:
            continue
        rid = w.run_id(p.run)
        t = runtime.stamp_move(w, p)  # the stamp the hook would take now
        if runtime.fire(w, t).rows[p.run] != row:
            return f"run {rid}: {p.seg} stamped a write on the cancelled row"
    return None


_never_marked(
    P.NO_RESURRECTION_BY_SUSPEND, Mark.RESURRECTION.prefix,
    "a suspend (T6) moved a terminal row back to waiting",
    source="ADR-101; RUNTIME 16.16",
)


# -- access (RUNTIME 16.18.2, 16.18.3): what a named principal's request changed or read ----------
# ``World.made`` (ghost) holds each request of a named principal that took effect: a store
# change on its behalf (a cancel that matched, a resume's claim) or a read it was answered.
# Each property judges it by the access rule of model/rules.py ``may``.
_CHANGES = frozenset({Request.CANCEL, Request.APPROVE, Request.DENY, Request.INPUT})
_READS = frozenset({Request.STATUS, Request.EVENTS})


def _made_without_access(w: World, requests: frozenset[str], what: str) -> str | None:
    for m in w.made:
        if m.request in requests and not rules.may(w.config, m.by, m.request, m.run):
            return f"{m.by} {what} run {w.run_id(m.run)} ({m.request}), which it may not"
    return None


@always(
    P.NO_STORE_CHANGE_WITHOUT_ACCESS,
    """
    □ ∀m∈made: m.request ∈ {cancel, approve, deny, input} ⇒ may(m.by, m.request, m.run)
    """,
    source="RUNTIME 16.18, 11 step 1, 12.2 step 2", reads=("made",), stable=True,
)
def _find_change_without_access(w: World) -> str | None:
    return _made_without_access(w, _CHANGES, "changed")


@always(
    P.NO_APPROVAL_WITHOUT_ACCESS,
    """
    □ ∀m∈made: m.request = approve ⇒ may(m.by, approve, m.run)
    """,
    source="RUNTIME 16.18, 16.11, 12.2 step 2", reads=("made",), stable=True,
)
def _find_approval_without_access(w: World) -> str | None:
    return _made_without_access(w, frozenset({Request.APPROVE}), "approved")


@always(
    P.NO_READ_WITHOUT_ACCESS,
    """
    □ ∀m∈made: m.request ∈ {status, events} ⇒ may(m.by, m.request, m.run)
    """,
    source="RUNTIME 16.18", reads=("made",), stable=True,
)
def _find_read_without_access(w: World) -> str | None:
    return _made_without_access(w, _READS, "read")


@always(
    P.STATUS_VIEW_STRIPS_SUSPENDED_STATE,
    """
    □ ∀m∈made: m.request = status ⇒ fields(m.view) ⊆ STATUS_VIEW ∧ suspended_state ∉ fields(m.view)
    """,
    source="RUNTIME 16.18", reads=("made",), stable=True,
)
def _find_status_view_with_state(w: World) -> str | None:
    for m in w.made:
        if m.request != Request.STATUS:
            continue
        carried = [f for f, _ in m.view if f in SUSPENDED_FIELDS or f not in STATUS_VIEW]
        if carried:
            return (f"the status view {m.by} read of run {w.run_id(m.run)} carries "
                    f"{', '.join(carried)}")
    return None


# -- who decided (RUNTIME 16.18.4, 16.18.5): the calls a resume released, judged on its decider -----
# ``Application.decision`` and ``.by`` (ghost) name the decision that released a call of a
# resumed turn and the principal who made it; an ``approval`` / ``input`` event names it too.
def _released(w: World) -> list[Application]:
    return [a for a in w.ledger if a.decision]


def _kind(w: World, by: str) -> str:
    p = w.config.principal(by)
    return p.kind if p is not None else ""


@always(
    P.NO_WRITE_OR_INPUT_RELEASED_BY_SERVICE_ACCOUNT,
    """
    □ (∀a∈ledger: a.decision ∈ {approve, input} ⇒ kind(a.by) ≠ service_account)
      ∧ (∀e∈events: e.kind = input ⇒ kind(e.by) ≠ service_account)
    """,
    source="RUNTIME 16.18.5, ADR-133, ADR-150", reads=("ledger", "events"), stable=True,
)
def _find_service_account_release(w: World) -> str | None:
    for a in _released(w):
        if a.decision != Decision.DENY and _kind(w, a.by) == PrincipalKind.SERVICE_ACCOUNT:
            return (f"service account {a.by}'s {a.decision} released {a.tool} ({a.effect}) of "
                    f"run {w.run_id(a.run)} in {a.seg}")
    for e in w.events:
        if e.kind == "input" and _kind(w, e.by) == PrincipalKind.SERVICE_ACCOUNT:
            return f"service account {e.by} submitted the input of run {w.run_id(e.run)} ({e.seg})"
    return None


@always(
    P.NO_SELF_APPROVED_WRITE,
    """
    □ ∀a∈ledger: a.decision = approve ∧ require_second_approver(a.run) ⇒ ¬initiator(a.by, a.run)
    """,
    source="RUNTIME 16.18.4, ADR-172", reads=("ledger",), stable=True,
)
def _find_self_approved_write(w: World) -> str | None:
    spec = w.config
    for a in _released(w):
        if (a.decision == Decision.APPROVE and spec.runs[a.run].require_second_approver
                and rules.initiator(spec, a.by, a.run)):
            return (f"{a.by} started run {w.run_id(a.run)}, which requires a second approver, "
                    f"and its own approval released {a.tool} in {a.seg}")
    return None


@always(
    P.NO_CALL_BEYOND_ITS_PRINCIPALS_POLICY,
    """
    □ ∀a∈ledger: a.decision ≠ "" ⇒ permitted(owner(a.run), a.tool)
        ∧ (a.decision ∈ {approve, input} ⇒ permitted(a.by, a.tool))
    """,
    source="RUNTIME 16.18.5, 17, ADR-133, ADR-150", reads=("ledger",), stable=True,
)
def _find_call_beyond_policy(w: World) -> str | None:
    spec = w.config
    for a in _released(w):
        owner = spec.runs[a.run].owner
        if not rules.permitted(spec, owner, a.tool):
            return (f"{a.tool} ran in {a.seg} under run {w.run_id(a.run)}'s owner {owner}, "
                    "whose tool policy refuses it")
        if a.decision != Decision.DENY and not rules.permitted(spec, a.by, a.tool):
            return (f"{a.tool} ran in {a.seg} on the {a.decision} of {a.by}, whose tool policy "
                    "refuses it")
    return None


@always(
    P.DECISION_EVENTS_NAME_THEIR_PRINCIPAL,
    """
    □ ∀e∈events: e.kind ∈ {approval, input} ⇒ e.by ∈ principals
    """,
    source="RUNTIME 16.18.5 (decidedBy, submittedBy), ADR-173", reads=("events",), stable=True,
)
def _find_unsigned_decision(w: World) -> str | None:
    for e in w.events:
        if e.kind in ("approval", "input") and w.config.principal(e.by) is None:
            return (f"the {e.kind} event {e.seq} of run {w.run_id(e.run)} ({e.seg}) names "
                    f"{e.by or 'no one'}")
    return None


@always(
    P.ONE_EVENT_PER_STEP,
    """
    □ ∀e≠e'∈events: e.run = e'.run ∧ e.seg = e'.seg
                     ⇒ (e.kind, e.turn, e.call) ≠ (e'.kind, e'.turn, e'.call)
    """,
    source="RUNTIME 3.2, 7.2, 16.17 (the stream: a step's event stored once)", reads=("events",), stable=True,
)
def _find_step_stored_twice(w: World) -> str | None:
    """A segment's step is one audit event: the same segment storing the event of the same
    step (kind, turn, call) again is an event stored twice (an insert retried after one that
    did store, a step recorded a second time)."""
    first: dict[tuple[int, str, str, int, int], int] = {}  # a step -> its first sequence
    for e in w.events:
        key = (e.run, e.seg, e.kind, e.turn, e.call)
        if key in first:
            return (f"run {w.run_id(e.run)}: {e.seg} stored its {e.kind} event of turn "
                    f"{e.turn} call {e.call} twice (sequences {first[key]} and {e.seq})")
        first[key] = e.seq
    return None


# =========================================================================================
# liveness (the fairness it is checked under: spec/declare.py)
# =========================================================================================
def _owned(w: World, i: int, epoch: int) -> bool:
    return any(p.run == i and p.epoch == epoch and p.kind in _SEGMENT_KINDS for p in w.procs)


def _describe_rows(w: World, row_text: Callable[[World, int, str], str | None]) -> str:
    out = [t for i in range(len(w.rows)) if (t := row_text(w, i, w.run_id(i))) is not None]
    return "; ".join(out) or "goal not reached"


def _abandoned_text(w: World, i: int, rid: str) -> str | None:
    row = w.rows[i]
    if row is not None and row.status == RUNNING and row.lease_expires > 0 and not _owned(
        w, i, row.epoch
    ):
        return f"run {rid} is RUNNING (lease {row.lease_expires}) with no live owner"
    return None


def _queued_text(w: World, i: int, rid: str) -> str | None:
    row = w.rows[i]
    if row is not None and row.status == QUEUED:
        msgs = sum(1 for m in w.messages if m.run == i)
        return f"run {rid} is QUEUED with {msgs} pending message(s)"
    return None


def _unsettled_text(w: World, i: int, rid: str) -> str | None:
    if not w.started[i]:
        return None
    row = w.rows[i]
    procs = [p.name for p in w.procs if p.run == i]
    if procs or (row is not None and row.status not in TERMINAL | AWAITING):
        status = row.status if row is not None else "no row"
        return f"run {rid} is {status}, live: {', '.join(procs) or 'none'}"
    return None


@leads_to(
    P.LEASED_RUNS_LEAVE_RUNNING,
    """
    true ~> ∀r: ¬(row(r).status = running ∧ row(r).lease_expires > 0
                  ∧ ∄p∈live segments: p.run = r ∧ p.epoch = row(r).epoch)
    """,
    source="ADR-104, ADR-141; RUNTIME 16.12",
    describe=lambda w: _describe_rows(w, _abandoned_text),
)
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


@leads_to(
    P.NO_ORPHAN_QUEUED_RUN,
    "true ~> ∀r: row(r).status ≠ queued",
    source="ADR-102, commit a7e1a954; RUNTIME 9 step 8, 16.13",
    describe=lambda w: _describe_rows(w, _queued_text),
)
def no_queued_row(w: World) -> bool:
    """Goal of no_orphan_queued_run: no row is QUEUED."""
    return all(row is None or row.status != QUEUED for row in w.rows)


@leads_to(
    P.EVERY_RUN_TERMINATES,
    """
    true ~> ∀r started: (row(r) = ⊥ ∨ row(r).status ∈ TERMINAL ∪ AWAITING)
                        ∧ ∄p∈live: p.run = r
    """,
    source="ADR-092, ADR-104; RUNTIME 8, 16.12, 16.13",
    describe=lambda w: _describe_rows(w, _unsettled_text),
)
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


# =========================================================================================
# derived: explanations and the scenario evaluator
# =========================================================================================
def explain(name: str, world: World) -> str:
    """Which run, segment or call violates property ``name`` in ``world`` ("holds" if none)."""
    p = SAFETY.get(name)
    if p is not None:
        why = p.find(world)
        return "holds" if why is None else why
    lp = LIVENESS.get(name)
    if lp is not None:
        return "holds (goal reached)" if lp.goal(world) else lp.describe(world)
    raise KeyError(f"unknown property {name!r}: use one of {', '.join([*SAFETY, *LIVENESS])}")


def evaluate(world: World, name: str) -> tuple[bool, str]:
    """A safety property by name on one world, for a scenario's ``holds`` / ``violates``:
    (holds, which run or segment violates it). ``LookupError`` names the valid ones."""
    if name not in SAFETY:
        raise LookupError(f"no safety property {name!r}; use one of {', '.join(SAFETY)}")
    why = SAFETY[name].find(world)
    return why is None, "" if why is None else why


_scenario.register_property_evaluator(evaluate)
