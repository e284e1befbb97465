"""``failclosed check``, ``failclosed matrix`` and ``failclosed mutants``.

Exit codes (the rule of sim/cli.py, the same for every command): 0 everything checked holds
or matches the baseline (``--baseline FILE``, spec/baseline.py; without one, every violation
is new), 1 something new is violated (``mutants``: also a property no variant violates),
2 bad input (one line). Every argument and output path is checked before the search starts.
Progress goes to stderr (``--quiet`` turns it off), results and a closing summary line to
stdout.

The helpers here (``positive_int``, ``require_writable_file``, ``require_writable_dir``,
``load_baseline_arg``, ``verdict``, ``table_width``, ``text_table``) are meant for every
checking command.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from failclosed.model.config import UsageError
from failclosed.model.policy import PRESET_ORDER, PRESETS, SWITCHES, Policy, parse_policy
from failclosed.spec.baseline import Baseline, Comparison, Known, load_baseline, write_baseline
from failclosed.spec.progress import Progress

__all__ = [
    "MUTANTS", "MUTANT_SWITCHES", "mutant_config", "mutants", "positive_int", "register",
    "require_writable_dir", "require_writable_file", "table_width", "text_table", "verdict",
]

# Counterfactual switches (RUNTIME 15: "one counterfactual switch is useful beside the
# presets"), turned OFF on top of current: each is a deliberately broken variant.
COUNTERFACTUAL_OFF = ("renew_before_persist", "terminal_guard", "audit_fail_unknown")


# Deliberately broken variants (model/policy.py, the ``mutant_`` switches), turned ON on top
# of current, for the properties that no switch-off kills: mutant switch -> (the property it
# must kill, the bound it runs on). A switch-off of current only removes a mechanism of the
# history; these remove a guard the runtime has always had (a claim's status, an owner
# guard's claimed_by, the requeue count, recovery's class check, the reaper's re-check), so
# each property is seen to be violable. Each runs on its own small bound in
# spec/mutant_configs, where its violation is reachable whatever --config says (the claim
# race needs two workers and a duplicate message, which no part of small has).
MUTANT_CONFIG_DIR = Path(__file__).resolve().parent / "mutant_configs"
MUTANT_SWITCHES: dict[str, tuple[str, str]] = {
    "mutant_claim_ignores_status": ("exclusive_claim", "claim.toml"),
    "mutant_owner_guard_ignores_claim": ("owner_only_mutation", "zombie.toml"),
    "mutant_requeue_keeps_count": ("bounded_attempts", "zombie.toml"),
    "mutant_recovery_ignores_class": ("no_retry_of_non_retryable", "zombie.toml"),
    "mutant_reaper_trusts_snapshot": ("race_safe_staleness", "zombie.toml"),
}


def mutants() -> dict[str, str]:
    """Mutant name -> policy spec (parse_policy syntax): every switch that is on in
    ``current`` switched off, the counterfactuals switched off, the earlier presets, and the
    deliberately broken ``mutant_`` switches switched on."""
    cur = PRESETS["current"]
    out: dict[str, str] = {}
    for sw in SWITCHES:
        if getattr(cur, sw):
            out[f"-{sw}"] = f"current-{sw}"
    for sw in COUNTERFACTUAL_OFF:
        out.setdefault(f"-{sw}", f"current-{sw}")
    for name in PRESET_ORDER:
        if name != "adr-141":
            out[name] = name
    for sw in MUTANT_SWITCHES:
        out[f"+{sw}"] = f"current+{sw}"
    return out


def mutant_config(name: str, default: str) -> str:
    """The bound a mutant runs on: its own (MUTANT_SWITCHES) or ``default`` (--config)."""
    sw = name.lstrip("+-")
    if name.startswith("+") and sw in MUTANT_SWITCHES:
        return str(MUTANT_CONFIG_DIR / MUTANT_SWITCHES[sw][1])
    return default


MUTANTS = mutants()


# =========================================================================================
# arguments, checked before any work
# =========================================================================================
def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1 (a usage error otherwise, exit 2)."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def _probe_dir(d: Path, flag: str, path: str) -> None:
    """Create and remove a file in ``d``: the only test that holds for root and read-only
    file systems alike."""
    try:
        with tempfile.NamedTemporaryFile(dir=d, prefix=".failclosed-probe-"):
            pass
    except OSError as e:
        raise UsageError(f"{flag} {path}: cannot write in {d} ({(e.strerror or str(e)).lower()}); "
                         "choose a writable place") from None


def require_writable_file(path: str, flag: str) -> None:
    """``path`` can be written as a file: its directory exists and is writable, and it is
    not a directory. Nothing is created or changed."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{flag} {path}: is a directory; give a file name")
    parent = p.parent
    if not parent.exists():
        raise UsageError(f"{flag} {path}: the directory {parent} does not exist; create it "
                         "or choose another path")
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: {parent} is not a directory; choose another path")
    if p.exists():
        try:
            with open(p, "a"):
                pass
        except OSError as e:
            raise UsageError(f"{flag} {path}: cannot write it ({(e.strerror or str(e)).lower()}); "
                             "choose a writable place") from None
    else:
        _probe_dir(parent, flag, path)


def require_writable_dir(path: str, flag: str) -> None:
    """``path`` is a writable directory, or can be created as one (its nearest existing
    ancestor is a writable directory). Nothing is created."""
    p = Path(path)
    if p.exists():
        if not p.is_dir():
            raise UsageError(f"{flag} {path}: exists and is not a directory; give a directory")
        _probe_dir(p, flag, path)
        return
    anc = p.absolute().parent
    while not anc.exists():
        anc = anc.parent
    if not anc.is_dir():
        raise UsageError(f"{flag} {path}: {anc} is not a directory; choose another path")
    _probe_dir(anc, flag, path)


def load_baseline_arg(path: str | None) -> Baseline:
    """The ``--baseline`` file, or the empty baseline (every violation is new)."""
    return load_baseline(path) if path else Baseline()


def verdict(cmp: Comparison) -> int:
    """The exit code of the rule: 1 when something new is violated, else 0."""
    return 0 if cmp.ok else 1


def _validate_policy(policy: str) -> Policy:
    return parse_policy(policy)  # UnknownPolicy -> one line, exit 2


def _add_common(p: argparse.ArgumentParser, *, baseline: bool = True, config: bool = True) -> None:
    if config:
        p.add_argument("--config", default="small",
                       help="tiny | small | medium | a TOML FILE (spec/configs)")
    p.add_argument("--json", nargs="?", const="-", metavar="FILE",
                   help="machine-readable result: on stdout (instead of the tables), or "
                        "into FILE (beside them)")
    if baseline:
        p.add_argument("--baseline", metavar="FILE",
                       help="known violations (TOML, e.g. spec/baselines/current.toml): exit 1 "
                            "only on a violation it does not list")
        p.add_argument("--write-baseline", metavar="FILE",
                       help="record the violations found as a baseline FILE to start from "
                            "(entries of --baseline keep their reasons); they count as known in this run")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _check_outputs(args: argparse.Namespace) -> None:
    if args.json and args.json != "-":
        require_writable_file(args.json, "--json")
    if getattr(args, "write_baseline", None):
        require_writable_file(args.write_baseline, "--write-baseline")
    if getattr(args, "out", None):
        require_writable_dir(args.out, "--out")


def _emit_json(args: argparse.Namespace, d: dict[str, Any]) -> None:
    text = json.dumps(d, indent=2)
    if args.json == "-":
        print(text)
    else:
        Path(args.json).write_text(text + "\n", encoding="utf-8")


def _progress(args: argparse.Namespace, what: str, total: int, unit: str) -> Progress:
    return Progress(what, total, unit=unit, enabled=not args.quiet)


# =========================================================================================
# tables that fit the terminal
# =========================================================================================
def table_width() -> int:
    """The terminal's width on a terminal; otherwise $COLUMNS, else 100."""
    if sys.stdout.isatty():
        return shutil.get_terminal_size((100, 24)).columns
    try:
        return max(40, int(os.environ.get("COLUMNS", "")))
    except ValueError:
        return 100


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], *, width: int,
               align: str = "") -> list[str]:
    """A plain table: the first column left-aligned, the others right-aligned (``align``:
    one of l/r per column overrides). The LAST column is wrapped to fit ``width``; no other
    cell is ever cut."""
    n = len(header)
    al = align or "l" + "r" * (n - 1)
    w = [max(len(str(x)) for x in [header[i], *(r[i] for r in rows)]) for i in range(n)]
    fixed = sum(w[:-1]) + 2 * (n - 1)
    last = max(12, min(w[-1], width - fixed)) if al[-1] == "l" else w[-1]
    w[-1] = last

    def fmt(cells: Sequence[str]) -> list[str]:
        tail = textwrap.wrap(str(cells[-1]), last) or [""] if al[-1] == "l" else [str(cells[-1])]
        out = []
        for k, piece in enumerate(tail):
            head = [(str(c) if k == 0 else "") for c in cells[:-1]]
            parts = [c.ljust(w[i]) if al[i] == "l" else c.rjust(w[i]) for i, c in enumerate(head)]
            parts.append(piece.ljust(w[-1]) if al[-1] == "l" else piece.rjust(w[-1]))
            out.append("  ".join(parts).rstrip())
        return out

    lines = fmt(header)
    lines.append("  ".join("-" * x for x in w))
    for r in rows:
        lines += fmt(r)
    return lines


def column_chunks(first: int, cols: Sequence[int], width: int) -> list[list[int]]:
    """Split columns (their widths) into groups that fit ``width`` beside a first column of
    width ``first`` (2 spaces between columns); at least one column per group."""
    chunks: list[list[int]] = []
    cur: list[int] = []
    used = first
    for i, cw in enumerate(cols):
        if cur and used + 2 + cw > width:
            chunks.append(cur)
            cur, used = [], first
        cur.append(i)
        used += 2 + cw
    if cur:
        chunks.append(cur)
    return chunks


def _say(text: str, width: int, indent: str = "  ") -> None:
    """Print ``text`` wrapped to ``width`` (continuation lines indented two more)."""
    print(textwrap.fill(text, max(20, width), initial_indent=indent,
                        subsequent_indent=indent + "  ", break_on_hyphens=False))


def _notes_and_baseline(args: argparse.Namespace, cmp: Comparison, notes: list[str],
                        width: int) -> None:
    """The closing notes, then (with --baseline) each new violation and fixed entry."""
    for x in notes:
        _say(x, width)
    if args.baseline:
        for line in cmp.lines():
            _say(line, width)


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


# =========================================================================================
# commands
# =========================================================================================
def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "check", help="exhaustively check the properties on a bounded configuration",
        description="Explore every reachable world of a configuration under a policy and "
                    "check the named properties.\n"
                    "Exit 0: every property holds (or its violation is in --baseline); "
                    "1: a new violation (its counterexample is printed) or a required witness "
                    "unreached; 2: bad input.",
    )
    p.add_argument("--policy", required=True, help="the policy (see policies below)")
    p.add_argument("--property", action="append", dest="properties", metavar="NAME",
                   help="check only this property (repeatable; default: every property)")
    p.add_argument("--out", metavar="DIR", help="write each new counterexample (every one without "
                   "--baseline) as a trace table, a scenario file and a pytest regression test")
    p.add_argument("--max-states", type=positive_int, default=None, metavar="N",
                   help="stop each part's search after N states (the result then says "
                        "'holds up to N states (truncated)'; default: no bound)")
    _add_common(p)
    p.set_defaults(func=_cmd_check)

    m = subparsers.add_parser(
        "matrix", help="policies x properties: ok, or the length of the shortest trace",
        description="Check every property under every preset (historical presets in order, "
                    "then proposed), or the --policy ones.\n"
                    "Exit 0: every violation is in --baseline (or none); 1: a new violation; "
                    "2: bad input.",
    )
    m.add_argument("--policy", action="append", dest="policies", metavar="P",
                   help="restrict to these policies (repeatable; default: "
                        f"{', '.join([*PRESET_ORDER, 'proposed'])})")
    m.add_argument("--scope", metavar="SCOPE", help="check every configuration of this scope "
                   "(standard | quick | full | a FILE) instead of --config: a cell holds only if "
                   "it holds in all of them, and a failing cell names its configuration")
    _add_common(m)
    _add_scope_run(m)
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
    _add_common(k)
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
    if unreached:
        fixed += f", {_plural(unreached, 'witness', 'witnesses')} unreached"
    where = f"{res.config}: {_plural(len(res.parts), 'part')}, {_plural(res.states, 'state')}"
    return f"{_plural(n, 'property', 'properties')}: {viol}, {hold}{fixed} ({where})"


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
        out.append(k if k is not None else
                   Known(pol, r.name, _recorded_reason(command, config_arg, r), config=config))
    return out


def _write_baseline(args: argparse.Namespace, entries: list[Known], command: str) -> str:
    header = (f"Known violations, written by `failclosed {command} --config {args.config} "
              f"--write-baseline {args.write_baseline}`.\n"
              f"Check against it: `failclosed {command} --config {args.config} --baseline "
              f"{args.write_baseline}` (exit 1 only on a violation not listed here).")
    write_baseline(args.write_baseline, entries, header)
    return f"wrote a baseline of {_plural(len(entries), 'known violation')}: {args.write_baseline}"


def _cmd_check(args: argparse.Namespace) -> int:
    from failclosed.spec.checker import (
        check,
        load_config,
        resolve_properties,
        trace_text,
        write_counterexample,
    )

    _validate_policy(args.policy)
    resolve_properties(args.properties)  # an unknown name: one line, before any work
    _, parts = load_config(args.config)
    baseline = load_baseline_arg(args.baseline)
    _check_outputs(args)

    with _progress(args, "check", len(parts), "parts") as pg:
        res = check(args.policy, args.config, args.properties, max_states=args.max_states,
                    witnesses=not args.properties, coverage=not args.properties,
                    on_part=lambda name, states: pg.advance(states=states))
    cells = {(args.policy, n): not r.holds for n, r in res.properties.items()}
    failed = [r for r in res.properties.values() if not r.holds]
    notes: list[str] = []
    if args.write_baseline:
        entries = _baseline_entries([(args.policy, r) for r in failed], baseline, "check",
                                    args.config, res.config)
        notes.append(_write_baseline(args, entries, "check"))
        baseline = Baseline(tuple(entries), args.write_baseline)
    cmp = baseline.compare(cells, res.config)
    # a witness is a proof of non-vacuity only on a complete search
    unreached = res.unreached_witnesses if res.complete else []
    summary = _check_summary(res, cmp, bool(args.baseline or args.write_baseline), args.max_states,
                             len(unreached))
    rc = max(verdict(cmp), 1 if unreached else 0)

    # counterexamples are written for the violations a reader must look at: the new ones
    new = {prop for _, prop in cmp.new}
    written: list[str] = []
    if args.out:
        for r in failed:
            if r.name in new:
                written += [str(x) for x in write_counterexample(r, Path(args.out), args.policy)]

    if args.json:
        d = res.to_json()
        if written:
            d["written"] = written
        d["baseline"] = cmp.to_json()
        d["summary"] = summary
        d["exit_code"] = rc
        _emit_json(args, d)
        if args.json == "-":
            return rc
    for r in failed:
        if r.name in new:
            print(trace_text(r))
            print()
    known = {k.property: k for k in cmp.known}
    width = table_width()
    nw = max(len(n) for n in res.properties)
    for n, r in res.properties.items():
        if r.holds:
            mark = "holds" if res.complete else f"holds up to {args.max_states:,} states per part (truncated)"
        else:
            mark = f"VIOLATED ({r.trace_length} steps, {r.part})"
            if n in known:
                mark += f", known: {known[n].finding or 'in the baseline'}"
        print(f"  {n:{nw}s}  {mark}".rstrip())
    for w in res.unreached_witnesses:
        tail = "" if res.complete else " (the search was truncated: not judged)"
        _say(f"witness unreached: {w}{tail}", width)
    if res.coverage is not None and res.coverage.never_enabled and res.complete:
        _say(f"never enabled: {', '.join(res.coverage.never_enabled)}", width)
    for x in written:
        print(f"  wrote {x}")
    _notes_and_baseline(args, cmp, notes, width)
    print(f"{res.policy} on {res.config}: {res.stats_line()}")
    print(summary)
    return rc


# -- matrix -------------------------------------------------------------------------------
def _cell(r: Any) -> dict[str, Any]:
    return {"holds": r.holds, "trace_length": r.trace_length}


def run_matrix(config: str, policies: list[str],
               on_policy: Callable[[str, Any], None] | None = None,
               ) -> tuple[list[str], dict[str, dict[str, Any]], list[Any]]:
    """Check every property under each policy: (properties, {policy: {property: cell}},
    the CheckResults). ``on_policy(policy, result)`` is called as each is done."""
    from failclosed.spec.checker import check

    table: dict[str, dict[str, Any]] = {}
    results = []
    props: list[str] = []
    for pol in policies:
        res = check(pol, config, None, witnesses=False, coverage=False)
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
    from failclosed.spec.checker import load_config

    pols = args.policies or [*PRESET_ORDER, "proposed"]  # history, then the proposal
    for p in pols:
        _validate_policy(p)
    if args.scope:
        return _cmd_matrix_scope(args, pols)
    cname, _ = load_config(args.config)
    baseline = load_baseline_arg(args.baseline)
    _check_outputs(args)

    with _progress(args, "matrix", len(pols), "policies") as pg:
        props, table, results = run_matrix(
            args.config, pols, lambda pol, res: pg.advance(states=res.states))
    cells = {(pol, n): not table[pol][n]["holds"] for pol in pols for n in props}
    notes: list[str] = []
    if args.write_baseline:
        found = [(pol, res.properties[n]) for pol, res in zip(pols, results, strict=True)
                 for n in props if not res.properties[n].holds]
        entries = _baseline_entries(found, baseline, "matrix", args.config, cname)
        notes.append(_write_baseline(args, entries, "matrix"))
        baseline = Baseline(tuple(entries), args.write_baseline)
    cmp = baseline.compare(cells, cname)
    judged = bool(args.baseline or args.write_baseline)
    stats = [f"{pol}: {res.stats_line()}" for pol, res in zip(pols, results, strict=True)]
    return _print_matrix(args, pols, props, table, cmp, judged, cname,
                         sum(r.states for r in results), stats, notes)


def _cmd_matrix_scope(args: argparse.Namespace, pols: list[str]) -> int:
    """``matrix --scope``: the scope's merged verdicts, one column per policy."""
    _scope_preflight(args)
    res = run_scope_cli(args.scope, pols, None, args)
    _, cmp, notes = _scope_verdict(res, args, f"matrix --scope {args.scope}")
    table = {p: {n: res.cell(p, n) for n in res.properties} for p in pols}
    stats = [f"{p}: {_plural(sum(r.states for r in res.results if r.policy == p), 'state')}"
             for p in pols]
    if res.truncated:
        notes.append(f"truncated by --max-states: {', '.join(res.truncated[:10])}")
    return _print_matrix(args, pols, res.properties, table, cmp,
                         bool(args.baseline or args.write_baseline), f"scope {res.scope.name}",
                         res.states, stats, notes, reach=res)


def _print_matrix(args: argparse.Namespace, pols: list[str], props: list[str],
                  table: dict[str, dict[str, Any]], cmp: Comparison, judged: bool, cname: str,
                  states: int, stats: list[str], notes: list[str], reach: Any = None) -> int:
    """The matrix's tables, notes and closing line (``reach``: a ScopeResult)."""
    cells = {(pol, n): not table[pol][n]["holds"] for pol in pols for n in props}
    bad = sum(cells.values())
    viol = _plural(bad, "cell") + " violated"
    if judged:
        viol += f" ({len(cmp.known)} known, {len(cmp.new)} new)"
    fixed = f", {len(cmp.fixed)} fixed" if cmp.fixed else ""
    where = reach.reach() if reach is not None else f"{cname}, {_plural(states, 'state')}"
    summary = (f"{_plural(len(pols), 'policy', 'policies')} x "
               f"{_plural(len(props), 'property', 'properties')}: {viol}, "
               f"{len(cells) - bad} hold{fixed} ({where})")
    rc = verdict(cmp)

    if args.json:
        d = {"properties": props, "policies": table, "baseline": cmp.to_json(),
             "summary": summary, "exit_code": rc}
        if reach is not None:
            d["scope"] = {k: v for k, v in reach.to_json().items() if k not in ("properties", "policies")}
        _emit_json(args, d)
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
        _say(f"properties x policies on {cname}{part} ({legend})", width, "")
        for line in text_table(["property", *cols], [[n, *(word(c, n) for c in cols)]
                                                     for n in props], width=width):
            print(line)
        print()
    for line in stats:
        _say(line, width)
    if reach is not None:
        for pol in pols:
            for n in props:
                c = table[pol][n]
                if not c["holds"]:
                    _say(f"{pol} / {n}: {c['trace_length']} steps in {c['config']}", width)
    _notes_and_baseline(args, cmp, notes, width)
    print(summary)
    return rc


# -- mutants ------------------------------------------------------------------------------
def _cmd_mutants(args: argparse.Namespace) -> int:
    from failclosed.spec.checker import check, load_config

    cname, _ = load_config(args.config)
    baseline = load_baseline_arg(args.baseline)
    _check_outputs(args)
    muts = mutants()
    configs = {name: mutant_config(name, args.config) for name in muts}
    kills: dict[str, dict[str, int | None]] = {}
    props: list[str] = []
    states = 0
    with _progress(args, "mutants", len(muts) + 1, "variants") as pg:
        for name, pol in muts.items():
            res = check(pol, configs[name], None, witnesses=False, coverage=False)
            props = list(res.properties)
            kills[name] = {n: r.trace_length for n, r in res.properties.items()}
            states += res.states
            pg.advance(states=res.states)
        base = check("current", args.config, None, witnesses=False, coverage=False)
        states += base.states
        pg.advance(states=base.states)
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
    summary = (f"{_plural(len(muts), 'variant')} x {_plural(len(props), 'property', 'properties')}: "
               f"{len(props) - len(survivors)} killed, {len(survivors)} survive; {cur} "
               f"({cname}, {_plural(states, 'state')})")
    rc = 1 if survivors or (judged and not cmp.ok) else 0

    if args.json:
        own = {m: Path(c).stem for m, c in configs.items() if c != args.config}
        _emit_json(args, {"mutants": muts, "configs": own, "properties": table,
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
    _say(f"kill table on {cname}: the variants under which each property is violated "
         "(shortest trace length)", width, "")
    for line in text_table(["property", "current", "killed by (mutant:length)"], rows,
                           width=width, align="lrl"):
        print(line)
    print()
    for m, c in configs.items():
        if c != args.config:
            _say(f"{m} runs on its own bound {Path(c).stem} (spec/mutant_configs)", width)
    known = {k.property for k in cmp.known}
    for n in props:
        length = base.properties[n].trace_length
        if length is not None:
            tag = " (in the baseline)" if n in known else ""
            _say(f"note: {n} is violated under current too ({length} steps){tag}: "
                 "see FINDINGS.md", width)
    for n in survivors:
        print(f"  SURVIVES every mutant: {n}")
    _notes_and_baseline(args, cmp, notes, width)
    print(summary)
    return rc


# =========================================================================================
# failclosed scope, and matrix --scope
# =========================================================================================
def _add_scope_run(p: argparse.ArgumentParser) -> None:
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
                   "what is missing (default: $FAILCLOSED_CACHE_DIR or ~/.cache/failclosed)")
    p.add_argument("--no-cache", action="store_true", help="recheck every configuration")


def register_scope(subparsers: Any) -> None:
    s = subparsers.add_parser(
        "scope", help="check every configuration of a declared scope, in parallel: holds "
                      "across the scope, or the shortest counterexample over all of them",
        description="Expand a scope (spec/scopes: dimensions of small configurations) into "
                    "its configurations, drop renamings and subsumed ones, and check each one "
                    "under each policy as an independent task. A property holds only if it "
                    "holds in every configuration.\n"
                    "Exit 0: every property holds (or its violation is in --baseline); 1: a new "
                    "violation (printed with the configuration that produced it); 2: bad input.",
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
    _add_scope_run(s)
    _add_common(s, config=False)
    s.set_defaults(func=_cmd_scope)


def _scope_preflight(args: argparse.Namespace) -> None:
    """Before any work: the baseline parses, the outputs are writable, the scheduler answers
    (each a one-line error otherwise)."""
    load_baseline_arg(args.baseline)
    _check_outputs(args)
    if args.dask:
        from failclosed.spec.scope import dask_client

        dask_client(args.dask).close()


def run_scope_cli(scope_name: str, policies: list[str], properties: list[str] | None,
                  args: argparse.Namespace) -> Any:
    """Load the scope, run it with progress (one line a minute off a terminal) and the
    cache, merge: the ScopeResult."""
    from failclosed.spec.scope import Cache, check_scope, load_scope, model_version

    scope = load_scope(scope_name)
    cache = None
    if not args.no_cache:
        root = Path(args.cache_dir) if args.cache_dir else Cache.default_root()
        cache = Cache(root, model_version())
    total = len(scope.members) * len(policies)
    with Progress(f"scope {scope.name}", total, unit="configurations", interval=60,
                  enabled=not args.quiet) as pg:
        pg.note(_scope_header(scope, policies))
        return check_scope(scope, policies, properties, jobs=args.jobs, dask=args.dask,
                           max_states=args.max_states, cache=cache,
                           on_result=lambda r: pg.advance(states=r.states))


def _scope_header(scope: Any, policies: list[str] | None) -> str:
    txt = (f"scope {scope.name}: {scope.generated:,} configurations generated, "
           f"{scope.equivalent:,} renamings and {scope.subsumed:,} subsumed dropped, "
           f"{len(scope.members):,} kept")
    if policies:
        txt += f", checked under {_plural(len(policies), 'policy', 'policies')}"
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
    hold = "hold" if not res.truncated else "hold up to the bound"
    return (f"{_plural(len(res.policies), 'policy', 'policies')} x "
            f"{_plural(len(res.properties), 'property', 'properties')}: {viol}, {n - bad} "
            f"{hold}{fixed} in {res.reach()}")


def _scope_verdict(res: Any, args: argparse.Namespace, command: str,
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
            entries.append(k if k is not None else Known(
                p, n, f"recorded by `failclosed {command}` over scope {res.scope.name}: "
                      f"shortest counterexample {v.length} steps in {v.member}; replace this "
                      "with why it is accepted", config=res.scope.name))
        header = (f"Known violations, written by `failclosed {command}` over scope "
                  f"{res.scope.name}.\nCheck against it with --baseline "
                  f"{args.write_baseline} (exit 1 only on a violation not listed here).")
        write_baseline(args.write_baseline, entries, header)
        notes.append(f"wrote a baseline of {_plural(len(entries), 'known violation')}: "
                     f"{args.write_baseline}")
        baseline = Baseline(tuple(entries), args.write_baseline)
    return baseline, baseline.compare(cells, res.scope.name), notes


def _cmd_scope(args: argparse.Namespace) -> int:
    from failclosed.spec.checker import ConfigPart, check, resolve_properties, write_counterexample
    from failclosed.spec.scope import load_scope, member

    if args.list or args.show:
        scope = load_scope(args.scope)
        if args.show:
            from failclosed.model.scenario import dump_scenario

            print(dump_scenario(member(scope, args.show).data, []), end="")
            return 0
        for m in scope.members:
            print(f"{m.name}\t{m.origin}")
        print(_scope_header(scope, None), file=sys.stderr)
        return 0
    policies = args.policies or ["current"]
    for p in policies:
        _validate_policy(p)
    resolve_properties(args.properties)  # an unknown name: one line, before any work
    _scope_preflight(args)
    res = run_scope_cli(args.scope, policies, args.properties, args)
    _, cmp, notes = _scope_verdict(res, args, "scope")
    judged = bool(args.baseline or args.write_baseline)
    summary = _scope_summary(res, cmp, judged)
    rc = verdict(cmp)
    new = set(cmp.new)
    written: list[str] = []
    if args.out:  # the winning configuration again, for this property only: its trace
        for pol, n in sorted(new):
            v = res.verdicts[pol][n]
            m = member(res.scope, v.member)
            one = check(pol, ConfigPart(m.name, "", m.data), [n], witnesses=False, coverage=False)
            written += [str(x) for x in write_counterexample(one.properties[n], Path(args.out), pol)]
    if args.json:
        d = res.to_json() | {"baseline": cmp.to_json(), "summary": summary, "exit_code": rc}
        if written:
            d["written"] = written
        _emit_json(args, d)
        if args.json == "-":
            return rc
    width = table_width()
    known = {k.cell: k for k in cmp.known}
    for pol in policies:
        _say(f"{pol} over {res.reach(pol)}:", width, "")
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
    if res.truncated:
        _say(f"truncated by --max-states: {', '.join(res.truncated[:10])}"
             + (f" and {len(res.truncated) - 10} more" if len(res.truncated) > 10 else ""), width)
    if res.cached:
        _say(f"{res.cached} of {len(res.results)} results came from the cache", width)
    for x in written:
        print(f"  wrote {x}")
    _notes_and_baseline(args, cmp, notes, width)
    if new and not args.out:
        _say(f"traces: add --out DIR; a configuration as TOML: failclosed scope "
             f"{res.scope.name} --show NAME", width)
    print(summary)
    return rc
