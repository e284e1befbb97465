"""The liveness check (spec/engine.py ``check_liveness`` and its SCC search) against a
reference written with networkx, on random graphs (Hypothesis): the verdict, the kind of
counterexample, the counts it reports, and a lasso that really is one (its prefix and cycle
follow edges, the cycle closes on its entry, stays off the goal and meets every fairness
class), with the shortest prefix."""

from __future__ import annotations

import sys
from pathlib import Path

import networkx as nx
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.model.transition import Transition  # noqa: E402
from failclosed.spec.liveness import check_liveness, strongly_connected  # noqa: E402
from failclosed.spec.search import explore  # noqa: E402

ACTORS = ("A", "B", "C")


@st.composite
def graphs(draw: st.DrawFn) -> tuple[dict[int, list[tuple[str, int]]], set[int], list[str], str]:
    n = draw(st.integers(1, 9))
    edges: dict[int, list[tuple[str, int]]] = {}
    for s in range(n):
        out = draw(st.lists(st.tuples(st.sampled_from(ACTORS), st.integers(0, n - 1)),
                            max_size=3, unique=True))
        edges[s] = out
    goal = set(draw(st.lists(st.integers(0, n - 1), max_size=2)))
    fair = draw(st.lists(st.sampled_from(ACTORS), max_size=2, unique=True))
    scope = draw(st.sampled_from(["always", "initial"]))
    return edges, goal, fair, scope


def _succ(edges):
    def succ(s):
        return [(Transition("go", a, (("to", v),)), v) for a, v in edges.get(s, [])]
    return succ


def _reference(edges, goal, fair, scope, reach_from_zero):
    """(holds, deadlocks, fair SCCs, checked states) by networkx on the reachable graph."""
    states = reach_from_zero
    ok = {s for s in states if s not in goal}
    if scope == "initial":
        sub = nx.DiGraph()
        sub.add_nodes_from(ok)
        sub.add_edges_from((u, v) for u in ok for _a, v in edges[u] if v in ok)
        ok = (nx.descendants(sub, 0) | {0}) if 0 in ok else set()
    dead = [s for s in ok if not edges[s]]
    g = nx.DiGraph()
    g.add_nodes_from(ok)
    g.add_edges_from((u, v) for u in ok for _a, v in edges[u] if v in ok)
    fair_sccs = 0
    cands = list(dead)  # where a counterexample may end: a deadlock or a fair SCC's state
    for c in nx.strongly_connected_components(g):
        if len(c) == 1 and not g.has_edge(next(iter(c)), next(iter(c))):
            continue
        good = True
        for f in fair:
            disabled = any(all(a != f for a, _v in edges[s]) for s in c)
            taken = any(a == f and v in c for s in c for a, v in edges[s])
            good &= disabled or taken
        fair_sccs += good
        if good:
            cands += list(c)
    return (not dead and not fair_sccs, len(dead), fair_sccs, len(ok)), cands


def _assert_lasso(res, edges, goal, fair):
    cur = res.initial
    assert cur == 0
    for t, w in res.prefix:
        assert (t.actor, w) in edges[cur]
        cur = w
    if res.kind == "deadlock":
        assert not edges[cur] and cur not in goal and res.cycle == []
        return
    entry = cur
    seen, taken = {cur}, set()
    for t, w in res.cycle:
        assert (t.actor, w) in edges[cur] and w not in goal
        taken.add(t.actor)
        seen.add(w)
        cur = w
    assert cur == entry and res.cycle
    for f in fair:  # weakly fair: disabled somewhere on the cycle, or taken on it
        assert f in taken or any(all(a != f for a, _ in edges[s]) for s in seen)


@settings(max_examples=300, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(graphs())
def test_liveness_agrees_with_a_networkx_reference(case):
    edges, goal, fair, scope = case
    ex = explore([0], _succ(edges), invariants={}, keep_graph=True, keep_worlds=True)
    res = check_liveness(ex, lambda s: s in goal, [lambda t, f=f: t.actor == f for f in fair],
                         name="p", scope=scope)
    (holds, dead, fair_sccs, checked), cands = _reference(edges, goal, fair, scope,
                                                         set(ex.worlds))
    assert (res.holds, res.deadlocks, res.fair_sccs, res.checked_states) == (
        holds, dead, fair_sccs, checked)
    assert res.complete and res.scope == scope and res.name == "p"
    if holds:
        assert res.kind is None and res.prefix == [] and res.cycle == [] and res.entry is None
        return
    _assert_lasso(res, edges, goal, fair)
    assert res.scc_size >= 1
    if scope == "always":  # the prefix is a shortest path to the nearest counterexample
        whole = nx.DiGraph()
        whole.add_nodes_from(edges)
        whole.add_edges_from((u, v) for u in edges for _a, v in edges[u])
        dist = nx.single_source_shortest_path_length(whole, 0)
        assert len(res.prefix) == dist[ex.worlds[res.entry]] == min(dist[c] for c in cands)
        dead_at = [dist[c] for c in cands if not edges[c]]
        if dead_at and min(dead_at) == len(res.prefix):
            assert res.kind == "deadlock"  # a deadlock wins a tie


@settings(max_examples=200, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.integers(1, 12).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=30))))
def test_strongly_connected_is_networkx_non_trivial_sccs(case):
    n, pairs = case
    pairs = sorted(set(pairs))
    src = np.array([u for u, _ in pairs], dtype=np.int32)
    dst = np.array([v for _, v in pairs], dtype=np.int32)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(pairs)
    want = sorted(sorted(c) for c in nx.strongly_connected_components(g)
                  if len(c) > 1 or g.has_edge(next(iter(c)), next(iter(c))))
    assert strongly_connected(n, src, dst) == want


def test_a_long_chain_into_a_cycle_is_trimmed_and_found():
    """A chain of 300 states into a two-state cycle: trimming removes the chain in rounds
    (not all at once), and the cycle is still the only component."""
    n = 302
    pairs = [(k, k + 1) for k in range(300)] + [(300, 301), (301, 300)]
    src = np.array([u for u, _ in pairs], dtype=np.int32)
    dst = np.array([v for _, v in pairs], dtype=np.int32)
    assert strongly_connected(n, src, dst) == [[300, 301]]
    assert strongly_connected(3, np.array([0, 1], np.int32), np.array([1, 2], np.int32)) == []


def _fair_subset_exists(edges, ok, weak, strong) -> bool:
    """Brute force, independent of the engine's SCC refinement: some non-empty set S of
    in-scope states is strongly connected by internal edges (a cycle can visit exactly S
    for ever) and meets every class on S: a weak class disabled at some state of S or taken
    inside S; a strong class enabled at no state of S or taken inside S."""
    from itertools import combinations

    nodes = sorted(ok)
    for k in range(1, len(nodes) + 1):
        for sub in combinations(nodes, k):
            s = set(sub)
            g = nx.DiGraph()
            g.add_nodes_from(s)
            g.add_edges_from((u, v) for u in s for _a, v in edges[u] if v in s)
            if g.number_of_edges() == 0 or not nx.is_strongly_connected(g):
                continue

            def taken(f, s=s):
                return any(a == f and v in s for u in s for a, v in edges[u])

            def enabled(u, f):
                return any(a == f for a, _v in edges[u])

            if all(taken(f) or any(not enabled(u, f) for u in s) for f in weak) and all(
                    taken(f) or not any(enabled(u, f) for u in s) for f in strong):
                return True
    return False


@settings(max_examples=300, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(graphs(), st.lists(st.sampled_from(ACTORS), max_size=2, unique=True))
def test_strong_fairness_agrees_with_a_brute_force_over_state_sets(case, strong):
    edges, goal, weak, scope = case
    ex = explore([0], _succ(edges), invariants={}, keep_graph=True, keep_worlds=True)
    res = check_liveness(ex, lambda s: s in goal, [lambda t, f=f: t.actor == f for f in weak],
                         strong=[lambda t, f=f: t.actor == f for f in strong], name="p",
                         scope=scope)
    (_, dead, _, checked), _ = _reference(edges, goal, [], scope, set(ex.worlds))
    assert (res.deadlocks, res.checked_states) == (dead, checked)
    ok = {s for s in set(ex.worlds) if s not in goal}
    if scope == "initial":
        sub = nx.DiGraph()
        sub.add_nodes_from(ok)
        sub.add_edges_from((u, v) for u in ok for _a, v in edges[u] if v in ok)
        ok = (nx.descendants(sub, 0) | {0}) if 0 in ok else set()
    assert res.holds == (not dead and not _fair_subset_exists(edges, ok, weak, strong))
    if res.holds or res.kind == "deadlock":
        return
    _assert_lasso(res, edges, goal, weak)
    on_cycle = {w for _, w in res.cycle}
    for f in strong:  # strongly fair: enabled nowhere on the cycle, or taken on it
        assert any(t.actor == f for t, _ in res.cycle) or not any(
            a == f for s in on_cycle for a, _ in edges[s])
