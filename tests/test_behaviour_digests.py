"""Changes meant to keep behaviour keep it: the checker's verdicts, counts and counterexample
traces (as steps over the model's observable view) and the simulator's histories, metrics
and violation records are those recorded in ``tests/data/behaviour_digests.json``
(``python -m tests.behaviour_digests --write`` records them; see that module).

A few quick configurations and workloads run in the default suite; every shipped
configuration and the shipped 1000-run workload under ``-m slow`` (.ci/run runs those too).
The digests see behaviour, not layout: a record with one more defaulted field, or under
another class name gives the same digests; each reaper is named by its actor name; a
step with another effect does not."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import behaviour_digests as bd  # noqa: E402

RECORDED = bd.recorded()


def _marks(fast: bool):
    return () if fast else (pytest.mark.slow,)


CHECKER = [
    pytest.param(key, marks=_marks(key.split("|")[0] in bd.FAST_CONFIGS), id=key)
    for key in sorted(RECORDED["checker"])
]
SIM = [
    pytest.param(key, marks=_marks(tuple(key.split("|")[:2]) + (int(key.split("|")[2]),)
                                   in bd.FAST_SIM), id=key)
    for key in sorted(RECORDED["sim"])
]


def test_every_shipped_configuration_is_recorded():
    keys = [bd.parse_checker_key(k) for k in RECORDED["checker"]]
    assert set(keys) == {(c, p) for c in bd.checker_configs() for p in bd.POLICIES}


@pytest.mark.parametrize("key", CHECKER)
def test_checker_verdicts_and_traces_unchanged(key):
    config, policy = bd.parse_checker_key(key)
    assert bd.checker_digest(config, policy) == RECORDED["checker"][key]


@pytest.mark.parametrize("key", SIM)
def test_simulator_histories_and_violations_unchanged(key):
    name, policy, seed = key.split("|")
    raw = bd.sim_workloads()[name]
    assert bd.sim_digest(raw, policy, int(seed), bd.SIM_RUNS[name]) == RECORDED["sim"][key]


# -- the digests are of behaviour, not of the records' Python layout ----------------------
def _tiny_counterexample():
    from failclosed.spec.checker import check

    res = check("current", "tiny", None)
    r = next(r for r in res.properties.values() if not r.holds)
    return r.initial, r.trace


def _widened(v, classes):
    """``v`` with every record replaced by an instance of another class (another name) that
    declares the same fields plus one more, defaulted, that nothing sets."""
    import dataclasses

    if isinstance(v, tuple) and not hasattr(v, "_fields"):
        return tuple(_widened(x, classes) for x in v)
    if not dataclasses.is_dataclass(v) or isinstance(v, type):
        return v
    cls = type(v)
    if cls not in classes:
        fields = [(f.name, f.type, dataclasses.field(default=f.default, kw_only=f.kw_only,
                                                     compare=f.compare, metadata=f.metadata))
                  for f in dataclasses.fields(cls)]
        fields.append(("annotation_added_later", object, dataclasses.field(default=None,
                                                                           kw_only=True)))
        # a plain function, not the record's own (a compiled method applies to its class only)
        ns = {"run_id": lambda self, i: self.config.runs[i].id} if hasattr(cls, "run_id") else {}
        classes[cls] = dataclasses.make_dataclass(f"Renamed{cls.__name__}", fields,
                                                  namespace=ns, frozen=True)
    return classes[cls](**{f.name: v.config if f.name == "config" else
                           _widened(getattr(v, f.name), classes)
                           for f in dataclasses.fields(cls)})


def test_a_defaulted_field_or_a_renamed_record_changes_no_digest():
    initial, trace = _tiny_counterexample()
    classes: dict = {}
    wide = bd.trace_steps(_widened(initial, classes),
                          [(t, _widened(w, classes)) for t, w in trace])
    assert classes and wide == bd.trace_steps(initial, trace)


def test_each_reaper_is_named_by_its_actor_name_in_the_view():
    from failclosed.model import names
    from failclosed.model.observe import observe

    _, trace = _tiny_counterexample()
    worlds = [w for _, w in trace if w.reapers]
    assert worlds, "the tiny counterexample has the reaper mid-tick"
    first, second = names.reaper_name(1), names.reaper_name(2)
    for w in worlds:
        r = w.reaper(first)
        view = observe(w)
        assert view[first] is True and view[f"{first}.pc"] == r.pc
        assert view[f"{first}.rows"] == [{**s._asdict(), "run": w.run_id(s.run)} for s in r.rows]
        assert f"{first}.name" not in view  # the name is the key, not a field
        # the same tick held by a second reaper shows under that reaper's name only
        moved = w.set_reaper(first, None).set_reaper(second, type(r)(second, r.pc, r.now, r.rows, r.idx))
        mv = observe(moved)
        assert first not in mv and mv[f"{second}.pc"] == r.pc
        assert {k[len(second):] for k in mv if k.startswith(second)} == {
            k[len(first):] for k in view if k.startswith(first)}


def test_a_changed_effect_changes_the_digest(monkeypatch):
    import dataclasses

    from failclosed.model import records, steps

    key = "tiny|current"
    before = bd.checker_digest("tiny", "current")
    assert before == RECORDED["checker"][key]
    claim = steps.ACTIONS["claim_queued"]

    def longer_lease(w, p, t):  # the claim writes a lease one second longer
        w = claim.effect(w, p, t)
        row = w.rows[p.run]
        return w.set_row(p.run, records.replace(row, lease_expires=row.lease_expires + 1))

    monkeypatch.setitem(steps.ACTIONS, "claim_queued",
                        dataclasses.replace(claim, effect=longer_lease))
    after = bd.checker_digest("tiny", "current")
    moved = [n for n in before if before[n] != after[n]]
    assert moved and all(before[n]["holds"] == after[n].get("holds") for n in moved
                         if isinstance(before[n], dict))


def test_the_view_names_facts_by_entity():
    from failclosed.model.observe import observe

    _, trace = _tiny_counterexample()
    t, w = next((t, w) for t, w in trace if t.name == "claim_queued")
    rid, i = t.arg("run"), w.config.run_index(t.arg("run"))
    view = observe(w)
    p = w.proc(t.actor)
    assert view[f"row {rid}.status"] == w.rows[i].status == "running"
    assert view[f"proc {p.name}.pc"] == p.pc and view[f"proc {p.name}.run"] == rid
    assert view[f"proc {p.name}.worker"] == p.worker  # the part's field, as the process's own
    assert [e["seq"] for e in view[f"events {rid}"]] == [e.seq for e in w.events if e.run == i]
    first = observe(trace[0][1], defaults=False)  # the row exists, not yet claimed
    assert first[f"row {rid}"] is True and f"row {rid}.claimed_by" not in first
