"""Generic breadth-first exploration engine: safety, witnesses, coverage and fair liveness.

The engine knows nothing about the model. A transition system is given as

* ``initial``: a sequence of worlds (hashable, immutable values);
* ``successors(world)``: an iterable of ``(Transition, world')`` pairs, where a transition is a
  :class:`model.transition.Transition` (only ``.name``, ``.actor``, ``.args`` and ``.label()``
  are used, plus hashing/equality);
* optionally ``canonical(world)``: a hashable key under which worlds are identified (symmetry
  reduction or abstraction). It must be a bisimulation: worlds with the same key must have
  successors with matching keys; trace replay relies on it and raises if it is not.

Storage is compact: a state is an ``int`` id (``index`` maps key -> id), and its parent,
depth, switch count and incoming transition id are kept in ``array('i')``. Transitions are
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
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import networkx as nx
import numpy as np

if TYPE_CHECKING:
    from failclosed.model.transition import Transition

__all__ = [
    "Coverage",
    "Exploration",
    "Finding",
    "LivenessResult",
    "Stats",
    "bench_toy",
    "check_liveness",
    "strongly_connected",
    "count_switches",
    "coverage",
    "explore",
    "trace_table",
]

W = TypeVar("W")
Step = tuple["Transition", Any]
_EMPTY: Mapping[str, Callable[[Any], bool]] = MappingProxyType({})


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

    def __str__(self) -> str:
        flag = (
            " TRUNCATED" if self.truncated else (" (stopped early)" if self.stopped_early else "")
        )
        return (
            f"{self.states} states, {self.transitions} transitions, depth {self.max_depth}, "
            f"{self.seconds:.2f}s ({self.states_per_second:,.0f} states/s), "
            f"peak RSS {self.peak_rss_mib:.0f} MiB (+{self.rss_delta_mib:.0f}){flag}"
        )


@dataclass
class Finding(Generic[W]):
    """A state where an invariant fails or a witness holds, with a concrete shortest trace."""

    name: str
    state: int  # state id
    depth: int  # = len(trace)
    switches: int  # actor switches along the (concrete) trace
    initial: W  # concrete initial world the trace starts from
    trace: list[tuple[Transition, W]]  # (transition, world after it), replayable

    @property
    def world(self) -> W:
        return self.trace[-1][1] if self.trace else self.initial


@dataclass
class Exploration(Generic[W]):
    successors: Callable[[W], Iterable[tuple[Transition, W]]]
    canonical: Callable[[W], Hashable] | None
    index: dict[Hashable, int]  # key -> state id
    worlds: list[W]  # first concrete world seen per id
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
    violations: dict[str, Finding[W]]  # first (shortest, fewest switches) per violated invariant
    witnesses: dict[str, Finding[W] | None]  # None: never reached
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
        if self.concrete_seen is None or not self.worlds:
            return None
        return self.concrete_seen / len(self.worlds)

    @property
    def unreached_witnesses(self) -> list[str]:
        return [k for k, v in self.witnesses.items() if v is None]

    def state_id(self, world: W) -> int | None:
        key = world if self.canonical is None else self.canonical(world)
        return self.index.get(key)

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
        start: W | None = None,
        last_actor: str | None = None,
        beam: int = 512,
    ) -> tuple[W, list[tuple[Transition, W]]]:
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
        """
        canon, worlds, succ, trs = self.canonical, self.worlds, self.successors, self.transitions
        first = worlds[root] if start is None else start
        # entry: (world, last actor, switches, penalty, index of predecessor entry, transition)
        layer: list[tuple[Any, str | None, int, int, int, Any]] = [
            (first, last_actor, 0, 0, -1, None)
        ]
        history = [layer]
        for n_step, (tid, sid) in enumerate(steps, 1):
            rec = trs[tid]
            target = worlds[sid] if canon is None else canon(worlds[sid])
            by_world: dict[Any, list[int]] = {}
            for ix, e in enumerate(layer):
                by_world.setdefault(e[0], []).append(ix)
            new: list[tuple[Any, str | None, int, int, int, Any]] = []
            pos: dict[tuple[Any, str], int] = {}
            for w, ixs in by_world.items():
                for t, w2 in succ(w):
                    if (w2 if canon is None else canon(w2)) != target:
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
                        elif (c, p0 + pen) < (new[j][2], new[j][3]):
                            new[j] = cand
            if not new:
                raise RuntimeError(
                    f"trace replay failed at step {n_step} ({rec}): no successor of the "
                    "current world has the recorded key; successors() is not deterministic "
                    "or canonical() is not a bisimulation"
                )
            if len(new) > beam:
                new.sort(key=lambda e: (e[2], e[3]))
                del new[beam:]
            history.append(new)
            layer = new
        j = min(range(len(layer)), key=lambda k: (layer[k][2], layer[k][3]))
        out: list[tuple[Transition, W]] = []
        for lay in reversed(history[1:]):
            e = lay[j]
            out.append((e[5], e[0]))
            j = e[4]
        out.reverse()
        return first, out

    def trace(self, sid: int) -> list[tuple[Transition, W]]:
        """Concrete replayable trace from ``trace_initial(sid)`` to a world with ``sid``'s key."""
        return self.replay(*self.abstract_path(sid))[1]

    def trace_initial(self, sid: int) -> W:
        return self.worlds[self.abstract_path(sid)[0]]

    def finding(self, name: str, sid: int) -> Finding[W]:
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
        for f in self.fields:
            if not f.isidentifier():
                raise ValueError(f"reads: {f!r} is not an attribute name")
        # changed(a, b), written out for these fields: one identity test per field
        src = "def changed(a, b):\n    m = 0\n" + "".join(
            f"    if b.{f} is not a.{f}:\n        m |= {1 << k}\n"
            for k, f in enumerate(self.fields)) + "    return m\n"
        ns: dict[str, Any] = {}
        exec(src, ns)  # noqa: S102 - generated from the declared attribute names
        self.changed: Callable[[Any, Any], int] = ns["changed"]
        self.changed.__doc__ = ("The mask of the fields whose value in ``b`` is not the very "
                                "object it is in ``a``.")


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
) -> Exploration[W]:
    """Breadth-first exploration of every state reachable from ``initial``.

    * ``invariants``: name -> predicate, True = holds. Checked on every stored state (the
      first concrete world of its key). For each violated invariant the reported state has a
      shortest trace and, among the shortest, the fewest actor switches.
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
      (it must be a function of those and of nothing that differs between worlds). A new
      state whose attributes are the very objects (``is``) of its BFS parent's is not checked
      again: while the parent is expanded, every predicate still active held at the parent
      (an invariant) or failed there (a witness), since a state of depth d that violates or
      reaches one drops it from every layer from d on. Successors share the unchanged parts
      of their parent, so this skips most checks of a property the transition cannot affect.

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
    the concrete trace.
    """
    t0 = time.perf_counter()
    rss0 = _maxrss_mib()
    canon = canonical
    max_n = sys.maxsize if max_states is None else max_states

    index: dict[Hashable, int] = {}
    worlds: list[W] = []
    parent = array("i")
    depth = array("i")
    sw = array("i")
    in_tr = array("i")
    amask: list[int] = []
    alts: dict[tuple[int, int], tuple[int, int]] = {}

    tr_index: dict[Transition, int] = {}
    transitions: list[Transition] = []
    tr_actor = array("i")
    tr_bit: list[int] = []
    actor_index: dict[str, int] = {}
    actors: list[str] = []
    bits: list[int] = []
    enabled: list[int] = []
    taken: list[int] = []

    def intern(t: Transition) -> int:
        a = actor_index.get(t.actor)
        if a is None:
            a = actor_index[t.actor] = len(actors)
            actors.append(t.actor)
            bits.append(1 << a)
        tid = tr_index[t] = len(transitions)
        transitions.append(t)
        tr_actor.append(a)
        tr_bit.append(bits[a])
        enabled.append(0)
        taken.append(0)
        return tid

    esrc = array("i")
    edst = array("i")
    etr = array("i")
    deadlocks = array("i")
    seen: set[int] | None = set() if measure_reduction else None

    inv_items = list(invariants.items())
    wit_items = list(witnesses.items())
    fr = FieldReads({nm: fs for nm, fs in reads.items() if nm in invariants or nm in witnesses})
    read_mask = fr.mask  # name -> mask of the fields it reads (missing: always checked)
    changed_fields = fr.changed
    inv_hits: dict[str, list[int]] = {}
    wit_hits: dict[str, list[int]] = {}
    stop_depth: int | None = None
    truncated = False

    for w in initial:
        if seen is not None:
            seen.add(hash(w))
        key = w if canon is None else canon(w)
        if key in index:
            continue
        if len(worlds) >= max_n:
            truncated = True
            break
        sid = index[key] = len(worlds)
        worlds.append(w)
        parent.append(-1)
        depth.append(0)
        sw.append(0)
        in_tr.append(-1)
        amask.append(-1)  # no previous actor: the first transition is never a switch
        for name, pred in inv_items:
            if not pred(w):
                inv_hits.setdefault(name, []).append(sid)
                if stop_at_first_violation:
                    stop_depth = 0
        for name, pred in wit_items:
            if pred(w):
                wit_hits.setdefault(name, []).append(sid)
    initial_ids = list(range(len(worlds)))

    # ---- hot loop ---------------------------------------------------------------------------
    n = len(worlds)
    i = 0
    cur_d = -1
    d1 = 0
    next_start = n
    inv_active: list[tuple[str, Callable[[W], bool], int]] = []
    wit_active: list[tuple[str, Callable[[W], bool], int]] = []
    use_reads = False
    halted = False
    stopped = False
    tr_get = tr_index.get
    idx_get = index.get
    worlds_append = worlds.append
    parent_append = parent.append
    depth_append = depth.append
    sw_append = sw.append
    in_tr_append = in_tr.append
    amask_append = amask.append
    esrc_append, edst_append, etr_append = esrc.append, edst.append, etr.append
    seen_add = seen.add if seen is not None else None
    keep = keep_graph
    while i < n:
        d = depth[i]
        if d != cur_d:
            # New layer: every state of depth d is known, none of depth d + 1 yet.
            if stop_depth is not None and d >= stop_depth:
                stopped = True
                break
            cur_d = d
            d1 = d + 1
            next_start = n
            inv_active = [(nm, p, read_mask.get(nm, 0)) for nm, p in inv_items
                          if nm not in inv_hits]
            wit_active = [(nm, p, read_mask.get(nm, 0)) for nm, p in wit_items
                          if nm not in wit_hits]
            use_reads = any(x[2] for x in inv_active) or any(x[2] for x in wit_active)
        w = worlds[i]
        k = sw[i]
        m = amask[i]
        any_succ = False
        for t, w2 in successors(w):
            any_succ = True
            tid = tr_get(t)
            if tid is None:
                tid = intern(t)
            enabled[tid] += 1
            if seen_add is not None:
                seen_add(hash(w2))
            key = w2 if canon is None else canon(w2)
            j = idx_get(key)
            if j is None:
                if n >= max_n:
                    truncated = halted = True
                    break
                j = n
                n += 1
                index[key] = j
                worlds_append(w2)
                parent_append(i)
                depth_append(d1)
                b = tr_bit[tid]
                sw_append(k if m & b else k + 1)
                in_tr_append(tid)
                amask_append(b)
                taken[tid] += 1
                changed = changed_fields(w, w2) if use_reads else -1
                if inv_active:
                    for name, pred, rm in inv_active:
                        if rm and not rm & changed:
                            continue  # reads nothing the transition changed: held at parent
                        if not pred(w2):
                            hits = inv_hits.get(name)
                            if hits is None:
                                inv_hits[name] = [j]
                                if stop_at_first_violation and stop_depth is None:
                                    stop_depth = d1
                            else:
                                hits.append(j)
                if wit_active:
                    for name, pred, rm in wit_active:
                        if rm and not rm & changed:
                            continue
                        if pred(w2):
                            hits = wit_hits.get(name)
                            if hits is None:
                                wit_hits[name] = [j]
                            else:
                                hits.append(j)
            elif j >= next_start:
                # Another shortest-path parent of a next-layer state: keep the fewest switches.
                b = tr_bit[tid]
                c = k if m & b else k + 1
                cj = sw[j]
                if c < cj:
                    sw[j] = c
                    parent[j] = i
                    in_tr[j] = tid
                    amask[j] = b
                elif c == cj:
                    mj = amask[j]
                    if not mj & b:
                        amask[j] = mj | b
                        alts[(j, tr_actor[tid])] = (i, tid)
            if keep:
                esrc_append(i)
                edst_append(j)
                etr_append(tid)
        if halted:
            break
        if not any_succ:
            deadlocks.append(i)
        i += 1
    expanded = i
    # -----------------------------------------------------------------------------------------

    seconds = time.perf_counter() - t0
    rss1 = _maxrss_mib()
    stats = Stats(
        states=n,
        transitions=sum(enabled),
        expanded=expanded,
        max_depth=depth[n - 1] if n else 0,
        seconds=seconds,
        states_per_second=n / seconds if seconds > 0 else float("inf"),
        peak_rss_mib=rss1,
        rss_delta_mib=max(0.0, rss1 - rss0),
        truncated=truncated,
        stopped_early=stopped,
    )
    ex: Exploration[W] = Exploration(
        successors=successors,
        canonical=canonical,
        index=index,
        worlds=worlds,
        initial_ids=initial_ids,
        parent=parent,
        depth=depth,
        switches=sw,
        in_tr=in_tr,
        actor_mask=amask,
        alt_parents=alts,
        transitions=transitions,
        tr_actor=tr_actor,
        actors=actors,
        enabled_count=enabled,
        taken_count=taken,
        edges_src=esrc if keep_graph else None,
        edges_dst=edst if keep_graph else None,
        edges_tr=etr if keep_graph else None,
        expanded=expanded,
        deadlocks=deadlocks,
        violations={},
        witnesses={},
        invariants_checked=[nm for nm, _ in inv_items],
        concrete_seen=len(seen) if seen is not None else None,
        stats=stats,
    )
    for name, _ in inv_items:
        hits = inv_hits.get(name)
        if hits:
            best = min(hits, key=lambda s: (sw[s], s))
            ex.violations[name] = ex.finding(name, best)
    for name, _ in wit_items:
        hits = wit_hits.get(name)
        ex.witnesses[name] = ex.finding(name, min(hits, key=lambda s: (sw[s], s))) if hits else None
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


def coverage(exploration: Exploration[Any], expected_labels: Iterable[str]) -> Coverage:
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
class LivenessResult(Generic[W]):
    name: str
    holds: bool
    kind: Literal["deadlock", "fair_cycle"] | None  # kind of the reported counterexample
    initial: W | None  # concrete initial world of the lasso
    prefix: list[tuple[Transition, W]]  # from `initial` to the cycle entry (or the deadlock)
    cycle: list[tuple[Transition, W]]  # from the entry back to a world with the entry's key
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
        if now == left or now > left - left // 64:  # little left to trim: Tarjan does the rest
            left = now
            break
        left = now
    if not left:
        return []
    s, d = src[alive_e], dst[alive_e]
    off = np.searchsorted(s, np.arange(n + 1)).tolist()
    succ = d.tolist()
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in np.nonzero(alive_n)[0].tolist():
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
                c = []
                while True:
                    u = stack.pop()
                    on_stack[u] = False
                    c.append(u)
                    if u == v:
                        break
                if len(c) > 1 or v in succ[off[v] : off[v + 1]]:
                    c.sort()
                    out.append(c)
    out.sort()
    return out


def check_liveness(
    exploration: Exploration[W],
    goal: Callable[[W], bool],
    fairness: Sequence[Callable[[Transition], bool]],
    *,
    name: str,
    ignore_deadlock: Callable[[W], bool] | None = None,
    scope: Literal["always", "initial"] = "always",
) -> LivenessResult[W]:
    """Check that every weakly fair infinite path reaches ``goal`` and no non-goal state deadlocks.

    ``scope="always"`` (default) checks this from every reachable state, i.e. all reachable
    non-goal states are analysed (a fair non-goal cycle reachable only after a goal state is a
    violation too): leads-to ``true ~> goal``. ``scope="initial"`` only considers paths from
    the initial states that have not yet met a goal state (plain "eventually goal").

    ``fairness`` is a list of classes of transitions (predicates), each weakly fair: a class
    continuously enabled must eventually be taken. A non-trivial SCC (one with an internal
    edge) of the non-goal subgraph is a violation iff, for every class F, some state of the SCC
    has no enabled F transition or some internal edge is in F. Under symmetry reduction the
    classes (and ``goal``) should be invariant under the symmetry, else the result is an
    approximation.

    States that were never (fully) expanded because of ``max_states`` are left out, so a
    reported counterexample is genuine, but ``holds`` is only a proof if ``complete``.
    ``ignore_deadlock(world)`` marks states (e.g. at a model bound) not to count as deadlocks.
    Requires ``explore(..., keep_graph=True)``.
    """
    ex = exploration
    if ex.edges_src is None or ex.edges_dst is None or ex.edges_tr is None:
        raise ValueError("check_liveness needs explore(..., keep_graph=True)")
    if scope not in ("always", "initial"):
        raise ValueError(f"unknown scope {scope!r}")
    n = len(ex.worlds)
    src = (
        np.frombuffer(ex.edges_src, dtype=np.int32) if len(ex.edges_src) else np.zeros(0, np.int32)
    )
    dst = (
        np.frombuffer(ex.edges_dst, dtype=np.int32) if len(ex.edges_dst) else np.zeros(0, np.int32)
    )
    etr = np.frombuffer(ex.edges_tr, dtype=np.int32) if len(ex.edges_tr) else np.zeros(0, np.int32)
    offsets = np.searchsorted(src, np.arange(n + 1))  # src is sorted: CSR for edge look-ups

    is_goal = np.fromiter((bool(goal(w)) for w in ex.worlds), dtype=bool, count=n)
    node_ok = ~is_goal
    node_ok[ex.expanded :] = False
    emask = node_ok[src] & node_ok[dst]
    s_in, d_in, t_in = src[emask], dst[emask], etr[emask]

    dead = [s for s in ex.deadlocks if node_ok[s]]
    if ignore_deadlock is not None:
        dead = [s for s in dead if not ignore_deadlock(ex.worlds[s])]

    # Distance used to pick the counterexample with the shortest prefix.
    dist: np.ndarray
    pred: dict[int, int] = {}
    if scope == "always":
        dist = np.frombuffer(ex.depth, dtype=np.int32).astype(np.int64)
    else:
        dist = np.full(n, -1, dtype=np.int64)
        off_in = np.searchsorted(s_in, np.arange(n + 1)).tolist()
        succ_in = d_in.tolist()
        frontier = [s for s in ex.initial_ids if node_ok[s]]
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
        reach = dist >= 0
        node_ok &= reach
        dead = [s for s in dead if reach[s]]

    # Non-trivial SCCs of the in-scope subgraph, labelled in `comp`. Out of scope "initial"'s
    # reach no SCC is kept: the reached set is closed under in-scope edges, so an SCC is
    # either wholly reached or not at all.
    comp = np.full(n, -1, dtype=np.int64)
    sccs: list[list[int]] = []
    for c in strongly_connected(n, s_in, d_in):
        if node_ok[c[0]]:
            comp[c] = len(sccs)
            sccs.append(c)
    ns = len(sccs)
    cs, cd = comp[s_in], comp[d_in]
    internal = (cs >= 0) & (cs == cd)

    fcls = [
        np.fromiter((bool(f(t)) for t in ex.transitions), dtype=bool, count=len(ex.transitions))
        for f in fairness
    ]
    enabled_f = []  # per class: state -> some F transition enabled (all edges of the state)
    for fc in fcls:
        en = np.zeros(n, dtype=bool)
        if len(etr):
            en[src[fc[etr]]] = True
        enabled_f.append(en)
    fair = np.ones(ns, dtype=bool)
    in_scc = np.nonzero(comp >= 0)[0]
    for fc, en in zip(fcls, enabled_f, strict=True):
        ok = np.zeros(ns, dtype=bool)
        ok[comp[in_scc[~en[in_scc]]]] = True  # F is disabled somewhere in the SCC
        ok[cs[internal & fc[t_in]]] = True  # or F is taken inside the SCC
        fair &= ok
    fair_ids = np.nonzero(fair)[0]

    checked = int(node_ok.sum())
    base = dict(
        name=name,
        deadlocks=len(dead),
        fair_sccs=len(fair_ids),
        checked_states=checked,
        complete=ex.complete,
        scope=scope,
    )
    best_dead = min(dead, key=lambda s: (dist[s], s)) if dead else None
    best_entry = None
    best_scc = -1
    for k in fair_ids.tolist():
        e = min(sccs[k], key=lambda s: (dist[s], s))
        if best_entry is None or (dist[e], e) < (dist[best_entry], best_entry):
            best_entry, best_scc = e, k
    if best_dead is None and best_entry is None:
        return LivenessResult(
            holds=True,
            kind=None,
            initial=None,
            prefix=[],
            cycle=[],
            entry=None,
            scc_size=0,
            **base,
        )

    def edge_tid(u: int, v: int) -> int:
        lo, hi = int(offsets[u]), int(offsets[u + 1])
        hit = np.nonzero(dst[lo:hi] == v)[0]
        return int(etr[lo + hit[0]])

    def prefix_to(s: int) -> tuple[int, list[tuple[int, int]]]:
        if scope == "always":
            return ex.abstract_path(s)
        nodes = [s]
        while nodes[-1] in pred:
            nodes.append(pred[nodes[-1]])
        nodes.reverse()
        return nodes[0], [(edge_tid(u, v), v) for u, v in zip(nodes, nodes[1:], strict=False)]

    if best_dead is not None and (best_entry is None or dist[best_dead] <= dist[best_entry]):
        root, steps = prefix_to(best_dead)
        initial, prefix = ex.replay(root, steps)
        return LivenessResult(
            holds=False,
            kind="deadlock",
            initial=initial,
            prefix=prefix,
            cycle=[],
            entry=best_dead,
            scc_size=1,
            **base,
        )

    assert best_entry is not None
    members = sccs[best_scc]
    in_this = internal & (cs == best_scc)
    is_, id_, it_ = s_in[in_this], d_in[in_this], t_in[in_this]
    # networkx only for the lasso a person reads: the offending SCC's own edges, in edge order
    h = nx.DiGraph()
    h.add_edges_from(zip(is_.tolist(), id_.tolist(), strict=True))
    # Requirements: for each class, visit a state where it is disabled or take one of its edges.
    reqs: list[tuple[set[int], list[tuple[int, int, int]], np.ndarray]] = []
    for fc, en in zip(fcls, enabled_f, strict=True):
        disabled = {s for s in members if not en[s]}
        sel = fc[it_]
        fedges = list(zip(is_[sel].tolist(), id_[sel].tolist(), it_[sel].tolist(), strict=True))
        reqs.append((disabled, fedges, fc))

    cur = best_entry
    cyc: list[tuple[int, int]] = []
    visited = {cur}
    taken_t: set[int] = set()

    def satisfied(r: tuple[set[int], list[tuple[int, int, int]], np.ndarray]) -> bool:
        return bool(r[0] & visited) or any(r[2][t] for t in taken_t)

    def walk(nodes: list[int]) -> None:
        for u, v in zip(nodes, nodes[1:], strict=False):
            t = edge_tid(u, v)
            cyc.append((t, v))
            visited.add(v)
            taken_t.add(t)

    while True:
        todo = [r for r in reqs if not satisfied(r)]
        if not todo:
            break
        paths = nx.single_source_shortest_path(h, cur)
        best: tuple[int, list[int], tuple[int, int, int] | None] | None = None
        for disabled, fedges, _ in todo:
            for s in disabled:
                cand = (len(paths[s]) - 1, paths[s], None)
                if best is None or cand[0] < best[0]:
                    best = cand
            for u, v, t in fedges:
                cand = (len(paths[u]), paths[u], (u, v, t))
                if best is None or cand[0] < best[0]:
                    best = cand
        assert best is not None  # the SCC is fair, so every requirement has a target
        _, nodes, edge = best
        walk(nodes)
        cur = nodes[-1]
        if edge is not None:
            _, v, t = edge
            cyc.append((t, v))
            visited.add(v)
            taken_t.add(t)
            cur = v
    if not cyc:  # entry satisfies everything: any cycle through it
        v = next(iter(h.successors(cur)))
        cyc.append((edge_tid(cur, v), v))
        cur = v
    if cur != best_entry:
        walk(nx.shortest_path(h, cur, best_entry))

    root, steps = prefix_to(best_entry)
    initial, prefix = ex.replay(root, steps)
    start = prefix[-1][1] if prefix else initial
    _, cycle = ex.replay(
        best_entry, cyc, start=start, last_actor=prefix[-1][0].actor if prefix else None
    )
    return LivenessResult(
        holds=False,
        kind="fair_cycle",
        initial=initial,
        prefix=prefix,
        cycle=cycle,
        entry=best_entry,
        scc_size=len(members),
        **base,
    )


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------


def _tr_text(t: Transition) -> str:
    return f"{t.name}({', '.join(f'{k}={v}' for k, v in t.args)})"


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


# --------------------------------------------------------------------------------------------
# Benchmark
# --------------------------------------------------------------------------------------------


def bench_toy(n: int = 40, actors: int = 3) -> float:
    """States/s on a cheap toy: ``actors`` counters in ``0..n``, actor k bumps or resets its own.

    Distinct states: ``(n + 1) ** actors``; about ``2 * actors`` edges per state. One invariant
    is checked and no graph is kept.
    """
    from failclosed.model.transition import Transition

    bump = [Transition("bump", f"a{k}") for k in range(actors)]
    reset = [Transition("reset", f"a{k}") for k in range(actors)]
    rng = range(actors)

    def succ(w: tuple[int, ...]) -> list[tuple[Transition, tuple[int, ...]]]:
        out = []
        for k in rng:
            c = w[k]
            if c < n:
                out.append((bump[k], w[:k] + (c + 1,) + w[k + 1 :]))
            if c:
                out.append((reset[k], w[:k] + (0,) + w[k + 1 :]))
        return out

    ex = explore([(0,) * actors], succ, invariants={"bounded": lambda w: max(w) <= n})
    assert ex.stats.states == (n + 1) ** actors and ex.ok
    return ex.stats.states_per_second
