"""Simulator speed: per-event cost against a bare SimPy loop, runs per second on one core, and
the measured throughput of ``failclosed sweep --jobs 2`` with its projection to 10^6 runs.

    .venv/bin/python benchmarks/bench_sim.py [--runs 1000] [--policy current]
        [--repeat 2] [--sweep-seeds 4,12] [--jobs 2]

What is measured, in this process and this run:

* the simulator on the shipped default config (``sim/configs/default.toml``), best wall time
  of ``--repeat`` runs (same seed: the same history each time, checked);
* its cost per fired model transition (clock moves included) and per SimPy event it
  processed (timeouts, process starts, store gets and puts: every event ``env.step`` took);
* a bare SimPy loop: one process yielding as many ``env.timeout`` as the simulator
  processed SimPy events, nothing else; three after each simulator run, best reported;
* the ratio of the two per-SimPy-event costs;
* runs simulated per second on one core (the simulator's wall time, nothing else);
* the same figures by this process's CPU time (steadier on a shared machine);
* ``failclosed sweep CONFIG --seeds K --jobs J`` as a subprocess, end to end (interpreter
  start, process pool, metrics, CSV), for two sample sizes K1 < K2 simulations of
  ``--runs`` runs each: wall time and runs per second of each; 10^6 runs are projected from
  the larger sample's rate and, separating the fixed start-up cost, from the slope between
  the two (wall(10^6) = fixed + 10^6 x seconds per run at the margin); the same slope of the
  CPU time of the command and its workers, spread over ``--jobs`` cores, gives what two idle
  cores would take (on a shared machine the wall clock measures the other jobs too).

The machine is shared: the load average is printed beside the figures; compare ratios.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import simpy  # noqa: E402
from failclosed.model.config import read_toml  # noqa: E402
from failclosed.sim import config as sconfig  # noqa: E402
from failclosed.sim.engine import Simulation  # noqa: E402


def bare(n: int, clock=time.perf_counter) -> float:
    """Time (wall, or ``clock``) of one SimPy process yielding ``n`` timeouts."""
    env = simpy.Environment()

    def proc(env):
        for _ in range(n):
            yield env.timeout(1.0)

    env.process(proc(env))
    t0 = clock()
    env.run()
    return clock() - t0


def simpy_events(env: simpy.Environment) -> int:
    """Events the environment processed: scheduled ones (its event-id counter) less those
    still queued. Reads SimPy internals; a benchmark, not the simulator, depends on them."""
    return next(env._eid) - len(env._queue)  # type: ignore[attr-defined]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def sweep(config: str, policy: str, seeds: int, jobs: int, runs: int) -> tuple[float, float]:
    """Wall time of ``failclosed sweep`` (a fresh interpreter, as a user runs it), and the CPU
    time of it and its worker processes."""
    with tempfile.TemporaryDirectory() as d:
        cfg = config
        if runs != sconfig.load(read_toml(config)).runs:
            cfg = os.path.join(d, "bench.toml")
            text = Path(config).read_text()
            raw = read_toml(config)
            text = text.replace(f"count = {raw['runs']['count']}", f"count = {runs}", 1)
            Path(cfg).write_text(text)
            assert sconfig.load(read_toml(cfg)).runs == runs, "could not set runs.count"
        out = os.path.join(d, "sweep.csv")
        cmd = [sys.executable, "-m", "failclosed", "sweep", cfg, "--param", f"policy={policy}",
               "--seeds", str(seeds), "--jobs", str(jobs), "--out", out, "--quiet"]
        t0, c0 = time.perf_counter(), _children_cpu()
        rc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL).returncode
        cpu = _children_cpu() - c0
        assert rc in (0, 1), f"sweep exited {rc}"  # 1: a property was violated (the default config does)
        wall = time.perf_counter() - t0
        with open(out, encoding="utf-8") as f:
            rows = sum(1 for _ in f) - 1
        assert rows == seeds, f"sweep wrote {rows} rows, expected {seeds}"
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--policy", default="current")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=2, help="simulator runs (best is reported)")
    ap.add_argument("--sweep-seeds", default="4,12",
                    help="simulations in the two measured sweeps, K1,K2 (0: skip the sweep)")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    path = sconfig.default_path()
    cfg = sconfig.load(read_toml(path))

    walls, bares, digests = [], [], set()
    cpus, cpu_bares = [], []
    for _ in range(max(1, a.repeat)):  # interleaved: simulator, then three bare loops
        t0 = time.perf_counter()
        c0 = time.process_time()
        sim = Simulation(cfg, policy=a.policy, seed=a.seed, runs=a.runs, keep_going=True).run()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        digests.add(sim.history.hexdigest())
        events = simpy_events(sim.env)
        bares.extend(bare(events) for _ in range(3))
        cpu_bares.extend(bare(events, time.process_time) for _ in range(3))
    assert len(digests) == 1, "the same seed gave different histories"
    wall = min(walls)
    b = min(bares)
    transitions = sim.fired
    per_t = wall / transitions * 1e6
    per_e = wall / events * 1e6
    per_bare = b / events * 1e6
    rps = a.runs / wall
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")

    print(f"default config, policy {a.policy}, seed {a.seed}: {a.runs} runs, {transitions:,} transitions "
          f"({sim.checked:,} asserted enabled), {events:,} SimPy events, {sim.env.now:,.0f} simulated s, "
          f"history {next(iter(digests))[:16]}")
    print(f"machine: {os.cpu_count()} CPUs, load average {load:.2f} (a shared machine: compare ratios)")
    print(f"simulator:       {wall:8.3f} s   {per_t:7.2f} us/transition   {per_e:7.2f} us/SimPy event"
          f"   (best of {len(walls)})")
    print(f"bare SimPy loop: {b:8.3f} s   {'':22}{per_bare:7.2f} us/SimPy event   "
          f"({events:,} timeouts, best of {len(bares)})")
    print(f"ratio per SimPy event: {per_e / per_bare:.1f}x   (per transition: {per_t / per_bare:.1f}x)")
    cpu, cpu_b = min(cpus), min(cpu_bares)
    print(f"by CPU time (this process): simulator {cpu / transitions * 1e6:.2f} us/transition, "
          f"{cpu / events * 1e6:.2f} us/SimPy event; bare {cpu_b / events * 1e6:.2f} us/SimPy "
          f"event; ratio per SimPy event {cpu / cpu_b:.1f}x (per transition "
          f"{cpu / transitions / (cpu_b / events):.1f}x); {a.runs / cpu:,.0f} runs/s")
    print(f"runs simulated per second, one core: {rps:,.0f}")
    t0 = time.perf_counter()
    Simulation(cfg, policy=a.policy, seed=a.seed, runs=a.runs, keep_going=True,
               check_steps=False).run()
    w_off = time.perf_counter() - t0
    print(f"  without the per-step property checks (archive + periodic only): "
          f"{w_off / transitions * 1e6:.2f} us/transition, {a.runs / w_off:,.0f} runs/s")
    print(f"  10^6 runs at that rate: {1e6 / rps:,.0f} s on one core, "
          f"{1e6 / rps / a.jobs:,.0f} s on {a.jobs} if they scaled perfectly")
    sizes = sorted({int(x) for x in str(a.sweep_seeds).split(",") if int(x) > 0})
    points = []
    for k in sizes:
        sw, cpu = sweep(path, a.policy, k, a.jobs, a.runs)
        n = k * a.runs
        points.append((n, sw, cpu))
        print(f"failclosed sweep --seeds {k} --jobs {a.jobs} (measured, end to end): "
              f"{n:,} runs in {sw:.2f} s = {n / sw:,.0f} runs/s; {cpu:.2f} s of CPU in all "
              f"(the command and its workers)")
    if points:
        n, sw, _ = points[-1]
        print(f"  10^6 runs at the rate of the {n:,}-run sweep: {1e6 * sw / n:,.0f} s = {1e6 * sw / n / 60:.1f} min")
    if len(points) >= 2:
        (n1, s1, c1), (n2, s2, c2) = points[0], points[-1]
        for what, x1, x2, per in (("wall clock", s1, s2, 1), ("CPU time", c1, c2, a.jobs)):
            marginal = (x2 - x1) / (n2 - n1) / per
            if marginal <= 0:
                print(f"  at the margin ({what}): the larger sweep was not slower (noise): no projection")
                continue
            fixed = max(0.0, x1 / per - marginal * n1)
            proj = fixed + 1e6 * marginal
            idle = f", over {a.jobs} idle cores" if per > 1 else ""
            print(f"  at the margin ({what}{idle}): {1 / marginal:,.0f} runs/s, {fixed:.1f} s "
                  f"fixed: 10^6 runs in {proj:,.0f} s = {proj / 60:.1f} min")

if __name__ == "__main__":
    main()
