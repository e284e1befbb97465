"""Scenarios: a scripted list of transitions replayed through the model, with expectations.

A scenario file is a model configuration (model/config.py: ``policy``, ``[switches]``,
``[constants]``, ``[model]``, ``[[tools]]``, ``[[runs]]`` with an optional ``[runs.row]``
and ``[[runs.events]]``) plus a description, the steps, and what must hold. The checker and
the simulator produce their counterexamples in the same format (the command line writes them:
cli/scenario_writer.py), so every trace they find can be replayed, read and kept as a
regression test (docs/DESIGN.md, "Scenarios"). This module reads, validates and replays
(the expectations' shape: model/scenario_expect.py).

    description = "16.5: a zombie's unguarded dead-letter kills B's healthy run"
    policy = "adr-104"
    messages = [{ run = "r1", not_before = 0 }]   # optional: messages pending at the start
                                                  # (top level: above the first [table])
    [[runs]]
    id = "r1"
    plan = [{fail = "auth"}]

    [runs.row]                         # optional: the row exists at the start (config.py)
    status = "running"

    [[runs.events]]                    # optional: the run's stored event stream at the start,
    kind = "request"                   # in stored order: kind (request | llm | tool |
    sequence = 0                       # approval | input), sequence (default: its position),
    turn = 0                           # turn (0), call and tool (tool events only; call 0),
    seg = "seed"                       # seg: the writing segment (default "seed")

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

    [[steps]]                          # ONE store statement run directly (model/store.py),
    store = "renew_lease"              # as the runtime's own store tests do: no process,
    run = "r1"                         # no guard of the runtime, the clock as it is
    owner = "worker:w1"
    expect = { result = false }        # its result: true/false, a row, a number, run ids

    [[steps]]
    do = "advance_time"
    actor = "clock"
    to = 905
    expect = { rows.r1 = { status = "running" } }   # checked after this step

    [expect]                           # checked after the last step ([[expect]] also works)
    rows.r1 = { status = "failed", termination_reason = "not_retryable" }
    outcomes = [{ seg = "w1/r1#1", outcome = "FAILED" }]       # each must be present
    no_outcomes = [{ outcome = "LEASE_LOST" }]                 # none may be present
    commands = [{ actor = "operator", uuid = "r1", outcome = "RUN_CANCELLED", exit = 0 }]
    events.r1 = { count = 5, kinds = ["request", "llm"], sequences = [0, 1] }
    ledger = [{ run = "r1", tool = "W", count = 2 }]   # applications matching the filter
    messages = 0                       # pending messages: a count, or [{run, not_before}]
    marks = ["zombie_settle:r1"]       # facts present (fnmatch patterns)
    no_marks = ["*"]                   # facts absent
    clock = 906
    procs = ["w1"]                     # live processes, exactly
    holds = ["no_zombie_settle"]       # safety properties of spec.properties (it registers them)
    violates = ["terminal_absorption"]
    fired = [{ do = "requeue_stale", actor = "reaper", times = 1 }]   # the trace so far
    never = [{ do = "dead_letter_stale" }]
    order = [{ do = "requeue_stale" }, { do = "claim_queued", actor = "w2" }]
    reaper = { finished = true, requeued = 1, snapshot = ["r1"] }
    enqueue.r1 = { error = "EnqueueFailed", returned = true }
    seen = [{ by = "bot", request = "events", sequences = [1, 2] }]

Expectation keys and what they compare (model/scenario_check.py reads each off the world
and the trace, one checker per key; model/scenario_expect.py's ``VALIDATORS`` check their
shape at load):

- ``rows.<run>``: the listed row fields (``Row``: status, claimed_by, lease_expires,
  pending_effect, requeue_count, queued_request, suspended_state, termination_reason,
  error_class, dispatch_deadline (proposal P6), and the ghosts epoch, attempts); ``rows.<run> = "absent"`` for no row.
- ``outcomes`` / ``no_outcomes``: entries of ``World.outcomes`` matched on the given keys
  among ``seg``, ``run``, ``kind``, ``outcome``.
- ``commands``: entries of ``World.commands`` (what the runtime's console commands ended
  with: the operator's ``cancel_command``, a reaper's ``tick_refused``), each must be
  present, matched on the given keys among ``actor``, ``command``, ``uuid`` (the id it was
  given), ``outcome``, ``exit`` and ``message`` (model/commands.py).
  among ``seg``, ``run``, ``kind``, ``outcome`` (a named principal's cancel or read that
  changed or read nothing: ``seg`` is the principal, ``kind`` ``request``, ``outcome``
  ``returned false`` or ``returned nothing``, as for an unknown run, RUNTIME 16.18.3).
- ``seen``: entries of ``World.made`` (RUNTIME 16.18: a named principal's request that took
  effect) matched on ``by``, ``run``, ``request``, ``fields`` (a status view's field names,
  in order) and ``sequences`` (an events read's).
- ``events.<run>``: ``count``, ``kinds`` and ``sequences`` (in stored order), ``tools``
  (tool names of the ``tool`` events), ``tool_errors`` (per ``tool`` event, in stored
  order: its call got an error result, i.e. ``invoke`` took the ``tool_error`` fault or
  found the tool missing or removed), ``duplicate_sequences`` (some sequence is stored
  twice: 16.4, 16.17).
- ``ledger``: each entry filters applications on ``run``, ``tool``, ``turn``, ``call``,
  ``effect``, ``seg`` and ``audited`` (a ``tool`` event of the same run, turn, call and
  segment is stored) and asserts their ``count``.
- ``fired`` / ``never`` / ``order``: the trace up to this point (every fired transition and
  store statement), each entry a filter on ``do`` (the name), ``actor``, ``fault`` (``""``:
  the normal branch), the transition's arguments (``run``, ``tool``, ``effect``, ``reason``,
  ``owner``, ...) and, for store statements (actor ``store``), ``result``. ``fired``: the
  filter matches ``times`` entries (without ``times``: at least one); ``never``: none;
  ``order``: the filters match entries in this order (other entries may come between).
- ``reaper``: the current tick, or the last one if none runs: ``active`` (a tick is in
  progress), ``pc``, ``now``, ``snapshot`` (its SELECT, oldest lease first: run ids, or
  tables of ``run``, ``pending_effect``, ``queued_request``, ``requeue_count``),
  ``finished`` (the tick decided every row; false while it runs or if it died), the tick's
  ``overdue`` (proposal P6: the run ids of its sweep's T14, after the stale rows),
  counters ``requeued`` (T11 matched and its dispatch did not raise), ``dead_lettered``
  (T12 matched, or branch 5's settle after a failed dispatch matched), ``skipped`` (T11 or
  T12 matched nothing or hit a store error), ``dispatch_failed``, ``redispatched`` (P6: an
  overdue row's T15 matched and its dispatch did not raise); and ``ticks`` (SELECTs
  run so far).
- ``enqueue.<run>``: the enqueue caller (6.1): ``error`` (``"EnqueueFailed"`` when T2
  failed, the dispatch raised or there is no transport (6.4), ``""`` otherwise) and ``returned`` (the call has
  returned: on the sync transport only after the nested run ends; false if it died).
- ``result`` (a store step's own ``expect`` only): what the statement returned: ``true`` or
  ``false`` (the guard matched), for ``find_run`` the row (a table of row fields, or
  ``"absent"``), for ``max_sequence`` a number (-1: no event), for ``find_stale_running``
  the run ids in the order returned.

Comparisons. Wherever an expectation compares one value (a row field, a count, the clock, a
filter's value, a reaper field, a result), it may be a table of operators instead of the
value; every operator must hold:

    rows.r1 = { requeue_count = { ">=" = 1 }, claimed_by = { prefix = "worker:" } }
    events.r1 = { count = { ">" = 2, "<=" = 6 }, kinds = { "not contains" = "tool" } }
    fired = [{ do = "renew_lease", actor = { prefix = "resume:" }, times = { ">=" = 2 } }]

``"=="``, ``"!="``; ``">"``, ``">="``, ``"<"``, ``"<="`` (numbers); ``prefix`` (a string
starts with it, or a list starts with the given list); ``contains`` / ``"not contains"``
(a substring of a string, an element of a list; a list operand: each of its elements);
``in`` / ``"not in"`` (the value is one of a list).

Store statements (``store = ...``; RUNTIME 4, the functions of model/store.py):
``start_run`` (T1: run, owner = the identity, default ``interactive:<run>``, leased =
default the policy's), ``enqueue_run`` (T2), ``claim_queued`` (T3: owner = the worker
identity), ``renew_lease`` (T4: owner), ``mark_pending_effect`` (T5: owner, effect, ``""`` to
clear), ``suspend`` / ``suspend_for_input`` (T6: turn, default 0), ``claim_for_resume`` /
``claim_for_resume_from_input`` (T7: owner, leased), ``finish_run`` (T8: status, reason,
error_class, owner = owner-guarded), ``requeue`` (T9: owner), ``find_stale_running`` (T10:
now, limit), ``requeue_stale`` (T11: now), ``dead_letter_stale`` (T12: reason, now),
``cancel`` (T13), and the reads ``find_run`` and ``max_sequence``; the statements of the
proposals (docs/PROPOSALS.md): ``append_event`` (the event insert, P7 and P8: seq, kind,
owner; true when it stored the event), ``find_overdue_queued`` (T14 of P6: now, limit) and
``redispatch_queued`` (T15 of P6: now). ``now`` defaults to the clock. Every one but T10 and
T14 names its ``run``.

``load_scenario(path, policy)`` reads a file under ``policy`` (its own ``policy`` and
``[switches]`` set aside); ``failclosed replay`` (cli/replay.py) replays files and the shipped
scenarios (``SCENARIO_DIR``) from the command line. ``ReplayResult.to_dict`` on a failure adds
``world``, a snapshot of the world where the replay ended (and each failed step expectation
its own).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import names
from .config import ConfigError, initial_world, misplaced, parse_config, read_toml
from .runtime import GuardFailed, apply, enabled
from .scenario_check import (
    OUTCOME_KEYS,
    Failure,
    History,
    StepResult,
    _app_dict,
    _row_dict,
    check,
    command_dicts,
    overdue_ids,
    snapshot,
)
from .scenario_check import register_property_evaluator as register_property_evaluator
from .scenario_expect import (
    ARG_KEYS,
    STATEMENTS,
    STORE_ARG_KEYS,
    TRANSITION_NAMES,
    check_model_names,
    expectation,
    list_of_tables,
    near,
    unknown_key,
)
from .state import NO_TRANSPORT, REASONS, STATUSES, TERMINAL, Event, Message, Row, World
from .transition import Transition

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"

STORE_ACTOR = "store"  # the actor of a store statement in the trace
STEP_KEYS = frozenset({"do", "actor", "until", "store", "expect", "note"}) | ARG_KEYS | STORE_ARG_KEYS
SEED_EVENT_KEYS = frozenset({"kind", "sequence", "turn", "call", "tool", "seg"})
SEED_EVENT_KINDS = ("request", "llm", "tool", "approval", "input")
MAX_MACRO_STEPS = 500


# =========================================================================================
# values
# =========================================================================================
@dataclass(frozen=True)
class Step:
    """One ``[[steps]]`` table: a transition (``do``), a macro (``until``) or one store
    statement run directly (``store``)."""

    index: int  # 1-based position in the file
    do: str | None
    actor: str | None
    args: dict[str, Any]
    until: str | None = None
    expect: dict[str, Any] | None = None
    note: str = ""
    store: str | None = None

    def describe(self) -> str:
        if self.until:
            return f"{self.actor}: ... until {self.until}"
        inner = ", ".join(f"{k}={v}" for k, v in sorted(self.args.items()))
        if self.store:
            return f"{STORE_ACTOR}: {self.store}({inner})"
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
        return self.world.config.policy.name


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
        steps = []
        for s in self.steps:
            d = {"step": s.step, "transition": s.transition.to_dict(), "clock": s.world.clock}
            if s.is_store:
                d["result"] = jsonable(s.result)
            steps.append(d)
        out = {
            "scenario": self.scenario.name,
            "path": self.scenario.path,
            "description": self.scenario.description,
            "policy": self.scenario.policy,
            "ok": self.ok,
            "checked": self.checked,
            "steps": steps,
            "failures": [
                {"step": f.step, "key": f.key, "expected": jsonable(f.expected),
                 "actual": jsonable(f.actual),
                 **({"world": world_dict(f.world)} if f.world is not None else {})}
                for f in self.failures
            ],
            "stopped": self.stopped or None,
            "stopped_at": self.stopped_at,
            "enabled": [t.to_dict() for t in self.enabled_then],
        }
        if not self.ok:  # the world where it ended, to read the failure without rerunning
            out["world"] = world_dict(self.world)
        return out


def world_dict(w: World) -> dict[str, Any]:
    """A JSON-ready snapshot of a world: rows, events, ledger, processes, messages, clock,
    each reaper's tick in progress (``reaper``: the first reaper's; ``reapers``: every
    declared reaper's, by name, when the configuration declares more than one), outcomes,
    marks, the fault budget left and the removed tools."""
    def tick(r: Any) -> dict[str, Any] | None:
        return None if r is None else {
            "pc": r.pc, "now": r.now, "row": r.idx,
            "snapshot": snapshot(w, r.rows), "overdue": overdue_ids(w, r.rows)}

    reapers = names.reaper_names(w.config)
    out = {
        "clock": w.clock,
        "rows": {w.run_id(i): (_row_dict(row) if row is not None else None)
                 for i, row in enumerate(w.rows)},
        "events": [{"run": w.run_id(e.run), "sequence": e.seq, "kind": e.kind, "turn": e.turn,
                    "call": e.call, "tool": e.tool, "seg": e.seg} for e in w.events],
        "ledger": [{**_app_dict(w, a), "fenced": a.fenced, "attempt": a.attempt}
                   for a in w.ledger],
        "procs": [{"name": p.name, "kind": p.kind, "run": w.run_id(p.run), "pc": p.pc,
                   "seg": p.seg, "identity": p.identity, "owner": p.owner, "guard": p.guard,
                   "handle": p.handle, "turn": p.turn, "call": p.call,
                   "nested_in": [f.name + "@" + f.pc for f in p.outer]} for p in w.procs],
        "messages": [{"run": w.run_id(m.run), "not_before": m.not_before} for m in w.messages],
        "reaper": tick(w.reaper(reapers[0])),
        "outcomes": [dict(zip(OUTCOME_KEYS, (s, w.run_id(i), k, o), strict=True))
                     for s, i, k, o in w.outcomes],
        "commands": command_dicts(w),
        "marks": sorted(w.marks),
        "faults_left": w.faults,
        "removed": sorted(w.removed),
    }
    if len(reapers) > 1:
        out["reapers"] = {n: tick(w.reaper(n)) for n in reapers}
    return out


def jsonable(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [jsonable(x) for x in v]
    return str(v)


# =========================================================================================
# loading and validation
# =========================================================================================
def load_scenario(path: str | Path, policy: str | None = None) -> Scenario:
    """Read and validate a scenario file; a malformed one raises one-line ``ConfigError``.
    ``policy``: replay it under that policy instead (its ``policy`` and ``[switches]`` set
    aside)."""
    data = read_toml(str(path))
    return scenario_from_dict(data, name=Path(path).name.removesuffix(".toml"), path=str(path),
                              policy=policy)


def scenario_from_dict(data: dict[str, Any], name: str = "scenario", path: str = "",
                       policy: str | None = None) -> Scenario:
    config = {k: v for k, v in data.items()
              if k not in ("steps", "expect", "description", "messages")}
    if policy is not None:
        config.pop("switches", None)
    seeds = _strip_seeded_events(config)
    spec, budget = parse_config(config, policy)
    world = initial_world(spec, budget)
    run_ids = {r.id for r in spec.runs}
    if seeds:
        world = replace(world, events=_seeded_events(spec, seeds))
    msgs = data.get("messages", [])
    list_of_tables(msgs, "messages", {"run", "not_before"})
    for n, m in enumerate(msgs):
        if m.get("run") not in run_ids:
            raise ConfigError(f"messages[{n}].run: unknown run {m.get('run')!r}; use one of {', '.join(sorted(run_ids))}")
        nb = m.get("not_before", 0)
        if not isinstance(nb, int) or isinstance(nb, bool) or nb < 0:
            raise ConfigError(f"messages[{n}].not_before: expected an integer >= 0, got {nb!r}")
    if msgs and spec.transport == NO_TRANSPORT:
        raise ConfigError("messages: with model.transport = \"none\" there is no bus to hold a "
                          "message (RUNTIME 6.4); remove messages or choose another transport")
    if msgs:
        world = replace(world, messages=tuple(sorted(
            (Message(spec.run_index(m["run"]), m.get("not_before", 0)) for m in msgs),
            key=lambda m: (m.run, m.not_before))))
    if seeds:  # keep the seeded streams in the configuration part (dump_scenario writes it)
        config = {**config, "runs": [dict(r, events=seeds[n]) if n in seeds else r
                                     for n, r in enumerate(config["runs"])]}
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
    expect = tuple(expectation(e, "expect.", run_ids) for e in raw_expect)
    actors = {st.actor for st in steps if st.actor}
    for where, e in [*((f"steps[{st.index}].expect.", st.expect) for st in steps if st.expect),
                     *(("expect.", e) for e in expect)]:
        check_model_names(e, where, world, actors)
    return Scenario(name=name, description=desc, data=config, world=world, steps=steps,
                    expect=expect, path=path)


def _strip_seeded_events(config: dict[str, Any]) -> dict[int, Any]:
    """Take the ``[[runs.events]]`` arrays out of ``config`` (parse_config does not know them):
    run position -> the raw array. ``config`` is a shallow copy of the file's table."""
    runs = config.get("runs")
    if not isinstance(runs, list) or not any(isinstance(r, dict) and "events" in r for r in runs):
        return {}
    seeds = {n: r["events"] for n, r in enumerate(runs) if isinstance(r, dict) and "events" in r}
    config["runs"] = [{k: v for k, v in r.items() if k != "events"} if n in seeds else r
                      for n, r in enumerate(runs)]
    return seeds


def _seeded_events(spec: Any, seeds: dict[int, Any]) -> tuple[Event, ...]:
    """The stored event streams at the start, run by run, each in the order written."""
    out: list[Event] = []
    for n in sorted(seeds):
        evs = seeds[n]
        if not isinstance(evs, list):
            raise ConfigError(f"runs[{n}].events: expected an array of [[runs.events]] tables")
        out.extend(_seeded_event(e, n, k) for k, e in enumerate(evs))
    return tuple(out)


def _seeded_event(e: Any, n: int, k: int) -> Event:
    """The ``k``-th ``[[runs.events]]`` table of the ``n``-th run."""
    where = f"runs[{n}].events[{k}]"
    if not isinstance(e, dict):
        raise ConfigError(f"{where}: expected a table such as {{ kind = \"request\", sequence = 0 }}")
    for key in e:
        if key not in SEED_EVENT_KEYS:
            hint = misplaced(key, where + ".")
            raise ConfigError(f"{where}.{key}: " + (hint or f"unknown key; {near(key, SEED_EVENT_KEYS)}"))
    kind = e.get("kind")
    if kind not in SEED_EVENT_KINDS:
        raise ConfigError(f"{where}.kind: {kind!r}; use one of {', '.join(SEED_EVENT_KINDS)}")
    for key in ("sequence", "turn", "call"):
        if key in e:
            v = e[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError(f"{where}.{key}: expected an integer >= 0, got {v!r}")
    for key in ("tool", "seg"):
        if key in e and (not isinstance(e[key], str) or not e[key]):
            raise ConfigError(f"{where}.{key}: expected a non-empty string, got {e[key]!r}")
    if kind == "tool" and "tool" not in e:
        raise ConfigError(f"{where}.tool: missing; a tool event names its tool, e.g. tool = \"lookup\"")
    if kind != "tool":
        for key in ("tool", "call"):
            if key in e:
                raise ConfigError(f"{where}.{key}: only a tool event has a {key}; remove it or use kind = \"tool\"")
    return Event(
        run=n, seq=e.get("sequence", k), kind=kind, turn=e.get("turn", 0),
        call=e.get("call", 0) if kind == "tool" else -1, tool=e.get("tool", ""),
        seg=e.get("seg", "seed"),
    )


def _step(s: Any, n: int, run_ids: set[str]) -> Step:
    """The ``n``-th ``[[steps]]`` table: a transition (``do``), a macro (``until``) or, in
    ``_store_step``, a store statement (``store``)."""
    where = f"steps[{n}]"
    if not isinstance(s, dict):
        raise ConfigError(f"{where}: expected a [[steps]] table")
    for k in s:
        if k not in STEP_KEYS:
            raise ConfigError(unknown_key(k, where, STEP_KEYS))
    do, until, actor, stmt = s.get("do"), s.get("until"), s.get("actor"), s.get("store")
    if sum(x is not None for x in (do, until, stmt)) != 1:
        raise ConfigError(f"{where}: give exactly one of do = \"<transition>\", until = \"<transition>\" "
                          "or store = \"<statement>\"")
    if stmt is not None:
        return _store_step(s, n, run_ids)
    extra = sorted((STORE_ARG_KEYS - ARG_KEYS) & s.keys())
    if extra:
        raise ConfigError(f"{where}.{extra[0]}: only a store = \"<statement>\" step takes {extra[0]}")
    _check_step_target(where, do, until, actor)
    args = _transition_args(s, where, run_ids, do, until)
    note, exp = _note_and_expect(s, where, run_ids)
    return Step(index=n, do=do, actor=actor, args=args, until=until, expect=exp, note=note)


def _check_step_target(where: str, do: Any, until: Any, actor: Any) -> None:
    """``do`` names a transition; ``until`` one (or ``"end"``) and needs the actor."""
    if do is not None:
        if not isinstance(do, str) or do not in TRANSITION_NAMES:
            raise ConfigError(f"{where}.do: unknown transition {do!r}; {near(str(do), TRANSITION_NAMES)}")
    if until is not None:
        if not isinstance(until, str) or (until != "end" and until not in TRANSITION_NAMES):
            raise ConfigError(f"{where}.until: unknown transition {until!r}; use a transition name or \"end\"")
        if not isinstance(actor, str):
            raise ConfigError(f"{where}.actor: an until step needs the actor whose moves to fire")
    if actor is not None and not isinstance(actor, str):
        raise ConfigError(f"{where}.actor: expected a string, got {actor!r}")


def _transition_args(s: dict[str, Any], where: str, run_ids: set[str], do: Any, until: Any) -> dict[str, Any]:
    """The transition arguments of a ``do`` step (an ``until`` step takes none)."""
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
    return args


def _note_and_expect(s: dict[str, Any], where: str, run_ids: set[str],
                     statement: str | None = None) -> tuple[str, dict[str, Any] | None]:
    """A step's ``note`` and its own ``expect`` table (``statement``: a store step's)."""
    note = s.get("note", "")
    if not isinstance(note, str):
        raise ConfigError(f"{where}.note: expected a string")
    exp = None
    if "expect" in s:
        exp = expectation(s["expect"], f"{where}.expect.", run_ids, statement=statement)
    return note, exp


def _store_step(s: dict[str, Any], n: int, run_ids: set[str]) -> Step:
    """A ``store = "<statement>"`` step: its arguments checked against the statement's."""
    where = f"steps[{n}]"
    stmt = _statement_name(s["store"], where)
    if s.get("actor") not in (None, STORE_ACTOR):
        raise ConfigError(f"{where}.actor: a store statement runs directly, not as {s['actor']!r}; "
                          "remove actor (the trace names it \"store\")")
    args = _store_args(s, where, stmt)
    _check_store_arg_values(args, where, stmt, run_ids)
    note, exp = _note_and_expect(s, where, run_ids, statement=stmt)
    return Step(index=n, do=None, actor=STORE_ACTOR, args=args, expect=exp, note=note, store=stmt)


def _statement_name(stmt: Any, where: str) -> str:
    if not isinstance(stmt, str) or stmt not in STATEMENTS:
        hint = near(str(stmt), set(STATEMENTS))
        if isinstance(stmt, str) and stmt.startswith("settle_"):
            hint = "the settle wrappers are T8: use store = \"finish_run\" with status and reason"
        raise ConfigError(f"{where}.store: unknown store statement {stmt!r}; {hint}")
    return stmt


def _store_args(s: dict[str, Any], where: str, stmt: str) -> dict[str, Any]:
    """The arguments of a store step: the statement's (all it requires), each of its type."""
    st = STATEMENTS[stmt]
    label, required = st.label, st.required
    takes = set(st.args)
    args: dict[str, Any] = {}
    for k in s.keys() - {"store", "actor", "expect", "note"}:
        if k not in takes:
            takes_s = ", ".join(sorted(takes)) or "no arguments"
            raise ConfigError(f"{where}.{k}: {stmt} ({label}) takes {takes_s}")
        args[k] = s[k]
    for k in required:
        if k not in args:
            raise ConfigError(f"{where}.{k}: missing; {stmt} ({label}) needs {', '.join(required)}")
    for k, v in args.items():
        w = f"{where}.{k}"
        if k in ("run", "owner", "reason", "error_class", "status", "effect"):
            if not isinstance(v, str):
                raise ConfigError(f"{w}: expected a string, got {v!r}")
        elif k == "leased":
            if not isinstance(v, bool):
                raise ConfigError(f"{w}: expected true or false, got {v!r}")
        elif isinstance(v, bool) or not isinstance(v, int) or v < (1 if k == "limit" else 0):
            raise ConfigError(f"{w}: expected an integer >= {1 if k == 'limit' else 0}, got {v!r}")
    return args


def _check_store_arg_values(args: dict[str, Any], where: str, stmt: str, run_ids: set[str]) -> None:
    """The values a store step's arguments may take: a known run, a non-empty owner, an
    effect, a status and a reason the statement can write."""
    if "run" in args and args["run"] not in run_ids:
        raise ConfigError(f"{where}.run: unknown run {args['run']!r}; use one of {', '.join(sorted(run_ids))}")
    if "owner" in args and not args["owner"]:
        raise ConfigError(f"{where}.owner: empty; give the identity, e.g. owner = \"worker:w1\""
                          + (" (leave it out for an unguarded settle)" if stmt == "finish_run" else ""))
    if "effect" in args and args["effect"] not in ("", "idempotent_write", "non_idempotent_write"):
        raise ConfigError(f"{where}.effect: {args['effect']!r}; use \"idempotent_write\", "
                          "\"non_idempotent_write\" (a stamp) or \"\" (a clear)")
    if stmt == "finish_run" and args["status"] not in TERMINAL:
        raise ConfigError(f"{where}.status: {args['status']!r}; T8 settles to one of {', '.join(sorted(TERMINAL))}")
    if "status" in args and args["status"] not in STATUSES:  # pragma: no cover - T8 only
        raise ConfigError(f"{where}.status: {args['status']!r}; use one of {', '.join(STATUSES)}")
    if "reason" in args and args["reason"] not in REASONS:
        raise ConfigError(f"{where}.reason: {args['reason']!r}; use one of {', '.join(REASONS)}")
    if stmt == "dead_letter_stale" and args["reason"] not in ("not_retryable", "retries_exhausted"):
        raise ConfigError(f"{where}.reason: T12 dead-letters with not_retryable or retries_exhausted, "
                          f"not {args['reason']!r}")


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
        reaper = names.is_reaper(actor)
        alive = w.reaper(actor) is not None if reaper else w.proc(actor) is not None
        if step.until == "end" and out and not alive:
            return out
        moves = [t for t in enabled(w, actor) if t.fault is None and t.name != "crash"]
        if step.until != "end" and any(t.name == step.until for t in moves):
            return out
        if step.until == "end" and not alive and not reaper:
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


def run_statement(w: World, step: Step) -> tuple[World, Transition, Any]:
    """Run the one store statement a ``store`` step names, through model/store.py, with the
    step's arguments (defaults: the clock for ``now``, the configuration's reaper limit, the
    policy's ``leased``). Returns the world after it, the trace entry (actor ``store``, every
    argument spelled) and what the statement returned."""
    name = step.store
    assert name is not None
    st = STATEMENTS[name]
    a = st.default(w, dict(step.args))
    i = w.config.run_index(a["run"]) if "run" in a else -1
    w, res = st.call(w, i, a)
    return w, Transition.make(name, STORE_ACTOR, **a), _result_view(w, res)


def _result_view(w: World, res: Any) -> Any:
    """What a statement returned, as a scenario's ``result`` spells it: a row as its fields
    (no row: ``"absent"``), T10's rows as their run ids, a flag or a position as it is."""
    if res is None:
        return "absent"
    if isinstance(res, Row):
        return _row_dict(res)
    if isinstance(res, tuple):
        return [w.run_id(r.run) for r in res]
    return res


def replay(scenario: Scenario) -> ReplayResult:
    """Fire every step in order, checking each step's expectations, then the final ones.

    A step whose guard does not hold stops the replay with one message naming the guard
    and the transitions enabled at that point (``ReplayResult.stopped``)."""
    res = ReplayResult(scenario)
    w = scenario.world
    for step in scenario.steps:
        try:
            if step.store:
                w, t, out = run_statement(w, step)
                res.steps.append(StepResult(step.index, t, w, out))
            elif step.until:
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
            fails = check(w, step.expect, step.index, History(scenario.world, list(res.steps)))
            for f in fails:
                f.world = w
            res.failures += fails
            res.checked += len(step.expect)
    hist = History(scenario.world, res.steps)
    for e in scenario.expect:
        res.failures += check(w, e, None, hist)
        res.checked += len(e)
    return res


__all__ = ["Failure", "History", "ReplayResult", "Scenario", "Step", "StepResult", "check",
           "jsonable", "load_scenario", "replay", "resolve", "run_statement",
           "scenario_from_dict", "world_dict"]
