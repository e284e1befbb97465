"""The shape a reader relies on (issue 41 item 5): no function in model/, spec/ or sim/ over 80
lines, no module of model/ or spec/ over 1,000 lines, no import cycle inside a package, and every
import made inside a function says why it is there (a heavy or optional module: matplotlib,
scipy, dask, rich, a database driver), on its line or the line above."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("model", "spec", "sim", "cli")
MAX_FUNCTION = {"model": 80, "spec": 80, "sim": 80}
MAX_MODULE = {"model": 1000, "spec": 1000}


def _modules(pkg: str) -> dict[str, Path]:
    return {f.stem: f for f in sorted((ROOT / pkg).glob("*.py"))}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def long_functions(path: Path, limit: int) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{n.lineno} {n.name} ({n.end_lineno - n.lineno + 1} lines)"
            for n in ast.walk(_tree(path))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            and n.end_lineno - n.lineno + 1 > limit]


def imported_siblings(pkg: str, path: Path, names: set[str]) -> set[str]:
    """The modules of ``pkg`` that ``path`` imports, at any depth (in a function too)."""
    out: set[str] = set()
    for n in ast.walk(_tree(path)):
        if isinstance(n, ast.ImportFrom):
            mod = n.module or ""
            if n.level == 1:
                targets = [mod.split(".")[0]] if mod else [a.name for a in n.names]
            elif mod == f"failclosed.{pkg}":
                targets = [a.name for a in n.names]
            elif mod.startswith(f"failclosed.{pkg}."):
                targets = [mod.split(".")[2]]
            else:
                targets = []
        elif isinstance(n, ast.Import):
            targets = [a.name.split(".")[2] for a in n.names
                       if a.name.startswith(f"failclosed.{pkg}.")]
        else:
            continue
        out.update(t for t in targets if t in names)
    return out


def cycles(pkg: str) -> list[list[str]]:
    mods = _modules(pkg)
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for name, path in mods.items():
        g.add_edges_from((name, t) for t in imported_siblings(pkg, path, set(mods)) if t != name)
    return sorted(sorted(c) for c in nx.simple_cycles(g))


def unexplained_local_imports(path: Path) -> list[str]:
    """Imports inside a function with no comment on their line or the line above."""
    lines = path.read_text().splitlines()
    out = []
    for fn in ast.walk(_tree(path)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        local = [n for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))]
        in_imports = {i for n in local for i in range(n.lineno, n.end_lineno + 1)}
        for n in local:
            above = n.lineno - 1  # a block of imports shares the comment above its first
            while above in in_imports and "#" not in lines[above - 1]:
                above -= 1
            if "#" not in lines[n.lineno - 1] and not lines[above - 1].strip().startswith("#"):
                out.append(f"{path.relative_to(ROOT)}:{n.lineno} {lines[n.lineno - 1].strip()}")
    return sorted(set(out))


@pytest.mark.parametrize("pkg", sorted(MAX_FUNCTION))
def test_no_function_over_80_lines(pkg):
    found = [x for p in _modules(pkg).values() for x in long_functions(p, MAX_FUNCTION[pkg])]
    assert not found, "split into named steps a reader follows: " + "; ".join(found)


@pytest.mark.parametrize("pkg", sorted(MAX_MODULE))
def test_no_module_over_1000_lines(pkg):
    found = [f"{p.relative_to(ROOT)} ({len(p.read_text().splitlines())} lines)"
             for p in _modules(pkg).values()
             if len(p.read_text().splitlines()) > MAX_MODULE[pkg]]
    assert not found, "split along what a reader looks for separately: " + "; ".join(found)


@pytest.mark.parametrize("pkg", PACKAGES)
def test_no_import_cycle_inside_a_package(pkg):
    assert cycles(pkg) == []


@pytest.mark.parametrize("pkg", PACKAGES)
def test_an_import_inside_a_function_says_why(pkg):
    found = [x for p in _modules(pkg).values() for x in unexplained_local_imports(p)]
    assert not found, "move to the module's top, or say why it is lazy: " + "; ".join(found)


def test_the_checks_catch_what_they_look_for(tmp_path, monkeypatch):
    """Each check fails on a planted case: a long function, a cycle, a silent local import."""
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    pkg = tmp_path / "model"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(81))
    (pkg / "a.py").write_text(f"from . import b\n\n\ndef f():\n{body}\n")
    (pkg / "b.py").write_text("def g():\n    from failclosed.model import a  # why\n"
                              "    import json\n    return a, json\n")
    assert long_functions(pkg / "a.py", 80) == ["model/a.py:4 f (82 lines)"]
    assert cycles("model") == [["a", "b"]]
    assert unexplained_local_imports(pkg / "b.py") == ["model/b.py:3 import json"]
