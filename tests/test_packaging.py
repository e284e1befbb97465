"""The distribution installs under one namespace: ``failclosed.model``, ``failclosed.spec``,
``failclosed.sim``, ``failclosed.cli`` (the folders stay at the top of the source tree), so a
user's own ``model.py`` beside their work never shadows the project's; ``python -m failclosed``
is the command line."""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import subprocess
import sys
import sysconfig
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

import failclosed
from failclosed import build_info

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_a_users_own_model_spec_sim_and_cli_modules_do_not_shadow_the_package(tmp_path):
    for name in ("model", "spec", "sim", "cli"):
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('the user\\'s own {name}.py was imported')\n")
    p = _run(["-m", "failclosed", "replay", "--all"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "scenarios pass" in p.stdout and "user's own" not in p.stderr + p.stdout


def test_python_dash_m_failclosed_is_the_command_line(tmp_path):
    p = _run(["-m", "failclosed", "--version"], tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("failclosed ")
    p = _run(["-m", "failclosed", "check", "--policy", "nope"], tmp_path)
    assert p.returncode == 2 and "nope" in p.stderr and "Traceback" not in p.stderr


def test_the_packages_live_under_the_namespace():
    import failclosed.cli.app
    import failclosed.model.runtime
    import failclosed.sim.engine
    import failclosed.spec.checker

    for mod, folder in ((failclosed.model.runtime, "model"), (failclosed.spec.checker, "spec"),
                        (failclosed.sim.engine, "sim"), (failclosed.cli.app, "cli")):
        assert mod.__name__.startswith(f"failclosed.{folder}.")
        assert Path(mod.__file__).parent.name == folder
    assert "model" not in sys.modules or not hasattr(sys.modules["model"], "runtime")


def test_replay_all_under_a_policy_finds_the_findings_traces_from_any_directory(tmp_path):
    """`replay --all --policy P` reruns spec/findings too, wherever it is run from."""
    p = _run(["-m", "failclosed", "replay", "--all", "--policy", "proposed"], tmp_path)
    n = len(list((ROOT / "spec" / "findings").glob("*.toml")))
    assert p.returncode == 1, p.stderr  # proposed changes what some shipped scenarios show
    assert f"{n} findings)" in p.stdout


def test_only_the_command_line_depends_on_the_command_line():
    """cli/ sits at the edge: model/, spec/ and sim/ never import failclosed.cli, and model/
    imports neither spec/ nor sim/ (dependencies point one way)."""
    import ast

    forbidden = {"model": ("failclosed.cli", "failclosed.spec", "failclosed.sim"),
                 "spec": ("failclosed.cli", "failclosed.sim"), "sim": ("failclosed.cli",)}
    found = []
    for folder, names in forbidden.items():
        for f in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                        else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                found += [f"{f.relative_to(ROOT)}: {m}" for m in mods
                          if m == "failclosed" or m.startswith(names)]
    assert not found, found


def test_every_data_file_the_packages_read_is_installed():
    """An installed package has every TOML the code reads (the scenarios, configurations,
    findings, baselines, scopes): a data file in a folder no package-data pattern names is
    missing from `pip install .` only (the unaudited configurations were, and CI's installed
    builds failed on them while the checkout passed)."""
    import fnmatch
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = data["package-data"]
    missing = []
    for folder in ("model", "spec", "sim", "cli"):
        globs = patterns.get(f"failclosed.{folder}", [])
        for f in sorted((ROOT / folder).rglob("*.toml")):
            rel = f.relative_to(ROOT / folder).as_posix()
            # setuptools' patterns: "*" does not cross a "/"
            if not any(fnmatch.fnmatch(rel, g) and rel.count("/") == g.count("/") for g in globs):
                missing.append(f"{folder}/{rel}")
    assert not missing, f"add their folders to [tool.setuptools.package-data]: {missing[:5]}"


# -- the build: compiled by mypyc or pure Python (setup.py) ------------------------------------
def _import_failclosed(tree: Path) -> subprocess.CompletedProcess:
    """``import failclosed`` with only ``tree`` on the path; prints ``build_info() | note``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    code = "import failclosed; i = failclosed.build_info(); print(f'{i} | {i.note}')"
    return subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=60)


def test_build_info_names_the_build_that_runs(tmp_path):
    info = build_info()
    for name in info.compiled:  # each one really loads from a compiled extension
        assert str(importlib.import_module(name).__file__).endswith(tuple(EXTENSION_SUFFIXES)), name
    if info.compiled:
        assert str(info).startswith(f"compiled: mypyc, {len(info.compiled)} modules")
        assert "failclosed.model.runtime" in info.compiled
    else:
        assert str(info) == "pure Python" and info.note
    p = _run(["-m", "failclosed", "--version"], tmp_path)
    assert p.returncode == 0 and p.stdout.strip().endswith(f"({info})"), p.stdout


def test_the_build_under_test_is_the_one_asked_for():
    """.ci/run runs the suite on each build and says which (FAILCLOSED_EXPECT_BUILD)."""
    want = os.environ.get("FAILCLOSED_EXPECT_BUILD")
    if not want:
        pytest.skip("FAILCLOSED_EXPECT_BUILD is not set (.ci/run sets it to mypyc or pure)")
    assert ("mypyc" if build_info().compiled else "pure") == want, build_info()


def _fake_checkout(tmp_path: Path) -> Path:
    shim = tmp_path / "failclosed"
    shim.mkdir()
    (shim / "__init__.py").write_text(Path(failclosed.__file__).read_text())
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "__init__.py").write_text("")
    (tmp_path / "model" / "state.py").write_text("")
    (tmp_path / "pyproject.toml").write_text("")
    return tmp_path


def test_a_compiled_module_in_a_source_checkout_is_refused_loudly(tmp_path):
    """An in-place build's leftover would run instead of the edited source: refused."""
    tree = _fake_checkout(tmp_path)
    p = _import_failclosed(tree)
    assert p.returncode == 0 and p.stdout.startswith("pure Python | a source checkout"), p.stderr
    (tree / "model" / f"state{EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    p = _import_failclosed(tree)
    assert p.returncode == 1 and "StaleBuild" in p.stderr
    assert f"model/state{EXTENSION_SUFFIXES[0]}" in p.stderr and "delete them" in p.stderr


def _fake_install(tmp_path: Path, compiled: dict[str, str], reason: str = "") -> Path:
    pkg = tmp_path / "failclosed"
    (pkg / "model").mkdir(parents=True)
    (pkg / "__init__.py").write_text(Path(failclosed.__file__).read_text())
    (pkg / "model" / "__init__.py").write_text("")
    (pkg / "model" / "state.py").write_text("X = 1\n")
    (pkg / "_build.py").write_text(f"COMPILED = {compiled!r}\nPURE_REASON = {reason!r}\n")
    return tmp_path


def test_an_installed_source_changed_since_its_module_was_compiled_is_refused(tmp_path):
    digest = hashlib.sha256(b"X = 1\n").hexdigest()
    tree = _fake_install(tmp_path, {"failclosed.model.state": digest})
    p = _import_failclosed(tree)  # the source is the one compiled (state.py loads: 0 of 1)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "pure Python | 1 of 1 built modules load from source"
    (tree / "failclosed" / "model" / "state.py").write_text("X = 2\n")
    p = _import_failclosed(tree)
    assert p.returncode == 1 and "StaleBuild" in p.stderr
    assert "model/state.py" in p.stderr and "Reinstall" in p.stderr


def test_a_pure_install_says_why(tmp_path):
    tree = _fake_install(tmp_path, {}, "FAILCLOSED_PURE=1")
    p = _import_failclosed(tree)
    assert p.returncode == 0 and p.stdout.strip() == "pure Python | FAILCLOSED_PURE=1", p.stderr


def _install(tmp_path: Path, env: dict[str, str]) -> tuple[Path, subprocess.CompletedProcess]:
    """``pip install -v --no-deps`` of a copy of this checkout into a fresh venv (its
    dependencies: this interpreter's, through a .pth file); the venv's python and pip's run."""
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".venv", "build", ".git", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis",
        "out", "notebooks", "docs"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    py = venv / "bin" / "python"
    p = subprocess.run([str(py), "-m", "pip", "install", "-v", "--no-deps", str(src)],
                       env={**os.environ, **env}, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return py, p


def _said(p: subprocess.CompletedProcess) -> list[str]:
    """What setup.py said in pip's verbose log (its lines start with ``failclosed: ``)."""
    return [x.strip() for x in (p.stdout + p.stderr).splitlines()
            if x.strip().startswith("failclosed: ")]


def _version(py: Path, cwd: Path) -> str:
    p = subprocess.run([str(py), "-m", "failclosed", "--version"], cwd=cwd, capture_output=True,
                       text=True, timeout=120, env={k: v for k, v in os.environ.items()
                                                    if k != "PYTHONPATH"})
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


@pytest.mark.slow
def test_failclosed_pure_installs_pure_python_into_a_fresh_venv_and_says_so(tmp_path):
    py, p = _install(tmp_path, {"FAILCLOSED_PURE": "1"})
    assert _said(p) == ["failclosed: building pure Python (FAILCLOSED_PURE=1)"]
    assert _version(py, tmp_path).endswith("(pure Python)")
    site = Path(py).parents[1] / "lib"
    assert not [x for x in site.rglob("*") if x.name.endswith(tuple(EXTENSION_SUFFIXES))
                and "failclosed" in x.name + str(x.parent)]


@pytest.mark.slow
def test_without_a_c_compiler_the_install_falls_back_to_pure_python(tmp_path):
    py, p = _install(tmp_path, {"CC": "false", "FAILCLOSED_PURE": ""})
    said = _said(p)
    assert len(said) == 1 and said[0].startswith("failclosed: building pure Python (the C build "
                                                 "failed"), said
    assert _version(py, tmp_path).endswith("(pure Python)")
