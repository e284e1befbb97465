"""The model in simulated time: SimPy processes that decide WHEN a transition fires and
WHICH fault branch it takes; ``model/`` decides WHAT it does (docs/DESIGN.md, one semantics).

Every step goes through :meth:`Simulation._step`: bring the model clock to ``int(env.now)``
with ``advance_time``, list ``enabled(world, actor)``, pick the transition of the wanted fault
branch (or the normal branch when that fault variant is not enabled), assert it is enabled,
and ``fire`` it. Nothing here re-implements a transition.

Processes: run arrivals (queued: ``enqueue_run``; interactive: ``start_run``), the enqueue
caller's dispatch, the message bus (delivery delay, duplicates), N workers (pick-up
``run_queued`` then the queued-worker segment), interactive and resume segments, approvers,
cancelling callers, the reaper, worker crashes and restarts, pauses (stalls before a step),
and the audit store's outage process.

Windowing. The model's ``World`` refers to runs by index into a static ``Config.runs``. For
scale the simulator pre-sizes a pool of run *slots*: an arriving run takes a free slot (its
``RunSpec`` is swapped into the spec: ``replace(world, config=...)``; the spec takes no part in
equality), and a finished run (terminal row, no process or message refers to it) is
*archived*: its row, events, ledger entries, outcomes and marks are taken out of the world
for metrics and the slot is freed. Runs never interact through anything but shared
processes (workers, reaper, bus), so this is a window onto the same semantics, not a change
of it: every fired transition is still enabled in the world it fires in. An arrival that finds
no free slot waits (admission wait, reported separately from queue wait).

Determinism: no wall clock, no global random state. Each process draws from its own
``random.Random`` seeded from SHA-256 of ``(seed, process name)``; a run's plan is drawn from
the stream of its arrival number, so the same seed gives the same workload under every policy.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import simpy
from failclosed.model.config import initial_world, load_world, parse_config
from failclosed.model.policy import parse_policy
from failclosed.model.rules import approval_bound
from failclosed.model.runtime import GuardFailed, apply, clock_move, enabled, fire
from failclosed.model.state import (
    AWAITING,
    ENQUEUE,
    FINAL_ANSWER,
    RUNNING,
    TERMINAL,
    WAITING_FOR_APPROVAL,
    Answer,
    RunSpec,
    World,
    replace,
)
from failclosed.model.steps import AUDIT, STORE, labels_with_cost
from failclosed.model.transition import Transition
from failclosed.spec.engine import FieldReads

from .config import SimConfig
from .history import History, note
from .invariants import RunItems, failing, load_safety, project

UNLIMITED_FAULTS = 10**15

# the labels whose step waits on a store statement / an audit insert (model/steps.py's cost
# classes): they take the store's / the audit store's latency and faults
STORE_PCS = labels_with_cost(STORE)
AUDIT_PCS = labels_with_cost(AUDIT)


def stream(seed: int, name: str) -> random.Random:
    """An independent, reproducible random stream for one process."""
    h = hashlib.sha256(f"{seed}\x00{name}".encode()).digest()
    return random.Random(int.from_bytes(h[:8], "big"))


class SimulationError(AssertionError):
    """A chosen transition was not enabled: a bug in the simulator, never in the run."""


class _Stop(Exception):
    pass


@dataclass
class RunRecord:
    """One logical run, as archived (or as left at the end of the simulation)."""

    id: str
    entry: str
    arrival: float
    spec: RunSpec
    admitted: float = 0.0
    first_claim: float | None = None
    terminal_at: float | None = None
    finished: bool = False
    status: str = ""
    reason: str = ""
    error_class: str = ""
    requeues: int = 0
    attempts: int = 0
    applications: list[tuple[int, int, str, str, str, bool]] = field(default_factory=list)
    outcomes: list[tuple[str, str, str]] = field(default_factory=list)  # (seg, kind, OUTCOME)
    reaped_alive: int = 0
    renewals: int = 0
    wasted: float = 0.0  # provider + tool seconds of segments that ended LEASE_LOST
    busy: float = 0.0  # provider + tool seconds of all segments
    violations: list[str] = field(default_factory=list)
    # the failures the run met, as drawn: (error, class) of a provider call; (tool, error,
    # class) of a tool call ("" error and class: the tool's error_mix is not given)
    provider_errors: list[tuple[str, str]] = field(default_factory=list)
    tool_errors: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class Violation:
    property: str
    runs: list[str]
    time: float
    scenario: dict[str, Any] | None = None  # {"config": ..., "steps": [...]} of the affected runs


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
        self.props = properties
        # the World fields each property reads (spec.properties.Property.reads; None or
        # missing: all): a step that leaves them untouched cannot change its verdict
        self._reads = FieldReads({n: p.reads for n, p in properties.items()
                                  if getattr(p, "reads", None)})
        # Checks by kind. A stable property (spec.properties.Property.stable: once violated
        # on a run, violated until the run is archived) is checked when the run is archived,
        # and its violation is dated back to the step that made it (_date_back), unless the
        # simulation stops at its first violation: the stop must come at that very step, so
        # then every property is checked after every step. A transient one is checked after
        # every step. The violation records are the same either way.
        # (``defer_stable=False``: every property after every step, for comparison)
        self._deferred = {n for n, p in properties.items() if check_steps and defer_stable
                          and keep_going and getattr(p, "stable", False)}
        self._order = {n: k for k, n in enumerate(properties)}
        self._events, self._ledger = RunItems(), RunItems()  # the projections' own parts
        self._read_masks = [(n, p, self._reads.mask.get(n, -1)) for n, p in properties.items()
                            if n not in self._deferred]
        self.history = History(keep=keep_history, path=history_path)
        self.env = simpy.Environment()
        pol = parse_policy(self.policy_name)
        self.policy = pol
        if cfg.queued_fraction > 0 and not pol.queue:
            from failclosed.model.config import ConfigError

            raise ConfigError(
                f"workload.queued_fraction: policy {self.policy_name!r} has no queue; set it to 0 or pick adr-102 or later"
            )
        self.worker_names = tuple(f"w{k + 1}" for k in range(cfg.workers))
        self.world = self._initial_world()
        self.slot_of: dict[str, int] = {}
        self.free = simpy.Store(self.env)
        for i in range(cfg.slots):
            self.free.put(i)
        self.mailbox = simpy.Store(self.env)  # deliverable message tokens (slot, run id, not_before)
        self.records: dict[str, RunRecord] = {}
        self.live: dict[int, RunRecord] = {}
        # per live run: (fired #, model clock, transition, simulated time) of its steps
        self.trace: dict[int, list[tuple[int, int, Transition, float]]] = {}
        self.archived = 0
        self.fired = 0  # transitions fired (advance_time included)
        self.checked = 0  # transitions asserted enabled before firing
        self.violations: list[Violation] = []
        # (sort key, violation, [(record, trace, steps of it)]): ordered and given their
        # scenarios when the simulation ends (a stable one is found late, dated back)
        self._found: list[tuple[tuple, Violation, list]] = []
        self._seen_violation: set[tuple[str, str]] = set()
        self.stopped = False
        self.done = self.env.event()
        self.audit_down = False
        self.worker_down: dict[str, bool] = {}
        self._segment_busy: dict[str, float] = {}
        # called with the number of runs archived so far, after each one (progress reports;
        # it only reads, so the history does not depend on it)
        self.on_archive: Any = None
        self._drawn = ""  # the concrete provider error _fault drew last

    # -- the bounded world ---------------------------------------------------------------
    def _initial_world(self) -> World:
        cfg = self.cfg
        faults = set()
        if cfg.store_error_probability > 0:
            faults.add("store_error")
        if cfg.audit_failure_probability > 0 or cfg.audit_outages or cfg.audit_mean_up > 0:
            faults.add("audit_insert_fails")
        if cfg.ambiguous_commit_probability > 0:
            faults.add("ambiguous_commit")
        if cfg.dispatch_failure_probability > 0:
            faults.add("dispatch_fails")
        if cfg.worker_crash_rate > 0 or cfg.web_crash_rate > 0:
            faults.add("crash")
        if any(t.error_probability > 0 for t in cfg.tools):
            faults.add("tool_error")
        if cfg.duplicate_probability > 0:
            faults.add("duplicate_message")
        faults |= {"slow_operation", "pause"}  # simulated time is physical: lapses happen
        # the classes the drawn errors classify as (the per-class form: the mix's own keys)
        provider_faults = (list(dict.fromkeys(cfg.failure_class[k] for k, _ in cfg.failure_mix))
                           if cfg.provider_failure_probability > 0 else [])
        self.model_config: dict[str, Any] = {
            "policy": self.policy_name,
            "constants": dict(cfg.constants),
            "model": {
                "workers": list(self.worker_names),
                "faults": sorted(faults),
                "provider_faults": provider_faults,
                "reaper_limit": cfg.reaper_limit,
                "transport": cfg.transport,
                # gate 2 (12.2 step 8): approvers who may not run the turn's writes
                **({"refusals": ["ApproverNotPermitted"]} if cfg.not_permitted_probability > 0 else {}),
            },
            "tools": [dict(t.model) for t in cfg.tools],
        }
        data = dict(self.model_config)
        data["model"] = dict(data["model"], fault_budget=0)
        data["runs"] = [{"id": f"_slot{i}", "entry": "queued"} for i in range(cfg.slots)]
        spec, _ = parse_config(data)
        w = initial_world(spec, UNLIMITED_FAULTS)
        # a free slot holds no run: mark it started so no caller transition is offered for it
        return replace(w, started=(True,) * cfg.slots)

    # -- stepping ------------------------------------------------------------------------
    def _advance(self) -> None:
        now = int(self.env.now)
        if now > self.world.clock:
            t = clock_move(self.world, now)  # fault=pause where a live segment stalls past its lease
            self.world = fire(self.world, t)
            self.fired += 1
            self.history.add(self.env.now, t)

    def _step(self, actor: str, fault: str | None = None, pred=None, run: str | None = None) -> Transition | None:
        """Fire one of ``actor``'s enabled transitions: the ``fault`` branch if enabled, else
        the normal branch. ``pred`` narrows the choice (which message), ``run`` lists only
        the transitions of that run (a caller's or a worker's list is then computed for that
        run alone)."""
        if self.stopped:
            raise _Stop
        if int(self.env.now) > self.world.clock:
            self._advance()
        w = self.world
        # one order of a reaper tick over tied rows (ties by slot): the first listed, which is
        # the one taken; the full list holds k! orders of k tied rows
        en = enabled(w, actor, one_order=True, run=run)
        normal = None
        chosen = None
        if fault == "crash":
            for t in en:
                if t.name == "crash" and (pred is None or pred(t)):
                    chosen = t
                    break
        else:
            for t in en:
                if t.name == "crash" or (pred is not None and not pred(t)):
                    continue
                f = None
                for k, v in t.args:
                    if k == "fault":
                        f = v
                        break
                if f is None:
                    if normal is None:
                        normal = t
                        if fault is None:
                            break  # the first normal branch is the one taken
                elif f == fault:
                    chosen = t
                    break
        if chosen is None:
            chosen = normal
        if chosen is None:
            return None
        if chosen not in en:  # the online assertion (cheap: en is at hand)
            raise SimulationError(f"{chosen} is not enabled at t={self.env.now}")
        self.checked += 1
        if self.crosscheck_every and self.checked % self.crosscheck_every == 0:
            self._crosscheck(w, actor, chosen, en, run)
        self._fire(w, chosen)
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
        self.history.add(self.env.now, t, note(w, t, w2) if self.history.annotate else None)
        rid = t.arg("run")
        if w2.messages is not w.messages:
            self._new_messages(w, w2)
        i = None
        if t.name == "find_stale_running" and w2.reaper is not None:
            for row in w2.reaper.rows:
                tr = self.trace.get(row[0])
                if tr is not None:
                    tr.append((self.fired, w2.clock, t, self.env.now))
        elif rid is not None:
            i = self.slot_of.get(rid)
        if i is not None:
            self._account(w, w2, t, i, rid)
        if self.check_steps:
            self._check_step(w, w2, i)
        if i is None:
            return
        r1 = w2.rows[i]
        if (r1 is None or r1.status in TERMINAL) and self._finished(i):  # _maybe_archive(i)
            self._archive(i)
        if self.fired % self.check_every == 0:
            self._check_world()

    def _account(self, w: World, w2: World, t: Transition, i: int, rid: str) -> None:
        """The run's trace and record after one of its transitions."""
        self.trace[i].append((self.fired, w2.clock, t, self.env.now))
        rec = self.live[i]
        r0, r1 = w.rows[i], w2.rows[i]
        if r1 is not None and r1 is not r0:
            if rec.first_claim is None and r1.status == RUNNING and t.name == "claim_queued":
                rec.first_claim = self.env.now
            if r1.status in TERMINAL and rec.terminal_at is None:
                rec.terminal_at = self.env.now
            if r1.status in AWAITING and (r0 is None or r0.status not in AWAITING):
                self.env.process(self._approver(i, rid))
            if (
                t.name in ("requeue_stale", "dead_letter_stale")  # not a run nested in the reaper
                and r0 is not None
                and r0.status == RUNNING
                and r1.status != RUNNING
                and any(p.run == i and p.kind != ENQUEUE for p in w2.procs)
            ):
                rec.reaped_alive += 1
        if t.name == "renew_lease" and t.fault is None:
            rec.renewals += 1
        if len(w2.outcomes) > len(w.outcomes):
            for seg, run, kind, out in w2.outcomes[len(w.outcomes):]:
                r = self.live.get(run)
                if r is None:
                    continue
                busy = self._segment_busy.pop(seg, 0.0)
                if out == "LEASE_LOST":
                    r.wasted += busy
                r.outcomes.append((seg, kind, out))

    def _check_step(self, w: World, w2: World, i: int | None) -> None:
        """The properties on the projection of every live run this step may have changed:
        the run the transition names, and the runs at the reaper's current row before and
        after when the reaper's state moved (a projection holds the reaper while its current
        row is the run's). Other runs' projections are unchanged but for the clock, which no
        safety property reads; the periodic whole-world check stays as a net."""
        slots = [] if i is None else [i]
        if w2.reaper is not w.reaper:
            for r in (w.reaper, w2.reaper):
                if r is not None:
                    j = r.rows[r.idx][0]
                    if j in self.live and j not in slots:
                        slots.append(j)
        if not slots:
            return
        changed = self._reads.changed(w, w2)
        props = {name: p for name, p, m in self._read_masks if m & changed}
        if not props:
            return
        for j in slots:
            rec = self.live[j]
            pw = project(w2, j, self._events.of(w2.events, j), self._ledger.of(w2.ledger, j))
            for name in failing(props, pw):
                if (name, rec.id) not in self._seen_violation:
                    self._violation(name, [(j, rec.id, rec, self.trace[j])],
                                    key=(self.fired, j != i, self._order[name]))

    def _new_messages(self, w: World, w2: World) -> None:
        # a message is its (run, not_before): count those (cheaper to hash than Messages)
        added = Counter([(m.run, m.not_before) for m in w2.messages])
        added.subtract([(m.run, m.not_before) for m in w.messages])
        for (run, not_before), n in sorted(added.items()):
            rid = w2.config.runs[run].id
            for _ in range(n):
                self.env.process(self._deliver(run, rid, not_before))

    # -- archive --------------------------------------------------------------------------
    def _finished(self, i: int) -> bool:
        w = self.world
        row = w.rows[i]
        if row is not None and row.status not in TERMINAL:
            return False
        if any(p.run == i for p in w.procs) or any(m.run == i for m in w.messages):
            return False
        return w.started[i]

    def _maybe_archive(self, i: int) -> None:
        if i in self.live and self._finished(i):
            self._archive(i)

    def _archive(self, i: int, final: bool = False) -> None:
        w = self.world
        rec = self.live.pop(i)
        rid = rec.id
        row = w.rows[i]
        rec.finished = not final
        if row is not None:
            rec.status, rec.reason, rec.error_class = row.status, row.termination_reason, row.error_class
            rec.requeues, rec.attempts = row.requeue_count, row.attempts
        else:
            rec.status, rec.reason = "never_stored", ""
        events, other_events = _split(w.events, i)
        ledger, other_ledger = _split(w.ledger, i)
        audited = {(e.turn, e.call, e.seg) for e in events if e.kind == "tool"}
        rec.applications = [
            (a.turn, a.call, a.tool, a.effect, a.seg, (a.turn, a.call, a.seg) in audited)
            for a in ledger
        ]
        pw = project(w, i, events=events, ledger=ledger)
        bad = failing(self.props, pw)
        trace = self.trace.pop(i)
        for name in bad:
            self._violation(name, [(i, rid, rec, trace)])
        if final:
            return
        suffix = ":" + rid
        self.world = replace(
            w,
            rows=_set(w.rows, i, None),
            events=other_events,
            ledger=other_ledger,
            outcomes=tuple(o for o in w.outcomes if o[1] != i),
            marks=frozenset(m for m in w.marks if not m.endswith(suffix)),
            cancels=_set(w.cancels, i, 0),
            decisions=_set(w.decisions, i, 0),
            resumes=_set(w.resumes, i, 0),
            started=_set(w.started, i, True),
        )
        del self.slot_of[rid]
        self.archived += 1
        if self.on_archive is not None:
            self.on_archive(self.archived)
        self.free.put(i)
        if self.archived >= self.n_runs and not self.done.triggered:
            self.done.succeed()

    def _check_world(self) -> None:
        bad = failing(self.props, self.world)
        for name in bad:
            culprits = [
                (i, rec.id, rec, self.trace[i]) for i, rec in self.live.items()
                if name in failing({name: self.props[name]}, project(self.world, i))
            ]
            if not culprits:
                culprits = [(i, rec.id, rec, self.trace[i]) for i, rec in self.live.items()]
            self._violation(name, culprits)

    def _violation(self, name: str, culprits: list, key: tuple | None = None) -> None:
        """Record that ``culprits`` ((slot, run id, record, trace)) violate ``name``, now:
        ``key`` orders it among the violations of this step (checks after a step come
        first, by slot and property). A stable property found late is dated back, run by
        run, to the step that made it (_date_back)."""
        fresh = [c for c in culprits if (name, c[1]) not in self._seen_violation]
        if not fresh:
            return
        if name in self._deferred:
            now_found = []
            for c in fresh:
                k = self._date_back(name, c)
                if k is None:  # not the run's own doing (a whole-world check's fallback)
                    now_found.append(c)
                    continue
                self._seen_violation.add((name, c[1]))
                fired, _clock, t, now = c[3][k]
                v = Violation(name, [c[1]], now)
                k_key = (fired, t.arg("run") != c[1], self._order[name])
                self._found.append((k_key + (len(self._found),), v, [(c, k + 1)]))
            fresh = now_found
            if not fresh:
                return
        for c in fresh:
            self._seen_violation.add((name, c[1]))
        v = Violation(name, [c[1] for c in fresh], self.env.now)
        key = key or (self.fired, 2)  # found at an archive or a whole-world check
        self._found.append((key + (len(self._found),), v, [(c, len(c[3])) for c in fresh]))
        if not self.keep_going:
            self.stopped = True
            if not self.done.triggered:
                self.done.succeed()

    def _date_back(self, name: str, c: tuple) -> int | None:
        """The index in run ``c``'s trace of the step after which its projection first
        violates the stable property ``name``: the run's steps replayed alone (as in its
        scenario), the property checked after each (None: the replay never violates it)."""
        prop = self.props[name]
        for k, w in self._replay([c]):
            if k is not None and not prop.check(w):  # type: ignore[attr-defined]
                return k
        return None

    def _settle_violations(self) -> None:
        """The violations in the order of the steps that made them, each run's list in the
        same order, and the scenarios of the first three of each property."""
        self._found.sort(key=lambda f: f[0])
        self.violations = []
        for rec in self.records.values():
            rec.violations = []
        per: dict[str, int] = {}
        for _key, v, cut in self._found:
            for c, _n in cut:
                if v.property not in c[2].violations:
                    c[2].violations.append(v.property)
            per[v.property] = per.get(v.property, 0) + 1
            if per[v.property] <= 3:  # keep a few traces
                v.scenario = self.scenario_of([(i, rid, rec, tr[:n]) for (i, rid, rec, tr), n in cut])
            self.violations.append(v)

    def scenario_of(self, culprits: list) -> dict[str, Any]:
        """The affected runs' own transitions, with the clock moves between them, as a
        scenario ``{"config": <model config table>, "steps": [transition dicts]}`` that
        ``model.apply`` replays from the initial world of ``config``."""
        cfg, out, kinds, pfaults = self._replayed(culprits)[:4]
        cfg["model"] = dict(cfg["model"], faults=sorted(kinds), provider_faults=sorted(pfaults),
                            fault_budget=1 + sum(1 for s in out if "fault" in s)
                            + sum(1 for s in out if s["name"] in ("crash", "duplicate_message")))
        return {"config": cfg, "steps": out}

    def _replay(self, culprits: list) -> list[tuple[int | None, World]]:
        """``[(k, world)]`` after each step of the culprits' replay (see scenario_of): ``k``
        the step's index in the first culprit's trace, None for a clock move."""
        return self._replayed(culprits)[4]

    def _replayed(self, culprits: list) -> tuple:
        """(config, steps, fault kinds, provider faults, [(k, world)]) of the culprits' own
        steps replayed from the initial world of a configuration of those runs alone."""
        merged: dict[int, tuple[int, Transition, int | None]] = {}
        for n, (_i, _rid, _rec, trace) in enumerate(culprits):
            for k, (seq, clock, t, _now) in enumerate(trace):
                # a reaper tick shared by several runs appears once
                merged[seq] = (clock, t, k if n == 0 else merged.get(seq, (0, t, None))[2])
        out: list[dict[str, Any]] = []
        index: list[int | None] = []
        clock = 0
        kinds: set[str] = set()
        pfaults: set[str] = set()
        for _seq, (c, t, k) in sorted(merged.items()):
            if c > clock:
                out.append({"name": "advance_time", "actor": "clock", "to": c})
                index.append(None)
                clock = c
            if t.name in ("crash", "duplicate_message"):
                kinds.add(t.name)  # enabled only when the kind is on and budget remains
            if t.fault:
                if t.name == "provider_call":
                    pfaults.add(t.fault)
                    kinds.add("provider_error")
                else:
                    kinds.add(t.fault)
            out.append(t.to_dict())
            index.append(k)
        cfg = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.model_config.items()}
        cfg["runs"] = [_run_table(rec) for _i, _rid, rec, _tr in culprits]
        # A clock move that lapses a live segment's lease outside a provider or tool call is
        # a stall (fault "pause") in the model: let the model say which moves are.
        cfg["model"] = dict(cfg["model"], faults=sorted(kinds | {"pause", "slow_operation"}), provider_faults=sorted(pfaults),
                            fault_budget=len(out) + 1)
        w = load_world(cfg)
        ids = {r["id"] for r in cfg["runs"]}
        worlds: list[tuple[int | None, World]] = []
        for k, s in enumerate(out):
            t = clock_move(w, s["to"]) if s["name"] == "advance_time" else Transition.from_dict(s)
            if t.name == "find_stale_running" and t.arg("order") is not None:
                t = _reaper_tick_for(w, [x for x in t.arg("order").split(",") if x in ids])
            if t.fault in ("pause", "slow_operation"):
                kinds.add(t.fault)
            out[k] = t.to_dict()
            w = fire(w, t)
            worlds.append((index[k], w))
        return cfg, out, kinds, pfaults, worlds

    # -- processes -------------------------------------------------------------------------
    def run(self) -> Simulation:
        cfg = self.cfg
        env = self.env
        env.process(self._arrivals())
        for wk in self.worker_names:
            self.worker_down[wk] = False
            proc = env.process(self._worker(wk))
            if cfg.worker_crash_rate > 0:
                env.process(self._crasher(wk, proc))
        if cfg.reaper_enabled and self.policy.reaper and self.policy.queue:
            env.process(self._reaper())
        if cfg.audit_mean_up > 0:
            env.process(self._audit_flapping())
        try:
            env.run(until=self.done)
        except _Stop:
            pass
        self._finish()
        return self

    def _finish(self) -> None:
        if not self.stopped:
            for name in failing(self.props, self.world):
                self._check_world_named(name)
        for i in sorted(self.live):
            self._archive(i, final=True)
        self._settle_violations()
        self.history.close()

    def _check_world_named(self, name: str) -> None:
        culprits = [(i, rec.id, rec, self.trace[i]) for i, rec in self.live.items()
                    if name in failing({name: self.props[name]}, project(self.world, i))]
        self._violation(name, culprits or [(i, r.id, r, self.trace[i]) for i, r in self.live.items()])

    def _watch_drain(self, last_arrival: float):
        yield self.env.timeout(self.cfg.drain_seconds)
        if not self.done.triggered:
            self.done.succeed()

    def _arrivals(self):
        cfg = self.cfg
        env = self.env
        rng = stream(self.seed, "arrivals")
        n = self.n_runs
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
                env.process(self._admit(k))
        env.process(self._watch_drain(env.now))
        yield env.timeout(0)

    def _plan(self, k: int) -> tuple[RunSpec, random.Random]:
        cfg = self.cfg
        rng = stream(self.seed, f"run:{k}")
        entry = "queued" if rng.random() < cfg.queued_fraction else "interactive"
        names = [n for n, _ in cfg.tool_mix]
        weights = [x for _, x in cfg.tool_mix]
        rounds = cfg.rounds.sample_count(rng)
        plan = []
        for _ in range(rounds):
            calls = tuple(rng.choices(names, weights)[0] for _ in range(cfg.calls_per_round.sample_count(rng)))
            plan.append(Answer("tools", calls))
        plan.append(FINAL_ANSWER)
        decisions = tuple(
            "deny" if rng.random() < cfg.deny_probability else "approve" for _ in range(rounds + 2)
        )
        cancels = 1 if cfg.cancel_probability > 0 and rng.random() < cfg.cancel_probability else 0
        if cfg.not_permitted_probability > 0:  # a refused approval spends a decision: more
            decisions += tuple("deny" if rng.random() < cfg.deny_probability else "approve"
                               for _ in range(4))
        spec = RunSpec(id=f"r{k}", entry=entry, plan=tuple(plan), cap=cfg.cap, cancels=cancels,
                       decisions=decisions)
        return spec, rng

    def _admit(self, k: int):
        env = self.env
        arrival = env.now
        rs, rng = self._plan(k)
        i = yield self.free.get()
        w = self.world
        runs = list(w.config.runs)
        runs[i] = rs
        spec = replace(w.config, runs=tuple(runs))
        self.world = replace(w, config=spec, started=_set(w.started, i, False))
        rec = RunRecord(id=rs.id, entry=rs.entry, arrival=arrival, spec=rs, admitted=env.now)
        self.records[rs.id] = rec
        self.live[i] = rec
        self.slot_of[rs.id] = i
        self.trace[i] = []
        caller = stream(self.seed, f"caller:{rs.id}")
        fault = "store_error" if caller.random() < self.cfg.store_error_probability else None
        try:
            if self.cfg.store_latency.kind != "fixed" or self.cfg.store_latency.a > 0:
                yield env.timeout(self.cfg.store_latency.sample(caller))
            name = "enqueue_run" if rs.entry == "queued" else "start_run"
            self._step("caller", fault, lambda t: t.name == name, run=rs.id)
            if rs.cancels:
                env.process(self._canceller(i, rs.id, caller))
            if rs.entry == "queued":
                if self.world.proc(f"enqueue:{rs.id}") is not None:
                    # sync: the whole run executes in the caller's (web) process
                    yield from self._drive(f"enqueue:{rs.id}", caller, web=self.cfg.transport == "sync")
            else:
                yield from self._drive(f"caller:{rs.id}", caller, web=True)
            self._maybe_archive(i)
        except _Stop:
            return

    def _canceller(self, i: int, rid: str, rng: random.Random):
        yield self.env.timeout(self.cfg.cancel_delay.sample(rng))
        if self.slot_of.get(rid) != i or self.stopped:
            return
        fault = "store_error" if rng.random() < self.cfg.store_error_probability else None
        try:
            self._step("caller", fault, lambda t: t.name == "cancel", run=rid)
        except _Stop:
            return

    def _approver(self, i: int, rid: str):
        rng = stream(self.seed, f"approver:{rid}:{self.world.resumes[i]}")
        yield self.env.timeout(self.cfg.approval_delay.sample(rng))
        if self.slot_of.get(rid) != i or self.stopped:
            return
        # gate 2: this approver may not run the turn's writes (drawn only when configured)
        np_ = self.cfg.not_permitted_probability
        refused = np_ > 0 and rng.random() < np_
        before = {p.name for p in self.world.procs}
        try:
            t = self._step(
                "caller", None,
                lambda t: t.name in ("approve", "deny", "submit_input")
                and (t.arg("permitted") is False) == refused,
                run=rid,
            )
            if t is None:
                return
            new = [p.name for p in self.world.procs if p.name not in before]
            for name in new:
                yield from self._drive(name, stream(self.seed, name), web=True)
            self._maybe_archive(i)
        except _Stop:
            return

    def _deliver(self, slot: int, rid: str, not_before: int):
        cfg = self.cfg
        env = self.env
        rng = stream(self.seed, f"bus:{rid}:{not_before}:{self.fired}")
        wait = max(0.0, not_before - env.now) + cfg.delivery_delay.sample(rng)
        if wait > 0:
            yield env.timeout(wait)
        if self.stopped:
            return
        if cfg.duplicate_probability > 0 and rng.random() < cfg.duplicate_probability:
            try:
                self._step(
                    "bus", None,
                    lambda t: t.name == "duplicate_message" and t.arg("not_before") == not_before,
                    run=rid,
                )
            except _Stop:
                return
        self.mailbox.put((slot, rid, not_before))

    def _worker(self, wk: str):
        env = self.env
        cfg = self.cfg
        rng = stream(self.seed, f"worker:{wk}")
        while not self.stopped:
            req = None
            tok = None  # a delivered message this worker holds but has not picked up yet
            try:
                req = self.mailbox.get()
                tok = yield req
                req = None
                _slot, rid, nb = tok
                if cfg.store_latency.kind != "fixed" or cfg.store_latency.a > 0:
                    yield env.timeout(cfg.store_latency.sample(rng))
                fault = "store_error" if rng.random() < cfg.store_error_probability else None
                t = self._step(
                    wk, fault,
                    lambda t, nb=nb: t.name == "run_queued" and t.arg("not_before") == nb, run=rid,
                )
                tok = None
                if t is None:
                    raise SimulationError(f"{wk}: run_queued({rid}, {nb}) not enabled")
                if self.world.proc(wk) is not None:
                    yield from self._drive(wk, rng, web=False)
                elif rid in self.slot_of:
                    self._maybe_archive(self.slot_of[rid])
            except simpy.Interrupt:
                if req is not None:
                    if req.triggered:
                        self.mailbox.put(req.value)
                    else:
                        req.cancel()
                elif tok is not None:
                    self.mailbox.put(tok)  # a dead worker's undelivered message goes back
                try:
                    p = self.world.proc(wk)
                    if p is not None:
                        self._step(wk, "crash")
                        self._maybe_archive(p.run)
                except _Stop:
                    return
                yield env.timeout(cfg.restart_delay.sample(rng))
                self.worker_down[wk] = False
            except _Stop:
                return

    def _crasher(self, wk: str, proc):
        rng = stream(self.seed, f"crash:{wk}")
        rate = self.cfg.worker_crash_rate / 3600.0
        while not self.stopped:
            yield self.env.timeout(rng.expovariate(rate))
            if not self.worker_down[wk] and proc.is_alive:
                self.worker_down[wk] = True
                proc.interrupt("crash")

    def _drive(self, name: str, rng: random.Random, web: bool):
        """Drive one process of the model (a segment, or an enqueue caller) until it ends."""
        cfg = self.cfg
        env = self.env
        crash_at = float("inf")
        if web and cfg.web_crash_rate > 0:
            crash_at = env.now + rng.expovariate(cfg.web_crash_rate / 3600.0)
        pause_p = cfg.pause_probability
        store_err = cfg.store_error_probability
        store_lat = cfg.store_latency.sample
        timeout = env.timeout
        step = self._step
        while True:
            if self.stopped:
                raise _Stop
            p = self.world.proc(name)
            if p is None:
                return
            pc = p.pc
            lat = 0.0
            if pause_p > 0 and pc != "settle" and p.kind != ENQUEUE and rng.random() < pause_p:
                lat += cfg.pause_duration.sample(rng)
            work = 0.0
            store = pc in STORE_PCS
            if store:
                lat += store_lat(rng)
            elif pc in AUDIT_PCS:
                lat += cfg.audit_latency.sample(rng)
            elif pc == "provider":
                work = cfg.provider_latency.sample(rng)
            elif pc == "invoke":
                tool = self.world.config.runs[p.run].answer(p.turn).calls[p.call]
                try:
                    work = cfg.tool(tool).latency.sample(rng)
                except KeyError:
                    work = 0.0
            elif pc == "dispatch":
                lat += cfg.dispatch_latency.sample(rng)
            lat += work
            if env.now + lat >= crash_at:
                yield timeout(max(0.0, crash_at - env.now))
                step(name, "crash")
                return
            if lat > 0:
                yield timeout(lat)
            if work:
                seg = p.seg or p.name
                self._segment_busy[seg] = self._segment_busy.get(seg, 0.0) + work
                if p.run in self.live:
                    self.live[p.run].busy += work
            if store:  # _fault's store branch, inline
                fault = "store_error" if store_err and rng.random() < store_err else None
            else:
                fault = self._fault(pc, p, rng)
            t = step(name, fault)
            if t is None:
                raise SimulationError(f"{name} at {pc!r}: nothing enabled")
            if fault is not None and t[2] and t.fault == fault and pc in ("provider", "invoke"):
                self._failed(p, pc, fault)

    def _fault(self, pc: str, p, rng: random.Random) -> str | None:
        cfg = self.cfg
        if pc in STORE_PCS:
            return "store_error" if cfg.store_error_probability and rng.random() < cfg.store_error_probability else None
        if pc in AUDIT_PCS:
            if self.audit_down or self._in_outage():
                return "audit_insert_fails"
            r = rng.random()
            if r < cfg.audit_failure_probability:
                return "audit_insert_fails"
            if pc == "persist" and r < cfg.audit_failure_probability + cfg.ambiguous_commit_probability:
                return "ambiguous_commit"
            return None
        if pc == "provider":
            if cfg.provider_failure_probability and rng.random() < cfg.provider_failure_probability:
                names = [c for c, _ in cfg.failure_mix]
                err = rng.choices(names, [x for _, x in cfg.failure_mix])[0]
                self._drawn = err
                return cfg.failure_class[err]  # classify(error): the class the model fires
            return None
        if pc == "invoke":
            tool = self.world.config.runs[p.run].answer(p.turn).calls[p.call]
            try:
                pe = cfg.tool(tool).error_probability
            except KeyError:
                return None
            return "tool_error" if pe and rng.random() < pe else None
        if pc == "dispatch":
            d = cfg.dispatch_failure_probability
            return "dispatch_fails" if d and rng.random() < d else None
        return None

    def _failed(self, p, pc: str, fault: str) -> None:
        """Note the failure the step just took in its run's record: the provider error drawn
        (``_fault``) and its class; a tool's error drawn from its ``error_mix``, from a stream
        of its own so that naming the errors changes nothing else in the history."""
        rec = self.live.get(p.run)
        if rec is None:
            return
        if pc == "provider":
            rec.provider_errors.append((self._drawn, fault))
            return
        tool = self.world.config.runs[p.run].answer(p.turn).calls[p.call]
        try:
            mix = self.cfg.tool(tool).error_mix
        except KeyError:
            mix = ()
        if not mix:
            rec.tool_errors.append((tool, "", ""))
            return
        rng = stream(self.seed, f"tool-error:{p.seg}:{p.turn}:{p.call}:{len(rec.tool_errors)}")
        k = rng.choices(range(len(mix)), [x for _, _, x in mix])[0]
        rec.tool_errors.append((tool, mix[k][0], mix[k][1]))

    def _in_outage(self) -> bool:
        now = self.env.now
        for start, dur in self.cfg.audit_outages:
            if start <= now < start + dur:
                return True
            if start > now:
                break
        return False

    def _audit_flapping(self):
        rng = stream(self.seed, "audit_store")
        while True:
            yield self.env.timeout(rng.expovariate(1.0 / self.cfg.audit_mean_up))
            self.audit_down = True
            yield self.env.timeout(rng.expovariate(1.0 / self.cfg.audit_mean_down))
            self.audit_down = False

    def _reaper(self):
        cfg = self.cfg
        env = self.env
        rng = stream(self.seed, "reaper")
        pe = cfg.store_error_probability
        try:
            while not self.stopped:
                yield env.timeout(cfg.reaper_period)
                yield env.timeout(cfg.store_latency.sample(rng))
                self._step("reaper", "store_error" if pe and rng.random() < pe else None)
                while self.world.reaper is not None:
                    nested = self.world.proc("reaper")
                    if nested is not None:  # sync: the reclaimed run executes in the reaper
                        yield from self._drive("reaper", rng, web=False)
                        if nested.run in self.live:
                            self._maybe_archive(nested.run)
                        continue
                    yield env.timeout(cfg.store_latency.sample(rng))
                    r = self.world.reaper
                    slot = r.rows[r.idx][0] if r is not None else None
                    if r is not None and r.pc == "dispatch":
                        d = cfg.dispatch_failure_probability
                        fault = "dispatch_fails" if d and rng.random() < d else None
                    else:
                        fault = "store_error" if pe and rng.random() < pe else None
                    self._step("reaper", fault)
                    if slot is not None and slot in self.live:
                        self._maybe_archive(slot)
        except _Stop:
            return

    # -- results ---------------------------------------------------------------------------
    def all_records(self) -> list[RunRecord]:
        return list(self.records.values())


def _split(items: tuple, i: int) -> tuple[tuple, tuple]:
    """``items`` (events or ledger entries) of run slot ``i``, and the others, in order."""
    mine, rest = [], []
    for x in items:
        (mine if x.run == i else rest).append(x)
    return tuple(mine), (tuple(rest) if mine else items)


def _set(tup: tuple, i: int, v) -> tuple:
    lst = list(tup)
    lst[i] = v
    return tuple(lst)


def _answer_table(a: Answer) -> dict[str, Any]:
    if a.kind == "tools":
        return {"tools": list(a.calls)}
    if a.kind == "final":
        return {"final": a.value}
    if a.kind == "fail":
        return {"fail": a.value}
    return {"guardrail": a.value}


def _run_table(rec: RunRecord) -> dict[str, Any]:
    d: dict[str, Any] = {"id": rec.id, "entry": rec.entry, "plan": [_answer_table(a) for a in rec.spec.plan]}
    if rec.spec.cap is not None:
        d["cap"] = rec.spec.cap
    if rec.spec.cancels:
        d["cancels"] = rec.spec.cancels
    if rec.spec.decisions:
        d["decisions"] = list(rec.spec.decisions)
    return d


def approval_bound_tools(cfg: SimConfig, policy: str) -> list[str]:
    """The tools that suspend a run for approval under ``policy`` (for reports)."""
    data = {"policy": policy, "tools": [dict(t.model) for t in cfg.tools], "runs": [{"id": "x"}]}
    spec, _ = parse_config(data)
    return [t.name for t in spec.tools if approval_bound(spec, frozenset(), t.name)]


__all__ = ["RunRecord", "Simulation", "SimulationError", "Violation", "WAITING_FOR_APPROVAL", "stream"]


def _reaper_tick_for(w: World, want: list[str]) -> Transition:
    """The reaper tick, in the replayed world of a few runs, that selects the culprit runs in
    the order the full simulation's tick did (ties in lease_expires are ordered freely)."""
    ticks = [t for t in enabled(w, "reaper") if t.name == "find_stale_running" and t.fault is None]
    for t in ticks:
        order = t.arg("order")
        if order is not None and [x for x in order.split(",") if x in want] == want:
            return t
    return ticks[0]
