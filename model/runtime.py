"""The runtime's transitions: ``enabled(world)`` and ``apply(world, t)``, both pure.

One semantics for the whole project (docs/DESIGN.md): the checker enumerates these, the
simulator samples them, scenarios replay them. Granularity follows docs/RUNTIME.md: every
store statement is its own transition, and so is every point a segment can stop or time
can pass in between (a step boundary is on_step -> find_run (probe) -> renew_lease or
mark_pending_effect (clear) -> record_step; the before-tool hook is resolve -> refuse or
mark_pending_effect (stamp); then invoke; the provider call). Local computation (the
ladder's arm choice, the approval scan, classify, the reaper's branch choice on its
snapshot) is folded into the transition that precedes it.

The message transport (RUNTIME 6.3) is ``Config.transport``. Async: ``dispatch`` adds a
message that a free worker's ``run_queued`` takes later. Sync: ``dispatch`` starts the
handler inside the dispatching process instead (``_dispatch_queued``): the process's next
transition is ``run_queued`` (pick-up step 1) and its frame waits in ``Proc.outer`` (or the
reaper at pc ``nested``) until the nested pick-up or segment ends (``_end``), then goes on
from the step after its dispatch. A ``crash`` kills every frame of the process (``_die``).

Each step of a process is declared once, by ``@action`` on its effect below (the step table,
``model/steps.py``): ``enabled`` and ``fire`` look the step up by the process's label.

A slow operation is time passing (``advance_time``) while a segment waits at ``invoke`` or
``provider_call``; a tool's effect lands when ``invoke`` fires, so a ``crash`` before it
models death before the effect landed and a ``crash`` after it death after it landed.
"""

from __future__ import annotations

from . import names, rules, store
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
    APPROVER_NOT_PERMITTED,
    AWAITING,
    CANCELLED,
    CONFIGURATION_GONE,
    ENQUEUE,
    FAILED,
    INTENT_KIND,
    INVALID_INPUT_SUBMISSION,
    NO_TRANSPORT,
    QUEUED,
    REQUEST,
    RESUME,
    RUNNING,
    SELF_APPROVAL_DENIED,
    STATUS_VIEW,
    SUBMITTER_NOT_PERMITTED,
    SUSPENDED_FIELDS,
    SYNC,
    SYNCHRONOUS,
    WAITING_FOR_APPROVAL,
    WAITING_FOR_INPUT,
    WORKER,
    Application,
    Asked,
    CommandResult,
    Config,
    Event,
    Made,
    Message,
    Outcome,
    OverdueRow,
    Proc,
    ReaperState,
    ResumePart,
    RunStep,
    SettlePlan,
    StaleRow,
    WorkerPart,
    World,
    replace,
)
from .steps import (
    ACTIONS,
    ACTORS,
    AUDIT,
    DISPATCH,
    END,
    FAULTS,
    NONE,
    OTHER_TRANSITIONS,
    PICK_UP,
    PROVIDER,
    REAPER,
    REAPER_ACTIONS,
    REAPER_DECISION,
    REAPER_REDISPATCH,
    REAPER_RESEND,
    REAPER_TICK,
    SETTLE,
    STAMP,
    STORE,
    STORE_FAULTS,
    TOOL,
    Action,
    Fair,
    action,
    declare_actor,
)
from .transition import Transition
from .vocab import (
    ActorKind,
    Decision,
    FaultKind,
    Label,
    Mark,
    OutcomeName,
    PrincipalKind,
    Request,
    TransitionName,
)

T = Transition.make




class GuardFailed(ValueError):
    """``apply`` was given a transition that is not enabled."""

    def __init__(self, t: Transition, guard: str, enabled: list[Transition]):
        self.transition = t
        self.guard = guard
        self.enabled = enabled
        super().__init__(f"{t}: guard does not hold: {guard}")


# The labels a segment may go on to, named for the ``then`` of the steps below: a step
# boundary with a handle (7.2), the ladder's arms (8), and the loop's next step (after a
# boundary, or at once where there is nothing to persist: the provider call, the before-tool
# hook and the tool, a boundary, or an arm of the ladder).
BOUNDARY = (Label.ON_STEP, Label.PROBE, Label.RENEW, Label.PERSIST)
LADDER = (Label.SUSPEND, Label.SETTLE, Label.RECOVERY_READ, END)
LOOP = BOUNDARY + (Label.PROVIDER, Label.STAMP, Label.INVOKE) + LADDER


# =========================================================================================
# enabled
# =========================================================================================
def _can(w: World, kind: str, op: str = "") -> bool:
    spec = w.config
    if w.faults <= 0 or kind not in spec.faults:
        return False
    if kind == FaultKind.STORE_ERROR and spec.fault_ops is not None and op not in spec.fault_ops:
        return False
    return True


def _with_faults(w: World, t: Transition, kinds: tuple[str, ...]) -> list[Transition]:
    """``t`` and its fault branches (a provider error branches once per failure class)."""
    out = [t]
    for k in kinds:
        if _can(w, k, t.name):
            if k == FaultKind.PROVIDER_ERROR:
                out.extend(_faulted(t, c) for c in w.config.provider_faults)
            else:
                out.append(_faulted(t, k))
    return out


def _faulted(t: Transition, fault: str) -> Transition:
    return _new_t(Transition, (t.name, t.actor, tuple(sorted(t.args + (("fault", fault),)))))


_new_t = tuple.__new__  # Transition(...) without the NamedTuple's Python-level __new__


def step_faults(w: World, a: Action, state: Proc | ReaperState | None) -> tuple[str, ...]:
    """The fault kinds step ``a`` may take now: its ``faults``, narrowed by its ``faults_now``
    for this state (``state``: the process at the step, the reaper's state, or None for the
    tick of an idle reaper). The moves below and the simulator's draws read it."""
    return a.faults if a.faults_now is None else a.faults_now(w, state)


def next_step(w: World, name: str) -> tuple[Action, Proc | ReaperState | None] | None:
    """The step the process ``name`` (a segment, an enqueue caller, or the reaper) takes
    next, with its state; None when it has none (no such process, or a reaper blocked in a
    sync dispatch, whose nested segment is a process of its own)."""
    p = w.proc(name)
    if p is not None:
        return ACTIONS[p.pc], p
    if name not in names.reaper_names(w.config):
        return None
    r = w.reaper(name)
    if r is None:
        return REAPER_ACTIONS[REAPER_TICK], None
    a = REAPER_ACTIONS.get(r.pc)
    return (a, r) if a is not None else None


def _proc_moves(w: World, p: Proc) -> list[Transition]:
    """The process is at label ``p.pc``: the step declared there (``model.steps``), with
    the fault branches it may take now."""
    a = ACTIONS[p.pc]
    t = a.move(w, p) if a.move is not None else T(a.fires[0], p.name, run=w.run_id(p.run))
    return _with_faults(w, t, a.faults if a.faults_now is None else a.faults_now(w, p))


def _input_side(p: Proc) -> bool:
    """Which suspend/claim statement a suspend or resume uses."""
    return p.error == INPUT_REQUIRED or p.decision == Decision.INPUT


def _call_name(w: World, p: Proc) -> str:
    return w.config.runs[p.run].answer(p.turn).calls[p.call]


def _workers_free(w: World) -> list[str]:
    busy = {p.worker for p in w.procs if p.kind == WORKER}
    return [x for x in w.config.workers if x not in busy]


def enabled(
    w: World, actor: str | None = None, *, one_order: bool = False, run: str | None = None
) -> list[Transition]:
    """Every transition enabled in ``w``, faults included, in a deterministic order.

    With ``actor``, only that actor's transitions (the simulator asks per process). With
    ``one_order``, a reaper tick over stale rows of equal lease (T10 returns ties in any
    order) is listed in its first order only, ties by slot, the one a sampled store returns:
    the list is then the full list with the other orders left out (the simulator's choice;
    the orders of k tied rows are k!). With ``run`` (a run id), only the transitions whose
    ``run`` argument is that run."""
    if run is not None:
        slots = [i for i, r in enumerate(w.config.runs) if r.id == run]
        if not slots:
            return []
        return [t for t in _moves(w, actor, one_order, slots) if t.arg("run") == run]
    return _moves(w, actor, one_order, None)


def _moves(w: World, actor: str | None, one_order: bool, slots: list[int] | None) -> list[Transition]:
    """Every actor's moves in declaration order (``model.steps.ACTORS``), or those of the
    first actor that answers to ``actor``."""
    if actor is None:
        out: list[Transition] = []
        for a in ACTORS.values():
            out.extend(a.moves(w, None, one_order, slots))
        return out
    for a in ACTORS.values():
        if a.answers(w, actor):
            return a.moves(w, actor, one_order, slots)
    return []


def _other_faults(name: str) -> tuple[str, ...]:
    """The fault kinds a transition no process step fires may take (``OTHER_TRANSITIONS``,
    where they are declared: the simulator draws them from there too)."""
    return OTHER_TRANSITIONS[name].faults


def _caller_moves(w: World, only: list[int] | None = None) -> list[Transition]:
    spec = w.config
    pol = spec.policy
    out: list[Transition] = []
    for i in range(len(spec.runs)) if only is None else only:
        r = spec.runs[i]
        rid = r.id
        row = w.rows[i]
        if not w.started[i]:
            if r.entry == "interactive":
                out.extend(_with_faults(w, T(store.START_RUN, ActorKind.CALLER, run=rid), _other_faults(store.START_RUN)))
            elif pol.queue and spec.transport == NO_TRANSPORT:
                out.append(T(store.ENQUEUE_RUN, ActorKind.CALLER, run=rid))  # 6.4: no T2 to fail
            elif pol.queue:
                out.extend(_with_faults(w, T(store.ENQUEUE_RUN, ActorKind.CALLER, run=rid), _other_faults(store.ENQUEUE_RUN)))
            continue
        if w.cancels[i] < r.cancels:
            out.extend(_with_faults(w, T(store.CANCEL, ActorKind.CALLER, run=rid), _other_faults(store.CANCEL)))
        if w.decisions[i] < len(r.decisions) and row is not None and row.status in AWAITING:
            d = r.decisions[w.decisions[i]]
            want = WAITING_FOR_INPUT if d == Decision.INPUT else WAITING_FOR_APPROVAL
            if row.status == want:
                by_decision: dict[str, str] = {Decision.APPROVE: TransitionName.APPROVE, Decision.DENY: TransitionName.DENY, Decision.INPUT: TransitionName.SUBMIT_INPUT}
                name = by_decision[d]
                out.extend(_with_faults(w, T(name, ActorKind.CALLER, run=rid), _other_faults(name)))
                # the requests that fail a check of their own: the configuration is gone (12.2
                # step 2), the input fails its schema (12.3), the approver may not run the
                # turn's writes (12.2 gate 2; a denial passes it)
                if CONFIGURATION_GONE in spec.refusals:
                    out.append(T(name, ActorKind.CALLER, run=rid, configured=False))
                if d == Decision.INPUT:
                    if INVALID_INPUT_SUBMISSION in spec.refusals:
                        out.append(T(name, ActorKind.CALLER, run=rid, valid=False))
                elif APPROVER_NOT_PERMITTED in spec.refusals and pol.approver_gate:
                    # (no gate 2 before ADR-133: the refused variant would be the same request)
                    out.append(T(name, ActorKind.CALLER, run=rid, permitted=False))
        if r.requests:
            out.extend(_request_moves(w, i))
    return out


# A named principal's request (RunSpec.requests) -> the transition that makes it; a decision
# waits for the row's waiting status, as the owner's do
_REQUEST_MOVES: dict[str, str] = {
    Request.APPROVE: TransitionName.APPROVE, Request.DENY: TransitionName.DENY,
    Request.INPUT: TransitionName.SUBMIT_INPUT, Request.CANCEL: store.CANCEL,
    Request.STATUS: TransitionName.READ_STATUS, Request.EVENTS: TransitionName.READ_EVENTS,
}
# the transitions only a named principal's request fires (the owner's decisions and cancels
# fire the others too): a configuration without RunSpec.requests never enables these
REQUEST_ONLY: frozenset[str] = frozenset(_REQUEST_MOVES.values()) - {
    TransitionName.APPROVE, TransitionName.DENY, TransitionName.SUBMIT_INPUT, store.CANCEL}


def unreachable_in(config: Config) -> frozenset[str]:
    """The transitions ``config`` never enables for want of what fires them: a named
    principal's request (:data:`REQUEST_ONLY`, without RunSpec.requests), the operator's
    cancel command (without ``operator_cancels``), and the refused tick (with a transport)."""
    out: set[str] = set()
    if not any(r.requests for r in config.runs):
        out |= REQUEST_ONLY
    if not config.operator_cancels:
        out.add(TransitionName.CANCEL_COMMAND)
    if config.transport != NO_TRANSPORT:
        out.add(TransitionName.TICK_REFUSED)
    return frozenset(out)


_REQUEST_DECISION: dict[str, str] = {
    Request.APPROVE: Decision.APPROVE, Request.DENY: Decision.DENY, Request.INPUT: Decision.INPUT,
}


def _request_moves(w: World, i: int) -> list[Transition]:
    """Run ``i``'s requests by named principals not made yet (RUNTIME 16.18), each once: a
    decision while the row waits for it, any other once the run is started."""
    r = w.config.runs[i]
    row = w.rows[i]
    out: list[Transition] = []
    for k, a in enumerate(r.requests):
        if Asked(i, k) in w.asked:
            continue
        decision = _REQUEST_DECISION.get(a.request)
        if decision is not None:
            want = WAITING_FOR_INPUT if decision == Decision.INPUT else WAITING_FOR_APPROVAL
            if row is None or row.status != want:
                continue
        name = _REQUEST_MOVES[a.request]
        if a.request == Request.EVENTS:
            out.append(T(name, ActorKind.CALLER, run=r.id, by=a.by, after_sequence=a.after))
        else:
            out.append(T(name, ActorKind.CALLER, run=r.id, by=a.by))
    return out


def _pickup_moves(w: World, only: str | None = None, runs: list[int] | None = None) -> list[Transition]:
    """Workers pick up deliverable messages (``only``: that worker's pick-ups; ``runs``:
    messages of those run slots only)."""
    out: list[Transition] = []
    if not w.messages:
        return out
    free = _workers_free(w)
    if only is not None:
        free = [x for x in free if x == only]
    if free:
        seen: set[Message] = set()
        for m in w.messages:
            if m.not_before <= w.clock and (runs is None or m.run in runs) and m not in seen:
                seen.add(m)
                for wk in free:
                    out.extend(
                        _with_faults(
                            w,
                            T(PICK_UP, wk, run=w.run_id(m.run), not_before=m.not_before),
                            _other_faults(PICK_UP),
                        )
                    )
    return out


def _bus_moves(w: World) -> list[Transition]:
    if not w.messages or not _can(w, FaultKind.DUPLICATE_MESSAGE):
        return []
    return [
        T(TransitionName.DUPLICATE_MESSAGE, ActorKind.BUS, run=w.run_id(m.run), not_before=m.not_before)
        for m in sorted(set(w.messages), key=lambda m: (m.run, m.not_before))
    ]


def _operator_moves(w: World) -> list[Transition]:
    out = [
        T(TransitionName.REMOVE_TOOL, ActorKind.OPERATOR, tool=tool.name)
        for tool in w.config.tools
        if tool.removable and tool.name not in w.removed
    ]
    return out + _cancel_command_moves(w)


def _cancel_command_moves(w: World) -> list[Transition]:
    """The operator's next cancel command (RUNTIME 11), each of ``Config.operator_cancels``
    once and in order: ``run=<id>`` for a run's id (with the fault branches of its T13),
    ``uuid=<id>`` for "" or an id no run has."""
    ids = w.config.operator_cancels
    if not ids:
        return []
    k = _commands_issued(w)
    if k >= len(ids):
        return []
    uuid = ids[k]
    name = TransitionName.CANCEL_COMMAND
    if uuid and any(r.id == uuid for r in w.config.runs):
        return _with_faults(w, T(name, ActorKind.OPERATOR, run=uuid), _other_faults(name))
    return [T(name, ActorKind.OPERATOR, uuid=uuid)]


def _commands_issued(w: World) -> int:
    """How many cancel commands the operator has run so far."""
    return sum(1 for c in w.commands if c.command == TransitionName.CANCEL_COMMAND)


def _clock_moves(w: World) -> list[Transition]:
    out = []
    for to in _time_targets(w):
        t = clock_move(w, to)
        if t.fault is None or _can(w, t.fault):
            out.append(t)
    return out


def lapsed_by(w: World, to: int) -> str | None:
    """Which fault moving the clock to ``to`` is: ``None`` when no live segment's lease lapses,
    ``slow_operation`` when every segment whose lease lapses is inside a provider or tool
    call (RUNTIME 1.3 "a provider or tool call outlives the lease"), ``pause`` when one
    is anywhere else (the process stalls). Both are faults of 1.3: each spends the budget."""
    fault = None
    for p in w.procs:
        if not p.owner:
            continue
        row = w.rows[p.run]
        if row is not None and row.claimed_by == p.owner and store.stale(w, row, to):
            if p.pc not in SLOW_OPERATIONS:
                return FaultKind.PAUSE
            fault = FaultKind.SLOW_OPERATION
    return fault


def clock_move(w: World, to: int) -> Transition:
    """The transition that moves time to ``to``, with the fault branch ``lapsed_by`` names."""
    return T(TransitionName.ADVANCE_TIME, ActorKind.CLOCK, to=to, fault=lapsed_by(w, to))


def _reapers_moves(w: World, name: str | None, one_order: bool) -> list[Transition]:
    """Each declared reaper's moves (``names.reaper_names``: the configuration's count), or
    those of the reaper ``name``."""
    if not _queue_on(w):
        return []
    out: list[Transition] = []
    for n in names.reaper_names(w.config) if name is None else (name,):
        out.extend(_reaper_moves(w, n, one_order))
    return out


def _reaper_moves(w: World, name: str, one_order: bool = False) -> list[Transition]:
    r = w.reaper(name)
    if r is None:
        if w.config.transport == NO_TRANSPORT:  # 6.4: the tick fails before its SELECT
            return [T(TransitionName.TICK_REFUSED, name)]
        return _tick_moves(w, name, one_order)
    if r.pc == Label.NESTED:
        return []  # sync: blocked in its dispatch; the nested segment's moves are a proc's
    else:
        a = REAPER_ACTIONS[r.pc]
        run = r.rows[r.idx][0]
        t = a.move(w, r) if a.move is not None else T(a.fires[0], name, run=w.run_id(run))
        out = _with_faults(w, t, step_faults(w, a, r))
    if _can(w, FaultKind.CRASH):
        out.append(T(TransitionName.CRASH, name))
    return out


def _tick_moves(w: World, name: str, one_order: bool) -> list[Transition]:
    """T10, and the orders it may return rows of equal lease in (no defined order)."""
    tick = REAPER_ACTIONS[REAPER_TICK]
    kinds = step_faults(w, tick, None)
    orders, tied = _stale_orders(w, one_order)
    if not tied:
        return _with_faults(w, T(store.FIND_STALE_RUNNING, name), kinds)
    out = [T(store.FIND_STALE_RUNNING, name, order=",".join(o)) for o in orders]
    for k in kinds:
        if _can(w, k, store.FIND_STALE_RUNNING):
            out.append(T(store.FIND_STALE_RUNNING, name, fault=k))
    # an idle reaper's crash changes nothing but the fault budget; it is listed only here
    # (kept as the model has always had it: the recorded behaviour digests include it)
    if _can(w, FaultKind.CRASH):
        out.append(T(TransitionName.CRASH, name))
    return out


def _stale_orders(w: World, first_only: bool = False) -> tuple[list[tuple[str, ...]], bool]:
    """The orders T10 may return the stale rows in: ascending ``lease_expires``, ties in any
    order, cut at the reaper's limit; and whether there is more than one. Only the tie groups
    that reach into the first ``limit`` rows matter, and of a group the cut splits only which
    of its rows come first: its r-permutations (the same orders in the same sequence as all
    permutations with duplicates dropped). ``first_only``: the first order (ties by slot)."""
    import itertools

    stale = sorted(
        (r.lease_expires, i) for i, r in enumerate(w.rows)
        if r is not None and store.stale(w, r, w.clock)  # stale() is False for no row
    )
    if not stale:
        return [()], False
    limit = w.config.reaper_limit
    groups = []
    pos = 0
    for _, g in itertools.groupby(stale, key=lambda t: t[0]):
        if pos >= limit:
            break
        members = list(g)
        groups.append((members, min(len(members), limit - pos)))
        pos += len(members)
    tied = any(len(g) > 1 for g, _ in groups)
    if not tied or first_only:
        return [tuple(w.run_id(i) for _, i in stale[:limit])], tied
    perms = itertools.product(*(itertools.permutations(g, r) for g, r in groups))
    return [tuple(w.run_id(i) for g in combo for _, i in g) for combo in perms], True


def _reaper_branch(w: World, pending: str, has_request: bool, count: int) -> tuple[str, str | None]:
    """Section 10 branches 1-4, decided on the SELECT snapshot."""
    pol = w.config.policy
    if pol.write_fence and not rules.may_retry_after_fence(pending, pol):
        return store.DEAD_LETTER_STALE, "not_retryable"
    if pol.reaper_no_request_branch and not has_request:
        return store.DEAD_LETTER_STALE, "not_retryable"
    if count >= w.config.constants.MAX_REQUEUES:
        return store.DEAD_LETTER_STALE, "retries_exhausted"
    return store.REQUEUE_STALE, None


def waiting_instants(w: World) -> list[int]:
    """The later instants something waits on, ascending: the first instant a RUNNING row's
    lease has lapsed (``store.lapses_at``), a delayed message's not_before, and one second on
    where a renewal in the same second would fail (before commit 2029c781). Between those
    instants only the order of events matters. Empty when nothing waits on time."""
    now = w.clock
    deadlines: set[int] = set()
    for row in w.rows:
        if row is not None and row.status == RUNNING:
            at = store.lapses_at(w, row)
            if at > now:
                deadlines.add(at)
    for m in w.messages:
        if m.not_before > now:
            deadlines.add(m.not_before)
    if w.config.policy.overdue_queued_redispatched:
        deadlines.update(_overdue_instants(w))
    if not deadlines:
        return []
    lease_now = now + w.config.constants.LEASE_SECONDS
    if not w.config.policy.noop_renew_recheck and any(
        r is not None and r.status == RUNNING and r.lease_expires == lease_now for r in w.rows
    ):
        deadlines.add(now + 1)  # before 2029c781 a renewal in the same second fails
    return sorted(deadlines)


def _overdue_instants(w: World) -> list[int]:
    """Proposal P6: the first instant a QUEUED row with no message on the bus is overdue
    (``store.overdue``). The model assumes the bus delivers a message within the grace of its
    deadline, so a row whose message is pending waits on its delivery, not on its deadline (a
    late second delivery is the fault ``duplicate_message``); time moved on for another
    reason still lets the sweep find such a row overdue."""
    now = w.clock
    pending = {m.run for m in w.messages}
    return [
        row.dispatch_deadline + 1 for i, row in enumerate(w.rows)
        if row is not None and row.status == QUEUED and row.dispatch_deadline > 0
        and i not in pending and row.dispatch_deadline + 1 > now
    ]


def _time_targets(w: World) -> list[int]:
    """Time moves to the instants something waits on (``waiting_instants``) up to the
    horizon: the checker needs no other instant; the simulator and scenarios may move time to
    any later instant (``apply`` accepts it). Time does not move when nothing waits on it."""
    h = w.config.horizon
    targets = waiting_instants(w)
    acting = [a.instants for a in ACTORS.values() if a.instants is not None]
    if acting:  # an actor that acts in time: the clock stops at its instants too
        now = w.clock
        targets = sorted(set(targets) | {t for at in acting for t in at(w) if t > now})
    return targets if h is None else [t for t in targets if t <= h]


def at_bound(w: World) -> bool:
    """The model's bound, not the system, stops time here: something waits on an instant
    later than the horizon, which the clock may not reach."""
    h = w.config.horizon
    return h is not None and any(t > h for t in waiting_instants(w))


# =========================================================================================
# apply
# =========================================================================================
def apply(w: World, t: Transition) -> World:
    """The next world. Raises ``GuardFailed`` (naming the guard) if ``t`` is not enabled.

    ``advance_time`` is enabled for any ``to`` later than now (up to the horizon);
    ``enabled`` lists only the instants where something can change, which is all the
    checker needs and what a scenario usually names."""
    if t.name == TransitionName.ADVANCE_TIME and t.actor == ActorKind.CLOCK:
        to = t.arg("to")
        h = w.config.horizon
        if (
            isinstance(to, int)
            and to > w.clock
            and (h is None or to <= h)
            and t == clock_move(w, to)
            and (t.fault is None or _can(w, t.fault))
        ):
            return fire(w, t)
    en = enabled(w, t.actor)
    if t not in en:
        raise GuardFailed(t, _why_not(w, t, en), enabled(w))
    return fire(w, t)


def successors(w: World) -> list[tuple[Transition, World]]:
    return [(t, fire(w, t)) for t in enabled(w)]


def _why_not(w: World, t: Transition, en: list[Transition]) -> str:
    same_actor = [e for e in en if e.actor == t.actor]
    if t.fault and t.fault not in FAULTS and t.fault not in w.config.provider_faults:
        return f"unknown fault {t.fault!r}"
    if t.fault and (w.faults <= 0 or (t.fault not in w.config.faults and t.fault not in w.config.provider_faults)):
        return f"fault budget: {w.faults} left, faults allowed {sorted(w.config.faults)}"
    p = w.proc(t.actor)
    if p is not None:
        nxt = sorted({e.name for e in same_actor})
        return f"{t.actor} is at {p.pc!r}; its next step is {' or '.join(nxt)}"
    if t.name == TransitionName.ADVANCE_TIME:
        return f"time can move to {[e.arg('to') for e in same_actor]} only"
    if t.name == TransitionName.RUN_QUEUED:
        return "a free worker and a deliverable message (not_before <= now) for that run"
    if same_actor:
        return f"{t.actor} can only do {', '.join(sorted({e.name for e in same_actor}))} now"
    return f"no actor {t.actor!r} can act now"


def _spend(w: World, t: Transition) -> World:
    if t.fault is None and t.name not in (TransitionName.CRASH, TransitionName.DUPLICATE_MESSAGE):
        return w
    return replace(w, faults=w.faults - 1)


def fire(w: World, t: Transition) -> World:
    """Apply an enabled transition (no re-check: use ``apply`` for untrusted input): the
    effect of the first actor that answers to ``t.actor`` (``model.steps.ACTORS``)."""
    w = _spend(w, t)
    actor = t.actor
    for a in ACTORS.values():
        if a.answers(w, actor):
            return a.fire(w, t)
    raise AssertionError(t)  # pragma: no cover - apply checks the actor first


def _add_message(w: World, m: Message) -> World:
    return replace(w, messages=tuple(sorted(w.messages + (m,), key=lambda m: (m.run, m.not_before))))


def _remove_message(w: World, m: Message) -> World:
    msgs = list(w.messages)
    msgs.remove(m)
    return replace(w, messages=tuple(msgs))


def _set_tuple(tup: tuple, i: int, v) -> tuple:
    lst = list(tup)
    lst[i] = v
    return tuple(lst)


def _end(w: World, p: Proc, outcome: str | None) -> World:
    """``p`` returns ``outcome`` (None: NONE, or an enqueue caller). A handler run nested in a
    sync dispatch returns to its dispatcher, which goes on from the step after the dispatch."""
    w = _drop(w, p, outcome)
    if p.outer or names.is_reaper(p.name):
        return _after_nested(w, p)
    return w


def _drop(w: World, p: Proc, outcome: str | None) -> World:
    procs = tuple(q for q in w.procs if q.name != p.name)
    w = replace(w, procs=procs)
    if outcome is not None and p.kind != ENQUEUE:
        w = replace(w, outcomes=w.outcomes + (Outcome(p.seg or p.name, p.run, p.kind, outcome),))
    return w


def _spawn(w: World, p: Proc) -> World:
    """Add a new process. ``procs`` is a set kept sorted by name, so two histories that
    start the same processes in a different order reach the same world."""
    procs = w.procs
    k = 0
    while k < len(procs) and procs[k].name < p.name:
        k += 1
    return replace(w, procs=procs[:k] + (p,) + procs[k:])


def _after_nested(w: World, p: Proc) -> World:
    """6.3 sync: the handler nested in a dispatch has finished. Recovery's dispatch (9 step
    7) then returns REQUEUED, enqueue (6.1 step 5) returns, the reaper (10 branch 5) goes on
    with its next row. Each is local work after the handler, folded into this transition."""
    if p.outer:
        up = replace(p.outer[0], outer=p.outer[1:])
        return _end(w, up, OutcomeName.REQUEUED if up.kind == WORKER else None)
    r = w.reaper(p.name)
    if r is not None and r.pc == Label.NESTED:
        return _reaper_next(w, r)
    return w


def _die(w: World, p: Proc) -> World:
    """1.3 process death: no arm runs, rows stay. On the sync transport the process is one
    process: the dispatchers it is nested in die with it (each frame ends DIED), and so
    does a reaper whose dispatch runs it."""
    w = _drop(w, p, "DIED")
    for f in p.outer:
        w = _drop(w, f, "DIED")
    if names.is_reaper(p.name):  # sync: the reaper whose dispatch runs the segment
        w = w.set_reaper(p.name, None)
    return w


def _put(w: World, p: Proc) -> World:
    return w.set_proc(p)


# -- callers ------------------------------------------------------------------------------
def _caller(w: World, t: Transition) -> World:
    spec = w.config
    pol = spec.policy
    i = spec.run_index(t.arg("run"))
    r = spec.runs[i]
    rid = r.id
    name = t.name
    if name == store.START_RUN:
        w = replace(w, started=_set_tuple(w.started, i, True))
        identity = names.caller_identity(rid)
        leased = pol.lease_all_segments
        p = Proc(
            name=names.caller_process(rid), kind=SYNCHRONOUS, run=i, pc="", seg=names.sync_segment(rid),
            identity=identity, observer=r.observer, cap=_cap(w, i),
        )
        if t.fault:  # T1 failed: the segment runs with no handle (fail-soft)
            p = replace(p, handle=-1)
        else:
            w, _ = store.start_run(w, i, identity, leased)
            owner = identity if leased else ""
            p = replace(
                p, handle=0, owner=owner, guard=identity if pol.owner_guarded_settle_all else "",
                epoch=1,
            )
        w = _spawn(w, p)
        return _enter_round(w, p)
    if name == store.ENQUEUE_RUN:
        w = replace(w, started=_set_tuple(w.started, i, True))
        if spec.transport == NO_TRANSPORT:
            return _enqueue_refused(w, i)
        if t.fault:
            return w  # EnqueueFailed, no message
        w, _ = store.enqueue_run(w, i)
        p = Proc(name=names.enqueue_process(rid), kind=ENQUEUE, run=i, pc=Label.DISPATCH,
                 seg=names.enqueue_process(rid))
        return _spawn(w, p)
    by = t.arg("by")
    if by is not None:
        return _request(w, t, i, by)
    if name == store.CANCEL:
        w = replace(w, cancels=_set_tuple(w.cancels, i, w.cancels[i] + 1))
        if t.fault:
            return w
        w, ok = store.cancel(w, i)
        return w
    if name in (TransitionName.APPROVE, TransitionName.DENY, TransitionName.SUBMIT_INPUT):
        return _resume(w, t, i)
    raise AssertionError(t)  # pragma: no cover


def _enqueue_refused(w: World, i: int) -> World:
    """6.4: without a transport, enqueue fails up front (EnqueueFailed) before anything is
    stored: no T2, no row, no message. The mutant stores the row first and then fails,
    leaving a queued row no message will ever wake (it kills no_orphan_queued_run)."""
    if w.config.policy.mutant_enqueue_stores_before_transport_check:
        w, _ = store.enqueue_run(w, i)
    caller = names.enqueue_process(w.run_id(i))
    return replace(w, outcomes=w.outcomes + (Outcome(caller, i, ENQUEUE, OutcomeName.ENQUEUE_FAILED),))


# -- the operator's cancel command (11) ----------------------------------------------------
def _operator(w: World, t: Transition) -> World:
    if t.name == TransitionName.CANCEL_COMMAND:
        return _cancel_command(w, t)
    return replace(w, removed=w.removed | {t.arg("tool")})


def _cancel_command(w: World, t: Transition) -> World:
    """``nrllm:agent:cancel <uuid>`` (11): an empty id is refused before the runtime is
    called (UUID_REQUIRED); otherwise the runtime's cancel runs T13 and the command reports
    whether the row transitioned (RUN_CANCELLED), or not: an unknown run (no row matches),
    a finished one (T13's guard) and a store error alike (NOT_CANCELLED, 11 step 3)."""
    rid = t.arg("run")
    uuid = rid if rid is not None else t.arg("uuid")
    if not uuid:
        outcome = OutcomeName.UUID_REQUIRED
    elif rid is None or t.fault:
        outcome = OutcomeName.NOT_CANCELLED
    else:
        w, ok = store.cancel(w, w.config.run_index(rid))
        outcome = OutcomeName.RUN_CANCELLED if ok else OutcomeName.NOT_CANCELLED
    done = CommandResult(ActorKind.OPERATOR, TransitionName.CANCEL_COMMAND, uuid, outcome)
    return replace(w, commands=w.commands + (done,))
def _resume(w: World, t: Transition, i: int, by: str = "", k: int = 0) -> World:
    """A decision starts a resume process (12.2, 12.3): one of RunSpec.decisions, made by the
    run's owner (``by`` ""; the run's next resume number), or a named principal's request,
    whose access the resume checks at step 2 (``_h_resume_read``), as resume ``k``
    (``RunSpec.resume_decisions``)."""
    r = w.config.runs[i]
    if not by:
        k = w.resumes[i] + 1
        w = replace(w, resumes=_set_tuple(w.resumes, i, k),
                    decisions=_set_tuple(w.decisions, i, w.decisions[i] + 1))
    row = w.rows[i]
    by_name: dict[str, str] = {TransitionName.APPROVE: Decision.APPROVE, TransitionName.DENY: Decision.DENY, TransitionName.SUBMIT_INPUT: Decision.INPUT}
    decision = by_name[t.name]
    label = names.resume_process(r.id, k)
    refusal = ""
    if t.arg("configured") is False:
        refusal = CONFIGURATION_GONE
    elif t.arg("permitted") is False and decision == Decision.APPROVE:
        refusal = APPROVER_NOT_PERMITTED  # gate 2 checks an approval only (12.2 step 8)
    elif t.arg("valid") is False:
        refusal = INVALID_INPUT_SUBMISSION
    p = Proc(
        name=label, kind=RESUME, run=i, pc=Label.RESUME_READ, seg=label, identity=label,
        observer=r.observer,
        part=ResumePart(decision, row.suspended_state if row is not None else -1, refusal, by),
    )
    return _spawn(w, p)


def _request(w: World, t: Transition, i: int, by: str) -> World:
    """A named principal's request (RunSpec.requests), made once. A decision starts a resume
    (which checks access at 12.2 step 2); a cancel checks access after the run is found (11
    step 1), then runs T13, and returns false when refused as when T13 matches nothing; a read
    checks access after the run is found and returns nothing when refused, as for an unknown
    run (16.18.3). Nothing is stored either way."""
    spec = w.config
    r = spec.runs[i]
    k = next(k for k, a in enumerate(r.requests)
             if a.by == by and _REQUEST_MOVES[a.request] == t.name and Asked(i, k) not in w.asked
             and (a.request != Request.EVENTS or a.after == t.arg("after_sequence")))
    req = r.requests[k].request
    w = replace(w, asked=w.asked | {Asked(i, k)})
    if req in _REQUEST_DECISION:  # resume number: after the owner's, in request order
        n = len(r.decisions) + sum(1 for a in r.requests[:k + 1] if a.request in _REQUEST_DECISION)
        return _resume(w, t, i, by, n)
    pol = spec.policy
    skip = pol.mutant_cancel_skips_access if req == Request.CANCEL else pol.mutant_read_skips_access
    allowed = skip or rules.may(spec, by, req, i)
    if req == Request.CANCEL:
        ok = False
        if allowed:
            w, ok = store.cancel(w, i)
        return _made(w, Made(by, i, req)) if ok else _answered(w, i, by, OutcomeName.RETURNED_FALSE)
    row = w.rows[i]
    if row is None or not allowed:  # find_run found nothing, or the check refused: nothing
        return _answered(w, i, by, OutcomeName.RETURNED_NOTHING)
    if req == Request.STATUS:
        return _made(w, Made(by, i, req, view=_status_view(w, row)))
    after = t.arg("after_sequence")
    seqs = sorted(e.seq for e in w.events if e.run == i and e.seq > after)
    return _made(w, Made(by, i, req, seqs=tuple(seqs)))


def _status_view(w: World, row) -> tuple[tuple[str, object], ...]:
    """The status view of a row (RUNTIME 16.18.3): the fields of ``STATUS_VIEW``, the whole row
    less the suspended state and the stored request (the mutant
    mutant_status_view_keeps_state returns them too)."""
    keep = STATUS_VIEW + (SUSPENDED_FIELDS if w.config.policy.mutant_status_view_keeps_state else ())
    return tuple((f, getattr(row, f)) for f in keep)


def _answered(w: World, i: int, by: str, outcome: str) -> World:
    """A named principal's cancel or read that changed or read nothing: what it returned (a
    cancel false, a read nothing), the outcome naming the principal as its segment."""
    return replace(w, outcomes=w.outcomes + (Outcome(by, i, REQUEST, outcome),))


def _made(w: World, m: Made) -> World:
    """Record what a named principal's request changed or read (the access properties)."""
    return replace(w, made=w.made + (m,))


def _cap(w: World, i: int) -> int:
    c = w.config.runs[i].cap
    k = w.config.constants
    return k.DEFAULT_ROUND_CAP if c is None else min(c, k.MAX_ITERATIONS)


# -- worker pick-up (6.2) -----------------------------------------------------------------
def _run_queued(w: World, t: Transition) -> World:
    """Async: a free worker takes a delivered message and runs pick-up step 1."""
    i = w.config.run_index(t.arg("run"))
    w = _remove_message(w, Message(i, t.arg("not_before")))
    if t.fault or not _pick_up_finds(w.rows[i]):
        return w  # NONE: find_run failed, or a duplicate or stale message
    return _spawn(w, _pick_up(w, i, t.actor, Label.CLAIM_QUEUED))


@action(PICK_UP, fires=PICK_UP, faults=STORE_FAULTS, cost=STORE, then=(Label.CLAIM_QUEUED, END),
        place="6.2 step 1; 6.3 sync: nested in the dispatching process")
def _h_run_queued(w: World, p: Proc, t: Transition) -> World:
    """Sync: pick-up step 1 of the handler nested in the dispatching process."""
    if t.fault or not _pick_up_finds(w.rows[p.run]):
        return _end(w, p, None)  # NONE: back to the dispatcher
    return _put(w, replace(p, pc=Label.CLAIM_QUEUED))


def _pick_up_finds(row) -> bool:
    """6.2 step 1: the row exists, is queued and holds a stored request."""
    return row is not None and row.status == QUEUED and row.queued_request


def _pick_up(w: World, i: int, process: str, pc: str, outer: tuple[Proc, ...] = ()) -> Proc:
    """A queued-worker pick-up in ``process``, with that process's ``worker:`` identity (5:
    on the sync transport a dispatcher's nested pick-up uses it too)."""
    identity = names.worker_identity(process)
    pol = w.config.policy
    return Proc(
        name=process, kind=WORKER, run=i, pc=pc, seg=process, identity=identity,
        owner=identity if pol.heartbeat else "",
        guard=identity if pol.owner_guarded_settle_workers else "",
        cap=_cap(w, i), outer=outer, part=WorkerPart(process, hook=pol.retry),
    )


def _dispatch_queued(w: World, i: int, process: str, not_before: int,
                     outer: tuple[Proc, ...] = ()) -> tuple[World, bool]:
    """Dispatch ``queued(uuid)`` (6.1 step 4, 9 step 7, 10 branch 5). Async: a message with
    ``not_before``; the dispatcher goes on. Sync (6.3): the handler runs inline in the
    dispatching ``process``, ignoring the delay: its pick-up starts at step 1 and ``outer``
    (the dispatcher's frames) wait for it. Returns whether the dispatcher now waits."""
    if w.config.transport != SYNC:
        return _add_message(w, Message(i, not_before)), False
    p = _pick_up(w, i, process, PICK_UP, outer)
    if w.proc(process) is not None:
        return w.set_proc(p), True
    return _spawn(w, p), True


# -- reaper (section 10) ------------------------------------------------------------------
def _reaper(w: World, t: Transition) -> World:
    if t.name == TransitionName.CRASH:
        return w.set_reaper(t.actor, None)
    if t.name == TransitionName.TICK_REFUSED:
        return _tick_refused(w, t.actor)
    r = w.reaper(t.actor)
    if r is None:
        return REAPER_ACTIONS[REAPER_TICK].effect(w, None, t)
    return REAPER_ACTIONS[r.pc].effect(w, r, t)


def tick_selects(config: Config) -> tuple[TransitionName, ...]:
    """The SELECTs one reaper tick (its transition ``find_stale_running``) issues, in order:
    T10, then, under proposal P6, T14 in the same read transaction."""
    if config.policy.overdue_queued_redispatched:
        return (store.FIND_STALE_RUNNING, store.FIND_OVERDUE_QUEUED)
    return (store.FIND_STALE_RUNNING,)


@action(REAPER_TICK, actor=REAPER,
        fires=store.FIND_STALE_RUNNING,
        faults=(FaultKind.STORE_ERROR, FaultKind.DECODE_ERROR),
        cost=STORE, then=(REAPER_DECISION, REAPER_REDISPATCH, END), args=("order",), place="T10; 10")
def _r_tick(w: World, r: None, t: Transition) -> World:
    if t.fault:
        return w  # [] : the tick does nothing
    config = w.config
    rows: tuple[StaleRow | OverdueRow, ...] = store.find_stale_running(w, w.clock, config.reaper_limit)
    order = t.arg("order")
    if order is not None:  # ties in lease_expires: the order this transition names
        rows = tuple(
            StaleRow(i, row.pending_effect, row.queued_request, row.requeue_count)
            for i, row in ((i, w.rows[i]) for i in map(config.run_index, order.split(",")))
            if row is not None  # always: the order names stale rows (T10)
        )
    if store.FIND_OVERDUE_QUEUED in tick_selects(config):
        # proposal P6: T14 in the tick's read transaction (one snapshot with T10); its rows
        # follow the stale ones, each redispatched in turn (T15, then a dispatch)
        rows += store.find_overdue_queued(w, w.clock, config.reaper_limit)
    if not rows:
        return w
    return w.set_reaper(t.actor, ReaperState(name=t.actor, pc=_row_label(rows[0]), now=w.clock,
                                             rows=rows))


def _row_label(row: StaleRow | OverdueRow) -> Label:
    """The reaper's label for a row of its snapshot: a stale row's decision (T11 / T12), or
    an overdue row's redispatch (T15, P6)."""
    return REAPER_REDISPATCH if isinstance(row, OverdueRow) else REAPER_DECISION


def _tick_refused(w: World, reaper: str) -> World:
    """6.4: without a transport the reaper's command fails before its SELECT (no T10, no
    row touched; NO_MESSAGE_BUS). Recorded once per reaper: each later tick is refused the
    same way and changes nothing."""
    done = CommandResult(reaper, TransitionName.TICK_REFUSED, "", OutcomeName.NO_MESSAGE_BUS)
    return w if done in w.commands else replace(w, commands=w.commands + (done,))


def _row_move(w: World, r: ReaperState) -> Transition:
    row = r.rows[r.idx]
    assert isinstance(row, StaleRow)  # the decision's label is a stale row's (_row_label)
    run, pending, has_request, count = row
    name, reason = _reaper_branch(w, pending, has_request, count)
    return T(name, r.name, run=w.run_id(run), reason=reason)


@action(REAPER_DECISION, actor=REAPER,
        fires=(store.REQUEUE_STALE, store.DEAD_LETTER_STALE), faults=STORE_FAULTS,
        cost=STORE, then=(Label.DISPATCH, REAPER_DECISION, REAPER_REDISPATCH, END),
        args=("reason",), move=_row_move,
        place="T11, T12; 10 branches 1-4")
def _r_row(w: World, r: ReaperState, t: Transition) -> World:
    if t.fault:
        return _reaper_next(w, r)
    run = r.rows[r.idx][0]
    if t.name == store.REQUEUE_STALE:
        w, ok = store.requeue_stale(w, run, r.now)
        if ok:
            return w.set_reaper(r.name, replace(r, pc=Label.DISPATCH))
        return _reaper_next(w, r)
    w, ok = store.dead_letter_stale(w, run, r.now, t.arg("reason"))
    return _reaper_next(w, r)


@action(Label.DISPATCH, actor=REAPER,
        fires=TransitionName.DISPATCH,
        faults=(FaultKind.DISPATCH_FAILS,), cost=DISPATCH,
        then=(Label.MAX_SEQUENCE, Label.NESTED, REAPER_DECISION, REAPER_REDISPATCH, END),
        place="10 branch 5")
def _r_dispatch(w: World, r: ReaperState, t: Transition) -> World:
    if t.fault:
        if w.config.policy.reaper_dispatch_failclosed:
            return w.set_reaper(r.name, replace(r, pc=Label.MAX_SEQUENCE))
        return _reaper_next(w, r)
    w, nested = _dispatch_queued(w, r.rows[r.idx][0], r.name, w.clock)
    if nested:  # sync: the reclaimed run executes inside the reaper's process
        return w.set_reaper(r.name, replace(r, pc=Label.NESTED))
    return _reaper_next(w, r)


@action(Label.MAX_SEQUENCE, actor=REAPER,
        fires=TransitionName.MAX_SEQUENCE, faults=STORE_FAULTS,
        cost=STORE, then=(Label.SETTLE, REAPER_DECISION, REAPER_REDISPATCH, END),
        place="4.2; 10 branch 5 (fail-closed dispatch)")
def _r_max_sequence(w: World, r: ReaperState, t: Transition) -> World:
    if t.fault:
        return _reaper_next(w, r)
    return w.set_reaper(r.name, replace(r, pc=Label.SETTLE))


def _r_settle_move(w: World, r: ReaperState) -> Transition:
    return T(TransitionName.SETTLE_FAILED, r.name, run=w.run_id(r.rows[r.idx][0]), reason="provider_failed")


@action(Label.SETTLE, actor=REAPER,
        fires=TransitionName.SETTLE_FAILED, faults=STORE_FAULTS,
        cost=STORE, then=(REAPER_DECISION, REAPER_REDISPATCH, END), args=("reason",),
        move=_r_settle_move,
        place="T8 via 4.3; 10 branch 5 (fail-closed dispatch)")
def _r_settle(w: World, r: ReaperState, t: Transition) -> World:
    if not t.fault:
        w, _ = store.finish_run(w, r.rows[r.idx][0], FAILED, "provider_failed", "DispatchFailed")
    return _reaper_next(w, r)


@action(REAPER_REDISPATCH, actor=REAPER,
        fires=store.REDISPATCH_QUEUED, faults=STORE_FAULTS,
        cost=STORE, then=(REAPER_RESEND, REAPER_DECISION, REAPER_REDISPATCH, END),
        place="proposal P6 (the overdue sweep's guarded update)")
def _r_redispatch(w: World, r: ReaperState, t: Transition) -> World:
    """Proposal P6: T15 moves an overdue row's deadline on; matched, the row is dispatched
    again. A store error, or a row claimed or settled since T14, skips it."""
    ok = False
    if not t.fault:
        w, ok = store.redispatch_queued(w, r.rows[r.idx][0], r.now)
    if ok:
        return w.set_reaper(r.name, replace(r, pc=REAPER_RESEND))
    return _reaper_next(w, r)


@action(REAPER_RESEND, actor=REAPER,
        fires=TransitionName.DISPATCH,
        faults=(FaultKind.DISPATCH_FAILS,), cost=DISPATCH,
        then=(Label.NESTED, REAPER_DECISION, REAPER_REDISPATCH, END),
        place="proposal P6 (the overdue sweep's dispatch)")
def _r_resend(w: World, r: ReaperState, t: Transition) -> World:
    """Proposal P6: dispatch ``queued(uuid)`` without a delay. A failed dispatch settles
    nothing: the row stays QUEUED with its new deadline and the next sweep after it tries
    again."""
    if t.fault:
        return _reaper_next(w, r)
    w, nested = _dispatch_queued(w, r.rows[r.idx][0], r.name, w.clock)
    if nested:  # sync: the run executes inside the reaper's process
        return w.set_reaper(r.name, replace(r, pc=Label.NESTED))
    return _reaper_next(w, r)


def _reaper_next(w: World, r: ReaperState) -> World:
    """Reaper ``r`` goes on with its next row, or its tick ends after the last."""
    if r.idx + 1 >= len(r.rows):
        return w.set_reaper(r.name, None)
    return w.set_reaper(r.name, replace(r, pc=_row_label(r.rows[r.idx + 1]), idx=r.idx + 1))


# -- segments -----------------------------------------------------------------------------
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


def _step(w: World, p: Proc, t: Transition) -> World:
    return ACTIONS[p.pc].effect(w, p, t)


def _enter_round(w: World, p: Proc) -> World:
    """7.1: a round starts with its ``request`` boundary; after ``cap`` rounds, synthesis."""
    p = replace(p, synthesis=p.rounds >= p.cap, call=0)
    return _boundary(w, p, RunStep("request", p.turn, -1, ""), Label.PROVIDER)


def _boundary(w: World, p: Proc, step: RunStep, then: str) -> World:
    """7.2: installed when the segment has a handle or an observer."""
    row = w.rows[p.run]
    late = row is not None and row.status == CANCELLED  # ghost: the cancel precedes this boundary
    p = replace(p, step=step, then=then, cancelled=False, cancel_seen=late)
    if p.observer:
        return _put(w, replace(p, pc=Label.ON_STEP))
    if p.handle < 0:
        return _continue(w, p)
    return _after_observer(w, p)


def _after_observer(w: World, p: Proc) -> World:
    if p.handle < 0:
        return _continue(w, p)  # no handle: nothing is persisted
    if w.config.policy.cancel_probe:
        return _put(w, replace(p, pc=Label.PROBE))
    return _after_probe(w, p)


def _after_probe(w: World, p: Proc) -> World:
    if not p.owner:
        return _put(w, replace(p, pc=Label.PERSIST))
    if w.config.policy.renew_before_persist:
        return _put(w, replace(p, pc=Label.RENEW))
    return _put(w, replace(p, pc=Label.PERSIST))


def _on_step_move(w: World, p: Proc) -> Transition:
    return T(TransitionName.ON_STEP, p.name, run=w.run_id(p.run), step=p.step.kind)


@action(Label.ON_STEP, boundary=True, fires=TransitionName.ON_STEP, faults=(FaultKind.OBSERVER_ERROR,), cost=NONE, then=LOOP,
        args=("step",), move=_on_step_move, place="7.2 step 1")
def _h_on_step(w: World, p: Proc, t: Transition) -> World:
    if t.fault:
        return _ladder(w, p, OBSERVER_ERROR, rules.classify(OBSERVER_ERROR, "", w.config.policy))
    return _after_observer(w, p)


@action(Label.PROBE, boundary=True, fires=TransitionName.FIND_RUN, faults=STORE_FAULTS, cost=STORE, then=(Label.RENEW, Label.PERSIST, END),
        place="7.2 step 2 (the cancel probe)")
def _h_probe(w: World, p: Proc, t: Transition) -> World:
    row = w.rows[p.run]
    if not t.fault and row is not None and row.status == CANCELLED:
        if w.config.policy.probe_persists_own_claim_only and row.requeue_count != p.claim_requeues:
            # proposal P3: the run was requeued since this segment's claim, so the cancel
            # ended a later claim's work: CancellationRequested without persisting
            return _ladder(w, p, CANCELLATION_REQUESTED, "")
        # persist this step, then CancellationRequested: no renewal and no fence clear
        return _put(w, replace(p, pc=Label.PERSIST, cancelled=True))
    return _after_probe(w, p)


def _renew_move(w: World, p: Proc) -> Transition:
    """7.2 step 4: the renewal, or on a write's boundary with the fence the T5 clear."""
    if _clears_fence(w, p):
        return T(store.MARK_PENDING_EFFECT, p.name, run=w.run_id(p.run), effect="")
    return T(store.RENEW_LEASE, p.name, run=w.run_id(p.run))


@action(Label.RENEW, boundary=True, fires=(store.RENEW_LEASE, store.MARK_PENDING_EFFECT), faults=STORE_FAULTS, cost=STORE,
        then=LOOP, args=("effect",), move=_renew_move, place="T4, T5 clear; 7.2 step 4")
def _h_renew(w: World, p: Proc, t: Transition) -> World:
    if t.fault:
        ok = False
    elif t.name == store.MARK_PENDING_EFFECT:
        w, ok = store.mark_pending_effect(w, p.run, p.owner, "", p)
    else:
        w, ok = store.renew_lease(w, p.run, p.owner, p)
    if not ok:
        return _ladder(w, p, LEASE_LOST, "")  # the step is not persisted
    if w.config.policy.renew_before_persist:
        return _put(w, replace(p, pc=Label.PERSIST))
    return _continue(w, p)


def _persist_move(w: World, p: Proc) -> Transition:
    step = p.step
    return T(TransitionName.RECORD_STEP, p.name, run=w.run_id(p.run), step=step.kind, tool=step.tool or None)


@action(Label.PERSIST, boundary=True, fires=TransitionName.RECORD_STEP, faults=(FaultKind.AUDIT_INSERT_FAILS, FaultKind.AMBIGUOUS_COMMIT), cost=AUDIT,
        then=LOOP + (Label.CLEAR,), args=("step", "tool"), move=_persist_move, place="4.2, 7.2 step 5")
def _h_persist(w: World, p: Proc, t: Transition) -> World:
    stored = t.fault != FaultKind.AUDIT_INSERT_FAILS
    reported = t.fault is None
    if stored:
        step = p.step
        event = Event(p.run, p.handle, step.kind, step.turn, step.call, step.tool, p.seg)
        w, got = _append(w, p, event)
        if got != store.INSERT_STORED:
            if reported:
                return _insert_not_stored(w, p, got)
            stored = False  # an ambiguous commit of an insert that stored nothing: a failure
    if reported:
        p = replace(p, handle=p.handle + 1)
    else:
        pol = w.config.policy
        if pol.audit_failclosed_writes and rules.is_write(
            rules.step_effect(w.config, w.removed, p.step)
        ):
            err = AUDIT_PERSISTENCE_FAILED
            return _ladder(w, p, err, rules.classify(err, "", pol))
    if p.cancelled:
        return _ladder(w, p, CANCELLATION_REQUESTED, "")
    if p.owner and not w.config.policy.renew_before_persist:
        return _put(w, replace(p, pc=Label.RENEW))
    if p.owner and w.config.policy.fence_cleared_after_audit and _write_boundary(w, p):
        return _put(w, replace(p, pc=Label.CLEAR))
    return _continue(w, p)


def _append(w: World, p: Proc, event: Event) -> tuple[World, str]:
    """A segment's event insert (:func:`store.append_event`), with the ghost mark of an
    insert that lands in the stream of a later claim than the segment's own."""
    row = w.rows[p.run]
    w, got = store.append_event(w, p.run, event, p.owner, p.cancelled)
    if got == store.INSERT_STORED and row is not None and p.epoch and row.epoch != p.epoch:
        w = w.mark(Mark.ZOMBIE_APPEND.fact(w.run_id(p.run)))
    return w, got


def _insert_not_stored(w: World, p: Proc, got: str) -> World:
    """An event insert that reported storing nothing (proposals P7 and P8). Refused, the row
    is no longer this segment's: ``LeaseLost``, the step is not persisted (as a failed
    renewal). A duplicate key: the insert re-reads ``max(sequence)`` and the segment inserts
    the same event again at ``max + 1`` (it stays at its insert)."""
    if got == store.INSERT_REFUSED:
        return _ladder(w, p, LEASE_LOST, "")
    return _put(w, replace(p, handle=store.max_sequence(w, p.run) + 1))


def _clear_move(w: World, p: Proc) -> Transition:
    return T(store.MARK_PENDING_EFFECT, p.name, run=w.run_id(p.run), effect="")


@action(Label.CLEAR, fires=store.MARK_PENDING_EFFECT, faults=STORE_FAULTS, cost=STORE, then=LOOP,
        args=("effect",), move=_clear_move, place="T5 clear (proposal fence_cleared_after_audit)")
def _h_clear(w: World, p: Proc, t: Transition) -> World:
    """Proposal fence_cleared_after_audit: the T5 clear after the event is stored."""
    ok = False
    if not t.fault:
        w, ok = store.mark_pending_effect(w, p.run, p.owner, "", p)
    if not ok:
        return _ladder(w, p, LEASE_LOST, "")
    return _continue(w, p)


def _continue(w: World, p: Proc) -> World:
    """What follows a boundary."""
    then = p.then
    if p.cancel_seen:  # ghost: the segment goes on past a boundary that followed a cancel
        w = w.mark(Mark.PAST_CANCEL.fact(w.run_id(p.run)))
    if then == Label.PROVIDER:
        return _put(w, replace(p, pc=Label.PROVIDER))
    if then == "after_llm":
        return _after_llm(w, p)
    if then == "after_tool":
        return _next_call(w, replace(p, call=p.call + 1))
    raise AssertionError(then)  # pragma: no cover


@action(Label.PROVIDER, fires=TransitionName.PROVIDER_CALL, faults=(FaultKind.PROVIDER_ERROR,), cost=PROVIDER, then=LOOP,
        place="7.1 step 3")
def _h_provider(w: World, p: Proc, t: Transition) -> World:
    if t.fault:
        return _ladder(w, p, PROVIDER_ERROR, t.fault)
    if p.synthesis:
        return _boundary(w, p, RunStep("llm", p.turn, -1, ""), "after_llm")
    ans = w.config.runs[p.run].answer(p.turn)
    if ans.kind == "fail":
        return _ladder(w, p, PROVIDER_ERROR, ans.value)
    if ans.kind == "guardrail":
        sig = GUARDRAIL_VIOLATION if ans.value == "violation" else GUARDRAIL_APPROVAL_REQUIRED
        return _ladder(w, p, sig, "")
    if ans.kind == "final" and ans.value in ("budget_exhausted", "context_truncated"):
        return _try_arm(w, p, ans.value)
    return _boundary(w, p, RunStep("llm", p.turn, -1, ""), "after_llm")


def _after_llm(w: World, p: Proc) -> World:
    spec = w.config
    if p.synthesis:
        return _try_arm(w, p, "max_iterations")
    ans = spec.runs[p.run].answer(p.turn)
    if ans.kind != "tools" or not ans.calls:
        return _try_arm(w, p, "completed")
    # 7.1 step 6: the approval scan covers all calls, before any call executes
    if any(rules.approval_bound(spec, w.removed, c) for c in ans.calls) and not _approval_kept(w, p):
        return _ladder(w, p, APPROVAL_REQUIRED, "")
    if spec.policy.input_suspend and any(
        (tl := spec.tool(c)) is not None and tl.needs_input and c not in w.removed
        for c in ans.calls
    ):
        return _ladder(w, p, INPUT_REQUIRED, "")
    return _next_call(w, _decided(replace(p, call=0)))


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


def _next_call(w: World, p: Proc) -> World:
    spec = w.config
    calls = spec.runs[p.run].answer(p.turn).calls
    if p.call >= len(calls):
        # the next round
        p = _decided(replace(p, turn=p.turn + 1, rounds=p.rounds + 1))
        return _enter_round(w, p)
    name = calls[p.call]
    if p.decision in (Decision.APPROVE, Decision.DENY, Decision.INPUT) and _refused_in_resume(w, p, name):
        # 12.2 step 11.1: an error tool step, without the hook, through a normal boundary
        return _boundary(w, p, RunStep("tool", p.turn, p.call, name), "after_tool")
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
        return _put(w, replace(p, pc=Label.INVOKE))
    effect = rules.resolve_by_name(w.config, w.removed, name)
    if not rules.is_write(effect):
        return _put(w, replace(p, pc=Label.INVOKE))
    if p.handle < 0 or not p.owner:
        err = WRITE_WITHOUT_DURABLE_EXECUTION
        return _ladder(w, p, err, rules.classify(err, "", w.config.policy))
    return _put(w, replace(p, pc=Label.STAMP))


def stamp_move(w: World, p: Proc) -> Transition:
    effect = rules.resolve_by_name(w.config, w.removed, _call_name(w, p))
    return T(store.MARK_PENDING_EFFECT, p.name, run=w.run_id(p.run), effect=effect)


@action(STAMP, fires=store.MARK_PENDING_EFFECT, faults=STORE_FAULTS, cost=STORE, then=(Label.INVOKE, END),
        args=("effect",), move=stamp_move, place="T5 stamp; 7.3")
def _h_stamp(w: World, p: Proc, t: Transition) -> World:
    if t.fault:
        return _ladder(w, p, LEASE_LOST, "")
    w, ok = store.mark_pending_effect(w, p.run, p.owner, t.arg("effect"), p)
    if not ok:
        return _ladder(w, p, LEASE_LOST, "")  # the tool never runs
    nxt = Label.INTENT if w.config.policy.write_intent_recorded else Label.INVOKE
    return _put(w, replace(p, pc=nxt, stamped=True))


def _intent_move(w: World, p: Proc) -> Transition:
    return T(TransitionName.RECORD_STEP, p.name, run=w.run_id(p.run), step="intent",
             tool=_call_name(w, p))


@action(Label.INTENT, fires=TransitionName.RECORD_STEP, faults=(FaultKind.AUDIT_INSERT_FAILS, FaultKind.AMBIGUOUS_COMMIT),
        cost=AUDIT, then=(Label.INVOKE, Label.INTENT, END), args=("step", "tool"), move=_intent_move,
        place="proposal write_intent_recorded: the intent insert before invoke")
def _h_intent(w: World, p: Proc, t: Transition) -> World:
    """Proposal write_intent_recorded: the write-ahead ``intent`` event of the call, the same
    insert as 7.2 step 5 (owner-guarded with P7, re-sequenced with P8). Fail-closed: unless
    the insert reports it stored, the tool never runs (LeaseLost, as a failed stamp)."""
    if t.fault != FaultKind.AUDIT_INSERT_FAILS:
        event = Event(p.run, p.handle, INTENT_KIND, p.turn, p.call, _call_name(w, p), p.seg)
        w, got = _append(w, p, event)
        if got != store.INSERT_STORED and t.fault is None:
            return _insert_not_stored(w, p, got)
    if t.fault:
        return _ladder(w, p, LEASE_LOST, "")
    return _put(w, replace(p, pc=Label.INVOKE, handle=p.handle + 1))


def _invoke_move(w: World, p: Proc) -> Transition:
    return T(TransitionName.INVOKE, p.name, run=w.run_id(p.run), tool=_call_name(w, p))


@action(Label.INVOKE, fires=TransitionName.INVOKE, faults=(FaultKind.TOOL_ERROR,), cost=TOOL, then=LOOP, args=("tool",),
        move=_invoke_move, place="7.1 step 8.2")
def _h_invoke(w: World, p: Proc, t: Transition) -> World:
    spec = w.config
    name = _call_name(w, p)
    tool = spec.tool(name)
    if tool is not None and name not in w.removed and not t.fault:
        effect = tool.declared_effect
        if rules.is_write(effect):
            row = w.rows[p.run]
            attempt = row.attempts if row is not None else 0
            app = Application(p.run, p.turn, p.call, name, effect, p.seg, p.stamped, attempt,
                              p.decision, _decider(w, p) if p.decision else "")
            w = replace(w, ledger=w.ledger + (app,))
    return _boundary(w, p, RunStep("tool", p.turn, p.call, name), "after_tool")


# -- the ladder (section 8) ---------------------------------------------------------------
def _settle(w: World, p: Proc, wrapper: str, status: str, reason: str, eclass: str,
            guarded: bool, on_ok: str, on_miss: str) -> World:
    if p.handle < 0 and p.kind != ENQUEUE:
        return _end(w, p, on_ok)  # no handle: every settle is skipped
    p = replace(p, pc=Label.SETTLE, settle=SettlePlan(wrapper, status, reason, eclass, guarded, on_ok, on_miss))
    return _put(w, p)


def _try_arm(w: World, p: Proc, reason: str) -> World:
    guarded = bool(p.guard)
    return _settle(
        w, p, TransitionName.SETTLE_COMPLETED, "completed", reason, "", guarded,
        OutcomeName.COMPLETED, OutcomeName.LEASE_LOST if guarded else OutcomeName.COMPLETED,
    )


def _ladder(w: World, p: Proc, error: str, eclass: str) -> World:
    p = replace(p, error=error, eclass=eclass)
    guarded = bool(p.guard)
    if error == CANCELLATION_REQUESTED:
        return _end(w, p, OutcomeName.CANCELLED)
    if error in (APPROVAL_REQUIRED, INPUT_REQUIRED):
        if p.handle < 0:
            return _end(w, p, OutcomeName.SUSPEND_FAILED)  # modelling choice (section 8 notes)
        return _put(w, replace(p, pc=Label.SUSPEND))
    if error in (GUARDRAIL_VIOLATION, GUARDRAIL_APPROVAL_REQUIRED):
        v = error == GUARDRAIL_VIOLATION
        out = OutcomeName.GUARDRAIL_BLOCKED if v else OutcomeName.GUARDRAIL_APPROVAL_REQUIRED
        return _settle(
            w, p, TransitionName.SETTLE_POLICY_STOPPED, FAILED, "policy_denied" if v else "approval_denied",
            error, guarded, out, OutcomeName.LEASE_LOST if guarded else out,
        )
    if error == LEASE_LOST:
        return _end(w, p, OutcomeName.LEASE_LOST)
    # arm 6: any other error
    if p.hook and p.handle >= 0:
        return _recovery(w, p)
    return _settle(
        w, p, TransitionName.SETTLE_FAILED, FAILED, "provider_failed", error, guarded,
        OutcomeName.FAILED, OutcomeName.LEASE_LOST if guarded else OutcomeName.FAILED,
    )


def _suspend_move(w: World, p: Proc) -> Transition:
    name = TransitionName.SUSPEND_FOR_INPUT if _input_side(p) else TransitionName.SUSPEND
    return T(name, p.name, run=w.run_id(p.run))


@action(Label.SUSPEND, fires=(TransitionName.SUSPEND, TransitionName.SUSPEND_FOR_INPUT), faults=STORE_FAULTS, cost=STORE,
        then=(Label.SETTLE, END), move=_suspend_move, place="T6; 8 arm 2")
def _h_suspend(w: World, p: Proc, t: Transition) -> World:
    status = WAITING_FOR_INPUT if _input_side(p) else WAITING_FOR_APPROVAL
    ok = False
    if not t.fault:
        w, ok = store.suspend(w, p.run, status, p.turn, p)
    if ok:
        return _end(w, p, OutcomeName.AWAITING_INPUT if status == WAITING_FOR_INPUT else OutcomeName.AWAITING_APPROVAL)
    # settle_failed(owner_guard), result ignored: SUSPEND_FAILED either way
    if not w.config.policy.terminal_guard:
        return _end(w, p, OutcomeName.SUSPEND_FAILED)  # before ADR-092 a failed suspend was swallowed
    return _settle(w, p, TransitionName.SETTLE_FAILED, FAILED, "provider_failed", p.error, bool(p.guard),
                   OutcomeName.SUSPEND_FAILED, OutcomeName.SUSPEND_FAILED)


def _settle_move(w: World, p: Proc) -> Transition:
    plan = p.settle
    owner = p.guard if plan.guarded else None
    return T(plan.wrapper, p.name, run=w.run_id(p.run), reason=plan.reason, owner=owner or None,
             status=plan.expect or None)


@action(SETTLE, fires=(TransitionName.SETTLE_COMPLETED, TransitionName.SETTLE_FAILED, TransitionName.SETTLE_POLICY_STOPPED, TransitionName.SETTLE_DEAD_LETTERED),
        faults=STORE_FAULTS, cost=STORE, then=(END,), args=("reason", "owner", "status"),
        move=_settle_move, place="T8 via 4.3")
def _h_settle(w: World, p: Proc, t: Transition) -> World:
    plan = p.settle
    ok = False
    if not t.fault:
        w, ok = store.finish_run(w, p.run, plan.status, plan.reason, plan.error_class,
                                 p.guard if plan.guarded else "", p, plan.expect)
    if p.kind == ENQUEUE:
        return _end(w, p, None)
    return _end(w, p, plan.on_ok if ok else plan.on_miss)


# -- queued-run recovery (section 9) ------------------------------------------------------
def _dead_letter(w: World, p: Proc, reason: str, on_miss: str = OutcomeName.LEASE_LOST,
                 fallback: bool = False) -> World:
    pol = w.config.policy
    if fallback and pol.fallback_settles_requeued_row:
        # proposal: match the row this segment's own requeue left, not a cleared owner
        p = replace(p, guard="", pc=Label.SETTLE, settle=SettlePlan(
            TransitionName.SETTLE_DEAD_LETTERED, FAILED, reason, p.error, False, OutcomeName.FAILED, on_miss, QUEUED))
        return _put(w, p)
    guarded = pol.owner_guarded_settle_workers
    p = replace(p, guard=p.identity if guarded else "")
    return _settle(w, p, TransitionName.SETTLE_DEAD_LETTERED, FAILED, reason, p.error, guarded, OutcomeName.FAILED, on_miss)


def _recovery(w: World, p: Proc) -> World:
    if not rules.class_is_retryable(p.eclass) and not w.config.policy.mutant_recovery_ignores_class:
        return _dead_letter(w, p, "not_retryable")  # branch 2 (skipped by the mutant)
    return _put(w, replace(p, pc=Label.RECOVERY_READ))  # branch 3


@action(Label.RECOVERY_READ, fires=TransitionName.FIND_RUN, faults=STORE_FAULTS, cost=STORE, then=(Label.REQUEUE, Label.SETTLE, END),
        place="9 steps 3-5")
def _h_recovery_read(w: World, p: Proc, t: Transition) -> World:
    row = None if t.fault else w.rows[p.run]
    pol = w.config.policy
    if pol.write_fence and row is not None and not rules.may_retry_after_fence(row.pending_effect, pol):
        return _dead_letter(w, p, "not_retryable")  # branch 4
    count = row.requeue_count if row is not None else -1
    if count < 0 or count >= w.config.constants.MAX_REQUEUES:
        return _dead_letter(w, p, "retries_exhausted")  # branch 5
    return _put(w, replace(p, pc=Label.REQUEUE, part=replace(p.part, count=count)))  # branch 6


@action(Label.REQUEUE, fires=TransitionName.REQUEUE, faults=STORE_FAULTS, cost=STORE, then=(Label.DISPATCH, END), place="T9; 9 step 6")
def _h_requeue(w: World, p: Proc, t: Transition) -> World:
    ok = False
    if not t.fault:
        if not rules.class_is_retryable(p.eclass):
            w = w.mark(Mark.RETRY_OF_NON_RETRYABLE.fact(w.run_id(p.run)))
        delay = w.config.constants.retry_delay_s(p.count)  # step 7's backoff (P6's deadline)
        w, ok = store.requeue(w, p.run, p.identity, p, delay)
    if not ok:
        return _end(w, p, OutcomeName.LEASE_LOST)
    return _put(w, replace(p, pc=Label.DISPATCH))


def _dispatch_move(w: World, p: Proc) -> Transition:
    delay = w.config.constants.retry_delay_s(p.count) if p.kind == WORKER else None
    return T(TransitionName.DISPATCH, p.name, run=w.run_id(p.run), delay=delay)


@action(Label.DISPATCH, fires=TransitionName.DISPATCH, faults=(FaultKind.DISPATCH_FAILS,), cost=DISPATCH, then=(Label.RUN_QUEUED, Label.SETTLE, END),
        args=("delay",), move=_dispatch_move,
        place="6.1 step 4, 9 step 7; 6.3 sync: the handler runs nested")
def _h_dispatch(w: World, p: Proc, t: Transition) -> World:
    if p.kind == ENQUEUE:
        if t.fault:  # settle_failed without an owner, then EnqueueFailed
            p = replace(p, pc=Label.SETTLE, settle=SettlePlan(TransitionName.SETTLE_FAILED, FAILED, "provider_failed",
                                                           "EnqueueFailed", False, "", ""))
            return _put(w, p)
        w, nested = _dispatch_queued(w, p.run, p.name, w.clock, _frames(p))
        return w if nested else _end(w, p, None)
    if t.fault:  # branch 8: the fallback dead-letter, owner-guarded on the worker identity
        return _dead_letter(w, p, "retries_exhausted", on_miss=OutcomeName.FAILED, fallback=True)
    delay = w.config.constants.retry_delay_s(p.count)
    w, nested = _dispatch_queued(w, p.run, p.name, w.clock + delay, _frames(p))
    return w if nested else _end(w, p, OutcomeName.REQUEUED)  # sync: REQUEUED once the retry ends


def _frames(p: Proc) -> tuple[Proc, ...]:
    """The stack a handler nested in ``p``'s dispatch waits on: ``p``, then its own."""
    return (replace(p, outer=()),) + p.outer


# -- pick-up after the claim (6.2 steps 2-5) ----------------------------------------------
@action(Label.CLAIM_QUEUED, fires=store.CLAIM_QUEUED, faults=STORE_FAULTS, cost=STORE, then=(Label.PICKUP_POSITION, END),
        place="T3, 6.2 step 2")
def _h_claim_queued(w: World, p: Proc, t: Transition) -> World:
    ok = False
    if not t.fault:
        w, ok = store.claim_queued(w, p.run, p.identity)
    if not ok:
        return _end(w, p, None)  # NONE
    row = w.rows[p.run]
    assert row is not None  # the claim matched it
    p = replace(p, pc=Label.PICKUP_POSITION, epoch=row.epoch, claim_requeues=row.requeue_count,
                seg=f"{p.worker}/{w.run_id(p.run)}#{row.attempts}")
    return _put(w, p)


@action(Label.PICKUP_POSITION, fires=TransitionName.MAX_SEQUENCE, faults=(FaultKind.STORE_ERROR, FaultKind.DECODE_ERROR),
        cost=STORE, then=BOUNDARY + (Label.SETTLE,), place="4.2, 6.2 steps 3-5")
def _h_pickup_position(w: World, p: Proc, t: Transition) -> World:
    if t.fault:  # settle_failed without an owner (proposal P4: guarded by its own claim)
        own = w.config.policy.failure_settles_own_claim
        p = replace(p, handle=0, guard=p.identity if own else p.guard)
        err = "StateUnavailable" if t.fault == FaultKind.STORE_ERROR else "ConfigurationGone"
        return _settle(w, p, TransitionName.SETTLE_FAILED, FAILED, "provider_failed", err, own, OutcomeName.FAILED,
                       OutcomeName.LEASE_LOST if own else OutcomeName.FAILED)
    p = replace(p, handle=store.max_sequence(w, p.run) + 1, turn=0, rounds=0)
    return _enter_round(w, p)


# -- resume (12.2, 12.3) ------------------------------------------------------------------
_DECISION_REQUEST: dict[str, str] = {d: q for q, d in _REQUEST_DECISION.items()}


def _decider(w: World, p: Proc) -> str:
    """The principal whose decision a resume carries: a named one's, or the run's owner's
    (``RunSpec.decisions``)."""
    return p.by or w.config.runs[p.run].owner


def _resume_read_faults(w: World, p: Proc) -> tuple[str, ...]:
    """12.2 steps 1 and 2: a row awaiting this decision has its stored state decoded before
    the claim (fault decode_error: CorruptSuspendedState)."""
    row = w.rows[p.run]
    if row is not None and row.status == (WAITING_FOR_INPUT if _input_side(p) else WAITING_FOR_APPROVAL):
        return (FaultKind.STORE_ERROR, FaultKind.DECODE_ERROR)
    return STORE_FAULTS


@action(Label.RESUME_READ, fires=TransitionName.FIND_RUN, faults=(FaultKind.STORE_ERROR, FaultKind.DECODE_ERROR), cost=STORE, then=(Label.RESUME_PROBE, END),
        faults_now=_resume_read_faults, place="12.2 steps 1-2 (a resume decodes the loaded state)")
def _h_resume_read(w: World, p: Proc, t: Transition) -> World:
    """12.2 steps 1 and 2, before any store change: a refusal leaves the row untouched."""
    row = None if t.fault == FaultKind.STORE_ERROR else w.rows[p.run]
    want = WAITING_FOR_INPUT if _input_side(p) else WAITING_FOR_APPROVAL
    if row is None or row.status != want:
        return _end(w, p, "NotAwaitingInput" if _input_side(p) else "NotAwaitingApproval")
    spec = w.config
    by = _decider(w, p)
    if not (spec.policy.mutant_resume_skips_access
            or rules.may(spec, by, _DECISION_REQUEST[p.decision], p.run)):
        return _end(w, p, OutcomeName.ACCESS_DENIED)  # step 2: the actor may not act on the run
    if p.refusal == CONFIGURATION_GONE:  # step 2: the run's configuration no longer exists
        return _end(w, p, CONFIGURATION_GONE)
    if rules.self_approval(spec, by, p.run, p.decision) and not spec.policy.mutant_four_eyes_skipped:
        return _end(w, p, SELF_APPROVAL_DENIED)  # step 2: the four-eyes rule (16.18.4)
    if t.fault == FaultKind.DECODE_ERROR:  # step 2: the stored state does not decode
        return _end(w, p, "CorruptSuspendedState")
    if p.refusal == INVALID_INPUT_SUBMISSION:
        # 12.3 (ADR-105): validated before anything is probed or claimed; the run stays
        # waiting_for_input, nothing claimed, no event, and the user may resubmit
        return _end(w, p, INVALID_INPUT_SUBMISSION)
    return _put(w, replace(p, pc=Label.RESUME_PROBE, turn=row.suspended_state))


@action(Label.RESUME_PROBE, fires=TransitionName.MAX_SEQUENCE, faults=STORE_FAULTS, cost=STORE, then=(Label.RESUME_CLAIM, END),
        place="12.2 step 3")
def _h_resume_probe(w: World, p: Proc, t: Transition) -> World:
    if t.fault:
        return _end(w, p, "StateUnavailable")
    return _put(w, replace(p, pc=Label.RESUME_CLAIM))


def _resume_claim_move(w: World, p: Proc) -> Transition:
    name = TransitionName.CLAIM_FOR_RESUME_FROM_INPUT if _input_side(p) else TransitionName.CLAIM_FOR_RESUME
    return T(name, p.name, run=w.run_id(p.run))


@action(Label.RESUME_CLAIM, fires=(TransitionName.CLAIM_FOR_RESUME, TransitionName.CLAIM_FOR_RESUME_FROM_INPUT), faults=STORE_FAULTS,
        cost=STORE, then=(Label.RESUME_POSITION, END), move=_resume_claim_move, place="T7; 12.2 step 4")
def _h_resume_claim(w: World, p: Proc, t: Transition) -> World:
    pol = w.config.policy
    ok = False
    if not t.fault:
        frm = WAITING_FOR_INPUT if _input_side(p) else WAITING_FOR_APPROVAL
        w, ok = store.claim_for_resume(w, p.run, frm, p.identity, pol.lease_all_segments)
    if not ok:
        return _end(w, p, "AlreadyResuming")
    if p.by:  # a named principal's decision changed the row: its claim
        w = _made(w, Made(p.by, p.run, _DECISION_REQUEST[p.decision]))
    row = w.rows[p.run]
    assert row is not None  # the claim matched it
    owner = p.identity if pol.lease_all_segments else ""
    p = replace(
        p, pc=Label.RESUME_POSITION, epoch=row.epoch, owner=owner, claim_requeues=row.requeue_count,
        guard=p.identity if pol.owner_guarded_settle_all else "", cap=w.config.constants.DEFAULT_ROUND_CAP,
    )
    return _put(w, p)


def _resume_position_faults(w: World, p: Proc) -> tuple[str, ...]:
    """12.2 steps 5 and 6: the fresh position, and (since ADR-132) the decode of the state
    from the fresh row; before ADR-132 the state read before the claim was used."""
    if w.config.policy.approval_audit_failclosed:
        return (FaultKind.STORE_ERROR, FaultKind.DECODE_ERROR)
    return STORE_FAULTS


@action(Label.RESUME_POSITION, fires=TransitionName.MAX_SEQUENCE, faults=(FaultKind.STORE_ERROR, FaultKind.DECODE_ERROR), cost=STORE,
        then=(Label.RELEASE, Label.RECORD_DECISION, Label.SETTLE), faults_now=_resume_position_faults, place="4.2; 12.2 steps 5-6")
def _h_resume_position(w: World, p: Proc, t: Transition) -> World:
    pol = w.config.policy
    if t.fault:  # settle_failed without an owner (proposal P4: guarded by its own claim)
        own = pol.failure_settles_own_claim
        p = replace(p, handle=0, guard=p.identity if own else "")
        err = "StateUnavailable" if t.fault == FaultKind.STORE_ERROR else "CorruptSuspendedState"
        return _settle(w, p, TransitionName.SETTLE_FAILED, FAILED, "provider_failed", err, own, err,
                       OutcomeName.LEASE_LOST if own else err)
    row = w.rows[p.run]
    assert row is not None  # this segment's claim matched it (resume_claim); rows never go
    turn = row.suspended_state if pol.approval_audit_failclosed else p.turn
    p = replace(p, handle=store.max_sequence(w, p.run) + 1, turn=turn)
    # gate 1: the decision refers to the pending turn (an input's turn binding: ADR-150)
    inp = _input_side(p)
    if turn < 0 or (turn != p.seen_turn and (pol.submitter_gate or not inp)):
        return _put(w, replace(p, pc=Label.RELEASE, error="StaleInputTurn" if inp else "StaleApprovalTurn"))
    refusal = _gate_2(w, p, w.config.runs[p.run].answer(turn).calls)
    if refusal:
        return _put(w, replace(p, pc=Label.RELEASE, error=refusal))
    return _put(w, replace(p, pc=Label.RECORD_DECISION))


def _gate_2(w: World, p: Proc, calls: tuple[str, ...]) -> str:
    """Gate 2 after the claim (16.18.5), judged on the decider: of an approval (ADR-133), each
    call of the turn that declares a write must be permitted it (a denial skips it); of an
    input, the submitter gate (ADR-150): every pending call. "" when it passes."""
    spec = w.config
    pol = spec.policy
    by = _decider(w, p)
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
    name = TransitionName.RECORD_INPUT if _input_side(p) else TransitionName.RECORD_APPROVAL
    return T(name, p.name, run=w.run_id(p.run))


@action(Label.RECORD_DECISION, fires=(TransitionName.RECORD_APPROVAL, TransitionName.RECORD_INPUT),
        faults=(FaultKind.AUDIT_INSERT_FAILS,), cost=AUDIT,
        then=(Label.RELEASE, Label.RECORD_DECISION) + LOOP, move=_record_decision_move,
        place="4.2; 12.2 step 9, 12.3")
def _h_record_decision(w: World, p: Proc, t: Transition) -> World:
    spec = w.config
    if not t.fault:
        kind = "input" if _input_side(p) else "approval"
        by = "" if spec.policy.mutant_decision_event_unsigned else _decider(w, p)
        event = Event(p.run, p.handle, kind, p.turn, -1, "", p.seg, by)
        w, got = store.append_event(w, p.run, event, p.owner)
        if got != store.INSERT_STORED:
            return _insert_not_stored(w, p, got)
        p = replace(p, handle=p.handle + 1)
    elif (
        p.decision == Decision.APPROVE
        and spec.policy.approval_audit_failclosed
        and rules.write_turn(spec, w.removed, spec.runs[p.run].answer(p.turn).calls)
    ):
        return _put(w, replace(p, pc=Label.RELEASE, error="ApprovalNotAuditable"))  # gate 3
    return _next_call(w, replace(p, call=0))


def _release_move(w: World, p: Proc) -> Transition:
    name = TransitionName.SUSPEND_FOR_INPUT if _input_side(p) else TransitionName.SUSPEND
    return T(name, p.name, run=w.run_id(p.run))


@action(Label.RELEASE, fires=(TransitionName.SUSPEND, TransitionName.SUSPEND_FOR_INPUT), faults=STORE_FAULTS, cost=STORE,
        then=(Label.SETTLE, END), move=_release_move, place="T6; 12.2 gates 1-3 (the row goes back to waiting)")
def _h_release(w: World, p: Proc, t: Transition) -> World:
    status = WAITING_FOR_INPUT if _input_side(p) else WAITING_FOR_APPROVAL
    ok = False
    if not t.fault:
        w, ok = store.suspend(w, p.run, status, p.turn, p)
    if ok:
        return _end(w, p, p.error)
    # the release failed: settle_failed without an owner (proposal P4: under its own claim)
    own = w.config.policy.failure_settles_own_claim
    p = replace(p, guard=p.identity if own else "")
    return _settle(w, p, TransitionName.SETTLE_FAILED, FAILED, "provider_failed", p.error, own, p.error,
                   OutcomeName.LEASE_LOST if own else p.error)



__all__ = [
    "GuardFailed", "apply", "at_bound", "clock_move", "enabled", "fire",
    "lapsed_by", "successors", "waiting_instants",
]


# =========================================================================================
# the actors (RUNTIME 1.2), in the order ``enabled`` lists their moves
# =========================================================================================
def _is(kind: str):
    def answers(w: World, name: str) -> bool:
        return name == kind
    return answers


def _process_moves(w: World, name: str | None, one_order: bool, slots: list[int] | None) -> list[Transition]:
    """Each live process's step (``_proc_moves``) and its death."""
    out: list[Transition] = []
    crash = _can(w, FaultKind.CRASH)
    for p in w.procs if name is None else (w.proc(name),):
        assert p is not None  # answered: the process is live
        out.extend(_proc_moves(w, p))
        if crash:
            out.append(T(TransitionName.CRASH, p.name, run=w.run_id(p.run)))
    return out


def _process_fire(w: World, t: Transition) -> World:
    p = w.proc(t.actor)
    assert p is not None  # answered: the process is live
    if t.name == TransitionName.CRASH:
        return _die(w, p)
    return _step(w, p, t)


def _is_free_worker(w: World, name: str) -> bool:
    return name in w.config.workers and w.proc(name) is None


def _queue_on(w: World) -> bool:
    pol = w.config.policy
    return pol.reaper and pol.queue


def _bus_fire(w: World, t: Transition) -> World:
    return _add_message(w, Message(w.config.run_index(t.arg("run")), t.arg("not_before")))


# Fairness (spec/properties.py ``fairness``): what a fair step of each fair kind is. A fault
# (a transition with a fault argument, or a crash) is never one: the fault budget makes
# faults finite. Callers, the operator and the bus have no fairness: they may never act.
def _process_takes(t: Transition, name: str) -> bool:
    """A step of the process ``name`` without a fault; a free worker taking a message
    (run_queued with not_before) is the worker's step, but a pick-up nested in a sync
    dispatch (no not_before) is the dispatching process's own next step."""
    return (t.actor == name and t.fault is None and t.name != TransitionName.CRASH
            and not (t.name == PICK_UP and t.arg("not_before") is not None))


def _pickup_takes(t: Transition, name: str) -> bool:
    """Some free worker takes some deliverable message (the workers are one class)."""
    return t.name == PICK_UP and t.fault is None


def _reaper_takes(t: Transition, name: str) -> bool:
    """A step of the reaper ``name`` without a fault (tick, per-row decision, dispatch)."""
    return t.actor == name and t.fault is None and t.name != TransitionName.CRASH


def _clock_takes(t: Transition, name: str) -> bool:
    """Time moves on (while something waits on it: the clock is enabled only then)."""
    return t.actor == name


declare_actor(ActorKind.CALLER, place="6.1, 11, 12", answers=_is(ActorKind.CALLER),
              moves=lambda w, name, one_order, slots: _caller_moves(w, slots), fire=_caller)
declare_actor(ActorKind.PROCESS, place="5; 1.3 process death",
              answers=lambda w, name: w.proc(name) is not None,
              moves=_process_moves, fire=_process_fire,
              fairness=Fair.WEAK, instances=names.process_names, takes=_process_takes,
              says="the process's next step without a fault")
declare_actor(ActorKind.WORKER, place="6.2 step 1 (async: a delivery)", answers=_is_free_worker,
              moves=lambda w, name, one_order, slots: _pickup_moves(w, name, slots),
              fire=_run_queued, instances=lambda config: tuple(config.workers),
              fairness=Fair.WEAK, takes=_pickup_takes, fair_each=False,
              says="some free worker takes some deliverable message")
declare_actor(ActorKind.BUS, place="6.3; 1.3 a duplicate message", answers=_is(ActorKind.BUS),
              moves=lambda w, name, one_order, slots: _bus_moves(w), fire=_bus_fire)
declare_actor(ActorKind.REAPER, place="10", answers=lambda w, name: name in names.reaper_names(w.config),
              moves=lambda w, name, one_order, slots: _reapers_moves(w, name, one_order),
              fire=_reaper, instances=names.reaper_names, fairness=Fair.WEAK,
              takes=_reaper_takes,
              says="a reaper step without a fault (tick, per-row decision, dispatch)")
declare_actor(ActorKind.OPERATOR, place="14.2 a tool removed between attempts; 11 the cancel command", answers=_is(ActorKind.OPERATOR),
              moves=lambda w, name, one_order, slots: _operator_moves(w),
              fire=_operator)
declare_actor(ActorKind.CLOCK, place="conventions: one clock", answers=_is(ActorKind.CLOCK),
              moves=lambda w, name, one_order, slots: _clock_moves(w),
              fire=lambda w, t: replace(w, clock=t.arg("to")), fairness=Fair.WEAK,
              takes=_clock_takes, says="time moves on while something waits on it")


# Where a segment waits on a slow operation (1.3): time may pass its lease there unfaulted.
# The labels whose step waits on the provider or a tool (the step table's cost classes).
SLOW_OPERATIONS = frozenset(a.pc for a in ACTIONS.values() if a.cost in (PROVIDER, TOOL))
