"""``failclosed check``, ``failclosed matrix`` and ``failclosed mutants`` (``failclosed scope``
is cli/scope.py). The exit-code rule and the shared helpers are cli/checking.py's.

``check --jobs N`` checks the parts of a configuration (independent searches) on N spawned
processes (spec.checker.check ``jobs``): the verdicts and the output are those of ``--jobs 1``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import textwrap
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from failclosed.cli.checking import (
    add_common,
    add_memory_budget,
    add_reductions,
    check_outputs,
    column_chunks,
    config_help,
    emit_json,
    load_baseline_arg,
    load_config_arg,
    notes_and_baseline,
    plural,
    positive_int,
    progress,
    say,
    table_width,
    text_table,
    truncated_by,
    validate_policy,
    verdict,
    write_counterexamples,
)
from failclosed.cli.exits import EXIT_TRUNCATED, exit_codes_text, with_truncation
from failclosed.cli.junit import add_junit, cell_cases, check_junit, write_junit
from failclosed.cli.scope import (
    add_scope_run,
    register_scope,
    run_scope_cli,
    scope_junit,
    scope_preflight,
    scope_verdict,
)
from failclosed.model.config import UsageError
from failclosed.model.policy import PRESET_ORDER
from failclosed.spec.baseline import Baseline, Comparison, Known, write_baseline
from failclosed.spec.checker import check, resolve_properties, trace_compact, trace_text
from failclosed.spec.mutants import check_variant, mutant_config, mutants
from failclosed.spec.scope import run_local

__all__ = ["matrix_word", "register", "run_matrix"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "check", help="exhaustively check the properties on a bounded configuration",
        description="Explore every reachable world of a configuration under a policy and "
                    "check the named properties.\n"
                    "Exit 0: every property holds (or its violation is in --baseline); "
                    "1: a new violation (its counterexample is printed) or a required witness "
                    f"unreached; 2: bad input; {EXIT_TRUNCATED}: nothing new violated, but "
                    "--max-states cut the search short.",
        epilog=exit_codes_text(),
    )
    p.add_argument("--policy", required=True, help="the policy (see policies below)")
    p.add_argument("--property", action="append", dest="properties", metavar="NAME",
                   help="check only this property (repeatable; default: every property)")
    p.add_argument("--out", metavar="DIR", help="write each new counterexample (every one without "
                   "--baseline) as a trace table, a scenario file and a pytest regression test")
    p.add_argument("--max-states", type=positive_int, default=None, metavar="N",
                   help="stop each part's search after N states (the result then says "
                        "'holds up to N states (truncated)'; default: no bound)")
    p.add_argument("--jobs", type=positive_int, default=os.cpu_count() or 1, metavar="N",
                   help="check the configuration's parts on N local processes (default: every "
                        "core)")
    add_memory_budget(p, "with --jobs N each process gets MIB/N")
    p.add_argument("--wide", action="store_true", help="print each counterexample as the wide "
                   "table (one changed field per line) instead of one line per step")
    add_reductions(p)
    add_common(p)
    add_junit(p)
    p.set_defaults(func=_cmd_check)

    m = subparsers.add_parser(
        "matrix", help="policies x properties: ok, or the length of the shortest trace",
        description="Check every property under every preset (historical presets in order, "
                    "then proposed), or the --policy ones.\n"
                    "Exit 0: every violation is in --baseline (or none); 1: a new violation; "
                    f"2: bad input; {EXIT_TRUNCATED}: nothing new violated, but --max-states cut "
                    "a search short.",
        epilog=exit_codes_text(),
    )
    m.add_argument("--policy", action="append", dest="policies", metavar="P",
                   help="restrict to these policies (repeatable; default: "
                        f"{', '.join([*PRESET_ORDER, 'proposed'])})")
    m.add_argument("--scope", metavar="SCOPE", help="check every configuration of this scope "
                   "(standard | quick | full | a FILE) instead of --config: a cell holds only if "
                   "it holds in all of them, and a failing cell names its configuration")
    add_common(m)
    add_junit(m)
    add_scope_run(m)
    for a in m._actions:  # --config and --scope exclude each other: no default to hide that
        if a.dest == "config":
            a.default = None
            a.help = config_help("small, unless --scope")
    m.set_defaults(func=_cmd_matrix)

    k = subparsers.add_parser(
        "mutants", help="kill table: for every property, the policy variants that violate it",
        description="Check every property under switch-off and counterfactual variants of "
                    "current, the earlier presets and the deliberately broken mutant_ "
                    "switches.\n"
                    "Exit 1 if some property is violated by no variant, or (with --baseline) "
                    "if current has a violation the baseline does not list; 0 otherwise; "
                    "2: bad input.",
    )
    k.add_argument("--jobs", type=positive_int, default=os.cpu_count() or 1, metavar="N",
                   help="check the variants on N local processes (default: every core)")
    add_common(k)
    k.set_defaults(func=_cmd_mutants)

    register_scope(subparsers)


# -- check --------------------------------------------------------------------------------
def _check_summary(res: Any, cmp: Comparison, baseline_given: bool, max_states: int | None,
                   unreached: int) -> str:
    n = len(res.properties)
    bad = sum(not r.holds for r in res.properties.values())
    held = n - bad
    viol = f"{bad} violated"
    if baseline_given:
        viol += f" ({len(cmp.known)} known, {len(cmp.new)} new)"
    hold = f"{held} hold"
    if not res.complete:
        hold += f" up to {max_states:,} states per part (truncated)"
    fixed = f", {len(cmp.fixed)} fixed" if cmp.fixed else ""
    if cmp.not_reached:
        fixed += f", {len(cmp.not_reached)} not reached"
    if unreached:
        fixed += f", {plural(unreached, 'witness', 'witnesses')} unreached"
    where = f"{res.config}: {plural(len(res.parts), 'part')}, {plural(res.states, 'state')}"
    return f"{plural(n, 'property', 'properties')}: {viol}, {hold}{fixed} ({where})"


def _recorded_reason(command: str, config: str, r: Any) -> str:
    return (f"recorded by `failclosed {command} --config {config}`: shortest counterexample "
            f"{r.trace_length} steps (part {r.part}); replace this with why it is accepted")


def _baseline_entries(found: list[tuple[str, Any]], baseline: Baseline, command: str,
                      config_arg: str, config: str) -> list[Known]:
    """A Known per violated (policy, PropertyResult) observed on ``config`` (its name; the
    command ran with ``--config config_arg``), keeping the reasons ``baseline`` gives."""
    out = []
    for pol, r in found:
        k = baseline.find(pol, r.name, config)
        if k is not None and k.policy != pol:  # a variant's: recorded under the policy checked
            k = replace(k, policy=pol, variants=False)
        out.append(k if k is not None else
                   Known(pol, r.name, _recorded_reason(command, config_arg, r), config=config))
    return out


def _rerun(args: argparse.Namespace, command: str) -> str:
    """The command line that checks what this run checked (its policies and configuration),
    for the comment of a written baseline: it must run as written."""
    pols = [args.policy] if getattr(args, "policy", None) else (getattr(args, "policies", None) or [])
    words = [command, *(w for p in pols for w in ("--policy", p)), "--config", args.config]
    return "failclosed " + " ".join(shlex.quote(w) for w in words)


def _write_baseline(args: argparse.Namespace, entries: list[Known], command: str) -> str:
    run = _rerun(args, command)
    header = (f"Known violations, written by `{run} --write-baseline {args.write_baseline}`.\n"
              f"Check against it: `{run} --baseline {args.write_baseline}` (exit 1 only on a "
              "violation not listed here).")
    write_baseline(args.write_baseline, entries, header)
    return f"wrote a baseline of {plural(len(entries), 'known violation')}: {args.write_baseline}"


def _cmd_check(args: argparse.Namespace) -> int:
    validate_policy(args.policy)
    resolve_properties(args.properties)  # an unknown name: one line, before any work
    loaded = load_config_arg(args.config)  # read and parsed once, here at the edge
    baseline = load_baseline_arg(args.baseline)
    check_outputs(args)
    check_junit(args)

    with progress(args, "check", len(loaded.parts), "parts") as pg:
        res = check(args.policy, loaded, args.properties, max_states=args.max_states,
                    witnesses=not args.properties, coverage=not args.properties,
                    on_part=lambda name, states: pg.advance(states=states), jobs=args.jobs,
                    on_note=pg.note, logs=args.log_order,
                    memory_budget_mib=args.memory_budget)
    cells = {(args.policy, n): not r.holds for n, r in res.properties.items()}
    failed = [r for r in res.properties.values() if not r.holds]
    notes: list[str] = []
    if args.write_baseline:
        entries = _baseline_entries([(args.policy, r) for r in failed], baseline, "check",
                                    args.config, res.config)
        notes.append(_write_baseline(args, entries, "check"))
        baseline = Baseline(tuple(entries), args.write_baseline)
    cmp = baseline.compare(cells, res.config, truncated_by(args.max_states, not res.complete))
    # a witness is a proof of non-vacuity only on a complete search
    unreached = res.unreached_witnesses if res.complete else []
    summary = _check_summary(res, cmp, bool(args.baseline or args.write_baseline), args.max_states,
                             len(unreached))
    rc = with_truncation(max(verdict(cmp), 1 if unreached else 0), not res.complete)

    # counterexamples are written for the violations a reader must look at: the new ones
    new = [r for r in failed if r.name in {prop for _, prop in cmp.new}]
    written = write_counterexamples([(r, args.policy) for r in new], args.out) if args.out else []
    _junit_results(args, f"check --config {args.config}", res.config, [(args.policy, res)], cmp)

    if args.json:
        d = res.to_json()
        if not res.complete:  # each holding property: not reached past the bound
            for n, r in res.properties.items():
                d["properties"][n]["truncated"] = r.holds
        if written:
            d["written"] = written
        d["baseline"] = cmp.to_json()
        d["summary"] = summary
        d["exit_code"] = rc
        emit_json(args, d)
        if args.json == "-":
            return rc
    _print_check(args, res, new, cmp, notes, written)
    say(summary, table_width(), "")  # the closing line, wrapped to fit like the rest
    return rc


def _print_check(args: argparse.Namespace, res: Any, new: list[Any], cmp: Comparison,
                 notes: list[str], written: list[str]) -> None:
    """The new violations' traces, one verdict line per property, the witnesses and
    transitions never seen, the files written, the notes and the statistics."""
    width = table_width()
    for r in new:
        print(trace_text(r) if args.wide else trace_compact(r, width))
        print()
    known = {k.property: k for k in cmp.known}
    nw = max(len(n) for n in res.properties)
    # the fairness of the liveness verdicts: said once each, as a legend, not on every line
    fairness = {u: chr(ord("A") + i) for i, u in
                enumerate(dict.fromkeys(r.under for r in res.properties.values() if r.under))}
    names = {n: f"{n} [{fairness[r.under]}]" if r.under else n for n, r in res.properties.items()}
    nw = max(len(x) for x in names.values())
    for n, r in res.properties.items():
        if r.holds:
            mark = "holds" if res.complete else f"holds up to {args.max_states:,} states per part (truncated)"
        else:
            mark = f"VIOLATED ({r.trace_length} steps, {r.part})"
            if n in known:
                mark += f", known: {known[n].finding or 'in the baseline'}"
        # a liveness property: [A], the fairness it was checked under (the legend below)
        print(textwrap.fill(f"  {names[n]:{nw}s}  {mark}".rstrip(), max(width, nw + 24),
                            subsequent_indent=" " * (nw + 6), break_on_hyphens=False,
                            break_long_words=False))
    for u, letter in fairness.items():
        say(f"[{letter}] liveness checked under {u}", width)
    for line in res.growth:  # said as it was measured too, on stderr
        say(line, width)
    for w in res.unreached_witnesses:
        tail = "" if res.complete else " (the search was truncated: not judged)"
        say(f"witness unreached: {w}{tail}", width)
    if res.coverage is not None and res.coverage.never_enabled and res.complete:
        say(f"never enabled: {', '.join(res.coverage.never_enabled)}", width)
    for x in written:
        print(f"  wrote {x}")
    notes_and_baseline(args, cmp, notes, width)
    say(f"{res.policy} on {res.config}: {res.stats_line()}", width, "")  # logs grep its start


def _junit_results(args: argparse.Namespace, suite: str, config: str,
                   results: list[tuple[str, Any]], cmp: Comparison) -> None:
    """--junit of check and matrix --config: a case per (policy, property) of each
    CheckResult, a new violation carrying its shortest trace."""
    if not getattr(args, "junit", None):
        return

    by = {pol: res for pol, res in results}
    cells = [(pol, n, not r.holds) for pol, res in results for n, r in res.properties.items()]
    incomplete = truncated_by(getattr(args, "max_states", None),
                              any(not res.complete for _, res in results))
    write_junit(args, suite, cell_cases(f"failclosed.{config}", cells, set(cmp.new), cmp.matched,
                                        lambda pol, n: trace_text(by[pol].properties[n]),
                                        incomplete=incomplete))


# -- matrix -------------------------------------------------------------------------------
def _cell(r: Any) -> dict[str, Any]:
    return {"holds": r.holds, "trace_length": r.trace_length}


def run_matrix(config: Any, policies: list[str],
               on_policy: Callable[[str, Any], None] | None = None,
               max_states: int | None = None,
               memory_budget_mib: float | None = None, logs: bool = True,
               ) -> tuple[list[str], dict[str, dict[str, Any]], list[Any]]:
    """Check every property under each policy: (properties, {policy: {property: cell}},
    the CheckResults); ``config``: a name, a path or a configuration already loaded
    (spec.checker.load_config). ``on_policy(policy, result)`` is called as each is done;
    ``max_states`` bounds each part's search (``--max-states``); ``logs``: under the log order
    (``--no-log-reduction``: without); ``memory_budget_mib``: what it may keep in memory
    (``--memory-budget``)."""
    table: dict[str, dict[str, Any]] = {}
    results = []
    props: list[str] = []
    for pol in policies:
        res = check(pol, config, None, witnesses=False, coverage=False, max_states=max_states,
                    logs=logs, memory_budget_mib=memory_budget_mib)
        results.append(res)
        props = list(res.properties)
        table[pol] = {n: _cell(r) for n, r in res.properties.items()}
        if on_policy is not None:
            on_policy(pol, res)
    return props, table, results


def matrix_word(cell: dict[str, Any]) -> str:
    """A matrix cell as the README's matrix spells it: ``ok`` or the trace length."""
    return "ok" if cell["holds"] else str(cell["trace_length"])


def _cmd_matrix(args: argparse.Namespace) -> int:
    pols = args.policies or [*PRESET_ORDER, "proposed"]  # history, then the proposal
    for p in pols:
        validate_policy(p)
    if args.scope and args.config:
        raise UsageError(f"--config {args.config} and --scope {args.scope} contradict each other: "
                         "a matrix is over one configuration or over a scope; give one of them")
    if args.scope:
        return _cmd_matrix_scope(args, pols)
    args.config = args.config or "small"
    loaded = load_config_arg(args.config)  # read and parsed once, for every policy
    cname = loaded.name
    baseline = load_baseline_arg(args.baseline)
    check_outputs(args)
    check_junit(args)

    with progress(args, "matrix", len(pols), "policies") as pg:
        props, table, results = run_matrix(
            loaded, pols, lambda pol, res: pg.advance(states=res.states), args.max_states,
            args.memory_budget, args.log_order)
    cells = {(pol, n): not table[pol][n]["holds"] for pol in pols for n in props}
    notes: list[str] = []
    if args.write_baseline:
        found = [(pol, res.properties[n]) for pol, res in zip(pols, results, strict=True)
                 for n in props if not res.properties[n].holds]
        entries = _baseline_entries(found, baseline, "matrix", args.config, cname)
        notes.append(_write_baseline(args, entries, "matrix"))
        baseline = Baseline(tuple(entries), args.write_baseline)
    truncated = [pol for pol, res in zip(pols, results, strict=True) if not res.complete]
    cmp = baseline.compare(cells, cname, truncated_by(args.max_states, bool(truncated)))
    _junit_results(args, f"matrix --config {args.config}", cname,
                   list(zip(pols, results, strict=True)), cmp)
    judged = bool(args.baseline or args.write_baseline)
    stats = [f"{pol}: {res.stats_line()}" for pol, res in zip(pols, results, strict=True)]
    if truncated:
        notes.append(f"truncated by --max-states {args.max_states:,}: {', '.join(truncated)}")
    return _print_matrix(args, pols, props, table, cmp, judged, cname,
                         sum(r.states for r in results), stats, notes, truncated=bool(truncated))


def _cmd_matrix_scope(args: argparse.Namespace, pols: list[str]) -> int:
    """``matrix --scope``: the scope's merged verdicts, one column per policy."""
    scope_preflight(args)
    check_junit(args)
    res = run_scope_cli(args.scope, pols, None, args)
    _, cmp, notes = scope_verdict(res, args, f"matrix --scope {args.scope}")
    scope_junit(res, args, cmp, f"matrix --scope {args.scope}")
    table = {p: {n: res.cell(p, n) for n in res.properties} for p in pols}
    stats = [f"{p}: {plural(sum(r.states for r in res.results if r.policy == p), 'state')}"
             for p in pols]
    if res.truncated:
        notes.append(f"truncated by --max-states: {', '.join(res.truncated[:10])}")
    return _print_matrix(args, pols, res.properties, table, cmp,
                         bool(args.baseline or args.write_baseline), f"scope {res.scope.name}",
                         res.states, stats, notes, reach=res, truncated=bool(res.truncated))


def _matrix_json(props: list[str], pols: list[str], table: dict[str, dict[str, Any]],
                 cmp: Comparison, summary: str, rc: int, reach: Any, truncated: bool,
                 ) -> dict[str, Any]:
    """The matrix as JSON; a truncated search marks each holding cell ``truncated``."""
    d = {"properties": props, "policies": table, "baseline": cmp.to_json(),
         "summary": summary, "exit_code": rc, "truncated": truncated}
    if truncated:  # each holding cell: not reached past the bound
        for pol in pols:
            for n in props:
                table[pol][n]["truncated"] = table[pol][n]["holds"]
    if reach is not None:
        d["scope"] = {k: v for k, v in reach.to_json().items() if k not in ("properties", "policies")}
    return d


def _print_matrix(args: argparse.Namespace, pols: list[str], props: list[str],
                  table: dict[str, dict[str, Any]], cmp: Comparison, judged: bool, cname: str,
                  states: int, stats: list[str], notes: list[str], reach: Any = None,
                  truncated: bool = False) -> int:
    """The matrix's tables, notes and closing line (``reach``: a ScopeResult; ``truncated``:
    a search was cut short by --max-states, exit 3 unless something new is violated)."""
    cells = {(pol, n): not table[pol][n]["holds"] for pol in pols for n in props}
    bad = sum(cells.values())
    viol = plural(bad, "cell") + " violated"
    if judged:
        viol += f" ({len(cmp.known)} known, {len(cmp.new)} new)"
    fixed = f", {len(cmp.fixed)} fixed" if cmp.fixed else ""
    if cmp.not_reached:
        fixed += f", {len(cmp.not_reached)} not reached"
    where = reach.reach() if reach is not None else f"{cname}, {plural(states, 'state')}"
    hold = " hold up to the bound (truncated)" if truncated else " hold"
    summary = (f"{plural(len(pols), 'policy', 'policies')} x "
               f"{plural(len(props), 'property', 'properties')}: {viol}, "
               f"{len(cells) - bad}{hold}{fixed} ({where})")
    rc = with_truncation(verdict(cmp), truncated)

    if args.json:
        emit_json(args, _matrix_json(props, pols, table, cmp, summary, rc, reach, truncated))
        if args.json == "-":
            return rc

    new = set(cmp.new)

    def word(pol: str, n: str) -> str:
        w = matrix_word(table[pol][n])
        return f"!{w}" if judged and (pol, n) in new else w

    width = table_width()
    first = max(len("property"), *(len(n) for n in props))
    colw = [max(len(pol), *(len(word(pol, n)) for n in props)) for pol in pols]
    chunks = column_chunks(first, colw, width)
    legend = "cell: ok, or the length of the shortest counterexample"
    if judged:
        legend += "; !: not in the baseline"
    for i, chunk in enumerate(chunks):
        cols = [pols[j] for j in chunk]
        part = f" [{i + 1}/{len(chunks)}]" if len(chunks) > 1 else ""
        say(f"properties x policies on {cname}{part} ({legend})", width, "")
        for line in text_table(["property", *cols], [[n, *(word(c, n) for c in cols)]
                                                     for n in props], width=width):
            print(line)
        print()
    for line in stats:
        say(line, width)
    if reach is not None:
        for pol in pols:
            for n in props:
                c = table[pol][n]
                if not c["holds"]:
                    say(f"{pol} / {n}: {c['trace_length']} steps in {c['config']}", width)
    notes_and_baseline(args, cmp, notes, width)
    print(summary)
    return rc


# -- mutants ------------------------------------------------------------------------------
def _check_variants(args: argparse.Namespace, jobs: list[tuple[str, str]]) -> list[Any]:
    """Each (policy, config) checked, in order: on ``--jobs`` spawned processes (the scope
    pool), each variant an independent search."""
    out: list[Any] = [None] * len(jobs)
    # the variants and current: the unit says so (the summary counts the variants alone)
    with progress(args, "mutants", len(jobs), "checks (variants and current)") as pg:
        def done(i: int, res: Any) -> None:
            out[i] = res
            pg.advance(states=res.states)

        if args.jobs > 1:
            run_local(min(args.jobs, len(jobs)), dict(enumerate(jobs)), done, check_variant)
        else:
            for i, job in enumerate(jobs):
                done(i, check_variant(job))
    return out


def _cmd_mutants(args: argparse.Namespace) -> int:
    cname, _ = load_config_arg(args.config)
    baseline = load_baseline_arg(args.baseline)
    check_outputs(args)
    muts = mutants()
    configs = {name: mutant_config(name, args.config) for name in muts}
    results = _check_variants(args, [(pol, configs[name]) for name, pol in muts.items()]
                              + [("current", args.config)])
    base = results[-1]
    kills = {name: {n: r.trace_length for n, r in res.properties.items()}
             for name, res in zip(muts, results[:-1], strict=True)}
    props = list(base.properties)
    states = sum(r.states for r in results)
    survivors = []
    table: dict[str, dict[str, Any]] = {}
    for n in props:
        killed_by = {m: k[n] for m, k in kills.items() if k[n] is not None}
        table[n] = {"current": base.properties[n].trace_length, "killed_by": killed_by}
        if not killed_by:
            survivors.append(n)
    cells = {("current", n): not r.holds for n, r in base.properties.items()}
    notes: list[str] = []
    if args.write_baseline:
        found = [("current", r) for r in base.properties.values() if not r.holds]
        entries = _baseline_entries(found, baseline, "mutants", args.config, cname)
        notes.append(_write_baseline(args, entries, "mutants"))
        baseline = Baseline(tuple(entries), args.write_baseline)
    judged = bool(args.baseline or args.write_baseline)
    cmp = baseline.compare(cells, cname)
    cur_bad = sum(cells.values())
    cur = f"current: {cur_bad} violated"
    if judged:
        cur += f" ({len(cmp.known)} known, {len(cmp.new)} new)"
    summary = (f"{plural(len(muts), 'variant')} x {plural(len(props), 'property', 'properties')}: "
               f"{len(props) - len(survivors)} killed, {len(survivors)} survive; {cur} "
               f"({cname}, {plural(states, 'state')})")
    rc = 1 if survivors or (judged and not cmp.ok) else 0

    if args.json:
        own = {m: Path(c).stem for m, c in configs.items() if c != args.config}
        emit_json(args, {"mutants": muts, "configs": own, "properties": table,
                          "survivors": survivors, "baseline": cmp.to_json() if judged else None,
                          "summary": summary, "exit_code": rc})
        if args.json == "-":
            return rc
    width = table_width()
    rows = []
    for n in props:
        c = base.properties[n].trace_length
        killed = ", ".join(f"{m}:{v}" for m, v in table[n]["killed_by"].items())
        rows.append([n, "ok" if c is None else str(c), killed or "NOBODY"])
    say(f"kill table on {cname}: the variants under which each property is violated "
        "(shortest trace length)", width, "")
    for line in text_table(["property", "current", "killed by (mutant:length)"], rows,
                           width=width, align="lrl"):
        print(line)
    print()
    for m, c in configs.items():
        if c != args.config:
            say(f"{m} runs on its own bound {Path(c).stem} (spec/mutant_configs)", width)
    known = {k.property for k in cmp.known}
    for n in props:
        length = base.properties[n].trace_length
        if length is not None:
            tag = " (in the baseline)" if n in known else ""
            say(f"note: {n} is violated under current too ({length} steps){tag}: "
                "see FINDINGS.md", width)
    for n in survivors:
        print(f"  SURVIVES every mutant: {n}")
    notes_and_baseline(args, cmp, notes, width)
    print(summary)
    return rc
