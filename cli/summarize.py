"""``failclosed summarize F.csv``: a sweep's summary, one row per grid point, from its CSV.

A sweep CSV (``failclosed sweep --out F.csv``) holds one row per (grid point, seed). The
summary has one row per grid point: its parameters, ``n_seeds`` and, for each metric of
``sim.metrics.SUMMARY_METRICS`` the CSV has columns for, ``METRIC``, ``METRIC_lo`` and
``METRIC_hi``: the estimate and its 95 % interval *over seeds* (one simulation is one
replication; ``sim.stats``), each clipped to its metric's range, the ``interval_method``, and
``clipped``: the bounds moved to that range, from where. It is written beside the CSV
(``F.summary.csv``, or ``--summary FILE``; complete or not at all) and printed as tables no
wider than 100 columns (a share as a percentage, a clipped interval marked ``*``).
``failclosed sweep`` writes and prints the same summary at its end.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import os
import tempfile
from textwrap import fill
from typing import Any

from failclosed.cli.outputs import as_umask_allows
from failclosed.cli.simulate import check_input_file, check_output_file, fit_tables, terminal_width
from failclosed.model.config import UsageError

__all__ = ["DEFAULT_TABLE_METRICS", "check_metrics", "default_summary_path", "print_summary",
           "register", "summary_of", "write_summary"]

# the metrics the printed table shows unless --metric names others (the CSV has them all)
DEFAULT_TABLE_METRICS = ("p_double_nonidem", "p_dead_letter", "p_completed_unaudited", "p_reaped_alive",
                         "throughput_per_hour", "e2e_p99_s")
TABLE_WIDTH = 100


def default_summary_path(csv_path: str) -> str:
    """``F.summary.csv`` beside the sweep's ``F.csv``."""
    stem = csv_path[:-4] if csv_path.lower().endswith(".csv") else csv_path
    return stem + ".summary.csv"


def check_metrics(metrics: list[str] | None, flag: str = "--metric") -> list[str]:
    """The metric names given, each one of ``SUMMARY_METRICS`` (else one UsageError line)."""
    # lazy: sim.metrics imports scipy (sim.stats), start-up x2.1 CPU for every command
    from failclosed.sim.metrics import SUMMARY_METRICS

    for m in metrics or []:
        if m not in SUMMARY_METRICS:
            near = difflib.get_close_matches(m, list(SUMMARY_METRICS), n=1)
            hint = f"did you mean {near[0]}? " if near else ""
            raise UsageError(f"{flag} {m}: not a metric; {hint}give one of {', '.join(SUMMARY_METRICS)}")
    return list(metrics or [])


def summary_of(rows: list[dict[str, str]], header: list[str]) -> list[dict[str, Any]]:
    # lazy: sim.stats imports scipy, start-up x2.2 CPU for every command
    from failclosed.sim import stats

    return stats.summarize(rows, header)


def write_summary(path: str, summary: list[dict[str, Any]], header: list[str],
                  extra: tuple[str, ...] = ()) -> None:
    """The summary as CSV at ``path``, written under a temporary name and renamed: the file
    is complete or left as it was."""
    # lazy: sim.stats imports scipy, start-up x2.2 CPU for every command
    from failclosed.sim import stats

    names = stats.param_names(header)
    metrics = list(stats.summary_metrics(header))
    cols = stats.summary_columns(names, metrics) + list(extra)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".partial", dir=d)
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
            w.writeheader()
            for row in summary:
                w.writerow({k: ("" if v is None else v) for k, v in row.items()})

        as_umask_allows(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


CLIPPED_MARK = "*"  # after an interval clipped to its metric's range


def _cell(spec: Any, est: Any, lo: Any, hi: Any, clipped: bool = False) -> str:
    """A metric's estimate and interval as the table prints it: a share (``spec.fraction``)
    as a percentage with one decimal, anything else as a number; ``clipped`` marks the band."""
    if est is None:
        return "-"
    mark = CLIPPED_MARK if clipped else ""
    if spec.fraction:
        band = "" if lo is None else f" [{100 * lo:.1f}, {100 * hi:.1f}]{mark}"
        return f"{100 * est:.1f}%{band}"
    digits = 0 if abs(est) >= 10 else 2
    band = "" if lo is None else f" [{lo:,.{digits}f}, {hi:,.{digits}f}]{mark}"
    return f"{est:,.{digits}f}{band}"


def _clipped_metrics(row: dict[str, Any]) -> set[str]:
    """The metrics of a summary row whose interval was clipped (its ``clipped`` column)."""
    return {c.split(" ", 1)[0] for c in str(row.get("clipped") or "").split("; ") if c}


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def print_summary(summary: list[dict[str, Any]], header: list[str], metrics: list[str] | None = None,
                  out: Any = None) -> None:
    """The summary as tables no wider than 100 columns: a row per grid point (its varying
    parameters), ``n`` seeds, and the metrics (``metrics`` or ``DEFAULT_TABLE_METRICS``)."""
    # lazy: scipy (sim.stats, sim.metrics) and rich: start-up x2.2 and x1.1 CPU, every command
    from failclosed.sim import stats
    from failclosed.sim.metrics import SUMMARY_METRICS
    from rich.console import Console

    have = stats.summary_metrics(header)
    shown = [m for m in (metrics or DEFAULT_TABLE_METRICS) if m in have]
    names = stats.param_names(header)
    vary = [n for n in names if len({str(r[f"param:{n}"]) for r in summary}) > 1] or names
    width = min(terminal_width(), TABLE_WIDTH)
    rows = []
    any_clipped = False
    for r in summary:
        label = " ".join(f"{_short(n)}={r[f'param:{n}']}" for n in vary) or "(one grid point)"
        clipped = _clipped_metrics(r) & set(shown)
        any_clipped = any_clipped or bool(clipped)
        cells = [str(r["n_seeds"])] + [_cell(SUMMARY_METRICS[m], r[m], r[f"{m}_lo"], r[f"{m}_hi"], m in clipped)
                                       for m in shown]
        rows.append((label, cells))
    con = Console(width=width, highlight=False, soft_wrap=False, file=out)
    for t in fit_tables("grid point", ["seeds", *shown], rows, width):
        con.print(t)
    if shown:
        con.print(fill(f"[ ]: {stats.method_text()}. Metrics: "
                       + "; ".join(f"{m} = {SUMMARY_METRICS[m].text}" for m in shown) + ".", width),
                  markup=False)
    if any_clipped:
        con.print(fill(f"{CLIPPED_MARK}: the interval reached past its metric's range and was clipped "
                       "to it (the summary CSV's clipped column gives the bound before clipping).", width),
                  markup=False)


def read_sweep(path: str) -> tuple[list[str], list[dict[str, str]]]:
    """A sweep CSV's header and rows, checked (one ConfigError line otherwise)."""
    # lazy: sim.plots imports matplotlib, start-up x1.75 CPU for every command
    from failclosed.sim import plots

    return plots.read_sweep_csv(path, with_header=True)


def _cmd_summarize(args: argparse.Namespace) -> int:
    check_input_file(args.input, "CSV")
    metrics = check_metrics(args.metric)
    path = args.summary or default_summary_path(args.input)
    if os.path.abspath(path) == os.path.abspath(args.input):
        raise UsageError(f"--summary {path}: is the sweep's own CSV; give another file")
    check_output_file(path, "--summary", (".csv",))
    header, rows = read_sweep(args.input)
    summary = summary_of(rows, header)
    write_summary(path, summary, header)
    print(f"summarize: {len(rows)} simulations in {args.input}, {len(summary)} grid points")
    print_summary(summary, header, metrics)
    print(f"wrote {path}")
    return 0


def register(subparsers: Any) -> None:
    s = subparsers.add_parser(
        "summarize", help="a sweep CSV's summary: one row per grid point, intervals over seeds",
        description="Summarize a sweep CSV (one row per grid point and seed) into one row per grid point: "
                    "n_seeds and, for each metric, METRIC, METRIC_lo, METRIC_hi (95% intervals across "
                    "seeds, the method in the interval_method column). Exit 0, or 2 for bad input.")
    s.add_argument("input", metavar="CSV", help="a CSV written by failclosed sweep --out")
    s.add_argument("--summary", metavar="FILE",
                   help="where to write the summary CSV (default: beside the input, NAME.summary.csv)")
    s.add_argument("--metric", action="append", metavar="M",
                   help="a metric the printed table shows, repeatable (default: "
                        + ", ".join(DEFAULT_TABLE_METRICS) + "; the CSV has them all)")
    s.set_defaults(func=_cmd_summarize)
