"""Tests of the generic exploration engine on small toy transition systems."""

from __future__ import annotations

import random
import sys
from collections import deque
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.model.transition import Transition  # noqa: E402
from failclosed.spec.exploration import coverage  # noqa: E402
from failclosed.spec.liveness import check_liveness, strongly_connected  # noqa: E402
from failclosed.spec.search import explore  # noqa: E402
from failclosed.spec.traces import trace_table  # noqa: E402

from benchmarks.bench_toy import bench_toy  # noqa: E402

# --------------------------------------------------------------------------------------------
# helpers and toys
# --------------------------------------------------------------------------------------------


def switches(trace) -> int:
    actors = [t.actor for t, _ in trace]
    return sum(a != b for a, b in zip(actors, actors[1:], strict=False))


def assert_replays(initial, trace, successors) -> None:
    """Each world in the trace is exactly a successor produced from the previous world."""
    cur = initial
    for t, w in trace:
        assert (t, w) in list(successors(cur)), f"{t} -> {w} is not a successor of {cur}"
        cur = w


def graph_ts(edges: dict[str, list[tuple[str, str, str]]]):
    """Explicit transition system: state -> [(name, actor, next state)] in successor order."""

    def succ(s):
        return [(Transition(nm, actor), nxt) for nm, actor, nxt in edges.get(s, [])]

    return succ


def counters(cap: int = 3):
    """Two counters (a, b); actor A bumps a, actor B bumps b, up to ``cap``."""
    inc_a, inc_b = Transition("inc", "A"), Transition("inc", "B")
    over_a = Transition.make("inc", "A", fault="overflow")

    def succ(w):
        a, b = w
        out = []
        if a < cap:
            out.append((inc_a, (a + 1, b)))
        else:
            out.append((over_a, (a, b)))
        if b < cap:
            out.append((inc_b, (a, b + 1)))
        return out

    return succ


def mutex(n: int):
    """n processes with a buggy lock: check the flag, then set it (not atomically).

    World: (pcs, flag) with pc in {"idle", "ready", "crit"}.
    """

    def succ(w):
        pcs, flag = w
        out = []
        for i, pc in enumerate(pcs):
            actor = f"p{i}"
            if pc == "idle" and not flag:
                out.append((Transition("check", actor), (_set(pcs, i, "ready"), flag)))
            elif pc == "ready":
                out.append((Transition("enter", actor), (_set(pcs, i, "crit"), True)))
            elif pc == "crit":
                out.append((Transition("exit", actor), (_set(pcs, i, "idle"), False)))
        return out

    return succ


def _set(t, i, v):
    return t[:i] + (v,) + t[i + 1 :]


def mutual_exclusion(w) -> bool:
    return sum(pc == "crit" for pc in w[0]) <= 1


def canon_mutex(w):
    return (tuple(sorted(w[0])), w[1])


def mutex_diff(a, b) -> list[str]:
    out = [
        f"pc[{i}]: {x} -> {y}" for i, (x, y) in enumerate(zip(a[0], b[0], strict=True)) if x != y
    ]
    if a[1] != b[1]:
        out.append(f"flag: {a[1]} -> {b[1]}")
    return out


def naive_bfs_trace(initial, succ, target):
    """Textbook BFS keeping the first parent found: the baseline the tie-break must beat."""
    parent = {initial: None}
    q = deque([initial])
    while q:
        s = q.popleft()
        if s == target:
            break
        for t, s2 in succ(s):
            if s2 not in parent:
                parent[s2] = (s, t)
                q.append(s2)
    steps = []
    s = target
    while parent[s] is not None:
        p, t = parent[s]
        steps.append((t, s))
        s = p
    return steps[::-1]


# --------------------------------------------------------------------------------------------
# safety: shortest violations, tie-break, replay
# --------------------------------------------------------------------------------------------


def test_mutex_violation_is_shortest_with_fewest_switches_and_replays():
    succ = mutex(2)
    init = (("idle", "idle"), False)
    ex = explore([init], succ, invariants={"mutex": mutual_exclusion})
    v = ex.violations["mutex"]
    # check, check, enter, enter is the only way in: 4 steps; at best 2 actor switches.
    assert v.depth == len(v.trace) == 4
    assert [t.name for t, _ in v.trace] == ["check", "check", "enter", "enter"]
    assert switches(v.trace) == v.switches == ex.switches[v.state] == 2
    assert v.initial == init
    assert_replays(init, v.trace, succ)
    assert not mutual_exclusion(v.world)
    assert not ex.ok and not ex.truncated


def test_tie_break_beats_naive_bfs():
    # T is at depth 2 via X (A then B: 1 switch, found first) and via Y (B then B: 0 switches).
    succ = graph_ts(
        {
            "S": [("a", "A", "X"), ("b", "B", "Y")],
            "X": [("x", "B", "T")],
            "Y": [("y", "B", "T")],
        }
    )
    naive = naive_bfs_trace("S", succ, "T")
    assert switches(naive) == 1
    ex = explore(["S"], succ, invariants={"not_T": lambda s: s != "T"})
    v = ex.violations["not_T"]
    assert [t.name for t, _ in v.trace] == ["b", "y"]
    assert switches(v.trace) == v.switches == 0


def test_tie_break_exact_when_best_last_actors_tie():
    # P is reached with 1 switch both as A,B (found first) and as B,A. T is only reachable by
    # an A step from P. A single parent per state would give A,B,A (2 switches); exact is B,A,A.
    succ = graph_ts(
        {
            "S": [("a1", "A", "X"), ("b1", "B", "Y")],
            "X": [("b2", "B", "P")],
            "Y": [("a2", "A", "P")],
            "P": [("a3", "A", "T")],
        }
    )
    assert switches(naive_bfs_trace("S", succ, "T")) == 2
    ex = explore(["S"], succ, invariants={"not_T": lambda s: s != "T"})
    v = ex.violations["not_T"]
    assert [t.name for t, _ in v.trace] == ["b1", "a2", "a3"]
    assert v.switches == switches(v.trace) == 1
    assert_replays("S", v.trace, succ)


def _brute_min_switches(edges, start):
    """Min switches over all shortest paths from start, by explicit path enumeration."""
    dist = {start: 0}
    q = deque([start])
    while q:
        s = q.popleft()
        for _, _, s2 in edges.get(s, []):
            if s2 not in dist:
                dist[s2] = dist[s] + 1
                q.append(s2)
    best = {}

    def rec(s, actors):
        sw = sum(a != b for a, b in zip(actors, actors[1:], strict=False))
        best[s] = min(best.get(s, sw), sw)
        for _, actor, s2 in edges.get(s, []):
            if dist[s2] == dist[s] + 1:
                rec(s2, actors + [actor])

    rec(start, [])
    return dist, best


def test_switch_counts_exact_on_random_graphs():
    rng = random.Random(1234)
    for _ in range(150):
        nodes = [f"n{k}" for k in range(9)]
        edges = {
            u: [
                (f"e{u}{j}", rng.choice("ABC"), rng.choice(nodes)) for j in range(rng.randint(0, 3))
            ]
            for u in nodes
        }
        succ = graph_ts(edges)
        ex = explore(["n0"], succ, invariants={}, keep_worlds=True)
        dist, best = _brute_min_switches(edges, "n0")
        assert len(ex.worlds) == len(dist)
        for sid, s in enumerate(ex.worlds):
            assert ex.depth[sid] == dist[s]
            assert ex.switches[sid] == best[s], (edges, s)
            tr = ex.trace(sid)
            assert len(tr) == dist[s] and switches(tr) == best[s]
            assert_replays("n0", tr, succ)
            assert (tr[-1][1] if tr else "n0") == s


def test_each_invariant_gets_its_own_first_violation():
    succ = counters(cap=5)
    ex = explore(
        [(0, 0)],
        succ,
        invariants={"a<2": lambda w: w[0] < 2, "b<3": lambda w: w[1] < 3, "ok": lambda w: True},
    )
    assert set(ex.violations) == {"a<2", "b<3"}
    assert ex.violations["a<2"].depth == 2 and ex.violations["a<2"].switches == 0
    assert ex.violations["b<3"].depth == 3 and ex.violations["b<3"].switches == 0
    assert [t.actor for t, _ in ex.violations["b<3"].trace] == ["B", "B", "B"]
    assert ex.stats.states == 36  # went on after the violations


def test_violation_in_initial_state_has_empty_trace():
    ex = explore([(9, 9)], counters(), invariants={"small": lambda w: w[0] < 9})
    v = ex.violations["small"]
    assert v.trace == [] and v.depth == 0 and v.world == (9, 9)


def test_stop_at_first_violation_same_trace_fewer_states():
    succ = mutex(3)
    init = (("idle",) * 3, False)
    full = explore([init], succ, invariants={"mutex": mutual_exclusion})
    stop = explore(
        [init], succ, invariants={"mutex": mutual_exclusion}, stop_at_first_violation=True
    )
    assert stop.stats.stopped_early and not full.stats.stopped_early
    assert full.complete and not stop.complete
    assert stop.stats.states < full.stats.states
    assert stop.violations["mutex"].trace == full.violations["mutex"].trace


# --------------------------------------------------------------------------------------------
# symmetry
# --------------------------------------------------------------------------------------------


def test_symmetry_reduces_states_and_traces_still_replay():
    succ = mutex(3)
    init = (("idle",) * 3, False)
    plain = explore([init], succ, invariants={"mutex": mutual_exclusion}, measure_reduction=True)
    sym = explore(
        [init],
        succ,
        invariants={"mutex": mutual_exclusion},
        canonical=canon_mutex,
        measure_reduction=True,
    )
    assert sym.stats.states < plain.stats.states
    assert plain.reduction_factor == pytest.approx(1.0)
    assert 1.0 < sym.reduction_factor <= plain.stats.states / sym.stats.states
    assert explore([init], succ, invariants={}, canonical=canon_mutex).reduction_factor is None
    v = sym.violations["mutex"]
    assert v.depth == plain.violations["mutex"].depth == 4
    assert v.switches == plain.violations["mutex"].switches == 2
    assert_replays(init, v.trace, succ)
    assert not mutual_exclusion(v.world)
    # every stored state's trace is concrete and ends in a world with that state's key
    for sid in range(sym.stats.states):
        tr = sym.trace(sid)
        assert_replays(init, tr, succ)
        end = tr[-1][1] if tr else init
        assert hash(canon_mutex(end)) == sym.fingerprints[sid]
        assert sym.state_id(end) == sid


def test_symmetric_replay_follows_concrete_worlds_not_stored_representatives():
    # Y1 ~ Y2 and T1 ~ T2 under `canonical`. Y1 is seen first (stored), but the tie-break picks
    # the path through Z (0 switches), which concretely produces Y2 and then T2, not the
    # stored T1: the trace must follow the worlds successors() really produced.
    succ = graph_ts(
        {
            "S": [("a", "A", "X"), ("b", "B", "Z")],
            "X": [("c", "B", "Y1")],
            "Z": [("d", "B", "Y2")],
            "Y1": [("e", "B", "T1")],
            "Y2": [("e", "B", "T2")],
        }
    )

    def canon(s):
        return s.rstrip("12")

    ex = explore(["S"], succ, invariants={"no_T": lambda s: canon(s) != "T"}, canonical=canon,
                 keep_worlds=True)
    assert ex.stats.states == 5
    v = ex.violations["no_T"]
    assert ex.worlds[v.state] == "T1"
    assert [w for _, w in v.trace] == ["Z", "Y2", "T2"]
    assert v.switches == 0
    assert_replays("S", v.trace, succ)


def test_replay_raises_if_canonical_is_not_a_bisimulation():
    # P1 ~ P2 but only P1 has a successor: the key path S, P, Q cannot be walked from P2.
    succ = graph_ts({"S": [("a", "A", "P1"), ("b", "B", "P2")], "P1": [("c", "A", "Q")]})
    ex = explore(["S"], succ, invariants={}, canonical=lambda s: s.rstrip("12"))
    q = ex.state_id("Q")
    assert len(ex.trace(q)) == 2
    with pytest.raises(RuntimeError, match="bisimulation"):
        # force the walk through P2's concrete world
        ex.replay(ex.state_id("P2"), ex.abstract_path(q)[1][1:], start="P2")


# --------------------------------------------------------------------------------------------
# witnesses, coverage, truncation, stats
# --------------------------------------------------------------------------------------------


def test_witnesses_reached_and_unreached():
    succ = counters(cap=3)
    ex = explore(
        [(0, 0)],
        succ,
        invariants={},
        witnesses={"both2": lambda w: w == (2, 2), "neg": lambda w: w[0] < 0},
    )
    f = ex.witnesses["both2"]
    assert f is not None and f.depth == 4 and f.world == (2, 2)
    assert f.switches == 1  # A,A,B,B or B,B,A,A
    assert_replays((0, 0), f.trace, succ)
    assert ex.witnesses["neg"] is None
    assert ex.unreached_witnesses == ["neg"]


def test_coverage_counts_and_never_enabled():
    succ = counters(cap=2)
    ex = explore([(0, 0)], succ, invariants={})
    cov = coverage(ex, ["inc", "inc[overflow]", "reset"])
    assert cov.never_enabled == ["reset"]
    assert cov.never_taken == ["inc[overflow]"]  # a self-loop never discovers a state
    assert cov.unexpected == []
    # 9 states; inc enabled on every edge except self-loops: (a<2)*3 + (b<2)*3 = 12
    assert cov.enabled == {"inc": 12, "inc[overflow]": 3}
    assert cov.taken["inc"] == ex.stats.states - 1 == 8
    assert sum(cov.enabled.values()) == ex.stats.transitions == 15
    assert coverage(ex, ["inc"]).unexpected == ["inc[overflow]"]


def test_max_states_truncation():
    succ = counters(cap=3)
    full = explore([(0, 0)], succ, invariants={})
    assert full.stats.states == 16 and not full.truncated
    exact = explore([(0, 0)], succ, invariants={}, max_states=16)
    assert not exact.truncated and exact.stats.states == 16
    cut = explore([(0, 0)], succ, invariants={}, max_states=5)
    assert cut.truncated and cut.stats.truncated
    assert cut.stats.states == 5 and cut.stats.expanded < 5 and not cut.complete


def test_stats_and_graph_arrays():
    succ = counters(cap=3)
    ex = explore([(0, 0)], succ, invariants={"t": lambda w: True}, keep_graph=True, keep_worlds=True)
    st = ex.stats
    assert st.states == 16 and st.max_depth == 6 and st.expanded == 16
    assert st.transitions == len(ex.edges_src) == len(ex.edges_dst) == len(ex.edges_tr) == 28
    assert st.seconds > 0 and st.states_per_second > 0 and st.peak_rss_mib > 0
    assert st.rss_delta_mib >= 0
    assert ex.edges_src.typecode == ex.parent.typecode == "i"
    assert list(ex.edges_src) == sorted(ex.edges_src)
    assert explore([(0, 0)], succ, invariants={}).edges_src is None
    assert "16 states" in str(st)
    assert ex.state_id((3, 3)) == 15 and ex.state_id((9, 9)) is None
    assert list(ex.deadlocks) == []  # (3, 3) still has the overflow self-loop


# --------------------------------------------------------------------------------------------
# liveness
# --------------------------------------------------------------------------------------------

LIVELOCK = {
    "pending": [("claim", "worker", "claimed")],
    "claimed": [("finish", "worker", "done"), ("timeout", "clock", "pending")],
}


def test_liveness_fair_livelock_found_under_weak_fairness():
    succ = graph_ts(LIVELOCK)
    ex = explore(["pending"], succ, invariants={}, keep_graph=True, keep_worlds=True)
    # finish is weakly fair but not continuously enabled (disabled in "pending"): livelock.
    res = check_liveness(
        ex,
        lambda s: s == "done",
        [lambda t: t.name == "finish", lambda t: t.name == "claim"],
        name="completes",
    )
    assert not res.holds and res.kind == "fair_cycle"
    assert res.initial == "pending" and res.prefix == [] and res.scc_size == 2
    assert [t.name for t, _ in res.cycle] == ["claim", "timeout"]
    assert res.cycle[-1][1] == "pending"  # closes on the entry
    assert_replays("pending", res.cycle, succ)
    assert res.complete and res.fair_sccs == 1 and res.deadlocks == 0


def test_liveness_holds_when_fairness_excludes_the_cycle():
    succ = graph_ts({"s0": [("spin", "A", "s0"), ("go", "B", "goal")]})
    ex = explore(["s0"], succ, invariants={}, keep_graph=True, keep_worlds=True)
    goal = lambda s: s == "goal"  # noqa: E731
    unfair = check_liveness(ex, goal, [], name="reaches")
    assert not unfair.holds and unfair.kind == "fair_cycle"
    assert [t.name for t, _ in unfair.cycle] == ["spin"]
    fair = check_liveness(ex, goal, [lambda t: t.actor == "B"], name="reaches")
    assert fair.holds and fair.kind is None and fair.fair_sccs == 0


def test_liveness_strong_fairness_excludes_a_lasso_weak_fairness_admits():
    # finish is enabled again and again (in "claimed") but not without a break (not in
    # "pending"): weak fairness admits the claim/timeout lasso, strong fairness does not.
    succ = graph_ts(LIVELOCK)
    ex = explore(["pending"], succ, invariants={}, keep_graph=True, keep_worlds=True)
    done = lambda s: s == "done"  # noqa: E731
    finish = lambda t: t.name == "finish"  # noqa: E731
    weak = check_liveness(ex, done, [finish], name="completes")
    assert not weak.holds and [t.name for t, _ in weak.cycle] == ["claim", "timeout"]
    strong = check_liveness(ex, done, [], strong=[finish], name="completes")
    assert strong.holds and strong.fair_sccs == 0 and strong.complete


def test_liveness_strong_fairness_prunes_the_states_enabling_it_and_recomputes():
    # One SCC a, b, c; the strongly fair F is enabled only at c and leaves the SCC. A fair
    # path must stop visiting c: what is left (a <-> b) is a fair cycle of its own.
    succ = graph_ts({
        "a": [("ab", "A", "b")],
        "b": [("ba", "A", "a"), ("bc", "A", "c")],
        "c": [("cb", "A", "b"), ("f", "F", "goal")],
    })
    ex = explore(["a"], succ, invariants={}, keep_graph=True, keep_worlds=True)
    goal = lambda s: s == "goal"  # noqa: E731
    weak = check_liveness(ex, goal, [lambda t: t.actor == "F"], name="g")
    assert not weak.holds and weak.scc_size == 3  # F is disabled at a: weakly fair
    res = check_liveness(ex, goal, [], strong=[lambda t: t.actor == "F"], name="g")
    assert not res.holds and res.kind == "fair_cycle" and res.scc_size == 2
    assert "c" not in {w for _, w in res.cycle} and res.cycle[-1][1] == "a"
    assert_replays("a", res.cycle, succ)
    # taken inside the SCC, a strong class is met: the cycle takes it
    loop = graph_ts({"a": [("ab", "A", "b")], "b": [("f", "F", "a"), ("bg", "B", "goal")]})
    ex = explore(["a"], loop, invariants={}, keep_graph=True, keep_worlds=True)
    res = check_liveness(ex, goal, [], strong=[lambda t: t.actor == "F"], name="g")
    assert not res.holds and [t.name for t, _ in res.cycle] == ["ab", "f"]


def test_liveness_cycle_takes_edge_of_continuously_enabled_class():
    # F is enabled in 0, 1 and 2; the only F edge inside the SCC is 1 -> 2. The short cycle
    # 0 -> 1 -> 0 is unfair to F; the lasso must take f12.
    succ = graph_ts(
        {
            "0": [("a01", "A", "1"), ("f0", "F", "G")],
            "1": [("a10", "A", "0"), ("f12", "F", "2")],
            "2": [("a20", "A", "0"), ("f2", "F", "G")],
        }
    )
    ex = explore(["0"], succ, invariants={}, keep_graph=True, keep_worlds=True)
    res = check_liveness(ex, lambda s: s == "G", [lambda t: t.actor == "F"], name="g")
    assert not res.holds and res.kind == "fair_cycle" and res.scc_size == 3
    names = [t.name for t, _ in res.cycle]
    assert "f12" in names
    assert names == ["a01", "f12", "a20"]
    assert_replays("0", res.cycle, succ)


def test_liveness_lasso_prefix_is_shortest_and_concrete():
    succ = graph_ts(
        {
            "i": [("x", "A", "m1"), ("y", "B", "loop")],
            "m1": [("z", "A", "loop")],
            "loop": [("spin", "A", "loop2"), ("fin", "A", "done")],
            "loop2": [("back", "A", "loop")],
        }
    )
    ex = explore(["i"], succ, invariants={}, keep_graph=True, keep_worlds=True)
    res = check_liveness(ex, lambda s: s == "done", [lambda t: t.name == "fin"], name="d")
    assert not res.holds
    assert [t.name for t, _ in res.prefix] == ["y"]
    assert [t.name for t, _ in res.cycle] == ["spin", "back"]
    assert_replays("i", res.prefix + res.cycle, succ)


def test_liveness_deadlock_and_ignore_deadlock():
    succ = graph_ts({"s": [("ok", "A", "done"), ("bad", "A", "t")], "t": [("stuck", "A", "stuck")]})
    ex = explore(["s"], succ, invariants={}, keep_graph=True, keep_worlds=True)
    assert sorted(ex.worlds[s] for s in ex.deadlocks) == ["done", "stuck"]
    res = check_liveness(ex, lambda s: s == "done", [], name="d")
    assert not res.holds and res.kind == "deadlock"
    assert [w for _, w in res.prefix] == ["t", "stuck"] and res.cycle == []
    assert res.deadlocks == 1  # "done" is a goal: not a deadlock
    ign = check_liveness(
        ex, lambda s: s == "done", [], name="d", ignore_deadlock=lambda s: s == "stuck"
    )
    assert ign.holds


def test_liveness_scope_initial_ignores_cycles_after_goal():
    succ = graph_ts(
        {"s": [("go", "A", "goal")], "goal": [("leave", "A", "l")], "l": [("spin", "A", "l")]}
    )
    ex = explore(["s"], succ, invariants={}, keep_graph=True, keep_worlds=True)
    always = check_liveness(ex, lambda s: s == "goal", [], name="x")
    assert not always.holds and [t.name for t, _ in always.prefix] == ["go", "leave"]
    initial = check_liveness(ex, lambda s: s == "goal", [], name="x", scope="initial")
    assert initial.holds


def test_liveness_scope_initial_prefix_avoids_goal_states():
    # Shortest path to the loop goes through the goal; the goal-avoiding one is longer.
    succ = graph_ts(
        {
            "s": [("g", "A", "goal"), ("m", "A", "m1")],
            "goal": [("g2", "A", "l")],
            "m1": [("m2", "A", "m2")],
            "m2": [("m3", "A", "l")],
            "l": [("spin", "A", "l")],
        }
    )
    ex = explore(["s"], succ, invariants={}, keep_graph=True, keep_worlds=True)
    res = check_liveness(ex, lambda s: s == "goal", [], name="x", scope="initial")
    assert not res.holds
    assert [t.name for t, _ in res.prefix] == ["m", "m2", "m3"]
    assert_replays("s", res.prefix + res.cycle, succ)


def test_liveness_truncated_frontier_is_not_a_deadlock():
    succ = graph_ts({f"c{k}": [("next", "A", f"c{k + 1}")] for k in range(50)})
    ex = explore(["c0"], succ, invariants={}, keep_graph=True, max_states=10, keep_worlds=True)
    res = check_liveness(ex, lambda s: s == "c50", [], name="x")
    assert res.holds and not res.complete and res.deadlocks == 0
    full = explore(["c0"], succ, invariants={}, keep_graph=True, keep_worlds=True)
    res2 = check_liveness(full, lambda s: s == "c49", [], name="x")  # c50 is a dead end
    assert not res2.holds and res2.kind == "deadlock" and res2.complete


def test_liveness_requires_graph():
    ex = explore(["s"], graph_ts({}), invariants={})
    with pytest.raises(ValueError):
        check_liveness(ex, lambda s: True, [], name="x")


def _nx_nontrivial_sccs(n, edges):
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    out = [sorted(c) for c in nx.strongly_connected_components(g)
           if len(c) > 1 or g.has_edge(next(iter(c)), next(iter(c)))]
    return sorted(out)


@pytest.mark.parametrize("seed", range(40))
def test_strongly_connected_matches_networkx_on_random_graphs(seed):
    """The liveness check's SCCs (array trimming, then an iterative Tarjan) are networkx's,
    self-loops and parallel edges included, on sparse and dense random graphs."""
    import numpy as np

    rng = random.Random(seed)
    n = rng.choice([1, 2, 5, 30, 200])
    m = rng.randint(0, n * rng.choice([1, 2, 4]))
    edges = sorted((rng.randrange(n), rng.randrange(n)) for _ in range(m))
    src = np.array([a for a, _ in edges], dtype=np.int32)
    dst = np.array([b for _, b in edges], dtype=np.int32)
    assert strongly_connected(n, src, dst) == _nx_nontrivial_sccs(n, edges)


def test_strongly_connected_has_no_recursion_limit():
    """A cycle through 200,000 states (a chain far deeper than Python's recursion limit)."""
    import numpy as np

    n = 200_000
    src = np.arange(n, dtype=np.int32)
    dst = (src + 1) % n
    (c,) = strongly_connected(n, src, dst.astype(np.int32))
    assert c == list(range(n))
    chain = strongly_connected(n, src[:-1], dst[:-1].astype(np.int32))
    assert chain == []


# --------------------------------------------------------------------------------------------
# rendering and benchmark
# --------------------------------------------------------------------------------------------


def test_trace_table():
    succ = mutex(2)
    init = (("idle", "idle"), False)
    v = explore([init], succ, invariants={"mutex": mutual_exclusion}).violations["mutex"]
    tr = v.trace + [(Transition.make("noop", "p0", run=7), v.world)]
    out = trace_table(tr, v.initial, mutex_diff)
    lines = out.splitlines()
    assert [c.strip() for c in lines[0].split("|")] == ["step", "actor", "transition", "changed"]
    assert set(lines[1]) <= {"-", "+"}
    assert "enter()" in out and "noop(run=7)" in out and "(no change)" in out
    # an `enter` changes two fields: second one on its own continuation line
    first_enter = next(k for k, ln in enumerate(lines) if "enter()" in ln)
    assert "flag: False -> True" in lines[first_enter + 1]
    assert lines[first_enter + 1].lstrip().startswith("|")
    assert len(lines) == 2 + 5 + 1  # header, rule, 5 steps, one continuation line
    widths = {len(ln.split(" | ")[0]) for ln in lines if " | " in ln}
    assert len(widths) == 1  # fixed-width step column


def test_bench_toy_runs():
    assert bench_toy(8) > 0


# --------------------------------------------------------------------------------------------
# compact storage: fingerprints, released worlds, labels, progress
# --------------------------------------------------------------------------------------------


def test_compact_search_keeps_only_initial_worlds_and_agrees_with_kept_worlds():
    succ = mutex(3)
    init = (("idle",) * 3, False)
    kept = explore([init], succ, invariants={"mutex": mutual_exclusion}, keep_worlds=True,
                   keep_graph=True)
    lean = explore([init], succ, invariants={"mutex": mutual_exclusion}, keep_graph=True)
    assert kept.kept_worlds and not lean.kept_worlds
    assert [w for w in lean.worlds if w is not None] == [init]  # only the initial world stays
    assert list(lean.fingerprints) == [hash(w) for w in kept.worlds]
    assert lean.index == kept.index and lean.state_id(kept.worlds[7]) == 7
    for name in ("mutex",):
        a, b = lean.violations[name], kept.violations[name]
        assert (a.state, a.depth, a.switches, a.trace) == (b.state, b.depth, b.switches, b.trace)
    assert 0 < lean.stats.collision_probability < 1e-15
    assert list(lean.edges_dst) == list(kept.edges_dst)


def test_liveness_reads_labels_recorded_by_the_search():
    succ = graph_ts({"s": [("ok", "A", "done"), ("bad", "A", "t")], "t": [("stuck", "A", "stuck")]})
    ex = explore(["s"], succ, invariants={}, keep_graph=True,
                 labels={"goal": lambda s: s == "done"},
                 deadlock_labels={"bound": lambda s: s == "stuck"})
    assert list(ex.labels["goal"]) == [0, 1, 0, 0] and list(ex.deadlock_labels["bound"]) == [0, 1]
    res = check_liveness(ex, "goal", [], name="d")
    assert not res.holds and res.kind == "deadlock"
    assert [w for _, w in res.prefix] == ["t", "stuck"]
    assert check_liveness(ex, "goal", [], name="d", ignore_deadlock="bound").holds
    with pytest.raises(ValueError, match="keep_worlds"):
        check_liveness(ex, lambda s: s == "done", [], name="d")


def test_progress_is_reported_inside_the_search():
    seen: list[tuple[int, int]] = []
    ex = explore([(0, 0)], counters(), invariants={}, on_progress=lambda n, e: seen.append((n, e)),
                 progress_every=4)
    assert [e for _, e in seen] == list(range(4, ex.expanded + 1, 4))
    assert all(e <= n <= ex.stats.states for n, e in seen)
    assert explore([(0, 0)], counters(), invariants={}).stats.states == ex.stats.states


def test_liveness_that_holds_reports_no_offending_component():
    succ = graph_ts({"s0": [("spin", "A", "s0"), ("go", "B", "goal")]})
    ex = explore(["s0"], succ, invariants={}, keep_graph=True, keep_worlds=True)
    res = check_liveness(ex, lambda s: s == "goal", [lambda t: t.actor == "B"], name="reaches")
    assert res.holds and (res.kind, res.entry, res.scc_size, res.cycle, res.prefix) == (None, None, 0, [], [])


def test_liveness_scope_initial_deadlock_prefix_avoids_goal_states():
    # The shortest path to the dead end d passes the goal; under scope "initial" only the
    # goal-avoiding path counts: m, m2, m3.
    succ = graph_ts(
        {
            "s": [("g", "A", "goal"), ("m", "A", "m1")],
            "goal": [("g2", "A", "d")],
            "m1": [("m2", "A", "m2")],
            "m2": [("m3", "A", "d")],
        }
    )
    ex = explore(["s"], succ, invariants={}, keep_graph=True, keep_worlds=True)
    res = check_liveness(ex, lambda s: s == "goal", [], name="x", scope="initial")
    assert not res.holds and res.kind == "deadlock"
    assert [t.name for t, _ in res.prefix] == ["m", "m2", "m3"]
    assert_replays("s", res.prefix, succ)


def test_liveness_without_the_graph_says_how_to_keep_it():
    ex = explore(["s"], graph_ts({}), invariants={})
    with pytest.raises(ValueError, match=r"^check_liveness needs explore\(\.\.\., keep_graph=True\)$"):
        check_liveness(ex, lambda s: True, [], name="x")
