"""The exhaustive checker (spec/checker.py) and its command line (cli/check.py)."""

from __future__ import annotations

import json
import sys
from collections import deque
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.cli import main  # noqa: E402
from failclosed.cli.scenario_writer import write_scenario  # noqa: E402
from failclosed.model.config import load_world  # noqa: E402
from failclosed.model.runtime import apply, successors  # noqa: E402
from failclosed.spec import properties as P  # noqa: E402
from failclosed.spec.checker import (  # noqa: E402
    WITNESSES,
    check,
    counterexample_scenario,
    diff_worlds,
    load_config,
)
from failclosed.spec.coverage import expected_labels  # noqa: E402
from failclosed.spec.symmetry import make_canonical  # noqa: E402

# Properties that hold under current on tiny (the others are FINDINGS.md 1 and 4, or not
# claimed by the records: non_idempotent_write_at_most_once).
HOLD_ON_TINY = [
    "no_success_over_unrecorded_write", "terminal_is_absorbing", "exclusive_claim",
    "owner_only_mutation", "no_zombie_append", "no_zombie_settle", "stream_order",
    "bounded_attempts", "no_retry_of_non_retryable", "writes_only_under_fence",
    "no_write_without_recorded_approval", "race_safe_staleness", "cooperative_cancel",
    "no_resurrection_by_suspend", "leased_runs_leave_running",
]

# An unattended remote writer and a slow tool (time passes while `invoke` runs); no faults.
SLOW_WRITER = """
policy = "current"
[constants]
LEASE_SECONDS = 1
MAX_REQUEUES = 1
REQUEUE_BACKOFF_MS = 1000
REQUEUE_BACKOFF_CAP_MS = 2000
[model]
workers = {workers}
faults = ["slow_operation"]
fault_budget = 1
horizon = 4
[[tools]]
name = "remote_write"
effect = "non_idempotent_write"
remote = true
server_flag = 0
[[runs]]
id = "r1"
entry = "queued"
plan = [{{tools = ["remote_write"]}}, {{final = "completed"}}]
"""


@pytest.fixture
def slow_writer(tmp_path: Path) -> Path:
    p = tmp_path / "slow-writer.toml"
    p.write_text(SLOW_WRITER.format(workers=1))
    return p


def _data(path: Path) -> dict:
    import tomllib

    return tomllib.loads(path.read_text())


def test_tiny_proves_what_should_hold_under_current():
    res = check("current", "tiny", None)
    assert res.complete
    for n in HOLD_ON_TINY:
        assert res.properties[n].holds, (n, res.properties[n].explanation)
    assert res.states > 100


def test_historical_double_write_under_adr_111_found_and_replays(slow_writer: Path):
    name = "no_write_applied_twice_without_audit"
    res = check("adr-111", slow_writer, [name])
    r = res.properties[name]
    assert not r.holds
    # the trace replays through model.runtime.apply to a violating world
    w = load_world(_data(slow_writer), "adr-111")
    assert w == r.initial
    for t, after in r.trace:
        w = apply(w, t)
        assert w == after
    assert not P.SAFETY[name].check(w)
    # it is shortest: a brute breadth-first search finds no shorter violation
    assert len(r.trace) == _brute_depth(load_world(_data(slow_writer), "adr-111"), name)
    # the fence (ADR-112) forbids repeating the interrupted write; before it, it is repeated
    name2 = "interrupted_non_idempotent_write_not_repeated"
    assert not check("adr-111", slow_writer, [name2]).properties[name2].holds
    assert check("adr-112", slow_writer, [name2]).properties[name2].holds


def _brute_depth(w0, name: str) -> int:
    pred = P.SAFETY[name].check
    seen = {w0}
    q = deque([(w0, 0)])
    while q:
        w, d = q.popleft()
        if not pred(w):
            return d
        for _, w2 in successors(w):
            if w2 not in seen:
                seen.add(w2)
                q.append((w2, d + 1))
    return -1


def test_counterexample_outputs(slow_writer: Path, tmp_path: Path):
    from failclosed.model.scenario import load_scenario, replay

    name = "no_write_applied_twice_without_audit"
    r = check("adr-111", slow_writer, [name]).properties[name]
    # diff lines are readable field changes
    prev, lines = r.initial, []
    for _, w in r.trace:
        lines += diff_worlds(prev, w)
        prev = w
    assert "r1.status: 'queued' -> 'running'" in lines, lines
    # the scenario file replays to the same violation (violates = [name])
    p = tmp_path / "cx.toml"
    write_scenario(p, counterexample_scenario(r, "adr-111"))
    res = replay(load_scenario(p))
    assert res.ok, (res.stopped, [str(f) for f in res.failures])
    assert not P.SAFETY[name].check(res.world)


def test_symmetry_reduces_and_agrees(tmp_path: Path):
    p = tmp_path / "two-workers.toml"
    p.write_text(SLOW_WRITER.format(workers=2))
    a = check("adr-111", p, None, witnesses=False, coverage=False, measure_reduction=True)
    b = check("adr-111", p, None, witnesses=False, coverage=False, symmetry=False)
    assert a.states < b.states
    assert {n: r.trace_length for n, r in a.properties.items()} == {
        n: r.trace_length for n, r in b.properties.items()
    }


def test_run_symmetry_permutes_identical_runs():
    data = {
        "policy": "adr-102",
        "model": {"workers": 1},
        "runs": [{"id": "a", "entry": "interactive"}, {"id": "b", "entry": "interactive"}],
    }
    w0 = load_world(data)
    canon = make_canonical(w0.config)
    assert canon is not None
    (ta, wa), (tb, wb) = [x for x in successors(w0) if x[0].name == "start_run"][:2]
    assert ta.arg("run") != tb.arg("run")
    assert wa != wb and canon(wa) == canon(wb)


def test_symmetric_search_visits_exactly_the_orbits_of_the_plain_search():
    # Soundness and exactness of the reduction on the shipped group-of-4 configuration (both
    # workers x both identical runs): the symmetric search stores one world per orbit of the
    # plain search's reachable worlds, no more (the key is canonical) and no fewer (the
    # group really is a symmetry of the model, so no orbit is cut off).
    from failclosed.model.config import initial_world
    from failclosed.model.runtime import successors as succ
    from failclosed.spec import engine
    from failclosed.spec.checker import CONFIG_DIR, parse_config

    _, (part,) = load_config(CONFIG_DIR / "medium-symmetric.toml")
    spec, budget = parse_config(part.data, None)
    canon = make_canonical(spec)
    assert canon.group_size == 4
    w0 = initial_world(spec, budget)
    flat = engine.explore([w0], succ, invariants={}, keep_worlds=True)
    sym = engine.explore([w0], succ, invariants={}, canonical=canon, keep_worlds=True)
    orbits = {canon(w) for w in flat.worlds}
    assert {canon(w) for w in sym.worlds} == orbits and len(sym.worlds) == len(orbits)
    assert flat.stats.states / sym.stats.states > 3.5  # close to the group's 4


def test_json_shape_and_exit_codes(slow_writer: Path, capsys):
    name = "no_write_applied_twice_without_audit"
    assert main(["check", "--policy", "adr-111", "--config", str(slow_writer),
                 "--property", name, "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert {"policy", "config", "properties", "states", "transitions", "seconds"} <= set(d)
    assert d["policy"] == "adr-111"
    assert d["properties"][name]["holds"] is False
    assert isinstance(d["properties"][name]["trace_length"], int)
    assert main(["check", "--policy", "current", "--config", str(slow_writer),
                 "--property", "exclusive_claim", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["properties"] == {"exclusive_claim": {"holds": True, "trace_length": None}}
    for argv in (
        ["check", "--policy", "adr-999"],
        ["check", "--policy", "current", "--property", "no_such_property"],
        ["check", "--policy", "current", "--config", str(slow_writer.with_name("missing.toml"))],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "error" in err
    bad = slow_writer.with_name("bad.toml")
    bad.write_text("[model]\nworkerz = 1\n[[runs]]\nid='r1'\n")
    assert main(["check", "--policy", "current", "--config", str(bad)]) == 2
    assert "workerz" in capsys.readouterr().err


def test_matrix_json_shape(slow_writer: Path, capsys):
    # adr-111 repeats the write (no fence yet): a violation no baseline lists, so exit 1
    assert main(["matrix", "--config", str(slow_writer), "--policy", "adr-111",
                 "--policy", "current", "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["exit_code"] == 1
    assert ["adr-111", "no_write_applied_twice_without_audit"] in d["baseline"]["new"]
    assert d["properties"] == [*P.SAFETY, *P.LIVENESS]
    assert set(d["policies"]) == {"adr-111", "current"}
    cell = d["policies"]["adr-111"]["no_write_applied_twice_without_audit"]
    assert cell["holds"] is False and cell["trace_length"] > 0


def test_small_names_all_parts_and_covers_every_transition():
    name, parts = load_config("small")
    assert name == "small" and len(parts) >= 3
    kinds = {r["entry"] for p in parts for r in p.data["runs"]}
    assert kinds == {"queued", "interactive"}
    res = check("current", "small", P.SAFETY and ["exclusive_claim"], witnesses=True)
    assert res.coverage is not None
    # every transition but the statement only proposal P6's sweep runs (off under current;
    # model/scenarios/proposal-p6-*.green.toml fires it under proposed)
    from failclosed.model.steps import REAPER_ACTIONS, REAPER_REDISPATCH

    sweep = REAPER_ACTIONS[REAPER_REDISPATCH]
    only_p6 = [f"{n}{f'[{k}]' if k else ''}" for n in sweep.fires for k in ("", *sweep.faults)]
    assert res.coverage.never_enabled == only_p6
    assert res.unreached_witnesses == []
    assert set(res.witnesses) == set(WITNESSES)


def test_expected_labels_cover_fault_kinds():
    from failclosed.model.steps import fault_kinds

    labels = expected_labels([])
    for kind in fault_kinds():
        if kind in ("provider_error", "crash", "duplicate_message"):
            continue  # labelled by class / transitions of their own
        assert any(lab.endswith(f"[{kind}]") for lab in labels), kind


@pytest.mark.slow
def test_small_exhaustive_under_every_preset():
    from failclosed.model.policy import PRESET_ORDER

    for pol in PRESET_ORDER:
        res = check(pol, "small", None, witnesses=False, coverage=False)
        assert res.complete


def test_every_deliberate_mutant_kills_its_property():
    """Each ``mutant_`` switch of model/policy.py (on top of current, on its own bound in
    spec/mutant_configs) violates the property it was made for, which holds there under
    current: no property of the five is vacuous. `failclosed mutants` runs the same pairs."""
    from failclosed.model.policy import PRESETS
    from failclosed.spec.mutants import MUTANT_SWITCHES, MUTANTS, mutant_config

    by_config: dict[str, list[str]] = {}
    for sw, (prop, _) in MUTANT_SWITCHES.items():
        assert not any(getattr(p, sw) for p in PRESETS.values()), sw  # off in every preset
        assert MUTANTS[f"+{sw}"] == f"current+{sw}"
        cfg = mutant_config(f"+{sw}", "small")
        assert cfg != "small" and Path(cfg).exists()
        by_config.setdefault(cfg, []).append(prop)
        res = check(f"current+{sw}", cfg, [prop], witnesses=False, coverage=False)
        assert not res.properties[prop].holds, (sw, prop)
    for cfg, props in by_config.items():
        res = check("current", cfg, props, witnesses=False, coverage=False)
        assert all(r.holds for r in res.properties.values()), (cfg, res.properties)
    assert mutant_config("-write_fence", "small") == "small"


def test_bad_input_is_one_line_and_exit_2_from_the_command_line():
    """Run as a user would (a fresh interpreter, ``python -m failclosed``): no traceback."""
    import subprocess

    for argv in (["check", "--policy", "current", "--property", "nope"],
                 ["check", "--policy", "adr-999"]):
        p = subprocess.run([sys.executable, "-m", "failclosed", *argv], capture_output=True,
                           text=True, cwd=Path(__file__).resolve().parents[1])
        assert p.returncode == 2, p.stderr
        assert "Traceback" not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1, p.stderr
