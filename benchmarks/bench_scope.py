"""Benchmark of scope checking (spec/scope.py).

Prints, for a scope (default ``standard``) and policies (default ``current`` and
``proposed``): configurations generated / after reduction (renamings, subsumed) and per
product; then checks it with ``--jobs`` processes (no cache) and prints total states, wall
time and CPU seconds per product (which dimension costs what). With ``--speedup`` it also
checks a sample with one and with two processes (the speed-up of ``--jobs 2``), and with
``--dask`` the overhead of one configuration as a task on an in-process Dask cluster against
the same call in this process.

With ``--per-product K`` it checks instead K members of each product (evenly spaced, plus
the member of each product that spec.scope guesses largest), each in a fresh process (one
task per process, ``--jobs`` at a time), and prints per member its states, CPU seconds,
states per CPU second and peak RSS per stored state; per product the mean CPU seconds of its
sample times its members: an **extrapolation** of the whole scope's CPU time, and of its
wall time on ``--jobs`` processes (CPU / jobs), not a measurement of it.

With ``--reductions K`` it measures each state abstraction alone and together: the K largest
members (by the states a scope run stored, ``--measured FILE`` being that run's ``--json``;
else spec.scope's guess), each searched for every property with no reduction (the time shift
only), with the symmetry reduction or the log order alone, and with both (the default), each
in a fresh process (``--jobs`` at a time; ``--max-states`` caps each search): states, CPU seconds, peak RSS, the factor of each against none, whether the
verdicts and lengths agree with the default's, and the sums.

    python benchmarks/bench_scope.py [SCOPE] [--policy P ...] [--jobs 2] [--sample N]
                                     [--speedup] [--dask] [--per-product K]
                                     [--reductions K [--measured FILE] [--max-states N]]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.spec.scope import (  # noqa: E402
    Member,
    Scope,
    _cost,
    check_member,
    check_scope,
    load_scope,
)


def _sample(scope: Scope, n: int) -> Scope:
    """Every k-th member, so each product keeps its share."""
    if n <= 0 or n >= len(scope.members):
        return scope
    step = len(scope.members) / n
    members = [scope.members[int(k * step)] for k in range(n)]
    return Scope(f"{scope.name}-sample{n}", scope.path, scope.description, members,
                 len(members), 0, 0, {})


def _fmt(s: float) -> str:
    return f"{s / 60:.1f} min" if s >= 120 else f"{s:.1f} s"


def _measured(args: tuple[str, dict, str]) -> tuple[str, int, float, float, float]:
    """One member in this (fresh) process: (name, states, CPU seconds, peak RSS MiB, its
    growth during the check MiB)."""
    import resource

    name, data, policy = args
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    c0 = time.process_time()
    r = check_member(name, data, policy)
    cpu = time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return name, r.states, cpu, rss, rss - rss0


def per_product(scope: Scope, policy: str, k: int, jobs: int) -> None:
    """Stratified sample: k evenly spaced members of each product and its largest guess."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    by: dict[str, list[Member]] = defaultdict(list)
    for m in scope.members:
        by[m.origin].append(m)
    picked: dict[str, list[Member]] = {}
    for origin, ms in by.items():
        step = max(1, len(ms) // k)
        chosen = {m.name: m for m in ms[::step][:k]}
        big = max(ms, key=_cost)
        chosen[big.name] = big
        picked[origin] = list(chosen.values())
    ctx = multiprocessing.get_context("spawn")
    rows: dict[str, tuple[int, float, float]] = {}
    largest: dict[str, str] = {o: max(ms, key=_cost).name for o, ms in by.items()}
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, max_tasks_per_child=1) as ex:
        futs = [ex.submit(_measured, (m.name, m.data, policy)) for ms in picked.values() for m in ms]
        for f in as_completed(futs):
            name, n, cpu, rss, grew = f.result()
            rows[name] = (n, cpu, rss)
            print(f"  {name}: {n:,} states, CPU {cpu:.1f} s ({n / max(cpu, 1e-9):,.0f} states/s), "
                  f"peak RSS {rss:.0f} MiB (+{grew:.0f} during the check: "
                  f"{grew * 1024 / max(n, 1):.2f} KiB per state)", flush=True)
    total_cpu = 0.0
    total_states = 0.0
    print(f"per product ({policy}; sample checked in {_fmt(time.perf_counter() - t0)} wall):")
    for origin, ms in picked.items():
        # the guessed largest counts once; the evenly spaced ones stand for the rest
        big = rows[largest[origin]]
        sample = [rows[m.name] for m in ms if m.name != largest[origin]] or [big]
        mean_cpu = sum(r[1] for r in sample) / len(sample)
        mean_states = sum(r[0] for r in sample) / len(sample)
        n = len(by[origin])
        cpu = big[1] + mean_cpu * (n - 1)
        total_cpu += cpu
        total_states += big[0] + mean_states * (n - 1)
        print(f"  {origin:22s} {n:5,} members: largest guess {big[0]:,} states {big[1]:.1f} s, "
              f"the others' sample ({len(sample)}) mean {mean_states:,.0f} states {mean_cpu:.1f} s "
              f"-> {_fmt(cpu)} CPU (extrapolated)")
    print(f"extrapolated: {total_states:,.0f} states, {_fmt(total_cpu)} CPU for {policy}, "
          f"{_fmt(total_cpu / jobs)} wall on {jobs} idle cores (an extrapolation from the sample, "
          "not a run of the scope)")


# the reductions measured one by one (--reductions): name -> check()'s switches. "none" keeps
# the time shift (without it, a search without a horizon never ends: the clock only grows)
_ALONE = {
    "none": dict(symmetry=False, logs=False),
    "symmetry": dict(symmetry=True, logs=False),
    "log order": dict(symmetry=False, logs=True),
    "all": dict(symmetry=True, logs=True),
}


def _reduction_measured(args: tuple[str, dict, str, str, int | None]) -> dict:
    """One member under one set of reductions, every property, in this (fresh) process:
    states, CPU seconds, peak RSS (MiB), truncated, and {property: length} of its
    violations."""
    import resource

    from failclosed.spec.checker import ConfigPart, check

    name, data, policy, which, cap = args
    c0 = time.process_time()
    r = check(policy, ConfigPart(name, "", data), None, witnesses=False, coverage=False,
              max_states=cap, **_ALONE[which])
    cpu = time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"states": r.states, "cpu": cpu, "rss": rss, "truncated": not r.complete,
            "cells": {n: v.trace_length for n, v in r.properties.items() if not v.holds},
            "reductions": r.reductions}


def _prefix_keys(args: tuple[str, dict, str, int]) -> dict[str, int]:
    """A capped search's prefix, in this (fresh) process: the worlds a search with no
    reduction stores up to the cap, and how many states they are under each reduction alone
    and all of them (what each merges of that prefix: a lower bound of its factor)."""
    from failclosed.model.config import initial_world, parse_config
    from failclosed.model.runtime import successors
    from failclosed.spec import engine
    from failclosed.spec.symmetry import make_canonical

    _name, data, policy, cap = args
    spec, budget = parse_config(data, policy)
    ex = engine.explore([initial_world(spec, budget)], successors, invariants={},
                        canonical=make_canonical(spec, **_ALONE["none"]), max_states=cap,
                        keep_worlds=True)
    out = {}
    for w, sw in _ALONE.items():
        key = make_canonical(spec, **sw)
        out[w] = len(ex.worlds) if key is None else len({key(x) for x in ex.worlds})
    return out


def _largest(scope: Scope, k: int, measured: str | None, policy: str) -> list[tuple[Member, str]]:
    """The k largest members: by the states a scope run stored (``measured``: its --json),
    else by spec.scope's guess (runs, budget, faults, workers)."""
    by = {m.name: m for m in scope.members}
    if measured:
        import json

        rows = json.loads(Path(measured).read_text())["members"]
        rows = [r for r in rows if r["policy"] == policy and r["member"] in by]
        rows.sort(key=lambda r: r["states"], reverse=True)
        return [(by[r["member"]], f"{r['states']:,} states in the scope run") for r in rows[:k]]
    ms = sorted(scope.members, key=lambda m: _cost(m)[1:], reverse=True)[:k]
    return [(m, "guessed") for m in ms]


def _reduction_task(args: tuple[str, tuple]) -> dict:
    """One task of :func:`reductions_table` in a (fresh) worker process."""
    what, rest = args
    return _prefix_keys(rest) if what == "prefix" else _reduction_measured(rest)


def reductions_table(scope: Scope, policy: str, k: int, cap: int | None, jobs: int,
                     measured: str | None) -> None:
    """The k largest members of ``scope``, each with no reduction, each reduction alone, and
    all of them (the default), every property: states, CPU seconds and peak RSS, the factor
    of each against none, and whether the verdicts and lengths agree with the default's;
    with a cap, what each merges of the prefix the search with none stores."""
    import multiprocessing

    members = _largest(scope, k, measured, policy)
    bound = f", each search capped at {cap:,} states" if cap else ""
    print(f"reductions on the {len(members)} largest members of {scope.name} ({policy}, every "
          f"property, a fresh process per search, {jobs} at a time{bound}); factor = none / it:")
    tasks: list[tuple[str, tuple]] = []
    for m, _ in members:
        tasks += [("search", (m.name, m.data, policy, w, cap)) for w in _ALONE]
        if cap:
            tasks.append(("prefix", (m.name, m.data, policy, cap)))
    per = len(_ALONE) + (1 if cap else 0)
    tot: dict[str, list[float]] = {w: [0, 0.0] for w in _ALONE}
    # multiprocessing.Pool: a ProcessPoolExecutor with max_tasks_per_child hung here (3.11)
    with multiprocessing.get_context("spawn").Pool(jobs, maxtasksperchild=1) as pool:
        results = pool.imap(_reduction_task, tasks)
        for m, why in members:
            got = [next(results) for _ in range(per)]
            rows = dict(zip(_ALONE, got[:len(_ALONE)], strict=True))
            base = rows["none"]
            print(f"  {m.name} ({why}):")
            for w, r in rows.items():
                tot[w][0] += r["states"]
                tot[w][1] += r["cpu"]
                more = ">" if r["truncated"] else ""
                f_s = "" if w == "none" else (
                    f"  x{base['states'] / max(r['states'], 1):.2f} states"
                    f"{' (at least)' if base['truncated'] and not r['truncated'] else ''}, "
                    f"x{base['cpu'] / max(r['cpu'], 1e-9):.2f} CPU")
                same = ""
                if not r["truncated"] and not rows["all"]["truncated"]:
                    same = ("  verdicts agree" if r["cells"] == rows["all"]["cells"]
                            else "  VERDICTS DIFFER")
                print(f"    {w:14s} {more}{r['states']:>11,} states  CPU {r['cpu']:8.1f} s  "
                      f"peak RSS {r['rss']:6.0f} MiB{f_s}{same}", flush=True)
            if cap and base["truncated"]:
                pre = got[-1]
                print(f"    the {pre['none']:,} worlds the search with none stores before the "
                      "cap are, under each: " + ", ".join(
                          f"{w} {n:,} (x{pre['none'] / max(n, 1):.2f})"
                          for w, n in pre.items() if w != "none"), flush=True)
    print("  together (sums over the members; a capped search counts its cap):")
    n0, c0 = tot["none"]
    for w, (n, c) in tot.items():
        print(f"    {w:14s} {int(n):>12,} states  CPU {_fmt(c):>9s}"
              + ("" if w == "none" else f"  x{n0 / max(n, 1):.2f} states, x{c0 / max(c, 1e-9):.2f} CPU"))


def _other_mode(args: argparse.Namespace, scope: Scope, policies: list[str]) -> bool:
    """The modes that replace the scope's check (``--reductions``, ``--per-product``): True
    if one ran."""
    if args.reductions:
        for pol in policies:
            reductions_table(scope, pol, args.reductions, args.max_states, args.jobs,
                             args.measured)
        return True
    if args.per_product:
        for pol in policies:
            per_product(scope, pol, args.per_product, args.jobs)
        return True
    return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scope", nargs="?", default="standard")
    ap.add_argument("--policy", action="append", dest="policies")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--sample", type=int, default=0, help="check only N members (0: all)")
    ap.add_argument("--speedup", action="store_true", help="--jobs 1 against --jobs 2")
    ap.add_argument("--dask", action="store_true", help="overhead of a Dask task")
    ap.add_argument("--per-product", type=int, default=0,
                    help="K members of each product in fresh processes: extrapolate the scope")
    ap.add_argument("--reductions", type=int, default=0, metavar="K",
                    help="the K largest members with no reduction, each alone, and all")
    ap.add_argument("--measured", metavar="FILE",
                    help="with --reductions: the largest by a scope run's --json (members)")
    ap.add_argument("--max-states", type=int, default=None, metavar="N",
                    help="with --reductions: cap each search at N states")
    args = ap.parse_args(argv)
    policies = args.policies or ["current", "proposed"]

    t0 = time.perf_counter()
    scope = load_scope(args.scope)
    print(f"scope {scope.name}: {scope.generated:,} generated, {scope.equivalent:,} renamings and "
          f"{scope.subsumed:,} subsumed dropped, {len(scope.members):,} configurations "
          f"(generation and reduction {time.perf_counter() - t0:.2f} s)")
    for origin, n in scope.by_origin.items():
        print(f"  {origin:28s} {n:6,}")
    if _other_mode(args, scope, policies):
        return 0
    target = _sample(scope, args.sample)

    t0 = time.perf_counter()
    res = check_scope(target, policies, jobs=args.jobs)
    wall = time.perf_counter() - t0
    cpu: dict[str, float] = defaultdict(float)
    states: dict[str, int] = defaultdict(int)
    origin = {m.name: m.origin for m in target.members}
    for r in res.results:
        cpu[origin[r.member]] += r.seconds
        states[origin[r.member]] += r.states
    print(f"checked {len(target.members):,} configurations x {len(policies)} policies "
          f"({', '.join(policies)}) with --jobs {args.jobs}: {res.states:,} states, "
          f"wall {_fmt(wall)}, CPU {_fmt(sum(cpu.values()))}")
    for o in sorted(cpu, key=cpu.get, reverse=True):
        print(f"  {o:28s} CPU {_fmt(cpu[o]):>10s}  {states[o]:12,} states")
    slow = sorted(res.results, key=lambda r: r.seconds, reverse=True)[:5]
    for r in slow:
        print(f"  slowest: {r.seconds:6.1f} s {r.states:9,} states  {r.policy} {r.member}")
    for pol in policies:
        bad = [n for n, v in res.verdicts[pol].items() if not v.holds]
        print(f"  {pol}: {len(bad)} of {len(res.properties)} properties violated in {res.reach(pol)}")

    if args.speedup:
        sample = _sample(scope, min(len(scope.members), args.sample or 120))
        t1 = time.perf_counter()
        check_scope(sample, policies[:1], jobs=1)
        one = time.perf_counter() - t1
        t2 = time.perf_counter()
        check_scope(sample, policies[:1], jobs=2)
        two = time.perf_counter() - t2
        print(f"--jobs 1: {one:.1f} s, --jobs 2: {two:.1f} s on {len(sample.members)} "
              f"configurations: speed-up x{one / two:.2f}")

    if args.dask:
        from distributed import Client, LocalCluster

        m = min(scope.members, key=lambda m: len(m.data["runs"]))
        reps = 20
        t3 = time.perf_counter()
        for _ in range(reps):
            check_member(m.name, m.data, policies[0])
        local = (time.perf_counter() - t3) / reps
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            from failclosed.spec.scope import _task

            args_ = (m.name, m.data, policies[0], None, None, True, False, None)
            client.submit(_task, args_, pure=False).result()  # warm the worker
            t4 = time.perf_counter()
            futs = [client.submit(_task, args_, pure=False) for _ in range(reps)]
            for f in futs:
                f.result()
            remote = (time.perf_counter() - t4) / reps
        print(f"one configuration ({m.name}): {local * 1000:.1f} ms in process, "
              f"{remote * 1000:.1f} ms as a Dask task: overhead {1000 * (remote - local):+.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
