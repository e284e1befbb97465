"""``failclosed hunt``: a shrinking search over configurations (spec/hunt.py).

Hypothesis draws configurations from the dimension table (spec/dimensions.py), small first;
each is checked under the ``--policy`` policies and ``--property`` properties with
``--max-states`` per search; a violation is shrunk to a minimal configuration and its shortest
counterexample written under ``--out`` as ``check --out`` writes it. ``--jobs N`` runs N
independent streams of draws (seeds derived from ``--seed``), on local processes or on a Dask
cluster (``--dask``); the search ends after ``--examples`` configurations or ``--minutes``.
Exit codes, ``--baseline`` and ``--junit`` are those of every checking command (cli/app.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from failclosed.cli.checking import (
    add_common,
    check_outputs,
    emit_json,
    load_baseline_arg,
    notes_and_baseline,
    plural,
    positive_int,
    positive_number,
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
from failclosed.spec.baseline import Baseline, Known, write_baseline
from failclosed.spec.checker import ConfigPart, check, resolve_properties, trace_compact, trace_text
from failclosed.spec.scope import (
    Cache,
    dask_client,
    load_scope,
    model_version,
    resolve_scope_path,
    run_local,
)

__all__ = ["register"]

DEFAULT_EXAMPLES = 2_000  # configurations drawn at most, over all streams
DEFAULT_MINUTES = 10.0
DEFAULT_MAX_STATES = 10_000
PROGRESS_SECONDS = 10.0  # between two progress lines of a stream, at most
NO_SCOPE = "none"




def _seed(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed >= 0, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {v}")
    return v


def register(subparsers: Any) -> None:
    h = subparsers.add_parser(
        "hunt", help="draw configurations from the dimension table, check each, shrink a "
                     "violating one to a minimal configuration",
        description="Draw configurations from the dimension table (spec/dimensions.py) with "
                    "Hypothesis, small first, check each under the policies, and shrink a "
                    "violation of each (policy, property) to a minimal configuration (fewer "
                    "runs, calls, decisions and faults, a smaller budget and horizon). "
                    "Configurations inside --outside (default: the scope standard) are not "
                    "checked: the hunt looks for what that scope does not list. Its verdict "
                    "reads 'no violation in N drawn configurations', never 'holds'.\n"
                    "Exit 0: no new violation; 1: a new violation (its minimal configuration "
                    f"and shortest counterexample printed); 2: bad input; {EXIT_TRUNCATED}: "
                    "nothing new violated, but --max-states cut some configuration's search "
                    "short.",
        epilog=exit_codes_text(),
    )
    h.add_argument("--policy", action="append", dest="policies", metavar="P",
                   help="policy to check each configuration under (repeatable; default: "
                        "current)")
    h.add_argument("--property", action="append", dest="properties", metavar="NAME",
                   help="look for violations of this property (repeatable; default: every "
                        "property)")
    h.add_argument("--seed", type=_seed, default=0, metavar="S",
                   help="the draws' seed: the same seed, examples and jobs draw the same "
                        "configurations")
    h.add_argument("--examples", type=positive_int, default=DEFAULT_EXAMPLES, metavar="N",
                   help="configurations drawn at most, over all streams")
    h.add_argument("--minutes", type=positive_number("minutes"), default=DEFAULT_MINUTES, metavar="M",
                   help="stop drawing (and shrinking) after M minutes of wall time")
    h.add_argument("--max-states", type=positive_int, default=DEFAULT_MAX_STATES, metavar="N",
                   help="stop each configuration's search after N states")
    h.add_argument("--outside", default="standard", metavar="SCOPE",
                   help="skip configurations that are members of this scope (or subsumed by "
                        f"one): standard | quick | full | a FILE | {NO_SCOPE}")
    h.add_argument("--jobs", type=positive_int, default=os.cpu_count() or 1, metavar="N",
                   help="independent streams of draws, each on its own process (default: "
                        "every core)")
    h.add_argument("--dask", metavar="ADDR", help="run the streams on the dask.distributed "
                   "scheduler at ADDR (host:port) instead of local processes")
    h.add_argument("--out", metavar="DIR", help="write each new violation's shortest "
                   "counterexample in its minimal configuration as a trace table, a scenario "
                   "file and a pytest regression test")
    h.add_argument("--cache-dir", metavar="DIR", help="the scope cache: a configuration "
                   "already checked is not checked again, so an interrupted hunt resumes "
                   "(default: $FAILCLOSED_CACHE or ~/.cache/failclosed)")
    h.add_argument("--no-cache", action="store_true", help="check every configuration again")
    add_common(h, config=False)
    add_junit(h)
    h.set_defaults(func=_cmd_hunt)


# =========================================================================================
# one stream (a module-level function: local processes and Dask run it)
# =========================================================================================
def _stream(job: tuple[Any, ...]) -> Any:
    """One stream of draws: ``spec.hunt.hunt`` with this stream's seed and share of the
    examples, stopping at the wall-clock ``deadline``; progress on stderr."""
    # lazy: spec.hunt imports hypothesis, start-up x1.26 CPU for every command (only hunt draws)
    from failclosed.spec.hunt import hunt

    (k, seed, policies, props, examples, max_states, deadline, outside, cache_dir,
     quiet) = job
    cache = None if cache_dir is None else Cache(Path(cache_dir), model_version())
    scope = None if outside == NO_SCOPE else load_scope(outside)
    last = [0.0]
    n = [0]

    def on_check(desc: str, results: list[Any]) -> None:
        n[0] += 1
        now = time.monotonic()
        if quiet or now - last[0] < PROGRESS_SECONDS:
            return
        last[0] = now
        bad = sorted({v for r in results for v in r.violations})
        states = sum(r.states for r in results)
        print(f"hunt[{k}]: {n[0]:,} checked; drew {desc} -> {states:,} states, "
              f"{'violates ' + ', '.join(bad) if bad else 'no violation'}",
              file=sys.stderr, flush=True)

    def on_found(f: Any) -> None:
        if not quiet:
            print(f"hunt[{k}]: FOUND {f.property} under {f.policy}, shrunk to: "
                  f"{_describe(f)}", file=sys.stderr, flush=True)

    return hunt(policies, props, seed=seed, stream=k, examples=examples, max_states=max_states,
                cache=cache, outside=scope, should_stop=lambda: time.time() > deadline,
                on_check=on_check, on_found=on_found)


def _describe(f: Any) -> str:
    # lazy: spec.hunt imports hypothesis, start-up x1.26 CPU for every command (only hunt draws)
    from failclosed.spec.hunt import describe

    return describe(f.point)


def _run_streams(args: argparse.Namespace, policies: list[str], cache_dir: str | None) -> Any:
    # lazy: spec.hunt imports hypothesis, start-up x1.26 CPU for every command (only hunt draws)
    from failclosed.spec.hunt import HuntResult

    deadline = time.time() + args.minutes * 60
    jobs = min(args.jobs, args.examples)
    share = [args.examples // jobs + (k < args.examples % jobs) for k in range(jobs)]
    work = {k: (k, args.seed, policies, args.properties, share[k], args.max_states, deadline,
                args.outside, cache_dir, args.quiet) for k in range(jobs)}
    got: dict[int, Any] = {}

    def done(k: int, r: Any) -> None:
        got[k] = r

    if args.dask:
        _on_dask(args.dask, work, done)
    elif jobs == 1:
        done(0, _stream(work[0]))
    else:
        run_local(jobs, work, done, task=_stream)
    res = HuntResult(policies, args.properties, args.seed)
    for k in sorted(got):  # stream order: the result does not depend on which ended first
        res.merge(got[k])
    return res, jobs


def _on_dask(address: str, work: dict[int, tuple], done: Any) -> None:
    # lazy: dask is optional (failclosed[dask]); dask.distributed costs start-up x1.55 CPU
    from distributed import as_completed

    client = dask_client(address)
    try:
        futs = {client.submit(_stream, a, pure=False, key=f"failclosed-hunt-{k}-{os.getpid()}"): k
                for k, a in work.items()}
        for f in as_completed(futs):
            done(futs[f], f.result())
    finally:
        client.close()


# =========================================================================================
# the command
# =========================================================================================
def _preflight(args: argparse.Namespace) -> list[str]:
    policies = args.policies or ["current"]
    for p in policies:
        validate_policy(p)
    resolve_properties(args.properties)
    if args.outside != NO_SCOPE:
        resolve_scope_path(args.outside)
    load_baseline_arg(args.baseline)
    check_outputs(args)
    check_junit(args)
    if args.dask:
        dask_client(args.dask).close()
    return policies


def _cmd_hunt(args: argparse.Namespace) -> int:
    policies = _preflight(args)
    cache_dir = None
    if not args.no_cache:
        cache_dir = str(Path(args.cache_dir) if args.cache_dir else Cache.default_root())
    t0 = time.monotonic()
    res, jobs = _run_streams(args, policies, cache_dir)
    seconds = time.monotonic() - t0
    results = {(f.policy, f.property): _trace(f, args.max_states) for f in res.found}
    baseline = load_baseline_arg(args.baseline)
    props = _cells_checked(args.properties)
    cells = {(p, n): (p, n) in results for p in policies for n in props}
    notes: list[str] = []
    if args.write_baseline:
        baseline = _write_baseline(args, res, results, baseline, notes)
    cmp = baseline.compare(cells, None)
    new = set(cmp.new)
    rc = with_truncation(verdict(cmp), res.truncated > 0)
    written = (write_counterexamples([(results[c], c[0]) for c in sorted(new)], args.out)
               if args.out and new else [])
    summary = _summary(res, args, jobs, seconds, cmp, bool(args.baseline or args.write_baseline))
    _junit(args, cells, cmp, results)
    if args.json:
        emit_json(args, _json(res, args, seconds, cmp, summary, rc, written))
        if args.json == "-":
            return rc
    _print(res, results, cmp, written, notes, args)
    print(summary)
    return rc


def _cells_checked(properties: list[str] | None) -> list[str]:
    safety, live = resolve_properties(properties)
    return [*safety, *live]


def _trace(f: Any, max_states: int) -> Any:
    """The minimal configuration checked again for its one property: the PropertyResult with
    the shortest counterexample (within the state cap)."""
    data = f.data | {"description": f"minimal configuration of failclosed hunt: {f.property} "
                                    f"under {f.policy}"}
    one = check(f.policy, ConfigPart("hunt-minimal", "", data), [f.property], witnesses=False,
                coverage=False, max_states=max_states)
    return one.properties[f.property]


def _write_baseline(args: argparse.Namespace, res: Any, results: dict, baseline: Any,
                    notes: list[str]) -> Any:
    entries = []
    for (p, n), r in results.items():
        k = baseline.find(p, n)
        entries.append(k if k is not None else Known(
            p, n, f"recorded by `failclosed hunt --seed {args.seed}`: {r.trace_length} steps in a "
                  "minimal drawn configuration; replace this with why it is accepted"))
    write_baseline(args.write_baseline, entries, "Known violations, written by `failclosed "
                   f"hunt --write-baseline {args.write_baseline}`.")
    notes.append(f"wrote a baseline of {plural(len(entries), 'known violation')}: "
                 f"{args.write_baseline}")
    return Baseline(tuple(entries), args.write_baseline)


def _reach_line(res: Any, args: argparse.Namespace, jobs: int, seconds: float) -> str:
    where = (f"outside scope {args.outside} ({res.inside:,} drawn inside it, not checked; "
             f"{res.explained:,} violations the scope shows too)"
             if args.outside != NO_SCOPE else "from the whole table")
    cut = (f", {res.truncated:,} searches truncated at {args.max_states:,} states"
           if res.truncated else "")
    why = "time (--minutes)" if res.stopped else "examples (--examples) or all cells found"
    return (f"{plural(res.checked, 'configuration')} checked {where}, "
            f"{plural(res.states, 'state')}{cut}; seed {args.seed}, "
            f"{plural(jobs, 'stream')}, {seconds / 60:.1f} min, ended by {why}")


def _summary(res: Any, args: argparse.Namespace, jobs: int, seconds: float, cmp: Any,
             judged: bool) -> str:
    reach = _reach_line(res, args, jobs, seconds)
    if not res.found:
        return f"no violation in {plural(res.drawn, 'drawn configuration')} ({reach})"
    viol = plural(len(res.found), "violated cell")
    if judged:
        viol += f" ({len(cmp.known)} known, {len(cmp.new)} new)"
    return (f"{viol}, each shrunk to a minimal configuration, in "
            f"{plural(res.drawn, 'drawn configuration')} ({reach})")


def _print(res: Any, results: dict, cmp: Any, written: list[str], notes: list[str],
           args: argparse.Namespace) -> None:
    width = table_width()
    new = set(cmp.new)
    for f in res.found:
        r = results[(f.policy, f.property)]
        tag = "NEW" if (f.policy, f.property) in new else "known"
        say(f"{f.property} under {f.policy} ({tag}): {r.trace_length} steps in the minimal "
            f"configuration {_describe(f)} (first found in: {f.first})", width, "")
        print(dump_scenario(f.data, []), end="")
        if tag == "NEW" and not args.out:
            print(trace_compact(r, width))
        print()
    rows = [[x["dimension"], f"{x['values']}/{x['of_values']}", f"{x['pairs']:,}/{x['of_pairs']:,}"]
            for x in res.reach()]
    say("reach: the values and pairs of each dimension the checked configurations held", width,
        "")
    for line in text_table(["dimension", "values", "pairs"], rows, width=width):
        print(line)
    print()
    for x in written:
        print(f"  wrote {x}")
    notes_and_baseline(args, cmp, notes, width)


def _json(res: Any, args: argparse.Namespace, seconds: float, cmp: Any, summary: str, rc: int,
          written: list[str]) -> dict[str, Any]:
    return {
        "policies": res.policies, "properties": res.properties, "seed": args.seed,
        "drawn": res.drawn, "checked": res.checked, "inside": res.inside,
        "outside": args.outside, "explained_by_scope": res.explained, "states": res.states, "truncated": res.truncated,
        "max_states": args.max_states, "cached": res.cached, "stopped_by_time": res.stopped,
        "seconds": round(seconds, 3),
        "found": [{"policy": f.policy, "property": f.property, "length": f.length,
                   "minimal": _describe(f), "first": f.first, "config": f.data}
                  for f in res.found],
        "reach": res.reach(), "baseline": cmp.to_json(), "summary": summary, "exit_code": rc,
        "written": written,
    }


def _junit(args: argparse.Namespace, cells: dict, cmp: Any, results: dict) -> None:
    if not getattr(args, "junit", None):
        return

    known = {k.cell: k for k in cmp.known}
    write_junit(args, "hunt", cell_cases(
        "failclosed.hunt", [(p, n, bad) for (p, n), bad in cells.items()], set(cmp.new), known,
        lambda p, n: trace_text(results[(p, n)]), what=" in the drawn configurations"))
