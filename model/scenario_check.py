"""What a scenario's expectations mean: each key of an ``expect`` table read off a world and
the trace that led to it (model/scenario.py describes the keys and replays,
model/scenario_expect.py validates their shape when the file is read).

- comparisons: an expected value may be a table of operators (``{ ">=" = 1 }``);
- ``History``: what a world does not keep (store results, the reaper's counters, the enqueue
  callers, the tool calls that got an error result), read off the trace;
- ``check``: every expectation that does not hold, one ``Failure`` each, through
  ``CHECKERS``, one function per expectation key.
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from . import names
from .commands import exit_code, message
from .config import ConfigError
from .state import OverdueRow, Row, StaleRow, World
from .steps import REAPER_RESEND
from .transition import Transition
from .vocab import OutcomeName, TransitionName

OUTCOME_KEYS = ("seg", "run", "kind", "outcome")
COMMAND_KEYS = ("actor", "command", "uuid", "outcome", "exit", "message")
SNAPSHOT_KEYS = ("run", "pending_effect", "queued_request", "requeue_count")


def snapshot(w: World, rows: tuple[Any, ...]) -> list[dict[str, Any]]:
    """A tick's T10 rows as tables of ``SNAPSHOT_KEYS`` (the overdue rows of proposal P6's
    sweep, ``OverdueRow``, are listed by :func:`overdue_ids`)."""
    return [dict(zip(SNAPSHOT_KEYS, (w.run_id(x[0]), *x[1:]), strict=True))
            for x in rows if isinstance(x, StaleRow)]


def overdue_ids(w: World, rows: tuple[Any, ...]) -> list[str]:
    """The run ids of a tick's overdue rows (T14, proposal P6), in the order returned."""
    return [w.run_id(x[0]) for x in rows if isinstance(x, OverdueRow)]
OPS = ("==", "!=", ">", ">=", "<", "<=", "prefix", "contains", "not contains", "in", "not in")
ROW_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Row))


_NONE = object()  # StepResult.result of a transition (a store statement's may be None)


@dataclass
class StepResult:
    """One entry of a replay's trace (model/scenario.py replays, ``History`` reads them)."""


    step: int  # the file step this transition belongs to
    transition: Transition
    world: World  # the world after it
    result: Any = _NONE  # a store statement's result (``store`` steps only)

    @property
    def is_store(self) -> bool:
        return self.result is not _NONE


@dataclass
class Failure:
    step: int | None  # 1-based file step, None for the final [expect]
    key: str
    expected: Any
    actual: Any
    world: World | None = None  # where it was checked (a step's expectation)

    def __str__(self) -> str:
        where = "final" if self.step is None else f"after step {self.step}"
        return f"{where}: {self.key}: expected {self.expected!r}, actual {self.actual!r}"


# =========================================================================================
# comparisons
# =========================================================================================
def _is_cmp(v: Any) -> bool:
    return isinstance(v, dict) and bool(v) and all(k in OPS for k in v)


class Cmp:
    """An expected value given as operators, printed as ``>= 1 and < 3``."""

    def __init__(self, ops: dict[str, Any]):
        self.ops = ops

    def __repr__(self) -> str:
        return " and ".join(f"{op} {x!r}" for op, x in self.ops.items())


def _shown(want: Any) -> Any:
    return Cmp(want) if _is_cmp(want) else want


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _op(op: str, x: Any, got: Any) -> bool:
    if op == "==":
        return got == x
    if op == "!=":
        return got != x
    if op in (">", ">=", "<", "<="):
        if not (_num(got) and _num(x)):
            return False
        return {">": got > x, ">=": got >= x, "<": got < x, "<=": got <= x}[op]
    if op == "prefix":
        if isinstance(got, str) and isinstance(x, str):
            return got.startswith(x)
        if isinstance(got, (list, tuple)) and isinstance(x, list):
            return list(got[:len(x)]) == x
        return False
    if op in ("contains", "not contains"):
        if isinstance(got, str) and isinstance(x, str):
            hit = x in got
        elif isinstance(got, (list, tuple)):
            hit = all(y in got for y in x) if isinstance(x, list) else x in got
        else:
            return False
        return hit if op == "contains" else not hit
    if op in ("in", "not in"):
        return (got in x) == (op == "in")
    raise AssertionError(op)  # pragma: no cover - validated at load time


def _match(want: Any, got: Any) -> bool:
    """``got`` is ``want``, or satisfies every operator of a comparison table."""
    if _is_cmp(want):
        return all(_op(op, x, got) for op, x in want.items())
    if isinstance(want, bool) or isinstance(got, bool):
        return type(want) is type(got) and want == got
    return want == got


def _check_value(v: Any, where: str) -> None:
    """A value an expectation compares: a plain value, or a valid comparison table."""
    if not isinstance(v, dict):
        return
    for op, x in v.items():
        if op not in OPS:
            raise ConfigError(f"{where}: unknown comparison {op!r}; use one of "
                              + ", ".join(repr(o) for o in OPS) + " (or a plain value)")
        if op in (">", ">=", "<", "<=") and not _num(x):
            raise ConfigError(f"{where}.{op}: expected a number, got {x!r}")
        if op == "prefix" and not isinstance(x, (str, list)):
            raise ConfigError(f"{where}.prefix: expected a string or a list, got {x!r}")
        if op in ("in", "not in") and not isinstance(x, list):
            raise ConfigError(f"{where}.{op}: expected a list of values, got {x!r}")
    if not v:
        raise ConfigError(f"{where}: an empty table compares nothing; give a value or an operator")


# =========================================================================================
# the trace: what a world does not keep (store results, the reaper's counters, errors)
# =========================================================================================
class History:
    """The trace of a replay up to a point, and the facts read off it: every entry as a
    filterable table, the reaper's ticks, the enqueue callers, the tool calls that got an
    error result. Each transition is read with the world before it (``pairs``)."""

    def __init__(self, initial: World, steps: list[StepResult]):
        self.initial = initial
        self.steps = steps
        self._cache: dict[str, Any] = {}

    def pairs(self) -> list[tuple[World, StepResult]]:
        out = []
        prev = self.initial
        for s in self.steps:
            out.append((prev, s))
            prev = s.world
        return out

    def entries(self) -> list[dict[str, Any]]:
        if "entries" not in self._cache:
            out = []
            for s in self.steps:
                t = s.transition
                d: dict[str, Any] = {"do": t.name, "actor": t.actor, "fault": t.fault or ""}
                d.update((k, v) for k, v in t.args if k != "fault")
                if s.is_store:
                    d["result"] = s.result
                out.append(d)
            self._cache["entries"] = out
        return self._cache["entries"]

    def reaper(self, final: World, name: str) -> dict[str, Any]:
        """Reaper ``name``'s current tick (or its last): RUNTIME 10, counted off its
        transitions."""
        ticks = 0
        cur: dict[str, Any] = {"now": None, "snapshot": [], "overdue": [], "finished": None,
                               "requeued": 0, "dead_lettered": 0, "skipped": 0,
                               "dispatch_failed": 0, "redispatched": 0}
        for before, s in self.pairs():
            t, after = s.transition, s.world
            if t.actor != name or s.is_store:
                continue
            r, nxt = before.reaper(name), after.reaper(name)
            if r is not None and r.pc == "nested":  # the run nested in the tick's dispatch
                if nxt is None:
                    cur["finished"] = t.name != "crash"
                continue
            if r is None:
                if t.name != "find_stale_running":
                    continue  # a crash before any SELECT: no tick
                ticks += 1
                rows = nxt.rows if nxt is not None else ()
                cur = {"now": before.clock, "finished": nxt is None, "requeued": 0,
                       "dead_lettered": 0, "skipped": 0, "dispatch_failed": 0,
                       "redispatched": 0, "snapshot": snapshot(before, rows),
                       "overdue": overdue_ids(before, rows)}
                continue
            if t.name == "crash":
                cur["finished"] = False
                continue
            run = r.rows[r.idx][0]
            changed = before.rows[run] != after.rows[run]
            if t.name == "requeue_stale":
                if nxt is None or nxt.pc != "dispatch" or nxt.idx != r.idx:
                    cur["skipped"] += 1  # matched nothing, or a store error
            elif t.name == "dead_letter_stale":
                cur["dead_lettered" if (changed and not t.fault) else "skipped"] += 1
            elif t.name == TransitionName.DISPATCH and r.pc == REAPER_RESEND:  # P6's sweep
                cur["dispatch_failed" if t.fault else "redispatched"] += 1
            elif t.name == "dispatch":
                cur["dispatch_failed" if t.fault else "requeued"] += 1
            elif t.name == "settle_failed" and changed and not t.fault:
                cur["dead_lettered"] += 1
            if nxt is None:
                cur["finished"] = True
        r = final.reaper(name)
        return {**cur, "ticks": ticks, "active": r is not None, "pc": r.pc if r else ""}

    def enqueue(self, final: World) -> dict[str, dict[str, Any]]:
        """Per run, the enqueue caller (6.1): its error and whether it has returned."""
        out: dict[str, dict[str, Any]] = {}
        died: set[str] = set()
        for s in self.steps:
            t = s.transition
            if s.is_store:
                continue
            if t.actor == "caller" and t.name == "enqueue_run":
                rid = t.arg("run")
                refused = (f"enqueue:{rid}", OutcomeName.ENQUEUE_FAILED) in {
                    (o[0], o[3]) for o in s.world.outcomes}  # no transport (6.4)
                out[rid] = {"error": "EnqueueFailed" if t.fault or refused else ""}
            elif t.actor.startswith("enqueue:"):
                rid = t.actor.removeprefix("enqueue:")
                if t.name == "dispatch" and t.fault and rid in out:
                    out[rid]["error"] = "EnqueueFailed"
                if t.name == "crash":
                    died.add(rid)
        for rid, d in out.items():
            d["returned"] = rid not in died and final.proc(f"enqueue:{rid}") is None
        return out

    def tool_errors(self) -> set[tuple[int, str, int, int]]:
        """(run, segment, turn, call) of every tool call whose invoke got an error result:
        the tool_error fault, or the tool missing from the catalogue or removed (7.4 #3)."""
        if "tool_errors" not in self._cache:
            out = set()
            for before, s in self.pairs():
                t = s.transition
                if t.name != "invoke" or s.is_store:
                    continue
                p = before.proc(t.actor)
                if p is None:  # pragma: no cover - invoke is a process's move
                    continue
                name = t.arg("tool")
                if t.fault == "tool_error" or before.config.tool(name) is None or name in before.removed:
                    out.add((p.run, p.seg, p.turn, p.call))
            self._cache["tool_errors"] = out
        return self._cache["tool_errors"]


def _trace_hits(entries: list[dict[str, Any]], flt: dict[str, Any]) -> list[int]:
    return [n for n, e in enumerate(entries)
            if all(k in e and _match(x, e[k]) for k, x in flt.items())]


# =========================================================================================
# expectations: one checker per key
# =========================================================================================
Fail = Callable[[str, Any, Any], None]  # fail(key, expected, actual)
Checker = Callable[[World, Any, History, Fail], None]


def check(w: World, exp: dict[str, Any], step: int | None = None,
          history: History | None = None) -> list[Failure]:
    """Every expectation of ``exp`` that does not hold in ``w``, expected vs actual.
    ``history``: the trace that led to ``w`` (trace, reaper, enqueue and tool-error
    expectations read it; without it the trace is empty)."""
    out: list[Failure] = []
    hist = history if history is not None else History(w, [])

    def fail(key: str, expected: Any, actual: Any) -> None:
        out.append(Failure(step, key, _shown(expected), actual))

    for key, v in exp.items():
        checker = CHECKERS.get(key)
        if checker is not None:
            checker(w, v, hist, fail)
    return out


def _rows(w: World, v: Any, hist: History, fail: Fail) -> None:
    for rid, fields_ in v.items():
        row = w.rows[w.config.run_index(rid)]
        if fields_ == "absent":
            if row is not None:
                fail(f"rows.{rid}", "absent", _row_dict(row))
            continue
        if row is None:
            fail(f"rows.{rid}", fields_, "absent")
            continue
        for f, want in fields_.items():
            got = getattr(row, f)
            if not _match(want, got):
                fail(f"rows.{rid}.{f}", want, got)


def _outcome_dicts(w: World) -> list[dict[str, Any]]:
    return [dict(zip(OUTCOME_KEYS, (s, w.run_id(r), k, o), strict=True)) for s, r, k, o in w.outcomes]


def _outcome_hit(pat: dict[str, Any], have: list[dict[str, Any]]) -> bool:
    return any(all(_match(x, o[k]) for k, x in pat.items()) for o in have)


SEEN_KEYS = ("by", "run", "request", "fields", "sequences")


def _seen_dicts(w: World) -> list[dict[str, Any]]:
    """``World.made``: what the named principals' requests changed or read (16.18): the
    status view's field names, the events page's sequences."""
    return [dict(zip(SEEN_KEYS, (m.by, w.run_id(m.run), str(m.request), [f for f, _ in m.view],
                                 list(m.seqs)), strict=True)) for m in w.made]


def _seen(w: World, v: Any, hist: History, fail: Fail) -> None:
    have = _seen_dicts(w)
    for pat in v:
        if not _outcome_hit(pat, have):
            fail(f"seen contains {_fmt(pat)}", "present", have)


def _outcomes(w: World, v: Any, hist: History, fail: Fail) -> None:
    have = _outcome_dicts(w)
    for pat in v:
        if not _outcome_hit(pat, have):
            fail(f"outcomes contains {_fmt(pat)}", "present", have)


def _no_outcomes(w: World, v: Any, hist: History, fail: Fail) -> None:
    have = _outcome_dicts(w)
    for pat in v:
        if _outcome_hit(pat, have):
            fail(f"no_outcomes {_fmt(pat)}", "absent", have)


def command_dicts(w: World) -> list[dict[str, Any]]:
    """``World.commands`` as tables of ``COMMAND_KEYS``: each result with its exit code and
    message (model/commands.py)."""
    return [dict(zip(COMMAND_KEYS, (*c, exit_code(c.outcome), message(c.outcome, c.uuid)),
                     strict=True)) for c in w.commands]


def _commands(w: World, v: Any, hist: History, fail: Fail) -> None:
    have = command_dicts(w)
    for pat in v:
        if not _outcome_hit(pat, have):
            fail(f"commands contains {_fmt(pat)}", "present", have)


def _events(w: World, v: Any, hist: History, fail: Fail) -> None:
    errs = hist.tool_errors() if any("tool_errors" in x for x in v.values()) else set()
    for rid, want in v.items():
        i = w.config.run_index(rid)
        evs = [e for e in w.events if e.run == i]
        seqs = [e.seq for e in evs]
        actual = {
            "count": len(evs),
            "kinds": [e.kind for e in evs],
            "sequences": seqs,
            "tools": [e.tool for e in evs if e.kind == "tool"],
            "tool_errors": [(e.run, e.seg, e.turn, e.call) in errs for e in evs if e.kind == "tool"],
            "duplicate_sequences": len(set(seqs)) != len(seqs),
        }
        for f, x in want.items():
            if not _match(x, actual[f]):
                fail(f"events.{rid}.{f}", x, actual[f])


def _ledger(w: World, v: Any, hist: History, fail: Fail) -> None:
    apps = [_app_dict(w, a) for a in w.ledger]
    for pat in v:
        flt = {k: x for k, x in pat.items() if k != "count"}
        n = sum(all(_match(x, a[k]) for k, x in flt.items()) for a in apps)
        if not _match(pat["count"], n):
            fail(f"ledger {_fmt(flt)} count", pat["count"], n)


def _messages(w: World, v: Any, hist: History, fail: Fail) -> None:
    msgs = [{"run": w.run_id(m.run), "not_before": m.not_before} for m in w.messages]
    if isinstance(v, (int, dict)):
        if not _match(v, len(msgs)):
            fail("messages", v, msgs)
    elif sorted(map(_fmt, v)) != sorted(map(_fmt, msgs)):
        fail("messages", v, msgs)


def _marks(w: World, v: Any, hist: History, fail: Fail) -> None:
    for pat in v:
        if not any(fnmatch.fnmatchcase(m, pat) for m in w.marks):
            fail(f"marks contains {pat!r}", "present", sorted(w.marks))


def _no_marks(w: World, v: Any, hist: History, fail: Fail) -> None:
    for pat in v:
        hits = sorted(m for m in w.marks if fnmatch.fnmatchcase(m, pat))
        if hits:
            fail(f"no_marks {pat!r}", "absent", hits)


def _clock(w: World, v: Any, hist: History, fail: Fail) -> None:
    if not _match(v, w.clock):
        fail("clock", v, w.clock)


def _procs(w: World, v: Any, hist: History, fail: Fail) -> None:
    names = sorted(p.name for p in w.procs)
    if isinstance(v, dict):
        if not _match(v, names):
            fail("procs", v, names)
    elif names != sorted(v):
        fail("procs", sorted(v), names)


def _properties(key: str, w: World, v: Any, fail: Fail) -> None:
    """``holds`` / ``violates``: each named property, through the registered evaluator."""
    for prop in v:
        try:
            held, detail = _property(w, prop)
        except LookupError as e:
            fail(f"{key} {prop!r}", "a checkable property", str(e))
            continue
        if key == "holds" and not held:
            fail(f"holds {prop!r}", "holds", f"violated: {detail}")
        if key == "violates" and held:
            fail(f"violates {prop!r}", "violated", "holds")


def _holds(w: World, v: Any, hist: History, fail: Fail) -> None:
    _properties("holds", w, v, fail)


def _violates(w: World, v: Any, hist: History, fail: Fail) -> None:
    _properties("violates", w, v, fail)


def _order(w: World, v: Any, hist: History, fail: Fail) -> None:
    entries = hist.entries()
    pos, at = 0, []
    for flt in v:
        hits = [n for n in _trace_hits(entries, flt) if n >= pos]
        if not hits:
            fail(f"order {' -> '.join(map(_fmt, v))}",
                 f"{_fmt(flt)} after trace entry {pos}" if at else f"{_fmt(flt)} fired",
                 f"{len(at)} of {len(v)} matched, at trace entries {at}")
            return
        at.append(hits[0] + 1)
        pos = hits[0] + 1


def _fired(w: World, v: Any, hist: History, fail: Fail) -> None:
    entries = hist.entries()
    for pat in v:
        flt = {k: x for k, x in pat.items() if k != "times"}
        n = len(_trace_hits(entries, flt))
        want = pat.get("times", {">=": 1})
        if not _match(want, n):
            fail(f"fired {_fmt(flt)} times", want, n)


def _never(w: World, v: Any, hist: History, fail: Fail) -> None:
    entries = hist.entries()
    for pat in v:
        flt = {k: x for k, x in pat.items() if k != "times"}
        n = len(_trace_hits(entries, flt))
        if n:
            fail(f"never {_fmt(flt)}", 0, n)


def _reaper(w: World, v: Any, hist: History, fail: Fail) -> None:
    name = v.get("name", names.reaper_name(1))
    actual = hist.reaper(w, name)
    for f, x in v.items():
        if f == "name":
            continue
        got = actual[f]
        if f == "snapshot" and isinstance(x, list):
            if not _snapshot_matches(x, got):
                fail("reaper.snapshot", x, got)
        elif not _match(x, got):
            fail(f"reaper.{f}", x, got)


def _snapshot_matches(want: list[Any], got: list[dict[str, Any]]) -> bool:
    """The tick's SELECT, row by row: a run id, or a table of snapshot fields."""
    return len(want) == len(got) and all(
        all(_match(y, g[k]) for k, y in e.items()) if isinstance(e, dict) else _match(e, g["run"])
        for e, g in zip(want, got, strict=False))


def _enqueue(w: World, v: Any, hist: History, fail: Fail) -> None:
    calls = hist.enqueue(w)
    for rid, want in v.items():
        if rid not in calls:
            fail(f"enqueue.{rid}", want, "never enqueued")
            continue
        for f, x in want.items():
            if not _match(x, calls[rid][f]):
                fail(f"enqueue.{rid}.{f}", x, calls[rid][f])


def _result(w: World, v: Any, hist: History, fail: Fail) -> None:
    got = hist.steps[-1].result if hist.steps and hist.steps[-1].is_store else None
    if isinstance(v, dict) and not _is_cmp(v):  # find_run: row fields
        if not isinstance(got, dict):
            fail("result", v, got)
            return
        for f, x in v.items():
            if not _match(x, got[f]):
                fail(f"result.{f}", x, got[f])
    elif not _match(v, got):
        fail("result", v, got)


# expectation key -> its checker (model/scenario.py validates the same keys, EXPECT_KEYS)
CHECKERS: dict[str, Checker] = {
    "rows": _rows, "outcomes": _outcomes, "no_outcomes": _no_outcomes, "commands": _commands,
    "events": _events,
    "ledger": _ledger, "messages": _messages, "marks": _marks, "no_marks": _no_marks,
    "clock": _clock, "procs": _procs, "holds": _holds, "violates": _violates,
    "fired": _fired, "never": _never, "order": _order, "reaper": _reaper,
    "enqueue": _enqueue, "result": _result, "seen": _seen,
}


def _fmt(d: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}={v!r}" for k, v in sorted(d.items())) + "}"


def _row_dict(row: Any) -> dict[str, Any]:
    return {f: getattr(row, f) for f in ROW_FIELDS}


def _app_dict(w: World, a: Any) -> dict[str, Any]:
    audited = any(
        e.run == a.run and e.kind == "tool" and e.turn == a.turn and e.call == a.call
        and e.seg == a.seg for e in w.events
    )
    return {"run": w.run_id(a.run), "tool": a.tool, "turn": a.turn, "call": a.call,
            "effect": a.effect, "seg": a.seg, "audited": audited}


# The named properties of ``holds`` / ``violates`` expectations live in spec/, and model/
# does not depend on spec/: spec.properties registers its evaluator here when it is imported
# (the command line imports it, and so does every test that asserts a property by name).
_PROPERTY_EVALUATOR: Callable[[World, str], tuple[bool, str]] | None = None


def register_property_evaluator(fn: Callable[[World, str], tuple[bool, str]]) -> None:
    """``fn(world, name)`` -> (holds, detail), ``LookupError`` for an unknown name."""
    global _PROPERTY_EVALUATOR
    _PROPERTY_EVALUATOR = fn


def property_names(w: World) -> tuple[str, ...] | None:
    """The property names ``holds`` / ``violates`` accept: those the registered evaluator
    knows (it is asked, on ``w``, through its ``names`` attribute or its module's ``SAFETY``
    table, never a copy here); None when no evaluator is registered (nothing to check)."""
    fn = _PROPERTY_EVALUATOR
    if fn is None:
        return None
    names = getattr(fn, "names", None)
    if names is None:
        names = getattr(sys.modules.get(getattr(fn, "__module__", "")), "SAFETY", None)
    return tuple(names) if names is not None else None


def _property(w: World, name: str) -> tuple[bool, str]:
    if _PROPERTY_EVALUATOR is None:
        raise LookupError("no property evaluator is registered (import "
                          "failclosed.spec.properties); remove holds/violates or install spec")
    return _PROPERTY_EVALUATOR(w, name)
