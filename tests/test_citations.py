"""Every citation in the repository resolves inside the repository.

Code, docs, notebooks, scenarios and configs cite the description of the modelled runtime
as ``RUNTIME 7.2`` (also ``RUNTIME.md 7.2``, ``RUNTIME section 16.4``, lists such as
``RUNTIME 6.1 step 5, 6.3, 9 step 7``). A user who clones only this repository must find
each one: every number is a heading of docs/RUNTIME.md, every step or branch an item of
that section, every decision record (ADR number, commit) cited anywhere is explained
there, every markdown link and every mention of docs/RUNTIME.md or docs/DESIGN.md names a
file of the checkout, and nothing points outside it (the team's working material beside
the checkout is not part of the product). This file is left out of the scan: its samples
are broken on purpose.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from failclosed.model.names import TRANSITIONS

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "docs" / "RUNTIME.md"
SELF = Path(__file__).resolve()

NUM = r"\d+(?:\.\d+)*"
ITEM = rf"{NUM}(?:\s+(?:step|branch)\s+{NUM})?"
SEP = r"(?:\s*,\s*|\s+and\s+|\s*/\s*)"
# "RUNTIME 7.2", "RUNTIME.md 6.1 step 5, 6.3", "RUNTIME sections 13 and 14", "RUNTIME § 16.4"
CITE = re.compile(rf"\bRUNTIME(?:\.md)?\s+(?:sections?\s+|§\s*)?(?P<list>{ITEM}(?:{SEP}{ITEM})*)")
ITEM_RE = re.compile(rf"(?<![\w.])(?P<sec>{NUM})(?:\s+(?P<kind>step|branch)\s+(?P<sub>{NUM}))?")
# The forms the repository used before docs/RUNTIME.md existed: they name files a clone lacks.
LEGACY = re.compile(r"\bREFERENCE\b|\.\./shared\b|(?<![\w.-])shared/(?:REFERENCE|DESIGN)\b")
# A mention of one of the two description files, with whatever directory precedes it (a
# quoted name is a path component code joins, not a mention).
DOC_FILE = re.compile(r"(?<![\w./\"'-])((?:[\w.-]+/)*(?:RUNTIME|DESIGN)\.md)(?!\s+(?:sections?\s+|§\s*)?\d)")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
PARENT_PATH = re.compile(r"(?<![\w./-])((?:\.\./)+[\w.-][\w./-]*)")
# Absolute paths into a machine's home or work directories (a user's clone has none of them).
ABSOLUTE = re.compile(r"(?<![\w.:/~-])(/(?:work|home|Users|root|mnt|srv|opt)/[\w./-]+)")
ADR = re.compile(r"\bADR-\d+\b")
COMMIT = re.compile(r"\bcommit ([0-9a-f]{7,40})\b")


# -- the description's structure ------------------------------------------------------------


def headings(text: str) -> dict[str, tuple[int, int, int]]:
    """Numbered headings: number -> (level, start of the body, end of the body)."""
    found = [
        (m.group(2), len(m.group(1)), m.start(), m.end())
        for m in re.finditer(rf"^(#{{2,6}})\s+({NUM})\.?\s", text, re.M)
    ]
    out = {}
    for i, (num, level, _, body) in enumerate(found):
        end = next((s for _, lv, s, _ in found[i + 1:] if lv <= level), len(text))
        out[num] = (level, body, end)
    return out


def has_item(body: str, sub: str) -> bool:
    """Step ``k`` (or ``k.j``) is a numbered item ``k.`` of the section (a table row ``| k |``
    for a branch); ``k.j`` is item ``j.`` nested under item ``k.``."""
    first, *rest = sub.split(".")
    m = re.search(rf"^(\s*)(?:{first}\.\s|\|\s*{first}\s*\|)", body, re.M)
    if m is None:
        return False
    if not rest:
        return True
    after = body[m.end():]
    nxt = re.search(rf"^{m.group(1)}\d+\.\s", after, re.M)  # the next item at k's level
    return re.search(rf"^{m.group(1)}\s+{rest[0]}\.\s", after[: nxt.start() if nxt else None], re.M) is not None


def unresolved_sections(refs: str, text: str, heads: dict) -> list[str]:
    """The items of a citation list that do not resolve in the description ``text``."""
    bad = []
    for m in ITEM_RE.finditer(refs):
        sec, kind, sub = m.group("sec", "kind", "sub")
        if sec not in heads:
            bad.append(f"{sec} (no such heading)")
        elif sub is not None:
            _, start, end = heads[sec]
            if not has_item(text[start:end], sub):
                bad.append(f"{sec} {kind} {sub} (no such {kind} in {sec})")
    return bad


# -- scanning -------------------------------------------------------------------------------


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout.decode()
        files = [ROOT / p for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):  # an export without .git
        # what .gitignore leaves out: environments, builds and tool caches (Hypothesis writes
        # .hypothesis/ into the working directory while the suite runs)
        skip = {".git", ".venv", "venv", "__pycache__", "build", "dist", ".pytest_cache",
                ".hypothesis", ".ruff_cache", ".mypy_cache", "out", "sim-violations"}
        files = [p for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]
    return sorted(p for p in files if p.is_file())


def text_files() -> list[tuple[Path, str]]:
    out = []
    for p in tracked_files():
        if p.resolve() == SELF:
            continue
        data = p.read_bytes()
        if b"\0" in data:
            continue  # images
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if p.suffix == ".ipynb":  # the cells' own text, not the JSON escapes of it
            nb = json.loads(text)
            text = "\n".join("".join(c.get("source", "")) for c in nb.get("cells", []))
        out.append((p, text))
    return out


def inside(path: Path) -> bool:
    return path.resolve().is_relative_to(ROOT)


def problems(path: Path, text: str, runtime_text: str) -> list[str]:
    """Every citation of ``text`` (the file ``path``) that does not resolve, one line each."""
    heads = headings(runtime_text)
    rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    out = []

    def line(pos: int) -> str:
        return f"{rel}:{text.count(chr(10), 0, pos) + 1}"

    for m in CITE.finditer(text):
        for bad in unresolved_sections(m.group("list"), runtime_text, heads):
            out.append(f"{line(m.start())}: {m.group(0)!r}: {bad}")
    for m in LEGACY.finditer(text):
        out.append(f"{line(m.start())}: {m.group(0)!r}: a file outside the repository; cite docs/RUNTIME.md")
    for m in DOC_FILE.finditer(text):
        name = m.group(1)
        if not any((base / name).is_file() and inside(base / name) for base in (path.parent, ROOT)):
            out.append(f"{line(m.start())}: {name!r}: no such file (write docs/{Path(name).name})")
    if path.suffix in (".md", ".ipynb"):
        for m in LINK.finditer(text):
            target = m.group(1).split("#")[0]
            if not target or re.match(r"[a-z]+:", target):
                continue  # an anchor or a URL
            dest = path.parent / target
            if not inside(dest) or not dest.exists():
                out.append(f"{line(m.start())}: link {m.group(1)!r} does not resolve inside the repository")
    for m in PARENT_PATH.finditer(text):
        if not inside(path.parent / m.group(1)):
            out.append(f"{line(m.start())}: {m.group(1)!r} points outside the repository")
    for m in ABSOLUTE.finditer(text):
        out.append(f"{line(m.start())}: {m.group(1)!r} is an absolute path outside the repository")
    return out


# -- the tests ------------------------------------------------------------------------------


def test_the_description_numbers_sections_1_to_17_without_gaps():
    heads = headings(RUNTIME.read_text())
    assert [str(n) for n in range(1, 18)] == [h for h in heads if "." not in h]
    for h in heads:
        *parent, last = h.split(".")
        if parent:
            assert ".".join(parent) in heads, f"{h} has no parent section"
            if last != "1":
                assert ".".join([*parent, str(int(last) - 1)]) in heads, f"{h} follows a gap"
    # the guarantees are cited one by one: each is a heading of its own
    assert {f"16.{i}" for i in range(1, 18)} <= set(heads)


def test_every_citation_in_the_repository_resolves_inside_it():
    runtime_text = RUNTIME.read_text()
    found = [p for path, text in text_files() for p in problems(path, text, runtime_text)]
    assert not found, "unresolved citations:\n" + "\n".join(found)


def test_every_place_the_transition_vocabulary_names_is_a_section():
    """model/names.py gives, for each transition, the RUNTIME places that name it."""
    runtime_text = RUNTIME.read_text()
    heads = headings(runtime_text)
    statements = runtime_text[heads["4"][1]:heads["4"][2]]
    bad = []
    for name, (place, _) in TRANSITIONS.items():
        bad += [f"{name}: {b}" for b in unresolved_sections(place, runtime_text, heads)]
        bad += [f"{name}: T{n}" for n in re.findall(r"\bT(\d+)\b", place)
                if not re.search(rf"\bT{n}\b", statements)]
        if "conventions" in place and "## Conventions" not in runtime_text:
            bad.append(f"{name}: conventions")
    assert not bad, bad


def test_every_decision_record_cited_anywhere_is_described():
    runtime_text = RUNTIME.read_text()
    described_adrs = set(ADR.findall(runtime_text))
    described_commits = set(COMMIT.findall(runtime_text))
    missing = set()
    for _path, text in text_files():
        missing |= {a for a in ADR.findall(text) if a not in described_adrs}
        missing |= {f"commit {c}" for c in COMMIT.findall(text)
                    if not any(d.startswith(c) or c.startswith(d) for d in described_commits)}
    assert not missing, sorted(missing)


# -- the scanner itself catches each kind of broken citation ---------------------------------

SAMPLE_RUNTIME = """# R

## 1. One

### 1.1 Sub

1. first
2. second
   1. nested

## 2. Two

| Branch | x |
|---|---|
| 1 | a |
"""


R = "RUNTIME"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"{R} 1.1 step 2, 2 branch 1 and {R}.md section 1", None),
        (f"{R} 1.1 step 2.1; [the file](../docs/RUNTIME.md)", None),
        (f"see {R} 1.2", "1.2 (no such heading)"),
        (f"{R} 1, 3", "3 (no such heading)"),
        (f"{R} 1.1 step 3", "1.1 step 3"),
        (f"{R} 1.1 step 1.1", "1.1 step 1.1"),
        (f"{R} 2 branch 4", "2 branch 4"),
        ("as REFER" "ENCE.md 7.2 says", "outside the repository"),
        ("(DESI" "GN.md, one semantics)", "no such file"),
        ("../../shar" "ed/x.md", "outside the repository"),
        ("[x](../../elsewhere.md)", "does not resolve"),
        ("run /wo" "rk/venv/bin/python", "absolute path"),
    ],
)
def test_the_scanner_reports_each_broken_form(text: str, expected: str | None):
    found = problems(ROOT / "model" / "sample.md", text, SAMPLE_RUNTIME)
    if expected is None:
        assert found == []
    else:
        assert found and all(expected in f for f in found[:1]), found
