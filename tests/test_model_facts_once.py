"""A model fact lives once, in model/: spec/, sim/ and cli/ name no step label and no store
statement by a string of their own (they read ``model.steps`` / ``model.store`` constants, the
step table or the statement table), so a model change cannot leave a stale copy behind.

Messages and docs are excepted: a docstring, an f-string's text, or a string with a space is
prose. Two words are also the names of other things and are not watched: the cost classes
(``provider``, ``dispatch``, ...: the environment components a step waits on, which the
simulator's configuration names) and ``row`` (a store row, in history and scenario records;
the reaper's label for its per-row decision is ``steps.REAPER_DECISION``)."""

from __future__ import annotations

import ast
from pathlib import Path

from failclosed.model import steps, store

ROOT = Path(__file__).resolve().parents[1]
OTHER_MEANINGS = set(steps.COST_CLASSES) | {steps.END, "row"}


def watched() -> set[str]:
    labels = {a.pc for a in steps.steps()}
    return (labels | set(store.STATEMENTS)) - OTHER_MEANINGS


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = n.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def copies(source: str, words: set[str]) -> list[tuple[int, str]]:
    """(line, literal) of every string constant in ``source`` equal to one of ``words``,
    outside docstrings and f-strings."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            skip.update(id(v) for v in n.values)
    return sorted((n.lineno, n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and n.value in words and id(n) not in skip)


def test_the_scan_finds_a_copy_and_passes_prose():
    src = '"""stamp"""\nx = "stamp"\ny = f"at {x} stamp"\nz = "stamp the write"\nq = ("renew_lease",)\n'
    assert copies(src, {"stamp", "renew_lease"}) == [(2, "stamp"), (5, "renew_lease")]


def test_no_layer_above_model_copies_a_label_or_a_statement_name():
    words = watched()
    found = [f"{f.relative_to(ROOT)}:{line}: {lit!r}"
             for folder in ("spec", "sim", "cli") for f in sorted((ROOT / folder).rglob("*.py"))
             for line, lit in copies(f.read_text(encoding="utf-8"), words)]
    assert not found, (
        "string copies of the model's step labels / store statements (read the constant from "
        "model.steps or model.store, or derive it from the step table):\n  " + "\n  ".join(found))
