"""The policy variants ``failclosed mutants`` checks: every switch that is on in ``current``
switched off, the counterfactual switches switched off, the earlier presets, and the
deliberately broken ``mutant_`` switches switched on (each on its own small bound in
spec/mutant_configs). A property no variant violates is one the checker cannot be seen to
check (the kill table of cli/check.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from failclosed.model.policy import PRESET_ORDER, PRESETS, SWITCHES
from failclosed.spec.checker import check
from failclosed.spec.vocab import PropertyName

__all__ = ["COUNTERFACTUAL_OFF", "MUTANTS", "MUTANT_CONFIG_DIR", "MUTANT_SWITCHES", "check_variant",
           "mutant_config", "mutants"]

# Counterfactual switches (RUNTIME 15: "one counterfactual switch is useful beside the
# presets"), turned OFF on top of current: each is a deliberately broken variant.
COUNTERFACTUAL_OFF = ("renew_before_persist", "terminal_guard", "audit_fail_unknown")


# Deliberately broken variants (model/policy.py, the ``mutant_`` switches), turned ON on top
# of current, for the properties that no switch-off kills: mutant switch -> (the property it
# must kill, the bound it runs on). A switch-off of current only removes a mechanism of the
# history; these remove a guard the runtime has always had (a claim's status, an owner
# guard's claimed_by, the requeue count, recovery's class check, the reaper's re-check), so
# each property is seen to be violable. Each runs on its own small bound in
# spec/mutant_configs, where its violation is reachable whatever --config says (the claim
# race needs two workers and a duplicate message, which no part of small has).
MUTANT_CONFIG_DIR = Path(__file__).resolve().parent / "mutant_configs"
MUTANT_SWITCHES: dict[str, tuple[str, str]] = {
    "mutant_claim_ignores_status": (PropertyName.EXCLUSIVE_CLAIM, "claim.toml"),
    "mutant_owner_guard_ignores_claim": (PropertyName.OWNER_ONLY_MUTATION, "zombie.toml"),
    "mutant_requeue_keeps_count": (PropertyName.BOUNDED_ATTEMPTS, "zombie.toml"),
    "mutant_recovery_ignores_class": (PropertyName.NO_RETRY_OF_NON_RETRYABLE, "zombie.toml"),
    "mutant_reaper_trusts_snapshot": (PropertyName.RACE_SAFE_STALENESS, "zombie.toml"),
    "mutant_enqueue_stores_before_transport_check": (PropertyName.NO_ORPHAN_QUEUED_RUN,
                                                     "no-transport.toml"),
    # the access check and the status view (RUNTIME 16.18.2, 16.18.3): a stranger's and a scopeless
    # service account's requests, and the owner's status read, on one interactive run
    "mutant_cancel_skips_access": (PropertyName.NO_STORE_CHANGE_WITHOUT_ACCESS, "access.toml"),
    "mutant_resume_skips_access": (PropertyName.NO_APPROVAL_WITHOUT_ACCESS, "access.toml"),
    "mutant_read_skips_access": (PropertyName.NO_READ_WITHOUT_ACCESS, "access.toml"),
    "mutant_status_view_keeps_state": (PropertyName.STATUS_VIEW_STRIPS_SUSPENDED_STATE,
                                       "access.toml"),
    # the gates that judge a principal (RUNTIME 16.18.4, 16.18.5): a service account's approval of a
    # write, an initiator's approval under four-eyes, an approval of a write the owner's tool
    # policy refuses, and the approval events' decidedBy
    "mutant_gates_pass_service_accounts": (
        PropertyName.NO_WRITE_OR_INPUT_RELEASED_BY_SERVICE_ACCOUNT, "access-gates.toml"),
    "mutant_four_eyes_skipped": (PropertyName.NO_SELF_APPROVED_WRITE, "access-gates.toml"),
    "mutant_execution_ignores_owner_policy": (PropertyName.NO_CALL_BEYOND_ITS_PRINCIPALS_POLICY,
                                              "access-gates.toml"),
    "mutant_decision_event_unsigned": (PropertyName.DECISION_EVENTS_NAME_THEIR_PRINCIPAL,
                                       "access-gates.toml"),
}


def mutants() -> dict[str, str]:
    """Mutant name -> policy spec (parse_policy syntax): every switch that is on in
    ``current`` switched off, the counterfactuals switched off, the earlier presets, and the
    deliberately broken ``mutant_`` switches switched on."""
    cur = PRESETS["current"]
    out: dict[str, str] = {}
    for sw in SWITCHES:
        if getattr(cur, sw):
            out[f"-{sw}"] = f"current-{sw}"
    for sw in COUNTERFACTUAL_OFF:
        out.setdefault(f"-{sw}", f"current-{sw}")
    for name in PRESET_ORDER:
        if name != PRESET_ORDER[-1]:  # the last preset is current
            out[name] = name
    for sw in MUTANT_SWITCHES:
        out[f"+{sw}"] = f"current+{sw}"
    return out


def mutant_config(name: str, default: str) -> str:
    """The bound a mutant runs on: its own (MUTANT_SWITCHES) or ``default`` (--config)."""
    sw = name.lstrip("+-")
    if name.startswith("+") and sw in MUTANT_SWITCHES:
        return str(MUTANT_CONFIG_DIR / MUTANT_SWITCHES[sw][1])
    return default


def check_variant(job: tuple[str, str]) -> Any:
    """One row of the kill table: ``(policy, config)`` checked without witnesses or coverage
    (a module-level function: ``failclosed mutants --jobs`` runs it on spawned processes)."""
    policy, config = job
    return check(policy, config, None, witnesses=False, coverage=False)


MUTANTS = mutants()
