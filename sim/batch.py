"""Simulations as jobs, for the command line, the notebooks and worker processes: one
simulation's result object (:func:`simulate_one`), a violation's counterexample as a scenario
document (:func:`violation_scenario`; the command line writes it), many simulations on
spawned processes (:func:`simulate_many`), and one grid point of a sweep (:func:`sweep_task`).

No argument parsing, no printing, and no file written here but the history a caller asks
:func:`simulate_one` for (streamed by the engine as it runs); the commands are cli/simulate.py,
cli/sweep.py and cli/plot.py.
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import as_completed
from typing import Any

from failclosed.model.transition import Transition
from failclosed.spec.pool import spawn_pool, stop_pool

from . import config as sconfig
from . import metrics
from .config import SimConfig
from .engine import Simulation
from .export import Exporter
from .records import SCENARIOS_PER_PROPERTY

__all__ = ["SWEEP_COLUMNS", "run_in_processes", "simulate_many", "simulate_one", "simulate_policy",
           "simulate_records",
           "sweep_columns", "sweep_task", "violation_scenario"]


def simulate_one(
    config: SimConfig | dict[str, Any],
    policy: str | None = None,
    seed: int | None = None,
    runs: int | None = None,
    keep_going: bool = False,
    history: str | None = None,
    keep_history: bool = False,
    on_archive: Any = None,
    export: str | None = None,
    export_privacy: str = "metadata",
    scenarios: int | None = SCENARIOS_PER_PROPERTY,
) -> tuple[dict[str, Any], Any]:
    """Run one simulation of ``config`` (validated, sim/config.py ``load``; or the parsed TOML
    table, validated here); returns (the JSON result object, the Simulation).

    ``on_archive(n)`` is called after each run is archived (progress; read-only). A history
    file is complete or not written at all: an interruption removes its temporary file. Each
    violation's counterexample is ``violation_scenario(v, policy, seed)`` for the violations
    ``v`` of ``Simulation.violations`` (the same order as the result's ``violations``), for
    the first ``scenarios`` violations of each property (replayed when the simulation ends;
    None: every violation)."""
    cfg = config if isinstance(config, SimConfig) else sconfig.load(config)
    t0 = time.perf_counter()
    sim = Simulation(cfg, policy=policy, seed=seed, runs=runs, keep_going=keep_going,
                     history_path=history, keep_history=keep_history, scenarios=scenarios)
    sim.on_archive = on_archive
    if export:
        sim.observer = Exporter(export, seed=sim.seed, policy=sim.policy_name, privacy=export_privacy,
                                configuration=str(cfg.raw.get("description", "simulation")))
    try:
        sim.run()
        if sim.observer is not None:
            sim.observer.close()
    except BaseException:
        sim.history.abort()
        if sim.observer is not None:
            sim.observer.abort()
        raise
    result = _result(sim, cfg, time.perf_counter() - t0)
    if sim.observer is not None:
        result["export"] = {"path": export, "privacy": export_privacy, **sim.observer.counts}
    return result, sim


def _result(sim: Simulation, cfg: SimConfig, elapsed: float) -> dict[str, Any]:
    """The JSON result object of a finished simulation (the metrics read the lease from the
    configuration's model ``Config``)."""
    recs = sim.all_records()
    viol = [{"property": v.property, "runs": v.runs, "time": round(v.time, 6)}
            for v in sim.violations]
    result = {
        "policy": sim.policy_name,
        "seed": sim.seed,
        "runs": sim.n_runs,
        "runs_simulated": len(recs),
        # the runs that arrived but never got a slot before the end (or never arrived: stopped)
        "runs_not_admitted": sim.n_runs - len(recs),
        "ended_by": "stop" if sim.stopped else ("drain" if sim.drained else "last run archived"),
        "stopped_early": bool(sim.stopped),
        "history_sha256": sim.history.hexdigest(),
        "outcomes": metrics.outcomes(recs),
        "violations": viol,
        "metrics": metrics.compute(recs, sim.seed, cfg.lease_seconds(), sim.window.unattributed,
                                   cfg.reaper_period if cfg.reaper_enabled else None),
        "transitions": sim.fired,
        "asserted_enabled": sim.checked,
        "properties": sim.properties_source,
        "simulated_seconds": round(sim.env.now, 6),
        "elapsed_seconds": round(elapsed, 3),
        "faults": sim.fault_report(),
        "liveness": sim.checks.liveness.report(),  # judged at each run's end, and which not
    }
    if sim.refused:  # only without a transport (RUNTIME 6.4): transition -> how many
        result["refusals"] = dict(sorted(sim.refused.items()))
    return result


def simulate_policy(config: SimConfig | dict[str, Any], kw: dict[str, Any]
                    ) -> tuple[dict[str, Any], list[Any]]:
    """``simulate_one(config, **kw)``'s result object and its violations (with their
    scenarios), without the Simulation: what a worker process sends back (``failclosed
    simulate --jobs``)."""
    res, sim = simulate_one(config, **kw)
    return res, sim.violations


def violation_scenario(v: Any, policy: str, seed: int) -> dict[str, Any]:
    """A violation's trace as a scenario document, the keyword arguments of the command
    line's writer (cli/scenario_writer.py ``dump_scenario``): its configuration and steps,
    expecting the property violated after the last one (``failclosed replay`` reproduces it)."""
    sc = v.scenario
    desc = (f"simulator counterexample: {v.property} violated by {', '.join(v.runs)} "
            f"(policy {policy}, seed {seed}, t={v.time:.3f} s)")
    return {"config": sc["config"], "steps": [Transition.from_dict(s) for s in sc["steps"]],
            "expectations": {"violates": [v.property]}, "description": desc}


def run_in_processes(fn, arg_tuples: list[tuple], jobs: int, ordered: bool = True):
    """``fn(*args)`` for each args tuple on ``jobs`` spawned processes (never forked, so a
    Jupyter kernel or any threaded caller is safe); results in order, or as they complete.
    ``fn`` must be importable by name (a module-level function of the project)."""
    ex = spawn_pool(jobs)  # its workers die with this process, whatever ends it
    futs = [ex.submit(fn, *a) for a in arg_tuples]
    try:
        for fut in (futs if ordered else as_completed(futs)):
            yield fut.result()
    except BaseException:  # interrupted (SIGINT, SIGTERM) or failed: no worker goes on
        stop_pool(ex)
        raise
    ex.shutdown(wait=True)


def simulate_records(raw: dict[str, Any], policy: str | None, seed: int, runs: int | None = None
                     ) -> tuple[dict[str, Any], list[Any]]:
    """One simulation (every violation counted): its result object and its run records,
    without their plans (what the notebooks need from a process pool)."""
    res, sim = simulate_one(raw, policy=policy, seed=seed, runs=runs, keep_going=True)
    return res, [dataclasses.replace(r, spec=None) for r in sim.all_records()]


def simulate_many(tasks: list[dict[str, Any]], jobs: int = 1):
    """``simulate_records(**task)`` for each task, on ``jobs`` spawned processes (never a
    fork: safe in a Jupyter kernel), yielded in task order as they become available."""
    if jobs <= 1:
        for t in tasks:
            yield simulate_records(**t)
        return
    args = [(t["raw"], t.get("policy"), t["seed"], t.get("runs")) for t in tasks]
    yield from run_in_processes(simulate_records, args, jobs)


SWEEP_COLUMNS = ("seed", "policy", "runs", "lease_seconds", "violations", "violated", "history_sha256", "elapsed_s")


def sweep_columns(names: list[str]) -> list[str]:
    """The CSV header of a sweep over the parameters ``names``."""
    return [f"param:{n}" for n in names] + list(SWEEP_COLUMNS) + list(metrics.FLAT_COLUMNS)


def sweep_task(raw: dict[str, Any], params: dict[str, Any], seed: int) -> dict[str, Any]:
    """One grid point and seed (top level so that process pools and dask can ship it)."""
    data = sconfig.with_overrides(raw, {k: v for k, v in params.items() if k != "policy"})
    # a sweep's row counts the violations: no scenario is replayed for them
    res, _ = simulate_one(data, policy=params.get("policy"), seed=seed, keep_going=True, scenarios=0)
    row = {**{f"param:{k}": v for k, v in params.items()}, "seed": seed, "policy": res["policy"],
           "runs": res["runs"], "lease_seconds": res["metrics"]["lease_seconds"],
           "violations": sum(len(v["runs"]) for v in res["violations"]),
           "violated": ";".join(sorted({v["property"] for v in res["violations"]})),
           "history_sha256": res["history_sha256"], "elapsed_s": res["elapsed_seconds"]}
    row.update(metrics.flat(res["metrics"]))
    return row
