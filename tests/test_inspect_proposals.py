"""``failclosed inspect`` checks a database taken after the change for each proposal working
(issue 28 item 5, docs/INSPECT.md "The proposals' footprints"): P6's overdue sweep (the
``dispatch_deadline`` column: a QUEUED row whose deadline is long past, or that has none, is
an orphan the sweep missed; a deadline moved on shows a re-dispatch), P7's owner-guarded
insert (no event inserted after a higher sequence) and P8's UNIQUE key (no (run, sequence)
stored twice). Where the column does not exist (the runtime before the change) the P6 check
does not apply, and the report says so in one line."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest
from failclosed.model.constants import Constants
from failclosed.sim.dbschema import DISPATCH_DEADLINE, EVENT_TABLE, RUN_TABLE
from failclosed.sim.export import EPOCH
from failclosed.sim.inspect import (
    DUPLICATE,
    FOOTPRINTS,
    NO_DEADLINE,
    OUT_OF_ORDER,
    REDISPATCHED,
    footprints,
    inspect,
)
from failclosed.sim.inspect_sources import open_source

from tests.test_inspect import make_db, run_cli, simulated, turn

LEASE = Constants().LEASE_SECONDS
QUEUED = {"status": "queued", "termination_reason": "", "finished_at": 0, "queued_request": "v2:x",
          "started_at": 0}


@pytest.fixture(scope="module")
def tmp_mod(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("inspect_proposals"))


def report(path: str):
    src = open_source(path)
    try:
        return inspect(src)
    finally:
        src.close()


def by_proposal(rep) -> dict[str, dict]:
    return {f["proposal"]: f for f in footprints(rep)}


def p6_db(tmp_path: Path, deadline: bool = True) -> str:
    """Queued rows after P6's migration, against an export whose last write is at 10,000:
    run 1 a fresh enqueue (T2's deadline, crdate + a lease), run 2 one whose deadline passed
    long ago, run 3 one with no deadline, run 4 one the sweep moved on (T15: now + a lease,
    never requeued), run 5 a requeued row (T11: now + a lease); run 6 completed, its deadline 0."""
    rows = [QUEUED | {"crdate": 9000, "tstamp": 9000, DISPATCH_DEADLINE: 9000 + LEASE},
            QUEUED | {"crdate": 1000, "tstamp": 1000, DISPATCH_DEADLINE: 1000 + LEASE},
            QUEUED | {"crdate": 9500, "tstamp": 9500, DISPATCH_DEADLINE: 0},
            QUEUED | {"crdate": 7000, "tstamp": 9800, DISPATCH_DEADLINE: 9800 + LEASE},
            QUEUED | {"crdate": 7000, "tstamp": 9800, "requeue_count": 1, DISPATCH_DEADLINE: 9800 + LEASE},
            {"tstamp": 10000, DISPATCH_DEADLINE: 0}]
    if not deadline:
        rows = [{k: v for k, v in r.items() if k != DISPATCH_DEADLINE} for r in rows]
    return make_db(tmp_path / f"p6-{deadline}.sqlite", rows, turn(6, 1, 0, 1, []), deadline=deadline)


def test_p6_overdue_and_deadline_less_queued_rows_are_orphans_the_sweep_missed(tmp_path):
    rep = report(p6_db(tmp_path))
    got = {a.uuid: a for a in rep.anomalies if a.check == "overdue_queued"}
    assert set(got) == {"run-2", "run-3"}
    assert f"passed {10000 - 1000 - LEASE} s before" in got["run-2"].text
    assert f"{DISPATCH_DEADLINE} = 0" in got["run-3"].text
    assert all(a.certainty == "heuristic" and "no_orphan_queued_run" in a.properties for a in got.values())
    # run 4's deadline lies past its enqueue's and it was never requeued: the sweep moved it on
    assert rep.notices[REDISPATCHED] == 1 and rep.notice_runs[REDISPATCHED] == ["run-4"]
    p6 = by_proposal(rep)["P6"]
    assert p6["applies"] and p6["anomalies"] == 2
    assert "overdue_queued" not in rep.unsupported


def test_p6_does_not_apply_without_the_column_and_says_so_in_one_line(tmp_path, capsys):
    path = p6_db(tmp_path, deadline=False)
    rep = report(path)
    assert not [a for a in rep.anomalies if a.check == "overdue_queued"]
    assert REDISPATCHED not in rep.notices
    assert rep.unsupported["overdue_queued"] == NO_DEADLINE
    p6 = by_proposal(rep)["P6"]
    assert not p6["applies"] and p6["anomalies"] is None and p6["text"] == NO_DEADLINE
    code, out, _err = run_cli(["inspect", path, "--quiet"], capsys)
    assert code == 1  # run 2's row is stale under the tstamp check (orphan_queued) too
    assert sum("does not apply" in line for line in out.splitlines()) == 1
    assert "P6 overdue_queued_redispatched: overdue_queued: does not apply" in out


def test_p7_and_p8_count_the_two_footprints_of_a_reused_sequence(tmp_path):
    evs = (turn(1, 1, 0, 1, [])  # run 1: clean
           + [(10, 2, 0, "request", 1, {}), (11, 2, 0, "llm", 1, {})]  # run 2: (2, 0) stored twice
           + [(20, 3, 0, "request", 1, {}), (22, 3, 1, "llm", 1, {}), (21, 3, 2, "request", 1, {})])  # run 3
    rep = report(make_db(tmp_path / "seq.sqlite", [{}, {}, {}], evs))
    reused = {a.uuid: a.detail for a in rep.anomalies if a.check == "sequence_reused"}
    assert reused == {"run-2": DUPLICATE, "run-3": OUT_OF_ORDER}
    fp = by_proposal(rep)
    assert (fp["P7"]["anomalies"], fp["P8"]["anomalies"]) == (1, 1)
    assert [f[0] for f in FOOTPRINTS] == list(fp)


def test_a_proposed_simulation_leaves_none_of_the_footprints(tmp_mod):
    """The export of a proposed simulation has the migrated schema (the column, the UNIQUE
    key) and shows no footprint of P6, P7 or P8 not working; current's shows F2's duplicates
    and has no column for P6's check."""
    _res, _sim, rep, path = simulated("proposed", 1, tmp_mod)
    db = sqlite3.connect(path)
    cols = {r[1] for r in db.execute(f"PRAGMA table_info({RUN_TABLE})")}
    (unique,) = db.execute("SELECT \"unique\" FROM pragma_index_list(?) WHERE name = 'run_sequence'",
                           (EVENT_TABLE,)).fetchone()
    queued = db.execute(f"SELECT {DISPATCH_DEADLINE}, crdate FROM {RUN_TABLE} WHERE status = 'queued'").fetchall()
    db.close()
    assert DISPATCH_DEADLINE in cols and unique == 1
    assert all(d >= EPOCH for d, _c in queued)  # every queued row has its deadline (T2, T9, T11)
    fp = by_proposal(rep)
    assert all(f["applies"] and f["anomalies"] == 0 for f in fp.values()), fp
    _res, _sim, rep, path = simulated("current", 1, tmp_mod)
    fp = by_proposal(rep)
    assert not fp["P6"]["applies"]
    assert fp["P8"]["anomalies"] == sum(a.check == "sequence_reused" and a.detail == DUPLICATE
                                        for a in rep.anomalies) > 0


def test_a_csv_export_with_the_column_reads_as_the_sqlite_file(tmp_path, capsys):
    path = p6_db(tmp_path)
    d = tmp_path / "csv"
    d.mkdir()
    db = sqlite3.connect(path)
    for table, order in ((RUN_TABLE, "uid"), (EVENT_TABLE, "run, sequence, uid")):
        cur = db.execute(f"SELECT * FROM {table} ORDER BY {order}")
        with open(d / f"{table}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow([c[0] for c in cur.description])
            w.writerows(cur.fetchall())
    db.close()
    reports = []
    for source in (path, str(d)):
        code, _out, _ = run_cli(["inspect", source, "--quiet", "--json", str(tmp_path / "r.json")], capsys)
        rep = json.loads((tmp_path / "r.json").read_text())
        rep.pop("source"), rep.pop("elapsed_seconds")
        reports.append((code, rep))
    assert reports[0] == reports[1]
    assert [p["anomalies"] for p in reports[0][1]["proposals"]][0] == 2


def test_an_unreadable_deadline_is_counted_not_read_as_zero(tmp_path):
    path = p6_db(tmp_path)
    db = sqlite3.connect(path)
    db.execute(f"UPDATE {RUN_TABLE} SET {DISPATCH_DEADLINE} = 'soon' WHERE uid = 2")
    db.commit()
    db.close()
    rep = report(path)
    assert {a.uuid for a in rep.anomalies if a.check == "overdue_queued"} == {"run-3"}
    assert rep.unreadable.run_rows == 1
    assert any(f"{DISPATCH_DEADLINE} is not an integer" in r for _t, r in rep.unreadable.reasons)


def test_the_export_of_a_policy_without_p6_has_no_column(tmp_mod):
    _res, _sim, _rep, path = simulated("current", 1, tmp_mod)
    db = sqlite3.connect(path)
    cols = {r[1] for r in db.execute(f"PRAGMA table_info({RUN_TABLE})")}
    db.close()
    assert DISPATCH_DEADLINE not in cols
