"""Unit tests of model/ modules: the rules docs/RUNTIME.md states, checked one by one on
small inputs whose answer it gives (the searches and the simulator reach them only
through whole explorations). Written to kill the mutants docs/MUTATION.md lists."""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path

import pytest
from failclosed.model import (
    PRESETS,
    SWITCHES,
    ConfigError,
    GuardFailed,
    Transition,
    UnknownPolicy,
    apply,
    classify,
    enabled,
    load_world,
    names,
    parse_config,
    parse_policy,
    read_toml,
    rules,
    steps,
    store,
    vocab,
)
from failclosed.model.constants import Constants
from failclosed.model.scenario import SCENARIO_DIR, replay, scenario_from_dict, world_dict
from failclosed.model.state import CANCELLED, QUEUED, REASONS, RUNNING, Proc, Row, replace

STANDARD = read_toml(str(Path(__file__).parent / "data" / "standard.toml"))


def spec_with(policy: str, **remote_writer):
    """The standard configuration under ``policy``, its remote tool changed by ``remote_writer``
    (``server_flag=None``: the key left out, no operator declaration)."""
    data = copy.deepcopy(STANDARD)
    tool = next(t for t in data["tools"] if t["name"] == "remote_writer")
    for k, v in remote_writer.items():
        if v is None:
            tool.pop(k, None)
        else:
            tool[k] = v
    return parse_config(data, policy)[0]


# -- RUNTIME 14.4: does calling the tool suspend the run? -----------------------------------
@pytest.mark.parametrize(("flag", "bound"), [(1, True), (0, False), (None, False)])
def test_a_remote_tool_needs_approval_only_when_its_server_declares_flag_1(flag, bound):
    """Rules 3 and 4: a remote tool's operator declaration decides (only 0 turns it off); with
    no declaration, no approval whatever its effect."""
    for policy in ("current", "adr-134"):
        spec = spec_with(policy, server_flag=flag)
        assert rules.approval_bound(spec, frozenset(), "remote_writer") is bound, policy


def test_an_unknown_or_removed_tool_needs_no_approval_and_resolves_to_a_write():
    spec = spec_with("current", server_flag=1)
    assert rules.approval_bound(spec, frozenset({"remote_writer"}), "remote_writer") is False
    assert rules.approval_bound(spec, frozenset(), "no_such_tool") is False
    assert rules.resolve_by_name(spec, frozenset({"lookup"}), "lookup") == "non_idempotent_write"


# -- RUNTIME 12.2: a turn declares a write ---------------------------------------------------
def test_without_a_resolver_every_turn_declares_a_write():
    """Before ADR-111 (no ``tool_effect``) every call counts as a write, even a read or none;
    with the resolver, a turn is a write exactly when a call resolves by name to one."""
    before = spec_with("adr-104")
    assert not before.policy.tool_effect
    assert rules.write_turn(before, frozenset(), ("lookup",)) is True
    assert rules.write_turn(before, frozenset(), ()) is True
    after = spec_with("current")
    assert rules.write_turn(after, frozenset(), ("lookup",)) is False
    assert rules.write_turn(after, frozenset(), ("lookup", "update_page_metadata")) is True
    assert rules.write_turn(after, frozenset({"lookup"}), ("lookup",)) is True  # removed: a write


# -- RUNTIME 2: which termination reasons may be retried ------------------------------------
def test_only_a_provider_failure_is_retryable():
    """Of the termination reasons, ``provider_failed`` alone (a dead-letter reason, a denial,
    a cancel or a completion is final)."""
    assert [r for r in REASONS if rules.is_retryable(r)] == ["provider_failed"]


# -- the store statements (RUNTIME 4.1) ------------------------------------------------------
def standard_world(policy: str = "current"):
    return load_world(STANDARD, policy)


def test_cancel_writes_what_t13_lists_and_keeps_the_fence_and_the_count():
    """T13 is T8 with no owner: status and reason ``cancelled``, ``error_class=''``, the T8
    clears (no suspended turn, no queued request, no claim, no lease); ``pending_effect`` and
    ``requeue_count`` are kept."""
    w = standard_world()
    held = Row(status=RUNNING, claimed_by="w1", lease_expires=900, pending_effect="idempotent_write",
               requeue_count=2, queued_request=True, suspended_state=1, error_class="serverError")
    w2, ok = store.cancel(w.set_row(0, held), 0)
    assert ok
    row = w2.rows[0]
    assert (row.status, row.termination_reason, row.error_class) == (CANCELLED, "cancelled", "")
    assert (row.suspended_state, row.queued_request, row.claimed_by, row.lease_expires) == (-1, False, "", 0)
    assert (row.pending_effect, row.requeue_count) == ("idempotent_write", 2)


def test_a_requeue_by_a_segment_whose_claim_was_taken_over_is_recorded_as_a_zombie_settle():
    """T9 under the owner guard: a segment of the same worker that claimed an earlier epoch
    of the row still matches the guard; the model records that mutation (the ghost mark the
    properties read), and none for the segment holding the current claim."""
    w = standard_world().set_row(0, Row(status=RUNNING, claimed_by="w1", lease_expires=900, epoch=2))
    old = Proc(name="w1", kind="worker", run=0, pc="loop", epoch=1)
    w2, ok = store.requeue(w, 0, "w1", old)
    assert ok and w2.rows[0].status == QUEUED
    assert f"zombie_settle:{w.run_id(0)}" in w2.marks
    w3, ok = store.requeue(w, 0, "w1", replace(old, epoch=2))
    assert ok and not w3.marks


def test_without_the_terminal_guard_a_settle_or_cancel_overwrites_a_terminal_row_and_says_so():
    """The counterfactual ``terminal_guard`` off (before ADR-092): T8 and T13 match a terminal
    row, overwrite it and record the overwrite (the fact the properties read); with the guard
    they do not match and nothing changes."""
    done = Row(status="completed", termination_reason="completed")
    off = standard_world("current-terminal_guard").set_row(0, done)
    w2, ok = store.finish_run(off, 0, "failed", "provider_failed", "serverError")
    assert ok and (w2.rows[0].status, w2.rows[0].error_class) == ("failed", "serverError")
    assert f"terminal_overwritten:{off.run_id(0)}" in w2.marks
    w3, ok = store.cancel(off, 0)
    assert ok and w3.rows[0].status == CANCELLED
    assert f"terminal_overwritten:{off.run_id(0)}" in w3.marks
    on = standard_world("current").set_row(0, done)
    assert store.finish_run(on, 0, "failed", "provider_failed", "serverError") == (on, False)
    assert store.cancel(on, 0) == (on, False)


# -- the runtime's enabled moves (model/runtime.py) ------------------------------------------
def _stale_pair(w):
    """``w`` at time 10 with runs q1 and q2 (slots 0 and 3) RUNNING on leases that lapsed at
    the same instant."""
    held = [Row(status=RUNNING, claimed_by=c, lease_expires=5) for c in ("w8", "w9")]
    return replace(w.set_row(0, held[0]).set_row(3, held[1]), clock=10)


def test_a_reaper_tick_over_tied_stale_rows_may_return_them_in_either_order():
    """T10 orders stale rows by ``lease_expires`` with no order among equals: each order is
    its own move, and the idle reaper may crash; ``one_order`` lists the first order only (ties
    by slot), the simulator's choice."""
    w = _stale_pair(standard_world())
    every = [str(t) for t in enabled(w, "reaper")]
    assert every == ["reaper: find_stale_running(order=q1,q2)", "reaper: find_stale_running(order=q2,q1)",
                     "reaper: find_stale_running(fault=store_error)",
                     "reaper: find_stale_running(fault=decode_error)", "reaper: crash()"]
    one = [str(t) for t in enabled(w, "reaper", one_order=True)]
    assert one == [every[0]] + every[2:]


def test_time_never_moves_past_the_horizon():
    """A lease lapsing at 901 is an instant time may move to, unless the horizon is earlier."""
    held = Row(status=RUNNING, claimed_by="w1", lease_expires=900)
    free = standard_world().set_row(0, held)
    assert [t.arg("to") for t in enabled(free, "clock")] == [901]
    data = copy.deepcopy(STANDARD)
    data["model"]["horizon"] = 100
    bounded = load_world(data).set_row(0, held)
    assert [t for t in enabled(bounded, "clock")] == []


def test_a_transition_that_is_not_enabled_is_refused_with_the_reason():
    """``apply`` names why: what the process would do next, or what a worker's pick-up needs."""
    w = apply(standard_world(), Transition("enqueue_run", "caller", (("run", "q1"),)))
    with pytest.raises(GuardFailed) as e:
        apply(w, Transition("claim_queued", "enqueue:q1", (("run", "q1"),)))
    assert e.value.guard == "enqueue:q1 is at 'dispatch'; its next step is crash or dispatch"
    with pytest.raises(GuardFailed) as e:
        apply(standard_world(), Transition("run_queued", "w1", (("run", "q1"),)))
    assert e.value.guard == "a free worker and a deliverable message (not_before <= now) for that run"


# -- names (model/names.py) -----------------------------------------------------------------
def test_labels_name_every_fault_branch_and_each_provider_class():
    """A transition's label, then one ``name[fault]`` per fault it may take; the provider's
    fault is spelled by failure class, one label per class the configuration lists."""
    out = names.labels(("rateLimit", "auth"))
    assert all(isinstance(x, str) for x in out)
    assert {"find_run", "find_run[store_error]", "find_run[decode_error]"} <= set(out)
    assert {"provider_call[rateLimit]", "provider_call[auth]"} <= set(out)
    assert not [x for x in out if "provider_error" in x]
    assert not [x for x in names.labels() if x.startswith("provider_call[")]


def test_a_resume_segment_is_numbered_after_its_last_hash():
    assert names.resume_number(names.resume_process("q1", 3)) == 3
    assert names.resume_number(names.resume_process("batch#7", 2)) == 2  # a '#' in the run id
    assert names.resume_number("w1") is None


def test_an_identity_names_the_process_that_holds_it():
    assert names.identity_process(names.worker_identity("w2")) == "w2"
    # on the sync transport the dispatching process claims: its name has a colon of its own
    assert names.identity_process(names.worker_identity("enqueue:q1")) == "enqueue:q1"
    assert names.identity_process(names.caller_identity("i1")) == names.caller_process("i1")
    assert names.identity_process("resume:q1#1") == "resume:q1#1"  # a resume is its own identity
    assert names.identity_process("w1") == "w1"


# -- policies (model/policy.py) -------------------------------------------------------------
def test_an_unknown_switch_is_refused_by_name_with_the_switches_to_use():
    with pytest.raises(UnknownPolicy) as e:
        parse_policy("adr-141+no_such_switch")
    msg = str(e.value)
    assert "'no_such_switch'" in msg and "use one of" in msg
    assert all(s in msg for s in SWITCHES)
    with pytest.raises(KeyError) as k:
        PRESETS["current"].with_(no_such_switch=True)
    assert k.value.args == ("no_such_switch",)


# -- concrete errors (model/classify.py) ----------------------------------------------------
def test_a_configuration_error_keeps_its_spelling():
    assert classify.parse_error("missing_api_key") == classify.ProviderConfigurationError("missing_api_key")
    assert classify.spell(classify.parse_error("unknown_model")) == "unknown_model"


@pytest.mark.parametrize(("text", "message"), [
    (5, 'expected an error name such as "http_503", got 5'),
    ("zzzz", "'zzzz' is not an error this model knows; use http_<status>, auth_<status>, "
             "rate_limit_<status>, circuit_open, timeout, connect_timeout, read_timeout, ..., "
             "provider_configuration or fallback(e1, e2)"),
    ("fallbak(http_503, timeout)", "'fallbak(http_503, timeout)' is not an error this model knows; "
                                   "did you mean 'fallback(http_503, timeout)'?"),
    ("circuit_opn", "'circuit_opn' is not an error this model knows; did you mean 'circuit_open'?"),
])
def test_an_unknown_error_name_is_refused_with_a_hint(text, message):
    with pytest.raises(classify.BadError) as e:
        classify.parse_error(text)
    assert str(e.value) == message


# -- configuration errors (model/config.py): one line naming the field and the fix ----------
def _model(key, value):
    return lambda d: d["model"].__setitem__(key, value)


@pytest.mark.parametrize(("change", "message"), [
    (_model("fault_ops", "find_run"), "model.fault_ops: expected a list of statement names, got 'find_run'"),
    (lambda d: d["runs"][0].__setitem__("decisions", "approve"),
     "runs[0].decisions: expected a list of approve | deny | input, got 'approve'"),
    (lambda d: d.__setitem__("tools", {}), "tools: expected an array of [[tools]] tables, got {}"),
    (_model("workers", 0), "model.workers: must be >= 1, got 0"),
    (_model("workers", ["a", 3]), "model.workers[]: expected a name, got 3"),
    (lambda d: d.pop("runs"), "runs: at least one [[runs]] table is needed"),
])
def test_a_bad_configuration_is_one_error_naming_the_field_and_the_fix(change, message):
    data = copy.deepcopy(STANDARD)
    change(data)
    with pytest.raises(ConfigError) as e:
        parse_config(data)
    assert str(e.value) == message


def test_a_tool_is_not_removable_unless_it_says_so():
    spec = parse_config(STANDARD)[0]
    assert [t.name for t in spec.tools if t.removable is True] == ["remote_writer"]
    assert all(t.removable is False for t in spec.tools if t.name != "remote_writer")


# -- scenarios (model/scenario.py): the files' errors and the world a failed replay shows ----
_RUN = {"id": "r1", "entry": "queued"}


@pytest.mark.parametrize(("extra", "message"), [
    ({"messages": [{"run": "r1", "not_before": "x"}]},
     "messages[0].not_before: expected an integer >= 0, got 'x'"),
    ({"messages": [{"run": "r1", "not_befor": 1}]},
     "messages[0].not_befor: unknown key; did you mean 'not_before'?"),
    ({"runs": [{**_RUN, "events": [{"kind": "tool", "tool": "lookup", "call": -1}]}]},
     "runs[0].events[0].call: expected an integer >= 0, got -1"),
    ({"steps": [{"do": "enqueue_run", "acter": "caller", "run": "r1"}]},
     "steps[1].acter: unknown key; did you mean 'actor'?"),
    ({"steps": [{"store": "find_stale_running", "now": 0, "limit": 0}]},
     "steps[1].limit: expected an integer >= 1, got 0"),
])
def test_a_bad_scenario_is_one_error_naming_the_field(extra, message):
    with pytest.raises(ConfigError) as e:
        scenario_from_dict({"runs": [_RUN], **extra})
    assert str(e.value) == message


def test_a_store_step_may_read_at_time_zero():
    s = scenario_from_dict({"runs": [_RUN], "steps": [{"store": "find_stale_running", "now": 0, "limit": 1}]})
    assert s.steps[0].args == {"now": 0, "limit": 1}


def _walk(w, *moves):
    for m in moves:
        w = apply(w, next(t for t in enabled(w) if str(t) == m))
    return w


def test_the_world_a_failed_replay_shows_names_every_part():
    """``world_dict`` (the ``world`` of a failed replay's JSON): the events, the processes and
    the reaper's snapshot, each field under the name the scenario files use."""
    picked = _walk(standard_world(), "caller: enqueue_run(run=q1)", "enqueue:q1: dispatch(run=q1)",
                   "w1: run_queued(not_before=0, run=q1)")
    # before its claim a worker's segment is the worker process itself
    assert [(p["name"], p["seg"]) for p in world_dict(picked)["procs"]] == [("w1", "w1")]
    w = _walk(picked, "w1: claim_queued(run=q1)",
              "w1: max_sequence(run=q1)", "w1: find_run(run=q1)", "w1: renew_lease(run=q1)",
              "w1: record_step(run=q1, step=request)")
    d = world_dict(w)
    assert d["events"] == [{"run": "q1", "sequence": 0, "kind": "request", "turn": 0, "call": -1,
                            "tool": "", "seg": "w1/q1#1"}]
    assert [(p["name"], p["pc"], p["turn"], p["call"], p["handle"]) for p in d["procs"]] == [
        ("w1", "provider", 0, 0, 1)]
    stale = _walk(replace(standard_world().set_row(0, Row(status=RUNNING, claimed_by="w9", lease_expires=5)),
                          clock=10), "reaper: find_stale_running()")
    assert world_dict(stale)["reaper"] == {"pc": "row", "now": 10, "row": 0, "snapshot": [
        {"run": "q1", "pending_effect": "", "queued_request": False, "requeue_count": 0}],
        "overdue": []}


# -- scenario expectations (model/scenario_check.py): what a failed expectation says --------
def test_failed_expectations_say_what_was_expected_and_what_happened():
    """An enqueue caller that crashes after its insert never returns; no message waits; the
    order asked for is not the trace's: each expectation fails with its own line."""
    d = {"runs": [_RUN], "model": {"faults": ["crash"], "fault_budget": 1},
         "steps": [{"do": "enqueue_run", "actor": "caller", "run": "r1"}, {"do": "crash", "actor": "enqueue:r1"}],
         "expect": [{"messages": [{"run": "r1", "not_before": 3}],
                     "order": [{"do": "crash"}, {"do": "enqueue_run"}],
                     "enqueue": {"r1": {"returned": True}}}]}
    r = replay(scenario_from_dict(d))
    assert not r.ok
    assert [str(f) for f in r.failures] == [
        "final: messages: expected [{'run': 'r1', 'not_before': 3}], actual []",
        "final: order {do='crash'} -> {do='enqueue_run'}: expected \"{do='enqueue_run'} after trace entry 2\", "
        "actual '1 of 2 matched, at trace entries [2]'",
        "final: enqueue.r1.returned: expected True, actual False",
    ]
    d["expect"] = [{"order": [{"do": "dispatch"}]}]
    assert [str(f) for f in replay(scenario_from_dict(d)).failures] == [
        "final: order {do='dispatch'}: expected \"{do='dispatch'} fired\", actual '0 of 1 matched, at trace entries []'"]


def test_a_property_expected_to_hold_that_is_violated_fails_with_the_violation():
    import failclosed.spec.properties  # noqa: F401  (registers the property evaluator)

    d = tomllib.loads((SCENARIO_DIR / "sync-reaper-beside-zombie.toml").read_text(encoding="utf-8"))
    d["expect"][-1]["holds"] = d["expect"][-1].pop("violates")
    assert [str(f) for f in replay(scenario_from_dict(d)).failures] == [
        "final: holds 'no_zombie_append': expected 'holds', "
        "actual 'violated: run s1: a segment that lost its claim persisted a step'"]


def test_a_reaper_that_never_ticked_has_an_empty_snapshot():
    d = {"runs": [_RUN], "steps": [{"do": "enqueue_run", "actor": "caller", "run": "r1"}],
         "expect": [{"reaper": {"ticks": 0, "snapshot": [], "finished": None}}]}
    r = replay(scenario_from_dict(d))
    assert r.ok, [str(f) for f in r.failures]


def test_a_run_is_found_by_its_id_and_an_unknown_id_is_named():
    spec = standard_world().config
    assert [spec.run_index(r.id) for r in spec.runs] == list(range(len(spec.runs)))
    with pytest.raises(KeyError) as e:
        spec.run_index("no_such_run")
    assert e.value.args == ("no_such_run",)


# -- the step table (model/steps.py) --------------------------------------------------------
def test_a_transition_several_steps_fire_lists_the_places_of_all_of_them():
    """``find_run`` is the cancel probe, the recovery read and a resume's read: its places
    (docs/RUNTIME.md sections) are the union over the steps that fire it, in declaration
    order, joined by "; ", and its faults the union of theirs."""
    firing = [a for a in steps.steps() if "find_run" in a.fires]
    assert len(firing) > 1
    places: list[str] = []
    faults: list[str] = []
    for a in firing:
        places += [x for x in a.place.split("; ") if x not in places]
        faults += [f for f in a.faults if f not in faults]
    assert names.TRANSITIONS["find_run"] == ("; ".join(places), tuple(faults))


# -- the compiled form of the records (model/records.py) ------------------------------------
def test_a_ghost_field_keeps_its_positional_default_in_the_compiled_form():
    """``ghost(3)`` and ``ghost(default=3)`` both give the field the default 3 in the
    ``__init__`` mypyc compiles; ``ghost()``: none."""
    from failclosed.model import records

    src = ("from .records import Record, ghost, record\n\n\n@record\nclass P(Record):\n"
           "    a: int = ghost()\n    b: int = ghost(3)\n    c: int = ghost(default=4)\n")
    out = records.compiled_source(src)
    assert "def __init__(self, a: int, b: int = 3, c: int = 4) -> None:" in out


def test_every_preset_is_named_as_it_is_listed():
    assert [p.name for p in PRESETS.values()] == list(PRESETS)


def test_proposed_is_current_with_every_proposal_of_docs_proposals_on():
    """The ``proposed`` preset: the current runtime (ADR-172) with the switch of each proposal
    docs/PROPOSALS.md makes (``## Pn. ... (`switch`)``, or ``(`switch`, `switch`)`` for a
    proposal of two) turned on, and nothing else changed."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "PROPOSALS.md").read_text(encoding="utf-8")
    heads = re.findall(r"^## P\d+\. .*\(((?:`[a-z_]+`(?:, )?)+)\)$", text, flags=re.M)
    proposals = {s for h in heads for s in re.findall(r"`([a-z_]+)`", h)}
    assert len(proposals) >= 5
    base, prop = PRESETS["current"].switches(), PRESETS["proposed"].switches()
    assert {s for s in SWITCHES if base[s] != prop[s]} == proposals
    assert all(prop[s] for s in proposals)


def test_a_step_declared_at_run_time_names_its_transition_until_it_is_removed():
    """A step added after import (a recipe's) is in the vocabulary at once; deleted, its
    transition is gone again, whatever was declared or deleted before; at the end the table
    is what it was."""
    before = list(names.TRANSITIONS)
    saved = vocab.extensions()

    def declare(k: int) -> None:
        vocab.extend(vocab.Label, f"mutation_probe_{k}")  # the names first (model/vocab.py)
        vocab.extend(vocab.TransitionName, f"mutation_probe_{k}")
        steps.action(f"mutation_probe_{k}", fires=f"mutation_probe_{k}", cost=steps.NONE,
                     place="test")(lambda w, p, t: w)

    def declared() -> set[str]:
        return {n for n in names.TRANSITIONS if n.startswith("mutation_probe_")}

    try:
        declare(1)
        assert names.TRANSITIONS["mutation_probe_1"] == ("test", ())
        del steps.ACTIONS["mutation_probe_1"]
        declare(2)
        assert declared() == {"mutation_probe_2"}
        declare(3)
        assert declared() == {"mutation_probe_2", "mutation_probe_3"}
        del steps.ACTIONS["mutation_probe_2"]
        assert declared() == {"mutation_probe_3"}
        del steps.ACTIONS["mutation_probe_3"]
        assert declared() == set()
    finally:
        for k in (1, 2, 3):
            steps.ACTIONS.pop(f"mutation_probe_{k}", None)
        vocab.restore_extensions(saved)
    assert list(names.TRANSITIONS) == before


def test_a_scenario_made_from_a_table_has_no_path():
    assert scenario_from_dict({"runs": [_RUN]}).path == ""


# -- RUNTIME 9 step 7: the retry delay, past its cap ---------------------------------------
def test_the_retry_delay_doubles_from_its_base_and_stays_at_its_cap():
    """``min(30000 * 2^count, 600000)`` ms (RUNTIME 9 step 7, 2; ``count`` the requeue count read before the requeue): with the upstream constants
    the sixth requeue is the first the cap holds back, and every later one waits the cap."""
    k = Constants()
    assert [k.retry_delay_ms(c) for c in range(9)] == [
        30_000, 60_000, 120_000, 240_000, 480_000, 600_000, 600_000, 600_000, 600_000]
    assert [k.retry_delay_s(c) for c in range(7)] == [30, 60, 120, 240, 480, 600, 600]


def test_a_run_requeued_past_the_cap_is_dispatched_with_the_capped_delay():
    """A run whose provider keeps failing with a retryable class is requeued MAX_REQUEUES
    times; each dispatch waits ``min(base * 2^count, cap)``, ``count`` being the requeue
    count read before the requeue (RUNTIME 9 steps 5 to 7): with a base of 1 s and a cap of
    3 s, 1, 2, 3 and 3 seconds (4 s and 8 s are past the cap)."""
    from failclosed.model.config import initial_world
    from failclosed.model.runtime import successors

    data = {"constants": {"LEASE_SECONDS": 5, "MAX_REQUEUES": 4, "REQUEUE_BACKOFF_MS": 1000,
                          "REQUEUE_BACKOFF_CAP_MS": 3000},
            "runs": [{"id": "r1", "entry": "queued", "plan": [{"fail": "rateLimit"}]}]}
    spec, budget = parse_config(data, "current")
    w0 = initial_world(spec, budget)
    seen, todo, delays = {w0}, [w0], {}
    while todo:
        w = todo.pop()
        for t, w2 in successors(w):
            if t.name == "dispatch" and t.arg("delay") is not None:
                # after the requeue the row's count is the one read before it, plus one
                delays.setdefault(w2.rows[0].requeue_count - 1, set()).add(t.arg("delay"))
                assert [m.not_before - w2.clock for m in w2.messages] == [t.arg("delay")]
            if w2 not in seen:
                seen.add(w2)
                todo.append(w2)
    assert delays == {0: {1}, 1: {2}, 2: {3}, 3: {3}}
