"""The callers (RUNTIME 6.1, 11, 12, 16.18): a run's start (T1) or enqueue (T2), its owner's
cancels and decisions, and the named principals' requests, each a transition of its own."""

from __future__ import annotations

from . import identities as names
from . import rules, store
from .frames import T, cap, made, other_faults, set_tuple, spawn, with_faults
from .resume import REQUEST_DECISION
from .segment import enter_round
from .state import (
    APPROVER_NOT_PERMITTED,
    AWAITING,
    CONFIGURATION_GONE,
    ENQUEUE,
    INVALID_INPUT_SUBMISSION,
    NO_TRANSPORT,
    REQUEST,
    RESUME,
    STATUS_VIEW,
    SUSPENDED_FIELDS,
    SYNCHRONOUS,
    WAITING_FOR_APPROVAL,
    WAITING_FOR_INPUT,
    Asked,
    Config,
    Made,
    Outcome,
    Proc,
    ResumePart,
    World,
    replace,
)
from .transition import Transition
from .vocab import ActorKind, Decision, Label, OutcomeName, Request, TransitionName


def answers(w: World, name: str) -> bool:
    return name == ActorKind.CALLER


def moves(w: World, name: str | None, one_order: bool, only: list[int] | None) -> list[Transition]:
    """Each run's start or enqueue (before it is started), then its owner's cancels and
    decisions and the named principals' requests (``only``: those run slots')."""
    spec = w.config
    pol = spec.policy
    out: list[Transition] = []
    for i in range(len(spec.runs)) if only is None else only:
        r = spec.runs[i]
        rid = r.id
        row = w.rows[i]
        if not w.started[i]:
            if r.entry == "interactive":
                out.extend(with_faults(w, T(store.START_RUN, ActorKind.CALLER, run=rid), other_faults(store.START_RUN)))
            elif pol.queue and spec.transport == NO_TRANSPORT:
                out.append(T(store.ENQUEUE_RUN, ActorKind.CALLER, run=rid))  # 6.4: no T2 to fail
            elif pol.queue:
                out.extend(with_faults(w, T(store.ENQUEUE_RUN, ActorKind.CALLER, run=rid), other_faults(store.ENQUEUE_RUN)))
            continue
        if w.cancels[i] < r.cancels:
            out.extend(with_faults(w, T(store.CANCEL, ActorKind.CALLER, run=rid), other_faults(store.CANCEL)))
        if w.decisions[i] < len(r.decisions) and row is not None and row.status in AWAITING:
            d = r.decisions[w.decisions[i]]
            want = WAITING_FOR_INPUT if d == Decision.INPUT else WAITING_FOR_APPROVAL
            if row.status == want:
                by_decision: dict[str, str] = {Decision.APPROVE: TransitionName.APPROVE, Decision.DENY: TransitionName.DENY, Decision.INPUT: TransitionName.SUBMIT_INPUT}
                name = by_decision[d]
                out.extend(with_faults(w, T(name, ActorKind.CALLER, run=rid), other_faults(name)))
                # the requests that fail a check of their own: the configuration is gone (12.2
                # step 2), the input fails its schema (12.3), the approver may not run the
                # turn's writes (12.2 gate 2; a denial passes it)
                if CONFIGURATION_GONE in spec.refusals:
                    out.append(T(name, ActorKind.CALLER, run=rid, configured=False))
                if d == Decision.INPUT:
                    if INVALID_INPUT_SUBMISSION in spec.refusals:
                        out.append(T(name, ActorKind.CALLER, run=rid, valid=False))
                elif APPROVER_NOT_PERMITTED in spec.refusals and pol.approver_gate:
                    # (no gate 2 before ADR-133: the refused variant would be the same request)
                    out.append(T(name, ActorKind.CALLER, run=rid, permitted=False))
        if r.requests:
            out.extend(_request_moves(w, i))
    return out


# A named principal's request (RunSpec.requests) -> the transition that makes it; a decision
# waits for the row's waiting status, as the owner's do
_REQUEST_MOVES: dict[str, str] = {
    Request.APPROVE: TransitionName.APPROVE, Request.DENY: TransitionName.DENY,
    Request.INPUT: TransitionName.SUBMIT_INPUT, Request.CANCEL: store.CANCEL,
    Request.STATUS: TransitionName.READ_STATUS, Request.EVENTS: TransitionName.READ_EVENTS,
}


# the transitions only a named principal's request fires (the owner's decisions and cancels
# fire the others too): a configuration without RunSpec.requests never enables these
REQUEST_ONLY: frozenset[str] = frozenset(_REQUEST_MOVES.values()) - {
    TransitionName.APPROVE, TransitionName.DENY, TransitionName.SUBMIT_INPUT, store.CANCEL}


def unreachable_in(config: Config) -> frozenset[str]:
    """The transitions ``config`` never enables for want of what fires them: a named
    principal's request (:data:`REQUEST_ONLY`, without RunSpec.requests), the operator's
    cancel command (without ``operator_cancels``), and the refused tick (with a transport)."""
    out: set[str] = set()
    if not any(r.requests for r in config.runs):
        out |= REQUEST_ONLY
    if not config.operator_cancels:
        out.add(TransitionName.CANCEL_COMMAND)
    if config.transport != NO_TRANSPORT:
        out.add(TransitionName.TICK_REFUSED)
    return frozenset(out)


def _request_moves(w: World, i: int) -> list[Transition]:
    """Run ``i``'s requests by named principals not made yet (RUNTIME 16.18), each once: a
    decision while the row waits for it, any other once the run is started."""
    r = w.config.runs[i]
    row = w.rows[i]
    out: list[Transition] = []
    for k, a in enumerate(r.requests):
        if Asked(i, k) in w.asked:
            continue
        decision = REQUEST_DECISION.get(a.request)
        if decision is not None:
            want = WAITING_FOR_INPUT if decision == Decision.INPUT else WAITING_FOR_APPROVAL
            if row is None or row.status != want:
                continue
        name = _REQUEST_MOVES[a.request]
        if a.request == Request.EVENTS:
            out.append(T(name, ActorKind.CALLER, run=r.id, by=a.by, after_sequence=a.after))
        else:
            out.append(T(name, ActorKind.CALLER, run=r.id, by=a.by))
    return out


def fire(w: World, t: Transition) -> World:
    """A run's start (the synchronous segment enters its first round), its enqueue (the enqueue
    caller goes on to dispatch), a cancel, a decision (a resume starts) or a request."""
    spec = w.config
    pol = spec.policy
    i = spec.run_index(t.arg("run"))
    r = spec.runs[i]
    rid = r.id
    name = t.name
    if name == store.START_RUN:
        w = replace(w, started=set_tuple(w.started, i, True))
        identity = names.caller_identity(rid)
        leased = pol.lease_all_segments
        p = Proc(
            name=names.caller_process(rid), kind=SYNCHRONOUS, run=i, pc="", seg=names.sync_segment(rid),
            identity=identity, observer=r.observer, cap=cap(w, i),
        )
        if t.fault:  # T1 failed: the segment runs with no handle (fail-soft)
            p = replace(p, handle=-1)
        else:
            w, _ = store.start_run(w, i, identity, leased)
            owner = identity if leased else ""
            p = replace(
                p, handle=0, owner=owner, guard=identity if pol.owner_guarded_settle_all else "",
                epoch=1,
            )
        w = spawn(w, p)
        return enter_round(w, p)
    if name == store.ENQUEUE_RUN:
        w = replace(w, started=set_tuple(w.started, i, True))
        if spec.transport == NO_TRANSPORT:
            return _enqueue_refused(w, i)
        if t.fault:
            return w  # EnqueueFailed, no message
        w, _ = store.enqueue_run(w, i)
        p = Proc(name=names.enqueue_process(rid), kind=ENQUEUE, run=i, pc=Label.DISPATCH,
                 seg=names.enqueue_process(rid))
        return spawn(w, p)
    by = t.arg("by")
    if by is not None:
        return _request(w, t, i, by)
    if name == store.CANCEL:
        w = replace(w, cancels=set_tuple(w.cancels, i, w.cancels[i] + 1))
        if t.fault:
            return w
        w, ok = store.cancel(w, i)
        return w
    if name in (TransitionName.APPROVE, TransitionName.DENY, TransitionName.SUBMIT_INPUT):
        return _resume(w, t, i)
    raise AssertionError(t)  # pragma: no cover


def _enqueue_refused(w: World, i: int) -> World:
    """6.4: without a transport, enqueue fails up front (EnqueueFailed) before anything is
    stored: no T2, no row, no message. The mutant stores the row first and then fails,
    leaving a queued row no message will ever wake (it kills no_orphan_queued_run)."""
    if w.config.policy.mutant_enqueue_stores_before_transport_check:
        w, _ = store.enqueue_run(w, i)
    caller = names.enqueue_process(w.run_id(i))
    return replace(w, outcomes=w.outcomes + (Outcome(caller, i, ENQUEUE, OutcomeName.ENQUEUE_FAILED),))


def _resume(w: World, t: Transition, i: int, by: str = "", k: int = 0) -> World:
    """A decision starts a resume process (12.2, 12.3): one of RunSpec.decisions, made by the
    run's owner (``by`` ""; the run's next resume number), or a named principal's request,
    whose access the resume checks at step 2 (``resume_read``), as resume ``k``
    (``RunSpec.resume_decisions``)."""
    r = w.config.runs[i]
    if not by:
        k = w.resumes[i] + 1
        w = replace(w, resumes=set_tuple(w.resumes, i, k),
                    decisions=set_tuple(w.decisions, i, w.decisions[i] + 1))
    row = w.rows[i]
    by_name: dict[str, str] = {TransitionName.APPROVE: Decision.APPROVE, TransitionName.DENY: Decision.DENY, TransitionName.SUBMIT_INPUT: Decision.INPUT}
    decision = by_name[t.name]
    label = names.resume_process(r.id, k)
    refusal = ""
    if t.arg("configured") is False:
        refusal = CONFIGURATION_GONE
    elif t.arg("permitted") is False and decision == Decision.APPROVE:
        refusal = APPROVER_NOT_PERMITTED  # gate 2 checks an approval only (12.2 step 8)
    elif t.arg("valid") is False:
        refusal = INVALID_INPUT_SUBMISSION
    p = Proc(
        name=label, kind=RESUME, run=i, pc=Label.RESUME_READ, seg=label, identity=label,
        observer=r.observer,
        part=ResumePart(decision, row.suspended_state if row is not None else -1, refusal, by),
    )
    return spawn(w, p)


def _request(w: World, t: Transition, i: int, by: str) -> World:
    """A named principal's request (RunSpec.requests), made once. A decision starts a resume
    (which checks access at 12.2 step 2); a cancel checks access after the run is found (11
    step 1), then runs T13, and returns false when refused as when T13 matches nothing; a read
    checks access after the run is found and returns nothing when refused, as for an unknown
    run (16.18.3). Nothing is stored either way."""
    spec = w.config
    r = spec.runs[i]
    k = next(k for k, a in enumerate(r.requests)
             if a.by == by and _REQUEST_MOVES[a.request] == t.name and Asked(i, k) not in w.asked
             and (a.request != Request.EVENTS or a.after == t.arg("after_sequence")))
    req = r.requests[k].request
    w = replace(w, asked=w.asked | {Asked(i, k)})
    if req in REQUEST_DECISION:  # resume number: after the owner's, in request order
        n = len(r.decisions) + sum(1 for a in r.requests[:k + 1] if a.request in REQUEST_DECISION)
        return _resume(w, t, i, by, n)
    pol = spec.policy
    skip = pol.mutant_cancel_skips_access if req == Request.CANCEL else pol.mutant_read_skips_access
    allowed = skip or rules.may(spec, by, req, i)
    if req == Request.CANCEL:
        ok = False
        if allowed:
            w, ok = store.cancel(w, i)
        return made(w, Made(by, i, req)) if ok else _answered(w, i, by, OutcomeName.RETURNED_FALSE)
    row = w.rows[i]
    if row is None or not allowed:  # find_run found nothing, or the check refused: nothing
        return _answered(w, i, by, OutcomeName.RETURNED_NOTHING)
    if req == Request.STATUS:
        return made(w, Made(by, i, req, view=_status_view(w, row)))
    after = t.arg("after_sequence")
    seqs = sorted(e.seq for e in w.events if e.run == i and e.seq > after)
    return made(w, Made(by, i, req, seqs=tuple(seqs)))


def _status_view(w: World, row) -> tuple[tuple[str, object], ...]:
    """The status view of a row (RUNTIME 16.18.3): the fields of ``STATUS_VIEW``, the whole row
    less the suspended state and the stored request (the mutant
    mutant_status_view_keeps_state returns them too)."""
    keep = STATUS_VIEW + (SUSPENDED_FIELDS if w.config.policy.mutant_status_view_keeps_state else ())
    return tuple((f, getattr(row, f)) for f in keep)


def _answered(w: World, i: int, by: str, outcome: str) -> World:
    """A named principal's cancel or read that changed or read nothing: what it returned (a
    cancel false, a read nothing), the outcome naming the principal as its segment."""
    return replace(w, outcomes=w.outcomes + (Outcome(by, i, REQUEST, outcome),))
