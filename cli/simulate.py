"""``failclosed simulate``, and what the simulator's commands share (``sweep``: cli/sweep.py,
``plot``: cli/plot.py): their input checks, the baseline argument, plain counts and paths.

Every command checks its whole input first (files to read, every output path, every number)
and only then starts working: bad input is one line naming the field and the fix, exit 2,
and nothing is written. Exit codes are the same for every command: 0 when everything checked
holds (or only the baseline's known violations occur), 1 when something new is violated,
2 for bad input. Long commands report progress on stderr (``spec.progress``).

simulate
    With a CONFIG: one simulation under the config's policy (or ``--policy``). Without CONFIG:
    the shipped ``sim/configs/default.toml`` under ``current``, the proposal and the closest
    earlier presets (``SIDE_BY_SIDE``) on the same seed and workload, side by side, judged
    against the shipped baseline (``spec/baselines/current.toml``: the known findings).
    In both modes every violating run is counted (``--keep-going`` is the default and kept
    for compatibility); ``--fail-fast`` stops the whole command at the first violation and
    says where (policy, run, property, instant) and how many runs were simulated.
    A shipped config (without CONFIG, by name or by its path) is judged against the shipped
    baseline unless ``--baseline`` or ``--no-baseline`` says otherwise: one configuration,
    one verdict, however it is named. ``--baseline FILE``: violations listed there are reported as known (exit 0), anything
    else is new (exit 1); a listed pair that held is reported as fixed (a warning) when
    its entry has no ``config`` or names this CONFIG's stem (spec/baseline.py: the shipped
    entries were observed on the checker's configurations, and a simulation that does not
    reach one proves nothing). ``--json FILE`` writes one object ``{"policy", "seed", "runs",
    "history_sha256", "outcomes", "violations", "metrics", ...}`` per simulation (a list
    for the side-by-side run, in ``SIDE_BY_SIDE`` order), with a baseline also
    ``"baseline": {"file", "known", "new", "fixed"}`` (property names), and ``"faults":
    {"drawn", "never_drawn", "warning"}``: how often each enabled fault kind was drawn, and
    from ``sim.records.NEVER_DRAWN_RUNS`` runs simulated a warning naming the kinds enabled
    but never drawn (also printed); ``"liveness": {"runs", "judged", "not_judged"}``: each
    liveness property judged at each run's end (how many runs' ends reached its goal, the
    runs that did not) and each one not judged with why (sim/liveness.py; printed, the
    ones not judged as warnings); without a transport (``[transport] kind = "none"``,
    RUNTIME 6.4) also ``"refusals"``: how many enqueues and reaper ticks were refused up
    front, by transition (also printed). Counterexample scenarios
    (``failclosed replay FILE`` reproduces each) are written only under an explicit
    ``--violations-dir``: the first ``--max-scenarios N`` violations of each property per
    policy (default ``SCENARIOS_PER_PROPERTY``, ``all``: every one); the output and the JSON's
    ``"scenarios"`` say how many were not written and how to lift the cap. The side-by-side run
    writes the one its closing advice replays into one directory under the system's temporary
    directory, and says which. ``--jobs N``: the side-by-side run's policies on N spawned
    processes (spec/pool.py, through sim.batch.run_in_processes), the same results as one.
    ``--export DB.sqlite | DIR`` writes the simulation's runs and events in the runtime's two
    tables (sim/export.py; the side-by-side run exports current's), read by ``failclosed
    inspect`` (cli/inspect.py, docs/INSPECT.md).
    The table's intervals are batch means over 10 sections of consecutive runs of each
    simulation (sim/stats.py ``sectioned``; the footnote says so, the JSON's ``method`` too);
    its unaudited write applications are split by how their run ended (completed, failed,
    dead-lettered, otherwise), so the central guarantee reads off the "in runs completed" row.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from failclosed.cli.checking import command_name, load_baseline_arg, shlex_quote
from failclosed.cli.junit import add_junit, cell_cases, check_junit, write_junit
from failclosed.cli.kinds import require_kind
from failclosed.cli.outputs import OutputSet, as_umask_allows, output_set, write_text_atomic
from failclosed.cli.scenario_writer import write_scenario
from failclosed.model.config import ConfigError, UsageError, read_toml
from failclosed.model.policy import parse_policy
from failclosed.sim import config as sconfig
from failclosed.sim.batch import run_in_processes, simulate_one, simulate_policy, violation_scenario
from failclosed.sim.export import SQLITE_SUFFIXES, is_sqlite_target
from failclosed.sim.history import file_sha256
from failclosed.sim.invariants import load_safety
from failclosed.sim.liveness import summary_lines
from failclosed.sim.records import NEVER_DRAWN_WHY, SCENARIOS_PER_PROPERTY
from failclosed.spec.baseline import resolve_baseline
from failclosed.spec.progress import Progress
from failclosed.spec.properties import SAFETY
from failclosed.spec.scope import Cache

from failclosed import spec

__all__ = ["SIDE_BY_SIDE", "check_input_file", "check_output_dir", "check_output_file",
           "default_baseline_path", "int_arg", "load_known", "plural", "read_config", "register",
           "rel_path", "resolve_sim_config", "shipped_sim_configs", "simulate_and_write"]

SIDE_BY_SIDE = ("proposed", "current", "adr-134", "adr-122", "adr-111", "owner-guard")
LIST_FILES = 10
MAX_SCENARIOS_FLAG = "--max-scenarios"
# how the report's intervals are computed (sim.stats.sectioned; docs/SIMULATOR.md "Intervals")
INTERVAL_NOTE = ("batch means over 10 sections of consecutive runs of each simulation (Student t; "
                 "proportions widened to the pooled Wilson interval where wider)")  # files listed by name; the rest are counted


# -- checking input before any work --------------------------------------------------------------
def int_arg(lo: int, what: str):
    """An argparse type: an integer >= lo (argparse prints the message, one line, exit 2)."""

    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {s!r}; give {what}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be >= {lo}, got {v}; give {what}")
        return v

    parse.__name__ = "integer"
    return parse


def max_scenarios_arg(s: str) -> int | None:
    """``--max-scenarios``: an integer >= 0, or ``all`` (None: no cap)."""
    if s.strip().lower() == "all":
        return None
    return int_arg(0, "a number of scenarios per property >= 0, or all")(s)


def check_input_file(path: str, flag: str) -> None:
    """``path`` is a readable regular file (else one ConfigError line naming ``flag``)."""
    if not os.path.exists(path):
        raise ConfigError(f"{flag} {path}: no such file; check the path")
    if os.path.isdir(path):
        raise ConfigError(f"{flag} {path}: is a directory; give a file")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"{flag} {path}: not readable; check its permissions")


def shipped_sim_configs() -> dict[str, Path]:
    """The simulator configs shipped with the package (sim/configs), by name."""
    return {p.stem: p for p in sorted(Path(sconfig.default_path()).parent.glob("*.toml"))}


def resolve_sim_config(name: str, flag: str = "CONFIG") -> str:
    """A simulator config FILE, or a shipped one by name (``default``: sim/configs/default.toml,
    wherever the package is installed), as ``--config small`` and ``--baseline current`` are.
    A name that is neither is one ConfigError line listing every shipped name."""
    if os.path.exists(name) or Path(name).suffix:
        return name
    shipped = shipped_sim_configs()
    if name in shipped:
        return str(shipped[name])
    raise ConfigError(f"{flag} {name}: no such file, and no shipped simulator config of that name; "
                      f"give a file or one of {', '.join(shipped)}")


def is_shipped_config(path: str) -> bool:
    """Is ``path`` one of the shipped simulator configs (``simulate``, ``simulate default``,
    ``simulate sim/configs/default.toml``: one configuration, one verdict)? By place or by
    content: a checkout's ``sim/configs/default.toml`` beside an installed package is the same
    configuration as the package's own copy."""
    real = os.path.realpath(path)
    shipped = [os.path.realpath(p) for p in shipped_sim_configs().values()]
    if real in shipped:
        return True
    try:
        content = Path(real).read_bytes()
    except OSError:
        return False
    return any(Path(p).read_bytes() == content for p in shipped)


def read_config(path: str, flag: str = "CONFIG") -> dict[str, Any]:
    """A simulator config's table; a directory, binary or unreadable file, or a TOML file of
    another kind (a model configuration, a baseline, ...) is one ConfigError line."""
    check_input_file(path, flag)
    data = read_toml(path)  # not UTF-8, not TOML: one line naming the path (model/config.py)
    require_kind(data, "sim", flag, path)
    return data


def check_output_file(path: str | None, flag: str, formats: tuple[str, ...] | None = None) -> None:
    """``path`` can be written: its directory exists and is writable, it is not a directory,
    and (with ``formats``) its extension is one of them. Checked before any work starts."""
    if not path:
        return
    if formats is not None and os.path.splitext(path)[1].lower() not in formats:
        raise ConfigError(f"{flag} {path}: unsupported file type; end the name with {' or '.join(formats)}")
    if os.path.isdir(path):
        raise ConfigError(f"{flag} {path}: is a directory; give a file name")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ConfigError(f"{flag} {path}: directory {parent} does not exist; create it first or write elsewhere")
    if not os.access(parent, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise ConfigError(f"{flag} {path}: not writable; write elsewhere or fix the permissions")
    try:  # the only test that holds for root, /proc and read-only file systems alike
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".failclosed-probe-"):
            pass
    except OSError as e:
        raise ConfigError(f"{flag} {path}: cannot write in {parent} ({(e.strerror or str(e)).lower()}); "
                          "write elsewhere") from None


def check_output_dir(path: str | None, flag: str) -> None:
    """``path`` is a writable directory, or can be created (its parent exists, writable)."""
    if not path:
        return
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise ConfigError(f"{flag} {path}: exists and is not a directory; give a directory")
        if not os.access(path, os.W_OK):
            raise ConfigError(f"{flag} {path}: not writable; write elsewhere or fix the permissions")
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ConfigError(f"{flag} {path}: directory {parent} does not exist; create it first or write elsewhere")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"{flag} {path}: cannot be created in {parent} (not writable); write elsewhere")


def terminal_width() -> int:
    """The terminal's width (COLUMNS wins); 100 when the output is not a terminal."""
    return max(40, shutil.get_terminal_size((100, 24)).columns)


# -- one simulation, its counterexamples written ---------------------------------------------
def simulate_and_write(raw: Any, violations_dir: str | OutputSet | None = None,
                       **kw: Any) -> tuple[dict[str, Any], Any]:
    """``sim.batch.simulate_one(raw, **kw)`` (``raw``: a configuration, validated or its
    TOML table), and each violation's counterexample written as a
    scenario file under ``violations_dir`` (its path in the violation's ``"scenario"``). An
    interrupted ``history`` is reported on stderr (the engine removed its temporary file)."""
    history = kw.get("history")
    try:
        res, sim = simulate_one(raw, **kw)
    except BaseException:
        if history:
            print(f"failclosed simulate: {history} not written (the simulation did not finish); "
                  "an earlier file of that name is untouched", file=sys.stderr)
        raise
    if violations_dir:
        write_scenarios(res, sim.violations, violations_dir, kw.get("scenarios", SCENARIOS_PER_PROPERTY))
    return res, sim


def write_scenarios(res: dict[str, Any], violations: list[Any], directory: str | OutputSet,
                    cap: int | None) -> None:
    """Each violation's counterexample that has a scenario (the first ``cap`` of each property;
    None: every one) written under ``directory``, its path in the violation's ``"scenario"``;
    ``res["scenarios"]`` says how many were written, how many were not, and how to lift the cap."""
    written = 0
    for k, (v, d) in enumerate(zip(violations, res["violations"], strict=True)):
        if v.scenario is not None:
            d["scenario"] = write_violation(res["policy"], res["seed"], v, k, directory)
            written += 1
    final = directory.final if isinstance(directory, OutputSet) else directory
    res["scenarios"] = {"directory": str(final), "written": written,
                        "not_written": len(violations) - written,
                        "max_per_property": "all" if cap is None else cap,
                        "lift_the_cap": f"{MAX_SCENARIOS_FLAG} all"}


def write_violation(policy: str, seed: int, v: Any, k: int, directory: str | OutputSet) -> str:
    """Write the ``k``-th violation's trace as a scenario file; returns its path (in an
    OutputSet, cli/outputs.py: written into its staging directory, the path it will have)."""
    staged = isinstance(directory, OutputSet)
    where = str(directory.staging) if staged else directory
    os.makedirs(where, exist_ok=True)
    path = os.path.join(where, f"sim-{_safe(policy)}-seed{seed}-{v.property}-{k}.toml")
    write_scenario(path, violation_scenario(v, policy, seed))
    return str(directory.final_path(path)) if staged else path


def _safe(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in s)


# -- baselines -------------------------------------------------------------------------------
def _baseline_name(path: str) -> str:
    """A baseline as the output names it: the shipped one by its place in the package (the
    same wherever it is installed; ``--baseline current`` names it), any other by its path."""
    if os.path.abspath(path) == os.path.abspath(default_baseline_path()):
        return "spec/baselines/current.toml"
    return rel_path(path)


def default_baseline_path() -> str:
    return str(Path(spec.__file__).resolve().parent / "baselines" / "current.toml")


def load_known(path: str):
    """The baseline at ``path`` (spec/baseline.py; one ConfigError line if it is unusable)."""
    check_input_file(str(resolve_baseline(path)), "--baseline")
    return load_baseline_arg(path)


# -- simulate --------------------------------------------------------------------------------
def _cmd_simulate(args: argparse.Namespace) -> int:
    if args.fail_fast and args.keep_going:
        raise UsageError("--fail-fast and --keep-going contradict each other; give one of them")
    side = args.config is None and args.policy is None
    path = resolve_sim_config(args.config) if args.config else sconfig.default_path()
    raw = read_config(path)
    cfg = sconfig.load(raw)  # validate before anything runs
    if args.policy:
        parse_policy(args.policy)
    policies = list(SIDE_BY_SIDE) if side else [args.policy or cfg.policy]
    if args.history and len(policies) > 1:
        raise UsageError("--history: give a CONFIG or --policy to record one history (the side-by-side run simulates several)")
    check_output_file(args.json, "--json")
    check_output_file(args.history, "--history")
    check_output_dir(args.violations_dir, "--violations-dir")
    export_policy = _check_export(args, policies)

    check_junit(args)
    baseline_path = args.baseline
    if baseline_path is None and is_shipped_config(path) and not args.no_baseline:
        baseline_path = default_baseline_path()
    if args.no_baseline:
        baseline_path = None
    baseline = load_known(baseline_path) if baseline_path else None
    n_runs = args.runs if args.runs is not None else cfg.runs
    if n_runs > sconfig.MAX_RUNS:
        raise UsageError(f"--runs {n_runs}: above the limit of {sconfig.MAX_RUNS:,} runs per "
                         "simulation; give fewer (or sweep several seeds)")
    seed = args.seed if args.seed is not None else cfg.seed

    hdir = headline_dir() if side and not args.violations_dir else None
    # --violations-dir: the scenarios are one set, all in place at the end or none
    with output_set(args.violations_dir) as vset:
        return _simulate(args, cfg, path, policies, side, seed, n_runs, baseline, baseline_path,
                         hdir, export_policy, vset)


def _simulate(args, cfg, path, policies, side, seed, n_runs, baseline, baseline_path, hdir,
              export_policy: str | None, vset: OutputSet | None = None) -> int:
    """``cfg``: the configuration, validated once (sim/config.py ``load``)."""

    results: list[dict[str, Any]] = []
    viol_objs: dict[str, list] = {}
    stop: dict[str, Any] | None = None
    t0 = time.perf_counter()
    with Progress("simulate", total=len(policies) * n_runs, unit="runs", enabled=not args.quiet,
                  clock=time.monotonic) as pg:
        kws = [dict(policy=pol, seed=seed, runs=n_runs, keep_going=not args.fail_fast, history=args.history,
                    export=args.export if pol == export_policy else None, export_privacy=args.export_privacy,
                    scenarios=args.max_scenarios) for pol in policies]
        done = _simulations(cfg, kws, args.jobs, pg, n_runs)
        try:
            for pol, (res, violations) in zip(policies, done, strict=False):
                if vset is not None:
                    write_scenarios(res, violations, vset, args.max_scenarios)
                results.append(res)
                viol_objs[pol] = violations
                props = len({v["property"] for v in res["violations"]})
                pg.note(f"failclosed simulate: {pol}: {plural(res['runs_simulated'], 'run')}, "
                        + (f"{plural(props, 'property', 'properties')} violated" if props else "all properties hold")
                        + f" ({res['elapsed_seconds']:.1f} s)")
                if args.fail_fast and violations:
                    v = violations[0]
                    stop = {"policy": pol, "property": v.property, "runs": v.runs, "time": v.time,
                            "runs_simulated": res["runs_simulated"], "runs_finished": res["metrics"]["finished"],
                            "not_simulated": policies[len(results):]}
                    break
        finally:
            done.close()  # stopped early (--fail-fast) or interrupted: no worker goes on
    total = time.perf_counter() - t0

    verdict = judge(results, baseline, Path(path).stem, stop is not None)
    known = verdict["knowns"] if baseline is not None else None
    headline = None
    if hdir is not None and stop is None:
        headline = _write_headline(results, viol_objs, known, seed, hdir)
    if baseline is not None:  # the verdict per simulation, for a CI job reading the JSON
        for r in results:
            pol = r["policy"]
            r["baseline"] = {"file": baseline_path,
                             "known": sorted(q for p, q in verdict["known"] if p == pol),
                             "new": sorted(q for p, q in verdict["new"] if p == pol),
                             "fixed": sorted(k.property for k in verdict["fixed"] if k.policy == pol)}
    if args.json:
        write_text_atomic(args.json, json.dumps(results if side else results[0], indent=1,
                                                sort_keys=True))
    _junit(args, results, viol_objs, verdict, seed, Path(path).stem, total)
    report(results, path, total, verdict, stop=stop, known=known, baseline_path=baseline_path,
           headline=headline, side=side, violations_dir=args.violations_dir, n_runs=n_runs, seed=seed,
           cfg=cfg)
    for r in results:
        if "export" in r:
            print(export_line(r))
    return 1 if verdict["new"] else 0


def export_line(r: dict[str, Any]) -> str:
    """What an export holds, and why it holds fewer runs than ``--runs`` asked for."""
    e = r["export"]
    why = []
    if e.get("runs_without_row"):
        why.append(f"{e['runs_without_row']} whose start_run/enqueue_run failed, so the runtime stored no row")
    if r["runs_not_admitted"]:
        cause = "the simulation stopped first" if r["ended_by"] == "stop" else "the drain ended first (above)"
        why.append(f"{r['runs_not_admitted']:,} never simulated: {cause}")
    held = f"{e['runs']:,} runs" + (f" of the {r['runs']:,} asked for ({'; '.join(why)})" if why else "")
    return (f"{r['policy']}'s simulation exported to {e['path']}: {held}, {e['events']:,} events "
            f"(privacy {e['privacy']}); read it with: failclosed inspect {e['path']}")


def _simulations(cfg: Any, kws: list[dict[str, Any]], jobs: int, pg: Any, n_runs: int):
    """(result, violations) of ``simulate_one(cfg, **kw)`` for each ``kw``, in order: in this
    process (progress per run) or, with ``jobs`` > 1, on that many spawned processes (progress
    per simulation; the same results: a simulation depends on its seed and config alone)."""
    if jobs > 1 and len(kws) > 1:
        for res, violations in run_in_processes(simulate_policy, [(cfg, kw) for kw in kws], jobs):
            pg.advance(n_runs)
            yield res, violations
        return
    for kw in kws:
        counted = [0]

        def tick(n: int, counted=counted) -> None:
            counted[0] = n
            pg.advance()

        res, sim = simulate_and_write(cfg, None, on_archive=tick, **kw)
        pg.advance(max(0, n_runs - counted[0]))  # runs left unfinished at the end count as done
        yield res, sim.violations
        del sim


def _check_export(args: argparse.Namespace, policies: list[str]) -> str | None:
    """``--export DB.sqlite | DIR``: one simulation's runs and events in the runtime's schema;
    the side-by-side run exports current's (the runtime the tables come from). Returns the
    policy whose simulation is exported."""
    if not args.export:
        return None

    if is_sqlite_target(args.export):
        check_output_file(args.export, "--export", SQLITE_SUFFIXES)
    elif os.path.splitext(args.export)[1]:
        raise ConfigError(f"--export {args.export}: end the name with {' or '.join(SQLITE_SUFFIXES)} for an SQLite "
                          "file, or give a directory for CSV files")
    else:
        check_output_dir(args.export, "--export")
    return "current" if len(policies) > 1 else policies[0]


def _junit(args, results, viol_objs, verdict, seed: int, config: str, seconds: float) -> None:
    """--junit: a case per (policy, safety property) simulated; a new violation fails with
    its shortest violating trace (the transitions the scenario file replays)."""
    if not getattr(args, "junit", None):
        return

    def trace(pol: str, prop: str) -> str:
        vs = [v for v in viol_objs.get(pol, []) if v.property == prop and v.scenario is not None]
        if not vs:
            return f"{prop} violated under {pol} (no trace kept)"
        v = min(vs, key=lambda x: len(x.scenario["steps"]))
        doc = violation_scenario(v, pol, seed)
        return "\n".join([doc["description"], *(f"{k:>5}  {t}" for k, t in enumerate(doc["steps"], 1))])

    cells = [(r["policy"], prop, (r["policy"], prop) in verdict["violated"])
             for r in results for prop in load_safety()[0]]
    write_junit(args, f"simulate {config} (seed {seed})",
                cell_cases(f"failclosed.simulate.{config}", cells, set(verdict["new"]),
                           verdict["knowns"], trace), seconds)


def judge(results: list[dict[str, Any]], baseline: Any, config: str, stopped: bool) -> dict[str, Any]:
    """The verdict: the violated (policy, property) pairs (with their violating runs) split
    into new and known (``knowns``: pair -> the baseline's entry), and the baseline entries
    reported as fixed (spec/baseline.py: only an entry without ``config``, or observed on a
    configuration of this name, is judged; a stopped simulation judges none)."""
    violated: dict[tuple[str, str], int] = {}
    for r in results:
        for v in r["violations"]:
            key = (r["policy"], v["property"])
            violated[key] = violated.get(key, 0) + len(v["runs"])
    if baseline is None:
        return {"violated": violated, "new": sorted(violated), "known": [], "knowns": {}, "fixed": []}
    cells = {k: True for k in violated}
    if not stopped:
        for r in results:
            for prop in load_safety()[0]:
                cells.setdefault((r["policy"], prop), False)
    cmp = baseline.compare(cells, config)
    knowns = cmp.matched  # the observed cell -> its entry (a variant's: its preset's entry)
    return {"violated": violated, "new": sorted(cmp.new), "known": sorted(knowns), "knowns": knowns,
            "fixed": list(cmp.fixed)}


def finding_label(k: Any) -> str:
    """A known entry's short name: its finding (F1), else the RUNTIME 16.x narrative
    its reason cites, else 'known'."""
    if getattr(k, "finding", None):
        return k.finding
    m = re.search(r"\b16\.\d+(?:/16\.\d+)?", k.reason)
    if m:
        return m.group(0)
    return "not a finding" if k.reason.lower().startswith("not a finding") else "known"


def first_clause(text: str) -> str:
    """The reason up to its first '; ' or '. ' outside parentheses (the whole reason is in
    the baseline file)."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch in ";." and depth == 0 and text[i + 1:i + 2] == " " and i > 0 and not text[i - 1].isdigit():
            return text[:i]
    return text


def _policy_rank(pol: str, order: list[str]) -> tuple[int, int]:
    return (0 if pol == "current" else 1, order.index(pol))


def _headline_violation(results, viol_objs, known):
    """The violation the closing advice replays: a new one first, else current's, one that
    is a finding (F1..) before one that is not, in property order (the central guarantees
    first); None if nothing was violated."""
    order = [r["policy"] for r in results]
    prop_rank = {n: k for k, n in enumerate(SAFETY)}
    best = None
    for pol, vs in viol_objs.items():
        for k, v in enumerate(vs):
            if v.scenario is None:
                continue
            entry = known.get((pol, v.property)) if known is not None else None
            finding = bool(entry is not None and getattr(entry, "finding", None))
            key = (entry is not None, _policy_rank(pol, order), not finding, prop_rank.get(v.property, 99), v.time)
            if best is None or key < best[0]:
                best = (key, pol, k, v)
    return best


HEADLINE_DIR = "scenarios"  # under the cache (spec.scope.Cache.default_root)


def headline_dir() -> str:
    """The user's directory for the scenario the closing advice replays: ``scenarios/`` in
    the cache (``$FAILCLOSED_CACHE``, else ~/.cache/failclosed), where each file is named by
    its content (:func:`write_headline_file`), so a rerun writes the same file again and no
    run leaves a folder of its own behind; made before any work, so a cache that cannot be
    written is one line first."""
    root = Cache.default_root() / HEADLINE_DIR
    try:
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=root, prefix=".failclosed-probe-"):
            pass
    except OSError as e:
        raise UsageError(f"cannot write in {root} for the scenario to replay "
                         f"({(e.strerror or str(e)).lower()}); set FAILCLOSED_CACHE or give "
                         "--violations-dir DIR") from None
    return str(root)


def write_headline_file(policy: str, seed: int, v: Any, directory: str) -> str:
    """The violation's scenario in ``directory``, named ``sim-POLICY-seedN-PROPERTY-DIGEST.toml``
    by the SHA-256 of its text: written beside it and renamed, so the file is whole, and the
    same run writes the same name again (nothing accumulates but distinct scenarios)."""
    fd, tmp = tempfile.mkstemp(prefix=".sim-", suffix=".partial", dir=directory)
    os.close(fd)
    try:
        write_scenario(tmp, violation_scenario(v, policy, seed))
        digest = hashlib.sha256(Path(tmp).read_bytes()).hexdigest()[:12]
        path = os.path.join(directory, f"sim-{_safe(policy)}-seed{seed}-{v.property}-{digest}.toml")
        as_umask_allows(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path



def _write_headline(results, viol_objs, known, seed, directory: str) -> dict[str, Any] | None:
    best = _headline_violation(results, viol_objs, known)
    if best is None:
        return None
    _key, pol, k, v = best
    path = write_headline_file(pol, seed, v, directory)
    k = known.get((pol, v.property)) if known is not None else None
    return {"policy": pol, "property": v.property, "runs": v.runs, "time": v.time, "path": path,
            "known": k is not None, "label": finding_label(k) if k is not None else ""}


# -- the report ---------------------------------------------------------------------------------
def _pct(w: dict[str, Any]) -> str:
    if w.get("p") is None:
        return "-"
    if w.get("lo") is None:  # one section: no interval
        return f"{100 * w['p']:.1f}%"
    return f"{100 * w['p']:.1f}% [{100 * w['lo']:.1f}, {100 * w['hi']:.1f}]"


def _q(d: dict[str, Any], key: str) -> str:
    v = d.get(key)
    if not v:
        return "-"
    if v[1] is None:
        return f"{v[0]:,.0f}"
    return f"{v[0]:,.0f} [{v[1]:,.0f}, {v[2]:,.0f}]"


def _f(x: float | None, nd: int) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """``3 runs``, ``1 policy``, ``1,234 runs``: with thousands separators, as every command
    writes its counts (cli.checking.plural)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def fit_tables(header: str, columns: list[str], rows: list[tuple[str, list[str]]], width: int) -> list[Any]:
    """Tables of ``rows`` (a label and one cell per column, rich markup allowed) no wider
    than ``width``: as many columns per table as fit, the label column repeated in each.
    Labels and cells are never cut (a single column wider than ``width`` still gets a table)."""
    # lazy: rich costs start-up x1.04 to x1.10 CPU for every command; only the printed table needs it
    from rich import box
    from rich.console import Console
    from rich.table import Table

    def make(cols: list[int]) -> Table:
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1))
        t.add_column(header, style="bold", no_wrap=True)
        for c in cols:
            t.add_column(columns[c], justify="right", no_wrap=True)
        for label, cells in rows:
            t.add_row(label, *[cells[c] for c in cols])
        return t

    def wide(t: Table) -> int:
        con = Console(width=10_000, file=open(os.devnull, "w"), color_system=None)  # noqa: SIM115
        with con.capture() as cap:
            con.print(t)
        con.file.close()
        return max((len(line.rstrip()) for line in cap.get().splitlines()), default=0)

    tables, start = [], 0
    while start < len(columns):
        end = start + 1
        while end < len(columns) and wide(make(list(range(start, end + 1)))) <= width:
            end += 1
        tables.append(make(list(range(start, end))))
        start = end
    return tables


def _count(by_outcome: dict[str, int], outcome: str | None) -> str:
    """The unaudited applications in runs of one outcome (None: the outcomes not listed first)."""
    # lazy: sim.metrics imports scipy (sim.stats), start-up x2.1 CPU for every command
    from failclosed.sim.metrics import UNAUDITED_OUTCOMES

    if outcome is None:
        return f"{sum(n for o, n in by_outcome.items() if o not in UNAUDITED_OUTCOMES):,}"
    return f"{by_outcome.get(outcome, 0):,}"


def _metric_rows(results: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    # lazy: sim.metrics imports scipy (sim.stats), start-up x2.1 CPU for every command
    from failclosed.sim.metrics import UNAUDITED_OUTCOMES, failure_rows

    ni, iw = "non_idempotent_write", "idempotent_write"
    spec = [
        ("runs simulated", lambda r: f"{r['runs_simulated']:,}"
         + (f" of {r['runs']:,}" if r["runs_simulated"] < r["runs"] else "")
         + (" (stopped)" if r["stopped_early"] else "")),
        ("finished / unfinished", lambda r: f"{r['metrics']['finished']:,} / {r['metrics']['unfinished']:,}"),
        ("completed", lambda r: _pct(r["metrics"]["completed"])),
        ("dead-lettered", lambda r: _pct(r["metrics"]["dead_letter"])),
        ("failed provider_failed", lambda r: f"{r['outcomes'].get('failed/provider_failed', 0):,}"),
        ("stuck (unfinished at end)", lambda r: _pct(r["metrics"]["stuck"])),
    ]
    tail = [
        ("non-idem. write calls", lambda r: f"{r['metrics']['writes'][ni]['logical_calls']:,}"),
        ("  applied twice or more", lambda r: _pct(r["metrics"]["writes"][ni]["double"])),
        ("  applications per call", lambda r: _f(r["metrics"]["writes"][ni]["per_call"], 3)),
        ("idem. write calls", lambda r: f"{r['metrics']['writes'][iw]['logical_calls']:,}"),
        ("  applied twice or more", lambda r: _pct(r["metrics"]["writes"][iw]["double"])),
        ("unaudited applications", lambda r: _pct(r["metrics"]["unaudited_applications"])),
        *[(f"  in runs {o.replace('_', '-')}", lambda r, o=o: _count(r["metrics"]["unaudited_by_outcome"], o))
          for o in UNAUDITED_OUTCOMES],
        ("  in runs ended otherwise/unfinished", lambda r: _count(r["metrics"]["unaudited_by_outcome"], None)),
        ("reaped while segment alive", lambda r: _pct(r["metrics"]["reaped_while_alive"])),
        ("wasted work (LEASE_LOST)", lambda r: f"{r['metrics']['wasted_work']['seconds']:,.0f} s"),
        ("renewals per run", lambda r: _f(r["metrics"]["renewals"]["per_run"], 1)),
        ("queue wait p50 s", lambda r: _q(r["metrics"]["queue_wait_s"], "p50")),
        ("end-to-end p50 s", lambda r: _q(r["metrics"]["end_to_end_s"], "p50")),
        ("end-to-end p99 s", lambda r: _q(r["metrics"]["end_to_end_s"], "p99")),
        ("throughput runs/h", lambda r: f"{r['metrics']['throughput_per_hour']:,.0f}"),
        ("transitions asserted", lambda r: f"{r['asserted_enabled']:,}"),
        ("  + clock moves", lambda r: f"{r['transitions'] - r['asserted_enabled']:,}"),
        ("history sha256 (records)", lambda r: r["history_sha256"][:16]),
        ("wall time", lambda r: f"{r['elapsed_seconds']:.2f} s"),
    ]
    rows = [(name, [fn(r) for r in results]) for name, fn in spec]
    frows = [dict(failure_rows(r["metrics"])) for r in results]
    for label in dict.fromkeys(k for fr in frows for k in fr):  # by class, by concrete error
        rows.append((label, [fr.get(label, "-") for fr in frows]))
    return rows + [(name, [fn(r) for r in results]) for name, fn in tail]


def _property_rows(results: list[dict[str, Any]], verdict: dict[str, Any],
                   known: dict | None) -> list[tuple[str, list[str]]]:
    order = {n: k for k, n in enumerate(SAFETY)}
    props = sorted({p for (_pol, p) in verdict["violated"]}, key=lambda p: (order.get(p, 99), p))

    def cell(pol: str, p: str) -> str:
        n = verdict["violated"].get((pol, p), 0)
        if not n:
            return "[green]ok[/]"
        if known is None:
            return f"[red]{plural(n, 'run')}[/]"
        k = known.get((pol, p))
        return f"[yellow]{n:,} {finding_label(k)}[/]" if k is not None else f"[bold red]{n:,} NEW[/]"

    rows = [("all properties", [
        "[green]hold[/]" if not r["violations"] else f"[red]{len({v['property'] for v in r['violations']})} violated[/]"
        for r in results])]
    rows += [(p, [cell(r["policy"], p) for r in results]) for p in props]
    return rows


def summary_line(results: list[dict[str, Any]], verdict: dict[str, Any], known: dict | None,
                 stop: dict | None, n_runs: int, seed: int) -> str:
    """One closing line, pytest style: ``6 policies x 1000 runs: 2 policies violate 3
    properties, 4 clean (seed 7)``; with a baseline the new and known (policy, property)
    pairs are counted instead: ``... 0 new violations, 23 known, 0 clean (seed 1)``."""
    pols = [r["policy"] for r in results]
    bad_pols = {p for (p, _) in verdict["violated"]}
    props = {q for (_, q) in verdict["violated"]}
    head = f"{plural(len(pols), 'policy', 'policies')} x {plural(n_runs, 'run')}"
    short = [r["runs_simulated"] for r in results if r.get("ended_by") == "drain" and r["runs_not_admitted"]]
    if short and stop is None:
        got = f"{min(short):,}" if min(short) == max(short) else f"{min(short):,} to {max(short):,}"
        head += f" ({got} simulated: the drain ended first)"
    if stop is not None:
        return f"{head}: stopped at the first violation after {plural(stop['runs_simulated'], 'run')} (seed {seed})"
    clean = f"{len(pols) - len(bad_pols)} clean (seed {seed})"
    if not bad_pols:
        return f"{head}: every property holds, {clean}"
    if known is not None:
        new = len(verdict["new"])
        return f"{head}: {new:,} {'NEW' if new else 'new'} violation{'' if new == 1 else 's'}, {len(verdict['known']):,} known, {clean}"
    verb = "violates" if len(bad_pols) == 1 else "violate"
    return f"{head}: {plural(len(bad_pols), 'policy', 'policies')} {verb} {plural(len(props), 'property', 'properties')}, {clean}"


def not_admitted_line(r: dict[str, Any], cfg: Any) -> str:
    """Why a simulation ended with runs that never got a slot: the drain's end came first."""
    m = r["metrics"]
    arrivals = (f"arrivals at {cfg.rate_per_hour:g}/h" if cfg.arrival_kind == "poisson"
                else f"batches of {cfg.batch_size}")
    return (f"{r['policy']}: {r['runs_not_admitted']:,} of the {r['runs']:,} runs were never simulated: "
            f"the simulation ends runs.drain_seconds = {cfg.drain_seconds:g} s after the last arrival, and they "
            f"were still waiting for one of the runs.slots = {cfg.slots} slots ({arrivals}, "
            f"{m['throughput_per_hour']:,.0f} finished/h); the figures cover the {r['runs_simulated']:,} "
            "simulated. To simulate them all raise runs.drain_seconds or workers.count, or lower the arrival rate.")


def report(results, path, total, verdict, *, stop, known, baseline_path, headline, side,
           violations_dir, n_runs, seed, cfg: Any = None) -> None:
    # lazy: rich costs start-up x1.04 to x1.10 CPU for every command; only the printed table needs it
    from rich.console import Console

    width = terminal_width()
    con = Console(width=width, highlight=False, soft_wrap=False)
    where = os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
    if side:
        where = f"the shipped default config, {len(results)} policies side by side"
    con.print(f"[bold]failclosed simulate[/]: {where}")
    con.print(f"seed {seed}, {n_runs:,} runs per policy, "
              f"{sum(r['transitions'] for r in results):,} transitions in {total:.1f} s")
    if stop is not None:
        rest = f"; not simulated: {', '.join(stop['not_simulated'])}" if stop["not_simulated"] else ""
        con.print(f"[bold red]STOPPED at the first violation (--fail-fast)[/]: policy {stop['policy']}, "
                  f"run {', '.join(stop['runs'])}, property {stop['property']}, t={stop['time']:.3f} s; "
                  f"{stop['runs_simulated']:,} of {n_runs:,} runs simulated ({stop['runs_finished']:,} finished){rest}. "
                  "The figures below cover only those runs; drop --fail-fast to count every violation.")
    pols = [r["policy"] for r in results]
    for t in fit_tables("metric", pols, _metric_rows(results), width):
        con.print(t)
    con.print(f"[ ]: 95% intervals, {INTERVAL_NOTE}", soft_wrap=False)
    title = "violating runs per property" + (f" (baseline {_baseline_name(baseline_path)})"
                                             if known is not None else "")
    con.print(title)
    for t in fit_tables("property", pols, _property_rows(results, verdict, known), width):
        con.print(t)
    _report_faults(con, results)
    _report_liveness(con, results)
    _report_refusals(con, results)
    _report_files(con, results, violations_dir)
    if known is not None:
        _report_meaning(con, verdict, known, pols)
    if headline is not None:
        what = "" if known is None else (f"{headline['label']}, " if headline["known"] else "NEW, ")
        con.print(f"Next: look at {headline['policy']}'s violation of {headline['property']} ({what}run "
                  f"{', '.join(headline['runs'])}, t={headline['time']:.3f} s), written as a scenario to "
                  f"{os.path.dirname(headline['path'])}/ (--violations-dir DIR writes the first {MAX_SCENARIOS_FLAG} of each property). "
                  "Replay it step by step (-v prints every transition), and draw it:")

        me, where = command_name(), shlex_quote(rel_path(headline["path"]))
        con.print(f"    {me} replay -v {where}", soft_wrap=True, markup=False)
        con.print(f"    {me} plot swimlane {where} --out swimlane.png", soft_wrap=True, markup=False)
    elif verdict["violated"] and not violations_dir and not side:
        con.print("Next: rerun with --violations-dir DIR to write the counterexamples as scenarios "
                  "(failclosed replay FILE reproduces each).")
    for r in results:
        if r.get("ended_by") == "drain" and r["runs_not_admitted"] > 0 and cfg is not None:
            _hanging(con, not_admitted_line(r, cfg))
    line = summary_line(results, verdict, known, stop, n_runs, seed)
    style = "bold red" if verdict["new"] else ("bold yellow" if verdict["violated"] else "bold green")
    con.print(f"[{style}]{line}[/]")


def rel_path(path: str | None) -> str:
    """``path`` relative to the working directory when it lies below it, else absolute: a
    printed path always opens from where the command ran."""
    if not path:
        return ""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return os.path.abspath(path)
    return rel if not rel.startswith("..") else os.path.abspath(path)


def _report_refusals(con, results) -> None:
    """One line per simulation that the runtime refused something in up front (without a
    transport, RUNTIME 6.4: every enqueue and every reaper tick), by transition."""
    for r in results:
        if r.get("refusals"):
            parts = ", ".join(f"{k} {n:,}" for k, n in r["refusals"].items())
            con.print(f"refused up front, no transport ({r['policy']}): {parts}", markup=False)


def _report_liveness(con, results) -> None:
    """Per simulation: the liveness properties judged at each run's end, and a warning line
    per property the simulator did not judge (sim/liveness.py), never silent about one."""
    for r in results:
        if "liveness" not in r:
            continue
        first, *rest = summary_lines(r["liveness"], r["policy"])
        con.print(first, markup=False)
        for line in rest:
            con.print(f"warning: {line}", markup=False, style="yellow")


def _report_faults(con, results) -> None:
    """One line per simulation: how often each enabled fault kind was drawn; and the warning
    of a kind enabled but never drawn (``Simulation.fault_report``)."""
    def fill(text: str) -> str:
        return textwrap.fill(text, con.width, subsequent_indent="    ", break_long_words=False,
                             break_on_hyphens=False)

    never: dict[str, list[str]] = {}  # kind -> the policies it was never drawn under
    runs: set[int] = set()
    for r in results:
        f = r["faults"]
        drawn = ", ".join(f"{k} {n:,}" for k, n in f["drawn"].items()) or "none enabled"
        con.print(fill(f"faults drawn ({r['policy']}): {drawn}"), markup=False)
        if f["warning"]:
            runs.add(r["runs_simulated"])
            for k in f["never_drawn"]:
                never.setdefault(k, []).append(r["policy"])
    if never:  # one warning for every simulation, not one per policy
        n = f"{min(runs):,}" if len(runs) == 1 else f"{min(runs):,} to {max(runs):,}"
        kinds = "; ".join(f"{k} under {', '.join(p)}" for k, p in never.items())

        con.print(fill(f"warning: fault kinds enabled but never drawn in {n} runs: {kinds} "
                       f"({NEVER_DRAWN_WHY})"), markup=False, style="yellow")


def _report_files(con, results, violations_dir) -> None:
    files = [(r["policy"], v) for r in results for v in r["violations"] if "scenario" in v]
    if files:
        con.print(f"{plural(len(files), 'counterexample scenario')} written to {violations_dir}/, named "
                  "sim-POLICY-seedN-PROPERTY-K.toml (failclosed replay FILE reproduces each):")
    for _pol, v in files[:LIST_FILES]:
        con.print(f"    {v['scenario']}", soft_wrap=True)
    if len(files) > LIST_FILES:
        con.print(f"    and {len(files) - LIST_FILES} more in {violations_dir}/")
    left = sum(r.get("scenarios", {}).get("not_written", 0) for r in results)
    if left:
        cap = next(r["scenarios"]["max_per_property"] for r in results if "scenarios" in r)
        _hanging(con, f"{plural(left, 'violation')} not written as scenarios: at most {cap} per property "
                      f"and policy are kept ({MAX_SCENARIOS_FLAG} {cap}); {MAX_SCENARIOS_FLAG} all writes "
                      "every one (the JSON's scenarios counts them per policy)")


def _hanging(con, text: str) -> None:
    """One item, wrapped to the console's width with a hanging indent."""
    con.print(textwrap.fill(text, con.width, initial_indent="  ", subsequent_indent="      ",
                            break_long_words=False, break_on_hyphens=False), markup=False)


def _report_meaning(con, verdict, known, pols) -> None:
    """What the violations mean: each known one with its finding and the first clause of
    the baseline's reason, each new one, and the entries reported as fixed."""
    order = {n: k for k, n in enumerate(SAFETY)}
    groups: dict[tuple[str, str], tuple[set[str], set[str]]] = {}  # (label, reason) -> props, policies
    for pol, prop in verdict["known"]:
        k = known[(pol, prop)]
        props, ps = groups.setdefault((finding_label(k), k.reason), (set(), set()))
        props.add(prop)
        ps.add(pol)
    if verdict["known"] and not verdict["new"]:
        con.print("What this means: every violation is a known one (the baseline's reasons, in full in the file):")
    elif verdict["known"]:
        con.print("Known violations (the baseline's reasons, in full in the file):")
    for (label, reason), (props, ps) in sorted(groups.items(), key=lambda kv: (min(pols.index(p) for p in kv[1][1]),
                                                                             min(order.get(q, 99) for q in kv[1][0]))):
        names = ", ".join(sorted(props, key=lambda q: order.get(q, 99)))
        _hanging(con, f"{label} {names} ({', '.join(sorted(ps, key=pols.index))}): {first_clause(reason)}")
    if verdict["new"]:
        con.print("[bold red]NEW violations[/] (not in the baseline: a regression, or a finding to record "
                  "in FINDINGS.md and the baseline):")
        for pol, prop in verdict["new"]:
            con.print(f"  [bold red]{prop}[/] under {pol}: {plural(verdict['violated'][(pol, prop)], 'run')}")
    for k in verdict["fixed"]:
        con.print(f"[yellow]warning: fixed[/] (listed in the baseline, holds in this simulation; "
                  f"remove the entry): {k.label()}")


def _cmd_history_hash(args: argparse.Namespace) -> int:
    check_input_file(args.history, "HISTORY")
    try:
        digest, n = file_sha256(args.history)
    except ValueError as e:
        raise ConfigError(f"{args.history}: {e}; give a file written by simulate --history") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{args.history}: not UTF-8 text; give a file written by simulate --history") from None
    print(f"{digest}  {args.history} ({plural(n, 'record')})")
    return 0


def register(subparsers: Any) -> None:
    h = subparsers.add_parser(
        "history-hash", help="recompute the history sha256 of a simulate --history file",
        description="The `history sha256 (records)` that simulate prints (the first 16 hex digits) and "
                    "--json gives in full (history_sha256): SHA-256 over the canonical line of every "
                    "record (compact JSON with sorted keys: t, name, actor and the transition's "
                    "arguments), each followed by a newline; the swimlane notes of the file are left "
                    "out. Same seed and config, same digest. Exit 0; 2: not a history file.")
    h.add_argument("history", metavar="HISTORY.jsonl", help="a file written by simulate --history")
    h.set_defaults(func=_cmd_history_hash)
    p = subparsers.add_parser(
        "simulate", help="run the model in simulated time with faults (SimPy)",
        description="Simulate a workload; without CONFIG, the shipped default under current, the proposal "
                    "and earlier presets side by side, judged against the shipped baseline of known findings. "
                    "Exit 0: nothing new violated; 1: a violation not in the baseline (every violation when "
                    "there is no baseline); 2: bad input.",
    )
    p.add_argument("config", nargs="?",
                   help="a simulator TOML config FILE, or a shipped one by name: "
                        f"{', '.join(shipped_sim_configs())} (without CONFIG: default, under several "
                        "policies side by side)")
    p.add_argument("--policy", help="policy to simulate (default: the config's policy)")
    p.add_argument("--seed", type=int_arg(0, "a seed >= 0"), help="random seed (default: the config's seed)")
    p.add_argument("--runs", type=int_arg(1, "the number of runs, >= 1"),
                   help="number of runs per policy (default: the config's runs.count)")
    p.add_argument("--json", metavar="FILE", help="write the result object(s) as JSON (default: not written)")
    p.add_argument("--history", metavar="FILE.jsonl",
                   help="write the history as JSON lines, complete or not at all (default: not written)")
    p.add_argument("--keep-going", action="store_true",
                   help="count every violating run (the default; kept for compatibility)")
    p.add_argument("--fail-fast", action="store_true",
                   help="stop the whole command at the first violation and say where (default: off)")
    p.add_argument("--violations-dir", metavar="DIR",
                   help="write the violations' counterexample scenarios here, at most --max-scenarios per "
                        "property; the output and the JSON count those not written (default: none written; "
                        "the side-by-side run writes the one it suggests replaying to a temporary directory)")
    p.add_argument(MAX_SCENARIOS_FLAG, type=max_scenarios_arg, default=SCENARIOS_PER_PROPERTY, metavar="N|all",
                   help="the counterexample scenarios kept (and written by --violations-dir) per property: "
                        f"the first N violations of each; all: every one (default: {SCENARIOS_PER_PROPERTY})")
    p.add_argument("--jobs", type=int_arg(1, "the number of local processes, >= 1"), default=1,
                   help="simulate the policies of the side-by-side run on this many processes, the results "
                        "identical to one (default: 1)")
    p.add_argument("--baseline", metavar="FILE",
                   help="a baseline TOML of known violations: those exit 0, anything new exits 1 (or the shipped one "
                        "by name: current; default: current for a shipped config, by name or by path, with or "
                        "without CONFIG; else none)")
    p.add_argument("--no-baseline", action="store_true",
                   help="judge without a baseline: every violation exits 1 (default: off)")
    p.add_argument("--export", metavar="DB.sqlite|DIR",
                   help="write every run and event as the runtime stores them (tx_nrllm_agentrun, "
                        "tx_nrllm_agentrun_event): an SQLite file, or CSV files in DIR; read them with "
                        "failclosed inspect (default: not written)")
    p.add_argument("--export-privacy", choices=("none", "metadata", "redacted", "full"), default="metadata",
                   help="the privacy level the exported payloads are filtered at (default: metadata, the runtime's)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr (default: progress shown)")

    add_junit(p)
    p.set_defaults(func=_cmd_simulate)
