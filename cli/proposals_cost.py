"""``failclosed proposals --cost``: what each proposal costs, measured in the simulator.

Simulates ``current``, ``proposed`` and ``proposed`` without each switch (``--without``; by
default every switch ``proposed`` turns on), each over the same ``--seeds`` seeds of one
simulator workload, as a sweep over ``policy`` (cli/sweep.py's ``run_grid``: one CSV row
per simulation, appended as it completes, so an interrupted run resumes), and prints a
markdown table: per policy the statements the runtime issues per run, dead-letters,
throughput, end-to-end time, the work stale segments wasted, and the sweep's re-dispatches
(proposal P6) with how long an orphaned row waited for it, each with its 95 % interval over
seeds (one simulation = one replication, ``sim.stats``), and the extra run-store statements
per run against ``current``, paired by seed.
"""

from __future__ import annotations

import argparse
import difflib
import os
from typing import Any

from failclosed.cli.simulate import check_output_file, int_arg, read_config, resolve_sim_config
from failclosed.cli.sweep import _rows_of, parse_params, run_grid
from failclosed.model.config import UsageError
from failclosed.model.policy import parse_policy, proposal_switches
from failclosed.sim import config as sconfig

__all__ = ["COST_COLUMNS", "add_cost_arguments", "cost_policies", "cost_table", "run_cost"]

BASE = "proposed"
CURRENT = "current"
DEFAULT_SEEDS = 20
DEFAULT_RUNS = 100  # runs per simulation: 10 policies x 20 seeds stay within a few CPU-minutes

# (header, summary metric, how its estimate and interval are printed): the table's columns
COST_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("store stmts/run", "store_statements_per_run", "num"),
    ("reaper SELECTs/run", "reaper_selects_per_run", "num"),
    ("audit inserts/run", "audit_inserts_per_run", "num"),
    ("dispatches/run", "dispatches_per_run", "num"),
    ("dead-letters", "p_dead_letter", "pct"),
    ("unfinished", "p_unfinished", "pct"),
    ("throughput runs/h", "throughput_per_hour", "num"),
    ("e2e p50 s", "e2e_p50_s", "num"),
    ("e2e p99 s", "e2e_p99_s", "num"),
    ("wasted work", "wasted_fraction", "pct"),
    ("re-dispatches/run", "redispatches_per_run", "num"),
    ("orphan wait s (mean)", "redispatch_wait_s", "num"),
    ("orphan wait s (max)", "redispatch_wait_max_s", "num"),
)


def add_cost_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cost", action="store_true",
                   help="measure what each proposal costs in the simulator instead of checking: "
                        "current, proposed and proposed without each switch, over --seeds seeds "
                        "of --workload, as a markdown table with 95%% intervals over seeds")
    p.add_argument("--workload", default="default", metavar="CONFIG",
                   help="with --cost: the simulator workload, a TOML FILE or a shipped name "
                        "(default: default)")
    p.add_argument("--seeds", type=_int_at_least(2, "the seeds per policy, >= 2"), default=DEFAULT_SEEDS,
                   help=f"with --cost: seeds per policy, 2..N (default: {DEFAULT_SEEDS})")
    p.add_argument("--runs", type=_int_at_least(1, "the runs per simulation, >= 1"), default=DEFAULT_RUNS,
                   help=f"with --cost: runs per simulation (default: {DEFAULT_RUNS})")
    p.add_argument("--param", action="append", default=[], metavar="NAME=V",
                   help="with --cost: a dotted workload key and its one value, e.g. "
                        "reaper.period_seconds=30 (repeatable)")
    p.add_argument("--without", metavar="S1,S2",
                   help="with --cost: the switches to turn off one at a time (default: every "
                        "switch proposed turns on over current)")
    p.add_argument("--out", dest="cost_out", default="proposals-cost.csv", metavar="CSV",
                   help="with --cost: the CSV the simulations' rows are appended to; a rerun "
                        "simulates only the rows it lacks (default: proposals-cost.csv)")


def _int_at_least(lo: int, what: str):
    return int_arg(lo, what)


def cost_policies(without: str | None) -> list[str]:
    """current, proposed, then proposed without each switch of ``without`` (comma-separated;
    None: every switch of ``proposal_switches``), each checked to be one of those."""
    switches = proposal_switches()
    if without is None:
        chosen = list(switches)
    else:
        chosen = [s.strip() for s in without.split(",") if s.strip()]
        for s in chosen:
            if s not in switches:
                near = difflib.get_close_matches(s, switches, n=1)
                hint = f"did you mean {near[0]}? " if near else ""
                raise UsageError(f"--without {s}: not a switch proposed turns on; {hint}"
                                 f"give some of {', '.join(switches)}")
    return [CURRENT, BASE] + [f"{BASE}-{s}" for s in dict.fromkeys(chosen)]


def _fixed_params(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, values in parse_params(items):
        if name in ("policy", "runs.count"):
            flag = "--without" if name == "policy" else "--runs"
            raise UsageError(f"--param {name}: set by --cost itself; give {flag} instead")
        if len(values) != 1:
            raise UsageError(f"--param {name}: --cost takes one value per key, e.g. --param "
                             f"{name}={values[0]}; sweep several with failclosed sweep")
        out[name] = values[0]
    return out


def _cell(est: Any, lo: Any, hi: Any, how: str) -> str:
    if est is None:
        return "-"
    if how == "pct":
        band = "" if lo is None else f" [{100 * lo:.1f}, {100 * hi:.1f}]"
        return f"{100 * est:.1f} %{band}"
    # a rare count per run (re-dispatches: a few per thousand runs) keeps its first digits
    digits = 0 if abs(est) >= 100 else (1 if abs(est) >= 10 else 2 if abs(est) >= 0.1 or est == 0 else 4)
    band = "" if lo is None else f" [{lo:,.{digits}f}, {hi:,.{digits}f}]"
    return f"{est:,.{digits}f}{band}"


def _extra_statements(rows: list[dict[str, str]], policy: str) -> str:
    """Run-store statements per run of ``policy`` minus ``current``'s, seed by seed (the same
    seed draws the same arrivals and plans), with the Student t interval over seeds."""
    # lazy: sim.stats imports scipy, start-up x2.2 CPU for every command
    from failclosed.sim import stats

    def per_run(pol: str) -> dict[str, float]:
        return {r["seed"]: float(r["store_statements"]) / float(r["runs"])
                for r in rows if r["policy"] == pol and float(r["runs"] or 0) > 0}

    mine, base = per_run(policy), per_run(CURRENT)
    iv = stats.t_interval([mine[s] - base[s] for s in mine if s in base])
    return _cell(iv.estimate, iv.lo, iv.hi, "num") if policy != CURRENT else "0"


def cost_table(rows: list[dict[str, str]], header: list[str], policies: list[str]) -> list[str]:
    """The markdown table: one row per policy (in ``policies``' order), its seeds, the extra
    run-store statements per run against ``current`` and each of ``COST_COLUMNS``."""
    # lazy: sim.stats imports scipy, start-up x2.2 CPU for every command
    from failclosed.sim import stats

    by_policy = {r["param:policy"]: r for r in stats.summarize(rows, header)}
    heads = ["policy", "seeds", "extra store stmts/run", *(h for h, _m, _k in COST_COLUMNS)]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for pol in policies:
        s = by_policy.get(pol)
        if s is None:
            continue
        cells = [f"`{pol}`", str(s["n_seeds"]), _extra_statements(rows, pol)]
        cells += [_cell(s.get(m), s.get(f"{m}_lo"), s.get(f"{m}_hi"), how) for _h, m, how in COST_COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def run_cost(args: argparse.Namespace) -> int:
    # lazy: sim.stats imports scipy, start-up x2.2 CPU for every command
    from failclosed.sim import stats

    for flag, given in (("--config", args.config), ("--scope", args.scope), ("--dask", args.dask),
                        ("--max-states", args.max_states), ("--json", args.json)):
        if given:
            raise UsageError(f"{flag} applies to the check, not to --cost; leave {flag} out")
    policies = cost_policies(args.without)
    for p in policies:
        parse_policy(p)
    path = resolve_sim_config(args.workload, "--workload")
    raw = read_config(path, "--workload")
    fixed = {**_fixed_params(args.param), "runs.count": args.runs}
    cfg = sconfig.load(sconfig.with_overrides(raw, fixed))  # every key checked before anything runs
    check_output_file(args.cost_out, "--out", (".csv",))
    names = ["policy", *fixed]
    points = [{"policy": p, **fixed} for p in policies]
    tasks, ran = run_grid(raw, points, list(range(1, args.seeds + 1)), args.cost_out, names,
                          min(args.jobs, len(points) * args.seeds), None, args.quiet, label="proposals --cost")
    header, rows = _rows_of(args.cost_out, names, tasks)
    where = (f"workload {os.path.basename(path)}, {args.runs} runs per simulation, seeds 1 to {args.seeds}"
             + "".join(f", {k} = {v}" for k, v in fixed.items() if k != "runs.count"))
    print(f"The cost of each proposal ({where}; reaper period "
          f"{cfg.reaper_period:g} s, lease {cfg.lease_seconds()} s):")
    print()
    for line in cost_table(rows, header, policies):
        print(line)
    print()
    print(f"[ ]: {stats.method_text()}. extra store stmts/run: the policy's run-store statements "
          "per run minus current's, seed by seed, Student t over seeds. Statements: the run-store "
          "statements (the reaper's SELECTs included; apart: the reaper's SELECTs, T10 per tick and T14 "
          "under P6), audit inserts and dispatches the runtime "
          "issues, counted from the simulation's transitions. wasted work: provider and tool time "
          "of segments that ended LEASE_LOST, of all of it. unfinished: runs not terminal when the "
          "simulation ended (an orphan nothing re-dispatches stays queued). re-dispatches: the sweep's T15 that "
          "matched (P6); orphan wait: from the row's dispatch deadline passing to that T15 ('-': "
          "no re-dispatch in any seed).")
    violated = sorted({(r["policy"], v) for r in rows for v in (r.get("violated") or "").split(";") if v})
    if violated:
        print("violated in some simulation: " + ", ".join(f"{p} / {v}" for p, v in violated))
    print(f"proposals --cost: {len(tasks)} simulations ({len(policies)} policies x {args.seeds} seeds), "
          f"{ran} run now, {len(tasks) - ran} already in {args.cost_out}")
    return 0
