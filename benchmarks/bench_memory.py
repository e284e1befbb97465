"""Benchmark of the seen set (spec/seen.py): one member of a scope searched with the seen set
in memory (no budget: one dict, the default) and under a memory budget that makes it spill
(older layers' fingerprints in sorted runs on disk), each in a fresh process, one after the
other.

Prints per search: states, CPU seconds and states per CPU second, the process's peak RSS
(``ru_maxrss``), the search's own sampled peak and its growth per state, the estimated bytes
stored in memory per state (the seen set and the per-state arrays: spec.exploration
.Stats.bytes_per_state) and the seen set's line; then the ratios spilled / in memory. CPU time, not
wall time, is the figure on a shared machine.

    python benchmarks/bench_memory.py [SCOPE] [--member NAME] [--policy P]
                                      [--max-states N] [--budget MIB]

Default: the largest member of ``full`` that issue 29 names (two queued runs, two workers,
async, store_error plus audit_insert_fails, budget 2) under ``current``, cut at 300,000
states, spilled under a budget of 64 MiB.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.spec.scope import load_scope, member  # noqa: E402

DEFAULT_MEMBER = "two-runs:w2-async-queued+queued-read-completed-store_error+audit_insert_fails-b2"


def _search(args: tuple[dict, str, int | None, float | None]) -> dict:
    """One search in this (fresh) process: its figures."""
    import resource

    from failclosed.spec.checker import ConfigPart, check
    from failclosed.spec.seen import resident_mib

    data, policy, max_states, budget = args
    rss0 = resident_mib()
    c0 = time.process_time()
    res = check(policy, ConfigPart("bench", "", data), None, witnesses=False, coverage=False,
                max_states=max_states, memory_budget_mib=budget)
    cpu = time.process_time() - c0
    st = res.parts[0].stats
    return {"states": st.states, "cpu": cpu, "maxrss": resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss / 1024, "peak": st.search_peak_rss_mib, "rss0": rss0,
        "bytes": st.bytes_per_state, "seen": st.seen, "truncated": st.truncated,
        "verdicts": {n: (r.holds, r.trace_length) for n, r in res.properties.items()}}


def _line(what: str, r: dict) -> str:
    n = r["states"]
    grew = (r["peak"] - r["rss0"]) * (1 << 20) / max(n, 1)
    return (f"{what}: {n:,} states{' (cut)' if r['truncated'] else ''}, CPU {r['cpu']:.1f} s "
            f"({n / max(r['cpu'], 1e-9):,.0f} states/CPU s), peak RSS {r['maxrss']:,.0f} MiB "
            f"(search peak {r['peak']:,.0f} MiB, {grew:,.0f} B per state over the start), "
            f"stored in memory {r['bytes']:.1f} B per state (estimate)"
            f"{', ' + r['seen'] if r['seen'] else ''}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scope", nargs="?", default="full")
    ap.add_argument("--member", default=DEFAULT_MEMBER)
    ap.add_argument("--policy", default="current")
    ap.add_argument("--max-states", type=int, default=300_000)
    ap.add_argument("--budget", type=float, default=64.0, metavar="MIB")
    a = ap.parse_args(argv)
    m = member(load_scope(a.scope), a.member)
    print(f"{a.scope} member {m.name} under {a.policy}, --max-states {a.max_states:,}; "
          f"spilled under --memory-budget {a.budget:g} MiB", flush=True)
    ctx = multiprocessing.get_context("spawn")
    rows = {}
    for what, budget in (("in memory", None), ("spilled", a.budget)):
        with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as ex:
            rows[what] = ex.submit(_search, (m.data, a.policy, a.max_states, budget)).result()
        print(_line(what, rows[what]), flush=True)
    mem = rows["in memory"]
    same = all(r["verdicts"] == mem["verdicts"] and r["states"] == mem["states"]
               for r in rows.values())
    x, y = rows["spilled"], mem
    print(f"spilled / in memory: CPU x{x['cpu'] / max(y['cpu'], 1e-9):.2f}, "
          f"peak RSS x{x['maxrss'] / max(y['maxrss'], 1e-9):.2f}, search peak "
          f"x{x['peak'] / max(y['peak'], 1e-9):.2f}, stored bytes per state "
          f"x{x['bytes'] / max(y['bytes'], 1e-9):.2f}")
    print(f"same states and verdicts: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
