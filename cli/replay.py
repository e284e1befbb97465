"""``failclosed replay``: replay scenario files through the model and check their expectations.

``failclosed replay FILE [--policy P]`` replays one file (or a shipped one by name:
``resolve_scenario``; a file with neither steps nor expectations is refused) (under P: its own ``policy`` and
``[switches]`` set aside); ``replay --all`` every shipped scenario (model/scenarios), as a
table; ``replay --all --policy P`` every shipped scenario and every spec/findings trace under
its own policy and under P, each judged (``_change_row``): a regression (a shipped scenario
whose expectations fail under P), fixed (a findings trace whose violation P removes: it stops
at a step P disables, or its ``violates`` fails; a red historical scenario, ``*.red.toml``,
that fails under P), broken (it does not pass under its own
policy, e.g. "no longer replays at step N: GUARD") or unchanged: exit 1 on a regression or a
broken file, else 0. ``--json`` prints a machine-readable result (on a failure it adds ``world``, a snapshot of
the world where the replay ended, and each failed step expectation its own). The scenario
format and the replay itself are model/scenario.py's.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import textwrap
import time
from pathlib import Path
from typing import Any

from failclosed.cli.checking import table_width
from failclosed.cli.junit import Case, add_junit, check_junit, write_junit
from failclosed.cli.kinds import KINDS, identify
from failclosed.model.config import ConfigError, read_toml
from failclosed.model.policy import UnknownPolicy, parse_policy, split_policy
from failclosed.model.scenario import SCENARIO_DIR, ReplayResult, jsonable, load_scenario, replay
from failclosed.spec.baseline import load_baseline
from failclosed.spec.checker import FINDINGS_DIR

__all__ = ["findings", "register", "shipped"]


def shipped() -> list[Path]:
    """The scenario files shipped with the package (model/scenarios/*.toml)."""
    return sorted(SCENARIO_DIR.glob("*.toml"))


def findings() -> list[Path]:
    """The checker's findings traces (spec/findings/*.toml)."""
    return sorted(FINDINGS_DIR.glob("*.toml"))


def is_red(path: Path) -> bool:
    """A red historical scenario (model/scenarios/*.red.toml, beside the .green.toml of the
    fix): it replays a violation of its era, so a policy under which it no longer does has
    removed that violation, as for a findings trace."""
    return path.name.endswith(".red.toml")


def _package_root() -> Path:
    """The folder holding model/, spec/ and sim/: the checkout, or the installed package."""
    return SCENARIO_DIR.parents[1]


def resolve_scenario(name: str) -> Path:
    """A scenario FILE, or a shipped one by name: a findings trace (spec/findings) or a
    shipped scenario (model/scenarios) by its name (``stream_order--current``) or file name,
    or by its path inside the package (``spec/findings/stream_order--current.toml``, which
    opens from any directory), or a finding's id when it has one trace (``F2``). Else one
    ConfigError line naming the nearest names."""
    p = Path(name)
    if p.exists():
        return p
    shipped_files = [*findings(), *shipped()]
    by_name = {f.stem: f for f in shipped_files} | {f.name: f for f in shipped_files}
    if name in by_name:
        return by_name[name]
    inside = _package_root() / p
    if not p.is_absolute() and inside.is_file():
        return inside
    traces = _finding_traces(name)
    if len(traces) == 1:
        return traces[0]
    if traces:
        raise ConfigError(f"replay {name}: the finding has {len(traces)} traces: "
                          f"{', '.join(t.stem for t in traces)}; give one of them")

    near = difflib.get_close_matches(p.name.removesuffix(".toml"), [f.stem for f in shipped_files],
                                     n=3)
    hint = f"did you mean {', '.join(near)}? " if near else ""
    raise ConfigError(f"replay {name}: no such file, and no shipped scenario or findings trace of "
                      f"that name; {hint}give a path, or the name of a shipped scenario (`failclosed replay "
                      "--all` lists them) or of a findings trace (spec/findings)")


def _finding_traces(finding: str) -> list[Path]:
    """The findings traces of a finding's id (``F2``): the files (named PROPERTY--POLICY...,
    as ``check --out`` names them) of the properties the shipped baseline lists under it."""
    if not re.fullmatch(r"F\d+", finding):
        return []

    props = {k.property for k in load_baseline("current").entries if k.finding == finding}
    return [f for f in findings() if f.stem.split("--")[0] in props]


def _require_content(sc: Any, name: str) -> None:
    """A file with neither steps nor expectations checks nothing: one line, exit 2 (never a
    PASS), saying what the file is when it is a file of another kind."""
    if sc.steps or sc.expect:
        return

    kind = identify(read_toml(sc.path)) if sc.path else None
    what = (f"it is {KINDS[kind][0]} (read by `{KINDS[kind][1]}`); "
            if kind not in (None, "scenario") else "")
    raise ConfigError(f"replay {name}: has no [[steps]] and no expectations ([[expect]], or expect "
                      f"on a step): nothing to replay or check; {what}give a scenario file")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "replay", help="replay a scenario file through the model and check its expectations",
        description="Replay a scenario (a configuration plus [[steps]] and expectations). "
                    "Exit 0: every expectation holds; 1: one fails or a step's guard does "
                    "not hold; 2: the file is malformed. With --all --policy P: every shipped "
                    "scenario and every spec/findings trace under P, against its own policy; "
                    "exit 1 on a regression (a scenario that fails under P) or a file that no "
                    "longer replays under its own policy; a findings trace P fixes is not one.",
    )
    p.add_argument("file", nargs="?", help="a scenario .toml FILE, or a shipped scenario or "
                   "findings trace by name (e.g. stream_order--current, t02-enqueue)")
    p.add_argument("--all", action="store_true", help="replay every shipped scenario (a table)")
    p.add_argument("--policy", metavar="P",
                   help="replay under policy P instead of the file's own (its policy and "
                        "[switches] set aside); with --all: a table of what changed")
    p.add_argument("--json", action="store_true", help="print a machine-readable result")
    p.add_argument("-v", "--verbose", action="store_true", help="print every transition")
    add_junit(p)
    p.set_defaults(func=_cmd_replay)


def _policy_arg(name: str | None) -> str | None:
    if name is None:
        return None
    try:
        parse_policy(name)
    except UnknownPolicy as e:
        raise ConfigError(f"--policy: {e}") from None
    return name


def _result_case(name: str, res: ReplayResult | None, problem: str, seconds: float = 0.0) -> Case:
    """A scenario as a JUnit case: its failure is the first problem, its text the whole
    account (every failed expectation, or the stop and what was enabled there); ``seconds``:
    how long its replay took."""
    c = Case("failclosed.replay", name, seconds=seconds)
    if problem:
        c.failure = problem
        if res is not None:
            lines = [str(f) for f in res.failures]
            if res.stopped:
                lines += [f"STOP {res.stopped}", "enabled at that point:",
                          *(f"  {t}" for t in res.enabled_then)]
            c.text = "\n".join(lines)
    return c


def _cmd_replay(args: argparse.Namespace) -> int:
    policy = _policy_arg(args.policy)
    check_junit(args)
    if args.all:
        if args.file:
            raise ConfigError("replay: give a FILE or --all, not both")
        return _replay_changes(args, policy) if policy else _replay_all(args)
    if not args.file:
        raise ConfigError("replay: give a scenario FILE, or --all for the shipped scenarios")
    t0 = time.perf_counter()
    path = resolve_scenario(args.file)
    sc = load_scenario(path, policy)
    _require_content(sc, args.file)
    res = replay(sc)
    row = _change_row(path, _kind(path, sc), policy) if policy else None
    problem = _first_problem(res)
    if row is not None:  # judged as replay --all judges it: the same word, the same exit
        problem = f"{row['verdict']}: {row['detail']}" if row["verdict"] in FAILING else ""
    write_junit(args, f"replay {args.file}", [_result_case(res.scenario.name, res, problem,
                                                           time.perf_counter() - t0)])
    if args.json:
        print(json.dumps(res.to_dict() | ({"change": row} if row else {}), indent=2))
    else:
        _print_result(res, args.verbose, row)
    if row is not None:
        return 1 if row["verdict"] in FAILING else 0
    return 0 if res.ok else 1


def _kind(path: Path, sc: Any) -> str:
    """How a file under another policy is judged: a red historical scenario, a trace that
    demonstrates a violation (a findings trace, or any file expecting ``violates``), or a
    scenario."""
    if is_red(path):
        return "red"
    if path.resolve() in {f.resolve() for f in findings()} or any("violates" in e for e in sc.expect):
        return "finding"
    return "scenario"


def _print_result(res: ReplayResult, verbose: bool, row: dict[str, Any] | None = None) -> None:
    sc = res.scenario
    print(f"{sc.name}  [{sc.policy}]")
    if sc.description:
        print(f"  {sc.description}")
    if verbose:
        notes = {s.index: s.note for s in sc.steps if s.note}
        last = None
        for r in res.steps:
            if r.step != last and r.step in notes:
                print(f"  # {notes[r.step]}")
            last = r.step
            shown = f" = {jsonable(r.result)!r}" if r.is_store else ""
            print(f"  {r.step:>3}  t={r.world.clock:<5} {r.transition}{shown}")
    for f in res.failures:
        print(f"  FAIL {f}")
    if res.stopped:
        print(f"  STOP {res.stopped}")
        print("  enabled at that point:")
        for t in res.enabled_then:
            print(f"    {t}")
    status = "PASS" if res.ok else "FAIL"
    tail = ""
    if row is not None:  # under another policy: the verdict replay --all gives, its words
        status = row["verdict"].upper() if row["verdict"] in FAILING else row["verdict"]
        tail = (f" under {sc.policy}, against its own policy {row['own_policy']}"
                f"{': ' + row['detail'] if row['detail'] else ''}")
    print(f"{status}: {len(res.steps)} transitions, {res.checked} expectations checked, "
          f"{len(res.failures)} failed{tail}")


def _verdict(path: Path, policy: str | None) -> tuple[str, bool, str, int, int]:
    """(policy name, ok, the first failure or the stop, transitions, expectations checked)."""
    try:
        res = replay(load_scenario(path, policy))
    except ConfigError as e:
        return policy or "?", False, f"malformed: {e}", 0, 0
    return res.scenario.policy, res.ok, _first_problem(res), len(res.steps), res.checked


def _first_problem(res: ReplayResult) -> str:
    """A stop as ``no longer replays at step N: <the guard that failed>``, else the first
    failed expectation ("" when it passed)."""
    if res.stopped:
        guard = res.stopped.split("guard does not hold: ", 1)
        why = guard[1] if len(guard) == 2 else res.stopped.split("): ", 1)[-1]
        return f"no longer replays at step {res.stopped_at}: {why}"
    return str(res.failures[0]) if res.failures else ""


def _violation_removed(res: ReplayResult) -> bool:
    """Under the other policy a trace that demonstrates a violation shows it no more: it stops
    at a step the policy disables, or its ``violates`` expectation fails."""
    return bool(res.stopped) or any(f.key.startswith("violates ") for f in res.failures)


def _replay_all(args: argparse.Namespace) -> int:
    rows = []
    took = []
    bad = 0
    for path in shipped():
        t0 = time.perf_counter()
        pol, ok, note, s, c = _verdict(path, None)
        took.append(time.perf_counter() - t0)
        rows.append((path.stem, pol, s, c, ok, note))
        bad += not ok
    write_junit(args, "replay --all", [_result_case(f"{n} [{p}]", None, d if not ok else "", t)
                                       for (n, p, _s, _c, ok, d), t in zip(rows, took, strict=True)])
    if args.json:
        print(json.dumps([
            {"scenario": n, "policy": p, "transitions": s, "checked": c, "ok": ok, "detail": d}
            for n, p, s, c, ok, d in rows], indent=2))
    else:
        w = max((len(r[0]) for r in rows), default=8)
        pw = max((len(r[1]) for r in rows), default=6)
        print(f"{'scenario':<{w}}  {'policy':<{pw}}  steps  checks  result")
        for n, p, s, c, ok, d in rows:
            print(f"{n:<{w}}  {p:<{pw}}  {s:>5}  {c:>6}  {'PASS' if ok else 'FAIL ' + d}")
        print(f"{len(rows) - bad}/{len(rows)} scenarios pass")
    return 0 if bad == 0 else 1


def reference_policy(policy: str) -> str:
    """What ``policy`` is a change of: the preset of a variant (``current-write_fence`` ->
    ``current``), else ``current``, the runtime as it is. A file that fails under ``policy``
    and fails the same way under this one shows what was already so, not the change."""
    preset, changes = split_policy(policy)
    return preset if changes else "current"


def _judge(kind: str, own: ReplayResult, under: ReplayResult) -> tuple[str, str]:
    """(verdict, detail) of a file passing or not under its own policy and under another."""
    if not own.ok:
        return ("fixed" if under.ok else "broken"), f"under its own policy: {_first_problem(own)}"
    if under.ok:
        return "unchanged", ""
    if (kind == "finding" and _violation_removed(under)) or kind == "red":
        return "fixed", (_first_problem(under) + " (the policy disables that step)" if under.stopped
                         else f"the violation is gone ({_first_problem(under)})")
    return "regression", _first_problem(under)


def _change_row(path: Path, kind: str, policy: str) -> dict[str, Any]:
    """One file under its own policy and under ``policy``, and what that means:

    - ``broken``: it does not pass under its own policy (it no longer replays, or an
      expectation fails): the file is stale, whatever ``policy`` does;
    - ``fixed``: a findings trace whose violation ``policy`` removes (it stops at a step the
      policy disables, or the violation is gone), a red historical scenario (``is_red``)
      that no longer replays its violation under ``policy``, or a file that passes only
      under ``policy``;
    - ``regression``: a shipped scenario whose expectations fail under ``policy``, or that
      no longer replays under it;
    - ``already``: a regression under ``policy`` that is one under
      ``reference_policy(policy)`` too (the preset the change starts from, else current): so
      before the change (a scenario recorded under proposed fails under current), not the
      change's doing (exit 0);
    - ``unchanged``: the same verdict both ways (a findings trace still violated, say).
    """
    ref = reference_policy(policy)
    try:
        own = replay(load_scenario(path))
        under = replay(load_scenario(path, policy))
        verdict, detail = _judge(kind, own, under)
        if verdict == "regression":
            same = policy == ref or _judge(kind, own, replay(load_scenario(path, ref)))[0] == verdict
            if same:
                detail = f"so under {ref} already: {detail}"
                verdict = "already"
    except ConfigError as e:
        return {"file": path.stem, "kind": kind, "own_policy": "?", "before": "FAIL",
                "after": "FAIL", "changed": False, "verdict": "broken", "detail": f"malformed: {e}",
                "reference": ref}
    return {"file": path.stem, "kind": kind, "own_policy": own.scenario.policy,
            "before": "PASS" if own.ok else "FAIL", "after": "PASS" if under.ok else "FAIL",
            "changed": own.ok != under.ok, "verdict": verdict, "detail": detail, "reference": ref}


VERDICTS = ("regression", "broken", "fixed", "already", "unchanged")
FAILING = ("regression", "broken")  # the verdicts that exit 1


def _replay_changes(args: argparse.Namespace, policy: str) -> int:
    """Every shipped scenario and findings trace under its own policy and under ``policy``:
    what changed, judged (``_change_row``). Exit 1 on a regression or a file broken under
    its own policy; a findings trace the policy fixes is the fix working (exit 0)."""
    rows, took = [], []
    for kind, paths in (("scenario", shipped()), ("finding", findings())):
        for path in paths:
            t0 = time.perf_counter()
            rows.append(_change_row(path, "red" if kind == "scenario" and is_red(path) else kind,
                                    policy))
            took.append(time.perf_counter() - t0)
    count = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    n_sc = sum(r["kind"] != "finding" for r in rows)
    ref = reference_policy(policy)
    summary = (f"{len(rows)} under {policy} ({n_sc} scenarios, {len(rows) - n_sc} findings): "
               f"{plural(count['regression'], 'regression')}, {count['fixed']} fixed, "
               f"{count['broken']} broken, {count['already']} already so under {ref} (not the "
               f"change's), "
               f"{count['unchanged']} unchanged")
    rc = 1 if any(count[v] for v in FAILING) else 0
    write_junit(args, f"replay --all --policy {policy}", [
        _result_case(f"{r['file']} [{r['kind']}, own policy {r['own_policy']}]", None,
                     f"{r['verdict']}: {r['detail']}" if r["verdict"] in FAILING
                     else "", t) for r, t in zip(rows, took, strict=True)])
    if args.json:
        print(json.dumps({"policy": policy, "reference": ref,
                          "changed": sum(r["changed"] for r in rows),
                          "counts": count, "rows": rows, "summary": summary, "exit_code": rc},
                         indent=2))
    else:
        _print_changes([r for r in rows if r["verdict"] != "unchanged"], policy)
        print(textwrap.fill(summary, table_width(), subsequent_indent="  "))
    return rc


def plural(n: int, word: str) -> str:
    return f"{n} {word if n == 1 else word + 's'}"


def _print_changes(rows: list[dict[str, Any]], policy: str) -> None:
    """The rows that are not unchanged, regressions first: a line per file (its verdict
    under ``policy``, its kind and own policy), then the detail, wrapped to the terminal."""
    width = table_width()
    rows = sorted(rows, key=lambda r: VERDICTS.index(r["verdict"]))
    vw = max((len(r["verdict"]) for r in rows), default=0)
    for r in rows:
        word = r["verdict"].upper() if r["verdict"] in FAILING else r["verdict"]
        print(textwrap.fill(f"{word:<{vw}}  {r['file']} ({r['kind']}, own policy {r['own_policy']})",
                            width, subsequent_indent=" " * (vw + 4), break_on_hyphens=False))
        print(textwrap.fill(r["detail"], width, initial_indent="    ", subsequent_indent="      ",
                            break_on_hyphens=False, break_long_words=False))
