"""The ``failclosed`` command line.

Each subcommand lives in the module that owns it and exposes ``register(subparsers)``,
which adds its parser and sets ``func`` (a callable taking the parsed args and returning
the exit code). Exit codes: 0 everything holds, 1 a property or expectation failed,
2 bad input (one line naming the field and the fix, never a traceback).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from model.config import ConfigError, UsageError  # noqa: F401 - re-exported
from model.policy import UnknownPolicy

COMMAND_MODULES = ("model.scenario", "spec.cli", "sim.commands")




class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        self.exit(2, f"failclosed: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = _Parser(prog="failclosed", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for mod in COMMAND_MODULES:
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as e:  # a subsystem not installed yet
            if e.name and e.name.startswith(("model", "spec", "sim")):
                continue
            raise
        m.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (ConfigError, UnknownPolicy, UsageError) as e:
        print(f"failclosed: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("failclosed: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
