"""The world: immutable, hashable values (RUNTIME sections 1, 3 and 5).

Runs are referred to by index into ``Config.runs`` inside the state and by their ids in
transitions, scenarios and tables. ``Config`` is the static part of a configuration (policy,
constants, tool catalogue, plans, workers, fault menu); it is shared by every world of one
exploration and takes no part in equality or hashing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, NamedTuple

from .constants import Constants
from .policy import Policy
from .records import Record, field, ghost, picklable, record, replace
from .vocab import Decision, PrincipalKind
from .vocab import OutcomeName as OutcomeName  # re-exported: the outcomes' vocabulary

# -- vocabulary (RUNTIME section 2), spelled as stored ---------------------------------
QUEUED = "queued"
RUNNING = "running"
WAITING_FOR_APPROVAL = "waiting_for_approval"
WAITING_FOR_INPUT = "waiting_for_input"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
STATUSES = (QUEUED, RUNNING, WAITING_FOR_APPROVAL, WAITING_FOR_INPUT, COMPLETED, FAILED, CANCELLED)
TERMINAL = frozenset({COMPLETED, FAILED, CANCELLED})
AWAITING = frozenset({WAITING_FOR_APPROVAL, WAITING_FOR_INPUT})

OUTCOMES: tuple[str, ...] = tuple(OutcomeName)  # what a segment returns (model/vocab.py)
REASONS = (
    "completed", "max_iterations", "budget_exhausted", "context_truncated", "provider_failed",
    "policy_denied", "approval_denied", "not_retryable", "retries_exhausted", "cancelled",
)
DEAD_LETTER_REASONS = ("not_retryable", "retries_exhausted")  # settle_dead_lettered (4.3)
READ_ONLY = "read_only"
IDEMPOTENT_WRITE = "idempotent_write"
NON_IDEMPOTENT_WRITE = "non_idempotent_write"
EFFECTS = (READ_ONLY, IDEMPOTENT_WRITE, NON_IDEMPOTENT_WRITE)
# How a run enters (RunSpec.entry): enqueue_run (RUNTIME 6) or start_run (9).
ENTRIES = ("queued", "interactive")
# What a plan's answers may say (Answer): its kinds, a final answer's values, a guardrail's.
ANSWER_KINDS = ("tools", "final", "fail", "guardrail")
FINAL_VALUES = ("completed", "budget_exhausted", "context_truncated")
GUARDRAIL_VALUES = ("violation", "approval_required")
FAILURE_CLASSES = (
    "connection", "rateLimit", "serverError", "circuitOpen", "auth", "configuration",
    "clientError", "unknown",
)
RETRYABLE_CLASSES = frozenset({"connection", "rateLimit", "serverError", "circuitOpen"})

# Resume refusals after the claim that depend on the request (RUNTIME 12.2 gate 2, 12.3).
APPROVER_NOT_PERMITTED = "ApproverNotPermitted"
# the gates of RUNTIME 16.18 that judge a principal (16.18.4, 16.18.5): the four-eyes rule before the
# claim, the submitter gate of an input after it
SELF_APPROVAL_DENIED = "SelfApprovalDenied"
SUBMITTER_NOT_PERMITTED = "SubmitterNotPermitted"
INVALID_INPUT_SUBMISSION = "InvalidInputSubmission"
CONFIGURATION_GONE = "ConfigurationGone"
REQUEST_REFUSALS = (APPROVER_NOT_PERMITTED, INVALID_INPUT_SUBMISSION, CONFIGURATION_GONE)

# Segment kinds (RUNTIME 5) plus the two caller processes that precede a segment.
WORKER = "worker"
SYNCHRONOUS = "synchronous"
RESUME = "resume"
ENQUEUE = "enqueue"
REQUEST = "request"  # a named principal's command or read refused at once (an Outcome's kind)

# Message transports (RUNTIME 1.1, 6.3). The runtime's default is sync; the model's
# configurations default to async (model/config.py) so that every existing bound is unchanged.
# ``none``: no message bus is wired (6.4): enqueue and the reaper's tick fail up front.
ASYNC = "async"
SYNC = "sync"
NO_TRANSPORT = "none"
TRANSPORTS = (ASYNC, SYNC, NO_TRANSPORT)


# The principals (RUNTIME 16.18.1). A configuration that declares none has one: the user
# ``owner``, who starts every run and makes every request of RunSpec.decisions and cancels.
DEFAULT_OWNER = "owner"

# The status view (RUNTIME 16.18.3): the whole row less the suspended state (the pending tool
# calls and their arguments) and the stored request (spec/properties.py
# status_view_strips_suspended_state); ``STATUS_VIEW`` (after Row) lists what it returns.
SUSPENDED_FIELDS = ("suspended_state", "queued_request")  # what the view strips


# -- static configuration -----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Principal:
    """Who makes a request (RUNTIME 16.18.1): a backend user (its ``grants``), an admin, a
    service account (its ``scopes``) or an anonymous caller; each ``model.vocab.Scope``
    members. ``refused``: the tools the tool policy does not permit it (17: a boolean per
    principal and tool, ``permitted = { tool = false }``; every other tool is permitted). A
    principal's name is its uid: a backend user's is positive, the others' is 0."""

    name: str
    kind: str = PrincipalKind.USER
    scopes: frozenset[str] = frozenset()
    grants: frozenset[str] = frozenset()
    refused: frozenset[str] = frozenset()

    @property
    def human(self) -> bool:
        """A backend user (an admin too): a positive uid (16.18.1)."""
        return self.kind in (PrincipalKind.USER, PrincipalKind.ADMIN)

    def permits(self, tool: str) -> bool:
        """The tool policy permits it ``tool`` (17). A service account or an anonymous caller
        has no backend user: no tool is permitted it (16.18.5)."""
        return self.human and tool not in self.refused


DEFAULT_PRINCIPALS = (Principal(DEFAULT_OWNER),)


@dataclass(frozen=True, slots=True)
class Ask:
    """A request a principal may make of a run once (``RunSpec.requests``): approve, deny,
    input or cancel (the caller's commands made by ``by``), or a read of the status view or
    of the events (every event with ``seq > after`` (TOML ``after_sequence``), ordered by
    sequence: there is no limit, RUNTIME 16.18.3)."""

    by: str
    request: str  # a model.vocab.Request member
    after: int = -1


@dataclass(frozen=True, slots=True)
class Tool:
    """A catalogue entry (RUNTIME 14). ``effect`` is what the tool declares in code."""

    name: str
    effect: str = READ_ONLY
    remote: bool = False
    approval: bool = False  # explicit approval marker (14.4 rule 2)
    server_flag: int | None = None  # remote operator approval declaration (14.4 rule 3)
    needs_input: bool = False  # the input scan (7.1 step 7) raises InputRequired
    removable: bool = False  # an operator may remove it between attempts

    @property
    def declared_effect(self) -> str:
        return NON_IDEMPOTENT_WRITE if self.remote else self.effect


@dataclass(frozen=True, slots=True)
class Answer:
    """What the provider answers in one round of a run's plan.

    kind: ``tools`` (calls), ``final`` (value = completed | budget_exhausted |
    context_truncated), ``fail`` (value = a failure class), ``guardrail`` (value =
    violation | approval_required).
    """

    kind: str
    calls: tuple[str, ...] = ()
    value: str = ""


FINAL_ANSWER = Answer("final", (), "completed")


@dataclass(frozen=True, slots=True)
class RunSpec:
    id: str
    entry: str  # "queued" (enqueue) or "interactive" (start_run)
    plan: tuple[Answer, ...] = (FINAL_ANSWER,)
    cap: int | None = None
    observer: bool = False
    cancels: int = 0  # how many cancel commands a caller may issue
    decisions: tuple[str, ...] = ()  # approver decisions, in order: approve | deny | input
    initial: Row | None = None  # a row that exists before anything happens
    # the principal who started the run (RUNTIME 16.18.1): its uid is the row's be_user, 0 when
    # it is a service account or an anonymous caller (no human owns the run)
    owner: str = DEFAULT_OWNER
    requests: tuple[Ask, ...] = ()  # requests by named principals, each made at most once
    # the run's configuration's four-eyes setting (16.18.4; read by the policy switch four_eyes)
    require_second_approver: bool = False

    def answer(self, turn: int) -> Answer:
        return self.plan[turn] if turn < len(self.plan) else FINAL_ANSWER

    @property
    def resume_decisions(self) -> tuple[str, ...]:
        """The decision of each resume this run can start, resume ``k`` at ``k - 1``: the
        owner's decisions in order (resumes 1 to len(decisions)), then the named principals'
        approve, deny and input requests in the order of ``requests`` (each one resume of a
        fixed number)."""
        return self.decisions + tuple(Decision(a.request) for a in self.requests
                                      if Decision.known(a.request))


@dataclass(frozen=True, slots=True)
class Config:
    policy: Policy
    constants: Constants
    tools: tuple[Tool, ...]
    runs: tuple[RunSpec, ...]
    workers: tuple[str, ...] = ("w1",)
    faults: frozenset[str] = frozenset()  # the fault kinds this configuration may inject
    fault_ops: frozenset[str] | None = None  # statements a store_error may hit (None: all)
    provider_faults: tuple[str, ...] = ()  # failure classes a provider call may fail with
    reaper_limit: int = 50
    reapers: int = 1  # reapers racing on one store (10: the scheduler on several hosts)
    horizon: int | None = None  # the clock never advances past it (None: unbounded)
    transport: str = ASYNC  # async: dispatch adds a message; sync: the handler runs nested (6.3);
    # none: no bus, enqueue and the reaper's tick fail up front (6.4)
    # resume refusals after the claim that a caller's request may meet (12.2 gate 2, 12.3 input
    # validation): each named one doubles the caller's decision (a permitted / valid variant
    # and one refused at the check); empty: every approver is permitted, every input valid
    refusals: frozenset[str] = frozenset()
    # the run ids the operator's cancel command is given, in order, each once (RUNTIME 11):
    # a run's id, "" (no id: refused) or an id no run has (unknown)
    operator_cancels: tuple[str, ...] = ()
    # the principals requests name (RUNTIME 16.18.1); the default: the owner alone
    principals: tuple[Principal, ...] = DEFAULT_PRINCIPALS

    def principal(self, name: str) -> Principal | None:
        for p in self.principals:
            if p.name == name:
                return p
        return None

    def tool(self, name: str) -> Tool | None:
        for t in self.tools:
            if t.name == name:
                return t
        return None

    def run_index(self, run_id: str) -> int:
        for i, r in enumerate(self.runs):
            if r.id == run_id:
                return i
        raise KeyError(run_id)


# -- dynamic state ------------------------------------------------------------------------
@record
class Row(Record):
    """The run row (RUNTIME 3.1). ``epoch`` and ``attempts`` are ghost fields: they
    count successful claims and executions of the stored request for the spec; no guard
    reads them."""

    status: str = QUEUED
    claimed_by: str = ""
    lease_expires: int = 0
    pending_effect: str = ""
    requeue_count: int = 0
    queued_request: bool = False
    suspended_state: int = -1  # the suspended turn (plan index) or -1 = empty
    termination_reason: str = ""
    error_class: str = ""
    # proposal P6 (``overdue_queued_redispatched``; 0 otherwise): a QUEUED row's message must
    # have been taken by this instant, or the reaper's sweep dispatches it again
    dispatch_deadline: int = 0
    epoch: int = ghost(default=0)  # claims so far (T1, T3, T7)
    attempts: int = ghost(default=0)  # executions of the stored request (T3)


# The status view (RUNTIME 16.18.3): the row's fields a status read returns, in order: the
# whole row (its ghost counters are the model's, not the row's) less SUSPENDED_FIELDS
# (tests/test_access.py holds it to Row's declaration).
STATUS_VIEW: tuple[str, ...] = (
    "status", "claimed_by", "lease_expires", "pending_effect", "requeue_count",
    "termination_reason", "error_class", "dispatch_deadline",
)


@record
class Event(Record):
    """A stored audit event (RUNTIME 3.2). ``pid`` is the writing segment (ghost)."""

    run: int
    seq: int
    kind: str  # request | llm | tool | approval | input | intent (proposal)
    turn: int
    call: int
    tool: str
    seg: str = ghost()  # the segment that wrote it
    # an approval event's decidedBy, an input event's submittedBy (RUNTIME 16.18.5): the
    # principal who decided or submitted ("" on every other event)
    by: str = ""


# The event kinds that record a write's application (spec's aud): its ``tool`` step, and the
# write-ahead ``intent`` the proposal write_intent_recorded stores before its invoke.
INTENT_KIND = "intent"
APPLICATION_KINDS = frozenset({"tool", INTENT_KIND})


@record
class Application(Record):
    """An effect that landed in the outside world: the LEDGER (neither store sees it)."""

    run: int
    turn: int
    call: int
    tool: str
    effect: str
    seg: str  # the segment whose invoke landed it
    fenced: bool = ghost(default=False)  # the segment's T5 stamp for this call matched before it ran
    attempt: int = ghost(default=0)  # Row.attempts when it landed
    # a call of a resumed turn (12.2 step 11.1): the decision that released it (approve, deny,
    # input) and the principal who made it (16.18.5); "" for every other call
    decision: str = ghost(default="")
    by: str = ghost(default="")


@record
class Message(Record):
    run: int
    not_before: int


class RunStep(NamedTuple):
    """The step a segment is at the boundary of (RUNTIME 7.2): what its audit event records."""

    kind: str  # request | llm | tool
    turn: int  # plan index of the round
    call: int  # the tool call's index in the turn (-1: not a tool step)
    tool: str  # the tool's name ("" : not a tool step)


class SettlePlan(NamedTuple):
    """A pending T8 (RUNTIME 4.3): the wrapper a segment settles its run with, and the
    outcome it returns whether the statement matches or not."""

    wrapper: str  # settle_completed | settle_failed | settle_policy_stopped | settle_dead_lettered
    status: str  # the terminal status written
    reason: str  # termination_reason
    error_class: str
    guarded: bool  # owner-guarded on the segment's ``guard``
    on_ok: str  # the outcome when the statement matched
    on_miss: str  # the outcome when it did not
    expect: str = ""  # the row status it must find instead (proposal fallback_settles_requeued_row)


class StaleRow(NamedTuple):
    """A row of T10's snapshot (RUNTIME 10): what the reaper decides its branch on."""

    run: int
    pending_effect: str
    queued_request: bool
    requeue_count: int


class OverdueRow(NamedTuple):
    """A row of the overdue sweep's snapshot (T14, proposal P6): the reaper dispatches it
    again if T15 still finds it overdue."""

    run: int


class Outcome(NamedTuple):
    """What a process returned (RUNTIME 2's outcomes, or a resume's refusal)."""

    seg: str  # the segment label (the process name for an enqueue caller)
    run: int
    kind: str  # the process kind
    outcome: str


class CommandResult(NamedTuple):
    """What one of the runtime's console commands ended with (``World.commands``): the actor
    that ran it, the transition it fired, the run id it was given ("" for none) and its
    outcome; model/commands.py gives the outcome's exit code and message."""

    actor: str
    command: str
    uuid: str
    outcome: str


@record
class Proc(Record):
    """A process with a program counter: an enqueue caller, or a segment (queued worker,
    synchronous, resume) from pick-up or entry to its outcome."""

    name: str  # the actor: a worker name, caller:<run>, resume:<run>#<k>, enqueue:<run>
    kind: str
    run: int
    pc: str
    seg: str = ""  # segment label written into events, ledger and outcomes
    identity: str = ""
    owner: str = ""  # lease_owner ('' = none)
    guard: str = ""  # owner_guard ('' = none)
    handle: int = -1  # next event sequence; -1 = no handle
    observer: bool = False
    turn: int = 0  # plan index of the current round
    rounds: int = 0  # loop counter of this segment
    cap: int = 5
    call: int = 0
    step: Any = ()  # the RunStep at the boundary (() before the first)
    then: str = ""  # continuation after the boundary: a Label (PROVIDER, AFTER_LLM, AFTER_TOOL)
    error: str = ""  # the error the ladder handles
    eclass: str = ""  # classify(error)
    settle: Any = ()  # the pending T8: a SettlePlan (() when none)
    epoch: int = ghost(default=0)  # the row epoch this segment claimed
    cancelled: bool = False  # the probe saw cancelled: persist, then CancellationRequested
    synthesis: bool = False  # the round after the cap (7.1 step 9)
    cancel_seen: bool = ghost(default=False)  # the row was cancelled when this boundary began
    stamped: bool = ghost(default=False)  # this call's T5 stamp matched (the write starts fenced)
    # the row's requeue_count returned by this segment's claim (T3, T7); read only by the
    # proposal probe_persists_own_claim_only (docs/PROPOSALS.md P3)
    claim_requeues: int = 0
    # Sync transport (6.3): the frames of this same process suspended in a ``dispatch`` whose
    # handler this frame runs, the nearest first (each stored with ``outer = ()``). Empty
    # otherwise. Only the innermost frame is in ``World.procs``: the others are blocked.
    outer: tuple[Proc, ...] = ()
    # what only one kind of process carries: a WorkerPart (queued worker), a ResumePart
    # (resume), or None (synchronous segment, enqueue caller)
    part: WorkerPart | ResumePart | None = None

    # the parts' fields, read as the process's own ("" / False / 0 / -1 where it has none)
    @property
    def worker(self) -> str:
        part = self.part
        return part.worker if part.__class__ is WorkerPart else ""

    @property
    def hook(self) -> bool:
        part = self.part
        return part.hook if part.__class__ is WorkerPart else False

    @property
    def count(self) -> int:
        part = self.part
        return part.count if part.__class__ is WorkerPart else 0

    @property
    def decision(self) -> str:
        part = self.part
        return part.decision if part.__class__ is ResumePart else ""

    @property
    def seen_turn(self) -> int:
        part = self.part
        return part.seen_turn if part.__class__ is ResumePart else -1

    @property
    def refusal(self) -> str:
        part = self.part
        return part.refusal if part.__class__ is ResumePart else ""

    @property
    def by(self) -> str:
        """The named principal whose request a resume carries ("": the run's owner)."""
        part = self.part
        return part.by if part.__class__ is ResumePart else ""


@record
class WorkerPart(Record):
    """What only a queued worker's segment carries (RUNTIME 6.2, section 9)."""

    worker: str  # the worker process the segment runs in
    hook: bool = False  # the recovery hook (section 9) is installed
    count: int = 0  # recovery: the requeue_count read in branch 5


@record
class ResumePart(Record):
    """What only a resume segment carries (RUNTIME 12.2, 12.3)."""

    decision: str = ""  # approve | deny | input; cleared once the resumed turn's calls are done
    seen_turn: int = -1  # the turn the decision refers to (turn digest)
    # the check this request fails, if reached: "" (none), ConfigurationGone (12.2 step 2,
    # before the claim), InvalidInputSubmission (12.3, before anything is probed or claimed)
    # or ApproverNotPermitted (gate 2 after the claim, an approval of a write turn only)
    refusal: str = ""
    # the principal who made the request, when it is a named one (RunSpec.requests); "": the
    # run's owner, making one of RunSpec.decisions
    by: str = ""


@record
class Made(Record):
    """A request of a named principal that took effect (ghost, read by the access
    properties): a store change on its behalf (a cancel that matched, a resume's claim), or
    a read it was answered (``view``: the status view's (field, value) pairs; ``seqs``: the
    events page's sequences)."""

    by: str
    run: int
    request: str  # a model.vocab.Request member
    view: tuple[tuple[str, Any], ...] = ()
    seqs: tuple[int, ...] = ()


@record
class Asked(Record):
    """A request of ``RunSpec.requests`` that has been made (``k``: its index)."""

    run: int
    k: int


@record
class ReaperState(Record):
    """One reaper's tick in progress (RUNTIME 10), from its SELECT to its last row; an idle
    reaper has none (``World.reapers`` holds the ticks in progress, by reaper name)."""

    name: str  # the reaper's process name (``names.reaper_name``)
    pc: str  # "dispatch" | "max_sequence" | "settle" | "row" | "nested" (sync: the handler runs)
    #          | "redispatch" | "resend" (the overdue sweep, P6)
    now: int  # read once per tick
    rows: tuple[StaleRow | OverdueRow, ...]  # T10's snapshot (then T14's, under P6)
    idx: int = 0


@record
class World(Record):
    clock: int
    rows: tuple[Row | None, ...]
    events: tuple[Event, ...] = ()
    ledger: tuple[Application, ...] = ()
    messages: tuple[Message, ...] = ()  # a sorted multiset
    procs: tuple[Proc, ...] = ()  # a set, sorted by name (frames.spawn)
    reapers: tuple[ReaperState, ...] = ()  # the ticks in progress, sorted by reaper name
    outcomes: tuple[Outcome, ...] = ()
    # the runtime's console commands that have ended, in order: each operator cancel; a
    # reaper's tick refused for want of a transport, once per reaper (its later ticks are
    # refused the same way and change nothing)
    commands: tuple[CommandResult, ...] = ()
    started: tuple[bool, ...] = ()  # per run: the caller has started or enqueued it
    cancels: tuple[int, ...] = ()  # per run: cancel commands issued
    decisions: tuple[int, ...] = ()  # per run: approver decisions consumed
    resumes: tuple[int, ...] = ()  # per run: resume processes started (identity suffix)
    removed: frozenset[str] = frozenset()  # tools removed from the catalogue
    faults: int = 0  # remaining fault budget
    marks: frozenset[str] = ghost(default=frozenset())  # history facts the spec reads
    asked: frozenset[Asked] = frozenset()  # the named principals' requests made so far
    made: tuple[Made, ...] = ghost(default=())  # what they changed or read (the access properties)
    config: Config = field(compare=False, hash=False, repr=False, kw_only=True)  # always given

    # small helpers -------------------------------------------------------------------
    def run_id(self, i: int) -> str:
        return self.config.runs[i].id

    def proc(self, name: str) -> Proc | None:
        for p in self.procs:
            if p.name == name:
                return p
        return None

    def reaper(self, name: str) -> ReaperState | None:
        """The tick reaper ``name`` is in, if any (None: it is idle)."""
        for r in self.reapers:
            if r.name == name:
                return r
        return None

    def set_reaper(self, name: str, r: ReaperState | None) -> World:
        """The same world with reaper ``name``'s tick replaced by ``r`` (None: it ends)."""
        rest = tuple(q for q in self.reapers if q.name != name)
        if r is None:
            return replace(self, reapers=rest)
        return replace(self, reapers=tuple(sorted(rest + (r,), key=lambda q: q.name)))

    def set_row(self, i: int, row: Row | None) -> World:
        rows = list(self.rows)
        rows[i] = row
        return replace(self, rows=tuple(rows))

    def set_proc(self, p: Proc) -> World:
        """The same world with the process named ``p.name`` replaced by ``p`` (none: as is)."""
        procs = self.procs
        name = p.name
        for k, q in enumerate(procs):
            if q.name == name:
                return replace(self, procs=procs[:k] + (p,) + procs[k + 1:])
        return self

    def mark(self, fact: str) -> World:
        return self if fact in self.marks else replace(self, marks=self.marks | {fact})



# -- instants (the model's declared time facts) ---------------------------------------------
class Instant(NamedTuple):
    """A record field that holds an instant (seconds on the model's clock). ``none``: the
    value that means "no instant" (kept as it is by every time abstraction), or None when
    every value is an instant."""

    record: type
    field: str
    none: int | None = None
    # the World field that holds the records (a tuple of them, or one; "" for World itself):
    # named, since a compiled build's dataclass fields carry no annotation to read it from
    at: str = ""


# Every field that holds an instant, the one list (spec/symmetry.py's time shift reads it):
# adding an instant field to a record is adding its line here.
INSTANTS: tuple[Instant, ...] = (
    Instant(World, "clock"),
    Instant(Row, "lease_expires", none=0, at="rows"),
    Instant(Row, "dispatch_deadline", none=0, at="rows"),  # proposal P6 (0: none)
    Instant(Message, "not_before", at="messages"),
    Instant(ReaperState, "now", at="reapers"),
)


class _InstantPlan(NamedTuple):
    """Where the instants of a world are: World fields that are instants, and World fields
    that hold (tuples of) records with instant fields, each with ``{type: ((field, none),
    ...)}``. Derived once from :data:`INSTANTS` and World's field annotations."""

    direct: tuple[str, ...]
    nested: tuple[tuple[str, dict[type, tuple[tuple[str, int | None], ...]]], ...]


def _instant_plan() -> _InstantPlan:
    world_fields = {f.name for f in dataclasses.fields(World)}
    direct: list[str] = []
    nested: dict[str, dict[type, list[tuple[str, int | None]]]] = {}
    for ins in INSTANTS:
        if ins.field not in {f.name for f in dataclasses.fields(ins.record)}:
            raise TypeError(f"INSTANTS: {ins.record.__name__} has no field {ins.field!r}")
        if ins.record is World:
            direct.append(ins.field)
        elif ins.at not in world_fields:
            raise TypeError(f"INSTANTS: {ins.record.__name__}.{ins.field}: at={ins.at!r} is not "
                            "a World field (name the field that holds these records)")
        else:
            nested.setdefault(ins.at, {}).setdefault(ins.record, []).append((ins.field, ins.none))
    return _InstantPlan(tuple(direct), tuple(
        (at, {t: tuple(specs) for t, specs in held.items()}) for at, held in nested.items()))


INSTANT_PLAN = _instant_plan()


def instants(w: World, plan: _InstantPlan = INSTANT_PLAN) -> list[int]:
    """Every instant of ``w`` (its "no instant" values left out), in no particular order, as
    :data:`INSTANTS` declares them (``plan``: :func:`_instant_plan` of another declaration)."""
    out = [getattr(w, f) for f in plan.direct]
    for name, held in plan.nested:
        v = getattr(w, name)
        for x in (v if v.__class__ is tuple else (v,)):
            spec = held.get(x.__class__)
            if spec:
                for f, none in spec:
                    t = getattr(x, f)
                    if none is None or t != none:
                        out.append(t)
    return out


def map_instants(w: World, move: Any, plan: _InstantPlan = INSTANT_PLAN) -> World:
    """The same world with every instant ``t`` replaced by ``move(t)`` ("no instant" values
    kept; a record none of whose instants moves is kept as the same object)."""
    ch: dict[str, Any] = {f: move(getattr(w, f)) for f in plan.direct}
    for name, held in plan.nested:
        v = getattr(w, name)
        one = v.__class__ is not tuple
        new = []
        changed = False
        for x in ((v,) if one else v):
            spec = held.get(x.__class__)
            if spec:
                c = {}
                for f, none in spec:
                    t = getattr(x, f)
                    if none is None or t != none:
                        u = move(t)
                        if u != t:
                            c[f] = u
                if c:
                    x = replace(x, **c)
                    changed = True
            new.append(x)
        if changed:
            ch[name] = new[0] if one else tuple(new)
    return replace(w, **ch)


# -- logs (the model's declared append-only tuples) ------------------------------------------
class Log(NamedTuple):
    """A World field that is a log: a tuple its transitions only ever append to, each entry
    belonging to one ``key`` (the entry's field of that name: its run, or the actor of a
    console command). What the model and the properties read of a log is each key's own
    entries, in their order, or a count or a membership: a run's largest sequence and its
    events page (model/store.py, model/caller.py ``read_events``), a call's later
    re-application, a segment's outcome, a run's stream (spec/properties.py). The order of
    two keys' entries is the interleaving of independent appends, which nothing reads: two
    worlds that differ only in it have the same futures and the same verdicts (the log order
    reduction, spec/symmetry.py ``group_logs``)."""

    field: str
    key: str


# Every log, the one list (spec/symmetry.py reads it): a new append-only World tuple whose
# entries of different keys no guard and no property orders is one more line here.
LOGS: tuple[Log, ...] = (
    Log("events", "run"),
    Log("ledger", "run"),
    Log("outcomes", "run"),
    Log("made", "run"),
    Log("commands", "actor"),
)


def _check_logs() -> None:
    world_fields = {f.name for f in dataclasses.fields(World)}
    for log in LOGS:
        if log.field not in world_fields:
            raise TypeError(f"LOGS: {log.field!r} is not a World field")


_check_logs()


# worlds cross process boundaries (check --jobs, mutants --jobs, scopes): see records.picklable
picklable(Policy, Constants, Tool, Answer, RunSpec, Config, Row, Event, Application, Message, Proc,
          WorkerPart, ResumePart, ReaperState, World, Principal, Ask, Made, Asked)
