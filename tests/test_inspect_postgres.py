"""``failclosed inspect`` against a real PostgreSQL server (issue 27), when one can be started
here: ``initdb`` and ``pg_ctl`` on PATH (or in /usr/local/bin) and the driver (psycopg, the
``test`` extra). The server runs as an unprivileged user (initdb refuses root: under root the
test runs it as ``nobody`` through ``runuser``), listens on a unix socket in a temporary
directory only, and is stopped whatever the tests do. Skipped, with the reason, when no
server can be started.

The two tables are created as TYPO3 creates them on PostgreSQL (EXPORT.md 1: integer, smallint,
varchar, text, numeric columns with the runtime's defaults, the plain indexes), filled with the
export of a short simulation. Held: the report equals the one of the SQLite export; an account
without SELECT and a connection terminated mid-read are one line each, exit 2; a run committed
by another connection while inspect reads is not seen (one REPEATABLE READ snapshot); a
password in the URL is shown nowhere.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from failclosed.cli import main  # noqa: E402
from failclosed.model.config import read_toml  # noqa: E402
from failclosed.sim import config as sconfig  # noqa: E402
from failclosed.sim import inspect_sources  # noqa: E402
from failclosed.sim.batch import simulate_one  # noqa: E402
from failclosed.sim.dbschema import EVENT_NAMES, EVENT_TABLE, RUN_NAMES, RUN_TABLE  # noqa: E402

psycopg = pytest.importorskip("psycopg", reason="the PostgreSQL driver (psycopg, the test extra) is not installed")
pytest.importorskip("sqlalchemy", reason="SQLAlchemy (the db extra) is not installed")

DEFAULT = sconfig.default_path()

# the tables as TYPO3's schema migration creates them on PostgreSQL (ext_tables.sql:850-940)
DDL = (
    f"""CREATE TABLE {RUN_TABLE} (
        uid SERIAL PRIMARY KEY, pid INTEGER DEFAULT 0 NOT NULL, uuid VARCHAR(36) DEFAULT '' NOT NULL,
        status VARCHAR(32) DEFAULT 'queued' NOT NULL, configuration_uid INTEGER DEFAULT 0 NOT NULL,
        configuration_identifier VARCHAR(150) DEFAULT '' NOT NULL, be_user INTEGER DEFAULT 0 NOT NULL,
        iterations INTEGER DEFAULT 0 NOT NULL, truncated SMALLINT DEFAULT 0 NOT NULL,
        total_prompt_tokens INTEGER DEFAULT 0 NOT NULL, total_completion_tokens INTEGER DEFAULT 0 NOT NULL,
        total_tokens INTEGER DEFAULT 0 NOT NULL, estimated_cost NUMERIC(10, 6) DEFAULT 0 NOT NULL,
        error_class VARCHAR(255) DEFAULT '' NOT NULL, termination_reason VARCHAR(32) DEFAULT '' NOT NULL,
        suspended_state TEXT, queued_request TEXT, claimed_by VARCHAR(64) DEFAULT '' NOT NULL,
        lease_expires INTEGER DEFAULT 0 NOT NULL, requeue_count INTEGER DEFAULT 0 NOT NULL,
        pending_effect VARCHAR(32) DEFAULT '' NOT NULL, started_at INTEGER DEFAULT 0 NOT NULL,
        finished_at INTEGER DEFAULT 0 NOT NULL, tstamp INTEGER DEFAULT 0 NOT NULL,
        crdate INTEGER DEFAULT 0 NOT NULL)""",
    f"CREATE INDEX run_uuid ON {RUN_TABLE} (uuid)",
    f"""CREATE TABLE {EVENT_TABLE} (
        uid SERIAL PRIMARY KEY, pid INTEGER DEFAULT 0 NOT NULL, run INTEGER DEFAULT 0 NOT NULL,
        sequence INTEGER DEFAULT 0 NOT NULL, kind VARCHAR(32) DEFAULT '' NOT NULL,
        round INTEGER DEFAULT 0 NOT NULL, duration_ms NUMERIC(10, 2) DEFAULT 0 NOT NULL,
        payload TEXT, crdate INTEGER DEFAULT 0 NOT NULL)""",
    f"CREATE INDEX run_sequence ON {EVENT_TABLE} (run, sequence)",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tool(name: str) -> str | None:
    return shutil.which(name) or (f"/usr/local/bin/{name}" if os.access(f"/usr/local/bin/{name}", os.X_OK) else None)


@pytest.fixture(scope="module")
def server():
    """A PostgreSQL server of its own: {'host': socket dir, 'port': n}; stopped at teardown."""
    initdb, pg_ctl = _tool("initdb"), _tool("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("no PostgreSQL server here: initdb and pg_ctl are not on PATH")
    as_user: list[str] = []
    base = tempfile.mkdtemp(prefix="failclosed-pg-", dir="/tmp")
    if os.geteuid() == 0:  # initdb refuses root: the server runs as nobody
        runuser = shutil.which("runuser")
        try:
            nobody = pwd.getpwnam("nobody")
        except KeyError:
            nobody = None
        if not runuser or nobody is None:
            shutil.rmtree(base, ignore_errors=True)
            pytest.skip("running as root, and no runuser or no user nobody to run PostgreSQL as")
        os.chown(base, nobody.pw_uid, nobody.pw_gid)
        as_user = [runuser, "-u", "nobody", "--"]
    os.chmod(base, 0o755)
    data, port = os.path.join(base, "data"), _free_port()
    started = False
    try:
        init = subprocess.run([*as_user, initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8",
                               "--no-sync"], capture_output=True, text=True, timeout=120)
        if init.returncode != 0:
            pytest.skip(f"initdb failed: {(init.stderr.strip().splitlines() or ['?'])[-1]}")
        opts = f"-c listen_addresses='' -c unix_socket_directories={base} -p {port} -c fsync=off"
        start = subprocess.run([*as_user, pg_ctl, "-D", data, "-l", os.path.join(base, "log"), "-w", "-t", "60",
                                "-o", opts, "start"], capture_output=True, text=True, timeout=90)
        started = True
        if start.returncode != 0:
            pytest.skip(f"the PostgreSQL server did not start: {(start.stderr.strip().splitlines() or ['?'])[-1]}")
        yield {"host": base, "port": port}
    finally:
        if started:
            subprocess.run([*as_user, pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"], capture_output=True,
                           timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def admin(server, dbname: str = "typo3"):
    return psycopg.connect(host=server["host"], port=server["port"], user="postgres", dbname=dbname, autocommit=True)


def url(server, user: str = "postgres", extra: str = "") -> str:
    return f"postgresql+psycopg://{user}@/typo3?host={server['host']}&port={server['port']}{extra}"


@pytest.fixture(scope="module")
def loaded(server, tmp_path_factory):
    """The database typo3 with the two tables, filled with a short simulation's export; the
    SQLite file of the same export."""
    path = str(tmp_path_factory.mktemp("pg") / "x.sqlite")
    simulate_one(read_toml(DEFAULT), policy="current", seed=1, runs=20, keep_going=True, export=path)
    with admin(server, "postgres") as c:
        c.execute("CREATE DATABASE typo3")
        c.execute("CREATE ROLE noselect LOGIN")
    src = sqlite3.connect(path)
    with admin(server) as c:
        for stmt in DDL:
            c.execute(stmt)
        for table, cols in ((RUN_TABLE, RUN_NAMES), (EVENT_TABLE, EVENT_NAMES)):
            rows = src.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
            with c.cursor() as cur:
                cur.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})",
                                rows)
    src.close()
    return path


def inspect_json(source: str, tmp_path: Path, capsys) -> tuple[int, dict, str, str]:
    out = tmp_path / "r.json"
    if out.exists():
        out.unlink()
    code = main(["inspect", source, "--quiet", "--tools", DEFAULT, "--json", str(out)])
    text, err = capsys.readouterr()
    rep = json.loads(out.read_text()) if out.exists() else {}
    return code, rep, text, err


def test_postgres_report_equals_sqlite(server, loaded, tmp_path, capsys):
    reports = []
    for source in (loaded, url(server, "postgres:hunter2", "&password=hunter2")):
        code, rep, text, err = inspect_json(source, tmp_path, capsys)
        assert code in (0, 1) and err == "", err
        assert "hunter2" not in text and "hunter2" not in json.dumps(rep)
        src = rep.pop("source")
        rep.pop("elapsed_seconds")
        reports.append((code, rep, text.split("\n", 1)[1]))
    assert "***" in src
    assert reports[0] == reports[1]
    assert reports[0][1]["runs"] > 0 and reports[0][1]["events"] > 0


def test_postgres_account_without_select_is_one_line(server, loaded, tmp_path, capsys):
    code, rep, text, err = inspect_json(url(server, "noselect"), tmp_path, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and rep == {}, err
    assert "SELECT" in lines[0] and "grant" in lines[0] and "Traceback" not in err


def test_postgres_connection_terminated_mid_read_is_one_line(server, loaded, tmp_path, capsys, monkeypatch):
    events = inspect_sources.UrlSource._events

    def killed_after_the_first_row(self, conn, lo, hi):
        it = events(self, conn, lo, hi)
        yield next(it)
        with admin(server) as c:
            c.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'victim'")
        yield from it

    monkeypatch.setattr(inspect_sources.UrlSource, "_events", killed_after_the_first_row)
    code, rep, text, err = inspect_json(url(server, extra="&application_name=victim"), tmp_path, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and rep == {}, err
    assert "connection" in lines[0] and "run inspect again" in lines[0] and "Traceback" not in err


def test_postgres_reads_one_snapshot(server, loaded, tmp_path, capsys, monkeypatch):
    """Another connection commits a run and a reused sequence after inspect began reading: the
    later pages (REPEATABLE READ) do not show them."""
    code0, before, _, _ = inspect_json(url(server), tmp_path, capsys)
    monkeypatch.setattr(inspect_sources, "RUN_PAGE", 5)
    events = inspect_sources.UrlSource._events
    done: list = []

    def write_meanwhile(self, conn, lo, hi):
        if not done:
            with admin(server) as c:
                c.execute(f"INSERT INTO {RUN_TABLE} (uid, uuid, status) VALUES (100000, 'late', 'queued')")
                c.execute(f"INSERT INTO {EVENT_TABLE} (uid, run, sequence, kind, payload) "
                          f"SELECT 100000, run, sequence, kind, payload FROM {EVENT_TABLE} ORDER BY uid DESC LIMIT 1")
            done.append(1)
        yield from events(self, conn, lo, hi)

    monkeypatch.setattr(inspect_sources.UrlSource, "_events", write_meanwhile)
    try:
        code, during, _, err = inspect_json(url(server), tmp_path, capsys)
        assert done and code == code0, err
        for rep in (before, during):
            rep.pop("elapsed_seconds")
        assert during == before
        monkeypatch.setattr(inspect_sources.UrlSource, "_events", events)
        _, after, _, _ = inspect_json(url(server), tmp_path, capsys)
        assert after["runs"] == before["runs"] + 1 and after["events"] == before["events"] + 1
    finally:
        with admin(server) as c:
            c.execute(f"DELETE FROM {RUN_TABLE} WHERE uid = 100000")
            c.execute(f"DELETE FROM {EVENT_TABLE} WHERE uid = 100000")


def _postgres_migration() -> list[str]:
    """The PostgreSQL migration of P6 and P8 as docs/PROPOSALS.md gives it, statement by statement."""
    import re

    text = (ROOT / "docs" / "PROPOSALS.md").read_text()
    part = text.split("## Migration (P6, P7, P8)", 1)[1].split("PostgreSQL:", 1)[1]
    block = re.search(r"```sql\n(.*?)```", part, re.S).group(1)
    sql = "\n".join(line.split("--", 1)[0] for line in block.splitlines())
    return [s.strip() for s in sql.split(";") if s.strip()]


def test_postgres_after_the_migration_shows_the_proposals_footprints(server, tmp_path, capsys):
    """The tables as TYPO3 creates them, migrated with docs/PROPOSALS.md's PostgreSQL statements,
    filled with a proposed simulation's export (its dispatch_deadline too): the report equals
    the SQLite file's, P6's check applies, and no proposal's footprint shows."""
    from failclosed.sim.dbschema import DISPATCH_DEADLINE

    path = str(tmp_path / "p.sqlite")
    simulate_one(read_toml(DEFAULT), policy="proposed", seed=1, runs=20, keep_going=True, export=path)
    with admin(server, "postgres") as c:
        c.execute("CREATE DATABASE typo3p6")
    src = sqlite3.connect(path)
    pg = f"postgresql+psycopg://postgres@/typo3p6?host={server['host']}&port={server['port']}"
    with psycopg.connect(host=server["host"], port=server["port"], user="postgres", dbname="typo3p6",
                         autocommit=True) as c:
        for stmt in DDL:
            c.execute(stmt)
        for stmt in _postgres_migration():  # the duplicates query among them returns no row
            c.execute(stmt)
        for table, cols in ((RUN_TABLE, RUN_NAMES + (DISPATCH_DEADLINE,)), (EVENT_TABLE, EVENT_NAMES)):
            rows = src.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
            with c.cursor() as cur:
                cur.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})",
                                rows)
        with pytest.raises(psycopg.errors.UniqueViolation):  # P8: the key is UNIQUE now
            c.execute(f"INSERT INTO {EVENT_TABLE} (uid, run, sequence) SELECT uid + 100000, run, sequence "
                      f"FROM {EVENT_TABLE} LIMIT 1")
    src.close()
    reports = []
    for source in (path, pg):
        code, rep, _text, err = inspect_json(source, tmp_path, capsys)
        assert code in (0, 1) and err == "", err
        rep.pop("source"), rep.pop("elapsed_seconds")
        reports.append(rep)
    assert reports[0] == reports[1]
    assert all(p["applies"] and p["anomalies"] == 0 for p in reports[0]["proposals"]), reports[0]["proposals"]
