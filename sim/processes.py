"""The simulated processes (SimPy generators): they decide WHEN a transition fires and which
fault branch it takes; the engine's :meth:`Simulation.step` fires it.

* arrivals, and each run's admission and caller (``enqueue_run`` / ``start_run``, then the
  enqueue's dispatch or the interactive segment);
* the message bus: the delivery of each message (delay, duplicates);
* N workers: take a delivered message, pick the run up (``run_queued``), drive the
  queued-worker segment; a crash (its own process per worker) interrupts them;
* approvers (a decision some time after a run comes to await one), cancelling callers;
* the reaper;
* :meth:`Processes.drive`: one model process (a segment, or an enqueue caller) step by
  step, each step's stall, latency and fault drawn from the component it touches
  (sim/faults.py);
* :meth:`Processes.fault_of` / :meth:`Processes.other_fault`: the one way every step of every
  actor draws its fault: the component the step's declaration names, the kinds the step may
  take in the state (docs/SIMULATOR.md "Which faults a step draws");
* :meth:`Processes.acting`: the generic process of an actor kind the step table declares
  (``model.steps.ACTORS``) that has none of its own here (``HANDWRITTEN``): one per instance.

A process draws from its own stream (sim/streams.py), named after it; what it draws, and
in which order, is part of the history.
"""

from __future__ import annotations

import math
import random
from typing import Any, NamedTuple

import simpy
from failclosed.model import names
from failclosed.model.runtime import enabled, next_step, step_faults
from failclosed.model.state import DEFAULT_OWNER, FINAL_ANSWER, SYNC, Answer, Ask, RunSpec
from failclosed.model.steps import ACTORS, NONE, OTHER_TRANSITIONS, PICK_UP, Actor
from failclosed.model.store import CANCEL, ENQUEUE_RUN, START_RUN
from failclosed.model.vocab import (
    ActorKind,
    Decision,
    FaultKind,
    PrincipalKind,
    Request,
    Scope,
    TransitionName,
)

from .config import SimConfig
from .faults import NOTHING, Component
from .records import SimulationError, Stop
from .streams import stream
from .window import reaper_slot

# an approver's decisions (12.2, 12.3): the transitions one of which the model enables
DECISIONS = (TransitionName.APPROVE, TransitionName.DENY, TransitionName.SUBMIT_INPUT)

# [workload.strangers] (RUNTIME 16.18): the principals of a simulation that has them, one of
# every kind (16.18.1), and the requests a run drawn for them gets, in this order: a stranger
# (another user) approves (AccessDenied), an anonymous caller reads the status and a service
# account without scopes cancels (each answered as for an unknown run), the holder of the
# approve grant reads the events (the grant is approve's only: answered nothing), a service
# account holding AGENT_APPROVE approves (the access rule lets it; gate 2 refuses it every
# write turn, after the claim) and one holding AGENT_READ reads the status (answered).
STRANGER = "stranger"
ANONYMOUS = "anonymous"
GRANT_HOLDER = "approver"
SERVICE_ACCOUNT = "service"
SERVICE_APPROVE = "service-approve"
SERVICE_READ = "service-read"
PRINCIPALS = {DEFAULT_OWNER: {"kind": PrincipalKind.USER}, STRANGER: {"kind": PrincipalKind.USER},
              ANONYMOUS: {"kind": PrincipalKind.ANONYMOUS},
              GRANT_HOLDER: {"kind": PrincipalKind.USER, "grants": [Scope.AGENT_APPROVE]},
              SERVICE_ACCOUNT: {"kind": PrincipalKind.SERVICE_ACCOUNT},
              SERVICE_APPROVE: {"kind": PrincipalKind.SERVICE_ACCOUNT, "scopes": [Scope.AGENT_APPROVE]},
              SERVICE_READ: {"kind": PrincipalKind.SERVICE_ACCOUNT, "scopes": [Scope.AGENT_READ]}}
STRANGER_REQUESTS = (Ask(STRANGER, Request.APPROVE), Ask(ANONYMOUS, Request.STATUS),
                     Ask(SERVICE_ACCOUNT, Request.CANCEL), Ask(GRANT_HOLDER, Request.EVENTS),
                     Ask(SERVICE_APPROVE, Request.APPROVE), Ask(SERVICE_READ, Request.STATUS))

# What runs each actor kind of the step table (model/steps.py ``ACTORS``) in the simulator.
# A kind declared there and not here gets the generic process (``Processes.acting``), one
# per instance; a kind here with None has no process, and the simulation refuses to start
# when one of its actors can act.
HANDWRITTEN: dict[str, str | None] = {
    ActorKind.CALLER: "arrivals: each run's caller (admit), its canceller, approver and strangers",
    ActorKind.PROCESS: "drive: a segment or an enqueue caller, driven by whoever starts it",
    ActorKind.WORKER: "worker and crasher: one each per worker",
    ActorKind.BUS: "deliver: one per message sent",
    ActorKind.REAPER: "reaper: one per reaper",
    # sim/config.py gives the operator nothing to do (no removable tool, no cancel command)
    ActorKind.OPERATOR: None,
    ActorKind.CLOCK: "Simulation.step: time moves to the simulated instant before each step",
}
ACT_LIMIT = 1000  # moves one generic actor may fire at one instant before it is stopped


class Delivery(NamedTuple):
    """A delivered message in the mailbox (the model's message, by its run's slot and id)."""

    slot: int
    run: str
    not_before: int


class _Held:
    """What a worker waits for or holds: the mailbox request, then the delivered message until
    it has picked the run up. A crash gives either back to the mailbox."""

    def __init__(self) -> None:
        self.request: Any = None  # a simpy StoreGet while waiting
        self.message: tuple[int, str, int] | None = None

    def give_back(self, mailbox: simpy.Store) -> None:
        if self.request is not None:
            if self.request.triggered:
                mailbox.put(self.request.value)
            else:
                self.request.cancel()
        elif self.message is not None:
            mailbox.put(self.message)  # a dead worker's undelivered message goes back


class Processes:
    # ``sim``: the Simulation (sim/engine.py), which imports this module and is not imported
    # back (no cycle): its clock, world, step and archive
    def __init__(self, sim: Any):
        self.sim = sim
        self.env = sim.env
        self.cfg = sim.cfg
        self.seed = sim.seed
        self.faults = sim.faults
        self.window = sim.window
        self.mailbox = simpy.Store(sim.env)  # delivered messages (Delivery)
        self.worker_down: dict[str, bool] = {}
        # the generic processes (``acting``) wait on this, triggered after every step while
        # there are any (Simulation.step calls ``stepped``)
        self.acting_kinds: tuple[str, ...] = ()
        self.changed = simpy.Event(sim.env)

    def start(self) -> None:
        sim, env, cfg = self.sim, self.env, self.cfg
        env.process(self.arrivals())
        for wk in sim.worker_names:
            self.worker_down[wk] = False
            proc = env.process(self.worker(wk))
            if self.faults.crashes.worker_rate > 0:
                env.process(self.crasher(wk, proc))
        if cfg.reaper_enabled and sim.policy.reaper and sim.policy.queue:
            reapers = names.reaper_names(sim.world.config)  # [reaper] count of them
            for k, name in enumerate(reapers):  # hosts out of phase: k/count of a period apart
                env.process(self.reaper(name, k * cfg.reaper_period / len(reapers)))
        if self.faults.audit.flaps:
            env.process(self.faults.audit.flapping())
        self.start_generic()

    # -- every other declared actor ----------------------------------------------------------
    def start_generic(self) -> None:
        """A generic process for every instance of a declared actor kind without a process of
        its own (``HANDWRITTEN``); a kind listed without one must not be able to act."""
        w = self.sim.world
        for kind, actor in ACTORS.items():
            if kind in HANDWRITTEN:
                if HANDWRITTEN[kind] is None and enabled(w, kind):
                    raise SimulationError(
                        f"actor kind {kind!r} can act ({enabled(w, kind)[0]}) but the simulator "
                        "runs no process for it: give it one in sim/processes.py HANDWRITTEN")
                continue
            own = tuple(n for n, o in OTHER_TRANSITIONS.items() if o.actor == kind)
            if not own:
                raise SimulationError(
                    f"actor kind {kind!r} has no simulator process and declares no transition in "
                    f"model/steps.py OTHER_TRANSITIONS (actor={kind!r}), where the generic process "
                    "reads a move's faults and component: add its rows there, or write its "
                    "process in sim/processes.py and list the kind in HANDWRITTEN")
            self.acting_kinds += (kind,)
            for name in actor.instances(w.config):
                self.env.process(self.acting(actor, name, own))

    def stepped(self) -> None:
        """A step was fired: wake the generic processes (each looks for its moves again)."""
        ev, self.changed = self.changed, simpy.Event(self.env)
        ev.succeed()

    def acting(self, actor: Actor, name: str, own: tuple[str, ...]):
        """The generic process of actor ``name`` (of a kind without a process of its own): it
        fires its enabled moves, normal branch first, each move's fault drawn from the
        component its transitions' row names (``other_fault``), as soon as they are enabled:
        after any step, and at the instants the kind declares (``Actor.instants``), where
        the clock stops for it. It draws from a stream of its own, named as it is."""
        sim, env = self.sim, self.env
        rng = stream(self.seed, name)
        try:
            while not sim.stopped:
                fired = 0
                while sim.step(name, self.other_fault(rng, *own)[1]) is not None:
                    fired += 1
                    if fired >= ACT_LIMIT:
                        raise SimulationError(
                            f"{name} ({actor.kind}) fired {fired} moves at t={env.now}: its moves "
                            "stay enabled after it takes them (a guard its effect does not falsify)")
                waits = [self.changed]
                at = _next_instant(actor, sim.world)
                if at is not None:
                    waits.append(env.timeout(_delay_to(env.now, at)))
                yield env.any_of(waits)
        except Stop:
            return

    # -- arrivals and callers ----------------------------------------------------------------
    def arrivals(self):
        cfg = self.cfg
        env = self.env
        rng = stream(self.seed, "arrivals")
        n = self.sim.n_runs
        k = 0
        while k < n:
            if cfg.arrival_kind == "batch":
                size = n - k if cfg.batch_every <= 0 else min(cfg.batch_size, n - k)
                if k > 0:
                    yield env.timeout(cfg.batch_every)
            else:
                size = 1
                yield env.timeout(rng.expovariate(cfg.rate_per_hour / 3600.0))
            for _ in range(size):
                k += 1
                env.process(self.admit(k))
        env.process(self.drain())
        yield env.timeout(0)

    def drain(self):
        """The simulation ends ``drain_seconds`` after the last arrival at the latest."""
        yield self.env.timeout(self.cfg.drain_seconds)
        if not self.sim.done.triggered:
            self.sim.drained = True  # ended by the drain, not by the last run's archive
            self.sim.done.succeed()

    def admit(self, k: int):
        """Arrival ``k``: wait for a free slot, then the caller starts or enqueues the run."""
        sim, env = self.sim, self.env
        arrival = env.now
        rs = plan(self.cfg, self.seed, k)
        i = yield self.window.free.get()
        sim.world = self.window.admit(sim.world, i, rs, arrival, env.now)
        caller = stream(self.seed, names.caller_process(rs.id))
        name = ENQUEUE_RUN if rs.entry == "queued" else START_RUN
        comp, fault = self.other_fault(caller, name)
        try:
            if comp.waits:
                yield env.timeout(comp.delay(caller))
            sim.step(ActorKind.CALLER, fault, lambda t: t.name == name, run=rs.id)
            if rs.cancels:
                env.process(self.canceller(i, rs.id, caller))
            if rs.requests:
                env.process(self.stranger(i, rs.id))
            if rs.entry == "queued":
                if sim.world.proc(names.enqueue_process(rs.id)) is not None:
                    # sync: the whole run executes in the caller's (web) process
                    yield from self.drive(names.enqueue_process(rs.id), caller, web=self.cfg.transport == SYNC)
            else:
                yield from self.drive(names.caller_process(rs.id), caller, web=True)
            sim.maybe_archive(i)
        except Stop:
            return

    def canceller(self, i: int, rid: str, rng: random.Random):
        sim = self.sim
        yield self.env.timeout(self.cfg.cancel_delay.sample(rng))
        if self.window.slot_of.get(rid) != i or sim.stopped:
            return
        _comp, fault = self.other_fault(rng, CANCEL)
        try:
            sim.step(ActorKind.CALLER, fault, lambda t: t.name == CANCEL, run=rid)
        except Stop:
            return

    def stranger(self, i: int, rid: str):
        """The requests by other principals of the run in slot ``i`` (``RunSpec.requests``):
        after the delay, each one the model enables then, in the model's order; a decision's
        resume is driven to its end (refused at 12.2 step 2 by the access rule, or after the
        claim by gate 2)."""
        sim = self.sim
        rng = stream(self.seed, f"stranger:{rid}")
        yield self.env.timeout(self.cfg.stranger_delay.sample(rng))
        try:
            for _ in STRANGER_REQUESTS:
                if self.window.slot_of.get(rid) != i or sim.stopped:
                    return
                before = {p.name for p in sim.world.procs}
                t = sim.step(ActorKind.CALLER, None, lambda t: t.arg("by") is not None, run=rid)
                if t is None:
                    return
                for name in [p.name for p in sim.world.procs if p.name not in before]:
                    yield from self.drive(name, stream(self.seed, name), web=True)
            sim.maybe_archive(i)
        except Stop:
            return

    def approver(self, i: int, rid: str):
        """A decision on the run in slot ``i``, which has come to await one."""
        sim = self.sim
        rng = stream(self.seed, f"approver:{rid}:{sim.world.resumes[i]}")
        yield self.env.timeout(self.cfg.approval_delay.sample(rng))
        if self.window.slot_of.get(rid) != i or sim.stopped:
            return
        # gate 2: this approver may not run the turn's writes (drawn only when configured)
        np_ = self.cfg.not_permitted_probability
        refused = np_ > 0 and rng.random() < np_
        refused = refused and sim.world.config.policy.approver_gate  # no gate 2 before ADR-133
        _comp, fault = self.other_fault(rng, *DECISIONS)  # none is declared: no draw
        before = {p.name for p in sim.world.procs}
        try:
            t = sim.step(
                ActorKind.CALLER, fault,
                lambda t: t.name in DECISIONS and (t.arg("permitted") is False) == refused,
                run=rid,
            )
            if t is None:
                return
            new = [p.name for p in sim.world.procs if p.name not in before]
            for name in new:
                yield from self.drive(name, stream(self.seed, name), web=True)
            sim.maybe_archive(i)
        except Stop:
            return

    # -- the bus -----------------------------------------------------------------------------
    def deliver(self, slot: int, rid: str, not_before: int):
        """One message of the model: delivered (perhaps duplicated) after the bus's delay."""
        sim, env, bus = self.sim, self.env, self.faults.bus
        rng = stream(self.seed, f"bus:{rid}:{not_before}:{sim.fired}")
        wait = max(0.0, not_before - env.now) + bus.delivery(rng)
        if wait > 0:
            yield env.timeout(wait)
        if sim.stopped:
            return
        if bus.duplicates(rng):
            try:
                sim.step(
                    ActorKind.BUS, None,
                    lambda t: t.name == TransitionName.DUPLICATE_MESSAGE and t.arg("not_before") == not_before,
                    run=rid,
                )
            except Stop:
                return
        self.mailbox.put(Delivery(slot, rid, not_before))

    # -- workers -----------------------------------------------------------------------------
    def worker(self, wk: str):
        rng = stream(self.seed, names.worker_identity(wk))
        while not self.sim.stopped:
            held = _Held()
            try:
                yield from self.serve(wk, rng, held)
            except simpy.Interrupt:  # a crash (crasher)
                held.give_back(self.mailbox)
                try:
                    self.crash(wk)
                except Stop:
                    return
                yield self.env.timeout(self.faults.crashes.restart(rng))
                self.worker_down[wk] = False
            except Stop:
                return

    def serve(self, wk: str, rng: random.Random, held: _Held):
        """Take a delivered message, pick its run up and drive the segment that starts."""
        sim = self.sim
        held.request = self.mailbox.get()
        message = yield held.request
        held.message = message
        held.request = None
        _slot, rid, not_before = message
        comp = self.faults.component(OTHER_TRANSITIONS[PICK_UP].cost)
        if comp.waits:
            yield self.env.timeout(comp.delay(rng))
        _comp, fault = self.other_fault(rng, PICK_UP)
        t = sim.step(
            wk, fault,
            lambda t: t.name == PICK_UP and t.arg("not_before") == not_before, run=rid,
        )
        held.message = None
        if t is None:
            raise SimulationError(f"{wk}: run_queued({rid}, {not_before}) not enabled")
        if sim.world.proc(wk) is not None:
            yield from self.drive(wk, rng, web=False)
        elif rid in self.window.slot_of:
            sim.maybe_archive(self.window.slot_of[rid])

    def crash(self, wk: str) -> None:
        """The crashed worker's segment, if it has one, ends (``crash``)."""
        p = self.sim.world.proc(wk)
        if p is not None:
            self.sim.step(wk, FaultKind.CRASH)
            self.sim.maybe_archive(p.run)

    def crasher(self, wk: str, proc: simpy.Process):
        rng = stream(self.seed, f"crash:{wk}")
        crashes = self.faults.crashes
        while not self.sim.stopped:
            yield self.env.timeout(crashes.next_worker_crash(rng))
            if not self.worker_down[wk] and proc.is_alive:
                self.worker_down[wk] = True
                proc.interrupt(FaultKind.CRASH)

    # -- a model process -----------------------------------------------------------------------
    def drive(self, name: str, rng: random.Random, web: bool):
        """Drive one process of the model (a segment, or an enqueue caller) until it ends.
        Before each step: a stall, and the delay of the component the step touches (``web``:
        the process dies at a drawn time, a web-process crash); then the component's fault."""
        sim, env, window = self.sim, self.env, self.window
        crash_at = self.faults.crashes.web_crash_at(rng, env.now) if web else float("inf")
        stall = self.faults.pauses.stall
        component = sim.components.get
        timeout = env.timeout
        step = sim.step
        while True:
            if sim.stopped:
                raise Stop
            p = sim.world.proc(name)
            if p is None:
                return
            comp = component(p.pc, NOTHING)
            lat = stall(rng, p)
            d = comp.delay(rng, p, sim.world)
            lat += d
            if env.now + lat >= crash_at:
                yield timeout(max(0.0, crash_at - env.now))
                step(name, FaultKind.CRASH)
                return
            if lat > 0:
                yield timeout(lat)
            if d and comp.work:
                window.add_work(p, d)
            fault = self.fault_of(rng, name)
            t = step(name, fault)
            if t is None:
                raise SimulationError(f"{name} at {p.pc!r}: nothing enabled")
            if fault is not None and t.fault == fault:
                rec = window.live.get(p.run)
                if rec is not None:
                    comp.note(rec, p, sim.world, fault)

    # -- the faults of a step ---------------------------------------------------------------------
    def fault_of(self, rng: random.Random, name: str) -> str | None:
        """The fault branch the next step of process ``name`` (a segment, an enqueue caller,
        a reaper) draws: from the component its declaration's cost class names, among the
        kinds it may take in this state (``model.runtime.step_faults``). Every step of every
        process draws here, so a kind declared on a step is drawn wherever that step is."""
        w = self.sim.world
        nxt = next_step(w, name)
        if nxt is None:
            return None
        a, state = nxt
        return self.faults.component(a.cost).draw(rng, step_faults(w, a, state), state, w)

    def other_fault(self, rng: random.Random, *transitions: str) -> tuple[Component, str | None]:
        """The component a transition no process step fires (a caller's command, a worker's
        pick-up, an approver's decision: ``model.steps.OTHER_TRANSITIONS``) touches, named by
        its fault kinds' component, and the fault it draws there; its stream draws the
        component's own fault even when that is off (``always``: the order of those streams
        is so). Several ``transitions``: the one the model enables is one of them (an
        approver's decision), their kinds together."""
        others = [OTHER_TRANSITIONS[n] for n in transitions]
        kinds = tuple(dict.fromkeys(k for o in others for k in o.faults))
        cost = next((o.cost for o in others if o.cost != NONE), NONE)
        comp = self.faults.component(cost)
        return comp, comp.draw(rng, kinds, None, self.sim.world, always=True)

    # -- the reaper ----------------------------------------------------------------------------
    def reaper(self, name: str, phase: float = 0.0):
        """Reaper ``name``: a tick every period (from ``phase`` seconds on: several reapers
        are spread over the period), then its statements on each row the tick returned;
        each statement's fault from the step its declaration names (``fault_of``). Each
        reaper draws from a stream of its own (named as it is)."""
        sim, env = self.sim, self.env
        rng = stream(self.seed, name)
        try:
            if phase:
                yield env.timeout(phase)
            while not sim.stopped:
                yield env.timeout(self.cfg.reaper_period)
                yield env.timeout(self._reaper_wait(rng, name))
                sim.step(name, self.fault_of(rng, name))
                while sim.world.reaper(name) is not None:
                    yield from self.reap_row(rng, name)
        except Stop:
            return

    def _reaper_wait(self, rng: random.Random, name: str) -> float:
        """The seconds the reaper's next statement waits: the run store's latency, for each of
        its statements, its dispatch too (as it always has: the recorded histories draw
        so, though a process's dispatch waits the bus's latency)."""
        return self.faults.store.delay(rng)

    def reap_row(self, rng: random.Random, name: str):
        """Reaper ``name``'s next statement on the current row of its tick (sync: the run the
        reaper reclaimed, executed in the reaper's process)."""
        sim = self.sim
        nested = sim.world.proc(name)
        if nested is not None:
            yield from self.drive(name, rng, web=False)
            sim.maybe_archive(nested.run)
            return
        yield self.env.timeout(self._reaper_wait(rng, name))
        r = sim.world.reaper(name)
        slot = reaper_slot(r) if r is not None else None
        sim.step(name, self.fault_of(rng, name))
        if slot is not None:
            sim.maybe_archive(slot)


def _next_instant(actor: Actor, w: Any) -> int | None:
    """The first instant after the model's clock the actor kind declares it acts at."""
    if actor.instants is None:
        return None
    return min((t for t in actor.instants(w) if t > w.clock), default=None)


def _delay_to(now: float, at: int) -> float:
    """The delay after which simulated time is ``at`` or just past it (never just before:
    the model's clock is its integer part)."""
    delay = max(0.0, at - now)
    while now + delay < at:
        delay = math.nextafter(delay, math.inf)
    return delay


def plan(cfg: SimConfig, seed: int, k: int) -> RunSpec:
    """The run of arrival ``k``, drawn from the stream of its arrival number (the same
    workload under every policy)."""
    rng = stream(seed, f"run:{k}")
    entry = "queued" if rng.random() < cfg.queued_fraction else "interactive"
    names = [n for n, _ in cfg.tool_mix]
    weights = [x for _, x in cfg.tool_mix]
    rounds = cfg.rounds.sample_count(rng)
    answers = []
    for _ in range(rounds):
        calls = tuple(rng.choices(names, weights)[0] for _ in range(cfg.calls_per_round.sample_count(rng)))
        answers.append(Answer("tools", calls))
    answers.append(FINAL_ANSWER)
    decisions = tuple(
        Decision.DENY if rng.random() < cfg.deny_probability else Decision.APPROVE for _ in range(rounds + 2)
    )
    cancels = 1 if cfg.cancel_probability > 0 and rng.random() < cfg.cancel_probability else 0
    if cfg.not_permitted_probability > 0:  # a refused approval spends a decision: more
        decisions += tuple(Decision.DENY if rng.random() < cfg.deny_probability else Decision.APPROVE
                           for _ in range(4))
    # drawn last, and only when configured: the plans of workloads without observers stay
    observer = cfg.observer_fraction > 0 and rng.random() < cfg.observer_fraction
    # after it, on the same terms: requests by other principals ([workload.strangers])
    strangers = cfg.stranger_probability > 0 and rng.random() < cfg.stranger_probability
    return RunSpec(id=f"r{k}", entry=entry, plan=tuple(answers), cap=cfg.cap, cancels=cancels,
                   decisions=decisions, observer=observer,
                   requests=STRANGER_REQUESTS if strangers else ())
