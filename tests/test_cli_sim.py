"""The simulator's commands as a CI job uses them: through the real entry point, bad input is
one line and exit 2 before any work, output is honest and fits the terminal, exit codes can
be gated on, and an interrupted run leaves no half-written file."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from failclosed.cli import (  # noqa: E402
    main,  # noqa: E402
    simulate,
    sweep,
)
from failclosed.sim.batch import simulate_many  # noqa: E402
from failclosed.sim.engine import Simulation  # noqa: E402

# A small workload that violates a property quickly: an unattended remote writer that always
# outlives a short lease under a preset without the write fence (RUNTIME 16.8).
OUTLIVES = (Path(__file__).resolve().parent / "data" / "outlives.toml").read_text()

# A clean one: reads only, no faults.
CLEAN = """
policy = "current"
[runs]
count = 6
slots = 6
[workers]
count = 2
[[tools]]
name = "search"
latency = 0.5
[workload]
tool_mix = {search = 1}
"""


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """main(argv) -> (exit code, stdout, stderr); argparse's own exits count as codes."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("failclosed: error: "), err
    assert "Traceback" not in err
    return lines[0]


def write(tmp_path: Path, name: str, text: str | bytes) -> str:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return str(p)


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if a simulation starts: input errors must be found before any work."""

    def boom(self):
        raise AssertionError("a simulation started before the input was checked")

    monkeypatch.setattr(Simulation, "run", boom)


@pytest.fixture
def quiet_progress(monkeypatch):
    monkeypatch.setenv("FAILCLOSED_PROGRESS_INTERVAL", "3600")


# -- bad input: one line, exit 2, before any work -------------------------------------------------
@pytest.mark.parametrize("kind, needle", [
    ("dir", "is a directory"),
    ("missing", "no such file"),
    ("binary", "not UTF-8 text"),
])
def test_simulate_rejects_a_config_that_is_not_a_toml_file(tmp_path, capsys, no_work, kind, needle):
    path = {"dir": str(tmp_path),
            "missing": str(tmp_path / "nope.toml"),
            "binary": write(tmp_path, "rnd.toml", bytes(range(256)) * 4)}[kind]
    code, _, err = run(["simulate", path], capsys)
    assert code == 2
    assert needle in one_error_line(err)


@pytest.mark.parametrize("argv, needle", [
    (["--runs", "0"], "--runs: must be >= 1, got 0"),
    (["--runs", "-5"], "--runs: must be >= 1, got -5"),
    (["--seed", "-1"], "--seed: must be >= 0, got -1"),
    (["--runs", "many"], "--runs: expected an integer"),
])
def test_simulate_rejects_bad_numbers(tmp_path, capsys, no_work, argv, needle):
    cfg = write(tmp_path, "c.toml", CLEAN)
    code, _, err = run(["simulate", cfg, *argv], capsys)
    assert code == 2
    assert needle in one_error_line(err)


@pytest.mark.parametrize("argv, needle", [
    (["--seeds", "0"], "--seeds: must be >= 1, got 0"),
    (["--jobs", "0"], "--jobs: must be >= 1, got 0"),
    (["--out", "/nonexistent-dir/r.csv"], "does not exist"),
])
def test_sweep_rejects_bad_numbers_and_paths(tmp_path, capsys, no_work, argv, needle):
    cfg = write(tmp_path, "c.toml", CLEAN)
    out = [] if "--out" in argv else ["--out", str(tmp_path / "r.csv")]  # an option given once
    code, _, err = run(["sweep", cfg, *out, *argv], capsys)
    assert code == 2
    assert needle in one_error_line(err)
    assert not (tmp_path / "r.csv").exists()


@pytest.mark.parametrize("flag", ["--json", "--history", "--violations-dir"])
def test_simulate_checks_output_paths_before_any_work(tmp_path, capsys, no_work, flag):
    cfg = write(tmp_path, "c.toml", OUTLIVES)
    target = str(tmp_path / "missing" / "x.out")
    code, _, err = run(["simulate", cfg, flag, target], capsys)
    assert code == 2
    line = one_error_line(err)
    assert flag in line and "does not exist" in line
    assert not (tmp_path / "missing").exists()


def test_simulate_refuses_an_output_that_is_a_directory(tmp_path, capsys, no_work):
    cfg = write(tmp_path, "c.toml", CLEAN)
    code, _, err = run(["simulate", cfg, "--json", str(tmp_path)], capsys)
    assert code == 2
    assert "is a directory" in one_error_line(err)


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_simulate_refuses_an_unwritable_directory(tmp_path, capsys, no_work):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    cfg = write(tmp_path, "c.toml", CLEAN)
    code, _, err = run(["simulate", cfg, "--json", str(ro / "r.json")], capsys)
    assert code == 2
    assert "not writable" in one_error_line(err)


@pytest.fixture
def history(tmp_path, capsys, quiet_progress) -> Path:
    """A real history of the small violating workload."""
    cfg = write(tmp_path, "c.toml", OUTLIVES)
    hist = tmp_path / "h.jsonl"
    code, _, _ = run(["simulate", cfg, "--history", str(hist), "--quiet"], capsys)
    assert code == 1 and hist.exists()
    return hist


@pytest.mark.parametrize("case, needle", [
    ("missing", "no such file"),
    ("empty", "empty"),
    ("binary", "not a text file"),
    ("garbage", "line 1 is not JSON"),
    ("window", "START must be below END"),
    ("badwindow", "expected START:END"),
    ("ext", "unsupported file type"),
    ("outdir", "does not exist"),
])
def test_plot_swimlane_bad_input(tmp_path, capsys, history, monkeypatch, case, needle):
    import failclosed.sim.plots as plots

    drawn = []
    monkeypatch.setattr(plots, "swimlane", lambda *a, **k: drawn.append(a))
    inp, extra, out = str(history), [], str(tmp_path / "p.png")
    if case == "missing":
        inp = str(tmp_path / "none.jsonl")
    elif case == "empty":
        inp = write(tmp_path, "e.jsonl", "")
    elif case == "binary":
        inp = write(tmp_path, "b.jsonl", bytes(range(256)))
    elif case == "garbage":
        inp = write(tmp_path, "g.jsonl", "hello world\n")
    elif case == "window":
        extra = ["--window", "100:50"]
    elif case == "badwindow":
        extra = ["--window", "soon"]
    elif case == "ext":
        out = str(tmp_path / "p.txt")
    elif case == "outdir":
        out = "/nonexistent-dir/p.png"
    code, _, err = run(["plot", "swimlane", inp, "--out", out, *extra], capsys)
    assert code == 2
    assert needle in one_error_line(err)
    assert not drawn and not os.path.exists(out)


def test_plot_swimlane_of_an_unknown_run_lists_the_runs_there(tmp_path, capsys, history):
    out = tmp_path / "p.png"
    code, _, err = run(["plot", "swimlane", str(history), "--runs", "r999", "--out", str(out)], capsys)
    assert code == 2
    line = one_error_line(err)
    assert "r999" in line and "not in" in line and "r1, r2" in line
    assert not out.exists()
    # and a run that is there draws
    code, _, _ = run(["plot", "swimlane", str(history), "--runs", "r2", "--out", str(out)], capsys)
    assert code == 0 and out.stat().st_size > 10_000


@pytest.mark.parametrize("case, needle", [
    ("missing", "no such file"),
    ("empty", "empty"),
    ("header", "a header but no rows"),
    ("binary", "not a text file"),
    ("columns", "no column"),
    ("number", "is not a number"),
])
def test_plot_lease_curves_bad_input(tmp_path, capsys, case, needle):
    from failclosed.sim.plots import LEASE_CURVE_COLUMNS

    head = ",".join(LEASE_CURVE_COLUMNS)
    inp = {
        "missing": str(tmp_path / "none.csv"),
        "empty": write(tmp_path, "e.csv", ""),
        "header": write(tmp_path, "h.csv", head + "\n"),
        "binary": write(tmp_path, "b.csv", bytes(range(256))),
        "columns": write(tmp_path, "c.csv", "a,b\n1,2\n"),
        "number": write(tmp_path, "n.csv", head + "\ncurrent,1,x,300,1,0,1,0,10,0\n"),
    }[case]
    out = tmp_path / "p.png"
    code, _, err = run(["plot", "lease-curves", inp, "--out", str(out)], capsys)
    assert code == 2
    assert needle in one_error_line(err)
    assert not out.exists()


@pytest.mark.parametrize("address, needle", [
    ("not an address", "not a scheduler address"),
    ("localhost", "not a scheduler address"),
    ("tcp://127.0.0.1:1", "no scheduler reachable"),
])
def test_sweep_dask_address_that_does_not_answer_is_one_line(tmp_path, capsys, monkeypatch, no_work,
                                                             address, needle):
    pytest.importorskip("dask.distributed")
    monkeypatch.setattr(sweep, "DASK_CONNECT_TIMEOUT", 1)
    cfg = write(tmp_path, "c.toml", CLEAN)
    out = tmp_path / "d.csv"
    code, _, err = run(["sweep", cfg, "--seeds", "1", "--dask", address, "--out", str(out), "--quiet"], capsys)
    assert code == 2
    assert needle in one_error_line(err)
    assert not out.exists()


def test_sweep_refuses_to_append_other_columns(tmp_path, capsys, quiet_progress):
    cfg = write(tmp_path, "c.toml", CLEAN)
    out = tmp_path / "r.csv"
    code, _, _ = run(["sweep", cfg, "--param", "constants.LEASE_SECONDS=300", "--seeds", "1",
                      "--out", str(out), "--quiet"], capsys)
    assert code == 0
    before = out.read_text()
    code, _, err = run(["sweep", cfg, "--param", "reaper.period_seconds=30", "--seeds", "1",
                        "--out", str(out), "--quiet"], capsys)
    assert code == 2
    line = one_error_line(err)
    assert str(out) in line and "another sweep's columns" in line and "new --out" in line
    assert out.read_text() == before
    # the same parameters in another order are the same sweep: appended, readable, plotted
    code, _, _ = run(["sweep", cfg, "--param", "policy=current", "--param", "constants.LEASE_SECONDS=300",
                      "--seeds", "2", "--out", str(tmp_path / "s.csv"), "--quiet"], capsys)
    assert code == 0
    code, _, _ = run(["sweep", cfg, "--param", "constants.LEASE_SECONDS=300", "--param", "policy=current",
                      "--seeds", "3", "--out", str(tmp_path / "s.csv"), "--quiet"], capsys)
    assert code == 0
    rows = list(csv.DictReader((tmp_path / "s.csv").open()))
    assert [r["seed"] for r in rows] == ["1", "2", "3"]
    assert run(["plot", "lease-curves", str(tmp_path / "s.csv"), "--out", str(tmp_path / "l.png")], capsys)[0] == 0


# -- an interrupted history ---------------------------------------------------------------------
def test_ctrl_c_during_simulate_history_leaves_no_partial_file(tmp_path, capsys, monkeypatch):
    cfg = write(tmp_path, "c.toml", OUTLIVES)
    hist = tmp_path / "h.jsonl"
    hist.write_text("an earlier history\n")
    real = Simulation._archive

    def interrupted(self, i, final=False):
        real(self, i, final)
        if self.archived >= 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(Simulation, "_archive", interrupted)
    # in-process, Ctrl-C reaches the caller (issue 38 item 9: it was turned into 130 here,
    # so pytest went on); the program's entry turns it into 130
    with pytest.raises(KeyboardInterrupt):
        run(["simulate", cfg, "--history", str(hist), "--quiet"], capsys)
    err = capsys.readouterr().err
    assert f"{hist} not written" in err
    assert hist.read_text() == "an earlier history\n"  # untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml", "h.jsonl"]  # no partial file left
    monkeypatch.setattr(Simulation, "_archive", real)
    code, _, _ = run(["simulate", cfg, "--history", str(hist), "--quiet"], capsys)
    assert code == 1
    lines = hist.read_text().splitlines()
    assert all(json.loads(x)["name"] for x in lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml", "h.jsonl"]


# -- progress ----------------------------------------------------------------------------------
def test_simulate_reports_progress_on_stderr_without_changing_the_history(tmp_path, capsys, monkeypatch):
    cfg = write(tmp_path, "c.toml", OUTLIVES)
    monkeypatch.setenv("FAILCLOSED_PROGRESS_INTERVAL", "0")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    code, out, err = run(["simulate", cfg, "--json", str(a)], capsys)
    assert code == 1
    assert re.search(r"failclosed simulate: \d+/4 runs", err), err
    assert "failclosed simulate: owner-guard: 4 runs" in err
    assert "failclosed simulate:" not in out.replace("[bold]", "").split("\n", 1)[1]  # progress stays on stderr
    code, _, err = run(["simulate", cfg, "--json", str(b), "--quiet"], capsys)
    assert code == 1 and err == ""
    ha, hb = (json.loads(p.read_text())["history_sha256"] for p in (a, b))
    assert ha == hb


def test_sweep_reports_progress_when_not_on_a_terminal(tmp_path, capsys, monkeypatch):
    cfg = write(tmp_path, "c.toml", CLEAN)
    monkeypatch.setenv("FAILCLOSED_PROGRESS_INTERVAL", "0")
    code, _, err = run(["sweep", cfg, "--seeds", "2", "--out", str(tmp_path / "r.csv")], capsys)
    assert code == 0
    assert "failclosed sweep: 1/2 simulations" in err and "failclosed sweep: 2/2 simulations" in err


# -- stopping, exit codes, the summary ------------------------------------------------------------
def test_fail_fast_says_where_it_stopped(tmp_path, capsys, quiet_progress):
    cfg = write(tmp_path, "c.toml", OUTLIVES)
    js = tmp_path / "r.json"
    code, out, _ = run(["simulate", cfg, "--fail-fast", "--json", str(js)], capsys)
    assert code == 1
    res = json.loads(js.read_text())
    v = res["violations"][0]
    assert res["stopped_early"] and len(res["violations"]) == 1
    flat = " ".join(out.split())
    assert "STOPPED at the first violation" in flat
    assert f"policy owner-guard, run {', '.join(v['runs'])}, property {v['property']}, t={v['time']:.3f} s" in flat
    assert f"{res['runs_simulated']} of 4 runs simulated" in flat
    assert out.strip().splitlines()[-1] == f"1 policy x 4 runs: stopped at the first violation after {res['runs_simulated']} runs (seed 1)"
    # without --fail-fast the same config counts every violating run, and finishes every run
    code, out, _ = run(["simulate", cfg, "--json", str(js)], capsys)
    res2 = json.loads(js.read_text())
    assert code == 1 and not res2["stopped_early"] and res2["metrics"]["finished"] == 4
    assert sum(len(x["runs"]) for x in res2["violations"]) > len(v["runs"])
    assert "STOPPED" not in out


def test_side_by_side_fail_fast_stops_the_whole_command(tmp_path, capsys, quiet_progress):
    js = tmp_path / "r.json"
    code, out, _ = run(["simulate", "--runs", "30", "--fail-fast", "--no-baseline", "--json", str(js)], capsys)
    res = json.loads(js.read_text())
    assert code == 1
    assert res[-1]["stopped_early"] and len(res) < len(simulate.SIDE_BY_SIDE)
    assert "not simulated: " + ", ".join(simulate.SIDE_BY_SIDE[len(res):]) in " ".join(out.split())


def test_exit_codes_clean_and_violated(tmp_path, capsys, quiet_progress):
    clean = write(tmp_path, "clean.toml", CLEAN)
    code, out, _ = run(["simulate", clean], capsys)
    assert code == 0
    assert out.strip().splitlines()[-1] == "1 policy x 6 runs: every property holds, 1 clean (seed 1)"
    bad = write(tmp_path, "bad.toml", OUTLIVES)
    code, out, _ = run(["simulate", bad], capsys)
    assert code == 1
    assert re.fullmatch(r"1 policy x 4 runs: 1 policy violates \d+ propert(y|ies), 0 clean \(seed 1\)",
                        out.strip().splitlines()[-1])


@pytest.mark.parametrize("columns", [80, 120])
def test_side_by_side_fits_the_terminal_and_ends_with_a_summary(tmp_path, capsys, monkeypatch,
                                                                quiet_progress, columns):
    import tempfile

    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    js = tmp_path / "r.json"
    code, out, _ = run(["simulate", "--runs", "30", "--no-baseline", "--json", str(js)], capsys)
    res = json.loads(js.read_text())
    assert code == 1  # without a baseline every violation counts
    lines = out.rstrip("\n").splitlines()
    long = [x for x in lines if len(x) > columns and not (x.startswith("    ") and "failclosed replay " in x or "failclosed plot " in x)]
    assert not long, long
    for r in res:  # every policy and every violated property is named in full
        assert r["policy"] in out
        for v in r["violations"]:
            assert v["property"] in out
    bad = [r for r in res if r["violations"]]
    props = {v["property"] for r in res for v in r["violations"]}
    assert lines[-1] == (f"6 policies x 30 runs: {len(bad)} policies violate {len(props)} properties, "
                         f"{6 - len(bad)} clean (seed 1)")
    # the closing advice replays one violation, written to one reported directory, not the cwd
    # (a fresh directory per run, printed relative to the cwd, after the running program)
    replay = [x.strip() for x in lines if x.startswith("    ") and "failclosed replay " in x]
    assert len(replay) == 1
    me = replay[0].split(" replay ")[0]
    scen = str(tmp_path / replay[0].split()[-1])
    # issue 38: in the cache's scenarios/ (named by content), never a folder per run in TMPDIR
    assert Path(scen).parent.name == "scenarios" and Path(scen).name.startswith("sim-")
    assert list((tmp_path / "tmp").iterdir()) == []
    assert f"    {me} plot swimlane {replay[0].split()[-1]} --out swimlane.png" in lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "tmp"]
    proc = subprocess.run([sys.executable, "-m", "failclosed", "replay", scen], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_simulate_writes_scenarios_only_where_asked_and_lists_them(tmp_path, capsys, monkeypatch,
                                                                   quiet_progress):
    cfg = write(tmp_path, "c.toml", OUTLIVES)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(["simulate", cfg], capsys)
    assert code == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]  # nothing dropped in the cwd
    assert "--violations-dir DIR" in out
    vdir = tmp_path / "v"
    code, out, _ = run(["simulate", cfg, "--violations-dir", str(vdir)], capsys)
    files = sorted(vdir.glob("*.toml"))
    assert code == 1 and files
    listed = [f for f in files if str(f) in out]
    m = re.search(r"and (\d+) more in", out)
    assert len(listed) + (int(m.group(1)) if m else 0) == len(files)
    assert f"{len(files)} counterexample scenario" in out


def test_every_option_states_its_default():
    from failclosed.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name in ("simulate", "sweep", "plot"):
        for action in sub.choices[name]._actions:
            if action.option_strings and action.dest != "help":
                assert "default" in (action.help or "") or "required" in (action.help or ""), (name, action.dest)
    assert "(default: results.csv)" in sub.choices["sweep"].format_help()


# -- process pools never fork ------------------------------------------------------------------
def test_simulate_many_on_spawned_processes_matches_in_process():
    import tomllib

    raw = tomllib.loads(OUTLIVES)
    tasks = [{"raw": raw, "policy": p, "seed": s} for p in ("owner-guard", "current") for s in (1, 2)]
    here = list(simulate_many(tasks, jobs=1))
    there = list(simulate_many(tasks, jobs=2))
    assert [r["history_sha256"] for r, _ in here] == [r["history_sha256"] for r, _ in there]
    assert [len(recs) for _, recs in there] == [4, 4, 4, 4]
    assert all(r.spec is None and r.finished for _, recs in there for r in recs)


# -- baselines --------------------------------------------------------------------------------
def _violated(tmp_path, capsys) -> tuple[str, list[str]]:
    cfg = write(tmp_path, "outlives.toml", OUTLIVES)
    js = tmp_path / "v.json"
    code, _, _ = run(["simulate", cfg, "--json", str(js), "--quiet"], capsys)
    assert code == 1
    props = sorted({v["property"] for v in json.loads(js.read_text())["violations"]})
    assert len(props) >= 2
    return cfg, props


def _baseline(tmp_path, name: str, entries: list[tuple[str, str]]) -> str:
    text = "".join(f'[[known]]\npolicy = "{p}"\nproperty = "{q}"\nreason = "accepted for the test ({q})"\n\n'
                   for p, q in entries)
    return write(tmp_path, name, text)


def test_simulate_baseline_known_violations_exit_0_and_a_holding_entry_is_fixed(tmp_path, capsys,
                                                                                 quiet_progress):
    cfg, props = _violated(tmp_path, capsys)
    bl = _baseline(tmp_path, "bl.toml", [("owner-guard", p) for p in props] + [("owner-guard", "no_zombie_settle")])
    code, out, _ = run(["simulate", cfg, "--baseline", bl], capsys)
    assert code == 0
    flat = " ".join(out.split())
    assert "every violation is a known one" in flat
    for p in props:
        assert f"known {p} (owner-guard): accepted for the test ({p})" in flat
    assert "warning: fixed" in flat and "owner-guard / no_zombie_settle" in flat
    assert out.strip().splitlines()[-1] == f"1 policy x 4 runs: 0 new violations, {len(props)} known, 0 clean (seed 1)"


def test_simulate_baseline_a_violation_it_does_not_list_exits_1(tmp_path, capsys, quiet_progress):
    cfg, props = _violated(tmp_path, capsys)
    bl = _baseline(tmp_path, "bl.toml", [("owner-guard", props[0])])
    js = tmp_path / "r.json"
    code, out, _ = run(["simulate", cfg, "--baseline", bl, "--json", str(js)], capsys)
    assert code == 1
    assert json.loads(js.read_text())["baseline"] == {"file": bl, "known": props[:1], "new": props[1:], "fixed": []}
    flat = " ".join(out.split())
    for p in props[1:]:
        assert re.search(rf"{p} under owner-guard: \d+ runs?", flat)
    new = len(props) - 1
    assert out.strip().splitlines()[-1] == (f"1 policy x 4 runs: {new} NEW violation{'' if new == 1 else 's'}, "
                                            "1 known, 0 clean (seed 1)")


def test_simulate_shipped_baseline_entries_of_another_config_are_not_reported_fixed(tmp_path, capsys,
                                                                                    quiet_progress):
    cfg, _ = _violated(tmp_path, capsys)
    code, out, _ = run(["simulate", cfg, "--baseline", simulate.default_baseline_path()], capsys)
    assert code == 0  # owner-guard's violations of this workload are RUNTIME 16.x narratives
    assert "16.8" in out and "warning: fixed" not in out


@pytest.mark.parametrize("text, needle", [
    (None, "no such file"),
    ('[[known]]\npolicy = "current"\nproperty = "no_such_property"\nreason = "x"\n', "unknown property"),
    ('[[known]]\npolicy = "current"\nproperty = "stream_order"\n', "reason: missing"),
])
def test_simulate_bad_baseline_is_one_line_before_any_work(tmp_path, capsys, no_work, text, needle):
    cfg = write(tmp_path, "c.toml", CLEAN)
    bl = str(tmp_path / "none.toml") if text is None else write(tmp_path, "bl.toml", text)
    code, _, err = run(["simulate", cfg, "--baseline", bl], capsys)
    assert code == 2
    assert needle in one_error_line(err)


def test_side_by_side_uses_the_shipped_baseline(tmp_path, capsys, monkeypatch, quiet_progress):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(["simulate", "--runs", "30"], capsys)
    assert code == 0  # only known violations: the README's first command passes
    assert not [x for x in out.splitlines() if len(x) > 80 and not (x.startswith("    ") and "failclosed replay " in x or "failclosed plot " in x)]
    assert "(baseline spec/baselines/current.toml)" in out
    assert "every violation is a known one" in out
    assert re.fullmatch(r"6 policies x 30 runs: 0 new violations, \d+ known, \d clean \(seed 1\)",
                        out.strip().splitlines()[-1])
    code, _, _ = run(["simulate", "--runs", "30", "--no-baseline"], capsys)
    assert code == 1


@pytest.mark.slow
def test_the_main_job_names_the_findings_and_how_to_replay_one(tmp_path, capsys, monkeypatch, quiet_progress):
    """`failclosed simulate`, the README's first command, as shipped (about 30 s)."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code, out, _ = run(["simulate"], capsys)
    assert code == 0
    flat = " ".join(out.split())
    for label in ("F1 no_write_applied_twice_without_audit", "F2 stream_order", "F4 no_zombie_append",
                  "16.9 writes_only_under_fence"):
        assert label in flat
    replay = [x.split()[-1] for x in out.splitlines() if x.startswith("    failclosed replay ")]
    assert len(replay) == 1 and "no_write_applied_twice_without_audit" in replay[0]
    proc = subprocess.run([sys.executable, "-m", "failclosed", "replay", replay[0]], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# A workload the drain cuts short: six runs arrive at once, two slots, one slow worker, and
# the simulation ends 30 s after the last arrival, before the last runs get a slot.
CUT_SHORT = """
policy = "current"
[runs]
count = 6
slots = 2
drain_seconds = 30
[arrivals]
kind = "batch"
size = 6
[workers]
count = 1
[provider]
latency = 5.0
[[tools]]
name = "search"
latency = 5.0
[workload]
tool_mix = {search = 1}
"""


def test_simulate_says_what_it_exported_and_why_fewer_than_asked(tmp_path, capsys, quiet_progress):
    import sqlite3

    cfg = write(tmp_path, "cut.toml", CUT_SHORT)
    db, js = tmp_path / "e.sqlite", tmp_path / "e.json"
    code, out, _ = run(["simulate", cfg, "--export", str(db), "--json", str(js)], capsys)
    assert code == 0
    r = json.loads(js.read_text())
    e = r["export"]
    assert r["ended_by"] == "drain" and 0 < r["runs_simulated"] < r["runs"] == 6
    assert r["runs_not_admitted"] == r["runs"] - r["runs_simulated"]
    assert e["runs"] + e["runs_without_row"] == r["runs_simulated"]
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM tx_nrllm_agentrun").fetchone()[0] == e["runs"]
    line = next(x for x in out.splitlines() if "exported to" in x)
    assert f"{e['runs']} runs of the 6 asked for" in line
    assert f"{r['runs_not_admitted']} never simulated" in line
    text = " ".join(out.split())
    assert f"{r['runs_not_admitted']} of the 6 runs were never simulated" in text
    assert "runs.drain_seconds = 30 s" in text and "runs.slots = 2" in text
    assert f"1 policy x 6 runs ({r['runs_simulated']} simulated: the drain ended first)" in text


def test_violations_dir_says_how_many_scenarios_it_did_not_write_and_all_writes_every_one(
        tmp_path, capsys, quiet_progress):
    cfg = write(tmp_path, "c.toml", OUTLIVES)
    js = tmp_path / "r.json"
    code, out, _ = run(["simulate", cfg, "--violations-dir", str(tmp_path / "v1"), "--max-scenarios", "1",
                        "--json", str(js)], capsys)
    res = json.loads(js.read_text())
    files = sorted((tmp_path / "v1").glob("*.toml"))
    per_property: dict[str, int] = {}
    for v in res["violations"]:
        per_property[v["property"]] = per_property.get(v["property"], 0) + 1
    assert code == 1 and len(files) == len(per_property) == res["scenarios"]["written"]
    dropped = len(res["violations"]) - len(files)
    assert dropped > 0 and res["scenarios"]["not_written"] == dropped
    assert res["scenarios"]["max_per_property"] == 1 and res["scenarios"]["lift_the_cap"] == "--max-scenarios all"
    text = " ".join(out.split())
    assert f"{dropped} violations not written as scenarios" in text and "--max-scenarios all" in text
    # all: one scenario per violation, nothing left out
    code, out, _ = run(["simulate", cfg, "--violations-dir", str(tmp_path / "va"), "--max-scenarios", "all",
                        "--json", str(js)], capsys)
    res = json.loads(js.read_text())
    assert len(list((tmp_path / "va").glob("*.toml"))) == len(res["violations"]) == res["scenarios"]["written"]
    assert res["scenarios"]["not_written"] == 0 and "not written as scenarios" not in out
    code, _, err = run(["simulate", cfg, "--max-scenarios", "some"], capsys)
    assert code == 2 and "--max-scenarios" in one_error_line(err)


def test_simulate_jobs_gives_the_results_of_one_process_byte_for_byte(tmp_path, capsys, monkeypatch,
                                                                      quiet_progress):
    from failclosed.sim import config as sconfig

    cfg = write(tmp_path, "c.toml", OUTLIVES)
    monkeypatch.setattr(sconfig, "default_path", lambda: cfg)  # the side-by-side run, on a small workload
    outs = {}
    for jobs in ("1", "2"):
        d = tmp_path / f"j{jobs}"
        d.mkdir()
        code, out, _ = run(["simulate", "--jobs", jobs, "--violations-dir", str(d / "v"), "--export",
                            str(d / "e.sqlite"), "--json", str(d / "r.json")], capsys)
        outs[jobs] = (code, d, out)
    (c1, d1, o1), (c2, d2, o2) = outs["1"], outs["2"]
    assert c1 == c2

    def timeless(d):
        data = json.loads((d / "r.json").read_text())
        for r in data:
            r.pop("elapsed_seconds")
            for v in r["violations"]:
                v["scenario"] = Path(v.get("scenario", "")).name
            r.get("scenarios", {}).pop("directory", None)
            r.get("export", {}).pop("path", None)
        return data

    r1 = timeless(d1)
    assert len(r1) == len(simulate.SIDE_BY_SIDE) and r1 == timeless(d2)
    names = sorted(p.name for p in (d1 / "v").iterdir())
    assert names and names == sorted(p.name for p in (d2 / "v").iterdir())
    for n in names:  # every scenario file, byte for byte
        assert (d1 / "v" / n).read_bytes() == (d2 / "v" / n).read_bytes()
    assert (d1 / "e.sqlite").read_bytes() == (d2 / "e.sqlite").read_bytes()

    def table(out):  # the report but its timings and paths
        return [x for x in out.splitlines() if "wall time" not in x and " in " not in x and "/j" not in x]

    assert table(o1) == table(o2)


# -- every hint the main commands print runs from outside the checkout (issue 27) ------------
HINT = re.compile(r"failclosed ((?:replay|plot|inspect|scope|check|simulate|sweep|matrix)(?=\s)"
                  r"[^,;()\n]*)")


def _hints(text: str) -> list[str]:
    """The commands a text tells its reader to run, placeholders (FILE, DIR, NAME) left out."""
    out = []
    for m in HINT.finditer(text):
        words = m.group(1).split()
        if not any(w.isupper() and len(w) > 1 for w in words):
            out.append(m.group(1).strip())
    return out


def test_every_hint_runs_from_a_directory_outside_the_checkout(tmp_path, monkeypatch, capsys):
    """From a fresh directory (nothing of the checkout beside it): what simulate, inspect and
    scope tell the reader to run next opens and runs, as printed."""
    import shlex

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "400")  # a hint on one line
    printed = []
    for argv in (["simulate", "--runs", "40", "--quiet"],
                 ["simulate", "default", "--policy", "current", "--runs", "300", "--quiet",
                  "--export", "x.sqlite"],
                 ["inspect", "x.sqlite", "--quiet"],
                 ["scope", "quick", "--no-cache", "--jobs", "1", "--quiet"]):
        code, out, err = run(argv, capsys)
        assert code in (0, 1), (argv, err)
        printed.append(out + err)
    hints = [h for text in printed for h in _hints(text)]
    kinds = {h.split()[0] for h in hints}
    assert {"replay", "plot", "inspect"} <= kinds, hints
    assert any(h.startswith("replay") and "/" not in h for h in hints), hints  # by name
    scope_out = printed[3]
    member = re.search(r"VIOLATED: \d+ steps in (\S+)", scope_out).group(1)
    hints += [h.replace("NAME", member) for h in HINT.findall(scope_out) if "--show NAME" in h]
    assert any("--show" in h for h in hints), scope_out
    for h in dict.fromkeys(hints):
        code, out, err = run(shlex.split(h), capsys)
        assert code in (0, 1) and "error" not in err, (h, err)
        if h.startswith(("replay", "plot")):
            assert code == 0, (h, out)
    # the README's inspect recipe names the shipped config by name too
    code, _, err = run(["inspect", "x.sqlite", "--tools", "default", "--quiet"], capsys)
    assert code in (0, 1) and "error" not in err, err


# -- a repeated option that takes one value is an error (issue 27) ---------------------------
@pytest.mark.parametrize("argv, flag", [
    (["check", "--policy", "current", "--policy", "proposed", "--config", "tiny"], "--policy"),
    (["simulate", "--runs", "3", "--runs", "5"], "--runs"),
    (["scope", "quick", "--max-states", "5", "--max-states", "9", "--list"], "--max-states"),
    (["sweep", "default", "--out", "a.csv", "--out", "b.csv"], "--out"),
    (["sweep", "default", "--param", "policy=current", "--param", "policy=proposed"],
     "--param policy"),
])
def test_a_repeated_single_option_is_one_error_line(argv, flag, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert line.startswith(f"failclosed: error: {flag}") and "twice" in line, line
    assert list(tmp_path.iterdir()) == []


def test_a_repeatable_option_still_repeats(capsys):
    code, out, _ = run(["check", "--policy", "current", "--config", "tiny", "--quiet",
                        "--property", "exclusive_claim", "--property", "stream_order"], capsys)
    assert code in (0, 1) and "exclusive_claim" in out and "stream_order" in out


# -- cheap validation runs before the expensive work (issue 27) -----------------------------
def _expensive_must_not_run(monkeypatch, *targets):
    def boom(*a, **k):
        raise AssertionError("the expensive work ran before the arguments were checked")

    for mod, name in targets:
        monkeypatch.setattr(mod, name, boom)


def _sweep_csv(tmp_path) -> Path:
    f = tmp_path / "s.csv"
    code = main(["sweep", OUTLIVES_PATH, "--param", "runs.count=2,3", "--seeds", "1", "--out",
                 str(f), "--quiet"])
    assert code in (0, 1) and f.exists()
    return f


OUTLIVES_PATH = str(Path(__file__).resolve().parent / "data" / "outlives.toml")


def test_plot_curves_refuses_an_unknown_parameter_before_reading_the_rows(tmp_path, monkeypatch,
                                                                          capsys):
    from failclosed.sim import plots

    f = _sweep_csv(tmp_path)
    capsys.readouterr()
    _expensive_must_not_run(monkeypatch, (plots, "read_sweep_csv"), (plots, "curves"))
    code, _, err = run(["plot", "curves", str(f), "--x", "nope", "--out",
                        str(tmp_path / "c.png")], capsys)
    assert code == 2 and "--x nope: not a parameter" in one_error_line(err)
    code, _, err = run(["plot", "curves", str(f), "--x", "runs.count", "--metric", "nope",
                        "--out", str(tmp_path / "c.png")], capsys)
    assert code == 2 and "--metric nope: not a metric" in one_error_line(err)
    assert not (tmp_path / "c.png").exists()


def test_summarize_and_sweep_refuse_a_metric_before_any_work(tmp_path, monkeypatch, capsys):
    from failclosed.cli import summarize
    from failclosed.cli import sweep as sweep_mod

    f = _sweep_csv(tmp_path)
    capsys.readouterr()
    _expensive_must_not_run(monkeypatch, (summarize, "read_sweep"), (summarize, "summary_of"),
                            (sweep_mod, "run_grid"), (sweep_mod, "_sequential"),
                            (sweep_mod, "_execute"))
    code, _, err = run(["summarize", str(f), "--metric", "nope"], capsys)
    assert code == 2 and "--metric nope: not a metric" in one_error_line(err)
    code, _, err = run(["sweep", OUTLIVES_PATH, "--precision", "p_nope=0.1", "--out",
                        str(tmp_path / "t.csv")], capsys)
    assert code == 2 and "--precision p_nope: not a metric" in one_error_line(err)
    assert not (tmp_path / "t.csv").exists()


def test_help_names_what_a_user_can_type(capsys):
    """No path of the checkout in the simulator's help: the shipped config and baseline by
    the names that resolve from anywhere; every name the config error lists resolves."""
    for command in ("simulate", "sweep", "inspect"):
        assert main([command, "--help"]) == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "sim/configs/" not in text and "spec/baselines/" not in text, command
        assert "by name" in text, command
    code, _, err = run(["simulate", "nope"], capsys)
    assert code == 2
    names = one_error_line(err).split("one of ")[-1].split(", ")
    assert names and all(simulate.resolve_sim_config(n) for n in names)
    code, out, _ = run(["simulate", "default", "--runs", "5", "--quiet"], capsys)
    assert code in (0, 1) and "1 policy x 5 runs" in out


def test_the_config_error_lists_every_name_that_resolves(capsys):
    from failclosed.spec.checker import CONFIG_DIR, load_config

    code, _, err = run(["check", "--policy", "current", "--config", "nope"], capsys)
    assert code == 2
    listed = one_error_line(err).split("use one of ")[1].removesuffix(" or a FILE").split(", ")
    assert sorted(listed) == sorted(p.stem for p in CONFIG_DIR.glob("*.toml"))
    for name in listed:
        load_config(name)  # each resolves
