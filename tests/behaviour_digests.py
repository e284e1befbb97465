"""Digests of the checker's and the simulator's observable behaviour, recorded in
``tests/data/behaviour_digests.json`` and compared after every change that is meant to keep
behaviour (a speed-up, a refactoring, a new record field; issue 12, issue 26).

* checker: for every shipped configuration (``spec/configs/*.toml``) and each policy of
  ``POLICIES`` (a key ``config|policy``), searched as ``check`` searches by default (its
  reductions: symmetry, the time shift, the log order; spec/symmetry.py), the states and
  transitions explored, the witnesses reached, and per property
  whether it holds, the shortest counterexample's length, part, lasso cycle start and kind,
  and the SHA-256 of its steps: each step's actor, transition name, fault and arguments and
  what it changed in the model's observable view (``model.observe``: fields by entity and
  name, ``row r1.status``, ``proc w1.pc``, ``reaper.idx``, ``events r1``, ``clock``, ...),
  after the initial world's facts that differ from their defaults;
* simulator: for the shipped default workload (300 runs and all 1000) and the small test
  workload, per policy and seed, the history's SHA-256 (sim/history.py's canonical lines),
  the transitions fired, the metrics summary (``sim.metrics.flat``) and the violation records
  (property, runs, time, and the SHA-256 of the kept scenario's steps).

Nothing here reads the records' Python layout (class names, field order, a field that stays
at its default): a field added with a default changes no digest, a step that does something
else changes one (tests/test_behaviour_digests.py holds both).

    python -m tests.behaviour_digests [--write] [--only checker|sim] [--fast]

prints the digests that differ from the recorded ones (``--write`` records them instead:
only after the difference is shown to be the behaviour meant; ``failclosed regenerate``
runs this too).
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


def checker_key(config: str, policy: str) -> str:
    return f"{config}|{policy}"


def parse_checker_key(key: str) -> tuple[str, str]:
    """(configuration, policy) of a checker digest key."""
    config, policy = key.split("|")
    return config, policy


def _step(t: Any) -> list[Any]:
    """A transition as ``[actor, name, fault, {argument: value}]`` (the fault out of the
    arguments: ``None`` on the normal branch)."""
    return [t.actor, t.name, t.fault, {k: v for k, v in t.args if k != "fault"}]


def trace_steps(initial: Any, trace: list[tuple[Any, Any]]) -> dict[str, Any]:
    """A counterexample as the model's observable view (``model.observe``): the initial
    world's facts that differ from their declared defaults, then each step with what it
    changed, by name (``gone``: back to its default, or its entity gone)."""
    from failclosed.model.observe import changes, observe

    before = observe(initial, defaults=False)
    steps = []
    for t, w in trace:
        after = observe(w, defaults=False)
        changed, gone = changes(before, after)
        steps.append(_step(t) + [changed, gone])
        before = after
    return {"initial": observe(initial, defaults=False), "steps": steps}


def _sha(x: Any) -> str:
    return hashlib.sha256(json.dumps(x, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def checker_configs() -> list[str]:
    from failclosed.spec.checker import CONFIG_DIR

    return sorted(p.stem for p in CONFIG_DIR.glob("*.toml"))


def checker_digest(config: str, policy: str) -> dict[str, Any]:
    from failclosed.spec.checker import check

    res = check(policy, config, None)
    out: dict[str, Any] = {}
    for n, r in res.properties.items():
        cell: dict[str, Any] = {"holds": r.holds, "trace_length": r.trace_length}
        if not r.holds:
            assert r.initial is not None
            cell.update(part=r.part, cycle_start=r.cycle_start, liveness_kind=r.liveness_kind,
                        trace_sha256=_sha(trace_steps(r.initial, r.trace)))
        out[n] = cell
    out["_states"] = res.states
    out["_transitions"] = res.transitions
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


def _rounded(x: Any) -> Any:
    return round(x, 9) if isinstance(x, float) else x


def sim_digest(raw: dict[str, Any], policy: str, seed: int, runs: int | None = None,
               **kw: Any) -> dict[str, Any]:
    from failclosed.sim import config as sconfig
    from failclosed.sim import metrics
    from failclosed.sim.engine import Simulation

    cfg = sconfig.load(raw)
    sim = Simulation(cfg, policy=policy, seed=seed, runs=runs, keep_going=True, **kw).run()
    summary = metrics.flat(metrics.compute(sim.all_records(), sim.seed, cfg.lease_seconds(),
                                           sim.window.unattributed))
    return {
        "history_sha256": sim.history.hexdigest(),
        "fired": sim.fired,
        "metrics": {k: _rounded(v) for k, v in summary.items()},
        "violations": [
            [v.property, list(v.runs), round(v.time, 6),
             None if v.scenario is None else _sha([[d["actor"], d["name"], {
                 k: x for k, x in d.items() if k not in ("actor", "name")}]
                 for d in v.scenario["steps"]])]
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
                out["checker"][checker_key(c, p)] = checker_digest(c, p)
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
