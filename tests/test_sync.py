"""The sync transport (RUNTIME 6.1 step 5, 6.3, 9 step 7, 10 branch 5): dispatch runs the
handler nested in the dispatching process, which waits for it and then goes on."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.cli import main  # noqa: E402
from failclosed.model.config import ConfigError, load_world  # noqa: E402
from failclosed.model.runtime import apply, enabled  # noqa: E402
from failclosed.model.state import ASYNC, SYNC, TRANSPORTS  # noqa: E402
from failclosed.model.transition import Transition  # noqa: E402
from failclosed.sim.batch import simulate_one  # noqa: E402

T = Transition.make


def world(plan=None, transport="sync", **model):
    data = {
        "policy": "current",
        "model": {"transport": transport, **model},
        "tools": [{"name": "lookup_page"}],
        "runs": [{"id": "r1", "plan": plan or [{"tools": ["lookup_page"]}, {"final": "completed"}]}],
    }
    return load_world(data)


def drive(w, actor, stop=lambda t: False):
    """Fire ``actor``'s only normal move until ``stop(t)`` names the next one, or it ends (the
    reaper: its tick is over)."""
    fired = []
    for _ in range(500):
        if actor == "reaper" and w.reaper("reaper") is None and fired:
            return w, fired  # the tick is over
        moves = [t for t in enabled(w, actor) if t.fault is None and t.name != "crash"]
        if not moves or stop(moves[0]):
            return w, fired
        assert len(moves) == 1, moves
        fired.append(moves[0])
        w = apply(w, moves[0])
    raise AssertionError("did not stop")


def test_async_stays_the_default_of_a_configuration():
    w = load_world({"runs": [{"id": "r1"}]})
    assert w.config.transport == ASYNC
    w = apply(apply(w, T("enqueue_run", "caller", run="r1")), T("dispatch", "enqueue:r1", run="r1"))
    assert len(w.messages) == 1 and w.procs == ()


def test_enqueue_runs_the_whole_run_before_it_returns():
    w = apply(world(), T("enqueue_run", "caller", run="r1"))
    w, fired = drive(w, "enqueue:r1")
    # every step of the run, pick-up included, was the enqueue caller's, in the order of a
    # worker's pick-up and segment; no message went through the bus
    assert all(t.actor == "enqueue:r1" for t in fired)
    names = [t.name for t in fired]
    assert names[:4] == ["dispatch", "run_queued", "claim_queued", "max_sequence"]
    assert names[-1] == "settle_completed"
    assert w.messages == () and w.procs == ()
    assert w.rows[0].status == "completed"
    assert w.outcomes == (("enqueue:r1/r1#1", 0, "worker", "COMPLETED"),)


def test_the_nested_pick_up_uses_the_dispatching_process_worker_identity():
    w = apply(world(), T("enqueue_run", "caller", run="r1"))
    w, _ = drive(w, "enqueue:r1", stop=lambda t: t.name == "max_sequence")
    assert w.rows[0].claimed_by == "worker:enqueue:r1"
    (p,) = w.procs
    assert p.name == "enqueue:r1" and p.kind == "worker" and p.identity == "worker:enqueue:r1"
    assert [f.kind for f in p.outer] == ["enqueue"]  # the caller waits in its dispatch


def test_recovery_returns_requeued_after_the_nested_retry_has_finished():
    w = world(plan=[{"final": "completed"}], provider_faults=["rateLimit"], fault_budget=1)
    w = apply(w, T("enqueue_run", "caller", run="r1"))
    w, _ = drive(w, "enqueue:r1", stop=lambda t: t.name == "provider_call")
    w = apply(w, T("provider_call", "enqueue:r1", run="r1", fault="rateLimit"))
    w, _ = drive(w, "enqueue:r1", stop=lambda t: t.name == "dispatch")
    (d,) = [t for t in enabled(w, "enqueue:r1") if t.name == "dispatch" and t.fault is None]
    assert d.arg("delay") == 30  # requested, and ignored: the retry starts now
    w = apply(w, d)
    (p,) = w.procs
    assert p.identity == "worker:enqueue:r1" and [f.seg for f in p.outer] == ["enqueue:r1/r1#1", "enqueue:r1"]
    w, fired = drive(w, "enqueue:r1")
    assert fired[0].name == "run_queued" and w.clock == 0 and w.messages == ()
    # the nested segment's outcome first, then the outer segment's REQUEUED
    assert [(s, o) for s, _, _, o in w.outcomes] == [
        ("enqueue:r1/r1#2", "COMPLETED"), ("enqueue:r1/r1#1", "REQUEUED")]
    assert w.rows[0].status == "completed" and w.rows[0].requeue_count == 1


def test_nesting_is_bounded_by_max_requeues():
    data = {"policy": "current", "constants": {"MAX_REQUEUES": 3}, "model": {"transport": "sync"},
            "runs": [{"id": "r1", "plan": [{"fail": "serverError"}]}]}
    w = apply(load_world(data), T("enqueue_run", "caller", run="r1"))
    deepest = 0
    for _ in range(500):
        moves = [t for t in enabled(w, "enqueue:r1") if t.fault is None and t.name != "crash"]
        if not moves:
            break
        w = apply(w, moves[0])
        deepest = max(deepest, *(len(p.outer) for p in w.procs), 0)
    assert deepest == 1 + 3  # the caller's frame, then one per requeue
    assert w.rows[0].attempts == 4 and w.rows[0].termination_reason == "retries_exhausted"
    assert [o for *_, o in w.outcomes] == ["FAILED", "REQUEUED", "REQUEUED", "REQUEUED"]


def test_a_crash_kills_the_nested_work_and_the_frames_it_is_nested_in():
    w = world(plan=[{"final": "completed"}], provider_faults=["rateLimit"], faults=["crash"],
              fault_budget=2)
    w = apply(w, T("enqueue_run", "caller", run="r1"))
    w, _ = drive(w, "enqueue:r1", stop=lambda t: t.name == "provider_call")
    w = apply(w, T("provider_call", "enqueue:r1", run="r1", fault="rateLimit"))
    w, _ = drive(w, "enqueue:r1", stop=lambda t: t.name == "max_sequence")  # the retry claimed
    w = apply(w, T("crash", "enqueue:r1", run="r1"))
    assert w.procs == ()
    assert [(s, o) for s, _, _, o in w.outcomes] == [
        ("enqueue:r1/r1#2", "DIED"), ("enqueue:r1/r1#1", "DIED")]
    assert w.rows[0].status == "running" and w.rows[0].claimed_by == "worker:enqueue:r1"


def reaper_world():
    stale = {"status": "running", "claimed_by": "worker:gone", "lease_expires": 100,
             "queued_request": True}
    data = {"policy": "current", "model": {"transport": "sync"},
            "runs": [{"id": "r1", "row": stale}, {"id": "r2", "row": dict(stale, lease_expires=101)}]}
    w = apply(load_world(data), T("advance_time", "clock", to=102))
    w = apply(w, T("find_stale_running", "reaper"))
    w = apply(w, T("requeue_stale", "reaper", run="r1"))
    return apply(w, T("dispatch", "reaper", run="r1"))


def test_the_reaper_runs_the_reclaimed_run_in_its_process_and_then_its_next_row():
    w = reaper_world()
    assert w.reaper("reaper").pc == "nested" and w.messages == ()
    (p,) = w.procs
    assert (p.name, p.identity, p.pc) == ("reaper", "worker:reaper", "run_queued")
    # blocked: the reaper's only moves are those of the run nested in it
    assert {t.name for t in enabled(w, "reaper") if t.name != "crash"} == {"run_queued"}
    assert not any(t.name in ("requeue_stale", "dead_letter_stale") for t in enabled(w))
    w, fired = drive(w, "reaper", stop=lambda t: t.name == "requeue_stale")
    assert all(t.arg("run") == "r1" for t in fired)
    assert w.rows[0].status == "completed" and w.rows[1].status == "running"
    assert w.reaper("reaper") is not None and w.reaper("reaper").pc == "row" and w.procs == ()
    w, _ = drive(w, "reaper")
    assert w.reaper("reaper") is None and w.rows[1].status == "completed"
    assert [s for s, *_ in w.outcomes] == ["reaper/r1#1", "reaper/r2#1"]


def test_a_crash_of_the_reaper_kills_the_run_nested_in_it():
    w = load_world({"policy": "current", "model": {"transport": "sync", "faults": ["crash"],
                                                   "fault_budget": 1},
                    "runs": [{"id": "r1", "row": {"status": "running", "lease_expires": 100,
                                                  "claimed_by": "x", "queued_request": True}}]})
    for t in (T("advance_time", "clock", to=101), T("find_stale_running", "reaper"),
              T("requeue_stale", "reaper", run="r1"), T("dispatch", "reaper", run="r1"),
              T("run_queued", "reaper", run="r1"), T("claim_queued", "reaper", run="r1"),
              T("crash", "reaper", run="r1")):
        w = apply(w, t)
    assert w.reaper("reaper") is None and w.procs == ()
    assert w.outcomes == (("reaper/r1#1", 0, "worker", "DIED"),)
    assert any(t.name == "find_stale_running" for t in enabled(w, "reaper"))  # a later tick


@pytest.mark.parametrize("value", ["snyc", 1, ["sync"]])
def test_a_bad_transport_is_one_line_naming_the_field(tmp_path, capsys, value):
    bad = {"model": {"transport": value}, "runs": [{"id": "r1"}]}
    use = ", ".join(f'"{t}"' for t in TRANSPORTS)  # every transport, the model's list
    with pytest.raises(ConfigError, match=rf"^model\.transport: .* use one of {re.escape(use)}$"):
        load_world(bad)
    text = f'[model]\ntransport = {json.dumps(value)}\n[[runs]]\nid = "r1"\n'
    f = tmp_path / "bad.toml"
    f.write_text(text)
    for argv in (["replay", str(f)], ["check", "--policy", "current", "--config", str(f)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "model.transport" in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1


def test_a_bad_sim_transport_is_one_line_exit_2(tmp_path, capsys):
    from test_sim import OUTLIVES

    f = tmp_path / "bad.toml"
    f.write_text(OUTLIVES + '\n[transport]\nkind = "snyc"\n')
    assert main(["simulate", str(f)]) == 2
    err = capsys.readouterr().err
    assert "transport.kind" in err and "async, sync" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def _sync_sim() -> dict:
    from test_sim import SMALL

    raw = tomllib.loads(SMALL)
    raw["transport"] = {"kind": SYNC}
    return raw


def test_sim_on_the_sync_transport_is_deterministic(tmp_path):
    raw = _sync_sim()
    a, sa = simulate_one(raw, seed=7, keep_going=True, history=str(tmp_path / "a.jsonl"),
                         keep_history=True)
    b, _ = simulate_one(raw, seed=7, keep_going=True, history=str(tmp_path / "b.jsonl"))
    assert a["history_sha256"] == b["history_sha256"]
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert a["metrics"] == b["metrics"]
    recs = [t for _, t in sa.history.records]
    # the sync transport really ran: no worker took a message, the enqueue callers ran the runs
    assert not any(t.name == "run_queued" and t.arg("not_before") is not None for t in recs)
    assert any(t.name == "claim_queued" and t.actor.startswith("enqueue:") for t in recs)
    raw["transport"] = {"kind": ASYNC}
    assert a["history_sha256"] != simulate_one(raw, seed=7, keep_going=True)[0]["history_sha256"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sim_on_the_sync_transport_is_clean_or_its_violations_replay(tmp_path, seed):
    from failclosed.cli.simulate import simulate_and_write
    from failclosed.model.scenario import load_scenario, replay

    res, _ = simulate_and_write(_sync_sim(), str(tmp_path / "v"), seed=seed, keep_going=True)
    assert res["metrics"]["finished"] > 0
    files = sorted((tmp_path / "v").glob("*.toml"))
    assert len(files) == sum(1 for v in res["violations"] if "scenario" in v)
    for f in files:
        sc = load_scenario(f)
        assert sc.world.config.transport == SYNC
        r = replay(sc)
        assert r.ok, (f.name, r.stopped, [str(x) for x in r.failures])
