"""The record types' two forms (model/records.py): the generated fast form and the plain
frozen dataclasses give the same worlds, and no world is ever changed after it is made."""

from __future__ import annotations

import dataclasses
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from failclosed.model import enabled, fire, load_world, read_toml, records  # noqa: E402
from failclosed.model.state import Application, Event, Message, Proc, ReaperState, Row, World  # noqa: E402

STANDARD = read_toml(str(Path(__file__).parent / "data" / "standard.toml"))
FAULTY = {**STANDARD, "model": {**STANDARD["model"], "fault_budget": 6}}
SYNC = {**FAULTY, "model": {**FAULTY["model"], "transport": "sync"}}
RECORDS = (Row, Event, Application, Message, Proc, ReaperState, World)


@pytest.fixture
def plain_after():
    yield
    records.use_plain(False)


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


@pytest.mark.parametrize("policy,data", [("current", FAULTY), ("adr-104", FAULTY),
                                         ("proposed", FAULTY), ("current", SYNC)])
def test_fast_and_plain_records_give_equal_worlds_on_random_walks(policy, data, plain_after):
    assert not records.is_plain()
    for seed in range(3):
        w0, fast = _walk(data, policy, seed, 600)
        records.use_plain(True)
        p0, plain = _walk(data, policy, seed, 600)  # the same choices: equal lists enabled
        records.use_plain(False)
        assert p0 == w0 and hash(p0) == hash(w0)
        assert [t for t, _ in plain] == [t for t, _ in fast]
        for (_, a), (_, b) in zip(fast, plain, strict=True):
            assert a == b and b == a and hash(a) == hash(b)
            assert _deep(a) == _deep(b)
        records.use_plain(True)  # and compared by the plain dataclass methods
        for (_, a), (_, b) in zip(fast, plain, strict=True):
            assert a == b and hash(a) == hash(b)
        records.use_plain(False)


def test_no_world_is_changed_after_it_is_made():
    """Every world of long walks, snapshot when made, reads the same at the end: no field of
    a world, row, event or process was assigned after construction (by any route)."""
    for policy, data in (("current", FAULTY), ("adr-104", FAULTY), ("current", SYNC)):
        snaps: list = []
        _, steps = _walk(data, policy, 11, 1500, made=lambda w, s=snaps: s.append(_deep(w)))
        assert [_deep(w) for _, w in steps] == snaps
        assert len({hash(w) for _, w in steps}) > 50


@pytest.mark.parametrize("plain", [False, True])
def test_assigning_a_field_of_a_record_raises_in_both_forms(plain, plain_after):
    records.use_plain(plain)
    _, steps = _walk(FAULTY, "current", 3, 400)
    w = next(w for _, w in reversed(steps) if w.procs and w.events and w.reaper is None)
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
    assert records.ghosts(World) == ("marks",)
    for cls in RECORDS:
        assert dataclasses.is_dataclass(cls) and issubclass(cls, records.Record)


def test_environment_variable_selects_the_plain_form():
    code = ("import dataclasses; from model import records; from model.state import Row; "
            "r = records.replace(Row(), status='running'); "
            "print(records.is_plain(), Row.__hash__ is records._RECORDS[Row]['plain']['__hash__'], "
            "r.status)")
    out = {}
    for flag in ("1", ""):
        env = {**os.environ, "FAILCLOSED_PLAIN_RECORDS": flag}
        out[flag] = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True,
                                   capture_output=True, text=True).stdout.split()
    assert out["1"] == ["True", "True", "running"]
    assert out[""] == ["False", "False", "running"]
