"""A shrinking search over configurations: the checker is the oracle, a configuration the input.

Hypothesis draws points of the dimension table (spec/dimensions.py: one or two runs and
tools, every dimension's value weighted towards its base, the cheapest), each is built into
a model/config.py table and checked under the given policies and properties with a state cap
(spec/scope.py's ``check_member``, its results kept in the scope cache, so a repeated or
interrupted hunt with the same seed redoes only what is missing). A configuration that
violates a (policy, property) not found yet is shrunk by Hypothesis (``find``: fewer runs,
tools, calls, decisions and faults, a smaller budget and horizon, every value towards its
base) to a minimal one that still violates that cell; the search then goes on for the cells
not found, until the examples run out or ``should_stop`` says so.

``outside``: configurations that are members of a scope (or subsumed by one: spec/scope.py's
reduction) are not checked, and a violation that the scope shows too is not counted: when
stepping from the violating configuration to a simpler one that still violates
(:func:`simpler`: one dimension at a cheaper value, one fault, run or tool fewer) reaches a
member of the scope, the violation is the scope's. What is found is what the scope does not
show.

The verdict of a hunt reads "no violation in N drawn configurations", never "holds": it
states the reach (configurations checked, states, and the values and pairs of each dimension
drawn), as :class:`HuntResult` holds it. Determinism: the draws are Hypothesis's under
``random.Random(seed)`` with no example database; the wall clock is never read here (the
caller's ``should_stop`` may).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from failclosed.model.config import BUILTIN_WRITERS, ConfigError, parse_config
from failclosed.spec import dimensions as D
from failclosed.spec.checker import resolve_properties
from failclosed.spec.scope import (
    Cache,
    Member,
    Scope,
    TaskResult,
    _fault_free_key,
    _faults_cover,
    check_member,
)
from failclosed.spec.scope import _normal as normal_form
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

__all__ = ["Found", "HuntResult", "Outside", "describe", "hunt", "points"]

# the state cap of a search that only asks whether the scope shows a violation (a step of
# :meth:`_Oracle._descend`): a violation the scope shows is short, found early by the
# breadth-first search, so a step need not search as far as a drawn configuration
STEP_STATES = 2_000

# how many runs and tools a point has: one most of the time (cheap), two otherwise
_COUNTS = (1, 1, 1, 1, 1, 1, 1, 2)


def _value(draw: st.DrawFn, d: D.Dimension) -> Any:
    """A dimension's value: another than the base one time in ``d.odds`` (every value alike
    when 1); it shrinks towards the base."""
    if d.odds == 1:
        return draw(st.sampled_from(d.values))
    if not draw(st.sampled_from([False] * (d.odds - 1) + [True])):
        return d.base
    return draw(st.sampled_from(d.values[1:]))


def _level(draw: st.DrawFn, level: str, dims: frozenset[str]) -> dict[str, Any]:
    return {d.name: _value(draw, d) if d.name in dims else d.base
            for d in D.DIMENSIONS if d.level == level}


# Small first: the stages a stream's draws go through, each with its share of the examples:
# one run and one tool varying only the write-path dimensions (spec/dimensions.py
# WRITE_PATH: where an unaudited write lives), then every dimension, then two runs or tools.
STAGES: tuple[tuple[str, float], ...] = (("write path", 0.5), ("every dimension", 0.2),
                                         ("two runs or tools", 0.3))
_ALL = frozenset(d.name for d in D.DIMENSIONS)


@st.composite
def points(draw: st.DrawFn, stage: int = len(STAGES) - 1) -> dict[str, Any]:
    """A point of the dimension table (spec/dimensions.py) of a stage (:data:`STAGES`):
    every draw shrinks towards one run, one tool, the base values; a second fault kind is
    drawn rarely."""
    dims = frozenset(D.WRITE_PATH) if stage == 0 else _ALL
    n_tools = draw(st.sampled_from(_COUNTS)) if stage >= 2 else 1
    n_runs = draw(st.sampled_from(_COUNTS)) if stage >= 2 else 1
    model = _level(draw, "model", dims)
    kinds = list(D.dimension("fault").values[1:])
    # a second fault kind, one draw in eight past the first stage
    second = draw(st.sampled_from([None] * (7 * len(kinds)) + kinds)) if stage else None
    if second is not None and second != model["fault"]:
        model["fault"] = tuple(f for f in (model["fault"], second) if f is not None)
    tools = [_level(draw, "tool", dims) for _ in range(n_tools)]
    runs = []
    for _ in range(n_runs):
        r = _level(draw, "run", dims)
        r["tool"] = draw(st.integers(0, n_tools - 1))
        runs.append(r)
    return {"constants": _level(draw, "constants", dims), "model": model, "tools": tools,
            "runs": runs}


def describe(p: dict[str, Any]) -> str:
    """A point in one line: the values of its configuration that differ from the base (read
    back from the configuration: a value that does not apply is not shown)."""
    try:
        cfg, budget = parse_config(D.build(p))
    except ValueError:
        return "an invalid configuration"
    vals = D.values_of(cfg, budget)
    out = [f"{len(cfg.runs)} runs"] if len(cfg.runs) > 1 else []
    for d in D.DIMENSIONS:
        got = vals[d.name]
        if got != {d.base} and not (d.name == "fault_ops" and None in got):
            out.append(f"{d.name}={','.join(sorted(D.label(v) for v in got))}")
    return " ".join(out) or "the base configuration"


def _cheaper(k: str, v: Any) -> list[Any]:
    """The values of dimension ``k`` listed before ``v`` (cheaper; a budget of 3: 0, 1, 2)."""
    vals = D.dimension(k).values
    return list(vals[:vals.index(v)]) if v in vals else [D.dimension(k).base]


def simpler(p: dict[str, Any]) -> list[dict[str, Any]]:
    """The points one step simpler than ``p``: one dimension of one level, tool or run at a
    cheaper value, one fault kind of two, or one run or tool fewer."""
    out = []
    for lv in ("constants", "model"):
        for k, v in p[lv].items():
            if k != "fault" or not isinstance(v, tuple):
                out += [p | {lv: p[lv] | {k: w}} for w in _cheaper(k, v)]
    for i, t in enumerate(p["tools"]):
        for k, v in t.items():
            out += [p | {"tools": [*p["tools"][:i], t | {k: w}, *p["tools"][i + 1:]]}
                    for w in _cheaper(k, v)]
    for i, r in enumerate(p["runs"]):
        for k, v in r.items():
            if k != "tool":
                out += [p | {"runs": [*p["runs"][:i], r | {k: w}, *p["runs"][i + 1:]]}
                        for w in _cheaper(k, v)]
    f = p["model"]["fault"]
    if isinstance(f, tuple):
        out += [p | {"model": p["model"] | {"fault": one}} for one in f]
    if len(p["runs"]) > 1:
        out += [p | {"runs": [r for j, r in enumerate(p["runs"]) if j != i]}
                for i in range(len(p["runs"]))]
    if len(p["tools"]) > 1:
        for i in range(len(p["tools"])):
            rest = [t for j, t in enumerate(p["tools"]) if j != i]
            runs = [r | {"tool": min(r["tool"], len(rest) - 1)} for r in p["runs"]]
            out.append(p | {"tools": rest, "runs": runs})
    return out


def tools_by_table(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with each tool that is not a builtin writer named by what its table says (a
    tool's name is behaviour only when the runtime declares it: RUNTIME 14.5), in the
    catalogue and in every plan: two configurations that differ only in such names are one."""
    names = {}
    for t in data.get("tools", []):
        if t["name"] not in BUILTIN_WRITERS:
            names[t["name"]] = "tool " + json.dumps({k: v for k, v in t.items() if k != "name"},
                                                    sort_keys=True)
    if not names:
        return data
    runs = [r | {"plan": [{"tools": [names.get(c, c) for c in a["tools"]]} if "tools" in a else a
                          for a in r.get("plan", [])]} for r in data.get("runs", [])]
    tools = [t | {"name": names.get(t["name"], t["name"])} for t in data.get("tools", [])]
    return data | {"tools": tools, "runs": runs}


class Outside:
    """Whether a configuration lies outside a scope: no member is it (up to a renaming of its
    runs and of its tools that are not builtin writers) or subsumes it (spec/scope.py's
    reduction: every world it reaches, a member reaches)."""

    def __init__(self, scope: Scope | None) -> None:
        self.scope = scope
        self.groups: dict[str, list[dict[str, Any]]] = {}
        for m in scope.members if scope is not None else []:
            n = normal_form(tools_by_table(m.data))
            self.groups.setdefault(_fault_free_key(n), []).append(n["model"])

    def __call__(self, data: dict[str, Any]) -> bool:
        if self.scope is None:
            return True
        n = normal_form(tools_by_table(data))
        return not any(_faults_cover(big, n["model"])
                       for big in self.groups.get(_fault_free_key(n), []))


@dataclass
class Found:
    """A violated (policy, property) and the minimal configuration Hypothesis shrank it to."""

    policy: str
    property: str
    data: dict[str, Any]
    point: dict[str, Any]
    length: int  # the shortest counterexample's length in it (within the state cap)
    first: str  # the configuration it was first found in, described (spec.hunt.describe)


@dataclass
class HuntResult:
    policies: list[str]
    properties: list[str] | None
    seed: int
    drawn: int = 0  # examples Hypothesis drew
    checked: int = 0  # configurations checked (drawn, valid, outside the scope), shrinking too
    inside: int = 0  # drawn inside the ``outside`` scope: not checked
    explained: int = 0  # violating, but so does a configuration one step simpler in the scope
    states: int = 0
    truncated: int = 0  # checks cut by the state cap
    cached: int = 0
    stopped: bool = False  # should_stop ended it before its examples
    found: list[Found] = field(default_factory=list)
    values: dict[str, set[Any]] = field(default_factory=dict)  # dimension -> values drawn
    pairs: set[tuple[str, Any, str, Any]] = field(default_factory=set)

    def merge(self, o: HuntResult) -> None:
        for k in ("drawn", "checked", "inside", "explained", "states", "truncated", "cached"):
            setattr(self, k, getattr(self, k) + getattr(o, k))
        self.stopped |= o.stopped
        for k, v in o.values.items():
            self.values.setdefault(k, set()).update(v)
        self.pairs |= o.pairs
        have = {(f.policy, f.property) for f in self.found}
        for f in o.found:  # the first stream's, for a cell several found (their order)
            if (f.policy, f.property) not in have:
                self.found.append(f)
                have.add((f.policy, f.property))

    def reach(self) -> list[dict[str, Any]]:
        """Per dimension: values drawn of all, and pairs with the other dimensions drawn of
        all (each pair counted once, for both of its dimensions)."""
        out = []
        for d in D.DIMENSIONS:
            got = self.values.get(d.name, set())
            pairs = {q for q in self.pairs if d.name in (q[0], q[2])}
            possible = sum(len(d.values) * len(e.values) for e in D.DIMENSIONS if e is not d)
            out.append({"dimension": d.name, "values": len(got & set(d.values)),
                        "of_values": len(d.values), "pairs": len(pairs),
                        "of_pairs": possible})
        return out


def _key(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True)


class _Oracle:
    """Checks points, once each (an in-memory memo over the scope cache), and keeps the
    reach."""

    def __init__(self, res: HuntResult, properties: Sequence[str] | None,
                 max_states: int | None, cache: Cache | None, outside: Outside,
                 on_check: Callable[[str, list[TaskResult]], None] | None) -> None:
        self.res, self.props, self.max_states = res, properties, max_states
        self.cache, self.outside, self.on_check = cache, outside, on_check
        self.memo: dict[str, set[tuple[str, str]] | None] = {}
        self.inside_memo: dict[str, set[tuple[str, str]]] = {}
        self.explained_memo: dict[tuple[str, tuple[str, str]], bool] = {}
        self.lengths: dict[tuple[str, str, str], int] = {}

    def violated(self, p: dict[str, Any], drawing: bool) -> set[tuple[str, str]] | None:
        """The (policy, property) cells the point's configuration violates; None when it is
        invalid or inside the scope (not checked). ``drawing``: a draw, not a shrink step
        (counted in ``drawn`` when new)."""
        data = D.build(p)
        k = _key(data)
        if k in self.memo:
            return self.memo[k]
        if drawing:
            self.res.drawn += 1
        out = self._check(p, data)
        self.memo[k] = out
        return out

    def new(self, p: dict[str, Any], cell: tuple[str, str]) -> bool:
        """``p`` violates ``cell`` (a cell :meth:`violated` gave) where the scope does not
        (:meth:`_descend`); memoised."""
        if self.outside.scope is None:
            return True
        if self._descend(p, cell):
            self.res.explained += 1
            return False
        return True

    def _descend(self, p: dict[str, Any], cell: tuple[str, str]) -> bool:
        """Whether the scope shows ``p``'s violation of ``cell``: from ``p``, step to the first
        configuration one step simpler (:func:`simpler`) that still violates the cell, and
        again, until one inside the scope violates it (explained: ``p`` differs from the
        scope only in dimensions the violation does not need) or none simpler does (new)."""
        path: list[str] = []
        while True:
            k = _key(D.build(p))
            if (k, cell) in self.explained_memo:
                found = self.explained_memo[(k, cell)]
                break
            path.append(k)
            nxt = None
            found = False
            for q in simpler(p):
                data = D.build(q)
                if cell not in self._cells(data):
                    continue
                if not self.outside(data):
                    found = True
                    break
                if nxt is None:
                    nxt = q
            if found or nxt is None:
                break
            p = nxt
        for k in path:
            self.explained_memo[(k, cell)] = found
        return found

    def _cells(self, data: dict[str, Any]) -> set[tuple[str, str]]:
        """Every cell a configuration violates, inside the scope or not (memoised)."""
        k = _key(data)
        if k not in self.inside_memo:
            m = Member("hunt-step", data, "hunt")
            got = set()
            cap = min(self.max_states or STEP_STATES, STEP_STATES)
            for pol in self.res.policies:
                r = self._member(m, pol, cap)
                self.res.states += r.states
                got |= {(pol, n) for n in r.violations}
            self.inside_memo[k] = got
        return self.inside_memo[k]

    def _check(self, p: dict[str, Any], data: dict[str, Any]) -> set[tuple[str, str]] | None:
        try:
            cfg, budget = parse_config(data)
        except ConfigError:
            return None
        if not self.outside(data):
            self.res.inside += 1
            return None
        vals = D.values_of(cfg, budget)
        for n, v in vals.items():
            self.res.values.setdefault(n, set()).update(v)
        self.res.pairs |= D.pairs_of(vals, [d.name for d in D.DIMENSIONS])
        self.res.checked += 1
        m = Member("hunt", data, "hunt")
        out: set[tuple[str, str]] = set()
        results = []
        for pol in self.res.policies:
            r = self._member(m, pol)
            results.append(r)
            self.res.states += r.states
            self.res.truncated += r.truncated
            for n, v in r.violations.items():
                out.add((pol, n))
                self.lengths[(_key(data), pol, n)] = v["length"]
        if self.on_check is not None:
            self.on_check(describe(p), results)
        return out

    def _member(self, m: Member, pol: str, cap: int | None = None) -> TaskResult:
        cap = cap or self.max_states
        key = None
        if self.cache is not None:
            key = self.cache.key(m, pol, self.props, cap)
            hit = self.cache.get(key, m.name)
            if hit is not None:
                self.res.cached += 1
                return hit
        r = check_member(m.name, m.data, pol, self.props, cap)
        if self.cache is not None and key is not None:
            self.cache.put(key, r)
        return r


def hunt(policies: Sequence[str], properties: Sequence[str] | None = None, *, seed: int = 0,
         stream: int = 0, examples: int = 1000, max_states: int | None = 10_000,
         cache: Cache | None = None,
         outside: Scope | None = None, should_stop: Callable[[], bool] | None = None,
         on_check: Callable[[str, list[TaskResult]], None] | None = None,
         on_found: Callable[[Found], None] | None = None) -> HuntResult:
    """Draw up to ``examples`` configurations (``random.Random`` of ``seed`` and ``stream``:
    independent streams of one seed draw differently), check each under
    ``policies`` (``properties``: None, all) with ``max_states`` per search, and shrink a
    violation of each (policy, property) to a minimal configuration (``HuntResult.found``,
    in the order found). ``on_check(description, results)`` after each configuration checked;
    ``on_found(found)`` after each shrink."""
    res = HuntResult(list(policies), list(properties) if properties else None, seed)
    oracle = _Oracle(res, properties, max_states, cache, Outside(outside), on_check)
    stop = should_stop or (lambda: False)
    safety, live = resolve_properties(properties)
    cells = len(res.policies) * (len(safety) + len(live))
    rounds = 0
    end = 0
    for stage, (_, share) in enumerate(STAGES):
        end = examples if stage == len(STAGES) - 1 else end + max(1, round(examples * share))
        while res.drawn < end and not res.stopped and len(res.found) < cells:
            rnd = random.Random(f"{seed}:{stream}:{rounds}")
            found = _one(oracle, res, end - res.drawn, rnd, stop, stage)
            rounds += 1
            if found is None:
                break
            res.found.append(found)
            if on_found is not None:
                on_found(found)
    return res


def _one(oracle: _Oracle, res: HuntResult, budget: int, rnd: random.Random,
         stop: Callable[[], bool], stage: int) -> Found | None:
    """One ``find``: the first configuration violating a cell not found yet, shrunk for that
    cell; None when the budget (or ``stop``) ends the draws first."""
    done = {(f.policy, f.property) for f in res.found}
    pinned: list[tuple[str, str]] = []
    first: list[str] = []
    order = {(p, n): (i, j) for i, p in enumerate(res.policies)
             for j, n in enumerate(res.properties or [])}

    def violates(p: dict[str, Any]) -> bool:
        if stop():
            res.stopped = True
            return False
        cells = oracle.violated(p, not pinned)
        if not cells:
            return False
        if pinned:
            return pinned[0] in cells and oracle.new(p, pinned[0])
        fresh = sorted(cells - done, key=lambda c: order.get(c, (len(order), 0)) + c)
        for c in fresh:
            if oracle.new(p, c):
                pinned.append(c)
                first.append(describe(p))
                return True
        return False

    cfg = settings(max_examples=budget, database=None, deadline=None, derandomize=False,
                   phases=[Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck),
                   report_multiple_bugs=False)
    try:
        p = find(points(stage), violates, settings=cfg, random=rnd)
    except NoSuchExample:
        return None
    if not pinned:
        return None
    data = D.build(p)
    pol, prop = pinned[0]
    length = oracle.lengths.get((_key(data), pol, prop), 0)
    return Found(pol, prop, data, p, length, first[0])
