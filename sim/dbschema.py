"""The runtime's two tables as an export holds them (EXPORT.md, the tables read from the runtime's
code, sections 1 and 2):
the columns of ``tx_nrllm_agentrun`` and ``tx_nrllm_agentrun_event`` in table order, the event
kinds, the privacy levels and the row expectations of section 7.4.

The simulator writes this schema (sim/export.py) and ``failclosed inspect`` reads it
(sim/inspect.py). The model's own names (statuses, reasons, effects, the kinds of the events
it stores) are read from model/; what is named here is what the runtime's tables add to them.
"""

from __future__ import annotations

from failclosed.model.state import (
    AWAITING,
    EFFECTS,
    QUEUED,
    READ_ONLY,
    REASONS,
    RESUME,
    RUNNING,
    STATUSES,
    TERMINAL,
    WORKER,
)

RUN_TABLE = "tx_nrllm_agentrun"
EVENT_TABLE = "tx_nrllm_agentrun_event"

# (column, SQL type): int columns are read back as int from a text export, the rest as text
RUN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("uid", "INTEGER PRIMARY KEY"), ("pid", "INTEGER"), ("uuid", "TEXT"), ("status", "TEXT"),
    ("configuration_uid", "INTEGER"), ("configuration_identifier", "TEXT"), ("be_user", "INTEGER"),
    ("iterations", "INTEGER"), ("truncated", "INTEGER"), ("total_prompt_tokens", "INTEGER"),
    ("total_completion_tokens", "INTEGER"), ("total_tokens", "INTEGER"), ("estimated_cost", "REAL"),
    ("error_class", "TEXT"), ("termination_reason", "TEXT"), ("suspended_state", "TEXT"),
    ("queued_request", "TEXT"), ("claimed_by", "TEXT"), ("lease_expires", "INTEGER"),
    ("requeue_count", "INTEGER"), ("pending_effect", "TEXT"), ("started_at", "INTEGER"),
    ("finished_at", "INTEGER"), ("tstamp", "INTEGER"), ("crdate", "INTEGER"),
)
EVENT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("uid", "INTEGER PRIMARY KEY"), ("pid", "INTEGER"), ("run", "INTEGER"), ("sequence", "INTEGER"),
    ("kind", "TEXT"), ("round", "INTEGER"), ("duration_ms", "REAL"), ("payload", "TEXT"),
    ("crdate", "INTEGER"),
)
# Proposal P6's migration (docs/PROPOSALS.md): the run row's ``dispatch_deadline``, the instant
# by which a QUEUED row's message must have been taken (0: none). A database of the runtime
# before the change has no such column; inspect reads it where it exists.
DISPATCH_DEADLINE = "dispatch_deadline"
OPTIONAL_RUN_COLUMNS: tuple[tuple[str, str], ...] = ((DISPATCH_DEADLINE, "INTEGER"),)
RUN_NAMES = tuple(c for c, _ in RUN_COLUMNS)
EVENT_NAMES = tuple(c for c, _ in EVENT_COLUMNS)
INT_COLUMNS = frozenset(c for c, t in RUN_COLUMNS + OPTIONAL_RUN_COLUMNS + EVENT_COLUMNS
                        if t.startswith("INTEGER"))
REAL_COLUMNS = frozenset(c for c, t in RUN_COLUMNS + EVENT_COLUMNS if t == "REAL")

# The events the model stores (model.state.Event.kind) and the kinds only the runtime writes
# (EXPORT.md 2: the context budget, the dry run's assembled prompt, the dropped sources).
MODEL_KINDS = ("request", "llm", "tool", "approval", "input")
RUNTIME_ONLY_KINDS = ("context", "assembled", "dropped")
KINDS = MODEL_KINDS + RUNTIME_ONLY_KINDS
ROUND_ZERO_KINDS = frozenset({"approval", "input", "dropped", "assembled"})

# RunStepPrivacyFilter's levels (EXPORT.md 2.3); METADATA is the runtime's default
PRIVACY_LEVELS = ("none", "metadata", "redacted", "full")
DEFAULT_PRIVACY = "metadata"

# a fence is only ever stamped for a write (EXPORT.md 1.1 pending_effect)
FENCE_VALUES = ("",) + tuple(e for e in EFFECTS if e != READ_ONLY)
# the segment prefixes of claimed_by (ExecutionIdentity; the model's identities spell them so)
CLAIM_PREFIXES = (WORKER + ":", "interactive:", RESUME + ":")

# EXPORT.md 7.4: the termination reasons each terminal status allows
REASONS_BY_STATUS: dict[str, tuple[str, ...]] = {
    "completed": ("completed", "max_iterations", "budget_exhausted", "context_truncated"),
    "cancelled": ("cancelled",),
    "failed": ("provider_failed", "policy_denied", "approval_denied", "retries_exhausted",
               "not_retryable"),
}
# EXPORT.md 7.8: the reasons a terminal row with a leftover fence is expected to carry
FENCE_LEFT_REASONS = ("not_retryable", "cancelled")

assert set(REASONS_BY_STATUS) == set(TERMINAL)
assert {r for rs in REASONS_BY_STATUS.values() for r in rs} == set(REASONS)
assert set(FENCE_LEFT_REASONS) <= set(REASONS)

__all__ = [
    "AWAITING", "CLAIM_PREFIXES", "DEFAULT_PRIVACY", "DISPATCH_DEADLINE", "EVENT_COLUMNS", "EVENT_NAMES", "EVENT_TABLE",
    "FENCE_LEFT_REASONS", "FENCE_VALUES", "INT_COLUMNS", "KINDS", "MODEL_KINDS", "OPTIONAL_RUN_COLUMNS", "PRIVACY_LEVELS",
    "QUEUED", "REAL_COLUMNS", "REASONS_BY_STATUS", "ROUND_ZERO_KINDS", "RUNNING", "RUNTIME_ONLY_KINDS",
    "RUN_COLUMNS", "RUN_NAMES", "RUN_TABLE", "STATUSES", "TERMINAL", "create_sql",
]


def create_sql(deadline: bool = False, unique_sequence: bool = False) -> list[str]:
    """The statements that create both tables and the runtime's two plain indexes
    (``run_sequence (run, sequence)`` is not UNIQUE, ``run_uuid`` neither). After the
    migration of docs/PROPOSALS.md: ``deadline`` (P6) adds ``dispatch_deadline`` and its index
    ``run_overdue``; ``unique_sequence`` (P8) makes ``run_sequence`` UNIQUE."""
    def table(name: str, cols: tuple[tuple[str, str], ...]) -> str:
        return f"CREATE TABLE {name} ({', '.join(f'{c} {t}' for c, t in cols)})"

    run_cols = RUN_COLUMNS + (OPTIONAL_RUN_COLUMNS if deadline else ())
    out = [table(RUN_TABLE, run_cols), table(EVENT_TABLE, EVENT_COLUMNS),
           f"CREATE INDEX run_uuid ON {RUN_TABLE} (uuid)",
           f"CREATE {'UNIQUE ' if unique_sequence else ''}INDEX run_sequence ON {EVENT_TABLE} (run, sequence)"]
    if deadline:
        out.append(f"CREATE INDEX run_overdue ON {RUN_TABLE} (status, {DISPATCH_DEADLINE})")
    return out
