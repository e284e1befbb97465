"""Pure decision rules of the runtime: classification, effects, approval, the fence check.

RUNTIME sections 13 and 14, and the by-name rules of 7.2 and 12.2.
"""

from __future__ import annotations

from typing import Any

from . import classify as _classify
from .policy import Policy
from .state import (
    NON_IDEMPOTENT_WRITE,
    READ_ONLY,
    RETRYABLE_CLASSES,
    Config,
)
from .vocab import Decision, PrincipalKind, Request, Scope

# Error kinds the runtime raises (RUNTIME 2) that reach the ladder's generic arm.
AUDIT_PERSISTENCE_FAILED = "AuditPersistenceFailed"
WRITE_WITHOUT_DURABLE_EXECUTION = "WriteWithoutDurableExecution"
OBSERVER_ERROR = "ObserverError"
PROVIDER_ERROR = "ProviderError"
# Internal signals.
LEASE_LOST = "LeaseLost"
CANCELLATION_REQUESTED = "CancellationRequested"
APPROVAL_REQUIRED = "ApprovalRequired"
INPUT_REQUIRED = "InputRequired"
GUARDRAIL_VIOLATION = "GuardrailViolation"
GUARDRAIL_APPROVAL_REQUIRED = "GuardrailApprovalRequired"


def is_retryable(reason: str) -> bool:
    """RUNTIME 2: a run that ended with termination reason ``reason`` may be retried: true for
    ``provider_failed`` only (a dead-letter reason, a denial, a cancel or a completion is
    final)."""
    return reason == "provider_failed"


def is_write(effect: str) -> bool:
    return effect in ("idempotent_write", NON_IDEMPOTENT_WRITE)


def class_is_retryable(eclass: str) -> bool:
    """RUNTIME 13: the failure class is in the retryable set (queued-run recovery, 9 branch 2)."""
    return eclass in RETRYABLE_CLASSES


def classify(error: str, provider_class: str, policy: Policy) -> str:
    """``classify(error)`` (13) of an error kind the ladder meets: a provider error carries
    the class its concrete error was given (``model.classify``: the model's provider faults
    are classes); a runtime error (``AuditPersistenceFailed``, ``ObserverError``,
    ``WriteWithoutDurableExecution``) is rule 6's "everything else", ``unknown``.
    ``audit_fail_unknown`` off is a counterfactual that makes an audit failure look
    transient (``serverError``), the mistake ADR-111 avoided on purpose."""
    if error == PROVIDER_ERROR:
        return provider_class
    if error == AUDIT_PERSISTENCE_FAILED and not policy.audit_fail_unknown:
        return "serverError"
    return _classify.classify(_classify.OtherError(error))


def resolve_by_name(spec: Config, removed: frozenset[str], name: str) -> str:
    """14.2: a registered name resolves by its object; an unknown or removed name gives
    ``non_idempotent_write``. Without a resolver (before ADR-111) every tool is read-only."""
    if not spec.policy.tool_effect:
        return READ_ONLY
    tool = spec.tool(name)
    if tool is None or name in removed:
        return NON_IDEMPOTENT_WRITE
    return tool.declared_effect


def step_effect(spec: Config, removed: frozenset[str], step: Any) -> str:
    """7.2: a non-tool step is read-only; a tool step resolves by NAME (not by whether it ran)."""
    if not step or step.kind != "tool":
        return READ_ONLY
    return resolve_by_name(spec, removed, step.tool)


def may_retry_after_fence(pending_effect: str, policy: Policy | None = None) -> bool:
    """14.3: false only for the stored string ``non_idempotent_write``; with the proposal
    ``idempotent_stamp_blocks_retry`` (P9) false for ``idempotent_write`` too: a stamp that
    is still on the row says a write may have landed without its event."""
    if policy is not None and policy.idempotent_stamp_blocks_retry:
        return not is_write(pending_effect)
    return pending_effect != NON_IDEMPOTENT_WRITE


def approval_bound(spec: Config, removed: frozenset[str], name: str) -> bool:
    """14.4: does calling this tool suspend the run? First matching rule decides."""
    tool = spec.tool(name)
    if tool is None or name in removed:
        return False  # rule 1: an unknown tool
    if tool.approval:
        return True  # rule 2: explicit marker
    if tool.remote:
        # rules 3 and 4: the operator declaration decides (default 1; only 0 turns it off)
        return tool.server_flag is not None and tool.server_flag != 0
    if spec.policy.write_implies_approval:
        return is_write(tool.effect)  # rule 5 (ADR-134)
    return False


def write_turn(spec: Config, removed: frozenset[str], calls: tuple[str, ...]) -> bool:
    """12.2: a turn declares a write if any call resolves by name to a write. With no
    resolver, every call counts as a write."""
    if not spec.policy.tool_effect:
        return True
    return any(is_write(resolve_by_name(spec, removed, c)) for c in calls)


# -- access (RUNTIME 16.18): who may make which request of which run --------------------------
# The scope each request is checked against (16.18.1, 16.18.3): input has no scope of its own.
REQUEST_SCOPE: dict[str, str] = {
    Request.APPROVE: Scope.AGENT_APPROVE, Request.DENY: Scope.AGENT_APPROVE,
    Request.INPUT: Scope.AGENT_APPROVE, Request.CANCEL: Scope.AGENT_CANCEL,
    Request.STATUS: Scope.AGENT_READ, Request.EVENTS: Scope.AGENT_READ,
}


def owner_uid(spec: Config, run: int) -> str:
    """The row's ``be_user`` (16.18.1): the uid of the principal who started the run, "" (uid 0)
    when it is not a backend user (a service account, an anonymous caller)."""
    p = spec.principal(spec.runs[run].owner)
    return p.name if p is not None and p.human else ""


def may(spec: Config, by: str, request: str, run: int) -> bool:
    """``may(actor, run, scope)`` (RUNTIME 16.18.2), the scope being ``request``'s
    (:data:`REQUEST_SCOPE`); the first rule that matches decides. A principal the
    configuration does not declare may do nothing."""
    p = spec.principal(by)
    if p is None:
        return False
    pol = spec.policy
    scope = REQUEST_SCOPE[request]
    if p.kind == PrincipalKind.ADMIN:
        return True  # rule 1
    if p.kind == PrincipalKind.SERVICE_ACCOUNT and pol.service_accounts:
        return scope in p.scopes  # rule 2 (ADR-110): exact membership, on any run
    if scope == Scope.AGENT_APPROVE and scope in p.grants and pol.approve_grant:
        return True  # rule 3 (ADR-130): the approve grant, on any run
    return p.human and p.name == owner_uid(spec, run)  # rule 4: the owner; 5: refused


def initiator(spec: Config, by: str, run: int) -> bool:
    """``initiator(actor, run)`` (16.18.2): not a service account, a positive uid equal to the
    row's ``be_user``. Admins are not exempt."""
    p = spec.principal(by)
    return p is not None and p.human and p.name == owner_uid(spec, run)


def self_approval(spec: Config, by: str, run: int, decision: str) -> bool:
    """The four-eyes rule refuses (16.18.4, ADR-172): an approval, the run's configuration
    requires a second approver, and ``by`` started the run. Never a denial, never input."""
    return (decision == Decision.APPROVE and spec.policy.four_eyes
            and spec.runs[run].require_second_approver and initiator(spec, by, run))


def permitted(spec: Config, by: str, tool: str) -> bool:
    """The tool policy permits principal ``by`` to run ``tool`` (17: data per principal and
    tool; a service account or an anonymous caller: none, 16.18.5)."""
    p = spec.principal(by)
    return p is not None and p.permits(tool)


def approver_refused(spec: Config, removed: frozenset[str], by: str,
                     calls: tuple[str, ...]) -> bool:
    """Gate 2 of an approval (12.2 step 8, 16.18.5, ADR-133) refuses ``by``: some call of the
    turn that declares a write by name is not permitted it (a read-only call passes)."""
    return any(not permitted(spec, by, c) for c in calls
               if not spec.policy.tool_effect or is_write(resolve_by_name(spec, removed, c)))


def submitter_refused(spec: Config, by: str, calls: tuple[str, ...]) -> bool:
    """The submitter gate (12.3 gate 2, 16.18.5, ADR-150) refuses ``by``: some pending call (the
    input tool among them) is not permitted it, write or not."""
    return any(not permitted(spec, by, c) for c in calls)
