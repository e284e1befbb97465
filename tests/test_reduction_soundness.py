"""Soundness of the scope reduction (spec/scope.py), as a Hypothesis property over random
members in every dimension: budget, faults (kinds, provider classes, store statements),
workers, transport, runs and tools.

A random scope is generated (one or two products over random sub-lists of every axis), some
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

from failclosed.model.state import TRANSPORTS  # noqa: E402
from failclosed.model.steps import fault_kinds  # noqa: E402
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

CONSTANTS = {"LEASE_SECONDS": 1, "MAX_REQUEUES": 1, "REQUEUE_BACKOFF_MS": 1000,
             "REQUEUE_BACKOFF_CAP_MS": 2000}
TOOLS = {
    "read": {"name": "lookup_page"},
    "idem": {"name": "set_file_alternative_text", "effect": "idempotent_write"},
    "nonidem": {"name": "create_page_draft", "effect": "non_idempotent_write"},
    "remote": {"name": "remote_write", "effect": "non_idempotent_write", "remote": True,
               "server_flag": 0},
}
SHAPES = {
    "queued": {"entry": "queued", "decisions": ["approve"]},
    "interactive": {"entry": "interactive", "decisions": ["approve"]},
    # a run already completed: a second (third) run that costs no state, so the run order,
    # the run ids and identical runs are varied at the price of one-run members
    "done": {"entry": "interactive", "row": {"status": "completed"}},
}
ENDS = {
    "completed": {"final": "completed"},
    "not_retryable": {"fail": "auth"},
    "retryable": {"fail": "rateLimit"},
}
# one run; two different runs in both orders (a renaming of each other); two identical runs;
# a run on which other principals make requests (``asked``: drawn per example, RUNTIME 16.18)
RUN_SHAPES = [["queued"], ["asked"], ["interactive"], ["queued", "done"], ["done", "queued"],
              ["interactive", "done"], ["queued", "done", "done"]]
# every request kind, by a stranger and by a service account whose scopes are drawn
REQUEST_KINDS = ["approve", "deny", "input", "cancel", "status", "events"]
SCOPES = ["AGENT_CANCEL", "AGENT_APPROVE", "AGENT_READ"]
PROVIDER_CLASSES = ["rateLimit", "auth", "serverError"]
STORE_OPS = ["renew_lease", "claim_queued", "settle_completed"]  # a few statements store_error may hit
POLICIES = ["current", "proposed", "adr-111"]
MAX_MEMBERS = 24  # per example: keeps one example well under a second


def _sub(xs: list, max_size: int | None = None) -> st.SearchStrategy[list]:
    """A non-empty sub-list of ``xs``, in ``xs``'s order."""
    n = len(xs) if max_size is None else max_size
    return st.lists(st.sampled_from(xs), min_size=1, max_size=n, unique_by=json.dumps).map(
        lambda s: sorted(s, key=xs.index))


@st.composite
def products(draw: st.DrawFn, name: str, big: bool) -> dict:
    """One [[product]] over random sub-lists of every axis. Small (the default suite): with
    two workers, a budget of at most one and single faults (a second worker with two
    faults or a budget of two costs thousands of states)."""
    faults = draw(st.lists(st.sampled_from(fault_kinds()), max_size=3, unique=True))
    if draw(st.booleans()):  # a lapse: the faults under which a second worker matters
        faults = list(dict.fromkeys([*faults, draw(st.sampled_from(["pause", "slow_operation"]))]))
    workers = draw(st.sampled_from([[1], [2], [1, 2], [1, 2]]))
    small = not big and 2 in workers
    prod: dict = {
        "name": name,
        "workers": workers,
        "transport": draw(_sub(list(TRANSPORTS))),
        "runs": draw(_sub(RUN_SHAPES, 2)),
        "tools": draw(_sub(list(TOOLS), 2)),
        "ends": draw(_sub(list(ENDS), 2)),
        "fault_budget": draw(_sub([0, 1] if small else [0, 1, 2], 2)),
    }
    if faults:
        prod["faults"] = faults
        kinds = ["none", "singles"] if small else list(FAULT_SET_KINDS)
        sets = draw(_sub(kinds, 3))
        if len(faults) < 2 and sets == ["pairs"]:  # one fault makes no pair: no member at all
            sets = ["singles"]
        prod["fault_sets"] = sets
    if "provider_error" in faults:
        classes = draw(st.lists(st.sampled_from(PROVIDER_CLASSES), max_size=2, unique=True))
        if classes:  # none: provider_error is never enabled (a scope lists at least one)
            prod["provider_faults"] = classes
    if "store_error" in faults and draw(st.booleans()):
        prod["fault_ops"] = draw(_sub(STORE_OPS, 2))
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


def _mix_tools(data: dict, key: str) -> dict | None:
    """Two runs calling two different tools (the first one ``key``); None for one run."""
    if len(data["runs"]) < 2 or data["tools"][0] == TOOLS[key]:
        return None
    d = copy.deepcopy(data)
    d["runs"][0]["plan"][0] = {"tools": [TOOLS[key]["name"]]}
    d["tools"].append(dict(TOOLS[key]))
    return d


@st.composite
def requests(draw: st.DrawFn, big: bool = False) -> dict:
    """The shape ``asked``: a run of a drawn entry started by a drawn principal (RUNTIME 16.18.1:
    the owner, or a service account: be_user = 0) who approves, its configuration's four-eyes
    setting drawn, and one or two requests of other principals, every field drawn (who, which
    request, and for an events read the sequence after which; a queued entry, where workers
    act too, only under ``-m slow``: ``big``)."""
    out = []
    for _ in range(draw(st.integers(1, 2))):
        r = {"by": draw(st.sampled_from(["mallory", "bot", "owner", "anon"])),
             "request": draw(st.sampled_from(REQUEST_KINDS))}
        if r["request"] == "events":
            r["after_sequence"] = draw(st.integers(-1, 2))
        out.append(r)
    unique = list({(r["by"], r["request"]): r for r in out}.values())
    entries = ["queued", "interactive"] if big else ["interactive"]  # queued: workers too
    return {"entry": draw(st.sampled_from(entries)), "decisions": ["approve"],
            "owner": draw(st.sampled_from(["owner", "bot"])),
            "require_second_approver": draw(st.booleans()), "requests": unique}


def scope_data(draw: st.DrawFn, prods: list[dict], big: bool = False) -> dict:
    """A random scope's table over ``prods``: the catalogue, the shapes (``asked`` drawn),
    the ends and the principals (the service account's scopes drawn)."""
    principals = {"owner": {"kind": draw(st.sampled_from(["user", "admin"])),
                            "permitted": {t["name"]: draw(st.booleans()) for t in TOOLS.values()}},
                  "mallory": {"kind": "user",
                              "grants": draw(st.lists(st.sampled_from(SCOPES), unique=True))},
                  "bot": {"kind": "service_account",
                          "scopes": draw(st.lists(st.sampled_from(SCOPES), unique=True))},
                  "anon": {"kind": "anonymous"}}
    return {"constants": CONSTANTS, "tools": TOOLS,
            "shapes": {**SHAPES, "asked": draw(requests(big))}, "ends": ENDS,
            "product": prods, "principals": principals}


@st.composite
def scopes(draw: st.DrawFn, big: bool = False) -> tuple[list[Member], str]:
    """A random scope's members, before reduction, and a policy."""
    prods = [draw(products(f"p{k}", big)) for k in range(draw(st.integers(1, 2)))]
    members = expand(scope_data(draw, prods, big), "random", Path("."))
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    extra = []
    for m in members:
        if rnd.random() < 0.3:
            extra.append(Member(f"{m.name}~renamed", _rename(m.data, rnd), "renaming"))
        if rnd.random() < 0.3:
            mixed = _mix_tools(m.data, rnd.choice(list(TOOLS)))
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
@given(scopes(big=True))
def test_reduced_scope_gives_the_unreduced_verdicts_and_lengths_large(case):
    _assert_sound(*case)


# -- the generator really spans the dimensions (else the property above proves little) -------
def _asked(m: Member) -> set[str]:
    """The kinds of request ``m``'s runs make, who makes them, and whether it declares a
    service account with scopes."""
    out = set()
    for r in m.data["runs"]:
        for q in r.get("requests", []):
            out |= {f"request {q['request']}", f"by {q['by']}"}
    if any(p.get("scopes") for p in m.data.get("principals", {}).values()):
        out.add("scoped service account")
    return out


def test_random_scopes_reduce_in_every_dimension():
    """Over the examples the default budget draws, the reduction drops members for each of
    the reasons it knows: a renaming (run order, ids, catalogue order, workers on sync) and a
    subsumption (fewer fault kinds, a smaller budget, fewer provider classes); and its
    members carry every kind of request, by a service account with scopes among others."""
    seen: set[str] = set()

    @settings(max_examples=60, **_SETTINGS)  # cheap: no search
    @given(scopes())
    def collect(case):
        members, _ = case
        for m in members:
            seen.update(_asked(m))
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
    assert seen >= {"runs", "tools", "workers", "budget", "faults", "scoped service account",
                    "by owner", "by mallory", "by bot", "request approve"}, seen


def test_the_request_strategy_draws_every_kind_and_field():
    """The requests the random scopes' ``asked`` run makes reach every kind, the events
    read's field, both owners and both four-eyes settings (a property of the generator: the
    scopes above draw one such run per example, and which kinds their examples hold depends
    on the hash seed)."""
    kinds: set[str] = set()

    @settings(max_examples=100, **_SETTINGS)
    @given(requests())
    def asked(shape):
        for q in shape["requests"]:
            kinds.add(q["request"])
            if "after_sequence" in q:
                kinds.add("after_sequence")
        kinds.add(f"owner {shape['owner']}")
        kinds.add(f"four-eyes {shape['require_second_approver']}")

    asked()
    assert kinds >= {*REQUEST_KINDS, "after_sequence", "owner owner", "owner bot",
                     "four-eyes True", "four-eyes False"}, kinds
