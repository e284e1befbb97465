"""The analysis notebooks run clean in quick mode, and are committed without outputs.

Each notebook reads ``FAILCLOSED_NOTEBOOK_QUICK=1`` (small grids, few seeds) and is executed
with nbclient on the ``python3`` kernel, from a copy outside the checkout (they import only
``failclosed.*``), with its sweep cache (``FAILCLOSED_CACHE``) in a temporary directory. A cell
error fails the test, and so does a tracked file the run modified (figures are written only
with ``SAVE_FIGURE``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NAMES = ["lease_timing.ipynb", "audit_store_flakiness.ipynb", "policy_history.ipynb"]


def test_the_three_notebooks_exist():
    assert sorted(p.name for p in NOTEBOOKS) == sorted(NAMES)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(path: Path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    params = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(params) == 1, "exactly one cell tagged 'parameters'"
    assert "FAILCLOSED_NOTEBOOK_QUICK" in params[0].source
    assert "SAVE_FIGURE = False" in params[0].source, "writing the README figure must be asked for"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [], f"outputs not stripped in {path.name}"
            assert cell.execution_count is None, f"execution_count set in {path.name}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_imports_only_the_installed_package(path: Path):
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert not re.search(r"^\s*(from|import)\s+(sim|spec|model|cli)\b", code, re.M)
    assert "sys.path" not in code and "os.chdir" not in code


def _imported_modules(path: Path) -> set[str]:
    """The top-level modules a notebook's code cells import (parsed with ast; a cell magic or
    shell line is left out)."""
    import ast

    nb = nbformat.read(path, as_version=4)
    mods: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        src = "\n".join(x for x in cell.source.splitlines() if not x.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Import):
                mods |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                mods.add(node.module.split(".")[0])
    return mods


def _installed_by(requirements: list[str]) -> set[str]:
    """Every distribution ``pip install`` of ``requirements`` brings in: the requirements and,
    read from the installed metadata, theirs, markers evaluated (extras followed)."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        key = (canonicalize_name(req.name), frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            deps = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue
        for d in map(Requirement, deps):
            if d.marker is None or any(d.marker.evaluate({"extra": e})
                                       for e in ("", *req.extras)):
                todo.append(d)
    return {name for name, _ in seen}


def test_the_notebooks_extra_installs_every_module_a_notebook_imports():
    """Issue 38 item 7: ``pip install '.[notebooks]'`` then ``jupyter nbconvert --execute
    notebooks/policy_history.ipynb`` failed on ``import hypothesis`` (the test extra has it,
    so the suite never saw it). Each notebook's imports must come from the standard library,
    failclosed itself, or what the core dependencies and the ``notebooks`` extra install."""
    import sys
    import tomllib
    from importlib import metadata

    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    brought = _installed_by([*project["dependencies"],
                             *project["optional-dependencies"]["notebooks"]])
    providers = metadata.packages_distributions()
    missing = {}
    for path in NOTEBOOKS:
        for mod in sorted(_imported_modules(path)):
            if mod in sys.stdlib_module_names or mod == "failclosed":
                continue
            # not installed here (ipywidgets, say): the distribution named as the module
            dists = {canonicalize_name(d) for d in providers.get(mod, [mod])}
            if not dists & brought:
                missing[f"{path.name}: import {mod}"] = sorted(dists)
    assert not missing, missing


def _git_status() -> str | None:
    """``git status --porcelain`` of the checkout (None outside a git checkout)."""
    if shutil.which("git") is None:
        return None
    proc = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                          capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


def _execute(path: Path, where: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                                     resources={"metadata": {"path": str(where)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_runs_in_quick_mode_from_a_copy_outside_the_checkout(path: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAILCLOSED_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("FAILCLOSED_CACHE", str(tmp_path / "cache"))
    kernel_tmp = tmp_path / "tmp"
    kernel_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(kernel_tmp))  # the kernel's temporary files, watched below
    before = _git_status()
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    _execute(copy, tmp_path)
    assert _git_status() == before, "running the notebook modified or created files in the checkout"
    assert not list(kernel_tmp.glob("failclosed-*")), "the notebook left temporary files behind"
    caches = sorted((tmp_path / "cache").glob("*.csv")) if (tmp_path / "cache").exists() else []
    if path.stem == "policy_history":
        return  # no sweep
    assert caches, "the sweep is cached on disk"
    # Run All again: everything is read from the cache (the sweep's resume), nothing re-simulated
    sizes = {p: p.read_bytes() for p in caches}
    _execute(copy, tmp_path)
    assert {p: p.read_bytes() for p in (tmp_path / "cache").glob("*.csv")} == sizes


def _cell_defining(path: Path, name: str) -> str:
    nb = nbformat.read(path, as_version=4)
    return next(c.source for c in nb.cells if c.cell_type == "code" and name in c.source)


def test_policy_history_swimlanes_mark_the_violating_step(monkeypatch):
    """Issue 38 item 13: the step-order swimlanes of policy_history drew the trace and no
    violation. The notebook's own function, on a red scenario, read back from the figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from failclosed.model.scenario import SCENARIO_DIR, load_scenario, replay

    src = _cell_defining(ROOT / "notebooks" / "policy_history.ipynb", "def step_swimlane")
    ns = {"plt": plt, "np": np}
    exec(src[:src.index("def draw_scenario")], ns)  # the imports, CATEGORY and step_swimlane
    res = replay(load_scenario(SCENARIO_DIR / "hist-16.5-zombie-settle.red.toml"))
    fig = ns["step_swimlane"](res, "16.5")
    ax = fig.axes[0]
    stars = [c for c in ax.collections if c.get_label().startswith("violation")]
    texts = [t.get_text() for t in ax.texts if t.get_text().endswith(" violated")]
    plt.close(fig)
    assert stars and texts == ["no_zombie_settle violated"], texts


def test_policy_history_caption_counts_the_proposal_s_switches():
    from failclosed.model.policy import PRESETS, SWITCHES

    src = _cell_defining(ROOT / "notebooks" / "policy_history.ipynb", "'proposed' = current")
    assert "three proposals" not in src
    ns: dict = {}
    exec(src[src.index("from failclosed.model.policy"):src.index("ax.set_xlabel")], ns)
    n = sum(getattr(PRESETS["proposed"], s) != getattr(PRESETS["current"], s) for s in SWITCHES)
    assert ns["N_FIXES"] == n and n > 3


def test_lease_timing_panels_give_every_share_in_percent():
    """Issue 38 item 13: lease_timing's panels mixed 0-1 fractions and percent."""
    import ast

    from failclosed.sim.metrics import SUMMARY_METRICS

    src = _cell_defining(ROOT / "notebooks" / "lease_timing.ipynb", "panels = [")
    start = src.index("panels = [")
    panels = ast.literal_eval(src[start + len("panels = "):src.index("]\n", start) + 1])
    for key, _title, ylabel, scale in panels:
        share = SUMMARY_METRICS[key].fraction or key.startswith("p_")
        assert (scale, ylabel.startswith("percent")) == ((100, True) if share else (1, False)), key
