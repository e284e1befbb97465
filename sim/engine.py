"""The model in simulated time: SimPy processes decide WHEN a transition fires and WHICH fault
branch it takes; ``model/`` decides WHAT it does (docs/DESIGN.md, one semantics).

Every step goes through :meth:`Simulation.step`: bring the model clock to ``int(env.now)``
with ``advance_time``, list ``enabled(world, actor)``, pick the transition of the wanted fault
branch (or the normal branch when that fault variant is not enabled), assert it is enabled,
and ``fire`` it. Nothing here re-implements a transition.

The parts, by module:

* sim/processes.py: the processes (run arrivals and callers, the bus, workers, approvers,
  cancelling callers, the reaper, worker crashes), and the driver of one model process;
* sim/faults.py: the environment's components (run store, audit store, provider, tools,
  bus, crashes, pauses), each owning its latencies and the faults it injects; the table
  below says which component each step of a process touches;
* sim/window.py: the run slots, admission, the records and traces of live runs, and the
  archive of finished runs (the World is a window of ``slots`` runs onto the workload);
* sim/checks.py: when the safety properties are checked, and the violations found;
  sim/replay.py: a violation's runs replayed alone (its scenario).

Determinism: no wall clock, no global random state. Each process draws from its own
``random.Random`` seeded from SHA-256 of ``(seed, process name)`` (sim/streams.py); a run's
plan is drawn from the stream of its arrival number, so the same seed gives the same workload
under every policy.
"""

from __future__ import annotations

import gc
from collections import Counter
from typing import Any

import simpy
from failclosed.model import store
from failclosed.model.config import ConfigError, initial_world, principals_of, with_faults
from failclosed.model.policy import Policy, parse_policy
from failclosed.model.rules import approval_bound
from failclosed.model.runtime import GuardFailed, apply, clock_move, enabled, fire
from failclosed.model.state import TERMINAL, WAITING_FOR_APPROVAL, World, replace
from failclosed.model.steps import costs, fault_kinds, injected
from failclosed.model.transition import Transition
from failclosed.model.vocab import FaultKind, OutcomeName, TransitionName

from .checks import Checks
from .config import SimConfig
from .faults import Component, Faults
from .history import History, note
from .invariants import load_safety
from .processes import PRINCIPALS, Processes
from .records import (
    NEVER_DRAWN_RUNS,
    NEVER_DRAWN_WHY,
    SCENARIOS_PER_PROPERTY,
    RunRecord,
    SimulationError,
    Stop,
    Violation,
)
from .replay import Replayer
from .streams import stream
from .window import Window

UNLIMITED_FAULTS = 10**15



GC_YOUNG = 50_000  # allocations between collections of the youngest generation, in a run


class Simulation:
    def __init__(
        self,
        cfg: SimConfig,
        policy: str | None = None,
        seed: int | None = None,
        runs: int | None = None,
        keep_going: bool = False,
        history_path: str | None = None,
        keep_history: bool = False,
        check_every: int = 2000,
        properties: dict[str, object] | None = None,
        crosscheck_every: int = 0,
        check_steps: bool = True,
        defer_stable: bool = True,
        scenarios: int | None = SCENARIOS_PER_PROPERTY,
    ):
        self.cfg = cfg
        self.policy_name = policy or cfg.policy
        self.seed = cfg.seed if seed is None else seed
        self.n_runs = cfg.runs if runs is None else runs
        self.keep_going = keep_going
        self.check_every = check_every
        # tests: every N-th asserted step is also replayed through the validating
        # ``model.apply`` (membership in the unabridged ``enabled(world, actor)``)
        self.crosscheck_every = crosscheck_every
        # check the properties after every step on the projection of each run the step
        # touched, those whose declared inputs the step changed (docs/SIMULATOR.md
        # "Properties"); False leaves only the archive and periodic checks (benchmarks)
        self.check_steps = check_steps
        if properties is None:
            properties, self.properties_source = load_safety()
        else:
            self.properties_source = "given"
        self.history = History(keep=keep_history, path=history_path)
        self.env = simpy.Environment()
        self.policy = _simulated_policy(cfg, self.policy_name)
        self.worker_names = cfg.model.workers
        self.faults = Faults(cfg, self.env, self.seed)
        # the component each step of a process touches (its latency, its faults), by pc: the
        # step table's cost class of each label (model/steps.py)
        self.components: dict[str, Component] = self.faults.by_step(costs())
        self.world = self._initial_world()
        self.window = Window(self.env, cfg.slots)
        self.checks = Checks(properties, self.window, Replayer(self._scenario_table()), self._stop,
                             keep_going=keep_going, check_steps=check_steps, defer_stable=defer_stable,
                             scenarios=scenarios)
        self.procs = Processes(self)
        self.mailbox = self.procs.mailbox
        self.fired = 0  # transitions fired (advance_time included)
        # fault kind -> transitions fired on its fault branch (``model.steps.injected``)
        self.drawn: Counter[str] = Counter()
        # what the runtime refused up front, by transition: without a transport (RUNTIME
        # 6.4) each enqueue (``enqueue_run``) and each reaper tick (``tick_refused``)
        self.refused: Counter[str] = Counter()
        self.checked = 0  # transitions asserted enabled before firing
        self.violations: list[Violation] = []
        self.stopped = False
        # the simulation ended ``runs.drain_seconds`` after the last arrival, with runs still
        # live or waiting for a slot (never admitted: no record), not at the last archive
        self.drained = False
        self.done = self.env.event()
        # called with the number of runs archived so far, after each one (progress reports;
        # it only reads, so the history does not depend on it)
        self.on_archive: Any = None
        # an observer of every fired transition and archived run (sim/export.py's Exporter:
        # ``fired(w, t, w2, now, slot)``, ``archived(world, slot)``); it only reads
        self.observer: Any = None

    @property
    def records(self) -> dict[str, RunRecord]:
        return self.window.records

    @property
    def archived(self) -> int:
        return self.window.archived

    # -- the bounded world ---------------------------------------------------------------
    def _initial_world(self) -> World:
        """The bounded world: the configuration's model ``Config`` under the simulated policy,
        enabling the fault kinds the environment draws (sim/faults.py), with the simulated
        principals when strangers make requests (16.18); every slot free."""
        cfg = self.cfg
        config = replace(cfg.model, policy=self.policy,
                         **({"principals": _SIM_PRINCIPALS} if cfg.stranger_probability > 0 else {}))
        config = with_faults(config, sorted(self.faults.kinds()), self.faults.provider.classes())
        w = initial_world(config, UNLIMITED_FAULTS)
        # a free slot holds no run: mark it started so no caller transition is offered for it
        return replace(w, started=(True,) * cfg.slots)

    def _scenario_table(self) -> dict[str, Any]:
        """The simulated world's configuration as a scenario file writes it (a violation's
        runs replayed alone, sim/replay.py: it sets the runs and the faults they take)."""
        cfg = self.cfg
        table: dict[str, Any] = {
            "policy": self.policy_name,
            "constants": dict(cfg.raw.get("constants", {})),
            "model": {
                "workers": list(self.worker_names),
                "reaper_limit": cfg.reaper_limit,
                **({"reapers": cfg.reapers} if cfg.reapers > 1 else {}),
                "transport": cfg.transport,
                **({"refusals": sorted(cfg.model.refusals)} if cfg.model.refusals else {}),
            },
            "tools": [dict(t.model) for t in cfg.tools],
        }
        if cfg.stranger_probability > 0:  # requests by other principals (16.18)
            table["principals"] = {k: dict(v) for k, v in PRINCIPALS.items()}
        return table

    # -- stepping ------------------------------------------------------------------------
    def _advance(self) -> None:
        now = int(self.env.now)
        if now > self.world.clock:
            t = clock_move(self.world, now)  # fault=pause where a live segment stalls past its lease
            self.world = fire(self.world, t)
            self.fired += 1
            if t.fault is not None:
                self.drawn[t.fault] += 1
            self.history.add(self.env.now, t)

    def step(self, actor: str, fault: str | None = None, pred=None, run: str | None = None) -> Transition | None:
        """Fire one of ``actor``'s enabled transitions: the ``fault`` branch if enabled, else
        the normal branch. ``pred`` narrows the choice (which message), ``run`` lists only
        the transitions of that run (a caller's or a worker's list is then computed for that
        run alone)."""
        if self.stopped:
            raise Stop
        if int(self.env.now) > self.world.clock:
            self._advance()
        w = self.world
        # one order of a reaper tick over tied rows (ties by slot): the first listed, which is
        # the one taken; the full list holds k! orders of k tied rows
        en = enabled(w, actor, one_order=True, run=run)
        chosen = _crash(en, pred) if fault == FaultKind.CRASH else _branch(en, fault, pred)
        if fault is not None and (chosen is None or chosen.fault != fault):
            _undeclared(w, actor, fault)
        if chosen is None:
            return None
        if chosen not in en:  # the online assertion (cheap: en is at hand)
            raise SimulationError(f"{chosen} is not enabled at t={self.env.now}")
        self.checked += 1
        if self.crosscheck_every and self.checked % self.crosscheck_every == 0:
            self._crosscheck(w, actor, chosen, en, run)
        self._fire(w, chosen)
        if self.procs.acting_kinds:  # an actor with the generic process may act now
            self.procs.stepped()
        return chosen

    def _crosscheck(self, w: World, actor: str, chosen: Transition, en: list[Transition], run: str | None) -> None:
        """Tests: the step the simulator took is the one ``model.apply`` validates, and the
        actor's list is the whole world's list filtered to the actor (one tie order)."""
        try:
            w2 = apply(w, chosen)
        except GuardFailed as e:
            raise SimulationError(f"{chosen} is not enabled at t={self.env.now}: {e}") from e
        if w2 != fire(w, chosen):
            raise SimulationError(f"{chosen}: apply and fire disagree at t={self.env.now}")
        if en != [t for t in enabled(w, one_order=True) if t.actor == actor and (run is None or t.arg("run") == run)]:
            raise SimulationError(f"enabled(world, {actor!r}) is not the world's list for {actor}")

    def _fire(self, w: World, t: Transition) -> None:
        w2 = fire(w, t)
        self.world = w2
        self.fired += 1
        kind = injected(t)
        if kind is not None:
            self.drawn[kind] += 1
        if t.name in _REFUSABLE and _refused(w, t, w2):
            self.refused[t.name] += 1
        now = self.env.now
        self.history.add(now, t, note(w, t, w2) if self.history.annotate else None)
        rid = t.arg("run")
        if w2.messages is not w.messages:
            self._new_messages(w, w2)
        i = None
        if t.name == store.FIND_STALE_RUNNING and w2.reaper(t.actor) is not None:
            self.window.note_tick(w2, t, self.fired, now)
        elif rid is not None:
            i = self.window.slot_of.get(rid)
        self.window.count_statement(w, w2, t, i, now)
        if i is not None and self.window.account(w, w2, t, i, self.fired, now):
            self.env.process(self.procs.approver(i, rid))
        if self.observer is not None:
            self.observer.fired(w, t, w2, now, i if i is not None else self.window.slot_of.get(rid))
        if self.check_steps:
            self.checks.after_step(w, w2, i, self.fired, now)
        if i is None:
            return
        r1 = w2.rows[i]
        if (r1 is None or r1.status in TERMINAL) and self.window.finished(w2, i):  # maybe_archive(i)
            self._archive(i)
        if self.fired % self.check_every == 0:
            self.checks.whole_world(self.world, self.fired, now)

    def _new_messages(self, w: World, w2: World) -> None:
        """A delivery process for each message the step sent."""
        # a message is its (run, not_before): count those (cheaper to hash than Messages)
        added = Counter([(m.run, m.not_before) for m in w2.messages])
        added.subtract([(m.run, m.not_before) for m in w.messages])
        for (run, not_before), n in sorted(added.items()):
            rid = w2.config.runs[run].id
            for _ in range(n):
                self.env.process(self.procs.deliver(run, rid, not_before))

    def _stop(self) -> None:
        """Stop at this step (a violation, when not keeping going)."""
        self.stopped = True
        if not self.done.triggered:
            self.done.succeed()

    # -- archive --------------------------------------------------------------------------
    def maybe_archive(self, i: int) -> None:
        if i in self.window.live and self.window.finished(self.world, i):
            self._archive(i)

    def _archive(self, i: int, final: bool = False) -> None:
        """Take the run in slot ``i`` out of the world (``final``: only its record and
        checks, the simulation ends) and check the properties on it."""
        w = self.world
        if self.observer is not None:
            self.observer.archived(w, i)
        closed = self.window.close(w, i, final)
        self.checks.at_archive(closed.projection, closed.culprit, self.fired, self.env.now)
        if final:
            return
        self.world = self.window.release(w, closed)
        if self.on_archive is not None:
            self.on_archive(self.window.archived)
        self.window.free.put(i)
        if self.window.archived >= self.n_runs and not self.done.triggered:
            self.done.succeed()

    # -- run -------------------------------------------------------------------------------
    def run(self) -> Simulation:
        self.procs.start()
        # A step allocates a few dozen short-lived tuples (the next world), so the cyclic
        # collector's youngest generation filled every ~20 steps and its collections took 9 %
        # of the time (benchmarks/bench_sim.py); they are made rarer while the simulation
        # runs, and the process's setting is given back after it.
        threshold = gc.get_threshold()
        gc.set_threshold(max(threshold[0], GC_YOUNG), *threshold[1:])
        try:
            self.env.run(until=self.done)
        except Stop:
            pass
        finally:
            gc.set_threshold(*threshold)
        self._finish()
        return self

    def _finish(self) -> None:
        if not self.stopped:
            self.checks.whole_world(self.world, self.fired, self.env.now)
        for i in sorted(self.window.live):
            self._archive(i, final=True)
        self.violations = self.checks.settle(list(self.window.records.values()))
        self.history.close()

    # -- results ---------------------------------------------------------------------------
    def all_records(self) -> list[RunRecord]:
        return list(self.window.records.values())

    def fault_report(self) -> dict[str, Any]:
        """For each fault kind the simulation enables (``[model] faults`` of its world, in
        declaration order): how often it was drawn, as transitions fired on its fault branch
        (``drawn``); the kinds drawn never (``never_drawn``); and, from ``NEVER_DRAWN_RUNS``
        runs simulated, a ``warning`` naming those (None otherwise, or when every kind was
        drawn)."""
        enabled = self.world.config.faults
        drawn = {k: self.drawn[k] for k in fault_kinds() if k in enabled}
        never = [k for k, n in drawn.items() if n == 0]
        runs = len(self.window.records)
        warning = None
        if never and runs >= NEVER_DRAWN_RUNS:
            warning = (f"enabled but never drawn in {runs:,} runs: {', '.join(never)} "
                       f"({NEVER_DRAWN_WHY})")
        return {"drawn": drawn, "never_drawn": never, "warning": warning}


def _simulated_policy(cfg: SimConfig, name: str) -> Policy:
    """The policy ``name`` (the configuration's, or ``--policy``), which must have a queue
    when the workload queues runs."""
    pol = parse_policy(name)
    if cfg.queued_fraction > 0 and not pol.queue:
        raise ConfigError(
            f"workload.queued_fraction: policy {name!r} has no queue; set it to 0 or pick adr-102 or later"
        )
    return pol


def _crash(en: list[Transition], pred) -> Transition | None:
    """The first enabled ``crash`` that ``pred`` admits."""
    for t in en:
        if t.name == TransitionName.CRASH and (pred is None or pred(t)):
            return t
    return None


# the transitions the runtime may refuse up front (RUNTIME 6.4), counted in ``refused``
_REFUSABLE = frozenset({store.ENQUEUE_RUN, TransitionName.TICK_REFUSED})


def _refused(w: World, t: Transition, w2: World) -> bool:
    """``t`` was refused up front: a reaper's tick without a transport, or an enqueue that
    ended EnqueueFailed with nothing stored (no transport)."""
    if t.name == TransitionName.TICK_REFUSED:
        return True
    return len(w2.outcomes) > len(w.outcomes) and w2.outcomes[-1].outcome == OutcomeName.ENQUEUE_FAILED


def _undeclared(w: World, actor: str, fault: str) -> None:
    """A drawn fault with no enabled branch is taken as the normal branch only where the step
    cannot take that fault (the step table does not declare it for the step): one the model
    configuration does not enable is a simulator error (a component draws a kind its
    ``kinds()`` does not name), never a silent normal branch."""
    config = w.config
    if fault == FaultKind.CRASH or fault in config.faults or fault in config.provider_faults:
        return
    raise SimulationError(
        f"{actor} drew the fault {fault!r}, which the model configuration does not enable: "
        "name it in the kinds() of the component that draws it (sim/faults.py)")


def _branch(en: list[Transition], fault: str | None, pred) -> Transition | None:
    """The first enabled transition of the ``fault`` branch that ``pred`` admits, else the
    first of the normal branch (a crash is never taken here)."""
    normal = None
    for t in en:
        if t.name == TransitionName.CRASH or (pred is not None and not pred(t)):
            continue
        f = t.fault
        if f is None:
            if fault is None:
                return t  # the first normal branch is the one taken
            if normal is None:
                normal = t
        elif f == fault:
            return t
    return normal


def approval_bound_tools(cfg: SimConfig, policy: str) -> list[str]:
    """The tools that suspend a run for approval under ``policy`` (for reports)."""
    config = replace(cfg.model, policy=parse_policy(policy))
    return [t.name for t in config.tools if approval_bound(config, frozenset(), t.name)]


# the simulated principals (sim/processes.py PRINCIPALS), read once by the model's reader
_SIM_PRINCIPALS = principals_of({"principals": PRINCIPALS})


__all__ = ["RunRecord", "Simulation", "SimulationError", "Violation",
           "WAITING_FOR_APPROVAL", "approval_bound_tools", "stream"]
