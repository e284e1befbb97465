"""The distribution installs under one namespace: ``failclosed.model``, ``failclosed.spec``,
``failclosed.sim``, ``failclosed.cli`` (the folders stay at the top of the source tree), so a
user's own ``model.py`` beside their work never shadows the project's; ``python -m failclosed``
is the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
    assert p.returncode == 1, p.stderr  # proposed changes what the findings traces show
    assert f"{n} findings traces" in p.stdout


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
