"""The closed vocabularies (model/vocab.py, spec/vocab.py): a member is its string at every
edge, every table is keyed by members and refuses any other name with a line that says where
to declare it, the vocabularies hold exactly the names the tables declare (no stale member),
and a fixture can declare a name at run time and retract it."""

from __future__ import annotations

import json
import pickle

import pytest
from failclosed.model import names, steps, store, vocab
from failclosed.model.state import OUTCOMES
from failclosed.model.steps import STORE, Fault, action, declare_actor
from failclosed.model.vocab import ActorKind, FaultKind, Label, Mark, OutcomeName, TransitionName
from failclosed.spec import properties
from failclosed.spec.vocab import PropertyName


def test_a_member_is_its_string_at_every_edge():
    m = TransitionName.MARK_PENDING_EFFECT
    assert str(m) == f"{m}" == format(m) == "mark_pending_effect"
    assert repr(m) == repr("mark_pending_effect") and repr((m,)) == "('mark_pending_effect',)"
    assert json.dumps({m: [m]}) == '{"mark_pending_effect": ["mark_pending_effect"]}'
    assert {m: 1}["mark_pending_effect"] == 1 and {"mark_pending_effect": 1}[m] == 1
    assert pickle.loads(pickle.dumps(m)) is m
    assert Label.DISPATCH == TransitionName.DISPATCH == "dispatch"  # one word, two vocabularies


def test_every_table_is_keyed_by_members():
    keyed = [(steps.ACTIONS, Label), (steps.REAPER_ACTIONS, Label), (steps.FAULTS, FaultKind),
             (steps.OTHER_TRANSITIONS, TransitionName), (steps.ACTORS, ActorKind),
             (store.STATEMENTS, TransitionName), (properties.SAFETY, PropertyName),
             (properties.LIVENESS, PropertyName)]
    for table, enum in keyed:
        assert table and all(isinstance(k, enum) for k in table), enum.__name__
    for a in steps.steps():
        assert isinstance(a.pc, Label) and isinstance(a.actor, ActorKind)
        assert all(isinstance(n, TransitionName) for n in a.fires)
        assert all(isinstance(f, FaultKind) for f in a.faults)
        assert all(x == steps.END or isinstance(x, Label) for x in a.then)


def test_the_vocabularies_hold_exactly_the_declared_names():
    """A member no table declares is a stale name: remove it, or declare its fact."""
    # nested: the reaper waits; after_llm, after_tool: a segment's continuations (Proc.then)
    labels = {a.pc for a in steps.steps()} | {Label.NESTED, Label.AFTER_LLM, Label.AFTER_TOOL}
    assert set(Label) == labels
    assert set(TransitionName) == set(names.TRANSITIONS) | set(store.STATEMENTS)
    assert set(FaultKind) == set(steps.FAULTS)
    assert set(ActorKind) == set(steps.ACTORS)
    assert set(PropertyName) == set(properties.SAFETY) | set(properties.LIVENESS)
    assert tuple(OutcomeName) == OUTCOMES


@pytest.mark.parametrize("declare, message", [
    (lambda: action("stmap", fires=store.MARK_PENDING_EFFECT, cost=STORE, place="x"),
     "unknown step label 'stmap': add it to Label in model/vocab.py"),
    (lambda: action("stamp2", fires="mark_pending_efect", cost=STORE, place="x"),
     "unknown step label 'stamp2'"),
    (lambda: action(Label.STAMP, fires="mark_pending_efect", cost=STORE, place="x"),
     "unknown transition 'mark_pending_efect': add it to TransitionName in model/vocab.py"),
    (lambda: action(Label.STAMP, fires=store.MARK_PENDING_EFFECT, cost=STORE, place="x",
                    faults=("store_eror",)),
     "unknown fault kind 'store_eror': add it to FaultKind in model/vocab.py"),
    (lambda: steps.FAULTS.__setitem__("stale_raed", Fault(STORE, "x")),
     "unknown fault kind 'stale_raed': add it to FaultKind"),
    (lambda: store.STATEMENTS.__setitem__("tuoch_run", None),
     "unknown transition 'tuoch_run': add it to TransitionName"),
    (lambda: declare_actor("reeper", place="10", answers=None, moves=None, fire=None),
     "unknown actor kind 'reeper': add it to ActorKind in model/vocab.py"),
    (lambda: properties.always("no_such_property", "□ true", source="x")(lambda w: None),
     "unknown property 'no_such_property': add it to PropertyName in spec/vocab.py"),
])
def test_an_undeclared_name_is_refused_with_where_to_declare_it(declare, message):
    before = {k: dict(t) for k, t in (("faults", steps.FAULTS), ("statements", store.STATEMENTS))}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        declare()
    assert dict(steps.FAULTS) == before["faults"]
    assert dict(store.STATEMENTS) == before["statements"]


def test_a_name_declared_at_run_time_is_a_member_until_retracted():
    saved = vocab.extensions()
    m = vocab.extend(FaultKind, "stale_read")
    try:
        assert FaultKind("stale_read") is m and FaultKind.of("stale_read") is m
        assert isinstance(m, FaultKind) and str(m) == "stale_read" and repr(m) == "'stale_read'"
        assert m in FaultKind.values() and m not in list(FaultKind)
        assert vocab.extend(FaultKind, "stale_read") is m  # declared twice: the same member
    finally:
        vocab.restore_extensions(saved)
    assert not FaultKind.known("stale_read")
    with pytest.raises(ValueError, match="add it to FaultKind"):
        FaultKind.of("stale_read")
    with vocab.extended([(Label, "touch"), (Label, "stamp")]):
        assert Label.known("touch")
    assert not Label.known("touch") and Label.known("stamp")  # a written member stays


def test_a_mark_is_written_and_read_by_its_member():
    assert Mark.ZOMBIE_APPEND.fact("r1") == "zombie_append:r1"
    assert Mark.ZOMBIE_APPEND.fact("r1").startswith(Mark.ZOMBIE_APPEND.prefix)
