"""When the simulator checks the safety properties, on which world, and the violations found
(docs/SIMULATOR.md "Properties"; sim/invariants.py lists the checks).

* After every step (``check_steps``): on the projection of each live run the step may have
  changed, the properties whose declared inputs (``Property.reads``) the step changed.
  A *stable* property (``Property.stable``: once violated on a run, violated until the run
  is archived) is left out there when the simulation keeps going: it is checked when the run
  is archived, and its violation is dated back to the step that made it. A simulation that
  stops at its first violation must stop at that very step: then every property is checked
  after every step. The violation records are the same either way (``defer_stable=False``:
  every property after every step, for comparison).
* When a run is archived: every property, on its projection.
* On the whole world every ``check_every`` steps and at the end: a failure is attributed to
  the live runs whose projections fail (or to every live run if none does).
* The liveness properties: at each run's end, on its projection (sim/liveness.py), each one
  the simulator can judge; the others are named in the report.

A violation is recorded once per (property, run); :meth:`Checks.settle` orders them by the
step that made them and gives the first ``scenarios`` of each property their scenarios
(``SCENARIOS_PER_PROPERTY`` unless asked; None: every one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from failclosed.model.state import World
from failclosed.spec.search import FieldReads

from .invariants import RunItems, failing, project
from .liveness import Liveness
from .records import SCENARIOS_PER_PROPERTY, Culprit, RunRecord, Violation
from .replay import Replayer
from .window import Window, reaper_slot


class Checks:
    def __init__(
        self,
        properties: dict[str, Any],
        window: Window,
        replayer: Replayer,
        on_stop: Callable[[], None],
        keep_going: bool,
        check_steps: bool,
        defer_stable: bool,
        scenarios: int | None = SCENARIOS_PER_PROPERTY,
    ):
        self.props = properties
        self.window = window  # the live runs and their traces
        self.replayer = replayer
        self.on_stop = on_stop  # called at a violation when the simulation does not keep going
        self.keep_going = keep_going
        # the first violations of each property given their scenario (None: every one)
        self.scenarios = scenarios
        # the World fields each property reads (spec.properties.Property.reads; None or
        # missing: all): a step that leaves them untouched cannot change its verdict
        self.reads = FieldReads({n: p.reads for n, p in properties.items() if getattr(p, "reads", None)})
        # the stable properties checked at the archive rather than after each step
        self.deferred = {n for n, p in properties.items() if check_steps and defer_stable
                         and keep_going and getattr(p, "stable", False)}
        self.order = {n: k for k, n in enumerate(properties)}
        # the liveness properties, judged on each run's end (sim/liveness.py)
        self.liveness = Liveness()
        self._events, self._ledger = RunItems(), RunItems()  # the projections' own parts
        # (name, property, mask of its reads; 0: it declares none, so every step may change it)
        self._read_masks = [(n, p, self.reads.mask.get(n, 0)) for n, p in properties.items()
                            if n not in self.deferred]
        # (sort key, violation, [(culprit, steps of its trace)]): ordered and given their
        # scenarios when the simulation ends (a stable one is found late, dated back)
        self.found: list[tuple[tuple, Violation, list[tuple[Culprit, int]]]] = []
        self.seen: set[tuple[str, str]] = set()  # (property, run id) recorded

    # -- when ------------------------------------------------------------------------------
    def after_step(self, w: World, w2: World, i: int | None, fired: int, now: float) -> None:
        """The properties on the projection of every live run this step may have changed:
        the run the transition names (slot ``i``), and the runs at the reaper's current row
        before and after when the reaper's state moved (a projection holds the reaper while
        its current row is the run's). Other runs' projections are unchanged but for the
        clock, which no safety property reads; the periodic whole-world check stays as a net."""
        live = self.window.live
        slots = [] if i is None else [i]
        if w2.reapers is not w.reapers:
            for r in w.reapers + w2.reapers:
                j = reaper_slot(r)
                if j in live and j not in slots:
                    slots.append(j)
        if not slots:
            return
        changed = self.reads.changed(w, w2)
        props = {name: p for name, p, m in self._read_masks if not m or m & changed}
        if not props:
            return
        for j in slots:
            rec = live[j]
            pw = project(w2, j, self._events.of(w2.events, j), self._ledger.of(w2.ledger, j))
            for name in failing(props, pw):
                if (name, rec.id) not in self.seen:
                    self.violation(name, [Culprit(j, rec.id, rec, self.window.trace[j])], fired, now,
                                   key=(fired, j != i, self.order[name]))

    def at_archive(self, projection: World, culprit: Culprit, fired: int, now: float) -> None:
        for name in failing(self.props, projection):
            self.violation(name, [culprit], fired, now)
        self.liveness.at_end(projection, culprit.id, culprit.record.finished)

    def whole_world(self, w: World, fired: int, now: float) -> None:
        for name in failing(self.props, w):
            live = [Culprit(i, rec.id, rec, self.window.trace[i]) for i, rec in self.window.live.items()]
            culprits = [c for c in live if name in failing({name: self.props[name]}, project(w, c.slot))]
            self.violation(name, culprits or live, fired, now)

    # -- what ------------------------------------------------------------------------------
    def violation(self, name: str, culprits: list[Culprit], fired: int, now: float, key: tuple | None = None) -> None:
        """Record that ``culprits`` violate ``name``, at step ``fired``, time ``now``: ``key``
        orders it among the violations of this step (checks after a step come first, by
        slot and property). A stable property found late is dated back, run by run, to the
        step that made it (_date_back)."""
        fresh = [c for c in culprits if (name, c.id) not in self.seen]
        if name in self.deferred:
            fresh = [c for c in fresh if not self._dated_back(name, c)]
        if not fresh:
            return
        for c in fresh:
            self.seen.add((name, c.id))
        v = Violation(name, [c.id for c in fresh], now)
        key = key or (fired, 2)  # found at an archive or a whole-world check
        self.found.append((key + (len(self.found),), v, [(c, len(c.trace)) for c in fresh]))
        if not self.keep_going:
            self.on_stop()

    def _dated_back(self, name: str, c: Culprit) -> bool:
        """Record the stable property ``name``'s violation by run ``c`` at the step that made
        it; False: the run's replay alone never violates it (a whole-world check's
        fallback: it is recorded now)."""
        k = self._date_back(name, c)
        if k is None:
            return False
        self.seen.add((name, c.id))
        step = c.trace[k]
        v = Violation(name, [c.id], step.now)
        key = (step.fired, step.transition.arg("run") != c.id, self.order[name])
        self.found.append((key + (len(self.found),), v, [(c, k + 1)]))
        return True

    def _date_back(self, name: str, c: Culprit) -> int | None:
        """The index in run ``c``'s trace of the step after which its projection first
        violates the stable property ``name``: the run's steps replayed alone (as in its
        scenario), the property checked after each (None: the replay never violates it)."""
        prop = self.props[name]
        for k, w in self.replayer.replay([c]):
            if k is not None and not prop.check(w):
                return k
        return None

    def settle(self, records: list[RunRecord]) -> list[Violation]:
        """The violations in the order of the steps that made them, each run's list in the
        same order, and the scenarios of the first ``scenarios`` of each property."""
        self.found.sort(key=lambda f: f[0])
        out = []
        for rec in records:
            rec.violations = []
        per: dict[str, int] = {}
        for _key, v, cut in self.found:
            for c, _n in cut:
                if v.property not in c.record.violations:
                    c.record.violations.append(v.property)
            per[v.property] = per.get(v.property, 0) + 1
            if self.scenarios is None or per[v.property] <= self.scenarios:  # keep a few traces
                v.scenario = self.replayer.scenario_of([c._replace(trace=c.trace[:n]) for c, n in cut])
            out.append(v)
        return out
