"""Scopes: verdicts over every small configuration of a declared scope, not one hand-picked bound.

A bounded checker cannot say "the runtime has this guarantee"; it can say "no counterexample
in ANY configuration of this declared scope" (the small-scope hypothesis: most bugs show up
in some small instance). A scope is data, a TOML file under spec/scopes/:

    description = "..."
    configs = ["small"]                    # members kept as they are (spec/configs names, paths)

    [constants]                            # the short constants of every generated member
    LEASE_SECONDS = 1

    [tools.nonidem]                        # the catalogue: a key -> a [[tools]] table
    name = "create_page_draft"
    effect = "non_idempotent_write"

    [shapes.queued]                        # run shapes: a [[runs]] table without id and plan
    entry = "queued"
    decisions = ["approve"]

    [ends]                                 # how a run's plan ends, after its tool round
    completed = { final = "completed" }

    [principals]                           # model/config.py's [principals] (RUNTIME 16.18),
    owner = { kind = "user" }              # given to every member whose runs' shapes name a
    mallory = { kind = "user" }            # principal (``owner`` or ``requests``)

    generate = ["values", "decisions", "pairs"]  # members built from spec/dimensions.py's
                                           # table: every value of every dimension, every
                                           # sequence of two decisions, every pair on the
                                           # write path (see that module)

    [[product]]                            # one cartesian product of the dimensions
    name = "queued"
    workers = [1, 2]
    reapers = [1, 2]                       # reapers racing on the store (default [1])
    transport = ["async", "sync"]
    runs = [["queued"], ["queued", "queued"]]   # the shapes of one member's runs
    tools = ["read", "nonidem"]            # the tool each run calls (every run the same one)
    ends = ["completed"]
    faults = ["crash", "pause"]            # the fault kinds the fault sets are drawn from,
                                           # or "every" (every kind model/steps.py declares)
    faults_except = ["pause"]              # less these (optional)
    fault_sets = ["singles", "pairs"]      # none | singles | pairs | all
    fault_budget = [1, 2]
    provider_faults = ["rateLimit", "auth"]  # the classes of provider_error, when drawn
    horizon = [4]

A member is one configuration in model/config.py's format. Generation expands every product,
then drops the members that are **equivalent** to another one (the same configuration up to
the order of its runs and of its catalogue, and run ids: a renaming) and those **subsumed**
by another member: the same configuration with a subset of its fault kinds, a subset of its
provider classes and store statements, and at most its fault budget. Every history of the
smaller one is a history of the larger (a fault only adds branches, and the budget only
bounds how many are taken), so it reaches no state the larger does not reach, and a
counterexample of the smaller one is one of the larger, no longer
(tests/test_scope.py compares reachable states on pairs of members).

:func:`run_scope` checks every (member, policy) as an independent task, in this process,
on local processes (``jobs``) or on a Dask cluster, keeps each result in a cache keyed by
(member, policy, properties, bound, model version), and :func:`merge` turns them into one
verdict per policy and property: holds across the scope, or the shortest counterexample over
all members with the member that produced it.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from failclosed.model.config import ConfigError, UsageError, check_keys, parse_config, read_toml
from failclosed.model.state import ASYNC, NO_TRANSPORT, SYNC
from failclosed.model.steps import fault_kinds
from failclosed.model.vocab import FaultKind
from failclosed.spec import pool
from failclosed.spec.checker import (
    ConfigPart,
    check,
    load_config,
    reductions_union,
    resolve_properties,
)
from failclosed.spec.pool import run_local, worker_share
from failclosed.spec.search import _maxrss_mib
from failclosed.spec.seen import resident_mib
from failclosed.spec.vocab import Reduction

SCOPE_DIR = Path(__file__).resolve().parent / "scopes"
_ROOT = Path(__file__).resolve().parent.parent

__all__ = [
    "SCOPE_DIR",
    "Member",
    "Scope",
    "ScopeResult",
    "TaskResult",
    "expand",
    "load_scope",
    "merge",
    "model_version",
    "reduce_members",
    "run_scope",
    "subsumes",
]

FAULT_SET_KINDS = ("none", "singles", "pairs", "all")
TOP_KEYS = {"description", "configs", "constants", "tools", "shapes", "ends", "product", "principals",
            "generate"}
PRODUCT_KEYS = {"name", "workers", "reapers", "transport", "runs", "tools", "ends", "faults", "faults_except", "fault_sets",
                "fault_budget", "provider_faults", "fault_ops", "horizon", "observer", "cancels"}


# =========================================================================================
# the scope as data
# =========================================================================================
@dataclass(frozen=True)
class Member:
    """One configuration of a scope: ``data`` is a model/config.py table."""

    name: str
    data: dict[str, Any] = field(hash=False, compare=False)
    origin: str  # "product NAME" or "config NAME"

    @property
    def key(self) -> str:
        """Equal for members that are the same configuration up to a renaming."""
        return _canonical_json(self.data)


@dataclass
class Scope:
    name: str
    path: str
    description: str
    members: list[Member]  # after reduction, in generation order
    generated: int  # before reduction
    equivalent: int  # dropped as a renaming of another member
    subsumed: int  # dropped as subsumed by another member
    by_origin: dict[str, int]  # members kept per product / config


def _err(where: str, msg: str) -> ConfigError:
    return ConfigError(f"{where}: {msg}")


def _list_of(v: Any, where: str, what: str, typ: type = str) -> list[Any]:
    if not isinstance(v, list) or not v or not all(isinstance(x, typ) and not isinstance(x, bool)
                                                   for x in v):
        raise _err(where, f"expected a non-empty list of {what}, got {v!r}")
    return v


def resolve_scope_path(scope: str | Path) -> Path:
    """``standard`` / ``quick`` (spec/scopes) or a path."""
    s = str(scope)
    p = Path(s)
    if p.suffix or p.exists():
        return p
    p = SCOPE_DIR / f"{s}.toml"
    if not p.exists():
        known = ", ".join(sorted(x.stem for x in SCOPE_DIR.glob("*.toml")))
        raise ConfigError(f"scope: unknown scope {s!r}; use one of {known} or a FILE")
    return p


def load_scope(scope: str | Path, *, reduce: bool = True) -> Scope:
    """Read, validate and expand a scope (one ConfigError line on bad input)."""
    path = resolve_scope_path(scope)
    data = read_toml(str(path))
    where = path.name
    check_keys(data, TOP_KEYS, f"{where}: ")
    members = expand(data, where, path.parent)
    generated = len(members)
    if reduce:
        kept, eq, sub = reduce_members(members)
    else:
        kept, eq, sub = members, 0, 0
    by_origin: dict[str, int] = {}
    for m in kept:
        by_origin[m.origin] = by_origin.get(m.origin, 0) + 1
    return Scope(path.stem, str(path), str(data.get("description", "")), kept, generated, eq, sub,
                 by_origin)


def expand(data: dict[str, Any], where: str, base: Path) -> list[Member]:
    """Every member the scope declares, before reduction, in a fixed order."""
    out: list[Member] = []
    configs = data.get("configs", [])
    if "configs" in data:
        _list_of(configs, f"{where}: configs", "configuration names or paths")
    for c in configs:
        p = base / c if (base / c).suffix == ".toml" and (base / c).exists() else c
        cname, parts = load_config(p)
        for part in parts:
            out.append(Member(part.name, dict(part.data), f"config {cname}"))
    constants = data.get("constants", {})
    if not isinstance(constants, dict):
        raise _err(f"{where}: constants", "expected a table of constants")
    tools = _table_of_tables(data.get("tools", {}), f"{where}: tools")
    for tk, t in tools.items():
        if not isinstance(t.get("name"), str) or not t["name"]:
            raise _err(f"{where}: tools.{tk}.name", "missing or not a string; every tool needs a "
                       "name, e.g. name = \"lookup_page\"")
    shapes = _table_of_tables(data.get("shapes", {}), f"{where}: shapes")
    ends = _table_of_tables(data.get("ends", {}), f"{where}: ends")
    principals = _table_of_tables(data.get("principals", {}), f"{where}: principals")
    products = data.get("product", [])
    if not isinstance(products, list):
        raise _err(f"{where}: product", "expected an array of [[product]] tables")
    names = set()
    for n, prod in enumerate(products):
        pw = f"{where}: product[{n}]"
        if not isinstance(prod, dict):
            raise _err(pw, "expected a table")
        check_keys(prod, PRODUCT_KEYS, f"{pw}.")
        pname = prod.get("name", f"p{n + 1}")
        if pname in names:
            raise _err(f"{pw}.name", f"duplicate product name {pname!r}; give each its own")
        names.add(pname)
        out.extend(_expand_product(prod, pname, pw, constants, tools, shapes, ends, principals))
    out.extend(_generated(data, where))
    if not out:
        raise _err(where, "declares no member: add configs = [...] or a [[product]]")
    return out


def _generated(data: dict[str, Any], where: str) -> list[Member]:
    """``generate = ["values", "decisions", "pairs"]``: the members spec/dimensions.py's
    generators build from the dimension table."""
    # the dimension table costs 15 to 30 ms to import: paid only by a scope that generates
    from failclosed.spec.dimensions import generate

    if "generate" not in data:
        return []
    names = _list_of(data["generate"], f"{where}: generate", "generator names")
    out = []
    for name, d in generate(names, f"{where}: generate"):
        d = d | {"description": f"scope member {name}"}
        out.append(Member(name, d, f"generate {name.split(':')[0]}"))
    return out


def _table_of_tables(v: Any, where: str) -> dict[str, dict[str, Any]]:
    if not isinstance(v, dict) or not all(isinstance(x, dict) for x in v.values()):
        raise _err(where, "expected a table of tables ([NAME.key] = ...)")
    return v


def _expand_product(prod: dict[str, Any], pname: str, pw: str, constants: dict[str, Any],
                    tools: dict[str, dict], shapes: dict[str, dict], ends: dict[str, dict],
                    principals: dict[str, dict] | None = None) -> list[Member]:
    workers, transports, runs, tool_keys, end_keys, fault_sets, budgets, horizons = (
        _product_axes(prod, pw, tools, shapes, ends))
    reapers = _list_of(prod.get("reapers", [1]), f"{pw}.reapers", "reaper counts", int)
    pf = prod.get("provider_faults", [])
    out = []
    for w, tr, shape_names, tk, ek, fs, b, h, nr in itertools.product(
            workers, transports, runs, tool_keys, end_keys, fault_sets, budgets, horizons,
            reapers):
        if not fs:
            b = 0
        model: dict[str, Any] = {"workers": w, "transport": tr, "faults": list(fs),
                                 "fault_budget": b, "horizon": h}
        if nr != 1:  # one reaper is the model's default (and every member's name before)
            model["reapers"] = nr
        if FaultKind.PROVIDER_ERROR in fs:
            model["provider_faults"] = list(pf)
        if "fault_ops" in prod:
            model["fault_ops"] = list(prod["fault_ops"])
        run_tables = []
        for k, s in enumerate(shape_names):
            r = {"id": f"r{k + 1}", **shapes[s]}
            r["plan"] = [{"tools": [tools[tk]["name"]]}, dict(ends[ek])]
            run_tables.append(r)
        data = {"policy": "current", "constants": dict(constants), "model": model,
                "tools": [dict(tools[tk])], "runs": run_tables}
        if principals and any("owner" in r or "requests" in r for r in run_tables):
            data["principals"] = {k: dict(v) for k, v in principals.items()}
        fault_txt = "+".join(fs) if fs else "nofault"
        name = (f"{pname}:w{w}-{tr}-{'+'.join(shape_names)}-{tk}-{ek}-{fault_txt}-b{b}"
                + (f"-h{h}" if len(horizons) > 1 else "") + (f"-r{nr}" if nr != 1 else ""))
        data["description"] = f"scope member {name}"
        try:
            parse_config(data)
        except ConfigError as e:
            raise _err(pw, f"generates an invalid configuration {name}: {e}") from None
        out.append(Member(name, data, f"product {pname}"))
    return out


def _product_axes(prod: dict[str, Any], pw: str, tools: dict[str, dict],
                  shapes: dict[str, dict], ends: dict[str, dict]) -> tuple[list, ...]:
    """The validated axes of a [[product]]: workers, transports, runs (lists of shape names),
    tool keys, end keys, fault sets, budgets, horizons."""
    workers = _list_of(prod.get("workers", [1]), f"{pw}.workers", "worker counts", int)
    transports = _list_of(prod.get("transport", ["async"]), f"{pw}.transport", "transports")
    runs = prod.get("runs")
    if not isinstance(runs, list) or not runs or not all(isinstance(r, list) and r for r in runs):
        raise _err(f"{pw}.runs", "expected a list of lists of shape names, e.g. [[\"queued\"]]")
    _declared([s for r in runs for s in r], shapes, f"{pw}.runs", "shape")
    tool_keys = _list_of(prod.get("tools"), f"{pw}.tools", "tool keys")
    _declared(tool_keys, tools, f"{pw}.tools", "tool")
    end_keys = _list_of(prod.get("ends", list(ends)[:1] or ["?"]), f"{pw}.ends", "end keys")
    _declared(end_keys, ends, f"{pw}.ends", "end")
    kinds = _fault_kinds(prod, pw)
    set_kinds = _list_of(prod.get("fault_sets", ["singles"] if kinds else ["none"]),
                         f"{pw}.fault_sets", "of none, singles, pairs, all")
    for k in set_kinds:
        if k not in FAULT_SET_KINDS:
            raise _err(f"{pw}.fault_sets", f"{k!r}; use {', '.join(FAULT_SET_KINDS)}")
    for key in ("provider_faults", "fault_ops"):
        if key in prod:
            _list_of(prod[key], f"{pw}.{key}", "names")
    budgets = _list_of(prod.get("fault_budget", [1]), f"{pw}.fault_budget", "budgets", int)
    horizons = _list_of(prod.get("horizon", [4]), f"{pw}.horizon", "horizons", int)
    return (workers, transports, runs, tool_keys, end_keys, _fault_sets(list(kinds), set_kinds),
            budgets, horizons)


EVERY = "every"  # ``faults = "every"``: every fault kind the model declares


def _fault_kinds(prod: dict[str, Any], pw: str) -> list[str]:
    """The fault kinds a product's fault sets are drawn from: ``faults = "every"`` (every
    kind model/steps.py declares, in its order, so a new kind is explored at once) or a list
    of kinds, less those of ``faults_except``."""
    kinds = prod.get("faults", [])
    if kinds == EVERY:
        kinds = list(fault_kinds())
    elif kinds:
        _list_of(kinds, f"{pw}.faults", f'fault kinds (or "{EVERY}")')
        _known_kinds(kinds, f"{pw}.faults")
    if "faults_except" in prod:
        drop = _list_of(prod["faults_except"], f"{pw}.faults_except", "fault kinds")
        _known_kinds(drop, f"{pw}.faults_except")
        kinds = [k for k in kinds if k not in drop]
        if not kinds:
            raise _err(f"{pw}.faults_except", "leaves no fault kind; drop faults_except or faults")
    return list(kinds)


def _known_kinds(kinds: list[str], where: str) -> None:
    for k in kinds:
        if k not in fault_kinds():
            near = difflib.get_close_matches(k, fault_kinds(), n=1)
            hint = f"did you mean {near[0]!r}?" if near else f"use one of {', '.join(fault_kinds())}"
            raise _err(where, f"unknown fault kind {k!r}; {hint}")


def _declared(keys: list[str], table: dict[str, dict], where: str, what: str) -> None:
    """Every key names an entry of ``table``, else one error naming the first that does not."""
    for k in keys:
        if not isinstance(k, str) or k not in table:
            raise _err(where, f"unknown {what} {k!r}; declared: {', '.join(table) or 'none'}")


def _fault_sets(kinds: list[str], set_kinds: Sequence[str]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for k in set_kinds:
        if k == "none":
            out.append(())
        elif k == "singles":
            out.extend((f,) for f in kinds)
        elif k == "pairs":
            out.extend(itertools.combinations(kinds, 2))
        elif k == "all" and kinds:
            out.append(tuple(kinds))
    seen: set[tuple[str, ...]] = set()
    return [s for s in out if not (s in seen or seen.add(s))]


# =========================================================================================
# reduction: renamings and subsumption
# =========================================================================================
_FAULT_FIELDS = ("faults", "fault_budget", "provider_faults", "fault_ops")


def _normal(data: dict[str, Any]) -> dict[str, Any]:
    """The member without names: runs in a canonical order and renumbered, tools sorted,
    fault lists as sets (provider_error implied by provider classes), no description."""
    d = {k: v for k, v in data.items() if k != "description"}
    model = dict(d.get("model", {}))
    faults = set(model.get("faults", []))
    pf = sorted(set(model.get("provider_faults", [])))
    if pf:
        faults.add(FaultKind.PROVIDER_ERROR)
    elif FaultKind.PROVIDER_ERROR in faults:
        faults.discard(FaultKind.PROVIDER_ERROR)  # no class to fail with: never enabled
    model["faults"] = sorted(faults)
    model["provider_faults"] = pf
    if model.get("fault_ops") is not None:
        model["fault_ops"] = sorted(set(model["fault_ops"]))
    if not faults:
        model["fault_budget"] = 0
    w = model.get("workers", 1)
    model["workers"] = len(w) if isinstance(w, list) else w
    if model.get("reapers", 1) == 1:
        model.pop("reapers", None)  # the default count: the same member
    model.setdefault("transport", ASYNC)
    if model["transport"] in (SYNC, NO_TRANSPORT):
        # No message is ever sent on sync (dispatch runs the pick-up nested in the
        # dispatching process) nor without a transport (6.4), so workers never act: their
        # number is a renaming.
        model["workers"] = 1
    d["model"] = model
    d["tools"] = sorted(json.dumps(t, sort_keys=True) for t in d.get("tools", []))
    runs = {r.get("id"): json.dumps({k: v for k, v in r.items() if k != "id"}, sort_keys=True)
            for r in d.get("runs", [])}
    d["runs"] = sorted(runs.values())
    if model.get("operator_cancels"):
        # the operator's cancel command names runs by id: name each by what it is instead,
        # so a renaming keeps its commands and members that cancel different runs differ
        model["operator_cancels"] = [runs.get(x, x) if x else x for x in model["operator_cancels"]]
    return d


def _canonical_json(data: dict[str, Any]) -> str:
    return json.dumps(_normal(data), sort_keys=True)


def _fault_free_key(n: dict[str, Any]) -> str:
    m = {k: v for k, v in n["model"].items() if k not in _FAULT_FIELDS}
    return json.dumps({**n, "model": m}, sort_keys=True)


def subsumes(big: dict[str, Any], small: dict[str, Any]) -> bool:
    """``big`` reaches every state ``small`` reaches: the same configuration with a superset
    of its fault kinds, provider classes and store statements, and at least its budget."""
    b, s = _normal(big), _normal(small)
    return _fault_free_key(b) == _fault_free_key(s) and _faults_cover(b["model"], s["model"])


def _faults_cover(bm: dict[str, Any], sm: dict[str, Any]) -> bool:
    """The fault part of :func:`subsumes`, on two normal forms' ``model`` tables."""
    if not set(sm["faults"]) <= set(bm["faults"]):
        return False
    if not set(sm["provider_faults"]) <= set(bm["provider_faults"]):
        return False
    if sm.get("fault_budget", 0) > bm.get("fault_budget", 0) and sm["faults"]:
        return False
    bo, so = bm.get("fault_ops"), sm.get("fault_ops")  # None: every statement
    if FaultKind.STORE_ERROR in sm["faults"] and bo is not None:  # fault_ops restricts store_error only
        return so is not None and set(so) <= set(bo)
    return True


def reduce_members(members: Sequence[Member]) -> tuple[list[Member], int, int]:
    """(kept, dropped as renamings, dropped as subsumed); the first of equals is kept, and a
    member is dropped for the largest members that subsume it (never two for each other)."""
    seen: dict[str, Member] = {}
    for m in members:
        seen.setdefault(m.key, m)
    unique = list(seen.values())
    equivalent = len(members) - len(unique)
    groups: dict[str, list[tuple[Member, dict[str, Any]]]] = {}
    for m in unique:  # only members equal but for their faults can subsume one another
        n = _normal(m.data)
        groups.setdefault(_fault_free_key(n), []).append((m, n["model"]))
    dropped: set[int] = set()  # by identity: two members may share a name, never an object
    for group in groups.values():
        for m, mm in group:
            for o, om in group:
                if o is m or id(o) in dropped:
                    continue
                if _faults_cover(om, mm):
                    dropped.add(id(m))
                    break
    kept = [m for m in unique if id(m) not in dropped]
    return kept, equivalent, len(unique) - len(kept)


# =========================================================================================
# one task: a member under a policy
# =========================================================================================
# What a cached verdict depends on: the semantics (every module of model/), the checker and
# the properties; and the layout of a cached result (RESULT_FORMAT). The command line, the
# progress display and the orchestration here do not change a verdict.
VERDICT_SOURCES = ("model", "spec/search.py", "spec/exploration.py", "spec/liveness.py",
                   "spec/seen.py", "spec/checker.py", "spec/declare.py", "spec/properties.py",
                   "spec/coverage.py")
RESULT_FORMAT = 1


def model_version() -> str:
    """A hash of the sources a verdict depends on (VERDICT_SOURCES): a cached result is
    reused only while none of them changed."""
    h = hashlib.sha256(f"format {RESULT_FORMAT}".encode())
    for src in VERDICT_SOURCES:
        p = _ROOT / src
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            h.update(f.relative_to(_ROOT).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


@dataclass
class TaskResult:
    """The verdicts of one member under one policy (JSON-able: the cache keeps it)."""

    member: str
    policy: str
    states: int
    transitions: int
    seconds: float
    truncated: bool
    violations: dict[str, dict[str, Any]]  # property -> {length, kind, explanation}
    cached: bool = False
    reductions: tuple[str, ...] = ()  # what the search ran under (CheckResult.reductions)
    peak_rss_mib: float = 0.0  # the member's own peak resident size (check_member)
    seen: str = ""  # its seen set, if it left memory (spec/seen.py)

    def to_json(self) -> dict[str, Any]:
        return {"member": self.member, "policy": self.policy, "states": self.states,
                "transitions": self.transitions, "seconds": round(self.seconds, 3),
                "truncated": self.truncated, "violations": self.violations,
                "reductions": list(self.reductions),
                "peak_rss_mib": round(self.peak_rss_mib, 1), "seen": self.seen}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TaskResult:
        return cls(d["member"], d["policy"], d["states"], d["transitions"], d["seconds"],
                   d["truncated"], d["violations"], reductions=tuple(d.get("reductions", ())),
                   peak_rss_mib=d.get("peak_rss_mib", 0.0), seen=d.get("seen", ""))


def check_member(name: str, data: dict[str, Any], policy: str,
                 properties: Sequence[str] | None = None,
                 max_states: int | None = None,
                 on_progress: Callable[[int, int], None] | None = None,
                 memory_budget_mib: float | None = None, logs: bool = True) -> TaskResult:
    """Check one member under one policy (no witnesses, no coverage: verdicts only).
    ``on_progress(stored, expanded)``: the running search's progress (spec.engine.explore);
    ``logs``: under the log order (spec/symmetry.py; False: each log in landing order);
    ``memory_budget_mib``: what its search may store in memory (spec/seen.py)."""

    before = _maxrss_mib()
    res = check(policy, ConfigPart(name, "", data), properties, witnesses=False,
                coverage=False, max_states=max_states, on_progress=on_progress,
                logs=logs, memory_budget_mib=memory_budget_mib)
    after = _maxrss_mib()
    # the process's peak, if this member raised it (then it is the member's own); else the
    # largest resident size sampled during its searches (a worker that ran a larger one)
    peak = after if after > before else max(res.search_peak_rss_mib, resident_mib())
    viol = {
        n: {"length": r.trace_length, "kind": r.kind, "explanation": r.explanation}
        for n, r in res.properties.items() if not r.holds
    }
    return TaskResult(name, policy, res.states, res.transitions, res.seconds,
                      not res.complete, viol, reductions=res.reductions, peak_rss_mib=peak,
                      seen="; ".join(p.stats.seen for p in res.parts if p.stats.seen))


def _task(args: tuple[str, dict[str, Any], str, tuple[str, ...] | None, int | None,
                      float | None, bool]) -> dict[str, Any]:
    name, data, policy, props, max_states, budget, logs = args
    queue = pool.PROGRESS[0]
    report = None
    if queue is not None:
        def report(stored: int, expanded: int) -> None:
            queue.put(((name, policy), stored))
    return check_member(name, data, policy, props, max_states, report, budget,
                        logs).to_json()


CACHE_VARIABLE = "FAILCLOSED_CACHE"  # the cache's root (README, the notebooks, docs/SCOPES.md)
OLD_CACHE_VARIABLE = "FAILCLOSED_CACHE_DIR"  # its former second name: refused, with the hint


class Cache:
    """One JSON file per (member, policy, properties, bound, reduction, model version) under
    ``root``."""

    def __init__(self, root: Path | None, version: str) -> None:
        self.root = root
        self.version = version

    @staticmethod
    def default_root() -> Path:
        """``$FAILCLOSED_CACHE`` (the one variable naming the cache: the notebooks' sweeps
        use it too), else ``$XDG_CACHE_HOME/failclosed`` or ``~/.cache/failclosed``. The old
        ``FAILCLOSED_CACHE_DIR`` is refused with one line saying which to set."""
        if os.environ.get(OLD_CACHE_VARIABLE) is not None:
            raise UsageError(f"{OLD_CACHE_VARIABLE} is no longer read; set {CACHE_VARIABLE} "
                             f"instead (one variable names the cache): export "
                             f"{CACHE_VARIABLE}={os.environ[OLD_CACHE_VARIABLE]}")
        env = os.environ.get(CACHE_VARIABLE)
        if env:
            return Path(env)
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "failclosed"

    def key(self, m: Member, policy: str, props: Sequence[str] | None,
            max_states: int | None, reductions: dict[str, bool] | None = None) -> str:
        """``reductions``: the search's reduction switches, on or off by Reduction
        (``{Reduction.LOG_ORDER: False}``: without the log order); a result under
        other switches is another entry."""
        raw = json.dumps([self.version, m.key, policy, sorted(props or []), max_states,
                          dict(sorted((reductions or {}).items()))])
        return hashlib.sha256(raw.encode()).hexdigest()[:32]

    def path(self, key: str) -> Path | None:
        return None if self.root is None else self.root / "scope" / key[:2] / f"{key}.json"

    def get(self, key: str, member: str) -> TaskResult | None:
        p = self.path(key)
        if p is None or not p.exists():
            return None
        try:
            r = TaskResult.from_json(json.loads(p.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # a damaged entry is recomputed
        r.member, r.cached = member, True
        return r

    def put(self, key: str, r: TaskResult) -> None:
        p = self.path(key)
        if p is None:
            return
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps(r.to_json()))
        tmp.replace(p)  # atomic: an interrupted run leaves no half entry


# =========================================================================================
# running a scope
# =========================================================================================
def _cost(m: Member) -> tuple[int, ...]:
    """A guess at a member's size, largest first: the pool finishes sooner (LPT order)."""
    md = m.data.get("model", {})
    return (m.origin.startswith("config"), len(m.data.get("runs", [])), md.get("fault_budget", 0),
            len(md.get("faults", [])), md.get("workers", 1))


def run_scope(scope: Scope, policies: Sequence[str], properties: Sequence[str] | None = None,
              *, jobs: int = 1, dask: str | None = None, max_states: int | None = None,
              cache: Cache | None = None,
              on_result: Callable[[TaskResult], None] | None = None,
              on_running: Callable[[int], None] | None = None,
              memory_budget_mib: float | None = None, logs: bool = True) -> list[TaskResult]:
    """Every (member, policy) checked once; cached results are not recomputed. ``on_result``
    sees each result as it arrives (progress); the list comes back in task order.
    ``on_running(states)``: the states stored so far by the searches still running (every
    few thousand states of each, and at least every few seconds on local processes, so a
    progress display can show life while a large member runs); Dask tasks report none.
    ``logs``: every search under the log order (spec/symmetry.py; False: without);
    ``memory_budget_mib``: what the searches may store in memory at once: each of the
    ``jobs`` local workers gets ``memory_budget_mib / jobs`` (a Dask task, the whole of it:
    the cluster sizes its own workers); None: no bound (spec/seen.py)."""
    props = tuple(properties) if properties else None
    tasks = [(m, p) for p in policies for m in scope.members]
    results: dict[int, TaskResult] = {}
    todo: list[int] = []
    keys: dict[int, str] = {}
    for i, (m, p) in enumerate(tasks):
        if cache is not None:
            switches = {Reduction.LOG_ORDER: logs}
            keys[i] = cache.key(m, p, props, max_states, switches)
            hit = cache.get(keys[i], m.name)
            if hit is not None:
                results[i] = hit
                if on_result:
                    on_result(hit)
                continue
        todo.append(i)
    todo.sort(key=lambda i: _cost(tasks[i][0]), reverse=True)

    running: dict[tuple[str, str], int] = {}  # (member, policy) -> states stored so far
    finished: set[tuple[str, str]] = set()  # a late report of one of these is dropped

    def progress(key: tuple[str, str] | None, stored: int) -> None:
        if key is not None and key not in finished:
            running[key] = stored
        if on_running is not None:
            on_running(sum(running.values()))

    def done(i: int, d: dict[str, Any]) -> None:
        r = TaskResult.from_json(d)
        if cache is not None:
            cache.put(keys[i], r)
        results[i] = r
        finished.add((tasks[i][0].name, tasks[i][1]))
        if running.pop((tasks[i][0].name, tasks[i][1]), None) is not None and on_running:
            on_running(sum(running.values()))
        if on_result:
            on_result(r)

    share = worker_share(memory_budget_mib, 1 if dask else min(jobs, len(todo)))
    args = {i: (tasks[i][0].name, tasks[i][0].data, tasks[i][1], props, max_states, share, logs)
            for i in todo}
    if dask:
        _run_dask(dask, args, done)
    elif jobs <= 1 or len(todo) <= 1:
        for i in todo:
            a = args[i]
            key = (a[0], a[2])
            done(i, check_member(*a[:5], on_progress=lambda n, _e, k=key: progress(k, n),
                                 memory_budget_mib=a[5], logs=a[6]).to_json())
    else:
        run_local(jobs, args, done, _task,
                  on_progress=progress if on_running is not None else None)
    return [results[i] for i in range(len(tasks))]


def dask_client(address: str, timeout: float = 5.0) -> Any:
    """A connected ``distributed.Client``, or one UsageError line (bad or unreachable
    address) within ``timeout`` seconds."""
    try:
        from distributed import Client  # dask: optional and heavy, only for --dask
    except ImportError:
        raise UsageError("--dask: dask.distributed is not installed; pip install 'failclosed[dask]'") from None
    if not isinstance(address, str) or ":" not in address:
        raise UsageError(f"--dask: {address!r} is not a scheduler address; give HOST:PORT or tcp://HOST:PORT")
    try:
        return Client(address, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as e:
        raise UsageError(f"--dask: no scheduler reachable at {address} ({type(e).__name__}); "
                         "start one with `dask scheduler` or check the address") from None


def _run_dask(address: str, args: dict[int, tuple], done: Callable[[int, dict[str, Any]], None]) -> None:
    from distributed import as_completed  # dask: optional and heavy, only for --dask

    client = dask_client(address)
    try:
        futs = {client.submit(_task, a, pure=False, key=f"failclosed-scope-{i}-{os.getpid()}"): i
                for i, a in args.items()}
        for f in as_completed(futs):
            done(futs[f], f.result())
    finally:
        client.close()


# =========================================================================================
# merging
# =========================================================================================
@dataclass
class Verdict:
    """One (policy, property) over the scope."""

    holds: bool
    length: int | None = None  # the shortest counterexample over all members
    member: str | None = None  # the member that produced it
    explanation: str = ""
    violating: int = 0  # members with a counterexample
    kind: str = "safety"


@dataclass
class ScopeResult:
    scope: Scope
    policies: list[str]
    properties: list[str]
    verdicts: dict[str, dict[str, Verdict]]  # policy -> property -> verdict
    results: list[TaskResult]
    seconds: float

    @property
    def states(self) -> int:
        return sum(r.states for r in self.results)

    @property
    def truncated(self) -> list[str]:
        return sorted({r.member for r in self.results if r.truncated})

    @property
    def cached(self) -> int:
        return sum(r.cached for r in self.results)

    @property
    def reductions(self) -> tuple[str, ...]:
        """The reductions any member's search ran under (spec.vocab.Reduction)."""
        return reductions_union(r.reductions for r in self.results)

    def reach(self, policy: str | None = None) -> str:
        """What a ``holds`` here means (under ``policy``, or all): never a bare one."""
        rs = [r for r in self.results if policy is None or r.policy == policy]
        n = len(self.scope.members)
        cut = {r.member for r in rs if r.truncated}
        txt = f"scope {self.scope.name}: {n:,} configurations, {sum(r.states for r in rs):,} states"
        # each search identifies states by 64-bit fingerprints (spec.engine): the chance
        # that one of them took two states for one, summed over the searches
        p = sum(r.states * (r.states - 1) for r in rs) / 2.0 ** 65
        txt += f" (fingerprint collision probability {p:.0e})"
        if cut:
            txt += f"; {len(cut)} truncated (holds up to the bound there)"
        reds = reductions_union(r.reductions for r in rs)
        return txt + f"; reductions: {', '.join(reds) or 'none'}"


    def cell(self, policy: str, prop: str) -> dict[str, Any]:
        v = self.verdicts[policy][prop]
        d: dict[str, Any] = {"holds": v.holds, "trace_length": v.length}
        if not v.holds:
            d["config"] = v.member
            d["violating_configurations"] = v.violating
        return d

    def to_json(self) -> dict[str, Any]:
        s = self.scope
        return {
            "scope": s.name,
            "configurations": len(s.members),
            "generated": s.generated,
            "dropped_equivalent": s.equivalent,
            "dropped_subsumed": s.subsumed,
            "states": self.states,
            "seconds": round(self.seconds, 3),
            "truncated": self.truncated,
            "complete": not self.truncated,
            "reductions": list(self.reductions),
            "properties": self.properties,
            "policies": {p: {n: self.cell(p, n) for n in self.properties} for p in self.policies},
            "members": [self.member_json(r) for r in self.results],
        }

    @staticmethod
    def member_json(r: TaskResult) -> dict[str, Any]:
        """One (member, policy) search's figures: states, seconds, peak RSS, seen set."""
        return {"member": r.member, "policy": r.policy, "states": r.states,
                "seconds": round(r.seconds, 3), "peak_rss_mib": round(r.peak_rss_mib, 1),
                "seen": r.seen, "truncated": r.truncated, "cached": r.cached}

    def largest(self, k: int) -> list[TaskResult]:
        """The ``k`` searches that stored the most states (ties: scope order)."""
        return sorted(self.results, key=lambda r: -r.states)[:k]


def merge(scope: Scope, policies: Sequence[str], properties: Sequence[str],
          results: Iterable[TaskResult], seconds: float = 0.0,
          kinds: dict[str, str] | None = None) -> ScopeResult:
    """Per policy and property: holds across the scope, or the shortest counterexample (ties:
    the member that comes first in the scope)."""
    order = {m.name: k for k, m in enumerate(scope.members)}
    res = list(results)
    verdicts: dict[str, dict[str, Verdict]] = {
        p: {n: Verdict(True, kind=(kinds or {}).get(n, "safety")) for n in properties}
        for p in policies
    }
    for r in sorted(res, key=lambda r: order.get(r.member, len(order))):
        for n, v in r.violations.items():
            cur = verdicts[r.policy].get(n)
            if cur is None:
                continue
            cur.violating += 1
            if cur.holds or v["length"] < (cur.length or 0):
                cur.holds, cur.length, cur.member = False, v["length"], r.member
                cur.explanation, cur.kind = v.get("explanation", ""), v.get("kind", cur.kind)
    return ScopeResult(scope, list(policies), list(properties), verdicts, res, seconds)


def check_scope(scope: Scope, policies: Sequence[str], properties: Sequence[str] | None = None,
                **kw: Any) -> ScopeResult:
    """:func:`run_scope` then :func:`merge`."""
    safety, live = resolve_properties(properties)
    t0 = time.perf_counter()
    results = run_scope(scope, policies, properties, **kw)
    kinds = {n: "safety" for n in safety} | {n: "liveness" for n in live}
    return merge(scope, policies, [*safety, *live], results, time.perf_counter() - t0, kinds)


def member(scope: Scope, name: str) -> Member:
    for m in scope.members:
        if m.name == name:
            return m
    raise UsageError(f"scope {scope.name}: no member {name!r}")
