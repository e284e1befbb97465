"""spec/SPEC.md states exactly the registry's properties, each with the formula and the source
of its one declaration in spec/properties.py (``@always`` / ``@leads_to``).

In SPEC.md each property is a line ``**name** (source)`` under "## Safety properties" or
"## Liveness properties", followed (after one blank line) by the formula as an indented
block. Formulas are compared with whitespace normalised, nothing else.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from failclosed.spec.properties import LIVENESS, SAFETY

SPEC_MD = Path(__file__).resolve().parents[1] / "spec" / "SPEC.md"
SECTIONS = {"Safety properties": SAFETY, "Liveness properties": LIVENESS}
HEADING = re.compile(r"^\*\*(\w+)\*\* \((.+)\)$")


def _norm(text: str) -> str:
    return " ".join(text.split())


def parse(text: str) -> dict[str, list[tuple[str, str, str]]]:
    """{section title: [(name, source, formula), ...] in document order} for the sections of
    ``SECTIONS``; a heading without an indented block after it gets formula ''."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    section: str | None = None
    lines = text.splitlines()
    for k, line in enumerate(lines):
        if line.startswith("## "):
            section = line[3:].strip() if line[3:].strip() in SECTIONS else None
            if section is not None:
                out.setdefault(section, [])
            continue
        m = HEADING.match(line)
        if section is None or m is None:
            continue
        j = k + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        block = []
        while j < len(lines) and lines[j].startswith("    ") and lines[j].strip():
            block.append(lines[j])
            j += 1
        out[section].append((m.group(1), m.group(2), "\n".join(block)))
    return out


def _declared() -> dict[str, list[tuple[str, str, str]]]:
    return parse(SPEC_MD.read_text(encoding="utf-8"))


def _block(statement: str) -> str:
    return "\n".join("    " + line for line in statement.splitlines())


def test_the_parser_reads_headings_and_indented_blocks():
    text = (
        "## Safety properties\n\n**a_b** (ADR-111; RUNTIME 16.1)\n\n    □ x\n      ∧ y\n\nProse "
        "**not_a_heading** (x).\n**c** (s)\n\nno block\n\n## Fairness\n\n**d** (t)\n\n    z\n"
    )
    assert parse(text) == {
        "Safety properties": [("a_b", "ADR-111; RUNTIME 16.1", "    □ x\n      ∧ y"),
                              ("c", "s", "")],
    }


@pytest.mark.parametrize("section", list(SECTIONS))
def test_spec_md_lists_exactly_the_registry(section):
    names = [n for n, _, _ in _declared().get(section, [])]
    registry = SECTIONS[section]
    dup = sorted({n for n in names if names.count(n) > 1})
    assert not dup, f"SPEC.md {section}: listed twice: {dup}"
    assert not set(names) - set(registry), (
        f"SPEC.md {section} lists properties the registry does not declare: "
        f"{sorted(set(names) - set(registry))}")
    missing = [n for n in registry if n not in names]
    assert not missing, (
        f"SPEC.md {section} does not list {missing}; paste under \"## {section}\":\n\n"
        + "\n\n".join(_entry(registry[n]) for n in missing))


def _entry(p) -> str:
    """A property's SPEC.md entry, as the declaration gives it: heading, blank line, block."""
    return f"**{p.name}** ({p.source})\n\n{_block(p.statement)}"


def test_a_missing_entry_is_printed_ready_to_paste():
    p = SAFETY["stream_order"]
    entry = _entry(p)
    assert parse(f"## Safety properties\n\n{entry}\n") == {
        "Safety properties": [(p.name, p.source, _block(p.statement))]}


@pytest.mark.parametrize("section", list(SECTIONS))
def test_spec_md_shows_each_declarations_formula_and_source(section):
    registry = SECTIONS[section]
    for name, source, formula in _declared().get(section, []):
        p = registry.get(name)
        if p is None:
            continue  # test_spec_md_lists_exactly_the_registry names it
        assert _norm(formula) == _norm(p.statement), (
            f"SPEC.md {name}: the formula differs from its declaration in spec/properties.py; "
            f"the declaration reads:\n{_block(p.statement)}\nSPEC.md reads:\n{formula}")
        assert source == p.source, f"SPEC.md {name}: source ({source}), declared ({p.source})"


def test_spec_md_and_model_next_quote_next_as_the_actor_table_declares_it():
    """Next's disjunction (the actor kinds in their fixed order) and its fairness conjuncts,
    read from model/next.py's table, are quoted as an indented block in spec/SPEC.md and in
    model/next.py's docstring: a kind added, moved or made fair changes both quotes."""
    from failclosed.model import next as model_next

    quote = _block(model_next.formula())
    assert quote in SPEC_MD.read_text(encoding="utf-8"), f"spec/SPEC.md should quote:\n{quote}"
    # the docstring as written (a build compiled by mypyc keeps no module docstring)
    source = Path(model_next.__file__).with_name("next.py").read_text(encoding="utf-8")
    assert quote in (ast.get_docstring(ast.parse(source)) or ""), \
        f"model/next.py should quote:\n{quote}"
    assert model_next.formula().startswith(
        "Next == Caller \\/ Process \\/ Worker \\/ Bus \\/ Reaper \\/ Operator \\/ Clock")
