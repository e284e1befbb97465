"""Benchmark of ``failclosed check --jobs``: the parts of a configuration on processes.

Checks a configuration (default ``small``, ten parts, every property, witnesses and coverage,
as ``failclosed check`` does) with ``--jobs 1`` and with ``--jobs 2`` and prints the wall
clock of each and the speed-up, the bound the largest part puts on it (no number of
processes finishes before it), and the speed-up the same work has on idle cores: each part's
CPU seconds as a worker spends them (every witness searched: a worker does not know what the
other parts reached) dealt to the processes in part order as the pool deals them, plus a
worker's start (spawned: it imports the checker). The verdicts of the two runs must be equal
(the script exits 1 otherwise).

The wall clock is only meaningful on otherwise idle cores: on a shared machine the kernel
gives one session's processes one share together (autogroup), so a second process there buys
little; the CPU figure is the one to compare then.

    .venv/bin/python benchmarks/bench_check_jobs.py [--config small] [--policy current]
                                                    [--jobs 2]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.spec.checker import (  # noqa: E402
    WITNESSES,
    _check_part,
    _Search,
    check,
    load_config,
    resolve_properties,
)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(policy: str, config: str, jobs: int) -> tuple[float, dict[str, float], float, object]:
    """(wall seconds, this process's CPU seconds at the end of each part, the CPU seconds of
    the worker processes, the result)."""
    ends: dict[str, float] = {}
    t0, c0, k0 = time.perf_counter(), time.process_time(), _children_cpu()
    res = check(policy, config, None, jobs=jobs,
                on_part=lambda name, _states: ends.setdefault(name, time.process_time() - c0))
    return time.perf_counter() - t0, ends, _children_cpu() - k0, res


def _worker_parts(policy: str, config: str) -> dict[str, float]:
    """Each part's CPU seconds as a worker process searches it (``check(jobs>1)``)."""
    _, parts = load_config(config)
    safety, live = resolve_properties(None)
    search = _Search(policy, tuple(safety), tuple(live), True, True, False, None)
    out = {}
    for part in parts:
        c0 = time.process_time()
        _check_part(part, search, tuple(WITNESSES))
        out[part.name] = time.process_time() - c0
    return out


def _worker_start() -> float:
    """CPU seconds a spawned worker spends before its first part: importing the checker."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "import failclosed.spec.checker"], check=True,
                   cwd=Path(__file__).resolve().parents[1])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _makespan(part_s: list[float], jobs: int, start: float) -> float:
    """The parts dealt in order to whichever of ``jobs`` processes is free first."""
    free = [start] * min(jobs, len(part_s))
    for s in part_s:
        k = free.index(min(free))
        free[k] += s
    return max(free)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="small")
    ap.add_argument("--policy", default="current")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)

    one, ends, _, r1 = _timed(args.policy, args.config, 1)
    prev, part_s = 0.0, {}
    for name, t in ends.items():  # in order: each part took from the previous end to its own
        part_s[name] = t - prev
        prev = t
    cpu = sum(part_s.values())
    largest = max(part_s, key=part_s.__getitem__)
    many, _, workers_cpu, rn = _timed(args.policy, args.config, args.jobs)
    n_workers = min(args.jobs, len(part_s))
    start = _worker_start()
    in_worker = _worker_parts(args.policy, args.config)
    ideal = _makespan(list(in_worker.values()), args.jobs, start)
    print(f"check {args.config} under {args.policy}: {len(part_s)} parts, {r1.states:,} states")
    print(f"  --jobs 1:  {one:6.1f} s wall, {cpu:.1f} s CPU")
    print(f"  --jobs {args.jobs}:  {many:6.1f} s wall  (x{one / many:.2f}), {workers_cpu:.1f} s CPU "
          f"in {n_workers} workers")
    print(f"  largest part {largest}: {part_s[largest]:.1f} s CPU of {cpu:.1f} "
          f"(no speed-up beyond x{cpu / part_s[largest]:.2f})")
    print(f"  on {args.jobs} idle cores: the parts as workers search them ({sum(in_worker.values()):.1f} s "
          f"CPU) in part order, {start:.1f} s to start a worker: {ideal:.1f} s (x{cpu / ideal:.2f})")
    same = ({n: (r.holds, r.trace_length, r.part) for n, r in r1.properties.items()}
            == {n: (r.holds, r.trace_length, r.part) for n, r in rn.properties.items()}
            and r1.witnesses == rn.witnesses and r1.states == rn.states)
    print(f"  verdicts, witnesses and states equal: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
