"""``failclosed inspect SOURCE``: the footprints of the model's findings in a real database of
the runtime (docs/INSPECT.md; the checks are sim/inspect.py's, the sources
sim/inspect_sources.py's).

SOURCE is an SQLite file, a SQLAlchemy URL (``pip install 'failclosed[db]'``) or a directory of
the two tables as CSV, TSV (``mysql --batch``) or JSON lines. The report names, per anomaly, the
run's uuid, the events involved, the check, how certain the match is, and the finding or RUNTIME
16 narrative it matches (from spec/baselines/current.toml) with the model's shortest trace to
replay beside it (spec/findings/). What an export cannot tell is said once.

Exit codes: 0 no anomaly, or only anomalies whose property ``--baseline`` lists for ``--policy``
(default ``current``: the runtime an export comes from); 1 an anomaly that is not; 2 bad input.
``--json F`` writes every anomaly; ``--junit F`` one testcase per check (a failure carries the
anomalies' text). Both are written whole or not at all.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from failclosed.cli.junit import Case, junit_text
from failclosed.cli.simulate import (
    check_input_file,
    check_output_file,
    default_baseline_path,
    finding_label,
    load_known,
    plural,
    rel_path,
    resolve_sim_config,
)
from failclosed.model.config import ConfigError
from failclosed.model.policy import parse_policy
from failclosed.sim.dbschema import PRIVACY_LEVELS
from failclosed.sim.inspect import (
    CHECKS,
    DETECTABLE,
    LIMITS,
    applies,
    finding_traces,
    footprints,
    inspect,
    load_catalogue,
)
from failclosed.sim.inspect_sources import DEFAULT_BUDGET, open_source, parse_budget
from failclosed.spec.baseline import load_baseline
from failclosed.spec.progress import Progress

LIST_PER_CHECK = 5

__all__ = ["register"]


def since_arg(s: str) -> int:
    """``--since``: unix seconds, or an ISO 8601 date or time (UTC unless it says otherwise)."""
    try:
        return int(s)
    except ValueError:
        pass
    try:
        d = datetime.fromisoformat(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected unix seconds or an ISO 8601 date such as 2026-11-30 "
                                         f"or 2026-11-30T12:00:00Z, got {s!r}") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=UTC)
    return int(d.timestamp())


def budget_arg(s: str) -> int:
    """``--memory-budget``: a size in bytes (K, M, G: powers of 1024), checked before any read."""
    try:
        return parse_budget(s)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e).split(": ", 1)[1]) from None


def _labels(props: tuple[str, ...], labeller: Any) -> list[dict[str, Any]]:
    out = []
    for p in props:
        k = labeller.find("current", p)
        out.append({"property": p, "label": finding_label(k) if k is not None else "no finding",
                    "traces": finding_traces(p)})
    return out


def _known(a: Any, baseline: Any, policy: str) -> Any:
    if baseline is None:
        return None
    return next((k for p in a.properties if (k := baseline.find(policy, p)) is not None), None)


def _atomic_write(path: str, text: str) -> None:
    d, base = os.path.split(os.path.abspath(path))
    part = os.path.join(d, f".{base}.partial")
    try:
        with open(part, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(part, path)
    except BaseException:
        if os.path.exists(part):
            os.remove(part)
        raise


def _junit(rep: Any, verdicts: dict[int, Any], elapsed: float) -> str:
    """One case per check (cli/junit.py, the root element of every command): a failure lists
    the new anomalies, a note the known ones and what the data could not support."""
    by = rep.by_check()
    cases = []
    for cid, section, what, certainty, _props in CHECKS:
        c = Case(f"failclosed.inspect.{certainty}", cid, kind=certainty)
        new = [a for a in by[cid] if verdicts[id(a)] is None]
        known = [a for a in by[cid] if verdicts[id(a)] is not None]
        if new:
            c.failure = f"{plural(len(new), 'anomaly', 'anomalies')}: {what} (EXPORT.md {section})"
            c.text = "\n".join(f"run {a.uuid or a.run}: {a.text}" for a in new)
        out = []
        if known:
            out.append(f"{plural(len(known), 'known anomaly', 'known anomalies')} (baseline):")
            out += [f"run {a.uuid or a.run}: {a.text}" for a in known]
        if cid in rep.unsupported:
            out.append(rep.unsupported[cid])
        c.out = "\n".join(out)
        cases.append(c)
    return junit_text("failclosed.inspect", cases, elapsed)


def _cmd_inspect(args: argparse.Namespace) -> int:  # noqa: C901 - input checks, then one pass

    check_output_file(args.json, "--json")
    check_output_file(args.junit, "--junit", (".xml",))
    if args.tools:  # a FILE, or a shipped simulator config by name (default)

        args.tools = resolve_sim_config(args.tools, "--tools")
        check_input_file(args.tools, "--tools")
    catalogue = load_catalogue(args.tools)
    baseline = load_known(args.baseline) if args.baseline else None
    if args.policy:
        parse_policy(args.policy)
    policy = args.policy or "current"
    labeller = load_baseline(default_baseline_path())
    source = open_source(args.source, args.memory_budget)
    t0 = time.perf_counter()
    try:
        with Progress("inspect", total=None, unit="runs", enabled=not args.quiet,
                      clock=time.monotonic) as pg:
            step = [0]

            def tick(n: int) -> None:
                if n - step[0] >= 10_000:
                    pg.advance(n - step[0])
                    step[0] = n

            rep = inspect(source, catalogue, privacy=args.privacy, since=args.since, on_run=tick,
                          budget=args.memory_budget)
    finally:
        source.close()
    elapsed = time.perf_counter() - t0
    verdicts = {id(a): _known(a, baseline, policy) for a in rep.anomalies}
    new = [a for a in rep.anomalies if verdicts[id(a)] is None]
    if args.json:
        _atomic_write(args.json, json.dumps(_json(rep, verdicts, labeller, elapsed, args, policy), indent=1, sort_keys=True) + "\n")
    if args.junit:
        _atomic_write(args.junit, _junit(rep, verdicts, elapsed))
    _print(rep, verdicts, labeller, elapsed, args, new)
    return 1 if new else 0


def _json(rep: Any, verdicts: dict[int, Any], labeller: Any, elapsed: float, args: Any, policy: str) -> dict[str, Any]:
    by = rep.by_check()
    anomalies = []
    for a in rep.anomalies:
        d = a.to_json()
        d["matches"] = _labels(a.properties, labeller)
        k = verdicts[id(a)]
        d["baseline"] = None if k is None else k.label()
        anomalies.append(d)
    return {
        "source": rep.source, "runs": rep.runs, "events": rep.events, "runs_before_since": rep.skipped_runs,
        "elapsed_seconds": round(elapsed, 3), "tools": rep.tools, "privacy": rep.privacy,
        "baseline": args.baseline, "policy": policy,
        "checks": [{"check": c[0], "section": c[1], "finds": c[2], "certainty": c[3], "properties": list(c[4]),
                    "anomalies": len(by[c[0]]),
                    "by_certainty": dict(Counter(a.certainty for a in by[c[0]])), "new": sum(1 for a in by[c[0]] if verdicts[id(a)] is None),
                    "unsupported": rep.unsupported.get(c[0])} for c in CHECKS],
        "anomalies": anomalies,
        "proposals": footprints(rep),
        "notices": [{"notice": n, "runs": c, "examples": rep.notice_runs.get(n, [])} for n, c in rep.notices.items()],
        "unreadable": rep.unreadable.to_json(),
        "memory_budget_bytes": args.memory_budget,
        "detectable": {p: {"detectable": d, "check": c} for p, (d, c) in DETECTABLE.items()},
        "cannot_tell": list(LIMITS),
    }


def _print(rep: Any, verdicts: dict[int, Any], labeller: Any, elapsed: float, args: Any, new: list) -> None:
    # lazy: rich costs start-up x1.04 to x1.10 CPU for every command; only the printed table needs it
    from rich.console import Console

    con = Console(highlight=False, soft_wrap=True)
    rate = rep.events / elapsed if elapsed > 0 else 0.0
    con.print(f"[bold]failclosed inspect[/]: {rep.source}: {rep.runs:,} runs, {rep.events:,} events in {elapsed:.1f} s "
              f"({rate:,.0f} events/s)" + (f"; {rep.skipped_runs:,} runs before --since skipped" if rep.skipped_runs else ""))
    con.print(f"tools: {rel_path(rep.tools) if args.tools else rep.tools}; privacy: {rep.privacy}", markup=False)
    by = rep.by_check()
    con.print(f"{'check':27} {'EXPORT.md':10} {'certainty':10} anomalies")
    for cid, section, _what, certainty, _p in CHECKS:
        n, k = len(by[cid]), sum(1 for a in by[cid] if verdicts[id(a)] is not None)
        certainty = "/".join(sorted({a.certainty for a in by[cid]})) or certainty  # what this export proves
        cell = "[green]0[/]" if not n else (f"[yellow]{n} known[/]" if k == n else f"[bold red]{n}[/]" + (f" ({k} known)" if k else ""))
        note = f"  ({rep.unsupported[cid]})" if cid in rep.unsupported else ""
        if not applies(rep, cid):  # said once, in the proposals' footprints below
            cell, note = "n/a", ""
        con.print(f"{cid:27} {section:10} {certainty:10} {cell}{note}")
    _print_footprints(con, rep)
    for cid, *_ in CHECKS:
        items = by[cid]
        if not items:
            continue
        con.print(f"[bold]{cid}[/] ({plural(len(items), 'anomaly', 'anomalies')}" +
                  (f", the first {LIST_PER_CHECK}; --json F lists every one" if len(items) > LIST_PER_CHECK else "") + "):")
        for a in items[:LIST_PER_CHECK]:
            evs = ", ".join(f"#{s} {k} (uid {u})" for s, u, k in a.events)
            known = verdicts[id(a)]
            con.print(f"  run {a.uuid or f'uid {a.run}'} [{a.certainty}]{' known' if known else ''}: {a.text}"
                      + (f"; events {evs}" if evs else ""), markup=False)
            for m in _labels(a.properties, labeller)[:2]:
                # by name: a shipped findings trace replays so from any directory (cli/replay.py)
                replay = "; replay: " + ", ".join(f"failclosed replay {Path(t).stem}" for t in m["traces"]) \
                    if m["traces"] else ""
                con.print(f"      matches {m['label']} {m['property']}{replay}", markup=False)
    _print_unreadable(con, rep.unreadable)
    if rep.unknown_tools:
        con.print(f"tools of unknown effect, not checked as writes: {', '.join(rep.unknown_tools)} "
                  "(give --tools CONFIG with the runtime's catalogue)", markup=False)
    for n, c in rep.notices.items():
        con.print(f"notice: {plural(c, 'run')}: {n} (e.g. {', '.join(rep.notice_runs[n][:3])})", markup=False)
    con.print("What an export cannot tell (EXPORT.md 8), so no check here guesses it: " + "; ".join(LIMITS) + ".",
              markup=False)
    runs = len({a.run for a in rep.anomalies})
    if not rep.anomalies:
        con.print(f"[bold green]no anomaly in {rep.runs:,} runs[/]")
    else:
        style = "bold red" if new else "bold yellow"
        extra = f": {len(new)} new, {len(rep.anomalies) - len(new)} known" if args.baseline else ""
        con.print(f"[{style}]{plural(len(rep.anomalies), 'anomaly', 'anomalies')} in {plural(runs, 'run')}{extra}[/]")


def _print_footprints(con: Any, rep: Any) -> None:
    """Per proposal (docs/PROPOSALS.md): the anomalies that would show it not working in a
    database taken after the change, or why its check does not apply here."""
    con.print("the proposals' footprints (docs/PROPOSALS.md; zero in a database taken after the change):")
    for f in footprints(rep):
        what = f["check"] + (f" ({f['detail'].replace('_', ' ')})" if f["detail"] else "")
        if not f["applies"]:
            con.print(f"  {f['proposal']} {f['switch']}: {what}: {f['text']}", markup=False)
            continue
        n = f["anomalies"]
        cell = "[green]0[/]" if not n else f"[bold red]{n}[/]"
        con.print(f"  {f['proposal']} {f['switch']}: {what}: {cell}" + (f" ({f['text']})" if not n else ""))


def _print_unreadable(con: Any, un: Any) -> None:
    """The rows whose fields have not the runtime's types: counted, never read as something else."""
    if not un.reasons:
        return
    con.print(f"[bold yellow]unreadable[/]: {plural(un.run_rows, 'run row')} and {plural(un.event_rows, 'event row')} "
              f"not read (a field NULL, of the wrong type, or a payload that is no JSON object); "
              f"{plural(un.runs_partly_checked, 'run')} checked without the checks that need them:")
    for (table, reason), n in sorted(un.reasons.items()):
        con.print(f"  {table}: {plural(n, 'row')}: {reason} (e.g. {', '.join(un.examples[(table, reason)])})",
                  markup=False)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "inspect", help="find the findings' footprints in a database of the runtime",
        description="Run every check of EXPORT.md section 7 that the data supports on the runtime's two tables "
                    "(tx_nrllm_agentrun, tx_nrllm_agentrun_event), streamed run by run. Exit 0: no anomaly, or only "
                    "those --baseline lists; 1: an anomaly not in the baseline; 2: bad input.",
    )
    p.add_argument("source", metavar="SOURCE",
                   help="an SQLite file, a SQLAlchemy URL (mysql+pymysql://..., postgresql://...; pip install "
                        "'failclosed[db]') or a directory with the two tables as .csv, .tsv or .jsonl")
    p.add_argument("--json", metavar="FILE", help="write the report with every anomaly as JSON (default: not written)")
    p.add_argument("--junit", metavar="FILE.xml", help="write JUnit XML, one testcase per check (default: not written)")
    p.add_argument("--since", type=since_arg, metavar="T",
                   help="only runs created at or after T: unix seconds or an ISO 8601 date (default: every run)")
    p.add_argument("--privacy", choices=("auto", *PRIVACY_LEVELS), default="auto",
                   help="the privacy level the payloads were written at; none / metadata never match arguments "
                        "(default: auto, read from each payload)")
    p.add_argument("--tools", metavar="CONFIG.toml",
                   help="the tool catalogue ([[tools]] of any failclosed config FILE, or of a shipped simulator "
                        "config by name, e.g. default: name, effect, remote, server_flag); "
                        "default: the runtime's resolver (builtin writers, mcp_* non-idempotent, unknown names too)")
    p.add_argument("--baseline", metavar="FILE",
                   help="a baseline TOML: an anomaly whose property it lists for --policy exits 0 (default: none; "
                        "current, the shipped baseline by name, lists the findings)")
    p.add_argument("--policy", help="the policy the baseline's entries are read for (default: current)")
    p.add_argument("--memory-budget", type=budget_arg, default=DEFAULT_BUDGET, metavar="SIZE",
                   help="the bytes inspect may hold (rows fetched at a time, one run's events, the longest payload "
                        "parsed: a sixteenth of it); K, M, G are powers of 1024 (default: 256M, at least 16M)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr (default: progress shown)")
    p.set_defaults(func=_cmd_inspect)
