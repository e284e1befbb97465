"""A violation's runs replayed alone: their own transitions, with the clock moves between
them, from the initial world of a model configuration of those runs only. The result is the
violation's scenario (``{"config": <model config table>, "steps": [transition dicts]}``, which
``model.apply`` replays), and the worlds along the way (dating a stable property's violation
back to the step that made it, sim/checks.py).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from failclosed.model import store
from failclosed.model.config import load_world
from failclosed.model.runtime import clock_move, enabled, fire
from failclosed.model.state import DEFAULT_OWNER, Answer, Ask, World
from failclosed.model.transition import Transition
from failclosed.model.vocab import ActorKind, FaultKind, Request, TransitionName

from .records import Culprit, RunRecord, SimulationError, Step


class Replayed(NamedTuple):
    config: dict[str, Any]  # the model config table of the culprits' runs
    steps: list[dict[str, Any]]  # the steps replayed, as transition dicts
    kinds: set[str]  # the fault kinds the steps take
    provider_faults: set[str]
    worlds: list[tuple[int | None, World]]  # (index in the first culprit's trace | None: a clock move, world after)


class Replayer:
    def __init__(self, model_config: dict[str, Any]):
        self.model_config = model_config  # the simulated world's model config table

    def scenario_of(self, culprits: list[Culprit]) -> dict[str, Any]:
        """The culprits' runs' scenario ``{"config": ..., "steps": [...]}``: a fault budget
        for exactly the faults it takes."""
        r = self.replayed(culprits)
        cfg, out = r.config, r.steps
        cfg["model"] = dict(cfg["model"], faults=sorted(r.kinds), provider_faults=sorted(r.provider_faults),
                            fault_budget=1 + sum(1 for s in out if "fault" in s)
                            + sum(1 for s in out if s["name"] in (TransitionName.CRASH, TransitionName.DUPLICATE_MESSAGE)))
        return {"config": cfg, "steps": out}

    def replay(self, culprits: list[Culprit]) -> list[tuple[int | None, World]]:
        """``[(k, world)]`` after each step of the culprits' replay: ``k`` the step's index
        in the first culprit's trace, None for a clock move."""
        return self.replayed(culprits).worlds

    def replayed(self, culprits: list[Culprit]) -> Replayed:
        out, index, kinds, pfaults = _steps(_merged(culprits))
        cfg = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.model_config.items()}
        cfg["runs"] = [_run_table(c.record) for c in culprits]
        # A clock move that lapses a live segment's lease outside a provider or tool call is
        # a stall (fault "pause") in the model: let the model say which moves are.
        cfg["model"] = dict(cfg["model"], faults=sorted(kinds | {FaultKind.PAUSE, FaultKind.SLOW_OPERATION}), provider_faults=sorted(pfaults),
                            fault_budget=len(out) + 1)
        w = load_world(cfg)
        ids = {r["id"] for r in cfg["runs"]}
        worlds: list[tuple[int | None, World]] = []
        for k, s in enumerate(out):
            t = clock_move(w, s["to"]) if s["name"] == TransitionName.ADVANCE_TIME else Transition.from_dict(s)
            order = t.arg("order") if t.name == store.FIND_STALE_RUNNING else None
            if order is not None:
                t = _reaper_tick_for(w, t.actor, [x for x in order.split(",") if x in ids])
            if t.fault in (FaultKind.PAUSE, FaultKind.SLOW_OPERATION):
                kinds.add(t.fault)
            out[k] = t.to_dict()
            w = fire(w, t)
            worlds.append((index[k], w))
        return Replayed(cfg, out, kinds, pfaults, worlds)


def _merged(culprits: list[Culprit]) -> list[tuple[Step, int | None]]:
    """The culprits' steps in firing order, each once (a reaper tick shared by several runs
    appears once), with its index in the first culprit's trace (None: not in it)."""
    merged: dict[int, tuple[Step, int | None]] = {}
    for n, c in enumerate(culprits):
        for k, step in enumerate(c.trace):
            merged[step.fired] = (step, k if n == 0 else merged.get(step.fired, (step, None))[1])
    return [merged[fired] for fired in sorted(merged)]


def _steps(merged: list[tuple[Step, int | None]]) -> tuple[list[dict[str, Any]], list[int | None], set[str], set[str]]:
    """The steps as transition dicts with a clock move before each that the model clock
    took, their indexes in the first culprit's trace, the fault kinds and provider faults
    they take."""
    out: list[dict[str, Any]] = []
    index: list[int | None] = []
    clock = 0
    kinds: set[str] = set()
    pfaults: set[str] = set()
    for step, k in merged:
        t = step.transition
        if step.clock > clock:
            out.append({"name": TransitionName.ADVANCE_TIME, "actor": ActorKind.CLOCK, "to": step.clock})
            index.append(None)
            clock = step.clock
        if t.name in (TransitionName.CRASH, TransitionName.DUPLICATE_MESSAGE):
            kinds.add(t.name)  # enabled only when the kind is on and budget remains
        if t.fault:
            if t.name == TransitionName.PROVIDER_CALL:
                pfaults.add(t.fault)
                kinds.add(FaultKind.PROVIDER_ERROR)
            else:
                kinds.add(t.fault)
        out.append(t.to_dict())
        index.append(k)
    return out, index, kinds, pfaults


def _reaper_tick_for(w: World, reaper: str, want: list[str]) -> Transition:
    """Reaper ``reaper``'s tick, in the replayed world of a few runs, that selects the culprit
    runs in the order the full simulation's tick did (ties in lease_expires are ordered
    freely)."""
    ticks = [t for t in enabled(w, reaper) if t.name == store.FIND_STALE_RUNNING and t.fault is None]
    if not ticks:
        raise SimulationError(
            f"the replay of runs {', '.join(want)} alone has {reaper} still inside its last tick "
            "where the simulation's reaper ticks again: a fault ended that tick before the rows of "
            "these runs, which a replay of these runs alone cannot reproduce")
    for t in ticks:
        order = t.arg("order")
        if order is not None and [x for x in order.split(",") if x in want] == want:
            return t
    return ticks[0]


def _answer_table(a: Answer) -> dict[str, Any]:
    if a.kind == "tools":
        return {"tools": list(a.calls)}
    if a.kind == "final":
        return {"final": a.value}
    if a.kind == "fail":
        return {"fail": a.value}
    return {"guardrail": a.value}


def _run_table(rec: RunRecord) -> dict[str, Any]:
    d: dict[str, Any] = {"id": rec.id, "entry": rec.entry, "plan": [_answer_table(a) for a in rec.spec.plan]}
    if rec.spec.cap is not None:
        d["cap"] = rec.spec.cap
    if rec.spec.cancels:
        d["cancels"] = rec.spec.cancels
    if rec.spec.observer:
        d["observer"] = True
    if rec.spec.decisions:
        d["decisions"] = list(rec.spec.decisions)
    if rec.spec.owner != DEFAULT_OWNER:
        d["owner"] = rec.spec.owner
    if rec.spec.requests:  # requests by other principals (RUNTIME 16.18), as the TOML says them
        d["requests"] = [_ask_table(a) for a in rec.spec.requests]
    return d


def _ask_table(a: Ask) -> dict[str, Any]:
    d: dict[str, Any] = {"by": a.by, "request": str(a.request)}
    if a.request == Request.EVENTS:
        d.update(after_sequence=a.after)
    return d
