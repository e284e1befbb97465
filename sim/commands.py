"""``failclosed simulate``, ``failclosed sweep`` and ``failclosed plot``.

simulate
    With a CONFIG: one simulation under the config's policy (or ``--policy``); it stops at the
    first safety violation unless ``--keep-going`` (then every violating run is counted).
    Exit 1 if a property was violated.

    Without CONFIG: the shipped ``sim/configs/default.toml`` under ``current`` and the closest
    earlier presets (``SIDE_BY_SIDE``) on the same seed and the same workload, side by side;
    violations are counted (keep-going is implied, since the earlier presets are expected to
    violate), and the exit code is 1 only if ``current`` violates a property.
    ``--json FILE`` writes one object ``{"policy", "seed", "runs", "history_sha256",
    "outcomes", "violations", "metrics"}`` per simulation; the side-by-side run writes a
    list of such objects, in ``SIDE_BY_SIDE`` order.

    Each violation's affected runs are written as a scenario (``model/scenario.py``'s
    format; ``failclosed replay FILE`` reproduces it) under ``--violations-dir``.

sweep
    The grid of ``--param NAME=V1,V2`` values (dotted config keys; ``policy`` too) times
    ``--seeds N`` seeds, on local processes (``--jobs``) or a dask cluster (``--dask``);
    one CSV row per simulation, appended as it completes (an interrupted sweep keeps its
    rows, and a rerun skips the rows already in the file).

plot
    ``swimlane`` of a history (JSONL) or a scenario (TOML); ``lease-curves`` of a sweep CSV.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import sys
import time
from typing import Any

from model.config import ConfigError, read_toml

SIDE_BY_SIDE = ("proposed", "current", "adr-134", "adr-122", "adr-111", "owner-guard")


# -- one simulation ------------------------------------------------------------------------
def simulate_one(
    raw: dict[str, Any],
    policy: str | None = None,
    seed: int | None = None,
    runs: int | None = None,
    keep_going: bool = False,
    history: str | None = None,
    violations_dir: str | None = None,
    keep_history: bool = False,
) -> tuple[dict[str, Any], Any]:
    """Run one simulation; returns (the JSON result object, the Simulation)."""
    from . import config as sconfig
    from . import metrics
    from .engine import Simulation

    cfg = sconfig.load(raw)
    t0 = time.perf_counter()
    sim = Simulation(cfg, policy=policy, seed=seed, runs=runs, keep_going=keep_going,
                     history_path=history, keep_history=keep_history).run()
    elapsed = time.perf_counter() - t0
    recs = sim.all_records()
    viol = []
    for k, v in enumerate(sim.violations):
        d: dict[str, Any] = {"property": v.property, "runs": v.runs, "time": round(v.time, 6)}
        if v.scenario is not None and violations_dir:
            d["scenario"] = write_scenario(sim, v, k, violations_dir)
        viol.append(d)
    result = {
        "policy": sim.policy_name,
        "seed": sim.seed,
        "runs": sim.n_runs,
        "history_sha256": sim.history.hexdigest(),
        "outcomes": metrics.outcomes(recs),
        "violations": viol,
        "metrics": metrics.compute(recs, sim.seed, cfg.lease_seconds()),
        "transitions": sim.fired,
        "asserted_enabled": sim.checked,
        "properties": sim.properties_source,
        "simulated_seconds": round(sim.env.now, 6),
        "elapsed_seconds": round(elapsed, 3),
    }
    return result, sim


def write_scenario(sim, v, k: int, directory: str) -> str:
    """Write a violation's trace as a scenario file; returns its path."""
    from model.transition import Transition

    os.makedirs(directory, exist_ok=True)
    sc = v.scenario
    steps = [Transition.from_dict(s) for s in sc["steps"]]
    expect: dict[str, Any] = {"violates": [v.property]}
    desc = (f"simulator counterexample: {v.property} violated by {', '.join(v.runs)} "
            f"(policy {sim.policy_name}, seed {sim.seed}, t={v.time:.3f} s)")
    path = os.path.join(directory, f"sim-{_safe(sim.policy_name)}-seed{sim.seed}-{v.property}-{k}.toml")
    try:
        from model.scenario import dump_scenario
    except ImportError:  # pragma: no cover - the scenario module is part of the package now
        path = path[:-5] + ".json"
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"description": desc, **sc, "expect": expect}, f, indent=1)
        return path
    text = dump_scenario(sc["config"], steps, expect, description=desc)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def _safe(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in s)


# -- simulate --------------------------------------------------------------------------------
def _cmd_simulate(args: argparse.Namespace) -> int:
    from . import config as sconfig

    side = args.config is None and args.policy is None
    path = args.config or sconfig.default_path()
    raw = read_toml(path)
    sconfig.load(raw)  # validate before anything runs
    policies = list(SIDE_BY_SIDE) if side else [args.policy or raw.get("policy", "current")]
    if args.history and len(policies) > 1:
        raise ConfigError("--history: give a CONFIG or --policy to record one history (the side-by-side run simulates several)")
    results = []
    t0 = time.perf_counter()
    for pol in policies:
        res, _ = simulate_one(raw, policy=pol, seed=args.seed, runs=args.runs,
                              keep_going=args.keep_going or side, history=args.history,
                              violations_dir=args.violations_dir)
        results.append(res)
    total = time.perf_counter() - t0
    print_summary(results, path, total)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results if side else results[0], f, indent=1, sort_keys=True)
    if side:
        return 0  # a comparison report: every policy's verdicts are in the table
    return 1 if results[0]["violations"] else 0


def _pct(w: dict[str, Any]) -> str:
    if w.get("p") is None:
        return "-"
    return f"{100 * w['p']:.1f}% [{100 * w['lo']:.1f}, {100 * w['hi']:.1f}]"


def _q(d: dict[str, Any], key: str) -> str:
    v = d.get(key)
    if not v:
        return "-"
    return f"{v[0]:,.0f} [{v[1]:,.0f}, {v[2]:,.0f}]"


def print_summary(results: list[dict[str, Any]], path: str, total: float) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(120, 32 + 30 * len(results)))
    r0 = results[0]
    title = (f"failclosed simulate: {os.path.relpath(path)}  seed {r0['seed']}, {r0['runs']} runs per policy, "
             f"{sum(r['transitions'] for r in results):,} transitions in {total:.1f} s")
    t = Table(title=title, show_lines=False)
    t.add_column("metric", style="bold")
    for r in results:
        t.add_column(r["policy"], justify="right")

    def row(name: str, fn) -> None:
        t.add_row(name, *[fn(r) for r in results])

    ni, iw = "non_idempotent_write", "idempotent_write"
    row("finished / unfinished", lambda r: f"{r['metrics']['finished']} / {r['metrics']['unfinished']}")
    row("completed", lambda r: _pct(r["metrics"]["completed"]))
    row("dead-lettered", lambda r: _pct(r["metrics"]["dead_letter"]))
    row("failed provider_failed", lambda r: str(r["outcomes"].get("failed/provider_failed", 0)))
    row("stuck (unfinished at end)", lambda r: _pct(r["metrics"]["stuck"]))
    from .metrics import failure_rows

    frows = [dict(failure_rows(r["metrics"])) for r in results]
    for label in dict.fromkeys(k for fr in frows for k in fr):
        t.add_row(label, *[fr.get(label, "-") for fr in frows])
    row("non-idem. write calls", lambda r: str(r["metrics"]["writes"][ni]["logical_calls"]))
    row("  applied twice or more", lambda r: _pct(r["metrics"]["writes"][ni]["double"]))
    row("  applications per call", lambda r: _f(r["metrics"]["writes"][ni]["per_call"], 3))
    row("idem. write calls", lambda r: str(r["metrics"]["writes"][iw]["logical_calls"]))
    row("  applied twice or more", lambda r: _pct(r["metrics"]["writes"][iw]["double"]))
    row("unaudited applications", lambda r: _pct(r["metrics"]["unaudited_applications"]))
    row("reaped while segment alive", lambda r: _pct(r["metrics"]["reaped_while_alive"]))
    row("wasted work (LEASE_LOST)", lambda r: f"{r['metrics']['wasted_work']['seconds']:,.0f} s")
    row("renewals per run", lambda r: _f(r["metrics"]["renewals"]["per_run"], 1))
    row("queue wait p50 [95% CI] s", lambda r: _q(r["metrics"]["queue_wait_s"], "p50"))
    row("end-to-end p50 s", lambda r: _q(r["metrics"]["end_to_end_s"], "p50"))
    row("end-to-end p99 s", lambda r: _q(r["metrics"]["end_to_end_s"], "p99"))
    row("throughput runs/h", lambda r: f"{r['metrics']['throughput_per_hour']:,.0f}")
    props = sorted({v["property"] for r in results for v in r["violations"]})
    row("invariants", lambda r: "[green]all hold[/]" if not r["violations"] else f"[red]{len(r['violations'])} violated[/]")
    for p in props:
        row(f"  {p}", lambda r, p=p: (lambda n: f"[red]{n} runs[/]" if n else "[green]ok[/]")(
            sum(len(v["runs"]) for v in r["violations"] if v["property"] == p)))
    row("transitions asserted enabled", lambda r: f"{r['asserted_enabled']:,} (+{r['transitions'] - r['asserted_enabled']:,} clock)")
    row("history sha256", lambda r: r["history_sha256"][:16])
    row("wall time", lambda r: f"{r['elapsed_seconds']:.2f} s")
    console.print(t)
    console.print(f"properties: {r0['properties']}")
    for r in results:
        for v in r["violations"][:3]:
            if "scenario" in v:
                console.print(f"  {r['policy']}: {v['property']} ({', '.join(v['runs'][:3])}) -> {v['scenario']}")


def _f(x: float | None, nd: int) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


# -- sweep -----------------------------------------------------------------------------------
def _parse_value(s: str) -> Any:
    low = s.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s.strip()


def parse_params(items: list[str]) -> list[tuple[str, list[Any]]]:
    out = []
    for it in items or []:
        if "=" not in it:
            raise ConfigError(f"--param {it}: expected NAME=V1,V2,...; e.g. --param constants.LEASE_SECONDS=300,900")
        name, vals = it.split("=", 1)
        values = [_parse_value(v) for v in vals.split(",") if v.strip() != ""]
        if not name or not values:
            raise ConfigError(f"--param {it}: expected NAME=V1,V2,...; give a name and at least one value")
        out.append((name.strip(), values))
    return out


def sweep_task(raw: dict[str, Any], params: dict[str, Any], seed: int) -> dict[str, Any]:
    """One grid point and seed (top level so that process pools and dask can ship it)."""
    from . import config as sconfig
    from .metrics import flat

    data = sconfig.with_overrides(raw, {k: v for k, v in params.items() if k != "policy"})
    res, _ = simulate_one(data, policy=params.get("policy"), seed=seed, keep_going=True)
    row = {**{f"param:{k}": v for k, v in params.items()}, "seed": seed, "policy": res["policy"],
           "runs": res["runs"], "lease_seconds": res["metrics"]["lease_seconds"],
           "violations": sum(len(v["runs"]) for v in res["violations"]),
           "history_sha256": res["history_sha256"], "elapsed_s": res["elapsed_seconds"]}
    row.update(flat(res["metrics"]))
    return row


def _cmd_sweep(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from . import config as sconfig

    raw = read_toml(args.config)
    sconfig.load(raw)
    grid = parse_params(args.param)
    if args.seeds < 1:
        raise ConfigError("--seeds: must be >= 1; give the number of seeds per grid point")
    if args.jobs < 1:
        raise ConfigError("--jobs: must be >= 1")
    names = [n for n, _ in grid]
    points = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*[v for _, v in grid])]
    for p in points:  # validate every grid point before anything runs
        sconfig.load(sconfig.with_overrides(raw, {k: v for k, v in p.items() if k != "policy"}))
        if "policy" in p:
            from model.policy import parse_policy

            parse_policy(str(p["policy"]))
    tasks = [(p, s) for p in points for s in range(1, args.seeds + 1)]
    done = _done_keys(args.out, names)
    todo = [(p, s) for p, s in tasks if _key(p, s, names) not in done]
    ok = 0
    with Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=not sys.stderr.isatty(), disable=args.quiet) as prog:
        bar = prog.add_task("sweep", total=len(tasks), completed=len(tasks) - len(todo))
        for row in _execute(raw, todo, args.jobs, args.dask):
            _append(args.out, row)
            ok += 1
            prog.advance(bar)
    print(f"sweep: {len(tasks)} simulations ({len(points)} grid points x {args.seeds} seeds), "
          f"{ok} run now, {len(tasks) - len(todo)} already in {args.out}")
    return 0


def _execute(raw, todo, jobs: int, dask_address: str | None):
    if dask_address:
        from dask.distributed import Client, as_completed

        with Client(dask_address) as client:
            futs = [client.submit(sweep_task, raw, p, s, pure=False) for p, s in todo]
            for fut in as_completed(futs):
                yield fut.result()
        return
    if jobs == 1:
        for p, s in todo:
            yield sweep_task(raw, p, s)
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=jobs) as ex:
        futs = [ex.submit(sweep_task, raw, p, s) for p, s in todo]
        try:
            for fut in as_completed(futs):
                yield fut.result()
        except KeyboardInterrupt:
            for f in futs:
                f.cancel()
            raise


def _key(p: dict[str, Any], seed: int, names: list[str]) -> tuple:
    return tuple(str(p[n]) for n in names) + (str(seed),)


def _done_keys(path: str, names: list[str]) -> set[tuple]:
    if not os.path.exists(path):
        return set()
    with open(path, newline="", encoding="utf-8") as f:
        rd = csv.DictReader(f)
        if rd.fieldnames is None or any(f"param:{n}" not in rd.fieldnames for n in names):
            return set()
        return {tuple(r[f"param:{n}"] for n in names) + (r["seed"],) for r in rd}


def _append(path: str, row: dict[str, Any]) -> None:
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(row))
        if new:
            w.writeheader()
        w.writerow(row)
        f.flush()


# -- plot --------------------------------------------------------------------------------------
def _cmd_plot(args: argparse.Namespace) -> int:
    from . import plots

    if args.kind == "swimlane":
        runs = [r for r in (args.runs or "").split(",") if r]
        window = None
        if args.window:
            try:
                a, b = args.window.split(":")
                window = (float(a), float(b))
            except ValueError:
                raise ConfigError("--window: expected START:END in seconds, e.g. 0:3600") from None
        plots.swimlane(args.input, args.out, runs=runs or None, window=window, axis=args.axis)
    else:
        plots.lease_curves(args.input, args.out)
    print(f"wrote {args.out}")
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "simulate", help="run the model in simulated time with faults (SimPy)",
        description="Simulate a workload; without CONFIG, the shipped default under current and earlier presets side by side.",
    )
    p.add_argument("config", nargs="?", help="a simulator TOML config (default: sim/configs/default.toml, side by side)")
    p.add_argument("--policy", help="policy to simulate (overrides the config's)")
    p.add_argument("--seed", type=int, help="random seed (overrides the config's)")
    p.add_argument("--runs", type=int, help="number of runs (overrides runs.count)")
    p.add_argument("--json", metavar="FILE", help="write the result object(s) as JSON")
    p.add_argument("--history", metavar="FILE.jsonl", help="write the history as JSON lines")
    p.add_argument("--keep-going", action="store_true", help="count violations instead of stopping at the first")
    p.add_argument("--violations-dir", default="sim-violations", metavar="DIR",
                   help="where counterexample scenarios are written (default: sim-violations)")
    p.set_defaults(func=_cmd_simulate)

    s = subparsers.add_parser("sweep", help="simulate a parameter grid x seeds, results to CSV",
                              description="Simulate a grid of config parameters times seeds.")
    s.add_argument("config")
    s.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2",
                   help="a dotted config key and its values, e.g. constants.LEASE_SECONDS=300,900 (repeatable; 'policy' too)")
    s.add_argument("--seeds", type=int, default=3, help="seeds per grid point (1..N)")
    s.add_argument("--jobs", type=int, default=1, help="local worker processes")
    s.add_argument("--dask", metavar="ADDRESS", help="run on a dask.distributed scheduler at ADDRESS")
    s.add_argument("--out", default="results.csv", help="CSV file rows are appended to")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=_cmd_sweep)

    pl = subparsers.add_parser("plot", help="plots: swimlane of a history or scenario; lease curves of a sweep",
                               description="Render a plot (matplotlib, Agg).")
    pl.add_argument("kind", choices=("swimlane", "lease-curves"))
    pl.add_argument("input", help="swimlane: HISTORY.jsonl or SCENARIO.toml; lease-curves: results.csv")
    pl.add_argument("--out", required=True, help="output file (.png or .svg)")
    pl.add_argument("--runs", help="swimlane: only these run ids (comma-separated)")
    pl.add_argument("--window", help="swimlane: START:END in simulated seconds")
    pl.add_argument("--axis", choices=("auto", "time", "step"), default="auto",
                    help="swimlane: x axis; step = transition order (auto: step when the "
                         "clock moves less than one second per transition)")
    pl.set_defaults(func=_cmd_plot)
