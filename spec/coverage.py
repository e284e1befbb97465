"""Coverage of the model's transition vocabulary by an exploration.

The canonical list of transition names and their fault branches lives in ONE place,
``model.names.TRANSITIONS`` (exported by the model, read by the scenario checker too);
this module only turns it into the ``name[fault]`` labels the engine's coverage report
counts, per configuration (provider faults are labelled by failure class), and walks the
model at random (``random_walk_coverage``) to report the names no walk ever enabled.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from failclosed.model import names
from failclosed.model.runtime import REQUEST_ONLY, enabled, fire, unreachable_in
from failclosed.model.state import Config
from failclosed.model.steps import fault_kinds
from failclosed.model.vocab import ActorKind, FaultKind

__all__ = ["TRANSITION_NAMES", "WalkCoverage", "expected_labels", "fault_kinds_used",
           "random_walk_coverage"]

TRANSITION_NAMES: tuple[str, ...] = tuple(names.TRANSITIONS)


def fault_kinds_used() -> set[str]:
    """Every fault kind named by some transition of the vocabulary (a consistency check
    against ``model.steps.fault_kinds()``: the two must agree, see tests)."""
    out: set[str] = set()
    for _, faults in names.TRANSITIONS.values():
        out.update(faults)
    return out


def expected_labels(specs: Iterable[Config]) -> list[str]:
    """Every ``name[fault]`` label the model can produce for the given configurations:
    the provider-fault labels are the union of the configurations' failure classes; a
    transition none of them can fire for want of what fires it (``runtime.unreachable_in``:
    a named principal's request, the operator's cancel command, the refused tick without a
    transport) is left out (none given: every label)."""
    specs = list(specs)
    classes: list[str] = []
    for s in specs:
        for c in s.provider_faults:
            if c not in classes:
                classes.append(c)
    out = names.labels(tuple(classes))
    if specs:
        never = frozenset.intersection(*(unreachable_in(s) for s in specs))
        out = [x for x in out if x.split("[")[0] not in never]
    return out



@dataclass(frozen=True)
class WalkCoverage:
    steps: int
    enabled: Counter
    never_enabled: tuple[str, ...]  # transition names never enabled in the walk


def random_walk_coverage(world, steps: int, seed: int = 0, restart_after: int = 200) -> WalkCoverage:
    """Random enabled-transition walks from ``world`` (restarting after ``restart_after``
    steps or at a dead end); reports the transition names never enabled. The RNG is a local
    ``random.Random(seed)``: deterministic."""
    rng = random.Random(seed)
    seen: Counter = Counter()
    w = world
    k = 0
    idle = 0
    for _ in range(steps):
        en = enabled(w)
        if not en or k >= restart_after or idle >= 20:
            w, k, idle = world, 0, 0
            en = enabled(w)
        for t in en:
            seen[t.name] += 1
        w2 = fire(w, _pick(rng, en))
        idle = idle + 1 if w2 == w else 0  # only idle ticks left: start a new history
        w = w2
        k += 1
    asks = any(r.requests for r in world.config.runs)  # else the reads can never be enabled
    never = tuple(n for n in names.TRANSITIONS
                  if n not in seen and (asks or n not in REQUEST_ONLY))
    return WalkCoverage(steps, seen, never)


def _pick(rng: random.Random, en: list):
    """An actor uniformly, then its normal step more often than a fault branch: a uniform
    choice over transitions would spend most steps on the reaper's idle ticks and faults."""
    actors = sorted({t.actor for t in en})
    a = rng.choice(actors)
    def background(x: str) -> bool:  # the clock and the reapers' idle ticks
        return x == ActorKind.CLOCK or names.is_reaper(x)

    if background(a) and len(actors) > 2 and rng.random() < 0.8:
        a = rng.choice([x for x in actors if not background(x)])  # slow time down
    mine = [t for t in en if t.actor == a]
    normal = [t for t in mine if t.fault is None]
    if normal and rng.random() < 0.9:
        return rng.choice(normal)
    return rng.choice(mine)


assert fault_kinds_used() <= set(fault_kinds()) | {FaultKind.PROVIDER_ERROR}, "model.names out of date"
