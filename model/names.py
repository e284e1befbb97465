"""The transition vocabulary: every name the model can fire, where docs/RUNTIME.md names it,
and which fault branches it has. It is derived from the step table (``model.steps``: each
step of a process declares the transitions it fires and their faults) and the few
transitions no process step fires (``model.steps.OTHER_TRANSITIONS``); the coverage reports
and the scenario format read it here."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from .steps import Vocabulary

# name -> (docs/RUNTIME.md places, fault kinds the transition can take); read live
TRANSITIONS = Vocabulary()


def labels(provider_classes: tuple[str, ...] = ()) -> list[str]:
    """Every ``name[fault]`` label the model can produce (provider faults by class)."""
    out = []
    for name, (_, faults) in TRANSITIONS.items():
        out.append(name)
        for f in faults:
            if f == "provider_error":
                out.extend(f"{name}[{c}]" for c in provider_classes)
            else:
                out.append(f"{name}[{f}]")
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
    from .runtime import enabled, fire

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
    never = tuple(n for n in TRANSITIONS if n not in seen)
    return WalkCoverage(steps, seen, never)


def _pick(rng: random.Random, en: list):
    """An actor uniformly, then its normal step more often than a fault branch: a uniform
    choice over transitions would spend most steps on the reaper's idle ticks and faults."""
    actors = sorted({t.actor for t in en})
    a = rng.choice(actors)
    if a in ("clock", "reaper") and len(actors) > 2 and rng.random() < 0.8:
        a = rng.choice([x for x in actors if x not in ("clock", "reaper")])  # slow time down
    mine = [t for t in en if t.actor == a]
    normal = [t for t in mine if t.fault is None]
    if normal and rng.random() < 0.9:
        return rng.choice(normal)
    return rng.choice(mine)
