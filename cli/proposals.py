"""``failclosed proposals``: is every proposal of ``proposed`` necessary? (``--cost``: what each
costs in the simulator, cli/proposals_cost.py)

For each switch ``proposed`` turns on over ``current`` (``model.policy.proposal_switches``),
check ``proposed`` without it, over a configuration or a scope, and print the properties
that then fail with their shortest counterexample, as a markdown table (the one
docs/PROPOSALS.md shows). A switch whose removal breaks nothing on the bound checked is
named as not shown necessary there.

Exit 0: ``proposed`` holds every property and every switch is necessary on the bound; 1:
``proposed`` violates a property or some switch is not shown necessary; 2: bad input.
"""

from __future__ import annotations

import argparse
from typing import Any

from failclosed.cli.checking import (
    check_outputs,
    emit_json,
    load_config_arg,
    plural,
    progress,
)
from failclosed.cli.proposals_cost import add_cost_arguments, run_cost
from failclosed.cli.scope import add_scope_run, run_scope_cli, scope_preflight
from failclosed.model.config import UsageError
from failclosed.model.policy import proposal_switches
from failclosed.spec.mutants import check_variant
from failclosed.spec.scope import run_local

__all__ = ["register", "necessity_table"]

BASE = "proposed"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "proposals", help="is each proposal necessary: proposed without one switch at a time, "
                          "the properties that then fail",
        description="Check proposed, then proposed without each of its proposals' switches "
                    "(one at a time), over a configuration or a scope, and print a markdown "
                    "table: each switch, the properties that fail without it and the length "
                    "of their shortest counterexample.\n"
                    "With --cost: simulate current, proposed and proposed without each switch "
                    "over --seeds seeds of a simulator workload and print what each costs "
                    "(statements per run, dead-letters, throughput, latency, wasted work, the "
                    "overdue sweep's re-dispatches and orphan waits), 95%% intervals over seeds.\n"
                    "Exit 0: proposed holds every property and every switch is necessary on "
                    "this bound (--cost: the table was made); 1: proposed violates something, "
                    "or some switch is not shown necessary; 2: bad input.",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--config", help="tiny | small | medium | a TOML FILE (spec/configs)")
    where.add_argument("--scope", help="standard | quick | full | a scope TOML FILE "
                                       "(default: quick)")
    add_scope_run(p)  # its --jobs also runs a --config's policies on that many processes
    p.add_argument("--json", nargs="?", const="-", metavar="FILE",
                   help="machine-readable result: on stdout (instead of the table), or into "
                        "FILE (beside it)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_cost_arguments(p)
    # what the shared scope runner reads and this command does not take
    p.set_defaults(func=_cmd_proposals, baseline=None, write_baseline=None, out=None)


def _policies() -> list[tuple[str, str]]:
    """(switch or '', policy): proposed itself, then proposed without each switch."""
    return [("", BASE)] + [(s, f"{BASE}-{s}") for s in proposal_switches()]


def _over_config(args: argparse.Namespace, pols: list[str]) -> tuple[str, dict[str, dict]]:
    for flag, given in (("--dask", args.dask), ("--max-states", args.max_states)):
        if given:
            raise UsageError(f"{flag} applies to a scope: give --scope instead of --config "
                             f"{args.config}, or leave {flag} out")
    cname, _ = load_config_arg(args.config)
    out: dict[str, dict] = {}
    with progress(args, "proposals", len(pols), "policies") as pg:
        def done(i: int, res: Any) -> None:
            out[pols[i]] = {n: {"holds": r.holds, "trace_length": r.trace_length}
                            for n, r in res.properties.items()}
            pg.advance(states=res.states)

        jobs = {i: (pol, args.config) for i, pol in enumerate(pols)}
        if args.jobs > 1:
            run_local(min(args.jobs, len(pols)), jobs, done, check_variant)
        else:
            for i, job in jobs.items():
                done(i, check_variant(job))
    return f"configuration {cname}", out


def _over_scope(args: argparse.Namespace, pols: list[str]) -> tuple[str, dict[str, dict]]:
    scope_preflight(args)
    res = run_scope_cli(args.scope, pols, None, args)
    return (f"scope {res.scope.name}",
            {p: {n: res.cell(p, n) for n in res.properties} for p in pols})


def necessity_table(cells: dict[str, dict[str, dict]], where: str) -> list[str]:
    """The markdown table: one row per switch (the properties failing without it, shortest
    first), after a row for ``proposed`` itself."""
    def failing(pol: str) -> str:
        bad = sorted((c["trace_length"], n) for n, c in cells[pol].items() if not c["holds"])
        return ", ".join(f"`{n}` {k}" for k, n in bad) or "none"

    lines = [f"| `{BASE}` without | properties violated over {where} (shortest counterexample, "
             "steps) |", "|---|---|", f"| (nothing: `{BASE}` itself) | {failing(BASE)} |"]
    lines += [f"| `{s}` | {failing(pol)} |" for s, pol in _policies()[1:]]
    return lines


def _cmd_proposals(args: argparse.Namespace) -> int:
    if args.cost:
        return run_cost(args)
    if args.config is None and args.scope is None:
        args.scope = "quick"
    if args.json and args.json != "-":
        check_outputs(args)
    pairs = _policies()
    if len(pairs) == 1:
        raise UsageError("proposed turns no switch on over current: there is nothing to check")
    pols = [p for _, p in pairs]
    where, cells = _over_config(args, pols) if args.config else _over_scope(args, pols)
    unneeded = [s for s, p in pairs[1:] if all(c["holds"] for c in cells[p].values())]
    broken = [n for n, c in cells[BASE].items() if not c["holds"]]
    rc = 1 if unneeded or broken else 0
    summary = (f"{plural(len(pairs) - 1, 'switch', 'switches')} of {BASE} over {where}: "
               f"{len(pairs) - 1 - len(unneeded)} necessary, {len(unneeded)} not shown necessary; "
               f"{BASE} violates {plural(len(broken), 'property', 'properties')}")
    if args.json:
        emit_json(args, {"where": where, "switches": [s for s, _ in pairs[1:]],
                         "policies": cells, "not_shown_necessary": unneeded,
                         "proposed_violates": broken, "summary": summary, "exit_code": rc})
        if args.json == "-":
            return rc
    for line in necessity_table(cells, where):
        print(line)
    print()
    for s in unneeded:
        print(f"not shown necessary over {where}: {s} (nothing fails without it)")
    print(summary)
    return rc
