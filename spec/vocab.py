"""The property names: one closed vocabulary (model/vocab.py's ``Closed``), read by every layer.

``spec.properties`` declares each property by ``@always(PropertyName.X, ...)`` or
``@leads_to(PropertyName.X, ...)``, and its registries ``SAFETY`` / ``LIVENESS`` are keyed by
these members; the simulator's checks (sim/inspect.py), the mutants' expectations
(spec/mutants.py) and the command line name a property by its member, and a name read from
TOML, JSON or the command line is parsed with ``PropertyName.of``. A new property is added
here first (docs/CHANGING.md); a test fixture declares one at run time with
``model.vocab.extend(PropertyName, name)``. Not compiled by mypyc (setup.py), like
model/vocab.py.
"""

from __future__ import annotations

from failclosed.model.vocab import Closed, describe


class PropertyName(Closed):
    """A property's name: every ``@always`` / ``@leads_to`` of spec/properties.py."""

    # safety (in declaration order)
    NO_UNAUDITED_WRITE_SETTLES_SUCCESSFULLY = "no_unaudited_write_settles_successfully"
    NO_WRITE_APPLIED_TWICE_WITHOUT_AUDIT = "no_write_applied_twice_without_audit"
    NON_IDEMPOTENT_WRITE_AT_MOST_ONCE = "non_idempotent_write_at_most_once"
    NO_SUCCESS_OVER_UNRECORDED_WRITE = "no_success_over_unrecorded_write"
    TERMINAL_IS_ABSORBING = "terminal_is_absorbing"
    EXCLUSIVE_CLAIM = "exclusive_claim"
    OWNER_ONLY_MUTATION = "owner_only_mutation"
    NO_ZOMBIE_APPEND = "no_zombie_append"
    NO_ZOMBIE_SETTLE = "no_zombie_settle"
    STREAM_ORDER = "stream_order"
    BOUNDED_ATTEMPTS = "bounded_attempts"
    NO_RETRY_OF_NON_RETRYABLE = "no_retry_of_non_retryable"
    INTERRUPTED_NON_IDEMPOTENT_WRITE_NOT_REPEATED = "interrupted_non_idempotent_write_not_repeated"
    WRITES_ONLY_UNDER_FENCE = "writes_only_under_fence"
    NO_WRITE_WITHOUT_RECORDED_APPROVAL = "no_write_without_recorded_approval"
    RACE_SAFE_STALENESS = "race_safe_staleness"
    COOPERATIVE_CANCEL = "cooperative_cancel"
    NO_RESURRECTION_BY_SUSPEND = "no_resurrection_by_suspend"
    NO_STORE_CHANGE_WITHOUT_ACCESS = "no_store_change_without_access"
    NO_APPROVAL_WITHOUT_ACCESS = "no_approval_without_access"
    NO_READ_WITHOUT_ACCESS = "no_read_without_access"
    STATUS_VIEW_STRIPS_SUSPENDED_STATE = "status_view_strips_suspended_state"
    NO_WRITE_OR_INPUT_RELEASED_BY_SERVICE_ACCOUNT = "no_write_or_input_released_by_service_account"
    NO_SELF_APPROVED_WRITE = "no_self_approved_write"
    NO_CALL_BEYOND_ITS_PRINCIPALS_POLICY = "no_call_beyond_its_principals_policy"
    DECISION_EVENTS_NAME_THEIR_PRINCIPAL = "decision_events_name_their_principal"
    ONE_EVENT_PER_STEP = "one_event_per_step"
    # liveness
    LEASED_RUNS_LEAVE_RUNNING = "leased_runs_leave_running"
    NO_ORPHAN_QUEUED_RUN = "no_orphan_queued_run"
    EVERY_RUN_TERMINATES = "every_run_terminates"


describe(PropertyName, "property")


class Reduction(Closed):
    """A state-space reduction the checker's search runs under, as its verdict and stats
    lines and ``--json`` name it (a run lists the ones it applied, in this order)."""

    SYMMETRY = "symmetry"  # spec/symmetry.py: workers and identical runs permuted
    TIME_SHIFT = "time shift"  # spec/symmetry.py: every instant moved by one constant
    LOG_ORDER = "log order"  # spec/symmetry.py: each log's entries grouped by run (or actor)


describe(Reduction, "reduction")
