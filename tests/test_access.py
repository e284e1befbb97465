"""Who may do what (RUNTIME 16.18, docs/RUNTIME.md): principals as data, the access check in
the runtime's order (AccessDenied before any store change), the reads that change nothing but
what a principal has seen, and the four access properties, each killed by its mutant."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from failclosed.model import ConfigError, apply, enabled, load_world
from failclosed.model.state import STATUS_VIEW, SUSPENDED_FIELDS, World
from failclosed.model.transition import Transition
from failclosed.model.vocab import OutcomeName, Request
from failclosed.spec.properties import SAFETY
from failclosed.spec.vocab import PropertyName as P

TOOL = {"name": "update_page_metadata", "approval": True}


def config(principals: dict[str, Any], requests: list[dict[str, Any]], owner: str = "alice",
           policy: str = "current") -> dict[str, Any]:
    return {
        "policy": policy,
        "principals": principals,
        "tools": [TOOL],
        "runs": [{"id": "r1", "entry": "interactive", "owner": owner,
                  "plan": [{"tools": [TOOL["name"]]}], "requests": requests}],
    }


def step(w: World, name: str, actor: str, **args: Any) -> World:
    t = Transition.make(name, actor, **args)
    assert t in enabled(w), (t, enabled(w))
    return apply(w, t)


def run_to_end(w: World, actor: str) -> World:
    for _ in range(200):
        mine = [t for t in enabled(w, actor) if t.fault is None and t.name != "crash"]
        if w.proc(actor) is None or not mine:
            return w
        w = apply(w, mine[0])
    raise AssertionError(f"{actor} did not end")


def waiting(data: dict[str, Any]) -> World:
    """r1 started by its owner's caller and suspended for the approval of its write."""
    w = load_world(data)
    w = step(w, "start_run", "caller", run="r1")
    w = run_to_end(w, "caller:r1")
    assert w.rows[0].status == "waiting_for_approval"
    return w


# what each kind of principal may ask of a run it does not own (a user: of its own run too)
GRANTED = {
    ("service_account", "AGENT_CANCEL"): {"cancel"},
    ("service_account", "AGENT_APPROVE"): {"approve", "deny"},
    ("service_account", "AGENT_STATUS"): {"status", "events"},
    ("service_account", None): set(),
    ("user", None): set(),
    ("admin", None): {"approve", "deny", "cancel", "status", "events"},
}
MOVE = {"approve": "approve", "deny": "deny", "cancel": "cancel", "status": "read_status",
        "events": "read_events"}


def _make(w: World, request: str, by: str) -> World:
    args: dict[str, Any] = {"run": "r1", "by": by}
    if request == "events":
        args.update(after_sequence=-1, limit=100)
    w = step(w, MOVE[request], "caller", **args)
    if request in ("approve", "deny"):
        w = run_to_end(w, "resume:r1#1")
    return w


@pytest.mark.parametrize("who", list(GRANTED), ids=lambda k: f"{k[0]}-{k[1]}")
@pytest.mark.parametrize("asked", list(MOVE))
def test_each_principal_may_make_exactly_what_its_kind_and_scopes_grant(who, asked):
    kind, scope = who
    request = asked
    p = {"kind": kind} | ({"scopes": [scope]} if scope else {})
    w0 = waiting(config({"alice": {"kind": "user"}, "x": p}, [{"by": "x", "request": request}]))
    w = _make(w0, request, "x")
    denied = any(o == OutcomeName.ACCESS_DENIED for _, _, _, o in w.outcomes)
    assert denied is (request not in GRANTED[who]), (who, request)
    if denied:  # refused before any store change: the row, the events as they were
        assert w.rows == w0.rows and w.events == w0.events and not w.made
    else:
        assert [(m.by, m.request) for m in w.made][:1] == [("x", request)]
    for name in (P.NO_STORE_CHANGE_WITHOUT_ACCESS, P.NO_APPROVAL_WITHOUT_ACCESS,
                 P.NO_READ_WITHOUT_ACCESS, P.STATUS_VIEW_STRIPS_SUSPENDED_STATE):
        assert SAFETY[name].check(w), name


def test_the_owner_may_make_every_request_of_its_own_run_and_a_stranger_none():
    for by, allowed in (("alice", True), ("mallory", False)):
        for request in MOVE:
            data = config({"alice": {"kind": "user"}, "mallory": {"kind": "user"}},
                          [{"by": by, "request": request}])
            w = _make(waiting(data), request, by)
            denied = any(o == OutcomeName.ACCESS_DENIED for _, _, _, o in w.outcomes)
            assert denied is not allowed, (by, request)


def test_a_resume_checks_the_status_before_access_and_access_before_the_probe():
    """12.2 steps 1 and 2: a stranger's approval of a run no longer waiting is
    NotAwaitingApproval; of a waiting run, AccessDenied after the load, before max_sequence."""
    data = config({"alice": {"kind": "user"}, "mallory": {"kind": "user"}},
                  [{"by": "mallory", "request": "approve"}])
    w = step(waiting(data), "approve", "caller", run="r1", by="mallory")
    p = w.proc("resume:r1#1")
    assert p is not None and p.pc == "resume_read"
    nxt = [t for t in enabled(w, "resume:r1#1") if t.fault is None and t.name != "crash"]
    assert [t.name for t in nxt] == ["find_run"]
    w = apply(w, nxt[0])
    assert w.proc("resume:r1#1") is None
    assert w.outcomes[-1].outcome == OutcomeName.ACCESS_DENIED
    # the same request on a run the owner has cancelled meanwhile: the status check first
    w2 = step(waiting(data), "approve", "caller", run="r1", by="mallory")
    from failclosed.model import store
    w2, ok = store.cancel(w2, 0)
    assert ok
    w2 = run_to_end(w2, "resume:r1#1")
    assert w2.outcomes[-1].outcome == "NotAwaitingApproval"


def test_the_status_view_strips_the_suspended_state_and_the_events_page_pages():
    data = config({"alice": {"kind": "user"}},
                  [{"by": "alice", "request": "status"},
                   {"by": "alice", "request": "events", "after_sequence": 0, "limit": 1}])
    w = waiting(data)
    assert w.rows[0].suspended_state == 0  # the row holds the pending turn
    w = step(w, "read_status", "caller", run="r1", by="alice")
    w = step(w, "read_events", "caller", run="r1", by="alice", after_sequence=0, limit=1)
    status, events = w.made
    assert [f for f, _ in status.view] == list(STATUS_VIEW)
    assert not {f for f, _ in status.view} & set(SUSPENDED_FIELDS)
    assert dict(status.view)["status"] == "waiting_for_approval"
    assert events.seqs == (1,)  # after 0, one of them: request 0, llm 1
    assert w.rows == waiting(data).rows  # the reads change no row


@pytest.mark.parametrize(("switch", "prop"), [
    ("mutant_cancel_skips_access", P.NO_STORE_CHANGE_WITHOUT_ACCESS),
    ("mutant_resume_skips_access", P.NO_APPROVAL_WITHOUT_ACCESS),
    ("mutant_read_skips_access", P.NO_READ_WITHOUT_ACCESS),
    ("mutant_status_view_keeps_state", P.STATUS_VIEW_STRIPS_SUSPENDED_STATE),
])
def test_each_access_property_is_killed_by_its_mutant_and_holds_without_it(switch, prop):
    from failclosed.spec.checker import check
    from failclosed.spec.mutants import MUTANT_CONFIG_DIR, MUTANT_SWITCHES

    assert MUTANT_SWITCHES[switch][0] == prop
    path = str(MUTANT_CONFIG_DIR / MUTANT_SWITCHES[switch][1])
    assert check("current", path, None, witnesses=False, coverage=False).properties[prop].holds
    broken = check(f"current+{switch}", path, None, witnesses=False, coverage=False)
    assert not broken.properties[prop].holds


BASE = config({"alice": {"kind": "user"}, "bot": {"kind": "service_account",
                                                   "scopes": ["AGENT_CANCEL"]}},
              [{"by": "bot", "request": "cancel"}])


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["principals"].update(bot={"kind": "robot"}),
     "principals.bot.kind: 'robot'; use one of user, admin, service_account"),
    (lambda d: d["principals"]["bot"].update(scopes=["AGENT_KILL"]),
     "principals.bot.scopes: 'AGENT_KILL' is not a scope; use AGENT_CANCEL, AGENT_APPROVE, "
     "AGENT_STATUS"),
    (lambda d: d["principals"]["alice"].update(scopes=["AGENT_CANCEL"]),
     "principals.alice.scopes: only a service_account has scopes; remove them or write kind = "
     "\"service_account\""),
    (lambda d: d["runs"][0].update(owner="carol"),
     "runs[0].owner: 'carol' is not declared; a run's owner is a user of [principals]"),
    (lambda d: d["runs"][0].update(owner="bot"),
     "runs[0].owner: 'bot' is a service_account; a run's owner is a user of [principals]"),
    (lambda d: d["runs"][0]["requests"][0].update(by="eve"),
     "runs[0].requests[0].by: 'eve' is not declared; declare it in [principals] or use one of "
     "alice, bot"),
    (lambda d: d["runs"][0]["requests"][0].update(request="delete"),
     "runs[0].requests[0].request: 'delete'; use one of approve, deny, input, cancel, status, "
     "events"),
    (lambda d: d["runs"][0]["requests"][0].update(limit=2),
     "runs[0].requests[0]: after_sequence and limit page the events; remove them from a cancel "
     "request"),
    (lambda d: d["runs"][0]["requests"].append({"by": "bot", "request": "events", "limit": 0}),
     "runs[0].requests[1].limit: must be >= 1, got 0"),
    (lambda d: d["runs"][0]["requests"].append({"by": "bot", "request": "events",
                                                "after_sequence": -2}),
     "runs[0].requests[1].after_sequence: must be >= -1, got -2"),
    (lambda d: d["runs"][0]["requests"][0].update(requst="cancel"),
     "runs[0].requests[0].requst: unknown key; did you mean 'request'?"),
    (lambda d: d.update(principals={}),
     "principals: empty; declare at least the runs' owner, or remove the table"),
])
def test_a_bad_principal_or_request_is_one_line_naming_the_field(change, message):
    data = copy.deepcopy(BASE)
    change(data)
    with pytest.raises(ConfigError) as e:
        load_world(data)
    assert str(e.value) == message


def test_without_principals_the_owner_alone_makes_every_request():
    w = load_world({"runs": [{"id": "r1", "decisions": ["approve"], "cancels": 1}]})
    assert [(p.name, p.kind) for p in w.config.principals] == [("owner", "user")]
    assert w.config.runs[0].owner == "owner" and not w.config.runs[0].requests
    assert not w.asked and not w.made
    assert Request.CANCEL in Request.values()


def test_the_simulator_mixes_in_strangers_requests_counts_every_refusal_and_none_lands():
    import sys
    import tomllib
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from failclosed.sim.batch import simulate_one
    from test_sim import SMALL

    raw = tomllib.loads(SMALL + "\n[workload.strangers]\nprobability = 0.5\n"
                                "delay = {dist = \"exponential\", mean = 30}\n")
    res, _ = simulate_one(raw, policy="current", seed=1, keep_going=True)
    m = res["metrics"]
    assert m["access"]["runs"] > 0 and m["access"]["refused"] > 0
    assert m["access"]["refused"] == m["segments"][OutcomeName.ACCESS_DENIED]
    assert m["access"]["took_effect"] == m["access"]["landed_without_access"] == 0
    assert not [v for v in res["violations"] if "access" in v["property"]]
    # the same workload with the reads' check broken: the landed reads are counted and caught
    res, _ = simulate_one(raw, policy="current+mutant_read_skips_access", seed=1, keep_going=True)
    assert res["metrics"]["access"]["landed_without_access"] > 0
    assert P.NO_READ_WITHOUT_ACCESS in {v["property"] for v in res["violations"]}
    # without [workload.strangers] no run has such requests, and the metrics say nothing of them
    res, _ = simulate_one(tomllib.loads(SMALL), policy="current", seed=1, keep_going=True)
    assert "access" not in res["metrics"]
