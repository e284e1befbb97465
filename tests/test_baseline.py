"""Baselines (spec/baseline.py) as a library: how observed cells sort into known, new and
fixed, which entry accepts a cell, every validation error, and the text round trip."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.model.config import ConfigError  # noqa: E402
from failclosed.spec.baseline import (  # noqa: E402
    Baseline,
    Comparison,
    Known,
    baseline_text,
    load_baseline,
    write_baseline,
)
from failclosed.spec.baseline import baseline_from_dict as parse  # noqa: E402

P1, P2 = "no_orphan_queued_run", "stream_order"


def test_known_cell_label_and_where_it_is_judged():
    k = Known("current", P1, "why", "F3", "small")
    assert k.cell == ("current", P1)
    assert k.label() == f"current / {P1} [F3]"
    assert Known("current", P1, "why").label() == f"current / {P1}"
    assert k.judged_on("small") and not k.judged_on("tiny") and not k.judged_on(None)
    anywhere = Known("current", P1, "why")
    assert anywhere.judged_on("tiny") and anywhere.judged_on(None)


def test_compare_sorts_cells_into_known_new_and_fixed():
    a = Known("current", P1, "r1")
    b = Known("current", P2, "r2")
    c = Known("proposed", P1, "r3")
    base = Baseline((a, b, c))
    cmp = base.compare({("current", P1): True, ("current", P2): False,
                        ("proposed", P2): True})
    assert cmp.known == [a]
    assert cmp.new == [("proposed", P2)]
    assert cmp.fixed == [b]  # c's cell was not checked: not judged
    assert not cmp.ok
    assert cmp.lines() == [
        f"NEW violation (not in the baseline): proposed / {P2}",
        f"warning: fixed (listed in the baseline, holds now; remove the entry): current / {P2}",
    ]
    assert cmp.to_json() == {"known": [["current", P1]], "new": [["proposed", P2]],
                             "fixed": [["current", P2]], "not_reached": []}
    assert Comparison().ok and Comparison(fixed=[a]).ok


def test_an_entry_holding_in_an_incomplete_search_is_not_reached_never_fixed():
    """Issue 38 item 1: only a complete search may call an entry fixed."""
    b = Known("current", P2, "r2", finding="F1")
    cmp = Baseline((b,)).compare({("current", P2): False}, None, "in a search truncated by X")
    assert cmp.fixed == [] and cmp.not_reached == [(b, "in a search truncated by X")]
    assert cmp.ok and cmp.to_json()["not_reached"] == [{"cell": ["current", P2],
                                                        "why": "in a search truncated by X"}]
    assert "not reached" in cmp.lines()[0] and "remove" not in cmp.lines()[0]


def test_an_entry_observed_elsewhere_accepts_but_is_never_fixed_here():
    k = Known("current", P1, "r", config="small")
    base = Baseline((k,))
    assert base.compare({("current", P1): True}, config="tiny").known == [k]
    assert base.compare({("current", P1): False}, config="tiny").fixed == []
    assert base.compare({("current", P1): False}, config="small").fixed == [k]


def test_find_prefers_the_entry_of_the_checked_configuration():
    anywhere = Known("current", P1, "r1")
    small = Known("current", P1, "r2", config="small")
    base = Baseline((anywhere, small))
    assert base.find("current", P1, "small") is small
    assert base.find("current", P1, "tiny") is anywhere  # the first one
    assert base.find("current", P1) is anywhere
    assert base.find("proposed", P1) is None and base.find("current", P2) is None


def test_parse_expands_policies_and_properties():
    b = parse({"known": [{"policies": ["current", "proposed"], "properties": [P1, P2],
                          "reason": "  why  ", "finding": "F1", "config": "small"}]}, "b.toml")
    assert [k.cell for k in b.entries] == [("current", P1), ("current", P2),
                                           ("proposed", P1), ("proposed", P2)]
    assert {k.reason for k in b.entries} == {"why"}  # stripped
    assert {(k.finding, k.config) for k in b.entries} == {("F1", "small")}
    assert b.path == "b.toml"
    assert parse({}).entries == ()


@pytest.mark.parametrize(("entry", "message"), [
    ({"property": P1, "reason": "r"}, "known[0].policy: give exactly one of policy"),
    ({"policy": "current", "policies": ["current"], "property": P1, "reason": "r"},
     "known[0].policy: give exactly one of policy"),
    ({"policy": "", "property": P1, "reason": "r"}, "known[0].policy: expected a policy name"),
    ({"policies": [], "property": P1, "reason": "r"},
     "known[0].policies: expected a non-empty list of a policy names"),
    ({"policies": ["current", 3], "property": P1, "reason": "r"}, "known[0].policies"),
    ({"policy": "adr-999", "property": P1, "reason": "r"}, "known[0].policy: "),
    ({"policy": "current", "property": "no_orphan_queued_runs", "reason": "r"},
     "did you mean 'no_orphan_queued_run'?"),
    ({"policy": "current", "property": "zzz", "reason": "r"}, "use one of "),
    ({"policy": "current", "property": P1}, "known[0].reason: missing"),
    ({"policy": "current", "property": P1, "reason": "   "}, "known[0].reason: missing"),
    ({"policy": "current", "property": P1, "reason": "r", "finding": ""}, "known[0].finding"),
    ({"policy": "current", "property": P1, "reason": "r", "finding": 1}, "known[0].finding"),
    ({"policy": "current", "property": P1, "reason": "r", "config": ""}, "known[0].config"),
    ({"policy": "current", "property": P1, "reason": "r", "config": 2}, "known[0].config"),
    ({"policy": "current", "property": P1, "reason": "r", "reasons": "x"}, "reasons"),
])
def test_a_bad_entry_is_one_error_naming_the_field(entry, message):
    with pytest.raises(ConfigError) as e:
        parse({"known": [entry]}, "b.toml")
    assert message in str(e.value) and str(e.value).startswith("b.toml: ")
    assert "\n" not in str(e.value)


def test_bad_tables_and_duplicates():
    with pytest.raises(ConfigError, match="known: expected an array"):
        parse({"known": {"policy": "current"}})
    with pytest.raises(ConfigError, match="known: expected an array"):
        parse({"known": ["x"]})
    with pytest.raises(ConfigError, match=r"^b\.toml: .*knwon"):
        parse({"knwon": []}, "b.toml")
    e = {"policy": "current", "property": P1, "reason": "r"}
    with pytest.raises(ConfigError, match=r"known\[1\]: current / no_orphan_queued_run is "
                                          r"already listed in known\[0\]; remove one"):
        parse({"known": [e, e]})
    # the same cell observed on two configurations is two entries, not a duplicate
    b = parse({"known": [e | {"config": "small"}, e | {"config": "tiny"}, e]})
    assert len(b.entries) == 3


def test_text_round_trip(tmp_path):
    entries = [Known("current", P1, 'a "quoted" reason\\ with ü', "F1", "small"),
               Known("adr-141", P2, "plain")]
    text = baseline_text(entries, header="first line\nsecond")
    assert text.startswith("# first line\n# second\n\n[[known]]\n")
    assert 'finding = "F1"' in text and 'config = "small"' in text
    assert text.count("[[known]]") == 2 and text.endswith("\n")
    assert "finding" not in text.split("[[known]]")[2]  # none given: none written
    p = write_baseline(tmp_path / "b.toml", entries, header="h")
    back = load_baseline(p)
    assert list(back.entries) == entries and back.path == str(p)
    assert baseline_text([]) == "\n"
    assert baseline_text(entries[1:]).startswith("[[known]]\n")  # no header: no blank line


def test_compare_accepts_with_the_entry_of_the_checked_configuration():
    anywhere = Known("current", P1, "r1")
    small = Known("current", P1, "r2", config="small")
    cmp = Baseline((anywhere, small)).compare({("current", P1): True}, config="small")
    assert cmp.known == [small]


def test_messages_name_the_source_the_field_and_the_fix():
    with pytest.raises(ConfigError, match=r"^baseline: known: expected an array"):
        parse({"known": "x"})  # the default source
    assert parse({"description": "d", "known": []}).entries == ()  # a description is allowed
    with pytest.raises(ConfigError, match=r"^b: known\[0\]\.property: give exactly one of "
                                          r"property = \"\.\.\.\" or properties = \[\.\.\.\]"):
        parse({"known": [{"policy": "current", "reason": "r"}]}, "b")
    with pytest.raises(ConfigError, match=r"known\[0\]\.property: expected a property name, "):
        parse({"known": [{"policy": "current", "property": "", "reason": "r"}]})
    with pytest.raises(ConfigError) as e:
        parse({"known": [{"policy": "current", "property": "zzz", "reason": "r"}]})
    from failclosed.spec.properties import LIVENESS, SAFETY

    assert str(e.value).endswith(f"use one of {', '.join([*SAFETY, *LIVENESS])}")
    with pytest.raises(ConfigError) as e:
        parse({"known": [{"policy": "current", "property": P1}]})
    assert str(e.value).endswith("say why this violation is accepted (a finding, a "
                                 "docs/RUNTIME.md section)")


def test_text_keeps_non_ascii_readable_and_trims_header_lines(tmp_path):
    text = baseline_text([Known("current", P1, "naïve reason")], header="a  \n\nb")
    assert 'reason = "naïve reason"' in text
    assert text.startswith("# a\n#\n# b\n\n[[known]]")
    p = write_baseline(tmp_path / "b.toml", [Known("current", P1, "r")], header="head")
    assert p.read_text(encoding="utf-8").startswith("# head\n\n[[known]]\n")
    q = write_baseline(tmp_path / "c.toml", [Known("current", P1, "r")])
    assert q.read_text(encoding="utf-8").startswith("[[known]]\n")


def test_an_entry_with_variants_accepts_a_variant_of_its_policy():
    """``variants = true``: current's entry judges current-write_fence too (never adr-141's
    variants, never another property), own entries first, fixed only under its own policy."""
    b = parse({"known": [
        {"policy": "current", "property": P1, "variants": True, "reason": "F3", "finding": "F3"},
        {"policy": "current", "property": P2, "reason": "F2, no variants"}]})
    assert b.find("current-write_fence", P1).finding == "F3"
    assert b.find("current+fence_cleared_after_audit", P1) is not None
    assert b.find("current-write_fence", P2) is None  # that entry says nothing of variants
    assert b.find("adr-141-write_fence", P1) is None  # another preset's variant
    assert b.find("currentx", P1) is None
    cmp = b.compare({("current-write_fence", P1): True, ("current-write_fence", P2): True,
                     ("current-write_fence", "exclusive_claim"): False})
    assert [k.cell for k in cmp.known] == [("current", P1)]
    assert cmp.new == [("current-write_fence", P2)] and cmp.fixed == []
    assert b.compare({("current-write_fence", P1): False}).fixed == []
    text = baseline_text(b.entries)
    assert "variants = true" in text and parse(__import__("tomllib").loads(text)) == Baseline(
        b.entries, "baseline")
    with pytest.raises(ConfigError, match=r"known\[0\]\.variants: expected true or false"):
        parse({"known": [{"policy": "current", "property": P1, "variants": "yes", "reason": "r"}]})


def test_the_shipped_baseline_judges_a_variant_of_current_by_its_findings(tmp_path, capsys):
    """`check --policy current-write_fence --baseline current`: F3 (no switch touches it) is
    known, what the variant breaks is new; --write-baseline records the variant's own cells."""
    import json

    from failclosed.cli import main

    j, w = tmp_path / "r.json", tmp_path / "b.toml"
    rc = main(["check", "--policy", "current-write_fence", "--config", "tiny", "--quiet",
               "--baseline", "current", "--json", str(j)])
    capsys.readouterr()
    cmp = json.loads(j.read_text())["baseline"]
    known = {tuple(c) for c in cmp["known"]}
    assert {("current", "no_orphan_queued_run"), ("current", "every_run_terminates")} <= known
    assert rc == 1 and cmp["new"] and all(p == "current-write_fence" for p, _ in cmp["new"])
    assert not {prop for _, prop in cmp["new"]} & {prop for _, prop in known}
    main(["check", "--policy", "current-write_fence", "--config", "tiny", "--quiet",
          "--baseline", "current", "--write-baseline", str(w)])
    capsys.readouterr()
    written = load_baseline(w)
    f3 = written.find("current-write_fence", "no_orphan_queued_run")
    assert f3.policy == "current-write_fence" and f3.finding == "F3" and not f3.variants
