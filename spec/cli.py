"""``failclosed check``, ``failclosed matrix`` and ``failclosed mutants``.

Exit codes (sim/cli.py): 0 every property holds (every mutant killed), 1 a counterexample
was printed (a property survives every mutant), 2 bad input (one line).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from model.policy import PRESET_ORDER, PRESETS, SWITCHES, Policy, parse_policy

__all__ = ["MUTANTS", "MUTANT_SWITCHES", "mutant_config", "mutants", "register"]

# Counterfactual switches (REFERENCE.md 15: "one counterfactual switch is useful beside the
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


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "check", help="exhaustively check the properties on a bounded configuration",
        description="Explore every reachable world of a configuration under a policy and "
                    "check the named properties. Exit 0: all hold; 1: counterexample(s) "
                    "printed (or a required witness unreached); 2: bad input.",
    )
    p.add_argument("--policy", required=True, help="a preset (adr-092 .. adr-141, current), "
                   "optionally with +switch / -switch")
    p.add_argument("--config", default="small", help="tiny | small | medium | a TOML FILE")
    p.add_argument("--property", action="append", dest="properties", metavar="NAME",
                   help="check only this property (repeatable)")
    p.add_argument("--json", action="store_true", help="machine-readable result")
    p.add_argument("--out", metavar="DIR", help="write each counterexample as a trace table, "
                   "a scenario file and a pytest regression test")
    p.add_argument("--max-states", type=int, default=None, help="bound per part (truncates)")
    p.set_defaults(func=_cmd_check)

    m = subparsers.add_parser(
        "matrix", help="presets x properties: holds, or the length of the shortest trace",
        description="Check every property under every preset. Exit 0 always (a table).",
    )
    m.add_argument("--config", default="small")
    m.add_argument("--json", action="store_true")
    m.add_argument("--policy", action="append", dest="policies", metavar="P",
                   help="restrict to these policies (repeatable)")
    m.set_defaults(func=_cmd_matrix)

    k = subparsers.add_parser(
        "mutants", help="kill table: for every property, the policy variants that violate it",
        description="Check every property under switch-off and counterfactual variants of "
                    "current. Exit 1 if some property is violated by no variant.",
    )
    k.add_argument("--config", default="small")
    k.add_argument("--json", action="store_true")
    k.set_defaults(func=_cmd_mutants)

    register_scope(subparsers)


def _validate_policy(policy: str) -> Policy:
    return parse_policy(policy)  # UnknownPolicy -> one line, exit 2


def _cmd_check(args: argparse.Namespace) -> int:
    from spec.checker import check, trace_text, write_counterexample

    _validate_policy(args.policy)
    res = check(args.policy, args.config, args.properties, max_states=args.max_states,
                witnesses=not args.properties, coverage=not args.properties)
    failed = [r for r in res.properties.values() if not r.holds]
    written: list[str] = []
    if args.out:
        for r in failed:
            written += [str(x) for x in write_counterexample(r, Path(args.out), args.policy)]
    if args.json:
        d = res.to_json()
        if written:
            d["written"] = written
        print(json.dumps(d, indent=2))
    else:
        for r in failed:
            print(trace_text(r))
            print()
        for n, r in res.properties.items():
            mark = "holds" if r.holds else f"VIOLATED (trace of {r.trace_length} steps, {r.part})"
            print(f"  {n:48s} {mark}")
        for w in res.unreached_witnesses:
            print(f"  witness unreached: {w}")
        if res.coverage is not None and res.coverage.never_enabled:
            print(f"  never enabled: {', '.join(res.coverage.never_enabled)}")
        for x in written:
            print(f"  wrote {x}")
        print(f"{res.policy} on {res.config}: {res.stats_line()}")
    return 0 if res.ok else 1


def _cell(r: Any) -> dict[str, Any]:
    return {"holds": r.holds, "trace_length": r.trace_length}


def run_matrix(config: str, policies: list[str]) -> tuple[list[str], dict[str, dict[str, Any]], list[Any]]:
    from spec.checker import check

    table: dict[str, dict[str, Any]] = {}
    results = []
    props: list[str] = []
    for pol in policies:
        res = check(pol, config, None, witnesses=False, coverage=False)
        results.append(res)
        props = list(res.properties)
        table[pol] = {n: _cell(r) for n, r in res.properties.items()}
    return props, table, results


def _render(title: str, props: list[str], cols: list[str], cell: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title, show_lines=False)
    t.add_column("property")
    for c in cols:
        t.add_column(c, justify="center")
    for n in props:
        t.add_row(n, *(cell(c, n) for c in cols))
    Console(width=max(120, 50 + 9 * len(cols))).print(t)


def _cmd_matrix(args: argparse.Namespace) -> int:
    pols = args.policies or [*PRESET_ORDER, "proposed"]  # history, then the proposal
    for p in pols:
        _validate_policy(p)
    props, table, results = run_matrix(args.config, pols)
    if args.json:
        print(json.dumps({"properties": props, "policies": table}, indent=2))
        return 0

    def cell(pol: str, n: str) -> str:
        c = table[pol][n]
        return "holds" if c["holds"] else str(c["trace_length"])

    _render(f"properties x presets on {args.config} (cell: holds, or shortest trace length)",
            props, pols, cell)
    for pol, res in zip(pols, results, strict=True):
        print(f"  {pol}: {res.stats_line()}")
    return 0


def _cmd_mutants(args: argparse.Namespace) -> int:
    from spec.checker import check

    muts = mutants()
    configs = {name: mutant_config(name, args.config) for name in muts}
    kills: dict[str, dict[str, int | None]] = {}
    props: list[str] = []
    for name, pol in muts.items():
        res = check(pol, configs[name], None, witnesses=False, coverage=False)
        props = list(res.properties)
        kills[name] = {n: r.trace_length for n, r in res.properties.items()}
        print(f"  {name:36s} {res.config:8s} {res.stats_line()}", file=sys.stderr)
    base = check("current", args.config, None, witnesses=False, coverage=False)
    survivors = []
    table: dict[str, dict[str, Any]] = {}
    for n in props:
        killed_by = {m: k[n] for m, k in kills.items() if k[n] is not None}
        table[n] = {
            "current": base.properties[n].trace_length,
            "killed_by": killed_by,
        }
        if not killed_by:
            survivors.append(n)
    if args.json:
        own = {m: Path(c).stem for m, c in configs.items() if c != args.config}
        print(json.dumps({"mutants": muts, "configs": own, "properties": table,
                          "survivors": survivors}, indent=2))
    else:
        from rich.console import Console
        from rich.table import Table

        t = Table(title=f"kill table on {args.config}: the variants under which each property "
                        "is violated (shortest trace length)")
        t.add_column("property")
        t.add_column("current", justify="center")
        t.add_column("killed by (mutant: length)")
        for n in props:
            cur = base.properties[n].trace_length
            killed = ", ".join(f"{m}: {v}" for m, v in table[n]["killed_by"].items())
            t.add_row(n, "holds" if cur is None else str(cur), killed or "NOBODY")
        Console(width=200).print(t)
        for m, c in configs.items():
            if c != args.config:
                print(f"  {m} runs on its own bound {Path(c).stem} (spec/mutant_configs)")
        for n in props:
            if base.properties[n].trace_length is not None:
                print(f"  note: {n} is violated under current too "
                      f"({base.properties[n].trace_length} steps): see FINDINGS.md")
        for n in survivors:
            print(f"  SURVIVES every mutant: {n}")
    return 1 if survivors else 0


# =========================================================================================
# failclosed scope
# =========================================================================================
def register_scope(subparsers: Any) -> None:
    import os

    s = subparsers.add_parser(
        "scope", help="check every configuration of a declared scope (in parallel): holds "
                      "across the scope, or the shortest counterexample over all of them",
        description="Expand a scope (spec/scopes/*.toml: dimensions of small configurations) "
                    "into its configurations, drop renamings and subsumed ones, and check "
                    "each one under each policy as an independent task. A verdict holds only "
                    "if it holds in every configuration. Exit 0: all hold; 1: a counterexample "
                    "(printed with the configuration that produced it); 2: bad input.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    s.add_argument("scope", nargs="?", default="standard",
                   help="standard | quick | full | a scope TOML FILE")
    s.add_argument("--policy", action="append", dest="policies", metavar="P",
                   help="policy to check (repeatable; default: current)")
    s.add_argument("--property", action="append", dest="properties", metavar="NAME",
                   help="check only this property (repeatable; default: all)")
    s.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="local worker processes")
    s.add_argument("--dask", metavar="ADDR", help="run the tasks on the dask.distributed "
                   "scheduler at ADDR (host:port) instead of local processes")
    s.add_argument("--max-states", type=int, default=None,
                   help="bound per configuration (truncates; the verdict then says so)")
    s.add_argument("--out", metavar="DIR", help="write each shortest counterexample as a trace "
                   "table, a scenario file and a pytest regression test")
    s.add_argument("--json", action="store_true", help="machine-readable result on stdout")
    s.add_argument("--list", action="store_true",
                   help="list the configurations (after reduction) and exit")
    s.add_argument("--show", metavar="CONFIG", help="print one configuration as TOML "
                   "(for `failclosed check --config FILE`) and exit")
    s.add_argument("--cache-dir", metavar="DIR", help="where finished configurations are "
                   "kept (default: $FAILCLOSED_CACHE_DIR or ~/.cache/failclosed)")
    s.add_argument("--no-cache", action="store_true", help="recheck every configuration")
    s.add_argument("--quiet", action="store_true", help="no progress on stderr")
    s.set_defaults(func=_cmd_scope)


def _scope_policies(args: argparse.Namespace) -> list[str]:
    pols = args.policies or ["current"]
    for p in pols:
        _validate_policy(p)
    return pols


def _scope_args(args: argparse.Namespace) -> None:
    from model.config import UsageError

    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs: must be >= 1, got {args.jobs}")
    if args.max_states is not None and args.max_states < 1:
        raise UsageError(f"--max-states: must be >= 1, got {args.max_states}")
    if args.out:
        _writable_dir(args.out, "--out")


def _writable_dir(path: str, flag: str) -> None:
    """Fail before any work if ``path`` cannot be created or written."""
    import os

    from model.config import UsageError

    p = Path(path)
    probe = p
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK):
        raise UsageError(f"{flag}: cannot write into {path} ({probe} is not a writable "
                         "directory); give a directory you can write")


def run_scope_cli(scope_name: str, policies: list[str], properties: list[str] | None,
                  args: argparse.Namespace) -> Any:
    """Load, run with progress and the cache, merge: the ScopeResult."""
    from spec.progress import Progress
    from spec.scope import Cache, check_scope, load_scope, model_version

    scope = load_scope(scope_name)
    cache = None
    if not getattr(args, "no_cache", False):
        root = Path(args.cache_dir) if getattr(args, "cache_dir", None) else Cache.default_root()
        cache = Cache(root, model_version())
    total = len(scope.members) * len(policies)
    quiet = getattr(args, "quiet", False)
    with Progress(f"scope {scope.name}", total, unit="configurations", interval=60,
                  enabled=not quiet) as pg:
        if not quiet:
            pg.note(_scope_header(scope, policies))
        return check_scope(scope, policies, properties, jobs=getattr(args, "jobs", 1) or 1,
                           dask=getattr(args, "dask", None),
                           max_states=getattr(args, "max_states", None), cache=cache,
                           on_result=lambda r: pg.advance(states=r.states))


def _scope_header(scope: Any, policies: list[str]) -> str:
    return (f"scope {scope.name}: {scope.generated:,} configurations generated, "
            f"{scope.equivalent:,} renamings and {scope.subsumed:,} subsumed dropped, "
            f"{len(scope.members):,} to check under {len(policies)} "
            f"polic{'y' if len(policies) == 1 else 'ies'}")


def _cmd_scope(args: argparse.Namespace) -> int:
    from spec.checker import check, resolve_properties, write_counterexample
    from spec.scope import load_scope, member

    _scope_args(args)
    if args.list or args.show:
        scope = load_scope(args.scope)
        if args.show:
            from model.scenario import dump_scenario

            print(dump_scenario(member(scope, args.show).data, []), end="")
            return 0
        for m in scope.members:
            print(f"{m.name}\t{m.origin}")
        print(_scope_header(scope, ["?"]).rsplit(" to check", 1)[0]
              + f", {len(scope.members):,} kept", file=sys.stderr)
        return 0
    policies = _scope_policies(args)
    resolve_properties(args.properties)  # an unknown name: one line, before any work
    res = run_scope_cli(args.scope, policies, args.properties, args)
    written: list[str] = []
    if args.out:
        for pol in policies:
            for n, v in res.verdicts[pol].items():
                if v.holds:
                    continue
                m = member(res.scope, v.member)
                from spec.checker import ConfigPart

                one = check(pol, ConfigPart(m.name, "", m.data), [n], witnesses=False,
                            coverage=False)
                written += [str(x) for x in write_counterexample(one.properties[n],
                                                                 Path(args.out), pol)]
    if args.json:
        d = res.to_json()
        if written:
            d["written"] = written
        print(json.dumps(d, indent=2))
    else:
        _print_scope(res)
        for x in written:
            print(f"  wrote {x}")
    bad = any(not v.holds for p in policies for v in res.verdicts[p].values())
    return 1 if bad else 0


def _print_scope(res: Any) -> None:
    for pol in res.policies:
        print(f"{pol} over {res.reach()}:")
        width = max(len(n) for n in res.properties)
        for n in res.properties:
            v = res.verdicts[pol][n]
            if v.holds:
                verdict = "holds" if not res.truncated else "holds up to the bound"
            else:
                verdict = (f"VIOLATED: {v.length} steps in {v.member} "
                           f"({v.violating} of {len(res.scope.members)} configurations)")
            print(f"  {n:<{width}}  {verdict}")
        bad = [n for n in res.properties if not res.verdicts[pol][n].holds]
        print(f"{len(res.properties)} properties under {pol}: {len(bad)} violated, "
              f"{len(res.properties) - len(bad)} hold in {res.reach()}")
    if res.truncated:
        print(f"  truncated by --max-states: {', '.join(res.truncated[:10])}"
              + (f" and {len(res.truncated) - 10} more" if len(res.truncated) > 10 else ""))
    if res.cached:
        print(f"  {res.cached} of {len(res.results)} results came from the cache "
              f"({res.seconds:.1f}s)")
    if any(not v.holds for p in res.policies for v in res.verdicts[p].values()):
        print(f"  traces: add --out DIR; one configuration as TOML: "
              f"failclosed scope {res.scope.name} --show NAME")
