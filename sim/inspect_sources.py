"""Where ``failclosed inspect`` reads the runtime's two tables from, streamed in the order
``runs by uid`` and ``events by (run, sequence, uid)`` (sim/inspect.py merges the two):

* an SQLite file (the runtime's embedded default; the simulator's ``--export DB.sqlite``),
  opened read-only, both tables read in one read transaction (one snapshot);
* a SQLAlchemy URL (``mysql+pymysql://...``, ``postgresql://...``): the optional extra
  ``pip install 'failclosed[db]'`` and the database's driver. One connection and one
  read-only transaction (REPEATABLE READ where the server has it) read both tables: the runs
  a page at a time (by ``uid``), then the events of that page's run range streamed, so no two
  results are ever open on the connection at once (MySQL's drivers cannot interleave them);
* a directory holding both tables as ``NAME.csv`` (a header row, RFC 4180), ``NAME.tsv``
  (``mysql --batch`` output: a header row, tab-separated, backslash escapes, ``NULL``) or
  ``NAME.jsonl`` / ``NAME.ndjson`` (one object per line), NAME being the table's name. A text
  file must be in the order above (docs/INSPECT.md gives the export commands); a file that is
  not is refused, exit 2.

:meth:`Source.chunks` yields ``(runs, events)`` pairs of iterators (one pair for a file or a
directory, one per page of runs for a URL): every row a tuple of the columns :data:`RUN_READ` /
:data:`EVENT_READ` as the source holds them (a text export's integers as ints where they parse,
anything else kept as it is: sim/inspect_rows.py type-checks every field and counts what it
cannot read). Rows are fetched in batches sized to a share of the memory budget, in bytes.
Problems with the source itself (no such table, a refused SELECT, a lost connection) are one
``ConfigError`` line naming it and the fix; a URL's passwords never appear in it
(:func:`mask_url`).
"""

from __future__ import annotations

import csv
import json
import os
import re
import sqlite3
import warnings
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from failclosed.model.config import ConfigError

from .dbschema import EVENT_TABLE, INT_COLUMNS, OPTIONAL_RUN_COLUMNS, REAL_COLUMNS, RUN_TABLE

RUN_READ = ("uid", "uuid", "status", "iterations", "truncated", "estimated_cost", "error_class",
            "termination_reason", "suspended_state", "queued_request", "claimed_by",
            "lease_expires", "requeue_count", "pending_effect", "started_at", "finished_at",
            "tstamp", "crdate")
EVENT_READ = ("uid", "run", "sequence", "kind", "round", "duration_ms", "payload", "crdate")
# run columns read where the table has them, after RUN_READ's (a migration's: P6's deadline)
OPTIONAL_RUN_READ = tuple(c for c, _ in OPTIONAL_RUN_COLUMNS)
RUN_ORDER = "uid"
EVENT_ORDER = "run, sequence, uid"
# sealed blobs the checks only test for presence: a database source reads their first
# characters, so a run row costs a few hundred bytes whatever the runtime sealed in it
PRESENCE_COLUMNS = ("suspended_state", "queued_request")
PRESENCE_PREFIX = 16
TEXT_SUFFIXES = (".csv", ".tsv", ".jsonl", ".ndjson")
DB_HINT = "pip install 'failclosed[db]' (SQLAlchemy) and the database's driver, e.g. pymysql or psycopg"

MiB = 1 << 20
DEFAULT_BUDGET = 256 * MiB
MIN_BUDGET = 16 * MiB
RUN_PAGE = 1024  # run rows per page of a URL source (each a few hundred bytes, see above)
_ROW_OVERHEAD = 256  # bytes of a fetched row beyond its payload text (tuple, ints, short strings)

__all__ = ["DEFAULT_BUDGET", "EVENT_READ", "MIN_BUDGET", "OPTIONAL_RUN_READ", "RUN_READ", "Source", "mask_url",
           "open_source", "parse_budget", "payload_limit"]


def parse_budget(text: str) -> int:
    """``--memory-budget``: bytes, or a number with K, M or G (KiB, MiB, GiB, powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmg]?)(?:i?b)?\s*", text, re.IGNORECASE)
    if not m:
        raise ConfigError(f"--memory-budget {text}: expected a size such as 256M, 1G or 300000000 (bytes); "
                          "give a number with an optional K, M or G")
    n = int(float(m.group(1)) * (1 << (10 * " kmg".index(m.group(2).lower() or " "))))
    if n < MIN_BUDGET:
        raise ConfigError(f"--memory-budget {text}: {n:,} bytes is below the least inspect works in "
                          f"({MIN_BUDGET // MiB}M); give {MIN_BUDGET // MiB}M or more")
    return n


def payload_limit(budget: int) -> int:
    """The longest payload (characters) read under ``budget``: parsing one holds several times
    its length; a longer one is counted unreadable (MEDIUMTEXT holds 16 MiB, the default's limit)."""
    return budget // 16


def fetch_share(budget: int) -> int:
    """Bytes one stream's fetched-but-unread batch may take (two streams are open at a time)."""
    return budget // 8


class Source:
    """Ordered streams of tuples, and a one-line description of where they come from."""

    kind = ""

    def __init__(self, where: str, budget: int = DEFAULT_BUDGET):
        self.where = where
        self.budget = budget
        # the run columns each run row holds: RUN_READ, then the OPTIONAL_RUN_READ the table has
        self.run_read: tuple[str, ...] = RUN_READ

    def _optional(self, have: set[str]) -> None:
        """Read the optional run columns the run table ``have``s, after RUN_READ's."""
        self.run_read = RUN_READ + tuple(c for c in OPTIONAL_RUN_READ if c in have)

    def chunks(self) -> Iterator[tuple[Iterator[tuple], Iterator[tuple]]]:
        """``(runs, events)`` pairs: the events of a pair are those whose ``run`` falls between
        the previous pair's last run uid (exclusive) and this pair's (inclusive; the last pair
        open-ended). Each pair's events are read to the end before the next pair is asked for."""
        yield self.runs(), self.events()

    def runs(self) -> Iterator[tuple]:
        raise NotImplementedError

    def events(self) -> Iterator[tuple]:
        raise NotImplementedError

    def unreadable_outside(self) -> int:
        """Event rows no chunk returns (a database's events whose ``run`` is NULL)."""
        return 0

    def close(self) -> None:
        pass


def _select(table: str, cols: tuple[str, ...], order: str, where: str = "",
            quote: Any = lambda c: f'"{c}"') -> str:
    """``quote``: the database's identifier quoting (MySQL reads "x" as a string)."""
    quoted = ", ".join(f"substr({quote(c)}, 1, {PRESENCE_PREFIX}) AS {quote(c)}" if c in PRESENCE_COLUMNS
                       else quote(c) for c in cols)
    return f"SELECT {quoted} FROM {table}{where} ORDER BY {order}"


class _Batcher:
    """Rows per fetch so that one batch stays near ``share`` bytes: measured on the rows read."""

    def __init__(self, share: int, text_col: int | None):
        self.share, self.col = share, text_col
        self.n = 16

    def next_size(self, rows: list) -> int:
        if rows:
            size = sum(_ROW_OVERHEAD + (len(r[self.col]) if self.col is not None and isinstance(r[self.col], (str, bytes)) else 0)
                       for r in rows)
            self.n = max(1, min(4096, self.share * len(rows) // max(size, 1)))
        return self.n


class SqliteSource(Source):
    kind = "sqlite"

    def __init__(self, path: str, budget: int = DEFAULT_BUDGET):
        super().__init__(path, budget)
        try:
            self.db = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True, isolation_level=None)
            names = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as e:
            raise ConfigError(f"SOURCE {path}: not an SQLite database ({e}); give the runtime's "
                              "database file, a SQLAlchemy URL or a directory of CSV / JSON-lines files") from None
        for table, cols in ((RUN_TABLE, RUN_READ), (EVENT_TABLE, EVENT_READ)):
            if table not in names:
                raise ConfigError(f"SOURCE {path}: no table {table}; export both {RUN_TABLE} and {EVENT_TABLE}")
            have = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
            _need(path, table, cols, have)
            if table == RUN_TABLE:
                self._optional(have)
        self.db.execute("BEGIN")  # both cursors read inside this one read transaction: one snapshot

    def _stream(self, sql: str, text_col: int | None) -> Iterator[tuple]:
        batch = _Batcher(fetch_share(self.budget), text_col)
        try:
            cur = self.db.cursor()  # a cursor of its own: both streams are read side by side
            cur.execute(sql)
            rows: list = []
            while True:
                rows = cur.fetchmany(batch.next_size(rows))
                if not rows:
                    return
                yield from rows
        except sqlite3.DatabaseError as e:
            raise ConfigError(f"SOURCE {self.where}: reading failed ({type(e).__name__}: {e}); "
                              "check the file is a whole copy of the database") from None

    def runs(self) -> Iterator[tuple]:
        return self._stream(_select(RUN_TABLE, self.run_read, RUN_ORDER), None)

    def events(self) -> Iterator[tuple]:
        # the payload as bytes: one that is not UTF-8 is counted unreadable, not a failed read
        sql = _select(EVENT_TABLE, EVENT_READ, EVENT_ORDER).replace('"payload"', 'CAST("payload" AS BLOB) AS "payload"', 1)
        return self._stream(sql, EVENT_READ.index("payload"))

    def close(self) -> None:
        try:
            self.db.close()
        except sqlite3.Error:
            pass  # the read is over (or failed, and that error is the one reported)


def _need(where: str, table: str, cols: tuple[str, ...], have: set[str]) -> None:
    missing = [c for c in cols if c not in have]
    if missing:
        raise ConfigError(f"SOURCE {where}: {table} has no column {missing[0]}; export the whole table "
                          "(SELECT * ...), see docs/INSPECT.md")


# -- URLs -------------------------------------------------------------------------------------
_SECRET_KEY = re.compile(r"pass|pwd|secret|token|credential|auth|api_?key", re.IGNORECASE)
_MASK = "***"


def _url_secrets(url: str) -> list[str]:
    """The password of the userinfo and the values of secret-looking query keys, as written."""
    out = []
    try:
        parts = urlsplit(url)
        if parts.password:
            out += [parts.password, unquote(parts.password)]
        for k, v in parse_qsl(parts.query, keep_blank_values=True):
            if _SECRET_KEY.search(k) and v:
                out.append(v)
        for k, v in re.findall(r"[?&;]([^=&;#]+)=([^&;#]*)", url):
            if _SECRET_KEY.search(k) and v:
                out.append(v)
    except ValueError:
        pass
    return sorted({s for s in out if s}, key=len, reverse=True)


def mask_url(url: str) -> str:
    """``url`` with its userinfo password and every secret-looking query value (``password``,
    ``sslpassword``, ``token``, ...) shown as ``***``: SQLAlchemy's URL renders it where it can
    parse it, and every secret found is masked in the text as well."""
    shown = url
    try:
        from sqlalchemy.engine import make_url  # a database driver: optional ([db] extra)

        u = make_url(url)
        u = u.update_query_dict({k: _MASK for k in u.query if _SECRET_KEY.search(k)})
        shown = u.render_as_string(hide_password=True).replace("%2A%2A%2A", _MASK)
    except Exception:  # not importable, or not a URL it parses: the text masking below
        shown = re.sub(r"(://[^/@:]*:)[^/@]*@", rf"\g<1>{_MASK}@", url)
    return scrub(shown, _url_secrets(url))


def scrub(text: str, secrets: list[str]) -> str:
    for s in secrets:
        text = text.replace(s, _MASK)
    return text


def _db_error(where: str, what: str, e: BaseException, secrets: list[str]) -> ConfigError:
    """One line for a database error: the cause (no traceback, no password) and the fix."""
    orig = getattr(e, "orig", None) or e
    state = str(getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None) or "")
    code = orig.args[0] if getattr(orig, "args", None) and isinstance(orig.args[0], int) else None
    first = (str(orig).strip().splitlines() or [""])[0]
    cause = scrub(f"{type(orig).__name__}: {first}" if first else type(orig).__name__, secrets)
    if state == "42501" or code in (1142, 1143, 1044) or "permission denied" in first.lower():
        fix = f"grant this account SELECT on {RUN_TABLE} and {EVENT_TABLE} (read-only is enough)"
    elif (getattr(e, "connection_invalidated", False) or state.startswith(("08", "57P")) or code in (2006, 2013)
          or "closed" in first.lower() or "terminat" in first.lower() or "lost" in first.lower()):
        fix = "the connection to the database was lost; check the server and run inspect again"
    else:
        fix = "check the URL, the account and the tables"
    return ConfigError(f"SOURCE {where}: cannot {what} ({cause}); {fix}")


class UrlSource(Source):
    kind = "sqlalchemy"

    def __init__(self, url: str, budget: int = DEFAULT_BUDGET):
        shown = mask_url(url)
        super().__init__(shown, budget)
        self.secrets = _url_secrets(url)
        self.conn: Any = None
        self.engine: Any = None
        try:
            import sqlalchemy as sa  # a database driver: optional ([db] extra)
        except ImportError:
            raise ConfigError(f"SOURCE {shown}: reading a database URL needs SQLAlchemy; {DB_HINT}") from None
        self.sa = sa
        try:
            with warnings.catch_warnings():  # a query argument the driver ignores: not a second line
                warnings.simplefilter("ignore", sa.exc.SAWarning)
                self.engine = sa.create_engine(url)
            insp = sa.inspect(self.engine)
            for table, cols in ((RUN_TABLE, RUN_READ), (EVENT_TABLE, EVENT_READ)):
                if not insp.has_table(table):
                    raise ConfigError(f"SOURCE {shown}: no table {table}; point the URL at the runtime's database")
                have = {c["name"] for c in insp.get_columns(table)}
                _need(shown, table, cols, have)
                if table == RUN_TABLE:
                    self._optional(have)
        except ConfigError:
            self.close()
            raise
        except ImportError as e:
            self.close()
            raise ConfigError(f"SOURCE {shown}: the driver is not installed ({scrub(str(e), self.secrets)}); "
                              f"{DB_HINT}") from None
        except Exception as e:  # sqlalchemy.exc.*: a bad URL, a refused connection
            self.close()
            raise _db_error(shown, "open the database", e, self.secrets) from None
        self.dialect = self.engine.dialect.name
        self.quote = self.engine.dialect.identifier_preparer.quote

    def _begin(self) -> Any:
        """One connection, one read-only transaction: the snapshot both tables are read in."""
        conn = self.engine.connect()
        self.conn = conn
        if self.dialect == "postgresql":
            conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        elif self.dialect in ("mysql", "mariadb"):
            conn.commit()  # SET TRANSACTION applies to the next transaction: none may be open
            conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        elif self.dialect == "sqlite":
            conn.exec_driver_sql("BEGIN")
        return conn

    def chunks(self) -> Iterator[tuple[Iterator[tuple], Iterator[tuple]]]:
        try:
            conn = self._begin()
        except Exception as e:
            raise _db_error(self.where, "open a read-only transaction", e, self.secrets) from None
        lo = None
        while True:
            where, params = (" WHERE uid > :lo", {"lo": lo}) if lo is not None else ("", {})
            sql = _select(RUN_TABLE, self.run_read, RUN_ORDER, where, self.quote) + f" LIMIT {RUN_PAGE}"
            try:
                rows = [tuple(r) for r in conn.execute(self.sa.text(sql), params).fetchall()]
            except Exception as e:
                raise _db_error(self.where, f"read {RUN_TABLE}", e, self.secrets) from None
            hi = rows[-1][0] if len(rows) == RUN_PAGE else None
            if hi is not None and (not isinstance(hi, int) or isinstance(hi, bool)):
                raise ConfigError(f"SOURCE {self.where}: {RUN_TABLE}.uid holds {hi!r}, not an integer; "
                                  "point the URL at the runtime's table")
            yield iter(rows), self._events(conn, lo, hi)
            if hi is None:
                return
            lo = hi

    def _events(self, conn: Any, lo: int | None, hi: int | None) -> Iterator[tuple]:
        conds, params = [], {}
        if lo is not None:
            conds.append("run > :lo")
            params["lo"] = lo
        if hi is not None:
            conds.append("run <= :hi")
            params["hi"] = hi
        if not conds:
            conds.append("run IS NOT NULL")
        sql = _select(EVENT_TABLE, EVENT_READ, EVENT_ORDER, " WHERE " + " AND ".join(conds), self.quote)
        batch = _Batcher(fetch_share(self.budget), EVENT_READ.index("payload"))
        try:
            res = conn.execution_options(stream_results=True).execute(self.sa.text(sql), params)
            rows: list = []
            while True:
                rows = res.fetchmany(batch.next_size(rows))
                if not rows:
                    return
                yield from (tuple(r) for r in rows)
        except ConfigError:
            raise
        except Exception as e:
            raise _db_error(self.where, f"read {EVENT_TABLE}", e, self.secrets) from None

    def unreadable_outside(self) -> int:
        try:
            return int(self.conn.execute(self.sa.text(f"SELECT COUNT(*) FROM {EVENT_TABLE} WHERE run IS NULL")).scalar())
        except Exception as e:
            raise _db_error(self.where, f"read {EVENT_TABLE}", e, self.secrets) from None

    def close(self) -> None:
        """Never raises: a connection that failed mid-read must not mask the error reported."""
        for step in (lambda: self.conn is not None and self.conn.close(),
                     lambda: self.engine is not None and self.engine.dispose()):
            try:
                step()
            except Exception:
                pass


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


BAD_RECORD = "\0unreadable record"  # a JSON-lines line that is no JSON object: every column holds this


class DirectorySource(Source):
    kind = "directory"

    def __init__(self, path: str, budget: int = DEFAULT_BUDGET):
        super().__init__(path, budget)
        self.files = {t: self._find(path, t) for t in (RUN_TABLE, EVENT_TABLE)}
        # a field up to the budget is read (and one past payload_limit counted unreadable)
        csv.field_size_limit(max(csv.field_size_limit(), budget))
        records = self._records(self.files[RUN_TABLE])
        try:  # the run table's columns: its header, or a JSON-lines file's first object
            head = next((r for r in records if r is not None), None)
        finally:
            records.close()
        self._optional(set(head) if head is not None else set())

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

    @staticmethod
    def _json_line(line: str) -> dict[str, Any] | None:
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            return None
        return rec if isinstance(rec, dict) else None

    def _records(self, path: str) -> Iterator[dict[str, Any] | frozenset | None]:
        ext = os.path.splitext(path)[1]
        try:
            with open(path, encoding="utf-8", errors="surrogateescape", newline="") as f:
                if ext in (".jsonl", ".ndjson"):
                    for line in f:
                        if line.strip():
                            yield self._json_line(line)
                    return
                if ext == ".tsv":
                    header = f.readline().rstrip("\r\n").split("\t")
                    yield frozenset(header)  # the header: its columns are checked even without rows
                    for line in f:
                        cells = [_unescape_tsv(c) for c in line.rstrip("\r\n").split("\t")]
                        yield dict(zip(header, cells, strict=False))
                    return
                reader = csv.DictReader(f)
                if reader.fieldnames is not None:
                    yield frozenset(reader.fieldnames)
                yield from reader
        except csv.Error as e:
            raise ConfigError(f"SOURCE {path}: not a CSV file the reader can follow ({e}); export the "
                              "table unchanged, as RFC 4180 CSV with a header row (a field longer than "
                              "--memory-budget: give a larger one)") from None

    def _stream(self, table: str, cols: tuple[str, ...], key: tuple[int, ...]) -> Iterator[tuple]:
        path = self.files[table]
        prev, checked, n = None, False, 1
        for rec in self._records(path):
            if isinstance(rec, frozenset):
                _need(path, table, cols, set(rec))
                checked = True
                continue
            n += 1  # record n - 1
            if rec is None:
                yield tuple(BAD_RECORD for _ in cols)
                continue
            if not checked:  # the first object of a JSON-lines file
                _need(path, table, cols, set(rec))
                checked = True
            row = tuple(_typed(c, rec.get(c)) for c in cols)
            k = tuple(row[i] for i in key)
            if all(type(v) is int for v in k):
                if prev is not None and k < prev:
                    order = RUN_ORDER if table == RUN_TABLE else EVENT_ORDER
                    raise ConfigError(f"SOURCE {path}: record {n - 1} is out of order; export with ORDER BY {order} "
                                      "(docs/INSPECT.md)")
                prev = k
            yield row

    def runs(self) -> Iterator[tuple]:
        return self._stream(RUN_TABLE, self.run_read, (0,))

    def events(self) -> Iterator[tuple]:
        return self._stream(EVENT_TABLE, EVENT_READ, (1, 2, 0))


def _typed(col: str, v: Any) -> Any:
    """A text export's cell as the database held it: integers (and reals) parsed where they
    parse, ``""`` in a number column NULL; anything else kept for sim/inspect_rows.py to refuse."""
    if not isinstance(v, str):
        return v
    if col in INT_COLUMNS or col in REAL_COLUMNS:
        if v == "":
            return None
        try:
            return int(v) if re.fullmatch(r"[+-]?\d+", v.strip()) else float(v) if col in REAL_COLUMNS else v
        except ValueError:
            return v
    return v


def open_source(spec: str, budget: int = DEFAULT_BUDGET) -> Source:
    """The source named by ``spec`` (see the module docstring)."""
    if "://" in spec:
        return UrlSource(spec, budget)
    if os.path.isdir(spec):
        return DirectorySource(spec, budget)
    if not os.path.exists(spec):
        raise ConfigError(f"SOURCE {spec}: no such file or directory; give an SQLite file, a SQLAlchemy URL "
                          "or a directory of CSV / JSON-lines files")
    if not os.access(spec, os.R_OK):
        raise ConfigError(f"SOURCE {spec}: not readable; check its permissions")
    return SqliteSource(spec, budget)
