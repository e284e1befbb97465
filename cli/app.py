"""The ``failclosed`` command line: the parser, the one error boundary, the exit codes.

Each group of subcommands lives in a module of this package (``COMMAND_MODULES``, in the
order ``failclosed --help`` lists them) and exposes ``register(subparsers)``, which adds its
parsers and sets ``func`` (a callable taking the parsed args and returning the exit code).

Exit codes (cli/exits.py), the same rule for every command: 0 everything checked holds (or
matches the baseline given with ``--baseline``), 1 something new is violated (a property, an
expectation), 2 bad input: one line ``failclosed: error: ...`` naming the field or the path
and the fix, never a traceback. 3: nothing new violated, but a search was truncated by
``--max-states``. 70: an internal error (a bug): one line naming the exception and the file
the full traceback was written to (in the temporary directory), never 1, which a CI gate
reads as a finding. 130: interrupted (Ctrl-C; the program's entry, :func:`console_main`, gives
it: in-process, :func:`main` lets KeyboardInterrupt reach its caller). 141: stdout was closed by the reader
(``failclosed replay --all | head -2``): the command stops quietly, as a program killed by
SIGPIPE would. 143: terminated by SIGTERM, which interrupts like Ctrl-C (worker processes
stopped, partial files removed).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import sys
import tempfile
import textwrap
import threading
import tomllib
import traceback
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from failclosed.cli.exits import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_STDOUT_CLOSED,
    EXIT_TERMINATED,
    exit_codes_text,
)
from failclosed.cli.junit import start_clock
from failclosed.model.config import ConfigError, UsageError, io_error_message
from failclosed.model.policy import PRESET_ORDER, PRESETS, SWITCHES, UnknownPolicy

# spec.properties registers the evaluator of a scenario's holds / violates expectations
# (model/ does not import spec/)
from failclosed.spec import properties as _properties  # noqa: F401

from failclosed import build_info

COMMAND_MODULES = ("failclosed.cli.replay", "failclosed.cli.check", "failclosed.cli.simulate",
                   "failclosed.cli.sweep", "failclosed.cli.summarize", "failclosed.cli.plot",
                   "failclosed.cli.inspect", "failclosed.cli.regenerate",
                   "failclosed.cli.proposals", "failclosed.cli.hunt")



def version() -> str:
    """The installed distribution's version (importlib.metadata), else pyproject.toml's."""
    try:
        return metadata.version("failclosed")
    except metadata.PackageNotFoundError:
        return _pyproject_version()


def _pyproject_version() -> str:
    path = Path(__file__).resolve().parents[1] / "pyproject.toml"
    try:
        return str(tomllib.loads(path.read_text(encoding="utf-8"))["project"]["version"])
    except (OSError, UnicodeDecodeError, KeyError, TypeError, tomllib.TOMLDecodeError):
        return "unknown (not installed, no pyproject.toml)"


def policy_help() -> str:
    """The policies a ``--policy`` accepts, from model/policy.py (never a hand-written list)."""
    cur = PRESETS["current"]
    same = next((p for p in PRESET_ORDER if PRESETS[p].switches() == cur.switches()), None)
    prop = PRESETS["proposed"]
    fixes = [f"{'+' if getattr(prop, s) else '-'}{s}" for s in SWITCHES
             if getattr(prop, s) != getattr(cur, s)]
    mutant = [s for s in SWITCHES if s.startswith("mutant_")]
    on = [s for s in SWITCHES if s not in mutant and getattr(cur, s)]
    off = [s for s in SWITCHES if s not in mutant and not getattr(cur, s)]
    return "\n".join([
        "policies:",
        f"  presets, in the order of RUNTIME 15.1: {', '.join(PRESET_ORDER)}",
        f"  current: the runtime as it is{f' (= {same})' if same else ''}",
        f"  proposed: current {' '.join(fixes)} (the fixes of FINDINGS.md)",
        "  PRESET+switch / PRESET-switch turns a switch on / off, repeatable: "
        "adr-141-write_fence is current without the write fence, adr-111+write_fence adds it",
        f"  switches on in current: {', '.join(on)}",
        f"  switches off in current: {', '.join(off)}",
        f"  deliberately broken switches (failclosed mutants): {', '.join(mutant)}",
    ])


class _HelpFormatter(argparse.HelpFormatter):
    """Shows each option's default, and keeps the line breaks of descriptions and epilogs
    (each line is filled on its own; an indented line keeps its indent)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        h = action.help or ""
        d = action.default
        if "%(default)" in h or "(default" in h or d is None or d is False or d == []:
            return h
        if action.nargs == 0:  # a switch (store_true / store_false): its help says what it does
            return h
        if d is argparse.SUPPRESS:
            return h
        if action.option_strings or action.nargs in ("?", "*"):
            return f"{h} (default: %(default)s)"
        return h

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for line in text.splitlines():
            body = line.lstrip(" ")
            lead = line[: len(line) - len(body)]
            pad = indent + lead
            body = re.sub(r"\s+", " ", body).strip()
            out.append(textwrap.fill(body, width, initial_indent=pad,
                                     subsequent_indent=pad + ("  " if lead else "")) if body else "")
        return "\n".join(out)


_GIVEN = "_failclosed_given_once"  # the options seen while parsing (removed after it)


class _StoreOnce(argparse._StoreAction):
    """An option that takes one value: given twice, it is a usage error naming it (argparse
    would keep the last one silently: ``--policy a --policy b`` checked b)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        seen = namespace.__dict__.setdefault(_GIVEN, {})
        if self.dest in seen:
            parser.error(f"{option_string} given twice ({seen[self.dest]!s}, then {values!s}); it "
                         "takes one value: give it once")
        seen[self.dest] = values
        super().__call__(parser, namespace, values, option_string)


def _once(parser: argparse.ArgumentParser) -> None:
    """Every single-valued option of ``parser`` and its subcommands refuses a repetition."""
    for a in parser._actions:
        if type(a) is argparse._StoreAction and a.option_strings:
            a.__class__ = _StoreOnce
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                _once(sub)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"failclosed: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="failclosed",
        description="The reference model, exhaustive checker and deterministic fault-injection "
                    "simulator of an at-least-once agent-run queue.",
        epilog=exit_codes_text(),
    )

    parser.add_argument("--version", action="version",
                        version=f"failclosed {version()} ({build_info()})")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in COMMAND_MODULES:
        importlib.import_module(mod).register(sub)
    for p in sub.choices.values():  # --quiet on every command, so a script can pass it to all
        if not any("--quiet" in a.option_strings for a in p._actions):
            p.add_argument("--quiet", action="store_true",
                           help="no progress on stderr (this command prints none; accepted by "
                                "every command; default: off)")
    _once(parser)
    ph = policy_help()
    for p in sub.choices.values():  # every command that takes a policy (--policy, --param)
        if any("--policy" in a.option_strings or "policy" in (a.help or "")
               for a in p._actions):
            p.epilog = f"{p.epilog}\n\n{ph}" if p.epilog else ph
    return parser


def _stdout_closed() -> int:
    """The reader of stdout went away: point stdout at devnull so that the interpreter's
    final flush does not raise again (the recipe of the Python docs, signal module, "Note
    on SIGPIPE"), and end quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (captured in-process): nothing to do
        pass
    return EXIT_STDOUT_CLOSED


def _error(message: str) -> int:
    print(f"failclosed: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _internal_error(e: BaseException) -> int:
    """A bug: one line naming the exception and where its full traceback was written (a
    file in the temporary directory), exit 70: never 1 (a finding) nor 2 (bad input)."""
    text = "".join(traceback.format_exception(e))
    where = ""
    try:
        fd, path = tempfile.mkstemp(prefix="failclosed-traceback-", suffix=".txt")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"failclosed {version()}: {' '.join(sys.argv)}\n{text}")
        where = f"; the full traceback is in {path}"
    except OSError as err:  # no temporary directory: the traceback goes to stderr instead
        where = f"; the traceback could not be written ({err.strerror}), here it is:\n{text}"
    first = (str(e).splitlines() or [""])[0]
    print(f"failclosed: internal error: {type(e).__name__}: {first}{where} "
          "(a bug of failclosed: please report it with that file)", file=sys.stderr)
    return EXIT_INTERNAL


class Terminated(KeyboardInterrupt):
    """SIGTERM (what CI and ``timeout`` send), raised where Ctrl-C would be: the same
    clean-up runs (workers stopped, partial files removed)."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated


def _install_sigterm() -> Any:
    """SIGTERM interrupts like SIGINT for the whole command; the previous handler, or None
    where it cannot be set (not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _on_sigterm)


def console_main() -> int:
    """The ``failclosed`` program (the console script, ``python -m failclosed``): :func:`main`,
    and Ctrl-C, which main lets through, as exit 130. Only the program's own entry turns it
    into a code: called in-process (a test, a notebook kernel), main lets KeyboardInterrupt
    reach the caller, whose Ctrl-C it is (pytest stops, the kernel interrupts the cell)."""
    try:
        return main()
    except KeyboardInterrupt:
        print("failclosed: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code. Ctrl-C (KeyboardInterrupt) is not caught here, once
    the command has cleaned up (workers stopped, partial files removed): the caller's
    (:func:`console_main` turns it into 130). SIGTERM, whose handler main installs for the
    command, is: 143."""
    old = _install_sigterm()
    try:
        return _main(argv)
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version (0) and usage errors (2), already printed
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    args.__dict__.pop(_GIVEN, None)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2

    start_clock()  # --junit's times are measured from here
    try:
        return _run(args)
    except Exception as e:  # noqa: BLE001 - the one boundary: anything else is a bug
        return _internal_error(e)


def _run(args: argparse.Namespace) -> int:
    """The command, its expected failures mapped to their exit codes (app.py's docstring)."""
    try:
        rc = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return rc
    except (ConfigError, UnknownPolicy, UsageError) as e:
        return _error(str(e))
    except Terminated:
        print("failclosed: terminated (SIGTERM); nothing half-written is left", file=sys.stderr)
        return EXIT_TERMINATED
    except BrokenPipeError:
        return _stdout_closed()
    except UnicodeDecodeError as e:  # the last net: read_toml names the path itself
        return _error(f"input is not UTF-8 text ({e.reason} at byte {e.start}); give a text file")
    except OSError as e:  # the last net: a file the command could not open, read or write
        if e.filename is None:
            raise
        return _error(io_error_message(e.filename, e))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(console_main())
