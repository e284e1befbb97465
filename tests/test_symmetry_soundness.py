"""Soundness of the checker's state abstraction (spec/symmetry.py), as a Hypothesis property
over random configurations: interchangeable workers, identical runs, random faults and
budgets, every transport, the operator's cancel commands, with and without a horizon (the
time shift), under a random policy.

* The symmetric search gives the plain search's verdicts and shortest counterexample
  lengths, for every safety and liveness property.
* The symmetric search stores exactly one world per orbit of the plain search's reachable
  worlds (the key is canonical and the group is a symmetry of the model).
* The canonical key never merges two reachable worlds on which a safety property differs.

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
from failclosed.spec.symmetry import make_canonical, shift_time  # noqa: E402

CONSTANTS = {"LEASE_SECONDS": 1, "MAX_REQUEUES": 1, "REQUEUE_BACKOFF_MS": 1000,
             "REQUEUE_BACKOFF_CAP_MS": 2000}
TOOLS = [
    {"name": "lookup_page"},
    {"name": "create_page_draft", "effect": "non_idempotent_write"},
    {"name": "remote_write", "effect": "non_idempotent_write", "remote": True, "server_flag": 0},
]
# a run that is already completed costs no state: identical ones make run symmetry cheap
DONE = {"entry": "interactive", "row": {"status": "completed"}}
POLICIES = ["current", "proposed", "adr-111", "adr-102"]
# principals and their requests (RUNTIME 16.18): a stranger, a service account that may read
PRINCIPALS = {"owner": {"kind": "user"}, "mallory": {"kind": "user"},
              "bot": {"kind": "service_account", "scopes": ["AGENT_STATUS"]}}
REQUESTS = [{"by": "mallory", "request": "approve"}, {"by": "mallory", "request": "cancel"},
            {"by": "bot", "request": "status"}, {"by": "bot", "request": "events", "limit": 1},
            {"by": "owner", "request": "deny"}]
MAX_STATES = 6000


@st.composite
def configs(draw: st.DrawFn) -> tuple[dict, str]:
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
    """{property: (holds, shortest length)} and the check's result."""
    res = check(policy, ConfigPart("random", "", data), None, witnesses=False, coverage=False,
                symmetry=symmetry, max_states=MAX_STATES)
    return {n: (r.holds, r.trace_length) for n, r in res.properties.items()}, res


def _assert_sound(data: dict, policy: str) -> None:
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
        for w in flat.worlds:
            v = tuple(p.check(w) for p in SAFETY.values())
            assert verdict.setdefault(canon(w), v) == v, "the key merges different verdicts"
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
        if canon is shift_time:
            seen.add("time only")

    collect()
    assert seen >= {"workers", "runs", "time", "time only"}, seen


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
