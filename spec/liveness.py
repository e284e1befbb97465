"""Fair liveness over a stored search graph (``explore(..., keep_graph=True)``).

The non-trivial strongly connected components of the non-goal part (trimmed, then an
iterative Tarjan), refined under strong fairness (Streett), the fair ones among them, and the
counterexample with the shortest prefix: a deadlock, or a lasso whose cycle meets every
fairness class. :func:`check_liveness` is the entry point.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import networkx as nx
import numpy as np
from failclosed.spec.exploration import Exploration

if TYPE_CHECKING:
    from failclosed.model.transition import Transition

__all__ = ["LivenessResult", "check_liveness", "strongly_connected"]

W = TypeVar("W")


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

