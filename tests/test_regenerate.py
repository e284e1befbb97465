"""The recorded artefacts are the model's: the docs show what the records hold, the records are
what ``failclosed regenerate`` makes again from the model, and a change is reported."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from failclosed.cli import main
from failclosed.cli import regenerate as regen
from failclosed.spec.scope import load_scope


def test_the_readme_matrix_is_the_recorded_one():
    record = json.loads(regen.MATRIX_JSON.read_text())
    text = regen.README.read_text()
    assert regen.render_readme(text) == text, "README.md's matrix: run failclosed regenerate"
    table = text.split(regen.MATRIX_BEGIN, 1)[1].split(regen.MATRIX_END, 1)[0]
    rows = [ln for ln in table.strip().splitlines() if ln.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == record["properties"]


def test_the_recorded_matrix_covers_the_scope_and_every_property():
    from failclosed.model.policy import PRESET_ORDER
    from failclosed.spec.properties import LIVENESS, SAFETY

    record = json.loads(regen.MATRIX_JSON.read_text())
    assert record["configurations"] == len(load_scope("standard").members)
    assert record["policies"] == [*PRESET_ORDER, "proposed"]
    assert record["properties"] == [*SAFETY, *LIVENESS]
    for p in record["policies"]:
        assert set(record["cells"][p]) == set(record["properties"])
        assert all(w == "ok" or w.isdigit() for w in record["cells"][p].values())
    text = regen.README.read_text()
    assert f"{record['configurations']:,} configurations" in text
    assert f"{record['states'] / 1e6:.1f} million states" in text


def test_every_trace_findings_md_shows_is_its_recorded_file():
    text = regen.FINDINGS_MD.read_text()
    traces = regen.recorded_traces()
    blocks = regen.findings_blocks(text)
    assert len(blocks) >= 6  # F1, F2, F3, F4, F5, F6 each show their trace
    lines = text.splitlines()
    for start, end, prop, part in blocks:
        assert (prop, part) in traces, f"FINDINGS.md shows a trace of {prop} on {part} with no file"
        assert "\n".join(lines[start:end]) == traces[(prop, part)], (
            f"FINDINGS.md's trace of {prop} on {part} differs from spec/findings: "
            "run failclosed regenerate")


def test_the_readme_names_the_central_findings_length():
    steps = re.search(r", (\d+) steps\)", next(
        t for (p, _), t in regen.recorded_traces().items()
        if p == "no_write_applied_twice_without_audit").splitlines()[0])[1]
    assert f"(shortest trace: {steps} steps" in regen.README.read_text()


def test_a_finding_is_found_again_from_its_own_file():
    path = regen.FINDINGS_DIR / "stream_order--current.toml"
    what, texts = regen.regenerate_finding(path)
    assert texts[".txt"] == path.with_suffix(".txt").read_text()
    assert texts[".toml"] == path.read_text()
    assert what == f"{len(tomllib.loads(path.read_text())['steps'])} steps"


def test_a_finding_the_model_no_longer_has_is_reported(tmp_path: Path):
    # the same configuration under the proposal, which closes F4: the trace is gone
    src = regen.FINDINGS_DIR / "no_zombie_append--current--cancel-probe.toml"
    text = src.read_text().replace("under current (", "under proposed (")
    path = tmp_path / src.name
    path.write_text(text)
    what, texts = regen.regenerate_finding(path)
    assert texts == {} and "now holds" in what


def test_findings_md_blocks_are_rendered_from_the_files():
    trace = next(iter(regen.recorded_traces().values()))
    head = trace.splitlines()[0]
    stale = f"intro\n\n```\n{head}\nan old table\n```\nend\n"
    assert regen.render_findings_md(stale) == f"intro\n\n```\n{trace}\n```\nend\n"


def test_regenerate_refuses_to_run_outside_a_checkout(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(regen, "FINDINGS_MD", tmp_path / "FINDINGS.md")
    assert main(["regenerate", "--check"]) == 2
    assert "checkout" in capsys.readouterr().err


@pytest.mark.slow
def test_every_recorded_artefact_is_what_the_model_makes(capsys):
    """``failclosed regenerate --check``: the findings, FINDINGS.md, the behaviour digests and
    README.md's matrix are unchanged (the matrix from its record; --matrix reruns it)."""
    assert main(["regenerate", "--check"]) == 0, capsys.readouterr().out


def test_the_model_guide_shows_the_step_table_as_declared():
    from failclosed.model import steps

    text = regen.GUIDE.read_text()
    assert regen.render_guide(text) == text, "docs/MODEL_GUIDE.md's step table: run failclosed regenerate"
    for a in steps.steps():
        assert f"| `{a.pc}` | {', '.join(a.fires)} | {', '.join(a.faults) or '-'} |" in text, a.pc


def test_a_matrix_record_is_compared_written_and_rendered(tmp_path, monkeypatch, capsys):
    """What --matrix and --matrix-full do with a record made again: unchanged, or changed
    with the cells that moved (written unless --check); docs/SCOPES.md then shows the
    record of ``full`` between its markers (nothing is shown while none is recorded)."""
    path = tmp_path / "matrix-full.json"
    rec = {"scope": "full", "policies": ["current"], "properties": ["stream_order"],
           "cells": {"current": {"stream_order": "8"}}}
    assert regen._record(path, lambda: rec, check_only=True) == 1 and not path.exists()
    assert regen._record(path, lambda: rec, check_only=False) == 1
    assert json.loads(path.read_text()) == rec
    assert regen._record(path, lambda: rec, check_only=False) == 0
    moved = {**rec, "cells": {"current": {"stream_order": "ok"}}}
    assert regen._record(path, lambda: moved, check_only=False) == 1
    assert "current/stream_order: 8 -> ok" in capsys.readouterr().out
    text = f"before\n{regen.FULL_BEGIN}\nold\n{regen.MATRIX_END}\nafter\n"
    monkeypatch.setattr(regen, "MATRIX_FULL_JSON", path)
    shown = regen.render_scopes(text)
    assert "| `stream_order` | ok |" in shown and "old" not in shown
    assert shown.startswith("before\n") and shown.endswith("after\n")
    monkeypatch.setattr(regen, "MATRIX_FULL_JSON", tmp_path / "none.json")
    assert regen.render_scopes(text) == text
