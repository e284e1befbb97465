"""failclosed: a reference model, an exhaustive checker and a deterministic fault-injection
simulator of an at-least-once agent-run queue.

The four packages sit at the top of the source tree (model/, spec/, sim/, cli/) and are
installed under this one namespace: ``failclosed.model``, ``failclosed.spec``,
``failclosed.sim``, ``failclosed.cli`` (the command line, the only one that depends on the
other three), so a user's own ``model.py`` never shadows them. ``python -m failclosed`` is
the command line.
"""

from pathlib import Path as _Path

_here = _Path(__file__).resolve().parent
_root = _here.parent
if not (_here / "model").is_dir() and (_root / "model" / "__init__.py").is_file() \
        and (_root / "pyproject.toml").is_file():
    # a source checkout (tests, notebooks, benchmarks run from it): the packages are the
    # top-level folders beside this one
    __path__.append(str(_root))  # type: ignore[name-defined]
