"""Where ``failclosed inspect`` reads the runtime's two tables from, streamed in the order
``runs by uid`` and ``events by (run, sequence, uid)`` (sim/inspect.py merges the two):

* an SQLite file (the runtime's embedded default; the simulator's ``--export DB.sqlite``);
* a SQLAlchemy URL (``mysql+pymysql://...``, ``postgresql://...``): the optional extra
  ``pip install 'failclosed[db]'`` and the database's driver; results are streamed
  (server-side cursors where the driver has them);
* a directory holding both tables as ``NAME.csv`` (a header row, RFC 4180), ``NAME.tsv``
  (``mysql --batch`` output: a header row, tab-separated, backslash escapes, ``NULL``) or
  ``NAME.jsonl`` / ``NAME.ndjson`` (one object per line), NAME being the table's name. A text
  file must be in the order above (docs/INSPECT.md gives the export commands); a file that is
  not is refused, exit 2.

Every row comes out as a tuple of the columns :data:`RUN_READ` / :data:`EVENT_READ`, ints as
ints. Problems with the source are one ``ConfigError`` line naming it and the fix.
"""

from __future__ import annotations

import csv
import json
import os
import sqlite3
from collections.abc import Iterator
from typing import Any

from failclosed.model.config import ConfigError

from .dbschema import EVENT_TABLE, INT_COLUMNS, REAL_COLUMNS, RUN_TABLE

RUN_READ = ("uid", "uuid", "status", "iterations", "truncated", "estimated_cost", "error_class",
            "termination_reason", "suspended_state", "queued_request", "claimed_by",
            "lease_expires", "requeue_count", "pending_effect", "started_at", "finished_at",
            "tstamp", "crdate")
EVENT_READ = ("uid", "run", "sequence", "kind", "round", "duration_ms", "payload", "crdate")
RUN_ORDER = "uid"
EVENT_ORDER = "run, sequence, uid"
TEXT_SUFFIXES = (".csv", ".tsv", ".jsonl", ".ndjson")
DB_HINT = "pip install 'failclosed[db]' (SQLAlchemy) and the database's driver, e.g. pymysql or psycopg"

__all__ = ["EVENT_READ", "RUN_READ", "Source", "open_source"]


class Source:
    """Two ordered streams of tuples, and a one-line description of where they come from."""

    kind = ""

    def __init__(self, where: str):
        self.where = where

    def runs(self) -> Iterator[tuple]:
        raise NotImplementedError

    def events(self) -> Iterator[tuple]:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _select(table: str, cols: tuple[str, ...], order: str) -> str:
    quoted = ", ".join(f'"{c}"' for c in cols)
    return f"SELECT {quoted} FROM {table} ORDER BY {order}"


class SqliteSource(Source):
    kind = "sqlite"

    def __init__(self, path: str):
        super().__init__(path)
        try:
            self.db = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True)
            names = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as e:
            raise ConfigError(f"SOURCE {path}: not an SQLite database ({e}); give the runtime's "
                              "database file, a SQLAlchemy URL or a directory of CSV / JSON-lines files") from None
        for table, cols in ((RUN_TABLE, RUN_READ), (EVENT_TABLE, EVENT_READ)):
            if table not in names:
                raise ConfigError(f"SOURCE {path}: no table {table}; export both {RUN_TABLE} and {EVENT_TABLE}")
            have = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
            _need(path, table, cols, have)

    def _stream(self, sql: str) -> Iterator[tuple]:
        cur = self.db.cursor()  # a cursor of its own: both streams are read side by side
        cur.execute(sql)
        while True:
            rows = cur.fetchmany(4096)
            if not rows:
                return
            yield from rows

    def runs(self) -> Iterator[tuple]:
        return self._stream(_select(RUN_TABLE, RUN_READ, RUN_ORDER))

    def events(self) -> Iterator[tuple]:
        return self._stream(_select(EVENT_TABLE, EVENT_READ, EVENT_ORDER))

    def close(self) -> None:
        self.db.close()


def _need(where: str, table: str, cols: tuple[str, ...], have: set[str]) -> None:
    missing = [c for c in cols if c not in have]
    if missing:
        raise ConfigError(f"SOURCE {where}: {table} has no column {missing[0]}; export the whole table "
                          "(SELECT * ...), see docs/INSPECT.md")


class UrlSource(Source):
    kind = "sqlalchemy"

    def __init__(self, url: str):
        shown = _hide_password(url)
        super().__init__(shown)
        try:
            import sqlalchemy as sa
        except ImportError:
            raise ConfigError(f"SOURCE {shown}: reading a database URL needs SQLAlchemy; {DB_HINT}") from None
        try:
            self.engine = sa.create_engine(url)
            insp = sa.inspect(self.engine)
            for table, cols in ((RUN_TABLE, RUN_READ), (EVENT_TABLE, EVENT_READ)):
                if not insp.has_table(table):
                    raise ConfigError(f"SOURCE {shown}: no table {table}; point the URL at the runtime's database")
                _need(shown, table, cols, {c["name"] for c in insp.get_columns(table)})
        except ConfigError:
            raise
        except ImportError as e:
            raise ConfigError(f"SOURCE {shown}: the driver is not installed ({e}); {DB_HINT}") from None
        except Exception as e:  # sqlalchemy.exc.*: a bad URL, a refused connection
            raise ConfigError(f"SOURCE {shown}: cannot open the database ({type(e).__name__}: "
                              f"{str(e).splitlines()[0] if str(e) else ''}); check the URL") from None
        self.sa = sa
        self.conns: list[Any] = []

    def _stream(self, table: str, cols: tuple[str, ...], order: str) -> Iterator[tuple]:
        conn = self.engine.connect().execution_options(stream_results=True, yield_per=4096)
        self.conns.append(conn)
        q = ", ".join(cols)
        for row in conn.execute(self.sa.text(f"SELECT {q} FROM {table} ORDER BY {order}")):
            yield tuple(row)

    def runs(self) -> Iterator[tuple]:
        return self._stream(RUN_TABLE, RUN_READ, RUN_ORDER)

    def events(self) -> Iterator[tuple]:
        return self._stream(EVENT_TABLE, EVENT_READ, EVENT_ORDER)

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.engine.dispose()


def _hide_password(url: str) -> str:
    if "@" in url and "://" in url:
        head, rest = url.split("://", 1)
        cred, host = rest.rsplit("@", 1)
        if ":" in cred:
            return f"{head}://{cred.split(':', 1)[0]}:***@{host}"
    return url


_TSV_ESCAPES = {"\\t": "\t", "\\n": "\n", "\\r": "\r", "\\0": "\0", "\\\\": "\\"}


def _unescape_tsv(s: str) -> str | None:
    if s == "NULL" or s == "\\N":
        return None
    if "\\" not in s:
        return s
    out, i = [], 0
    while i < len(s):
        pair = s[i:i + 2]
        if pair in _TSV_ESCAPES:
            out.append(_TSV_ESCAPES[pair])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


class DirectorySource(Source):
    kind = "directory"

    def __init__(self, path: str):
        super().__init__(path)
        self.files = {t: self._find(path, t) for t in (RUN_TABLE, EVENT_TABLE)}

    @staticmethod
    def _find(path: str, table: str) -> str:
        hits = [os.path.join(path, table + s) for s in TEXT_SUFFIXES if os.path.isfile(os.path.join(path, table + s))]
        if not hits:
            raise ConfigError(f"SOURCE {path}: no {table}.csv, .tsv, .jsonl or .ndjson in the directory; "
                              "export both tables there (docs/INSPECT.md)")
        if len(hits) > 1:
            raise ConfigError(f"SOURCE {path}: both {os.path.basename(hits[0])} and {os.path.basename(hits[1])}; "
                              "keep one file per table")
        return hits[0]

    def _records(self, path: str) -> Iterator[dict[str, Any]]:
        ext = os.path.splitext(path)[1]
        with open(path, encoding="utf-8", newline="") as f:
            if ext in (".jsonl", ".ndjson"):
                for n, line in enumerate(f, 1):
                    if line.strip():
                        try:
                            yield json.loads(line)
                        except json.JSONDecodeError as e:
                            raise ConfigError(f"SOURCE {path}: line {n} is not JSON ({e.msg}); "
                                              "give one JSON object per line") from None
                return
            if ext == ".tsv":
                header = f.readline().rstrip("\r\n").split("\t")
                for line in f:
                    cells = [_unescape_tsv(c) for c in line.rstrip("\r\n").split("\t")]
                    yield dict(zip(header, cells, strict=False))
                return
            yield from csv.DictReader(f)

    def _stream(self, table: str, cols: tuple[str, ...], key: tuple[int, ...]) -> Iterator[tuple]:
        path = self.files[table]
        prev = None
        for n, rec in enumerate(self._records(path), 2):
            if n == 2:
                _need(path, table, cols, set(rec))
            try:
                row = tuple(_typed(c, rec.get(c)) for c in cols)
            except ValueError as e:
                raise ConfigError(f"SOURCE {path}: record {n - 1}: {e}; export the table unchanged") from None
            k = tuple(row[i] for i in key)
            if prev is not None and k < prev:
                order = RUN_ORDER if table == RUN_TABLE else EVENT_ORDER
                raise ConfigError(f"SOURCE {path}: record {n - 1} is out of order; export with ORDER BY {order} "
                                  "(docs/INSPECT.md)")
            prev = k
            yield row

    def runs(self) -> Iterator[tuple]:
        return self._stream(RUN_TABLE, RUN_READ, (0,))

    def events(self) -> Iterator[tuple]:
        return self._stream(EVENT_TABLE, EVENT_READ, (1, 2, 0))


def _typed(col: str, v: Any) -> Any:
    if v is None:
        return None
    if col in INT_COLUMNS:
        if isinstance(v, int):
            return v
        try:
            return int(v) if v != "" else 0
        except ValueError:
            raise ValueError(f"column {col}: expected an integer, got {v!r}") from None
    if col in REAL_COLUMNS:
        return float(v) if v != "" else 0.0
    return v if isinstance(v, str) else json.dumps(v) if isinstance(v, (dict, list)) else str(v)


def open_source(spec: str) -> Source:
    """The source named by ``spec`` (see the module docstring)."""
    if "://" in spec:
        return UrlSource(spec)
    if os.path.isdir(spec):
        return DirectorySource(spec)
    if not os.path.exists(spec):
        raise ConfigError(f"SOURCE {spec}: no such file or directory; give an SQLite file, a SQLAlchemy URL "
                          "or a directory of CSV / JSON-lines files")
    if not os.access(spec, os.R_OK):
        raise ConfigError(f"SOURCE {spec}: not readable; check its permissions")
    return SqliteSource(spec)
