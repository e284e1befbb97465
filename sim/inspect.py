"""``failclosed inspect``'s checks: the footprints of the model's findings in a database of the
runtime (EXPORT.md, the tables read from the runtime's code, section 7: every check the data
supports; docs/INSPECT.md).

:func:`inspect` streams the two tables run by run (sim/inspect_sources.py: runs by ``uid``,
events by ``(run, sequence, uid)``), holds one run's events at a time, and returns a
:class:`Report`: the anomalies (run uuid, events involved, the check, how certain, the
property of spec/properties.py it is the footprint of) and the notices (what the runtime does
by design but an operator should look at). No printing and no file written here: the command
is cli/inspect.py.

Certainty, in the words of EXPORT.md 4: ``certain`` where the tables alone decide (a
duplicate sequence, a row state the statements cannot leave); ``heuristic`` where the check
rests on attempt boundaries (no column names the attempt an event belongs to: a queue attempt
is taken to begin at a ``dropped`` event, or a ``context`` or ``request`` of round 1 after
other events) or on a tool's effect (the tables hold none: the catalogue given with ``--tools``,
else the runtime's resolver: builtin writers by name, ``mcp_*`` non-idempotent, any other name
of unknown effect: ToolEffectResolver counts it as ``non_idempotent_write``, so would a read;
the write checks skip it and the report lists it), or on events the export may not show (the
runtime stores read steps, a denial's approval and inputs fail-soft: an audit-store outage
drops them without a gap), and so a check listed ``certain`` reports an anomaly ``heuristic``
where the export cannot prove it.

Every field is type-checked as it is read (sim/inspect_rows.py): a row that is not as the
runtime writes it is counted in :attr:`Report.unreadable`, never read as something else, and
keeps its run from the checks that would need it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from failclosed.model.config import (
    BUILTIN_WRITERS,
    REMOTE_EFFECT,
    TOOL_KEYS,
    ConfigError,
    parse_config,
    read_toml,
    tool_effect,
)
from failclosed.model.constants import Constants
from failclosed.model.policy import SWITCHES
from failclosed.model.rules import approval_bound, is_write
from failclosed.model.state import (
    AWAITING,
    COMPLETED,
    NON_IDEMPOTENT_WRITE,
    QUEUED,
    REASONS,
    RUNNING,
    STATUSES,
    TERMINAL,
)
from failclosed.spec import baseline
from failclosed.spec.vocab import PropertyName

from .dbschema import (
    CLAIM_PREFIXES,
    DISPATCH_DEADLINE,
    EVENT_TABLE,
    FENCE_LEFT_REASONS,
    FENCE_VALUES,
    KINDS,
    PRIVACY_LEVELS,
    REASONS_BY_STATUS,
    ROUND_ZERO_KINDS,
    RUN_TABLE,
)
from .inspect_rows import EVENT_COST, read_event, read_run, run_of
from .inspect_sources import DEFAULT_BUDGET, EVENT_READ, RUN_READ, Source, payload_limit

CERTAIN = "certain"
HEURISTIC = "heuristic"
INSPECTED_POLICY = "current"  # the runtime an export comes from (EXPORT.md: adr-141)

# the checks, in report order: (id, EXPORT.md section, what it finds, certainty, properties)
CHECKS: tuple[tuple[str, str, str, str, tuple[str, ...]], ...] = (
    ("enums", "7.1", "status, termination_reason, kind, round, pending_effect, requeue_count take the runtime's values", CERTAIN, ()),
    ("sequence_reused", "7.2", "a (run, sequence) stored twice or out of insert order: two writers, or an insert that committed but reported failure", CERTAIN, (PropertyName.STREAM_ORDER, PropertyName.NO_ZOMBIE_APPEND)),
    ("sequence_gap", "7.2", "a run's sequences are dense from 0 (a gap means deleted rows)", CERTAIN, ()),
    ("orphan_events", "7.3", "events whose run has no row (deleted outside the runtime)", CERTAIN, ()),
    ("row_state", "7.4", "the columns a row of its status must have, and the reasons its status allows", CERTAIN, ()),
    ("turn_grammar", "7.5", "each tool event answers a call its round's llm requested", CERTAIN, ()),
    ("write_not_audited", "7.5, 7.6", "a requested write with no tool event in a run that went on past it or completed", HEURISTIC, (PropertyName.NO_SUCCESS_OVER_UNRECORDED_WRITE, PropertyName.NO_UNAUDITED_WRITE_SETTLES_SUCCESSFULLY)),
    ("interrupted_write_retried", "7.6, 4.2", "a non-idempotent write requested, no tool event, and the stored request executed again", HEURISTIC, (PropertyName.NO_WRITE_APPLIED_TWICE_WITHOUT_AUDIT, PropertyName.INTERRUPTED_NON_IDEMPOTENT_WRITE_NOT_REPEATED, PropertyName.NO_UNAUDITED_WRITE_SETTLES_SUCCESSFULLY)),
    ("double_application", "7.7", "a non-idempotent write applied (toolIsError false) in two attempts of one run", HEURISTIC, (PropertyName.NON_IDEMPOTENT_WRITE_AT_MOST_ONCE,)),
    ("leftover_fence", "7.8", "a terminal row whose fence is left with a reason other than not_retryable or cancelled", CERTAIN, ()),
    ("approvals", "7.9", "an approval-bound tool only after its approval, and never after a denial", CERTAIN, (PropertyName.NO_WRITE_WITHOUT_RECORDED_APPROVAL,)),
    ("totals", "7.10", "a completed run never requeued: its last round is at most iterations + 1 (below iterations: a notice, fail-soft steps lost)", CERTAIN, ()),
    ("orphan_queued", "3.3, FINDINGS F3", "a queued row nothing has touched for longer than a lease and the longest backoff", HEURISTIC, (PropertyName.NO_ORPHAN_QUEUED_RUN, PropertyName.EVERY_RUN_TERMINATES)),
    ("overdue_queued", "P6", "a queued row whose dispatch_deadline passed more than a lease before the export's last write, or that has none: an orphan the sweep missed", HEURISTIC, (PropertyName.NO_ORPHAN_QUEUED_RUN, PropertyName.EVERY_RUN_TERMINATES)),
)
CHECK_IDS = tuple(c[0] for c in CHECKS)

# the two footprints of sequence_reused (Anomaly.detail)
DUPLICATE = "duplicate"  # a (run, sequence) stored twice
OUT_OF_ORDER = "out_of_order"  # a sequence inserted after a higher one: two writers interleaved

# The footprint each proposal of docs/PROPOSALS.md would leave if it did not work, so that a
# database taken after the change can be checked for it: (proposal, its switch of
# model.policy.Policy, the check, the anomalies of that check it counts (Anomaly.detail; ""
# every one), what zero of them shows).
FOOTPRINTS: tuple[tuple[str, str, str, str, str], ...] = (
    ("P6", "overdue_queued_redispatched", "overdue_queued", "",
     "no queued row overdue past a lease or without a deadline: the sweep re-dispatches every orphan"),
    ("P7", "event_insert_owner_guarded", "sequence_reused", OUT_OF_ORDER,
     "no event inserted after a higher sequence: no segment's insert landed after its lease moved on"),
    ("P8", "event_sequence_unique", "sequence_reused", DUPLICATE,
     "no (run, sequence) stored twice: the key is UNIQUE"),
)
assert all(f[1] in SWITCHES for f in FOOTPRINTS) and all(f[2] in CHECK_IDS for f in FOOTPRINTS)
# the P6 check needs the migration's column (sim/dbschema.py); without it, this says why
NO_DEADLINE = (f"does not apply: {RUN_TABLE} has no {DISPATCH_DEADLINE} column (the runtime before "
               "P6's migration, docs/PROPOSALS.md)")

# Which violations of the simulator's checks (spec.properties.SAFETY) an export shows, by
# property: "yes" (every violation leaves the footprint of the check named), "partly" (some do)
# or "no" (what the tables cannot see, EXPORT.md 8). tests/test_inspect.py holds the "yes"
# rows to simulations; docs/INSPECT.md explains each row.
DETECTABLE: dict[str, tuple[str, str]] = {
    PropertyName.STREAM_ORDER: ("yes", "sequence_reused"),
    PropertyName.NO_WRITE_APPLIED_TWICE_WITHOUT_AUDIT: ("yes", "interrupted_write_retried"),
    PropertyName.INTERRUPTED_NON_IDEMPOTENT_WRITE_NOT_REPEATED: ("partly", "interrupted_write_retried"),
    PropertyName.NO_UNAUDITED_WRITE_SETTLES_SUCCESSFULLY: ("partly", "interrupted_write_retried"),
    PropertyName.NON_IDEMPOTENT_WRITE_AT_MOST_ONCE: ("yes", "double_application"),
    PropertyName.NO_SUCCESS_OVER_UNRECORDED_WRITE: ("partly", "write_not_audited"),
    PropertyName.NO_WRITE_WITHOUT_RECORDED_APPROVAL: ("partly", "approvals"),
    PropertyName.NO_ZOMBIE_APPEND: ("partly", "sequence_reused"),
    PropertyName.BOUNDED_ATTEMPTS: ("partly", "enums"),
    PropertyName.TERMINAL_IS_ABSORBING: ("no", ""),
    PropertyName.EXCLUSIVE_CLAIM: ("no", ""),
    PropertyName.OWNER_ONLY_MUTATION: ("no", ""),
    PropertyName.NO_ZOMBIE_SETTLE: ("no", ""),
    PropertyName.NO_RETRY_OF_NON_RETRYABLE: ("no", ""),
    PropertyName.WRITES_ONLY_UNDER_FENCE: ("no", ""),
    PropertyName.RACE_SAFE_STALENESS: ("no", ""),
    PropertyName.COOPERATIVE_CANCEL: ("no", ""),
    PropertyName.NO_RESURRECTION_BY_SUSPEND: ("no", ""),
}

# EXPORT.md 8, said once in every report
LIMITS = (
    "which worker or segment wrote an event, the exact attempt boundaries, and the claim and lease history",
    "when pending_effect was set or cleared, and a call's effect (the tables hold none: --tools, or the runtime's resolver)",
    "call ids at METADATA, and a call's identity across attempts at any level (name, round and, at FULL, arguments stand in)",
    "events lost to fail-soft inserts (they leave no gap): read-only steps, approvals of turns without writes, inputs",
    "a side effect done by a segment that then lost its lease (that step is deliberately not recorded)",
    "whether a METADATA toolIsError step was refused or executed and failed",
    "the transcript and pending calls (encrypted, blanked on terminal rows)",
    "the privacy level used (contentRedacted implies NONE or METADATA)",
    "anything about purged runs",
)

R = {c: k for k, c in enumerate(RUN_READ)}
_STARTERS = {"context": 0, "request": 1, "llm": 2}  # the steps of a round, in their order
E = {c: k for k, c in enumerate(EVENT_READ)}
_UID, _RUN, _SEQ, _KIND, _ROUND, _DUR, _PAYLOAD, _CRDATE = (E[c] for c in EVENT_READ)


@dataclass
class Anomaly:
    check: str
    uuid: str  # the run's uuid ("" for an event whose run has no row)
    run: int  # the run's uid
    text: str
    certainty: str
    properties: tuple[str, ...] = ()
    events: tuple[tuple[int, int, str], ...] = ()  # (sequence, event uid, kind)
    detail: str = ""  # which footprint of its check (sequence_reused: DUPLICATE, OUT_OF_ORDER)

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "run_uuid": self.uuid, "run_uid": self.run, "text": self.text,
                "certainty": self.certainty, "properties": list(self.properties),
                "events": [{"sequence": s, "uid": u, "kind": k} for s, u, k in self.events]}


@dataclass
class Report:
    source: str
    runs: int = 0
    events: int = 0
    skipped_runs: int = 0  # before --since
    anomalies: list[Anomaly] = field(default_factory=list)
    notices: Counter = field(default_factory=Counter)
    notice_runs: dict[str, list[str]] = field(default_factory=dict)  # notice -> a few uuids
    unsupported: dict[str, str] = field(default_factory=dict)  # check -> why the data cannot support it
    tools: str = ""
    privacy: str = "auto"
    unknown_tools: list[str] = field(default_factory=list)  # requested names of unknown effect
    unreadable: Unreadable = field(default_factory=lambda: Unreadable())

    def by_check(self) -> dict[str, list[Anomaly]]:
        out: dict[str, list[Anomaly]] = {c: [] for c in CHECK_IDS}
        for a in self.anomalies:
            out[a.check].append(a)
        return out


@dataclass
class Unreadable:
    """Rows whose fields do not have the runtime's types (sim/inspect_rows.py): counted by
    reason, a few examples each, and which runs they kept from being checked in full."""

    run_rows: int = 0  # run rows not checked (their events are counted in events, unchecked)
    event_rows: int = 0
    no_uid: int = 0  # run rows without a readable uid: an event may look orphaned because of one
    runs_partly_checked: int = 0  # readable rows whose events were not all readable
    reasons: Counter = field(default_factory=Counter)  # (table, reason) -> rows
    examples: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def add(self, table: str, reason: str, example: str) -> None:
        key = (table, reason)
        self.reasons[key] += 1
        ex = self.examples.setdefault(key, [])
        if len(ex) < 3:
            ex.append(example)

    def to_json(self) -> dict[str, Any]:
        return {"run_rows": self.run_rows, "event_rows": self.event_rows,
                "runs_partly_checked": self.runs_partly_checked,
                "reasons": [{"table": t, "reason": r, "rows": n, "examples": self.examples[(t, r)]}
                            for (t, r), n in sorted(self.reasons.items())]}


# -- the tool catalogue --------------------------------------------------------------------
class Catalogue:
    """A tool name's effect and whether calling it suspends for approval. From ``--tools``
    (any failclosed config's ``[[tools]]``: model.config.tool_effect, model.rules.approval_bound
    under ``current``), else the runtime's own resolver (EXPORT.md 4.2: builtin writers by name, ``mcp_*`` remote and
    non-idempotent; any other name is unknown)."""

    def __init__(self, tools: list[dict[str, Any]] | None = None, source: str = ""):
        self.given = tools is not None
        self.source = source or "the runtime's resolver (builtin writers by name, mcp_* non-idempotent, other names unknown)"
        if tools is None:
            tools = [{"name": n} for n in BUILTIN_WRITERS]
        tables = [{k: v for k, v in t.items() if k in TOOL_KEYS} for t in tools]
        self.effects = {t["name"]: tool_effect(t, f"tools[{k}].") for k, t in enumerate(tables)}
        config, _ = parse_config({"policy": INSPECTED_POLICY, "tools": tables, "runs": [{"id": "x"}]})
        self.bound = {n for n in self.effects if approval_bound(config, frozenset(), n)}

    def effect(self, name: str) -> tuple[str, bool]:
        """(effect, known): an unknown name resolves to a non-idempotent write (ToolEffectResolver);
        the write checks skip it and the report names it, since a read would count too."""
        if name in self.effects:
            return self.effects[name], True
        if not self.given and name.startswith("mcp_"):
            return REMOTE_EFFECT, True
        return NON_IDEMPOTENT_WRITE, False

    def approval_bound(self, name: str) -> bool:
        return name in self.bound


def load_catalogue(path: str | None) -> Catalogue:
    if path is None:
        return Catalogue()
    data = read_toml(path)
    tools = data.get("tools")
    if not isinstance(tools, list) or not tools or not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in tools):
        raise ConfigError(f"--tools {path}: no [[tools]] tables with a name; give a failclosed config "
                          "listing the runtime's tools (name, effect, remote, server_flag)")
    try:
        return Catalogue(tools, path)
    except ConfigError as e:
        raise ConfigError(f"--tools {path}: {e}") from None


def finding_traces(prop: str) -> list[str]:
    """The model's shortest traces of ``prop`` under current (spec/findings/), to replay beside it."""
    d = Path(baseline.__file__).resolve().parent / "findings"
    return [f"spec/findings/{p.name}" for p in sorted(d.glob(f"{prop}--current*.toml"))]


# -- one run -------------------------------------------------------------------------------
class _Ctx:
    def __init__(self, catalogue: Catalogue, privacy: str, constants: Constants):
        self.cat = catalogue
        self.privacy = privacy
        self.k = constants
        # (uid, uuid, tstamp, dispatch_deadline or None, crdate, requeue_count) of queued rows
        self.queued: list[tuple[int, str, int, int | None, int, int]] = []
        self.deadline: int | None = None  # the run row's index of dispatch_deadline (P6), if read
        self.horizon = 0
        self.notices: Counter = Counter()
        self.notice_runs: dict[str, list[str]] = {}
        self.unknown_names: set[str] = set()

    def unknown(self, name: str, uuid: str) -> None:
        self.notice("a requested tool whose effect is not known (the runtime's resolver counts it as "
                    "non_idempotent_write; not checked as a write here): give --tools CONFIG", uuid)
        self.unknown_names.add(name)

    def notice(self, what: str, uuid: str) -> None:
        self.notices[what] += 1
        runs = self.notice_runs.setdefault(what, [])
        if len(runs) < 5:
            runs.append(uuid)


def _ev(e: tuple) -> tuple[int, int, str]:
    return (e[_SEQ], e[_UID], e[_KIND])


def _applied(e: tuple, name: str, rnd: int) -> bool:
    """A tool event of ``name`` at round ``rnd`` that did not report an error."""
    if e[_KIND] != "tool" or e[_ROUND] != rnd:
        return False
    p = _payload(e)
    return p.get("toolName") == name and p.get("toolIsError") is False


def _payload(e: tuple) -> dict[str, Any]:
    """The checked payload fields of ``e`` (sim/inspect_rows.py; a run with an unreadable payload
    is not given to the checks that read payloads)."""
    return e[_PAYLOAD] or {}


class _Run:
    """One run's row and events, and the anomalies found on them."""

    def __init__(self, row: tuple, events: list[tuple], ctx: _Ctx, columns_ok: bool = True,
                 payloads_ok: bool = True):
        self.row, self.events, self.ctx = row, events, ctx
        self.columns_ok, self.payloads_ok = columns_ok, payloads_ok
        self.uuid = row[R["uuid"]] or ""
        self.uid = row[R["uid"]]
        self.status = row[R["status"]]
        self.out: list[Anomaly] = []

    def add(self, check: str, text: str, certainty: str = CERTAIN, events: list[tuple] = (),
            properties: tuple[str, ...] | None = None, detail: str = "") -> None:
        props = next(c[4] for c in CHECKS if c[0] == check) if properties is None else properties
        self.out.append(Anomaly(check, self.uuid, self.uid, text, certainty, props,
                                tuple(_ev(e) for e in events), detail))

    def col(self, name: str) -> Any:
        return self.row[R[name]]

    # 7.1
    def enums(self) -> None:
        reason, fence, rq = self.col("termination_reason") or "", self.col("pending_effect") or "", self.col("requeue_count") or 0
        if self.status not in STATUSES:
            self.add("enums", f"status {self.status!r} is not one of the runtime's")
        if reason and reason not in REASONS:
            self.add("enums", f"termination_reason {reason!r} is not one of the runtime's")
        if fence not in FENCE_VALUES:
            self.add("enums", f"pending_effect {fence!r} is not a write effect")
        if not 0 <= rq <= self.ctx.k.MAX_REQUEUES:
            self.add("enums", f"requeue_count {rq} is outside 0..MAX_REQUEUES = {self.ctx.k.MAX_REQUEUES}",
                     properties=(PropertyName.BOUNDED_ATTEMPTS,))
        bad = [e for e in self.events if e[_KIND] not in KINDS
               or (e[_KIND] in ROUND_ZERO_KINDS and e[_ROUND] != 0) or (e[_ROUND] or 0) < 0]
        if bad:
            self.add("enums", f"{len(bad)} event(s) with a kind or round the runtime does not write "
                     f"(first: {bad[0][_KIND]!r} round {bad[0][_ROUND]})", events=bad[:5])

    # 7.2
    def sequences(self) -> None:
        evs = self.events
        if all(e[_SEQ] == k for k, e in enumerate(evs)) and all(
                a[_UID] < b[_UID] for a, b in zip(evs, evs[1:], strict=False)):
            return  # dense from 0, unique, in insert order: the common case
        seqs = Counter(e[_SEQ] for e in evs)
        dup = sorted(s for s, n in seqs.items() if n > 1)
        if dup:
            involved = [e for e in evs if e[_SEQ] in set(dup)]
            self.add("sequence_reused", f"sequence {', '.join(map(str, dup[:5]))}{' ...' if len(dup) > 5 else ''} "
                     f"stored {max(seqs.values())} times (the key (run, sequence) is not UNIQUE)", events=involved[:10],
                     detail=DUPLICATE)
        else:
            by_uid = sorted(evs, key=lambda e: e[_UID])
            for a, b in zip(by_uid, by_uid[1:], strict=False):
                if b[_SEQ] <= a[_SEQ]:
                    self.add("sequence_reused", f"sequence {b[_SEQ]} inserted after sequence {a[_SEQ]}",
                             events=[a, b], detail=OUT_OF_ORDER)
                    break
        if evs and len(seqs) != max(seqs) + 1:
            missing = sorted(set(range(max(seqs) + 1)) - set(seqs))
            self.add("sequence_gap", f"sequence(s) {', '.join(map(str, missing[:5]))} missing: rows deleted")

    # 7.4
    def row_state(self) -> None:  # noqa: C901 - one line per cell of EXPORT.md 7.4's table
        st = self.status
        c = self.col
        fin, claim, lease = c("finished_at") or 0, c("claimed_by") or "", c("lease_expires") or 0
        state, req, reason = c("suspended_state") or "", c("queued_request") or "", c("termination_reason") or ""
        wrong = []
        if st in TERMINAL:
            wrong += [w for w, bad in (("finished_at = 0", fin <= 0), (f"claimed_by {claim!r}", claim),
                                       (f"lease_expires {lease}", lease), ("suspended_state kept", state),
                                       ("queued_request kept", req)) if bad]
            allowed = REASONS_BY_STATUS.get(st, ())
            if reason not in allowed:
                wrong.append(f"termination_reason {reason!r} (allowed: {', '.join(allowed)})")
            trunc = c("truncated") or 0
            if st == COMPLETED and reason in allowed and trunc != (0 if reason == "completed" else 1):
                wrong.append(f"truncated = {trunc} with reason {reason}")
        elif st in STATUSES:
            if fin:
                wrong.append(f"finished_at {fin}")
            if reason:
                wrong.append(f"termination_reason {reason!r} before any settle")
        if st in AWAITING:
            wrong += [w for w, bad in ((f"claimed_by {claim!r}", claim), (f"lease_expires {lease}", lease),
                                       ("no suspended_state", not state)) if bad]
        elif st == QUEUED:
            wrong += [w for w, bad in ((f"claimed_by {claim!r}", claim), (f"lease_expires {lease}", lease),
                                       ("no queued_request", not req),
                                       (f"pending_effect {c('pending_effect')!r}", c("pending_effect"))) if bad]
        elif st == RUNNING and not claim.startswith(CLAIM_PREFIXES):
            wrong.append(f"claimed_by {claim!r} (expected a {', '.join(p.rstrip(':') for p in CLAIM_PREFIXES)} prefix)")
        if wrong:
            self.add("row_state", f"{st} row with " + "; ".join(wrong))

    # 7.8
    def fence(self) -> None:
        fence = self.col("pending_effect") or ""
        if self.status in TERMINAL and fence:
            reason = self.col("termination_reason") or ""
            if reason in FENCE_LEFT_REASONS:
                self.ctx.notice(f"terminal {reason} with the fence {fence} left: a write was interrupted "
                                "in flight and not retried (by design, ADR-112); check the target system", self.uuid)
            else:
                self.add("leftover_fence", f"{self.status} / {reason} with pending_effect {fence} left "
                         f"(expected only with {' or '.join(FENCE_LEFT_REASONS)})")

    # attempts and turns (7.5 to 7.7, 7.9, 7.10)
    def attempts(self) -> list[list[tuple]]:
        """The events split into queue attempts (heuristic, EXPORT.md 4.1: a retry restarts at
        round 1). An attempt begins at a ``dropped`` event, or at a ``context``, ``request`` or
        ``llm`` step of round 1 that does not continue the round-1 start just before it
        (``dropped`` then ``context`` then ``request`` then ``llm``; one may be lost to a
        fail-soft insert)."""
        out: list[list[tuple]] = []
        prev = None
        for e in self.events:
            k = e[_KIND]
            starts = prev is None or k == "dropped" or (
                k in _STARTERS and e[_ROUND] == 1
                and not (prev[_KIND] == "dropped" or (prev[_KIND] in _STARTERS and prev[_ROUND] == 1
                                                      and _STARTERS[prev[_KIND]] < _STARTERS[k])))
            if starts:
                out.append([e])
            else:
                out[-1].append(e)
            prev = e
        return out

    def turns(self) -> None:
        atts = self.attempts()
        self.n_attempts = len(atts)
        applied: dict[tuple, list[tuple[int, tuple]]] = {}  # NI key -> [(attempt, event)]
        for a, evs in enumerate(atts):
            self._attempt(a, evs, atts, applied)
        for key, apps in applied.items():
            if len({a for a, _ in apps}) > 1:
                by = ", ".join(f"attempt {a + 1} (sequence {e[_SEQ]})" for a, e in apps)
                how = "name, round and arguments" if key[2] is not None else "name and round (no arguments at this privacy level)"
                self.add("double_application", f"non-idempotent {key[0]} (round {key[1]}) applied in {by}; "
                         f"matched by {how}", HEURISTIC, events=[e for _, e in apps])

    def _attempt(self, a: int, evs: list[tuple], atts: list[list[tuple]], applied: dict) -> None:
        last = a == len(atts) - 1
        llms = [k for k, e in enumerate(evs) if e[_KIND] == "llm"]
        for n, k in enumerate(llms):
            L = evs[k]
            r = L[_ROUND]
            end = llms[n + 1] if n + 1 < len(llms) else len(evs)
            tools = [e for e in evs[k + 1:end] if e[_KIND] == "tool" and e[_ROUND] == r]
            self._calls(a, L, list(_payload(L).get("names", ())), tools, evs, k, atts, last, n + 1 == len(llms))
            self._approvals(evs, k, end, tools)
            for t in tools:
                tp = _payload(t)
                if tp.get("toolIsError") is False and self.ctx.cat.effect(tp.get("toolName", "")) == (NON_IDEMPOTENT_WRITE, True):
                    args = None
                    if self.ctx.privacy not in ("none", "metadata"):
                        args = tp.get("args")  # a digest of toolArguments, None where not stored
                    applied.setdefault((tp.get("toolName"), r, args), []).append((a, t))

    def _calls(self, a: int, L: tuple, names: list[str], tools: list[tuple], evs: list[tuple], k: int,
               atts: list[list[tuple]], last: bool, last_llm: bool) -> None:
        done = [_payload(t).get("toolName") for t in tools]
        if done == names:
            return  # every requested call answered, in order
        got = Counter(done)
        want = Counter(names)
        extra = got - want
        if extra:
            masked = _payload(L).get("redacted", False)
            why = ("; its requested names carry the redactor's marks (REDACTED, EXPORT.md 2.3), so one may be "
                   "a masked name" if masked else "")
            self.add("turn_grammar", f"tool event(s) {', '.join(sorted(map(str, extra)))} at round {L[_ROUND]} "
                     f"that its llm step did not request{why}", HEURISTIC if masked else CERTAIN,
                     events=[L, *tools][:10])
        missing = list((want - got).elements())
        if not missing:
            return
        went_on = any(e[_ROUND] > L[_ROUND] and e[_KIND] in ("context", "request", "llm") for e in evs[k + 1:])
        completed = self.status == COMPLETED
        for name in missing:
            effect, known = self.ctx.cat.effect(name)
            what = effect
            if not known:
                self.ctx.unknown(name, self.uuid)
                continue
            if not is_write(effect):
                if went_on or (last and completed):
                    self.ctx.notice("a read-only call without its tool event: a fail-soft insert lost it (EXPORT.md 8)", self.uuid)
                continue
            if went_on:
                self.add("write_not_audited", f"{name} ({what}) requested at round {L[_ROUND]} has no tool event, "
                         "and the same attempt went on to later rounds", HEURISTIC, events=[L],
                         properties=(PropertyName.NO_SUCCESS_OVER_UNRECORDED_WRITE,))
            elif last and completed:
                cert = CERTAIN if (self.col("requeue_count") or 0) == 0 else HEURISTIC
                self.add("write_not_audited", f"{name} ({what}) requested at round {L[_ROUND]} has no tool event, "
                         "and the run completed", cert, events=[L],
                         properties=(PropertyName.NO_UNAUDITED_WRITE_SETTLES_SUCCESSFULLY,))
            elif effect == NON_IDEMPOTENT_WRITE:
                before = [e for earlier in atts[:a] for e in earlier if _applied(e, name, L[_ROUND])]
                if before or not last or (self.col("requeue_count") or 0) >= len(atts):
                    self._interrupted(a, L, name, what, atts, completed, before)

    def _interrupted(self, a: int, L: tuple, name: str, what: str, atts: list[list[tuple]], completed: bool,
                     before: list[tuple]) -> None:
        again = [(b, e) for b, later in enumerate(atts[a + 1:], a + 2) for e in later if _applied(e, name, L[_ROUND])]
        if again:
            later = f"; attempt {again[0][0]} ran it again (sequence {again[0][1][_SEQ]})"
        elif a < len(atts) - 1:
            later = "; the stored request was executed again"
        elif before:
            later = ""
        else:
            later = f"; requeue_count {self.col('requeue_count')} says the run was requeued after it"
        earlier = f"; it had been applied before, at sequence {before[0][_SEQ]}" if before else ""
        props = (PropertyName.NO_WRITE_APPLIED_TWICE_WITHOUT_AUDIT, PropertyName.INTERRUPTED_NON_IDEMPOTENT_WRITE_NOT_REPEATED)
        if completed:
            props += (PropertyName.NO_UNAUDITED_WRITE_SETTLES_SUCCESSFULLY,)
        if again or before:
            props += (PropertyName.NON_IDEMPOTENT_WRITE_AT_MOST_ONCE,)
        self.add("interrupted_write_retried", f"{name} ({what}) requested at round {L[_ROUND]} of attempt {a + 1} "
                 f"has no tool event there (a crash after the effect and before the audit insert leaves exactly this)"
                 f"{earlier}{later}", HEURISTIC, events=[*before[:1], L, *[e for _, e in again[:1]]], properties=props)

    # 7.9
    def _approvals(self, evs: list[tuple], k: int, end: int, tools: list[tuple]) -> None:
        approvals = [e for e in evs[k + 1:end] if e[_KIND] == "approval"]
        writes = any(is_write(self.ctx.cat.effect(n)[0]) and self.ctx.cat.effect(n)[1]
                     for n in _payload(evs[k]).get("names", ()))
        for t in tools:
            tp = _payload(t)
            name = tp.get("toolName", "")
            if not self.ctx.cat.approval_bound(name):
                continue
            before = [e for e in approvals if e[_SEQ] < t[_SEQ]]
            if not before:
                # the approval of an approved write turn is stored fail-closed (gate 3,
                # RUNTIME 16.11); a denial's or a read turn's is fail-soft: an outage drops it
                proven = writes and tp.get("toolIsError") is False
                self.add("approvals", f"{name} needs approval, and its tool event (round {t[_ROUND]}) has no "
                         "approval event before it" + ("" if proven else
                                                       "; the approval of a denial or of a turn without a write is "
                                                       "stored fail-soft, so an audit-store outage may have dropped it"),
                         CERTAIN if proven else HEURISTIC, events=[evs[k], t])
            elif _payload(before[-1]).get("approved") is False and tp.get("toolIsError") is False:
                self.add("approvals", f"{name} needs approval and ran (toolIsError false) after approved: false",
                         events=[before[-1], t])

    # 7.10
    def totals(self) -> None:
        if self.status != COMPLETED or (self.col("requeue_count") or 0) or self.col("termination_reason") not in ("completed", "max_iterations"):
            return
        # the highest round of any step (an llm step's event may be lost to a fail-soft insert)
        rounds = [e[_ROUND] for e in self.events if e[_KIND] in ("context", "request", "llm")]
        it = self.col("iterations") or 0
        if rounds and max(rounds) > it + 1:
            self.add("totals", f"last round {max(rounds)} with iterations = {it} (expected {it} or {it + 1})")
        elif rounds and max(rounds) < it:
            # the steps of a round are stored fail-soft (RUNTIME 4.4 record_step): an
            # audit-store outage drops them and leaves no gap. That is the runtime by design,
            # the footprint of no violation: a notice, as a read-only call's lost tool event
            self.ctx.notice("a completed run whose last stored round is below its iterations: its later "
                            "rounds' context, request and llm steps are stored fail-soft, and an audit-store "
                            "outage drops them without a gap (EXPORT.md 8)", self.uuid)

    def run(self) -> list[Anomaly]:
        # an event without a readable sequence or round: the run's stream is not whole, and a
        # payload that is unreadable: the checks that read payloads would read it as something
        self.enums()
        if self.columns_ok:
            self.sequences()
        self.row_state()
        self.fence()
        if self.columns_ok and self.payloads_ok:
            self.turns()
        if self.columns_ok:
            self.totals()
        if self.status == QUEUED:
            deadline = self.row[self.ctx.deadline] if self.ctx.deadline is not None else None
            self.ctx.queued.append((self.uid, self.uuid, self.col("tstamp") or 0, deadline,
                                    self.col("crdate"), self.col("requeue_count")))
        return self.out


# -- the whole export -----------------------------------------------------------------------
class _Group:
    """One run's events as read: the readable ones, and whether any column or payload was not."""

    __slots__ = ("columns_ok", "events", "payloads_ok", "rows", "run")

    def __init__(self, run: int):
        self.run, self.events, self.columns_ok, self.payloads_ok = run, [], True, True
        self.rows = 0  # event rows read, readable or not


class _Reader:
    """The source's rows merged run by run, every field type-checked (sim/inspect_rows.py) and
    every unreadable row counted in the report; one run's events held at a time, within the
    memory budget."""

    def __init__(self, source: Source, rep: Report, budget: int):
        self.source, self.rep, self.un = source, rep, rep.unreadable
        self.limit = payload_limit(budget)
        self.max_events = max(1, budget // 2 // EVENT_COST)
        self.budget = budget

    def _events(self, raw_events: Any) -> Any:
        """The event rows whose run is readable; the others counted here."""
        for raw in raw_events:
            if run_of(raw) is not None:
                yield raw
                continue
            self.rep.events += 1
            self.un.event_rows += 1
            self.un.add(EVENT_TABLE, read_event(raw, self.limit)[1], f"event uid {raw[_UID]!r}")

    def _runs(self, raw_runs: Any) -> Any:
        """(row, reason) for the run rows with a readable uid; the others counted here."""
        for raw in raw_runs:
            row, why = read_run(raw)
            if row is None:
                self.un.run_rows += 1
                self.un.no_uid += 1
                self.un.add(RUN_TABLE, why, f"uid {raw[0]!r}")
                continue
            yield row, why

    def groups(self) -> Any:
        """(row, reason, group) per run in uid order; events whose run has no row as
        (None, '', group)."""
        prev_uid = None
        for raw_runs, raw_events in self.source.chunks():
            events = self._events(raw_events)
            ev = next(events, None)
            for row, why in self._runs(raw_runs):
                uid = row[R["uid"]]
                if prev_uid is not None and uid <= prev_uid:
                    raise ConfigError(f"SOURCE {self.source.where}: {uid} follows {prev_uid} in {RUN_READ[0]} order: "
                                      "a run uid is stored twice")
                prev_uid = uid
                while ev is not None and ev[_RUN] < uid:
                    orphan, ev = self._take_run(ev, events)
                    yield None, "", orphan
                mine = _Group(uid)
                if ev is not None and ev[_RUN] == uid:
                    mine, ev = self._take_run(ev, events)
                yield row, why, mine
            while ev is not None:
                orphan, ev = self._take_run(ev, events)
                yield None, "", orphan
        missing = self.source.unreadable_outside()
        if missing:
            self.rep.events += missing
            self.un.event_rows += missing
            for _ in range(missing):
                self.un.add(EVENT_TABLE, "run is NULL", "run NULL")

    def _take_run(self, ev: Any, events: Any) -> tuple[_Group, Any]:
        """The events of ``ev``'s run, from ``ev`` on (events come in run order), and the first
        event row of the next run (None: no more)."""
        g = _Group(ev[_RUN])
        n = 0
        while ev is not None and ev[_RUN] == g.run:
            n += 1
            if n > self.max_events:
                raise ConfigError(f"SOURCE {self.source.where}: run uid {g.run} has more than {self.max_events:,} "
                                  f"events, more than half the memory budget of {self.budget:,} bytes holds; "
                                  "give a larger --memory-budget")
            kept, why = read_event(ev, self.limit)
            if why:
                self.un.event_rows += 1
                self.un.add(EVENT_TABLE, why, f"event uid {ev[_UID]!r} of run {g.run}")
                if kept is None:
                    g.columns_ok = False
                else:
                    g.payloads_ok = False
            if kept is not None:
                g.events.append(kept)
            ev = next(events, None)
        self.rep.events += n
        g.rows = n
        return g, ev


def inspect(source: Source, catalogue: Catalogue | None = None, privacy: str = "auto",
            since: int | None = None, constants: Constants | None = None,
            on_run: Any = None, budget: int | None = None) -> Report:
    """Every check on every run of ``source`` (runs created before ``since`` are skipped, and
    so are their events). ``privacy``: the level the payloads were written at (``auto``:
    read it from each payload; ``none`` or ``metadata``: never match arguments). ``budget``:
    bytes (default: the source's); unreadable rows are counted in ``Report.unreadable``."""
    if privacy != "auto" and privacy not in PRIVACY_LEVELS:
        raise ConfigError(f"--privacy {privacy}: use auto or one of {', '.join(PRIVACY_LEVELS)}")
    cat = catalogue or Catalogue()
    k = constants or Constants()
    ctx = _Ctx(cat, privacy, k)
    run_read = getattr(source, "run_read", RUN_READ)
    ctx.deadline = run_read.index(DISPATCH_DEADLINE) if DISPATCH_DEADLINE in run_read else None
    rep = Report(source.where, tools=cat.source, privacy=privacy)
    un = rep.unreadable
    horizon = 0
    for row, why, g in _Reader(source, rep, budget or getattr(source, "budget", DEFAULT_BUDGET)).groups():
        evs = g.events
        for e in evs:
            horizon = max(horizon, e[_CRDATE])
        if row is None:
            if evs:
                rep.anomalies.append(Anomaly("orphan_events", "", g.run,
                                             f"{len(evs)} event(s) of run uid {g.run}, which has no row",
                                             CERTAIN, (), tuple(_ev(e) for e in evs[:10])))
            continue
        if why:
            un.run_rows += 1
            un.add(RUN_TABLE, why, f"uid {row[R['uid']]}")
            continue
        horizon = max(horizon, row[R["tstamp"]], row[R["finished_at"]], row[R["crdate"]])
        if since is not None and row[R["crdate"]] < since:
            rep.skipped_runs += 1
            rep.events -= g.rows  # a skipped run's events are not inspected either
            continue
        rep.runs += 1
        evs.sort(key=lambda e: (e[_SEQ], e[_UID]))
        if not (g.columns_ok and g.payloads_ok):
            un.runs_partly_checked += 1
        rep.anomalies.extend(_Run(row, evs, ctx, g.columns_ok, g.payloads_ok).run())
        if on_run is not None:
            on_run(rep.runs)
    _finish(rep, ctx, k, horizon)
    if privacy in ("none", "metadata"):
        rep.unsupported["double_application"] = "arguments are not stored at METADATA: matched by name and round only"
    return rep


def _finish(rep: Report, ctx: _Ctx, k: Constants, horizon: int) -> None:
    """The checks on the whole export (the queued rows against its last write), and what the
    unreadable rows make uncertain."""
    un = rep.unreadable
    wait = k.LEASE_SECONDS + k.REQUEUE_BACKOFF_CAP_MS // 1000
    for uid, uuid, ts, _deadline, _crdate, _count in ctx.queued:
        if ts < horizon - wait:
            rep.anomalies.append(Anomaly("orphan_queued", uuid, uid,
                                         f"queued, last written {horizon - ts} s before the export's last write "
                                         f"(more than LEASE_SECONDS + the longest backoff = {wait} s): no wake-up "
                                         "is coming (FINDINGS F3: the dispatch never happened)", HEURISTIC,
                                         (PropertyName.NO_ORPHAN_QUEUED_RUN, PropertyName.EVERY_RUN_TERMINATES)))
    _overdue(rep, ctx, k, horizon)
    if un.no_uid:
        for a in rep.anomalies:
            if a.check == "orphan_events":
                a.certainty = HEURISTIC
                a.text += f"; {un.no_uid} run row(s) have no readable uid, and one of them may be its row"
    rep.notices, rep.notice_runs = ctx.notices, ctx.notice_runs
    rep.unknown_tools = sorted(ctx.unknown_names)


REDISPATCHED = ("a queued row the sweep re-dispatched (P6): never requeued, and its dispatch_deadline "
                "moved on past the one its enqueue wrote (T15)")


def _overdue(rep: Report, ctx: _Ctx, k: Constants, horizon: int) -> None:
    """Proposal P6's footprint on the queued rows, where the run table has its column: a row
    whose deadline passed more than a lease before the export's last write (a sweep every
    period would have moved it on by then: T15 writes now + a lease), or that has none (T2, T9
    and T11 write one: the sweep never selects such a row), is an orphan the sweep missed; a
    row never requeued whose deadline lies past its enqueue's (T2: crdate + a lease) shows a
    re-dispatch (a notice). Without the column the check does not apply (one line)."""
    if ctx.deadline is None:
        rep.unsupported["overdue_queued"] = NO_DEADLINE
        return
    lease = k.LEASE_SECONDS
    for uid, uuid, _ts, deadline, crdate, count in ctx.queued:
        if deadline == 0:
            rep.anomalies.append(Anomaly(
                "overdue_queued", uuid, uid, f"queued with {DISPATCH_DEADLINE} = 0: the sweep (T14) never "
                "selects it (a row left from before the migration, which gives every queued row one)",
                HEURISTIC, (PropertyName.NO_ORPHAN_QUEUED_RUN, PropertyName.EVERY_RUN_TERMINATES)))
        elif deadline < horizon - lease:
            rep.anomalies.append(Anomaly(
                "overdue_queued", uuid, uid, f"queued, its {DISPATCH_DEADLINE} passed {horizon - deadline} s "
                f"before the export's last write (more than LEASE_SECONDS = {lease} s): the sweep did not "
                "re-dispatch it (is the reaper running, with the sweep?)", HEURISTIC,
                (PropertyName.NO_ORPHAN_QUEUED_RUN, PropertyName.EVERY_RUN_TERMINATES)))
        elif count == 0 and deadline > crdate + lease + 1:  # a second's slack: T2's now and crdate
            ctx.notice(REDISPATCHED, uuid)


def applies(rep: Report, check: str) -> bool:
    """Whether ``check`` can run on this export at all (P6's needs its column)."""
    return not rep.unsupported.get(check, "").startswith("does not apply")


def footprints(rep: Report) -> list[dict[str, Any]]:
    """Per proposal of :data:`FOOTPRINTS`: whether its check applies to this export, and the
    anomalies that would show it not working (zero: nothing of it shows)."""
    out = []
    for proposal, switch, check, detail, zero in FOOTPRINTS:
        n = sum(a.check == check and (not detail or a.detail == detail) for a in rep.anomalies)
        ok = applies(rep, check)
        out.append({"proposal": proposal, "switch": switch, "check": check, "detail": detail,
                    "applies": ok, "anomalies": n if ok else None,
                    "text": zero if ok else rep.unsupported[check]})
    return out
