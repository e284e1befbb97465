"""A model fact lives once, in model/: spec/, sim/ and cli/ name no step label, transition,
store statement, fault kind, actor kind, outcome, mark, caller decision or property by a
string of their own. They name a member of the closed vocabulary that declares it
(model/vocab.py, spec/vocab.py: ``StrEnum``s, so a member is its string at every edge), so a
model change cannot leave a stale copy behind and a misspelt name is an error at once.

Messages and docs are excepted: a docstring, an f-string's text, or a string with a space is
prose. A few words are also the names of other things and are not watched, each for the
reason given in ``OTHER_MEANINGS``; and a tuple of World field names (a property's or a
witness's ``reads``) names fields, not actors, so ``"clock"`` and ``"reaper"`` in it are not
copies."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from failclosed.model import steps, store, vocab
from failclosed.model.state import World
from failclosed.spec import properties
from failclosed.spec.vocab import PropertyName

ROOT = Path(__file__).resolve().parents[1]

# every closed vocabulary a layer above model/ may name
VOCABULARIES = (vocab.Label, vocab.TransitionName, vocab.FaultKind, vocab.ActorKind,
                vocab.OutcomeName, vocab.Mark, vocab.Decision, PropertyName)

OTHER_MEANINGS = {
    # the cost classes (provider, dispatch, ...): the environment components a step waits on,
    # which the simulator's configuration and its reports name
    **{c: "a cost class" for c in steps.COST_CLASSES},
    steps.END: "in a step's then: the process ends; a scenario's until = \"end\"",
    "row": "a store row, in history and scenario records (the reaper's per-row label is "
           "steps.REAPER_DECISION)",
    "input": "an audit event kind and a command-line argument (the decision is "
             "vocab.Decision.INPUT)",
}
WORLD_FIELDS = frozenset(f.name for f in dataclasses.fields(World))
# World.reaper compared as a field name (spec/symmetry.py's canonical form walks the fields)
FIELD_NAMES_AT = {("spec/symmetry.py", "reaper")}


def watched() -> set[str]:
    """Every member of every vocabulary, the step table's labels and the statements' names
    (both are members too: the tables refuse any other key)."""
    words = {str(m) for v in VOCABULARIES for m in v}
    words |= {a.pc for a in steps.steps()} | set(store.STATEMENTS)
    words |= set(properties.SAFETY) | set(properties.LIVENESS)
    words |= {vocab.Mark(m).prefix for m in vocab.Mark}  # how a property reads a mark
    return words - set(OTHER_MEANINGS)


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = n.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _field_tuples(tree: ast.AST) -> set[int]:
    """The string constants of every tuple whose elements are all World field names."""
    out: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Tuple) and n.elts and all(
                isinstance(e, ast.Constant) and e.value in WORLD_FIELDS for e in n.elts):
            out.update(id(e) for e in n.elts)
    return out


def copies(source: str, words: set[str]) -> list[tuple[int, str]]:
    """(line, literal) of every string constant in ``source`` equal to one of ``words``,
    outside docstrings, f-strings and tuples of World field names."""
    tree = ast.parse(source)
    skip = _docstrings(tree) | _field_tuples(tree)
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr):
            skip.update(id(v) for v in n.values)
    return sorted((n.lineno, n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and n.value in words and id(n) not in skip)


def test_the_scan_finds_a_copy_and_passes_prose():
    src = ('"""stamp"""\nx = "stamp"\ny = f"at {x} stamp"\nz = "stamp the write"\n'
           'q = ("renew_lease",)\nr = ("rows", "clock")\n')
    assert copies(src, {"stamp", "renew_lease", "clock"}) == [(2, "stamp"), (5, "renew_lease")]


def test_the_scan_finds_a_copy_of_a_member_of_each_vocabulary():
    words = watched()
    for v in VOCABULARIES:
        member = next(str(m) for m in v if str(m) in words)
        assert copies(f"if name == {member!r}:\n    pass\n", words) == [(1, member)], v.__name__


def test_no_layer_above_model_copies_a_name_of_a_vocabulary():
    words = watched()
    found = [f"{rel}:{line}: {lit!r}"
             for folder in ("spec", "sim", "cli") for f in sorted((ROOT / folder).rglob("*.py"))
             if f.name != "vocab.py"  # spec/vocab.py declares PropertyName
             for rel in [str(f.relative_to(ROOT))]
             for line, lit in copies(f.read_text(encoding="utf-8"), words)
             if (rel, lit) not in FIELD_NAMES_AT]
    assert not found, (
        "string copies of names the model (or spec/vocab.py) declares: name the member of its "
        "vocabulary instead (model/vocab.py: Label, TransitionName, FaultKind, ActorKind, "
        "OutcomeName, Mark, Decision; spec/vocab.py: PropertyName):\n  " + "\n  ".join(found))
