"""Every field ``failclosed inspect`` reads, type-checked (docs/INSPECT.md, "Unreadable rows").

A source (sim/inspect_sources.py) hands over rows as the database or the text file holds them.
:func:`read_run` and :func:`read_event` check each column against the type the runtime writes
(EXPORT.md 1: integers, decimals, text) and parse the payload (EXPORT.md 2.3, 2.4): a JSON
object whose fields the checks read have the runtime's types (``requestedToolNames`` a list of
strings, ``toolName`` a string, ``toolIsError`` and ``approved`` booleans, ``decidedBy`` an
integer). Whatever is not so (NULL, a wrong type, a negative sequence, an empty or non-JSON or
non-object payload, one nested deeper than the parser goes or longer than the memory budget
allows) is *unreadable*: the reason is returned, the caller counts it and no check reads the
value as something it is not.

An event is kept as the tuple of :data:`EVENT_READ` with its payload replaced by the few fields
the checks use (the payload text is dropped, so a run's events cost a bounded number of bytes
each whatever their payloads held): ``names`` and ``redacted`` for an ``llm`` step, ``toolName``,
``toolIsError`` and ``args`` (a digest of ``toolArguments``) for a ``tool`` step, ``approved``
and ``decidedBy`` for an approval.
"""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from typing import Any

from .dbschema import INT_COLUMNS, REAL_COLUMNS
from .inspect_sources import BAD_RECORD, EVENT_READ, OPTIONAL_RUN_READ, PRESENCE_COLUMNS, RUN_READ

# the markers ContentRedactor leaves at REDACTED (EXPORT.md 2.3): a name carrying one may not
# be the name the model requested
REDACTION_MARKERS = ("***", "[truncated]")
EVENT_COST = 1024  # bytes a kept event takes at most (tuple, ints, kind, the fields above)

_UID, _RUN, _SEQ, _KIND, _ROUND, _DUR, _PAYLOAD, _CRDATE = (EVENT_READ.index(c) for c in EVENT_READ)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _type_name(v: Any) -> str:
    return "NULL" if v is None else type(v).__name__


def _column_reason(col: str, v: Any) -> str:
    """Why a column's value is not what the runtime writes there ('' when it is)."""
    if v == BAD_RECORD:
        return "the record is not a JSON object"
    if v is None:
        return "" if col in PRESENCE_COLUMNS else f"{col} is NULL"
    if col in INT_COLUMNS:
        return "" if _is_int(v) else f"{col} is not an integer ({_type_name(v)})"
    if col in REAL_COLUMNS:
        ok = isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)
        return "" if ok else f"{col} is not a number ({_type_name(v)})"
    return "" if isinstance(v, str) else f"{col} is not text ({_type_name(v)})"


# the exact types of a readable row, for the fast path (bool is an int subclass: not one of them)
_RUN_TYPES = tuple((int,) if c in INT_COLUMNS else (int, float, Decimal) if c in REAL_COLUMNS
                   else (str, type(None)) if c in PRESENCE_COLUMNS else (str,) for c in RUN_READ)


def read_run(raw: tuple) -> tuple[tuple | None, str]:
    """``(row, reason)``: the row (None when even its ``uid`` is unreadable) and why it cannot be
    checked ('' when every column has the runtime's type). A row longer than RUN_READ holds
    the optional columns its table has (``OPTIONAL_RUN_READ``, integers), after those."""
    n = len(RUN_READ)
    if all(type(v) in t for v, t in zip(raw[:n], _RUN_TYPES, strict=True)) and all(
            type(v) is int for v in raw[n:]):
        return raw, ""
    uid = raw[0]
    if not _is_int(uid):
        return None, _column_reason("uid", uid) or "uid is not an integer"
    for col, v in zip(RUN_READ + OPTIONAL_RUN_READ[:len(raw) - n], raw, strict=True):
        why = _column_reason(col, v)
        if why:
            return raw, why
    return raw, ""


def _names(p: dict[str, Any]) -> tuple[tuple[str, ...], str]:
    names = p.get("requestedToolNames")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            return (), "requestedToolNames is not a list of strings"
        return tuple(names), ""
    calls = p.get("requestedToolCalls")
    if calls is None:
        return (), ""
    if not isinstance(calls, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls):
        return (), "requestedToolCalls is not a list of calls with a string name"
    return tuple(c["name"] for c in calls), ""


def _fields(kind: str, p: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The payload fields the checks read, type-checked."""
    if kind == "llm":
        names, why = _names(p)
        if why:
            return None, why
        return {"names": names, "redacted": any(m in n for n in names for m in REDACTION_MARKERS)}, ""
    if kind == "tool":
        name, err = p.get("toolName"), p.get("toolIsError")
        if not isinstance(name, str):
            return None, f"toolName is {'missing' if 'toolName' not in p else _type_name(name)}, not a string"
        if not isinstance(err, bool):
            return None, f"toolIsError is {'missing' if 'toolIsError' not in p else _type_name(err)}, not a boolean"
        out: dict[str, Any] = {"toolName": name, "toolIsError": err, "args": None}
        if "toolArguments" in p:
            args = p["toolArguments"]
            if not isinstance(args, (dict, list)):
                return None, f"toolArguments is {_type_name(args)}, not an object"
            out["args"] = hashlib.sha256(json.dumps(args, sort_keys=True).encode("utf-8", "surrogatepass")).hexdigest()
        return out, ""
    if kind == "approval":
        ok, by = p.get("approved"), p.get("decidedBy")
        if not isinstance(ok, bool) or not _is_int(by):
            return None, "approval payload is not {approved: boolean, decidedBy: integer}"
        return {"approved": ok, "decidedBy": by}, ""
    return _NOTHING, ""


_NOTHING: dict[str, Any] = {}  # the fields read of a kind whose payload no check reads (never mutated)
_loads = json.JSONDecoder().decode
_scan = json.scanner.make_scanner(json.JSONDecoder())  # the C scanner json.loads runs, without its wrapper


_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}


def _scan_object(text: str) -> tuple[Any, int]:
    """The runtime's ``json_encode`` output (an object, no surrounding blanks) through the C
    scanner alone; ``end`` -1 for anything else."""
    if text[:1] != "{":
        return None, -1
    try:
        return _scan(text, 0)
    except StopIteration:
        return None, -1


def parse_payload(kind: str, text: Any, limit: int) -> tuple[dict[str, Any] | None, str]:
    """``(fields, reason)`` of one payload; ``limit``: the longest text parsed (an SQLite file's
    payload comes as bytes, decoded here)."""
    if type(text) is bytes:
        if len(text) > limit * 4:
            return None, f"payload longer than the memory budget allows ({limit:,} characters; raise --memory-budget)"
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            return None, "payload is not UTF-8 text"
    if isinstance(text, dict):  # a JSON-lines export may hold the object itself
        p: Any = text
    elif text is None:
        return None, "payload is NULL"
    elif not isinstance(text, str):
        return None, f"payload is not text ({_type_name(text)})"
    elif len(text) > limit:
        return None, f"payload longer than the memory budget allows ({limit:,} characters; raise --memory-budget)"
    else:
        try:
            p, end = _scan_object(text)
            if end != len(text):
                p = _loads(text)  # anything else, and the error that says why
        except RecursionError:
            return None, "payload nested deeper than the JSON parser goes"
        except ValueError:
            return None, "payload is empty" if not text.strip() else "payload is not JSON"
    if not isinstance(p, dict):
        return None, f"payload is a JSON {_JSON_TYPES.get(type(p), 'value')}, not an object"
    try:
        return _fields(kind, p)
    except RecursionError:
        return None, "payload nested deeper than the JSON parser goes"


def read_event(raw: tuple, limit: int) -> tuple[tuple | None, str]:
    """``(event, reason)``: the kept tuple, its payload slot holding the checked fields (None
    when the payload is unreadable, ``reason`` saying why), or ``(None, reason)`` when a column
    is unreadable (:func:`run_of` says whether the event can still be given to its run)."""
    uid, run, seq, kind, rnd, dur, text, crdate = raw
    if not (type(uid) is int and type(run) is int and type(seq) is int and seq >= 0 and type(kind) is str
            and type(rnd) is int and type(crdate) is int and type(dur) in (int, float, Decimal)):
        return None, _event_reason(raw)
    fields, why = parse_payload(kind, text, limit)
    return (uid, run, seq, kind, rnd, dur, fields, crdate), why


def _event_reason(raw: tuple) -> str:
    """Why one of the event's columns (the payload aside) is unreadable."""
    for col in ("uid", "run", "sequence", "kind", "round", "duration_ms", "crdate"):
        why = _column_reason(col, raw[EVENT_READ.index(col)])
        if why:
            return why
    return "sequence is negative"


def run_of(raw: tuple) -> int | None:
    """The run an event row belongs to, None when its ``run`` column is unreadable."""
    run = raw[_RUN]
    return run if _is_int(run) else None
