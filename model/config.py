"""Model configurations: policy, constants, tools, runs with their plans, workers, faults.

One TOML shape serves the checker's bounded configurations and the scenario files (which
add ``[[steps]]``). Every key is validated: a typo, a wrong type or a negative lease is one
``ConfigError`` line naming the field and the fix.

    policy = "adr-141"                 # a preset, optionally "+switch" / "-switch"
    [switches]                         # overrides, one bool per switch
    write_fence = false
    [constants]                        # LEASE_SECONDS, MAX_REQUEUES, ...
    LEASE_SECONDS = 900
    [model]
    workers = 2                        # or a list of names
    faults = ["crash", "store_error"]  # fault kinds that may be injected
    fault_budget = 1                   # faults injected along any one history
    provider_faults = ["rateLimit"]    # classes a provider call may fail with
    fault_ops = ["renew_lease"]        # statements a store_error may hit (default: all)
    reaper_limit = 50
    reapers = 1                        # reapers racing on the store (10), named reaper, reaper#2, ...
    horizon = 5000                     # the clock never moves past it
    transport = "async"                # async (default here) | sync (the runtime's default:
                                       # dispatch runs the handler nested, RUNTIME 6.3) |
                                       # none (no bus: enqueue and the reaper's tick fail
                                       # up front, RUNTIME 6.4)
    operator_cancels = ["r1", ""]      # the ids the operator's cancel command is given, in
                                       # order, each once (RUNTIME 11): a run's id, "" (no
                                       # id: refused) or an id no run has (unknown)
    refusals = ["ApproverNotPermitted", "InvalidInputSubmission", "ConfigurationGone"]
                                       # explore both answers of gate 2 (12.2 step 8), input
                                       # validation (12.3) and the configuration check (12.2
                                       # step 2): each approve or deny also comes as
                                       # permitted=false (a denial passes gate 2), each
                                       # submit_input as valid=false, each of the three as
                                       # configured=false
    [[tools]]
    name = "create_page_draft"         # a builtin writer of RUNTIME 14.5: its effect is
                                       # the runtime's (a plan may call one with no table)
    effect = "non_idempotent_write"    # read_only | idempotent_write | non_idempotent_write;
                                       # optional (read_only; remote: non_idempotent_write);
                                       # contradicting a builtin's or a remote's: an error
    remote = false
    approval = false                   # explicit approval marker
    server_flag = 0                    # remote only: operator approval declaration
    needs_input = false
    removable = false
    [principals]                       # who makes requests (RUNTIME 16.18.1); default: one
    owner = { kind = "user" }          # user "owner", who starts every run and makes every
    mallory = { kind = "user" }        # decision and cancel of [[runs]]; kind: user | admin
    ops = { kind = "admin" }           # | service_account | anonymous
    lead = { kind = "user", grants = ["AGENT_APPROVE"], permitted = { create_page_draft = false } }
                                       # a user's grants (AGENT_APPROVE: decide on any run);
                                       # permitted: the tools its tool policy refuses (17)
    bot = { kind = "service_account", scopes = ["AGENT_CANCEL"] }  # AGENT_APPROVE, AGENT_READ
    [[runs]]
    id = "r1"
    owner = "owner"                    # the principal who starts the run (its uid is
                                       # be_user; a service account or anonymous: 0)
    require_second_approver = false    # the four-eyes rule of the run's configuration (16.18.4)
    requests = [{ by = "mallory", request = "approve" }, { by = "bot", request = "events",
                after_sequence = 0 }]  # each made at most once, by a declared principal:
                                       # approve | deny | input | cancel | status | events
    entry = "queued"                   # queued (enqueue) | interactive (start_run)
    plan = [{tools = ["create_page_draft"]}, {final = "completed"}]
    cap = 5                            # explicit round cap (clamped to MAX_ITERATIONS)
    observer = false
    cancels = 0                        # cancel commands a caller may issue
    decisions = ["approve"]            # approve | deny | input, in order
    [runs.row]                         # optional: the row exists at the start
    status = "running"
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import fields, replace
from typing import Any

from . import names, store
from .constants import CONSTANT_MAX, CONSTANT_NAMES, Constants
from .names import TRANSITIONS
from .policy import SWITCHES, Policy, UnknownPolicy, parse_policy
from .state import (
    DEFAULT_OWNER,
    DEFAULT_PRINCIPALS,
    EFFECTS,
    ENTRIES,
    FAILURE_CLASSES,
    FINAL_VALUES,
    GUARDRAIL_VALUES,
    READ_ONLY,
    REQUEST_REFUSALS,
    STATUSES,
    TRANSPORTS,
    Answer,
    Ask,
    Config,
    Principal,
    Row,
    RunSpec,
    Tool,
    World,
)
from .steps import fault_kinds
from .vocab import Decision, FaultKind, PrincipalKind, Request, Scope


class ConfigError(ValueError):
    """A malformed configuration: the message names the field and the fix."""


class UsageError(ValueError):
    """Bad input found after parsing (an unknown property, say): one line, exit 2."""


def _expect(value: Any, typ: type | tuple[type, ...], field: str, fix: str) -> Any:
    ok = isinstance(value, typ) and not (typ in (int, (int,)) and isinstance(value, bool))
    if not ok:
        raise ConfigError(f"{field}: expected {fix}, got {value!r}")
    return value


# Keys that belong at the top level of a file. TOML puts ``key = value`` written after a
# ``[table]`` header into that table, so ``messages = [...]`` below ``[model]`` becomes
# ``model.messages``: the error says where the key belongs instead of "unknown key".
TOP_LEVEL_ONLY = frozenset({"policy", "description", "messages", "switches", "constants", "model",
                            "tools", "runs", "steps", "expect", "principals"})


def misplaced(key: str, where: str) -> str | None:
    """The hint for a top-level key found inside the table ``where`` (``"model."``,
    ``"runs[0].row."``, ``"steps[3]"``), or None if ``key`` is not a top-level key."""
    if key not in TOP_LEVEL_ONLY or not where.strip("."):
        return None
    parts = where.strip(".").split(".")
    names = [p.split("[")[0] for p in parts]
    header = ".".join(names)
    header = f"[[{header}]]" if "[" in parts[-1] else f"[{header}]"
    return f"`{key}` belongs at the top level, before any [table]: move it above {header}"


def check_keys(d: dict, allowed: set[str], where: str) -> None:
    """An unknown key is one line naming it, with the nearest allowed key as the fix (or, for
    a top-level key that TOML put into a table, where it belongs)."""
    for k in d:
        if k not in allowed:
            hint = misplaced(k, where)
            if hint:
                raise ConfigError(f"{where}{k}: {hint}")
            near = difflib.get_close_matches(k, sorted(allowed), n=1)
            hint = f"did you mean {near[0]!r}?" if near else f"allowed keys: {', '.join(sorted(allowed))}"
            raise ConfigError(f"{where}{k}: unknown key; {hint}")





def _nonneg(v: Any, field: str) -> int:
    _expect(v, int, field, "an integer")
    if v < 0:
        raise ConfigError(f"{field}: must be >= 0, got {v}")
    return v


# RUNTIME 14.5: the builtin writers and the effect each declares in its code (every other
# builtin is read_only). The default tool registry: a config may name one without declaring
# its effect, in [[tools]] or only in a plan, and gets this effect; a config that declares
# another effect for it contradicts the runtime (one ConfigError line).
BUILTIN_WRITERS: dict[str, str] = {
    "update_page_metadata": "idempotent_write",  # ADR-135
    "set_file_alternative_text": "idempotent_write",  # amendment to ADR-135
    "move_content_element": "idempotent_write",  # ADR-146
    "create_content_element_draft": "non_idempotent_write",  # ADR-146
    "create_translation_draft": "non_idempotent_write",  # ADR-146
    "create_page_draft": "non_idempotent_write",  # ADR-180
    "attach_file_to_content_element": "non_idempotent_write",  # commit f0b47adf
}
REMOTE_EFFECT = "non_idempotent_write"  # 14.2: remote (MCP) tools always declare it


def tool_effect(t: dict[str, Any], where: str) -> str:
    """The effect a [[tools]] table's tool declares (RUNTIME 14.2, 14.5): a remote tool
    always declares ``non_idempotent_write``; a builtin writer the effect of 14.5; any other
    tool what the table says, ``read_only`` when it says nothing (declaring is opt-in). A
    table that contradicts the runtime's own declaration is a ``ConfigError``."""
    name = t.get("name")
    eff = t.get("effect")
    if eff is not None and eff not in EFFECTS:
        raise ConfigError(f"{where}effect: unknown effect {eff!r}; use {', '.join(EFFECTS)}")
    if t.get("remote") is True:
        if eff is not None and eff != REMOTE_EFFECT:
            raise ConfigError(
                f"{where}effect: {name!r} is remote, and a remote (MCP) tool always declares "
                f"{REMOTE_EFFECT} (RUNTIME 14.2); remove effect or write effect = \"{REMOTE_EFFECT}\"")
        return REMOTE_EFFECT
    builtin = BUILTIN_WRITERS.get(name) if isinstance(name, str) else None
    if builtin is not None:
        if eff is not None and eff != builtin:
            raise ConfigError(
                f"{where}effect: {name!r} is a builtin writer that declares {builtin} "
                f"(RUNTIME 14.5); remove effect or write effect = \"{builtin}\"")
        return builtin
    return eff if eff is not None else "read_only"


MAX_WORKERS = 64  # workers of a bounded configuration (refused above: memory, not a search)
MAX_REAPERS = 8  # reapers racing on one store (each one more process to interleave)

TOP_KEYS = {"policy", "switches", "constants", "model", "tools", "runs", "steps", "description", "expect",
            "principals"}
MODEL_KEYS = {"workers", "faults", "fault_budget", "provider_faults", "fault_ops", "reaper_limit", "reapers",
              "horizon", "transport", "refusals", "read_only_builtins", "unknown_tools",
              "operator_cancels"}
TOOL_KEYS = {"name", "effect", "remote", "approval", "server_flag", "needs_input", "removable"}
RUN_KEYS = {"id", "entry", "plan", "cap", "observer", "cancels", "decisions", "row", "owner", "requests",
            "require_second_approver"}
PRINCIPAL_KEYS = {"kind", "scopes", "grants", "permitted"}
ASK_KEYS = {"by", "request", "after_sequence"}
ROW_KEYS = {f.name for f in fields(Row)}


def parse_config(data: dict[str, Any], policy_override: str | None = None) -> tuple[Config, int]:
    """Build the static ``Config`` and the fault budget from a parsed TOML table: each
    section validated in turn (the first problem is the error), in the order of the file's
    description above."""
    check_keys(data, TOP_KEYS, "")
    policy = policy_of(data, policy_override)
    constants = constants_of(data)
    model, budget = _model(data, constants)
    tools = _tools(data)
    runs = _runs(data)
    m = data.get("model", {})
    read_only = _names(m, "read_only_builtins", "names of the runtime's read-only builtins")
    unknown = _names(m, "unknown_tools", "tool names no catalogue knows")
    _declared_calls(runs, tools, read_only, unknown)
    tools += _default_registry(tools, runs, read_only)
    principals = _principals(data)
    _declared_principals(runs, principals)
    spec = Config(policy=policy, constants=constants, tools=tuple(tools), runs=tuple(runs),
                  principals=principals, **model)
    return spec, budget


def policy_of(data: dict[str, Any], policy_override: str | None = None) -> Policy:
    """``policy`` (or the override) and the ``[switches]`` applied to it; the switches
    show in the name (``adr-141-write_fence``). The one reader of a configuration's policy:
    the checker's parts, the scenarios and the simulator's file."""
    pname = policy_override or data.get("policy", "current")
    _expect(pname, str, "policy", "a preset name such as \"adr-141\"")
    try:
        policy = parse_policy(pname)
    except UnknownPolicy as e:
        raise ConfigError(f"policy: {e}") from None
    sw = data.get("switches", {})
    _expect(sw, dict, "switches", "a table of switch = true|false")
    check_keys(sw, set(SWITCHES), "switches.")
    for k, v in sw.items():
        _expect(v, bool, f"switches.{k}", "true or false")
    if sw:
        policy = policy.with_(name=policy.name + "".join(f"{'+' if v else '-'}{k}" for k, v in sw.items()), **sw)
    return policy


def under_policy(config: Config, data: dict[str, Any], policy: str | None) -> Config:
    """``config`` (parsed from ``data``) under another ``policy`` with the table's
    ``[switches]`` applied (None: ``config`` itself): what ``parse_config(data, policy)``
    gives, without parsing the rest of the table again."""
    return config if policy is None else replace(config, policy=policy_of(data, policy))


# The constants that count at least one: a lease of 0 seconds is no lease, a reaper that may
# read no row never reaps (every other constant is >= 0).
CONSTANT_MIN = {"LEASE_SECONDS": 1, "REAPER_DEFAULT_LIMIT": 1}


def constants_of(data: dict[str, Any]) -> Constants:
    """``[constants]``: integers from ``CONSTANT_MIN`` (else 0) to ``CONSTANT_MAX``; a
    constant not given has its default in ``Constants`` (model/constants.py, the one place
    of each default). The one reader of ``[constants]``, for the checker's files and the
    simulator's."""
    cons = data.get("constants", {})
    if not isinstance(cons, dict):
        raise ConfigError(f"constants: expected a table, got {cons!r}; write [constants]")
    check_keys(cons, set(CONSTANT_NAMES), "constants.")
    for k, v in cons.items():
        f, lo = f"constants.{k}", CONSTANT_MIN.get(k, 0)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"{f}: expected an integer, got {v!r}; write e.g. {k} = {max(lo, 1)}")
        if v < lo:
            unit = " (seconds)" if k == "LEASE_SECONDS" else ""
            raise ConfigError(f"{f}: must be >= {lo}{unit}, got {v}; give an integer >= {lo}")
        if v > CONSTANT_MAX:
            raise ConfigError(f"{f}: {v:,} is above the limit of {CONSTANT_MAX:,}; give an "
                              f"integer <= {CONSTANT_MAX:,}")
    return Constants(**cons)


def _model(data: dict[str, Any], constants: Constants) -> tuple[dict[str, Any], int]:
    """``[model]``: the ``Config`` fields it sets, and the fault budget."""
    m = data.get("model", {})
    _expect(m, dict, "model", "a table")
    check_keys(m, MODEL_KEYS, "model.")
    workers = _workers(m)
    faults, pf, fault_ops = _faults(m)
    budget = _nonneg(m.get("fault_budget", 0), "model.fault_budget")
    limit = m.get("reaper_limit", constants.REAPER_DEFAULT_LIMIT)
    _expect(limit, int, "model.reaper_limit", "an integer >= 1")
    if limit < 1:
        raise ConfigError(f"model.reaper_limit: must be >= 1, got {limit}")
    reapers = m.get("reapers", 1)
    _expect(reapers, int, "model.reapers", "an integer >= 1")
    if reapers < 1 or reapers > MAX_REAPERS:
        raise ConfigError(f"model.reapers: must be 1 to {MAX_REAPERS}, got {reapers}")
    horizon = m.get("horizon")
    if horizon is not None:
        _nonneg(horizon, "model.horizon")
    transport = m.get("transport", "async")
    if transport not in TRANSPORTS:
        use = ", ".join(f'"{x}"' for x in TRANSPORTS)
        raise ConfigError(f"model.transport: {transport!r} is not a transport; use one of {use}")
    refusals = _refusals(m)
    return dict(
        workers=workers, faults=frozenset(faults), provider_faults=tuple(pf),
        fault_ops=frozenset(fault_ops) if fault_ops is not None else None, reaper_limit=limit, reapers=reapers, horizon=horizon, transport=transport, refusals=frozenset(refusals),
        operator_cancels=_operator_cancels(m),
    ), budget


def _operator_cancels(m: dict[str, Any]) -> tuple[str, ...]:
    """``model.operator_cancels``: the ids the operator's cancel command is given, in order
    (a run's id, "" for none, or an id no run has)."""
    ids = m.get("operator_cancels", [])
    _expect(ids, list, "model.operator_cancels", 'a list of run ids (a run\'s id, "" or an unknown id)')
    for x in ids:
        _expect(x, str, "model.operator_cancels[]", 'a run id as a string ("" for none)')
    return tuple(ids)


def _workers(m: dict[str, Any]) -> tuple[str, ...]:
    """``model.workers``: a count (named w1, w2, ...) or the names."""
    workers = m.get("workers", 1)
    if isinstance(workers, int) and not isinstance(workers, bool):
        if workers < 1:
            raise ConfigError(f"model.workers: must be >= 1, got {workers}")
        if workers > MAX_WORKERS:
            raise ConfigError(f"model.workers: {workers} is above the limit of {MAX_WORKERS} (an "
                              "exhaustive check explores every interleaving); give fewer workers")
        workers = tuple(f"w{k + 1}" for k in range(workers))
    else:
        _expect(workers, list, "model.workers", "a count or a list of names")
        workers = tuple(_expect(x, str, "model.workers[]", "a name") for x in workers)
        if len(workers) > MAX_WORKERS:
            raise ConfigError(f"model.workers: {len(workers)} names, above the limit of {MAX_WORKERS}; give fewer workers")
    taken = [x for x in workers if names.is_reaper(x)]
    if taken:
        raise ConfigError(f"model.workers: {taken[0]!r} names a reaper's process; give the worker "
                          "another name")
    return workers


def _faults(m: dict[str, Any]) -> tuple[list[str], list[str], list[str] | None]:
    """``model.faults``, ``model.provider_faults`` (which imply ``provider_error``) and
    ``model.fault_ops``."""
    faults = m.get("faults", [])
    _expect(faults, list, "model.faults", f"a list of {', '.join(fault_kinds())}")
    pf = m.get("provider_faults", [])
    _expect(pf, list, "model.provider_faults", "a list of failure classes")
    faults = fault_set(faults, pf)
    fault_ops = m.get("fault_ops")
    if fault_ops is not None:
        _expect(fault_ops, list, "model.fault_ops", "a list of statement names")
        hit = sorted(n for n, (_, kinds) in TRANSITIONS.items() if FaultKind.STORE_ERROR in kinds)
        for x in fault_ops:
            _expect(x, str, "model.fault_ops[]", "a statement name")
            if x not in hit:
                near = difflib.get_close_matches(x, hit, n=1)
                hint = f"did you mean {near[0]!r}? " if near else ""
                raise ConfigError(f"model.fault_ops: {x!r} is not a statement a store_error can hit; "
                                  f"{hint}use one of {', '.join(hit)}")
    return faults, pf, fault_ops


def fault_set(faults: Iterable[str], provider_faults: Iterable[str]) -> list[FaultKind]:
    """The fault kinds a configuration enables (``model.faults``), each a declared kind, with
    ``provider_error`` when a provider call may fail (``model.provider_faults``, each a
    failure class)."""
    kinds = fault_kinds()
    out = []
    for f in faults:
        if f not in kinds:
            raise ConfigError(f"model.faults: unknown fault {f!r}; use {', '.join(kinds)}")
        out.append(FaultKind(f))  # parsed once, here at the edge
    pf = list(provider_faults)
    for c in pf:
        if c not in FAILURE_CLASSES:
            raise ConfigError(f"model.provider_faults: unknown class {c!r}; use {', '.join(FAILURE_CLASSES)}")
    if pf and FaultKind.PROVIDER_ERROR not in out:
        out.append(FaultKind.PROVIDER_ERROR)
    return out


def with_faults(config: Config, faults: Iterable[str], provider_faults: Sequence[str]) -> Config:
    """``config`` enabling ``faults`` and ``provider_faults`` (read by :func:`fault_set`):
    the simulator's world, whose environment says which kinds it draws."""
    return replace(config, faults=frozenset(fault_set(faults, provider_faults)),
                   provider_faults=tuple(provider_faults))


def principals_of(data: dict[str, Any]) -> tuple[Principal, ...]:
    """``[principals]`` (absent: the owner alone)."""
    return _principals(data)


def _refusals(m: dict[str, Any]) -> list[str]:
    """``model.refusals``: the request refusals whose both answers are explored."""
    refusals = m.get("refusals", [])
    _expect(refusals, list, "model.refusals", f"a list of {', '.join(REQUEST_REFUSALS)}")
    for x in refusals:
        if x not in REQUEST_REFUSALS:
            raise ConfigError(f"model.refusals: {x!r} is not a refusal a request can meet; "
                              f"use {' or '.join(REQUEST_REFUSALS)}")
    return refusals


def _tools(data: dict[str, Any]) -> list[Tool]:
    """The ``[[tools]]`` tables, in order; names unique."""
    tools: list[Tool] = []
    raw_tools = data.get("tools", [])
    _expect(raw_tools, list, "tools", "an array of [[tools]] tables")
    for n, t in enumerate(raw_tools):
        tools.append(tool_of(t, f"tools[{n}]", {x.name for x in tools}))
    return tools


def tool_of(t: Any, at: str, taken: set[str]) -> Tool:
    """One ``[[tools]]`` table (``at``: ``tools[n]``) of a checker's, a scenario's or the
    simulator's file (the simulator reads its own keys beside these); ``taken``: the names of
    the tools before it."""
    where = at + "."
    if not isinstance(t, dict):
        raise ConfigError(f"{at}: expected a table, got {t!r}; write [[tools]]")
    check_keys(t, TOOL_KEYS, where)
    if "name" not in t:
        raise ConfigError(f"{where}name: missing; every tool needs a name")
    for b in ("remote", "approval", "needs_input", "removable"):
        if b in t and not isinstance(t[b], bool):
            raise ConfigError(f"{where}{b}: expected true or false, got {t[b]!r}; write {b} = true")
    name = _expect(t["name"], str, where + "name", "a string")
    if name in taken:
        raise ConfigError(f"{where}name: duplicate tool {name!r}; give each tool its own name")
    eff = tool_effect(t, where)
    sf = t.get("server_flag")
    if sf is not None:
        _expect(sf, int, where + "server_flag", "0 or 1")
        if sf not in (0, 1):
            raise ConfigError(f"{where}server_flag: {sf}; use 0 (unattended) or 1 (approval)")
    return Tool(
        name=name, effect=eff, remote=t.get("remote", False), approval=t.get("approval", False),
        server_flag=sf, needs_input=t.get("needs_input", False), removable=t.get("removable", False),
    )


def _runs(data: dict[str, Any]) -> list[RunSpec]:
    """The ``[[runs]]`` tables, in order (at least one); ids unique."""
    raw_runs = data.get("runs", [])
    _expect(raw_runs, list, "runs", "an array of [[runs]] tables")
    if not raw_runs:
        raise ConfigError("runs: at least one [[runs]] table is needed")
    runs: list[RunSpec] = []
    for n, r in enumerate(raw_runs):
        runs.append(_run(r, n, {x.id for x in runs}))
    return runs


def _run(r: Any, n: int, taken: set[str]) -> RunSpec:
    """The ``n``-th ``[[runs]]`` table; ``taken``: the ids of the runs before it."""
    where = f"runs[{n}]."
    _expect(r, dict, f"runs[{n}]", "a table")
    check_keys(r, RUN_KEYS, where)
    rid = r.get("id", f"r{n + 1}")
    _expect(rid, str, where + "id", "a string")
    if rid in taken:
        raise ConfigError(f"{where}id: duplicate run id {rid!r}; give each run its own id")
    entry = r.get("entry", "queued")
    if entry not in ENTRIES:
        raise ConfigError(f"{where}entry: {entry!r}; use queued or interactive")
    raw_plan = _expect(r.get("plan", [{"final": "completed"}]), list, where + "plan",
                       "a list of answers such as [{tools = [\"lookup\"]}, {final = \"completed\"}]")
    plan = tuple(_answer(a, f"{where}plan[{k}]") for k, a in enumerate(raw_plan))
    cap = r.get("cap")
    if cap is not None:
        _nonneg(cap, where + "cap")
    decisions = r.get("decisions", [])
    _expect(decisions, list, where + "decisions", "a list of approve | deny | input")
    for d in decisions:
        if not Decision.known(d):
            raise ConfigError(f"{where}decisions: {d!r}; use approve, deny or input")
    row = _row(r["row"], where + "row.") if "row" in r else None
    owner = _expect(r.get("owner", DEFAULT_OWNER), str, where + "owner", "a principal's name")
    return RunSpec(
        id=rid, entry=entry, plan=plan, cap=cap,
        observer=_expect(r.get("observer", False), bool, where + "observer", "true or false"),
        cancels=_nonneg(r.get("cancels", 0), where + "cancels"),
        decisions=tuple(Decision(d) for d in decisions), initial=row,
        owner=owner, requests=_asks(r.get("requests", []), where + "requests"),
        require_second_approver=_expect(r.get("require_second_approver", False), bool,
                                        where + "require_second_approver", "true or false"),
    )


MAX_REQUESTS = 8  # requests by named principals per run (each one more branch to interleave)


def _asks(raw: Any, where: str) -> tuple[Ask, ...]:
    """``runs[n].requests``: each a table ``{by, request, after_sequence}``."""
    _expect(raw, list, where, "a list of tables such as [{ by = \"mallory\", request = \"approve\" }]")
    if len(raw) > MAX_REQUESTS:
        raise ConfigError(f"{where}: {len(raw)} requests, above the limit of {MAX_REQUESTS}; "
                          "give fewer")
    out = []
    for k, a in enumerate(raw):
        at = f"{where}[{k}]"
        _expect(a, dict, at, "a table with by and request")
        check_keys(a, ASK_KEYS, at + ".")
        for key in ("by", "request"):
            if key not in a:
                raise ConfigError(f"{at}.{key}: missing; every request names by and request")
        by = _expect(a["by"], str, at + ".by", "a principal's name")
        req = a["request"]
        if not Request.known(req):
            raise ConfigError(f"{at}.request: {req!r}; use one of {', '.join(Request)}")
        after = a.get("after_sequence", -1)
        _expect(after, int, at + ".after_sequence", "an event sequence (-1: from the first)")
        if after < -1:
            raise ConfigError(f"{at}.after_sequence: must be >= -1, got {after}")
        if Request(req) != Request.EVENTS and "after_sequence" in a:
            raise ConfigError(f"{at}.after_sequence: only an events read starts after a "
                              f"sequence; remove it from a {req} request")
        out.append(Ask(by=by, request=Request(req), after=after))
    return tuple(out)


def _scopes(d: dict[str, Any], key: str, at: str) -> frozenset[str]:
    """A principal's ``scopes`` or ``grants``: a list of ``Scope`` members."""
    xs = d.get(key, [])
    _expect(xs, list, f"{at}.{key}", f"a list of {', '.join(Scope)}")
    for x in xs:
        if not Scope.known(x):
            raise ConfigError(f"{at}.{key}: {x!r} is not a scope; use {', '.join(Scope)}")
    return frozenset(Scope(x) for x in xs)


def _refused_tools(d: dict[str, Any], at: str) -> frozenset[str]:
    """A principal's ``permitted``: tool name -> whether the tool policy permits it (17);
    the tools given false."""
    raw = d.get("permitted", {})
    _expect(raw, dict, f"{at}.permitted", "a table of tool = true | false")
    for tool, v in raw.items():
        _expect(v, bool, f"{at}.permitted.{tool}", "true or false")
    return frozenset(t for t, v in raw.items() if not v)


def _principal(name: str, d: Any) -> Principal:
    at = f"principals.{name}"
    _expect(d, dict, at, "a table such as { kind = \"service_account\", scopes = [\"AGENT_CANCEL\"] }")
    check_keys(d, PRINCIPAL_KEYS, at + ".")
    kind = d.get("kind", PrincipalKind.USER)
    if not PrincipalKind.known(kind):
        raise ConfigError(f"{at}.kind: {kind!r}; use one of {', '.join(PrincipalKind)}")
    kind = PrincipalKind(kind)
    scopes, grants = _scopes(d, "scopes", at), _scopes(d, "grants", at)
    if scopes and kind != PrincipalKind.SERVICE_ACCOUNT:
        raise ConfigError(f"{at}.scopes: only a service_account has scopes; remove them or "
                          "write kind = \"service_account\"")
    if grants and kind != PrincipalKind.USER:
        raise ConfigError(f"{at}.grants: only a user holds grants (an admin holds every one, a "
                          "service account has scopes); remove them or write kind = \"user\"")
    if "permitted" in d and kind not in (PrincipalKind.USER, PrincipalKind.ADMIN):
        raise ConfigError(f"{at}.permitted: a {kind} has no backend user, no tool is permitted "
                          "it (RUNTIME 16.18.5); remove it")
    return Principal(name, kind, scopes, grants, _refused_tools(d, at))


def _principals(data: dict[str, Any]) -> tuple[Principal, ...]:
    """``[principals]``: name -> {kind, scopes, grants, permitted}; absent: the owner alone."""
    raw = data.get("principals")
    if raw is None:
        return DEFAULT_PRINCIPALS
    _expect(raw, dict, "principals", "a table of name = { kind = \"user\" }")
    if not raw:
        raise ConfigError("principals: empty; declare at least the runs' owner, or remove the table")
    return tuple(_principal(name, d) for name, d in raw.items())


def _declared_principals(runs: list[RunSpec], principals: tuple[Principal, ...]) -> None:
    """Every run's owner (the principal who starts it: any kind, 16.18.1) and every request's
    principal is declared."""
    kinds = {p.name: p.kind for p in principals}
    for n, r in enumerate(runs):
        if r.owner not in kinds:
            raise ConfigError(f"runs[{n}].owner: {r.owner!r} is not declared; the principal who "
                              f"starts the run is one of [principals]: {', '.join(kinds)}")
        for k, a in enumerate(r.requests):
            if a.by not in kinds:
                raise ConfigError(f"runs[{n}].requests[{k}].by: {a.by!r} is not declared; "
                                  f"declare it in [principals] or use one of {', '.join(kinds)}")


def _default_registry(tools: list[Tool], runs: list[RunSpec], read_only: list[str]) -> list[Tool]:
    """The default registry (14.5): a builtin a plan calls is registered even when no
    [[tools]] table names it: a builtin writer with its effect, a builtin the configuration
    names in ``model.read_only_builtins`` as ``read_only`` ("every other builtin is
    read_only"); a name declared in ``model.unknown_tools`` stays unknown (14.2)."""
    declared = {t.name for t in tools}
    called = {c for r in runs for a in r.plan for c in a.calls}
    builtins = {**BUILTIN_WRITERS, **{n: READ_ONLY for n in read_only if n not in BUILTIN_WRITERS}}
    return [Tool(name=name, effect=eff) for name, eff in builtins.items()
            if name in called and name not in declared]


def _names(m: dict[str, Any], key: str, what: str) -> list[str]:
    v = m.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        raise ConfigError(f"model.{key}: expected a list of {what}, got {v!r}")
    return v


def _declared_calls(runs: list[RunSpec], tools: list[Tool], read_only: list[str],
                    unknown: list[str]) -> None:
    """Every name a plan calls is declared: by a [[tools]] table, as a builtin (a writer of
    14.5, or one of ``model.read_only_builtins``), or as a deliberately unknown name
    (``model.unknown_tools``, which resolves ``non_idempotent_write``, 14.2). Any other name
    is a typo: one line with the nearest declared name."""
    writers = sorted(set(read_only) & set(BUILTIN_WRITERS))
    if writers:
        raise ConfigError(f"model.read_only_builtins: {writers[0]!r} is a builtin writer "
                          f"({BUILTIN_WRITERS[writers[0]]}, RUNTIME 14.5); remove it from the list")
    known = {t.name for t in tools} | set(BUILTIN_WRITERS) | set(read_only)
    clash = sorted(set(unknown) & known)
    if clash:
        raise ConfigError(f"model.unknown_tools: {clash[0]!r} is declared (a [[tools]] table or a "
                          "builtin); an unknown name is one no catalogue knows")
    for n, r in enumerate(runs):
        for k, a in enumerate(r.plan):
            for c in a.calls:
                if c in known or c in unknown:
                    continue
                near = difflib.get_close_matches(c, sorted(known | set(unknown)), n=1)
                hint = f"did you mean {near[0]!r}? " if near else ""
                raise ConfigError(
                    f"runs[{n}].plan[{k}].tools: {c!r} is not declared; {hint}declare it in a "
                    "[[tools]] table, in model.read_only_builtins, or (to model a stale or removed "
                    "name, which resolves non_idempotent_write) in model.unknown_tools")


def _answer(a: Any, where: str) -> Answer:
    _expect(a, dict, where, "a table with one of tools, final, fail, guardrail")
    if len(a) != 1:
        raise ConfigError(f"{where}: give exactly one of tools, final, fail, guardrail")
    (k, v), = a.items()
    if k == "tools":
        _expect(v, list, where + ".tools", "a list of tool names")
        return Answer("tools", tuple(_expect(x, str, where + ".tools[]", "a tool name") for x in v))
    if k == "final":
        if v not in FINAL_VALUES:
            raise ConfigError(f"{where}.final: {v!r}; use completed, budget_exhausted or context_truncated")
        return Answer("final", (), v)
    if k == "fail":
        if v not in FAILURE_CLASSES:
            raise ConfigError(f"{where}.fail: {v!r}; use one of {', '.join(FAILURE_CLASSES)}")
        return Answer("fail", (), v)
    if k == "guardrail":
        if v not in GUARDRAIL_VALUES:
            raise ConfigError(f"{where}.guardrail: {v!r}; use violation or approval_required")
        return Answer("guardrail", (), v)
    raise ConfigError(f"{where}.{k}: unknown answer; use tools, final, fail or guardrail")


def _row(d: Any, where: str) -> Row:
    _expect(d, dict, where.rstrip("."), "a table of row fields")
    check_keys(d, ROW_KEYS, where)
    if "status" in d and d["status"] not in STATUSES:
        raise ConfigError(f"{where}status: {d['status']!r}; use one of {', '.join(STATUSES)}")
    for k, v in d.items():
        typ = type(getattr(Row(), k))
        _expect(v, typ, where + k, typ.__name__)
    return replace(Row(), **d)


def initial_world(spec: Config, fault_budget: int) -> World:
    n = len(spec.runs)
    rows = tuple(r.initial for r in spec.runs)
    return store.migrated(World(
        clock=0,
        rows=rows,
        started=tuple(r.initial is not None for r in spec.runs),
        cancels=(0,) * n,
        decisions=(0,) * n,
        resumes=(0,) * n,
        faults=fault_budget,
        config=spec,
    ))


def load_world(data: dict[str, Any], policy_override: str | None = None) -> World:
    spec, budget = parse_config(data, policy_override)
    return initial_world(spec, budget)


_IO_FIXES: dict[type[OSError], tuple[str, str]] = {
    FileNotFoundError: ("no such file or directory", "check the path"),
    IsADirectoryError: ("is a directory", "give the path of a file"),
    NotADirectoryError: ("a component of the path is not a directory", "check the path"),
    PermissionError: ("permission denied", "check the file's permissions or choose another path"),
    FileExistsError: ("already exists", "remove it or choose another path"),
}


def io_error_message(path: Any, e: OSError) -> str:
    """``PATH: <what>; <fix>`` for an OSError about ``path`` (one line, no traceback)."""
    for typ, (what, fix) in _IO_FIXES.items():
        if isinstance(e, typ):
            return f"{path}: {what}; {fix}"
    what = (e.strerror or type(e).__name__).lower()
    return f"{path}: {what}; check the path and the device"


def read_toml(path: str) -> dict[str, Any]:
    """The parsed TOML table at ``path``. Every way the file can be unusable (missing, a
    directory, unreadable, not UTF-8 text, not TOML) is one ``ConfigError`` line naming the
    path and the fix."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file; give the path of a TOML file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory; give the path of a TOML file") from None
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {e.start}); give the path of a TOML file"
        ) from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML ({e}); fix the syntax") from None
    except OSError as e:  # PermissionError, NotADirectoryError, an I/O error of the device
        raise ConfigError(io_error_message(path, e)) from None
