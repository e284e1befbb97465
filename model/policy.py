"""Policy values: which mechanisms of the runtime are on.

A policy is data, not a subclass: every transition reads the switches it depends on.
The presets follow RUNTIME 15.1 in order; each adds the switches of its row of the
history table (RUNTIME 15) to the previous one. ``preset("adr-141").without("write_fence")``
is "adr-141 without the write fence", one line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class Policy:
    """One bool per switch of RUNTIME 15 (names as the history table spells them)."""

    name: str = "custom"
    # ADR-092: T8 requires a non-terminal status; T13 exists; a failed suspend is settled failed.
    terminal_guard: bool = True
    # ADR-101: T6 guard becomes status='running' (before: id only).
    suspend_requires_running: bool = False
    # ADR-102: T2 plus a uuid message, worker pick-up (the lease is diagnostic only).
    queue: bool = False
    # ADR-103: the cancellation probe at every boundary.
    cancel_probe: bool = False
    # ADR-104: worker segments renew at every boundary (lease_owner = worker id).
    heartbeat: bool = False
    # ADR-104: renewal before persist at a boundary (counterfactual off swaps 7.2 steps 4 and 5).
    renew_before_persist: bool = True
    # ADR-104: the reaper (T10, branches 3, 4, 5 of section 10).
    reaper: bool = False
    # ADR-104: queued-run recovery (section 9) as the worker's recovery hook.
    retry: bool = False
    # commit a7e1a954: reaper branch 5 settles after a failed dispatch.
    reaper_dispatch_failclosed: bool = False
    # ADR-105: waiting_for_input, suspend_for_input, claim_for_resume_from_input.
    input_suspend: bool = False
    # commit 2029c781: a renewal that changes no row is re-checked by a count.
    noop_renew_recheck: bool = False
    # commit 3c1f5699: worker segments pass owner_guard = worker id.
    owner_guarded_settle_workers: bool = False
    # ADR-110: service accounts and their scopes (RUNTIME 16.18.2 rule 2). Off: a service account
    # is a caller with uid 0 and nothing else, refused everywhere.
    service_accounts: bool = False
    # ADR-111: tool effects are resolved (before: no resolver, every step read_only).
    tool_effect: bool = False
    # ADR-111: a failed persist of a write tool step raises AuditPersistenceFailed.
    audit_failclosed_writes: bool = False
    # ADR-111: AuditPersistenceFailed is classified unknown (off: counterfactual serverError).
    audit_fail_unknown: bool = False
    # ADR-112: before-tool hook on segments with a handle and a lease owner; fence checks.
    write_fence: bool = False
    # ADR-122 / commit e3649bce: T9 and T11 also clear pending_effect.
    clear_fence_on_requeue: bool = False
    # ADR-132: gate 3 (record_approval fail-closed for approved write turns), fresh decode.
    approval_audit_failclosed: bool = False
    # ADR-130: the AGENT_APPROVE grant lets a backend user approve, deny and submit input on
    # any run (RUNTIME 16.18.2 rule 3). Off: a grant holder is a user like any other.
    approve_grant: bool = False
    # ADR-133: gate 2 of an approval (12.2 step 8, 16.18.5): the approver must be permitted each
    # write of the turn. Off: no gate 2, the approval of a write turn is never refused there.
    approver_gate: bool = False
    # ADR-134: approval rule 5 (a builtin write suspends first).
    write_implies_approval: bool = False
    # ADR-141: T1 and T7 write identity and lease; sync and resume segments are leased.
    lease_all_segments: bool = False
    # ADR-141: hook always installed; a write without handle or owner is refused.
    unleased_write_refused: bool = False
    # ADR-141: owner-guarded settles for synchronous and resume segments too.
    owner_guarded_settle_all: bool = False
    # ADR-141: reaper branch 2 (no stored request -> dead-letter not_retryable).
    reaper_no_request_branch: bool = False
    # ADR-150: the submitter gate (12.3 gate 2, 16.18.5: the submitter must be permitted every
    # pending call and the input tool) and the input turn binding (12.3 gate 1,
    # StaleInputTurn). Off: neither, an input resumes whatever turn the row holds.
    submitter_gate: bool = False
    # ADR-172: the four-eyes rule (16.18.4): with the run's configuration's
    # require_second_approver on, an approval by the run's initiator is SelfApprovalDenied
    # before the claim. Off: the setting is read by nothing.
    four_eyes: bool = False
    # -- proposals (not part of the runtime's history; off in every historical preset) --------
    # The fence is cleared AFTER the write step's event is stored (renew, persist, clear)
    # instead of in the renewal slot before it: no window where a landed write has neither
    # its fence nor its audit event. See FINDINGS.md F1 and docs/PROPOSALS.md.
    fence_cleared_after_audit: bool = False
    # T5 never overwrites the stamp 'non_idempotent_write' (neither a clear nor a later stamp),
    # so it stays on the row until the run settles and neither decider ever retries a run
    # whose non-idempotent write may have landed. FINDINGS.md F1.
    fence_kept_after_non_idempotent_write: bool = False
    # Recovery's fallback dead-letter (9 step 8) matches the row its own requeue left
    # (status queued) instead of an owner guard the requeue already cleared. FINDINGS.md F2.
    fallback_settles_requeued_row: bool = False
    # The cancellation probe (7.2 step 3) persists its step only while the row's requeue_count
    # is the one the segment's claim returned: a segment whose run was requeued since (a
    # zombie) stops without appending to the stream of a later claim. FINDINGS.md F4.
    probe_persists_own_claim_only: bool = False
    # The settle of a segment that fails after its own claim (the pick-up's position or decode,
    # RUNTIME 6.2 steps 3-4; the resume's, 12.2 after the claim, and its fallback when the
    # release of a refused resume fails, 4.4) is guarded by the claim it holds instead of
    # matching any row: a stalled segment whose run the reaper has requeued
    # and handed on cannot fail the next claim's run. FINDINGS.md F6.
    failure_settles_own_claim: bool = False
    # T6 (suspend, suspend_for_input) of a segment that holds a lease also matches
    # claimed_by = its lease owner: a stalled segment whose run was requeued and claimed
    # again cannot suspend the next claim's run (T6 has no claimed_by predicate, RUNTIME 4.1).
    # FINDINGS.md F6.
    suspend_guarded_by_claim: bool = False
    # P6: the reaper's tick also sweeps QUEUED rows whose dispatch is overdue (T2, T9, T11 write
    # dispatch_deadline; T14 selects the overdue rows, T15 moves the deadline on, and the row is
    # dispatched again): a process death between a requeue or T2 and its dispatch no longer
    # orphans the row. FINDINGS.md 3 (no_orphan_queued_run), docs/PROPOSALS.md P6.
    overdue_queued_redispatched: bool = False
    # P7: the event insert of a segment with a lease owner (record_step, record_approval,
    # record_input) is INSERT ... SELECT ... WHERE the row is still claimed by it and its lease
    # is live, in one transaction: a stalled segment's insert cannot land beside a later
    # claim's. FINDINGS.md 5 (no_zombie_append), docs/PROPOSALS.md P7.
    event_insert_owner_guarded: bool = False
    # P8: (run, sequence) is a UNIQUE key of the event table; an insert that meets a taken key
    # re-reads max(sequence) and inserts at max + 1. FINDINGS.md 2 (stream_order after an
    # ambiguous commit), docs/PROPOSALS.md P8.
    event_sequence_unique: bool = False
    # P9: both deciders (reaper branch 1, recovery branch 4) treat a stamp 'idempotent_write'
    # as they treat 'non_idempotent_write': a run whose idempotent write may have landed
    # without its event is dead-lettered not_retryable instead of retried (with
    # fence_cleared_after_audit the stamp stays until the event is stored). FINDINGS.md 7,
    # docs/PROPOSALS.md P9.
    idempotent_stamp_blocks_retry: bool = False
    # P9 alternative (c): a retry that reaches a turn whose approval a previous attempt's
    # approval event records (RUNTIME 12.2 step 9) applies that approval instead of
    # suspending again. docs/PROPOSALS.md "P9: the designs compared".
    decision_kept_across_retry: bool = False
    # P9 alternative (b): after the T5 stamp and before invoke, the segment stores an 'intent'
    # event for the call (the same insert as record_step, owner-guarded with P7); if it is not
    # reported stored the tool never runs (LeaseLost, as a failed stamp). A retry that finds an
    # intent without its outcome does nothing different: the intent is the record that the
    # write may have landed. docs/PROPOSALS.md "P9: the designs compared".
    write_intent_recorded: bool = False
    # -- mutants: deliberately BROKEN variants for the vacuity check (`failclosed mutants`,
    # spec/mutants.py MUTANT_SWITCHES); never a runtime stage, off in every preset. Each removes
    # one guard so that the property it protects must be seen to fail. ------------------------
    # T3 claim_queued and T7 claim_for_resume match any non-terminal row, not only a row in
    # status queued / the waiting status (kills exclusive_claim).
    mutant_claim_ignores_status: bool = False
    # The owner guard of T4, T5 and T9 checks status = 'running' only, not claimed_by
    # (kills owner_only_mutation).
    mutant_owner_guard_ignores_claim: bool = False
    # T9 requeue and T11 requeue_stale leave requeue_count as it is (kills bounded_attempts).
    mutant_requeue_keeps_count: bool = False
    # Queued-run recovery skips branch 2 (the retryable-class check of section 9)
    # (kills no_retry_of_non_retryable).
    mutant_recovery_ignores_class: bool = False
    # T11 and T12 do not re-check the stale predicate inside the statement: they act on the
    # reaper's SELECT snapshot (kills race_safe_staleness).
    mutant_reaper_trusts_snapshot: bool = False
    # Without a transport (RUNTIME 6.4), enqueue stores its row (T2) before it fails, instead of
    # failing before anything is stored: a queued row no message will ever wake (kills
    # no_orphan_queued_run).
    mutant_enqueue_stores_before_transport_check: bool = False
    # The access check (RUNTIME 16.18) is skipped where a store change follows it: a cancel by
    # any principal runs T13 (kills no_store_change_without_access).
    mutant_cancel_skips_access: bool = False
    # A resume skips AccessDenied (12.2 step 2): anyone's approval claims the run
    # (kills no_approval_without_access).
    mutant_resume_skips_access: bool = False
    # The reads skip the access check: anyone is shown a run's status and events
    # (kills no_read_without_access).
    mutant_read_skips_access: bool = False
    # The status view returns the row's suspended state and stored request too
    # (kills status_view_strips_suspended_state).
    mutant_status_view_keeps_state: bool = False
    # Gate 2 and the submitter gate (16.18.5) pass a service account as if it were a backend user
    # permitted every tool (kills no_write_or_input_released_by_service_account).
    mutant_gates_pass_service_accounts: bool = False
    # The four-eyes check (16.18.4) is skipped though the configuration requires a second
    # approver (kills no_self_approved_write).
    mutant_four_eyes_skipped: bool = False
    # Execution after a resume (16.18.5) does not apply the owner's tool policy again: an
    # approved call the owner may not run runs (kills no_call_beyond_its_principals_policy).
    mutant_execution_ignores_owner_policy: bool = False
    # record_approval and record_input store no decidedBy / submittedBy (kills
    # decision_events_name_their_principal).
    mutant_decision_event_unsigned: bool = False

    def with_(self, name: str | None = None, **switches: bool) -> Policy:
        for k in switches:
            if k not in SWITCHES:
                raise KeyError(k)
        p = replace(self, **switches)  # type: ignore[arg-type]  # (name is not a switch)
        return replace(p, name=name) if name else p

    def without(self, *switches: str) -> Policy:
        suffix = " without " + ", ".join(switches)
        return self.with_(name=self.name + suffix, **{s: False for s in switches})

    def switches(self) -> dict[str, bool]:
        return {s: getattr(self, s) for s in SWITCHES}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **self.switches()}


SWITCHES: tuple[str, ...] = tuple(f.name for f in fields(Policy) if f.name != "name")

_BASE = Policy(name="adr-092")

# Each preset adds to the previous one (RUNTIME 15.1).
_STEPS: list[tuple[str, dict[str, bool]]] = [
    ("adr-092", {}),
    ("adr-101", {"suspend_requires_running": True}),
    ("adr-102", {"queue": True, "cancel_probe": True}),
    ("adr-104", {"heartbeat": True, "renew_before_persist": True, "reaper": True, "retry": True}),
    (
        "owner-guard",
        {
            "reaper_dispatch_failclosed": True,
            "input_suspend": True,
            "noop_renew_recheck": True,
            "owner_guarded_settle_workers": True,
            "service_accounts": True,
        },
    ),
    ("adr-111", {"tool_effect": True, "audit_failclosed_writes": True, "audit_fail_unknown": True}),
    ("adr-112", {"write_fence": True}),
    ("adr-122", {"clear_fence_on_requeue": True}),
    (
        "adr-134",
        {
            "approve_grant": True,
            "approval_audit_failclosed": True,
            "approver_gate": True,
            "write_implies_approval": True,
        },
    ),
    (
        "adr-141",
        {
            "lease_all_segments": True,
            "unleased_write_refused": True,
            "owner_guarded_settle_all": True,
            "reaper_no_request_branch": True,
        },
    ),
    ("adr-150", {"submitter_gate": True}),
    ("adr-172", {"four_eyes": True}),
]


def _build() -> dict[str, Policy]:
    out: dict[str, Policy] = {}
    p = _BASE
    for name, adds in _STEPS:
        p = p.with_(name=name, **adds)
        out[name] = p
    out["current"] = replace(out[_STEPS[-1][0]], name="current")
    out["proposed"] = out[_STEPS[-1][0]].with_(
        name="proposed",
        fence_kept_after_non_idempotent_write=True,
        fallback_settles_requeued_row=True,
        probe_persists_own_claim_only=True,
        failure_settles_own_claim=True,
        suspend_guarded_by_claim=True,
        overdue_queued_redispatched=True,
        event_insert_owner_guarded=True,
        event_sequence_unique=True,
        fence_cleared_after_audit=True,
        idempotent_stamp_blocks_retry=True,
    )
    return out


PRESETS: dict[str, Policy] = _build()
PRESET_ORDER: tuple[str, ...] = tuple(name for name, _ in _STEPS)


def proposal_switches() -> tuple[str, ...]:
    """The switches ``proposed`` turns on over ``current`` (docs/PROPOSALS.md's proposals), in
    declaration order: what ``failclosed proposals`` turns off one at a time."""
    cur, prop = PRESETS["current"], PRESETS["proposed"]
    return tuple(s for s in SWITCHES if getattr(prop, s) != getattr(cur, s))


class UnknownPolicy(ValueError):
    pass


def preset(name: str) -> Policy:
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownPolicy(
            f"unknown policy {name!r}: use one of {', '.join(PRESETS)}"
        ) from None


def split_policy(spec: str) -> tuple[str, str]:
    """(the preset a policy name starts from, the switch changes after it):
    ``"adr-141-write_fence"`` -> ``("adr-141", "-write_fence")``; UnknownPolicy if no preset."""
    # preset names contain '-', so find the longest preset prefix
    for name in sorted(PRESETS, key=len, reverse=True):
        if spec == name or spec.startswith(name + "+") or spec.startswith(name + "-"):
            return name, spec[len(name):]
    raise UnknownPolicy(f"unknown policy {spec!r}: use one of {', '.join(PRESETS)}")


def varied_preset(spec: str) -> str | None:
    """The preset a policy spelled ``preset+switch`` / ``preset-switch`` varies; None for a
    preset itself (or a name that is no policy spec)."""
    try:
        base, rest = split_policy(spec)
    except UnknownPolicy:
        return None
    return base if rest else None


def parse_policy(spec: str) -> Policy:
    """``"adr-141"``, ``"adr-141-write_fence"`` (without), ``"adr-111+write_fence"`` (with)."""

    base, rest = split_policy(spec)
    p = PRESETS[base]
    for sign, sw in re.findall(r"([+-])([a-z_]+)", rest):
        if sw not in SWITCHES:
            raise UnknownPolicy(f"unknown switch {sw!r} in policy {spec!r}: use one of {', '.join(SWITCHES)}")
        p = p.with_(**{sw: sign == "+"})
    return replace(p, name=spec)
