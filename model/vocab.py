"""The model's closed vocabularies: every name another layer matches on, one ``StrEnum`` each.

Stateright style: the step labels, the transition names, the fault kinds, the actor kinds, the
outcomes, the marks and the callers' decisions are closed enumerations, so a new or misspelt name is an error at once
(when a table is declared or a string is parsed), never a silent no-op. The tables that hold
the facts are keyed by members (``model.steps``: ``ACTIONS``, ``REAPER_ACTIONS``, ``FAULTS``,
``OTHER_TRANSITIONS``, ``ACTORS``; ``model.store.STATEMENTS``; ``spec.properties``:
``SAFETY`` / ``LIVENESS``, whose names are ``spec.names.PropertyName``), and every layer
above model/ names a member, never the string.

A member *is* its string: ``str(m)``, ``format(m)``, ``repr(m)``, ``hash(m)``, ``==``,
``json.dumps`` and pickling give exactly what the plain string gives, so TOML and JSON
files, dict keys, trace text and the recorded digests are unchanged. Strings exist only at
the edges (TOML, JSON, the command line) and are parsed there once with ``Enum.of(value)``
(a ``ValueError`` naming the value and where to declare it).

This module imports nothing from the model (it is the bottom of ``model/``: ``store.py``,
``state.py`` and ``steps.py`` import it) and is not compiled by mypyc (setup.py), so a
member declared at run time works the same on both builds.

Declaring a name at run time (a test fixture that adds a step, a statement, a fault kind or
a property, as tests/test_recipes.py does): :func:`extend` declares it, :func:`retract`
removes it again, :func:`extended` does both around a block. A declared name is a member for
every purpose (``Enum(value)``, ``Enum.of``, ``isinstance``) except attribute access and
iteration over the class, which list the members written below.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from enum import StrEnum
from typing import Any, TypeVar

C = TypeVar("C", bound="Closed")

_EXTRA: dict[type, dict[str, Any]] = {}  # enum -> value -> member declared at run time
_WHAT: dict[type, str] = {}  # enum -> what its members are, for the error line


class Closed(StrEnum):
    """A closed vocabulary: a ``StrEnum`` whose ``repr`` is its string's (see the module
    docstring) and whose members may be extended at run time through :func:`extend`."""

    def __repr__(self) -> str:
        return str.__repr__(self)

    @classmethod
    def _missing_(cls, value: object) -> Any:
        return _EXTRA.get(cls, {}).get(value) if isinstance(value, str) else None

    @classmethod
    def of(cls: type[C], value: object, context: str = "") -> C:
        """``value`` as a member of this vocabulary; ``ValueError`` naming it (after
        ``context``, e.g. ``step 'stamp':``) and where to declare it otherwise."""
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            pass
        head = f"{context} " if context else ""
        raise ValueError(
            f"{head}unknown {_WHAT.get(cls, cls.__name__)} {value!r}: add it to "
            f"{cls.__name__} in {_home(cls)}") from None

    @classmethod
    def known(cls, value: object) -> bool:
        """Whether ``value`` is a member (or a name declared at run time)."""
        try:
            cls(value)
        except ValueError:
            return False
        return True

    @classmethod
    def values(cls: type[C]) -> tuple[C, ...]:
        """Every member, in declaration order, then the names declared at run time."""
        return (*cls, *_EXTRA.get(cls, {}).values())


def _home(cls: type) -> str:
    """The source file that declares ``cls``, as the repository spells it (model/vocab.py)."""
    parts = cls.__module__.split(".")
    return "/".join(parts[1:] if parts[0] == "failclosed" else parts) + ".py"


def describe(cls: type[C], what: str) -> type[C]:
    """Name what the members of ``cls`` are, for the error line of :meth:`Closed.of`."""
    _WHAT[cls] = what
    return cls


def extend(cls: type[C], value: str) -> C:
    """Declare ``value`` a member of ``cls`` at run time (a test fixture's new name); the
    member is returned. A value already declared is returned as it is."""
    if cls.known(value):
        return cls(value)
    member = str.__new__(cls, value)
    member._name_ = value
    member._value_ = value
    _EXTRA.setdefault(cls, {})[value] = member
    return member


def retract(cls: type, value: str) -> None:
    """Undo :func:`extend`: ``value`` is no longer a member (the members written in the class
    cannot be retracted)."""
    _EXTRA.get(cls, {}).pop(value, None)


def extensions() -> dict[type, tuple[str, ...]]:
    """What is declared at run time now, per vocabulary (for :func:`restore_extensions`)."""
    return {cls: tuple(extra) for cls, extra in _EXTRA.items() if extra}


def restore_extensions(saved: dict[type, tuple[str, ...]]) -> None:
    """Retract every name declared at run time since ``saved = extensions()`` (a fixture's
    teardown)."""
    for cls, extra in list(_EXTRA.items()):
        for value in [v for v in extra if v not in saved.get(cls, ())]:
            retract(cls, value)


@contextlib.contextmanager
def extended(pairs: Iterable[tuple[type, str]]) -> Iterator[None]:
    """Declare each ``(enum, value)`` for the block, and retract what was declared after it."""
    added = [(cls, v) for cls, v in pairs if not cls.known(v)]
    for cls, v in added:
        extend(cls, v)
    try:
        yield
    finally:
        for cls, v in added:
            retract(cls, v)


class Keyed(dict):  # type: ignore[type-arg]
    """A table keyed by the members of one vocabulary: a key is parsed with ``of`` as it is
    stored, so a misspelt or undeclared name fails at once, naming it."""

    def __init__(self, vocabulary: type[Closed], *args: Any, **kw: Any) -> None:
        super().__init__()
        self.vocabulary = vocabulary
        self.update(*args, **kw)

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(self.vocabulary.of(key, "table key:"), value)

    def update(self, *args: Any, **kw: Any) -> None:
        for k, v in dict(*args, **kw).items():
            self[k] = v

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]


# =========================================================================================
# the vocabularies
# =========================================================================================
class Label(Closed):
    """A step label (``Proc.pc``, ``ReaperState.pc``): every step of the actor modules'
    tables (model/segment.py, pickup.py, resume.py, reaper.py), the reaper's ``nested``, and
    a segment's continuations after a boundary (``Proc.then``)."""

    # a segment's or a caller's steps
    RUN_QUEUED = "run_queued"
    ON_STEP = "on_step"
    PROBE = "probe"
    RENEW = "renew"
    PERSIST = "persist"
    CLEAR = "clear"
    PROVIDER = "provider"
    STAMP = "stamp"
    INTENT = "intent"  # proposal write_intent_recorded: the write-ahead event before invoke
    INVOKE = "invoke"
    SUSPEND = "suspend"
    SETTLE = "settle"
    RECOVERY_READ = "recovery_read"
    REQUEUE = "requeue"
    DISPATCH = "dispatch"
    CLAIM_QUEUED = "claim_queued"
    PICKUP_POSITION = "pickup_position"
    RESUME_READ = "resume_read"
    RESUME_PROBE = "resume_probe"
    RESUME_CLAIM = "resume_claim"
    RESUME_POSITION = "resume_position"
    RECORD_DECISION = "record_decision"
    RELEASE = "release"
    # the reaper's (dispatch and settle are shared with the processes')
    TICK = "tick"
    ROW = "row"
    MAX_SEQUENCE = "max_sequence"
    NESTED = "nested"  # no step of its own: the reaper waits while a run it dispatched
    # executes inside its process (sync transport)
    # the reaper's overdue-queued sweep (proposal P6, docs/PROPOSALS.md)
    REDISPATCH = "redispatch"  # T15 on an overdue QUEUED row of T14's snapshot
    RESEND = "resend"  # the sweep's dispatch of that row
    # a segment's continuations after a step boundary (``Proc.then``; no step of their own:
    # the boundary's last step goes on to them, model/segment.py ``_continue``)
    AFTER_LLM = "after_llm"  # the provider's answer: the approval scan, the calls or the arm
    AFTER_TOOL = "after_tool"  # a tool's step: the turn's next call, or the next round


class TransitionName(Closed):
    """A transition's name (``Transition.name``): every name a step ``fires``, the store
    statements (model/store.py), and ``OTHER_TRANSITIONS``' keys."""

    # the store statements (RUNTIME 4, T1-T13 and the reads of 4.2)
    START_RUN = "start_run"
    ENQUEUE_RUN = "enqueue_run"
    CLAIM_QUEUED = "claim_queued"
    RENEW_LEASE = "renew_lease"
    MARK_PENDING_EFFECT = "mark_pending_effect"
    SUSPEND = "suspend"
    SUSPEND_FOR_INPUT = "suspend_for_input"
    CLAIM_FOR_RESUME = "claim_for_resume"
    CLAIM_FOR_RESUME_FROM_INPUT = "claim_for_resume_from_input"
    FINISH_RUN = "finish_run"
    REQUEUE = "requeue"
    FIND_STALE_RUNNING = "find_stale_running"
    REQUEUE_STALE = "requeue_stale"
    DEAD_LETTER_STALE = "dead_letter_stale"
    CANCEL = "cancel"
    FIND_OVERDUE_QUEUED = "find_overdue_queued"  # T14 (proposal P6)
    REDISPATCH_QUEUED = "redispatch_queued"  # T15 (proposal P6)
    FIND_RUN = "find_run"
    MAX_SEQUENCE = "max_sequence"
    APPEND_EVENT = "append_event"  # the event insert as a scenario runs it (4.2; P7, P8)
    # the other steps of a process
    RUN_QUEUED = "run_queued"
    ON_STEP = "on_step"
    RECORD_STEP = "record_step"
    PROVIDER_CALL = "provider_call"
    INVOKE = "invoke"
    SETTLE_COMPLETED = "settle_completed"
    SETTLE_FAILED = "settle_failed"
    SETTLE_POLICY_STOPPED = "settle_policy_stopped"
    SETTLE_DEAD_LETTERED = "settle_dead_lettered"
    DISPATCH = "dispatch"
    RECORD_APPROVAL = "record_approval"
    RECORD_INPUT = "record_input"
    # callers, the clock, the bus, the operator, process death
    APPROVE = "approve"
    DENY = "deny"
    SUBMIT_INPUT = "submit_input"
    ADVANCE_TIME = "advance_time"
    CRASH = "crash"
    DUPLICATE_MESSAGE = "duplicate_message"
    REMOVE_TOOL = "remove_tool"
    # the runtime's console commands (model/commands.py): the operator's cancel, and a
    # reaper's tick refused up front for want of a transport (RUNTIME 6.4)
    CANCEL_COMMAND = "cancel_command"
    TICK_REFUSED = "tick_refused"
    # a principal's reads (RUNTIME 16.18: the status view and the events page); no store change
    READ_STATUS = "read_status"
    READ_EVENTS = "read_events"


class FaultKind(Closed):
    """A fault kind (RUNTIME 1.3): ``model.steps.FAULTS``' keys, ``Config.faults``."""

    STORE_ERROR = "store_error"
    AUDIT_INSERT_FAILS = "audit_insert_fails"
    AMBIGUOUS_COMMIT = "ambiguous_commit"
    DISPATCH_FAILS = "dispatch_fails"
    CRASH = "crash"
    PROVIDER_ERROR = "provider_error"
    OBSERVER_ERROR = "observer_error"
    DECODE_ERROR = "decode_error"
    TOOL_ERROR = "tool_error"
    DUPLICATE_MESSAGE = "duplicate_message"
    SLOW_OPERATION = "slow_operation"
    PAUSE = "pause"


class ActorKind(Closed):
    """An actor kind (RUNTIME 1.2, ``model.steps.declare_actor``). The singletons' kind is
    also the actor name of their transitions (``Transition.actor``)."""

    CALLER = "caller"
    PROCESS = "process"
    WORKER = "worker"
    BUS = "bus"
    REAPER = "reaper"
    OPERATOR = "operator"
    CLOCK = "clock"


class OutcomeName(Closed):
    """What a segment or a caller returns (``World.outcomes``; RUNTIME 5, 9, 11, 12), and
    what the runtime's console commands end with (``World.commands``)."""

    COMPLETED = "COMPLETED"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    AWAITING_INPUT = "AWAITING_INPUT"
    SUSPEND_FAILED = "SUSPEND_FAILED"
    GUARDRAIL_BLOCKED = "GUARDRAIL_BLOCKED"
    GUARDRAIL_APPROVAL_REQUIRED = "GUARDRAIL_APPROVAL_REQUIRED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    REQUEUED = "REQUEUED"
    LEASE_LOST = "LEASE_LOST"
    # a caller's enqueue refused up front: no transport (RUNTIME 6.4), nothing stored
    ENQUEUE_FAILED = "EnqueueFailed"
    # what the runtime's console commands end with (``World.commands``; model/commands.py
    # holds each one's exit code and message): the operator's cancel (RUNTIME 11) and a
    # reaper's tick without a transport (6.4)
    RUN_CANCELLED = "RUN_CANCELLED"
    NOT_CANCELLED = "NOT_CANCELLED"
    UUID_REQUIRED = "UUID_REQUIRED"
    NO_MESSAGE_BUS = "NO_MESSAGE_BUS"
    # a decision refused by the access check (RUNTIME 12.2 step 2, 12.3, 16.18.3), before any
    # store change: a resume's outcome
    ACCESS_DENIED = "AccessDenied"
    # what a named principal's cancel or read returns when it changes or reads nothing (16.18.3):
    # a cancel returns false (refused, an unknown run, a finished run alike), a refused status
    # or events read returns nothing (as for an unknown run)
    RETURNED_FALSE = "returned false"
    RETURNED_NOTHING = "returned nothing"


class Mark(Closed):
    """A history fact (``World.marks`` holds ``<mark>:<run id>``, :func:`fact`) that
    model/store.py and the actor modules write and the properties read."""

    FOREIGN_OWNER_MUTATION = "foreign_owner_mutation"
    ZOMBIE_APPEND = "zombie_append"
    ZOMBIE_SETTLE = "zombie_settle"
    RESURRECTION = "resurrection"
    TERMINAL_OVERWRITTEN = "terminal_overwritten"
    PAST_CANCEL = "past_cancel"
    RETRY_OF_NON_RETRYABLE = "retry_of_non_retryable"

    def fact(self, run_id: str) -> str:
        """The mark as ``World.marks`` holds it for a run: ``<mark>:<run id>``."""
        return f"{self}:{run_id}"

    @property
    def prefix(self) -> str:
        """What every fact of this mark starts with: ``<mark>:``."""
        return f"{self}:"


class Decision(Closed):
    """A caller's decision on a waiting run (``RunSpec.decisions``, in order; RUNTIME 12):
    each starts one resume, by the transition of the same name (``input``: submit_input)."""

    APPROVE = "approve"
    DENY = "deny"
    INPUT = "input"


class Request(Closed):
    """What a principal asks of a run (RUNTIME 11, 12, 16.18): the caller's commands and the two
    reads. The access check (``model.rules.may``) is keyed by these."""

    APPROVE = "approve"
    DENY = "deny"
    INPUT = "input"
    CANCEL = "cancel"
    STATUS = "status"
    EVENTS = "events"


class PrincipalKind(Closed):
    """Who a principal is (RUNTIME 16.18.1): a backend user (a positive uid and its grants), an
    admin (a backend user with the admin flag: every grant), a service account (uid 0, only
    its scopes) or an anonymous caller (uid 0, nothing)."""

    USER = "user"
    ADMIN = "admin"
    SERVICE_ACCOUNT = "service_account"
    ANONYMOUS = "anonymous"


class Scope(Closed):
    """A scope a request is checked against (RUNTIME 16.18.1, 16.18.3), held by a service account
    as a scope or by a backend user as a grant (only ``AGENT_APPROVE`` has a grant):
    ``AGENT_APPROVE`` approve, deny and submit input, ``AGENT_CANCEL`` cancel, ``AGENT_READ``
    status and events (``model.rules.REQUEST_SCOPE``)."""

    AGENT_CANCEL = "AGENT_CANCEL"
    AGENT_APPROVE = "AGENT_APPROVE"
    AGENT_READ = "AGENT_READ"


describe(Label, "step label")
describe(TransitionName, "transition")
describe(FaultKind, "fault kind")
describe(ActorKind, "actor kind")
describe(OutcomeName, "outcome")
describe(Mark, "mark")
describe(Decision, "decision")
describe(Request, "request")
describe(PrincipalKind, "principal kind")
describe(Scope, "scope")
