"""The transition vocabulary in one place: every name the model can fire, where docs/RUNTIME.md
names it, and which fault branches it has. The coverage reports and the name-list test read
this; ``model.runtime`` is what actually enables them."""

from __future__ import annotations

# name -> (docs/RUNTIME.md place, fault kinds the transition can take)
TRANSITIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    # store statements (section 4)
    "start_run": ("T1", ("store_error",)),
    "enqueue_run": ("T2", ("store_error",)),
    "claim_queued": ("T3", ("store_error",)),
    "renew_lease": ("T4", ("store_error",)),
    "mark_pending_effect": ("T5 stamp and clear", ("store_error",)),
    "suspend": ("T6", ("store_error",)),
    "suspend_for_input": ("T6", ("store_error",)),
    "claim_for_resume": ("T7", ("store_error",)),
    "claim_for_resume_from_input": ("T7", ("store_error",)),
    "settle_completed": ("T8 via 4.3", ("store_error",)),
    "settle_failed": ("T8 via 4.3", ("store_error",)),
    "settle_policy_stopped": ("T8 via 4.3", ("store_error",)),
    "settle_dead_lettered": ("T8 via 4.3", ("store_error",)),
    "requeue": ("T9", ("store_error",)),
    "find_stale_running": ("T10", ("store_error", "decode_error")),
    "requeue_stale": ("T11", ("store_error",)),
    "dead_letter_stale": ("T12", ("store_error",)),
    "cancel": ("T13", ("store_error",)),
    "find_run": ("4.2; 12.2 steps 1-2 (a resume decodes the loaded state)", ("store_error", "decode_error")),
    "max_sequence": ("4.2", ("store_error", "decode_error")),
    "record_step": ("4.2, 7.2 step 5", ("audit_insert_fails", "ambiguous_commit")),
    "record_approval": ("4.2, 12.2 step 9", ("audit_insert_fails",)),
    "record_input": ("4.2, 12.3", ("audit_insert_fails",)),
    # segment steps (7.1-7.4) and the bus (6)
    "run_queued": ("6.2 step 1 (async: a delivery; sync: nested in dispatch)", ("store_error",)),
    "dispatch": ("6.1 step 4, 9 step 7, 10 branch 5; 6.3 sync: the handler runs nested", ("dispatch_fails",)),
    "on_step": ("7.2 step 1", ("observer_error",)),
    "provider_call": ("7.1 step 3", ("provider_error",)),
    "invoke": ("7.1 step 8.2", ("tool_error",)),
    # callers (11, 12)
    "approve": ("12.2", ()),
    "deny": ("12.2", ()),
    "submit_input": ("12.3", ()),
    # environment and faults (1.3)
    "advance_time": ("conventions: one clock; 1.3 slow operation", ("slow_operation", "pause")),
    "crash": ("1.3 process death", ()),
    "duplicate_message": ("1.3, 6.3", ()),
    "remove_tool": ("14.2 a tool removed between attempts", ()),
}


def labels(provider_classes: tuple[str, ...] = ()) -> list[str]:
    """Every ``name[fault]`` label the model can produce (provider faults by class)."""
    out = []
    for name, (_, faults) in TRANSITIONS.items():
        out.append(name)
        for f in faults:
            if f == "provider_error":
                out.extend(f"{name}[{c}]" for c in provider_classes)
            else:
                out.append(f"{name}[{f}]")
    return out
