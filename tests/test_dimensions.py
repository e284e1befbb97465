"""The dimension table (spec/dimensions.py): every behaviour-changing field of a configuration
is a dimension, every value of every dimension is in ``standard``, and what the generators
build reads back as what they meant."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.model import constants as model_constants  # noqa: E402
from failclosed.model import state as model_state  # noqa: E402
from failclosed.model.config import parse_config  # noqa: E402
from failclosed.spec import dimensions as D  # noqa: E402
from failclosed.spec.scope import load_scope  # noqa: E402


def _record(name: str) -> type:
    return getattr(model_state, name, None) or getattr(model_constants, name)


def undeclared_fields() -> list[str]:
    """Every field of model/'s configuration records that no dimension declares and that
    NOT_BEHAVIOUR does not explain."""
    declared = {f for d in D.DIMENSIONS for f in d.fields} | set(D.NOT_BEHAVIOUR)
    out = []
    for rec in D.RECORDS:
        for f in dataclasses.fields(_record(rec)):
            if f"{rec}.{f.name}" not in declared:
                out.append(f"{rec}.{f.name}")
    return out


def test_every_configuration_field_is_a_dimension():
    missing = undeclared_fields()
    assert not missing, (f"configuration fields no dimension declares: {', '.join(missing)}; "
                         "add a Dimension to spec/dimensions.py (or, with the reason, an entry "
                         "of NOT_BEHAVIOUR)")


def test_a_new_field_without_a_dimension_is_named(monkeypatch):
    """The check above is not vacuous: a field added to RunSpec fails it, by name."""
    @dataclasses.dataclass(frozen=True)
    class RunSpec(model_state.RunSpec):  # type: ignore[misc]
        priority: int = 0

    monkeypatch.setattr(model_state, "RunSpec", RunSpec)
    assert undeclared_fields() == ["RunSpec.priority"]


def test_declared_fields_exist():
    """A dimension naming a field the records do not have is a stale entry."""
    real = {f"{rec}.{f.name}" for rec in D.RECORDS for f in dataclasses.fields(_record(rec))}
    real.add("World.faults")  # the fault budget: the initial world's, not a Config field
    stale = sorted({f for d in D.DIMENSIONS for f in d.fields} | set(D.NOT_BEHAVIOUR))
    assert [f for f in stale if f not in real] == []


def test_values_are_model_facts_and_distinct():
    for d in D.DIMENSIONS:
        assert d.level in D.LEVELS, d.name
        assert len(set(d.values)) == len(d.values), d.name
        assert all(k in {x.name for x in D.DIMENSIONS} | {"tools"} for k in d.context), d.name


def test_small_values_include_the_runtime_defaults_shapes():
    """A retry budget of two or more (the runtime's is MAX_REQUEUES = 3), a backoff cap
    reached after more than one doubling, the runtime's round caps."""
    defaults = model_constants.Constants()
    assert defaults.MAX_REQUEUES in D.dimension("MAX_REQUEUES").values
    assert any(v >= 2 for v in D.dimension("MAX_REQUEUES").values)
    backoff = D.dimension("REQUEUE_BACKOFF_MS").base
    assert any(cap >= 4 * backoff for cap in D.dimension("REQUEUE_BACKOFF_CAP_MS").values)
    assert defaults.MAX_ITERATIONS in D.dimension("MAX_ITERATIONS").values
    assert defaults.DEFAULT_ROUND_CAP in D.dimension("DEFAULT_ROUND_CAP").values


def test_every_generated_member_reads_back_its_value():
    """Each ``values`` member holds the value it is named for (read from the parsed
    configuration, not from the point that built it)."""
    for name, data in D.generate(["values"], "test"):
        dim, _, _ = name.removeprefix("value:").partition("=")
        cfg, budget = parse_config(data)
        got = D.values_of(cfg, budget)[dim]
        assert any(D.label(v) == name.split("=", 1)[1] for v in got), (name, got)


def test_every_dimension_value_is_in_standard():
    scope = load_scope("standard")
    seen: dict[str, set] = {d.name: set() for d in D.DIMENSIONS}
    for m in scope.members:
        cfg, budget = parse_config(m.data)
        for k, vs in D.values_of(cfg, budget).items():
            seen[k] |= vs
    missing = [f"{d.name}={D.label(v)}" for d in D.DIMENSIONS for v in d.values
               if v not in seen[d.name]]
    assert not missing, f"values no member of standard holds: {', '.join(missing)}"


def test_standard_holds_every_two_decision_sequence_on_every_entry():
    scope = load_scope("standard")
    held = set()
    for m in scope.members:
        cfg, _ = parse_config(m.data)
        held |= {(r.entry, tuple(r.decisions)) for r in cfg.runs}
    want = {(e, s) for e in model_state.ENTRIES for s in D.dimension("decisions").values}
    assert want <= held, sorted(want - held)


def test_standard_holds_every_coverable_write_path_pair():
    """Every pair of write-path values that a configuration can hold (the base point with the
    two values and their contexts holds both when read back) is held by a member of standard;
    a pair the model rules out (a remote tool declaring read_only) is not asked for."""
    scope = load_scope("standard")
    held = set()
    for m in scope.members:
        cfg, budget = parse_config(m.data)
        held |= D.pairs_of(D.values_of(cfg, budget), D.WRITE_PATH)
    missing = []
    for i, a in enumerate(D.WRITE_PATH):
        for b in D.WRITE_PATH[i + 1:]:
            for x in D.dimension(a).values:
                for y in D.dimension(b).values:
                    if (a, x, b, y) in held:
                        continue
                    data = D.build(D.point(D.dimension(a).context | D.dimension(b).context
                                           | {a: x, b: y}))
                    cfg, budget = parse_config(data)
                    vals = D.values_of(cfg, budget)
                    if x in vals[a] and y in vals[b]:
                        missing.append((a, x, b, y))
    assert not missing, missing[:10]


@pytest.mark.parametrize("gen", sorted(D.GENERATORS))
def test_generators_are_deterministic(gen):
    assert D.generate([gen], "t") == D.generate([gen], "t")
