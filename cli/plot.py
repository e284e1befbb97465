"""``failclosed plot``: ``swimlane`` of a history (JSONL) or a scenario (TOML);
``lease-curves`` of a sweep CSV (the drawing is sim/plots.py's)."""

from __future__ import annotations

import argparse
from typing import Any

from failclosed.cli.simulate import check_input_file, check_output_file
from failclosed.model.config import ConfigError

__all__ = ["PLOT_FORMATS", "parse_window", "register"]

PLOT_FORMATS = (".png", ".svg", ".pdf")


def parse_window(text: str) -> tuple[float, float]:
    import math

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
    from failclosed.sim import plots

    check_output_file(args.out, "--out", PLOT_FORMATS)
    what = "HISTORY" if args.kind == "swimlane" else "CSV"
    check_input_file(args.input, what)
    if args.kind == "swimlane":
        window = parse_window(args.window) if args.window else None
        runs = [r.strip() for r in (args.runs or "").split(",") if r.strip()]
        recs = plots.load_records(args.input)
        plots.check_runs(recs, runs, args.input)
        plots.swimlane(args.input, args.out, runs=runs or None, window=window, axis=args.axis, records=recs)
    else:
        rows = plots.read_sweep_csv(args.input)
        plots.lease_curves(args.input, args.out, rows=rows)
    print(f"wrote {args.out}")
    return 0


def register(subparsers: Any) -> None:
    pl = subparsers.add_parser("plot", help="plots: swimlane of a history or scenario; lease curves of a sweep",
                               description="Render a plot (matplotlib, Agg).")
    pl.add_argument("kind", choices=("swimlane", "lease-curves"))
    pl.add_argument("input", help="swimlane: HISTORY.jsonl or SCENARIO.toml; lease-curves: a sweep's CSV")
    pl.add_argument("--out", required=True, help=f"output file ({', '.join(PLOT_FORMATS)}; required)")
    pl.add_argument("--runs", help="swimlane: only these run ids, comma-separated (default: every run)")
    pl.add_argument("--window", help="swimlane: START:END in simulated seconds (default: the whole history)")
    pl.add_argument("--axis", choices=("auto", "time", "step"), default="auto",
                    help="swimlane: x axis; step = transition order, auto = step when the clock moves "
                         "less than one second per transition (default: auto)")
    pl.set_defaults(func=_cmd_plot)
