"""``failclosed plot``: ``swimlane`` of a history (JSONL) or a scenario (TOML); ``curves`` of
a sweep CSV over any swept parameter, and its preset ``lease-curves`` (the drawing is
sim/plots.py's).

curves
    ``--x PARAM [--color PARAM] [--facet PARAM] [--metric M ...]``: the sweep's summary (one
    point per grid point, 95 % intervals over seeds as bands; sim/stats.py). Every parameter
    that varies must be mapped to --x, --color or --facet: one that is not is refused with one
    line naming it (exit 2), never merged into one curve.
lease-curves
    ``curves --x constants.LEASE_SECONDS --color policy`` with four panels.
swimlane
    ``--runs`` and ``--window`` select what is drawn and the axis zooms to it; nothing else
    narrows it (``--first-violating-run`` draws the first violating run alone, and says so); at
    most ``--max-lanes`` lanes (the figure and stdout say how to choose others); the violations
    the history records (or the scenario expects) are marked where they happen, each labelled
    inside the figure.
"""

from __future__ import annotations

import argparse
import csv
import math
from typing import Any

from failclosed.cli.simulate import check_input_file, check_output_file, int_arg
from failclosed.cli.summarize import check_metrics
from failclosed.model.config import ConfigError, UsageError

__all__ = ["PLOT_FORMATS", "parse_window", "register"]

PLOT_FORMATS = (".png", ".svg", ".pdf")


def parse_window(text: str) -> tuple[float, float]:
    try:
        a, b = text.split(":")
        window = (float(a), float(b))
    except ValueError:
        raise ConfigError(f"--window {text}: expected START:END in simulated seconds, e.g. 0:3600") from None
    if not all(math.isfinite(x) for x in window) or window[0] < 0:
        raise ConfigError(f"--window {text}: START and END must be finite seconds >= 0, e.g. 0:3600")
    if window[0] >= window[1]:
        raise ConfigError(f"--window {text}: START must be below END; e.g. {window[1]:g}:{window[0]:g}")
    return window


def _cmd_plot(args: argparse.Namespace) -> int:
    check_output_file(args.out, "--out", PLOT_FORMATS)
    what = "HISTORY" if args.kind == "swimlane" else "CSV"
    check_input_file(args.input, what)
    window = parse_window(args.window) if args.window else None
    if args.kind == "curves":  # the arguments first: cheap, before matplotlib and the CSV's rows

        check_metrics(args.metric)
        if not args.x:
            raise UsageError("plot curves: --x PARAM is required; e.g. --x constants.LEASE_SECONDS")
    elif args.kind == "lease-curves":
        _refuse_curve_flags(args, "lease-curves")
    # lazy: sim.plots imports matplotlib, start-up x1.75 CPU for every command
    from failclosed.sim import plots

    if args.kind == "swimlane":
        runs = [r.strip() for r in (args.runs or "").split(",") if r.strip()]
        recs = plots.load_records(args.input)
        plots.check_runs(recs, runs, args.input)
        viol = None
        if args.first_violating_run and runs:
            raise UsageError("--first-violating-run: draws the first violating run instead of --runs; give one of them")
        if args.first_violating_run and not args.violations and not args.input.endswith(".toml"):
            raise UsageError("--first-violating-run: needs --violations FILE.json (the --json of the simulate "
                             "run that wrote the history) to know which runs violate")
        if args.violations:
            check_input_file(args.violations, "--violations")
            viol = plots.load_violations(args.violations)
        drawn = plots.swimlane(args.input, args.out, runs=runs or None, window=window, axis=args.axis,
                               records=recs, max_lanes=args.max_lanes, violations=viol,
                               first_violating=args.first_violating_run)
        for line in (drawn or {}).get("notes", []):
            print(line)
    elif args.kind == "curves":
        _curves(args, plots)
    else:
        header, rows = plots.read_sweep_csv(args.input, plots.LEASE_CURVE_COLUMNS, with_header=True)
        plots.lease_curves(args.input, args.out, rows=rows, header=header)
    print(f"wrote {args.out}")
    return 0


def _refuse_curve_flags(args: argparse.Namespace, kind: str) -> None:
    for flag in ("x", "color", "facet", "metric"):
        if getattr(args, flag, None):
            raise UsageError(f"--{flag}: only for plot curves (plot {kind} maps its own axes)")


def _curves(args: argparse.Namespace, plots: Any) -> None:
    metrics = check_metrics(args.metric) or list(plots.CURVE_METRICS)
    header = _csv_header(args.input)
    if header:  # the names of --x, --color, --facet against the header, before the rows (one
        # empty row of its columns: no parameter varies in it, only the names are checked)
        plots.check_mapping(header, [dict.fromkeys(header, "")], args.x, args.color, args.facet,
                            args.input)
    header, rows = plots.read_sweep_csv(args.input, with_header=True)
    plots.check_mapping(header, rows, args.x, args.color, args.facet, args.input)
    drawn = plots.curves(rows, header, args.out, args.x, args.color, args.facet, metrics,
                         title=args.input.split("/")[-1])
    missing = [m for m in metrics if m not in drawn["metrics"]]
    if missing:
        print(f"plot curves: {args.input} has no columns for {', '.join(missing)} (not drawn)")


def _csv_header(path: str) -> list[str]:
    """The first line of a CSV (empty when it cannot be read: read_sweep_csv then says why)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return []


def register(subparsers: Any) -> None:
    pl = subparsers.add_parser("plot", help="plots: swimlane of a history or scenario; curves of a sweep",
                               description="Render a plot (matplotlib, Agg). Exit 0, or 2 for bad input "
                                           "(a varying parameter curves do not map, too).")
    pl.add_argument("kind", choices=("swimlane", "curves", "lease-curves"))
    pl.add_argument("input", help="swimlane: HISTORY.jsonl or SCENARIO.toml; curves, lease-curves: a sweep's CSV")
    pl.add_argument("--out", required=True, help=f"output file ({', '.join(PLOT_FORMATS)}; required)")
    pl.add_argument("--runs", help="swimlane: only these run ids, comma-separated (default: every run)")
    pl.add_argument("--window", help="swimlane: START:END in simulated seconds (default: the whole history)")
    pl.add_argument("--axis", choices=("auto", "time", "step"), default="auto",
                    help="swimlane: x axis; step = transition order, auto = step when the clock moves "
                         "less than one second per transition (default: auto)")
    pl.add_argument("--violations", metavar="FILE.json",
                    help="swimlane of a history: the --json of the simulate run that wrote it; its "
                         "violations are marked where they happen, every run still drawn (a scenario's "
                         "violations are found by replaying it; default: none)")
    pl.add_argument("--first-violating-run", action="store_true",
                    help="swimlane: draw only the first violating run (and say so), instead of --runs "
                         "(default: off, every run drawn)")
    pl.add_argument("--max-lanes", type=int_arg(1, "a number of lanes, >= 1"), default=24,
                    help="swimlane: at most this many lanes, the busiest; the caption says how to choose others (default: 24)")
    pl.add_argument("--x", metavar="PARAM", help="curves: the swept parameter on the x axis (required for curves)")
    pl.add_argument("--color", metavar="PARAM", help="curves: one line per value of this parameter (default: none, one line)")
    pl.add_argument("--facet", metavar="PARAM", help="curves: one column of panels per value of this parameter (default: none, one column)")
    pl.add_argument("--metric", action="append", metavar="M",
                    help="curves: a metric to draw, repeatable (default: p_double_nonidem, p_dead_letter, "
                         "throughput_per_hour, wasted_fraction)")
    pl.set_defaults(func=_cmd_plot)
