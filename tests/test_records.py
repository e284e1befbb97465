"""The record types (model/records.py): the generated fast form's hash, equality and copy
with changes are the dataclass's own, the compiled form has the same fields, values and
hashes, and no world is ever changed after it is made."""

from __future__ import annotations

import dataclasses
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from failclosed.model import enabled, fire, load_world, read_toml, records  # noqa: E402
from failclosed.model.state import (  # noqa: E402
    Application,
    Asked,
    Event,
    Made,
    Message,
    Proc,
    ReaperState,
    ResumePart,
    Row,
    WorkerPart,
    World,
)

STANDARD = read_toml(str(Path(__file__).parent / "data" / "standard.toml"))
FAULTY = {**STANDARD, "model": {**STANDARD["model"], "fault_budget": 6}}
SYNC = {**FAULTY, "model": {**FAULTY["model"], "transport": "sync"}}
RECORDS = (Row, Event, Application, Message, Proc, WorkerPart, ResumePart, Made, Asked, ReaperState,
           World)
COMPILED = records.is_compiled(Row)  # pip install . with mypyc: the records' compiled form


def _deep(v):
    """A value as nested plain tuples, read field by field (a snapshot of a world)."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return (type(v).__name__,) + tuple(
            _deep(getattr(v, f.name)) for f in dataclasses.fields(v) if f.name != "config")
    if isinstance(v, tuple):
        return tuple(_deep(x) for x in v)
    if isinstance(v, frozenset):
        return frozenset(_deep(x) for x in v)
    return v


def _walk(data: dict, policy: str, seed: int, steps: int, made=None):
    """(initial world, [(transition, world)]) of a random walk restarting at dead ends;
    ``made(world)`` is called on each world as soon as it is made."""
    rng = random.Random(seed)
    w0 = load_world(data, policy)
    w, out = w0, []
    for _ in range(steps):
        en = enabled(w)
        if not en:
            w = w0
            continue
        t = rng.choice(en)
        w = fire(w, t)
        if made is not None:
            made(w)
        out.append((t, w))
    return w0, out


def _held(w) -> list:
    """``w`` and the records it holds (rows, processes and their parts, events, ledger,
    messages, reaper ticks)."""
    procs = [*w.procs, *(q for p in w.procs for q in p.outer)]
    return [w, *procs, *(p.part for p in procs if p.part is not None), *w.events, *w.ledger,
            *w.messages, *w.reapers, *(r for r in w.rows if r)]


@pytest.mark.parametrize("policy,data", [("current", FAULTY), ("proposed", FAULTY),
                                         ("current", SYNC)])
def test_the_fast_forms_hash_equality_and_copy_are_the_dataclasss(policy, data):
    """On the records of random walks: the hash is the hash of the tuple of compared fields
    (what ``dataclasses`` defines), a record equals a copy of it made field by field and
    differs from one with a field changed, and :func:`records.replace` gives what
    ``dataclasses.replace`` gives, field for field, hash for hash."""
    seen: set[type] = set()
    for seed in range(2):
        _, steps = _walk(data, policy, seed, 400)
        for _, w in steps[::7]:
            for x in _held(w):
                cls = type(x)
                seen.add(cls)
                fs = dataclasses.fields(x)
                assert hash(x) == hash(tuple(getattr(x, f.name) for f in fs if f.compare))
                twin = cls(**{f.name: getattr(x, f.name) for f in fs})
                assert twin == x and x == twin and not twin != x and twin is not x
                f = next(f for f in fs if f.compare)
                v = getattr(x, f.name)
                other = 7 if isinstance(v, int) and v != 7 else ("x" if v != "x" else "y")
                if isinstance(v, tuple):
                    other = v + (None,)
                mine = records.replace(x, **{f.name: other})
                theirs = dataclasses.replace(x, **{f.name: other})
                assert _deep(mine) == _deep(theirs) and mine == theirs
                assert hash(mine) == hash(theirs) and mine != x and type(mine) is cls
    assert seen >= {World, Proc, Row, Event}, seen


def test_no_world_is_changed_after_it_is_made():
    """Every world of long walks, snapshot when made, reads the same at the end: no field of
    a world, row, event or process was assigned after construction (by any route)."""
    for policy, data in (("current", FAULTY), ("adr-104", FAULTY), ("current", SYNC)):
        snaps: list = []
        _, steps = _walk(data, policy, 11, 1500, made=lambda w, s=snaps: s.append(_deep(w)))
        assert [_deep(w) for _, w in steps] == snaps
        assert len({hash(w) for _, w in steps}) > 50


def test_assigning_a_field_of_a_record_raises():
    _, steps = _walk(FAULTY, "current", 3, 400)
    w = next(w for _, w in reversed(steps) if w.procs and w.events and w.reaper("reaper") is None)
    made = [w, *w.procs, *w.events, *w.ledger, *w.messages, *(r for r in w.rows if r)]
    assert {type(x) for x in made} >= {World, Proc, Event, Row}
    for x in made:
        for f in dataclasses.fields(x):
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(x, f.name, getattr(x, f.name))
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.procs[0].pc = "elsewhere"
    with pytest.raises(TypeError):
        records.replace(w.procs[0], no_such_field=1)


def test_records_declare_their_ghost_fields_once():
    assert records.ghosts(Row) == ("epoch", "attempts")
    assert records.ghosts(Proc) == ("epoch", "cancel_seen", "stamped")
    assert records.ghosts(World) == ("marks", "made")
    for cls in RECORDS:
        assert dataclasses.is_dataclass(cls)
        assert issubclass(cls, records.Record) != records.is_compiled(cls) == COMPILED


def _compiled_form():
    """model/state.py's compiled form (records.compiled_source), run interpreted beside the
    real one as ``failclosed.model._compiled_state``: what mypyc compiles, before it does.
    Not frozen: interpreted, the stores of ``__init__`` and of the cached hash would meet the
    frozen ``__setattr__`` that mypyc's native stores bypass."""
    import types

    src = records.compiled_source((ROOT / "model" / "state.py").read_text())
    assert src.count("@_compiled_dataclass(frozen=True, eq=False)") == len(RECORDS)
    mod = types.ModuleType("failclosed.model._compiled_state")
    mod.__package__ = "failclosed.model"
    sys.modules[mod.__name__] = mod
    try:
        exec(compile(src.replace("(frozen=True, eq=False)", "(eq=False)"), "<compiled state.py>",
                     "exec"), mod.__dict__)
    finally:
        del sys.modules[mod.__name__]
        records._COMPILED.difference_update(getattr(mod, c.__name__) for c in RECORDS)
    return mod


def test_the_compiled_form_has_the_same_fields_values_and_hashes():
    cs = _compiled_form()
    for cls in RECORDS:
        c = getattr(cs, cls.__name__)
        assert [(f.name, f.compare, f.hash, f.kw_only, f.metadata.get("ghost")) for f in dataclasses.fields(c)] \
            == [(f.name, f.compare, f.hash, f.kw_only, f.metadata.get("ghost")) for f in dataclasses.fields(cls)]
        assert records.ghosts(c) == records.ghosts(cls) and c.__slots__ == cls.__slots__
    _, steps = _walk(FAULTY, "current", 5, 300)
    for _, w in steps[::10]:
        for x in (w, *w.procs, *w.events, *w.ledger, *w.messages, *(r for r in w.rows if r)):
            y = _rebuilt(cs, x)
            assert _deep(y) == _deep(x) and hash(y) == hash(x) and repr(y) == repr(x)
            assert y == _rebuilt(cs, x) and not y != _rebuilt(cs, x)
            f = dataclasses.fields(y)[0].name
            z = cs.replace(y, **{f: getattr(x, f)})
            assert z == y and z is not y and hash(z) == hash(y)
            with pytest.raises(TypeError, match="unknown fields"):
                cs.replace(y, no_such_field=1)


def _rebuilt(cs, x):
    """``x`` (a record of the real form) as a value of the compiled form, field by field."""
    if isinstance(x, tuple):  # a named tuple (RunStep, SettlePlan...) keeps its type
        vals = [_rebuilt(cs, v) for v in x]
        return type(x)(*vals) if hasattr(x, "_fields") else tuple(vals)
    if not dataclasses.is_dataclass(x) or type(x).__name__ not in {c.__name__ for c in RECORDS}:
        return x
    c = getattr(cs, type(x).__name__)
    pos = {f.name: _rebuilt(cs, getattr(x, f.name)) for f in dataclasses.fields(x)}
    return c(**pos)


def test_the_compiled_form_refuses_a_declaration_it_cannot_write():
    src = (ROOT / "model" / "state.py").read_text()
    for old, new in (("status: str = QUEUED", "status: str = field(default_factory=str)"),
                     ("@record\nclass Row(Record):", "@record\n@final\nclass Row(Record):")):
        assert old in src
        with pytest.raises(ValueError, match="the compiled form"):
            records.compiled_source(src.replace(old, new))


def test_a_world_pickles_to_an_equal_world():
    """Worlds cross process boundaries (check --jobs, mutants --jobs, scopes): on either build
    a world pickles to an equal world with the same hash, processes and parts included."""
    import pickle

    _, steps = _walk(FAULTY, "current", 5, 300)
    for _, w in steps[::25]:
        w2 = pickle.loads(pickle.dumps(w))
        assert w2 == w and hash(w2) == hash(w) and w2.config == w.config
        assert [type(p.part) for p in w2.procs] == [type(p.part) for p in w.procs]
