"""Benchmark of ``failclosed check --jobs``: the parts of a configuration on processes.

Checks a configuration (default ``small``, ten parts, every property, witnesses and coverage,
as ``failclosed check`` does) with ``--jobs 1`` and with ``--jobs 2`` and prints the wall
clock of each and the speed-up, the bound the largest part puts on it (no number of
processes finishes before it), and the speed-up the same work has on idle cores: the parts
dealt to the processes in part order as the pool deals them, each process's share checked
as a worker checks it (every witness searched: a worker does not know what the other parts
reached) in a fresh interpreter, cold start included, against ``--jobs 1`` in a fresh
interpreter; CPU seconds, which the other sessions on a shared machine do not inflate much.
The verdicts of the two runs must be equal (the script exits 1 otherwise).

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


def _part_cpu(policy: str, config: str) -> tuple[dict[str, float], dict[str, float]]:
    """Each part's CPU seconds searched as ``--jobs 1`` searches it (a witness an earlier part
    reached is not searched again) and as a worker process does (every witness), measured
    in pairs, one after the other, so that both see the same machine."""
    _, parts = load_config(config)
    safety, live = resolve_properties(None)
    search = _Search(policy, tuple(safety), tuple(live), True, True, False, None)
    seq: dict[str, float] = {}
    worker: dict[str, float] = {}
    open_w = set(WITNESSES)
    for part in parts:
        c0 = time.process_time()
        out = _check_part(part, search, tuple(w for w in WITNESSES if w in open_w))
        c1 = time.process_time()
        _check_part(part, search, tuple(WITNESSES))
        seq[part.name], worker[part.name] = c1 - c0, time.process_time() - c1
        open_w -= set(out.witnesses)
    return seq, worker


_FRESH = """
import sys, time
from failclosed.spec.checker import WITNESSES, _check_part, _Search, check, load_config, resolve_properties
policy, config, which = sys.argv[1], sys.argv[2], sys.argv[3]
if which == "all":
    check(policy, config, None)
else:
    _, parts = load_config(config)
    safety, live = resolve_properties(None)
    search = _Search(policy, tuple(safety), tuple(live), True, True, False, None)
    for i in map(int, which.split(",")):
        _check_part(parts[i], search, tuple(WITNESSES))
"""


def _fresh_cpu(policy: str, config: str, which: str) -> float:
    """CPU seconds of a fresh interpreter that imports the checker and then checks the whole
    configuration (``which="all"``: ``--jobs 1``) or the parts numbered in ``which`` as a
    worker process searches them: what a spawned worker costs, cold start included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", _FRESH, policy, config, which], check=True,
                   cwd=Path(__file__).resolve().parents[1])
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _deal(part_s: list[float], jobs: int) -> list[list[int]]:
    """The parts dealt in order to whichever of ``jobs`` processes is free first (as the
    pool deals them), by their CPU seconds."""
    free = [0.0] * min(jobs, len(part_s))
    shares: list[list[int]] = [[] for _ in free]
    for i, s in enumerate(part_s):
        k = free.index(min(free))
        free[k] += s
        shares[k].append(i)
    return shares


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="small")
    ap.add_argument("--policy", default="current")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)

    one, _, _, r1 = _timed(args.policy, args.config, 1)
    many, _, workers_cpu, rn = _timed(args.policy, args.config, args.jobs)
    seq, in_worker = _part_cpu(args.policy, args.config)
    cpu = sum(seq.values())
    largest = max(seq, key=seq.__getitem__)
    n_workers = min(args.jobs, len(seq))
    shares = _deal(list(in_worker.values()), args.jobs)
    fresh_one = _fresh_cpu(args.policy, args.config, "all")
    fresh = [_fresh_cpu(args.policy, args.config, ",".join(map(str, sh))) for sh in shares]
    print(f"check {args.config} under {args.policy}: {len(seq)} parts, {r1.states:,} states")
    print(f"  --jobs 1:  {one:6.1f} s wall")
    print(f"  --jobs {args.jobs}:  {many:6.1f} s wall  (x{one / many:.2f}), {workers_cpu:.1f} s CPU "
          f"in {n_workers} workers")
    print(f"  CPU, the parts one after the other: {cpu:.1f} s; the largest, {largest}, "
          f"{seq[largest]:.1f} s (no speed-up beyond x{cpu / seq[largest]:.2f})")
    print(f"  on {args.jobs} idle cores, from CPU seconds in fresh processes: --jobs 1 "
          f"{fresh_one:.1f} s; the workers' shares {' and '.join(f'{x:.1f} s' for x in fresh)} "
          f"(x{fresh_one / max(fresh):.2f})")
    same = ({n: (r.holds, r.trace_length, r.part) for n, r in r1.properties.items()}
            == {n: (r.holds, r.trace_length, r.part) for n, r in rn.properties.items()}
            and r1.witnesses == rn.witnesses and r1.states == rn.states)
    print(f"  verdicts, witnesses and states equal: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
