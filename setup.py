"""Build hook: compile failclosed's hot modules with mypyc, or install pure Python.

``pip install .`` compiles the modules listed in ``COMPILED`` (the one list of them) with
mypyc when it can, and installs the pure-Python package otherwise, saying why in one line:

* ``FAILCLOSED_PURE=1`` is set (mypy is then not even a build requirement);
* mypyc cannot be imported (``--no-build-isolation`` in an environment without mypy, or an
  interpreter other than CPython);
* mypyc rejects the code (a type error) or the C compiler fails or is missing;
* an editable install (``pip install -e .``) or an in-place build: always pure, so a compiled
  module can never shadow an edited source file.

The installed package records what was built in ``failclosed/_build.py`` (written into the
build directory only, never into the source tree): ``failclosed.build_info()`` and
``failclosed --version`` report it, and ``import failclosed`` refuses a compiled module whose
source file no longer matches the one it was compiled from.

Everything else about the distribution is in pyproject.toml.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import io
import os
import platform
import shutil
import sys
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent

# The modules mypyc compiles, as paths in the source tree (model/, spec/, sim/ install as
# failclosed.model, failclosed.spec, failclosed.sim). The one place to list them. They are
# the checker's search, state and property checks, the symmetry key, and the simulator's
# per-step path (benchmarks/bench_checker.py and bench_sim.py measure both builds). Left
# interpreted: sim/engine.py (the Simulation class, which the tests of Ctrl-C and of the
# online assertion patch: compiled, it gave 8 % more), sim/faults.py (its tests drive each
# component with duck-typed stand-ins, which a compiled signature refuses: 4 % of the time),
# and everything that runs once per command.
COMPILED = (
    "model/constants.py",
    "model/policy.py",
    "model/state.py",
    "model/transition.py",
    "model/classify.py",
    "model/rules.py",
    "model/store.py",
    "model/frames.py",
    "model/segment.py",
    "model/pickup.py",
    "model/resume.py",
    "model/process.py",
    "model/caller.py",
    "model/bus.py",
    "model/reaper.py",
    "model/operator.py",
    "model/clock.py",
    "model/next.py",
    "model/runtime.py",
    "spec/exploration.py",
    "spec/search.py",
    "spec/liveness.py",
    "spec/declare.py",
    "spec/properties.py",
    "spec/symmetry.py",
    "sim/invariants.py",
    "sim/checks.py",
    "sim/history.py",
    "sim/window.py",
    "sim/processes.py",
)

PURE_ENV = "FAILCLOSED_PURE"
GROUP = "failclosed"  # mypyc's shared library: failclosed__mypyc.<abi>.so beside the package
STAGE = ROOT / "build" / "mypyc-src"  # the sources as they install (failclosed/model/...)
MYPY_REQUIREMENT = "mypy>=2.4,<3"  # the versions the build was tried with
BUILD_COMMANDS = {"build", "build_ext", "bdist_wheel", "install", "bdist"}
_HASHES: dict[str, str] = {}  # compiled module -> sha256 of its source, as staged


def _say(line: str) -> None:
    print(f"failclosed: {line}", file=sys.stderr, flush=True)


def _module(path: str) -> str:
    return "failclosed." + path.removesuffix(".py").replace("/", ".")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _pure_reason() -> str | None:
    """Why this build is pure before anything is compiled (None: try mypyc)."""
    if os.environ.get(PURE_ENV, "") not in ("", "0"):
        return f"{PURE_ENV}={os.environ[PURE_ENV]}"
    if platform.python_implementation() != "CPython":
        return f"mypyc needs CPython, this is {platform.python_implementation()}"
    if not BUILD_COMMANDS & set(sys.argv[1:]):
        return "not a build"  # metadata, sdist, editable_wheel: nothing is compiled
    try:
        import mypyc.build  # noqa: F401
    except ImportError as e:
        return f"mypyc is not installed ({e})"
    return None


def _records() -> Any:
    """model/records.py, loaded from the source tree (it needs nothing but the stdlib)."""
    spec = importlib.util.spec_from_file_location("_failclosed_records", ROOT / "model" / "records.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stage() -> list[str]:
    """Copy the packages into ``build/mypyc-src/failclosed/`` (the layout they install in),
    so that mypyc names the modules failclosed.model.*; return the compiled modules' paths."""
    shutil.rmtree(STAGE, ignore_errors=True)
    pkg = STAGE / "failclosed"
    pkg.mkdir(parents=True)
    shutil.copy2(ROOT / "failclosed" / "__init__.py", pkg / "__init__.py")
    for folder in ("model", "spec", "sim"):
        shutil.copytree(ROOT / folder, pkg / folder,
                        ignore=lambda d, names: [n for n in names if n == "__pycache__" or (
                            not n.endswith(".py") and not (Path(d) / n).is_dir())])
    # what the installed sources must be for the compiled modules to run (failclosed/__init__)
    _HASHES.update({_module(p): _sha256(pkg / p) for p in COMPILED})
    # the records' compiled form: native classes written from their one declaration (only
    # with state.py compiled: modules compiled against it read their fields natively)
    if "model/state.py" in COMPILED:
        state = pkg / "model" / "state.py"
        state.write_text(_records().compiled_source(state.read_text(encoding="utf-8")),
                         encoding="utf-8")
    # mypy checks the compiled modules only: an error elsewhere (a module they import) does
    # not stop the build; a module without type information (numpy) is Any
    compiled = ",".join(_module(p) for p in COMPILED)
    (STAGE / "mypy.ini").write_text(
        "[mypy]\nignore_missing_imports = True\n\n[mypy-failclosed.*]\nignore_errors = True\n\n"
        f"[mypy-{compiled}]\nignore_errors = False\n", encoding="utf-8")
    return [f"failclosed/{p}" for p in COMPILED]


def _mypycify() -> tuple[list, str | None]:
    """The extensions mypyc makes of ``COMPILED`` (type check and C generation), or none and
    why. mypy's own report goes to the build log only on failure, cut to its first error."""
    from mypyc.build import mypycify

    out = io.StringIO()
    cwd = os.getcwd()
    try:
        paths = _stage()
        os.chdir(STAGE)  # relative paths: tracebacks name failclosed/model/state.py
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            exts = mypycify(["--config-file", "mypy.ini", *paths], group_name=GROUP,
                            target_dir=str(ROOT / "build" / "mypyc"))
    except (Exception, SystemExit) as e:  # noqa: BLE001 - any failure means a pure build
        errors = [x for x in out.getvalue().splitlines() if ": error:" in x]
        if not errors:
            return [], f"mypyc failed: {e!r}"
        first = errors[0].split("mypyc-src/failclosed/", 1)[-1]
        return [], f"mypyc rejected the code: {len(errors)} errors, the first {first}"
    finally:
        os.chdir(cwd)
    return exts, None


def _ext_files(root: Path) -> list[Path]:
    """Every compiled module of ours under a build directory (stale ones included)."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    found = [p for p in (root / "failclosed").rglob("*") if p.name.endswith(suffixes)]
    return found + [p for p in root.glob(f"{GROUP}__mypyc*") if p.name.endswith(suffixes)]


def _write_build_info(build_lib: str, compiled: dict[str, str], reason: str) -> None:
    path = Path(build_lib) / "failclosed" / "_build.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '"""What ``pip install`` built (written by setup.py; read by failclosed.build_info)."""\n\n'
        f"# module -> sha256 of the source it was compiled from\nCOMPILED = {compiled!r}\n"
        f"# why the build is pure ('' when compiled)\nPURE_REASON = {reason!r}\n",
        encoding="utf-8",
    )


_EXTENSIONS, _REASON = [], _pure_reason()
if _REASON is None:
    _EXTENSIONS, _REASON = _mypycify()


class BuildPy(build_py):
    """Copies the sources; for a pure build also removes any compiled module an earlier
    build left in the build directory (it would shadow the source in the wheel)."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            _say("building pure Python (an editable install runs the checkout, never compiled)")
            return
        if not self.distribution.ext_modules:
            for stale in _ext_files(Path(self.build_lib)):
                stale.unlink()
            _write_build_info(self.build_lib, {}, _REASON or "")
            _say(f"building pure Python ({_REASON})")


class BuildExt(build_ext):
    """Builds the mypyc extensions; if that fails (no C compiler, a compile error) removes
    what it built and leaves the pure package. In place (editable) it builds nothing."""

    def run(self) -> None:
        if not self.extensions:
            return
        if self.inplace or getattr(self, "editable_mode", False):
            _say("building pure Python (an editable or in-place build is never compiled)")
            return
        root = Path(self.build_lib)
        wanted = {str(root / self.get_ext_filename(e.name)) for e in self.extensions}
        for stale in _ext_files(root):
            if str(stale) not in wanted:
                stale.unlink()  # a module compiled by an earlier build and no longer listed
        try:
            super().run()
        except (Exception, SystemExit) as e:  # noqa: BLE001 - any failure means a pure build
            for built in _ext_files(root):
                built.unlink()
            why = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            _write_build_info(self.build_lib, {}, f"the C build failed: {why}")
            _say(f"building pure Python (the C build failed: {why})")
            return
        _write_build_info(self.build_lib, _HASHES, "")
        _say(f"compiled {len(COMPILED)} modules with mypyc")


setup(
    ext_modules=_EXTENSIONS,
    cmdclass={"build_py": BuildPy, "build_ext": BuildExt},
    setup_requires=[] if os.environ.get(PURE_ENV, "") not in ("", "0") else [MYPY_REQUIREMENT],
)
