"""Soundness of the scope reduction (spec/scope.py), as a Hypothesis property over random
members in every dimension: budget, faults (kinds, provider classes, store statements),
workers, transport, horizon, runs and tools, every value drawn from the dimension table
(tests/config_space.py): the catalogue's tools and the runs' shapes with every field of a
tool, of a run and of the principals it names.

A random scope is generated (one or two products over random sub-lists of every axis; each
product lists its runs twice, with a run and with its twin, which differs from it in one
field of its run table: members a reduction must not take for renamings), some
of its members are given random renamings (runs reordered and renamed, the catalogue
reordered, a description, ``provider_error`` without a class) and mixed catalogues (two
runs calling two different tools). Every member, kept or dropped, is then checked under a
random policy, and:

* the merged verdicts of the reduced set equal those of the unreduced one, property by
  property: holds or not, and the shortest counterexample length;
* a member dropped as a renaming has exactly the verdicts (and lengths) of the member kept
  for it; a member dropped as subsumed has no violation that the member subsuming it lacks,
  and none shorter there;
* members with different verdicts are never merged as renamings.

The results are cached by the member's exact table (never by ``Member.key``, which is what
is under test). The default suite runs a small budget; ``-m slow`` runs a larger one.
"""

from __future__ import annotations

import copy
import json
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.model.state import COMPLETED  # noqa: E402
from failclosed.spec import dimensions as D  # noqa: E402
from failclosed.spec.scope import (  # noqa: E402
    FAULT_SET_KINDS,
    Member,
    Scope,
    TaskResult,
    check_member,
    expand,
    merge,
    reduce_members,
    subsumes,
)

from tests import config_space as space  # noqa: E402

CONSTANTS = {"LEASE_SECONDS": 1, "MAX_REQUEUES": 1, "REQUEUE_BACKOFF_MS": 1000,
             "REQUEUE_BACKOFF_CAP_MS": 2000}
POLICIES = ["current", "proposed", "adr-111"]
MAX_MEMBERS = 24  # per example: keeps one example well under a second
# the runs of a member: one run, or one with a run already completed beside it (``done``: a
# second or third run that costs no state, so the run order, the run ids and identical runs
# are varied at the price of one-run members), in both orders. A product lists each drawn
# one twice: with the run ``a`` and with its twin ``b`` (members that differ only in one
# field of a run, which a reduction must not take for renamings)
RUN_SHAPES = [["a"], ["a", "done"], ["done", "a"], ["a", "done", "done"]]
# the scope format's fixed parts of a run: its id (given by the member), its plan (a round
# calling the product's tool, then the product's end)
PLAN = {"id", "plan"}


def _sub(xs: list, max_size: int | None = None) -> st.SearchStrategy[list]:
    """A non-empty sub-list of ``xs``, in ``xs``'s order."""
    n = len(xs) if max_size is None else max_size
    return st.lists(st.sampled_from(xs), min_size=1, max_size=n, unique_by=json.dumps).map(
        lambda s: sorted(s, key=xs.index))


def _values(name: str) -> list:
    """The values of a dimension of the table (tests/config_space.py), its base first."""
    return list(D.dimension(name).values)


@st.composite
def products(draw: st.DrawFn, name: str, shapes: list[str], tools: list[str],
             pools: dict[str, list]) -> dict:
    """One [[product]] over random sub-lists of every axis, each axis's values the
    dimension table's (workers, transport, fault kinds, budget; the ends, the horizon, the
    provider classes and the store statements from the scope's ``pools``, a few drawn from
    the table's, so that two products' lists overlap and a member of one may subsume a
    member of the other). With two workers, a budget of at most one and
    single faults (a second worker with two faults or a budget of two costs thousands of
    states; a run with every field drawn, tens of thousands)."""
    kinds = _values("fault")[1:]
    faults = draw(st.lists(st.sampled_from(kinds), max_size=3, unique=True))
    if draw(st.booleans()):  # a lapse: the faults under which a second worker matters
        faults = list(dict.fromkeys([*faults, draw(st.sampled_from(["pause", "slow_operation"]))]))
    workers = draw(st.sampled_from([[1], [2], [1, 2], [1, 2]]))
    small = 2 in workers
    budgets = [b for b in _values("budget") if b <= (1 if small else 2)]
    prod: dict = {
        "name": name,
        "workers": workers,
        "transport": draw(_sub(_values("transport"))),
        "runs": [[s if s != "a" else ab for s in r] for r in draw(_sub(shapes, 2))
                 for ab in ("a", "b")],
        "tools": draw(_sub(tools, 2)),
        "ends": draw(_sub(pools["ends"], 2)),
        "fault_budget": draw(_sub(budgets, 2)),
        "horizon": pools["horizon"],
    }
    if faults:
        prod["faults"] = faults
        sets = ["none", "singles"] if small else list(FAULT_SET_KINDS)
        sets = draw(_sub(sets, 3))
        if len(faults) < 2 and sets == ["pairs"]:  # one fault makes no pair: no member at all
            sets = ["singles"]
        prod["fault_sets"] = sets
    if "provider_error" in faults:
        pf = draw(_sub(pools["classes"], 2)) if draw(st.integers(0, 3)) else []
        if pf:  # none (one time in four): provider_error is never enabled (a scope lists at
            # least one)
            prod["provider_faults"] = pf
    if "store_error" in faults and draw(st.booleans()):
        prod["fault_ops"] = draw(_sub(pools["ops"], 2))
    return prod


def _rename(data: dict, rnd: random.Random) -> dict:
    """The same configuration under another name: runs reordered with new ids, the
    catalogue reordered, another description, ``provider_error`` named without a class
    (never enabled) or left implied by its classes."""
    d = copy.deepcopy(data)
    rnd.shuffle(d["runs"])
    for k, r in enumerate(d["runs"]):
        r["id"] = f"{rnd.choice('abcxyz')}{k}"
    rnd.shuffle(d["tools"])
    d["description"] = f"renamed {rnd.random()}"
    m = d["model"]
    if m.get("provider_faults") and "provider_error" in m["faults"] and rnd.random() < 0.5:
        m["faults"].remove("provider_error")  # implied by the classes
    elif not m.get("provider_faults") and rnd.random() < 0.5 and m["faults"]:
        m["faults"].append("provider_error")  # no class to fail with: never enabled
    rnd.shuffle(m["faults"])
    return d


def _mix_tools(data: dict, tool: dict) -> dict | None:
    """Two runs calling two different tools (the first one ``tool``); None for one run."""
    if len(data["runs"]) < 2 or data["tools"][0] == tool:
        return None
    d = copy.deepcopy(data)
    d["runs"][0]["plan"][0] = {"tools": [tool["name"]]}
    d["tools"].append(dict(tool))
    return d


@st.composite
def catalogue(draw: st.DrawFn) -> dict:
    """A scope's catalogue, shapes and principals, drawn from the dimension table
    (tests/config_space.py): one to three tools (every tool dimension drawn; a name no
    catalogue knows is no scope's), and the run shapes ``a`` (every run dimension drawn),
    ``b`` (``a``'s twin: another value of a drawn run dimension, where it matters: the
    table's context of it) and ``done`` (a run seeded completed), built by the table's
    builder; the principals they name."""
    n = draw(st.integers(1, 3))
    names = [v for v in _values("name") if v != D.UNKNOWN]
    tools = [space.level(draw, "tool", name=draw(st.sampled_from(names))) for _ in range(n)]
    field = draw(st.sampled_from(space.TWIN_FIELDS))
    a = space.run(draw, draw(st.integers(0, n - 1)))
    point = {"constants": D.base("constants"), "model": D.base("model"), "tools": tools,
             "runs": [a]}
    # the values drawn, where they matter (the table's contexts; a model dimension's is the
    # products' to draw), the twin's field's first
    ctx = D.dimension(field).context
    a |= space.at(ctx, "run")
    tools[a["tool"]] |= space.at(ctx, "tool")
    space.matter(draw, point, "run", 0)
    for k in range(n):
        space.matter(draw, point, "tool", k)
    done = D.base("run") | {"entry": "interactive", "row": COMPLETED, "tool": 0}
    point["runs"] += [space.twin(draw, a, field), done]
    data = space.build(point)
    shapes = {k: {f: v for f, v in r.items() if f not in PLAN}
              for k, r in zip(("a", "b", "done"), data["runs"], strict=True)}
    return {"tools": {f"t{k}": t for k, t in enumerate(data["tools"])}, "shapes": shapes,
            "principals": data.get("principals", {}), "built": data}


def scope_data(draw: st.DrawFn, prods: list[dict], cat: dict) -> dict:
    """A random scope's table over ``prods`` and catalogue ``cat``: the ends are every end
    of a plan the table declares."""
    ends = {D.label(v): {v[0]: v[1]} for v in _values("end")}
    return {"constants": CONSTANTS, "tools": cat["tools"], "shapes": cat["shapes"],
            "ends": ends, "product": prods, "principals": cat["principals"]}


@st.composite
def scopes(draw: st.DrawFn) -> tuple[list[Member], str]:
    """A random scope's members, before reduction, and a policy."""
    cat = draw(catalogue())

    def pool(values: list, least: int) -> list:
        return draw(st.lists(st.sampled_from(values), min_size=least, max_size=3, unique=True))

    pools = {"ends": pool([D.label(v) for v in _values("end")], 1),
             "horizon": pool([h for h in _values("horizon") if h and h <= 4], 1)[:1],
             "classes": pool(_values("provider_faults"), 2), "ops": pool(_values("fault_ops")[1:], 1)}
    prods = [draw(products(f"p{k}", list(RUN_SHAPES), list(cat["tools"]), pools))
             for k in range(draw(st.integers(1, 2)))]
    members = expand(scope_data(draw, prods, cat), "random", Path("."))
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    extra = []
    for m in members:
        if rnd.random() < 0.3:
            extra.append(Member(f"{m.name}~renamed", _rename(m.data, rnd), "renaming"))
        if rnd.random() < 0.3:
            mixed = _mix_tools(m.data, rnd.choice(list(cat["tools"].values())))
            if mixed is not None:
                extra.append(Member(f"{m.name}~mixed", mixed, "mixed"))
                extra.append(Member(f"{m.name}~mixed~renamed", _rename(mixed, rnd), "renaming"))
    members = members + extra
    rnd.shuffle(members)  # the first of equals is kept: any order must do
    return members[: MAX_MEMBERS + draw(st.integers(0, 8))], draw(st.sampled_from(POLICIES))


_RESULTS: dict[tuple[str, str], TaskResult] = {}


def _checked(m: Member, policy: str) -> TaskResult:
    """``m`` checked under ``policy``, cached by its exact table (not by its key)."""
    raw = json.dumps({k: v for k, v in m.data.items() if k != "description"}, sort_keys=True)
    r = _RESULTS.get((raw, policy))
    if r is None:
        r = _RESULTS[(raw, policy)] = check_member(m.name, m.data, policy)
        assert not r.truncated
    return TaskResult(m.name, policy, r.states, r.transitions, r.seconds, r.truncated,
                      r.violations)


def _lengths(r: TaskResult) -> dict[str, int]:
    return {n: v["length"] for n, v in r.violations.items()}


def _scope(members: list[Member]) -> Scope:
    return Scope("random", "", "", members, len(members), 0, 0, {})


def _assert_sound(members: list[Member], policy: str) -> None:
    kept, eq, sub = reduce_members(members)
    assert len(kept) + eq + sub == len(members)
    assert len({m.key for m in kept}) == len(kept)  # no two renamings kept
    results = {m.name: _checked(m, policy) for m in members}
    props = sorted({n for r in results.values() for n in r.violations} | {"exclusive_claim"})
    full = merge(_scope(members), [policy], props, results.values())
    red = merge(_scope(kept), [policy], props, [results[m.name] for m in kept])
    for n in props:
        a, b = full.verdicts[policy][n], red.verdicts[policy][n]
        assert (a.holds, a.length) == (b.holds, b.length), (
            f"{n}: unreduced {a.holds}/{a.length} ({a.member}), reduced {b.holds}/{b.length}")
    # member by member: each dropped one is matched by a kept one
    kept_names = {m.name for m in kept}
    by_key = {m.key: m for m in kept}
    for m in members:
        if m.name in kept_names:
            continue
        mine = _lengths(results[m.name])
        twin = by_key.get(m.key)
        if twin is not None:  # a renaming: the very same verdicts and lengths
            assert _lengths(results[twin.name]) == mine, (m.name, twin.name)
            continue
        bigs = [o for o in kept if subsumes(o.data, m.data)]
        assert bigs, f"{m.name} dropped, but no kept member subsumes it"
        for o in bigs:
            theirs = _lengths(results[o.name])
            for n, k in mine.items():
                assert n in theirs and theirs[n] <= k, (m.name, o.name, n, k, theirs.get(n))
    # renamings share verdicts: a key never covers two members with different ones
    seen: dict[str, dict[str, int]] = {}
    for m in members:
        got = seen.setdefault(m.key, _lengths(results[m.name]))
        assert got == _lengths(results[m.name]), m.name


# no shrinking: an example costs up to a second of checking, and a failing one is already
# small (its members are listed in the assertion)
_SETTINGS = dict(deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
                 derandomize=True,
                 suppress_health_check=list(HealthCheck))


@settings(max_examples=30, **_SETTINGS)
@given(scopes())
def test_reduced_scope_gives_the_unreduced_verdicts_and_lengths(case):
    _assert_sound(*case)


@pytest.mark.slow
@settings(max_examples=300, **{**_SETTINGS, "derandomize": False})
@given(scopes())
def test_reduced_scope_gives_the_unreduced_verdicts_and_lengths_large(case):
    _assert_sound(*case)


# -- the generator really spans the dimensions (else the property above proves little) -------
MODEL = ("workers", "transport", "fault", "budget", "provider_faults", "fault_ops", "horizon")


def test_random_scopes_reduce_in_every_dimension():
    """Over the examples the default budget draws, the reduction drops members for each of
    the reasons it knows: a renaming (run order, ids, catalogue order, workers on sync) and a
    subsumption (fewer fault kinds, a smaller budget, fewer provider classes); and the
    members vary every model dimension of spec/dimensions.py a product draws (``MODEL``:
    workers, transport, fault kinds, budget, provider classes, store statements, horizon;
    read back from the parsed members)."""
    seen: set[str] = set()
    reach = space.Reach()

    @settings(max_examples=100, **_SETTINGS)  # cheap: no search
    @given(scopes())
    def collect(case):
        members, _ = case
        for m in members:
            reach.add(m.data)
        kept, _eq, _sub = reduce_members(members)
        ks = {m.key for m in kept}
        for m in members:
            if m in kept:
                continue
            twin = next((k for k in kept if k.key == m.key), None)
            if twin is not None:
                md, td = m.data["model"], twin.data["model"]
                if [r["id"] for r in m.data["runs"]] != [r["id"] for r in twin.data["runs"]]:
                    seen.add("runs")
                if m.data["tools"] != twin.data["tools"]:
                    seen.add("tools")
                if md.get("workers") != td.get("workers"):
                    seen.add("workers")
                continue
            assert m.key not in ks
            for o in kept:
                if subsumes(o.data, m.data):
                    om, mm = o.data["model"], m.data["model"]
                    if om["fault_budget"] > mm["fault_budget"]:
                        seen.add("budget")
                    if set(om["faults"]) > set(mm["faults"]):
                        seen.add("faults")
                    if set(om.get("provider_faults", [])) > set(mm.get("provider_faults", [])):
                        seen.add("provider classes")

    collect()
    assert seen >= {"runs", "tools", "workers", "budget", "faults", "provider classes"}, seen
    want = {f"dimension {n}" for n in MODEL}
    assert want - reach.varied() == set(), sorted(want - reach.varied())


REACH_EXAMPLES = 300


def test_the_random_scopes_vary_every_field_of_a_run_a_tool_and_a_principal():
    """Over ``REACH_EXAMPLES`` catalogues of the random scopes (drawing is cheap: no search,
    no member), the run shapes vary every run dimension of spec/dimensions.py but the plan's
    (the scope format's plan is one round calling the product's tool, then its end:
    ``rounds``, ``calls`` and ``end`` are the products'; every end is in the scope's
    ``ends``), the tools every tool dimension, and the tables every key of a run's table but
    its id and plan and every key of a principal (read back from the built tables:
    ``config_space.Reach``); and the twins ``a`` and ``b`` differ in every key of a run's
    table a twin is drawn in (members that a reduction keyed on fewer fields would take
    for renamings)."""
    from failclosed.model.config import PRINCIPAL_KEYS, RUN_KEYS

    reach = space.Reach()
    twins: set[str] = set()

    @settings(max_examples=REACH_EXAMPLES, **_SETTINGS)
    @given(catalogue())
    def collect(cat):
        reach.add(cat["built"])
        a, b = cat["shapes"]["a"], cat["shapes"]["b"]
        twins.update(f for f in RUN_KEYS - PLAN if a.get(f) != b.get(f))

    collect()
    plan = {n for n in space.LEVEL["run"] if space.run_key(n) == "plan"}
    assert plan == {"rounds", "calls", "end"}
    want = ({f"dimension {n}" for n in (*space.LEVEL["run"], *space.LEVEL["tool"])
             if n not in plan}
            | {f"run.{f}" for f in RUN_KEYS - PLAN} | {f"principal.{f}" for f in PRINCIPAL_KEYS})
    assert want - reach.varied() == set(), sorted(want - reach.varied())
    keys = {space.run_key(f) for f in space.TWIN_FIELDS}
    assert twins >= keys, sorted(keys - twins)
