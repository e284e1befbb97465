"""``failclosed sweep``: simulations over a parameter grid, one CSV row each.

The grid of ``--param NAME=V1,V2`` values (dotted config keys; ``policy`` too) times
``--seeds N`` seeds, on local processes (``--jobs``, spawned) or a dask cluster
(``--dask``); one CSV row per simulation, appended as it completes (an interrupted sweep
keeps its rows, and a rerun skips the rows already in the file; a file with other
columns is refused). Exit 1 if a simulation of the grid violated a property that
``--baseline FILE`` does not list (any violation without one).
"""

from __future__ import annotations

import argparse
import csv
import itertools
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
)
from failclosed.model.config import ConfigError, UsageError
from failclosed.sim.batch import run_in_processes, sweep_columns, sweep_task

__all__ = ["parse_params", "register"]

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
        out.append((name.strip(), values))
    return out


def _cmd_sweep(args: argparse.Namespace) -> int:
    from failclosed.model.policy import parse_policy
    from failclosed.sim import config as sconfig
    from failclosed.spec.progress import Progress

    raw = read_config(args.config)
    sconfig.load(raw)
    grid = parse_params(args.param)
    names = [n for n, _ in grid]
    points = [dict(zip(names, combo, strict=True)) for combo in itertools.product(*[v for _, v in grid])]
    for p in points:  # validate every grid point before anything runs
        sconfig.load(sconfig.with_overrides(raw, {k: v for k, v in p.items() if k != "policy"}))
        if "policy" in p:
            parse_policy(str(p["policy"]))
    check_output_file(args.out, "--out")
    baseline = load_known(args.baseline) if args.baseline else None
    header = _check_csv_columns(args.out, sweep_columns(names))
    tasks = [(p, s) for p in points for s in range(1, args.seeds + 1)]
    done = _done_keys(args.out, names)
    todo = [(p, s) for p, s in tasks if _key(p, s, names) not in done]
    client = _dask_client(args.dask) if args.dask and todo else None
    ok = 0
    with Progress("sweep", total=len(todo), unit="simulations", enabled=not args.quiet,
                  clock=time.monotonic) as pg:
        if len(todo) < len(tasks):
            pg.note(f"failclosed sweep: {len(tasks) - len(todo)} of {len(tasks)} simulations already in {args.out}")
        for row in _execute(raw, todo, args.jobs, client):
            header = _append(args.out, row, header)
            ok += 1
            pg.advance(violations=row["violations"])
    print(f"sweep: {len(tasks)} simulations ({len(points)} grid points x {args.seeds} seeds), "
          f"{ok} run now, {len(tasks) - len(todo)} already in {args.out}")
    return _judge_sweep(args.out, names, tasks, baseline, Path(args.config).stem)


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
    import logging

    if not (_DASK_ADDRESS.match(address) or address.startswith("inproc://")):
        raise UsageError(f"--dask {address}: not a scheduler address; give tcp://HOST:PORT, e.g. tcp://127.0.0.1:8786")
    from dask.distributed import Client

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
        from dask.distributed import as_completed

        with client:
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
    s.add_argument("config", help="a simulator TOML config")
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
                   help="known violations (TOML, e.g. spec/baselines/current.toml): exit 1 only on a "
                        "violation it does not list (default: none, every violation exits 1)")
    s.add_argument("--quiet", action="store_true", help="no progress on stderr (default: progress shown)")
    s.set_defaults(func=_cmd_sweep)
