"""The simulator writes the runtime's schema: every simulated run and event as the runtime
would have stored them in ``tx_nrllm_agentrun`` and ``tx_nrllm_agentrun_event``
(EXPORT.md, the tables read from the runtime's code, sections 1 to 3; the columns are
sim/dbschema.py's).

An :class:`Exporter` is an observer of a :class:`sim.engine.Simulation` (``sim.observer``): it
reads each fired transition and the worlds before and after it, and never changes either, so a
simulation's history (and its hash) is the same with and without an export.

What is written, and from which fact of the model:

* a run row when the model's row is inserted (T1 ``start_run``, T2 ``enqueue_run``); a run
  whose insert failed has no row. ``uid`` in insert order; ``uuid`` an RFC 4122 v4 value drawn
  from SHA-256 of (seed, policy, run id), so the same simulation gives the same file byte for
  byte; every row column from the model's row after the statement that wrote it
  (``claimed_by``, ``lease_expires``, ``pending_effect``, ``requeue_count``, ``status``,
  ``termination_reason``, ``error_class``); ``queued_request`` and ``suspended_state`` as a
  sealed stand-in (``v2:`` and a digest: the runtime's is encrypted) while the model's row holds
  one; ``started_at`` at ``start_run`` and at every ``claim_queued``, 0 after ``enqueue_run``;
  ``finished_at`` at the terminal settle; ``tstamp`` at each write that changed the row;
  ``iterations`` and ``truncated`` at a completed settle (failed and cancelled settles write 0);
  token totals and ``estimated_cost`` 0 (the model has no tokens).
* an event row for each event the model stores, and only those: a failed insert
  (``audit_insert_fails``) leaves no row, an ambiguous commit leaves one (and the next event
  reuses its sequence, as the runtime's does). ``sequence`` is the model's handle; ``round``
  the round of the model's turn (turn + 1; 0 for ``approval`` and ``input``); ``duration_ms``
  the simulated latency of the provider call or tool (0 where the runtime writes 0); the payload
  of EXPORT.md 2.3 and 2.4 at the chosen privacy level (``metadata``, the runtime's default,
  drops arguments, results and call ids).
* times (``crdate``, ``tstamp``, ``started_at``, ``finished_at``, ``lease_expires``) in
  simulated seconds counted from :data:`EPOCH`, so that they read as unix times and a time of
  0 keeps the runtime's meaning "not set".

The model stores no ``context``, ``assembled`` or ``dropped`` event (it has no context budget,
dry run or skills): an export of a simulation has none.

A SQLite file is written under a temporary name beside it and renamed when the simulation
ends (:meth:`Exporter.close`); :meth:`Exporter.abort` removes it, so the file is complete or
left as it was. A directory gets ``tx_nrllm_agentrun.csv`` and ``tx_nrllm_agentrun_event.csv``
(with a header, ordered by ``uid`` and by ``(run, sequence, uid)``), staged the same way.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import sqlite3
import uuid as _uuid
from dataclasses import dataclass, field
from typing import Any

from failclosed.model import steps
from failclosed.model.policy import parse_policy
from failclosed.model.state import COMPLETED, RUNNING, TERMINAL, Row, World
from failclosed.model.store import CLAIM_QUEUED, START_RUN
from failclosed.model.transition import Transition
from failclosed.model.vocab import Decision

from .dbschema import (
    DISPATCH_DEADLINE,
    EVENT_NAMES,
    EVENT_TABLE,
    PRIVACY_LEVELS,
    ROUND_ZERO_KINDS,
    RUN_NAMES,
    RUN_TABLE,
    create_sql,
)

# the calls a segment waits on (the provider's and the tools', read from the step table)
_TOOL_CALLS = frozenset(n for a in steps.steps() if a.cost == steps.TOOL for n in a.fires)
_WORK_CALLS = _TOOL_CALLS | frozenset(n for a in steps.steps() if a.cost == steps.PROVIDER
                                      for n in a.fires)

EPOCH = 1_767_225_600  # 2026-01-01 00:00:00 UTC: simulated second 0
DECIDED_BY = 1  # the backend user of every simulated decision and interactive run
SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
COMMIT_EVERY = 2000  # runs per transaction

__all__ = ["EPOCH", "Exporter", "SQLITE_SUFFIXES", "is_sqlite_target", "run_uuid"]


def is_sqlite_target(path: str) -> bool:
    return os.path.splitext(path)[1].lower() in SQLITE_SUFFIXES


def run_uuid(seed: int, policy: str, run_id: str) -> str:
    """The run's uuid in an export: version 4, variant RFC 4122, from SHA-256."""
    h = hashlib.sha256(f"{seed}\0{policy}\0{run_id}".encode()).digest()
    return str(_uuid.UUID(bytes=h[:16], version=4))


def php_json(obj: Any) -> str:
    """``json_encode`` with the runtime's flags: compact, ASCII, slashes escaped."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=True).replace("/", "\\/")


def _ms(seconds: float) -> float | int:
    """A duration in ms, 2 decimals; integral values as a JSON integer (no PRESERVE_ZERO_FRACTION)."""
    v = round(seconds * 1000.0, 2)
    return int(v) if v == int(v) else v


def _ts(t: float) -> int:
    return EPOCH + int(t)


@dataclass
class _Run:
    uid: int
    uuid: str
    cols: dict[str, Any]
    events: list[tuple] = field(default_factory=list)
    calls: dict[tuple[int, int], str] = field(default_factory=dict)  # (attempt, turn) -> ids key


class Exporter:
    """Writes what the runtime would have stored (see the module docstring)."""

    def __init__(self, target: str, *, seed: int, policy: str, privacy: str = "metadata",
                 configuration: str = "simulation"):
        if privacy not in PRIVACY_LEVELS:
            raise ValueError(f"privacy {privacy!r}: use one of {', '.join(PRIVACY_LEVELS)}")
        self.target = target
        self.seed, self.policy, self.privacy = seed, policy, privacy
        self.configuration = configuration[:150]
        self.sqlite = is_sqlite_target(target)
        if self.sqlite:
            d, base = os.path.split(os.path.abspath(target))
            self.db_path = os.path.join(d, f".{base}.partial")
        else:
            os.makedirs(target, exist_ok=True)
            self.db_path = os.path.join(target, ".export.partial.sqlite")
        if os.path.exists(self.db_path):
            os.remove(self.db_path)
        self.db = sqlite3.connect(self.db_path)
        self.db.execute("PRAGMA journal_mode=OFF")
        self.db.execute("PRAGMA synchronous=OFF")
        # the schema after the migrations of the policy's proposals (docs/PROPOSALS.md): P6's
        # dispatch_deadline column, P8's UNIQUE (run, sequence)
        pol = parse_policy(policy)
        self.deadline = pol.overdue_queued_redispatched
        self.run_names = RUN_NAMES + ((DISPATCH_DEADLINE,) if self.deadline else ())
        for stmt in create_sql(deadline=self.deadline, unique_sequence=pol.event_sequence_unique):
            self.db.execute(stmt)
        self.runs: dict[int, _Run] = {}  # slot -> the run in it, while it has a row
        self.next_run = 1
        self.next_event = 1
        self.flushed = 0
        self.last: dict[str, float] = {}  # actor -> time of its last transition
        self.work: dict[tuple[str, int], float] = {}  # (actor, slot) -> the last call's latency
        self.tool_err: dict[tuple[str, int], bool] = {}  # (actor, slot) -> its last invoke failed
        # runs and events written; runs simulated without a row (their start_run or enqueue_run
        # failed, so the runtime stored nothing)
        self.counts = {"runs": 0, "events": 0, "runs_without_row": 0}

    # -- the observer's two calls ----------------------------------------------------------
    def fired(self, w: World, t: Transition, w2: World, now: float, i: int | None) -> None:
        actor, name = t.actor, t.name
        if i is not None and name in _WORK_CALLS:
            self.work[(actor, i)] = now - self.last.get(actor, now)
            if name in _TOOL_CALLS:
                tool = t.arg("tool")
                self.tool_err[(actor, i)] = (t.fault is not None or w.config.tool(tool) is None
                                             or tool in w.removed)
        self.last[actor] = now
        if i is None:
            return
        r0, r1 = w.rows[i], w2.rows[i]
        if r1 is not r0 and r1 is not None:
            self._row(w, t, i, r0, r1, now)
        n = len(w.events)
        if len(w2.events) > n:
            run = self.runs.get(i)
            if run is not None:
                for e in w2.events[n:]:
                    self._event(w, t, i, run, e, now)

    def archived(self, w: World, i: int) -> None:
        """The run in slot ``i`` leaves the simulation: write its row and events."""
        run = self.runs.pop(i, None)
        for key in [k for k in self.work if k[1] == i]:
            del self.work[key]
        for key in [k for k in self.tool_err if k[1] == i]:
            del self.tool_err[key]
        if run is None:
            if w is not None:  # a run whose insert failed: the runtime stores no row for it
                self.counts["runs_without_row"] += 1
            return
        self.db.execute(f"INSERT INTO {RUN_TABLE} VALUES ({','.join('?' * len(self.run_names))})",
                        [run.cols[c] for c in self.run_names])
        self.db.executemany(f"INSERT INTO {EVENT_TABLE} VALUES ({','.join('?' * len(EVENT_NAMES))})",
                            run.events)
        self.counts["runs"] += 1
        self.counts["events"] += len(run.events)
        self.flushed += 1
        if self.flushed % COMMIT_EVERY == 0:
            self.db.commit()

    # -- rows -------------------------------------------------------------------------------
    def _sealed(self, run: _Run, what: str) -> str:
        return "v2:" + hashlib.sha256(f"{run.uuid}:{what}".encode()).hexdigest()[:40]

    def _row(self, w: World, t: Transition, i: int, r0: Row | None, r1: Row, now: float) -> None:
        run = self.runs.get(i)
        if run is None or r0 is None:
            rid = w.config.runs[i].id
            run = _Run(self.next_run, run_uuid(self.seed, self.policy, rid), {
                "uid": self.next_run, "pid": 0, "configuration_uid": 1,
                "configuration_identifier": self.configuration,
                "be_user": DECIDED_BY if t.name == START_RUN else 0,
                "iterations": 0, "truncated": 0, "total_prompt_tokens": 0,
                "total_completion_tokens": 0, "total_tokens": 0, "estimated_cost": 0.0,
                "started_at": _ts(now) if t.name == START_RUN else 0, "finished_at": 0,
                "crdate": _ts(now), "tstamp": _ts(now),
            })
            run.cols["uuid"] = run.uuid
            self.next_run += 1
            self.runs[i] = run
        c = run.cols
        new = {
            "status": r1.status, "claimed_by": r1.claimed_by[:64],
            "lease_expires": EPOCH + r1.lease_expires if r1.lease_expires > 0 else 0,
            "pending_effect": r1.pending_effect, "requeue_count": r1.requeue_count,
            "termination_reason": r1.termination_reason, "error_class": r1.error_class,
            "queued_request": self._sealed(run, "request") if r1.queued_request else "",
            "suspended_state": self._sealed(run, f"state{r1.suspended_state}") if r1.suspended_state >= 0 else "",
        }
        if self.deadline:  # P6: the instant by which the row's message must have been taken
            new[DISPATCH_DEADLINE] = EPOCH + r1.dispatch_deadline if r1.dispatch_deadline > 0 else 0
        if any(c.get(k) != v for k, v in new.items()):
            c.update(new)
            c["tstamp"] = _ts(now)
        if t.name == CLAIM_QUEUED and r1.status == RUNNING:
            c["started_at"] = _ts(now)
        if r1.status in TERMINAL and (r0 is None or r0.status not in TERMINAL):
            c["finished_at"] = _ts(now)
            if r1.status == COMPLETED:
                p = w.proc(t.actor)
                c["iterations"] = 0 if p is None else p.turn + (0 if p.synthesis else 1)
                c["truncated"] = 0 if r1.termination_reason == "completed" else 1

    # -- events -----------------------------------------------------------------------------
    def _event(self, w: World, t: Transition, i: int, run: _Run, e: Any, now: float) -> None:
        kind = e.kind
        rnd = 0 if kind in ROUND_ZERO_KINDS else e.turn + 1
        p = w.proc(t.actor)
        dur = 0.0
        key = (t.actor, i)
        if kind == "approval":
            payload = {"approved": p is not None and p.decision == Decision.APPROVE, "decidedBy": DECIDED_BY}
        elif kind == "input":
            payload = {"submittedBy": DECIDED_BY}
        else:
            if kind in ("llm", "tool"):
                dur = self.work.pop(key, 0.0)
            step = {"kind": kind, "round": rnd, "durationMs": _ms(dur)}
            attempt = w2_attempts(w, i)
            if kind == "request":
                step.update(self._request(w, i, e, p, attempt, run))
            elif kind == "llm":
                step.update(self._llm(w, i, e, p, attempt, run))
            else:
                step.update(self._tool(w, e, p, key, run, dur))
                if "toolIsError" in step and step.pop("_refused", False):
                    dur = 0.0
                    step["durationMs"] = 0
            payload = self._filtered(step)
        run.events.append((self.next_event, 0, run.uid, e.seq, kind, rnd, round(dur * 1000.0, 2),
                           php_json(payload), _ts(now)))
        self.next_event += 1

    def _call_id(self, run: _Run, attempt: int, turn: int, call: int) -> str:
        h = hashlib.sha256(f"{run.uuid}:{attempt}:{turn}:{call}".encode()).hexdigest()[:24]
        return f"call_{h}"

    def _args(self, w: World, i: int, turn: int, call: int) -> dict[str, Any]:
        """The model's arguments of a logical call: the same in every attempt."""
        return {"request": w.config.runs[i].id, "turn": turn, "call": call}

    def _request(self, w: World, i: int, e: Any, p: Any, attempt: int, run: _Run) -> dict[str, Any]:
        synthesis = p is not None and p.synthesis
        specs = [] if synthesis else [tl.name for tl in w.config.tools if tl.name not in w.removed]
        spec = w.config.runs[i]
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"task {spec.id}"}]
        for k in range(e.turn):
            calls = spec.answer(k).calls
            ids = [self._call_id(run, attempt, k, c) for c in range(len(calls))]
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": ids[c], "type": "function",
                 "function": {"name": n, "arguments": json.dumps(self._args(w, i, k, c))}}
                for c, n in enumerate(calls)]})
            messages += [{"role": "tool", "tool_call_id": ids[c], "content": f"result of {n}"}
                         for c, n in enumerate(calls)]
        return {"messagesSent": messages, "toolSpecs": specs}

    def _llm(self, w: World, i: int, e: Any, p: Any, attempt: int, run: _Run) -> dict[str, Any]:
        ans = w.config.runs[i].answer(e.turn)
        synthesis = p is not None and p.synthesis
        out: dict[str, Any] = {}
        if ans.kind == "tools" and ans.calls and not synthesis:
            out["content"] = ""
            out["finishReason"] = "tool_calls"
            out["requestedToolCalls"] = [
                {"id": self._call_id(run, attempt, e.turn, c), "name": n,
                 "arguments": self._args(w, i, e.turn, c)} for c, n in enumerate(ans.calls)]
        else:
            out["content"] = "done"
            out["finishReason"] = "stop"
        return out

    def _tool(self, w: World, e: Any, p: Any, key: tuple[str, int], run: _Run, dur: float) -> dict[str, Any]:
        name = e.tool
        refused = key not in self.tool_err
        err = self.tool_err.pop(key, True)
        if refused:
            denied = p is not None and p.decision == Decision.DENY
            result = (f'Error: tool "{name}" was denied by the operator.' if denied
                      else f'Error: tool "{name}" is no longer permitted.')
        else:
            result = f'Error: tool "{name}" failed.' if err else f"ok: {name}"
        return {"toolName": name, "toolArguments": self._args(w, e.run, e.turn, e.call),
                "toolResult": result, "toolIsError": err, "_refused": refused}

    def _filtered(self, step: dict[str, Any]) -> dict[str, Any]:
        """RunStepPrivacyFilter (EXPORT.md 2.3) at this exporter's level."""
        if self.privacy in ("redacted", "full"):
            return step
        out = {k: v for k, v in step.items() if k not in _CONTENT_KEYS}
        out["contentRedacted"] = True
        if "messagesSent" in step:
            out["messagesSentCount"] = len(step["messagesSent"])
        if "content" in step:
            out["contentLength"] = len(step["content"])
        if "toolResult" in step:
            out["toolResultLength"] = len(step["toolResult"])
        if "requestedToolCalls" in step:
            out["requestedToolNames"] = [c["name"] for c in step["requestedToolCalls"]]
        return out

    # -- the end ----------------------------------------------------------------------------
    def close(self) -> None:
        """Every run is written: give the file (or the CSV files) its name."""
        for i in sorted(self.runs):
            self.archived(None, i)  # type: ignore[arg-type]
        self.db.commit()
        if self.sqlite:
            self.db.close()
            os.replace(self.db_path, self.target)
            return
        try:
            for table, names, order in ((RUN_TABLE, self.run_names, "uid"),
                                        (EVENT_TABLE, EVENT_NAMES, "run, sequence, uid")):
                final = os.path.join(self.target, f"{table}.csv")
                part = os.path.join(self.target, f".{table}.csv.partial")
                with open(part, "w", encoding="utf-8", newline="") as f:
                    wr = csv.writer(f)
                    wr.writerow(names)
                    wr.writerows(self.db.execute(f"SELECT {', '.join(names)} FROM {table} ORDER BY {order}"))
                os.replace(part, final)
        finally:
            self.db.close()
            os.remove(self.db_path)

    def abort(self) -> None:
        """The simulation did not finish: remove what was staged, leave the target as it was."""
        try:
            self.db.close()
        except sqlite3.Error:
            pass
        for path in (self.db_path,
                     *(os.path.join(self.target, f".{t}.csv.partial") for t in (RUN_TABLE, EVENT_TABLE))):
            try:
                os.remove(path)
            except OSError:
                pass


_CONTENT_KEYS = frozenset({"messagesSent", "content", "thinking", "requestedToolCalls", "raw",
                           "toolArguments", "toolResult", "toolArtifacts"})


def w2_attempts(w: World, i: int) -> int:
    """The execution of the stored request the run is in (the model's ghost ``attempts``):
    provider call ids are fresh per execution and kept across a suspend and resume."""
    row = w.rows[i]
    return 0 if row is None else row.attempts
