"""Scope generation, normal forms and the merge (spec/scope.py) as functions, on small
hand-made inputs whose every output is known (tests/test_scope.py checks the shipped scopes
and the command; tests/test_reduction_soundness.py the reduction's soundness)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.model.config import ConfigError, UsageError  # noqa: E402
from failclosed.spec.scope import (  # noqa: E402
    Cache,
    Member,
    Scope,
    TaskResult,
    expand,
    load_scope,
    member,
    merge,
    reduce_members,
    resolve_scope_path,
    subsumes,
)
from failclosed.spec.vocab import Reduction  # noqa: E402

BASE = {
    "constants": {"LEASE_SECONDS": 1, "MAX_REQUEUES": 1},
    "tools": {"read": {"name": "lookup_page"},
              "nonidem": {"name": "create_page_draft", "effect": "non_idempotent_write"}},
    "shapes": {"q": {"entry": "queued", "decisions": ["approve"]}},
    "ends": {"done": {"final": "completed"}, "auth": {"fail": "auth"}},
}


def gen(**prod) -> list[Member]:
    return expand({**BASE, "product": [{"name": "p", "runs": [["q"]], "tools": ["read"], **prod}]},
                  "s.toml", Path("."))


# -- generation ------------------------------------------------------------------------------
def test_a_product_expands_every_combination_in_order():
    ms = gen(workers=[1, 2], transport=["async", "sync"], tools=["read", "nonidem"],
             ends=["done", "auth"])
    assert len(ms) == 16
    assert ms[0].name == "p:w1-async-q-read-done-nofault-b0"
    assert ms[1].name == "p:w1-async-q-read-auth-nofault-b0"  # the last axis varies fastest
    assert ms[-1].name == "p:w2-sync-q-nonidem-auth-nofault-b0"
    m = ms[0].data
    assert m["policy"] == "current" and m["constants"] == BASE["constants"]
    assert m["model"] == {"workers": 1, "transport": "async", "faults": [], "fault_budget": 0,
                          "horizon": 4}
    assert m["tools"] == [{"name": "lookup_page"}]
    assert m["runs"] == [{"id": "r1", "entry": "queued", "decisions": ["approve"],
                          "plan": [{"tools": ["lookup_page"]}, {"final": "completed"}]}]
    assert m["description"] == f"scope member {ms[0].name}"
    assert {x.origin for x in ms} == {"product p"}


def test_runs_get_ids_in_order_and_horizons_name_themselves_when_several():
    ms = gen(runs=[["q", "q"]], horizon=[3, 5])
    assert [r["id"] for r in ms[0].data["runs"]] == ["r1", "r2"]
    assert [x.name for x in ms] == ["p:w1-async-q+q-read-done-nofault-b0-h3",
                                    "p:w1-async-q+q-read-done-nofault-b0-h5"]
    assert [x.data["model"]["horizon"] for x in ms] == [3, 5]
    assert gen(horizon=[2])[0].name.endswith("-b0")  # one horizon: not in the name


@pytest.mark.parametrize(("sets", "want"), [
    (["none"], [()]),
    (["singles"], [("crash",), ("store_error",), ("provider_error",)]),
    (["pairs"], [("crash", "store_error"), ("crash", "provider_error"),
                 ("store_error", "provider_error")]),
    (["all"], [("crash", "store_error", "provider_error")]),
    (["singles", "none", "singles"], [("crash",), ("store_error",), ("provider_error",), ()]),
])
def test_fault_sets(sets, want):
    ms = gen(faults=["crash", "store_error", "provider_error"], fault_sets=sets,
             provider_faults=["rateLimit"], fault_budget=[2])
    assert [tuple(x.data["model"]["faults"]) for x in ms] == want
    for x in ms:
        md = x.data["model"]
        assert md["fault_budget"] == (2 if md["faults"] else 0)  # no fault: no budget
        assert ("provider_faults" in md) == ("provider_error" in md["faults"])
        if "provider_error" in md["faults"]:
            assert md["provider_faults"] == ["rateLimit"]


def test_fault_defaults_and_fault_ops():
    assert [x.data["model"]["faults"] for x in gen(faults=["crash", "pause"])] == [["crash"],
                                                                                   ["pause"]]
    assert gen()[0].data["model"]["faults"] == []  # no kinds: the set none
    assert gen(faults=["crash"], fault_sets=["all"])[0].data["model"]["faults"] == ["crash"]
    ms = gen(faults=["store_error"], fault_ops=["renew_lease"])
    assert ms[0].data["model"]["fault_ops"] == ["renew_lease"]
    assert ms[0].name == "p:w1-async-q-read-done-store_error-b1"


def test_names_of_unnamed_products_and_configs_members():
    ms = expand({**BASE, "configs": ["tiny"],
                 "product": [{"runs": [["q"]], "tools": ["read"]},
                             {"runs": [["q"]], "tools": ["nonidem"]}]}, "s", Path("."))
    origins = [x.origin for x in ms]
    assert origins[0] == "config tiny" and origins[-2:] == ["product p1", "product p2"]
    assert ms[-1].name.startswith("p2:")


@pytest.mark.parametrize(("data", "field"), [
    ({"product": [{"runs": [["q"]], "tools": ["read"], "workers": []}]}, "product[0].workers"),
    ({"product": [{"runs": [["q"]], "tools": ["read"], "workers": [True]}]}, "product[0].workers"),
    ({"product": [{"runs": [["q"]], "tools": ["read"], "workers": "2"}]}, "product[0].workers"),
    ({"product": [{"runs": [], "tools": ["read"]}]}, "product[0].runs"),
    ({"product": [{"runs": [[]], "tools": ["read"]}]}, "product[0].runs"),
    ({"product": [{"runs": ["q"], "tools": ["read"]}]}, "product[0].runs"),
    ({"product": [{"runs": [["q"]]}]}, "product[0].tools"),
    ({"product": [{"runs": [["q"]], "tools": ["nope"]}]}, "unknown tool 'nope'; declared: read, nonidem"),
    ({"product": [{"runs": [["q"]], "tools": ["read"], "ends": ["x"]}]}, "unknown end 'x'"),
    ({"product": [{"runs": [["q"]], "tools": ["read"], "faults": "crash"}]}, "product[0].faults"),
    ({"product": [{"runs": [["q"]], "tools": ["read"], "fault_sets": ["triples"]}]},
     "'triples'; use none, singles, pairs, all"),
    ({"product": [{"runs": [["q"]], "tools": ["read"], "fault_budget": [1.5]}]},
     "product[0].fault_budget"),
    ({"product": [{"runs": [["q"]], "tools": ["read"], "horizon": ["4"]}]}, "product[0].horizon"),
    ({"product": [{"runs": [["q"]], "tools": ["read"], "transport": [1]}]}, "product[0].transport"),
    ({"product": [{"runs": [["q"]], "tools": ["read"], "faults": ["nope"]}]},
     "product[0].faults: unknown fault kind 'nope'"),
    ({"product": [{"runs": [["q"]], "tools": ["read"], "faults": "every",
                   "faults_except": ["crsh"]}]},
     "product[0].faults_except: unknown fault kind 'crsh'; did you mean 'crash'?"),
    ({"product": [{"name": "a", "runs": [["q"]], "tools": ["read"]},
                  {"name": "a", "runs": [["q"]], "tools": ["read"]}]},
     "product[1].name: duplicate product name 'a'"),
    ({"product": ["x"]}, "product[0]: expected a table"),
    ({"product": {"runs": 1}}, "product: expected an array"),
    ({"constants": [1], "product": []}, "constants: expected a table"),
    ({"tools": {"read": 1}, "product": []}, "tools: expected a table of tables"),
    ({"configs": "small"}, "configs: expected a non-empty list"),
    ({"product": []}, "declares no member"),
])
def test_a_bad_product_is_one_error_naming_the_field(data, field):
    with pytest.raises(ConfigError) as e:
        expand({**BASE, **data}, "s.toml", Path("."))
    assert field in str(e.value) and str(e.value).startswith("s.toml: ")


def test_no_shape_declared_is_named_and_unknown_scope_lists_the_known_ones():
    with pytest.raises(ConfigError, match="unknown shape 'x'; declared: none"):
        expand({"product": [{"runs": [["x"]], "tools": ["t"]}]}, "s", Path("."))
    with pytest.raises(ConfigError, match="unknown scope 'nope'; use one of .*quick.*standard"):
        resolve_scope_path("nope")
    assert resolve_scope_path("quick").name == "quick.toml"
    assert resolve_scope_path("x.toml") == Path("x.toml")  # a path as given


def test_load_scope_counts_what_it_drops(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('description = "d"\n[tools.read]\nname = "lookup_page"\n'
                 '[shapes.q]\nentry = "queued"\n[ends]\nc = { final = "completed" }\n'
                 '[[product]]\nname = "a"\nruns = [["q"]]\ntools = ["read"]\n'
                 'transport = ["sync"]\nworkers = [1, 2]\n'
                 'faults = ["crash"]\nfault_sets = ["none", "singles"]\nfault_budget = [1, 2]\n')
    s = load_scope(p)
    # 2 workers (one renaming on sync) x (nofault, crash b1, crash b2): nofault b0 appears
    # twice per worker count; nofault and b1 are subsumed by b2
    assert (s.generated, s.equivalent, s.subsumed, len(s.members)) == (8, 5, 2, 1)
    assert [m.name for m in s.members] == ["a:w1-sync-q-read-c-crash-b2"]
    assert s.by_origin == {"product a": 1} and s.description == "d" and s.name == "s"
    full = load_scope(p, reduce=False)
    assert len(full.members) == 8 and full.equivalent == full.subsumed == 0
    assert member(s, s.members[0].name) is s.members[0]
    with pytest.raises(UsageError, match="no member 'x'"):
        member(s, "x")


# -- normal forms ----------------------------------------------------------------------------
def _data(**model) -> dict:
    return {"model": {"workers": 1, "faults": [], "fault_budget": 0, **model},
            "tools": [{"name": "a"}, {"name": "b"}],
            "runs": [{"id": "r1", "entry": "queued"}, {"id": "r2", "entry": "interactive"}]}


def key(d: dict) -> str:
    return Member("x", d, "").key


def test_renamings_share_a_key_and_nothing_else_does():
    a = _data(faults=["crash"], fault_budget=1)
    b = _data(faults=["crash"], fault_budget=1)
    b["runs"] = [{"id": "x", "entry": "interactive"}, {"id": "y", "entry": "queued"}]
    b["tools"] = b["tools"][::-1]
    b["description"] = "other"
    assert key(a) == key(b)
    assert key(a) != key(_data(faults=["crash"], fault_budget=2))
    assert key(a) != key(_data(faults=["pause"], fault_budget=1))
    assert key(_data(workers=1)) != key(_data(workers=2))  # async: workers count
    assert key(_data(workers=2)) == key(_data(workers=["w1", "w2"]))  # names or a count
    assert key(_data(transport="sync", workers=1)) == key(_data(transport="sync", workers=2))
    assert key(_data(transport="async")) == key(_data())  # async is the default
    assert key(_data(faults=["crash"], fault_budget=0)) != key(_data())
    assert key(_data(faults=[], fault_budget=3)) == key(_data())  # no fault: budget moot
    # provider_error is implied by classes and moot without them
    assert key(_data(faults=["provider_error"], provider_faults=["auth"], fault_budget=1)) == \
        key(_data(faults=[], provider_faults=["auth"], fault_budget=1))
    assert key(_data(faults=["provider_error"], fault_budget=1)) == key(_data())
    assert key(_data(faults=["crash", "crash"], fault_budget=1)) == \
        key(_data(faults=["crash"], fault_budget=1))
    assert key(_data(faults=["store_error"], fault_ops=["b", "a", "a"], fault_budget=1)) == \
        key(_data(faults=["store_error"], fault_ops=["a", "b"], fault_budget=1))
    c = _data()
    c["runs"][0]["entry"] = "interactive"
    assert key(c) != key(_data())


def test_subsumes_in_each_fault_dimension():
    small = _data(faults=["crash"], fault_budget=1)
    assert subsumes(_data(faults=["crash", "pause"], fault_budget=1), small)
    assert subsumes(_data(faults=["crash"], fault_budget=2), small)
    assert subsumes(small, small)
    assert not subsumes(_data(faults=["pause"], fault_budget=1), small)
    assert not subsumes(_data(faults=["crash"], fault_budget=0), small)  # budget
    assert subsumes(small, _data())  # no fault at all: any budget covers it
    assert not subsumes(_data(faults=["crash"], fault_budget=1, workers=2), small)  # not faults
    pa = _data(faults=["provider_error"], provider_faults=["auth"], fault_budget=1)
    pb = _data(faults=["provider_error"], provider_faults=["auth", "rateLimit"], fault_budget=1)
    assert subsumes(pb, pa) and not subsumes(pa, pb)
    # fault_ops restricts store_error: None is every statement
    every = _data(faults=["store_error"], fault_budget=1)
    some = _data(faults=["store_error"], fault_ops=["renew_lease"], fault_budget=1)
    more = _data(faults=["store_error"], fault_ops=["renew_lease", "requeue"], fault_budget=1)
    assert subsumes(every, some) and not subsumes(some, every)
    assert subsumes(more, some) and not subsumes(some, more)
    crash_ops = _data(faults=["crash"], fault_ops=["renew_lease"], fault_budget=1)
    assert subsumes(crash_ops, small)  # fault_ops changes nothing without store_error


def test_reduce_keeps_the_first_of_equals_and_the_largest():
    a = Member("a", _data(faults=["crash"], fault_budget=1), "")
    a2 = Member("a2", _data(faults=["crash"], fault_budget=1), "")
    big = Member("big", _data(faults=["crash", "pause"], fault_budget=2), "")
    other = Member("other", _data(workers=2), "")
    kept, eq, sub = reduce_members([a, a2, big, other])
    assert [m.name for m in kept] == ["big", "other"] and (eq, sub) == (1, 1)
    kept, eq, sub = reduce_members([a2, a])
    assert [m.name for m in kept] == ["a2"] and (eq, sub) == (1, 0)
    kept, eq, sub = reduce_members([a, other])
    assert [m.name for m in kept] == ["a", "other"] and (eq, sub) == (0, 0)


def test_reduce_drops_a_member_not_its_namesake():
    """Two members may share a name (a scope file's products, or members made by hand): the
    one subsumed is dropped, the other, of another configuration, is kept (found by
    tests/test_reduction_soundness.py's generator under a newer Hypothesis)."""
    small = Member("same", _data(faults=["crash"], fault_budget=1), "")
    big = Member("big", _data(faults=["crash", "pause"], fault_budget=2), "")
    namesake = Member("same", _data(workers=2), "")
    kept, eq, sub = reduce_members([small, big, namesake])
    assert [m.data for m in kept] == [big.data, namesake.data] and (eq, sub) == (0, 1)


# -- merging ---------------------------------------------------------------------------------
def _scope(*names: str) -> Scope:
    return Scope("s", "", "", [Member(n, {}, "") for n in names], len(names), 0, 0, {})


def _r(name: str, policy: str = "current", truncated: bool = False, **lengths: int) -> TaskResult:
    return TaskResult(name, policy, 10, 20, 0.5, truncated,
                      {p: {"length": n, "kind": "safety", "explanation": f"{name} {p}"}
                       for p, n in lengths.items()})


def test_merge_keeps_the_shortest_and_on_ties_the_first_member_of_the_scope():
    s = _scope("a", "b", "c")
    res = merge(s, ["current"], ["x", "y", "z"],
                [_r("c", x=3, y=5), _r("b", x=3), _r("a", x=4, y=5)],
                kinds={"z": "liveness"})
    x, y, z = (res.verdicts["current"][n] for n in "xyz")
    assert (x.holds, x.length, x.member, x.violating) == (False, 3, "b", 3)
    assert x.explanation == "b x"
    assert (y.holds, y.length, y.member, y.violating) == (False, 5, "a", 2)
    assert (z.holds, z.length, z.member, z.violating, z.kind) == (True, None, None, 0, "liveness")
    assert x.kind == "safety"


def test_merge_keeps_policies_apart_and_ignores_properties_not_asked():
    s = _scope("a")
    res = merge(s, ["current", "proposed"], ["x"],
                [_r("a", "proposed", x=2, other=1), _r("a", "current")])
    assert res.verdicts["current"]["x"].holds
    assert res.verdicts["proposed"]["x"].length == 2
    assert "other" not in res.verdicts["proposed"]
    assert res.cell("current", "x") == {"holds": True, "trace_length": None}
    assert res.cell("proposed", "x") == {"holds": False, "trace_length": 2, "config": "a",
                                         "violating_configurations": 1}


def test_scope_result_states_its_reach():
    s = _scope("a", "b")
    res = merge(s, ["current", "proposed"], ["x"],
                [_r("a", x=2), _r("b", "proposed", truncated=True)], seconds=1.23456)
    assert res.states == 20 and res.truncated == ["b"] and res.cached == 0
    assert res.reach() == ("scope s: 2 configurations, 20 states (fingerprint collision probability "
                           "5e-18); 1 truncated (holds up to the bound there); reductions: none")
    # the reductions any member's search ran under, in their order
    res.results[0].reductions = (Reduction.LOG_ORDER,)
    res.results[1].reductions = (Reduction.LOG_ORDER, Reduction.SYMMETRY)
    assert res.reach().endswith("; reductions: symmetry, log order")
    assert res.to_json()["reductions"] == ["symmetry", "log order"]
    assert TaskResult.from_json(res.results[1].to_json()).reductions == res.results[1].reductions
    assert res.reach("current").startswith("scope s: 2 configurations, 10 states")
    d = res.to_json()
    assert (d["scope"], d["configurations"], d["states"], d["seconds"]) == ("s", 2, 20, 1.235)
    assert d["complete"] is False and d["truncated"] == ["b"] and d["properties"] == ["x"]
    assert d["policies"]["current"]["x"]["config"] == "a"


def test_task_results_and_the_cache_round_trip(tmp_path):
    r = _r("a", x=2)
    r.seconds = 1.23456
    assert TaskResult.from_json(r.to_json()).violations == r.violations
    assert r.to_json()["seconds"] == 1.235
    cache = Cache(tmp_path, "v1")
    m = Member("a", _data(), "")
    k = cache.key(m, "current", ["x"], None)
    assert k == cache.key(Member("b", _data(), ""), "current", ["x"], None)  # names don't count
    assert k != cache.key(m, "proposed", ["x"], None) != cache.key(m, "current", ["x"], 10)
    assert k != Cache(tmp_path, "v2").key(m, "current", ["x"], None)
    assert cache.key(m, "current", ["x", "y"], None) == cache.key(m, "current", ["y", "x"], None)
    # a result without the log order is another entry (the default is with it)
    off = cache.key(m, "current", ["x"], None, {Reduction.LOG_ORDER: False})
    assert off != cache.key(m, "current", ["x"], None, {Reduction.LOG_ORDER: True})
    assert cache.get(k, "a") is None
    cache.put(k, r)
    hit = cache.get(k, "renamed")
    assert hit.cached and hit.member == "renamed" and hit.violations == r.violations
    cache.path(k).write_text("{not json")
    assert cache.get(k, "a") is None  # a damaged entry is recomputed
    none = Cache(None, "v1")
    none.put(k, r)
    assert none.get(k, "a") is None and none.path(k) is None


def test_merge_defaults_for_a_bare_violation_and_results_of_other_members():
    s = _scope("a")
    bare = TaskResult("a", "current", 1, 1, 0.0, False, {"x": {"length": 4}})
    res = merge(s, ["current"], ["x"], [bare], kinds={"x": "liveness"})
    v = res.verdicts["current"]["x"]
    assert (v.length, v.explanation, v.kind) == (4, "", "liveness")  # the property's kind
    # a result of a member the scope does not list sorts after every member of it
    res = merge(s, ["current"], ["x"], [_r("zz", x=2), _r("a", x=2)])
    assert res.verdicts["current"]["x"].member == "a"


def test_normal_form_details():
    # the catalogue counts, not only the tool names the runs call
    a, b = _data(), _data()
    b["tools"] = [{"name": "a", "effect": "non_idempotent_write"}, {"name": "b"}]
    assert key(a) != key(b)
    # a run's keys in any order; workers absent means one
    c = _data()
    c["runs"] = [{"entry": "queued", "id": "r1"}, {"entry": "interactive", "id": "r2"}]
    c["runs"][0] = dict(reversed(list({"id": "r1", "entry": "queued", "cap": 2}.items())))
    d = _data()
    d["runs"][0] = {"id": "r1", "entry": "queued", "cap": 2}
    assert key(c) == key(d)
    no_workers = _data()
    del no_workers["model"]["workers"]
    assert key(no_workers) == key(_data(workers=1)) != key(_data(workers=2))


def test_all_of_no_fault_kinds_is_no_member():
    with pytest.raises(ConfigError, match="declares no member"):
        gen(fault_sets=["all"])
    assert [x.data["model"]["faults"] for x in gen(fault_sets=["all", "none"])] == [[]]


def test_merge_without_kinds_calls_every_property_safety():
    res = merge(_scope("a"), ["current"], ["x", "y"], [_r("a", y=1)])
    assert res.verdicts["current"]["x"].kind == "safety" and res.seconds == 0.0


def test_a_missing_budget_is_zero_on_either_side():
    no_budget = _data(faults=["crash"])
    del no_budget["model"]["fault_budget"]
    one = _data(faults=["crash"], fault_budget=1)
    zero = _data(faults=["crash"], fault_budget=0)
    assert not subsumes(no_budget, one)  # budget 0 does not cover budget 1
    assert subsumes(one, no_budget) and subsumes(zero, no_budget) and subsumes(no_budget, zero)


def test_merge_reads_each_violation_whole():
    s = _scope("a", "b")
    # a property not asked for comes first: the asked one after it still counts
    first = TaskResult("a", "current", 1, 1, 0.0, False,
                       {"other": {"length": 1}, "x": {"length": 3, "kind": "liveness"}})
    res = merge(s, ["current"], ["x"], [first])
    assert res.verdicts["current"]["x"].length == 3
    assert res.verdicts["current"]["x"].kind == "liveness"  # the violation's kind
    # a counterexample of length 0 (the initial world): ties keep the first member
    res = merge(s, ["current"], ["x"], [_r("b", x=0), _r("a", x=0)])
    assert (res.verdicts["current"]["x"].member, res.verdicts["current"]["x"].length) == ("a", 0)
