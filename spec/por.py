"""Partial-order reduction: the ample set a state is expanded by (SPIN's, after Peled).

At a state ``s`` the search may expand only ``ample(s)``, the enabled transitions of one
process ``p``, instead of every enabled transition, when these provisos hold (Clarke,
Grumberg and Peled, *Model Checking*, ch. 10; Peled 1994):

* **C0** the ample set is empty only if nothing is enabled: it is the process's enabled
  transitions, never empty (a deadlock is expanded in full: there is nothing to expand).
* **C1** (persistence) no transition dependent on the ample set can fire, from ``s``, before
  one of the ample set does. Dependence is static and conservative, read from the
  footprints (``model.footprint``, derived from the step table): two transitions are
  dependent when their footprints share a part (a run's row, the events, the clock, ...; a
  per-run part only on the same run or where either names every run; the acting process's
  own part ``SELF`` with any transition touching ``PROCS``, every process). What other
  actors may do before ``p`` moves is over-approximated by every transition the step table
  declares, of any actor but ``p``, on any run (:func:`foreign_parts`); ``p``'s own later
  steps cannot come first, as ``p`` is at one label and its enabled transitions are all in
  the ample set.
* **C2** (visibility) the ample set holds no visible transition: one whose footprint
  includes a World field a checked property reads (the properties' ``reads``; one without
  ``reads`` makes every transition visible). Otherwise the state is expanded in full.
* **C3** (the cycle proviso) kept by the engine (``spec.engine.explore``, ``reduce=``): an
  ample set is taken only if every successor it yields is a state not stored yet; otherwise
  the state is expanded in full. In a BFS a cycle closes on a stored state, so each cycle of
  the reduced graph has a fully expanded state: Peled's C3 in its "some state of every cycle
  is fully expanded" form, with the BFS check of Bošnački and Holzmann ("Improving SPIN's
  partial-order reduction for breadth-first search", SPIN 2005): a successor already in the
  seen set (or in the queue) forces the full expansion.

C0-C3 preserve every stutter-invariant property of the visible fields, so the invariants'
verdicts and the witnesses' reachability; the traces may be longer (spec/checker.py
shortens them by an unreduced search bounded at their length). **Liveness under fairness
is not claimed**: the reduced graph may drop the edges a fairness class is judged on (a
class "taken inside the SCC"), so a search that keeps the graph for ``check_liveness`` runs
unreduced and its verdict says so. No sleep sets.

:attr:`AmpleSets.refused` counts why a state was expanded in full (per process tried: its
first failing proviso and, for C1, the part another actor may touch), which is what limits
the reduction on a configuration (benchmarks/bench_scope.py prints it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from failclosed.model import footprint as fp
from failclosed.model import steps
from failclosed.model.runtime import enabled, fire
from failclosed.model.transition import Transition
from failclosed.model.vocab import Touch

__all__ = ["AmpleSets", "foreign_parts", "independent_steps", "visible_fields", "who_touches"]

Step = tuple[Transition, Any]

_foreign: tuple[int, frozenset[Touch]] = (-1, frozenset())


def foreign_parts() -> frozenset[Touch]:
    """The parts some transition of the step table touches: what another actor may touch
    before a process moves (C1's over-approximation), derived again after a change."""
    global _foreign
    steps._declared()
    if _foreign[0] != steps.generation:
        by_step, by_other = fp._tables()
        parts = frozenset().union(*by_step.values(), *by_other.values())
        _foreign = (steps.generation, parts)
    return _foreign[1]


def independent_steps() -> list[str]:
    """The process steps (by label) none of whose parts another actor may touch: the only
    ones an ample set can hold. Empty: no state has an ample set (C1), and the search
    runs unreduced (spec/checker.py says so)."""
    foreign = foreign_parts()
    by_step, _ = fp._tables()
    out = []
    for a in steps.ACTIONS.values():
        parts = by_step[id(a)]
        if not (parts & foreign - {Touch.SELF}) and not (
                Touch.SELF in parts and Touch.PROCS in foreign):
            out.append(str(a.pc))
    return out


def who_touches() -> dict[str, list[str]]:
    """Part -> the declarations touching it: process steps by label, reaper steps as
    ``reaper:<label>``, the other transitions by name (what an ample set's step is dependent
    with, for a report)."""
    by_step, by_other = fp._tables()
    out: dict[str, list[str]] = {}
    for a in steps.steps():
        who = str(a.pc) if a.actor == steps.PROCESS else f"{a.actor}:{a.pc}"
        for k in by_step[id(a)]:
            out.setdefault(str(k), []).append(who)
    for n, parts in by_other.items():
        for k in parts:
            out.setdefault(str(k), []).append(str(n))
    return dict(sorted(out.items()))


def visible_fields(reads: Iterable[Sequence[str] | None]) -> frozenset[str] | None:
    """The World fields the checked properties read; None (every field) if one of them
    declares no ``reads``."""
    out: set[str] = set()
    for r in reads:
        if r is None:
            return None
        out.update(r)
    return frozenset(out)


class AmpleSets:
    """The ample-set choice for one search: ``reduction(world)`` is ``(steps, ample)``, the
    ample set's ``[(transition, world'), ...]`` (``ample`` True), or every successor (the
    engine applies C3 to an ample set)."""

    def __init__(self, visible: frozenset[str] | None) -> None:
        self.visible = visible  # the World fields the properties read (None: all)
        self.refused: Counter[str] = Counter()  # why a process's transitions were no ample set
        self.offered = 0  # states an ample set was offered for
        self.cycle_full = 0  # of those, expanded in full by the cycle proviso (the engine)
        self._blocked: dict[int, tuple[int, tuple[str, ...]]] = {}  # declaration -> C1 parts

    def counts(self) -> dict[str, Any]:
        """What the reduction did: states offered an ample set, taken, expanded in full by
        the cycle proviso, and each refusal's count (JSON-able)."""
        return {"offered": self.offered, "taken": self.offered - self.cycle_full,
                "cycle_full": self.cycle_full, "refused": dict(sorted(self.refused.items()))}

    def dependent_parts(self, foot: fp.Footprint) -> list[str]:
        """The parts of ``foot`` another actor may touch first (C1), sorted; empty if none.
        A process's own part is touched by every transition that touches ``PROCS``."""
        foreign = foreign_parts()
        out = {k for k, _ in foot if k in foreign and k != Touch.SELF}
        if any(k == Touch.SELF for k, _ in foot) and Touch.PROCS in foreign:
            out.add(Touch.PROCS)
        return sorted(out)

    def invisible(self, foot: fp.Footprint) -> bool:
        """C2: no field of ``foot`` is read by a checked property."""
        return self.visible is not None and not (fp.fields(foot) & self.visible)

    def blocked(self, w: Any, t: Transition) -> tuple[str, ...]:
        """Why ``t`` cannot be in an ample set whatever else holds (C1 on its declaration's
        parts, which another actor may touch on any run): the parts, cached per declaration."""
        d = fp.declared(w, t)
        got = self._blocked.get(id(d))
        if got is None or got[0] != steps.generation:
            got = (steps.generation, tuple(self.dependent_parts(
                frozenset((k, fp.ANY) for k in fp.kinds(w, t)))))
            self._blocked[id(d)] = got
        return got[1]

    def __call__(self, w: Any) -> tuple[list[Step], bool]:
        en = enabled(w)
        by_actor: dict[str, list[Transition]] = {}
        for t in en:
            by_actor.setdefault(t.actor, []).append(t)
        if len(by_actor) > 1:
            for p in w.procs:
                ts = by_actor.get(p.name)
                if ts and self._ample(w, ts):  # C0: an ample set is never empty
                    self.offered += 1
                    return [(t, fire(w, t)) for t in ts], True
        else:
            self.refused["one actor"] += 1
        return [(t, fire(w, t)) for t in en], False

    def _ample(self, w: Any, ts: list[Transition]) -> bool:
        """C1 and C2 for one process's enabled transitions ``ts``."""
        parts = sorted({k for t in ts for k in self.blocked(w, t)})
        if parts:
            self.refused[f"C1 {'+'.join(parts)}"] += 1
            return False
        foot = frozenset().union(*(fp.footprint(w, t) for t in ts))
        if not self.invisible(foot):
            self.refused["C2 visible"] += 1
            return False
        return True
