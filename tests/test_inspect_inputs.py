"""``failclosed inspect`` on what a real database holds (issue 27): fields of the wrong type,
NULLs, payloads that are not JSON objects or nest deeper than the parser goes, a concurrent
writer, large payloads, URLs with passwords. Every such row is counted as unreadable and none
is read as something it is not, the two tables are one snapshot, memory stays within the
budget, and no secret of a URL is shown. The Hypothesis test at the end feeds mutated rows
through the SQLite, CSV and SQLAlchemy readers (the default suite runs a modest budget,
``-m slow`` a larger one).
"""

from __future__ import annotations

import csv
import json
import sqlite3
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from failclosed.cli import main  # noqa: E402
from failclosed.sim import inspect_sources  # noqa: E402
from failclosed.sim.dbschema import (  # noqa: E402
    EVENT_COLUMNS,
    EVENT_TABLE,
    INT_COLUMNS,
    KINDS,
    OPTIONAL_RUN_COLUMNS,
    REAL_COLUMNS,
    RUN_COLUMNS,
    RUN_TABLE,
)
from failclosed.sim.inspect import CERTAIN, HEURISTIC, inspect  # noqa: E402
from failclosed.sim.inspect_sources import (  # noqa: E402
    EVENT_READ,
    MIN_BUDGET,
    OPTIONAL_RUN_READ,
    PRESENCE_COLUMNS,
    RUN_READ,
    mask_url,
    open_source,
    payload_limit,
)

WRITER = "create_page_draft"  # a builtin non-idempotent writer (model.config.BUILTIN_WRITERS)
RUN_BASE: dict[str, Any] = {
    "pid": 0, "uuid": "", "status": "completed", "configuration_uid": 1, "configuration_identifier": "x",
    "be_user": 0, "iterations": 1, "truncated": 0, "total_prompt_tokens": 0, "total_completion_tokens": 0,
    "total_tokens": 0, "estimated_cost": 0.0, "error_class": "", "termination_reason": "completed",
    "suspended_state": "", "queued_request": "", "claimed_by": "", "lease_expires": 0, "requeue_count": 0,
    "pending_effect": "", "started_at": 100, "finished_at": 200, "tstamp": 200, "crdate": 100,
}


def run_row(uid: int, **over: Any) -> dict[str, Any]:
    return dict(RUN_BASE, uid=uid, uuid=f"run-{uid}", **over)


def event(uid: int, run: Any, seq: Any, kind: Any, rnd: Any, payload: Any) -> dict[str, Any]:
    """An event row; a payload that is not a string is written as its JSON."""
    text = payload if payload is None or isinstance(payload, str) else json.dumps(payload)
    return {"uid": uid, "pid": 0, "run": run, "sequence": seq, "kind": kind, "round": rnd,
            "duration_ms": 0, "payload": text, "crdate": 150}


def write_db(path: Path, runs: list[dict], events: list[dict], drop: tuple[str, str] | None = None,
             migrated: bool = False) -> str:
    """The two tables in an SQLite file, every value stored as given (SQLite keeps a value of
    another type in a column); ``drop``: (table, column) left out of the table; ``migrated``:
    the run table has the proposals' optional columns (P6's dispatch_deadline)."""
    db = sqlite3.connect(path)
    run_cols = RUN_COLUMNS + (OPTIONAL_RUN_COLUMNS if migrated else ())
    for table, cols, rows in ((RUN_TABLE, run_cols, runs), (EVENT_TABLE, EVENT_COLUMNS, events)):
        keep = [(c, t) for c, t in cols if (table, c) != drop]
        db.execute(f"CREATE TABLE {table} ({', '.join(f'{c} {t}' for c, t in keep)})")
        for r in rows:
            db.execute(f"INSERT INTO {table} ({', '.join(c for c, _ in keep)}) VALUES ({', '.join('?' * len(keep))})",
                       [r[c] for c, _ in keep])
    db.commit()
    db.close()
    return str(path)


def write_csv(path: Path, db: str) -> str:
    """The SQLite file's tables as the directory export (NULL as an empty field, as psql's CSV)."""
    path.mkdir()
    con = sqlite3.connect(db)
    con.text_factory = bytes
    for table, order in ((RUN_TABLE, ("uid",)), (EVENT_TABLE, ("run", "sequence", "uid"))):
        have = {r[1].decode() for r in con.execute(f"PRAGMA table_info({table})")}  # a column may be left out
        cur = con.execute(f"SELECT * FROM {table} ORDER BY {', '.join(c for c in order if c in have)}")
        with open(path / f"{table}.csv", "w", newline="", encoding="utf-8", errors="surrogateescape") as f:
            w = csv.writer(f)
            w.writerow([d[0] for d in cur.description])
            for r in cur:
                w.writerow(["" if v is None else v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v
                            for v in r])
    con.close()
    return str(path)


def report(source: str, **kw: Any):
    src = open_source(source, kw.pop("budget", inspect_sources.DEFAULT_BUDGET))
    try:
        return inspect(src, **kw)
    finally:
        src.close()


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def turn(run: int, uid: int, seq: int, rnd: int, names: list[str]) -> list[dict]:
    out = [event(uid, run, seq, "request", rnd, {"kind": "request"}),
           event(uid + 1, run, seq + 1, "llm", rnd, {"requestedToolNames": names})]
    for k, n in enumerate(names):
        out.append(event(uid + 2 + k, run, seq + 2 + k, "tool", rnd, {"toolName": n, "toolIsError": False}))
    return out


DEEP = "[" * 5000 + "]" * 5000
# (what the user found, the event rows of one run: a clean turn, then the broken row)
BROKEN = [
    ("NULL payload", event(9, 1, 3, "llm", 2, None)),
    ("empty payload", event(9, 1, 3, "llm", 2, "")),
    ("non-JSON payload", event(9, 1, 3, "llm", 2, "{not json")),
    ("array payload", event(9, 1, 3, "llm", 2, "[1, 2]")),
    ("requestedToolNames a string", event(9, 1, 3, "llm", 2, {"requestedToolNames": "_ace"})),
    ("requestedToolNames holding null", event(9, 1, 3, "llm", 2, {"requestedToolNames": [None]})),
    ("requestedToolNames holding a number", event(9, 1, 3, "llm", 2, {"requestedToolNames": [5]})),
    ("toolName null", event(9, 1, 3, "tool", 1, {"toolName": None, "toolIsError": False})),
    ("toolIsError a string", event(9, 1, 3, "tool", 1, {"toolName": WRITER, "toolIsError": "no"})),
    ("approval decidedBy a string", event(9, 1, 3, "approval", 0, {"approved": True, "decidedBy": "1"})),
    ("NULL sequence", event(9, 1, None, "llm", 2, {})),
    ("text sequence", event(9, 1, "x", "llm", 2, {})),
    ("negative sequence", event(9, 1, -1, "llm", 2, {})),
    ("fractional sequence", event(9, 1, 2.5, "llm", 2, {})),
    ("NULL round", event(9, 1, 3, "llm", None, {})),
    ("text round", event(9, 1, 3, "llm", "one", {})),
    ("NULL kind", event(9, 1, 3, None, 2, {})),
    ("payload nested 5000 deep", event(9, 1, 3, "llm", 2, DEEP)),
    ("toolArguments nested 5000 deep", event(9, 1, 3, "tool", 1, '{"toolName": "x", "toolIsError": false, '
                                                                    f'"toolArguments": {DEEP}}}')),
]


@pytest.mark.parametrize("what,broken", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_field_is_counted_unreadable_never_read_as_something(what, broken, tmp_path, capsys):
    db = write_db(tmp_path / "x.sqlite", [run_row(1, iterations=1)], turn(1, 1, 0, 1, [WRITER]) + [broken])
    rep = report(db)
    assert rep.unreadable.event_rows == 1 and rep.events == 4, what
    assert rep.unreadable.runs_partly_checked == 1
    # none of the user's false anomalies: "tool event(s) None", a gap with no sequence, a
    # write not audited read out of the broken row
    assert [a.check for a in rep.anomalies] == [], (what, [a.text for a in rep.anomalies])
    code, out, err = run_cli(["inspect", db, "--quiet", "--json", str(tmp_path / "r.json")], capsys)
    assert code == 0 and err == "", err
    assert "unreadable" in out and "1 event row" in out
    js = json.loads((tmp_path / "r.json").read_text())
    assert js["unreadable"]["event_rows"] == 1 and js["unreadable"]["reasons"][0]["table"] == EVENT_TABLE


def test_a_requested_name_string_is_not_read_one_character_at_a_time(tmp_path, capsys):
    db = write_db(tmp_path / "x.sqlite", [run_row(1)],
                  [event(1, 1, 0, "llm", 1, {"requestedToolNames": "_ace"})])
    code, out, _ = run_cli(["inspect", db, "--quiet"], capsys)
    assert code == 0 and "tools of unknown effect" not in out and "requestedToolNames is not a list" in out


def test_a_broken_run_row_is_counted_and_its_events_not_orphaned(tmp_path):
    runs = [run_row(1, status=None), run_row(2, requeue_count="many"), run_row(3)]
    evs = turn(1, 1, 0, 1, []) + turn(2, 10, 0, 1, []) + turn(3, 20, 0, 1, [])
    rep = report(write_db(tmp_path / "x.sqlite", runs, evs))
    assert rep.unreadable.run_rows == 2 and rep.runs == 1 and rep.events == len(evs)
    assert rep.anomalies == []


def test_events_whose_run_is_unreadable_are_counted(tmp_path):
    evs = turn(1, 1, 0, 1, []) + [event(50, None, 0, "llm", 1, {}), event(51, "one", 0, "llm", 1, {})]
    db = write_db(tmp_path / "x.sqlite", [run_row(1)], evs)
    for source in (db, f"sqlite:///{db}", write_csv(tmp_path / "csv", db)):
        rep = report(source)
        assert (rep.unreadable.event_rows, rep.events, rep.anomalies) == (2, 4, []), source


def test_totals_certain_only_where_the_export_proves_it(tmp_path):
    """A last round below iterations is what an audit-store outage leaves (the later rounds'
    steps are stored fail-soft): the runtime by design, a notice that says why, never an
    anomaly (issue 38 item 4: as a heuristic anomaly it failed `inspect --baseline current`
    on the default simulation's own export); one past iterations + 1 is certain."""
    runs = [run_row(1, iterations=5), run_row(2, iterations=1)]
    evs = turn(1, 1, 0, 1, []) + turn(2, 10, 0, 1, []) + turn(2, 20, 2, 2, []) + turn(2, 30, 4, 3, [])
    rep = report(write_db(tmp_path / "x.sqlite", runs, evs))
    got = {a.uuid: a for a in rep.anomalies if a.check == "totals"}
    assert "run-1" not in got
    notice = next(n for n in rep.notices if "below its iterations" in n)
    assert "fail-soft" in notice and rep.notice_runs[notice] == ["run-1"]
    assert got["run-2"].certainty == CERTAIN


def test_turn_grammar_heuristic_where_the_redactor_marked_the_names(tmp_path):
    runs = [run_row(1), run_row(2)]
    evs = [event(1, 1, 0, "llm", 1, {"requestedToolCalls": [{"id": "c", "name": "***", "arguments": {}}]}),
           event(2, 1, 1, "tool", 1, {"toolName": "search_pages", "toolIsError": False}),
           event(3, 2, 0, "llm", 1, {"requestedToolCalls": [{"id": "c", "name": "lookup", "arguments": {}}]}),
           event(4, 2, 1, "tool", 1, {"toolName": "search_pages", "toolIsError": False})]
    got = {a.uuid: a for a in report(write_db(tmp_path / "x.sqlite", runs, evs)).anomalies}
    assert got["run-1"].certainty == HEURISTIC and "redactor" in got["run-1"].text
    assert got["run-2"].certainty == CERTAIN


def test_both_tables_are_one_snapshot(tmp_path, monkeypatch):
    """A writer commits a new run between the inspector's first event row and its later run
    pages: the report is of the tables as they were when the read began."""
    monkeypatch.setattr(inspect_sources, "RUN_PAGE", 2)
    runs = [run_row(k) for k in range(1, 6)]
    evs = [e for k in range(1, 6) for e in turn(k, 10 * k, 0, 1, [])]
    db = write_db(tmp_path / "x.sqlite", runs, evs)
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")  # so the writer does not wait for the reader
    con.close()

    def concurrent_write() -> None:
        w = sqlite3.connect(db)
        r = run_row(99)
        w.execute(f"INSERT INTO {RUN_TABLE} ({', '.join(r)}) VALUES ({', '.join('?' * len(r))})", list(r.values()))
        e = event(999, 99, 0, "llm", 1, {})
        w.execute(f"INSERT INTO {EVENT_TABLE} ({', '.join(e)}) VALUES ({', '.join('?' * len(e))})", list(e.values()))
        e = event(998, 1, 0, "llm", 1, {})  # and a second sequence 0 for run 1
        w.execute(f"INSERT INTO {EVENT_TABLE} ({', '.join(e)}) VALUES ({', '.join('?' * len(e))})", list(e.values()))
        w.commit()
        w.close()

    for source in (db, f"sqlite:///{db}"):
        src = open_source(source)
        chunks = src.chunks

        def hooked(chunks=chunks):
            done = []
            for runs_it, events_it in chunks():
                def evs_then_write(it=events_it):
                    first = next(it, None)  # the events' read has begun, the later runs' not
                    if not done:
                        done.append(concurrent_write())
                    if first is not None:
                        yield first
                    yield from it
                yield runs_it, evs_then_write()

        src.chunks = hooked
        try:
            rep = inspect(src)
        finally:
            src.close()
        assert (rep.runs, rep.events, rep.anomalies) == (5, len(evs), []), source
        # the next read sees the write
        rep = report(source)
        assert rep.runs == 6 and {a.check for a in rep.anomalies} == {"sequence_reused"}
        with sqlite3.connect(db) as w:
            w.execute(f"DELETE FROM {RUN_TABLE} WHERE uid = 99")
            w.execute(f"DELETE FROM {EVENT_TABLE} WHERE uid IN (998, 999)")


def test_memory_stays_within_the_budget(tmp_path):
    """Events of 200 KB each: the rows fetched at a time are sized in bytes, and a run's events
    are kept without their payload text."""
    big = "x" * 200_000
    runs = [run_row(k, iterations=1) for k in range(1, 21)]
    evs = [event(100 * r + s, r, s, "llm", 1, {"requestedToolNames": [], "raw": big})
           for r in range(1, 21) for s in range(10)]
    db = write_db(tmp_path / "x.sqlite", runs, evs)
    assert Path(db).stat().st_size > 2 * MIN_BUDGET  # the export is larger than the budget
    tracemalloc.start()
    try:
        rep = report(db, budget=MIN_BUDGET)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rep.events == len(evs) and rep.unreadable.event_rows == 0
    assert peak < MIN_BUDGET, peak


def test_a_run_too_large_for_the_budget_and_a_payload_past_its_limit(tmp_path, capsys):
    db = write_db(tmp_path / "x.sqlite", [run_row(1)],
                  [event(1, 1, 0, "llm", 1, {"raw": "y" * (payload_limit(MIN_BUDGET) + 1)})])
    rep = report(db, budget=MIN_BUDGET)
    assert rep.unreadable.event_rows == 1 and "memory budget" in next(iter(rep.unreadable.reasons))[1]
    many = [event(k, 1, k, "request", 1, {}) for k in range(MIN_BUDGET // 2 // 1024 + 1)]
    db = write_db(tmp_path / "y.sqlite", [run_row(1)], many)
    code, _, err = run_cli(["inspect", db, "--quiet", "--memory-budget", "16M"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--memory-budget" in err


@pytest.mark.parametrize("value", ["1K", "lots", "-5M", "0", "2.5X"])
def test_memory_budget_is_validated_before_any_read(value, tmp_path, capsys):
    code, out, err = run_cli(["inspect", str(tmp_path / "missing.sqlite"), f"--memory-budget={value}"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--memory-budget" in err and "no such" not in err
    assert "give" in err  # the fix


def test_memory_budget_sizes(tmp_path, capsys):
    db = write_db(tmp_path / "x.sqlite", [run_row(1)], turn(1, 1, 0, 1, []))
    for value in ("64M", "1G", "1.5g", "20MiB", str(MIN_BUDGET)):
        code, _, err = run_cli(["inspect", db, "--quiet", "--memory-budget", value, "--json", str(tmp_path / "r.json")],
                               capsys)
        assert code == 0, err
    assert json.loads((tmp_path / "r.json").read_text())["memory_budget_bytes"] == MIN_BUDGET


@pytest.mark.parametrize("url,secret", [
    ("postgresql://reader:hunter2@db.example/typo3", "hunter2"),
    ("postgresql://reader@db.example/typo3?password=hunter2", "hunter2"),
    ("postgresql://reader@db.example/typo3?sslmode=require&PASSWORD=hunter2&x=1", "hunter2"),
    ("mysql+pymysql://reader:p%40ss%3Aword@db.example/typo3", "p%40ss%3Aword"),
    ("postgresql://reader:hunter2@db.example/typo3?sslpassword=s3cr3t", "s3cr3t"),
    ("not a url://x:hunter2@?password=hunter2", "hunter2"),
])
def test_secrets_in_urls_are_masked(url, secret):
    shown = mask_url(url)
    assert secret not in shown and "***" in shown
    assert "reader" in shown or "not a url" in shown


def test_secrets_never_reach_the_report_or_an_error_line(tmp_path, capsys):
    pytest.importorskip("sqlalchemy")
    db = write_db(tmp_path / "x.sqlite", [run_row(1)], turn(1, 1, 0, 1, []))
    # a connection refused (nothing listens on port 1): one line, no password
    for url in ("postgresql://reader:hunter2@127.0.0.1:1/typo3?password=hunter2&connect_timeout=2",
                f"sqlite:///{tmp_path}/none/x.sqlite?password=hunter2"):
        code, out, err = run_cli(["inspect", url, "--quiet"], capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "hunter2" not in err + out, err
    # a readable URL whose query holds a secret: not in the text report nor the JSON's source
    src = open_source(f"sqlite:///{db}?password=hunter2")
    try:
        rep = inspect(src)
    finally:
        src.close()
    assert "hunter2" not in rep.source and "***" in rep.source


def test_a_missing_column_is_one_line(tmp_path, capsys):
    db = write_db(tmp_path / "x.sqlite", [run_row(1)], turn(1, 1, 0, 1, []), drop=(EVENT_TABLE, "round"))
    for source in (db, f"sqlite:///{db}", write_csv(tmp_path / "csv", db)):
        code, _, err = run_cli(["inspect", source, "--quiet"], capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "has no column round" in err, (source, err)


# -- Hypothesis: mutated rows through every reader ---------------------------------------------
class Cell:
    """A drawn value and whether inspect must count its row unreadable (in the SQL readers, and
    in the CSV one, where NULL is an empty field: empty text is readable text)."""

    def __init__(self, value: Any, bad: bool, bad_in_csv: bool | None = None):
        self.value, self.bad = value, bad
        self.bad_in_csv = bad if bad_in_csv is None else bad_in_csv


def _int_cell(col: str) -> st.SearchStrategy[Cell]:
    good = st.integers(0, 10**9) if col not in ("requeue_count", "round", "sequence") else st.integers(0, 6)
    bad = [st.none(), st.sampled_from(["x", "1.5.2", "one"]), st.sampled_from([1.5, -0.25])]
    if col == "sequence":
        bad.append(st.integers(-5, -1))
    return st.one_of(good.map(lambda v: Cell(v, False)), st.one_of(bad).map(lambda v: Cell(v, True)))


def _text_cell(col: str) -> st.SearchStrategy[Cell]:
    good = {"status": st.sampled_from(["completed", "failed", "queued", "running", "cancelled", "weird"]),
            "termination_reason": st.sampled_from(["", "completed", "not_retryable", "max_iterations"]),
            "kind": st.sampled_from(KINDS + ("weird",)),
            "pending_effect": st.sampled_from(["", "non_idempotent_write", "read_only"])}.get(col, st.text(max_size=8))
    null = Cell(None, col not in PRESENCE_COLUMNS, False)
    return st.one_of(good.map(lambda v: Cell(v, False)), st.just(null))


def _real_cell(col: str) -> st.SearchStrategy[Cell]:
    return st.one_of(st.floats(0, 1e6).map(lambda v: Cell(v, False)), st.just(Cell(None, True)),
                     st.just(Cell("abc", True)))


def _json_value(depth: int) -> st.SearchStrategy[Any]:
    leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=5))
    return st.recursive(leaf, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=4), c, max_size=3)),
                        max_leaves=depth)


@st.composite
def _payload(draw, kind: str) -> Cell:
    """A payload of ``kind``'s shape with the runtime's types, or one broken in a way a real
    database can hold (NULL, empty, not JSON, not an object, too deep, too long, a field of the
    wrong type)."""
    name = st.sampled_from([WRITER, "search_pages", "mcp_x_y", "update_page_metadata", "odd"])
    shapes = {
        "llm": st.one_of(st.fixed_dictionaries({"requestedToolNames": st.lists(name, max_size=3)}),
                         st.fixed_dictionaries({"requestedToolCalls": st.lists(st.fixed_dictionaries(
                             {"id": st.text(max_size=3), "name": name, "arguments": _json_value(4)}), max_size=2)}),
                         st.just({})),
        "tool": st.fixed_dictionaries({"toolName": name, "toolIsError": st.booleans()},
                                      optional={"toolArguments": st.dictionaries(st.text(max_size=3), _json_value(4), max_size=2)}),
        "approval": st.fixed_dictionaries({"approved": st.booleans(), "decidedBy": st.integers(0, 9)}),
    }
    wrong = {
        "llm": [{"requestedToolNames": "_ace"}, {"requestedToolNames": [None]}, {"requestedToolNames": [5, "x"]},
                {"requestedToolCalls": "x"}, {"requestedToolCalls": [5]}, {"requestedToolCalls": [{"name": None}]}],
        "tool": [{"toolName": None, "toolIsError": False}, {"toolName": 5, "toolIsError": True},
                 {"toolIsError": False}, {"toolName": WRITER}, {"toolName": WRITER, "toolIsError": "false"},
                 {"toolName": WRITER, "toolIsError": False, "toolArguments": "x"}],
        "approval": [{"approved": "yes", "decidedBy": 1}, {"approved": True, "decidedBy": "1"}, {"approved": True},
                     {"approved": 1, "decidedBy": 1}],
    }
    good = st.one_of(shapes.get(kind, st.dictionaries(st.text(max_size=4), _json_value(3), max_size=3)),
                     st.dictionaries(st.text(max_size=4), _json_value(3), max_size=2)
                     if kind not in shapes else st.nothing())
    depth = draw(st.integers(1200, 3000))
    broken = st.sampled_from([None, "", "   ", "{not json", "[1, 2]", "5", '"text"', "null",
                              "[" * depth + "]" * depth, '{"a": ' + "[" * depth + "]" * depth + "}",
                              "z" * (payload_limit(MIN_BUDGET) + 1)])
    choice = draw(st.sampled_from(["good", "broken", "wrong"] if kind in wrong else ["good", "broken"]))
    if choice == "good":
        return Cell(json.dumps(draw(good)), False)
    if choice == "wrong":
        return Cell(json.dumps(draw(st.sampled_from(wrong[kind]))), True)
    return Cell(draw(broken), True)


@st.composite
def exports(draw) -> tuple:
    """Run and event rows, every field drawn (the uids unique: the tables' primary keys), how
    many of each inspect must count unreadable through the SQL readers and the CSV one, and now
    and then a column inspect reads left out of its table."""
    n_runs = draw(st.integers(0, 4))
    migrated = draw(st.booleans())  # the run table after P6's migration: its dispatch_deadline too
    runs, bad_runs, bad_runs_csv = [], 0, 0
    for uid in range(1, n_runs + 1):
        row, bad, bad_csv = {"uid": uid}, False, False
        for col, _ in RUN_COLUMNS[1:] + (OPTIONAL_RUN_COLUMNS if migrated else ()):
            cell = draw(_int_cell(col) if col in INT_COLUMNS else _real_cell(col) if col in REAL_COLUMNS else _text_cell(col))
            row[col] = cell.value
            # a column inspect does not read is drawn too, and never makes a row unreadable
            if col in RUN_READ or col in OPTIONAL_RUN_READ:
                bad, bad_csv = bad or cell.bad, bad_csv or cell.bad_in_csv
        runs.append(row)
        bad_runs, bad_runs_csv = bad_runs + bad, bad_runs_csv + bad_csv
    events, bad_events, bad_events_csv = [], 0, 0
    for uid in range(1, draw(st.integers(0, 12)) + 1):
        row, bad, bad_csv = {"uid": uid}, False, False
        for col, _ in EVENT_COLUMNS[1:]:
            if col == "payload":
                kind = row["kind"] if isinstance(row["kind"], str) else "request"
                cell = draw(_payload(kind))
            elif col == "run":
                cell = draw(st.one_of(st.integers(0, n_runs + 1).map(lambda v: Cell(v, False)),
                                      st.sampled_from([None, "one", 2.5]).map(lambda v: Cell(v, True))))
            else:
                cell = draw(_int_cell(col) if col in INT_COLUMNS else _real_cell(col) if col in REAL_COLUMNS else _text_cell(col))
            row[col] = cell.value
            if col in EVENT_READ:
                bad, bad_csv = bad or cell.bad, bad_csv or cell.bad_in_csv
        events.append(row)
        bad_events, bad_events_csv = bad_events + bad, bad_events_csv + bad_csv
    drop = None
    if draw(st.integers(0, 7)) == 0:
        drop = draw(st.sampled_from([(RUN_TABLE, c) for c in RUN_READ[1:]] + [(EVENT_TABLE, c) for c in EVENT_READ[1:]]))
    return runs, events, bad_runs, bad_events, bad_runs_csv, bad_events_csv, drop, migrated


def _fuzz(data: tuple, tmp: Path, capsys) -> None:
    runs, events, bad_runs, bad_events, bad_runs_csv, bad_events_csv, drop, migrated = data
    for f in tmp.iterdir():
        if f.is_dir():
            for g in f.iterdir():
                g.unlink()
            f.rmdir()
        else:
            f.unlink()
    db = write_db(tmp / "x.sqlite", runs, events, drop, migrated)
    sources = [(db, bad_runs, bad_events), (f"sqlite:///{db}", bad_runs, bad_events),
               (write_csv(tmp / "csv", db), bad_runs_csv, bad_events_csv)]
    for source, want_runs, want_events in sources:
        out = tmp / "r.json"
        capsys.readouterr()
        code = main(["inspect", source, "--quiet", "--memory-budget", "16M", "--json", str(out)])
        if drop is not None:  # one line naming the column, exit 2, nothing written
            err = capsys.readouterr().err.strip().splitlines()
            assert code == 2 and len(err) == 1 and f"has no column {drop[1]}" in err[0] and not out.exists(), err
            continue
        assert code in (0, 1), source  # never 2 (the columns are all there), never a traceback
        un = json.loads(out.read_text())["unreadable"]
        assert (un["run_rows"], un["event_rows"]) == (want_runs, want_events), (source, un)
        assert json.loads(out.read_text())["events"] == len(events)


BUDGET = 25


@settings(max_examples=BUDGET, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=exports())
def test_fuzz_mutated_rows_never_a_traceback_and_every_unreadable_row_counted(data, tmp_path, capsys):
    _fuzz(data, tmp_path, capsys)


@pytest.mark.slow
@settings(max_examples=500, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=exports())
def test_fuzz_slow(data, tmp_path, capsys):
    _fuzz(data, tmp_path, capsys)
