"""Coverage of the replication intervals (sim/stats.py) on synthetic data with a known
between-seed variance, against the pooled Wilson interval the project used before.

Each replication (a seed) draws its own rate p_s ~ Beta(mean 0.1, sd 0.04), shared by all of
its runs (as the runs of one simulation share its workers, queue and outages); each run is
Bernoulli(p_s). The target is E[p_s] = 0.1. Over REPS repetitions, the share of 95 % intervals
that contain it: the interval over seeds (Student t over per-seed proportions, widened to the
pooled Wilson interval) should be close to 95 %; the pooled Wilson interval, which treats the
runs as independent, is far below. Also the Student t interval of a mean over normal seeds,
and batch means by sectioning on one autocorrelated series (AR(1), phi = 0.5).

    .venv/bin/python benchmarks/bench_intervals.py [--reps N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from failclosed.sim import stats  # noqa: E402


def proportions(reps: int, seeds: int, runs: int, rng: np.random.Generator) -> tuple[float, float]:
    mean, sd = 0.1, 0.04
    c = mean * (1 - mean) / sd ** 2 - 1
    hit = pooled = 0
    for _ in range(reps):
        k = rng.binomial(runs, rng.beta(mean * c, (1 - mean) * c, size=seeds))
        iv = stats.proportion_interval(k, [runs] * seeds)
        w = stats.wilson(int(k.sum()), runs * seeds)
        hit += iv.lo <= mean <= iv.hi
        pooled += w.lo <= mean <= w.hi
    return hit / reps, pooled / reps


def _means(reps: int, seeds: int, rng: np.random.Generator) -> float:
    hit = 0
    for _ in range(reps):
        iv = stats.t_interval(list(rng.normal(5.0, 2.0, size=seeds)))
        hit += iv.lo <= 5.0 <= iv.hi
    return hit / reps


def sectioning(reps: int, n: int, rng: np.random.Generator) -> float:
    """One series of n AR(1) values with mean 0; the interval of its mean from 10 sections."""
    hit = 0
    for _ in range(reps):
        e = rng.normal(size=n)
        x = np.empty(n)
        x[0] = e[0]
        for i in range(1, n):
            x[i] = 0.5 * x[i - 1] + e[i]
        iv = stats.sectioned(list(x), lambda s: float(np.mean(s)))
        hit += iv.lo <= 0.0 <= iv.hi
    return hit / reps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=4000)
    args = ap.parse_args()
    rng = np.random.default_rng(20261201)
    t0 = time.perf_counter()
    print(f"coverage of nominal 95 % intervals, {args.reps} repetitions each")
    for seeds in (3, 5, 10):
        over, pooled = proportions(args.reps, seeds, 200, rng)
        print(f"  proportion, {seeds:2d} seeds x 200 runs: over seeds {100 * over:5.1f} %   "
              f"pooled Wilson over runs {100 * pooled:5.1f} %")
    for seeds in (2, 5):
        print(f"  mean, {seeds} normal seeds (Student t):           {100 * _means(args.reps, seeds, rng):5.1f} %")
    print(f"  one AR(1) series of 1000, 10 sections:        {100 * sectioning(args.reps // 4, 1000, rng):5.1f} %")
    print(f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
