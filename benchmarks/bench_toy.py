"""Benchmark of the bare exploration engine (spec/search.py) on a cheap synthetic system.

``actors`` counters in ``0..n``; actor k bumps or resets its own. Successors cost almost
nothing, so the figure is the engine's own per-state and per-edge overhead (the BFS core,
the parent/switch bookkeeping and the property step), not the model's.

    .venv/bin/python benchmarks/bench_toy.py [--n 40] [--actors 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.model.transition import Transition  # noqa: E402
from failclosed.spec.search import explore  # noqa: E402


def bench_toy(n: int = 40, actors: int = 3) -> float:
    """States/s on the toy: ``actors`` counters in ``0..n``, actor k bumps or resets its own.

    Distinct states: ``(n + 1) ** actors``; about ``2 * actors`` edges per state. One invariant
    is checked and no graph is kept.
    """
    bump = [Transition("bump", f"a{k}") for k in range(actors)]
    reset = [Transition("reset", f"a{k}") for k in range(actors)]
    rng = range(actors)

    def succ(w: tuple[int, ...]) -> list[tuple[Transition, tuple[int, ...]]]:
        out = []
        for k in rng:
            c = w[k]
            if c < n:
                out.append((bump[k], w[:k] + (c + 1,) + w[k + 1 :]))
            if c:
                out.append((reset[k], w[:k] + (0,) + w[k + 1 :]))
        return out

    ex = explore([(0,) * actors], succ, invariants={"bounded": lambda w: max(w) <= n})
    assert ex.stats.states == (n + 1) ** actors and ex.ok
    return ex.stats.states_per_second


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--actors", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    cpu = []
    for _ in range(args.repeat):
        c0 = time.process_time()
        bench_toy(args.n, args.actors)
        cpu.append(time.process_time() - c0)
    states = (args.n + 1) ** args.actors
    print(f"toy ({args.actors} counters in 0..{args.n}, {states} states): "
          f"{states / min(cpu):,.0f} states/s (CPU time, best of {args.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
