"""The environment's components, each owning the latencies it adds and the faults it injects
(as in TigerBeetle's VOPR: a fault belongs to the component it breaks).

Before each step of a model process, the driver (sim/processes.py) asks the component that
step touches (the engine's table from the process's next step, ``pc``, to its component)
for the seconds the step takes there (``delay``), waits them out, and then asks it which
fault branch the step takes (``draw``; None is the normal branch): the component's own kinds
(``fault``), where the step may take one, then each ``[faults]`` kind the step may take
(``extra``). Every actor's steps draw so (sim/processes.py ``fault_of``, ``other_fault``). A
component draws from the stream of the process that steps, so the order of its draws is part
of the history: each method says when it draws.

* :class:`RunStore`: every run-store statement (the steps of cost ``STORE``; a caller's insert, a worker's
  pick-up, the reaper's scan): latency, ``store_error``.
* :class:`AuditStore`: audit inserts (cost ``AUDIT``): latency, ``audit_insert_fails`` (drawn,
  or always during a scheduled outage or a random one of its flapping process), and
  ``ambiguous_commit`` of ``persist``.
* :class:`Provider`: the provider call: its latency is work (a segment's busy time); the
  concrete error drawn from ``failure_mix`` fires as the class ``classify`` gives it.
* :class:`Tools`: a tool call: the tool's latency (work) and ``tool_error``; the error named
  by the tool's ``error_mix`` is drawn on a stream of its own (it changes nothing else).
* :class:`Bus`: the enqueue's dispatch (latency, ``dispatch_fails``), and the delivery of a
  message (delay, ``duplicate_message``).
* :class:`Crashes`: worker crashes and restarts, web-process crashes (a drive's deadline).
* :class:`Pauses`: a stall before a step (not of an enqueue, not before ``settle``).

:meth:`Faults.kinds` gives the model's fault kinds the configured components may inject
(``[model] faults`` of the simulated world).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import simpy
from failclosed.model.state import ENQUEUE, Proc, World
from failclosed.model.steps import (
    ACTIONS,
    AUDIT,
    DISPATCH,
    NONE,
    PROVIDER,
    SETTLE,
    STORE,
    TOOL,
)
from failclosed.model.vocab import FaultKind

from .config import KNOBS, SimConfig
from .records import RunRecord
from .streams import stream


def _may_commit_ambiguously(proc: Proc) -> bool:
    """The step the process is at may take an ambiguous commit (the step table's faults)."""
    a = ACTIONS.get(proc.pc)
    return a is not None and FaultKind.AMBIGUOUS_COMMIT in a.faults


def _knobs(*kinds: str) -> dict[str, str]:
    """The kinds a component draws from knobs of its own, each with its knob (sim/config.py
    ``KNOBS``: a kind missing there fails at import)."""
    return {k: KNOBS[k] for k in kinds}


class Component:
    """A part of the environment a step can touch. The default touches nothing: no delay, no
    fault of its own, no draw; it still draws the ``[faults]`` kinds a step may take
    (``extra``), as every component does."""

    work = False  # the delay is provider or tool work (a segment's busy time), not a wait
    waits = False  # a caller's or a worker's pick-up waits out ``delay`` (a latency not fixed at 0)
    # the kinds this component draws from distributions of its own -> the knob that sets them
    owns: dict[str, str] = {}
    # the [faults] kinds (sim/config.py): (kind, probability at a step that may take it)
    extra: tuple[tuple[str, float], ...] = ()

    def kinds(self) -> set[str]:
        """The model's fault kinds this component may inject as configured."""
        return set()

    def draw(self, rng: random.Random, may: tuple[str, ...], proc: Any = None, world: World | None = None,
             always: bool = False) -> str | None:
        """The fault branch a step takes here (None: the normal branch), ``may``: the kinds the
        step may take now (the step table's ``faults`` / ``faults_now``). First the
        component's own kinds (``fault``; ``always``: ``fault_drawn``), drawn only when the
        step may take one of them; then, when that drew none, each ``[faults]`` kind the step
        may take, one draw each, in the table's order. A step that may take none of them
        draws nothing, so a kind no configuration sets changes no stream."""
        f = None
        if not self.owns.keys().isdisjoint(may):
            f = self.fault_drawn(rng) if always else self.fault(rng, proc, world)
        if f is None:
            for kind, p in self.extra:
                if kind in may and rng.random() < p:
                    return kind
        return f

    def fault_drawn(self, rng: random.Random) -> str | None:
        """The component's own fault for a step whose stream draws it even when it is off
        (``RunStore``); elsewhere ``fault``."""
        return self.fault(rng)

    def delay(self, rng: random.Random, proc: Proc | None = None, world: World | None = None) -> float:
        return 0.0

    def fault(self, rng: random.Random, proc: Proc | None = None, world: World | None = None) -> str | None:
        return None

    def note(self, rec: RunRecord, proc: Proc, world: World, fault: str) -> None:
        """Record in the run's record the failure the step just took (``fault``)."""


NOTHING = Component()  # what a step that touches no component touches


class RunStore(Component):
    owns = _knobs(FaultKind.STORE_ERROR)

    def __init__(self, cfg: SimConfig):
        self.p = cfg.store_error_probability
        self.latency = cfg.store_latency
        # a caller's insert and a worker's pick-up wait only for a latency that is not a fixed 0
        self.waits = cfg.store_latency.kind != "fixed" or cfg.store_latency.a > 0

    def kinds(self) -> set[str]:
        return {FaultKind.STORE_ERROR} if self.p > 0 else set()

    def delay(self, rng: random.Random, proc: Proc | None = None, world: World | None = None) -> float:
        return self.latency.sample(rng)

    def fault(self, rng: random.Random, proc: Proc | None = None, world: World | None = None) -> str | None:
        """Draws only when store errors are configured."""
        p = self.p
        return FaultKind.STORE_ERROR if p and rng.random() < p else None

    def fault_drawn(self, rng: random.Random) -> str | None:
        """Draws even when store errors are off (a caller's and a worker's pick-up: their
        streams' order is fixed so)."""
        return FaultKind.STORE_ERROR if rng.random() < self.p else None


class AuditStore(Component):
    owns = _knobs(FaultKind.AUDIT_INSERT_FAILS, FaultKind.AMBIGUOUS_COMMIT)

    def __init__(self, cfg: SimConfig, env: simpy.Environment, seed: int):
        self.env = env
        self.seed = seed
        self.p_fail = cfg.audit_failure_probability
        self.p_ambiguous = cfg.ambiguous_commit_probability
        self.latency = cfg.audit_latency
        self.outages = cfg.audit_outages  # (start, duration), by start
        self.mean_up = cfg.audit_mean_up
        self.mean_down = cfg.audit_mean_down
        self.down = False  # in a random outage (the flapping process)

    def kinds(self) -> set[str]:
        out = set()
        if self.p_fail > 0 or self.outages or self.mean_up > 0:
            out.add(FaultKind.AUDIT_INSERT_FAILS)
        if self.p_ambiguous > 0:
            out.add(FaultKind.AMBIGUOUS_COMMIT)
        return out

    def delay(self, rng: random.Random, proc: Proc | None = None, world: World | None = None) -> float:
        return self.latency.sample(rng)

    def fault(self, rng: random.Random, proc: Proc | None = None, world: World | None = None) -> str | None:
        """No draw while the store is down; else one, which also decides an ambiguous commit
        of ``persist``."""
        if self.down or self.in_outage():
            return FaultKind.AUDIT_INSERT_FAILS
        r = rng.random()
        if r < self.p_fail:
            return FaultKind.AUDIT_INSERT_FAILS
        if proc is not None and r < self.p_fail + self.p_ambiguous and _may_commit_ambiguously(proc):
            return FaultKind.AMBIGUOUS_COMMIT
        return None

    def in_outage(self) -> bool:
        now = self.env.now
        for start, dur in self.outages:
            if start <= now < start + dur:
                return True
            if start > now:
                break
        return False

    @property
    def flaps(self) -> bool:
        return self.mean_up > 0

    def flapping(self):
        """The process of random outages: exponential up and down times."""
        rng = stream(self.seed, "audit_store")
        while True:
            yield self.env.timeout(rng.expovariate(1.0 / self.mean_up))
            self.down = True
            yield self.env.timeout(rng.expovariate(1.0 / self.mean_down))
            self.down = False


class Provider(Component):
    work = True
    owns = _knobs(FaultKind.PROVIDER_ERROR)

    def __init__(self, cfg: SimConfig):
        self.p = cfg.provider_failure_probability
        self.latency = cfg.provider_latency
        self.errors = [err for err, _ in cfg.failure_mix]
        self.weights = [x for _, x in cfg.failure_mix]
        self.classify = cfg.failure_class  # classify(error): the class the model fires
        self.drawn = ""  # the concrete error ``fault`` drew last

    def classes(self) -> list[str]:
        """The classes the drawn errors classify as, in the order of the mix (the model's
        ``provider_faults``)."""
        return list(dict.fromkeys(self.classify[err] for err in self.errors)) if self.p > 0 else []

    def delay(self, rng: random.Random, proc: Proc | None = None, world: World | None = None) -> float:
        return self.latency.sample(rng)

    def fault(self, rng: random.Random, proc: Proc | None = None, world: World | None = None) -> str | None:
        """Draws only when provider failures are configured; a failure draws its error."""
        p = self.p
        if p and rng.random() < p:
            err = rng.choices(self.errors, self.weights)[0]
            self.drawn = err
            return self.classify[err]
        return None

    def note(self, rec: RunRecord, proc: Proc, world: World, fault: str) -> None:
        rec.provider_errors.append((self.drawn, fault))


class Tools(Component):
    work = True
    owns = _knobs(FaultKind.TOOL_ERROR)

    def __init__(self, cfg: SimConfig, seed: int):
        self.seed = seed
        self.conf: dict[str, Any] = {}
        for t in cfg.tools:
            self.conf.setdefault(t.name, t)

    def kinds(self) -> set[str]:
        return {FaultKind.TOOL_ERROR} if any(t.error_probability > 0 for t in self.conf.values()) else set()

    @staticmethod
    def called(proc: Proc, world: World) -> str:
        """The tool the process calls at its ``invoke`` step."""
        return world.config.runs[proc.run].answer(proc.turn).calls[proc.call]

    def delay(self, rng: random.Random, proc: Proc | None = None, world: World | None = None) -> float:
        """No draw for a tool the simulation does not configure."""
        conf = self.conf.get(self.called(proc, world))
        return 0.0 if conf is None else conf.latency.sample(rng)

    def fault(self, rng: random.Random, proc: Proc | None = None, world: World | None = None) -> str | None:
        conf = self.conf.get(self.called(proc, world))  # type: ignore[arg-type]
        if conf is None:
            return None
        pe = conf.error_probability
        return FaultKind.TOOL_ERROR if pe and rng.random() < pe else None

    def note(self, rec: RunRecord, proc: Proc, world: World, fault: str) -> None:
        """The error the tool's ``error_mix`` names, drawn from a stream of its own so that
        naming the errors changes nothing else in the history."""
        tool = self.called(proc, world)
        conf = self.conf.get(tool)
        mix = conf.error_mix if conf is not None else ()
        if not mix:
            rec.tool_errors.append((tool, "", ""))
            return
        rng = stream(self.seed, f"tool-error:{proc.seg}:{proc.turn}:{proc.call}:{len(rec.tool_errors)}")
        k = rng.choices(range(len(mix)), [weight for _, _, weight in mix])[0]
        error, cls, _weight = mix[k]
        rec.tool_errors.append((tool, error, cls))


class Bus(Component):
    owns = _knobs(FaultKind.DISPATCH_FAILS, FaultKind.DUPLICATE_MESSAGE)

    def __init__(self, cfg: SimConfig):
        self.p_dispatch = cfg.dispatch_failure_probability
        self.dispatch_latency = cfg.dispatch_latency
        self.delivery_delay = cfg.delivery_delay
        self.p_duplicate = cfg.duplicate_probability

    def kinds(self) -> set[str]:
        out = set()
        if self.p_dispatch > 0:
            out.add(FaultKind.DISPATCH_FAILS)
        if self.p_duplicate > 0:
            out.add(FaultKind.DUPLICATE_MESSAGE)
        return out

    def delay(self, rng: random.Random, proc: Proc | None = None, world: World | None = None) -> float:
        return self.dispatch_latency.sample(rng)

    def fault(self, rng: random.Random, proc: Proc | None = None, world: World | None = None) -> str | None:
        """The dispatch; draws only when dispatch failures are configured."""
        d = self.p_dispatch
        return FaultKind.DISPATCH_FAILS if d and rng.random() < d else None

    def delivery(self, rng: random.Random) -> float:
        return self.delivery_delay.sample(rng)

    def duplicates(self, rng: random.Random) -> bool:
        """Whether a delivered message is also duplicated; draws only when configured."""
        p = self.p_duplicate
        return p > 0 and rng.random() < p


class Crashes(Component):
    owns = _knobs(FaultKind.CRASH)

    def __init__(self, cfg: SimConfig):
        self.worker_rate = cfg.worker_crash_rate  # per hour
        self.web_rate = cfg.web_crash_rate
        self.restart_delay = cfg.restart_delay

    def kinds(self) -> set[str]:
        return {FaultKind.CRASH} if self.worker_rate > 0 or self.web_rate > 0 else set()

    def web_crash_at(self, rng: random.Random, now: float) -> float:
        """When a web process started ``now`` crashes (inf: never); draws only when web
        crashes are configured."""
        if self.web_rate > 0:
            return now + rng.expovariate(self.web_rate / 3600.0)
        return float("inf")

    def next_worker_crash(self, rng: random.Random) -> float:
        return rng.expovariate(self.worker_rate / 3600.0)

    def restart(self, rng: random.Random) -> float:
        return self.restart_delay.sample(rng)


class Pauses(Component):
    owns = _knobs(FaultKind.PAUSE, FaultKind.SLOW_OPERATION)

    def __init__(self, cfg: SimConfig):
        self.p = cfg.pause_probability
        self.duration = cfg.pause_duration

    def kinds(self) -> set[str]:
        return {FaultKind.SLOW_OPERATION, FaultKind.PAUSE}  # simulated time is physical: lapses happen

    def stall(self, rng: random.Random, proc: Proc) -> float:
        """Seconds a process stalls before its next step; draws only when pauses are
        configured, and not for an enqueue or before ``settle``."""
        p = self.p
        if p > 0 and proc.pc != SETTLE and proc.kind != ENQUEUE and rng.random() < p:
            return self.duration.sample(rng)
        return 0.0


class Faults:
    """The simulated environment's components."""

    def __init__(self, cfg: SimConfig, env: simpy.Environment, seed: int):
        self.store = RunStore(cfg)
        self.audit = AuditStore(cfg, env, seed)
        self.provider = Provider(cfg)
        self.tools = Tools(cfg, seed)
        self.bus = Bus(cfg)
        self.crashes = Crashes(cfg)
        self.pauses = Pauses(cfg)
        self.local = Component()  # local work (cost NONE: the observer hook)
        # the component each cost class names (model/steps.py COST_CLASSES)
        self.by_cost: dict[str, Component] = {
            STORE: self.store, AUDIT: self.audit, PROVIDER: self.provider, TOOL: self.tools,
            DISPATCH: self.bus, NONE: self.local}
        extra = tuple((k, p) for k, p in cfg.fault_probabilities if p > 0)
        for c in self.by_cost.values():
            c.extra = extra
        self.extra = extra

    def kinds(self) -> set[str]:
        """The model's fault kinds (``[model] faults``) of the configured components, and the
        ``[faults]`` kinds; the provider's classes are the model's ``provider_faults``
        (:meth:`Provider.classes`)."""
        out: set[str] = {k for k, _ in self.extra}
        for c in (self.store, self.audit, self.provider, self.tools, self.bus, self.crashes, self.pauses):
            out |= c.kinds()
        return out

    def component(self, cost: str) -> Component:
        """The component a step of cost class ``cost`` touches (its latency and its faults)."""
        return self.by_cost.get(cost, NOTHING)

    def by_step(self, costs: Mapping[str, str]) -> dict[str, Component]:
        """The component each step of a process touches, by the step's ``pc``, from its cost
        class (``model.steps``); local work touches ``local`` (no delay, no fault of its own)."""
        return {pc: self.component(c) for pc, c in costs.items()}
