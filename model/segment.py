"""A segment (RUNTIME 7-9): the loop a synchronous caller, a queued worker and a resume run once
their row is theirs. Each step is one function, read top to bottom: the guard is its label
(``Proc.pc``), then its normal and fault branches, its effect on the store, and the label it
goes to. Its declaration (transition, faults, cost, place, the labels it may go to) is in
:data:`STEPS` at the foot of this module.

A step boundary (7.2) is ``on_step`` -> ``probe`` (the cancel probe, ``find_run``) ->
``renew`` (T4, or the T5 clear of a write's fence) -> ``persist`` (``record_step``), then
the continuation the boundary was entered with (``Proc.then``: a label); the before-tool
hook (7.3) is ``stamp`` (T5); then ``invoke``; the provider call is ``provider``. The ladder
(8) and queued-run recovery (9) end a segment. A slow operation is time passing while a
segment waits at ``invoke`` or ``provider``: a tool's effect lands when ``invoke`` fires.
"""

from __future__ import annotations

from . import identities as names
from . import rules, store
from .frames import T, call_name, dispatch_queued, end, input_side, put
from .rules import (
    APPROVAL_REQUIRED,
    AUDIT_PERSISTENCE_FAILED,
    CANCELLATION_REQUESTED,
    GUARDRAIL_APPROVAL_REQUIRED,
    GUARDRAIL_VIOLATION,
    INPUT_REQUIRED,
    LEASE_LOST,
    OBSERVER_ERROR,
    PROVIDER_ERROR,
    WRITE_WITHOUT_DURABLE_EXECUTION,
)
from .state import (
    CANCELLED,
    ENQUEUE,
    FAILED,
    INTENT_KIND,
    QUEUED,
    WAITING_FOR_APPROVAL,
    WAITING_FOR_INPUT,
    WORKER,
    Application,
    Event,
    Proc,
    ResumePart,
    RunStep,
    SettlePlan,
    World,
    replace,
)
from .table import (
    AUDIT,
    DISPATCH,
    END,
    NONE,
    PROVIDER,
    SETTLE,
    STAMP,
    STORE,
    STORE_FAULTS,
    TOOL,
    Action,
    Step,
)
from .transition import Transition
from .vocab import Decision, FaultKind, Label, Mark, OutcomeName, TransitionName

# The labels a segment may go on to, named for the ``then`` of the steps below: a step
# boundary with a handle (7.2), the ladder's arms (8), and the loop's next step (after a
# boundary, or at once where there is nothing to persist: the provider call, the before-tool
# hook and the tool, a boundary, or an arm of the ladder).
BOUNDARY = (Label.ON_STEP, Label.PROBE, Label.RENEW, Label.PERSIST)


LADDER = (Label.SUSPEND, Label.SETTLE, Label.RECOVERY_READ, END)


LOOP = BOUNDARY + (Label.PROVIDER, Label.STAMP, Label.INVOKE) + LADDER


def _write_boundary(w: World, p: Proc) -> bool:
    """A write step's boundary on a segment where the fence is installed."""
    pol = w.config.policy
    if not (pol.write_fence or pol.unleased_write_refused):
        return False
    return rules.is_write(rules.step_effect(w.config, w.removed, p.step))


def _clears_fence(w: World, p: Proc) -> bool:
    """The renewal slot of a write's boundary is the T5 clear where the fence is installed
    (7.2 step 4), unless the proposal fence_cleared_after_audit moves it after the persist."""
    return _write_boundary(w, p) and not w.config.policy.fence_cleared_after_audit


def _hook_installed(w: World, p: Proc) -> bool:
    pol = w.config.policy
    if pol.unleased_write_refused:
        return True
    return pol.write_fence and p.handle >= 0 and bool(p.owner)


def enter_round(w: World, p: Proc) -> World:
    """7.1: a round starts with its ``request`` boundary; after ``cap`` rounds, synthesis."""
    p = replace(p, synthesis=p.rounds >= p.cap, call=0)
    return _boundary(w, p, RunStep("request", p.turn, -1, ""), Label.PROVIDER)


def _boundary(w: World, p: Proc, step: RunStep, then: str) -> World:
    """7.2: installed when the segment has a handle or an observer."""
    row = w.rows[p.run]
    late = row is not None and row.status == CANCELLED  # ghost: the cancel precedes this boundary
    p = replace(p, step=step, then=then, cancelled=False, cancel_seen=late)
    if p.observer:
        return put(w, replace(p, pc=Label.ON_STEP))
    if p.handle < 0:
        return _continue(w, p)
    return _after_observer(w, p)


def _after_observer(w: World, p: Proc) -> World:
    if p.handle < 0:
        return _continue(w, p)  # no handle: nothing is persisted
    if w.config.policy.cancel_probe:
        return put(w, replace(p, pc=Label.PROBE))
    return after_probe(w, p)


def after_probe(w: World, p: Proc) -> World:
    if not p.owner:
        return put(w, replace(p, pc=Label.PERSIST))
    if w.config.policy.renew_before_persist:
        return put(w, replace(p, pc=Label.RENEW))
    return put(w, replace(p, pc=Label.PERSIST))


def _on_step_move(w: World, p: Proc) -> Transition:
    return T(TransitionName.ON_STEP, p.name, run=w.run_id(p.run), step=p.step.kind)


def on_step(w: World, p: Proc, t: Transition) -> World:
    if t.fault:
        return ladder(w, p, OBSERVER_ERROR, rules.classify(OBSERVER_ERROR, "", w.config.policy))
    return _after_observer(w, p)


def probe(w: World, p: Proc, t: Transition) -> World:
    row = w.rows[p.run]
    if not t.fault and row is not None and row.status == CANCELLED:
        if w.config.policy.probe_persists_own_claim_only and row.requeue_count != p.claim_requeues:
            # proposal P3: the run was requeued since this segment's claim, so the cancel
            # ended a later claim's work: CancellationRequested without persisting
            return ladder(w, p, CANCELLATION_REQUESTED, "")
        # persist this step, then CancellationRequested: no renewal and no fence clear
        return put(w, replace(p, pc=Label.PERSIST, cancelled=True))
    return after_probe(w, p)


def _renew_move(w: World, p: Proc) -> Transition:
    """7.2 step 4: the renewal, or on a write's boundary with the fence the T5 clear."""
    if _clears_fence(w, p):
        return T(store.MARK_PENDING_EFFECT, p.name, run=w.run_id(p.run), effect="")
    return T(store.RENEW_LEASE, p.name, run=w.run_id(p.run))


def renew(w: World, p: Proc, t: Transition) -> World:
    """T4 (7.2 step 4), at label RENEW: the segment holds a lease (the way in is
    :func:`after_probe`, after the observer and the cancel probe; or :func:`persist`, when the
    renewal follows the event: before ``renew_before_persist``). The move is the renewal, or on
    a write's boundary with the fence the T5 clear (:func:`_renew_move`). A store error, or a
    row no longer this segment's (the owner guard fails): LeaseLost through the ladder, the
    step not persisted. Otherwise on to PERSIST (``renew_before_persist``), or the boundary's
    continuation (``Proc.then``)."""
    if t.fault:
        ok = False
    elif t.name == store.MARK_PENDING_EFFECT:
        w, ok = store.mark_pending_effect(w, p.run, p.owner, "", p)
    else:
        w, ok = store.renew_lease(w, p.run, p.owner, p)
    if not ok:
        return ladder(w, p, LEASE_LOST, "")  # the step is not persisted
    if w.config.policy.renew_before_persist:
        return put(w, replace(p, pc=Label.PERSIST))
    return _continue(w, p)


def _persist_move(w: World, p: Proc) -> Transition:
    step = p.step
    return T(TransitionName.RECORD_STEP, p.name, run=w.run_id(p.run), step=step.kind, tool=step.tool or None)


def persist(w: World, p: Proc, t: Transition) -> World:
    stored = t.fault != FaultKind.AUDIT_INSERT_FAILS
    reported = t.fault is None
    if stored:
        step = p.step
        event = Event(p.run, p.handle, step.kind, step.turn, step.call, step.tool, p.seg)
        w, got = _append(w, p, event)
        if got != store.INSERT_STORED:
            if reported:
                return insert_not_stored(w, p, got)
            stored = False  # an ambiguous commit of an insert that stored nothing: a failure
    if reported:
        p = replace(p, handle=p.handle + 1)
    else:
        pol = w.config.policy
        if pol.audit_failclosed_writes and rules.is_write(
            rules.step_effect(w.config, w.removed, p.step)
        ):
            err = AUDIT_PERSISTENCE_FAILED
            return ladder(w, p, err, rules.classify(err, "", pol))
    if p.cancelled:
        return ladder(w, p, CANCELLATION_REQUESTED, "")
    if p.owner and not w.config.policy.renew_before_persist:
        return put(w, replace(p, pc=Label.RENEW))
    if p.owner and w.config.policy.fence_cleared_after_audit and _write_boundary(w, p):
        return put(w, replace(p, pc=Label.CLEAR))
    return _continue(w, p)


def _append(w: World, p: Proc, event: Event) -> tuple[World, str]:
    """A segment's event insert (:func:`store.append_event`), with the ghost mark of an
    insert that lands in the stream of a later claim than the segment's own."""
    row = w.rows[p.run]
    w, got = store.append_event(w, p.run, event, p.owner, p.cancelled)
    if got == store.INSERT_STORED and row is not None and p.epoch and row.epoch != p.epoch:
        w = w.mark(Mark.ZOMBIE_APPEND.fact(w.run_id(p.run)))
    return w, got


def insert_not_stored(w: World, p: Proc, got: str) -> World:
    """An event insert that reported storing nothing (proposals P7 and P8). Refused, the row
    is no longer this segment's: ``LeaseLost``, the step is not persisted (as a failed
    renewal). A duplicate key: the insert re-reads ``max(sequence)`` and the segment inserts
    the same event again at ``max + 1`` (it stays at its insert)."""
    if got == store.INSERT_REFUSED:
        return ladder(w, p, LEASE_LOST, "")
    return put(w, replace(p, handle=store.max_sequence(w, p.run) + 1))


def _clear_move(w: World, p: Proc) -> Transition:
    return T(store.MARK_PENDING_EFFECT, p.name, run=w.run_id(p.run), effect="")


def clear(w: World, p: Proc, t: Transition) -> World:
    """Proposal fence_cleared_after_audit: the T5 clear after the event is stored."""
    ok = False
    if not t.fault:
        w, ok = store.mark_pending_effect(w, p.run, p.owner, "", p)
    if not ok:
        return ladder(w, p, LEASE_LOST, "")
    return _continue(w, p)


def _continue(w: World, p: Proc) -> World:
    """What follows a boundary."""
    then = p.then
    if p.cancel_seen:  # ghost: the segment goes on past a boundary that followed a cancel
        w = w.mark(Mark.PAST_CANCEL.fact(w.run_id(p.run)))
    if then == Label.PROVIDER:
        return put(w, replace(p, pc=Label.PROVIDER))
    if then == Label.AFTER_LLM:
        return _after_llm(w, p)
    if then == Label.AFTER_TOOL:
        return next_call(w, replace(p, call=p.call + 1))
    raise AssertionError(then)  # pragma: no cover


def provider(w: World, p: Proc, t: Transition) -> World:
    if t.fault:
        return ladder(w, p, PROVIDER_ERROR, t.fault)
    if p.synthesis:
        return _boundary(w, p, RunStep("llm", p.turn, -1, ""), Label.AFTER_LLM)
    ans = w.config.runs[p.run].answer(p.turn)
    if ans.kind == "fail":
        return ladder(w, p, PROVIDER_ERROR, ans.value)
    if ans.kind == "guardrail":
        sig = GUARDRAIL_VIOLATION if ans.value == "violation" else GUARDRAIL_APPROVAL_REQUIRED
        return ladder(w, p, sig, "")
    if ans.kind == "final" and ans.value in ("budget_exhausted", "context_truncated"):
        return _try_arm(w, p, ans.value)
    return _boundary(w, p, RunStep("llm", p.turn, -1, ""), Label.AFTER_LLM)


def _after_llm(w: World, p: Proc) -> World:
    spec = w.config
    if p.synthesis:
        return _try_arm(w, p, "max_iterations")
    ans = spec.runs[p.run].answer(p.turn)
    if ans.kind != "tools" or not ans.calls:
        return _try_arm(w, p, "completed")
    # 7.1 step 6: the approval scan covers all calls, before any call executes
    if any(rules.approval_bound(spec, w.removed, c) for c in ans.calls) and not _approval_kept(w, p):
        return ladder(w, p, APPROVAL_REQUIRED, "")
    if spec.policy.input_suspend and any(
        (tl := spec.tool(c)) is not None and tl.needs_input and c not in w.removed
        for c in ans.calls
    ):
        return ladder(w, p, INPUT_REQUIRED, "")
    return next_call(w, _decided(replace(p, call=0)))


def _approval_kept(w: World, p: Proc) -> bool:
    """Proposal decision_kept_across_retry: the run's stream already records an approval of
    this turn (an ``approval`` event stored by a resume whose decision was approve), so a
    retry applies it instead of suspending again. Resume ``k`` made the run's k-th decision
    (``RunSpec.resume_decisions``); the event's payload carries it in the runtime."""
    if not w.config.policy.decision_kept_across_retry:
        return False
    decisions = w.config.runs[p.run].resume_decisions
    for e in w.events:
        if e.run == p.run and e.kind == "approval" and e.turn == p.turn:
            k = names.resume_number(e.seg)
            if k is not None and 0 < k <= len(decisions) and decisions[k - 1] == Decision.APPROVE:
                return True
    return False


def _decided(p: Proc) -> Proc:
    """A resume's decision applies to the resumed turn only: cleared when it is done."""
    part = p.part
    if part.__class__ is ResumePart and part.decision:
        return replace(p, part=replace(part, decision=""))
    return p


def next_call(w: World, p: Proc) -> World:
    spec = w.config
    calls = spec.runs[p.run].answer(p.turn).calls
    if p.call >= len(calls):
        # the next round
        p = _decided(replace(p, turn=p.turn + 1, rounds=p.rounds + 1))
        return enter_round(w, p)
    name = calls[p.call]
    if p.decision in (Decision.APPROVE, Decision.DENY, Decision.INPUT) and _refused_in_resume(w, p, name):
        # 12.2 step 11.1: an error tool step, without the hook, through a normal boundary
        return _boundary(w, p, RunStep("tool", p.turn, p.call, name), Label.AFTER_TOOL)
    return _hook(w, p, name)


def _refused_in_resume(w: World, p: Proc, name: str) -> bool:
    """12.2 step 11.1: the resumed turn's call is an error step: no longer offered, not
    permitted the run's owner (execution runs under the owner's tool policy, 16.18.5), denied,
    or bound to the other kind of decision."""
    spec = w.config
    tool = spec.tool(name)
    if tool is None or name in w.removed:
        return True  # no longer offered
    if not (spec.policy.mutant_execution_ignores_owner_policy
            or rules.permitted(spec, spec.runs[p.run].owner, name)):
        return True  # not offered to the owner
    bound = rules.approval_bound(spec, w.removed, name)
    if p.decision == Decision.DENY and bound:
        return True
    if p.decision == Decision.APPROVE and tool.needs_input and spec.policy.input_suspend:
        return True
    if p.decision == Decision.INPUT and bound:
        return True  # became approval-bound while the run waited
    return False


def _hook(w: World, p: Proc, name: str) -> World:
    """7.3: resolve -> (not a write: return) -> refuse unleased -> stamp."""
    p = replace(p, stamped=False)
    if not _hook_installed(w, p):
        return put(w, replace(p, pc=Label.INVOKE))
    effect = rules.resolve_by_name(w.config, w.removed, name)
    if not rules.is_write(effect):
        return put(w, replace(p, pc=Label.INVOKE))
    if p.handle < 0 or not p.owner:
        err = WRITE_WITHOUT_DURABLE_EXECUTION
        return ladder(w, p, err, rules.classify(err, "", w.config.policy))
    return put(w, replace(p, pc=Label.STAMP))


def stamp_move(w: World, p: Proc) -> Transition:
    effect = rules.resolve_by_name(w.config, w.removed, call_name(w, p))
    return T(store.MARK_PENDING_EFFECT, p.name, run=w.run_id(p.run), effect=effect)


def stamp(w: World, p: Proc, t: Transition) -> World:
    if t.fault:
        return ladder(w, p, LEASE_LOST, "")
    w, ok = store.mark_pending_effect(w, p.run, p.owner, t.arg("effect"), p)
    if not ok:
        return ladder(w, p, LEASE_LOST, "")  # the tool never runs
    nxt = Label.INTENT if w.config.policy.write_intent_recorded else Label.INVOKE
    return put(w, replace(p, pc=nxt, stamped=True))


def _intent_move(w: World, p: Proc) -> Transition:
    return T(TransitionName.RECORD_STEP, p.name, run=w.run_id(p.run), step="intent",
             tool=call_name(w, p))


def intent(w: World, p: Proc, t: Transition) -> World:
    """Proposal write_intent_recorded: the write-ahead ``intent`` event of the call, the same
    insert as 7.2 step 5 (owner-guarded with P7, re-sequenced with P8). Fail-closed: unless
    the insert reports it stored, the tool never runs (LeaseLost, as a failed stamp)."""
    if t.fault != FaultKind.AUDIT_INSERT_FAILS:
        event = Event(p.run, p.handle, INTENT_KIND, p.turn, p.call, call_name(w, p), p.seg)
        w, got = _append(w, p, event)
        if got != store.INSERT_STORED and t.fault is None:
            return insert_not_stored(w, p, got)
    if t.fault:
        return ladder(w, p, LEASE_LOST, "")
    return put(w, replace(p, pc=Label.INVOKE, handle=p.handle + 1))


def _invoke_move(w: World, p: Proc) -> Transition:
    return T(TransitionName.INVOKE, p.name, run=w.run_id(p.run), tool=call_name(w, p))


def invoke(w: World, p: Proc, t: Transition) -> World:
    spec = w.config
    name = call_name(w, p)
    tool = spec.tool(name)
    if tool is not None and name not in w.removed and not t.fault:
        effect = tool.declared_effect
        if rules.is_write(effect):
            row = w.rows[p.run]
            attempt = row.attempts if row is not None else 0
            app = Application(p.run, p.turn, p.call, name, effect, p.seg, p.stamped, attempt,
                              p.decision, decider(w, p) if p.decision else "")
            w = replace(w, ledger=w.ledger + (app,))
    return _boundary(w, p, RunStep("tool", p.turn, p.call, name), Label.AFTER_TOOL)


def to_settle(w: World, p: Proc, wrapper: str, status: str, reason: str, eclass: str,
            guarded: bool, on_ok: str, on_miss: str) -> World:
    if p.handle < 0 and p.kind != ENQUEUE:
        return end(w, p, on_ok)  # no handle: every settle is skipped
    p = replace(p, pc=Label.SETTLE, settle=SettlePlan(wrapper, status, reason, eclass, guarded, on_ok, on_miss))
    return put(w, p)


def _try_arm(w: World, p: Proc, reason: str) -> World:
    guarded = bool(p.guard)
    return to_settle(
        w, p, TransitionName.SETTLE_COMPLETED, "completed", reason, "", guarded,
        OutcomeName.COMPLETED, OutcomeName.LEASE_LOST if guarded else OutcomeName.COMPLETED,
    )


def ladder(w: World, p: Proc, error: str, eclass: str) -> World:
    p = replace(p, error=error, eclass=eclass)
    guarded = bool(p.guard)
    if error == CANCELLATION_REQUESTED:
        return end(w, p, OutcomeName.CANCELLED)
    if error in (APPROVAL_REQUIRED, INPUT_REQUIRED):
        if p.handle < 0:
            return end(w, p, OutcomeName.SUSPEND_FAILED)  # modelling choice (section 8 notes)
        return put(w, replace(p, pc=Label.SUSPEND))
    if error in (GUARDRAIL_VIOLATION, GUARDRAIL_APPROVAL_REQUIRED):
        v = error == GUARDRAIL_VIOLATION
        out = OutcomeName.GUARDRAIL_BLOCKED if v else OutcomeName.GUARDRAIL_APPROVAL_REQUIRED
        return to_settle(
            w, p, TransitionName.SETTLE_POLICY_STOPPED, FAILED, "policy_denied" if v else "approval_denied",
            error, guarded, out, OutcomeName.LEASE_LOST if guarded else out,
        )
    if error == LEASE_LOST:
        return end(w, p, OutcomeName.LEASE_LOST)
    # arm 6: any other error
    if p.hook and p.handle >= 0:
        return _recovery(w, p)
    return to_settle(
        w, p, TransitionName.SETTLE_FAILED, FAILED, "provider_failed", error, guarded,
        OutcomeName.FAILED, OutcomeName.LEASE_LOST if guarded else OutcomeName.FAILED,
    )


def suspend_move(w: World, p: Proc) -> Transition:
    """T6's statement, for an input tool or an approval (the suspension, and a resume's
    release of its claim: model/resume.py)."""
    name = TransitionName.SUSPEND_FOR_INPUT if input_side(p) else TransitionName.SUSPEND
    return T(name, p.name, run=w.run_id(p.run))


def suspend(w: World, p: Proc, t: Transition) -> World:
    status = WAITING_FOR_INPUT if input_side(p) else WAITING_FOR_APPROVAL
    ok = False
    if not t.fault:
        w, ok = store.suspend(w, p.run, status, p.turn, p)
    if ok:
        return end(w, p, OutcomeName.AWAITING_INPUT if status == WAITING_FOR_INPUT else OutcomeName.AWAITING_APPROVAL)
    # settle_failed(owner_guard), result ignored: SUSPEND_FAILED either way
    if not w.config.policy.terminal_guard:
        return end(w, p, OutcomeName.SUSPEND_FAILED)  # before ADR-092 a failed suspend was swallowed
    return to_settle(w, p, TransitionName.SETTLE_FAILED, FAILED, "provider_failed", p.error, bool(p.guard),
                   OutcomeName.SUSPEND_FAILED, OutcomeName.SUSPEND_FAILED)


def _settle_move(w: World, p: Proc) -> Transition:
    plan = p.settle
    owner = p.guard if plan.guarded else None
    return T(plan.wrapper, p.name, run=w.run_id(p.run), reason=plan.reason, owner=owner or None,
             status=plan.expect or None)


def settle(w: World, p: Proc, t: Transition) -> World:
    plan = p.settle
    ok = False
    if not t.fault:
        w, ok = store.finish_run(w, p.run, plan.status, plan.reason, plan.error_class,
                                 p.guard if plan.guarded else "", p, plan.expect)
    if p.kind == ENQUEUE:
        return end(w, p, None)
    return end(w, p, plan.on_ok if ok else plan.on_miss)


def _dead_letter(w: World, p: Proc, reason: str, on_miss: str = OutcomeName.LEASE_LOST,
                 fallback: bool = False) -> World:
    pol = w.config.policy
    if fallback and pol.fallback_settles_requeued_row:
        # proposal: match the row this segment's own requeue left, not a cleared owner
        p = replace(p, guard="", pc=Label.SETTLE, settle=SettlePlan(
            TransitionName.SETTLE_DEAD_LETTERED, FAILED, reason, p.error, False, OutcomeName.FAILED, on_miss, QUEUED))
        return put(w, p)
    guarded = pol.owner_guarded_settle_workers
    p = replace(p, guard=p.identity if guarded else "")
    return to_settle(w, p, TransitionName.SETTLE_DEAD_LETTERED, FAILED, reason, p.error, guarded, OutcomeName.FAILED, on_miss)


def _recovery(w: World, p: Proc) -> World:
    if not rules.class_is_retryable(p.eclass) and not w.config.policy.mutant_recovery_ignores_class:
        return _dead_letter(w, p, "not_retryable")  # branch 2 (skipped by the mutant)
    return put(w, replace(p, pc=Label.RECOVERY_READ))  # branch 3


def recovery_read(w: World, p: Proc, t: Transition) -> World:
    row = None if t.fault else w.rows[p.run]
    pol = w.config.policy
    if pol.write_fence and row is not None and not rules.may_retry_after_fence(row.pending_effect, pol):
        return _dead_letter(w, p, "not_retryable")  # branch 4
    count = row.requeue_count if row is not None else -1
    if count < 0 or count >= w.config.constants.MAX_REQUEUES:
        return _dead_letter(w, p, "retries_exhausted")  # branch 5
    return put(w, replace(p, pc=Label.REQUEUE, part=replace(p.part, count=count)))  # branch 6


def requeue(w: World, p: Proc, t: Transition) -> World:
    ok = False
    if not t.fault:
        if not rules.class_is_retryable(p.eclass):
            w = w.mark(Mark.RETRY_OF_NON_RETRYABLE.fact(w.run_id(p.run)))
        delay = w.config.constants.retry_delay_s(p.count)  # step 7's backoff (P6's deadline)
        w, ok = store.requeue(w, p.run, p.identity, p, delay)
    if not ok:
        return end(w, p, OutcomeName.LEASE_LOST)
    return put(w, replace(p, pc=Label.DISPATCH))


def _dispatch_move(w: World, p: Proc) -> Transition:
    delay = w.config.constants.retry_delay_s(p.count) if p.kind == WORKER else None
    return T(TransitionName.DISPATCH, p.name, run=w.run_id(p.run), delay=delay)


def dispatch(w: World, p: Proc, t: Transition) -> World:
    if p.kind == ENQUEUE:
        if t.fault:  # settle_failed without an owner, then EnqueueFailed
            p = replace(p, pc=Label.SETTLE, settle=SettlePlan(TransitionName.SETTLE_FAILED, FAILED, "provider_failed",
                                                           "EnqueueFailed", False, "", ""))
            return put(w, p)
        w, nested = dispatch_queued(w, p.run, p.name, w.clock, _frames(p))
        return w if nested else end(w, p, None)
    if t.fault:  # branch 8: the fallback dead-letter, owner-guarded on the worker identity
        return _dead_letter(w, p, "retries_exhausted", on_miss=OutcomeName.FAILED, fallback=True)
    delay = w.config.constants.retry_delay_s(p.count)
    w, nested = dispatch_queued(w, p.run, p.name, w.clock + delay, _frames(p))
    return w if nested else end(w, p, OutcomeName.REQUEUED)  # sync: REQUEUED once the retry ends


def _frames(p: Proc) -> tuple[Proc, ...]:
    """The stack a handler nested in ``p``'s dispatch waits on: ``p``, then its own."""
    return (replace(p, outer=()),) + p.outer


def decider(w: World, p: Proc) -> str:
    """The principal whose decision a resume carries: a named one's, or the run's owner's
    (``RunSpec.decisions``)."""
    return p.by or w.config.runs[p.run].owner


# the step table of this module: label, the step, what it fires, its faults, cost, place, then
STEPS: tuple[Action, ...] = (
    Step(Label.ON_STEP, on_step,
         boundary=True, fires=TransitionName.ON_STEP, faults=(FaultKind.OBSERVER_ERROR,), cost=NONE,
         then=LOOP, args=("step",), move=_on_step_move, place="7.2 step 1"),
    Step(Label.PROBE, probe,
         boundary=True, fires=TransitionName.FIND_RUN, faults=STORE_FAULTS, cost=STORE,
         then=(Label.RENEW, Label.PERSIST, END), place="7.2 step 2 (the cancel probe)"),
    Step(Label.RENEW, renew,
         boundary=True, fires=(store.RENEW_LEASE, store.MARK_PENDING_EFFECT), faults=STORE_FAULTS,
         cost=STORE, then=LOOP, args=("effect",), move=_renew_move,
         place="T4, T5 clear; 7.2 step 4"),
    Step(Label.PERSIST, persist,
         boundary=True, fires=TransitionName.RECORD_STEP,
         faults=(FaultKind.AUDIT_INSERT_FAILS, FaultKind.AMBIGUOUS_COMMIT), cost=AUDIT,
         then=LOOP + (Label.CLEAR,), args=("step", "tool"), move=_persist_move,
         place="4.2, 7.2 step 5"),
    Step(Label.CLEAR, clear,
         fires=store.MARK_PENDING_EFFECT, faults=STORE_FAULTS, cost=STORE, then=LOOP,
         args=("effect",), move=_clear_move, place="T5 clear (proposal fence_cleared_after_audit)"),
    Step(Label.PROVIDER, provider,
         fires=TransitionName.PROVIDER_CALL, faults=(FaultKind.PROVIDER_ERROR,), cost=PROVIDER,
         then=LOOP, place="7.1 step 3"),
    Step(STAMP, stamp,
         fires=store.MARK_PENDING_EFFECT, faults=STORE_FAULTS, cost=STORE, then=(Label.INVOKE, END),
         args=("effect",), move=stamp_move, place="T5 stamp; 7.3"),
    Step(Label.INTENT, intent,
         fires=TransitionName.RECORD_STEP,
         faults=(FaultKind.AUDIT_INSERT_FAILS, FaultKind.AMBIGUOUS_COMMIT), cost=AUDIT,
         then=(Label.INVOKE, Label.INTENT, END), args=("step", "tool"), move=_intent_move,
         place="proposal write_intent_recorded: the intent insert before invoke"),
    Step(Label.INVOKE, invoke,
         fires=TransitionName.INVOKE, faults=(FaultKind.TOOL_ERROR,), cost=TOOL, then=LOOP,
         args=("tool",), move=_invoke_move, place="7.1 step 8.2"),
    Step(Label.SUSPEND, suspend,
         fires=(TransitionName.SUSPEND, TransitionName.SUSPEND_FOR_INPUT), faults=STORE_FAULTS,
         cost=STORE, then=(Label.SETTLE, END), move=suspend_move, place="T6; 8 arm 2"),
    Step(SETTLE, settle,
         fires=(TransitionName.SETTLE_COMPLETED, TransitionName.SETTLE_FAILED, TransitionName.SETTLE_POLICY_STOPPED, TransitionName.SETTLE_DEAD_LETTERED),
         faults=STORE_FAULTS, cost=STORE, then=(END,), args=("reason", "owner", "status"),
         move=_settle_move, place="T8 via 4.3"),
    Step(Label.RECOVERY_READ, recovery_read,
         fires=TransitionName.FIND_RUN, faults=STORE_FAULTS, cost=STORE,
         then=(Label.REQUEUE, Label.SETTLE, END), place="9 steps 3-5"),
    Step(Label.REQUEUE, requeue,
         fires=TransitionName.REQUEUE, faults=STORE_FAULTS, cost=STORE, then=(Label.DISPATCH, END),
         place="T9; 9 step 6"),
    Step(Label.DISPATCH, dispatch,
         fires=TransitionName.DISPATCH, faults=(FaultKind.DISPATCH_FAILS,), cost=DISPATCH,
         then=(Label.RUN_QUEUED, Label.SETTLE, END), args=("delay",), move=_dispatch_move,
         place="6.1 step 4, 9 step 7; 6.3 sync: the handler runs nested"),
)
