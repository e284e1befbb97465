"""The edges a CI job and an operator meet (issue 20): input checked when it is read,
contradictory options refused, sizes limited, messages that say what the input is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from failclosed.cli import main

ROOT = Path(__file__).resolve().parents[1]

SCENARIO = """policy = "current"
[[runs]]
id = "r1"
[[steps]]
do = "enqueue_run"
actor = "caller"
run = "r1"
[expect]
{expect}
"""


@pytest.mark.parametrize("expect, field, near", [
    ('rows.r1 = { status = "canceled" }', "expect.rows.r1.status", "did you mean 'cancelled'?"),
    ("rows.r1 = { status = 5 }", "expect.rows.r1.status", "expected a string"),
    ('rows.r1 = { status = { in = ["queued", "canceld"] } }', "expect.rows.r1.status.in[1]",
     "did you mean 'cancelled'?"),
    ('rows.r1 = { termination_reason = "canceled" }', "expect.rows.r1.termination_reason",
     "did you mean 'cancelled'?"),
    ('procs = ["nosuchproc"]', "expect.procs[0]", "did you mean one of reaper, w1?"),
    ('procs = ["w2"]', "expect.procs[0]", "did you mean one of reaper, w1?"),
    ('violates = ["stream_ordr"]', "expect.violates[0]", "did you mean 'stream_order'?"),
    ('holds = ["exclusive_claims"]', "expect.holds[0]", "did you mean 'exclusive_claim'?"),
])
def test_an_expectation_the_model_cannot_meet_is_bad_input(tmp_path, capsys, expect, field,
                                                           near) -> None:
    f = tmp_path / "s.toml"
    f.write_text(SCENARIO.format(expect=expect))
    assert main(["replay", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"failclosed: error: {field}:"), err
    assert near in err


def test_expectations_the_model_knows_still_replay(tmp_path) -> None:
    f = tmp_path / "s.toml"
    f.write_text(SCENARIO.format(expect='rows.r1 = { status = "queued" }\nprocs = ["enqueue:r1"]\n'
                                 'holds = ["stream_order"]'))
    assert main(["replay", str(f)]) == 0


SIM = (ROOT / "sim/configs/default.toml").read_text()


@pytest.mark.parametrize("key, value, limit", [
    ("runs.slots", "100000000", "10,000"),
    ("workers.count", "100000", "10,000"),
    ("constants.LEASE_SECONDS", "9223372036854775807", "1,000,000,000"),
])
def test_sizes_that_would_exhaust_memory_are_refused_naming_the_limit(tmp_path, capsys, key,
                                                                      value, limit) -> None:
    out = tmp_path / "r.csv"
    rc = main(["sweep", str(ROOT / "sim/configs/default.toml"), "--param", f"{key}={value}",
               "--seeds", "1", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and f"{key}:" in err and f"limit of {limit}" in err, err
    assert not out.exists()


def test_model_workers_are_limited(tmp_path, capsys) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[model]\nworkers = 100000\n[[runs]]\nid = "r1"\n')
    assert main(["check", "--policy", "current", "--config", str(f), "--quiet"]) == 2
    assert "model.workers: 100000 is above the limit of 64" in capsys.readouterr().err


def _err(capsys) -> str:
    return capsys.readouterr().err


def test_contradictory_options_are_refused(capsys) -> None:
    assert main(["simulate", "--fail-fast", "--keep-going"]) == 2
    assert "--fail-fast and --keep-going contradict" in _err(capsys)
    assert main(["matrix", "--config", "tiny", "--scope", "quick"]) == 2
    assert "--config tiny and --scope quick contradict" in _err(capsys)


@pytest.mark.parametrize("argv, says", [
    (["simulate", "--baseline", str(ROOT / "sim/configs/default.toml"), "--runs", "1"],
     "is a simulator config (read by `failclosed simulate CONFIG`), not a baseline"),
    (["check", "--policy", "current", "--config", str(ROOT / "sim/configs/default.toml")],
     "is a simulator config (read by `failclosed simulate CONFIG`), not a model configuration"),
    (["simulate", str(ROOT / "spec/configs/tiny.toml")], "is a model configuration"),
    (["check", "--policy", "current", "--config", str(ROOT / "spec/scopes/quick.toml")],
     "is a scope"),
    (["simulate", SIM_PATH := str(ROOT / "sim/configs/default.toml"), "--runs", "1",
      "--history", "/proc/h.jsonl"], "--history /proc/h.jsonl: cannot write in /proc"),
])
def test_messages_say_what_the_input_is(capsys, argv, says) -> None:
    assert main(argv) == 2
    err = _err(capsys)
    assert says in err and err.count("\n") == 1, err


def test_sweep_dask_without_dask_is_the_pip_hint(tmp_path, capsys, monkeypatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # import fails: not installed
    rc = main(["sweep", SIM_PATH, "--seeds", "1", "--dask", "tcp://127.0.0.1:8786", "--out",
               str(tmp_path / "r.csv"), "--quiet"])
    assert rc == 2
    assert "pip install 'failclosed[dask]'" in _err(capsys)


def test_the_shipped_baseline_by_name_from_any_directory(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    main(["check", "--policy", "current", "--config", "tiny", "--baseline", "current", "--quiet"])
    assert "(6 known, 0 new)" in capsys.readouterr().out
    assert main(["check", "--policy", "current", "--config", "tiny", "--baseline", "nosuch",
                 "--quiet"]) == 2
    assert "no shipped baseline of that name; give a file or one of current" in _err(capsys)


def test_printed_paths_are_relative_below_the_cwd_else_absolute(tmp_path, monkeypatch) -> None:
    from failclosed.cli.simulate import rel_path

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a").mkdir()
    assert rel_path(str(tmp_path / "a" / "b.toml")) == os.path.join("a", "b.toml")
    shipped = str(ROOT / "spec/baselines/current.toml")
    assert rel_path(shipped) == shipped and not rel_path(shipped).startswith("..")


def test_history_hash_recomputes_the_printed_digest(tmp_path, capsys) -> None:
    import json

    h, j = tmp_path / "h.jsonl", tmp_path / "r.json"
    assert main(["simulate", SIM_PATH, "--runs", "5", "--history", str(h), "--json", str(j),
                 "--quiet"]) in (0, 1)
    out = capsys.readouterr().out
    digest = json.loads(j.read_text())["history_sha256"]
    assert "history sha256 (records)" in out and digest[:16] in out
    assert main(["history-hash", str(h)]) == 0
    assert capsys.readouterr().out.startswith(f"{digest}  {h}")
    assert main(["history-hash", str(ROOT / "README.md")]) == 2


def test_the_side_by_side_run_writes_into_the_cache_and_leaves_no_folder(tmp_path, monkeypatch,
                                                                         capsys) -> None:
    """Issue 38 item 12: every run left a new failclosed-simulate-seed1-* folder in the
    temporary directory (this test asserted one per run). The scenario now goes to the cache's
    scenarios/, named by its content: a rerun writes the same file, and TMPDIR stays empty."""
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setenv("FAILCLOSED_CACHE", str(tmp_path / "cache"))
    rc = main(["simulate", "--runs", "20", "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert list((tmp_path / "tmp").iterdir()) == []
    made = list((tmp_path / "cache" / "scenarios").iterdir())
    assert len(made) == 1 and made[0].name.startswith("sim-current-seed1-")
    assert made[0].name in out
    assert main(["simulate", "--runs", "20", "--quiet"]) == 0
    assert list((tmp_path / "cache" / "scenarios").iterdir()) == made  # the same file again
    assert list((tmp_path / "tmp").iterdir()) == []


def test_next_step_commands_name_the_running_program(monkeypatch) -> None:
    import sys

    from failclosed.cli.checking import command_name

    monkeypatch.setattr(sys, "argv", ["/nowhere/venv/bin/failclosed"])
    monkeypatch.setenv("PATH", "/usr/bin")
    assert command_name() == "/nowhere/venv/bin/failclosed"
    monkeypatch.setattr(sys, "argv", ["/x/failclosed/__main__.py"])
    assert command_name().endswith(" -m failclosed")


@pytest.mark.parametrize("argv", [
    ["check", "--policy", "current", "--config", "tiny"],
    ["matrix", "--policy", "current", "--policy", "adr-134", "--config", "tiny"],
    ["scope", "quick", "--policy", "current"],
])
def test_the_command_in_a_written_baseline_runs_as_written(tmp_path, monkeypatch, capsys,
                                                           argv) -> None:
    import re
    import shlex

    monkeypatch.chdir(tmp_path)
    main([*argv, "--quiet", "--write-baseline", "b.toml"])
    capsys.readouterr()
    first = (tmp_path / "b.toml").read_text().splitlines()[1]
    cmd = re.search(r"`failclosed (.*)`", first).group(1)
    assert "--policy" in cmd
    words = shlex.split(cmd)
    assert words[0] == argv[0]
    rc = main([*words, "--quiet"])
    out = capsys.readouterr().out
    assert rc in (0, 1) and " 0 new)" in out, out  # it runs, and lists every violation found


def test_check_prints_a_compact_trace_that_fits_and_wide_keeps_the_table(monkeypatch,
                                                                          capsys) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # piped: 100 columns
    argv = ["check", "--policy", "current", "--config", "small-zombie", "--property",
            "no_write_applied_twice_without_audit", "--quiet", "--jobs", "1"]
    assert main(argv) == 1
    out = capsys.readouterr().out.splitlines()
    assert max(len(x) for x in out) <= 100  # the stats line too (issue 38 item 14)
    steps = [x for x in out if x[:3].strip().isdigit() and "  |" in x]
    assert len(steps) == 33 and steps[16].split()[:3] == ["17", "w1", "crash(run=z1)"]
    assert "outcome w1/z1#1: DIED" in steps[16]  # only what changed, on the step's line
    assert main([*argv, "--wide"]) == 1
    wide = capsys.readouterr().out
    assert "step | actor" in wide and "-----+-" in wide


README = (ROOT / "README.md").read_text()


def test_the_docs_count_the_proposal_s_switches_as_the_code_does() -> None:
    from failclosed.model.policy import PRESETS, SWITCHES

    cur, prop = PRESETS["current"], PRESETS["proposed"]
    n = sum(getattr(cur, s) != getattr(prop, s) for s in SWITCHES)
    words = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine",
             10: "ten", 11: "eleven", 12: "twelve"}
    assert f"`proposed` is `current` plus the {words[n]} switches" in " ".join(README.split())
    assert "three fixes" not in README and "three ways" not in README


def test_the_docs_state_the_progress_intervals_of_the_code() -> None:
    import inspect

    from failclosed.cli.scope import PROGRESS_INTERVAL
    from failclosed.spec.progress import Progress

    every = inspect.signature(Progress).parameters["interval"].default
    text = " ".join(README.split())
    assert f"at most one line every {every:.0f} s" in text
    assert f"every {PROGRESS_INTERVAL} s" in text
    scopes = " ".join((ROOT / "docs/SCOPES.md").read_text().split())
    assert f"at most one line every {PROGRESS_INTERVAL} s" in scopes and "one line a minute" not in scopes


def test_mutants_progress_counts_what_it_checks(monkeypatch, capsys) -> None:
    import failclosed.cli.check as check_mod

    monkeypatch.setenv("FAILCLOSED_PROGRESS_INTERVAL", "0")
    monkeypatch.setattr(check_mod, "mutants", lambda: {"no_fence": "current-write_fence"})
    main(["mutants", "--config", "tiny", "--jobs", "1"])
    out, err = capsys.readouterr()
    assert "failclosed mutants: 2/2 checks (variants and current)" in err
    from failclosed.spec import properties

    count = len(properties.SAFETY) + len(properties.LIVENESS)
    assert out.strip().splitlines()[-1].startswith(f"1 variant x {count} properties")
