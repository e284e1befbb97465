"""Scenario files: every shipped scenario replays green, historical pairs exist, bad files exit 2."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from failclosed.cli import main  # noqa: E402
from failclosed.cli.replay import shipped  # noqa: E402
from failclosed.cli.scenario_writer import dump_scenario  # noqa: E402
from failclosed.model.scenario import (  # noqa: E402
    SCENARIO_DIR,
    load_scenario,
    replay,
    scenario_from_dict,
)
from failclosed.model.transition import Transition  # noqa: E402

SHIPPED = shipped()
HISTORICAL = [
    "hist-16.1-terminal-overwrite", "hist-16.4-zombie-append", "hist-16.5-zombie-settle",
    "hist-16.8-crash-during-write", "hist-16.8-outlives-lease", "hist-16.10-unrecorded-write",
    "hist-16.12-abandoned-worker", "hist-16.12-abandoned-sync", "hist-16.16-resurrection",
]


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_scenario_replays(path: Path) -> None:
    res = replay(load_scenario(path))
    assert res.ok, (res.stopped, [str(f) for f in res.failures])
    assert res.checked > 0, "a scenario must assert something"


@pytest.mark.parametrize("stem", HISTORICAL)
def test_historical_pair_differs_in_policy(stem: str) -> None:
    red, green = SCENARIO_DIR / f"{stem}.red.toml", SCENARIO_DIR / f"{stem}.green.toml"
    assert red.exists() and green.exists()
    r, g = load_scenario(red), load_scenario(green)
    assert r.world.config.policy.switches() != g.world.config.policy.switches()


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return str(p)


BASE = '[[runs]]\nid = "r1"\n'


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (BASE + 'polcy = "current"\n', "polcy"),
        (BASE + '[[steps]]\ndo = "enqueue_run"\nactor = "caller"\nrun = 3.5\n', "steps[1].run"),
        ('[constants]\nLEASE_SECONDS = -5\n' + BASE, "LEASE_SECONDS"),
        ('policy = "adr-999"\n' + BASE, "policy"),
        (BASE + '[[steps]]\ndo = "enqueue_rnu"\n', "enqueue_run"),
        (BASE + '[expect]\nrows.r9 = { status = "failed" }\n', "r9"),
        (BASE + '[expect]\nrows.r1 = { stauts = "failed" }\n', "status"),
        (BASE + "[[steps]\n", "not valid TOML"),
    ],
)
def test_malformed_file_exits_2_with_one_line(tmp_path, capsys, text: str, needle: str) -> None:
    assert main(["replay", _write(tmp_path, text)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert needle in err


def test_guard_failure_names_guard_and_enabled(tmp_path, capsys) -> None:
    text = BASE + '[[steps]]\ndo = "claim_queued"\nactor = "w1"\nrun = "r1"\n'
    assert main(["replay", _write(tmp_path, text)]) == 1
    out = capsys.readouterr().out
    assert "guard does not hold" in out
    assert "enabled at that point" in out and "enqueue_run" in out


def test_failed_expectation_exit_1_expected_vs_actual(tmp_path, capsys) -> None:
    text = BASE + '[[steps]]\ndo = "enqueue_run"\nactor = "caller"\nrun = "r1"\n' \
        '[expect]\nrows.r1 = { status = "failed" }\n'
    assert main(["replay", _write(tmp_path, text)]) == 1
    out = capsys.readouterr().out
    assert "expected 'failed', actual 'queued'" in out


def test_json_output(tmp_path, capsys) -> None:
    assert main(["replay", "--json", str(SHIPPED[0])]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and data["steps"]


def test_replay_all_table(capsys) -> None:
    assert main(["replay", "--all"]) == 0
    assert f"{len(SHIPPED)}/{len(SHIPPED)} scenarios pass" in capsys.readouterr().out


def test_dump_load_round_trip() -> None:
    sc = load_scenario(SCENARIO_DIR / "hist-16.5-zombie-settle.red.toml")
    res = replay(sc)
    steps = [s.transition for s in res.steps]
    steps[3] = (steps[3], {"rows": {"r1": {"status": "running"}}})
    exp = {"rows": {"r1": {"status": "failed", "termination_reason": "not_retryable"}},
           "marks": ["zombie_settle:r1"], "ledger": [{"count": 0}]}
    data = dict(sc.data, description='quotes " and \\ survive\nnewlines too')
    text = dump_scenario(data, steps, exp)
    parsed = tomllib.loads(text)
    again = scenario_from_dict(parsed)
    assert again.description == data["description"]
    assert again.world.config == sc.world.config
    res2 = replay(again)
    assert res2.ok, (res2.stopped, [str(f) for f in res2.failures])
    assert [s.transition for s in res2.steps] == [t if isinstance(t, Transition) else t[0] for t in steps]
    assert res2.world == res.world


def test_holds_and_violates_name_spec_properties(tmp_path, capsys) -> None:
    """A scenario can assert a property by name; an unknown name is bad input."""
    ok = BASE + '[expect]\nholds = ["no_zombie_settle", "terminal_is_absorbing"]\n'
    assert main(["replay", _write(tmp_path, ok)]) == 0
    bad = BASE + '[expect]\nholds = ["no_such_property"]\n'
    assert main(["replay", _write(tmp_path, bad)]) in (1, 2)


# -----------------------------------------------------------------------------------------
# issue 10: what writing regression cases from the runtime's own tests needed
# -----------------------------------------------------------------------------------------
def _replay_text(tmp_path, text: str):
    return replay(load_scenario(_write(tmp_path, text)))


def _err(capsys, tmp_path, text: str) -> str:
    """Replay a malformed file through the CLI: exit 2, one line, no traceback."""
    assert main(["replay", _write(tmp_path, text)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


SEEDED = '''[[tools]]
name = "lookup"

[[runs]]
id = "r1"

[runs.row]
status = "queued"
queued_request = true

[[runs.events]]
kind = "request"

[[runs.events]]
kind = "tool"
sequence = 4
turn = 1
tool = "lookup"
seg = "w9/r1#1"

[[runs]]
id = "r2"

[[runs.events]]
kind = "llm"
sequence = 2
'''


def test_seeded_event_stream_is_the_initial_stream(tmp_path) -> None:
    from failclosed.model.state import Event

    sc = load_scenario(_write(tmp_path, SEEDED))
    assert sc.world.events == (
        Event(0, 0, "request", 0, -1, "", "seed"),
        Event(0, 4, "tool", 1, 0, "lookup", "w9/r1#1"),
        Event(1, 2, "llm", 0, -1, "", "seed"),
    )
    # the same world after a dump and a reload: dump_scenario writes [[runs.events]]
    text = dump_scenario(sc.data, [])
    assert "[[runs.events]]" in text
    assert scenario_from_dict(tomllib.loads(text)).world == sc.world


def test_seeded_stream_sets_the_claimed_handle(tmp_path) -> None:
    """3.2: the worker's handle is max(stored sequence) + 1 of the seeded stream."""
    text = 'messages = [{ run = "r1" }]\n' + SEEDED + (
        '\n[[steps]]\ndo = "run_queued"\nactor = "w1"\nrun = "r1"\n'
        '\n[[steps]]\nactor = "w1"\nuntil = "end"\n'
        '\n[expect]\nevents.r1 = { sequences = [0, 4, 5, 6] }\n')
    res = _replay_text(tmp_path, text)
    assert res.ok, (res.stopped, [str(f) for f in res.failures])


@pytest.mark.parametrize(
    ("event", "needle"),
    [
        ('kind = "tool_call"', "runs[0].events[0].kind: 'tool_call'; use one of request"),
        ('kind = "tool"', "runs[0].events[0].tool: missing"),
        ('kind = "llm"\ntool = "lookup"', "runs[0].events[0].tool: only a tool event"),
        ('kind = "llm"\nsequence = -1', "runs[0].events[0].sequence: expected an integer >= 0"),
        ('kind = "llm"\nsequnce = 1', "runs[0].events[0].sequnce: unknown key; did you mean 'sequence'"),
        ('kind = "llm"\nseg = ""', "runs[0].events[0].seg: expected a non-empty string"),
    ],
)
def test_seeded_event_errors_name_the_field(tmp_path, capsys, event: str, needle: str) -> None:
    err = _err(capsys, tmp_path, f'[[runs]]\nid = "r1"\n\n[[runs.events]]\n{event}\n')
    assert needle in err


STORE_BASE = '''policy = "{policy}"

[[runs]]
id = "r1"

[runs.row]
status = "running"
claimed_by = "worker:w1"
lease_expires = 500
'''


def test_store_step_runs_the_models_statement_under_the_policy(tmp_path) -> None:
    """A store step is the model's own T4: a renewal by another identity fails under the
    current owner guard and matches under the mutant whose guard ignores claimed_by."""
    step = '\n[[steps]]\nstore = "renew_lease"\nrun = "r1"\nowner = "worker:w2"\n'
    for policy, matched in (("current", False), ("current+mutant_owner_guard_ignores_claim", True)):
        res = _replay_text(tmp_path, STORE_BASE.format(policy=policy) + step)
        (s,) = res.steps
        assert s.is_store and s.result is matched
        assert s.transition == Transition.make("renew_lease", "store", run="r1", owner="worker:w2")
        assert s.world.rows[0].lease_expires == (900 if matched else 500)  # now + LEASE_SECONDS


def test_store_step_result_expectation_and_defaults(tmp_path, capsys) -> None:
    text = STORE_BASE.format(policy="current") + '''
[[steps]]
store = "find_stale_running"
expect = { result = [] }

[[steps]]
store = "dead_letter_stale"
run = "r1"
reason = "retries_exhausted"
now = 901
expect = { result = true, rows.r1 = { status = "failed", termination_reason = "retries_exhausted" } }

[[steps]]
store = "find_run"
run = "r1"
expect = { result = { status = "failed", lease_expires = { "<" = 1 } } }

[[steps]]
store = "max_sequence"
run = "r1"
expect = { result = -1 }

[[steps]]
store = "cancel"
run = "r1"
expect = { result = true }
'''
    res = _replay_text(tmp_path, text)
    assert [str(f) for f in res.failures] == [
        "after step 5: result: expected True, actual False"]  # T13 on a terminal row
    assert res.steps[0].transition.args == (("limit", 50), ("now", 0))  # the defaults, spelled
    assert main(["replay", "-v", _write(tmp_path, text)]) == 1
    out = capsys.readouterr().out
    assert "store: cancel(run=r1) = False" in out


@pytest.mark.parametrize(
    ("step", "needle"),
    [
        ('store = "renew_lease"\nrun = "r1"', "steps[1].owner: missing; renew_lease (T4) needs run, owner"),
        ('store = "settle_failed"\nrun = "r1"', 'the settle wrappers are T8: use store = "finish_run"'),
        ('store = "renw_lease"\nrun = "r1"', "did you mean 'renew_lease'"),
        ('store = "cancel"\nrun = "r1"\nowner = "x"', "steps[1].owner: cancel (T13) takes run"),
        ('store = "finish_run"\nrun = "r1"\nstatus = "running"\nreason = "completed"',
         "steps[1].status: 'running'; T8 settles to one of"),
        ('store = "mark_pending_effect"\nrun = "r1"\nowner = "worker:w1"\neffect = "write"',
         "steps[1].effect: 'write'"),
        ('store = "cancel"\nrun = "r1"\nactor = "w1"', "steps[1].actor: a store statement runs directly"),
        ('do = "enqueue_run"\nactor = "caller"\nrun = "r1"\nexpect = { result = true }',
         "steps[1].expect.result: only a store"),
        ('do = "enqueue_run"\nactor = "caller"\nleased = true', "steps[1].leased: only a store"),
        ('store = "renew_lease"\nrun = "r1"\nowner = "w"\nexpect = { result = 3 }',
         "renew_lease returns true or false"),
    ],
)
def test_store_step_errors_name_the_field(tmp_path, capsys, step: str, needle: str) -> None:
    err = _err(capsys, tmp_path, BASE + f"\n[[steps]]\n{step}\n")
    assert needle in err


def test_comparisons_every_operator(tmp_path) -> None:
    """Each operator both ways on one world: a queued row after a requeue_count of 1."""
    head = BASE + '\n[runs.row]\nstatus = "queued"\nrequeue_count = 1\nclaimed_by = "worker:w1"\n'
    holds = [
        'requeue_count = { ">" = 0 }', 'requeue_count = { ">=" = 1 }', 'requeue_count = { "<" = 2 }',
        'requeue_count = { "<=" = 1 }', 'requeue_count = { "==" = 1 }', 'status = { "!=" = "failed" }',
        'claimed_by = { prefix = "worker:" }', 'claimed_by = { contains = ":w" }',
        'claimed_by = { "not contains" = "reaper" }', 'status = { in = ["queued", "running"] }',
        'status = { "not in" = ["failed"] }', 'requeue_count = { ">" = 0, "<" = 2 }',
    ]
    for h in holds:
        res = _replay_text(tmp_path, head + f"\n[expect]\nrows.r1 = {{ {h} }}\n")
        assert res.ok, (h, [str(f) for f in res.failures])
    fails = [
        ('requeue_count = { ">" = 1 }', "rows.r1.requeue_count: expected > 1, actual 1"),
        ('requeue_count = { ">=" = 0, "<" = 1 }', "expected >= 0 and < 1, actual 1"),
        ('claimed_by = { prefix = "resume:" }', "expected prefix 'resume:', actual 'worker:w1'"),
        ('claimed_by = { "not contains" = "w1" }', "expected not contains 'w1'"),
        ('status = { "<" = 3 }', "expected < 3, actual 'queued'"),  # not a number: fails
        ('status = { in = ["failed"] }', "expected in ['failed'], actual 'queued'"),
    ]
    for h, needle in fails:
        res = _replay_text(tmp_path, head + f"\n[expect]\nrows.r1 = {{ {h} }}\n")
        assert [needle in str(f) for f in res.failures] == [True], (h, [str(f) for f in res.failures])


def test_comparison_on_lists_and_counts(tmp_path) -> None:
    text = BASE + '''
[[runs.events]]
kind = "request"

[[runs.events]]
kind = "llm"

[expect]
events.r1 = { count = { ">=" = 2 }, kinds = { prefix = ["request"], contains = "llm", "not contains" = "tool" } }
messages = { "<" = 1 }
clock = { "<=" = 0 }
procs = { "not contains" = "w1" }
'''
    res = _replay_text(tmp_path, text)
    assert res.ok, [str(f) for f in res.failures]


@pytest.mark.parametrize(
    ("exp", "needle"),
    [
        ('rows.r1 = { requeue_count = { ">==" = 1 } }', "rows.r1.requeue_count: unknown comparison '>=='"),
        ('rows.r1 = { requeue_count = { ">=" = "one" } }', "rows.r1.requeue_count.>=: expected a number"),
        ('rows.r1 = { status = { in = "queued" } }', "rows.r1.status.in: expected a list"),
        ('fired = [{ do = "requeue_stal" }]', "fired[0].do: unknown transition or statement"),
        ('fired = [{ times = 1 }]', "fired[0]: an empty filter"),
        ('reaper = { requeud = 1 }', "reaper.requeud: unknown key; did you mean 'requeued'"),
        ('enqueue.r1 = { err = "x" }', "enqueue.r1.err: unknown key; did you mean 'error'"),
        ('events.r1 = { tool_error = [true] }', "did you mean 'tool_errors'"),
    ],
)
def test_expectation_errors_name_the_field(tmp_path, capsys, exp: str, needle: str) -> None:
    err = _err(capsys, tmp_path, BASE + f"\n[expect]\n{exp}\n")
    assert needle in err


TRACE = BASE + '''
[[steps]]
do = "enqueue_run"
actor = "caller"
run = "r1"

[[steps]]
do = "dispatch"
actor = "enqueue:r1"

[[steps]]
do = "run_queued"
actor = "w1"
run = "r1"

[[steps]]
actor = "w1"
until = "end"
'''


def test_trace_expectations_fired_never_order(tmp_path) -> None:
    ok = TRACE + '''
[expect]
fired = [{ do = "renew_lease", actor = "w1", times = 2 }, { do = "record_step", times = { ">=" = 2 } }, { do = "claim_queued" }]
never = [{ do = "crash" }, { do = "renew_lease", fault = "store_error" }]
order = [{ do = "claim_queued" }, { do = "record_step", step = "request" }, { do = "record_step", step = "llm" }, { do = "settle_completed", owner = "worker:w1" }]
'''
    res = _replay_text(tmp_path, ok)
    assert res.ok, [str(f) for f in res.failures]
    bad = TRACE + '''
[expect]
fired = [{ do = "renew_lease", times = 3 }, { do = "requeue" }]
never = [{ do = "provider_call", fault = "" }]
order = [{ do = "record_step", step = "llm" }, { do = "record_step", step = "request" }]
'''
    res = _replay_text(tmp_path, bad)
    got = [str(f) for f in res.failures]
    assert got[0] == "final: fired {do='renew_lease'} times: expected 3, actual 2"
    assert got[1] == "final: fired {do='requeue'} times: expected >= 1, actual 0"
    assert got[2] == "final: never {do='provider_call', fault=''}: expected 0, actual 1"
    assert got[3].startswith("final: order {do='record_step', step='llm'} -> {do='record_step', "
                             "step='request'}: expected \"{do='record_step', step='request'} after")
    assert len(got) == 4


def test_step_expectations_see_the_trace_so_far(tmp_path) -> None:
    text = TRACE.replace('until = "end"\n', 'until = "end"\nexpect = { fired = [{ do = "settle_completed" }] }\n')
    text = text.replace('do = "dispatch"\nactor = "enqueue:r1"\n',
                        'do = "dispatch"\nactor = "enqueue:r1"\nexpect = { never = [{ do = "enqueue_run" }] }\n')
    res = _replay_text(tmp_path, text)
    assert [str(f) for f in res.failures] == [
        "after step 2: never {do='enqueue_run'}: expected 0, actual 1"]


def test_reaper_expectation_reads_the_tick(tmp_path) -> None:
    """The counters come from the trace: change one expected figure and it fails."""
    path = SCENARIO_DIR / "reaper-tick-counters.toml"
    data = tomllib.loads(path.read_text())
    data["expect"][0]["reaper"] = {"requeued": 2, "finished": False, "snapshot": ["r1", "r2"]}
    res = replay(scenario_from_dict(data))
    assert sorted(str(f) for f in res.failures) == [
        "final: reaper.finished: expected False, actual True",
        "final: reaper.requeued: expected 2, actual 1",
        "final: reaper.snapshot: expected ['r1', 'r2'], actual [{'run': 'r2', 'pending_effect': '', "
        "'queued_request': True, 'requeue_count': 0}, {'run': 'r1', 'pending_effect': "
        "'non_idempotent_write', 'queued_request': True, 'requeue_count': 0}]",
    ]


def test_reaper_crash_leaves_the_tick_unfinished(tmp_path) -> None:
    text = '''policy = "current"

[model]
faults = ["crash"]
fault_budget = 1

[[runs]]
id = "r1"

[runs.row]
status = "running"
claimed_by = "worker:gone"
lease_expires = 5
queued_request = true

[[steps]]
do = "advance_time"
actor = "clock"
to = 6

[[steps]]
do = "find_stale_running"
actor = "reaper"

[[steps]]
do = "crash"
actor = "reaper"

[expect]
reaper = { active = false, finished = false, ticks = 1, requeued = 0, skipped = 0 }
rows.r1 = { status = "running" }
'''
    res = _replay_text(tmp_path, text)
    assert res.ok, [str(f) for f in res.failures]


def test_enqueue_and_tool_error_expectations_can_fail(tmp_path) -> None:
    data = tomllib.loads((SCENARIO_DIR / "tool-error-result.toml").read_text())
    data["expect"][0]["events"]["r1"]["tool_errors"] = [False, False]
    data["expect"][0]["enqueue"]["r1"] = {"error": "EnqueueFailed"}
    res = replay(scenario_from_dict(data))
    assert sorted(str(f) for f in res.failures) == [
        "final: enqueue.r1.error: expected 'EnqueueFailed', actual ''",
        "final: events.r1.tool_errors: expected [False, False], actual [False, True]",
    ]
    text = BASE + '[expect]\nenqueue.r1 = { returned = true }\n'
    assert [str(f) for f in _replay_text(tmp_path, text).failures] == [
        "final: enqueue.r1: expected {'returned': True}, actual 'never enqueued'"]


def test_json_failure_carries_a_world_snapshot(tmp_path, capsys) -> None:
    text = TRACE.replace('until = "end"\n', 'until = "provider_call"\nexpect = { rows.r1 = { status = "queued" } }\n') \
        + '\n[expect]\nclock = 5\n'
    assert main(["replay", "--json", _write(tmp_path, text)]) == 1
    data = json.loads(capsys.readouterr().out)
    world = data["world"]
    assert set(world) >= {"rows", "events", "ledger", "procs", "messages", "clock", "reaper", "outcomes"}
    assert world["rows"]["r1"]["status"] == "running" and world["rows"]["r1"]["claimed_by"] == "worker:w1"
    assert [e["kind"] for e in world["events"]] == ["request"]
    assert [(p["name"], p["pc"]) for p in world["procs"]] == [("w1", "provider")]
    assert world["clock"] == 0 and world["messages"] == [] and world["ledger"] == []
    step_fail, final_fail = data["failures"]
    assert step_fail["step"] == 4 and step_fail["world"]["rows"]["r1"]["status"] == "running"
    assert final_fail["step"] is None and "world" not in final_fail  # the top-level one
    # a passing replay carries none
    assert main(["replay", "--json", str(SCENARIO_DIR / "t02-enqueue.toml")]) == 0
    assert "world" not in json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (BASE + '\n[model]\nworkers = 1\nmessages = [{ run = "r1" }]\n',
         "model.messages: `messages` belongs at the top level, before any [table]: move it above [model]"),
        (BASE + 'policy = "current"\n', "runs[0].policy: `policy` belongs at the top level, before any "
                                        "[table]: move it above [[runs]]"),
        (BASE + '\n[runs.row]\nstatus = "queued"\ndescription = "x"\n',
         "runs[0].row.description: `description` belongs at the top level, before any [table]: "
         "move it above [runs.row]"),
        (BASE + '\n[switches]\nwrite_fence = true\npolicy = "adr-111"\n', "move it above [switches]"),
        (BASE + '\n[[steps]]\ndo = "enqueue_run"\nactor = "caller"\nrun = "r1"\npolicy = "current"\n',
         "steps[1].policy: `policy` belongs at the top level, before any [table]: move it above [[steps]]"),
        (BASE + '\n[expect]\nclock = 0\ndescription = "x"\n', "expect.description: `description` belongs "
                                                          "at the top level"),
        (BASE + '\n[[runs.events]]\nkind = "llm"\nmessages = []\n', "move it above [[runs.events]]"),
    ],
)
def test_top_level_key_in_a_table_says_where_it_belongs(tmp_path, capsys, text: str, needle: str) -> None:
    assert needle in _err(capsys, tmp_path, text)


def test_top_level_messages_still_seed_and_expect(tmp_path) -> None:
    """``messages`` above the tables seeds the bus; in [expect] it is the expectation."""
    text = 'messages = [{ run = "r1", not_before = 3 }]\n' + BASE + \
        '\n[runs.row]\nstatus = "queued"\nqueued_request = true\n\n[expect]\nmessages = 1\n'
    assert _replay_text(tmp_path, text).ok


def _own_policy_is(path: Path, name: str) -> bool:
    data = tomllib.loads(path.read_text())
    return data.get("policy", "current") == name and "switches" not in data


def test_replay_all_under_another_policy_reports_what_changed(capsys, monkeypatch) -> None:
    from failclosed.cli.replay import findings

    monkeypatch.setenv("COLUMNS", "100")
    assert main(["replay", "--all", "--policy", "proposed", "--json"]) == 1  # regressions
    data = json.loads(capsys.readouterr().out)
    rows = {r["file"]: r for r in data["rows"]}
    files = SHIPPED + findings()
    assert len(rows) == len(files)
    assert {r["kind"] for r in data["rows"]} == {"scenario", "red", "finding"}
    # every row agrees with replaying that file by itself, both ways
    for path in files:
        r = rows[path.stem]
        own = replay(load_scenario(path))
        under = replay(load_scenario(path, "proposed"))
        assert (r["before"] == "PASS") == own.ok and (r["after"] == "PASS") == under.ok, path
        assert r["changed"] == (own.ok != under.ok)
        if own.ok and not under.ok and r["kind"] == "scenario":
            # a shipped scenario's expectations now fail: the proposal's regression, or one
            # that fails under current already (issue 38: not the proposal's doing)
            before = replay(load_scenario(path, "current")).ok
            assert r["verdict"] == ("regression" if before else "already"), r
        if own.ok and not under.ok and r["kind"] == "red":
            # a red historical scenario's violation the proposal removes: fixed, as for a
            # findings trace, never a regression
            assert r["verdict"] == "fixed", r
        if own.ok and under.ok:
            assert r["verdict"] == "unchanged"
    red = [r for r in data["rows"] if r["kind"] == "red"]
    assert red and all(r["file"].endswith(".red") for r in red)
    assert not [r for r in red if r["verdict"] == "regression"]
    # the central finding is closed by the proposal: its trace stops at a step the policy
    # disables, which is the fix working, not a failure (P9: the write's boundary renews
    # with T4 where the trace clears the fence, so it stops there)
    central = rows["no_write_applied_twice_without_audit--current"]
    assert central["verdict"] == "fixed"
    assert central["detail"].startswith("no longer replays at step 16: ")
    # a finding trace that replays to the end but no longer violates is fixed too
    assert rows["no_zombie_settle--current--pause-after-claim"]["verdict"] == "fixed"
    assert data["counts"]["fixed"] >= 5 and data["counts"]["broken"] == 0
    # the text form: two lines per file that is not unchanged, then the summary; it fits
    assert main(["replay", "--all", "--policy", "proposed"]) == 1
    out = capsys.readouterr().out.splitlines()
    # the summary, wrapped to fit (issue 38: it names what is already so under current)
    assert " ".join(x.strip() for x in out[-2:]) == data["summary"] and max(map(len, out)) <= 100
    assert any(x.startswith("fixed") and "no_write_applied_twice_without_audit--current" in x
               for x in out)


def test_replay_all_under_the_proposal_exits_0_when_only_findings_are_fixed(monkeypatch,
                                                                           capsys) -> None:
    import failclosed.cli.replay as scenario_mod

    monkeypatch.setattr(scenario_mod, "shipped", lambda: [])
    assert main(["replay", "--all", "--policy", "proposed"]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and "0 regressions" in out and " fixed, 0 broken" in out


def test_a_trace_that_no_longer_replays_under_its_own_policy_is_broken(monkeypatch, capsys,
                                                                       tmp_path) -> None:
    """Never "0 changed": a trace stale under its own policy says where it stops."""
    import failclosed.cli.replay as scenario_mod

    stale = tmp_path / "stale.toml"
    stale.write_text('policy = "current"\n[[runs]]\nid = "r1"\n\n[[steps]]\ndo = "claim_queued"\n'
                     'actor = "w1"\nrun = "r1"\n')
    monkeypatch.setattr(scenario_mod, "shipped", lambda: [])
    monkeypatch.setattr(scenario_mod, "findings", lambda: [stale])
    assert main(["replay", "--all", "--policy", "proposed"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("BROKEN")
    assert "under its own policy: no longer replays at step 1: " in out
    assert "1 broken" in out


def test_replay_all_under_a_policy_exit_0_when_nothing_changed(monkeypatch, capsys, tmp_path) -> None:
    import failclosed.cli.replay as scenario_mod

    same = [p for p in SHIPPED if _own_policy_is(p, "current")]
    assert same
    monkeypatch.setattr(scenario_mod, "shipped", lambda: same)
    monkeypatch.setattr(scenario_mod, "findings", lambda: [])
    assert main(["replay", "--all", "--policy", "current"]) == 0
    out = capsys.readouterr().out
    assert " ".join(x.strip() for x in out.splitlines()) == (
        f"{len(same)} under current ({len(same)} scenarios, 0 findings): 0 regressions, 0 fixed, "
        f"0 broken, 0 already so under current (not the change's), {len(same)} unchanged")
    # and a scenario that fails under its own policy but passes under another is reported too
    fixed = tmp_path / "fixed.toml"
    fixed.write_text('policy = "adr-134"\n[[runs]]\nid = "r1"\nentry = "interactive"\n\n[[steps]]\n'
                     'do = "start_run"\nactor = "caller"\nrun = "r1"\n\n'
                     '[expect]\nrows.r1 = { claimed_by = "interactive:r1" }\n')
    monkeypatch.setattr(scenario_mod, "shipped", lambda: [fixed])
    assert main(["replay", "--all", "--policy", "current"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("fixed  fixed (scenario, own policy adr-134)")
    assert "rows.r1.claimed_by: expected 'interactive:r1', actual ''" in out  # what was fixed
    assert "1 fixed" in out


def test_replay_policy_option_errors_and_single_file(tmp_path, capsys) -> None:
    assert main(["replay", "--all", "--policy", "adr-999"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("failclosed: error: --policy:") and err.count("\n") == 1
    # a FILE under another policy: the red 16.5 trace under current no longer kills the run
    red = SCENARIO_DIR / "hist-16.5-zombie-settle.red.toml"
    assert main(["replay", str(red)]) == 0
    # issue 38: the same outcome has the word and exit replay --all gives it (it said FAIL)
    assert main(["replay", str(red), "--policy", "current"]) == 0
    out = capsys.readouterr().out
    assert "[current]" in out and out.splitlines()[-1].startswith("fixed: ")


def test_store_steps_round_trip_through_dump(tmp_path) -> None:
    sc = load_scenario(SCENARIO_DIR / "store-t10-t12-stale-predicate.toml")
    res = replay(sc)
    text = dump_scenario(sc.data, [s.transition for s in res.steps])
    again = replay(scenario_from_dict(tomllib.loads(text)))
    assert again.ok and [s.result for s in again.steps] == [s.result for s in res.steps]
    assert again.world == res.world


def test_every_transition_argument_round_trips(tmp_path) -> None:
    """Counterexamples are dumped with every argument: T10's ``order`` (rows of equal lease)
    and a settle's expected ``status`` (proposal fallback_settles_requeued_row) replay too."""
    from failclosed.model.runtime import apply, enabled

    tie = BASE.replace('id = "r1"\n', 'id = "r1"\n\n[runs.row]\nstatus = "running"\nlease_expires = 5\n'
                       'queued_request = true\n\n[[runs]]\nid = "r2"\n\n[runs.row]\nstatus = "running"\n'
                       'lease_expires = 5\nqueued_request = true\n')
    sc = load_scenario(_write(tmp_path, 'policy = "current"\n' + tie))
    w = sc.world
    steps = [Transition.make("advance_time", "clock", to=6)]
    w = apply(w, steps[0])
    picks = [t for t in enabled(w, "reaper") if t.arg("order") == "r2,r1"]
    assert len(picks) == 1
    steps.append(picks[0])
    text = dump_scenario(sc.data, steps, {"reaper": {"snapshot": ["r2", "r1"]}})
    assert 'order = "r2,r1"' in text
    res = replay(scenario_from_dict(tomllib.loads(text)))
    assert res.ok and [s.transition for s in res.steps][:2] == steps, (res.stopped, res.failures)

    sc = load_scenario(SCENARIO_DIR / "recovery-b8-dispatch-fails-unguarded.toml")
    first = replay(sc)
    trace = [s.transition for s in first.steps]
    assert any(t.arg("status") is not None for t in trace)
    again = replay(scenario_from_dict(tomllib.loads(dump_scenario(sc.data, trace))))
    assert again.ok and again.world == first.world, again.stopped


def test_a_file_with_no_steps_and_no_expectations_is_refused_not_passed(tmp_path, capsys) -> None:
    """A model configuration given to replay checks nothing: exit 2 naming what it lacks and
    what it is, never PASS."""
    assert main(["replay", str(ROOT / "spec" / "configs" / "tiny.toml")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert "has no [[steps]] and no expectations" in err and "a model configuration" in err
    bare = tmp_path / "bare.toml"
    bare.write_text('policy = "current"\n[[runs]]\nid = "r1"\n')
    assert main(["replay", str(bare)]) == 2
    assert "has no [[steps]] and no expectations" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["F2", "stream_order--current", "stream_order--current.toml",
                                  "spec/findings/stream_order--current.toml", "t02-enqueue",
                                  "model/scenarios/t02-enqueue.toml"])
def test_a_shipped_file_replays_by_name_from_any_directory(name, tmp_path, monkeypatch,
                                                           capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["replay", name]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("PASS")


def test_an_unknown_name_is_one_line_with_the_nearest(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["replay", "stream_order"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean stream_order--current?" in err, err


def test_a_finding_with_several_traces_names_them(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["replay", "F1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no_write_applied_twice_without_audit--current" in err, err
    for name in err.split("traces: ")[1].split("; ")[0].split(", "):
        assert main(["replay", name]) == 0  # each name it gives replays
    capsys.readouterr()
