"""An absent transport and the operator's cancel command (docs/RUNTIME.md 6.4, 11).

* ``transport = "none"`` is a transport (config, scope axis); enqueue fails up front with no
  store statement and no fault branch, the reaper's tick fails before its SELECT, each as
  the runtime does; a scenario's pending messages are refused with it;
* the operator's ``cancel_command`` is given each of ``operator_cancels`` once, in order, and
  ends with the outcome and exit code of the runtime's command for each case: cancelled,
  unknown, finished, a store error, an empty id;
* model/commands.py's table gives every outcome its exit code (each entry is asserted here).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from failclosed.model import commands, load_world
from failclosed.model.config import ConfigError, parse_config
from failclosed.model.observe import observe
from failclosed.model.runtime import enabled, fire
from failclosed.model.scenario import scenario_from_dict
from failclosed.model.state import NO_TRANSPORT, TRANSPORTS
from failclosed.model.transition import Transition
from failclosed.model.vocab import OutcomeName, TransitionName

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_scope_units import gen  # noqa: E402

T = Transition.make
CANCEL = TransitionName.CANCEL_COMMAND


def _data(**model) -> dict:
    return {"policy": "current", "model": model,
            "runs": [{"id": "q1", "entry": "queued"}, {"id": "i1", "entry": "interactive"}]}


def _world(policy: str = "current", **model):
    return load_world(_data(**model), policy)


def _steps(w, *ts: Transition):
    for t in ts:
        assert t in enabled(w), (t, enabled(w))
        w = fire(w, t)
    return w


def _run_to_end(w, actor: str):
    while w.proc(actor) is not None:
        w = fire(w, next(t for t in enabled(w, actor) if t.fault is None))
    return w


# -- the configuration ----------------------------------------------------------------------
def test_none_is_a_transport_and_a_bad_one_names_every_transport():
    cfg, _ = parse_config(_data(transport="none"))
    assert cfg.transport == NO_TRANSPORT
    with pytest.raises(ConfigError) as e:
        parse_config(_data(transport="nil"))
    msg = str(e.value)
    assert msg.startswith("model.transport: 'nil' is not a transport")
    assert all(f'"{t}"' in msg for t in TRANSPORTS) and "\n" not in msg


@pytest.mark.parametrize("value, field", [("q1", "model.operator_cancels"),
                                          (["q1", 7], "model.operator_cancels[]")])
def test_operator_cancels_is_a_list_of_ids(value, field):
    with pytest.raises(ConfigError, match="^" + re.escape(f"{field}: expected ")):
        parse_config(_data(operator_cancels=value))
    assert parse_config(_data(operator_cancels=["q1", "", "gone"]))[0].operator_cancels == (
        "q1", "", "gone")


def test_a_scope_product_may_have_no_transport_and_its_workers_are_a_renaming():
    ms = gen(workers=[1, 2], transport=["none"])
    assert [m.data["model"]["transport"] for m in ms] == ["none", "none"]
    assert ms[0].key == ms[1].key  # no message ever: the second worker never acts
    for m in ms:
        assert parse_config(m.data)[0].transport == NO_TRANSPORT


def test_scope_members_that_cancel_different_runs_are_not_renamings():
    """The scope's normal form (spec/scope.py) drops run ids; the operator's commands name
    runs by id, so they are named by the run instead: a renaming keeps its key, a member
    whose command cancels another run gets its own."""
    from failclosed.spec.scope import Member

    def member(runs: list[dict], cancels: list[str]) -> str:
        return Member("m", {"model": {"operator_cancels": cancels}, "runs": runs}, "").key

    q, i = {"entry": "queued"}, {"entry": "interactive"}
    a = member([{"id": "r1", **q}, {"id": "r2", **i}], ["r1", ""])
    assert a == member([{"id": "x", **i}, {"id": "y", **q}], ["y", ""])  # a renaming
    assert a != member([{"id": "r1", **i}, {"id": "r2", **q}], ["r1", ""])  # cancels i, not q
    assert a != member([{"id": "r1", **q}, {"id": "r2", **i}], ["r2", ""])


# -- no transport (6.4) ---------------------------------------------------------------------
def test_enqueue_without_a_transport_stores_nothing_and_takes_no_store_fault():
    w = _world(transport="none", faults=["store_error"], fault_budget=1)
    moves = [t for t in enabled(w, "caller") if t.arg("run") == "q1"]
    assert moves == [T("enqueue_run", "caller", run="q1")]  # no T2, so no fault branch
    w2 = fire(w, moves[0])
    assert w2.rows == w.rows and w2.messages == () and w2.procs == ()
    assert w2.started[0] and w2.faults == w.faults
    assert [tuple(o) for o in w2.outcomes] == [("enqueue:q1", 0, "enqueue", "EnqueueFailed")]
    assert not [t for t in enabled(w2, "caller") if t.arg("run") == "q1"]  # enqueued once
    # with a transport the same call stores its row (T2) and starts the enqueue process
    w3 = fire(_world(), T("enqueue_run", "caller", run="q1"))
    assert w3.rows[0].status == "queued" and w3.proc("enqueue:q1") is not None


def test_the_mutant_stores_the_row_before_it_fails():
    w = fire(_world("current+mutant_enqueue_stores_before_transport_check", transport="none"),
             T("enqueue_run", "caller", run="q1"))
    assert w.rows[0].status == "queued" and w.messages == () and w.procs == ()
    assert w.outcomes[-1].outcome == OutcomeName.ENQUEUE_FAILED


def test_the_reaper_tick_without_a_transport_fails_before_its_select():
    data = _data(transport="none")
    data["runs"][0]["row"] = {"status": "running", "claimed_by": "worker:gone",
                              "lease_expires": 1, "queued_request": True}
    w = fire(load_world(data, "current"), T("advance_time", "clock", to=2))
    assert enabled(w, "reaper") == [T(TransitionName.TICK_REFUSED, "reaper")]  # no T10
    w2 = fire(w, T(TransitionName.TICK_REFUSED, "reaper"))
    assert w2.rows == w.rows and w2.reapers == ()
    assert [tuple(c) for c in w2.commands] == [("reaper", "tick_refused", "", "NO_MESSAGE_BUS")]
    assert commands.exit_code(w2.commands[0].outcome) == 1
    assert fire(w2, T(TransitionName.TICK_REFUSED, "reaper")) == w2  # refused again: no change
    # with a transport the tick selects the stale row
    data["model"] = {}
    w4 = fire(load_world(data, "current"), T("advance_time", "clock", to=2))
    assert [t.name for t in enabled(w4, "reaper")] == ["find_stale_running"]


def test_a_scenario_cannot_start_with_a_message_on_no_bus():
    data = {**_data(transport="none"), "messages": [{"run": "q1", "not_before": 0}],
            "expect": {"messages": 1}}
    with pytest.raises(ConfigError, match=r'^messages: with model.transport = "none"'):
        scenario_from_dict(data)


# -- the operator's cancel command (11) ---------------------------------------------------
def _cancel_result(w, t: Transition):
    w2 = fire(w, t)
    assert len(w2.commands) == len(w.commands) + 1
    return w2, w2.commands[-1]


@pytest.mark.parametrize("case, outcome, exit_code", [
    ("queued", OutcomeName.RUN_CANCELLED, 0),
    ("running", OutcomeName.RUN_CANCELLED, 0),
    ("finished", OutcomeName.NOT_CANCELLED, 1),
    ("store_error", OutcomeName.NOT_CANCELLED, 1),
    ("unknown", OutcomeName.NOT_CANCELLED, 1),
    ("empty", OutcomeName.UUID_REQUIRED, 2),
])
def test_the_cancel_command_ends_as_the_runtimes_command_does(case, outcome, exit_code):
    uuid = {"unknown": "gone", "empty": "", "running": "i1", "finished": "i1"}.get(case, "q1")
    w = _world(operator_cancels=[uuid], faults=["store_error"], fault_budget=1)
    if case in ("queued", "store_error"):
        w = _steps(w, T("enqueue_run", "caller", run="q1"))
    if case in ("running", "finished"):
        w = _steps(w, T("start_run", "caller", run="i1"))
    if case == "finished":
        w = _run_to_end(w, "caller:i1")
    known = case not in ("unknown", "empty")
    t = (T(CANCEL, "operator", run=uuid, **({"fault": "store_error"} if case == "store_error" else {}))
         if known else T(CANCEL, "operator", uuid=uuid))
    before = w.rows
    assert t in enabled(w), enabled(w)
    w2, done = _cancel_result(w, t)
    assert done == ("operator", CANCEL, uuid, outcome)
    assert commands.exit_code(done.outcome) == exit_code
    assert commands.RESULTS[done.outcome].command == commands.CANCEL
    if outcome == OutcomeName.RUN_CANCELLED:
        i = w.config.run_index(uuid)
        assert w2.rows[i].status == "cancelled" and w2.rows[i].termination_reason == "cancelled"
        assert all(w2.rows[j] == before[j] for j in range(len(before)) if j != i)
    else:
        assert w2.rows == before  # refused, unknown, finished or a store error: nothing changes
    assert f'"{uuid}"' in commands.message(done.outcome, uuid) or not uuid


def test_each_id_is_given_once_in_order_and_known_ids_name_their_run():
    w = _world(operator_cancels=["", "q1", "gone"], faults=["store_error"], fault_budget=1)
    seen = []
    for _ in range(3):
        mine = [t for t in enabled(w) if t.name == CANCEL]
        seen.append(mine)
        w = fire(w, mine[0])
    assert seen[0] == [T(CANCEL, "operator", uuid="")]
    assert seen[1] == [T(CANCEL, "operator", run="q1"),
                       T(CANCEL, "operator", run="q1", fault="store_error")]
    assert seen[2] == [T(CANCEL, "operator", uuid="gone")]
    assert not [t for t in enabled(w) if t.name == CANCEL]
    assert [c.outcome for c in w.commands] == ["UUID_REQUIRED", "NOT_CANCELLED", "NOT_CANCELLED"]


def test_the_view_names_the_commands_only_once_one_has_run():
    w = _world(operator_cancels=[""])
    assert "commands" not in observe(w, defaults=False)  # nothing moves for other worlds
    w2 = fire(w, T(CANCEL, "operator", uuid=""))
    assert observe(w2, defaults=False)["commands"] == [
        {"actor": "operator", "command": "cancel_command", "uuid": "", "outcome": "UUID_REQUIRED"}]


def test_every_result_has_the_runtimes_exit_code():
    assert {o: (r.command, r.exit) for o, r in commands.RESULTS.items()} == {
        OutcomeName.RUN_CANCELLED: ("nrllm:agent:cancel", 0),
        OutcomeName.NOT_CANCELLED: ("nrllm:agent:cancel", 1),
        OutcomeName.UUID_REQUIRED: ("nrllm:agent:cancel", 2),
        OutcomeName.NO_MESSAGE_BUS: ("nrllm:agent:reap", 1),
    }
    assert commands.message(OutcomeName.NOT_CANCELLED, "r9").startswith('run "r9" was not')


# -- the simulator without a transport ------------------------------------------------------
NO_BUS_WORKLOAD = """
policy = "current"
[runs]
count = 20
[transport]
kind = "none"
[reaper]
period_seconds = 5.0
[workload]
queued_fraction = 0.5
tool_mix = {search = 1}
[[tools]]
name = "search"
latency = 0.5
"""


def test_the_simulator_counts_what_it_refused_without_a_transport(tmp_path, capsys):
    import tomllib

    from failclosed.cli.app import main
    from failclosed.sim.batch import simulate_one

    res, sim = simulate_one(tomllib.loads(NO_BUS_WORKLOAD), seed=3)
    recs = sim.all_records()
    queued = [r for r in recs if r.entry == "queued"]
    assert queued and len(queued) < len(recs)  # both entries are drawn
    assert res["refusals"]["enqueue_run"] == len(queued)
    assert all(r.status == "never_stored" for r in queued)  # nothing stored for them
    assert all(r.status == "completed" for r in recs if r.entry == "interactive")
    assert res["refusals"]["tick_refused"] >= 1
    # the same without the refusals: a transport stores and runs every queued run
    with_bus = NO_BUS_WORKLOAD.replace('kind = "none"', 'kind = "async"')
    res2, _ = simulate_one(tomllib.loads(with_bus), seed=3)
    assert "refusals" not in res2 and "never_stored" not in res2["outcomes"]
    path = tmp_path / "nobus.toml"
    path.write_text(NO_BUS_WORKLOAD)
    assert main(["simulate", str(path), "--policy", "current", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert (f"refused up front, no transport (current): enqueue_run {len(queued)}, tick_refused "
            f"{res['refusals']['tick_refused']}") in out


@pytest.mark.parametrize("name", ["cancel-command-empty-id", "cancel-command-not-cancelled",
                                  "transport-none-reaper-refused"])
def test_a_trace_with_commands_is_dumped_and_replays_to_the_same_world(name):
    """A counterexample with the operator's command (``uuid = ""``, an unknown id, ``run``
    with a fault) or a refused tick is written with every argument and replays as it was."""
    import tomllib

    from failclosed.cli.scenario_writer import dump_scenario
    from failclosed.model.scenario import SCENARIO_DIR, load_scenario, replay

    sc = load_scenario(SCENARIO_DIR / f"{name}.toml")
    first = replay(sc)
    assert first.ok
    trace = [s.transition for s in first.steps]
    assert any(t.name in (CANCEL, TransitionName.TICK_REFUSED) for t in trace)
    again = replay(scenario_from_dict(tomllib.loads(dump_scenario(sc.data, trace))))
    assert again.ok and again.world == first.world and again.world.commands, again.stopped


def test_a_run_the_operator_names_is_not_permuted_with_its_twin(tmp_path):
    """Symmetry reduction (spec/symmetry.py) permutes runs with identical specs; the run
    the operator's command names is no longer interchangeable (the command's target is
    fixed by the configuration), and the reduced search keeps the plain search's verdicts."""
    from failclosed.spec.checker import check
    from failclosed.spec.symmetry import make_canonical

    twins = {"policy": "current", "model": {"horizon": 3},
             "runs": [{"id": "r1", "entry": "queued"}, {"id": "r2", "entry": "queued"}]}
    assert make_canonical(parse_config(twins)[0]).group_size == 2
    named = {**twins, "model": {"horizon": 3, "operator_cancels": ["r1"], "workers": 2}}
    assert getattr(make_canonical(parse_config(named)[0]), "group_size", 1) == 2  # workers only
    path = tmp_path / "twins.toml"
    path.write_text('policy = "current"\n[model]\nhorizon = 3\nworkers = 2\n'
                    'operator_cancels = ["r1"]\n[[runs]]\nid = "r1"\n[[runs]]\nid = "r2"\n')
    # the orbits the reduced search reaches are those of the plain search (permuting r1 with
    # r2 would miss the worlds in which the command cancels r1 in r2's state)
    from failclosed.model.config import initial_world
    from failclosed.model.runtime import successors
    from failclosed.spec import engine

    spec, budget = parse_config(named)
    canon = make_canonical(spec)
    w0 = initial_world(spec, budget)
    flat = engine.explore([w0], successors, invariants={}, keep_worlds=True)
    sym = engine.explore([w0], successors, invariants={}, canonical=canon, keep_worlds=True)
    assert {canon(w) for w in sym.worlds} == {canon(w) for w in flat.worlds}
    reduced, full = (check("current", path, witnesses=False, coverage=False, symmetry=s)
                     for s in (True, False))
    assert reduced.states < full.states
    assert {n: (r.holds, r.trace_length) for n, r in reduced.properties.items()} == {
        n: (r.holds, r.trace_length) for n, r in full.properties.items()}
