"""failclosed.cli: the command line, the one layer of the project that does I/O.

Arguments, files read and written, tables and progress on the terminal, exit codes. It
depends on ``failclosed.model``, ``failclosed.spec`` and ``failclosed.sim``; none of them
depends on it. The entry point is :func:`main` (``failclosed``, ``python -m failclosed``):

- app.py: the parser, the error boundary and the exit codes of every command;
- replay.py: ``replay``; check.py: ``check``, ``matrix``, ``mutants``; scope.py: ``scope``
  (and ``matrix --scope``); checking.py: what the checking commands share;
- simulate.py: ``simulate`` (and the input checks of the simulator's commands); sweep.py:
  ``sweep``; plot.py: ``plot``;
- scenario_writer.py: the TOML writer of scenario files (counterexamples);
- outputs.py: a set of output files written as a set (``--out DIR``, ``--violations-dir``);
- exits.py: the exit codes of every command.
"""

from failclosed.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
