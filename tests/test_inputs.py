"""Realistic inputs in the model: the builtin catalogue as the default registry (docs/RUNTIME.md
14.2, 14.5), the pre-claim decode of a resume (12.2 step 2), gate 2 and input validation as
decisions a configuration can explore (12.2 step 8, 12.3)."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest
from failclosed.cli import main
from failclosed.model import apply, enabled, load_world
from failclosed.model.config import BUILTIN_WRITERS, ConfigError, parse_config
from failclosed.model.rules import approval_bound, resolve_by_name
from failclosed.model.state import World

WRITE_TURN = [{"tools": ["update_page_metadata", "lookup_page"]}, {"final": "completed"}]


def world(policy: str = "current", *, tools: list[dict] | None = None, plan: list | None = None,
          decisions: tuple[str, ...] = ("approve",), faults: tuple[str, ...] = (), budget: int = 0,
          refusals: tuple[str, ...] = ()) -> World:
    data: dict[str, Any] = {
        "policy": policy,
        "model": {"faults": list(faults), "fault_budget": budget, "refusals": list(refusals)},
        "tools": tools if tools is not None else [{"name": "update_page_metadata"}, {"name": "lookup_page"}],
        "runs": [{"id": "r1", "entry": "interactive", "decisions": list(decisions),
                  "plan": plan if plan is not None else WRITE_TURN}],
    }
    return load_world(data)


def until(w: World, actor: str, name: str) -> World:
    """Fire ``actor``'s only normal move until its next move is ``name`` ("end": it ended)."""
    for _ in range(200):
        if name == "end" and w.proc(actor) is None:
            return w
        moves = [t for t in enabled(w, actor) if t.fault is None and t.name != "crash"]
        if any(t.name == name for t in moves):
            return w
        assert len(moves) == 1, [str(t) for t in moves]
        w = apply(w, moves[0])
    raise AssertionError(f"{actor} never reached {name}")


def one(w: World, name: str, actor: str, **args: Any) -> World:
    cands = [t for t in enabled(w, actor) if t.name == name and dict(t.args) == args]
    assert len(cands) == 1, (name, args, [str(t) for t in enabled(w, actor)])
    return apply(w, cands[0])


def suspended(w: World) -> World:
    w = one(w, "start_run", "caller", run="r1")
    w = until(w, "caller:r1", "end")
    assert w.rows[0].status == "waiting_for_approval"
    return w


# -- the builtin catalogue -----------------------------------------------------------------
def test_a_builtin_writer_named_without_an_effect_gets_the_runtimes_effect():
    data = {"tools": [{"name": n} for n in BUILTIN_WRITERS] + [{"name": "lookup_page"}],
            "runs": [{"id": "r1"}]}
    spec, _ = parse_config(data)
    for n, eff in BUILTIN_WRITERS.items():
        assert resolve_by_name(spec, frozenset(), n) == eff
        assert approval_bound(spec, frozenset(), n)  # 14.4 rule 5: every builtin writer suspends
    assert resolve_by_name(spec, frozenset(), "lookup_page") == "read_only"
    assert set(BUILTIN_WRITERS.values()) == {"idempotent_write", "non_idempotent_write"}
    assert len(BUILTIN_WRITERS) == 7


def test_a_plan_may_call_a_builtin_writer_no_table_declares_but_an_unknown_name_stays_unknown():
    data = {"model": {"unknown_tools": ["stale_tool"]},
            "runs": [{"id": "r1", "plan": [{"tools": ["move_content_element", "stale_tool"]}]}]}
    spec, _ = parse_config(data)
    assert spec.tool("move_content_element").effect == "idempotent_write"
    assert spec.tool("stale_tool") is None
    # 14.2: an unknown name resolves to non_idempotent_write; 14.4 rule 1: it does not suspend
    assert resolve_by_name(spec, frozenset(), "stale_tool") == "non_idempotent_write"
    assert not approval_bound(spec, frozenset(), "stale_tool")
    # a builtin the plans never call is not registered (the spec stays as small as it was)
    assert spec.tool("create_page_draft") is None


def test_a_read_only_builtin_named_only_in_a_plan_resolves_read_only():
    data = {"model": {"read_only_builtins": ["get_page_tree"]},
            "runs": [{"id": "r1", "plan": [{"tools": ["get_page_tree"]}]}]}
    spec, _ = parse_config(data)
    assert spec.tool("get_page_tree").effect == "read_only"
    assert resolve_by_name(spec, frozenset(), "get_page_tree") == "read_only"
    assert not approval_bound(spec, frozenset(), "get_page_tree")


@pytest.mark.parametrize(("model", "plan", "needle"), [
    ({}, ["remote_writ"], "runs[0].plan[0].tools: 'remote_writ' is not declared; did you mean "
                          "'remote_write'? declare it in a [[tools]] table"),
    ({}, ["ghost"], "runs[0].plan[0].tools: 'ghost' is not declared; declare it"),
    ({"unknown_tools": ["remote_write"]}, ["remote_write"],
     "model.unknown_tools: 'remote_write' is declared"),
    ({"read_only_builtins": ["create_page_draft"]}, ["create_page_draft"],
     "model.read_only_builtins: 'create_page_draft' is a builtin writer"),
    ({"unknown_tools": "ghost"}, ["ghost"], "model.unknown_tools: expected a list"),
])
def test_every_name_a_plan_calls_is_declared(model, plan, needle):
    data = {"model": model, "tools": [{"name": "remote_write", "remote": True}],
            "runs": [{"id": "r1", "plan": [{"tools": plan}]}]}
    with pytest.raises(ConfigError) as e:
        parse_config(data)
    assert needle in str(e.value)


def test_a_typo_in_a_plan_is_one_line_exit_2(tmp_path, capsys):
    from failclosed.spec.checker import CONFIG_DIR

    text = (CONFIG_DIR / "tiny.toml").read_text()
    assert 'tools = ["remote_write"]' in text
    bad = tmp_path / "tiny-typo.toml"
    bad.write_text(text.replace('tools = ["remote_write"]', 'tools = ["remote_writ"]', 1))
    assert main(["check", "--policy", "current", "--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "did you mean 'remote_write'?" in err[0], err


def test_a_remote_tool_always_declares_non_idempotent_write():
    spec, _ = parse_config({"tools": [{"name": "mcp_lookup", "remote": True, "server_flag": 0}],
                         "runs": [{"id": "r1"}]})
    assert resolve_by_name(spec, frozenset(), "mcp_lookup") == "non_idempotent_write"


@pytest.mark.parametrize(("tool", "needle"), [
    ({"name": "create_page_draft", "effect": "idempotent_write"},
     "tools[0].effect: 'create_page_draft' is a builtin writer that declares non_idempotent_write"),
    ({"name": "update_page_metadata", "effect": "read_only"},
     "tools[0].effect: 'update_page_metadata' is a builtin writer that declares idempotent_write"),
    ({"name": "mcp_lookup", "remote": True, "effect": "read_only"},
     "tools[0].effect: 'mcp_lookup' is remote"),
    ({"name": "x", "effect": "write"}, "tools[0].effect: unknown effect 'write'"),
])
def test_a_contradicting_effect_is_one_line_exit_2(tmp_path, capsys, tool, needle):
    with pytest.raises(ConfigError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        parse_config({"tools": [tool], "runs": [{"id": "r1"}]})
    p = tmp_path / "bad.toml"
    body = "\n".join(f"{k} = {_toml(v)}" for k, v in tool.items())
    p.write_text(f'policy = "current"\n[[tools]]\n{body}\n[[runs]]\nid = "r1"\n')
    assert main(["check", "--policy", "current", "--config", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("failclosed: error: ") and needle in err[0]


def test_a_fault_ops_entry_that_is_not_a_name_is_one_line_exit_2(tmp_path, capsys):
    """An unhashable entry used to escape as a TypeError traceback (exit 1)."""
    with pytest.raises(ConfigError, match=r"model.fault_ops\[\]: expected a statement name, got 3"):
        parse_config({"model": {"fault_ops": ["renew_lease", 3]}, "runs": [{"id": "r1"}]})
    p = tmp_path / "bad.toml"
    p.write_text('policy = "current"\n[model]\nfault_ops = [["renew_lease"]]\n[[runs]]\nid = "r1"\n')
    assert main(["check", "--policy", "current", "--config", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["failclosed: error: model.fault_ops[]: expected a statement name, got ['renew_lease']"]


def _toml(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else f'"{v}"'


# -- 12.2 step 2: the decode before the claim ------------------------------------------------
def test_a_state_that_does_not_decode_before_the_claim_leaves_the_row_as_it_was():
    w = suspended(world(faults=("decode_error",), budget=1))
    w = one(w, "approve", "caller", run="r1")
    before = w.rows[0]
    w = one(w, "find_run", "resume:r1#1", run="r1", fault="decode_error")
    assert w.rows[0] == before  # no claim, no settle, state kept
    assert w.outcomes[-1][3] == "CorruptSuspendedState"
    assert w.proc("resume:r1#1") is None


def test_the_decode_after_the_claim_exists_only_since_adr_132():
    def at_position(policy: str) -> list[str]:
        marked = [{"name": "update_page_metadata", "approval": True},  # suspends before ADR-134
                  {"name": "lookup_page"}]
        w = suspended(world(policy, tools=marked, faults=("decode_error",), budget=1))
        w = one(w, "approve", "caller", run="r1")
        w = until(w, "resume:r1#1", "max_sequence")  # the probe, before the claim
        w = apply(w, next(t for t in enabled(w, "resume:r1#1") if t.name == "max_sequence"))
        w = until(w, "resume:r1#1", "max_sequence")  # the fresh position, after the claim
        assert w.rows[0].status == "running"
        return sorted(str(t.fault) for t in enabled(w, "resume:r1#1") if t.name == "max_sequence")

    assert at_position("current") == ["None", "decode_error"]
    # before ADR-132 the resume used the state it decoded before the claim (15: ADR-132)
    assert at_position("adr-122") == ["None"]


def test_the_pre_claim_decode_is_offered_only_while_the_row_awaits_the_decision():
    w = suspended(world(faults=("decode_error",), budget=1, decisions=("approve", "approve")))
    w = one(w, "approve", "caller", run="r1")
    w = one(w, "approve", "caller", run="r1")
    w = until(w, "resume:r1#1", "end")  # the first resume completes the run
    assert w.rows[0].status == "completed"
    assert [t.fault for t in enabled(w, "resume:r1#2") if t.name == "find_run"] == [None]


# -- 12.2 gate 2 and 12.3 input validation -------------------------------------------------
def test_without_the_config_key_every_approver_is_permitted():
    w = suspended(world())
    assert [str(t) for t in enabled(w, "caller")] == ["caller: approve(run=r1)"]


def test_with_the_key_an_approve_and_a_deny_come_both_ways():
    w = suspended(world(refusals=("ApproverNotPermitted",)))
    assert sorted(str(t) for t in enabled(w, "caller")) == [
        "caller: approve(permitted=False, run=r1)", "caller: approve(run=r1)"]
    w = suspended(world(refusals=("ApproverNotPermitted",), decisions=("deny",)))
    assert sorted(str(t) for t in enabled(w, "caller")) == [
        "caller: deny(permitted=False, run=r1)", "caller: deny(run=r1)"]


def test_gate2_refuses_a_write_turn_after_the_claim_and_releases_the_run():
    w = suspended(world(refusals=("ApproverNotPermitted",)))
    w = one(w, "approve", "caller", permitted=False, run="r1")
    w = until(w, "resume:r1#1", "end")
    row = w.rows[0]
    assert (row.status, row.claimed_by, row.lease_expires, row.suspended_state) == (
        "waiting_for_approval", "", 0, 0)
    assert row.epoch == 2  # it was claimed (T7), then released (T6)
    assert w.outcomes[-1][3] == "ApproverNotPermitted"
    assert w.ledger == () and [e.kind for e in w.events] == ["request", "llm"]


def test_a_denial_skips_gate2_and_completes_the_denied_turn():
    # RUNTIME 12.2 step 8 (as corrected): only an approval is checked; a denial passes gate 1
    # and skips gates 2 and 3, since it executes nothing
    w = suspended(world(refusals=("ApproverNotPermitted",), decisions=("deny",)))
    plain = until(one(w, "deny", "caller", run="r1"), "resume:r1#1", "end")
    w = until(one(w, "deny", "caller", permitted=False, run="r1"), "resume:r1#1", "end")
    assert w == plain  # the approver's scope does not matter to a denial
    assert w.rows[0].status == "completed" and w.ledger == ()
    assert "ApproverNotPermitted" not in [o[3] for o in w.outcomes]
    assert [e.kind for e in w.events][:4] == ["request", "llm", "approval", "tool"]


def test_input_validation_refuses_before_the_probe_and_the_claim():
    w = world(tools=[{"name": "ask_editor", "needs_input": True}], decisions=("input",),
              plan=[{"tools": ["ask_editor"]}, {"final": "completed"}],
              refusals=("InvalidInputSubmission", "ApproverNotPermitted"))
    w = one(w, "start_run", "caller", run="r1")
    w = until(w, "caller:r1", "end")
    assert w.rows[0].status == "waiting_for_input"
    assert sorted(str(t) for t in enabled(w, "caller")) == [
        "caller: submit_input(run=r1)", "caller: submit_input(run=r1, valid=False)"]
    before = w.rows[0]
    w = one(w, "submit_input", "caller", run="r1", valid=False)
    w = one(w, "find_run", "resume:r1#1", run="r1")  # loaded, checked, validated: refused
    assert w.proc("resume:r1#1") is None
    assert w.rows[0] == before  # nothing claimed: the epoch as it was, no lease
    assert w.outcomes[-1][3] == "InvalidInputSubmission"
    assert [e.kind for e in w.events] == ["request", "llm"]


@pytest.mark.parametrize("decision", ["approve", "deny", "input"])
def test_a_gone_configuration_refuses_before_the_claim(decision):
    kw = {"decisions": (decision,)}
    if decision == "input":
        kw.update(tools=[{"name": "ask_editor", "needs_input": True}],
                  plan=[{"tools": ["ask_editor"]}, {"final": "completed"}])
    w = world(refusals=("ConfigurationGone",), **kw)
    w = until(one(w, "start_run", "caller", run="r1"), "caller:r1", "end")
    name = {"approve": "approve", "deny": "deny", "input": "submit_input"}[decision]
    assert f"caller: {name}(configured=False, run=r1)" in [str(t) for t in enabled(w, "caller")]
    before = w.rows[0]
    w = one(w, name, "caller", configured=False, run="r1")
    w = one(w, "find_run", "resume:r1#1", run="r1")
    assert w.proc("resume:r1#1") is None and w.rows[0] == before
    assert w.outcomes[-1][3] == "ConfigurationGone"


def test_a_bad_refusal_name_is_one_config_line():
    with pytest.raises(ConfigError, match=r"model.refusals: 'AccessDenied' is not a refusal"):
        world(refusals=("AccessDenied",))


def test_the_checker_reaches_both_branches_where_the_config_enables_them():
    """Breadth-first over the gate-2 configuration: the refused and the permitted approval
    both occur, and a run refused once is completed by a later permitted approval."""
    w0 = world(refusals=("ApproverNotPermitted",), decisions=("approve", "approve"))
    seen = {w0}
    q = deque([w0])
    outcomes: set[tuple[str, ...]] = set()
    while q:
        w = q.popleft()
        for t in enabled(w):
            w2 = apply(w, t)
            if w2 not in seen:
                seen.add(w2)
                q.append(w2)
        outcomes.add(tuple(o[3] for o in w.outcomes))
    assert ("AWAITING_APPROVAL", "ApproverNotPermitted", "COMPLETED") in outcomes
    assert ("AWAITING_APPROVAL", "COMPLETED") in outcomes
    assert ("AWAITING_APPROVAL", "ApproverNotPermitted", "ApproverNotPermitted") in outcomes


def test_a_trace_with_a_refused_request_round_trips_through_a_scenario_file():
    from failclosed.cli.scenario_writer import dump_scenario
    from failclosed.model.scenario import replay, scenario_from_dict

    data = {"policy": "current", "model": {"refusals": ["ApproverNotPermitted"]},
            "tools": [{"name": "update_page_metadata"}],
            "runs": [{"id": "r1", "entry": "interactive", "decisions": ["approve"],
                      "plan": [{"tools": ["update_page_metadata"]}, {"final": "completed"}]}]}
    w = load_world(data)
    steps = []
    for actor, name, args in (("caller", "start_run", {"run": "r1"}),):
        t = next(t for t in enabled(w, actor) if t.name == name and dict(t.args) == args)
        steps.append(t)
        w = apply(w, t)
    while w.proc("caller:r1") is not None:
        t = next(t for t in enabled(w, "caller:r1") if t.fault is None and t.name != "crash")
        steps.append(t)
        w = apply(w, t)
    t = next(t for t in enabled(w, "caller") if t.arg("permitted") is False)
    steps.append(t)
    w = apply(w, t)
    while w.proc("resume:r1#1") is not None:
        t = next(t for t in enabled(w, "resume:r1#1") if t.fault is None and t.name != "crash")
        steps.append(t)
        w = apply(w, t)
    text = dump_scenario(data, steps, {"outcomes": [{"outcome": "ApproverNotPermitted"}]})
    assert "permitted = false" in text
    import tomllib

    res = replay(scenario_from_dict(tomllib.loads(text)))
    assert res.ok, (res.stopped, [str(f) for f in res.failures])
    assert res.world == w


def test_a_fault_ops_entry_must_be_a_statement_a_store_error_can_hit():
    with pytest.raises(ConfigError, match=r"model.fault_ops: 'renw_lease' is not a statement a store_error can hit; "
                                          r"did you mean 'renew_lease'\?"):
        parse_config({"model": {"fault_ops": ["renw_lease"]}, "runs": [{"id": "r1"}]})
    with pytest.raises(ConfigError, match=r"'record_step' is not a statement a store_error can hit"):
        parse_config({"model": {"fault_ops": ["record_step"]}, "runs": [{"id": "r1"}]})


# -- RUNTIME 14.5, read from the document (not from model.config's table) -------------------
def _runtime_builtin_writers() -> dict[str, str]:
    """The table of docs/RUNTIME.md 14.5: builtin writer -> the effect it declares."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "RUNTIME.md").read_text()
    section = text[text.index("### 14.5"):]
    section = section[:section.index("\n---")]
    rows = re.findall(r"^\| `(\w+)` \| `(\w+)` \|", section, re.M)
    assert len(rows) == 7, rows  # the table as RUNTIME 14.5 lists it
    return dict(rows)


def test_each_builtin_writer_declares_the_effect_runtime_14_5_lists():
    listed = _runtime_builtin_writers()
    assert BUILTIN_WRITERS == listed
    spec, _ = parse_config({"runs": [{"id": "r1", "plan": [{"tools": list(listed)}]}]})
    for name, effect in listed.items():
        assert resolve_by_name(spec, frozenset(), name) == effect, name
        # a table that names the builtin with another effect contradicts the runtime
        other = "idempotent_write" if effect == "non_idempotent_write" else "non_idempotent_write"
        with pytest.raises(ConfigError, match=f"builtin writer that declares {effect}"):
            parse_config({"tools": [{"name": name, "effect": other}], "runs": [{"id": "r1"}]})


EVERY_BUILTIN = {
    "model": {"read_only_builtins": ["get_page_tree"]},
    "runs": [{"id": "r1", "entry": "interactive", "decisions": ["approve"],
              "plan": [{"tools": [*_runtime_builtin_writers(), "get_page_tree"]},
                       {"final": "completed"}]}],
}


def test_a_run_calling_every_builtin_writes_each_once_with_its_effect_and_fenced():
    """One turn calling every builtin writer and a read-only builtin, no table declaring any
    (the default registry): the turn suspends (14.4 rule 5), the approved resume runs each
    call once, each write with the effect 14.5 lists, under a fence (T5 stamped before it:
    ADR-141); the read-only builtin is called too and lands no write in the ledger."""
    listed = _runtime_builtin_writers()
    w = suspended(load_world(EVERY_BUILTIN))
    w = until(one(w, "approve", "caller", run="r1"), "resume:r1#1", "end")
    assert w.rows[0].status == "completed"
    assert [(a.tool, a.effect, a.fenced) for a in w.ledger] == [
        (n, e, True) for n, e in listed.items()]
    assert [e.tool for e in w.events if e.kind == "tool"] == [*listed, "get_page_tree"]


def test_the_checker_finds_nothing_wrong_with_every_builtin_called():
    from failclosed.spec.checker import ConfigPart, check

    data = {**EVERY_BUILTIN, "model": {**EVERY_BUILTIN["model"], "faults": ["pause", "store_error"],
                                       "fault_budget": 1}}
    res = check("current", ConfigPart("every-builtin", "", data), None, witnesses=False,
                coverage=False)
    assert res.complete
    assert [n for n, r in res.properties.items() if not r.holds] == []


# -- 12.2 gate 2: a name no table declares counts as a write -------------------------------
def _gate2_world(calls: list[str]) -> World:
    """A turn that suspends only by an explicit approval marker on a read-only tool (14.4
    rule 2) and calls ``calls`` after it (names no catalogue knows); gate 2's refusal
    explored."""
    return load_world({
        "model": {"refusals": ["ApproverNotPermitted"], "unknown_tools": ["stale_tool"]},
        "tools": [{"name": "lookup_page", "approval": True}],
        "runs": [{"id": "r1", "entry": "interactive", "decisions": ["approve"],
                  "plan": [{"tools": ["lookup_page", *calls]}, {"final": "completed"}]}]})


def test_gate2_counts_a_name_declared_nowhere_as_a_write():
    """RUNTIME 12.2: "an unknown name ... counts as a write". The turn's only other call is a
    name no catalogue knows (``model.unknown_tools``): gate 2 refuses the approver who may
    not run writes, and the run goes back to waiting; without that call the turn declares no
    write and the same approver's approval runs it."""
    w = until(one(suspended(_gate2_world(["stale_tool"])), "approve", "caller",
                  permitted=False, run="r1"), "resume:r1#1", "end")
    assert w.outcomes[-1][3] == "ApproverNotPermitted"
    assert w.rows[0].status == "waiting_for_approval" and w.ledger == ()

    w = until(one(suspended(_gate2_world([])), "approve", "caller", permitted=False, run="r1"),
              "resume:r1#1", "end")
    assert w.rows[0].status == "completed"
    assert "ApproverNotPermitted" not in [o[3] for o in w.outcomes]
