"""Throughput and memory of ``failclosed inspect`` on a synthetic database of the runtime.

The database is generated, not simulated: bulk SQLite inserts of ``--runs`` completed queued
runs of ``EVENTS_PER_RUN`` = 10 events each (context, request, llm with two calls of an MCP
tool, their two tool events, request, llm with one call, its tool event, request, llm), METADATA
payloads, every ``INJECT_EVERY``-th run given a duplicated sequence (F2's footprint). The
default is 10^6 runs and 10^7 events. Each inspection runs in a fresh process, so its peak
resident memory is its own (``ru_maxrss`` of the child): one pass at a tenth of the size and
one at the full size show whether memory grows with the database (it should not: streamed by
run).

    .venv/bin/python benchmarks/bench_inspect.py             # 10^6 runs, 10^7 events
    .venv/bin/python benchmarks/bench_inspect.py --runs 100000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from failclosed.sim.dbschema import EVENT_TABLE, RUN_NAMES, RUN_TABLE, create_sql  # noqa: E402

EVENTS_PER_RUN = 10
INJECT_EVERY = 100_000
T0 = 1_767_225_600


def _payload(kind: str, rnd: int, names: list[str] | None = None, tool: str | None = None) -> str:
    p: dict = {"kind": kind, "round": rnd, "durationMs": 0}
    if names is not None:
        p["requestedToolNames"] = names
        p["finishReason"] = "tool_calls" if names else "stop"
    if tool is not None:
        p.update(toolName=tool, toolIsError=False, toolResultLength=12)
    p["contentRedacted"] = True
    return json.dumps(p, separators=(",", ":"))


STEPS = [
    ("context", 1, _payload("context", 1)),
    ("request", 1, _payload("request", 1)),
    ("llm", 1, _payload("llm", 1, ["mcp_crm_lookup", "mcp_crm_note"])),
    ("tool", 1, _payload("tool", 1, tool="mcp_crm_lookup")),
    ("tool", 1, _payload("tool", 1, tool="mcp_crm_note")),
    ("request", 2, _payload("request", 2)),
    ("llm", 2, _payload("llm", 2, ["mcp_crm_lookup"])),
    ("tool", 2, _payload("tool", 2, tool="mcp_crm_lookup")),
    ("request", 3, _payload("request", 3)),
    ("llm", 3, _payload("llm", 3, [])),
]
assert len(STEPS) == EVENTS_PER_RUN


def generate(path: str, runs: int) -> tuple[float, int]:
    """The database at ``path``; returns (seconds, injected anomalies)."""
    t = time.perf_counter()
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=OFF")
    db.execute("PRAGMA synchronous=OFF")
    stmts = create_sql()
    for s in stmts[:2]:
        db.execute(s)

    def run_rows():
        for k in range(1, runs + 1):
            c = T0 + k // 10
            row = {"uid": k, "pid": 0, "uuid": f"00000000-0000-4000-8000-{k:012d}", "status": "completed",
                   "configuration_uid": 1, "configuration_identifier": "bench", "be_user": 0, "iterations": 3,
                   "truncated": 0, "total_prompt_tokens": 0, "total_completion_tokens": 0, "total_tokens": 0,
                   "estimated_cost": 0.0, "error_class": "", "termination_reason": "completed",
                   "suspended_state": "", "queued_request": "", "claimed_by": "", "lease_expires": 0,
                   "requeue_count": 0, "pending_effect": "", "started_at": c, "finished_at": c + 30,
                   "tstamp": c + 30, "crdate": c}
            yield tuple(row[n] for n in RUN_NAMES)

    def event_rows():
        uid = 0
        for k in range(1, runs + 1):
            c = T0 + k // 10
            dup = k % INJECT_EVERY == 0
            for seq, (kind, rnd, payload) in enumerate(STEPS):
                uid += 1
                yield (uid, 0, k, seq - 1 if dup and seq == 9 else seq, kind, rnd, 0.0, payload, c + seq)

    db.executemany(f"INSERT INTO {RUN_TABLE} VALUES ({','.join('?' * len(RUN_NAMES))})", run_rows())
    db.executemany(f"INSERT INTO {EVENT_TABLE} VALUES (?,?,?,?,?,?,?,?,?)", event_rows())
    for s in stmts[2:]:
        db.execute(s)
    db.commit()
    db.close()
    return time.perf_counter() - t, runs // INJECT_EVERY


CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
from failclosed.sim.inspect import inspect
from failclosed.sim.inspect_sources import open_source
t = time.perf_counter()
src = open_source({path!r})
rep = inspect(src)
src.close()
dt = time.perf_counter() - t
print(json.dumps({{"seconds": dt, "runs": rep.runs, "events": rep.events,
                  "checks": sorted({{a.check for a in rep.anomalies}}), "anomalies": len(rep.anomalies)}}))
"""


def inspect_in_child(path: str) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT), path=path)],
                         check=True, capture_output=True, text=True).stdout
    res = json.loads(out)
    res["peak_rss_mib"] = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1_000_000)
    ap.add_argument("--dir", default=None, help="where the databases go (default: a temporary directory)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        for runs in (max(1, args.runs // 10), args.runs):
            path = os.path.join(d, f"bench-{runs}.sqlite")
            gen, injected = generate(path, runs)
            size = os.path.getsize(path) / 2**20
            res = inspect_in_child(path)
            assert res["runs"] == runs and res["events"] == runs * EVENTS_PER_RUN, res
            assert res["anomalies"] == injected and res["checks"] == (["sequence_reused"] if injected else []), res
            print(f"{runs:>9,} runs {res['events']:>11,} events ({size:,.0f} MiB, generated in {gen:.0f} s): "
                  f"inspected in {res['seconds']:.1f} s = {res['runs'] / res['seconds']:,.0f} runs/s, "
                  f"{res['events'] / res['seconds']:,.0f} events/s; peak RSS {res['peak_rss_mib']:.0f} MiB; "
                  f"{res['anomalies']} of {injected} injected duplicate sequences found", flush=True)
            os.remove(path)


if __name__ == "__main__":
    main()
