"""One description of a configuration for the soundness generators: every field of a run, of
a plan's answers and of a principal, with the values a generator draws for it
(tests/test_symmetry_soundness.py draws from here). The dimension table of the
configuration-search issue (spec/dimensions.py, issue 36) is to replace the values below:
a generator reads a field's values only through :func:`value`, and the reach test reads the
fields to cover from the model's own lists of keys (``model.config.RUN_KEYS``,
``PRINCIPAL_KEYS``) and answer kinds, so a field added there and not here fails it.

Values are small on purpose: an example is checked exhaustively, plain and reduced, within a
few thousand states.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

TOOLS = [
    {"name": "lookup_page"},
    {"name": "create_page_draft", "effect": "non_idempotent_write"},
    {"name": "remote_write", "effect": "non_idempotent_write", "remote": True, "server_flag": 0},
]

# a plan's answers (model.state.Answer): every kind, each with the values it takes
ANSWERS: dict[str, list[Any]] = {
    "tools": [[t["name"]] for t in TOOLS],
    "final": ["completed", "budget_exhausted", "context_truncated"],
    "fail": ["auth", "rateLimit"],
    "guardrail": ["violation", "approval_required"],
}

# a run's fields (model.config.RUN_KEYS) and their values; None: the key left out. ``id``
# and ``plan`` are drawn apart (ids unique; a plan from ANSWERS).
RUN: dict[str, list[Any]] = {
    "entry": ["queued", "interactive"],
    "cap": [None, 1],
    "observer": [False, True],
    "cancels": [0, 1],
    "decisions": [["approve"], ["deny"], ["approve", "approve"]],
    "row": [None, {"status": "completed"}, {"status": "cancelled"}],
    "owner": ["owner", "alice"],
    "requests": [[], [{"by": "mallory", "request": "approve"}],
                 [{"by": "mallory", "request": "cancel"}], [{"by": "bot", "request": "status"}],
                 [{"by": "bot", "request": "events", "after_sequence": 0}],
                 [{"by": "owner", "request": "deny"}]],
    "require_second_approver": [None, True],
}
IDS = ["r1", "r2", "a", "b"]

# the fields a twin (a second run with the first one's entry and plan) may differ in: every
# field but the id, the entry and the plan
TWIN_FIELDS = sorted(RUN)
TWIN_FIELDS.remove("entry")
# four-eyes (RUNTIME 16.18.4) reads the run's initiator only when its owner approves its own
# write: a twin differing there costs what a decision's twin does; not yet drawn as a twin
TWIN_FIELDS.remove("require_second_approver")

# what makes a twin's field matter (the first run's fields fixed, the faults given): an
# observer only when its hook may raise. A decision or an owner is read only once a run
# awaits a decision, and two runs whose write suspends them cost tens of thousands of states
# in the plain search: their twins are kept small (an interactive run, no fault, no other
# request or cancel) and the planted key survives them (docs/MUTATION.md). A seeded row is
# read only by the initial world (model.config.initial_world): runs that differ only there
# are interchangeable afterwards.
QUIET = {"entry": "interactive", "cap": None, "observer": False, "cancels": 0, "requests": []}
TWIN_CONTEXT: dict[str, dict[str, Any]] = {
    "decisions": {"run": QUIET, "faults": []},
    "owner": {"run": {**QUIET, "decisions": [], "requests": [{"by": "owner", "request": "deny"}]},
              "faults": []},
    "observer": {"faults": ["observer_error"]},
}

# a principal's fields (model.config.PRINCIPAL_KEYS); the owners are users (a run's owner
# must be one), ``mallory`` and ``bot`` drawn
PRINCIPAL: dict[str, list[Any]] = {
    "kind": ["user", "admin", "service_account"],
    "scopes": [[], ["AGENT_READ"], ["AGENT_CANCEL", "AGENT_APPROVE"]],
    "grants": [[], ["AGENT_APPROVE"]],  # a user's (16.18.1)
    "permitted": [None, {"create_page_draft": False}],  # a user's or an admin's tool policy (17)
}


def value(draw: st.DrawFn, table: dict[str, list[Any]], field: str) -> Any:
    """A value of ``field`` (the one place a generator draws a field's value from): the
    first one listed (the default, the cheapest) half the time, else any."""
    values = table[field]
    return copy.deepcopy(draw(st.one_of(st.just(values[0]), st.sampled_from(values))))


def plan(draw: st.DrawFn, tool: str | None) -> list[dict]:
    """A plan: a turn calling ``tool`` (None: no tool turn), then an answer of a drawn kind
    that is not a tool call (a run whose every answer calls tools never ends)."""
    kind = draw(st.sampled_from(["final", "fail", "guardrail"]))
    end = {kind: value(draw, ANSWERS, kind)}
    return ([{"tools": [tool]}] if tool is not None else []) + [end]


def run(draw: st.DrawFn, rid: str, tool: str | None, **fixed: Any) -> dict:
    """A run: every field of RUN drawn (``fixed``: those given instead), its plan drawn."""
    out: dict[str, Any] = {"id": rid, "plan": fixed.pop("plan", None) or plan(draw, tool)}
    for f in RUN:
        v = fixed[f] if f in fixed else value(draw, RUN, f)
        if v is not None:
            out[f] = v
    return out


def twin(draw: st.DrawFn, base: dict, rid: str, field: str | None = None) -> tuple[dict, str]:
    """A run with ``base``'s entry and plan that differs from it in ``field`` (None: a drawn
    one; a symmetry over runs must keep the two apart), and that field."""
    f = field or draw(st.sampled_from(TWIN_FIELDS))
    other = [v for v in RUN[f] if v != base.get(f)]
    out = {**copy.deepcopy(base), "id": rid}
    v = copy.deepcopy(draw(st.sampled_from(other)))
    if v is None:
        out.pop(f, None)
    else:
        out[f] = v
    return out, f


def principals(draw: st.DrawFn) -> dict[str, dict]:
    """The principals every run's owner and requests may name: two users who own runs,
    ``mallory`` of a drawn kind, ``bot`` a service account; scopes drawn."""
    mallory: dict[str, Any] = {"kind": value(draw, PRINCIPAL, "kind")}
    if mallory["kind"] == "service_account":
        mallory["scopes"] = value(draw, PRINCIPAL, "scopes")
    else:
        permitted = value(draw, PRINCIPAL, "permitted")
        if permitted is not None:
            mallory["permitted"] = permitted
    if mallory["kind"] == "user":
        mallory["grants"] = value(draw, PRINCIPAL, "grants")
    return {"owner": {"kind": "user"}, "alice": {"kind": "user"}, "mallory": mallory,
            "bot": {"kind": "service_account", "scopes": value(draw, PRINCIPAL, "scopes")}}


# -- reach: which fields the examples varied -----------------------------------------------
def _key(v: Any) -> str:
    return json.dumps(v, sort_keys=True)


class Reach:
    """The values each field took over a generator's examples, and the fields in which two
    runs of one example with equal entry and plan differed."""

    def __init__(self) -> None:
        self.values: dict[str, set[str]] = {}
        self.twins: set[str] = set()

    def add(self, data: dict) -> None:
        runs = data["runs"]
        for r in runs:
            for f in [*RUN, "id", "plan"]:
                self.values.setdefault(f"run.{f}", set()).add(_key(r.get(f)))
            for a in r.get("plan", []):
                (k, v), = a.items()
                self.values.setdefault(f"answer.{k}", set()).add(_key(v))
        for p in data.get("principals", {}).values():
            for f in PRINCIPAL:
                self.values.setdefault(f"principal.{f}", set()).add(_key(p.get(f)))
        for i, a in enumerate(runs):
            for b in runs[i + 1:]:
                if (a.get("entry"), a.get("plan")) == (b.get("entry"), b.get("plan")):
                    self.twins |= {f for f in RUN if a.get(f) != b.get(f)}

    def varied(self) -> set[str]:
        """The fields that took at least two values (an answer kind: that occurred)."""
        return {f for f, vs in self.values.items() if len(vs) > 1 or f.startswith("answer.")}
