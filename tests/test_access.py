"""Who may act on a run (RUNTIME 16.18, docs/RUNTIME.md 16.18): principals with grants, scopes and
tool policies as data, the access rule ``may`` in the runtime's order at each entry point,
the four-eyes rule, gate 2 judged on the approver, the submitter gate, execution under the
owner's tool policy, who decided on the events, what a refused cancel or read returns, the
history's switches, and the access properties, each killed by its mutant."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from failclosed.model import ConfigError, apply, enabled, load_world
from failclosed.model.records import ghosts
from failclosed.model.state import STATUS_VIEW, SUSPENDED_FIELDS, Row, World
from failclosed.model.transition import Transition
from failclosed.model.vocab import OutcomeName, Request
from failclosed.spec.properties import SAFETY
from failclosed.spec.vocab import PropertyName as P

WRITE = {"name": "update_page_metadata", "approval": True}  # an idempotent builtin writer
READ = {"name": "lookup_page", "approval": True}  # read-only, gated by its marker
INPUT = {"name": "ask_editor", "needs_input": True}
ACCESS = (P.NO_STORE_CHANGE_WITHOUT_ACCESS, P.NO_APPROVAL_WITHOUT_ACCESS, P.NO_READ_WITHOUT_ACCESS,
          P.STATUS_VIEW_STRIPS_SUSPENDED_STATE, P.NO_WRITE_OR_INPUT_RELEASED_BY_SERVICE_ACCOUNT,
          P.NO_SELF_APPROVED_WRITE, P.NO_CALL_BEYOND_ITS_PRINCIPALS_POLICY,
          P.DECISION_EVENTS_NAME_THEIR_PRINCIPAL)

# one principal of every kind (RUNTIME 16.18.1); alice starts the runs unless a test says otherwise
PRINCIPALS: dict[str, dict[str, Any]] = {
    "alice": {"kind": "user"},
    "mallory": {"kind": "user"},
    "ops": {"kind": "admin"},
    "lead": {"kind": "user", "grants": ["AGENT_APPROVE"]},
    "sa_approve": {"kind": "service_account", "scopes": ["AGENT_APPROVE"]},
    "sa_cancel": {"kind": "service_account", "scopes": ["AGENT_CANCEL"]},
    "sa_read": {"kind": "service_account", "scopes": ["AGENT_READ"]},
    "sa_none": {"kind": "service_account"},
    "anon": {"kind": "anonymous"},
}


def config(requests: list[dict[str, Any]], owner: str = "alice", tool: dict = WRITE,
           policy: str = "current", principals: dict | None = None, **run: Any) -> dict[str, Any]:
    return {
        "policy": policy,
        "principals": copy.deepcopy(principals or PRINCIPALS),
        "tools": [tool],
        "runs": [{"id": "r1", "entry": "interactive", "owner": owner,
                  "plan": [{"tools": [tool["name"]]}], "requests": requests, **run}],
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
    """r1 started by its caller and suspended for the approval (or input) of its call."""
    w = load_world(data)
    w = step(w, "start_run", "caller", run="r1")
    w = run_to_end(w, "caller:r1")
    assert w.rows[0].status in ("waiting_for_approval", "waiting_for_input"), w.rows[0]
    return w


MOVE = {"approve": "approve", "deny": "deny", "input": "submit_input", "cancel": "cancel",
        "status": "read_status", "events": "read_events"}


def make(w: World, request: str, by: str, k: int = 1) -> World:
    """``by`` makes ``request`` of r1 (its resume driven to its end: resume number ``k``)."""
    args: dict[str, Any] = {"run": "r1", "by": by}
    if request == "events":
        args.update(after_sequence=-1)
    w = step(w, MOVE[request], "caller", **args)
    if request in ("approve", "deny", "input"):
        w = run_to_end(w, f"resume:r1#{k}")
    return w


def last(w: World) -> str:
    return w.outcomes[-1].outcome


# -- 16.18.2: may(actor, run, scope), every kind of principal on a run alice started --------------
# what each may make of alice's run (the owner: everything; rule 3: only the approve scope)
MAY = {
    "alice": set(MOVE), "ops": set(MOVE), "mallory": set(), "anon": set(),
    "lead": {"approve", "deny", "input"},
    "sa_approve": {"approve", "deny", "input"}, "sa_cancel": {"cancel"},
    "sa_read": {"status", "events"}, "sa_none": set(),
}


@pytest.mark.parametrize("by", list(MAY))
@pytest.mark.parametrize("asked", list(MOVE))
def test_the_access_rule_for_every_kind_of_principal(by, asked):
    """Who passes the access check of each entry point (16.18.2, 16.18.3): an admin and the owner
    everything, the AGENT_APPROVE grant approve, deny and input on any run (no other scope
    has a grant), a service account exactly its scopes, input under AGENT_APPROVE, status and
    events under AGENT_READ; a stranger and an anonymous caller nothing."""
    request = asked
    tool = INPUT if request == "input" else READ
    data = config([{"by": by, "request": request}], tool=tool)
    w0 = waiting(data)
    w = make(w0, request, by)
    allowed = request in MAY[by]
    if request in ("approve", "deny", "input"):
        assert (last(w) == OutcomeName.ACCESS_DENIED) is not allowed, (by, request, last(w))
    elif request == "cancel":
        assert (w.rows[0].status == "cancelled") is allowed
        if not allowed:
            assert last(w) == OutcomeName.RETURNED_FALSE
    else:
        assert bool(w.made) is allowed
        if not allowed:
            assert last(w) == OutcomeName.RETURNED_NOTHING
    if not allowed:  # refused before any store change: the row, the events as they were
        assert w.rows == w0.rows and w.events == w0.events and not w.made
    for name in ACCESS:
        assert SAFETY[name].check(w), name


def test_agent_status_is_no_scope_and_agent_read_authorises_the_reads():
    data = config([], principals={"alice": {"kind": "user"},
                                  "bot": {"kind": "service_account", "scopes": ["AGENT_STATUS"]}})
    with pytest.raises(ConfigError, match="'AGENT_STATUS' is not a scope; use AGENT_CANCEL, "
                                          "AGENT_APPROVE, AGENT_READ"):
        load_world(data)


@pytest.mark.parametrize("asked", ["cancel", "status", "events"])
def test_a_refused_cancel_or_read_returns_what_an_unknown_run_returns(asked):
    """Only approve, deny and input raise AccessDenied (16.18.3): a refused cancel returns false
    as for an unknown or finished run, a refused status or events read returns nothing as
    for an unknown run: the caller cannot tell a run it may not see from one that does not
    exist."""
    request = asked
    w = make(waiting(config([{"by": "mallory", "request": request}])), request, "mallory")
    refused = last(w)
    assert refused != OutcomeName.ACCESS_DENIED
    # the same request of a run that has no row yet (its caller has not started it)
    w2 = load_world(config([{"by": "ops", "request": request}]))
    w2 = replace_started(w2)
    w2 = make(w2, request, "ops")
    if request == "cancel":
        assert last(w2) == refused == OutcomeName.RETURNED_FALSE
    else:
        assert last(w2) == refused == OutcomeName.RETURNED_NOTHING


def replace_started(w: World) -> World:
    """r1 as the caller sees it after a start whose row never landed (no row)."""
    from failclosed.model.records import replace
    return replace(w, started=(True,))


def test_a_finished_run_cancelled_by_a_permitted_principal_returns_false_too():
    w = waiting(config([{"by": "sa_cancel", "request": "cancel"}], decisions=["deny"]))
    w = run_to_end(step(w, "deny", "caller", run="r1"), "resume:r1#1")
    assert w.rows[0].status == "completed"
    w = make(w, "cancel", "sa_cancel")
    assert last(w) == OutcomeName.RETURNED_FALSE and not w.made


# -- 16.18.1: be_user = 0 ---------------------------------------------------------------------
@pytest.mark.parametrize("starter", ["sa_approve", "anon"])
def test_a_run_a_service_account_or_anonymous_caller_starts_has_no_human_owner(starter):
    """be_user = 0 (16.18.1, 16.18.2 rule 5): every human is refused on it but an admin and the
    grant holder's approve."""
    for by, request, allowed in (("alice", "status", False), ("mallory", "approve", False),
                                 ("ops", "status", True), ("lead", "approve", True),
                                 ("lead", "status", False)):
        w = make(waiting(config([{"by": by, "request": request}], owner=starter, tool=READ)),
                 request, by)
        denied = last(w) in (OutcomeName.ACCESS_DENIED, OutcomeName.RETURNED_NOTHING)
        assert denied is not allowed, (starter, by, request, w.outcomes)


# -- 16.18.4: the four-eyes rule ---------------------------------------------------------------
def four_eyes(by: str, request: str, owner: str = "alice", policy: str = "current",
              tool: dict = WRITE) -> World:
    data = config([{"by": by, "request": request}], owner=owner, require_second_approver=True,
                  policy=policy, tool=tool)
    return make(waiting(data), request, by)


@pytest.mark.parametrize(("owner", "by", "decision", "refused"), [
    ("alice", "alice", "approve", True),  # the initiator
    ("ops", "ops", "approve", True),  # admins are not exempt
    ("alice", "alice", "deny", False),  # never a denial
    ("alice", "ops", "approve", False),  # a second approver
    ("alice", "lead", "approve", False),
    ("sa_approve", "ops", "approve", False),  # be_user = 0: no initiator
])
def test_the_four_eyes_rule_refuses_only_an_initiators_approval(owner, by, decision, refused):
    w = four_eyes(by, decision, owner)
    assert ("SelfApprovalDenied" in [o.outcome for o in w.outcomes]) is refused, w.outcomes
    if refused:  # before the probe and the claim: the row waits as it did, no event
        assert w.rows[0].status == "waiting_for_approval" and w.rows[0].epoch == 1
        assert [e.kind for e in w.events] == ["request", "llm"]
    else:
        assert w.rows[0].status == "completed"


def test_the_four_eyes_rule_never_applies_to_input_nor_to_a_service_account():
    w = four_eyes("alice", "input", tool=INPUT)
    assert w.rows[0].status == "completed" and "SelfApprovalDenied" not in str(w.outcomes)
    # a service account starts and approves a read-only turn of its own run: it is never an
    # initiator (gate 2 passes a read-only turn for every principal)
    w = four_eyes("sa_approve", "approve", owner="sa_approve", tool=READ)
    assert w.rows[0].status == "completed", w.outcomes


def test_the_four_eyes_setting_is_read_by_the_switch_of_adr_172():
    assert four_eyes("alice", "approve", policy="current-four_eyes").rows[0].status == "completed"
    assert four_eyes("alice", "approve", policy="adr-150").rows[0].status == "completed"


# -- 16.18.5: the gates after the claim and execution under the owner --------------------------
@pytest.mark.parametrize(("by", "tool", "gate"), [
    ("sa_approve", WRITE, "ApproverNotPermitted"),  # a write turn: no backend user
    ("sa_approve", INPUT, "SubmitterNotPermitted"),  # every input
])
def test_a_service_account_is_refused_every_write_and_every_input_after_the_claim(by, tool, gate):
    request = "input" if tool is INPUT else "approve"
    w0 = waiting(config([{"by": by, "request": request}], tool=tool))
    w = make(w0, request, by)
    assert last(w) == gate
    row = w.rows[0]  # claimed (epoch 2), then released back to waiting, nothing recorded
    assert row.epoch == 2 and row.status == w0.rows[0].status and row.claimed_by == ""
    assert w.events == w0.events and not w.ledger


def test_a_service_account_passes_gate_2_on_a_read_only_turn_and_may_deny():
    w = make(waiting(config([{"by": "sa_approve", "request": "approve"}], tool=READ)),
             "approve", "sa_approve")
    assert w.rows[0].status == "completed"
    w = make(waiting(config([{"by": "sa_approve", "request": "deny"}])), "deny", "sa_approve")
    assert w.rows[0].status == "completed" and not w.ledger


@pytest.mark.parametrize("by", ["ops", "lead", "alice"])
def test_gate_2_judges_the_approvers_own_tool_policy_admins_included(by):
    principals = copy.deepcopy(PRINCIPALS)
    principals[by]["permitted"] = {WRITE["name"]: False}
    w = make(waiting(config([{"by": by, "request": "approve"}], principals=principals)),
             "approve", by)
    assert last(w) == "ApproverNotPermitted" and not w.ledger


def test_the_submitter_gate_judges_every_pending_call_write_or_not():
    principals = copy.deepcopy(PRINCIPALS)
    principals["lead"]["permitted"] = {INPUT["name"]: False}  # the read-only input tool
    w = make(waiting(config([{"by": "lead", "request": "input"}], tool=INPUT,
                            principals=principals)), "input", "lead")
    assert last(w) == "SubmitterNotPermitted" and w.rows[0].status == "waiting_for_input"


def test_an_approved_call_the_owner_may_not_run_is_an_error_step():
    """Execution runs under the owner (16.18.5): the admin's approval passes gate 2 and is
    recorded, the owner's tool policy makes the call an error tool step, nothing lands."""
    principals = copy.deepcopy(PRINCIPALS)
    principals["alice"]["permitted"] = {WRITE["name"]: False}
    w = make(waiting(config([{"by": "ops", "request": "approve"}], principals=principals)),
             "approve", "ops")
    assert w.rows[0].status == "completed" and not w.ledger
    assert [e.kind for e in w.events][:4] == ["request", "llm", "approval", "tool"]
    # without the owner's policy applied again, the write runs (the mutant's behaviour)
    w = make(waiting(config([{"by": "ops", "request": "approve"}], principals=principals,
                            policy="current+mutant_execution_ignores_owner_policy")),
             "approve", "ops")
    assert [a.tool for a in w.ledger] == [WRITE["name"]]


def test_the_approval_and_input_events_name_who_decided():
    w = make(waiting(config([{"by": "ops", "request": "approve"}])), "approve", "ops")
    assert [(e.kind, e.by) for e in w.events if e.by] == [("approval", "ops")]
    w = make(waiting(config([{"by": "lead", "request": "input"}], tool=INPUT)), "input", "lead")
    assert [(e.kind, e.by) for e in w.events if e.by] == [("input", "lead")]
    # without [principals], the owner's decision names the owner
    w = waiting({"tools": [WRITE], "runs": [{"id": "r1", "entry": "interactive",
                                             "decisions": ["approve"],
                                             "plan": [{"tools": [WRITE["name"]]}]}]})
    w = run_to_end(step(w, "approve", "caller", run="r1"), "resume:r1#1")
    assert [(e.kind, e.by) for e in w.events if e.by] == [("approval", "owner")]


# -- 16.18.3: the reads ----------------------------------------------------------------------
def test_status_is_the_whole_row_less_two_fields_and_events_have_no_limit():
    assert STATUS_VIEW == tuple(f for f in Row.__dataclass_fields__
                                if f not in SUSPENDED_FIELDS and f not in ghosts(Row))
    data = config([{"by": "alice", "request": "status"},
                   {"by": "alice", "request": "events", "after_sequence": 0}])
    w = waiting(data)
    assert w.rows[0].suspended_state == 0  # the row holds the pending turn
    w = step(w, "read_status", "caller", run="r1", by="alice")
    w = step(w, "read_events", "caller", run="r1", by="alice", after_sequence=0)
    status, events = w.made
    assert dict(status.view) == {f: getattr(w.rows[0], f) for f in STATUS_VIEW}
    assert not {f for f, _ in status.view} & set(SUSPENDED_FIELDS)
    assert events.seqs == tuple(e.seq for e in w.events if e.seq > 0)  # every one, no limit
    bad = config([{"by": "alice", "request": "events", "limit": 2}])
    with pytest.raises(ConfigError, match=r"requests\[0\]\.limit: unknown key"):
        load_world(bad)


def test_a_resume_checks_the_status_before_access_and_access_before_the_probe():
    """12.2 steps 1 and 2: a stranger's approval of a run no longer waiting is
    NotAwaitingApproval; of a waiting run, AccessDenied after the load, before max_sequence."""
    data = config([{"by": "mallory", "request": "approve"}])
    w = step(waiting(data), "approve", "caller", run="r1", by="mallory")
    nxt = [t for t in enabled(w, "resume:r1#1") if t.fault is None and t.name != "crash"]
    assert [t.name for t in nxt] == ["find_run"]
    w = apply(w, nxt[0])
    assert w.proc("resume:r1#1") is None and last(w) == OutcomeName.ACCESS_DENIED
    from failclosed.model import store
    w2 = step(waiting(data), "approve", "caller", run="r1", by="mallory")
    w2, ok = store.cancel(w2, 0)
    assert ok
    assert last(run_to_end(w2, "resume:r1#1")) == "NotAwaitingApproval"


# -- the history (RUNTIME 16.18: ADR-110, 130, 133, 150, 172) ------------------------------------
@pytest.mark.parametrize(("switch", "by", "asked", "tool", "now", "before"), [
    # ADR-110: without service accounts a scoped account is a caller with uid 0: refused
    ("service_accounts", "sa_cancel", "cancel", WRITE, "cancelled", "waiting_for_approval"),
    # ADR-130: without the approve grant a grant holder is a stranger
    ("approve_grant", "lead", "approve", READ, "completed", "waiting_for_approval"),
    # ADR-133: without gate 2 a service account's approval releases the write
    ("approver_gate", "sa_approve", "approve", WRITE, "waiting_for_approval", "completed"),
    # ADR-150: without the submitter gate a service account's input resumes the run
    ("submitter_gate", "sa_approve", "input", INPUT, "waiting_for_input", "completed"),
])
def test_each_switch_of_the_history_changes_what_it_records(switch, by, asked, tool, now,
                                                            before):
    request = asked
    for policy, status in (("current", now), (f"current-{switch}", before)):
        w = make(waiting(config([{"by": by, "request": request}], tool=tool, policy=policy)),
                 request, by)
        assert w.rows[0].status == status, (policy, w.outcomes)


def test_the_presets_add_the_switches_in_their_places():
    from failclosed.model.policy import PRESET_ORDER, PRESETS

    first = {sw: next(n for n in PRESET_ORDER if getattr(PRESETS[n], sw))
             for sw in ("service_accounts", "approve_grant", "approver_gate", "submitter_gate",
                        "four_eyes")}
    assert first == {"service_accounts": "owner-guard", "approve_grant": "adr-134",
                     "approver_gate": "adr-134", "submitter_gate": "adr-150",
                     "four_eyes": "adr-172"}
    assert PRESET_ORDER[-1] == "adr-172"
    assert PRESETS["current"].switches() == PRESETS["adr-172"].switches()


# -- the properties and their mutants ------------------------------------------------------
@pytest.mark.parametrize(("switch", "prop"), [
    ("mutant_cancel_skips_access", P.NO_STORE_CHANGE_WITHOUT_ACCESS),
    ("mutant_resume_skips_access", P.NO_APPROVAL_WITHOUT_ACCESS),
    ("mutant_read_skips_access", P.NO_READ_WITHOUT_ACCESS),
    ("mutant_status_view_keeps_state", P.STATUS_VIEW_STRIPS_SUSPENDED_STATE),
    ("mutant_gates_pass_service_accounts", P.NO_WRITE_OR_INPUT_RELEASED_BY_SERVICE_ACCOUNT),
    ("mutant_four_eyes_skipped", P.NO_SELF_APPROVED_WRITE),
    ("mutant_execution_ignores_owner_policy", P.NO_CALL_BEYOND_ITS_PRINCIPALS_POLICY),
    ("mutant_decision_event_unsigned", P.DECISION_EVENTS_NAME_THEIR_PRINCIPAL),
])
def test_each_access_property_is_killed_by_its_mutant_and_holds_without_it(switch, prop):
    from failclosed.spec.checker import check
    from failclosed.spec.mutants import MUTANT_CONFIG_DIR, MUTANT_SWITCHES

    assert MUTANT_SWITCHES[switch][0] == prop
    path = str(MUTANT_CONFIG_DIR / MUTANT_SWITCHES[switch][1])
    assert check("current", path, None, witnesses=False, coverage=False).properties[prop].holds
    broken = check(f"current+{switch}", path, None, witnesses=False, coverage=False)
    assert not broken.properties[prop].holds


# -- the configuration --------------------------------------------------------------------
BASE = config([{"by": "sa_cancel", "request": "cancel"}])


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["principals"].update(bot={"kind": "robot"}),
     "principals.bot.kind: 'robot'; use one of user, admin, service_account, anonymous"),
    (lambda d: d["principals"]["sa_cancel"].update(scopes=["AGENT_KILL"]),
     "principals.sa_cancel.scopes: 'AGENT_KILL' is not a scope; use AGENT_CANCEL, "
     "AGENT_APPROVE, AGENT_READ"),
    (lambda d: d["principals"]["alice"].update(scopes=["AGENT_CANCEL"]),
     "principals.alice.scopes: only a service_account has scopes; remove them or write kind = "
     "\"service_account\""),
    (lambda d: d["principals"]["sa_none"].update(grants=["AGENT_APPROVE"]),
     "principals.sa_none.grants: only a user holds grants (an admin holds every one, a service "
     "account has scopes); remove them or write kind = \"user\""),
    (lambda d: d["principals"]["sa_none"].update(permitted={"lookup_page": True}),
     "principals.sa_none.permitted: a service_account has no backend user, no tool is "
     "permitted it (RUNTIME 16.18.5); remove it"),
    (lambda d: d["principals"]["alice"].update(permitted={"lookup_page": "yes"}),
     "principals.alice.permitted.lookup_page: expected true or false, got 'yes'"),
    (lambda d: d["runs"][0].update(owner="carol"),
     "runs[0].owner: 'carol' is not declared; the principal who starts the run is one of "
     "[principals]: alice, mallory, ops, lead, sa_approve, sa_cancel, sa_read, sa_none, anon"),
    (lambda d: d["runs"][0].update(require_second_approver="yes"),
     "runs[0].require_second_approver: expected true or false, got 'yes'"),
    (lambda d: d["runs"][0]["requests"][0].update(by="eve"),
     "runs[0].requests[0].by: 'eve' is not declared; declare it in [principals] or use one of "
     "alice, mallory, ops, lead, sa_approve, sa_cancel, sa_read, sa_none, anon"),
    (lambda d: d["runs"][0]["requests"][0].update(request="delete"),
     "runs[0].requests[0].request: 'delete'; use one of approve, deny, input, cancel, status, "
     "events"),
    (lambda d: d["runs"][0]["requests"][0].update(after_sequence=2),
     "runs[0].requests[0].after_sequence: only an events read starts after a sequence; remove "
     "it from a cancel request"),
    (lambda d: d["runs"][0]["requests"].append({"by": "sa_read", "request": "events",
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
    assert not w.config.runs[0].require_second_approver
    assert not w.asked and not w.made
    assert Request.CANCEL in Request.values()


def test_the_simulator_mixes_in_every_kind_of_principal_and_counts_refusals_by_kind():
    import sys
    import tomllib
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from failclosed.sim.batch import simulate_one
    from failclosed.sim.metrics import ACCESS_REFUSALS
    from failclosed.sim.processes import PRINCIPALS, STRANGER_REQUESTS
    from test_sim import SMALL

    # a user, a grant holder, an anonymous caller, service accounts without a scope and with
    # AGENT_APPROVE and AGENT_READ (no admin: it may do everything, so it refuses nothing)
    assert {p["kind"] for p in PRINCIPALS.values()} == {"user", "service_account", "anonymous"}
    assert {a.by for a in STRANGER_REQUESTS} == set(PRINCIPALS) - {"owner"}
    raw = tomllib.loads(SMALL + "\n[workload.strangers]\nprobability = 1.0\n"
                                "delay = {dist = \"exponential\", mean = 30}\n")
    res, _ = simulate_one(raw, policy="current", seed=1, keep_going=True)
    a = res["metrics"]["access"]
    assert a["runs"] > 0 and set(a["refused_by_kind"]) == {str(k) for k in ACCESS_REFUSALS}
    assert a["refused"] == sum(a["refused_by_kind"].values())
    for kind in (OutcomeName.ACCESS_DENIED, OutcomeName.RETURNED_FALSE,
                 OutcomeName.RETURNED_NOTHING, "ApproverNotPermitted"):
        assert a["refused_by_kind"][kind] > 0, (kind, a)
    assert a["took_effect"] > 0 and a["landed_without_access"] == 0  # the lawful reads
    assert not [v for v in res["violations"] if v["property"] in ACCESS]
    # the same workload with the reads' check broken: the landed reads are counted and caught
    res, _ = simulate_one(raw, policy="current+mutant_read_skips_access", seed=1, keep_going=True)
    assert res["metrics"]["access"]["landed_without_access"] > 0
    assert P.NO_READ_WITHOUT_ACCESS in {v["property"] for v in res["violations"]}
    # without [workload.strangers] no run has such requests, and the metrics say nothing of them
    res, _ = simulate_one(tomllib.loads(SMALL), policy="current", seed=1, keep_going=True)
    assert "access" not in res["metrics"]
