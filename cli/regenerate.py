"""``failclosed regenerate``: every recorded artefact, made again from the model, with what changed.

A model change (docs/CHANGING.md) can move what the project has recorded about the model: the
findings' shortest traces (spec/findings/, and the copies FINDINGS.md shows), the behaviour
digests (tests/data/behaviour_digests.json) and the matrix over the scope ``standard``
(docs/matrix-standard.json, the table README.md shows), and over ``full``
(docs/matrix-full.json, the table docs/SCOPES.md shows). This command makes each again and
prints, per artefact, whether it is unchanged or how it changed; ``--check`` writes nothing and
exits 1 when something would change (a CI gate that the recorded figures are the model's).

The tests hold the docs to the records (tests/test_regenerate.py): README.md's matrix is the
rendering of docs/matrix-standard.json, and every trace FINDINGS.md shows is its file under
spec/findings/. The matrix over ``standard`` takes about 20 minutes on two cores, so it is
made again only with ``--matrix``; without it README.md is rendered from the recorded matrix.
The matrix over ``full`` takes hours: ``--matrix-full`` makes it, through the scope cache
(``$FAILCLOSED_CACHE``), so an interrupted run goes on where it stopped.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import io
import json
import os
import re
import tempfile
import tomllib
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from failclosed.cli.check import matrix_word
from failclosed.cli.checking import write_counterexample
from failclosed.model import steps
from failclosed.model.config import UsageError
from failclosed.model.policy import PRESET_ORDER
from failclosed.model.vocab import ActorKind
from failclosed.spec.checker import ConfigPart, check
from failclosed.spec.scope import Cache, check_scope, load_scope, model_version


def _checkout() -> Path:
    """The checkout the recorded artefacts live in: the working directory's (or a parent's),
    else the one this module sits in (an installed package has none)."""
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / "pyproject.toml").is_file() and (d / "FINDINGS.md").is_file() \
                and (d / "spec" / "findings").is_dir():
            return d
    return Path(__file__).resolve().parents[1]


ROOT = _checkout()
FINDINGS_DIR = ROOT / "spec" / "findings"
FINDINGS_MD = ROOT / "FINDINGS.md"
README = ROOT / "README.md"
MATRIX_JSON = ROOT / "docs" / "matrix-standard.json"
MATRIX_FULL_JSON = ROOT / "docs" / "matrix-full.json"
SCOPES_MD = ROOT / "docs" / "SCOPES.md"
DIGESTS = ROOT / "tests" / "behaviour_digests.py"
GUIDE = ROOT / "docs" / "MODEL_GUIDE.md"
STEPS_BEGIN = "<!-- steps: rendered from the step table (model/steps.py) by failclosed regenerate -->"
STEPS_END = "<!-- end of steps -->"
MATRIX_BEGIN = "<!-- matrix: rendered from docs/matrix-standard.json by failclosed regenerate -->"
MATRIX_END = "<!-- end of matrix -->"
FULL_BEGIN = "<!-- matrix: rendered from docs/matrix-full.json by failclosed regenerate -->"
# a finding's description, as spec.checker.counterexample_scenario writes it
DESCRIPTION = re.compile(r"^checker counterexample: (\w+) under (\S+) \((.+)\)$")
HEADLINE = re.compile(r"^(\w+) violated \((.+?), \d+ steps\)")

__all__ = ["register", "render_matrix", "findings_blocks"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "regenerate", help="make every recorded artefact again from the model; print what changed",
        description=__doc__.splitlines()[0] + " Run it from a checkout after a model change.",
    )
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if an artefact would change")
    p.add_argument("--matrix", action="store_true",
                   help="also check every policy over the scope standard again (~20 min on 2 "
                        "cores) and record it")
    p.add_argument("--matrix-full", action="store_true",
                   help="also check every policy over the scope full (hours on 2 cores; "
                        "resumable through the scope cache) and record it")
    p.add_argument("--only", choices=("findings", "digests", "matrix"),
                   help="one kind of artefact (default: all)")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="processes for --matrix (default: every core)")
    p.set_defaults(func=_cmd)


def _cmd(args: argparse.Namespace) -> int:
    if not (ROOT / "pyproject.toml").is_file() or not FINDINGS_MD.is_file():
        raise UsageError("regenerate: run it from a checkout of failclosed (the recorded "
                         "artefacts live there, not in an installed package)")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs: expected a whole number >= 1")
    changed = 0
    kinds = [args.only] if args.only else ["findings", "digests", "matrix"]
    if "findings" in kinds:
        changed += _findings(args.check)
    if "digests" in kinds:
        changed += _digests(args.check)
    if "matrix" in kinds:
        changed += _matrix(args.check, args.matrix, args.jobs)
        changed += _matrix_full(args.check, args.matrix_full, args.jobs)
    if args.only is None:
        changed += _rewrite(GUIDE, render_guide, args.check)
    verb = "would change" if args.check else "changed"
    print(f"regenerate: {changed} artefact(s) {verb}")
    return 1 if args.check and changed else 0


# -- findings -----------------------------------------------------------------------------
def finding_source(path: Path) -> tuple[str, str, str, dict[str, Any]]:
    """(property, policy, part, configuration) a recorded finding was found with: its
    description names the first three; its tables (less the steps) are the configuration."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    m = DESCRIPTION.match(str(data.get("description", "")))
    if m is None:
        raise ValueError(f"{path.name}: description does not name property, policy and part")
    config = {k: v for k, v in data.items() if k not in ("description", "steps", "expect")}
    return m[1], m[2], m[3], config


def regenerate_finding(path: Path) -> tuple[str, dict[str, str]]:
    """Check the finding's property on its configuration again: (what happened, {suffix:
    text}) with the new ``.txt`` and ``.toml`` texts (none when the property now holds)."""
    prop, policy, part, config = finding_source(path)
    r = check(policy, ConfigPart(part, str(path), config), [prop], witnesses=False,
              coverage=False).properties[prop]
    if r.holds:
        return f"{prop} now holds on {part}: the trace is gone", {}
    with tempfile.TemporaryDirectory() as tmp:
        written = write_counterexample(r, Path(tmp), policy)
        texts = {p.suffix: p.read_text(encoding="utf-8") for p in written if p.suffix != ".py"}
    return f"{len(r.trace)} steps", texts


def _findings(check_only: bool) -> int:
    changed = 0
    for path in sorted(FINDINGS_DIR.glob("*.toml")):
        what, texts = regenerate_finding(path)
        if not texts:
            print(f"  {path.relative_to(ROOT)}: {what} (left in place: remove it and its "
                  "FINDINGS.md entry, or explain why it stays)")
            changed += 1
            continue
        moved = [s for s, t in texts.items() if path.with_suffix(s).read_text(encoding="utf-8") != t]
        if moved:
            old = _steps(path.with_suffix(".txt").read_text(encoding="utf-8"))
            print(f"  {path.relative_to(ROOT)}: changed ({old} -> {what})")
            changed += 1
            if not check_only:
                for s in moved:
                    path.with_suffix(s).write_text(texts[s], encoding="utf-8")
        else:
            print(f"  {path.relative_to(ROOT)}: unchanged ({what})")
    changed += _findings_md(check_only)
    return changed


def _steps(trace: str) -> str:
    m = re.search(r", (\d+) steps\)", trace.splitlines()[0] if trace else "")
    return f"{m[1]} steps" if m else "?"


def findings_blocks(text: str) -> list[tuple[int, int, str, str]]:
    """The trace blocks FINDINGS.md shows: (first line, end line, property, part) of each
    fenced block whose first line is a trace's headline."""
    lines = text.splitlines()
    out = []
    k = 0
    while k < len(lines):
        if lines[k].strip() == "```" and k + 1 < len(lines) and HEADLINE.match(lines[k + 1]):
            end = next(j for j in range(k + 1, len(lines)) if lines[j].strip() == "```")
            m = HEADLINE.match(lines[k + 1])
            assert m is not None
            out.append((k + 1, end, m[1], m[2]))
            k = end
        k += 1
    return out


def recorded_traces() -> dict[tuple[str, str], str]:
    """(property, part) -> the trace text recorded under spec/findings/."""
    out = {}
    for p in sorted(FINDINGS_DIR.glob("*.txt")):
        text = p.read_text(encoding="utf-8").rstrip("\n")
        m = HEADLINE.match(text)
        if m is not None:
            out[(m[1], m[2])] = text
    return out


def render_findings_md(text: str) -> str:
    """FINDINGS.md with every trace block it shows replaced by its recorded file's text."""
    traces = recorded_traces()
    lines = text.splitlines()
    for start, end, prop, part in reversed(findings_blocks(text)):
        if (prop, part) in traces:
            lines[start:end] = traces[(prop, part)].splitlines()
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def _findings_md(check_only: bool) -> int:
    return _rewrite(FINDINGS_MD, render_findings_md, check_only)


def _rewrite(path: Path, render: Any, check_only: bool) -> int:
    old = path.read_text(encoding="utf-8")
    new = render(old)
    if new == old:
        print(f"  {path.relative_to(ROOT)}: unchanged")
        return 0
    diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0))
    print(f"  {path.relative_to(ROOT)}: {sum(1 for d in diff if d[:1] in '+-') - 2} line(s) changed")
    if not check_only:
        path.write_text(new, encoding="utf-8")
    return 1


# -- behaviour digests --------------------------------------------------------------------
def _digests(check_only: bool) -> int:
    spec = importlib.util.spec_from_file_location("behaviour_digests", DIGESTS)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    buf = io.StringIO()
    with redirect_stdout(buf):
        rc = mod.main([])
    differ = [ln for ln in buf.getvalue().splitlines() if ln.startswith("DIFFERS:")]
    print(f"  {DIGESTS.relative_to(ROOT)}: " + buf.getvalue().strip().splitlines()[-1])
    for ln in differ:
        print(f"    {ln}")
    if rc and not check_only:
        with redirect_stdout(io.StringIO()):
            mod.main(["--write"])
    return 1 if rc else 0


# -- the matrices over standard and full --------------------------------------------------
def _matrix(check_only: bool, run: bool, jobs: int | None) -> int:
    changed = _record(MATRIX_JSON, lambda: matrix_record(jobs), check_only) if run else 0
    return changed + _rewrite(README, render_readme, check_only)


def _matrix_full(check_only: bool, run: bool, jobs: int | None) -> int:
    changed = (_record(MATRIX_FULL_JSON, lambda: matrix_record(jobs, "full", cached=True),
                       check_only) if run else 0)
    return changed + _rewrite(SCOPES_MD, render_scopes, check_only)


def _record(path: Path, make: Any, check_only: bool) -> int:
    """Make a matrix record again and compare it with the one at ``path`` (1: it changed;
    written unless ``check_only``)."""
    record = make()
    old = json.loads(path.read_text()) if path.exists() else None
    shown = os.path.relpath(path, ROOT)
    if record == old:
        print(f"  {shown}: unchanged")
        return 0
    moved = _cells_moved(old, record)
    print(f"  {shown}: changed ({len(moved)} cell(s)"
          + (": " + ", ".join(moved[:20]) if moved else "") + ")")
    if not check_only:
        path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return 1


def matrix_record(jobs: int | None, scope_name: str = "standard",
                  cached: bool = False) -> dict[str, Any]:
    """Every preset and the proposal over a scope (``standard``: the record README renders;
    ``full``: docs/SCOPES.md's). ``cached``: through the scope cache (``$FAILCLOSED_CACHE``),
    so a repeated or interrupted run checks only what is missing."""
    pols = [*PRESET_ORDER, "proposed"]
    scope = load_scope(scope_name)
    cache = Cache(Cache.default_root(), model_version()) if cached else None
    res = check_scope(scope, pols, None, jobs=jobs or os.cpu_count() or 1, cache=cache)
    return {
        "scope": scope_name,
        "configurations": len(scope.members),
        "states": res.states,
        "reductions": sorted({x for r in res.results for x in r.reductions}),
        "policies": pols,
        "properties": list(res.properties),
        "cells": {p: {n: matrix_word(res.cell(p, n)) for n in res.properties} for p in pols},
    }


def _cells_moved(old: dict[str, Any] | None, new: dict[str, Any]) -> list[str]:
    if old is None:
        return ["(no record before)"]
    return [f"{p}/{n}: {old['cells'].get(p, {}).get(n)} -> {w}"
            for p, row in new["cells"].items() for n, w in row.items()
            if old["cells"].get(p, {}).get(n) != w]


def render_matrix(record: dict[str, Any]) -> str:
    """The README's matrix table: one row per property, one column per policy (the current
    runtime named as such), a violated cell in bold."""
    def head(p: str) -> str:  # the newest preset is the current runtime
        return f"{p} (current)" if p == PRESET_ORDER[-1] else p

    out = ["| property | " + " | ".join(head(p) for p in record["policies"]) + " |",
           "|---|" + "---|" * len(record["policies"])]
    for n in record["properties"]:
        cells = [record["cells"][p][n] for p in record["policies"]]
        out.append(f"| `{n}` | " + " | ".join(c if c == "ok" else f"**{c}**" for c in cells) + " |")
    return "\n".join(out)


def _between(text: str, begin: str, end: str, body: Any) -> str:
    """``text`` with what lies between its markers ``begin`` and ``end`` replaced by
    ``body()`` (unchanged without the markers)."""
    if begin not in text:
        return text
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body()}\n{end}{tail}"


def _matrix_block(text: str, record: Path, begin: str) -> str:
    """``text`` with the matrix after ``begin`` rendered from the record at ``record``
    (unchanged while none is recorded)."""
    if not record.exists():
        return text
    return _between(text, begin, MATRIX_END,
                    lambda: render_matrix(json.loads(record.read_text(encoding="utf-8"))))


def render_readme(text: str) -> str:
    """README.md with the matrix between its markers rendered from the recorded matrix."""
    return _matrix_block(text, MATRIX_JSON, MATRIX_BEGIN)


def render_scopes(text: str) -> str:
    """docs/SCOPES.md with the matrix over ``full`` between its markers rendered from the
    recorded docs/matrix-full.json (its policies: those recorded)."""
    return _matrix_block(text, MATRIX_FULL_JSON, FULL_BEGIN)


# -- docs/MODEL_GUIDE.md's step table -----------------------------------------------------
def render_steps() -> str:
    """Every step and every other transition with who takes it, its faults and its place, as
    the step table declares them (model/steps.py)."""
    out = ["| actor | label | fires | faults | cost | RUNTIME |", "|---|---|---|---|---|---|"]
    for a in steps.steps():
        who = ActorKind.REAPER if a.actor == steps.REAPER else ActorKind.PROCESS
        out.append(f"| {who} | `{a.pc}` | {', '.join(a.fires)} | {', '.join(a.faults) or '-'} | "
                   f"{a.cost} | {a.place} |")
    for name, o in steps.OTHER_TRANSITIONS.items():
        out.append(f"| {o.actor} | - | {name} | {', '.join(o.faults) or '-'} | - | {o.place} |")
    return "\n".join(out)


def render_guide(text: str) -> str:
    """docs/MODEL_GUIDE.md with its step table rendered from model/steps.py."""
    return _between(text, STEPS_BEGIN, STEPS_END, render_steps)
