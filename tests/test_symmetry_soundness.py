"""Soundness of the checker's state abstraction (spec/symmetry.py), as a Hypothesis property
over random configurations: interchangeable workers, identical runs, random faults and
budgets, every transport, the operator's cancel commands, with and without a horizon (the
time shift), under a random policy.

* The symmetric search gives the plain search's verdicts and shortest counterexample
  lengths, for every safety and liveness property.
* The symmetric search stores exactly one world per orbit of the plain search's reachable
  worlds (the key is canonical and the group is a symmetry of the model).
* The canonical key never merges two reachable worlds on which a safety property differs.
* The log order (spec/symmetry.py): random reachable worlds of two runs and the same worlds
  with their logs interleaved afresh have one key, the same safety verdicts, goals and
  successors' keys (the abstraction is a bisimulation); the check catches the abstraction
  made unsound (a grouping that forgets each run's own order); every member of ``quick``
  (``standard``: ``-m slow``) has the same verdicts and shortest lengths with and without it.

The default suite runs a small budget; ``-m slow`` runs a larger one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.model.config import initial_world, parse_config  # noqa: E402
from failclosed.model.runtime import successors  # noqa: E402
from failclosed.model.state import TRANSPORTS  # noqa: E402
from failclosed.model.steps import fault_kinds  # noqa: E402
from failclosed.spec import engine  # noqa: E402
from failclosed.spec.checker import ConfigPart, check  # noqa: E402
from failclosed.spec.properties import SAFETY  # noqa: E402
from failclosed.spec.symmetry import (  # noqa: E402
    group_logs,
    make_canonical,
    reductions_of,
    shift_time,
)
from failclosed.spec.vocab import Reduction  # noqa: E402

from tests import config_space as space  # noqa: E402

CONSTANTS = {"LEASE_SECONDS": 1, "MAX_REQUEUES": 1, "REQUEUE_BACKOFF_MS": 1000,
             "REQUEUE_BACKOFF_CAP_MS": 2000}
TOOLS = space.TOOLS
# a run that is already completed costs no state: identical ones make run symmetry cheap
DONE = {"entry": "interactive", "row": {"status": "completed"}}
POLICIES = ["current", "proposed", "adr-111", "adr-102"]
MAX_STATES = 6000
# how a second live run relates to the first: identical up to its id (run symmetry), a twin
# (the same entry and plan, one other field different: no symmetry may merge the two), or
# drawn on its own
SECOND = ["same", "twin", "other"]


@st.composite
def configs(draw: st.DrawFn, twin: str | None = None) -> tuple[dict, str]:
    """A random configuration: every field of a run, of its plan and of the principals drawn
    from tests/config_space.py; workers, faults, budget, horizon, transport, the operator's
    cancels, the run order and the policy drawn here. ``twin``: two live runs with the same
    entry and plan that differ in that field (the first run live: no seeded row)."""
    tool = draw(st.sampled_from(TOOLS))
    live = 2 if twin else draw(st.integers(1, 2))  # runs that do something
    workers = draw(st.integers(1, 2)) if live == 1 else 1
    done = draw(st.integers(0, 2 if live == 1 else 1))
    ctx = space.TWIN_CONTEXT.get(twin or "", {})
    faults = ctx["faults"] if "faults" in ctx else draw(st.lists(
        st.sampled_from(fault_kinds()), max_size=1 if live == 2 else 2, unique=True))
    budget = draw(st.integers(1 if "faults" in ctx else 0, 1 if live == 2 else 2)) if faults else 0
    horizon = 3 if twin else draw(st.sampled_from([None, 3, 4]))  # None: the plain search
    # never ends when the clock moves (the example is then skipped)
    transport = draw(st.sampled_from(TRANSPORTS))
    ids = draw(st.permutations(space.IDS))
    fixed = {"row": None, **ctx.get("run", {})} if twin else {}
    runs = [space.run(draw, ids[0], draw(st.sampled_from([tool["name"], None])), **fixed)]
    if live == 2:
        how = "twin" if twin else draw(st.sampled_from(SECOND))
        if how == "same":
            runs.append({**runs[0], "id": ids[1]})
        elif how == "twin":
            runs.append(space.twin(draw, runs[0], ids[1], twin)[0])
        else:
            runs.append(space.run(draw, ids[1], tool["name"]))
    runs += [{"id": f"d{k}", **DONE} for k in range(done)]
    # the operator's cancel command: a run's id (which breaks that run's symmetry), no id,
    # an unknown id
    cancels = [] if twin else draw(st.lists(
        st.sampled_from([r["id"] for r in runs] + ["", "gone"]), max_size=2))
    model: dict = {"workers": workers, "faults": faults, "fault_budget": budget,
                   "transport": transport, "operator_cancels": cancels}
    if "provider_error" in faults:
        model["provider_faults"] = ["rateLimit"]
    if horizon is not None:
        model["horizon"] = horizon
    order = draw(st.permutations(range(len(runs))))
    data = {"constants": CONSTANTS, "model": model, "tools": [dict(t) for t in TOOLS],
            "runs": [runs[i] for i in order], "principals": space.principals(draw)}
    return data, draw(st.sampled_from(POLICIES))


# principals and their requests (RUNTIME 16.18): a stranger, a service account that may read
PRINCIPALS = {"owner": {"kind": "user"}, "mallory": {"kind": "user"},
              "bot": {"kind": "service_account", "scopes": ["AGENT_READ"]}}
REQUESTS = [{"by": "mallory", "request": "approve"}, {"by": "mallory", "request": "cancel"},
            {"by": "bot", "request": "status"}, {"by": "bot", "request": "events"},
            {"by": "owner", "request": "deny"}]

@st.composite
def classic_configs(draw: st.DrawFn) -> tuple[dict, str]:
    """The generator before issue 40 (live runs identical or differing in their plan, no
    drawn cap, observer, cancels, owner or seeded row): the worlds the log-order tests below
    interleave are drawn from it (docs/MUTATION.md)."""
    tool = draw(st.sampled_from(TOOLS))
    end = draw(st.sampled_from([{"final": "completed"}, {"fail": "auth"}]))
    entry = draw(st.sampled_from(["queued", "interactive"]))
    live = draw(st.integers(1, 2))  # runs that do something (identical when two)
    workers = draw(st.integers(1, 2)) if live == 1 else 1
    done = draw(st.integers(0, 2))
    faults = draw(st.lists(st.sampled_from(fault_kinds()), max_size=1 if live == 2 else 2,
                           unique=True))
    budget = draw(st.integers(0, 1 if live == 2 else 2)) if faults else 0
    horizon = draw(st.sampled_from([None, 3, 4]))
    transport = draw(st.sampled_from(TRANSPORTS))
    requests = draw(st.lists(st.sampled_from(REQUESTS), max_size=2 if live == 1 else 1,
                             unique_by=lambda r: (r["by"], r["request"])))
    runs = [{"id": f"r{k}", "entry": entry, "decisions": ["approve"],
             "plan": [{"tools": [tool["name"]]}, dict(end)]} for k in range(live)]
    if live == 2 and draw(st.booleans()):  # two live runs that differ: no run symmetry
        runs[1]["plan"] = [{"final": "completed"}]
    for r in runs:
        if requests:
            r["requests"] = [dict(x) for x in requests]
    runs += [{"id": f"d{k}", **DONE} for k in range(done)]
    # the operator's cancel command: a run's id (which breaks that run's symmetry), no id,
    # an unknown id
    cancels = draw(st.lists(st.sampled_from([r["id"] for r in runs] + ["", "gone"]),
                            max_size=2))
    model: dict = {"workers": workers, "faults": faults, "fault_budget": budget,
                   "transport": transport, "operator_cancels": cancels}
    if "provider_error" in faults:
        model["provider_faults"] = ["rateLimit"]
    if horizon is not None:
        model["horizon"] = horizon
    order = draw(st.permutations(range(len(runs))))
    data = {"constants": CONSTANTS, "model": model, "tools": [dict(tool)],
            "runs": [runs[i] for i in order]}
    if requests:
        data["principals"] = PRINCIPALS
    return data, draw(st.sampled_from(POLICIES))


def _verdicts(data: dict, policy: str, symmetry: bool) -> tuple[dict, object]:
    """{property: (holds, shortest length)} and the check's result: under every reduction
    (``symmetry``), or under none but the time abstraction (no symmetry, no log order)."""
    res = check(policy, ConfigPart("random", "", data), None, witnesses=False, coverage=False,
                symmetry=symmetry, logs=symmetry, max_states=MAX_STATES)
    return {n: (r.holds, r.trace_length) for n, r in res.properties.items()}, res


def _assert_sound(data: dict, policy: str, futures: bool = False) -> None:
    spec, budget = parse_config(data, policy)
    w0 = initial_world(spec, budget)
    flat = engine.explore([w0], successors, invariants={}, max_states=MAX_STATES, keep_worlds=True)
    if flat.stats.truncated:
        return  # too large for the default budget: nothing is claimed about it
    canon = make_canonical(spec)
    if canon is not None:
        sym = engine.explore([w0], successors, invariants={}, canonical=canon, keep_worlds=True)
        # the orbits the symmetric search reaches are exactly those of the plain search
        assert {canon(w) for w in sym.worlds} == {canon(w) for w in flat.worlds}
        assert len(sym.worlds) == len({canon(w) for w in flat.worlds})  # one world per orbit
        # worlds of one key agree on every safety property
        verdict: dict = {}
        merged: dict = {}
        for w in flat.worlds:
            v = tuple(p.check(w) for p in SAFETY.values())
            assert verdict.setdefault(canon(w), v) == v, "the key merges different verdicts"
            merged.setdefault(canon(w), []).append(w)
        # ``futures``: and the same futures (the key is a bisimulation): the successors of
        # worlds of one key have the same keys, which a key merging runs that are not
        # interchangeable breaks even where every property is symmetric in the runs
        for ws in merged.values() if futures else ():
            assert len({frozenset(canon(x) for _, x in successors(w)) for w in ws}) == 1, (
                "the key merges worlds with different futures")
    a, ra = _verdicts(data, policy, True)
    b, rb = _verdicts(data, policy, False)
    assert a == b
    assert ra.states <= rb.states


# no shrinking: an example costs up to a second of checking, and a failing one is already
# small (its members are listed in the assertion)
_SETTINGS = dict(deadline=None, database=None, phases=[Phase.explicit, Phase.generate],
                 suppress_health_check=list(HealthCheck))


@settings(max_examples=40, derandomize=True, **_SETTINGS)
@given(configs())
def test_symmetric_search_gives_the_plain_verdicts_and_lengths(case):
    _assert_sound(*case)


@pytest.mark.slow
@settings(max_examples=400, **_SETTINGS)
@given(configs())
def test_symmetric_search_gives_the_plain_verdicts_and_lengths_large(case):
    _assert_sound(*case)


@pytest.mark.parametrize("field", space.TWIN_FIELDS)
def test_runs_with_one_entry_and_plan_that_differ_elsewhere_are_kept_apart(field):
    """Two runs that share their entry and plan but differ in ``field`` (the cancels a caller
    may issue, the decisions, the owner, the requests, the observer, the cap, a seeded row)
    are not interchangeable: a key that merged them would halve the states and lengthen the
    shortest counterexamples; the symmetric search must give the plain one's verdicts and
    lengths, one world per orbit."""

    @settings(max_examples=6, derandomize=True, **_SETTINGS)
    @given(configs(twin=field))
    def sound(case):
        _assert_sound(*case, futures=True)

    sound()


def test_random_configurations_have_nontrivial_groups():
    """The generator reaches worker symmetry, run symmetry and the time shift (else the
    property above proves little)."""
    seen = set()

    @settings(max_examples=40, derandomize=True, **_SETTINGS)
    @given(configs())
    def collect(case):
        data, policy = case
        spec, _ = parse_config(data, policy)
        canon = make_canonical(spec)
        size = getattr(canon, "group_size", 1)
        if size > 1 and len(spec.workers) > 1:
            seen.add("workers")
        if size > 1 and len(spec.workers) == 1:
            seen.add("runs")
        if spec.horizon is None:
            seen.add("time")
            assert canon is not None
        if Reduction.SYMMETRY not in reductions_of(canon):
            seen.add("time only")
        if len(spec.runs) > 1 and Reduction.LOG_ORDER in reductions_of(canon):
            seen.add("logs")
            if size == 1:
                seen.add("logs only")

    collect()
    assert seen >= {"workers", "runs", "time", "time only", "logs", "logs only"}, seen


# -- the time shift (no horizon: the plain search never ends, so it is checked world by world)
def _shifted_worlds(data: dict, policy: str) -> list:
    spec, budget = parse_config(data, policy)
    w0 = initial_world(spec, budget)
    ex = engine.explore([w0], successors, invariants={}, canonical=shift_time, max_states=400,
                        keep_worlds=True)
    return ex.worlds


def _instants(w) -> tuple:
    """Every instant of ``w`` relative to its clock (0, "no lease", kept as such)."""
    rows = tuple(None if r is None else (r.lease_expires - w.clock if r.lease_expires else 0,
                                         # proposal P6's dispatch deadline, 0 = none
                                         r.dispatch_deadline - w.clock if r.dispatch_deadline else 0)
                 for r in w.rows)
    return (rows, tuple(m.not_before - w.clock for m in w.messages),
            None if w.reaper("reaper") is None else w.reaper("reaper").now - w.clock)


def _assert_shift_sound(data: dict, policy: str) -> None:
    data = {**data, "model": {k: v for k, v in data["model"].items() if k != "horizon"}}
    worlds = _shifted_worlds(data, policy)
    moved = [w for w in worlds if shift_time(w).clock < w.clock]
    for w in moved[:100] + [w for w in worlds if w not in moved][:30]:
        s = shift_time(w)
        assert _instants(s) == _instants(w)  # every difference kept, "no lease" kept
        times = [s.clock, *(m.not_before for m in s.messages),
                 *(r.lease_expires for r in s.rows if r is not None and r.lease_expires > 0),
                 *(r.dispatch_deadline for r in s.rows if r is not None and r.dispatch_deadline > 0),
                 # a tick's now: under P6 its overdue row's deadline has moved past it (T15)
                 *(t.now for t in s.reapers)]
        if s.clock < w.clock:
            assert min(times) == 1  # as early as it goes, every instant kept positive
        assert shift_time(s) == s
        assert [p.check(w) for p in SAFETY.values()] == [p.check(s) for p in SAFETY.values()]
        # the same futures, moved in time: successors match up to the shift
        a = sorted((t.name, t.actor, repr(shift_time(x))) for t, x in successors(w))
        b = sorted((t.name, t.actor, repr(shift_time(x))) for t, x in successors(s))
        assert a == b


@settings(max_examples=15, derandomize=True, **_SETTINGS)
@given(configs())
def test_the_time_shift_keeps_verdicts_and_futures(case):
    _assert_shift_sound(*case)


def test_the_time_shift_moves_worlds():
    data = {"constants": CONSTANTS, "model": {"workers": 1, "faults": ["pause"], "fault_budget": 1},
            "tools": [TOOLS[2]], "runs": [{"id": "r0", "entry": "queued", "decisions": ["approve"],
                                            "plan": [{"tools": ["remote_write"]},
                                                     {"final": "completed"}]}]}
    worlds = _shifted_worlds(data, "current")
    moved = [w for w in worlds if shift_time(w).clock < w.clock]
    assert moved, "no world was shifted: the property above would prove nothing"
    leased = [w for w in moved if any(r is not None and r.lease_expires > 0 for r in w.rows)]
    assert leased
    _assert_shift_sound(data, "current")


def test_without_a_horizon_the_time_shift_is_the_key_with_symmetry_off_too():
    # no horizon: the clock grows without bound, so even the search without symmetry must
    # merge worlds that differ only by a shift of every instant (else it never ends)
    data = {"constants": CONSTANTS, "model": {"workers": 1, "faults": ["pause"], "fault_budget": 1},
            "tools": [TOOLS[2]], "runs": [{"id": "r0", "entry": "queued", "decisions": ["approve"],
                                            "plan": [{"tools": ["remote_write"]},
                                                     {"final": "completed"}]}]}
    spec, _ = parse_config(data, "current")
    moved = [w for w in _shifted_worlds(data, "current") if shift_time(w).clock < w.clock]
    assert moved
    for symmetry in (True, False):
        key = make_canonical(spec, symmetry)
        assert key is not None
        for w in moved[:20]:
            assert key(w) == key(shift_time(w)), symmetry


def test_a_symmetric_key_compares_its_content_not_only_its_hash():
    # two different worlds whose keys hash alike (a collision) must stay two states
    from failclosed.spec.symmetry import _Key

    a, b = _Key(("x", 1), 7), _Key(("y", 1), 7)
    assert a != b and not (a == b)
    assert a == _Key(("x", 1), 7)
    assert len({a, b}) == 2


# -- what the time shift and the log order tests share ------------------------------------
import json  # noqa: E402
from functools import lru_cache  # noqa: E402

from failclosed.model import state  # noqa: E402
from failclosed.model.records import replace  # noqa: E402
from failclosed.model.state import INSTANTS, Instant, instants  # noqa: E402
from failclosed.spec.properties import LIVENESS  # noqa: E402


@lru_cache(maxsize=64)
def _reachable(text: str, policy: str, most: int = 300) -> tuple:
    """Up to ``most`` reachable worlds of a configuration (searched under every
    reduction)."""
    spec, budget = parse_config(json.loads(text), policy)
    ex = engine.explore([initial_world(spec, budget)], successors, invariants={},
                        canonical=make_canonical(spec), max_states=most, keep_worlds=True)
    return tuple(ex.worlds)


def _future(w, key) -> set:
    """What the key may not lose of ``w``: its successors, by transition (the instants in
    its arguments left out: they are absolute) and successor key."""
    return {(t.name, t.actor, t.fault, key(x)) for t, x in successors(w)}


def _assert_bisimilar(a, b, key) -> None:
    """Worlds of one key agree on every safety property and liveness goal, and their
    successors have the same keys (``spec.engine.explore``'s contract for ``canonical``)."""
    assert key(a) == key(b)
    assert [p.check(a) for p in SAFETY.values()] == [p.check(b) for p in SAFETY.values()]
    assert [lp.goal(a) for lp in LIVENESS.values()] == [lp.goal(b) for lp in LIVENESS.values()]
    assert _future(a, key) == _future(b, key)


def _unsound_pairs(key, worlds) -> int:
    """How many worlds differ in their futures from their representative under ``key``."""
    bad = 0
    for w in worlds:
        try:
            _assert_bisimilar(w, key(w), key)
        except AssertionError:
            bad += 1
    return bad


def test_the_instants_are_read_from_their_declaration(monkeypatch):
    """Every time abstraction reads the declared instants and nothing else: declaring one
    more field (as issue 28's dispatch_deadline will be) is all it takes."""
    w = _reachable(json.dumps({"constants": CONSTANTS, "model": {"workers": 1},
                               "tools": [TOOLS[0]],
                               "runs": [{"id": "r0", "entry": "queued",
                                         "plan": [{"final": "completed"}]}]}), "current")[-1]
    w = replace(w, clock=50, rows=tuple(replace(r, lease_expires=49, requeue_count=7)
                                        for r in w.rows))
    assert sorted(instants(w)) == sorted([50] + [49] * len(w.rows) + [m.not_before
                                                                       for m in w.messages])
    more = (*INSTANTS, Instant(state.Row, "requeue_count", none=0, at="rows"))
    monkeypatch.setattr(state, "INSTANTS", more)
    plan = state._instant_plan()
    assert sorted(state.instants(w, plan)) == sorted(instants(w) + [7] * len(w.rows))
    moved = state.map_instants(w, lambda t: t - 5, plan)
    assert all(r.requeue_count == 2 and r.lease_expires == 44 for r in moved.rows)
    assert moved.clock == 45
    monkeypatch.setattr(state, "INSTANTS", (*INSTANTS, Instant(state.Row, "no_such_field")))
    with pytest.raises(TypeError, match="no field 'no_such_field'"):
        state._instant_plan()
    monkeypatch.setattr(state, "INSTANTS", (*INSTANTS, Instant(state.Row, "requeue_count")))
    with pytest.raises(TypeError, match="is not a World field"):
        state._instant_plan()


def _verdicts_of(m, policy: str, **switches: bool) -> tuple[dict, int]:
    from failclosed.spec.scope import check_member

    r = check_member(m.name, m.data, policy, **switches)
    assert not r.truncated
    return {n: v["length"] for n, v in r.violations.items()}, r.states


def _assert_differential(scope: str, policies: tuple[str, ...], without: str) -> None:
    """Every member of ``scope`` under each policy: the default search and the one with the
    reduction ``without`` (check_member's switch) off give the same verdicts and lengths,
    and the default stores no more states."""
    from failclosed.spec.scope import load_scope

    for m in load_scope(scope).members:
        for policy in policies:
            (a, sa), (b, sb) = _verdicts_of(m, policy), _verdicts_of(m, policy, **{without: False})
            assert a == b, (m.name, policy)
            assert sa <= sb, (m.name, policy)


# -- the log order -------------------------------------------------------------------------
def _by_key(w, log) -> dict:
    """{key: that key's entries of ``log`` in order}."""
    out: dict = {}
    for x in getattr(w, log.field):
        out.setdefault(getattr(x, log.key), []).append(x)
    return out


def _mixed(w) -> bool:
    """A log of ``w`` holds the entries of two keys."""
    return any(len(_by_key(w, log)) > 1 for log in state.LOGS)


@st.composite
def interleaved(draw: st.DrawFn):
    """(w, v): a reachable world of a random configuration with two live runs (a world whose
    logs hold both runs' entries where there is one, the rarer logs drawn as often: a world
    whose ledger holds two runs' entries a third of the time it has one) and the same world
    with every log declared in ``model.state.LOGS`` interleaved afresh: a drawn order of its
    entries that keeps each key's own order (one log-order class, two worlds)."""
    data, policy = draw(classic_configs())
    worlds = _reachable(json.dumps(data, sort_keys=True), policy, 2000)
    logs = {log.field: log for log in state.LOGS}
    want = draw(st.sampled_from(["any", "events", "ledger"]))
    mixed = [x for x in worlds if _mixed(x) if want == "any" or len(_by_key(x, logs[want])) > 1]
    w = draw(st.sampled_from(mixed or [x for x in worlds if _mixed(x)] or list(worlds)))
    ch = {}
    for log in state.LOGS:
        groups = _by_key(w, log)
        order = draw(st.permutations([k for k, xs in groups.items() for _ in xs]))
        queues = {k: iter(xs) for k, xs in groups.items()}
        ch[log.field] = tuple(next(queues[k]) for k in order)
    return w, replace(w, **ch)


@settings(max_examples=60, derandomize=True, **_SETTINGS)
@given(interleaved())
def test_the_log_order_is_a_bisimulation_on_random_worlds(pair):
    w, v = pair
    _assert_bisimilar(w, v, make_canonical(w.config))
    _assert_bisimilar(w, v, make_canonical(w.config, symmetry=False))
    _assert_bisimilar(w, group_logs(w), make_canonical(w.config, symmetry=False))


@pytest.mark.slow
@settings(max_examples=600, **_SETTINGS)
@given(interleaved())
def test_the_log_order_is_a_bisimulation_on_random_worlds_large(pair):
    w, v = pair
    _assert_bisimilar(w, v, make_canonical(w.config))


def test_the_random_worlds_interleave_every_log_of_runs():
    """The generator draws worlds whose events, ledger and outcomes hold two runs' entries
    and moves them (else the property above proves little)."""
    seen: set[str] = set()

    @settings(max_examples=400, derandomize=True, **_SETTINGS)
    @given(interleaved())
    def collect(pair):
        w, v = pair
        for log in state.LOGS:
            if len(_by_key(w, log)) > 1:
                seen.add(log.field)
                if getattr(w, log.field) != getattr(v, log.field):
                    seen.add(f"{log.field} moved")

    collect()
    want = {f"{f}{m}" for f in ("events", "ledger", "outcomes") for m in ("", " moved")}
    assert want <= seen, want - seen


def _two_runs(policy: str) -> list:
    """The reachable worlds of two different queued runs, one writing (a non-idempotent
    remote write that a crash may repeat), under ``policy``, up to 3,000."""
    data = {"constants": CONSTANTS,
            "model": {"workers": 1, "faults": ["crash"], "fault_budget": 1},
            "tools": [TOOLS[2]],
            "runs": [{"id": "r0", "entry": "queued", "decisions": ["approve"],
                      "plan": [{"tools": ["remote_write"]}, {"final": "completed"}]},
                     {"id": "r1", "entry": "queued", "plan": [{"final": "completed"}]}]}
    spec, budget = parse_config(data, policy)
    ex = engine.explore([initial_world(spec, budget)], successors, invariants={},
                        canonical=make_canonical(spec, logs=False), max_states=3000,
                        keep_worlds=True)
    return list(ex.worlds)


def test_the_bisimulation_check_catches_an_unsound_log_order(monkeypatch):
    """Grouping a log by a key that is not its runs' (the events by kind: each run's own
    order forgotten too) merges worlds with different verdicts and futures; the check above
    finds them on reachable worlds where the declared grouping passes. And the reduction
    reads the declaration: one line there is all a new log takes."""
    worlds = _two_runs("current")
    assert sum(_mixed(w) for w in worlds) > 100
    spec = worlds[0].config
    # without symmetry the key is the representative world (the logs grouped)
    assert _unsound_pairs(make_canonical(spec, symmetry=False), worlds) == 0
    unsound = (state.Log("events", "kind"), *state.LOGS[1:])
    monkeypatch.setattr(state, "LOGS", unsound)
    assert _unsound_pairs(make_canonical(spec, symmetry=False), worlds) > 0


def test_the_log_order_merges_worlds_and_keeps_each_runs_order():
    worlds = _two_runs("current")
    spec = worlds[0].config
    plain = make_canonical(spec, logs=False)
    grouped = make_canonical(spec)
    assert Reduction.LOG_ORDER in reductions_of(grouped)
    assert Reduction.LOG_ORDER not in reductions_of(plain)
    assert len({grouped(w) for w in worlds}) < len({plain(w) for w in worlds})
    for w in worlds:
        g = group_logs(w)
        assert group_logs(g) == g  # a representative
        for log in state.LOGS:
            assert _by_key(g, log) == _by_key(w, log)  # each key's own order kept
            keys = [getattr(x, log.key) for x in getattr(g, log.field)]
            assert keys == sorted(keys)


def test_every_quick_member_has_the_same_verdicts_with_and_without_the_log_order():
    _assert_differential("quick", ("current", "proposed", "adr-104"), without="logs")


@pytest.mark.slow
def test_every_standard_member_has_the_same_verdicts_with_and_without_the_log_order():
    _assert_differential("standard", ("current", "proposed"), without="logs")


def test_the_generator_varies_every_field_of_a_run_a_plan_and_a_principal():
    """Over the examples the tests above draw, every field of a run (model.config's
    RUN_KEYS), every kind of a plan's answer and every field of a principal (PRINCIPAL_KEYS)
    takes at least two values, and two runs with one entry and plan differ in each field
    the twins are drawn in (cancels, cap, decisions, observer, owner, requests, row)."""
    from failclosed.model.config import PRINCIPAL_KEYS, RUN_KEYS

    reach = space.Reach()

    @settings(max_examples=40, derandomize=True, **_SETTINGS)  # as the property above
    @given(configs())
    def drawn(case):
        reach.add(case[0])

    drawn()
    for field in space.TWIN_FIELDS:
        settings(max_examples=6, derandomize=True, **_SETTINGS)(
            given(configs(twin=field))(lambda case: reach.add(case[0])))()
    want = ({f"run.{f}" for f in RUN_KEYS} | {f"answer.{k}" for k in space.ANSWERS}
            | {f"principal.{f}" for f in PRINCIPAL_KEYS})
    assert want - reach.varied() == set(), sorted(want - reach.varied())
    assert reach.twins >= {"cancels", "cap", "decisions", "observer", "owner", "requests",
                           "row"}, reach.twins
