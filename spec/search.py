"""Generic breadth-first search: safety properties, witnesses, labels and the stored graph.

The search knows nothing about the model. A transition system is given as

* ``initial``: a sequence of worlds (hashable, immutable values);
* ``successors(world)``: an iterable of ``(Transition, world')`` pairs, where a transition is a
  :class:`model.transition.Transition` (only ``.name``, ``.actor``, ``.args`` and ``.label()``
  are used, plus hashing/equality);
* optionally ``canonical(world)``: a hashable key under which worlds are identified (symmetry
  reduction or abstraction). It must be a bisimulation: worlds with the same key must have
  successors with matching keys; trace replay relies on it and raises if it is not.

What it stores and returns is :class:`~failclosed.spec.exploration.Exploration` (compact, in
the manner of TLC: see spec/exploration.py). Under a memory budget (``memory_budget_mib``)
the seen set is tiered and spills to disk (spec/seen.py): the ids of the two live layers stay
in a dict, the older ones in sorted runs. No networkx graph is built during the search; ids
are assigned in BFS order, so the frontier is just a cursor over the id range. The liveness
analysis of the stored graph is spec/liveness.py.
"""

from __future__ import annotations

import resource
import sys
import time
from array import array
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from failclosed.spec.exploration import Exploration, Stats
from failclosed.spec.seen import PER_STATE_BYTES, SeenSet, resident_mib, sigterm_raises

if TYPE_CHECKING:
    from failclosed.model.transition import Transition

__all__ = ["FieldReads", "explore"]

W = TypeVar("W")
_EMPTY: Mapping[str, Any] = MappingProxyType({})


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

    def tie(self, j: int, i: int, tid: int, b: int, c: int) -> None:
        """Weigh ``i`` as a further parent of the next-layer state ``j`` (by transition ``tid``
        of actor bit ``b``, ``c`` switches): keep the fewest switches, and one parent per
        further tying last actor."""
        cj = self.switches[j]
        if c < cj:
            self.displaced.setdefault(j, self.parent[j])
            self.switches[j] = c
            self.parent[j] = i
            self.in_tr[j] = tid
            self.actor_mask[j] = b
        elif c == cj and not self.actor_mask[j] & b:
            self.actor_mask[j] |= b
            self.alts[(j, b.bit_length() - 1)] = (i, tid)  # b is 1 << actor id

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
    ``max_states`` was hit). Per edge: intern the transition, look its key up, then store a
    new state or (:meth:`_Paths.tie`) weigh another parent of a next-layer one, and record
    the edge. The loop stays flat, on locals bound once per layer. The (transition, world,
    fingerprint) triples come from :func:`_triples` (tiered or not, the loop is the same)."""
    report = [progress_every if on_progress is not None else sys.maxsize]

    def expand(lo: int, hi: int, d1: int) -> int:
        index, worlds, paths, trs = st.index.hot, st.worlds, st.paths, st.trs
        succ_of, old_get = _triples(st, successors, canon, hi)
        sw, amask, tie = paths.switches, paths.actor_mask, paths.tie
        tr_get, intern, tr_bit = trs.index.get, trs.intern, trs.bit
        enabled, taken = trs.enabled, trs.taken
        idx_get, worlds_append, fps_append = index.get, worlds.append, st.fps.append
        parent_append, depth_append = paths.parent.append, paths.depth.append
        sw_append, in_tr_append, amask_append = sw.append, paths.in_tr.append, amask.append
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
                elif j >= hi:  # another shortest-path parent of a next-layer state
                    b = tr_bit[tid]
                    tie(j, i, tid, b, k if m & b else k + 1)
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


def _search(
    initial: Sequence[W],
    successors: Callable[[W], Iterable[tuple[Transition, W]]],
    canon: Callable[[W], Hashable] | None,
    st: _Store,
    props: _PropertyStep,
    max_n: int,
    on_progress: Callable[[int, int], None] | None,
    progress_every: int,
    n_labels: int,
) -> tuple[int, bool, bool]:
    """Steps 1 and 2 of :func:`explore`: store the initial states, then search the layers,
    each checked (:func:`_bfs`), with SIGTERM raising and the spilled runs' directory removed
    however the search ends. Returns ``(expanded, truncated, stopped)``."""
    with sigterm_raises():
        try:
            seed_cut = _seed(initial, canon, st, max_n)  # 1. the initial states
            props.n_initial = len(st.worlds)
            expanded, cut, stopped = _bfs(st, successors, canon, props, max_n, on_progress,
                                          progress_every, n_labels)  # 2. the layers
        finally:
            st.index.close()  # the spilled runs' directory (their mappings stay readable)
    return expanded, seed_cut or cut, stopped


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
    expanded, cut, stopped = _search(initial, successors, canon, st, props, max_n, on_progress,
                                     max(1, progress_every), len(labels))  # 1. and 2.
    props.check(props.checked, len(st.worlds), st.worlds, st.paths)  # 3. a cut's rest
    stats = _stats(t0, rss0, st, expanded, cut, stopped, len(labels))
    ex = _exploration(st, successors, canonical, props, deadlock_labels, props.n_initial,
                      expanded, seen, stats)  # 4. the result, and in it 5. each property's trace
    props.report(ex)
    return ex

