"""One description of a configuration for the soundness generators: the dimension table of
spec/dimensions.py (issue 36). A generator draws a **point** of the table (every dimension of
a run, of its plan, of a tool and of the model, each value from the dimension's own
``values``) and builds it with the table's own builder (``dimensions.build``), so a dimension
added there is drawn here with no second list. tests/test_symmetry_soundness.py and
tests/test_reduction_soundness.py draw from here.

The reach test reads what the examples hold back from the parsed configurations
(``dimensions.values_of``, the table's own reading) and from their tables (the model's own
lists of keys: ``model.config.RUN_KEYS``, ``PRINCIPAL_KEYS``, the answer kinds), so a
dimension or a key that no example varies fails it, by name.

Values are small on purpose: an example is checked exhaustively, plain and reduced, within a
few thousand states. What keeps them small is said here, not in a list of values: a
dimension's values are drawn from its first one (the base, the cheapest) half the time, and
a generator bounds only counts (workers, budget, horizon) where the number of runs makes a
state space grow.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from failclosed.model.config import parse_config
from failclosed.model.state import DEFAULT_OWNER, WAITING_FOR_APPROVAL
from failclosed.model.vocab import Decision
from failclosed.spec import dimensions as D
from hypothesis import strategies as st

# the dimensions of each level, in the table's order
LEVEL: dict[str, tuple[str, ...]] = {
    lv: tuple(d.name for d in D.DIMENSIONS if d.level == lv) for lv in D.LEVELS}

# the key of a run's table ([[runs]], model.config.RUN_KEYS) a dimension varies, read from the
# record fields it declares (``RunSpec.initial`` is the table's ``row``; an ``Ask`` is one of
# the run's ``requests``; an ``Answer`` is a turn of its ``plan``); None: no field of the run's
# own table (a principal's tool policy is the principal's)
_RUN_KEY_OF = {"initial": "row"}


def run_key(name: str) -> str | None:
    """The key of a run's table dimension ``name`` varies (None: none)."""
    for f in D.dimension(name).fields:
        rec, _, attr = f.partition(".")
        if rec == "RunSpec":
            return _RUN_KEY_OF.get(attr, attr)
        if rec == "Ask":
            return "requests"
        if rec == "Answer":
            return "plan"
    return None


# the dimensions a twin (a second run with the first one's entry and plan) may differ in:
# every run dimension of the run's own table but its entry and plan
TWIN_FIELDS: list[str] = [n for n in LEVEL["run"] if run_key(n) not in (None, "entry", "plan")]

# Where a twin's field matters, cheaply (dimension -> the values of other dimensions, at any
# level, set on both twins, or the first twin's value of the field itself; ``policies``: the
# policies drawn); the table's own ``context`` of the dimension on top. A key that merges two
# runs is wrong only where it merges a world with the same world with the runs swapped and
# the two have different futures: both must be reachable, so the runs must be able to stand
# in each other's place before they differ. A decision, the owner and four-eyes are read
# only once a run awaits a decision: two runs whose write suspends them cost tens of
# thousands of states in the plain search (45,198 for two interactive runs calling
# create_page_draft, horizon 3), two runs seeded awaiting an approval (RunSpec.initial,
# suspended at their first turn) a few hundred to a few thousand. Decisions: the first twin
# has none left (it awaits for good), the other one has some, and each caller may cancel its
# run first (either run cancelled, the other awaiting: two reachable worlds, one decision
# pending in one of them only); two runs that both decide cost tens of thousands again.
# The owner: a service account that started a run may not decide on it (16.18.1; two users
# who own twin runs cost 23,230 states and are interchangeable), so the first twin's owner
# is one; four-eyes: its initiator's approval is refused under a policy with the rule
# (16.18.4); each with a cancel, as the decisions. The other twins are interactive runs
# that call no tool (a plan of one answer: two queued runs, or two that call a tool, often
# cost more than the plain search's 6,000 states) with no fault, cancel, request, observer
# or cap but the field itself (and the table's context of it). The cap counts rounds (the
# table's context: two): two interactive runs of two rounds cost 27,800 states or more, two
# queued runs that one worker takes in turn (async transport) 229.
QUIET: dict[str, Any] = {"entry": "interactive", "rounds": 0, "cap": None, "observer": False,
                         "cancels": 0, "request": None, "fault": None}
AWAITING: dict[str, Any] = {**QUIET, "rounds": 1, "row": WAITING_FOR_APPROVAL}
TWIN_CONTEXT: dict[str, dict[str, Any]] = {
    "decisions": {**AWAITING, "decisions": (), "cancels": 1},
    "owner": {**AWAITING, "owner": D.SERVICE_OWNER, "decisions": (Decision.DENY,), "cancels": 1},
    "four_eyes": {**AWAITING, "decisions": (Decision.APPROVE,), "owner": DEFAULT_OWNER,
                  "cancels": 1, "policies": ["current", "proposed"]},
    "requester": {**AWAITING, "decisions": ()},
    "events_page": QUIET,
    "observer": {**QUIET, "fault": "observer_error"},
    "cancels": QUIET,
    "request": QUIET,
    "cap": {**QUIET, "entry": "queued", "transport": "async"},
    "row": QUIET,
}


def value(draw: st.DrawFn, name: str) -> Any:
    """A value of dimension ``name`` (the one place a generator draws a value from): its
    base (the cheapest) half the time, else any of the table's values."""
    values = D.dimension(name).values
    return copy.deepcopy(draw(st.one_of(st.just(values[0]), st.sampled_from(values))))


def level(draw: st.DrawFn, lv: str, **fixed: Any) -> dict[str, Any]:
    """Every dimension of level ``lv`` drawn (``fixed``: those given instead)."""
    return {n: fixed[n] if n in fixed else value(draw, n) for n in LEVEL[lv]}


def run(draw: st.DrawFn, tool: int = 0, **fixed: Any) -> dict[str, Any]:
    """A run's point: every run dimension drawn (its plan too: ``rounds``, ``calls``,
    ``end``), calling tool ``tool`` of the catalogue."""
    return level(draw, "run", **fixed) | {"tool": tool}


def twin(draw: st.DrawFn, base: dict[str, Any], name: str) -> dict[str, Any]:
    """``base`` with another value of dimension ``name``: a run with ``base``'s entry and
    plan that differs from it there (a symmetry over runs must keep the two apart)."""
    other = [v for v in D.dimension(name).values if v != base[name]]
    return {**copy.deepcopy(base), name: copy.deepcopy(draw(st.sampled_from(other)))}


def _set(p: dict[str, Any], ctx: dict[str, Any], run: dict[str, Any] | None, tool: int) -> None:
    """Set the values of ``ctx`` (dimension -> value, any level) on point ``p``: a run
    dimension's on ``run``, a tool dimension's on tool ``tool``; ``tools``: that many
    catalogue tools at least."""
    tools = p["tools"]
    for key, v in ctx.items():
        if key == "tools":  # a second catalogue tool (calls per turn)
            while len(tools) < v:
                tools.append(dict(D.base("tool")))
            continue
        klv = D.dimension(key).level
        target = p[klv] if klv in ("constants", "model") else (
            tools[tool] if klv == "tool" else run)
        if target is not None:
            target[key] = v


def _place(p: dict[str, Any], lv: str, k: int) -> tuple[dict | None, int, dict | None]:
    """(the run, the tool index, the record) a dimension of level ``lv`` of the ``k``-th run
    or tool of ``p`` is set on (a model dimension's run and tool: the first)."""
    runs = p["runs"]
    run = runs[k] if lv == "run" else runs[0] if lv == "model" and runs else None
    tool = k if lv == "tool" else run["tool"] if run is not None else 0
    return run, tool, {"model": p["model"], "run": run, "tool": p["tools"][tool]}[lv]


def matter(draw: st.DrawFn, p: dict[str, Any], lv: str, k: int = 0) -> None:
    """Each value of level ``lv`` of point ``p`` (of its ``k``-th run or tool) drawn away
    from its base is set where it matters: the table's context of its dimension is set on
    ``p`` (on that run, the tool it calls, the model; a tool's on that tool; a model's on the
    first run and its tool). The dimensions are taken in a drawn order, and a context is set
    only where no context set before it (nor its dimension) holds a value it would change."""
    run, tool, where = _place(p, lv, k)
    if where is None:
        return
    held: set[str] = set()
    for n in draw(st.permutations(LEVEL[lv])):
        d = D.dimension(n)
        if not d.context or where[n] == d.base or held & set(d.context):
            continue
        held |= {n, *d.context}
        _set(p, d.context, run, tool)


def context(name: str | None) -> dict[str, Any]:
    """Where a twin in ``name`` matters: :data:`TWIN_CONTEXT`'s values, then the table's
    context of the dimension (the values under which its other values matter)."""
    if name is None:
        return {}
    return TWIN_CONTEXT.get(name, {}) | dict(D.dimension(name).context)


def at(ctx: dict[str, Any], lv: str) -> dict[str, Any]:
    """The values of ``ctx`` that belong to level ``lv``."""
    return {k: v for k, v in ctx.items() if k in LEVEL[lv]}


def build(p: dict[str, Any], ids: list[str] | None = None,
          order: list[int] | None = None) -> dict[str, Any]:
    """Point ``p`` as a model/config.py table (``dimensions.build``), its runs named
    ``ids`` (the operator's cancel command follows its run) and listed in ``order``."""
    data = D.build(p)
    if ids is not None:
        names = {r["id"]: ids[k] for k, r in enumerate(data["runs"])}
        for r in data["runs"]:
            r["id"] = names[r["id"]]
        m = data["model"]
        if "operator_cancels" in m:
            m["operator_cancels"] = [names.get(x, x) for x in m["operator_cancels"]]
    if order is not None:
        data["runs"] = [data["runs"][i] for i in order]
    return data


# -- reach: which fields the examples varied -----------------------------------------------
def _key(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


class Reach:
    """The values each dimension took over a generator's examples (read back from the
    parsed configurations), the values each key of a run's, an answer's and a principal's
    table took, and the keys in which two runs of one example with equal entry and plan
    differed."""

    def __init__(self) -> None:
        self.dims: dict[str, set[Any]] = {}
        self.values: dict[str, set[str]] = {}
        self.twins: set[str] = set()

    def add(self, data: dict) -> None:
        from failclosed.model.config import PRINCIPAL_KEYS, RUN_KEYS

        cfg, budget = parse_config(data)
        for n, vs in D.values_of(cfg, budget).items():
            self.dims.setdefault(n, set()).update(vs)
        runs = data["runs"]
        for r in runs:
            for f in RUN_KEYS:
                self.values.setdefault(f"run.{f}", set()).add(_key(r.get(f)))
            for a in r.get("plan", []):
                (k, v), = a.items()
                self.values.setdefault(f"answer.{k}", set()).add(_key(v))
        for p in data.get("principals", {}).values():
            for f in PRINCIPAL_KEYS:
                self.values.setdefault(f"principal.{f}", set()).add(_key(p.get(f)))
        for i, a in enumerate(runs):
            for b in runs[i + 1:]:
                if (a.get("entry"), a.get("plan")) == (b.get("entry"), b.get("plan")):
                    self.twins |= {f for f in RUN_KEYS - {"id"} if a.get(f) != b.get(f)}

    def varied(self) -> set[str]:
        """The dimensions and keys that took at least two values (an answer kind: that
        occurred)."""
        return ({f"dimension {n}" for n, vs in self.dims.items() if len(vs) > 1}
                | {f for f, vs in self.values.items() if len(vs) > 1 or f.startswith("answer.")})
