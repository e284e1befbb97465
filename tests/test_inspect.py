"""``failclosed inspect`` held to the simulator (issue 22): an export of a simulated history
shows every violation the simulator's per-step checks recorded that EXPORT.md section 7 says an
export can show (sim.inspect.DETECTABLE "yes"); under ``proposed`` none of the footprints its
proposals close; on a clean workload nothing. Plus the export itself (what is and is not
stored), the three kinds of source, the report files and the exit codes."""

from __future__ import annotations

import csv
import json
import re
import sqlite3
import sys
from functools import cache
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from failclosed.cli import main  # noqa: E402
from failclosed.model.config import read_toml  # noqa: E402
from failclosed.sim import config as sconfig  # noqa: E402
from failclosed.sim.batch import simulate_one  # noqa: E402
from failclosed.sim.dbschema import EVENT_TABLE, RUN_TABLE, create_sql  # noqa: E402
from failclosed.sim.export import EPOCH, run_uuid  # noqa: E402
from failclosed.sim.inspect import CHECKS, DETECTABLE, Catalogue, inspect, load_catalogue  # noqa: E402
from failclosed.sim.inspect_sources import open_source  # noqa: E402

DEFAULT = sconfig.default_path()
RUNS = 300
SEEDS = (1, 4)  # both show F1's and F2's footprints under current within RUNS runs
F1 = ("no_write_applied_twice_without_audit", "interrupted_non_idempotent_write_not_repeated",
      "no_unaudited_write_settles_successfully")
# what proposed's P1 closes (docs/PROPOSALS.md), and its at-most-once consequence
CLOSED = F1 + ("non_idempotent_write_at_most_once",)


def clean_config() -> dict:
    """The shipped workload with every fault switched off (approvals, denials, cancels and the
    remote writer's latency tail stay: they are the workload, not faults)."""
    raw = read_toml(DEFAULT)
    raw["audit_store"] = {"latency": raw["audit_store"]["latency"]}
    raw["run_store"]["error_probability"] = 0.0
    raw["crashes"]["worker_rate_per_hour"] = 0.0
    raw["pauses"]["probability"] = 0.0
    raw["provider"]["failure_probability"] = 0.0
    raw["bus"]["duplicate_probability"] = 0.0
    raw["bus"]["dispatch_failure_probability"] = 0.0
    for t in raw["tools"]:
        t.pop("error_probability", None)
        t.pop("error_mix", None)
    return raw


@cache
def simulated(policy: str, seed: int, tmp: str, clean: bool = False, runs: int = RUNS):
    raw = clean_config() if clean else read_toml(DEFAULT)
    path = str(Path(tmp) / f"{policy}-{seed}-{clean}.sqlite")
    res, sim = simulate_one(raw, policy=policy, seed=seed, runs=runs, keep_going=True, export=path)
    src = open_source(path)
    try:
        rep = inspect(src, load_catalogue(DEFAULT))
    finally:
        src.close()
    return res, sim, rep, path


@pytest.fixture(scope="module")
def tmp_mod(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("inspect"))


def reported(rep) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a in rep.anomalies:
        for p in a.properties:
            out.setdefault(p, set()).add(a.uuid)
    return out


def test_current_every_detectable_violation_is_reported(tmp_mod):
    seen = set()
    for seed in SEEDS:
        res, _sim, rep, _ = simulated("current", seed, tmp_mod)
        got = reported(rep)
        for v in res["violations"]:
            if DETECTABLE.get(v["property"], ("no",))[0] != "yes":
                continue
            for rid in v["runs"]:
                seen.add(v["property"])
                assert run_uuid(seed, "current", rid) in got.get(v["property"], set()), (v["property"], rid)
    assert {"stream_order", "no_write_applied_twice_without_audit", "non_idempotent_write_at_most_once"} <= seen


@pytest.mark.parametrize("seed", SEEDS)
def test_proposed_reports_none_of_what_it_closes(seed, tmp_mod):
    res, sim, rep, _ = simulated("proposed", seed, tmp_mod)
    assert not [v for v in res["violations"] if v["property"] in CLOSED]
    assert not [a for a in rep.anomalies if a.check == "double_application"]
    by_uuid = {run_uuid(seed, "proposed", rid): rec for rid, rec in sim.records.items()}
    for a in rep.anomalies:
        if set(a.properties) & set(CLOSED):
            # only the heuristic F1 check, and only where the tables cannot tell a crash before
            # the fence stamp (the write never ran) from F1's window: the run's ledger shows
            # every non-idempotent call applied at most once
            assert a.certainty == "heuristic" and a.check == "interrupted_write_retried", a
            apps = [(t, c) for t, c, _tool, eff, _seg, _aud in by_uuid[a.uuid].applications
                    if eff == "non_idempotent_write"]
            assert len(apps) == len(set(apps)), a


def test_clean_workload_reports_nothing(tmp_mod):
    res, _sim, rep, _ = simulated("current", 2, tmp_mod, clean=True, runs=200)
    assert res["violations"] == []
    assert rep.runs == 200 and rep.events > 1000
    assert rep.anomalies == []


def test_export_stores_what_the_runtime_stores(tmp_path):
    """A failed insert leaves no row, an ambiguous commit leaves one; the columns follow the
    model's rows; the history is the same with and without an export."""
    raw = read_toml(DEFAULT)
    raw["audit_store"]["insert_failure_probability"] = 0.05
    raw["audit_store"]["ambiguous_commit_probability"] = 0.05
    path = str(tmp_path / "x.sqlite")
    res, sim = simulate_one(raw, policy="current", seed=3, runs=60, keep_going=True, export=path,
                            keep_history=True)
    plain, _ = simulate_one(raw, policy="current", seed=3, runs=60, keep_going=True)
    assert res["history_sha256"] == plain["history_sha256"]
    inserts = [t for _, t in sim.history.records if t.name in ("record_step", "record_approval", "record_input")]
    failed = sum(1 for t in inserts if t.fault == "audit_insert_fails")
    ambiguous = sum(1 for t in inserts if t.fault == "ambiguous_commit")
    assert failed and ambiguous
    db = sqlite3.connect(path)
    (n_events,) = db.execute(f"SELECT count(*) FROM {EVENT_TABLE}").fetchone()
    assert n_events == len(inserts) - failed
    (n_runs,) = db.execute(f"SELECT count(*) FROM {RUN_TABLE}").fetchone()
    stored = [r for r in sim.records.values() if r.status != "never_stored"]
    assert n_runs == len(stored)
    for rec in stored:
        row = db.execute(f"SELECT status, termination_reason, requeue_count, finished_at, crdate FROM {RUN_TABLE} "
                         "WHERE uuid = ?", (run_uuid(3, "current", rec.id),)).fetchone()
        assert row[:3] == (rec.status, rec.reason, rec.requeues)
        assert row[4] >= EPOCH and (row[3] >= row[4] if rec.finished else True)
    kinds = {k for (k,) in db.execute(f"SELECT DISTINCT kind FROM {EVENT_TABLE}")}
    assert kinds <= {"request", "llm", "tool", "approval", "input"}
    meta = [json.loads(p) for (p,) in db.execute(f"SELECT payload FROM {EVENT_TABLE} WHERE kind = 'tool' LIMIT 50")]
    assert all(p["contentRedacted"] is True and "toolArguments" not in p for p in meta)


def test_full_privacy_matches_by_arguments(tmp_path):
    path = str(tmp_path / "full.sqlite")
    simulate_one(read_toml(DEFAULT), policy="current", seed=1, runs=RUNS, keep_going=True, export=path,
                 export_privacy="full")
    db = sqlite3.connect(path)
    tool = json.loads(db.execute(f"SELECT payload FROM {EVENT_TABLE} WHERE kind = 'tool' LIMIT 1").fetchone()[0])
    assert "toolArguments" in tool and "contentRedacted" not in tool
    src = open_source(path)
    rep = inspect(src, load_catalogue(DEFAULT))
    src.close()
    doubles = [a for a in rep.anomalies if a.check == "double_application"]
    assert doubles and all("arguments" in a.text for a in doubles)


def run_cli(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_directory_gives_the_same_report_as_sqlite(tmp_path, capsys):
    db, d = str(tmp_path / "x.sqlite"), str(tmp_path / "csv")
    for target in (db, d):
        code, _, err = run_cli(["simulate", "--policy", "current", "--runs", "150", "--quiet", "--export", target], capsys)
        assert code in (0, 1), err
    assert sorted(p.name for p in Path(d).iterdir()) == [f"{RUN_TABLE}.csv", f"{EVENT_TABLE}.csv"]
    reports = []
    for source in (db, d):
        code, out, _ = run_cli(["inspect", source, "--quiet", "--tools", DEFAULT, "--json", str(tmp_path / "r.json")], capsys)
        assert code == 1
        rep = json.loads((tmp_path / "r.json").read_text())
        rep.pop("source"), rep.pop("elapsed_seconds")
        reports.append((rep, out.split("\n", 1)[1]))
    assert reports[0] == reports[1]
    # the same tables as mysql --batch (TSV) and as JSON lines
    for fmt in ("tsv", "jsonl"):
        out_dir = tmp_path / fmt
        out_dir.mkdir()
        for table in (RUN_TABLE, EVENT_TABLE):
            with open(Path(d) / f"{table}.csv", newline="") as f:
                rows = list(csv.reader(f))
            with open(out_dir / f"{table}.{fmt}", "w") as f:
                if fmt == "tsv":
                    for r in rows:
                        f.write("\t".join(c.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n") for c in r) + "\n")
                else:
                    for r in rows[1:]:
                        f.write(json.dumps(dict(zip(rows[0], r, strict=True))) + "\n")
        code, _, _ = run_cli(["inspect", str(out_dir), "--quiet", "--tools", DEFAULT, "--json", str(tmp_path / "r.json")], capsys)
        rep = json.loads((tmp_path / "r.json").read_text())
        rep.pop("source"), rep.pop("elapsed_seconds")
        assert code == 1 and rep == reports[0][0], fmt


def test_sqlalchemy_url_reads_the_same(tmp_path, capsys):
    pytest.importorskip("sqlalchemy")
    db = str(tmp_path / "x.sqlite")
    run_cli(["simulate", "--policy", "current", "--runs", "100", "--quiet", "--export", db], capsys)
    outs = []
    for source in (db, f"sqlite:///{db}"):
        code, out, _ = run_cli(["inspect", source, "--quiet", "--tools", DEFAULT, "--json", str(tmp_path / "r.json")], capsys)
        rep = json.loads((tmp_path / "r.json").read_text())
        rep.pop("source"), rep.pop("elapsed_seconds")
        outs.append((code, rep))
    assert outs[0] == outs[1]


def test_report_files_baseline_and_exit_codes(tmp_mod, tmp_path, capsys):
    _res, _sim, rep, path = simulated("current", 1, tmp_mod)
    junit = tmp_path / "r.xml"
    code, out, _ = run_cli(["inspect", path, "--quiet", "--tools", DEFAULT, "--junit", str(junit)], capsys)
    assert code == 1
    assert "What an export cannot tell" in out and out.count("What an export cannot tell") == 1
    assert "failclosed replay stream_order--current" in out  # by name: it opens from anywhere
    suite = ET.parse(junit).getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert len(cases) == len(CHECKS)
    failing = {n for n, c in cases.items() if c.find("failure") is not None}
    assert failing == {a.check for a in rep.anomalies}
    dup = cases["sequence_reused"].find("failure").text
    assert all(a.uuid in dup for a in rep.anomalies if a.check == "sequence_reused")
    # every anomaly of this history is the footprint of a finding the shipped baseline lists
    code, out, _ = run_cli(["inspect", path, "--quiet", "--tools", DEFAULT, "--baseline",
                            str(ROOT / "spec" / "baselines" / "current.toml")], capsys)
    assert code == 0, out
    assert re.search(r"0 new, \d+ known", out)


def make_db(path: Path, runs: list[dict], events: list[tuple], deadline: bool = False) -> str:
    """A hand-made export: run rows (defaults: a completed run) and events (uid, run, seq, kind, round, payload);
    ``deadline``: the schema after P6's migration (a dispatch_deadline column)."""
    db = sqlite3.connect(path)
    for s in create_sql(deadline=deadline):
        db.execute(s)
    base = {"pid": 0, "status": "completed", "configuration_uid": 1, "configuration_identifier": "x", "be_user": 0,
            "iterations": 1, "truncated": 0, "total_prompt_tokens": 0, "total_completion_tokens": 0,
            "total_tokens": 0, "estimated_cost": 0, "error_class": "", "termination_reason": "completed",
            "suspended_state": "", "queued_request": "", "claimed_by": "", "lease_expires": 0, "requeue_count": 0,
            "pending_effect": "", "started_at": 100, "finished_at": 200, "tstamp": 200, "crdate": 100}
    for k, r in enumerate(runs, 1):
        row = dict(base, uid=k, uuid=f"run-{k}", **r)
        db.execute(f"INSERT INTO {RUN_TABLE} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values()))
    for uid, run, seq, kind, rnd, payload in events:
        db.execute(f"INSERT INTO {EVENT_TABLE} VALUES (?, 0, ?, ?, ?, ?, 0, ?, 150)",
                   (uid, run, seq, kind, rnd, json.dumps(payload)))
    db.commit()
    db.close()
    return str(path)


def turn(run: int, start_uid: int, start_seq: int, rnd: int, tools: list[str], done: list[str] | None = None):
    done = tools if done is None else done
    evs = [(start_uid, run, start_seq, "request", rnd, {}),
           (start_uid + 1, run, start_seq + 1, "llm", rnd, {"requestedToolNames": tools} if tools else {})]
    for k, t in enumerate(done):
        evs.append((start_uid + 2 + k, run, start_seq + 2 + k, "tool", rnd, {"toolName": t, "toolIsError": False}))
    return evs


def checks_of(path: str, catalogue=None) -> dict[str, list]:
    src = open_source(path)
    try:
        rep = inspect(src, catalogue)
    finally:
        src.close()
    out: dict[str, list] = {}
    for a in rep.anomalies:
        out.setdefault(a.check, []).append(a)
    return out


def test_hand_made_anomalies_each_found_by_its_check(tmp_path):
    w = "create_page_draft"  # a builtin non-idempotent writer (model.config.BUILTIN_WRITERS)
    evs = (
        turn(1, 1, 0, 1, [])  # run 1: clean
        + [(10, 2, 0, "request", 1, {}), (11, 2, 0, "llm", 1, {})]  # run 2: duplicate sequence
        + [(20, 3, 0, "request", 1, {}), (21, 3, 2, "llm", 1, {})]  # run 3: gap
        + turn(4, 30, 0, 1, [w], done=[]) + turn(4, 40, 2, 1, [w])  # run 4: F1's footprint
        + turn(5, 50, 0, 1, [w]) + turn(5, 60, 3, 1, [w])  # run 5: applied in two attempts
        + turn(9, 90, 0, 1, [])  # orphan events: no run 9
    )
    runs = [{}, {}, {}, {"requeue_count": 1, "iterations": 1}, {"requeue_count": 1},
            {"status": "failed", "termination_reason": "completed", "claimed_by": "worker:x"},  # run 6
            {"status": "failed", "termination_reason": "retries_exhausted", "pending_effect": "non_idempotent_write"},
            {"status": "queued", "termination_reason": "", "finished_at": 0, "queued_request": "v2:x", "tstamp": 100}]
    evs += [(99, 8, 0, "request", 1, {})]
    evs += [(200, 8, 1, "llm", 1, {})]
    path = make_db(tmp_path / "h.sqlite", runs, evs)
    # make the export's last write far later than run 8's, so that its queued row is stale
    db = sqlite3.connect(path)
    db.execute(f"UPDATE {EVENT_TABLE} SET crdate = 100000 WHERE uid = 1")
    db.commit()
    db.close()
    got = checks_of(path, Catalogue())
    assert {a.uuid for a in got["sequence_reused"]} == {"run-2"}
    assert {a.uuid for a in got["sequence_gap"]} == {"run-3"}
    assert [a.run for a in got["orphan_events"]] == [9]
    f1 = got["interrupted_write_retried"]
    assert {a.uuid for a in f1} == {"run-4"} and "no_write_applied_twice_without_audit" in f1[0].properties
    assert {a.uuid for a in got["double_application"]} == {"run-5"}
    assert {a.uuid for a in got["row_state"]} == {"run-6"}
    assert {a.uuid for a in got["leftover_fence"]} == {"run-7"}
    assert {a.uuid for a in got["orphan_queued"]} == {"run-8"}
    assert "run-1" not in {a.uuid for v in got.values() for a in v}


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database")
    empty = tmp_path / "empty"
    empty.mkdir()
    unsorted = tmp_path / "unsorted"
    unsorted.mkdir()
    (unsorted / f"{RUN_TABLE}.csv").write_text("uid\n2\n1\n")
    (unsorted / f"{EVENT_TABLE}.csv").write_text("uid,run,sequence,kind,round,duration_ms,payload,crdate\n")
    cases = [
        ([str(tmp_path / "missing.sqlite")], "no such file"),
        ([str(junk)], "not an SQLite database"),
        ([str(empty)], f"no {RUN_TABLE}.csv"),
        ([str(unsorted)], "has no column"),
        ([str(junk), "--since", "yesterday"], "ISO 8601"),
        ([str(junk), "--junit", str(tmp_path / "r.txt")], ".xml"),
        ([str(junk), "--tools", str(tmp_path / "none.toml")], "no such file"),
    ]
    for argv, text in cases:
        code, out, err = run_cli(["inspect", *argv], capsys)
        lines = [x for x in err.splitlines() if x.strip()]
        assert code == 2 and len(lines) == 1 and text in lines[0], (argv, err)
    code, _, err = run_cli(["simulate", "--policy", "current", "--export", str(tmp_path / "x.txt")], capsys)
    assert code == 2 and ".sqlite" in err


def test_simulate_export_then_inspect(tmp_path, capsys):
    """The issue's command line: the side-by-side run exports current's simulation."""
    db = str(tmp_path / "x.sqlite")
    code, out, err = run_cli(["simulate", "--runs", "40", "--quiet", "--export", db], capsys)
    assert code == 0, err
    assert f"current's simulation exported to {db}: 40 runs" in out
    code, out, _ = run_cli(["inspect", db, "--quiet"], capsys)
    assert code in (0, 1) and "40 runs" in out and "What an export cannot tell" in out


def test_sigterm_leaves_no_half_written_export(tmp_path):
    import signal
    import subprocess
    import time

    db = tmp_path / "x.sqlite"
    p = subprocess.Popen([sys.executable, "-m", "failclosed", "simulate", "--policy", "current", "--runs", "100000",
                          "--quiet", "--export", str(db)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while not (tmp_path / ".x.sqlite.partial").exists() and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err  # 128 + SIGTERM, after the same clean-up as Ctrl-C
    assert list(tmp_path.iterdir()) == []
