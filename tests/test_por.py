"""Partial-order reduction (spec/por.py): its hook in the engine, its soundness, its switch.

* Footprints (what C1 and C2 read): tests/test_footprints.py.
* The engine's hook on a toy system of independent counters: the ample sets reduce the
  states, the cycle proviso expands a state in full where an ample set would close a cycle,
  the depth bound stops the search.
* Differential: every member of ``quick`` (``-m slow``: of ``standard``) under current and
  proposed with and without ``--por``: the same verdicts and shortest lengths;
  a Hypothesis property does the same on random small members (the scope generator of
  tests/test_reduction_soundness.py) under random policies and the mutant presets.
* The differential detects an unsound reduction: with C1 and C2 switched off by a
  monkeypatch (every process's transitions taken as an ample set, visible or not), a
  violation of ``current`` on a quick member is hidden, and the comparison says so.
* A longer trace (as a reduction may find) is shortened by the bounded unreduced search and
  replays; ``check --por`` / ``--no-por`` say what they ran under, in text and JSON, and the
  scope cache keeps a reduced result apart.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.model.config import initial_world, parse_config  # noqa: E402
from failclosed.model.runtime import successors  # noqa: E402
from failclosed.model.transition import Transition  # noqa: E402
from failclosed.spec import checker, engine, por  # noqa: E402
from failclosed.spec import properties as P  # noqa: E402
from failclosed.spec.checker import ConfigPart, check  # noqa: E402
from failclosed.spec.mutants import MUTANTS  # noqa: E402
from failclosed.spec.scope import expand, load_scope  # noqa: E402
from failclosed.spec.vocab import Reduction  # noqa: E402

SAFETY = list(P.SAFETY)


# --------------------------------------------------------------------------------------------
# the engine's hook, on a toy system
# --------------------------------------------------------------------------------------------
def _toy(n: int, cycle: bool = False, first: str = "a"):
    """Two counters 0..n, one per actor; ``cycle``: b wraps from n to 0. The ample set is
    ``first``'s step wherever both can move (they are independent)."""

    def succ(w: tuple[int, int]) -> list[tuple[Transition, tuple[int, int]]]:
        a, b = w
        out = []
        if a < n:
            out.append((Transition.make("inc", "a"), (a + 1, b)))
        if b < n or cycle:
            out.append((Transition.make("inc", "b"), (a, (b + 1) % (n + 1))))
        return out

    class Ample:
        cycle_full = 0

        def __call__(self, w):
            s = succ(w)
            mine = [x for x in s if x[0].actor == first]
            return (mine, True) if mine and len(s) > 1 else (s, False)

    return succ, Ample()


def test_the_hook_reduces_and_keeps_the_violation() -> None:
    succ, ample = _toy(6)
    inv = {"not both at the top": lambda w: w != (6, 6)}
    full = engine.explore([(0, 0)], succ, invariants=inv)
    red = engine.explore([(0, 0)], succ, invariants=inv, reduce=ample)
    assert full.stats.states == 49
    assert red.stats.states < full.stats.states
    assert red.violations["not both at the top"].depth == full.violations[
        "not both at the top"].depth == 12


def test_the_cycle_proviso_expands_in_full() -> None:
    """b's steps close a cycle: without the proviso a's step would be ignored for ever (the
    reduced graph would stay at a = 0 and miss the violation at a = 3)."""
    succ, ample = _toy(3, cycle=True, first="b")
    inv = {"a stays below the top": lambda w: w[0] < 3}
    red = engine.explore([(0, 0)], succ, invariants=inv, reduce=ample)
    assert ample.cycle_full > 0
    assert "a stays below the top" in red.violations


def test_the_depth_bound_stops_the_search() -> None:
    succ, _ = _toy(6)
    ex = engine.explore([(0, 0)], succ, invariants={}, max_depth=3)
    assert ex.stats.max_depth == 3 and ex.stats.stopped_early
    assert ex.stats.states == 10  # depths 0..3 of a 7x7 grid


# --------------------------------------------------------------------------------------------
# differential: with and without the reduction
# --------------------------------------------------------------------------------------------
def _verdicts(res: checker.CheckResult) -> dict[str, tuple[bool, int | None]]:
    return {n: (r.holds, r.trace_length) for n, r in res.properties.items()}


def _differ(name: str, data: dict, policy: str, props: list[str] = SAFETY) -> dict:
    part = ConfigPart(name, "", data)
    plain = check(policy, part, props, witnesses=False, coverage=False)
    red = check(policy, part, props, witnesses=False, coverage=False, por=True)
    assert any(x.startswith("por") for x in red.reductions), red.reductions
    assert not any(x.startswith("por") for x in plain.reductions)
    a, b = _verdicts(plain), _verdicts(red)
    return {n: (a[n], b[n]) for n in a if a[n] != b[n]}


@pytest.mark.parametrize("policy", ["current", "proposed"])
def test_quick_with_and_without_por(policy: str) -> None:
    for m in load_scope("quick").members:
        assert _differ(m.name, m.data, policy) == {}, m.name


@pytest.mark.slow
def test_standard_with_and_without_por() -> None:
    """Every member of ``standard`` under current and proposed (safety properties, both
    cores): the merged verdicts and shortest lengths, cell by cell, and each member's."""
    from failclosed.spec.scope import check_scope

    scope = load_scope("standard")
    pols = ["current", "proposed"]
    plain = check_scope(scope, pols, SAFETY, jobs=2)
    red = check_scope(scope, pols, SAFETY, jobs=2, por=True)
    assert [x for x in red.reductions if x.startswith("por")]
    for p in pols:
        assert {n: red.cell(p, n) for n in SAFETY} == {n: plain.cell(p, n) for n in SAFETY}
    by = {(r.member, r.policy): r for r in plain.results}
    for r in red.results:
        a = by[r.member, r.policy]
        assert ({n: v["length"] for n, v in r.violations.items()}
                == {n: v["length"] for n, v in a.violations.items()}), r.member


def test_liveness_keeps_the_search_unreduced() -> None:
    m = load_scope("quick").members[0]
    res = check("current", ConfigPart(m.name, "", m.data), None, witnesses=False,
                coverage=False, por=True)
    assert checker.POR_OFF_LIVENESS in res.reductions
    assert "por" not in res.reductions
    assert checker.POR_OFF_LIVENESS in res.stats_line()


def _random_member(draw: st.DrawFn) -> tuple[str, dict]:
    from tests.test_reduction_soundness import products, scope_data

    members = expand(scope_data(draw, [draw(products("p", False))]), "random", Path("."))
    m = members[draw(st.integers(0, len(members) - 1))]
    return m.name, m.data


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_members_and_mutants_with_and_without_por(data: st.DataObject) -> None:
    name, table = _random_member(data.draw)
    policy = data.draw(st.sampled_from(["current", "proposed", *MUTANTS.values()]))
    # a subset of the properties: fewer fields read, fewer transitions visible (C2)
    props = data.draw(st.lists(st.sampled_from(SAFETY), min_size=1, unique=True))
    assert _differ(name, table, policy, props) == {}


# --------------------------------------------------------------------------------------------
# the differential detects an unsound reduction
# --------------------------------------------------------------------------------------------
HIDING = "queued:w1-sync-queued-remote-not_retryable-slow_operation-b1"


def test_an_unsound_reduction_is_detected(monkeypatch) -> None:
    """C1 and C2 off: every process's transitions are an ample set, visible or not. The
    write the slow operation duplicates is then never reached on the reduced graph."""
    monkeypatch.setattr(por, "independent_steps", lambda: ["any"])
    monkeypatch.setattr(checker, "independent_steps", lambda: ["any"])
    monkeypatch.setattr(por.AmpleSets, "_ample", lambda self, w, ts: True)
    m = next(m for m in load_scope("quick").members if m.name == HIDING)
    diff = _differ(m.name, m.data, "current")
    assert diff, "the unsound reduction hid nothing: the differential would not see it"
    name = P.PropertyName.NON_IDEMPOTENT_WRITE_AT_MOST_ONCE
    assert diff[name][0][0] is False and diff[name][1] == (True, None)


# --------------------------------------------------------------------------------------------
# shortest counterexamples
# --------------------------------------------------------------------------------------------
def test_a_longer_trace_is_shortened_and_replays() -> None:
    """A violation found at a greater depth (as under a reduction) is replaced by the
    unreduced search's shortest, fewest-switch one, bounded at that depth; it replays step
    by step. Cut by max_states, the longer one is kept and marked not shortest."""
    from failclosed.model.runtime import apply
    from failclosed.spec.symmetry import make_canonical

    m = next(m for m in load_scope("quick").members if m.name == HIDING)
    spec, budget = parse_config(m.data, "current")
    w0 = initial_world(spec, budget)
    canon = make_canonical(spec)
    name = P.PropertyName.NON_IDEMPOTENT_WRITE_AT_MOST_ONCE
    plain = engine.explore([w0], successors, invariants={name: P.SAFETY[name].check},
                           canonical=canon).violations[name]
    longer = replace(plain, depth=plain.depth + 3)
    got, shortest = checker._shortest(w0, canon, {}, {name: longer}, None)[name]
    assert shortest and got.depth == plain.depth and got.switches == plain.switches
    w = got.initial
    for t, after in got.trace:
        w = apply(w, t)
        assert w == after if canon is None else canon(w) == canon(after)
    assert not P.SAFETY[name].check(w)
    kept, shortest = checker._shortest(w0, canon, {}, {name: longer}, 5)[name]
    assert kept is longer and not shortest


# --------------------------------------------------------------------------------------------
# the switch and the report
# --------------------------------------------------------------------------------------------
def test_check_says_what_it_ran_under(capsys, tmp_path) -> None:
    from failclosed.cli import main

    prop = P.PropertyName.NON_IDEMPOTENT_WRITE_AT_MOST_ONCE
    argv = ["check", "--policy", "current", "--config", "tiny", "--property", prop, "--quiet"]
    import json

    main([*argv, "--json", str(tmp_path / "plain.json")])
    plain = json.loads((tmp_path / "plain.json").read_text())["reductions"]
    assert f"reductions: {', '.join(plain) or 'none'}" in capsys.readouterr().out
    assert "por" not in " ".join(plain)
    main([*argv, "--por", "--json", str(tmp_path / "r.json")])
    out = " ".join(capsys.readouterr().out.split())  # the statistics line wraps at 100 columns
    # what ran first (the clock regions, on by default), then what was asked for and did not
    assert f"reductions: {', '.join([*plain, checker.POR_OFF_DEPENDENT])}" in out
    d = json.loads((tmp_path / "r.json").read_text())
    assert d["reductions"] == [*plain, checker.POR_OFF_DEPENDENT]
    main([*argv, "--no-por"])
    assert f"reductions: {', '.join(plain) or 'none'}" in capsys.readouterr().out
    # both switches on one command line
    main([*argv, "--por", "--no-clock-reduction", "--no-log-reduction"])
    assert f"reductions: {checker.POR_OFF_DEPENDENT}" in " ".join(capsys.readouterr().out.split())


def test_the_cache_keeps_reduced_results_apart(tmp_path) -> None:
    from failclosed.spec.scope import Cache, check_scope, model_version

    scope = load_scope("quick")
    first = replace(scope, members=scope.members[:2])
    cache = Cache(tmp_path, model_version())
    m = first.members[0]
    on = {Reduction.CLOCK_REGIONS: True}
    assert cache.key(m, "current", None, None, on) != cache.key(
        m, "current", None, None, on | {Reduction.POR: True})
    plain = check_scope(first, ["current"], SAFETY, cache=cache)
    red = check_scope(first, ["current"], SAFETY, cache=cache, por=True)
    assert red.cached == 0 and plain.cached == 0
    assert "por" not in " ".join(plain.reductions)
    assert red.reductions and all(x in set(Reduction) or x.startswith("por")
                                  for x in red.reductions)
    assert check_scope(first, ["current"], SAFETY, cache=cache, por=True).cached == 2
    assert "reductions:" in red.reach()


def _unbounded_toy(n: int):
    """Counter ``a`` 0..n, counter ``b`` growing without end, and the key that makes the
    search finite: ``b`` modulo ``n + 1`` (as a time shift or a symmetry does for the
    model). The ample set is b's step wherever both can move; b's steps close a cycle only
    in the key's space (no raw world repeats)."""

    def succ(w: tuple[int, int]) -> list[tuple[Transition, tuple[int, int]]]:
        a, b = w
        out = [(Transition.make("inc", "b"), (a, b + 1))]
        if a < n:
            out.insert(0, (Transition.make("inc", "a"), (a + 1, b)))
        return out

    class Ample:
        cycle_full = 0

        def __call__(self, w):
            s = succ(w)
            return ([x for x in s if x[0].actor == "b"], True) if len(s) > 1 else (s, False)

    return succ, Ample(), (lambda w: (w[0], w[1] % (n + 1)))


def test_the_cycle_proviso_reads_the_key_when_the_search_has_one() -> None:
    """With a key function the reduced graph's cycles close on stored keys, not on stored
    worlds: the proviso must ask whether a successor's *key* is stored, else b's steps are
    taken for ever (each raw world is new), a's step never, and the violation at a = 3 is
    hidden."""
    succ, ample, key = _unbounded_toy(3)
    inv = {"a stays below the top": lambda w: w[0] < 3}
    full = engine.explore([(0, 0)], succ, invariants=inv, canonical=key)
    red = engine.explore([(0, 0)], succ, invariants=inv, canonical=key, reduce=ample)
    assert full.stats.states == 16 and not full.stats.truncated
    assert ample.cycle_full > 0
    assert red.violations["a stays below the top"].depth >= full.violations[
        "a stays below the top"].depth == 3
