"""A resume (RUNTIME 12.2, 12.3): the process an approval, a denial or an input starts. Its
steps read the row and decode its state, check access and the four-eyes rule, probe, claim
(T7), read the position and judge the gates, record the decision, or release the row back to
waiting; then the segment's loop (model/segment.py) runs the resumed turn."""

from __future__ import annotations

from . import rules, store
from .frames import T, end, input_side, made, put
from .segment import LOOP, decider, insert_not_stored, next_call, suspend_move, to_settle
from .state import (
    APPROVER_NOT_PERMITTED,
    CONFIGURATION_GONE,
    FAILED,
    INVALID_INPUT_SUBMISSION,
    SELF_APPROVAL_DENIED,
    SUBMITTER_NOT_PERMITTED,
    WAITING_FOR_APPROVAL,
    WAITING_FOR_INPUT,
    Event,
    Made,
    Proc,
    World,
    replace,
)
from .table import AUDIT, END, STORE, STORE_FAULTS, Action, Step
from .transition import Transition
from .vocab import Decision, FaultKind, Label, OutcomeName, PrincipalKind, Request, TransitionName

REQUEST_DECISION: dict[str, str] = {
    Request.APPROVE: Decision.APPROVE, Request.DENY: Decision.DENY, Request.INPUT: Decision.INPUT,
}


_DECISION_REQUEST: dict[str, str] = {d: q for q, d in REQUEST_DECISION.items()}


def _resume_read_faults(w: World, p: Proc) -> tuple[str, ...]:
    """12.2 steps 1 and 2: a row awaiting this decision has its stored state decoded before
    the claim (fault decode_error: CorruptSuspendedState)."""
    row = w.rows[p.run]
    if row is not None and row.status == (WAITING_FOR_INPUT if input_side(p) else WAITING_FOR_APPROVAL):
        return (FaultKind.STORE_ERROR, FaultKind.DECODE_ERROR)
    return STORE_FAULTS


def resume_read(w: World, p: Proc, t: Transition) -> World:
    """12.2 steps 1 and 2, before any store change: a refusal leaves the row untouched."""
    row = None if t.fault == FaultKind.STORE_ERROR else w.rows[p.run]
    want = WAITING_FOR_INPUT if input_side(p) else WAITING_FOR_APPROVAL
    if row is None or row.status != want:
        return end(w, p, "NotAwaitingInput" if input_side(p) else "NotAwaitingApproval")
    spec = w.config
    by = decider(w, p)
    if not (spec.policy.mutant_resume_skips_access
            or rules.may(spec, by, _DECISION_REQUEST[p.decision], p.run)):
        return end(w, p, OutcomeName.ACCESS_DENIED)  # step 2: the actor may not act on the run
    if p.refusal == CONFIGURATION_GONE:  # step 2: the run's configuration no longer exists
        return end(w, p, CONFIGURATION_GONE)
    if rules.self_approval(spec, by, p.run, p.decision) and not spec.policy.mutant_four_eyes_skipped:
        return end(w, p, SELF_APPROVAL_DENIED)  # step 2: the four-eyes rule (16.18.4)
    if t.fault == FaultKind.DECODE_ERROR:  # step 2: the stored state does not decode
        return end(w, p, "CorruptSuspendedState")
    if p.refusal == INVALID_INPUT_SUBMISSION:
        # 12.3 (ADR-105): validated before anything is probed or claimed; the run stays
        # waiting_for_input, nothing claimed, no event, and the user may resubmit
        return end(w, p, INVALID_INPUT_SUBMISSION)
    return put(w, replace(p, pc=Label.RESUME_PROBE, turn=row.suspended_state))


def resume_probe(w: World, p: Proc, t: Transition) -> World:
    if t.fault:
        return end(w, p, "StateUnavailable")
    return put(w, replace(p, pc=Label.RESUME_CLAIM))


def _resume_claim_move(w: World, p: Proc) -> Transition:
    name = TransitionName.CLAIM_FOR_RESUME_FROM_INPUT if input_side(p) else TransitionName.CLAIM_FOR_RESUME
    return T(name, p.name, run=w.run_id(p.run))


def resume_claim(w: World, p: Proc, t: Transition) -> World:
    pol = w.config.policy
    ok = False
    if not t.fault:
        frm = WAITING_FOR_INPUT if input_side(p) else WAITING_FOR_APPROVAL
        w, ok = store.claim_for_resume(w, p.run, frm, p.identity, pol.lease_all_segments)
    if not ok:
        return end(w, p, "AlreadyResuming")
    if p.by:  # a named principal's decision changed the row: its claim
        w = made(w, Made(p.by, p.run, _DECISION_REQUEST[p.decision]))
    row = w.rows[p.run]
    assert row is not None  # the claim matched it
    owner = p.identity if pol.lease_all_segments else ""
    p = replace(
        p, pc=Label.RESUME_POSITION, epoch=row.epoch, owner=owner, claim_requeues=row.requeue_count,
        guard=p.identity if pol.owner_guarded_settle_all else "", cap=w.config.constants.DEFAULT_ROUND_CAP,
    )
    return put(w, p)


def _resume_position_faults(w: World, p: Proc) -> tuple[str, ...]:
    """12.2 steps 5 and 6: the fresh position, and (since ADR-132) the decode of the state
    from the fresh row; before ADR-132 the state read before the claim was used."""
    if w.config.policy.approval_audit_failclosed:
        return (FaultKind.STORE_ERROR, FaultKind.DECODE_ERROR)
    return STORE_FAULTS


def resume_position(w: World, p: Proc, t: Transition) -> World:
    pol = w.config.policy
    if t.fault:  # settle_failed without an owner (proposal P4: guarded by its own claim)
        own = pol.failure_settles_own_claim
        p = replace(p, handle=0, guard=p.identity if own else "")
        err = "StateUnavailable" if t.fault == FaultKind.STORE_ERROR else "CorruptSuspendedState"
        return to_settle(w, p, TransitionName.SETTLE_FAILED, FAILED, "provider_failed", err, own, err,
                       OutcomeName.LEASE_LOST if own else err)
    row = w.rows[p.run]
    assert row is not None  # this segment's claim matched it (resume_claim); rows never go
    turn = row.suspended_state if pol.approval_audit_failclosed else p.turn
    p = replace(p, handle=store.max_sequence(w, p.run) + 1, turn=turn)
    # gate 1: the decision refers to the pending turn (an input's turn binding: ADR-150)
    inp = input_side(p)
    if turn < 0 or (turn != p.seen_turn and (pol.submitter_gate or not inp)):
        return put(w, replace(p, pc=Label.RELEASE, error="StaleInputTurn" if inp else "StaleApprovalTurn"))
    refusal = _gate_2(w, p, w.config.runs[p.run].answer(turn).calls)
    if refusal:
        return put(w, replace(p, pc=Label.RELEASE, error=refusal))
    return put(w, replace(p, pc=Label.RECORD_DECISION))


def _gate_2(w: World, p: Proc, calls: tuple[str, ...]) -> str:
    """Gate 2 after the claim (16.18.5), judged on the decider: of an approval (ADR-133), each
    call of the turn that declares a write must be permitted it (a denial skips it); of an
    input, the submitter gate (ADR-150): every pending call. "" when it passes."""
    spec = w.config
    pol = spec.policy
    by = decider(w, p)
    if pol.mutant_gates_pass_service_accounts:
        q = spec.principal(by)
        if q is not None and q.kind == PrincipalKind.SERVICE_ACCOUNT:
            return ""
    if p.decision == Decision.APPROVE and pol.approver_gate and (
            (p.refusal == APPROVER_NOT_PERMITTED and rules.write_turn(spec, w.removed, calls))
            or rules.approver_refused(spec, w.removed, by, calls)):
        return APPROVER_NOT_PERMITTED
    if p.decision == Decision.INPUT and pol.submitter_gate and rules.submitter_refused(spec, by, calls):
        return SUBMITTER_NOT_PERMITTED
    return ""


def _record_decision_move(w: World, p: Proc) -> Transition:
    name = TransitionName.RECORD_INPUT if input_side(p) else TransitionName.RECORD_APPROVAL
    return T(name, p.name, run=w.run_id(p.run))


def record_decision(w: World, p: Proc, t: Transition) -> World:
    spec = w.config
    if not t.fault:
        kind = "input" if input_side(p) else "approval"
        by = "" if spec.policy.mutant_decision_event_unsigned else decider(w, p)
        event = Event(p.run, p.handle, kind, p.turn, -1, "", p.seg, by)
        w, got = store.append_event(w, p.run, event, p.owner)
        if got != store.INSERT_STORED:
            return insert_not_stored(w, p, got)
        p = replace(p, handle=p.handle + 1)
    elif (
        p.decision == Decision.APPROVE
        and spec.policy.approval_audit_failclosed
        and rules.write_turn(spec, w.removed, spec.runs[p.run].answer(p.turn).calls)
    ):
        return put(w, replace(p, pc=Label.RELEASE, error="ApprovalNotAuditable"))  # gate 3
    return next_call(w, replace(p, call=0))


def release(w: World, p: Proc, t: Transition) -> World:
    status = WAITING_FOR_INPUT if input_side(p) else WAITING_FOR_APPROVAL
    ok = False
    if not t.fault:
        w, ok = store.suspend(w, p.run, status, p.turn, p)
    if ok:
        return end(w, p, p.error)
    # the release failed: settle_failed without an owner (proposal P4: under its own claim)
    own = w.config.policy.failure_settles_own_claim
    p = replace(p, guard=p.identity if own else "")
    return to_settle(w, p, TransitionName.SETTLE_FAILED, FAILED, "provider_failed", p.error, own, p.error,
                   OutcomeName.LEASE_LOST if own else p.error)


# the step table of this module: label, the step, what it fires, its faults, cost, place, then
STEPS: tuple[Action, ...] = (
    Step(Label.RESUME_READ, resume_read,
         fires=TransitionName.FIND_RUN, faults=(FaultKind.STORE_ERROR, FaultKind.DECODE_ERROR),
         cost=STORE, then=(Label.RESUME_PROBE, END), faults_now=_resume_read_faults,
         place="12.2 steps 1-2 (a resume decodes the loaded state)"),
    Step(Label.RESUME_PROBE, resume_probe,
         fires=TransitionName.MAX_SEQUENCE, faults=STORE_FAULTS, cost=STORE,
         then=(Label.RESUME_CLAIM, END), place="12.2 step 3"),
    Step(Label.RESUME_CLAIM, resume_claim,
         fires=(TransitionName.CLAIM_FOR_RESUME, TransitionName.CLAIM_FOR_RESUME_FROM_INPUT),
         faults=STORE_FAULTS, cost=STORE, then=(Label.RESUME_POSITION, END),
         move=_resume_claim_move, place="T7; 12.2 step 4"),
    Step(Label.RESUME_POSITION, resume_position,
         fires=TransitionName.MAX_SEQUENCE, faults=(FaultKind.STORE_ERROR, FaultKind.DECODE_ERROR),
         cost=STORE, then=(Label.RELEASE, Label.RECORD_DECISION, Label.SETTLE),
         faults_now=_resume_position_faults, place="4.2; 12.2 steps 5-6"),
    Step(Label.RECORD_DECISION, record_decision,
         fires=(TransitionName.RECORD_APPROVAL, TransitionName.RECORD_INPUT),
         faults=(FaultKind.AUDIT_INSERT_FAILS,), cost=AUDIT,
         then=(Label.RELEASE, Label.RECORD_DECISION) + LOOP, move=_record_decision_move,
         place="4.2; 12.2 step 9, 12.3"),
    Step(Label.RELEASE, release,
         fires=(TransitionName.SUSPEND, TransitionName.SUSPEND_FOR_INPUT), faults=STORE_FAULTS,
         cost=STORE, then=(Label.SETTLE, END), move=suspend_move,
         place="T6; 12.2 gates 1-3 (the row goes back to waiting)"),
)
