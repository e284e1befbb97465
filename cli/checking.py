"""What the checking commands (``check``, ``matrix``, ``mutants``, ``scope``) share.

Exit codes (the rule of cli/app.py, the same for every command): 0 everything checked holds
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
import shlex
import shutil
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from failclosed.cli import scenario_writer
from failclosed.cli.kinds import require_kind
from failclosed.cli.outputs import output_set, write_text_atomic
from failclosed.model.config import UsageError, read_toml
from failclosed.model.policy import Policy, parse_policy
from failclosed.spec.baseline import Baseline, Comparison, load_baseline, resolve_baseline
from failclosed.spec.checker import (
    Configuration,
    config_names,
    config_path,
    counterexample_scenario,
    load_config,
    pytest_text,
    trace_text,
)
from failclosed.spec.progress import Progress

__all__ = [
    "add_common", "check_outputs", "column_chunks", "emit_json", "load_baseline_arg",
    "load_config_arg", "plural",
    "positive_int", "progress", "require_writable_dir", "require_writable_file", "say",
    "notes_and_baseline", "table_width", "text_table", "truncated_by", "validate_policy",
    "verdict",
    "write_counterexample", "write_counterexamples",
]


# =========================================================================================
# arguments, checked before any work
# =========================================================================================
def positive_number(unit: str) -> Any:
    """An argparse type: a finite number of ``unit`` > 0 (a usage error otherwise, exit 2)."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a number of {unit} > 0, got {text!r}") from None
        if not v > 0 or v == float("inf"):
            raise argparse.ArgumentTypeError(f"must be a finite number of {unit} > 0, got {text}")
        return v
    return parse


positive_mib = positive_number("MiB")


def add_memory_budget(p: argparse.ArgumentParser, split: str) -> None:
    """``--memory-budget MIB``: what the searches may store in memory (spec/seen.py);
    ``split``: how the command's processes share it, for the help."""
    p.add_argument("--memory-budget", type=positive_mib, default=None, metavar="MIB",
                   help="what the searches may keep in memory, in MiB: past it a search moves "
                        "the fingerprints of its older layers to sorted runs and then to disk "
                        f"(a temporary directory under $TMPDIR, removed at the end); {split}; "
                        "the verdicts and traces are the same (default: no bound, all in "
                        "memory)")


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
    """The ``--baseline`` file (or a shipped baseline by name: ``current``), or the empty
    baseline (every violation is new). A file of another kind (a simulator config, say)
    is one line saying what it is."""
    if not path:
        return Baseline()
    p = str(resolve_baseline(path))
    require_kind(read_toml(p), "baseline", "--baseline", path)
    return load_baseline(p)


def command_name() -> str:
    """How to run failclosed again from here, for a printed next-step command: ``failclosed``
    when that name on PATH is this very program, else the path it was run by (a venv that was
    never activated: ``.venv/bin/failclosed``), or ``python -m failclosed``."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    base = os.path.basename(argv0)
    if base in ("__main__.py", "-m", "-c", "") or base.startswith("python"):
        return f"{shlex_quote(sys.executable)} -m failclosed"
    on_path = shutil.which("failclosed")
    here = shutil.which(argv0) or argv0
    if on_path and os.path.realpath(on_path) == os.path.realpath(here):
        return "failclosed"
    return shlex_quote(argv0 if os.sep in argv0 else os.path.abspath(here))


def shlex_quote(s: str) -> str:
    return shlex.quote(s)


def load_config_arg(config: str) -> Configuration:
    """``--config``: a shipped configuration's name or a FILE, read and parsed once
    (spec.checker.load_config: hand the result to ``check``); a file of another kind (a
    simulator config, a scope) is one line saying what it is."""
    p = config_path(config)
    data = read_toml(str(p))
    if Path(config).is_file():
        require_kind(data, "model", "--config", config)
    return load_config(p, data)


def verdict(cmp: Comparison) -> int:
    """The exit code of the rule: 1 when something new is violated, else 0."""
    return 0 if cmp.ok else 1


def truncated_by(max_states: int | None, truncated: bool) -> str | None:
    """Why a search that holds proves nothing about a baseline entry (None: it was complete):
    the reason a "not reached" line gives (spec/baseline.py, ``Comparison.not_reached``)."""
    if not truncated:
        return None
    bound = f" {max_states:,}" if max_states else ""
    return f"in a search truncated by --max-states{bound}"


def validate_policy(policy: str) -> Policy:
    return parse_policy(policy)  # UnknownPolicy -> one line, exit 2


def add_common(p: argparse.ArgumentParser, *, baseline: bool = True, config: bool = True) -> None:
    if config:
        p.add_argument("--config", default="small", help=config_help())
    p.add_argument("--json", nargs="?", const="-", metavar="FILE",
                   help="machine-readable result: on stdout (instead of the tables), or "
                        "into FILE (beside them)")
    if baseline:
        p.add_argument("--baseline", metavar="FILE",
                       help="known violations: a baseline TOML FILE, or the shipped one by name "
                            "(current: the findings): exit 1 only on a violation it does not list")
        p.add_argument("--write-baseline", metavar="FILE",
                       help="record the violations found as a baseline FILE to start from "
                            "(entries of --baseline keep their reasons); they count as known in this run")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


def add_reductions(p: argparse.ArgumentParser) -> None:
    """The switches of the search's reductions, of check, scope and matrix (the verdict line
    names the ones a run applied): the log order, on by default."""
    p.add_argument("--no-log-reduction", dest="log_order", action="store_false",
                   help="search without the log order (the events, ledger, outcomes and "
                        "commands kept in the order different runs appended them, not grouped "
                        "by run; spec/symmetry.py): the same verdicts and lengths, more states "
                        "(default: with the log order)")


def config_help(default: str = "") -> str:
    """``--config``'s help: every name that resolves (spec/configs), or a FILE."""
    return (f"a shipped configuration by name ({', '.join(config_names())}) or a TOML FILE"
            + (f" (default: {default})" if default else ""))


def check_outputs(args: argparse.Namespace) -> None:
    if args.json and args.json != "-":
        require_writable_file(args.json, "--json")
    if getattr(args, "write_baseline", None):
        require_writable_file(args.write_baseline, "--write-baseline")
    if getattr(args, "out", None):
        require_writable_dir(args.out, "--out")


def emit_json(args: argparse.Namespace, d: dict[str, Any]) -> None:
    text = json.dumps(d, indent=2)
    if args.json == "-":
        print(text)
    else:
        write_text_atomic(args.json, text + "\n")


def progress(args: argparse.Namespace, what: str, total: int, unit: str) -> Progress:
    return Progress(what, total, unit=unit, enabled=not args.quiet, clock=time.monotonic)


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


def say(text: str, width: int, indent: str = "  ") -> None:
    """Print ``text`` wrapped to ``width`` (continuation lines indented two more)."""
    print(textwrap.fill(text, max(20, width), initial_indent=indent,
                        subsequent_indent=indent + "  ", break_on_hyphens=False))


def notes_and_baseline(args: argparse.Namespace, cmp: Comparison, notes: list[str],
                        width: int) -> None:
    """The closing notes, then (with --baseline) each new violation and fixed entry."""
    for x in notes:
        say(x, width)
    if args.baseline:
        for line in cmp.lines():
            say(line, width)


def plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"




def write_counterexample(r: Any, out: Path, policy: str | None) -> list[Path]:
    """Write a violated property's (spec.checker.PropertyResult) ``<name>.txt`` (the trace
    table), ``<name>.toml`` (the scenario ``failclosed replay`` reproduces it with) and
    ``test_<name>.py`` (a regression test) under ``out`` (a command writes them into the
    staging directory of its cli.outputs.output_set, which moves the set into place)."""
    out.mkdir(parents=True, exist_ok=True)
    base = f"{r.name}--{(policy or 'config').replace('+', 'p')}"
    paths = [out / f"{base}.txt", out / f"{base}.toml", out / f"test_{base.replace('-', '_')}.py"]
    paths[0].write_text(trace_text(r) + "\n")
    scenario_writer.write_scenario(paths[1], counterexample_scenario(r, policy))
    paths[2].write_text(pytest_text(r, str(paths[1]), policy))
    return paths


def write_counterexamples(found: list[tuple[Any, str | None]], out: str) -> list[str]:
    """Each (PropertyResult, policy) of ``found`` written by :func:`write_counterexample`
    into ``out`` as one set (cli/outputs.py: all of them, or on an interrupt none); the
    paths written, as they are in ``out``."""
    written: list[str] = []
    with output_set(out) as s:
        assert s is not None
        for r, policy in found:
            written += [str(s.final_path(p)) for p in write_counterexample(r, s.staging, policy)]
    return written
