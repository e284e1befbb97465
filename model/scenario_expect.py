"""The shape of a scenario's expectations, checked when the file is read: each key of an
``expect`` table has one validator here (``VALIDATORS``), as it has one checker in
model/scenario_check.py (``CHECKERS``: what it means, read off a world and the trace).
model/scenario.py describes the keys, reads the file and replays it.

A malformed expectation is a malformed file: one ``ConfigError`` line naming the key and the
fix (an unknown key, a value of the wrong type, a row status, process or property the model
does not have: "did you mean"), never a failed expectation.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Any

from . import names, store
from .config import ConfigError, misplaced
from .names import TRANSITIONS
from .scenario_check import (
    CHECKERS,
    COMMAND_KEYS,
    OUTCOME_KEYS,
    ROW_FIELDS,
    SEEN_KEYS,
    SNAPSHOT_KEYS,
    _check_value,
    _is_cmp,
    property_names,
)
from .state import REASONS, STATUSES, Row, World
from .steps import arg_keys
from .vocab import TransitionName

# the transition vocabulary (model.names, derived from the step table), read live; ``order``
# is T10's order of rows of equal lease, ``status`` the row status a settle expects (proposal
# fallback_settles_requeued_row), ``permitted`` / ``valid`` / ``configured`` a request that fails a check of its own
TRANSITION_NAMES = TRANSITIONS.keys()
ARG_KEYS = arg_keys()
# the store statements a ``store`` step may run, and their argument keys (model/store.py)
STATEMENTS = store.STATEMENTS
STORE_ARG_KEYS = frozenset(k for st in STATEMENTS.values() for k in st.args)
EXPECT_KEYS = frozenset({
    "rows", "outcomes", "no_outcomes", "commands", "events", "ledger", "messages", "marks",
    "no_marks", "clock", "procs", "holds", "violates", "fired", "never", "order", "reaper",
    "enqueue", "result", "seen",
})
EVENT_KEYS = frozenset({"count", "kinds", "sequences", "tools", "tool_errors",
                        "duplicate_sequences"})
LEDGER_KEYS = frozenset({"run", "tool", "turn", "call", "effect", "seg", "audited", "count"})
TRACE_KEYS = frozenset({"do", "actor", "result", "times"}) | ARG_KEYS | STORE_ARG_KEYS
REAPER_KEYS = frozenset({"active", "pc", "now", "snapshot", "finished", "requeued",
                         "dead_lettered", "skipped", "dispatch_failed", "ticks", "name",
                         "overdue", "redispatched"})
ENQUEUE_KEYS = frozenset({"error", "returned"})


def near(key: str, allowed: frozenset[str] | set[str]) -> str:
    close = difflib.get_close_matches(key, sorted(allowed), n=1)
    return f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(sorted(allowed))}"


def unknown_key(key: str, where: str, allowed: frozenset[str] | set[str], what: str = "key") -> str:
    """The message for an unknown ``key`` of the table ``where``: a top-level key TOML put
    into this table says where it belongs; any other, the nearest allowed key."""
    # (an inline ``expect = { ... }`` of a step is explicit: no TOML header moved the key)
    hint = misplaced(key, where + ".") if ".expect" not in where else None
    return f"{where}.{key}: " + (hint or f"unknown {what}; {near(key, allowed)}")


def expectation(e: Any, where: str, run_ids: set[str], statement: str | None = None) -> dict[str, Any]:
    """An ``expect`` table: each key checked by its validator (``statement``: the store
    statement of the step it belongs to, for ``result``)."""
    if not isinstance(e, dict):
        raise ConfigError(f"{where.rstrip('.')}: expected a table of expectations")
    for k, v in e.items():
        if k not in EXPECT_KEYS:
            raise ConfigError(unknown_key(k, where.rstrip("."), EXPECT_KEYS, "expectation"))
        VALIDATORS[k](v, where + k, run_ids, statement)
    return e


# The names an expectation compares against the model (a row's status, a process, a property):
# an unknown one is a malformed file (exit 2, "did you mean"), not a failed expectation.
_ROW_VALUES: dict[str, tuple[str, ...]] = {"status": STATUSES, "termination_reason": ("", *REASONS)}
_ROW_TYPES: dict[str, type] = {f: type(getattr(Row(), f)) for f in ROW_FIELDS}


def check_model_names(e: dict[str, Any], where: str, world: World, actors: Iterable[str]) -> None:
    """The values of ``rows.<run>`` fields (of the field's type; a status, reason, effect
    the model has), the process names of ``procs`` and the properties of ``holds`` /
    ``violates``, checked against the model when the file is read."""
    for rid, fields_ in (e.get("rows") or {}).items():
        if isinstance(fields_, dict):
            for f, x in fields_.items():
                _row_value(f, x, f"{where}rows.{rid}.{f}")
    if isinstance(e.get("procs"), list):
        _proc_names(e["procs"], f"{where}procs", world, actors)
    for key in ("holds", "violates"):
        for n, name in enumerate(e.get(key) or ()):
            _property_name(name, f"{where}{key}[{n}]", world)


def _row_value(f: str, x: Any, w: str) -> None:
    """One expected row field: a plain value, or each operand of a comparison's ``==``,
    ``!=``, ``in``, ``not in``."""
    if _is_cmp(x):
        for op, y in x.items():
            if op in ("==", "!="):
                _row_value(f, y, f"{w}.{op}")
            elif op in ("in", "not in"):
                for k, z in enumerate(y):
                    _row_value(f, z, f"{w}.{op}[{k}]")
        return
    typ = _ROW_TYPES[f]
    if type(x) is not typ:
        want = {bool: "true or false", int: "an integer", str: "a string"}.get(typ, typ.__name__)
        raise ConfigError(f"{w}: expected {want}, got {x!r}")
    allowed = _ROW_VALUES.get(f)
    if allowed is not None and x not in allowed:
        raise ConfigError(f"{w}: {x!r} is not a {f} of the model; {near(x, set(allowed) - {''})}")


def _proc_names(v: list[str], w: str, world: World, actors: Iterable[str]) -> None:
    """A process is a worker, the reaper, or a per-run process (``<kind>:<run>...``) of a
    run of this file (``actors``: the actors its steps name)."""
    cfg = world.config
    runs = {r.id for r in cfg.runs}
    known = set(cfg.workers) | set(names.reaper_names(cfg))
    seen = {p.name for p in world.procs} | set(actors)
    for n, name in enumerate(v):
        if name in known:
            continue
        head, sep, tail = name.partition(":")
        if sep and head and tail.split("#")[0].split("/")[0] in runs:
            continue
        nearby = known | {x for x in seen if ":" in x}
        hint = near(name, nearby)
        if not hint.startswith("did you mean"):
            hint = f"did you mean one of {', '.join(sorted(nearby))}?"
        raise ConfigError(f"{w}[{n}]: no process {name!r} in this scenario (a worker: "
                          f"{', '.join(cfg.workers)}; a reaper: {', '.join(names.reaper_names(cfg))}; or a process of one of its "
                          f"runs, NAME:<run id>); {hint}")


def _property_name(name: Any, w: str, world: World) -> None:
    names = property_names(world)
    if names is not None and name not in names:
        raise ConfigError(f"{w}: no safety property {name!r}; {near(str(name), set(names))}")


# Each validator: (value, its field name for errors, the run ids, the step's store statement).
def _v_rows(v: Any, w: str, run_ids: set[str], statement: str | None) -> None:
    _per_run(v, w, run_ids)
    for rid, fields_ in v.items():
        if fields_ == "absent":
            continue
        if not isinstance(fields_, dict):
            raise ConfigError(f"{w}.{rid}: expected a table of row fields or \"absent\"")
        _row_fields(fields_, f"{w}.{rid}")


def _row_fields(d: dict[str, Any], w: str) -> None:
    for f, x in d.items():
        if f not in ROW_FIELDS:
            raise ConfigError(f"{w}.{f}: unknown row field; {near(f, set(ROW_FIELDS))}")
        _check_value(x, f"{w}.{f}")


def _v_outcomes(v: Any, w: str, run_ids: set[str], statement: str | None) -> None:
    list_of_tables(v, w, set(OUTCOME_KEYS))
    _values_of_tables(v, w)


def _v_commands(v: Any, w: str, run_ids: set[str], statement: str | None) -> None:
    list_of_tables(v, w, set(COMMAND_KEYS))
def _v_seen(v: Any, w: str, run_ids: set[str], statement: str | None) -> None:
    list_of_tables(v, w, set(SEEN_KEYS))
    _values_of_tables(v, w)


def _v_events(v: Any, w: str, run_ids: set[str], statement: str | None) -> None:
    _per_run_tables(v, w, run_ids, EVENT_KEYS, "{ count = 3 }")


def _v_ledger(v: Any, w: str, run_ids: set[str], statement: str | None) -> None:
    list_of_tables(v, w, LEDGER_KEYS)
    _values_of_tables(v, w)
    for n, entry in enumerate(v):
        if "count" not in entry:
            raise ConfigError(f"{w}[{n}].count: missing; say how many applications match")
        if "run" in entry and isinstance(entry["run"], str) and entry["run"] not in run_ids:
            raise ConfigError(f"{w}[{n}].run: unknown run {entry['run']!r}")


def _v_messages(v: Any, w: str, run_ids: set[str], statement: str | None) -> None:
    if not isinstance(v, (int, list, dict)) or isinstance(v, bool):
        raise ConfigError(f"{w}: expected a count or a list of {{ run, not_before }}")
    if isinstance(v, list):
        list_of_tables(v, w, {"run", "not_before"})
    else:
        _check_value(v, w)


def _v_names(v: Any, w: str, run_ids: set[str], statement: str | None) -> None:
    """``marks``, ``no_marks``, ``holds``, ``violates``: a list of strings."""
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ConfigError(f"{w}: expected a list of strings")


def _v_procs(v: Any, w: str, run_ids: set[str], statement: str | None) -> None:
    if isinstance(v, dict):
        _check_value(v, w)
    elif not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ConfigError(f"{w}: expected a list of process names (or a comparison)")


def _v_clock(v: Any, w: str, run_ids: set[str], statement: str | None) -> None:
    if isinstance(v, dict):
        _check_value(v, w)
    elif not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ConfigError(f"{w}: expected an integer >= 0, got {v!r}")


def _v_fired(v: Any, w: str, run_ids: set[str], statement: str | None) -> None:
    _trace_filters(v, w, TRACE_KEYS)


def _v_never_order(v: Any, w: str, run_ids: set[str], statement: str | None) -> None:
    _trace_filters(v, w, TRACE_KEYS - {"times"})


def _trace_filters(v: Any, w: str, allowed: frozenset[str]) -> None:
    """``fired`` (which may say ``times``), ``never``, ``order``: filters on the trace."""
    list_of_tables(v, w, allowed)
    _values_of_tables(v, w)
    names = TRANSITION_NAMES | set(STATEMENTS)
    for n, entry in enumerate(v):
        if not entry or entry.keys() == {"times"}:
            raise ConfigError(f"{w}[{n}]: an empty filter; give do = \"<name>\" and/or actor, arguments")
        name = entry.get("do")
        if isinstance(name, str) and name not in names:
            raise ConfigError(f"{w}[{n}].do: unknown transition or statement {name!r}; {near(name, names)}")


def _v_reaper(v: Any, w: str, run_ids: set[str], statement: str | None) -> None:
    if not isinstance(v, dict):
        raise ConfigError(f"{w}: expected a table such as {{ finished = true, requeued = 1 }}")
    for f, x in v.items():
        if f not in REAPER_KEYS:
            raise ConfigError(f"{w}.{f}: unknown key; {near(f, REAPER_KEYS)}")
        if f == "snapshot" and isinstance(x, list):
            _snapshot(x, f"{w}.snapshot")
        elif f == "name":
            if not isinstance(x, str) or not names.is_reaper(x):
                raise ConfigError(f"{w}.name: {x!r} is not a reaper's name; use "
                                  f"\"{names.reaper_name(1)}\", \"{names.reaper_name(2)}\", ...")
        else:
            _check_value(x, f"{w}.{f}")


def _snapshot(x: list[Any], w: str) -> None:
    """``reaper.snapshot``: per row of the SELECT, a run id or a table of its fields."""
    for j, s in enumerate(x):
        if isinstance(s, dict):
            list_of_tables([s], f"{w}[{j}]", set(SNAPSHOT_KEYS))
            for sk, sv in s.items():
                _check_value(sv, f"{w}[{j}].{sk}")
        elif not isinstance(s, str):
            raise ConfigError(f"{w}[{j}]: expected a run id or a table of {', '.join(SNAPSHOT_KEYS)}")


def _v_enqueue(v: Any, w: str, run_ids: set[str], statement: str | None) -> None:
    _per_run_tables(v, w, run_ids, ENQUEUE_KEYS, '{ error = "EnqueueFailed" }')


def _v_result(v: Any, w: str, run_ids: set[str], statement: str | None) -> None:
    if statement is None:
        raise ConfigError(f"{w}: only a store = \"<statement>\" step's expect checks a result")
    if statement == "find_run" and isinstance(v, dict) and not _is_cmp(v):
        _row_fields(v, w)
        return
    _check_value(v, w)
    reads = (TransitionName.FIND_RUN, TransitionName.MAX_SEQUENCE, store.FIND_STALE_RUNNING,
             store.FIND_OVERDUE_QUEUED)
    if statement not in reads and not isinstance(v, (bool, dict)):
        raise ConfigError(f"{w}: {statement} returns true or false, got {v!r}")


# expectation key -> its validator (scenario_check.CHECKERS: what each key means)
VALIDATORS: dict[str, Callable[[Any, str, set[str], str | None], None]] = {
    "rows": _v_rows, "outcomes": _v_outcomes, "no_outcomes": _v_outcomes,
    "commands": _v_commands, "events": _v_events,
    "ledger": _v_ledger, "messages": _v_messages, "marks": _v_names, "no_marks": _v_names,
    "holds": _v_names, "violates": _v_names, "procs": _v_procs, "clock": _v_clock,
    "fired": _v_fired, "never": _v_never_order, "order": _v_never_order, "reaper": _v_reaper,
    "enqueue": _v_enqueue, "result": _v_result, "seen": _v_seen,
}
assert set(VALIDATORS) == EXPECT_KEYS == set(CHECKERS), "an expectation key without its validator or checker"


def _values_of_tables(v: list[dict[str, Any]], where: str) -> None:
    for n, x in enumerate(v):
        for k, y in x.items():
            _check_value(y, f"{where}[{n}].{k}")


def _per_run(v: Any, where: str, run_ids: set[str]) -> None:
    if not isinstance(v, dict):
        raise ConfigError(f"{where}: expected a table keyed by run id, e.g. {where}.r1 = {{ ... }}")
    for rid in v:
        if rid not in run_ids:
            raise ConfigError(f"{where}.{rid}: unknown run; use one of {', '.join(sorted(run_ids))}")


def _per_run_tables(v: Any, where: str, run_ids: set[str], allowed: Any, example: str) -> None:
    """``<where>.<run> = { key = value, ... }`` with keys from ``allowed``, each value a
    literal or a comparison."""
    _per_run(v, where, run_ids)
    for rid, spec in v.items():
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}.{rid}: expected a table such as {example}")
        for f, x in spec.items():
            if f not in allowed:
                raise ConfigError(f"{where}.{rid}.{f}: unknown key; {near(f, allowed)}")
            _check_value(x, f"{where}.{rid}.{f}")


def list_of_tables(v: Any, where: str, allowed: set[str] | frozenset[str]) -> None:
    if not isinstance(v, list):
        raise ConfigError(f"{where}: expected a list of inline tables")
    for n, x in enumerate(v):
        if not isinstance(x, dict):
            raise ConfigError(f"{where}[{n}]: expected an inline table")
        for k in x:
            if k not in allowed:
                raise ConfigError(f"{where}[{n}].{k}: unknown key; {near(k, allowed)}")
