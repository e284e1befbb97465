"""Generic breadth-first exploration engine: safety, witnesses, coverage and fair liveness.

The engine knows nothing about the model. A transition system is given as

* ``initial``: a sequence of worlds (hashable, immutable values);
* ``successors(world)``: an iterable of ``(Transition, world')`` pairs, where a transition is a
  :class:`model.transition.Transition` (only ``.name``, ``.actor``, ``.args`` and ``.label()``
  are used, plus hashing/equality);
* optionally ``canonical(world)``: a hashable key under which worlds are identified (symmetry
  reduction or abstraction). It must be a bisimulation: worlds with the same key must have
  successors with matching keys; trace replay relies on it and raises if it is not.

Storage is compact, in the manner of TLC: a state is an ``int`` id, the seen set maps the
64-bit fingerprint of its key (``hash(key)``) to that id (``index``), and its fingerprint,
parent, depth, switch count and incoming transition id are kept in ``array``s. The worlds
themselves are kept only while the search needs them (the layer being expanded, its parents
for the property step, the next layer, and the initial worlds): traces are rebuilt by
re-executing ``successors`` from an initial world along the recorded parents, matching
fingerprints. Two distinct keys with the same fingerprint would be taken for one state
(:attr:`Stats.collision_probability`: about n^2 / 2^65 for n states, as TLC reports it);
``keep_worlds=True`` keeps every world (tests compare reachable sets with it). Under a memory
budget (``memory_budget_mib``) the seen set is tiered and spills to disk (spec/seen.py): the
ids of the two live layers stay in a dict, the older ones in sorted runs. Transitions are
interned to ints. With ``keep_graph=True`` the edges are three ``array('i')`` (src, dst,
transition id); no networkx graph is built during the search. Ids are assigned in BFS order,
so the frontier is just a cursor over the id range and the edge ``src`` array is sorted.

Traces returned to the user are always concrete and replayable: they are re-derived by
re-walking ``successors`` from a concrete initial world (see :meth:`Exploration.replay`).
"""

from __future__ import annotations

import resource
import sys
import time
from array import array
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import networkx as nx
import numpy as np
from failclosed.spec.seen import PER_STATE_BYTES, SeenSet, resident_mib, sigterm_raises

if TYPE_CHECKING:
    from failclosed.model.transition import Transition

__all__ = [
    "Coverage",
    "Exploration",
    "Finding",
    "LivenessResult",
    "Stats",
    "check_liveness",
    "strongly_connected",
    "count_switches",
    "coverage",
    "explore",
    "trace_lines",
    "trace_table",
]

W = TypeVar("W")
Step = tuple["Transition", Any]
_EMPTY: Mapping[str, Any] = MappingProxyType({})


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass
class Stats:
    states: int  # distinct (canonical) states stored
    transitions: int  # edges explored (successor pairs yielded by expanded states)
    expanded: int  # states whose successors were fully enumerated
    max_depth: int
    seconds: float
    states_per_second: float
    peak_rss_mib: float  # ru_maxrss of the whole process after the run
    rss_delta_mib: float  # growth of ru_maxrss during the run (0 if an earlier peak was higher)
    truncated: bool  # max_states was hit: the state space is NOT exhausted
    stopped_early: bool  # stop_at_first_violation ended the search
    # the largest resident size sampled at this search's layer boundaries and at its end
    # (this search's own peak, where ru_maxrss is the process's since it started)
    search_peak_rss_mib: float = 0.0
    stored_bytes: int = 0  # estimate of what the search stores in memory (spec/seen.py)
    seen: str = ""  # the tiered seen set at the end ("" if it never left memory)

    @property
    def bytes_per_state(self) -> float:
        """The estimated bytes stored in memory per state (seen set and per-state arrays)."""
        return self.stored_bytes / self.states if self.states else 0.0

    @property
    def collision_probability(self) -> float:
        """The chance that two of the stored states' keys share a 64-bit fingerprint (and one
        of them was taken for the other), assuming ``hash`` spreads distinct keys uniformly:
        n(n-1)/2 pairs, each with chance 2^-64 (TLC's "optimistic" estimate)."""
        n = self.states
        return n * (n - 1) / 2.0 ** 65

    def __str__(self) -> str:
        flag = (
            " TRUNCATED" if self.truncated else (" (stopped early)" if self.stopped_early else "")
        )
        return (
            f"{self.states} states, {self.transitions} transitions, depth {self.max_depth}, "
            f"{self.seconds:.2f}s ({self.states_per_second:,.0f} states/s), "
            f"peak RSS {self.peak_rss_mib:.0f} MiB (+{self.rss_delta_mib:.0f})"
            f"{', ' + self.seen if self.seen else ''}{flag}"
        )


@dataclass
class Finding:
    """A state where an invariant fails or a witness holds, with a concrete shortest trace."""

    name: str
    state: int  # state id
    depth: int  # = len(trace)
    switches: int  # actor switches along the (concrete) trace
    initial: Any  # concrete initial world the trace starts from
    trace: list[tuple[Transition, Any]]  # (transition, world after it), replayable

    @property
    def world(self) -> Any:
        return self.trace[-1][1] if self.trace else self.initial


@dataclass
class Exploration:
    successors: Callable[[Any], Iterable[tuple[Transition, Any]]]
    canonical: Callable[[Any], Hashable] | None
    index: SeenSet  # fingerprint of the key (hash(key)) -> state id (spec/seen.py)
    worlds: list[Any | None]  # first concrete world seen per id (None once released)
    fingerprints: array  # 'q', state id -> fingerprint of its key
    labels: dict[str, bytearray]  # name -> per state id, the label predicate (0/1)
    deadlock_labels: dict[str, bytearray]  # name -> per entry of deadlocks, the predicate
    initial_ids: list[int]
    parent: array  # 'i', -1 for initial states
    depth: array  # 'i'
    switches: array  # 'i', fewest actor switches over shortest paths (see explore)
    in_tr: array  # 'i', transition id of the chosen incoming edge, -1 for initial states
    actor_mask: list[int]  # bit set of last actors that achieve `switches` (all bits: initial)
    alt_parents: dict[tuple[int, int], tuple[int, int]]  # (state, actor id) -> (parent, tr id)
    transitions: list[Transition]  # interned: tr id -> transition
    tr_actor: array  # 'i', tr id -> actor id
    actors: list[str]  # actor id -> actor
    enabled_count: list[int]  # tr id -> times yielded by successors of an expanded state
    taken_count: list[int]  # tr id -> times it discovered a new state
    edges_src: array | None  # 'i', sorted (ids are expanded in order)
    edges_dst: array | None
    edges_tr: array | None
    expanded: int  # ids < expanded were fully expanded
    deadlocks: array  # 'i', expanded states with no successor at all
    violations: dict[str, Finding]  # first (shortest, fewest switches) per violated invariant
    witnesses: dict[str, Finding | None]  # None: never reached
    invariants_checked: list[str]
    concrete_seen: int | None  # distinct concrete worlds hashed (measure_reduction=True)
    stats: Stats

    @property
    def truncated(self) -> bool:
        return self.stats.truncated

    @property
    def complete(self) -> bool:
        """Every reachable state was stored and expanded (neither truncated nor stopped)."""
        return not (self.stats.truncated or self.stats.stopped_early)

    @property
    def ok(self) -> bool:
        """No invariant violated (does not imply exhaustiveness: check ``truncated``)."""
        return not self.violations

    @property
    def reduction_factor(self) -> float | None:
        """Distinct concrete worlds seen / distinct canonical states (``measure_reduction``).

        Only worlds produced as successors of stored representatives (and the initial worlds)
        are counted, so this is a lower bound on the true reduction factor of the full concrete
        state space (up to 64-bit hash collisions, which can only lower it further).
        """
        if self.concrete_seen is None or not self.fingerprints:
            return None
        return self.concrete_seen / len(self.fingerprints)

    @property
    def unreached_witnesses(self) -> list[str]:
        return [k for k, v in self.witnesses.items() if v is None]

    @property
    def kept_worlds(self) -> bool:
        """Every stored state's world is still in ``worlds`` (``keep_worlds=True``)."""
        return None not in self.worlds

    def state_id(self, world: Any) -> int | None:
        key = world if self.canonical is None else self.canonical(world)
        j: int | None = self.index.get(hash(key))
        return j

    # -- traces -------------------------------------------------------------------------------

    def abstract_path(self, sid: int) -> tuple[int, list[tuple[int, int]]]:
        """``(root id, [(transition id, state id), ...])`` of the chosen shortest path to ``sid``.

        Follows the per-(state, last actor) parents so the switch count is the optimum recorded
        in ``switches[sid]``.
        """
        parent, in_tr, tr_actor = self.parent, self.in_tr, self.tr_actor
        mask, alts = self.actor_mask, self.alt_parents
        steps: list[tuple[int, int]] = []
        want: int | None = None  # required last actor at s; None: the primary one
        s = sid
        while True:
            p = parent[s]
            if p < 0:
                break
            tid = in_tr[s]
            if want is not None and want != tr_actor[tid]:
                p, tid = alts[(s, want)]
            steps.append((tid, s))
            a = tr_actor[tid]
            want = a if (mask[p] >> a) & 1 else None
            s = p
        steps.reverse()
        return s, steps

    def replay(
        self,
        root: int,
        steps: Sequence[tuple[int, int]],
        start: Any | None = None,
        last_actor: str | None = None,
        beam: int = 512,
        exact: bool = False,
    ) -> tuple[Any, list[tuple[Transition, Any]]]:
        """Turn an abstract path into a concrete one by re-walking ``successors``.

        Starting from the concrete world of ``root`` (or ``start``), every step must produce a
        successor whose key equals the key of the next abstract state; the world actually
        produced is what the next step continues from, so the result always replays. Among
        the concrete candidates the choice is exact: a small dynamic programme over
        (concrete world, last actor) minimises (actor switches, preference), where the
        preference ranks the recorded transition first, then one with the same name and actor.
        With a symmetry ``canonical`` the recorded actors belong to representatives and may be
        renamed along the concrete path, which is why this is not a plain greedy walk. Each
        layer keeps at most ``beam`` candidates (orbits are small; the bound only guards
        against huge symmetry groups). ``last_actor`` continues the switch count of a prefix.
        ``exact``: the recorded transitions first, switches second (a fair cycle: each step was
        chosen to meet a fairness class, and a parallel edge with fewer switches may not).
        """

        def rank(c: int, p: int) -> tuple[int, int]:
            return (p, c) if exact else (c, p)

        canon, fps, succ, trs = self.canonical, self.fingerprints, self.successors, self.transitions
        first = self.worlds[root] if start is None else start
        assert first is not None, "the initial worlds are always kept"
        # entry: (world, last actor, switches, penalty, index of predecessor entry, transition)
        layer: list[tuple[Any, str | None, int, int, int, Any]] = [
            (first, last_actor, 0, 0, -1, None)
        ]
        history: list[list[tuple[Any, str | None, int, int, int, Any]]] = [layer]
        for n_step, (tid, sid) in enumerate(steps, 1):
            rec = trs[tid]
            target = fps[sid]
            by_world: dict[Any, list[int]] = {}
            for ix, e in enumerate(layer):
                by_world.setdefault(e[0], []).append(ix)
            new: list[tuple[Any, str | None, int, int, int, Any]] = []
            pos: dict[tuple[Any, str], int] = {}
            for w, ixs in by_world.items():
                for t, w2 in succ(w):
                    if hash(w2 if canon is None else canon(w2)) != target:
                        continue
                    pen = (
                        0 if t == rec else (1 if (t.name, t.actor) == (rec.name, rec.actor) else 2)
                    )
                    for ix in ixs:
                        _, a, s0, p0, _, _ = layer[ix]
                        c = s0 + (a is not None and a != t.actor)
                        cand = (w2, t.actor, c, p0 + pen, ix, t)
                        j = pos.get((w2, t.actor))
                        if j is None:
                            pos[(w2, t.actor)] = len(new)
                            new.append(cand)
                        elif rank(c, p0 + pen) < rank(new[j][2], new[j][3]):
                            new[j] = cand
            if not new:
                raise RuntimeError(
                    f"trace replay failed at step {n_step} ({rec}): no successor of the "
                    "current world has the recorded key's fingerprint; successors() is not "
                    "deterministic or canonical() is not a bisimulation"
                )
            if len(new) > beam:
                new.sort(key=lambda e: rank(e[2], e[3]))
                del new[beam:]
            history.append(new)
            layer = new
        j = min(range(len(layer)), key=lambda k: rank(layer[k][2], layer[k][3]))
        out: list[tuple[Transition, Any]] = []
        for k in range(len(history) - 1, 0, -1):
            e = history[k][j]
            out.append((e[5], e[0]))
            j = e[4]
        out.reverse()
        return first, out

    def trace(self, sid: int) -> list[tuple[Transition, Any]]:
        """Concrete replayable trace from ``trace_initial(sid)`` to a world with ``sid``'s key."""
        return self.replay(*self.abstract_path(sid))[1]

    def trace_initial(self, sid: int) -> Any:
        w = self.worlds[self.abstract_path(sid)[0]]
        assert w is not None, "the initial worlds are always kept"
        return w

    def finding(self, name: str, sid: int) -> Finding:
        root, steps = self.abstract_path(sid)
        initial, tr = self.replay(root, steps)
        return Finding(name, sid, self.depth[sid], count_switches(tr), initial, tr)


# --------------------------------------------------------------------------------------------
# Exploration
# --------------------------------------------------------------------------------------------


def count_switches(trace: Sequence[tuple[Transition, Any]]) -> int:
    """Number of consecutive steps of a trace performed by different actors."""
    return sum(a[0].actor != b[0].actor for a, b in zip(trace, trace[1:], strict=False))


def _maxrss_mib() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / (1024 * 1024) if sys.platform == "darwin" else r / 1024


class FieldReads:
    """Which attributes each named predicate reads, as bit masks over one field order:
    ``reads`` maps a name to the attribute names its predicate is a function of."""

    def __init__(self, reads: Mapping[str, Sequence[str]]) -> None:
        self.fields = tuple(sorted({f for fs in reads.values() for f in fs}))
        bit = {f: 1 << k for k, f in enumerate(self.fields)}
        self.mask = {nm: sum(bit[f] for f in set(fs)) for nm, fs in reads.items()}
        self._bits = tuple((f, 1 << k) for k, f in enumerate(self.fields))

    def changed(self, a: Any, b: Any) -> int:
        """The mask of the fields whose value in ``b`` is not the very object it is in ``a``."""
        m = 0
        for f, bit in self._bits:
            if getattr(b, f) is not getattr(a, f):
                m |= bit
        return m


# The search is four parts, in the manner of TLC and stateright: the transition table
# (``_Transitions``), the parent/switch bookkeeping (``_Paths``), the property step
# (``_PropertyStep``, run once per BFS layer) and the BFS core (``_bfs``, the layer cursor,
# and ``_expander``, one state's successors), whose inner loop stays flat: per edge it
# interns, looks the key up, stores a new state or updates the parent/switch entries of a
# next-layer one, and records the edge, all inline; only what runs rarely (a new transition,
# a layer boundary) is a call out of it. ``explore`` runs the phases in order: seed the
# initial states, the layers, the part of a layer a cut left unchecked, the result.


class _Transitions:
    """Transitions interned to ints in order of first appearance, each with the id and the bit
    (``1 << id``) of its actor and how often it was enabled and taken."""

    def __init__(self) -> None:
        self.index: dict[Transition, int] = {}
        self.items: list[Transition] = []
        self.actor = array("i")  # tr id -> actor id
        self.bit: list[int] = []  # tr id -> 1 << actor id
        self.actor_index: dict[str, int] = {}
        self.actors: list[str] = []  # actor id -> actor
        self.enabled: list[int] = []  # tr id -> times yielded by successors of an expanded state
        self.taken: list[int] = []  # tr id -> times it discovered a new state

    def intern(self, t: Transition) -> int:
        a = self.actor_index.get(t.actor)
        if a is None:
            a = self.actor_index[t.actor] = len(self.actors)
            self.actors.append(t.actor)
        tid = self.index[t] = len(self.items)
        self.items.append(t)
        self.actor.append(a)
        self.bit.append(1 << a)
        self.enabled.append(0)
        self.taken.append(0)
        return tid


class _Paths:
    """The parent/switch bookkeeping (the fewest-switch tie-break of :func:`explore`): per
    state id its BFS parent, depth, fewest actor switches over its shortest paths, incoming
    transition id and the bit set of the last actors achieving those switches; ``alts`` holds
    one parent per further tying (state, last actor).

    The BFS core updates these inline (it does so per edge): a new state gets the parent that
    found it; a further parent in the previous layer replaces it if it has fewer switches
    (the replaced one is kept in ``displaced`` until the property step has checked the
    layer), and one with as many switches but a last actor not yet in the mask is added to
    the mask and to ``alts``.

    **Fewest-switch tie-break (exact).** A switch is a pair of consecutive transitions with
    different ``actor``. During BFS each state keeps its minimum switch count ``k`` over all
    shortest paths and the *set* of last actors achieving ``k`` (an int bit mask, unbounded
    number of actors). An edge ``p -(actor a)-> s`` into the next layer costs ``k_p`` if ``a``
    is in ``p``'s set, else ``k_p + 1``; ``s`` keeps the minimum, and for every extra last actor
    that ties, one parent per (state, actor) in ``alt_parents`` (a dict, filled only on such
    ties). Since the best path to ``s`` ending with actor ``a`` either extends a best path to
    ``p`` that already ends with ``a`` or pays one switch, keeping the optimum per
    (state, last actor) among the optimal last actors is exact, and all parents at depth d are
    processed before any state at depth d+1 is expanded. The guarantee does not hold for
    traces to states whose layer was cut by ``max_states`` (they are still shortest).

    With a ``canonical`` that permutes actors (symmetry), the recorded transitions are those of
    the stored representatives, whose actor names a permutation may change along a concrete
    path; the BFS tie-break is then only a heuristic for choosing the sequence of abstract
    states, and :meth:`Exploration.replay` minimises switches exactly over the concrete paths
    along that sequence. Traces are shortest in every case; ``Finding.switches`` is counted on
    the concrete trace."""

    def __init__(self) -> None:
        self.parent = array("i")  # -1 for initial states
        self.depth = array("i")
        self.switches = array("i")
        self.in_tr = array("i")  # -1 for initial states
        self.actor_mask: list[int] = []  # all bits (-1) for initial states
        self.alts: dict[tuple[int, int], tuple[int, int]] = {}  # (state, actor) -> (parent, tr)
        # Next-layer state -> the parent that produced its stored world, when a parent with
        # fewer switches replaced it; emptied by the property step once the layer is checked.
        self.displaced: dict[int, int] = {}

    def add_root(self) -> None:
        self.parent.append(-1)
        self.depth.append(0)
        self.switches.append(0)
        self.in_tr.append(-1)
        self.actor_mask.append(-1)  # no previous actor: the first transition is never a switch


class _PropertyStep:
    """The property step: invariants and witnesses, checked one complete BFS layer at a time.

    A property violated (an invariant) or reached (a witness) by a state of depth d is not
    checked on deeper layers. With ``reads``, a state is compared with the parent that
    produced its stored world: a predicate reading only attributes that are the very objects
    of the parent's is skipped, as it had the same value there (held, or not reached)."""

    def __init__(
        self,
        invariants: Mapping[str, Callable[[Any], bool]],
        witnesses: Mapping[str, Callable[[Any], bool]],
        reads: Mapping[str, Sequence[str]],
        stop_at_first_violation: bool,
        labels: Mapping[str, Callable[[Any], bool]] = _EMPTY,
        keep_worlds: bool = True,
        n_initial: int = 0,
    ) -> None:
        self.label_items = [(nm, p, bytearray()) for nm, p in labels.items()]
        self.labels = {nm: b for nm, _, b in self.label_items}
        self.keep_worlds = keep_worlds
        self.n_initial = n_initial  # ids below it (the initial worlds) are never released
        self.released = 0  # worlds of ids n_initial..released-1 were released
        self.inv_items = list(invariants.items())
        self.wit_items = list(witnesses.items())
        fr = FieldReads({nm: fs for nm, fs in reads.items() if nm in invariants or nm in witnesses})
        self.read_mask = fr.mask  # name -> mask of the fields it reads (missing: always checked)
        self.changed = fr.changed
        self.inv_hits: dict[str, list[int]] = {}
        self.wit_hits: dict[str, list[int]] = {}
        self.stop = stop_at_first_violation
        self.checked = 0  # states 0..checked-1 were checked

    def check(self, lo: int, hi: int, worlds: list[Any], paths: _Paths) -> bool:
        """Check states ``lo..hi-1`` (one whole layer, or the part of one stored before
        ``max_states`` ended the search) against the properties no earlier layer violated or
        reached, and record their labels. True: stop the search (``stop_at_first_violation``
        and a violation). Then, unless every world is kept, release the worlds of the states
        before ``lo`` (all expanded, and no longer parents the property step compares with)."""
        for _, pred, out in self.label_items:
            out.extend(bool(pred(worlds[j])) for j in range(lo, hi))
        inv = [(nm, p, self.read_mask.get(nm, 0)) for nm, p in self.inv_items
               if nm not in self.inv_hits]
        wit = [(nm, p, self.read_mask.get(nm, 0)) for nm, p in self.wit_items
               if nm not in self.wit_hits]
        if inv or wit:
            parents = None
            if any(x[2] for x in inv) or any(x[2] for x in wit):
                parents = paths.parent[lo:hi]
                for j, p in paths.displaced.items():
                    parents[j - lo] = p  # all in lo..hi-1: displaced only in the next layer
            self._check(range(lo, hi), parents, worlds, inv, wit)
        paths.displaced.clear()
        self.checked = hi
        start = max(self.released, self.n_initial)
        if not self.keep_worlds and lo > start:
            # every state before lo is expanded and its last use (as the parent of a state
            # of this layer) is over: only the traces need it again, rebuilt by replay
            worlds[start:lo] = [None] * (lo - start)
            self.released = lo
        return self.stop and bool(self.inv_hits)

    def _check(
        self,
        ids: range,
        parents: array | None,
        worlds: list[Any],
        inv: list[tuple[str, Callable[[Any], bool], int]],
        wit: list[tuple[str, Callable[[Any], bool], int]],
    ) -> None:
        changed_fields = self.changed
        inv_hits, wit_hits = self.inv_hits, self.wit_hits
        changed = -1
        for k, j in enumerate(ids):
            w2 = worlds[j]
            if parents is not None:
                p = parents[k]
                if p < 0:
                    changed = -1
                else:
                    changed = changed_fields(worlds[p], w2)
            for name, pred, rm in inv:
                if rm and not rm & changed:
                    continue  # reads nothing that differs from the parent: held there
                if not pred(w2):
                    inv_hits.setdefault(name, []).append(j)
            for name, pred, rm in wit:
                if rm and not rm & changed:
                    continue  # not reached at the parent, so not here
                if pred(w2):
                    wit_hits.setdefault(name, []).append(j)

    def report(self, ex: Exploration) -> None:
        """Fill ``ex.violations`` and ``ex.witnesses``: per property, the hit of fewest
        switches (then smallest id) among its shortest ones, with a concrete trace."""
        sw = ex.switches
        for name, _ in self.inv_items:
            hits = self.inv_hits.get(name)
            if hits:
                ex.violations[name] = ex.finding(name, min(hits, key=lambda s: (sw[s], s)))
        for name, _ in self.wit_items:
            hits = self.wit_hits.get(name)
            ex.witnesses[name] = (ex.finding(name, min(hits, key=lambda s: (sw[s], s)))
                                  if hits else None)


def _hashing(canonical: Callable[[W], Hashable] | None, seen: set[int]) -> Callable[[W], Hashable]:
    """``canonical`` (None: the identity) that also adds the hash of each world to ``seen``."""
    add = seen.add

    def key(w: W) -> Hashable:
        add(hash(w))
        return w if canonical is None else canonical(w)

    return key


@dataclass
class _Store:
    """What the search stores: the seen set (fingerprint -> id; tiered and spilled to disk
    under a memory budget: spec/seen.py), the worlds and fingerprints per id, the
    parent/switch bookkeeping, the interned transitions, the edges (``keep_graph``) and the
    deadlocks with their labels."""

    index: SeenSet
    worlds: list[Any | None]
    fps: array  # 'q'
    paths: _Paths
    trs: _Transitions
    edges: tuple[array, array, array] | None
    deadlocks: array  # 'i'
    at_deadlock: list[tuple[Callable[[Any], bool], bytearray]]

    @staticmethod
    def empty(keep_graph: bool, deadlock_labels: Mapping[str, Callable[[Any], bool]],
              seen: SeenSet) -> _Store:
        edges = (array("i"), array("i"), array("i")) if keep_graph else None
        return _Store(seen, [], array("q"), _Paths(), _Transitions(), edges, array("i"),
                      [(p, bytearray()) for p in deadlock_labels.values()])

    def other_bytes(self, n_labels: int) -> int:
        """The estimated bytes stored besides the seen set: the per-state arrays and labels,
        the edges, the tying parents and the deadlocks."""
        n_edges = len(self.edges[0]) if self.edges is not None else 0
        return (len(self.fps) * (PER_STATE_BYTES + n_labels) + 12 * n_edges
                + 200 * len(self.paths.alts) + len(self.deadlocks) * (4 + len(self.at_deadlock)))

    def deadlock(self, i: int, w: Any) -> None:
        """Record state ``i`` (world ``w``) as a deadlock, with its deadlock labels."""
        self.deadlocks.append(i)
        for pred, out in self.at_deadlock:
            out.append(bool(pred(w)))


def _seed(initial: Sequence[W], canon: Callable[[W], Hashable] | None, st: _Store,
          max_n: int) -> bool:
    """Store the initial worlds of distinct keys as ids 0, 1, ... True: ``max_n`` cut them."""
    for w in initial:
        fp = hash(w if canon is None else canon(w))
        if fp in st.index:
            continue
        if len(st.worlds) >= max_n:
            return True
        st.index.hot[fp] = len(st.worlds)
        st.worlds.append(w)
        st.fps.append(fp)
        st.paths.add_root()
    return False


def _bfs(
    st: _Store,
    successors: Callable[[W], Iterable[tuple[Transition, W]]],
    canon: Callable[[W], Hashable] | None,
    props: _PropertyStep,
    max_n: int,
    on_progress: Callable[[int, int], None] | None,
    progress_every: int,
    n_labels: int = 0,
) -> tuple[int, bool, bool]:
    """The BFS core, one layer at a time: ids are assigned in BFS order, so when the search
    reaches the first state of a layer every state of that layer is stored (ids lo..hi-1) and
    none of the next; the property step checks the layer, then :func:`_expander` expands it.
    Returns ``(expanded, truncated, stopped)``; ids below ``expanded`` were expanded. If
    ``max_states`` cut the search short, the states stored of the last layer are left for the
    caller to check. ``on_progress(stored, expanded)`` is called every ``progress_every``
    expanded states. At each layer boundary the seen set may move the older layers out of
    memory (a memory budget: spec/seen.py); ``n_labels``: the labels kept per state."""
    worlds, depth = st.worlds, st.paths.depth
    expand = _expander(st, successors, canon, max_n, on_progress, progress_every)
    lo = 0
    while lo < len(worlds):
        hi = len(worlds)
        st.index.settle(lo, st.fps, st.other_bytes(n_labels))
        if props.check(lo, hi, worlds, st.paths):
            return lo, False, True  # stop_at_first_violation
        i = expand(lo, hi, depth[lo] + 1)
        if i < hi:
            return i, True, False  # max_states: state i was not fully expanded
        lo = hi
    return lo, False, False


def _expander(
    st: _Store,
    successors: Callable[[W], Iterable[tuple[Transition, W]]],
    canon: Callable[[W], Hashable] | None,
    max_n: int,
    on_progress: Callable[[int, int], None] | None,
    progress_every: int,
) -> Callable[[int, int, int], int]:
    """``expand(lo, hi, d1)``: store the successors of the layer ``lo..hi-1`` (each new key
    at depth ``d1``), keep the next layer's fewest-switch parents (:class:`_Paths`), record
    the edges and deadlocks; returns the first id not fully expanded (``hi`` unless
    ``max_states`` was hit). The per-edge loop stays flat, on locals bound once per layer.
    Once the seen set is tiered (spec/seen.py), the successors of a chunk of the layer are
    enumerated first and those not in the hot map looked up in the runs at once
    (:func:`_prefetch`); the per-edge loop then reads the same (transition, world,
    fingerprint) triples either way."""
    report = [progress_every if on_progress is not None else sys.maxsize]

    def expand(lo: int, hi: int, d1: int) -> int:
        index, worlds, paths, trs = st.index.hot, st.worlds, st.paths, st.trs
        succ_of, old_get = _triples(st, successors, canon, hi)
        parent, sw, in_tr, amask = paths.parent, paths.switches, paths.in_tr, paths.actor_mask
        alts, displaced, tr_get, intern = paths.alts, paths.displaced, trs.index.get, trs.intern
        tr_bit, tr_actor, enabled, taken = trs.bit, trs.actor, trs.enabled, trs.taken
        idx_get, worlds_append, fps_append = index.get, worlds.append, st.fps.append
        parent_append, depth_append = parent.append, paths.depth.append
        sw_append, in_tr_append, amask_append = sw.append, in_tr.append, amask.append
        keep = st.edges is not None
        esrc, edst, etr = st.edges if st.edges is not None else (array("i"),) * 3
        esrc_append, edst_append, etr_append = esrc.append, edst.append, etr.append
        n = len(worlds)
        next_report = report[0]
        for i in range(lo, hi):
            w = worlds[i]
            k = sw[i]
            m = amask[i]
            any_succ = False
            for t, w2, fp in succ_of(i, w):
                any_succ = True
                tid = tr_get(t)
                if tid is None:
                    tid = intern(t)
                enabled[tid] += 1
                j = idx_get(fp)
                if j is None:
                    j = old_get(fp)  # an older layer's state, in the runs (tiered only)
                    if j is None:
                        if n >= max_n:
                            return i
                        j = n
                        n += 1
                        index[fp] = j
                        worlds_append(w2)
                        fps_append(fp)
                        parent_append(i)
                        depth_append(d1)
                        b = tr_bit[tid]
                        sw_append(k if m & b else k + 1)
                        in_tr_append(tid)
                        amask_append(b)
                        taken[tid] += 1
                elif j >= hi:
                    # Another shortest-path parent of a next-layer state (see _Paths): keep
                    # the fewest switches, and one parent per further tying last actor.
                    b = tr_bit[tid]
                    c = k if m & b else k + 1
                    cj = sw[j]
                    if c < cj:
                        displaced.setdefault(j, parent[j])
                        sw[j] = c
                        parent[j] = i
                        in_tr[j] = tid
                        amask[j] = b
                    elif c == cj and not amask[j] & b:
                        amask[j] |= b
                        alts[(j, tr_actor[tid])] = (i, tid)
                if keep:
                    esrc_append(i)
                    edst_append(j)
                    etr_append(tid)
            if not any_succ:
                st.deadlock(i, w)
            if i + 1 >= next_report:
                next_report += progress_every
                on_progress(n, i + 1)  # type: ignore[misc]
        report[0] = next_report
        return hi

    return expand


_PREFETCH = 256  # states of a layer whose successors a tiered search looks up at once
Triple = tuple["Transition", Any, int]


def _triples(
    st: _Store,
    successors: Callable[[W], Iterable[tuple[Transition, W]]],
    canon: Callable[[W], Hashable] | None,
    hi: int,
) -> tuple[Callable[[int, Any], Iterable[Triple]], Callable[[int], int | None]]:
    """For one layer (ending before ``hi``): ``succ_of(i, world)``, the successors of state
    ``i`` as (transition, world, fingerprint) triples, and ``old_get(fp)``, the id of a
    fingerprint an older layer holds (None: not there). Untiered, the triples are made as the
    successors come and there is no older layer; tiered (spec/seen.py), the successors of
    ``_PREFETCH`` states are enumerated at once and their fingerprints not in the hot map
    looked up in the runs in one search per run (``old_get`` then answers for that chunk)."""
    if not st.index.tiered:
        def lazy(i: int, w: Any) -> Iterable[Triple]:
            return ((t, w2, hash(w2 if canon is None else canon(w2))) for t, w2 in successors(w))

        none: dict[int, int] = {}

        def nowhere(fp: int) -> int | None:
            return none.get(fp)

        return lazy, nowhere
    worlds, hot = st.worlds, st.index.hot
    chunk: list[list[Triple]] = []
    old: dict[int, int] = {}
    at = [0, 0]  # the chunk's ids: at[0]..at[1]-1

    def prefetched(i: int, w: Any) -> Iterable[Triple]:
        if i >= at[1]:
            at[:] = [i, min(hi, i + _PREFETCH)]
            chunk[:] = [[(t, w2, hash(w2 if canon is None else canon(w2)))
                         for t, w2 in successors(x)]  # type: ignore[arg-type]
                        for x in worlds[at[0]:at[1]]]
            old.clear()
            old.update(st.index.find_old(fp for succ in chunk for _, _, fp in succ
                                         if fp not in hot))
        return chunk[i - at[0]]

    def old_get(fp: int) -> int | None:
        return old.get(fp)

    return prefetched, old_get


def _stats(t0: float, rss0: float, st: _Store, expanded: int, truncated: bool,
           stopped: bool, n_labels: int = 0) -> Stats:
    n = len(st.worlds)
    seconds = time.perf_counter() - t0
    rss1 = _maxrss_mib()
    return Stats(
        states=n,
        transitions=sum(st.trs.enabled),
        expanded=expanded,
        max_depth=st.paths.depth[n - 1] if n else 0,
        seconds=seconds,
        states_per_second=n / seconds if seconds > 0 else float("inf"),
        peak_rss_mib=rss1,
        rss_delta_mib=max(0.0, rss1 - rss0),
        truncated=truncated,
        stopped_early=stopped,
        search_peak_rss_mib=max(st.index.peak_rss_mib, resident_mib()),
        stored_bytes=st.index.nbytes() + st.other_bytes(n_labels),
        seen=st.index.describe(),
    )


def _exploration(st: _Store, successors: Callable[[Any], Iterable[tuple[Transition, Any]]],
                 canonical: Callable[[Any], Hashable] | None, props: _PropertyStep,
                 deadlock_labels: Mapping[str, Callable[[Any], bool]], n_initial: int,
                 expanded: int, seen: set[int] | None, stats: Stats) -> Exploration:
    """The result of a search, from what it stored (violations and witnesses still empty)."""
    paths, trs, edges = st.paths, st.trs, st.edges
    return Exploration(
        successors=successors,
        canonical=canonical,
        index=st.index,
        worlds=st.worlds,
        fingerprints=st.fps,
        labels=props.labels,
        deadlock_labels={nm: b for nm, (_, b) in zip(deadlock_labels, st.at_deadlock,
                                                     strict=True)},
        initial_ids=list(range(n_initial)),
        parent=paths.parent,
        depth=paths.depth,
        switches=paths.switches,
        in_tr=paths.in_tr,
        actor_mask=paths.actor_mask,
        alt_parents=paths.alts,
        transitions=trs.items,
        tr_actor=trs.actor,
        actors=trs.actors,
        enabled_count=trs.enabled,
        taken_count=trs.taken,
        edges_src=edges[0] if edges else None,
        edges_dst=edges[1] if edges else None,
        edges_tr=edges[2] if edges else None,
        expanded=expanded,
        deadlocks=st.deadlocks,
        violations={},
        witnesses={},
        invariants_checked=[nm for nm, _ in props.inv_items],
        concrete_seen=len(seen) if seen is not None else None,
        stats=stats,
    )


def explore(
    initial: Sequence[W],
    successors: Callable[[W], Iterable[tuple[Transition, W]]],
    *,
    invariants: Mapping[str, Callable[[W], bool]],
    canonical: Callable[[W], Hashable] | None = None,
    witnesses: Mapping[str, Callable[[W], bool]] = _EMPTY,
    stop_at_first_violation: bool = False,
    max_states: int | None = None,
    keep_graph: bool = False,
    measure_reduction: bool = False,
    reads: Mapping[str, Sequence[str]] = _EMPTY,
    labels: Mapping[str, Callable[[W], bool]] = _EMPTY,
    deadlock_labels: Mapping[str, Callable[[W], bool]] = _EMPTY,
    keep_worlds: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
    progress_every: int = 16384,
    memory_budget_mib: float | None = None,
    spill_dir: str | None = None,
) -> Exploration:
    """Breadth-first exploration of every state reachable from ``initial`` (the search is
    described above :class:`_Transitions`; fingerprints in the module docstring).

    * ``invariants``: name -> predicate, True = holds. Checked on every stored state (the
      first concrete world of its key). For each violated invariant the reported state has a
      shortest trace and, among the shortest, the fewest actor switches (:class:`_Paths`).
    * ``witnesses``: name -> predicate that some reachable state must satisfy; same choice.
    * ``canonical``: key under which worlds are deduplicated (None = the world itself).
    * ``stop_at_first_violation``: stop after finishing the BFS layer in which the first
      violation was found (so the reported traces are the same as without the flag).
      Otherwise every invariant is checked until its first violating depth, then dropped.
    * ``max_states``: bound on stored states; when a new state would exceed it the search
      stops immediately and ``stats.truncated`` is True.
    * ``keep_graph``: record every edge (needed by :func:`check_liveness`).
    * ``measure_reduction``: hash every concrete world seen into a set to report
      ``reduction_factor`` (costs memory and time; off by default).
    * ``reads``: invariant or witness name -> the attributes of a world its predicate reads
      (it must be a function of those and of nothing that differs between worlds): a state
      sharing them (``is``) with the parent that produced it is not checked again
      (:class:`_PropertyStep`).
    * ``labels``: name -> predicate evaluated on every stored state, kept as one byte per
      state in ``Exploration.labels`` (what :func:`check_liveness` reads instead of the
      worlds); ``deadlock_labels``: the same, evaluated on each deadlock only
      (``Exploration.deadlock_labels``, aligned with ``deadlocks``).
    * ``keep_worlds``: keep every stored state's world in ``Exploration.worlds`` (default:
      only the initial worlds remain at the end; the rest are released layer by layer, and
      traces are rebuilt by replay).
    * ``on_progress(stored, expanded)``: called every ``progress_every`` expanded states
      (progress of a long search; it must not change anything the search reads).
    * ``memory_budget_mib``: what the search may store in memory (None: no bound, the seen
      set is one dict). Over it, the older layers' fingerprints move to sorted runs, and
      then to disk under ``spill_dir`` (None: ``$TMPDIR``), in a temporary directory removed
      when the search ends, however it ends (spec/seen.py). The result is the same.

    Properties are checked one layer at a time, once the layer is complete (the property
    step); the verdicts and traces are those of checking each state as it is stored.
    """
    t0, rss0 = time.perf_counter(), _maxrss_mib()
    max_n = sys.maxsize if max_states is None else max_states
    seen: set[int] | None = set() if measure_reduction else None
    canon = canonical if seen is None else _hashing(canonical, seen)
    st = _Store.empty(keep_graph, deadlock_labels, SeenSet(memory_budget_mib, spill_dir))
    props = _PropertyStep(invariants, witnesses, reads, stop_at_first_violation, labels,
                          keep_worlds)
    with sigterm_raises():
        try:
            seed_cut = _seed(initial, canon, st, max_n)  # 1. the initial states
            props.n_initial = n_initial = len(st.worlds)
            expanded, cut, stopped = _bfs(st, successors, canon, props, max_n, on_progress,
                                          max(1, progress_every),
                                          len(labels))  # 2. the layers, each checked
        finally:
            st.index.close()  # the spilled runs' directory (their mappings stay readable)
    props.check(props.checked, len(st.worlds), st.worlds, st.paths)  # 3. a cut's rest
    stats = _stats(t0, rss0, st, expanded, seed_cut or cut, stopped, len(labels))
    ex = _exploration(st, successors, canonical, props, deadlock_labels, n_initial, expanded,
                      seen, stats)  # 4. the result, and in it 5. each property's trace
    props.report(ex)
    return ex


# --------------------------------------------------------------------------------------------
# Coverage
# --------------------------------------------------------------------------------------------


@dataclass
class Coverage:
    enabled: dict[str, int]  # label -> times enabled (yielded by successors of expanded states)
    taken: dict[str, int]  # label -> times it led to a newly discovered state
    never_enabled: list[str]  # expected labels never enabled
    never_taken: list[str]  # expected labels enabled but never discovering a new state
    unexpected: list[str]  # labels seen that were not expected (typos, new branches)


def coverage(exploration: Exploration, expected_labels: Iterable[str]) -> Coverage:
    """Aggregate the per-transition counters by ``Transition.label()``."""
    en: dict[str, int] = {}
    tk: dict[str, int] = {}
    for t, e, k in zip(
        exploration.transitions, exploration.enabled_count, exploration.taken_count, strict=True
    ):
        lab = t.label()
        en[lab] = en.get(lab, 0) + e
        tk[lab] = tk.get(lab, 0) + k
    expected = list(dict.fromkeys(expected_labels))
    exp_set = set(expected)
    return Coverage(
        enabled=en,
        taken=tk,
        never_enabled=[lab for lab in expected if en.get(lab, 0) == 0],
        never_taken=[lab for lab in expected if en.get(lab, 0) > 0 and tk.get(lab, 0) == 0],
        unexpected=sorted(lab for lab in en if lab not in exp_set),
    )


# --------------------------------------------------------------------------------------------
# Liveness
# --------------------------------------------------------------------------------------------


@dataclass
class LivenessResult:
    name: str
    holds: bool
    kind: Literal["deadlock", "fair_cycle"] | None  # kind of the reported counterexample
    initial: Any | None  # concrete initial world of the lasso
    prefix: list[tuple[Transition, Any]]  # from `initial` to the cycle entry (or the deadlock)
    cycle: list[tuple[Transition, Any]]  # from the entry back to a world with the entry's key
    entry: int | None  # state id of the cycle entry / deadlock
    scc_size: int  # states in the offending SCC (1 for a deadlock)
    deadlocks: int  # non-goal deadlocks in scope (not ignored)
    fair_sccs: int  # fair non-trivial SCCs of non-goal states in scope
    checked_states: int  # non-goal expanded states in scope
    complete: bool  # False if the exploration was truncated/stopped: a pass proves nothing
    scope: str


def strongly_connected(n: int, src: np.ndarray, dst: np.ndarray) -> list[list[int]]:
    """The non-trivial strongly connected components (more than one state, or one with a
    self-loop) of the graph on states ``0..n-1`` with edges ``src[k] -> dst[k]`` (``src``
    sorted), each as a sorted list of ids, ordered by smallest member.

    States with no in-scope predecessor or successor cannot be on a cycle: they are trimmed
    in rounds on the arrays (most of a breadth-first state graph goes that way), then an
    iterative Tarjan (no recursion, so no depth limit) runs on what is left."""
    alive_n, alive_e = _trim_acyclic(n, src, dst)
    if not alive_n.any():
        return []
    return _tarjan(n, src[alive_e], dst[alive_e], np.nonzero(alive_n)[0].tolist())


def _trim_acyclic(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the states and edges left after removing, in rounds, the states without an
    in-scope predecessor or successor (they lie on no cycle). Stops when a round removes
    little (under 1/64 of what is left): Tarjan does the rest cheaper."""
    alive_e = np.ones(len(src), dtype=bool)
    alive_n = np.zeros(n, dtype=bool)
    alive_n[src] = True
    left = int(alive_n.sum())
    while left:
        s, d = src[alive_e], dst[alive_e]
        has_out = np.zeros(n, dtype=bool)
        has_out[s] = True
        has_in = np.zeros(n, dtype=bool)
        has_in[d] = True
        alive_n &= has_out & has_in
        alive_e &= alive_n[src] & alive_n[dst]
        now = int(alive_n.sum())
        if now == left or now > left - left // 64:
            break
        left = now
    return alive_n, alive_e


def _tarjan(n: int, s: np.ndarray, d: np.ndarray, roots: list[int]) -> list[list[int]]:
    """Iterative Tarjan over the edges ``s[k] -> d[k]`` (``s`` sorted) from each of ``roots``
    not yet visited: the non-trivial components, sorted, ordered by smallest member."""
    # machine-word arrays, not lists of int objects: a few bytes per state and edge
    off = array("q", np.searchsorted(s, np.arange(n + 1)).astype(np.int64).tobytes())
    succ = array("i", np.asarray(d, dtype=np.int32).tobytes())
    index = array("i", [-1]) * n
    low = array("i", [0]) * n
    on_stack = bytearray(n)
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in roots:
        if index[root] >= 0:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        work = [(root, off[root])]
        while work:
            v, k = work[-1]
            end = off[v + 1]
            descended = False
            while k < end:
                u = succ[k]
                k += 1
                if index[u] < 0:
                    work[-1] = (v, k)
                    index[u] = low[u] = counter
                    counter += 1
                    stack.append(u)
                    on_stack[u] = True
                    work.append((u, off[u]))
                    descended = True
                    break
                if on_stack[u] and index[u] < low[v]:
                    low[v] = index[u]
            if descended:
                continue
            work.pop()
            if work:
                p = work[-1][0]
                if low[v] < low[p]:
                    low[p] = low[v]
            if low[v] == index[v]:
                c = _pop_component(stack, on_stack, v)
                if len(c) > 1 or v in succ[off[v] : off[v + 1]]:
                    c.sort()
                    out.append(c)
    out.sort()
    return out


def _pop_component(stack: list[int], on_stack: bytearray, v: int) -> list[int]:
    """Pop Tarjan's stack down to the component root ``v``: the component's states."""
    c = []
    while True:
        u = stack.pop()
        on_stack[u] = False
        c.append(u)
        if u == v:
            return c


class _Edges:
    """The stored edges as int32 arrays (``src`` sorted) with CSR offsets per state."""

    def __init__(self, ex: Exploration) -> None:
        assert ex.edges_src is not None and ex.edges_dst is not None and ex.edges_tr is not None
        self.n = n = len(ex.fingerprints)
        self.src = _int32(ex.edges_src)
        self.dst = _int32(ex.edges_dst)
        self.tr = _int32(ex.edges_tr)
        self.offsets = np.searchsorted(self.src, np.arange(n + 1))  # CSR for edge look-ups

    def tid(self, u: int, v: int) -> int:
        """The transition id of the first stored edge ``u -> v``."""
        lo, hi = int(self.offsets[u]), int(self.offsets[u + 1])
        hit = np.nonzero(self.dst[lo:hi] == v)[0]
        return int(self.tr[lo + hit[0]])


def _int32(a: array) -> np.ndarray:
    return np.frombuffer(a, dtype=np.int32) if len(a) else np.zeros(0, np.int32)


def _distances(
    n: int, roots: list[int], s_in: np.ndarray, d_in: np.ndarray
) -> tuple[np.ndarray, dict[int, int]]:
    """Breadth-first distances over the edges ``s_in -> d_in`` (sorted by source) from
    ``roots`` (-1: unreached), and the BFS predecessor of each reached non-root."""
    dist = np.full(n, -1, dtype=np.int64)
    pred: dict[int, int] = {}
    off_in = np.searchsorted(s_in, np.arange(n + 1)).tolist()
    succ_in = d_in.tolist()
    frontier = list(roots)
    for s in frontier:
        dist[s] = 0
    while frontier:
        nxt = []
        for u in frontier:
            for k in range(off_in[u], off_in[u + 1]):
                v = succ_in[k]
                if dist[v] < 0:
                    dist[v] = dist[u] + 1
                    pred[v] = u
                    nxt.append(v)
        frontier = nxt
    return dist, pred


@dataclass
class _FairSCCs:
    """The non-trivial SCCs of the in-scope subgraph (refined under strong fairness) and
    which of them are fair."""

    sccs: list[list[int]]
    comp: np.ndarray  # state -> index in sccs, -1 outside every kept SCC
    edge_comp: np.ndarray  # in-scope edge -> comp of its source
    internal: np.ndarray  # in-scope edge -> both ends in the same SCC
    classes: list[np.ndarray]  # per fairness class (weak, then strong): tr id -> in the class
    enabled: list[np.ndarray]  # per fairness class: state -> one of its transitions enabled
    strong: list[bool]  # per fairness class: strongly fair
    fair: list[int]  # indices of the fair SCCs


def _class_arrays(
    g: _Edges, transitions: list[Transition], fairness: Sequence[Callable[[Transition], bool]]
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per class: which transition ids are in it, and at which states one of them is enabled
    (an edge of the whole graph, goal or not, leaves the state by it)."""
    classes = [
        np.fromiter((bool(f(t)) for t in transitions), dtype=bool, count=len(transitions))
        for f in fairness
    ]
    enabled = []
    for fc in classes:
        en = np.zeros(g.n, dtype=bool)
        if len(g.tr):
            en[g.src[fc[g.tr]]] = True
        enabled.append(en)
    return classes, enabled


def _label_sccs(n: int, node_ok: np.ndarray, s_in: np.ndarray, d_in: np.ndarray
                ) -> tuple[list[list[int]], np.ndarray]:
    """The non-trivial SCCs over the edges ``s_in -> d_in`` whose states are ``node_ok``, and
    state -> index among them (-1: in none). An SCC is wholly in scope or not at all: the
    reached set of scope "initial" is closed under in-scope edges."""
    comp = np.full(n, -1, dtype=np.int64)
    sccs: list[list[int]] = []
    for c in strongly_connected(n, s_in, d_in):
        if node_ok[c[0]]:
            comp[c] = len(sccs)
            sccs.append(c)
    return sccs, comp


def _streett(
    n: int, sccs: list[list[int]], comp: np.ndarray, s_in: np.ndarray, d_in: np.ndarray,
    t_in: np.ndarray, strong: list[tuple[np.ndarray, np.ndarray]],
) -> tuple[list[list[int]], np.ndarray]:
    """Refine the SCCs under strong fairness (the Streett-style refinement): a path that stays
    in an SCC where a strongly fair class F is enabled somewhere but no internal edge is in F
    must eventually avoid the states enabling F, so those states are pruned and the SCCs of
    what is left computed again, until every SCC takes each strong class it enables."""
    while sccs:
        cs, cd = comp[s_in], comp[d_in]
        internal = (cs >= 0) & (cs == cd)
        prune = np.zeros(n, dtype=bool)
        for fc, en in strong:
            taken = np.zeros(len(sccs), dtype=bool)
            taken[cs[internal & fc[t_in]]] = True
            prune |= (comp >= 0) & en & ~taken[comp]
        if not prune.any():
            break
        alive = (comp >= 0) & ~prune
        keep = alive[s_in] & alive[d_in]
        sccs, comp = _label_sccs(n, alive, s_in[keep], d_in[keep])
    return sccs, comp


def _fair_sccs(
    g: _Edges,
    node_ok: np.ndarray,
    s_in: np.ndarray,
    d_in: np.ndarray,
    t_in: np.ndarray,
    transitions: list[Transition],
    fairness: Sequence[Callable[[Transition], bool]],
    strong: Sequence[Callable[[Transition], bool]] = (),
) -> _FairSCCs:
    """Label the non-trivial SCCs of the in-scope subgraph (``s_in -> d_in`` by ``t_in``)
    whose states are in scope, refine them under the ``strong`` classes (:func:`_streett`),
    and find the fair ones: for every weak class F, F is disabled at some state of the SCC or
    some internal edge is in F (every strong class holds in each refined SCC)."""
    n = g.n
    sccs, comp = _label_sccs(n, node_ok, s_in, d_in)
    classes, enabled = _class_arrays(g, transitions, [*fairness, *strong])
    is_strong = [False] * len(fairness) + [True] * len(strong)
    if strong:
        sccs, comp = _streett(n, sccs, comp, s_in, d_in, t_in,
                              list(zip(classes, enabled, strict=True))[len(fairness):])
    cs, cd = comp[s_in], comp[d_in]
    internal = (cs >= 0) & (cs == cd)
    fair = np.ones(len(sccs), dtype=bool)
    in_scc = np.nonzero(comp >= 0)[0]
    for fc, en in list(zip(classes, enabled, strict=True))[:len(fairness)]:
        ok = np.zeros(len(sccs), dtype=bool)
        ok[comp[in_scc[~en[in_scc]]]] = True  # F is disabled somewhere in the SCC
        ok[cs[internal & fc[t_in]]] = True  # or F is taken inside the SCC
        fair &= ok
    return _FairSCCs(sccs, comp, cs, internal, classes, enabled, is_strong,
                     np.nonzero(fair)[0].tolist())


@dataclass
class _Scope:
    """What a liveness check analyses: the non-goal expanded states in scope (``node_ok``),
    the edges between non-goal expanded states (``s_in -> d_in`` by ``t_in``), the non-goal
    deadlocks in scope not ignored, and the distance that ranks counterexamples (with the
    BFS predecessors over non-goal states for scope "initial"; None: the exploration's own
    shortest paths)."""

    g: _Edges
    node_ok: np.ndarray
    s_in: np.ndarray
    d_in: np.ndarray
    t_in: np.ndarray
    dead: list[int]
    dist: np.ndarray
    pred: dict[int, int] | None


def _scope(ex: Exploration, goal: Callable[[Any], bool] | str,
           ignore_deadlock: Callable[[Any], bool] | str | None, scope: str) -> _Scope:
    """The analysed part of the graph (see :class:`_Scope`)."""
    g = _Edges(ex)
    node_ok = ~_label(ex, goal, "goal")
    node_ok[ex.expanded :] = False
    emask = node_ok[g.src] & node_ok[g.dst]
    s_in, d_in, t_in = g.src[emask], g.dst[emask], g.tr[emask]
    dead = [s for s in ex.deadlocks if node_ok[s]]
    if isinstance(ignore_deadlock, str):
        ign = ex.deadlock_labels[ignore_deadlock]
        at = {s: k for k, s in enumerate(ex.deadlocks)}
        dead = [s for s in dead if not ign[at[s]]]
    elif ignore_deadlock is not None:
        _need_worlds(ex, "ignore_deadlock")
        dead = [s for s in dead if not ignore_deadlock(ex.worlds[s])]
    if scope == "always":
        dist = np.frombuffer(ex.depth, dtype=np.int32).astype(np.int64)
        return _Scope(g, node_ok, s_in, d_in, t_in, dead, dist, None)
    dist, pred = _distances(g.n, [s for s in ex.initial_ids if node_ok[s]], s_in, d_in)
    reach = dist >= 0
    node_ok &= reach
    dead = [s for s in dead if reach[s]]
    return _Scope(g, node_ok, s_in, d_in, t_in, dead, dist, pred)


def _closest(sc: _Scope, fs: _FairSCCs) -> tuple[int | None, int | None, int]:
    """The counterexample with the shortest prefix: ``(deadlock, None, -1)``, ``(None, cycle
    entry, its fair SCC)`` or, if there is none, ``(None, None, -1)``; a deadlock wins a tie
    (then the smaller state id)."""
    dist = sc.dist
    best_dead = min(sc.dead, key=lambda s: (int(dist[s]), s)) if sc.dead else None
    best_entry = None
    best_scc = -1
    for k in fs.fair:
        e = min(fs.sccs[k], key=lambda s: (int(dist[s]), s))
        if best_entry is None or (int(dist[e]), e) < (int(dist[best_entry]), best_entry):
            best_entry, best_scc = e, k
    if best_dead is not None and (best_entry is None
                                  or int(dist[best_dead]) <= int(dist[best_entry])):
        return best_dead, None, -1
    return None, best_entry, best_scc


def check_liveness(
    exploration: Exploration,
    goal: Callable[[W], bool] | str,
    fairness: Sequence[Callable[[Transition], bool]],
    *,
    name: str,
    ignore_deadlock: Callable[[W], bool] | str | None = None,
    scope: Literal["always", "initial"] = "always",
    strong: Sequence[Callable[[Transition], bool]] = (),
) -> LivenessResult:
    """Check that every fair infinite path reaches ``goal`` and no non-goal state deadlocks.

    ``scope="always"`` (default) checks this from every reachable state, i.e. all reachable
    non-goal states are analysed (a fair non-goal cycle reachable only after a goal state is a
    violation too): leads-to ``true ~> goal``. ``scope="initial"`` only considers paths from
    the initial states that have not yet met a goal state (plain "eventually goal").

    ``fairness`` is a list of classes of transitions (predicates), each weakly fair: a class
    continuously enabled must eventually be taken; ``strong`` classes are strongly fair: a
    class enabled infinitely often must eventually be taken. A non-trivial SCC (one with an
    internal edge) of the non-goal subgraph, refined under the strong classes (states
    enabling a strong class the SCC never takes are pruned and the SCCs recomputed), is a
    violation iff, for every weak class F, some state of the SCC has no enabled F transition
    or some internal edge is in F. Under symmetry reduction the classes (and ``goal``)
    should be invariant under the symmetry, else the result is an approximation.

    States that were never (fully) expanded because of ``max_states`` are left out, so a
    reported counterexample is genuine, but ``holds`` is only a proof if ``complete``.
    ``ignore_deadlock(world)`` marks states (e.g. at a model bound) not to count as deadlocks.
    Requires ``explore(..., keep_graph=True)``. ``goal`` (and ``ignore_deadlock``) is either
    the name of a label ``explore`` recorded (``labels``; ``deadlock_labels``) or a predicate
    on worlds, which needs ``explore(..., keep_worlds=True)``.
    """
    ex = exploration
    if ex.edges_src is None or ex.edges_dst is None or ex.edges_tr is None:
        raise ValueError("check_liveness needs explore(..., keep_graph=True)")
    if scope not in ("always", "initial"):
        raise ValueError(f"unknown scope {scope!r}")
    sc = _scope(ex, goal, ignore_deadlock, scope)  # the non-goal part, its deadlocks, distances
    fs = _fair_sccs(sc.g, sc.node_ok, sc.s_in, sc.d_in, sc.t_in, ex.transitions, fairness,
                    strong)  # its fair SCCs
    base: dict[str, Any] = dict(name=name, deadlocks=len(sc.dead), fair_sccs=len(fs.fair),
                                checked_states=int(sc.node_ok.sum()), complete=ex.complete,
                                scope=scope)
    dead, entry, k = _closest(sc, fs)  # the counterexample with the shortest prefix
    if dead is None and entry is None:
        return LivenessResult(holds=True, kind=None, initial=None, prefix=[], cycle=[],
                              entry=None, scc_size=0, **base)
    if dead is not None:
        root, steps = _prefix(ex, sc.g, sc.pred, dead)
        initial, prefix = ex.replay(root, steps)
        return LivenessResult(holds=False, kind="deadlock", initial=initial, prefix=prefix,
                              cycle=[], entry=dead, scc_size=1, **base)
    assert entry is not None
    initial, prefix, cycle = _lasso(ex, sc, fs, k, entry)  # the prefix, then a fair cycle
    return LivenessResult(holds=False, kind="fair_cycle", initial=initial, prefix=prefix,
                          cycle=cycle, entry=entry, scc_size=len(fs.sccs[k]), **base)


def _lasso(ex: Exploration, sc: _Scope, fs: _FairSCCs, k: int, entry: int
           ) -> tuple[Any, list[tuple[Transition, Any]], list[tuple[Transition, Any]]]:
    """The concrete lasso into the fair SCC ``k`` at ``entry``: its initial world, the prefix
    to the entry and a cycle from it back that meets every fairness class."""
    in_this = fs.internal & (fs.edge_comp == k)
    cyc = _fair_cycle(sc.g, fs, k, entry, sc.s_in[in_this], sc.d_in[in_this], sc.t_in[in_this])
    root, steps = _prefix(ex, sc.g, sc.pred, entry)
    initial, prefix = ex.replay(root, steps)
    start = prefix[-1][1] if prefix else initial
    _, cycle = ex.replay(
        entry, cyc, start=start, last_actor=prefix[-1][0].actor if prefix else None,
        exact=True,
    )
    return initial, prefix, cycle


def _need_worlds(ex: Exploration, what: str) -> None:
    if not ex.kept_worlds:
        raise ValueError(f"check_liveness: {what} as a function needs explore(..., "
                         "keep_worlds=True); or give the name of a label explore computed")


def _label(ex: Exploration, pred: str | Callable[[Any], bool], what: str) -> np.ndarray:
    """Per state id, ``pred`` as a bool array: a label ``explore`` recorded, or the
    predicate evaluated on the kept worlds."""
    n = len(ex.fingerprints)
    if isinstance(pred, str):
        return np.frombuffer(bytes(ex.labels[pred]), dtype=bool, count=n).copy()
    _need_worlds(ex, what)
    return np.fromiter((bool(pred(w)) for w in ex.worlds), dtype=bool, count=n)


def _prefix(
    ex: Exploration, g: _Edges, pred: dict[int, int] | None, s: int
) -> tuple[int, list[tuple[int, int]]]:
    """The abstract path to ``s``: the chosen shortest path of the exploration, or (scope
    "initial", ``pred`` given) the BFS path over non-goal states from an initial state."""
    if pred is None:
        return ex.abstract_path(s)
    nodes = [s]
    while nodes[-1] in pred:
        nodes.append(pred[nodes[-1]])
    nodes.reverse()
    return nodes[0], [(g.tid(u, v), v) for u, v in zip(nodes, nodes[1:], strict=False)]


def _fair_cycle(
    g: _Edges,
    fs: _FairSCCs,
    k: int,
    entry: int,
    is_: np.ndarray,
    id_: np.ndarray,
    it_: np.ndarray,
) -> list[tuple[int, int]]:
    """A cycle ``[(transition id, state id), ...]`` from ``entry`` back to it inside the fair
    SCC ``k`` (internal edges ``is_ -> id_`` by ``it_``) that meets every fairness class:
    visits a state where a weak class is disabled or takes one of its transitions, and takes
    one of each strong class enabled in the SCC. Greedy: the nearest unmet requirement next."""
    # networkx only for the lasso a person reads: the offending SCC's own edges, in edge order
    h = nx.DiGraph()
    h.add_edges_from(zip(is_.tolist(), id_.tolist(), strict=True))
    # Requirements: for each class, visit a state where it is disabled or take one of its edges.
    # A strong class enabled nowhere in the SCC needs nothing; enabled somewhere, one of its
    # edges (the refined SCC has one).
    reqs: list[tuple[set[int], list[tuple[int, int, int]], np.ndarray]] = []
    for fc, en, strong in zip(fs.classes, fs.enabled, fs.strong, strict=True):
        if strong and not any(en[s] for s in fs.sccs[k]):
            continue
        disabled = set() if strong else {s for s in fs.sccs[k] if not en[s]}
        sel = fc[it_]
        fedges = list(zip(is_[sel].tolist(), id_[sel].tolist(), it_[sel].tolist(), strict=True))
        reqs.append((disabled, fedges, fc))

    cur = entry
    cyc: list[tuple[int, int]] = []
    visited = {cur}
    taken_t: set[int] = set()

    def step(t: int, v: int) -> None:
        cyc.append((t, v))
        visited.add(v)
        taken_t.add(t)

    while True:
        todo = [r for r in reqs if not (r[0] & visited or any(r[2][t] for t in taken_t))]
        if not todo:
            break
        nodes, edge = _nearest(nx.single_source_shortest_path(h, cur), todo)
        for u, v in zip(nodes, nodes[1:], strict=False):
            step(g.tid(u, v), v)
        cur = nodes[-1]
        if edge is not None:
            _, v, t = edge
            step(t, v)
            cur = v
    if not cyc:  # entry satisfies everything: any cycle through it
        v = next(iter(h.successors(cur)))
        cyc.append((g.tid(cur, v), v))
        cur = v
    if cur != entry:
        nodes = nx.shortest_path(h, cur, entry)
        for u, v in zip(nodes, nodes[1:], strict=False):
            step(g.tid(u, v), v)
    return cyc


def _nearest(
    paths: dict[int, list[int]],
    todo: list[tuple[set[int], list[tuple[int, int, int]], np.ndarray]],
) -> tuple[list[int], tuple[int, int, int] | None]:
    """The closest way (fewest steps along ``paths``, the first found on a tie) to meet one of
    the unmet requirements: a path to a state where its class is disabled, or a path to the
    source of one of its edges plus that edge."""
    best: tuple[int, list[int], tuple[int, int, int] | None] | None = None
    for disabled, fedges, _ in todo:
        for s in disabled:
            cand: tuple[int, list[int], tuple[int, int, int] | None] = (
                len(paths[s]) - 1, paths[s], None)
            if best is None or cand[0] < best[0]:
                best = cand
        for u, v, t in fedges:
            cand = (len(paths[u]), paths[u], (u, v, t))
            if best is None or cand[0] < best[0]:
                best = cand
    assert best is not None  # the SCC is fair, so every requirement has a target
    return best[1], best[2]


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


def _tr_text(t: Transition) -> str:
    return f"{t.name}({', '.join(f'{k}={v}' for k, v in t.args)})"


def trace_lines(
    trace: Sequence[tuple[Transition, W]],
    initial: W,
    diff: Callable[[W, W], list[str]],
    width: int = 100,
) -> list[str]:
    """The compact form of a trace, in the spirit of TLC's state-per-step output: one entry
    per step, ``N  actor  transition  what changed`` (only the fields that change, ``;``
    between them), wrapped at ``width`` under the changes. :func:`trace_table` is the wide
    form (one changed field per line)."""
    import textwrap

    steps = [(str(n), t.actor, _tr_text(t)) for n, (t, _) in enumerate(trace, 1)]
    nw = max([1, *(len(s[0]) for s in steps)])
    aw = min(14, max([1, *(len(s[1]) for s in steps)]))
    out: list[str] = []
    prev = initial
    for (n, actor, tr), (_, w) in zip(steps, trace, strict=True):
        changes = "; ".join(diff(prev, w)) or "(no change)"
        prev = w
        head = f"{n.rjust(nw)}  {actor.ljust(aw)}  {tr}"
        indent = " " * (nw + 2 + aw + 2 + 2)
        out += textwrap.wrap(f"{head}  | {changes}", max(40, width), subsequent_indent=indent,
                             break_on_hyphens=False, break_long_words=True)
    return out


def trace_table(
    trace: Sequence[tuple[Transition, W]],
    initial: W,
    diff: Callable[[W, W], list[str]],
) -> str:
    """Fixed-width table: step | actor | transition (name + args) | changed fields.

    ``diff(before, after)`` returns one string per changed field; each gets its own line.
    """
    rows: list[tuple[str, str, str, str]] = []
    prev = initial
    for n, (t, w) in enumerate(trace, 1):
        changes = diff(prev, w) or ["(no change)"]
        rows.append((str(n), t.actor, _tr_text(t), changes[0]))
        rows.extend(("", "", "", c) for c in changes[1:])
        prev = w
    head = ("step", "actor", "transition", "changed")
    widths = [max([len(h)] + [len(r[c]) for r in rows]) for c, h in enumerate(head)]

    def line(r: tuple[str, str, str, str]) -> str:
        return " | ".join(
            [r[0].rjust(widths[0]), r[1].ljust(widths[1]), r[2].ljust(widths[2]), r[3]]
        ).rstrip()

    sep = "-+-".join("-" * w for w in widths)
    return "\n".join([line(head), sep, *(line(r) for r in rows)])
