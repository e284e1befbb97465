"""The dimensions of a configuration, declared once: what scope generation and the search read.

Every field of model/'s configuration records that changes behaviour (``Config``, ``RunSpec``,
``Answer``, ``Tool``, ``Principal``, ``Ask``, ``Constants``) is varied by a :class:`Dimension`
with its small values, cheapest first, the first being the base configuration's; a field that
changes nothing a search can tell apart (a run's id, a principal's name) is declared in
:data:`NOT_BEHAVIOUR` with the reason. tests/test_dimensions.py fails naming any field that is
in neither.

A configuration is described by a **point**: one value per dimension at the configuration's
level (``constants``, ``model``), per tool (``tool``) and per run (``run``).
:func:`build` turns a point into a model/config.py table; :func:`values_of` reads the value of
every dimension back from a parsed ``Config`` (what a member of a scope *is*, whatever wrote
it), so the coverage of a scope is measured on its members, not on how they were generated.

Generators (a scope's ``generate = [...]``, spec/scope.py):

* ``values``: for every value of every dimension, the base configuration with that value (and
  the context under which it matters: a fault kind with a budget of one, a server flag on a
  remote tool);
* ``decisions``: every sequence of up to two decisions on every entry, on an approval-gated
  write and on a tool that asks for input, each under a fault that makes the run retry;
* ``pairs``: every pair of values of the write-path dimensions (:data:`WRITE_PATH`), a
  greedy pairwise covering whose rows take the cheapest value among those covering the most
  pairs still missing.

spec/hunt.py draws points from the same table with Hypothesis.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from failclosed.model.config import BUILTIN_WRITERS, ConfigError, parse_config
from failclosed.model.constants import Constants
from failclosed.model.names import TRANSITIONS
from failclosed.model.state import (
    ANSWER_KINDS,
    DEFAULT_OWNER,
    EFFECTS,
    ENTRIES,
    FAILURE_CLASSES,
    FINAL_VALUES,
    GUARDRAIL_VALUES,
    IDEMPOTENT_WRITE,
    NON_IDEMPOTENT_WRITE,
    READ_ONLY,
    REQUEST_REFUSALS,
    STATUSES,
    TRANSPORTS,
    WAITING_FOR_APPROVAL,
    WAITING_FOR_INPUT,
    Config,
)
from failclosed.model.steps import fault_kinds
from failclosed.model.vocab import Decision, FaultKind, PrincipalKind, Request, Scope

__all__ = ["BASE", "DIMENSIONS", "GENERATORS", "LEVELS", "NOT_BEHAVIOUR", "RECORDS", "WRITE_PATH",
           "Dimension", "build", "dimension", "generate", "label", "pairs_of", "values_of"]

LEVELS = ("constants", "model", "tool", "run")

# the names a point's tools and principals take in a built configuration (names, not facts:
# a renaming changes nothing, NOT_BEHAVIOUR)
CUSTOM = "custom"  # a tool no catalogue declares for itself: its [[tools]] table says what it is
UNKNOWN = "unknown"  # a name no catalogue knows (model.unknown_tools: 14.2)
OTHER_OWNER = "owner2"  # a second user who owns a run
SERVICE_OWNER = "starter"  # a service account that started a run (be_user = 0: 16.18.1)
NO_RUN_ID = ""  # the operator's cancel command without an id
GONE_RUN_ID = "gone"  # an id no run has
A_RUN = "run"  # the operator's cancel command given the run's id (the value, as a label)


@dataclass(frozen=True)
class Dimension:
    """One behaviour-changing field (or a few that only matter together) and its small
    values. ``values[0]`` is the base configuration's; the values are in the order of their
    cost, cheapest first (the search shrinks towards the first). ``write_path``: paired in
    ``standard``'s pairwise covering. ``context``: the values of other dimensions under which
    a non-base value matters (a fault kind needs a budget). ``odds``: the search's draw
    leaves the base value one time in ``odds`` (1: every value alike), so that a drawn
    configuration differs from the base in a few dimensions, most often on the write path."""

    name: str
    level: str
    fields: tuple[str, ...]
    values: tuple[Any, ...]
    write_path: bool = False
    context: dict[str, Any] = field(default_factory=dict)
    odds: int = 1

    @property
    def base(self) -> Any:
        return self.values[0]


def _sequences(xs: Sequence[str], longest: int) -> tuple[tuple[str, ...], ...]:
    out: list[tuple[str, ...]] = []
    for n in range(longest + 1):
        out += list(itertools.product(xs, repeat=n))
    return tuple(out)


# the statements a store_error may hit (model.names: a transition's fault kinds)
_STORE_OPS = tuple(sorted(n for n, (_, kinds) in TRANSITIONS.items()
                          if FaultKind.STORE_ERROR in kinds))
# a requester (RUNTIME 16.18): a principal's kind and what it holds (a user's grants, a
# service account's scopes); the owner's own decisions are RunSpec.decisions
_REQUESTERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (PrincipalKind.USER, ()), (PrincipalKind.ADMIN, ()), (PrincipalKind.SERVICE_ACCOUNT, ()),
    *((PrincipalKind.SERVICE_ACCOUNT, (s,)) for s in Scope),
    (PrincipalKind.SERVICE_ACCOUNT, tuple(Scope)),
    (PrincipalKind.USER, (Scope.AGENT_APPROVE,)), (PrincipalKind.ANONYMOUS, ()),
)
# what a principal holds, by its kind: a user's grants, the others' scopes (16.18.1)
_HOLDS = {PrincipalKind.USER: "grants"}
_DEFAULTS = Constants()
# decisions, base first, then the two-decision sequences (a retry asked again), then the rest
_DECISIONS = _sequences(tuple(Decision), 2)
_DECISIONS = ((Decision.APPROVE,), *(d for d in _DECISIONS if len(d) == 2),
              *(d for d in _DECISIONS if len(d) < 2 and d != (Decision.APPROVE,)))
_TOOLS, _FINAL, _FAIL, _GUARDRAIL = ANSWER_KINDS
_ENDS = (*((_FINAL, v) for v in FINAL_VALUES), *((_FAIL, c) for c in FAILURE_CLASSES),
         *((_GUARDRAIL, v) for v in GUARDRAIL_VALUES))

DIMENSIONS: tuple[Dimension, ...] = (
    # -- constants (RUNTIME 2): the short ones small uses first, then the runtime's shapes
    Dimension("LEASE_SECONDS", "constants", ("Constants.LEASE_SECONDS",), (1, 2), True, odds=8),
    Dimension("MAX_REQUEUES", "constants", ("Constants.MAX_REQUEUES",),
              (1, 2, _DEFAULTS.MAX_REQUEUES, 0), True, {"fault": FaultKind.CRASH, "budget": 2},
              odds=4),
    Dimension("REQUEUE_BACKOFF_MS", "constants", ("Constants.REQUEUE_BACKOFF_MS",), (1000, 2000),
              context={"fault": FaultKind.CRASH, "budget": 2, "MAX_REQUEUES": 2}, odds=12),
    # the cap: reached after one doubling (small's), at once, after two (the runtime's default
    # reaches it after several: 30 s doubling to 600 s)
    Dimension("REQUEUE_BACKOFF_CAP_MS", "constants", ("Constants.REQUEUE_BACKOFF_CAP_MS",),
              (2000, 1000, 4000),
              context={"fault": FaultKind.CRASH, "budget": 3, "MAX_REQUEUES": 3}, odds=12),
    Dimension("MAX_ITERATIONS", "constants", ("Constants.MAX_ITERATIONS",),
              (_DEFAULTS.MAX_ITERATIONS, 1, 2), context={"rounds": 2}, odds=16),
    Dimension("DEFAULT_ROUND_CAP", "constants", ("Constants.DEFAULT_ROUND_CAP",),
              (_DEFAULTS.DEFAULT_ROUND_CAP, 1, 2), context={"rounds": 2}, odds=16),
    # -- the model: processes, transport, faults, bounds
    Dimension("workers", "model", ("Config.workers",), (1, 2), True, odds=4),
    Dimension("reapers", "model", ("Config.reapers",), (1, 2), True, odds=8),
    Dimension("transport", "model", ("Config.transport",), TRANSPORTS, True, odds=8),
    Dimension("fault", "model", ("Config.faults",), (None, *fault_kinds()), True,
              {"budget": 1}, odds=1),
    Dimension("budget", "model", ("World.faults",), (0, 1, 2, 3), True,
              {"fault": FaultKind.CRASH}, odds=1),
    Dimension("provider_faults", "model", ("Config.provider_faults",), FAILURE_CLASSES,
              context={"fault": FaultKind.PROVIDER_ERROR, "budget": 1}, odds=2),
    Dimension("fault_ops", "model", ("Config.fault_ops",), (None, *_STORE_OPS),
              context={"fault": FaultKind.STORE_ERROR, "budget": 1}, odds=8),
    Dimension("horizon", "model", ("Config.horizon",), (4, None, 2, 3, 6), odds=8),
    Dimension("reaper_limit", "model", ("Config.reaper_limit",), (_DEFAULTS.REAPER_DEFAULT_LIMIT, 1),
              odds=16),
    Dimension("refusals", "model", ("Config.refusals",), (None, *REQUEST_REFUSALS),
              context={"approval": True}, odds=16),
    Dimension("operator_cancels", "model", ("Config.operator_cancels",),
              (None, A_RUN, NO_RUN_ID, GONE_RUN_ID), odds=16),
    # -- a tool of the catalogue (RUNTIME 14): the name says builtin (14.5) or not
    Dimension("name", "tool", ("Tool.name",), (CUSTOM, *BUILTIN_WRITERS, UNKNOWN), True, odds=3),
    Dimension("effect", "tool", ("Tool.effect",), EFFECTS, True, odds=1),
    Dimension("remote", "tool", ("Tool.remote",), (False, True), True, odds=4),
    Dimension("approval", "tool", ("Tool.approval",), (False, True), True, odds=2),
    Dimension("server_flag", "tool", ("Tool.server_flag",), (0, 1), context={"remote": True},
              odds=4),
    Dimension("needs_input", "tool", ("Tool.needs_input",), (False, True), odds=8),
    Dimension("removable", "tool", ("Tool.removable",), (False, True), True, odds=4),
    # -- a run (RUNTIME 6, 9, 12, 16.18) and its plan (the provider's answers)
    Dimension("entry", "run", ("RunSpec.entry",), ENTRIES, True, odds=2),
    Dimension("decisions", "run", ("RunSpec.decisions",), _DECISIONS, True,
              {"approval": True}, odds=1),
    Dimension("cancels", "run", ("RunSpec.cancels",), (0, 1, 2), odds=8),
    Dimension("observer", "run", ("RunSpec.observer",), (False, True), context={"entry": "interactive"},
              odds=8),
    Dimension("cap", "run", ("RunSpec.cap",), (None, 1, 2), context={"rounds": 2}, odds=12),
    Dimension("row", "run", ("RunSpec.initial",), (None, *STATUSES), odds=16),
    Dimension("owner", "run", ("RunSpec.owner",), (DEFAULT_OWNER, OTHER_OWNER, SERVICE_OWNER),
              odds=16),
    # the four-eyes rule (16.18.4): the initiator's own approval of a write is refused
    Dimension("four_eyes", "run", ("RunSpec.require_second_approver",), (False, True),
              context={"approval": True}, odds=8),
    # the owner's tool policy refuses the run's first tool (17: execution under the owner's)
    Dimension("owner_refuses", "run", ("Principal.refused",), (False, True),
              context={"approval": True}, odds=12),
    Dimension("request", "run", ("RunSpec.requests", "Ask.request"), (None, *Request), odds=8),
    Dimension("requester", "run", ("Ask.by", "Principal.kind", "Principal.scopes",
                                   "Principal.grants", "Config.principals"), _REQUESTERS,
              context={"request": Request.APPROVE}, odds=1),
    Dimension("events_page", "run", ("Ask.after",), (-1, 0),
              context={"request": Request.EVENTS,
                       "requester": (PrincipalKind.SERVICE_ACCOUNT, (Scope.AGENT_READ,))},
              odds=2),
    Dimension("rounds", "run", ("RunSpec.plan", "Answer.kind"), (1, 0, 2), odds=8),
    Dimension("calls", "run", ("Answer.calls",), (1, 2), context={"tools": 2}, odds=8),
    Dimension("end", "run", ("Answer.value",), _ENDS, odds=4),
)

# Fields no dimension varies, and why they change nothing a search can tell apart.
NOT_BEHAVIOUR: dict[str, str] = {
    "Config.policy": "the policy is the search's argument: every configuration is checked under "
                     "each policy given (--policy)",
    "Config.constants": "a container: each of its fields is a dimension",
    "Config.tools": "a container: each tool's fields are dimensions",
    "Config.runs": "a container: each run's fields are dimensions",
    "RunSpec.id": "a name: runs are renamed freely (spec/scope.py's renamings)",
    "Principal.name": "a name: principals are renamed freely (requester and owner are dimensions)",
    "Constants.REAPER_DEFAULT_LIMIT": "only the default of Config.reaper_limit, which the "
                                      "reaper_limit dimension sets",
}

# The configuration records whose fields the dimensions must cover (tests/test_dimensions.py).
RECORDS = ("Config", "RunSpec", "Answer", "Tool", "Principal", "Ask", "Constants")

WRITE_PATH: tuple[str, ...] = tuple(d.name for d in DIMENSIONS if d.write_path)
_BY_NAME = {d.name: d for d in DIMENSIONS}


def dimension(name: str) -> Dimension:
    return _BY_NAME[name]


def label(value: Any) -> str:
    """A value as a member's name shows it."""
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return "+".join(label(v) for v in value) or "nothing"
    return str(value).replace(" ", "")


# =========================================================================================
# points and configurations
# =========================================================================================
def base(level: str) -> dict[str, Any]:
    return {d.name: d.base for d in DIMENSIONS if d.level == level}


BASE: dict[str, Any] = {lv: base(lv) for lv in ("constants", "model")} | {
    "tools": [base("tool")], "runs": [base("run") | {"tool": 0}]}


def point(values: dict[str, Any] | None = None) -> dict[str, Any]:
    """The base point with ``values`` (dimension name -> value) set on its levels (a tool or
    run dimension on its first tool or run)."""
    p = {"constants": dict(BASE["constants"]), "model": dict(BASE["model"]),
         "tools": [dict(t) for t in BASE["tools"]], "runs": [dict(r) for r in BASE["runs"]]}
    for k, v in (values or {}).items():
        if k == "tools":  # a second catalogue tool (calls per turn)
            while len(p["tools"]) < v:
                p["tools"].append(base("tool") | {"effect": IDEMPOTENT_WRITE})
            continue
        lv = _BY_NAME[k].level
        target = p[lv] if lv in ("constants", "model") else p[f"{lv}s"][0]
        target[k] = v
    return p


def _tool_table(t: dict[str, Any], k: int, taken: set[str]) -> tuple[str, dict[str, Any] | None]:
    """A point's tool as (the name a plan calls, its [[tools]] table or None: unknown)."""
    if t["name"] == UNKNOWN:
        return f"{UNKNOWN}_{k}", None
    name = t["name"] if t["name"] != CUSTOM and t["name"] not in taken else f"tool_{k}"
    table: dict[str, Any] = {"name": name}
    if t["remote"]:
        table |= {"remote": True, "effect": NON_IDEMPOTENT_WRITE}
    elif name in BUILTIN_WRITERS:
        table["effect"] = BUILTIN_WRITERS[name]
    elif t["effect"] != READ_ONLY:
        table["effect"] = t["effect"]
    for key in ("approval", "needs_input", "removable"):
        if t[key]:
            table[key] = True
    if t["remote"]:  # the operator's declaration of a remote tool (14.4 rule 3)
        table["server_flag"] = t["server_flag"]
    return name, table


def _principal_name(req: tuple[str, tuple[str, ...]]) -> str:
    return f"{req[0]}{''.join('_' + s.split('_')[-1].lower() for s in req[1])}"


def build(p: dict[str, Any], name: str = "point") -> dict[str, Any]:
    """A point as a model/config.py table."""
    m = p["model"]
    # a constant at the runtime's default is left out (the table reads as a hand-written one)
    cons = {k: v for k, v in p["constants"].items() if v != getattr(_DEFAULTS, k)}
    model: dict[str, Any] = {"workers": m["workers"], "transport": m["transport"]}
    faults = [f for f in (m["fault"] if isinstance(m["fault"], tuple) else (m["fault"],)) if f]
    if FaultKind.PROVIDER_ERROR in faults:
        model["provider_faults"] = [m["provider_faults"]]
    model["faults"] = faults
    model["fault_budget"] = m["budget"] if faults else 0
    if m["fault_ops"] is not None and FaultKind.STORE_ERROR in faults:
        model["fault_ops"] = [m["fault_ops"]]
    for key in ("reapers", "reaper_limit"):  # the model's defaults left out
        if m[key] != _BY_NAME[key].base:
            model[key] = m[key]
    if m["horizon"] is not None:
        model["horizon"] = m["horizon"]
    if m["refusals"] is not None:
        model["refusals"] = [m["refusals"]]
    tools, calls, unknown = [], [], []
    taken: set[str] = set()
    for k, t in enumerate(p["tools"]):
        cname, table = _tool_table(t, k, taken)
        calls.append(cname)
        taken.add(cname)
        if table is None:
            unknown.append(cname)
        else:
            tools.append(table)
    if unknown:
        model["unknown_tools"] = unknown
    principals: dict[str, dict[str, Any]] = {}
    runs = []
    for k, r in enumerate(p["runs"]):
        runs.append(_run_table(r, k, calls, principals))
    if m["operator_cancels"] is not None:
        oc = m["operator_cancels"]
        model["operator_cancels"] = [runs[0]["id"] if oc == A_RUN else oc]
    data: dict[str, Any] = {"description": f"dimension point {name}", "policy": "current",
                            "constants": cons, "model": model, "tools": tools, "runs": runs}
    if principals:
        data["principals"] = {DEFAULT_OWNER: {"kind": PrincipalKind.USER}} | principals
    return data


def _run_table(r: dict[str, Any], k: int, calls: list[str],
               principals: dict[str, dict[str, Any]]) -> dict[str, Any]:
    first = r.get("tool", 0) % len(calls)
    turn = [calls[(first + c) % len(calls)] for c in range(r["calls"])]
    kind, value = r["end"]
    plan: list[dict[str, Any]] = [{_TOOLS: list(turn)} for _ in range(r["rounds"])]
    plan.append({kind: value})
    t: dict[str, Any] = {"id": f"r{k + 1}", "entry": r["entry"], "plan": plan,
                         "decisions": [str(d) for d in r["decisions"]]}
    for key in ("cancels", "observer", "cap"):
        if r[key] != _BY_NAME[key].base:
            t[key] = r[key]
    if r["row"] is not None:
        t["row"] = {"status": r["row"]}
        if r["row"] in (WAITING_FOR_APPROVAL, WAITING_FOR_INPUT):
            t["row"]["suspended_state"] = 0
    if r["owner"] != DEFAULT_OWNER:
        t["owner"] = r["owner"]
        principals[r["owner"]] = {"kind": PrincipalKind.SERVICE_ACCOUNT
                                  if r["owner"] == SERVICE_OWNER else PrincipalKind.USER}
    if r["four_eyes"]:
        t["require_second_approver"] = True
    if r["owner_refuses"] and r["owner"] != SERVICE_OWNER:
        principals.setdefault(r["owner"], {"kind": PrincipalKind.USER})
        principals[r["owner"]]["permitted"] = {turn[0]: False}
    if r["request"] is not None:
        who = _principal_name(r["requester"])
        kind, holds = r["requester"]
        principals[who] = {"kind": kind} | (
            {_HOLDS.get(kind, "scopes"): list(holds)} if holds else {})
        ask: dict[str, Any] = {"by": who, "request": str(r["request"])}
        if r["request"] == Request.EVENTS and r["events_page"] != _BY_NAME["events_page"].base:
            ask |= {"after_sequence": r["events_page"]}
        t["requests"] = [ask]
    return t


# =========================================================================================
# reading a configuration's dimensions back
# =========================================================================================
def values_of(cfg: Config, budget: int) -> dict[str, set[Any]]:
    """Every dimension's values in a parsed configuration (``budget``: its fault budget). A
    dimension that does not apply (the requester of a run without requests) reads as its
    base value."""
    out: dict[str, set[Any]] = {d.name: set() for d in DIMENSIONS}
    for k in ("LEASE_SECONDS", "MAX_REQUEUES", "REQUEUE_BACKOFF_MS", "REQUEUE_BACKOFF_CAP_MS",
              "MAX_ITERATIONS", "DEFAULT_ROUND_CAP"):
        out[k].add(getattr(cfg.constants, k))
    faults = set(cfg.faults) if budget > 0 else set()
    if not cfg.provider_faults:
        faults.discard(FaultKind.PROVIDER_ERROR)
    out["workers"].add(len(cfg.workers))
    out["reapers"].add(cfg.reapers)
    out["transport"].add(cfg.transport)
    out["fault"] |= faults or {None}
    out["budget"].add(budget if faults else 0)
    if FaultKind.PROVIDER_ERROR in faults:
        out["provider_faults"] |= set(cfg.provider_faults)
    if FaultKind.STORE_ERROR in faults:  # no list: a store error may hit every statement
        out["fault_ops"] |= set(cfg.fault_ops) if cfg.fault_ops else {None, *_STORE_OPS}
    else:
        out["fault_ops"].add(None)
    out["horizon"].add(cfg.horizon)
    out["reaper_limit"].add(cfg.reaper_limit)
    out["refusals"] |= set(cfg.refusals) or {None}
    ids = {r.id for r in cfg.runs}
    out["operator_cancels"] |= {A_RUN if x in ids else x for x in cfg.operator_cancels} or {None}
    called = {c for r in cfg.runs for a in r.plan for c in a.calls}
    for c in sorted(called):
        _tool_values(cfg, c, out)
    for r in cfg.runs:
        _run_values(cfg, r, out)
    for d in DIMENSIONS:
        if not out[d.name]:
            out[d.name].add(d.base)
    return out


def _tool_values(cfg: Config, c: str, out: dict[str, set[Any]]) -> None:
    t = cfg.tool(c)
    if t is None:
        out["name"].add(UNKNOWN)
        return
    out["name"].add(t.name if t.name in BUILTIN_WRITERS else CUSTOM)
    out["effect"].add(t.declared_effect)
    out["remote"].add(t.remote)
    out["approval"].add(t.approval)
    if t.remote:
        out["server_flag"].add(t.server_flag)
    out["needs_input"].add(t.needs_input)
    out["removable"].add(t.removable)


def _run_values(cfg: Config, r: Any, out: dict[str, set[Any]]) -> None:
    out["entry"].add(r.entry)
    out["decisions"].add(tuple(r.decisions))
    out["cancels"].add(r.cancels)
    out["observer"].add(r.observer)
    out["cap"].add(r.cap)
    out["row"].add(r.initial.status if r.initial is not None else None)
    owner = cfg.principal(r.owner)
    human = owner is None or owner.human
    out["owner"].add(DEFAULT_OWNER if r.owner == DEFAULT_OWNER
                     else OTHER_OWNER if human else SERVICE_OWNER)
    out["four_eyes"].add(r.require_second_approver)
    out["owner_refuses"].add(owner is not None and bool(owner.refused))
    for a in r.requests:
        out["request"].add(a.request)
        who = cfg.principal(a.by)
        if who is not None:
            holds = who.grants if _HOLDS.get(who.kind) == "grants" else who.scopes
            out["requester"].add((who.kind, tuple(s for s in Scope if s in holds)))
        if a.request == Request.EVENTS:
            out["events_page"].add(a.after)
    if not r.requests:
        out["request"].add(None)
    tool_rounds = [a for a in r.plan if a.kind == _TOOLS]
    out["rounds"].add(len(tool_rounds))
    out["calls"] |= {len(a.calls) for a in tool_rounds}
    ends = [a for a in r.plan if a.kind != _TOOLS]
    out["end"] |= {(a.kind, a.value) for a in ends[:1]} or {_BY_NAME["end"].base}


def pairs_of(values: dict[str, set[Any]], dims: Sequence[str]) -> set[tuple[str, Any, str, Any]]:
    """The pairs of values (dimension, value, dimension, value) of ``dims`` that a
    configuration with ``values`` (:func:`values_of`) holds."""
    out = set()
    for a, b in itertools.combinations(dims, 2):
        for x in values[a]:
            for y in values[b]:
                out.add((a, x, b, y))
    return out


def _read(data: dict[str, Any]) -> dict[str, set[Any]]:
    cfg, budget = parse_config(data)
    return values_of(cfg, budget)


# =========================================================================================
# generators: the members a scope's ``generate = [...]`` adds
# =========================================================================================
def _values() -> Iterator[tuple[str, dict[str, Any]]]:
    for d in DIMENSIONS:
        for v in d.values[1:]:
            yield f"value:{d.name}={label(v)}", build(point(d.context | {d.name: v}))


# the faults under which a run that waited is asked again: its retry (a store error on the
# fence clear after the write, a crash)
RETRY_FAULTS = (FaultKind.STORE_ERROR, FaultKind.CRASH)
# the tools a decision is asked of: an approval-gated idempotent write, one that asks for input
_ASKING_TOOLS = {"gated": {"effect": IDEMPOTENT_WRITE, "approval": True},
                 "input": {"needs_input": True}}


def _decisions() -> Iterator[tuple[str, dict[str, Any]]]:
    seqs = [d for d in _DECISIONS if d]
    for entry in ENTRIES:
        for seq in seqs:
            for tk, tool in _ASKING_TOOLS.items():
                for f in RETRY_FAULTS:
                    p = point({"entry": entry, "decisions": seq, "fault": f, "budget": 1})
                    p["tools"][0] |= tool
                    yield f"decide:{entry}-{label(seq)}-{tk}-{f}", build(p)


def _pairs() -> Iterator[tuple[str, dict[str, Any]]]:
    """A greedy pairwise covering of :data:`WRITE_PATH`: each row starts from the first pair
    still missing and takes, dimension by dimension, the value covering most missing pairs
    (ties: the cheapest); the pairs a row covers are read back from the configuration it
    builds (a remote tool's effect is the runtime's, whatever the row asked), so a pair no
    configuration can hold is dropped, never counted."""
    dims = list(WRITE_PATH)
    order = {d: k for k, d in enumerate(dims)}

    def key(d: str, v: Any, e: str, w: Any) -> tuple[str, Any, str, Any]:
        return (d, v, e, w) if order[d] < order[e] else (e, w, d, v)

    missing = {(a, x, b, y) for a, b in itertools.combinations(dims, 2)
               for x in _BY_NAME[a].values for y in _BY_NAME[b].values}
    n = 0
    while missing:
        a, x, b, y = min(missing, key=lambda q: (order[q[0]], order[q[2]],
                                                 _BY_NAME[q[0]].values.index(q[1]),
                                                 _BY_NAME[q[2]].values.index(q[3])))
        seed: dict[str, Any] = {}
        for d, v in ((a, x), (b, y)):  # the seed pair, in the context where it matters
            seed |= _BY_NAME[d].context if v != _BY_NAME[d].base else {}
        seed |= {a: x, b: y}
        row = dict(seed)
        for d in dims:
            if d in row:
                continue
            vals = _BY_NAME[d].values
            row[d] = max(vals, key=lambda v, d=d, vals=vals: (  # type: ignore[misc]
                sum(key(d, v, e, w) in missing for e, w in row.items() if e in order),
                -vals.index(v)))
            if row[d] != _BY_NAME[d].base:
                row = {k: v for k, v in _BY_NAME[d].context.items() if k not in row} | row
        data = build(point(row))
        got = pairs_of(_read(data), dims)
        if (a, x, b, y) not in got:  # the values chosen beside it hide it: the seed alone
            data = build(point(seed))
            got = pairs_of(_read(data), dims)
        covered = {q for q in missing if q in got}
        missing -= covered | {(a, x, b, y)}
        if covered:
            n += 1
            yield f"pair:{n:03d}", data


GENERATORS = {"values": _values, "decisions": _decisions, "pairs": _pairs}


def generate(names: Iterable[str], where: str) -> list[tuple[str, dict[str, Any]]]:
    """The members the generators ``names`` add: (name, model/config.py table)."""
    out = []
    for g in names:
        if g not in GENERATORS:
            raise ConfigError(f"{where}: unknown generator {g!r}; use {', '.join(GENERATORS)}")
        out += list(GENERATORS[g]())
    return out
