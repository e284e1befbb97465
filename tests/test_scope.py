"""Scopes (spec/scope.py): generation, reduction, parallel and cached checking, the merge,
the ``failclosed scope`` command, and a Hypothesis cross-check on random members of
``quick``."""

from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from failclosed.cli import main  # noqa: E402
from failclosed.model.config import ConfigError, initial_world, load_world, parse_config  # noqa: E402
from failclosed.model.runtime import apply, enabled, successors  # noqa: E402
from failclosed.spec import engine  # noqa: E402
from failclosed.spec.checker import load_config  # noqa: E402
from failclosed.spec.properties import SAFETY, explain  # noqa: E402
from failclosed.spec.scope import (  # noqa: E402
    Cache,
    Member,
    check_member,
    check_scope,
    load_scope,
    model_version,
    reduce_members,
    subsumes,
)


@functools.cache
def quick():
    return load_scope("quick")


@functools.cache
def standard():
    return load_scope("standard")


def _reachable(data: dict) -> set:
    """Every reachable world (no symmetry reduction); worlds compare without their spec."""
    spec, budget = parse_config(data)
    ex = engine.explore([initial_world(spec, budget)], successors, invariants={},
                        keep_worlds=True)
    assert not ex.stats.truncated
    return set(ex.worlds)


def _with_faults(data: dict, faults: list[str], budget: int) -> dict:
    d = copy.deepcopy(data)
    d["model"]["faults"] = faults
    d["model"]["fault_budget"] = budget
    return d


# -- the scope files -----------------------------------------------------------------------
def test_shipped_scopes_load_and_reduce():
    for name in ("quick", "standard", "full"):
        s = load_scope(name)
        assert s.members and len(s.members) == s.generated - s.equivalent - s.subsumed
        assert len({m.name for m in s.members}) == len(s.members)
        assert len({m.key for m in s.members}) == len(s.members)  # no two renamings kept


def test_every_part_of_small_is_inside_standard():
    """Moving the verdicts to the scope loses none: every hand-picked part of ``small`` is a
    member of ``standard`` or subsumed by one."""
    members = standard().members
    for part in load_config("small")[1]:
        assert any(m.key == Member(part.name, part.data, "").key or subsumes(m.data, part.data)
                   for m in members), part.name


def test_standard_covers_every_dimension_the_issue_names():
    s = standard()
    models = [m.data["model"] for m in s.members]
    runs = [r for m in s.members for r in m.data["runs"]]
    tools = [t for m in s.members for t in m.data["tools"]]
    # (every value of every dimension: tests/test_dimensions.py, from the dimension table)
    assert {m["workers"] for m in models} >= {1, 2}
    assert {m.get("transport", "async") for m in models} >= {"async", "sync"}
    assert {r.get("entry") for r in runs} == {"queued", "interactive"}
    assert {r["row"]["status"] for r in runs if "row" in r} >= {"waiting_for_approval",
                                                                 "waiting_for_input"}
    assert any(len(m.data["runs"]) == 2 for m in s.members)
    assert {t.get("effect", "read_only") for t in tools} == {"read_only", "idempotent_write",
                                                              "non_idempotent_write"}
    assert any(t.get("remote") for t in tools) and any(not t.get("remote") for t in tools)
    assert any(t.get("removable") for t in tools) and any(t.get("server_flag") == 1 for t in tools)
    singles = {tuple(m["faults"]) for m in models if len(m["faults"]) == 1}
    pairs = {tuple(m["faults"]) for m in models if len(m["faults"]) == 2}
    from failclosed.model.steps import fault_kinds

    assert {f for (f,) in singles} | {f for p in pairs for f in p} == set(fault_kinds())
    assert ("slow_operation", "pause") in pairs
    # who may act on a run (RUNTIME 16.18): in the access product, every kind of principal
    # makes requests (a stranger, an admin, a grant holder, service accounts with each scope
    # and none, an anonymous caller), with four-eyes on and off, on a run a user and a run a
    # service account started; those members declare their principals, the others keep the
    # default principal
    access = [m.data for m in s.members if "principals" in m.data]
    assert access and len(access) < len(s.members)
    principals = {n: p for d in access for n, p in d["principals"].items()}
    asked = {(q["by"], q["request"]) for d in access for r in d["runs"] for q in r.get("requests", [])}
    by_kind = {(principals[b]["kind"], tuple(principals[b].get("scopes", ())),
                tuple(principals[b].get("grants", ()))) for b, _ in asked}
    assert by_kind >= {("user", (), ()), ("admin", (), ()), ("user", (), ("AGENT_APPROVE",)),
                       ("anonymous", (), ()), ("service_account", (), ()),
                       ("service_account", ("AGENT_CANCEL",), ())}, by_kind
    scopes = {x for p in principals.values() for x in p.get("scopes", ())}
    assert scopes == {"AGENT_APPROVE", "AGENT_CANCEL", "AGENT_READ"}
    from failclosed.model.vocab import Request

    assert {q for _, q in asked} == {r.value for r in Request}  # every request, deny included
    runs = [r for d in access for r in d["runs"]]
    assert {r.get("require_second_approver", False) for r in runs} == {True, False}
    assert {principals[r.get("owner", "owner")]["kind"] for r in runs} >= {"user",
                                                                             "service_account"}
    assert any(p.get("permitted") for p in principals.values())
    # a member without requests or owners names no principal but the default owner (whose
    # tool policy the dimension `owner_refuses` varies)
    assert all(set(m.data.get("principals", {})) <= {"owner"} for m in s.members
               if not any("requests" in r or "owner" in r for r in m.data["runs"]))


def test_a_scope_gives_its_principals_only_to_members_whose_runs_name_one(tmp_path):
    p = tmp_path / "access.toml"
    p.write_text('[shapes.q]\nentry = "interactive"\n[shapes.s]\nentry = "interactive"\n'
                 'requests = [{ by = "eve", request = "status" }]\n'
                 '[principals]\nowner = { kind = "user" }\neve = { kind = "user" }\n'
                 '[tools.t]\nname = "lookup_page"\n[ends]\nc = {final = "completed"}\n'
                 '[[product]]\nruns = [["q"], ["s"]]\ntools = ["t"]\n')
    s = load_scope(p)
    by = {tuple(r.get("requests", [{}])[0].get("by", "") for r in m.data["runs"]):
          m.data.get("principals") for m in s.members}
    assert by == {("",): None, ("eve",): {"owner": {"kind": "user"}, "eve": {"kind": "user"}}}
    bad = tmp_path / "bad.toml"
    bad.write_text(p.read_text().replace('eve = { kind = "user" }', 'eve = { kind = "robot" }'))
    with pytest.raises(ConfigError, match="principals.eve.kind"):
        load_scope(bad)


@pytest.mark.parametrize(("text", "field"), [
    ('[[product]]\nname = "a"\nrunz = [["q"]]\n', "runz"),
    ('[shapes.q]\nentry = "queued"\n[tools.t]\nname = "x"\n[ends]\nc = {final = "completed"}\n'
     '[[product]]\nruns = [["nope"]]\ntools = ["t"]\n', "unknown shape 'nope'"),
    ('[shapes.q]\nentry = "queued"\n[tools.t]\nname = "x"\n[ends]\nc = {final = "completed"}\n'
     '[[product]]\nruns = [["q"]]\ntools = ["t"]\nfault_sets = ["triples"]\nfaults = ["crash"]\n',
     "fault_sets"),
    ('[shapes.q]\nentry = "bogus"\n[tools.t]\nname = "x"\n[ends]\nc = {final = "completed"}\n'
     '[[product]]\nruns = [["q"]]\ntools = ["t"]\n', "entry"),
    ('description = "nothing"\n', "declares no member"),
])
def test_a_bad_scope_is_one_line_naming_the_field(tmp_path, capsys, text, field):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=field):
        load_scope(p)
    assert main(["scope", str(p), "--jobs", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and field.split("'")[0] in err and "Traceback" not in err


# -- reduction ------------------------------------------------------------------------------
def test_renamings_are_dropped():
    m = next(m for m in standard().members if len(m.data["runs"]) == 2)
    swapped = copy.deepcopy(m.data)
    swapped["runs"] = swapped["runs"][::-1]
    for k, r in enumerate(swapped["runs"]):
        r["id"] = f"x{k}"
    kept, eq, sub = reduce_members([m, Member("swapped", swapped, "test")])
    assert (len(kept), eq, sub) == (1, 1, 0)


@pytest.mark.parametrize(("small_faults", "big_faults", "budget_small", "budget_big"), [
    (["crash"], ["crash", "audit_insert_fails"], 2, 2),
    (["slow_operation"], ["slow_operation", "store_error"], 1, 1),
    (["audit_insert_fails"], ["audit_insert_fails", "ambiguous_commit"], 2, 2),
    ([], ["crash"], 0, 1),
])
def test_subsumption_is_reachable_state_inclusion(small_faults, big_faults, budget_small, budget_big):
    """A member with a superset of the fault kinds and the same budget reaches every state
    the smaller one reaches (compared world by world: worlds compare without their spec)."""
    base = next(m.data for m in quick().members if m.name.startswith("queued:w1-async-queued-remote"))
    a = _with_faults(base, small_faults, budget_small)
    b = _with_faults(base, big_faults, budget_big)
    assert subsumes(b, a) and not subsumes(a, b)
    ra, rb = _reachable(a), _reachable(b)
    if budget_small == budget_big:
        assert ra <= rb
    else:  # the remaining budget differs: compare without it
        assert {replace(w, faults=0) for w in ra} <= {replace(w, faults=0) for w in rb}
    assert len(rb) > len(ra)


def test_workers_are_a_renaming_on_sync():
    """No message is ever sent on sync, so a second worker never acts: the reachable worlds
    of one and two workers are the same."""
    m = next(m for m in quick().members if "-sync-" in m.name)
    two = copy.deepcopy(m.data)
    two["model"]["workers"] = 2
    assert Member("a", m.data, "").key == Member("b", two, "").key
    assert _reachable(m.data) == _reachable(two)


def test_reduction_loses_no_verdict_on_quick():
    """Checking every generated member of quick, unreduced, gives the same merged verdicts
    (and the same shortest lengths) as checking the reduced set."""
    full = load_scope("quick", reduce=False)
    assert len(full.members) > len(quick().members)
    a = check_scope(quick(), ["current"])
    b = check_scope(full, ["current"])
    for n in a.properties:
        va, vb = a.verdicts["current"][n], b.verdicts["current"][n]
        assert (va.holds, va.length) == (vb.holds, vb.length), n


# -- running, merging, caching --------------------------------------------------------------
def test_merge_keeps_the_shortest_counterexample_and_its_member():
    s = quick()
    res = check_scope(s, ["current"], ["no_orphan_queued_run", "no_write_applied_twice_without_audit"])
    for n, v in res.verdicts["current"].items():
        assert not v.holds
        lengths = [r.violations[n]["length"] for r in res.results if n in r.violations]
        assert v.length == min(lengths) and v.violating == len(lengths)
        assert res.results[[r.member for r in res.results].index(v.member)].violations[n]["length"] == v.length
    d = res.to_json()
    assert d["policies"]["current"]["no_orphan_queued_run"]["config"] == res.verdicts["current"]["no_orphan_queued_run"].member
    assert d["configurations"] == len(s.members) and d["complete"] is True


def test_parallel_and_serial_give_the_same_results():
    s = quick()
    a = check_scope(s, ["current"], jobs=1)
    b = check_scope(s, ["current"], jobs=2)
    measured = {"seconds": 0, "peak_rss_mib": 0}  # what the machine, not the model, decides
    assert [r.to_json() | measured for r in a.results] == [r.to_json() | measured for r in b.results]


def test_cache_reuses_finished_configurations(tmp_path):
    s = quick()
    cache = Cache(tmp_path, model_version())
    first = check_scope(s, ["proposed"], cache=cache)
    assert first.cached == 0
    again = check_scope(s, ["proposed"], cache=cache)
    assert again.cached == len(s.members)
    assert again.to_json()["policies"] == first.to_json()["policies"]
    # a changed model is a different key: nothing reused
    other = check_scope(s, ["proposed"], cache=Cache(tmp_path, "another-version"))
    assert other.cached == 0
    # an interrupted run keeps what finished: remove half the entries, rerun the rest only
    files = sorted(tmp_path.rglob("*.json"))
    for f in files[: len(files) // 2]:
        f.unlink()
    third = check_scope(s, ["proposed"], cache=cache)
    assert 0 < third.cached < len(s.members)


def test_truncated_members_are_named(tmp_path):
    s = quick()
    res = check_scope(s, ["current"], ["bounded_attempts"], max_states=50)
    assert res.truncated and "truncated" in res.reach()


# -- the command ----------------------------------------------------------------------------
def test_scope_command_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FAILCLOSED_CACHE", str(tmp_path / "cache"))
    # proposed without its overdue sweep (P6): the orphaned QUEUED row of FINDINGS.md 3
    pol = "proposed-overdue_queued_redispatched"
    rc = main(["scope", "quick", "--jobs", "1", "--json", "-", "--quiet", "--policy", pol,
               "--property", "no_unaudited_write_settles_successfully",
               "--property", "no_orphan_queued_run", "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    d = json.loads(out[: out.rindex("}") + 1])
    assert rc == 1
    cells = d["policies"][pol]
    assert cells["no_unaudited_write_settles_successfully"] == {"holds": True, "trace_length": None}
    bad = cells["no_orphan_queued_run"]
    assert bad["holds"] is False and bad["config"].startswith("queued:")
    assert any(w.endswith(".toml") for w in d["written"])
    scen = next(w for w in d["written"] if w.endswith(".toml"))
    assert main(["replay", scen]) == 0  # the written counterexample replays


def test_scope_command_text_states_its_reach(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FAILCLOSED_CACHE", str(tmp_path))
    rc = main(["scope", "quick", "--jobs", "1", "--quiet",
               "--property", "no_unaudited_write_settles_successfully"])
    out = capsys.readouterr().out
    assert rc == 0
    assert f"hold in scope quick: {len(quick().members)} configurations" in out
    assert "1 policy x 1 property: 0 violated, 1 hold in scope quick" in out


def test_scope_list_and_show(capsys):
    assert main(["scope", "quick", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(quick().members)
    name = lines[0].split("\t")[0]
    assert main(["scope", "quick", "--show", name]) == 0
    import tomllib

    data = tomllib.loads(capsys.readouterr().out)
    parse_config(data)
    assert Member("x", data, "").key == quick().members[0].key


@pytest.mark.parametrize(("argv", "field"), [
    (["scope", "nosuchscope"], "scope: unknown scope"),
    (["scope", "quick", "--jobs", "0"], "--jobs"),
    (["scope", "quick", "--max-states", "0"], "--max-states"),
    (["scope", "quick", "--policy", "adr-999"], "adr-999"),
    (["scope", "quick", "--property", "no_such_property"], "no_such_property"),
    (["scope", "quick", "--out", "/dev/null/x"], "--out"),
    (["scope", "quick", "--dask", "not-an-address"], "--dask"),
])
def test_scope_bad_input_is_one_line(capsys, argv, field):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert field in err and "Traceback" not in err


def test_unreachable_dask_scheduler_is_one_line_within_seconds(capsys):
    t0 = time.monotonic()
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["scope", "quick", "--quiet", "--no-cache", "--dask", f"127.0.0.1:{port}"]) == 2
    assert time.monotonic() - t0 < 20
    err = capsys.readouterr().err
    assert "--dask: no scheduler reachable" in err and "Traceback" not in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(shutil.which("dask") is None and not (Path(sys.executable).parent / "dask").exists(),
                    reason="dask.distributed is not installed")
def test_scope_on_a_real_dask_cluster(tmp_path):
    """A real `dask scheduler` and `dask worker`: the same results as local processes."""
    dask = str(Path(sys.executable).parent / "dask") if (Path(sys.executable).parent / "dask").exists() else "dask"
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    sched = subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                              "--no-dashboard"], cwd=ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = subprocess.Popen([dask, "worker", f"tcp://127.0.0.1:{port}", "--nworkers", "1",
                               "--nthreads", "1", "--no-dashboard"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        from distributed import Client

        deadline = time.monotonic() + 60
        while True:
            try:
                with Client(f"tcp://127.0.0.1:{port}", timeout=5) as c:
                    if c.scheduler_info()["workers"]:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "dask cluster did not start"
            time.sleep(0.5)
        s = quick()
        props = ["no_orphan_queued_run", "no_unaudited_write_settles_successfully"]
        remote = check_scope(s, ["current"], props, dask=f"tcp://127.0.0.1:{port}")
        local = check_scope(s, ["current"], props)
        assert remote.to_json()["policies"] == local.to_json()["policies"]
        assert remote.states == local.states
    finally:
        for p in (worker, sched):
            p.terminate()
        for p in (worker, sched):
            p.wait(timeout=30)


# -- Hypothesis: a random member of quick, cross-checked with a state machine ---------------
from tests.test_crosscheck import pick  # noqa: E402


@functools.cache
def _proven(name: str, policy: str) -> frozenset[str]:
    m = next(m for m in quick().members if m.name == name)
    r = check_member(m.name, m.data, policy, list(SAFETY))
    assert not r.truncated
    return frozenset(n for n in SAFETY if n not in r.violations)


class QuickMemberMachine(RuleBasedStateMachine):
    """A random member of quick under a random policy; the invariants are the properties
    the checker proves on that member: a disagreement is a bug in one of them."""

    def __init__(self) -> None:
        super().__init__()
        self.world = None
        self.proven: frozenset[str] = frozenset()

    @initialize(name=st.sampled_from(sorted(m.name for m in load_scope("quick").members)),
                policy=st.sampled_from(["current", "proposed", "adr-111"]))
    def start(self, name: str, policy: str) -> None:
        m = next(m for m in quick().members if m.name == name)
        self.world = load_world(m.data, policy)
        self.proven = _proven(name, policy)

    @rule(choice=st.integers(0, 2**16 - 1))
    def step(self, choice: int) -> None:
        en = enabled(self.world)
        if en:
            self.world = apply(self.world, pick(en, choice))

    @invariant()
    def proven_properties_hold(self) -> None:
        if self.world is None:
            return
        for n in self.proven:
            assert SAFETY[n].check(self.world), f"{n}: {explain(n, self.world)}"


def test_hypothesis_agrees_with_the_checker_on_random_members_of_quick():
    run_state_machine_as_test(QuickMemberMachine, settings=settings(
        max_examples=30, stateful_step_count=50, derandomize=True, deadline=None, database=None,
        suppress_health_check=list(HealthCheck)))



def test_matrix_over_a_scope_names_the_configuration_of_each_failing_cell(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FAILCLOSED_CACHE", str(tmp_path))
    rc = main(["matrix", "--scope", "quick", "--policy", "current", "--policy", "proposed",
               "--jobs", "1", "--quiet", "--json", "-"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 1  # violations, and no baseline accepts them
    names = {m.name for m in quick().members}
    for pol in ("current", "proposed"):
        for c in d["policies"][pol].values():
            assert set(c) >= {"holds", "trace_length"}
            if not c["holds"]:
                assert c["config"] in names and c["violating_configurations"] >= 1
    assert d["scope"]["configurations"] == len(quick().members)
    assert d["policies"]["proposed"]["no_write_applied_twice_without_audit"]["holds"] is True


def test_scope_baseline_gate(tmp_path, capsys, monkeypatch):
    """--write-baseline records the violations; with it the run exits 0; an entry taken out
    is a NEW violation (exit 1); an entry for a property that holds is reported fixed."""
    monkeypatch.setenv("FAILCLOSED_CACHE", str(tmp_path / "cache"))
    base = tmp_path / "base.toml"
    args = ["scope", "quick", "--jobs", "1", "--quiet", "--property", "no_orphan_queued_run",
            "--property", "stream_order", "--property", "bounded_attempts"]
    assert main([*args, "--write-baseline", str(base)]) == 0
    capsys.readouterr()
    assert main([*args, "--baseline", str(base)]) == 0
    text = base.read_text()
    import tomllib

    entries = tomllib.loads(text)["known"]
    assert {e["property"] for e in entries} == {"no_orphan_queued_run", "stream_order"}
    cut = tmp_path / "cut.toml"  # stream_order taken out; bounded_attempts holds
    cut.write_text("\n".join(
        f'[[known]]\npolicy = "current"\nproperty = "{p}"\nreason = "test"\n'
        for p in ("no_orphan_queued_run", "bounded_attempts")))
    capsys.readouterr()
    assert main([*args, "--baseline", str(cut)]) == 1
    out = capsys.readouterr().out
    assert "NEW violation (not in the baseline): current / stream_order" in out
    assert "fixed" in out and "bounded_attempts" in out


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, ValueError, IndexError):
                pass
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_terminated_scope_run_leaves_no_worker_behind(tmp_path):
    """CI cancels a job with SIGTERM: the pool's processes go with the command (and what
    finished stays in the cache)."""
    import signal

    env = {**os.environ, "FAILCLOSED_CACHE": str(tmp_path)}
    p = subprocess.Popen([sys.executable, "-m", "failclosed", "scope", "standard", "--jobs", "2",
                          "--quiet"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(kids := _children(p.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(kids) >= 2, "the pool did not start"
    time.sleep(1)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 143 and "Traceback" not in err  # 128 + SIGTERM, after the clean-up
    time.sleep(0.5)
    alive = [k for k in kids if Path(f"/proc/{k}").exists()
             and "Z" not in (Path(f"/proc/{k}/stat").read_text().rsplit(")", 1)[1].split()[:1])]
    assert not alive, f"workers left running: {alive}"
