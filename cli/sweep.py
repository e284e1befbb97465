"""``failclosed sweep``: simulations over a parameter grid, one CSV row each, and its summary.

The grid of ``--param NAME=V1,V2`` values (dotted config keys; ``policy`` too) times
``--seeds N`` seeds, on local processes (``--jobs``, spawned) or a dask cluster
(``--dask``); one CSV row per simulation, appended as it completes (an interrupted sweep
keeps its rows, and a rerun skips the rows already in the file; a file with other
columns is refused). At the end the summary (one row per grid point: ``n_seeds`` and each
metric with its 95 % interval over seeds, cli/summarize.py) is written beside the CSV (or to
``--summary``) and printed. ``--precision METRIC=H`` adds seeds to each grid point until both
arms of the interval on METRIC (estimate - lo, hi - estimate) are at most H or ``--seeds`` is
reached; the output says per point the seeds it used and whether it reached H. Exit 1 if a simulation of the grid violated a property that
``--baseline FILE`` does not list (any violation without one).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import itertools
import json
import logging
import math
import os
import re
import time
from pathlib import Path
from typing import Any

from failclosed.cli.simulate import (
    check_output_file,
    int_arg,
    load_known,
    plural,
    read_config,
    rel_path,
    resolve_sim_config,
    shipped_sim_configs,
)
from failclosed.cli.summarize import (
    check_metrics,
    default_summary_path,
    print_summary,
    write_summary,
)
from failclosed.model.config import ConfigError, UsageError
from failclosed.model.policy import parse_policy
from failclosed.sim import config as sconfig
from failclosed.sim.batch import run_in_processes, sweep_columns, sweep_task
from failclosed.spec.progress import Progress

__all__ = ["cached_sweep", "config_digest", "parse_params", "parse_precision", "register", "run_grid"]

DASK_CONNECT_TIMEOUT = 5  # seconds to reach a dask scheduler before giving up


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
        if name.strip() in {n for n, _ in out}:
            raise UsageError(f"--param {name.strip()}: given twice; a grid dimension is named once, "
                             f"with all its values: --param {name.strip()}=V1,V2")
        out.append((name.strip(), values))
    return out


def parse_precision(text: str | None) -> tuple[str, float] | None:
    """``METRIC=H`` of ``--precision``: a metric of the summary and a half-width > 0."""
    if not text:
        return None
    name, sep, h = text.partition("=")
    try:
        half = float(h)
    except ValueError:
        half = math.nan
    if not sep or not math.isfinite(half) or half <= 0:
        raise UsageError(f"--precision {text}: expected METRIC=H with a half-width H > 0, "
                         "e.g. p_dead_letter=0.01 (proportions as fractions)")
    check_metrics([name.strip()], "--precision")
    return name.strip(), half


def run_grid(raw: dict[str, Any], points: list[dict[str, Any]], seeds: list[int] | dict[int, list[int]],
             out: str, names: list[str], jobs: int = 1, client: Any = None, quiet: bool = True,
             label: str = "sweep") -> tuple[list[tuple[dict[str, Any], int]], int]:
    """Simulate each grid point of ``points`` at its seeds (``seeds``: the same list for
    every point, or point index -> seeds) into the CSV ``out``, appending a row as each
    simulation completes and skipping the (point, seed) rows already there (the resume).
    Returns the (point, seed) tasks and how many ran now. The notebooks cache their sweeps
    with it."""
    header = _check_csv_columns(out, sweep_columns(names))
    per = seeds if isinstance(seeds, dict) else {i: list(seeds) for i in range(len(points))}
    tasks = [(p, s) for i, p in enumerate(points) for s in per.get(i, [])]
    done = _done_keys(out, names)
    todo = [(p, s) for p, s in tasks if _key(p, s, names) not in done]
    ran = 0
    with Progress(label, total=len(todo), unit="simulations", enabled=not quiet,
                  clock=time.monotonic) as pg:
        if len(todo) < len(tasks):
            pg.note(f"failclosed {label}: {len(tasks) - len(todo)} of {len(tasks)} simulations already in {out}")
        for row in _execute(raw, todo, jobs, client):
            header = _append(out, row, header)
            ran += 1
            pg.advance(violations=row["violations"])
    return tasks, ran


def config_digest(raw: dict[str, Any]) -> str:
    """12 hex digits of SHA-256 over the config (canonical JSON): the name of its cache."""
    return hashlib.sha256(json.dumps(raw, sort_keys=True, default=str).encode()).hexdigest()[:12]


def cached_sweep(raw: dict[str, Any], grid: list[tuple[str, list[Any]]], seeds: int, directory: str,
                 name: str, jobs: int = 1, quiet: bool = True) -> tuple[str, list[str], list[dict[str, str]]]:
    """The sweep of ``grid`` x ``seeds`` seeds over the config ``raw``, cached on disk: the
    CSV ``directory/NAME-<config digest>.csv`` is the sweep's own ``--out`` file, so a rerun
    simulates only the (grid point, seed) rows it lacks (the sweep's resume) and a changed
    config gets a new file; so does a change of the sweep's columns (a metric added: the digest
    is over the config and the columns, so a cache of other columns is left, not refused).
    Returns (path, header, the rows of this grid and these seeds)."""
    names = [n for n, _ in grid]
    points = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*[v for _, v in grid])]
    os.makedirs(directory, exist_ok=True)
    digest = config_digest({"config": raw, "columns": sweep_columns(names)})
    path = os.path.join(directory, f"{name}-{digest}.csv")
    tasks, _ran = run_grid(raw, points, list(range(1, seeds + 1)), path, names, jobs, None, quiet, label=name)
    header, rows = _rows_of(path, names, tasks)
    return path, header, rows


def _cmd_sweep(args: argparse.Namespace) -> int:
    args.config = resolve_sim_config(args.config)
    raw = read_config(args.config)
    sconfig.load(raw)
    grid = parse_params(args.param)
    names = [n for n, _ in grid]
    points = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*[v for _, v in grid])]
    for p in points:  # validate every grid point before anything runs
        sconfig.load(sconfig.with_overrides(raw, {k: v for k, v in p.items() if k != "policy"}))
        if "policy" in p:
            parse_policy(str(p["policy"]))
    precision = parse_precision(args.precision)
    check_output_file(args.out, "--out")
    summary_path = args.summary or default_summary_path(args.out)
    if os.path.abspath(summary_path) == os.path.abspath(args.out):
        raise UsageError(f"--summary {summary_path}: is the sweep's own CSV (--out); give another file")
    check_output_file(summary_path, "--summary", (".csv",))
    baseline = load_known(args.baseline) if args.baseline else None
    _check_csv_columns(args.out, sweep_columns(names))
    client = _dask_client(args.dask) if args.dask else None
    try:
        if precision is None:
            tasks, ran = run_grid(raw, points, list(range(1, args.seeds + 1)), args.out, names, args.jobs,
                                  client, args.quiet)
            reached = None
        else:
            tasks, ran, reached = _sequential(raw, points, names, args, client, precision)
    finally:
        if client is not None:
            client.close()
    print(f"sweep: {len(tasks)} simulations ({len(points)} grid points x {_seeds_per_point(points, names, tasks)}), "
          f"{ran} run now, {len(tasks) - ran} already in {args.out}")
    _write_sweep_summary(args.out, summary_path, names, tasks, precision, reached)
    return _judge_sweep(args.out, names, tasks, baseline, Path(args.config).stem)


def _seeds_per_point(points: list[dict[str, Any]], names: list[str], tasks) -> str:
    """How many seeds each grid point has: ``3 seeds``, or ``3 to 10 seeds per point``."""
    per: dict[tuple, int] = {tuple(str(p[n]) for n in names): 0 for p in points}
    for p, _s in tasks:
        per[tuple(str(p[n]) for n in names)] += 1
    lo, hi = min(per.values(), default=0), max(per.values(), default=0)
    return plural(lo, "seed") if lo == hi else f"{lo} to {hi} seeds per point"


def _rows_of(path: str, names: list[str], tasks) -> tuple[list[str], list[dict[str, str]]]:
    """The CSV's header and the rows of ``tasks`` (one per (grid point, seed))."""
    want = {_key(p, s, names) for p, s in tasks}
    with open(path, newline="", encoding="utf-8") as f:
        rd = csv.DictReader(f)
        rows = [r for r in rd if tuple(r[f"param:{n}"] for n in names) + (r["seed"],) in want]
        return list(rd.fieldnames or []), rows


def _sequential(raw, points, names, args, client, precision):
    """``--precision METRIC=H``: every grid point starts with ``--min-seeds`` seeds; a point
    whose interval on METRIC reaches farther than H from its estimate on either side (each
    arm judged: an interval clipped or skewed is not symmetric) gets one more seed per round,
    until both arms are within H or it has ``--seeds`` seeds. Returns the tasks, how many ran,
    and per point (its parameter values) ``(reached, widest arm or None)``."""
    # lazy: sim.stats and sim.metrics import scipy, start-up x2.2 CPU for every command
    from failclosed.sim import stats
    from failclosed.sim.metrics import SUMMARY_METRICS

    metric, half = precision
    per = {i: list(range(1, min(args.min_seeds, args.seeds) + 1)) for i in range(len(points))}
    open_points = set(per)
    ran_total, reached = 0, {}
    while open_points:
        tasks, ran = run_grid(raw, points, per, args.out, names, args.jobs, client, args.quiet)
        ran_total += ran
        header, rows = _rows_of(args.out, names, tasks)
        groups = stats.grid_points(rows, names)
        for i in sorted(open_points):
            key = tuple(str(points[i][n]) for n in names)
            iv = stats.metric_interval(groups.get(key, []), SUMMARY_METRICS[metric])
            ok = iv.widest_arm is not None and iv.widest_arm <= half
            reached[i] = (ok, iv.widest_arm)
            if ok or len(per[i]) >= args.seeds:
                open_points.discard(i)
            else:
                per[i].append(len(per[i]) + 1)
    tasks = [(p, s) for i, p in enumerate(points) for s in per[i]]
    return tasks, ran_total, {tuple(str(points[i][n]) for n in names): r for i, r in reached.items()}


def _write_sweep_summary(out, summary_path, names, tasks, precision, reached) -> None:
    # lazy: sim.stats imports scipy, start-up x2.2 CPU for every command
    from failclosed.sim import stats

    header, rows = _rows_of(out, names, tasks)
    if not rows:
        return
    summary = stats.summarize(rows, header)
    extra: tuple[str, ...] = ()
    if precision is not None:
        metric, half = precision
        extra = ("precision", "precision_widest_arm", "precision_reached")
        for r in summary:
            ok, arm = reached.get(tuple(r[f"param:{n}"] for n in names), (False, None))
            r["precision"] = f"{metric} +-{half:g}"
            r["precision_widest_arm"] = arm
            r["precision_reached"] = "yes" if ok else "no"
    write_summary(summary_path, summary, header, extra)
    print_summary(summary, header, [precision[0]] if precision else None)
    if precision is not None:
        _print_precision(summary, names, precision)
    print(f"sweep: summary (one row per grid point) written to {summary_path}")


PRECISION_LINES = 12  # grid points listed by --precision's report; the summary CSV has them all


def _print_precision(summary: list[dict[str, Any]], names: list[str], precision: tuple[str, float]) -> None:
    """Per grid point: the seeds it used, the widest arm of its interval, reached or not."""
    metric, half = precision
    got = sum(r["precision_reached"] == "yes" for r in summary)
    print(f"sweep: precision {metric} +-{half:g} (both arms of the interval) reached at {got} of "
          f"{len(summary)} grid points:")
    for r in summary[:PRECISION_LINES]:
        label = " ".join(f"{n.rsplit('.', 1)[-1]}={r[f'param:{n}']}" for n in names) or "the grid point"
        arm = r["precision_widest_arm"]
        arm_text = "no interval" if arm is None else f"widest arm {arm:.4g}"
        verdict = "reached" if r["precision_reached"] == "yes" else "NOT reached within --seeds"
        print(f"  {label}: {plural(int(r['n_seeds']), 'seed')}, {arm_text}, {verdict}")
    if len(summary) > PRECISION_LINES:
        print(f"  and {len(summary) - PRECISION_LINES} more grid points (the summary CSV's precision_reached column)")


def _judge_sweep(path: str, names: list[str], tasks, baseline: Any, config: str) -> int:
    """The sweep's verdict over its rows in ``path`` (those run now and earlier): exit 1 if
    a (policy, property) violation is not in the baseline (any violation without one)."""
    want = {_key(p, s, names) for p, s in tasks}
    violated: dict[tuple[str, str], int] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if tuple(r[f"param:{n}"] for n in names) + (r["seed"],) not in want:
                continue
            for prop in filter(None, (r.get("violated") or "").split(";")):
                violated[(r["policy"], prop)] = violated.get((r["policy"], prop), 0) + 1
    if baseline is None:
        new, known = sorted(violated), []
    else:
        cmp = baseline.compare({k: True for k in violated}, config)
        new, known = sorted(cmp.new), cmp.known
    if not violated:
        print("sweep: every property holds in every simulation")
        return 0
    names_new = ", ".join(f"{p} / {q} ({plural(violated[(p, q)], 'simulation')})" for p, q in new[:6])
    more = f" and {len(new) - 6} more" if len(new) > 6 else ""
    if baseline is None:
        print(f"sweep: {plural(len(new), 'violated (policy, property) pair')}: {names_new}{more} "
              "(exit 1; --baseline FILE accepts known ones)")
    elif new:
        print(f"sweep: {len(new)} NEW violations (not in {argsrel_path(baseline)}): {names_new}{more}; {len(known)} known")
    else:
        print(f"sweep: 0 new violations, {len(known)} known ({argsrel_path(baseline)})")
    return 1 if new else 0


def argsrel_path(baseline: Any) -> str:
    return rel_path(getattr(baseline, "path", None)) or "the baseline"


_DASK_ADDRESS = re.compile(r"^(?:(?:tcp|tls|ws|wss|ucx)://)?\[?[A-Za-z0-9_.:-]*[A-Za-z0-9_.-]\]?:\d{1,5}$")


def _dask_client(address: str):
    """A connected dask client, or one UsageError line within DASK_CONNECT_TIMEOUT seconds."""
    if not (_DASK_ADDRESS.match(address) or address.startswith("inproc://")):
        raise UsageError(f"--dask {address}: not a scheduler address; give tcp://HOST:PORT, e.g. tcp://127.0.0.1:8786")
    try:
        # lazy: dask is optional (failclosed[dask]); dask.distributed costs start-up x1.55 CPU
        from dask.distributed import Client
    except ImportError:  # the same line as scope --dask (spec.scope.dask_client)
        raise UsageError("--dask: dask.distributed is not installed; pip install 'failclosed[dask]'") from None

    quiet = [logging.getLogger(n) for n in ("distributed", "distributed.client", "distributed.comm",
                                            "distributed.core", "tornado")]
    levels = [lg.level for lg in quiet]
    for lg in quiet:
        lg.setLevel(logging.CRITICAL)
    try:
        return Client(address, timeout=f"{DASK_CONNECT_TIMEOUT}s")
    except (OSError, TimeoutError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UsageError(f"--dask {address}: no scheduler reachable within {DASK_CONNECT_TIMEOUT} s ({reason[:120]}); "
                         "start one (`dask scheduler`) and pass its address, or drop --dask to run locally") from None
    except Exception as e:  # something answered, but not a dask scheduler (an HTTP server, say)
        raise UsageError(f"--dask {address}: did not answer as a dask scheduler ({type(e).__name__}); "
                         "give the scheduler's tcp://HOST:PORT (default port 8786)") from None
    finally:
        for lg, lv in zip(quiet, levels, strict=True):
            lg.setLevel(lv)


def _execute(raw, todo, jobs: int, client=None):
    if client is not None:
        # lazy: dask is optional (failclosed[dask]); dask.distributed costs start-up x1.55 CPU
        from dask.distributed import as_completed

        futs = [client.submit(sweep_task, raw, p, s, pure=False) for p, s in todo]
        for fut in as_completed(futs):
            yield fut.result()
        return
    if jobs == 1:
        for p, s in todo:
            yield sweep_task(raw, p, s)
        return
    yield from run_in_processes(sweep_task, [(raw, p, s) for p, s in todo], jobs, ordered=False)


def _key(p: dict[str, Any], seed: int, names: list[str]) -> tuple:
    return tuple(str(p[n]) for n in names) + (str(seed),)


def _read_header(path: str) -> list[str] | None:
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return next(csv.reader(f), None)
    except (UnicodeDecodeError, csv.Error):
        raise ConfigError(f"--out {path}: exists and is not a CSV file; give a new --out file") from None


def _check_csv_columns(path: str, columns: list[str]) -> list[str] | None:
    """Refuse to append rows of other columns to an existing CSV; returns its header."""
    header = _read_header(path)
    if header is None:
        return None
    if set(header) != set(columns):
        extra = sorted(set(header) - set(columns))
        missing = sorted(set(columns) - set(header))
        what = "; ".join(x for x in (
            f"it has {', '.join(extra[:3])}{' ...' if len(extra) > 3 else ''} this sweep does not" if extra else "",
            f"it lacks {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}" if missing else "") if x)
        raise ConfigError(f"--out {path}: holds another sweep's columns ({what}); give a new --out file, "
                          "or delete it to start over")
    return header


def _done_keys(path: str, names: list[str]) -> set[tuple]:
    if _read_header(path) is None:
        return set()
    with open(path, newline="", encoding="utf-8") as f:
        return {tuple(r[f"param:{n}"] for n in names) + (r["seed"],) for r in csv.DictReader(f)}


def _append(path: str, row: dict[str, Any], header: list[str] | None) -> list[str]:
    fields = header or list(row)
    with open(path, "a", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        if header is None:
            w.writeheader()
        w.writerow(row)
        f.flush()
    return fields


def register(subparsers: Any) -> None:
    s = subparsers.add_parser("sweep", help="simulate a parameter grid x seeds, results to CSV",
                              description="Simulate a grid of config parameters times seeds; one CSV row per simulation. "
                                          "Exit 0: no violation (or only --baseline's known ones); 1: a violation "
                                          "not in the baseline; 2: bad input.")
    s.add_argument("config", help="a simulator TOML config FILE, or a shipped one by name: "
                   f"{', '.join(shipped_sim_configs())}")
    s.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2",
                   help="a dotted config key and its values, e.g. constants.LEASE_SECONDS=300,900 "
                        "(repeatable; 'policy' too; default: none, one grid point)")
    s.add_argument("--seeds", type=int_arg(1, "the number of seeds per grid point, >= 1"), default=3,
                   help="seeds per grid point, 1..N (default: 3)")
    s.add_argument("--jobs", type=int_arg(1, "the number of local processes, >= 1"), default=1,
                   help="local worker processes (default: 1)")
    s.add_argument("--dask", metavar="ADDRESS",
                   help="run on a dask.distributed scheduler at tcp://HOST:PORT (default: local processes)")
    s.add_argument("--out", default="results.csv",
                   help="CSV file rows are appended to; a bare name is in the current directory (default: results.csv)")
    s.add_argument("--baseline", metavar="FILE",
                   help="known violations: a baseline TOML FILE, or the shipped one by name (current): "
                        "exit 1 only on a violation it does not list (default: none, every violation "
                        "exits 1)")
    s.add_argument("--summary", metavar="FILE",
                   help="the summary CSV, one row per grid point with 95%% intervals over seeds "
                        "(default: beside --out, NAME.summary.csv)")
    s.add_argument("--precision", metavar="METRIC=H",
                   help="add seeds to each grid point (from --min-seeds, one per round) until each arm of the "
                        "95%% interval on METRIC is within H of the estimate, or --seeds is reached "
                        "(default: a fixed --seeds)")
    s.add_argument("--min-seeds", type=int_arg(2, "the seeds every grid point starts with, >= 2"), default=3,
                   help="with --precision: the seeds every grid point starts with (default: 3)")
    s.add_argument("--quiet", action="store_true", help="no progress on stderr (default: progress shown)")
    s.set_defaults(func=_cmd_sweep)
