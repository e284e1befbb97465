"""Digests of the checker's and the simulator's observable behaviour, recorded once and
compared after every change that is meant to be a pure speed-up (issue 12).

* checker: for every shipped configuration (``spec/configs/*.toml``) and a few policies, the
  ``matrix --json`` cell of every property (holds, shortest length) and the SHA-256 of each
  counterexample: its human-readable trace table, the lasso's cycle start and every world
  along it, field by field;
* simulator: for the shipped default workload and the small test workload, per policy and
  seed, the history's SHA-256, the violation records (property, runs, time) and the SHA-256
  of the scenario kept for each.

    .venv/bin/python -m tests.behaviour_digests [--write] [--only checker|sim] [--fast]

prints the digests that differ from ``tests/data/behaviour_digests.json`` (``--write``
records them instead).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "behaviour_digests.json"
POLICIES = ("current", "proposed", "adr-104")
# configurations the default suite re-checks (seconds each); the rest are @slow
FAST_CONFIGS = ("tiny", "cancel-probe-sync", "small-input", "small-approval")
SIM_SEEDS = (1, 2, 3)
FAST_SIM = {("small", p, s) for p in POLICIES for s in SIM_SEEDS}


# a process's fields in the order they were recorded (before WorkerPart / ResumePart)
_FLAT_PROC = ("name", "kind", "run", "pc", "seg", "worker", "identity", "owner", "guard", "handle",
              "hook", "observer", "turn", "rounds", "cap", "call", "step", "then", "error", "eclass",
              "settle", "count", "decision", "seen_turn", "refusal", "epoch", "cancelled", "synthesis",
              "cancel_seen", "stamped", "claim_requeues", "outer")


def _canon(v: Any) -> Any:
    """A value as nested plain tuples: records by their declared fields, in order."""
    import dataclasses

    if isinstance(v, (str, int, bool, float)) or v is None:
        return v
    if type(v).__name__ == "SettlePlan" and not v.expect:
        # the digests were recorded when a settle plan was a plain tuple whose 8th element
        # (the expected status) was present only when set
        v = tuple(v)[:7]
    if isinstance(v, (tuple, list)):
        return tuple(_canon(x) for x in v)
    if isinstance(v, frozenset):
        return ("frozenset", tuple(sorted(repr(_canon(x)) for x in v)))
    names = [f.name for f in dataclasses.fields(v)]
    if type(v).__name__ == "World":  # recorded when the world held one reaper's tick
        def one(n: str) -> Any:
            if n == "reapers":
                return ("reaper", _canon(v.reapers[0] if v.reapers else None))
            return (n, _canon(getattr(v, n)))
        return ("World", tuple(one(n) for n in names if n != "config"))
    if type(v).__name__ == "ReaperState":  # recorded before a tick named its reaper
        names = [n for n in names if n != "name"]
    if type(v).__name__ == "Row" and not v.dispatch_deadline:  # recorded before proposal P6
        names = [n for n in names if n != "dispatch_deadline"]
    if type(v).__name__ == "Proc":  # recorded when a process's kind parts were its own fields
        names = _FLAT_PROC
    return (type(v).__name__, tuple((n, _canon(getattr(v, n))) for n in names if n != "config"))


def _sha(x: Any) -> str:
    return hashlib.sha256(repr(x).encode()).hexdigest()


def checker_configs() -> list[str]:
    from failclosed.spec.checker import CONFIG_DIR

    return sorted(p.stem for p in CONFIG_DIR.glob("*.toml"))


def checker_digest(config: str, policy: str) -> dict[str, Any]:
    from failclosed.spec.checker import check, trace_text

    res = check(policy, config, None)
    out: dict[str, Any] = {}
    for n, r in res.properties.items():
        cell: dict[str, Any] = {"holds": r.holds, "trace_length": r.trace_length}
        if not r.holds:
            cell["trace_sha256"] = _sha((
                trace_text(r), r.cycle_start, r.liveness_kind, r.part, _canon(r.initial),
                tuple((tuple(t), _canon(w)) for t, w in r.trace),
            ))
        out[n] = cell
    out["_states"] = res.states
    out["_witnesses"] = sorted(k for k, v in res.witnesses.items() if v is not None)
    return out


def sim_workloads() -> dict[str, dict[str, Any]]:
    import tomllib

    from failclosed.model.config import read_toml
    from failclosed.sim import config as sconfig

    sys.path.insert(0, str(ROOT / "tests"))
    from test_sim import SMALL  # the small test workload

    default = read_toml(sconfig.default_path())
    return {"default": default, "small": tomllib.loads(SMALL), "default-full": default}


def sim_digest(raw: dict[str, Any], policy: str, seed: int, runs: int | None = None,
               **kw: Any) -> dict[str, Any]:
    from failclosed.sim import config as sconfig
    from failclosed.sim.engine import Simulation

    sim = Simulation(sconfig.load(raw), policy=policy, seed=seed, runs=runs, keep_going=True,
                     **kw).run()
    return {
        "history_sha256": sim.history.hexdigest(),
        "fired": sim.fired,
        "violations": [
            [v.property, list(v.runs), round(v.time, 6),
             _sha(json.dumps(v.scenario, sort_keys=True)) if v.scenario is not None else None]
            for v in sim.violations
        ],
    }


SIM_RUNS = {"default": 300, "small": None, "default-full": None}


def compute(only: str | None = None, fast: bool = False, verbose: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"checker": {}, "sim": {}}
    if only in (None, "checker"):
        for c in checker_configs():
            if fast and c not in FAST_CONFIGS:
                continue
            for p in POLICIES:
                t0 = time.process_time()
                out["checker"][f"{c}|{p}"] = checker_digest(c, p)
                if verbose:
                    print(f"checker {c} {p}: {time.process_time() - t0:.1f} s", file=sys.stderr)
    if only in (None, "sim"):
        loads = sim_workloads()
        for name, raw in loads.items():
            for p in POLICIES:
                for s in SIM_SEEDS:
                    if name == "default-full" and (p == "adr-104" or s == 3):
                        continue  # the shipped 1000 runs: two seeds of current and proposed
                    if fast and (name, p, s) not in FAST_SIM:
                        continue
                    t0 = time.process_time()
                    out["sim"][f"{name}|{p}|{s}"] = sim_digest(raw, p, s, SIM_RUNS[name])
                    if verbose:
                        print(f"sim {name} {p} {s}: {time.process_time() - t0:.1f} s",
                              file=sys.stderr)
    return out


def recorded() -> dict[str, Any]:
    return json.loads(DATA.read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--only", choices=("checker", "sim"))
    ap.add_argument("--fast", action="store_true")
    a = ap.parse_args(argv)
    got = compute(a.only, a.fast, verbose=True)
    if a.write:
        old = recorded() if DATA.exists() else {"checker": {}, "sim": {}}
        for k in ("checker", "sim"):
            old[k].update(got[k])
        DATA.write_text(json.dumps(old, indent=1, sort_keys=True) + "\n")
        print(f"wrote {DATA}")
        return 0
    want = recorded()
    bad = [(k, key) for k in got for key, v in got[k].items() if want[k].get(key) != v]
    for k, key in bad:
        print(f"DIFFERS: {k} {key}\n  recorded {want[k].get(key)}\n  now      {got[k][key]}")
    print(f"{sum(len(v) for v in got.values())} digests compared, {len(bad)} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
