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
