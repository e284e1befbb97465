"""failclosed: a reference model, an exhaustive checker and a deterministic fault-injection
simulator of an at-least-once agent-run queue.

The four packages sit at the top of the source tree (model/, spec/, sim/, cli/) and are
installed under this one namespace: ``failclosed.model``, ``failclosed.spec``,
``failclosed.sim``, ``failclosed.cli`` (the command line, the only one that depends on the
other three), so a user's own ``model.py`` never shadows them. ``python -m failclosed`` is
the command line.

``pip install .`` compiles the hot modules with mypyc where it can (setup.py lists them);
:func:`build_info` says which build is running. A compiled module never runs in place of a
source it was not compiled from: importing this package fails if one would.
"""

from __future__ import annotations

from importlib.machinery import EXTENSION_SUFFIXES as _EXT
from pathlib import Path as _Path
from typing import Any as _Any
from typing import NamedTuple as _NamedTuple

_here = _Path(__file__).resolve().parent
_root = _here.parent
_checkout = not (_here / "model").is_dir() and (_root / "model" / "__init__.py").is_file() \
    and (_root / "pyproject.toml").is_file()


class StaleBuild(ImportError):
    """A compiled module would run instead of a source file it was not compiled from."""


def _compiled_in_checkout() -> list[str]:
    """Compiled modules beside the sources of a checkout (an in-place build left them)."""
    suffixes = tuple(_EXT)
    return sorted(f"{d}/{p.name}" for d in ("model", "spec", "sim")
                  for p in (_root / d).glob("*.*") if p.name.endswith(suffixes))


def _built() -> _Any:
    """``failclosed._build``, what setup.py built (None: a checkout or an editable install)."""
    import importlib

    try:
        return importlib.import_module(f"{__name__}._build")
    except ImportError:
        return None


def _changed_since_build() -> list[str]:
    """Installed sources whose compiled module was built from another version of them."""
    _build = _built()
    if _build is None or not _build.COMPILED:
        return []
    import hashlib

    changed = []
    for module, digest in _build.COMPILED.items():
        src = _here.joinpath(*module.split(".")[1:]).with_suffix(".py")
        if src.is_file() and hashlib.sha256(src.read_bytes()).hexdigest() != digest:
            changed.append(str(src))
    return changed


if _checkout:
    # a source checkout (tests, notebooks, benchmarks run from it): the packages are the
    # top-level folders beside this one
    __path__.append(str(_root))  # type: ignore[name-defined]
    _stale = _compiled_in_checkout()
    if _stale:
        raise StaleBuild(
            f"failclosed: compiled modules in the source tree would run instead of their .py "
            f"sources: {', '.join(_stale)} (in {_root}); delete them. A checkout and an editable "
            f"install always run pure Python; `pip install .` builds the compiled package.")
else:
    _stale = _changed_since_build()
    if _stale:
        raise StaleBuild(
            f"failclosed: installed sources changed since their modules were compiled: "
            f"{', '.join(_stale)}; the compiled modules would run instead of them. Reinstall "
            f"(pip install .) or install pure Python (FAILCLOSED_PURE=1 pip install .).")


class BuildInfo(_NamedTuple):
    """Which build is running: ``compiled`` names the modules loaded from mypyc-compiled
    extensions (empty: pure Python); ``note`` says why a build is pure or partial."""

    compiled: tuple[str, ...]
    note: str

    def __str__(self) -> str:
        if not self.compiled:
            return "pure Python"
        return f"compiled: mypyc, {len(self.compiled)} modules" + (
            f"; {self.note}" if self.note else "")


def build_info() -> BuildInfo:
    """The build this process runs (imports the modules the build compiled)."""
    import importlib

    _build = _built()
    if _build is None:
        return BuildInfo((), "a source checkout or an editable install")
    suffixes = tuple(_EXT)
    compiled = tuple(m for m in _build.COMPILED
                     if str(importlib.import_module(m).__file__).endswith(suffixes))
    if not _build.COMPILED:
        return BuildInfo((), _build.PURE_REASON)
    missing = len(_build.COMPILED) - len(compiled)
    return BuildInfo(compiled, f"{missing} of {len(_build.COMPILED)} built modules load from "
                               f"source" if missing else "")
