"""Scenarios: a scripted list of transitions replayed through the model, with expectations.

A scenario file is a model configuration (model/config.py: ``policy``, ``[switches]``,
``[constants]``, ``[model]``, ``[[tools]]``, ``[[runs]]`` with an optional ``[runs.row]``)
plus a description, the steps, and what must hold. The checker and the simulator write
their counterexamples in the same format (``dump_scenario``), so every trace they find can
be replayed, read and kept as a regression test (DESIGN.md, "Scenarios").

    description = "16.5: a zombie's unguarded dead-letter kills B's healthy run"
    policy = "adr-104"

    [[runs]]
    id = "r1"
    plan = [{fail = "auth"}]

    messages = [{ run = "r1", not_before = 0 }]   # optional: messages pending at the start
                                                  # (beside a [runs.row] that already exists)

    [[steps]]                          # one transition: Transition.to_dict() with name -> do
    do = "enqueue_run"
    actor = "caller"
    run = "r1"

    [[steps]]                          # args may be partial when one enabled transition
    do = "run_queued"                  # matches (here the message's not_before is left out)
    actor = "w1"
    note = "free text, shown with --verbose"

    [[steps]]                          # a macro: fire the actor's only non-fault move until
    actor = "w1"                       # its next move is named ``until`` ("end": the process
    until = "provider_call"            # has ended; for the reaper: the tick is over)

    [[steps]]
    do = "advance_time"
    actor = "clock"
    to = 905
    expect = { rows.r1 = { status = "running" } }   # checked after this step

    [expect]                           # checked after the last step ([[expect]] also works)
    rows.r1 = { status = "failed", termination_reason = "not_retryable" }
    outcomes = [{ seg = "w1/r1#1", outcome = "FAILED" }]       # each must be present
    no_outcomes = [{ outcome = "LEASE_LOST" }]                 # none may be present
    events.r1 = { count = 5, kinds = ["request", "llm"], sequences = [0, 1] }
    ledger = [{ run = "r1", tool = "W", count = 2 }]   # applications matching the filter
    messages = 0                       # pending messages: a count, or [{run, not_before}]
    marks = ["zombie_settle:r1"]       # facts present (fnmatch patterns)
    no_marks = ["*"]                   # facts absent
    clock = 906
    procs = ["w1"]                     # live processes, exactly
    holds = ["no_zombie_settle"]       # named properties of spec.properties, if installed
    violates = ["terminal_absorption"]

Expectation keys and what they compare:

- ``rows.<run>``: the listed row fields (``Row``: status, claimed_by, lease_expires,
  pending_effect, requeue_count, queued_request, suspended_state, termination_reason,
  error_class, and the ghosts epoch, attempts); ``rows.<run> = "absent"`` for no row.
- ``outcomes`` / ``no_outcomes``: entries of ``World.outcomes`` matched on the given keys
  among ``seg``, ``run``, ``kind``, ``outcome``.
- ``events.<run>``: ``count``, ``kinds`` and ``sequences`` (in stored order), ``tools``
  (tool names of the ``tool`` events), ``duplicate_sequences`` (some sequence is stored
  twice: 16.4, 16.17).
- ``ledger``: each entry filters applications on ``run``, ``tool``, ``turn``, ``call``,
  ``effect``, ``seg`` and ``audited`` (a ``tool`` event of the same run, turn, call and
  segment is stored) and asserts their ``count``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .config import ConfigError, initial_world, load_spec, read_toml
from .runtime import GuardFailed, apply, enabled
from .state import Message, Row, World
from .transition import Transition

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"

TRANSITION_NAMES = frozenset({
    "start_run", "enqueue_run", "cancel", "approve", "deny", "submit_input", "dispatch",
    "run_queued", "claim_queued", "max_sequence", "on_step", "find_run", "renew_lease",
    "mark_pending_effect", "record_step", "provider_call", "invoke", "settle_completed",
    "settle_failed", "settle_policy_stopped", "settle_dead_lettered", "suspend",
    "suspend_for_input", "requeue", "claim_for_resume", "claim_for_resume_from_input",
    "record_approval", "record_input", "find_stale_running", "dead_letter_stale",
    "requeue_stale", "duplicate_message", "remove_tool", "advance_time", "crash",
})
ARG_KEYS = frozenset({"run", "fault", "step", "tool", "effect", "reason", "owner", "delay", "to",
                      "not_before", "permitted", "valid"})  # permitted, valid: [model] refusals
STEP_KEYS = frozenset({"do", "actor", "until", "expect", "note"}) | ARG_KEYS
EXPECT_KEYS = frozenset({
    "rows", "outcomes", "no_outcomes", "events", "ledger", "messages", "marks", "no_marks",
    "clock", "procs", "holds", "violates",
})
OUTCOME_KEYS = ("seg", "run", "kind", "outcome")
EVENT_KEYS = frozenset({"count", "kinds", "sequences", "tools", "duplicate_sequences"})
LEDGER_KEYS = frozenset({"run", "tool", "turn", "call", "effect", "seg", "audited", "count"})
MAX_MACRO_STEPS = 500
ROW_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Row))


# =========================================================================================
# values
# =========================================================================================
@dataclass(frozen=True)
class Step:
    """One ``[[steps]]`` table: a transition (``do``) or a macro (``until``)."""

    index: int  # 1-based position in the file
    do: str | None
    actor: str | None
    args: dict[str, Any]
    until: str | None = None
    expect: dict[str, Any] | None = None
    note: str = ""

    def describe(self) -> str:
        if self.until:
            return f"{self.actor}: ... until {self.until}"
        inner = ", ".join(f"{k}={v}" for k, v in sorted(self.args.items()))
        return f"{self.actor or '?'}: {self.do}({inner})"


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    data: dict[str, Any]  # the configuration part of the file (no steps, no expect)
    world: World  # the initial world
    steps: tuple[Step, ...]
    expect: tuple[dict[str, Any], ...]  # checked after the last step
    path: str = ""

    @property
    def policy(self) -> str:
        return self.world.spec.policy.name


@dataclass
class Failure:
    step: int | None  # 1-based file step, None for the final [expect]
    key: str
    expected: Any
    actual: Any

    def __str__(self) -> str:
        where = "final" if self.step is None else f"after step {self.step}"
        return f"{where}: {self.key}: expected {self.expected!r}, actual {self.actual!r}"


@dataclass
class StepResult:
    step: int  # the file step this transition belongs to
    transition: Transition
    world: World  # the world after it


@dataclass
class ReplayResult:
    scenario: Scenario
    steps: list[StepResult] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    stopped: str = ""  # why the replay stopped early (guard failure, ambiguous step)
    stopped_at: int | None = None
    enabled_then: list[Transition] = field(default_factory=list)
    checked: int = 0  # expectation keys checked

    @property
    def ok(self) -> bool:
        return not self.failures and not self.stopped

    @property
    def world(self) -> World:
        return self.steps[-1].world if self.steps else self.scenario.world

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario.name,
            "path": self.scenario.path,
            "description": self.scenario.description,
            "policy": self.scenario.policy,
            "ok": self.ok,
            "checked": self.checked,
            "steps": [
                {"step": s.step, "transition": s.transition.to_dict(), "clock": s.world.clock}
                for s in self.steps
            ],
            "failures": [
                {"step": f.step, "key": f.key, "expected": _jsonable(f.expected),
                 "actual": _jsonable(f.actual)}
                for f in self.failures
            ],
            "stopped": self.stopped or None,
            "stopped_at": self.stopped_at,
            "enabled": [t.to_dict() for t in self.enabled_then],
        }


def _jsonable(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_jsonable(x) for x in v]
    return str(v)


# =========================================================================================
# loading and validation
# =========================================================================================
def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; a malformed one raises one-line ``ConfigError``."""
    data = read_toml(str(path))
    return scenario_from_dict(data, name=Path(path).name.removesuffix(".toml"), path=str(path))


def scenario_from_dict(data: dict[str, Any], name: str = "scenario", path: str = "") -> Scenario:
    config = {k: v for k, v in data.items()
              if k not in ("steps", "expect", "description", "messages")}
    spec, budget = load_spec(config)
    world = initial_world(spec, budget)
    run_ids = {r.id for r in spec.runs}
    msgs = data.get("messages", [])
    _list_of_tables(msgs, "messages", {"run", "not_before"})
    for n, m in enumerate(msgs):
        if m.get("run") not in run_ids:
            raise ConfigError(f"messages[{n}].run: unknown run {m.get('run')!r}; use one of {', '.join(sorted(run_ids))}")
        nb = m.get("not_before", 0)
        if not isinstance(nb, int) or isinstance(nb, bool) or nb < 0:
            raise ConfigError(f"messages[{n}].not_before: expected an integer >= 0, got {nb!r}")
    if msgs:
        world = replace(world, messages=tuple(sorted(
            (Message(spec.run_index(m["run"]), m.get("not_before", 0)) for m in msgs),
            key=lambda m: (m.run, m.not_before))))
    config = {**config, **({"messages": msgs} if msgs else {})}
    desc = data.get("description", "")
    if not isinstance(desc, str):
        raise ConfigError(f"description: expected a string, got {desc!r}")
    raw_steps = data.get("steps", [])
    if not isinstance(raw_steps, list):
        raise ConfigError("steps: expected an array of [[steps]] tables")
    steps = tuple(_step(s, n + 1, run_ids) for n, s in enumerate(raw_steps))
    raw_expect = data.get("expect", [])
    if isinstance(raw_expect, dict):
        raw_expect = [raw_expect]
    if not isinstance(raw_expect, list):
        raise ConfigError("expect: expected an [expect] table or [[expect]] tables")
    expect = tuple(_expectation(e, "expect.", run_ids) for e in raw_expect)
    return Scenario(name=name, description=desc, data=config, world=world, steps=steps,
                    expect=expect, path=path)


def _near(key: str, allowed: frozenset[str] | set[str]) -> str:
    import difflib

    near = difflib.get_close_matches(key, sorted(allowed), n=1)
    return f"did you mean {near[0]!r}?" if near else f"allowed: {', '.join(sorted(allowed))}"


def _step(s: Any, n: int, run_ids: set[str]) -> Step:
    where = f"steps[{n}]"
    if not isinstance(s, dict):
        raise ConfigError(f"{where}: expected a [[steps]] table")
    for k in s:
        if k not in STEP_KEYS:
            raise ConfigError(f"{where}.{k}: unknown key; {_near(k, STEP_KEYS)}")
    do, until, actor = s.get("do"), s.get("until"), s.get("actor")
    if (do is None) == (until is None):
        raise ConfigError(f"{where}: give exactly one of do = \"<transition>\" or until = \"<transition>\"")
    if do is not None:
        if not isinstance(do, str) or do not in TRANSITION_NAMES:
            raise ConfigError(f"{where}.do: unknown transition {do!r}; {_near(str(do), TRANSITION_NAMES)}")
    if until is not None:
        if not isinstance(until, str) or (until != "end" and until not in TRANSITION_NAMES):
            raise ConfigError(f"{where}.until: unknown transition {until!r}; use a transition name or \"end\"")
        if not isinstance(actor, str):
            raise ConfigError(f"{where}.actor: an until step needs the actor whose moves to fire")
    if actor is not None and not isinstance(actor, str):
        raise ConfigError(f"{where}.actor: expected a string, got {actor!r}")
    args: dict[str, Any] = {}
    for k in ARG_KEYS & s.keys():
        v = s[k]
        if not isinstance(v, (str, int, bool)):
            raise ConfigError(f"{where}.{k}: expected a string, integer or boolean, got {v!r}")
        args[k] = v
    if until is not None and args:
        raise ConfigError(f"{where}: an until step takes no transition arguments ({', '.join(args)})")
    if "run" in args and args["run"] not in run_ids:
        raise ConfigError(f"{where}.run: unknown run {args['run']!r}; use one of {', '.join(sorted(run_ids))}")
    for k in ("to", "delay", "not_before"):
        if k in args and (isinstance(args[k], bool) or not isinstance(args[k], int) or args[k] < 0):
            raise ConfigError(f"{where}.{k}: expected an integer >= 0, got {args[k]!r}")
    if do == "advance_time" and "to" not in args:
        raise ConfigError(f"{where}.to: advance_time needs the instant, e.g. to = 905")
    note = s.get("note", "")
    if not isinstance(note, str):
        raise ConfigError(f"{where}.note: expected a string")
    exp = None
    if "expect" in s:
        exp = _expectation(s["expect"], f"{where}.expect.", run_ids)
    return Step(index=n, do=do, actor=actor, args=args, until=until, expect=exp, note=note)


def _expectation(e: Any, where: str, run_ids: set[str]) -> dict[str, Any]:
    if not isinstance(e, dict):
        raise ConfigError(f"{where.rstrip('.')}: expected a table of expectations")
    for k, v in e.items():
        w = where + k
        if k not in EXPECT_KEYS:
            raise ConfigError(f"{w}: unknown expectation; {_near(k, EXPECT_KEYS)}")
        if k == "rows":
            _per_run(v, w, run_ids)
            for rid, fields_ in v.items():
                if fields_ == "absent":
                    continue
                if not isinstance(fields_, dict):
                    raise ConfigError(f"{w}.{rid}: expected a table of row fields or \"absent\"")
                for f in fields_:
                    if f not in ROW_FIELDS:
                        raise ConfigError(f"{w}.{rid}.{f}: unknown row field; {_near(f, set(ROW_FIELDS))}")
        elif k in ("outcomes", "no_outcomes"):
            _list_of_tables(v, w, set(OUTCOME_KEYS))
        elif k == "events":
            _per_run(v, w, run_ids)
            for rid, spec in v.items():
                if not isinstance(spec, dict):
                    raise ConfigError(f"{w}.{rid}: expected a table such as {{ count = 3 }}")
                for f in spec:
                    if f not in EVENT_KEYS:
                        raise ConfigError(f"{w}.{rid}.{f}: unknown key; {_near(f, EVENT_KEYS)}")
        elif k == "ledger":
            _list_of_tables(v, w, LEDGER_KEYS)
            for n, entry in enumerate(v):
                if "count" not in entry:
                    raise ConfigError(f"{w}[{n}].count: missing; say how many applications match")
                if "run" in entry and entry["run"] not in run_ids:
                    raise ConfigError(f"{w}[{n}].run: unknown run {entry['run']!r}")
        elif k == "messages":
            if not isinstance(v, (int, list)) or isinstance(v, bool):
                raise ConfigError(f"{w}: expected a count or a list of {{ run, not_before }}")
            if isinstance(v, list):
                _list_of_tables(v, w, {"run", "not_before"})
        elif k in ("marks", "no_marks", "procs", "holds", "violates"):
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise ConfigError(f"{w}: expected a list of strings")
        elif k == "clock":
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ConfigError(f"{w}: expected an integer >= 0, got {v!r}")
    return e


def _per_run(v: Any, where: str, run_ids: set[str]) -> None:
    if not isinstance(v, dict):
        raise ConfigError(f"{where}: expected a table keyed by run id, e.g. {where}.r1 = {{ ... }}")
    for rid in v:
        if rid not in run_ids:
            raise ConfigError(f"{where}.{rid}: unknown run; use one of {', '.join(sorted(run_ids))}")


def _list_of_tables(v: Any, where: str, allowed: set[str] | frozenset[str]) -> None:
    if not isinstance(v, list):
        raise ConfigError(f"{where}: expected a list of inline tables")
    for n, x in enumerate(v):
        if not isinstance(x, dict):
            raise ConfigError(f"{where}[{n}]: expected an inline table")
        for k in x:
            if k not in allowed:
                raise ConfigError(f"{where}[{n}].{k}: unknown key; {_near(k, allowed)}")


# =========================================================================================
# replay
# =========================================================================================
class _Stop(Exception):
    def __init__(self, msg: str, enabled_then: list[Transition]):
        super().__init__(msg)
        self.enabled_then = enabled_then
        self.fired: list[Transition] = []  # what an until step fired before it stopped


def resolve(w: World, step: Step) -> Transition:
    """The one enabled transition a ``do`` step names. Its args may be partial: without
    ``fault`` only normal branches match. Raises ``_Stop`` naming the failed guard."""
    name, actor, args = step.do, step.actor, step.args
    assert name is not None
    if name == "advance_time":
        t = Transition.make(name, actor or "clock", **args)
        return t  # apply() decides (any later instant up to the horizon)
    en = enabled(w, actor) if actor else enabled(w)
    cands = [
        t for t in en
        if t.name == name and (actor is None or t.actor == actor)
        and all(t.arg(k, _MISSING) == v for k, v in args.items())
        and ("fault" in args or t.fault is None)
    ]
    if len(cands) == 1:
        return cands[0]
    exact = [t for t in cands if dict(t.args) == args]
    if len(exact) == 1:
        return exact[0]
    if cands:
        raise _Stop(
            f"step {step.index} ({step.describe()}) is ambiguous: it matches "
            + "; ".join(str(t) for t in cands) + ". Give the actor or more arguments.",
            enabled(w),
        )
    t = Transition.make(name, actor or "?", **args)
    try:
        apply(w, t)
    except GuardFailed as g:
        raise _Stop(f"step {step.index} ({t}): guard does not hold: {g.guard}", g.enabled) from None
    # apply accepted the fully spelled transition although no candidate matched: use it
    return t  # pragma: no cover


_MISSING = object()


def _macro(w: World, step: Step) -> list[Transition]:
    """Fire the actor's only normal move until its next move is named ``step.until``."""
    actor = step.actor
    assert actor is not None
    out: list[Transition] = []
    for _ in range(MAX_MACRO_STEPS):
        alive = w.reaper is not None if actor == "reaper" else w.proc(actor) is not None
        if step.until == "end" and out and not alive:
            return out
        moves = [t for t in enabled(w, actor) if t.fault is None and t.name != "crash"]
        if step.until != "end" and any(t.name == step.until for t in moves):
            return out
        if step.until == "end" and not alive and actor != "reaper":
            return out
        if len(moves) != 1:
            what = "no move" if not moves else "several moves: " + "; ".join(map(str, moves))
            ended = [o for o in w.outcomes if o[0] == actor or o[0].startswith(actor + "/")]
            tail = f" (it ended {ended[-1][3]})" if ended and not moves else ""
            stop = _Stop(
                f"step {step.index} ({step.describe()}): {actor} has {what} before reaching "
                f"{step.until}{tail}", enabled(w)
            )
            stop.fired = out
            raise stop
        t = moves[0]
        out.append(t)
        w = apply(w, t)
    raise _Stop(f"step {step.index} ({step.describe()}): {step.until} not reached in "
                f"{MAX_MACRO_STEPS} moves", enabled(w))


def replay(scenario: Scenario) -> ReplayResult:
    """Fire every step in order, checking each step's expectations, then the final ones.

    A step whose guard does not hold stops the replay with one message naming the guard
    and the transitions enabled at that point (``ReplayResult.stopped``)."""
    res = ReplayResult(scenario)
    w = scenario.world
    for step in scenario.steps:
        try:
            if step.until:
                try:
                    ts = _macro(w, step)
                except _Stop as s:
                    for t in s.fired:
                        w = apply(w, t)
                        res.steps.append(StepResult(step.index, t, w))
                    raise
                for t in ts:
                    w = apply(w, t)
                    res.steps.append(StepResult(step.index, t, w))
            else:
                t = resolve(w, step)
                try:
                    w = apply(w, t)
                except GuardFailed as g:
                    raise _Stop(f"step {step.index} ({t}): guard does not hold: {g.guard}",
                                g.enabled) from None
                res.steps.append(StepResult(step.index, t, w))
        except _Stop as s:
            res.stopped = str(s)
            res.stopped_at = step.index
            res.enabled_then = s.enabled_then
            return res
        if step.expect:
            res.failures += check(w, step.expect, step.index)
            res.checked += len(step.expect)
    for e in scenario.expect:
        res.failures += check(w, e, None)
        res.checked += len(e)
    return res


# =========================================================================================
# expectations
# =========================================================================================
def check(w: World, exp: dict[str, Any], step: int | None = None) -> list[Failure]:
    """Every expectation of ``exp`` that does not hold in ``w``, expected vs actual."""
    out: list[Failure] = []

    def fail(key: str, expected: Any, actual: Any) -> None:
        out.append(Failure(step, key, expected, actual))

    spec = w.spec
    for key, v in exp.items():
        if key == "rows":
            for rid, fields_ in v.items():
                row = w.rows[spec.run_index(rid)]
                if fields_ == "absent":
                    if row is not None:
                        fail(f"rows.{rid}", "absent", _row_dict(row))
                    continue
                if row is None:
                    fail(f"rows.{rid}", fields_, "absent")
                    continue
                for f, want in fields_.items():
                    got = getattr(row, f)
                    if got != want:
                        fail(f"rows.{rid}.{f}", want, got)
        elif key in ("outcomes", "no_outcomes"):
            have = [dict(zip(OUTCOME_KEYS, (s, w.run_id(r), k, o), strict=True))
                    for s, r, k, o in w.outcomes]
            for pat in v:
                hit = any(all(o[k] == x for k, x in pat.items()) for o in have)
                if key == "outcomes" and not hit:
                    fail(f"outcomes contains {_fmt(pat)}", "present", have)
                if key == "no_outcomes" and hit:
                    fail(f"no_outcomes {_fmt(pat)}", "absent", have)
        elif key == "events":
            for rid, want in v.items():
                i = spec.run_index(rid)
                evs = [e for e in w.events if e.run == i]
                seqs = [e.seq for e in evs]
                actual = {
                    "count": len(evs),
                    "kinds": [e.kind for e in evs],
                    "sequences": seqs,
                    "tools": [e.tool for e in evs if e.kind == "tool"],
                    "duplicate_sequences": len(set(seqs)) != len(seqs),
                }
                for f, x in want.items():
                    if actual[f] != x:
                        fail(f"events.{rid}.{f}", x, actual[f])
        elif key == "ledger":
            apps = [_app_dict(w, a) for a in w.ledger]
            for pat in v:
                flt = {k: x for k, x in pat.items() if k != "count"}
                n = sum(all(a[k] == x for k, x in flt.items()) for a in apps)
                if n != pat["count"]:
                    fail(f"ledger {_fmt(flt)} count", pat["count"], n)
        elif key == "messages":
            msgs = [{"run": w.run_id(m.run), "not_before": m.not_before} for m in w.messages]
            if isinstance(v, int):
                if len(msgs) != v:
                    fail("messages", v, msgs)
            elif sorted(map(_fmt, v)) != sorted(map(_fmt, msgs)):
                fail("messages", v, msgs)
        elif key == "marks":
            for pat in v:
                if not any(fnmatch.fnmatchcase(m, pat) for m in w.marks):
                    fail(f"marks contains {pat!r}", "present", sorted(w.marks))
        elif key == "no_marks":
            for pat in v:
                hits = sorted(m for m in w.marks if fnmatch.fnmatchcase(m, pat))
                if hits:
                    fail(f"no_marks {pat!r}", "absent", hits)
        elif key == "clock":
            if w.clock != v:
                fail("clock", v, w.clock)
        elif key == "procs":
            names = sorted(p.name for p in w.procs)
            if names != sorted(v):
                fail("procs", sorted(v), names)
        elif key in ("holds", "violates"):
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
    return out


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


def _property(w: World, name: str) -> tuple[bool, str]:
    """Evaluate a named property of ``spec.properties`` (imported lazily: ``model`` does not
    depend on ``spec``). Returns (holds, detail); ``LookupError`` if it cannot be checked."""
    import importlib

    try:
        mod = importlib.import_module("spec.properties")
    except ModuleNotFoundError:
        raise LookupError("spec.properties is not installed; remove holds/violates or "
                          "install the spec package") from None
    prop = None
    for table in ("PROPERTIES", "INVARIANTS", "ALL"):
        reg = getattr(mod, table, None)
        if isinstance(reg, dict) and name in reg:
            prop = reg[name]
            break
        if isinstance(reg, (list, tuple)):
            for p in reg:
                if getattr(p, "name", None) == name:
                    prop = p
                    break
    if prop is None:
        prop = getattr(mod, name, None)
    if prop is None:
        raise LookupError(f"spec.properties has no property {name!r}")
    fn = prop if callable(prop) else getattr(prop, "check", None) or getattr(prop, "predicate", None)
    if fn is None:
        raise LookupError(f"spec.properties.{name} is not callable")
    r = fn(w)
    if isinstance(r, bool) or r is None:
        return (r is not False), ""
    if isinstance(r, str):
        return (not r), r
    if isinstance(r, (list, tuple, set, frozenset)):
        return (not r), "; ".join(map(str, r))
    return bool(r), str(r)


# =========================================================================================
# writing (counterexamples from the checker and the simulator)
# =========================================================================================
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: str) -> str:
    return k if _BARE.match(k) else _str(k)


def _str(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            raise ValueError(f"cannot write {v!r} to TOML")
        return repr(v)
    if isinstance(v, str):
        return _str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        if not v:
            return "{}"
        return "{ " + ", ".join(f"{_key(str(k))} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} to TOML: {v!r}")


def _table(lines: list[str], header: str, d: dict[str, Any], sub: tuple[str, ...] = ()) -> None:
    lines.append(header)
    for k, v in d.items():
        if k not in sub:
            lines.append(f"{_key(k)} = {_value(v)}")
    for k in sub:
        if k in d:
            lines.append("")
            _table(lines, f"[{header.strip('[]')}.{k}]", d[k])


def dump_scenario(
    spec_data: dict[str, Any],
    steps: list[Any],
    expectations: dict[str, Any] | list[dict[str, Any]] | None = None,
    description: str | None = None,
    policy: str | None = None,
    notes: dict[int, str] | None = None,
) -> str:
    """TOML text of a scenario: the configuration ``spec_data`` (as given to ``load_spec``),
    one ``[[steps]]`` per transition (optionally ``(transition, step_expectations)``),
    then the final ``[expect]`` tables. ``policy`` overrides the configuration's policy
    (a counterexample found with a policy override). The text round-trips through tomllib.
    """
    data = {k: v for k, v in spec_data.items() if k not in ("steps", "expect")}
    if description is not None:
        data["description"] = description
    if policy is not None:
        data["policy"] = policy
    lines: list[str] = []
    scalars = [k for k, v in data.items() if not isinstance(v, (dict, list)) or
               (isinstance(v, list) and not all(isinstance(x, dict) for x in v)) or
               (isinstance(v, list) and not v)]
    for k in ("description", "policy"):
        if k in scalars:
            lines.append(f"{k} = {_value(data[k])}")
    for k in scalars:
        if k not in ("description", "policy"):
            lines.append(f"{_key(k)} = {_value(data[k])}")
    for k, v in data.items():
        if k in scalars:
            continue
        if isinstance(v, dict):
            lines.append("")
            _table(lines, f"[{_key(k)}]", v)
        else:  # a non-empty array of tables
            for item in v:
                lines.append("")
                _table(lines, f"[[{_key(k)}]]", item, sub=("row",) if k == "runs" else ())
    for n, s in enumerate(steps):
        if isinstance(s, dict):  # a step table as written by hand (partial args, until)
            lines.append("")
            lines.append("[[steps]]")
            for k, v in s.items():
                lines.append(f"{_key(k)} = {_value(v)}")
            continue
        t, exp = (s if isinstance(s, tuple) and len(s) == 2 and isinstance(s[0], Transition)
                  else (s, None))
        assert isinstance(t, Transition)
        lines.append("")
        lines.append("[[steps]]")
        lines.append(f"do = {_value(t.name)}")
        lines.append(f"actor = {_value(t.actor)}")
        for k, v in t.args:
            lines.append(f"{_key(k)} = {_value(v)}")
        if notes and n in notes:
            lines.append(f"note = {_value(notes[n])}")
        if exp:
            lines.append(f"expect = {_value(exp)}")
    if expectations:
        for e in [expectations] if isinstance(expectations, dict) else expectations:
            lines.append("")
            lines.append("[[expect]]")
            for k, v in e.items():
                lines.append(f"{_key(k)} = {_value(v)}")
    return "\n".join(lines) + "\n"


# =========================================================================================
# command line
# =========================================================================================
def shipped() -> list[Path]:
    """The scenario files shipped with the package (model/scenarios/*.toml)."""
    return sorted(SCENARIO_DIR.glob("*.toml"))


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "replay", help="replay a scenario file through the model and check its expectations",
        description="Replay a scenario (a configuration plus [[steps]] and expectations). "
                    "Exit 0: every expectation holds; 1: one fails or a step's guard does "
                    "not hold; 2: the file is malformed.",
    )
    p.add_argument("file", nargs="?", help="a scenario .toml file")
    p.add_argument("--all", action="store_true", help="replay every shipped scenario (a table)")
    p.add_argument("--json", action="store_true", help="print a machine-readable result")
    p.add_argument("-v", "--verbose", action="store_true", help="print every transition")
    p.set_defaults(func=_cmd_replay)


def _cmd_replay(args: argparse.Namespace) -> int:
    if args.all:
        if args.file:
            raise ConfigError("replay: give a FILE or --all, not both")
        return _replay_all(args)
    if not args.file:
        raise ConfigError("replay: give a scenario FILE, or --all for the shipped scenarios")
    res = replay(load_scenario(args.file))
    if args.json:
        print(json.dumps(res.to_dict(), indent=2))
    else:
        _print_result(res, args.verbose)
    return 0 if res.ok else 1


def _print_result(res: ReplayResult, verbose: bool) -> None:
    sc = res.scenario
    print(f"{sc.name}  [{sc.policy}]")
    if sc.description:
        print(f"  {sc.description}")
    if verbose:
        notes = {s.index: s.note for s in sc.steps if s.note}
        last = None
        for r in res.steps:
            if r.step != last and r.step in notes:
                print(f"  # {notes[r.step]}")
            last = r.step
            print(f"  {r.step:>3}  t={r.world.clock:<5} {r.transition}")
    for f in res.failures:
        print(f"  FAIL {f}")
    if res.stopped:
        print(f"  STOP {res.stopped}")
        print("  enabled at that point:")
        for t in res.enabled_then:
            print(f"    {t}")
    status = "PASS" if res.ok else "FAIL"
    print(f"{status}: {len(res.steps)} transitions, {res.checked} expectations checked, "
          f"{len(res.failures)} failed")


def _replay_all(args: argparse.Namespace) -> int:
    rows = []
    bad = 0
    for path in shipped():
        try:
            res = replay(load_scenario(path))
            ok, note = res.ok, (res.stopped or (str(res.failures[0]) if res.failures else ""))
            rows.append((path.stem, res.scenario.policy, len(res.steps), res.checked, ok, note))
        except ConfigError as e:
            rows.append((path.stem, "?", 0, 0, False, f"malformed: {e}"))
            ok = False
        bad += not ok
    if args.json:
        print(json.dumps([
            {"scenario": n, "policy": p, "transitions": s, "checked": c, "ok": ok, "detail": d}
            for n, p, s, c, ok, d in rows], indent=2))
    else:
        w = max((len(r[0]) for r in rows), default=8)
        pw = max((len(r[1]) for r in rows), default=6)
        print(f"{'scenario':<{w}}  {'policy':<{pw}}  steps  checks  result")
        for n, p, s, c, ok, d in rows:
            print(f"{n:<{w}}  {p:<{pw}}  {s:>5}  {c:>6}  {'PASS' if ok else 'FAIL ' + d}")
        print(f"{len(rows) - bad}/{len(rows)} scenarios pass")
    return 0 if bad == 0 else 1


__all__ = ["Failure", "ReplayResult", "Scenario", "Step", "StepResult", "check", "dump_scenario",
           "load_scenario", "register", "replay", "resolve", "scenario_from_dict", "shipped"]

