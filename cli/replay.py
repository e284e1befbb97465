"""``failclosed replay``: replay scenario files through the model and check their expectations.

``failclosed replay FILE [--policy P]`` replays one file (under P: its own ``policy`` and
``[switches]`` set aside); ``replay --all`` every shipped scenario (model/scenarios), as a
table; ``replay --all --policy P`` every shipped scenario and every spec/findings trace under
its own policy and under P, and prints what changed (passed and fails now, with the first
failure; or the reverse, with the failure P fixed): exit 0 if nothing changed, 1 if something
did. ``--json`` prints a machine-readable result (on a failure it adds ``world``, a snapshot of
the world where the replay ended, and each failed step expectation its own). The scenario
format and the replay itself are model/scenario.py's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from failclosed.model.config import ConfigError
from failclosed.model.policy import UnknownPolicy, parse_policy
from failclosed.model.scenario import SCENARIO_DIR, ReplayResult, jsonable, load_scenario, replay

__all__ = ["findings", "register", "shipped"]


def shipped() -> list[Path]:
    """The scenario files shipped with the package (model/scenarios/*.toml)."""
    return sorted(SCENARIO_DIR.glob("*.toml"))


def findings() -> list[Path]:
    """The checker's findings traces (spec/findings/*.toml)."""
    from failclosed.spec.checker import FINDINGS_DIR

    return sorted(FINDINGS_DIR.glob("*.toml"))


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "replay", help="replay a scenario file through the model and check its expectations",
        description="Replay a scenario (a configuration plus [[steps]] and expectations). "
                    "Exit 0: every expectation holds; 1: one fails or a step's guard does "
                    "not hold; 2: the file is malformed. With --all --policy P: every shipped "
                    "scenario and every spec/findings trace under P, against its own policy; "
                    "exit 0: nothing changed, 1: something did.",
    )
    p.add_argument("file", nargs="?", help="a scenario .toml file")
    p.add_argument("--all", action="store_true", help="replay every shipped scenario (a table)")
    p.add_argument("--policy", metavar="P",
                   help="replay under policy P instead of the file's own (its policy and "
                        "[switches] set aside); with --all: a table of what changed")
    p.add_argument("--json", action="store_true", help="print a machine-readable result")
    p.add_argument("-v", "--verbose", action="store_true", help="print every transition")
    p.set_defaults(func=_cmd_replay)


def _policy_arg(name: str | None) -> str | None:
    if name is None:
        return None
    try:
        parse_policy(name)
    except UnknownPolicy as e:
        raise ConfigError(f"--policy: {e}") from None
    return name


def _cmd_replay(args: argparse.Namespace) -> int:
    policy = _policy_arg(args.policy)
    if args.all:
        if args.file:
            raise ConfigError("replay: give a FILE or --all, not both")
        return _replay_changes(args, policy) if policy else _replay_all(args)
    if not args.file:
        raise ConfigError("replay: give a scenario FILE, or --all for the shipped scenarios")
    res = replay(load_scenario(args.file, policy))
    if args.json:
        print(json.dumps(res.to_dict(), indent=2))
    else:
        _print_result(res, args.verbose)
    return 0 if res.ok else 1


def _print_result(res: ReplayResult, verbose: bool) -> None:
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
    print(f"{status}: {len(res.steps)} transitions, {res.checked} expectations checked, "
          f"{len(res.failures)} failed")


def _verdict(path: Path, policy: str | None) -> tuple[str, bool, str, int, int]:
    """(policy name, ok, the first failure or the stop, transitions, expectations checked)."""
    try:
        res = replay(load_scenario(path, policy))
    except ConfigError as e:
        return policy or "?", False, f"malformed: {e}", 0, 0
    note = res.stopped or (str(res.failures[0]) if res.failures else "")
    return res.scenario.policy, res.ok, note, len(res.steps), res.checked


def _replay_all(args: argparse.Namespace) -> int:
    rows = []
    bad = 0
    for path in shipped():
        pol, ok, note, s, c = _verdict(path, None)
        rows.append((path.stem, pol, s, c, ok, note))
        bad += not ok
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


def _replay_changes(args: argparse.Namespace, policy: str) -> int:
    """Every shipped scenario and findings trace under its own policy and under ``policy``:
    what changed (passed before and fails now, with the first failing expectation, or the
    reverse). Exit 1 if anything changed: the workflow after a change to the runtime."""
    rows = []
    for kind, paths in (("scenario", shipped()), ("finding", findings())):
        for path in paths:
            own, ok0, note0, _, _ = _verdict(path, None)
            _, ok1, note1, _, _ = _verdict(path, policy)
            rows.append({"file": path.stem, "kind": kind, "own_policy": own,
                         "before": "PASS" if ok0 else "FAIL", "after": "PASS" if ok1 else "FAIL",
                         "changed": ok0 != ok1, "detail": note1 if not ok1 else note0})
    changed = [r for r in rows if r["changed"]]
    broke = sum(r["before"] == "PASS" for r in changed)
    n_sc = sum(r["kind"] == "scenario" for r in rows)
    summary = (f"{len(rows)} replayed under {policy} ({n_sc} scenarios, {len(rows) - n_sc} "
               f"findings traces): {len(changed)} changed ({broke} pass -> fail, "
               f"{len(changed) - broke} fail -> pass), {len(rows) - len(changed)} unchanged")
    if args.json:
        print(json.dumps({"policy": policy, "changed": len(changed), "rows": rows,
                          "summary": summary}, indent=2))
    else:
        _print_changes(changed, policy)
        print(summary)
    return 1 if changed else 0


def _print_changes(changed: list[dict[str, Any]], policy: str) -> None:
    if not changed:
        return
    w = max(len(r["file"]) for r in changed)
    pw = max(max(len(r["own_policy"]) for r in changed), len("own policy"))
    print(f"{'file':<{w}}  {'kind':<8}  {'own policy':<{pw}}  before  under {policy}: "
          "first failure (or the one fixed)")
    for r in changed:
        print(f"{r['file']:<{w}}  {r['kind']:<8}  {r['own_policy']:<{pw}}  "
              f"{r['before']:<6}  {r['after']} {r['detail']}")
