"""Simulator speed: per-event cost against a bare SimPy loop, runs per second, and the
projected wall time of 10^6 runs with ``failclosed sweep --jobs 2``.

    /work/venv/bin/python benchmarks/bench_sim.py [--runs 1000] [--policy current]

Both loops run in this process, one after the other. An "event" of the simulator is one
fired model transition (including the clock moves); the bare loop schedules the same
number of ``env.timeout`` events from one SimPy process and does nothing else.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import simpy  # noqa: E402

from model.config import read_toml  # noqa: E402
from sim import config as sconfig  # noqa: E402
from sim.engine import Simulation  # noqa: E402


def bare(n: int) -> float:
    env = simpy.Environment()

    def proc(env):
        for _ in range(n):
            yield env.timeout(1.0)

    env.process(proc(env))
    t0 = time.perf_counter()
    env.run()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--policy", default="current")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    cfg = sconfig.load(read_toml(sconfig.default_path()))
    t0 = time.perf_counter()
    sim = Simulation(cfg, policy=a.policy, seed=a.seed, runs=a.runs, keep_going=True).run()
    wall = time.perf_counter() - t0
    events = sim.fired
    b = bare(events)
    per_event = wall / events * 1e6
    per_bare = b / events * 1e6
    rps = a.runs / wall
    cpus = os.cpu_count() or 1
    jobs = 2
    proj = 1e6 / (rps * min(jobs, cpus))
    print(f"default config, policy {a.policy}, seed {a.seed}: {a.runs} runs, {events:,} transitions "
          f"({sim.checked:,} asserted enabled), {sim.env.now:,.0f} simulated s")
    print(f"simulator:       {wall:8.3f} s   {per_event:8.2f} us/event")
    print(f"bare SimPy loop: {b:8.3f} s   {per_bare:8.2f} us/event   (ratio {per_event / per_bare:.1f}x)")
    print(f"runs simulated per second: {rps:,.0f}")
    print(f"projected 10^6 runs with --jobs {jobs} ({cpus} CPUs here): {proj:,.0f} s = {proj / 3600:.2f} h")


if __name__ == "__main__":
    main()
