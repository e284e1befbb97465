"""Benchmark of the exhaustive checker (one core, one process).

Prints: distinct states/s on the standard bound (``small``, every property, liveness
included), by wall time and by this process's CPU time (the machine is shared: CPU time is the
figure to compare), the CPU seconds spent in the liveness analysis, the peak memory per
stored state (growth of the peak RSS over the largest part, divided by its states), the
seconds ``small`` takes exhaustively, the same search with one safety property only (what the
property checks cost), and the symmetry reduction factor on a
2-worker configurations: states without symmetry / states with it (exact), on
``medium-symmetric`` (two workers and two identical runs: a group of 4) and ``medium-queued``
(two workers, one run: a group of 2, so at most x2).

    .venv/bin/python benchmarks/bench_checker.py [--policy current]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import time  # noqa: E402

from failclosed.spec import engine  # noqa: E402
from failclosed.spec.checker import CONFIG_DIR, check  # noqa: E402
from failclosed.spec.search import _maxrss_mib  # noqa: E402

_LIVE_CPU = [0.0]


def _timed_liveness(f):
    def wrapper(*a, **k):
        t0 = time.process_time()
        try:
            return f(*a, **k)
        finally:
            _LIVE_CPU[0] += time.process_time() - t0

    return wrapper


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="current")
    args = ap.parse_args(argv)

    engine.check_liveness = _timed_liveness(engine.check_liveness)
    rss0 = _maxrss_mib()
    c0 = time.process_time()
    res = check(args.policy, "small", None)
    cpu = time.process_time() - c0
    sps = res.states / res.seconds
    biggest = max(res.parts, key=lambda p: p.stats.states)
    print(f"standard bound (small, {len(res.parts)} parts, {args.policy}): {res.stats_line()}")
    for p in res.parts:
        print(f"  {p.name:24s} {p.stats}")
    print(f"distinct states/s on small: {sps:,.0f} (wall), {res.states / cpu:,.0f} (CPU time, "
          f"{cpu:.2f} s)")
    print(f"  liveness analysis: {_LIVE_CPU[0]:.2f} s CPU of {cpu:.2f}")
    print(f"peak memory per stored state: {(res.peak_rss_mib - rss0) * 1024 / biggest.stats.states:.2f}"
          f" KiB (peak RSS {res.peak_rss_mib:.0f} MiB, {rss0:.0f} MiB before; largest part "
          f"{biggest.name}: {biggest.stats.states} states)")
    print(f"small exhaustive: {res.seconds:.2f} s (all {len(res.properties)} properties, "
          f"witnesses, coverage)")
    # what the property checks cost: the same search with one safety property only
    c1 = time.process_time()
    bare = check(args.policy, "small", ["exclusive_claim"], witnesses=False, coverage=False)
    cpu1 = time.process_time() - c1
    print(f"  the same search with one safety property, no witnesses, no liveness: "
          f"{bare.states / cpu1:,.0f} states/s (CPU time, {cpu1:.2f} s): the properties, "
          f"witnesses and liveness cost {100 * (1 - cpu1 / cpu):.0f}% of the full check")

    same = True
    for cfg in ("medium-symmetric.toml", "medium-queued.toml"):
        two = CONFIG_DIR / cfg
        c0 = time.process_time()
        sym = check(args.policy, two, None, witnesses=False, coverage=False)
        c1 = time.process_time()
        flat = check(args.policy, two, None, witnesses=False, coverage=False, symmetry=False)
        c2 = time.process_time()
        print(f"2-worker configuration {two.name} (group of {sym.parts[0].group}): "
              f"{flat.states} states without symmetry ({c2 - c1:.2f} s CPU, "
              f"{flat.states / (c2 - c1):,.0f} states/s), "
              f"{sym.states} with ({c1 - c0:.2f} s CPU, {sym.states / (c1 - c0):,.0f} states/s: "
              f"the canonical key of each state costs the difference)")
        print(f"  symmetry reduction factor: x{flat.states / sym.states:.2f}")
        agree = {n: r.trace_length for n, r in sym.properties.items()} == {
            n: r.trace_length for n, r in flat.properties.items()
        }
        print(f"  verdicts and shortest lengths agree with and without symmetry: {agree}")
        same = same and agree
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
