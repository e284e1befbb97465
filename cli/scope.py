"""``failclosed scope``, and what ``matrix --scope`` shares with it: running a scope with
progress and the cache (spec/scope.py), its header, summary and verdict against a baseline.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from failclosed.cli.checking import (
    add_common,
    add_memory_budget,
    add_reductions,
    check_outputs,
    emit_json,
    load_baseline_arg,
    notes_and_baseline,
    plural,
    positive_int,
    say,
    table_width,
    text_table,
    validate_policy,
    verdict,
    write_counterexamples,
)
from failclosed.cli.exits import EXIT_TRUNCATED, exit_codes_text, with_truncation
from failclosed.cli.junit import add_junit, cell_cases, check_junit, write_junit
from failclosed.cli.scenario_writer import dump_scenario
from failclosed.spec.baseline import Baseline, Comparison, Known, write_baseline
from failclosed.spec.checker import ConfigPart, check, resolve_properties, trace_text
from failclosed.spec.progress import Progress
from failclosed.spec.scope import Cache, check_scope, dask_client, load_scope, member, model_version

__all__ = ["add_scope_run", "register_scope", "run_scope_cli", "scope_junit", "scope_preflight",
           "scope_verdict"]


PROGRESS_INTERVAL = 60  # seconds between two progress lines off a terminal, at most


def add_scope_run(p: argparse.ArgumentParser) -> None:
    """The arguments of running a scope: parallelism, bound, cache."""
    p.add_argument("--jobs", type=positive_int, default=os.cpu_count() or 1, metavar="N",
                   help="local worker processes (default: every core)")
    p.add_argument("--dask", metavar="ADDR", help="run the configurations on the "
                   "dask.distributed scheduler at ADDR (host:port) instead of local processes")
    p.add_argument("--max-states", type=positive_int, default=None, metavar="N",
                   help="stop each configuration's search after N states (the verdicts then "
                        "say which were truncated; default: no bound)")
    p.add_argument("--cache-dir", metavar="DIR", help="where the results of finished "
                   "configurations are kept, so an interrupted or repeated run redoes only "
                   "what is missing (default: $FAILCLOSED_CACHE or ~/.cache/failclosed)")
    p.add_argument("--no-cache", action="store_true", help="recheck every configuration")
    add_reductions(p)
    add_memory_budget(p, "the whole command's: each of the --jobs N local workers gets MIB/N "
                         "(on --dask each task gets MIB)")


def register_scope(subparsers: Any) -> None:
    s = subparsers.add_parser(
        "scope", help="check every configuration of a declared scope, in parallel: holds "
                      "across the scope, or the shortest counterexample over all of them",
        description="Expand a scope (spec/scopes: dimensions of small configurations) into "
                    "its configurations, drop renamings and subsumed ones, and check each one "
                    "under each policy as an independent task. A property holds only if it "
                    "holds in every configuration.\n"
                    "Exit 0: every property holds (or its violation is in --baseline); 1: a new "
                    "violation (printed with the configuration that produced it); 2: bad input; "
                    f"{EXIT_TRUNCATED}: nothing new violated, but --max-states cut a search short.",
        epilog=exit_codes_text(),
    )
    s.add_argument("scope", nargs="?", default="standard",
                   help="standard | quick | full | a scope TOML FILE (default: standard)")
    s.add_argument("--policy", action="append", dest="policies", metavar="P",
                   help="policy to check (repeatable; default: current)")
    s.add_argument("--property", action="append", dest="properties", metavar="NAME",
                   help="check only this property (repeatable; default: every property)")
    s.add_argument("--out", metavar="DIR", help="write each new shortest counterexample as a "
                   "trace table, a scenario file and a pytest regression test")
    s.add_argument("--list", action="store_true",
                   help="list the configurations (after reduction) and exit")
    s.add_argument("--show", metavar="NAME", help="print one configuration as TOML (for "
                   "`failclosed check --config FILE`) and exit")
    add_scope_run(s)
    add_common(s, config=False)
    add_junit(s)
    s.set_defaults(func=_cmd_scope)


def scope_preflight(args: argparse.Namespace) -> None:
    """Before any work: the baseline parses, the outputs are writable, the scheduler answers
    (each a one-line error otherwise)."""
    load_baseline_arg(args.baseline)
    check_outputs(args)
    if args.dask:
        dask_client(args.dask).close()


def run_scope_cli(scope_name: str, policies: list[str], properties: list[str] | None,
                  args: argparse.Namespace) -> Any:
    """Load the scope, run it with progress (off a terminal at most a line every
    ``PROGRESS_INTERVAL`` seconds) and the
    cache, merge: the ScopeResult."""
    scope = load_scope(scope_name)
    cache = None
    if not args.no_cache:
        root = Path(args.cache_dir) if args.cache_dir else Cache.default_root()
        cache = Cache(root, model_version())
    total = len(scope.members) * len(policies)
    with Progress(f"scope {scope.name}", total, unit="configurations", interval=PROGRESS_INTERVAL,
                  clock=time.monotonic,
                  enabled=not args.quiet) as pg:
        pg.note(_scope_header(scope, policies))
        return check_scope(scope, policies, properties, jobs=args.jobs, dask=args.dask,
                           max_states=args.max_states, cache=cache,
                           logs=args.log_order,
                           memory_budget_mib=args.memory_budget,
                           on_result=lambda r: pg.advance(states=r.states),
                           on_running=lambda n: pg.running(states=n))


def _scope_header(scope: Any, policies: list[str] | None) -> str:
    txt = (f"scope {scope.name}: {scope.generated:,} configurations generated, "
           f"{scope.equivalent:,} renamings and {scope.subsumed:,} subsumed dropped, "
           f"{len(scope.members):,} kept")
    if policies:
        txt += f", checked under {plural(len(policies), 'policy', 'policies')}"
    return txt


def _scope_summary(res: Any, cmp: Comparison, judged: bool) -> str:
    """``42 cells: 6 violated (6 known, 0 new), 36 hold in scope quick: 32 configurations,
    4,677 states``."""
    n = len(res.policies) * len(res.properties)
    bad = sum(not v.holds for p in res.policies for v in res.verdicts[p].values())
    viol = f"{bad} violated"
    if judged:
        viol += f" ({len(cmp.known)} known, {len(cmp.new)} new)"
    fixed = f", {len(cmp.fixed)} fixed" if cmp.fixed else ""
    if cmp.not_reached:
        fixed += f", {len(cmp.not_reached)} not reached"
    hold = "hold" if not res.truncated else "hold up to the bound"
    return (f"{plural(len(res.policies), 'policy', 'policies')} x "
            f"{plural(len(res.properties), 'property', 'properties')}: {viol}, {n - bad} "
            f"{hold}{fixed} in {res.reach()}")


def scope_verdict(res: Any, args: argparse.Namespace, command: str,
                   ) -> tuple[Baseline, Comparison, list[str]]:
    """Judge the merged cells against --baseline (writing --write-baseline first)."""
    baseline = load_baseline_arg(args.baseline)
    cells = {(p, n): not v.holds for p in res.policies for n, v in res.verdicts[p].items()}
    notes: list[str] = []
    if args.write_baseline:
        entries = []
        for (p, n), bad in cells.items():
            if not bad:
                continue
            v = res.verdicts[p][n]
            k = baseline.find(p, n, res.scope.name)
            if k is not None and k.policy != p:  # a variant's: recorded under the policy checked
                k = replace(k, policy=p, variants=False)
            entries.append(k if k is not None else Known(
                p, n, f"recorded by `failclosed {command}` over scope {res.scope.name}: "
                      f"shortest counterexample {v.length} steps in {v.member}; replace this "
                      "with why it is accepted", config=res.scope.name))

        run = "failclosed " + " ".join([command, *(f"--policy {shlex.quote(p)}" for p in res.policies)])
        header = (f"Known violations, written by `{run} --write-baseline {args.write_baseline}` "
                  f"over scope {res.scope.name}.\nCheck against it: `{run} --baseline "
                  f"{args.write_baseline}` (exit 1 only on a violation not listed here).")
        write_baseline(args.write_baseline, entries, header)
        notes.append(f"wrote a baseline of {plural(len(entries), 'known violation')}: "
                     f"{args.write_baseline}")
        baseline = Baseline(tuple(entries), args.write_baseline)
    return baseline, baseline.compare(cells, res.scope.name, scope_incomplete(res)), notes


def scope_incomplete(res: Any) -> str | None:
    """Why the scope's holding cells prove nothing (None: every search was complete)."""
    if not res.truncated:
        return None
    return (f"in a scope whose search was truncated by --max-states in "
            f"{plural(len(res.truncated), 'configuration')}")


def _cmd_scope(args: argparse.Namespace) -> int:
    if args.list or args.show:
        return _list_or_show(args)
    policies = args.policies or ["current"]
    for p in policies:
        validate_policy(p)
    resolve_properties(args.properties)  # an unknown name: one line, before any work
    scope_preflight(args)
    check_junit(args)
    res = run_scope_cli(args.scope, policies, args.properties, args)
    _, cmp, notes = scope_verdict(res, args, f"scope {args.scope}")
    scope_junit(res, args, cmp, f"scope {args.scope}")
    judged = bool(args.baseline or args.write_baseline)
    summary = _scope_summary(res, cmp, judged)
    rc = with_truncation(verdict(cmp), bool(res.truncated))
    new = set(cmp.new)
    written = write_counterexamples([(_shortest(res, pol, n), pol) for pol, n in sorted(new)],
                                    args.out) if args.out else []
    if args.json:
        d = res.to_json() | {"baseline": cmp.to_json(), "summary": summary, "exit_code": rc,
                             "incomplete": scope_incomplete(res)}
        if written:
            d["written"] = written
        emit_json(args, d)
        if args.json == "-":
            return rc
    width = table_width()
    _print_verdicts(res, policies, cmp, judged, width)
    _print_largest(res, width)
    if res.truncated:
        say(f"truncated by --max-states: {', '.join(res.truncated[:10])}"
            + (f" and {len(res.truncated) - 10} more" if len(res.truncated) > 10 else ""), width)
    if res.cached:
        say(f"{res.cached} of {len(res.results)} results came from the cache", width)
    for x in written:
        print(f"  wrote {x}")
    notes_and_baseline(args, cmp, notes, width)
    if new and not args.out:
        say(f"traces: add --out DIR; a configuration as TOML: failclosed scope "
            f"{res.scope.name} --show NAME", width)
    print(summary)
    return rc


LARGEST = 5  # members printed with their figures after the verdicts (every one in --json)


def member_line(r: Any) -> str:
    """``NAME under POLICY: 1,234 states, 5.6 s, peak RSS 78 MiB[, seen set ...]``."""
    rss = f"peak RSS {r.peak_rss_mib:,.0f} MiB" if r.peak_rss_mib else "peak RSS not recorded"
    extra = "".join(f", {x}" for x in (r.seen, "truncated" * r.truncated, "cached" * r.cached)
                    if x)
    return f"{r.member} under {r.policy}: {r.states:,} states, {r.seconds:.1f} s, {rss}{extra}"


def _print_largest(res: Any, width: int) -> None:
    """The largest searches, each with its peak resident memory (the member's own search)."""
    big = res.largest(LARGEST)
    if not big:
        return
    say(f"largest searches ({len(big)} of {len(res.results)}; every one in --json):", width)
    for r in big:
        print(f"  {member_line(r)}")


def _list_or_show(args: argparse.Namespace) -> int:
    """``scope --list``: the configurations after reduction; ``scope --show NAME``: one as
    TOML (for ``failclosed check --config FILE``)."""
    scope = load_scope(args.scope)
    if args.show:
        print(dump_scenario(member(scope, args.show).data, []), end="")
        return 0
    for m in scope.members:
        print(f"{m.name}\t{m.origin}")
    print(_scope_header(scope, None), file=sys.stderr)
    return 0


def _shortest(res: Any, pol: str, n: str) -> Any:
    """The winning configuration of (policy, property) checked again, for this property
    only: its PropertyResult, with the shortest trace."""
    m = member(res.scope, res.verdicts[pol][n].member)
    one = check(pol, ConfigPart(m.name, "", m.data), [n], witnesses=False, coverage=False)
    return one.properties[n]


def scope_junit(res: Any, args: argparse.Namespace, cmp: Comparison, suite: str) -> None:
    """--junit of scope and matrix --scope: a case per (policy, property) over the scope; a
    new violation carries the shortest trace (of the configuration that produced it)."""
    if not getattr(args, "junit", None):
        return

    cells = [(p, n, not v.holds) for p in res.policies for n, v in res.verdicts[p].items()]
    write_junit(args, suite, cell_cases(
        f"failclosed.scope.{res.scope.name}", cells, set(cmp.new), cmp.matched,
        lambda p, n: trace_text(_shortest(res, p, n)),
        what=" over the scope", incomplete=scope_incomplete(res)))


def _print_verdicts(res: Any, policies: list[str], cmp: Comparison, judged: bool,
                    width: int) -> None:
    """One table per policy: each property's verdict over the scope."""
    known = cmp.matched
    for pol in policies:
        say(f"{pol} over {res.reach(pol)}:", width, "")
        rows = []
        for n in res.properties:
            v = res.verdicts[pol][n]
            if v.holds:
                word = "holds" if not res.truncated else "holds up to the bound"
            else:
                word = (f"VIOLATED: {v.length} steps in {v.member} ({v.violating} of "
                        f"{len(res.scope.members)} configurations)")
                if (pol, n) in known:
                    word += f", known: {known[pol, n].finding or 'in the baseline'}"
                elif judged:
                    word += ", NEW"
            rows.append([n, word])
        for line in text_table(["property", "verdict"], rows, width=width, align="ll"):
            print(line)
        print()
