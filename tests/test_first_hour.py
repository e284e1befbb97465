"""Issue 38: a CI gate that never lies, and a first hour without surprises.

Each test here failed before the change it names (the issue's numbered items).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from failclosed.cli import main

ROOT = Path(__file__).resolve().parents[1]


# -- 1, 2: a truncated search never says "fixed", and says "not reached" in every format ----
def test_a_truncated_check_never_reports_a_baseline_entry_fixed(tmp_path, capsys) -> None:
    """Item 1: F1's no_unaudited_write_settles_successfully is not reached in 2,000 states a
    part; the gate said "fixed ... remove the entry", which hides a real finding."""
    j, x = tmp_path / "c.json", tmp_path / "c.xml"
    rc = main(["check", "--policy", "current", "--config", "small", "--max-states", "2000",
               "--baseline", "current", "--quiet", "--jobs", "1", "--json", str(j),
               "--junit", str(x)])
    out = capsys.readouterr().out
    assert rc == 3
    assert "fixed" not in out and "remove the entry" not in out
    assert "not reached" in out and "no_unaudited_write_settles_successfully [F1]" in out
    assert "1 not reached" in " ".join(x.strip() for x in out.splitlines()[-2:])
    d = json.loads(j.read_text())
    assert d["baseline"]["fixed"] == []
    assert d["baseline"]["not_reached"] == [{
        "cell": ["current", "no_unaudited_write_settles_successfully"],
        "why": "in a search truncated by --max-states 2,000"}]
    assert d["properties"]["exclusive_claim"]["truncated"] is True
    assert d["properties"]["stream_order"]["truncated"] is False  # violated: found, not cut
    _assert_holding_cases_skipped(x)


def _assert_holding_cases_skipped(path: Path) -> None:
    """Item 2: every property that held in a truncated search is <skipped> with the reason,
    never a plain pass; the violations found stay what they are."""
    junitparser = pytest.importorskip("junitparser")
    xml = junitparser.JUnitXml.fromfile(str(path))
    cases = [c for suite in xml for c in suite]
    skipped = [c for c in cases if any(isinstance(r, junitparser.Skipped) for r in c.result)]
    plain = [c for c in cases if not c.result and not c.system_out]
    assert skipped and not plain, [c.name for c in plain]
    for c in skipped:
        msg = c.result[0].message
        assert msg.startswith("not reached: ") and "truncated by --max-states" in msg
    assert all(int(s.skipped) == len(skipped) for s in xml)


def test_a_truncated_scope_junit_marks_the_holding_cells_skipped(tmp_path, capsys) -> None:
    x = tmp_path / "s.xml"
    rc = main(["scope", "quick", "--max-states", "100", "--quiet", "--no-cache", "--jobs", "1",
               "--baseline", "current", "--junit", str(x)])
    out = capsys.readouterr().out
    assert rc == 3, out
    assert "fixed" not in out
    _assert_holding_cases_skipped(x)


# -- 3, 5: replay --all --policy separates the change's regressions from what was so ------
def test_replay_all_under_current_exits_0_and_a_switch_owns_only_its_regressions(capsys) -> None:
    """Item 3: on the unchanged runtime, 7 "regressions" of scenarios recorded under other
    policies made it exit 1; with one switch changed, which of 13 were the switch's could not
    be told. Now each is judged against the change's reference (the preset it varies)."""
    from failclosed.cli.replay import reference_policy

    assert reference_policy("current-write_fence") == "current"
    assert reference_policy("proposed") == reference_policy("current") == "current"
    assert main(["replay", "--all", "--policy", "current", "--json"]) == 0
    same = json.loads(capsys.readouterr().out)
    assert same["counts"]["regression"] == 0 and same["counts"]["already"] > 0
    assert main(["replay", "--all", "--policy", "current-write_fence", "--json"]) == 1
    var = json.loads(capsys.readouterr().out)
    regress = {r["file"] for r in var["rows"] if r["verdict"] == "regression"}
    before = {r["file"] for r in same["rows"] if r["verdict"] == "already"}
    assert regress and not regress & before  # what was already so is never the switch's
    assert {r["file"] for r in var["rows"] if r["verdict"] == "already"} <= before
    assert var["reference"] == "current"


def test_replay_file_under_a_policy_uses_the_words_and_exit_of_replay_all(capsys) -> None:
    """Item 5: `replay F --policy P` said FAIL (exit 1) where `replay --all` said fixed."""
    assert main(["replay", "stream_order--current", "--policy", "proposed"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("fixed: ") and "FAIL" not in last
    assert main(["replay", "--all", "--policy", "proposed", "--json"]) == 1
    rows = {r["file"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["stream_order--current"]["verdict"] == "fixed"


# -- 5, 6: simulate: one configuration, one verdict; a variant's known entries -----------
def test_simulate_and_simulate_default_give_one_verdict(capsys, tmp_path) -> None:
    """Item 5: the bare form applied the shipped baseline and `simulate default` did not
    (exit 0 and 1 on the same configuration). A copy of the shipped file is the same
    configuration (a checkout's file beside an installed package); an edited copy is not."""
    rc_bare = main(["simulate", "--runs", "40", "--quiet"])
    bare = capsys.readouterr().out
    rc_named = main(["simulate", "default", "--policy", "current", "--runs", "40", "--quiet"])
    named = capsys.readouterr().out
    assert rc_bare == rc_named == 0, named
    assert "(baseline spec/baselines/current.toml)" in bare
    assert "(baseline spec/baselines/current.toml)" in named
    assert main(["simulate", str(ROOT / "sim/configs/default.toml"), "--runs", "40",
                 "--quiet"]) == 0
    copy = tmp_path / "mine.toml"
    copy.write_bytes((ROOT / "sim/configs/default.toml").read_bytes())
    assert main(["simulate", str(copy), "--runs", "40", "--quiet"]) == 0
    assert "(baseline spec/baselines/current.toml)" in capsys.readouterr().out
    copy.write_text(copy.read_text() + "\n# mine now\n")
    assert main(["simulate", str(copy), "--runs", "40", "--quiet"]) == 1
    assert "(baseline" not in capsys.readouterr().out


def test_simulate_a_variant_judged_by_an_entry_that_accepts_variants(tmp_path, capsys) -> None:
    """Item 6: exit 70, "ValueError: 'current' is not in list"; the variant's violations
    that F2/F3 accept are labelled by their finding, in the text, the JSON and JUnit."""
    j, x = tmp_path / "s.json", tmp_path / "s.xml"
    rc = main(["simulate", "default", "--runs", "300", "--policy", "current-write_fence",
               "--baseline", "current", "--quiet", "--json", str(j), "--junit", str(x)])
    out = capsys.readouterr().out
    assert rc in (0, 1) and "internal error" not in out
    res = json.loads(j.read_text())
    assert "stream_order" in res["baseline"]["known"]  # F2 accepts its variants
    assert "F2 stream_order (current-write_fence)" in " ".join(out.split())
    assert "known violation (F2)" in x.read_text()


# -- 10: the replay the first command advises shows the steps -----------------------------
def test_the_advised_replay_shows_every_step(capsys) -> None:
    import shlex

    assert main(["simulate", "--runs", "40", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "step by step" in out
    line = next(x.strip() for x in out.splitlines() if " replay " in x and x.startswith("    "))
    words = shlex.split(line)
    assert "-v" in words[words.index("replay"):]
    assert main(words[words.index("replay"):]) == 0
    steps = [x for x in capsys.readouterr().out.splitlines() if x.strip()[:1].isdigit()]
    assert len(steps) > 5 and all("t=" in x for x in steps)


# -- 11: every output readable as the umask says ------------------------------------------
def test_outputs_have_the_mode_the_umask_gives(tmp_path, capsys) -> None:
    import os
    import stat

    old = os.umask(0o022)
    try:
        js = tmp_path / "r.json"
        assert main(["check", "--policy", "current", "--config", "tiny", "--quiet", "--jobs",
                     "1", "--json", str(js), "--out", str(tmp_path / "out")]) in (0, 1)
        csv = tmp_path / "s.csv"
        assert main(["sweep", "default", "--param", "runs.count=20", "--seeds", "2", "--quiet",
                     "--out", str(csv)]) in (0, 1)
        sj = tmp_path / "sim.json"
        assert main(["simulate", "default", "--runs", "20", "--quiet", "--json", str(sj)]) == 0
    finally:
        os.umask(old)
    capsys.readouterr()
    files = [js, csv, tmp_path / "s.summary.csv", sj, *(tmp_path / "out").iterdir()]
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in files}
    assert set(modes.values()) == {0o644}, modes
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o755


# -- 12: noise and wording -----------------------------------------------------------------
def test_one_warning_a_header_that_fits_and_one_way_to_write_a_number(monkeypatch,
                                                                     capsys) -> None:
    from failclosed.sim import engine

    monkeypatch.setattr(engine, "NEVER_DRAWN_RUNS", 1)
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["simulate", "--runs", "40", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.count("never drawn") == 1  # one warning, naming the policies of each kind
    warn = " ".join(out[out.index("warning: fault kinds"):].split())
    assert "dispatch_fails under proposed, current" in warn
    head = out.splitlines()[:2]
    assert head[0].startswith("failclosed simulate: the shipped default config")
    assert head[1].startswith("seed 1, 40 runs per policy, ") and head[1].endswith(" s")
    assert main(["check", "--help"]) == 0
    assert "(default: True)" not in capsys.readouterr().out


def test_the_statistics_line_writes_numbers_as_the_summary_does() -> None:
    from failclosed.spec.checker import check

    res = check("current", "small", ["exclusive_claim"], witnesses=False, coverage=False,
                max_states=1500)
    assert f"{res.states:,} distinct states" in res.stats_line() and res.states >= 1000


# -- 14: piped check output fits 100 columns ------------------------------------------------
def test_piped_check_output_fits_100_columns_and_says_the_fairness_once(monkeypatch,
                                                                        capsys) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    rc = main(["check", "--policy", "current", "--config", "small", "--max-states", "2000",
               "--baseline", "current", "--quiet", "--jobs", "1"])
    out = capsys.readouterr().out.splitlines()
    assert rc == 3
    assert max(map(len, out)) <= 100, max(out, key=len)
    assert sum("WF(process, worker, reaper, clock)" in x for x in out) == 1
    live = [x for x in out if x.startswith("  every_run_terminates")]
    assert live and "[A]" in live[0]


# -- 9: Ctrl-C in-process reaches the caller; the program exits 130 ----------------------
def test_ctrl_c_reaches_an_in_process_caller_and_the_program_exits_130(monkeypatch,
                                                                      capsys) -> None:
    """Item 9: main() turned KeyboardInterrupt into 130 in-process, so a Ctrl-C in pytest
    failed the CLI test it landed in and the suite went on (a notebook kernel the same)."""
    from failclosed.cli import app, replay

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(replay, "_cmd_replay", interrupted)
    with pytest.raises(KeyboardInterrupt):
        main(["replay", "t02-enqueue"])
    monkeypatch.setattr(app, "main", lambda argv=None: (_ for _ in ()).throw(KeyboardInterrupt))
    assert app.console_main() == 130
    assert capsys.readouterr().err == "failclosed: interrupted\n"
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["failclosed"] == "failclosed.cli.app:console_main"
    import failclosed

    # the installed package's (CI runs the suite on a copy of the checkout without failclosed/)
    assert "console_main()" in (Path(failclosed.__file__).parent / "__main__.py").read_text()


# -- 4: inspect of the default export, with the shipped baseline, exits 0 ------------------
def test_inspect_of_the_default_export_exits_0_with_the_shipped_baseline(tmp_path,
                                                                        capsys) -> None:
    """Item 4: "1 new": the `totals` heuristic of a run whose later rounds fell in an outage
    (fail-soft steps, the runtime by design) failed the gate the README promises passes.
    current's simulation of the side-by-side run is this one (same config, seed, policy)."""
    db = tmp_path / "x.sqlite"
    assert main(["simulate", "--policy", "current", "--quiet", "--export", str(db)]) == 0
    capsys.readouterr()
    j = tmp_path / "i.json"
    assert main(["inspect", str(db), "--baseline", "current", "--quiet", "--json", str(j)]) == 0
    out = capsys.readouterr().out
    assert "0 new" in out.splitlines()[-1]
    assert "below its iterations" in out  # said, as a notice
    assert all(a["check"] != "totals" for a in json.loads(j.read_text())["anomalies"])


# -- 13: the swimlane's violation is never a star on an empty lane -----------------------
def test_a_violation_on_a_stalled_process_s_lane_shows_the_process_up_to_it(tmp_path,
                                                                            capsys) -> None:
    """Item 13: the first command's scenario marked no_zombie_append on the lane of a segment
    that had stalled long before (its lane empty by then). Read back from the PNG's metadata:
    each star's lane carries the process's line from its previous step up to the star."""
    from PIL import Image

    png = tmp_path / "s.png"
    src = ROOT / "spec" / "findings" / "no_zombie_append--current--pause-after-renewal.toml"
    assert main(["plot", "swimlane", str(src), "--out", str(png)]) == 0
    capsys.readouterr()
    facts = json.loads(Image.open(png).text["Description"])
    assert facts["stars"]
    for lane, x in facts["stars"]:
        line = [s for s in facts["stalled"] if s[0] == lane and s[2] == x]
        assert line and line[0][1] < x, (lane, x, facts["stalled"])


# -- 8: the README's test command installs what the tests run -------------------------------
def test_the_readme_test_command_installs_what_its_tests_run_and_ci_tests_both_builds() -> None:
    """Item 8: the command compiled the package with mypyc (minutes, no output) and the tests
    then ran the checkout's pure Python: the build was never used. Now it installs the
    checkout editable and pure (what the tests run), says what it costs, and .ci/run keeps
    testing both installed builds."""
    import re
    import tomllib

    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", readme, re.S)
    test_cmd = next(b for b in blocks if "pytest" in b and "pip install" in b)
    assert "FAILCLOSED_PURE=1" in test_cmd and "pip install -e '.[test]'" in test_cmd
    pytest_ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    assert pytest_ini["ini_options"]["pythonpath"] == ["."]  # the tests run the checkout
    after = readme[readme.index(test_cmd):][:3000]
    assert "wall clock" in after and "CPU" in after and "While working" in after
    ci = (ROOT / ".ci" / "run").read_text()
    assert "FAILCLOSED_PURE=1 .venv-pure/bin/pip install -q '.[test]'" in ci
    assert "\n.venv/bin/pip install -q '.[test]'" in ci
    assert "suite mypyc .venv" in ci and "suite pure .venv-pure" in ci


def test_a_truncated_matrix_and_scope_say_so_in_their_json(tmp_path, capsys) -> None:
    """Item 2, JSON: a holding cell of a truncated search is marked, never a bare holds."""
    j = tmp_path / "m.json"
    assert main(["matrix", "--policy", "proposed", "--config", "tiny", "--max-states", "20",
                 "--baseline", "current", "--quiet", "--json", str(j)]) == 3
    d = json.loads(j.read_text())
    cells = d["policies"]["proposed"].values()
    assert d["truncated"] is True
    assert all(c["truncated"] == c["holds"] for c in cells) and any(c["holds"] for c in cells)
    s = tmp_path / "s.json"
    assert main(["scope", "quick", "--policy", "proposed", "--max-states", "20", "--no-cache",
                 "--jobs", "1", "--baseline", "current", "--quiet", "--json", str(s)]) == 3
    capsys.readouterr()
    assert "truncated by --max-states" in json.loads(s.read_text())["incomplete"]
