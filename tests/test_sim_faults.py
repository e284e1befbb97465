"""The simulator's fault-injecting components (sim/faults.py), one by one, on a scripted
random stream: which fault a step takes for a given draw (the thresholds are strict: a draw
equal to the probability is the normal branch), when a component draws at all (the order of
draws is part of the history), the kinds a configuration enables, and what a failure
records in the run's record."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.model.state import ENQUEUE  # noqa: E402
from failclosed.model.steps import AUDIT, DISPATCH, NONE, PROVIDER, STORE, TOOL  # noqa: E402
from failclosed.sim.config import Dist, SimConfig, ToolConf, default_path, load_file  # noqa: E402
from failclosed.sim.faults import (  # noqa: E402
    NOTHING,
    AuditStore,
    Bus,
    Crashes,
    Faults,
    Pauses,
    Provider,
    RunStore,
    Tools,
)


class Script:
    """A random stream whose draws are given in advance; it records every call."""

    def __init__(self, *values: float, choice: int = 0) -> None:
        self.values = list(values)
        self.choice = choice
        self.calls: list[tuple] = []

    def random(self) -> float:
        self.calls.append(("random",))
        return self.values.pop(0)

    def choices(self, population, weights=None):
        self.calls.append(("choices", list(population), list(weights)))
        return [list(population)[self.choice]]

    def expovariate(self, rate: float) -> float:
        self.calls.append(("expovariate", rate))
        return 1.0 / rate

    def lognormvariate(self, mu: float, sigma: float) -> float:
        self.calls.append(("lognormvariate", mu, sigma))
        return 7.0


_DEFAULT_MODEL = load_file(default_path()).model


def cfg(**kw) -> SimConfig:
    """A simulator configuration with the default file's model ``Config`` and ``kw``."""
    return SimConfig(raw={}, model=_DEFAULT_MODEL, **kw)


def proc(pc: str = "x", kind: str = "worker", **kw) -> SimpleNamespace:
    return SimpleNamespace(pc=pc, kind=kind, **kw)


# -- the run store ---------------------------------------------------------------------------
def test_run_store_fails_below_its_probability_only():
    s = RunStore(cfg(store_error_probability=0.25))
    assert s.fault(Script(0.24)) == "store_error"
    assert s.fault(Script(0.25)) is None  # strict: equal is the normal branch
    assert s.fault(Script(0.9)) is None
    assert s.kinds() == {"store_error"}


def test_run_store_draws_only_when_configured_but_fault_drawn_always_draws():
    s = RunStore(cfg())
    rng = Script(0.0)
    assert s.fault(rng) is None and rng.calls == []  # off: no draw
    assert s.kinds() == set()
    rng = Script(0.0)
    assert s.fault_drawn(rng) is None and rng.calls == [("random",)]  # 0.0 < 0 is false
    on = RunStore(cfg(store_error_probability=0.5))
    assert on.fault_drawn(Script(0.4)) == "store_error"
    assert on.fault_drawn(Script(0.5)) is None


def test_run_store_latency_and_when_callers_wait():
    s = RunStore(cfg(store_latency=Dist("fixed", 0.3)))
    assert s.delay(Script()) == 0.3 and s.waits
    assert not RunStore(cfg()).waits  # a fixed 0: nobody waits
    assert RunStore(cfg(store_latency=Dist("exponential", 0.0))).waits  # not fixed: waits
    rng = Script()
    assert RunStore(cfg(store_latency=Dist("exponential", 2.0))).delay(rng) == 2.0
    assert rng.calls == [("expovariate", 0.5)]


# -- the audit store -------------------------------------------------------------------------
def audit(now: float = 0.0, **kw) -> AuditStore:
    return AuditStore(cfg(**kw), SimpleNamespace(now=now), seed=1)


def test_audit_insert_fails_and_ambiguous_commit_share_one_draw():
    a = audit(audit_failure_probability=0.2, ambiguous_commit_probability=0.3)
    persist = proc("persist")
    assert a.fault(Script(0.19), persist) == "audit_insert_fails"
    assert a.fault(Script(0.2), persist) == "ambiguous_commit"  # [p_fail, p_fail + p_amb)
    assert a.fault(Script(0.49), persist) == "ambiguous_commit"
    assert a.fault(Script(0.5), persist) is None
    assert a.fault(Script(0.3), proc("record_step")) is None  # ambiguous: persist only
    assert a.fault(Script(0.3)) is None  # no process: never ambiguous
    assert a.kinds() == {"audit_insert_fails", "ambiguous_commit"}


def test_audit_store_down_fails_without_a_draw():
    a = audit()
    a.down = True
    rng = Script()
    assert a.fault(rng, proc("persist")) == "audit_insert_fails" and rng.calls == []
    a.down = False
    rng = Script(0.0)
    assert a.fault(rng) is None and rng.calls == [("random",)]  # up: one draw, nothing fails


@pytest.mark.parametrize(("now", "out"), [(9.99, False), (10.0, True), (14.99, True),
                                          (15.0, False), (30.0, True), (40.0, False)])
def test_a_scheduled_outage_is_start_inclusive_end_exclusive(now, out):
    a = audit(now, audit_outages=((10.0, 5.0), (30.0, 1.0)))
    assert a.in_outage() is out
    rng = Script(0.99)
    assert (a.fault(rng) == "audit_insert_fails") is out
    assert rng.calls == ([] if out else [("random",)])


def test_audit_kinds_follow_the_configuration():
    assert audit().kinds() == set()
    assert audit(audit_outages=((1.0, 1.0),)).kinds() == {"audit_insert_fails"}
    assert audit(audit_mean_up=5.0, audit_mean_down=1.0).kinds() == {"audit_insert_fails"}
    assert audit(ambiguous_commit_probability=0.1).kinds() == {"ambiguous_commit"}
    assert not audit().flaps and audit(audit_mean_up=5.0).flaps
    assert audit(audit_latency=Dist("fixed", 0.7)).delay(Script(), proc(), None) == 0.7


def _flaps(seed: int, n: int = 3000) -> tuple[list[float], list[float], list[bool]]:
    """(up times, down times, the store's state after each) of ``n`` outage cycles, the
    process driven by hand (``timeout`` returns its delay)."""
    env = SimpleNamespace(now=0.0, timeout=lambda d: d)
    a = AuditStore(cfg(audit_mean_up=100.0, audit_mean_down=10.0), env, seed=seed)
    gen = a.flapping()
    ups, downs, states = [], [], []
    up = next(gen)
    for _ in range(n):
        ups.append(up)
        downs.append(gen.send(None))
        states.append(a.down)
        up = gen.send(None)
        states.append(a.down)
    return ups, downs, states


def test_the_flapping_process_alternates_exponential_up_and_down_times():
    ups, downs, states = _flaps(3)
    assert states[:4] == [True, False, True, False] and len(set(states[::2])) == 1
    # exponential: the means are the configured ones (3000 cycles: within 6 %), and the
    # spread is the mean's (a coefficient of variation of 1)
    assert sum(ups) / len(ups) == pytest.approx(100.0, rel=0.06)
    assert sum(downs) / len(downs) == pytest.approx(10.0, rel=0.06)
    sd = (sum((x - 100.0) ** 2 for x in ups) / len(ups)) ** 0.5
    assert sd == pytest.approx(100.0, rel=0.1)
    assert _flaps(3, 50) == _flaps(3, 50)  # its own stream: seeded
    assert _flaps(3, 50)[0] != _flaps(4, 50)[0]  # another seed, other outages


# -- the provider ----------------------------------------------------------------------------
def provider(p: float = 0.5) -> Provider:
    return Provider(cfg(provider_failure_probability=p, provider_latency=Dist("fixed", 2.0),
                        failure_mix=(("http_429", 3.0), ("http_401", 1.0)),
                        failure_class={"http_429": "rateLimit", "http_401": "auth"}))


def test_provider_fires_the_class_of_the_drawn_error_and_notes_the_error():
    pv = provider()
    rng = Script(0.49, choice=1)
    assert pv.fault(rng) == "auth" and pv.drawn == "http_401"
    assert rng.calls == [("random",), ("choices", ["http_429", "http_401"], [3.0, 1.0])]
    rec = SimpleNamespace(provider_errors=[])
    pv.note(rec, proc(), None, "auth")
    assert rec.provider_errors == [("http_401", "auth")]
    rng = Script(0.5)
    assert pv.fault(rng) is None and rng.calls == [("random",)]  # strict threshold, no choice
    assert pv.work and pv.delay(Script(), proc(), None) == 2.0


def test_provider_classes_in_mix_order_and_none_when_off():
    assert provider().classes() == ["rateLimit", "auth"]
    assert provider(0.0).classes() == []
    rng = Script()
    assert provider(0.0).fault(rng) is None and rng.calls == []  # off: no draw
    same = Provider(cfg(provider_failure_probability=0.1,
                        failure_mix=(("a", 1.0), ("b", 1.0), ("c", 1.0)),
                        failure_class={"a": "rateLimit", "b": "auth", "c": "rateLimit"}))
    assert same.classes() == ["rateLimit", "auth"]  # each class once, first seen first


# -- tools -----------------------------------------------------------------------------------
def _world(tool: str) -> SimpleNamespace:
    answer = SimpleNamespace(calls=("other", tool))
    run = SimpleNamespace(answer=lambda turn: answer if turn == 2 else None)
    return SimpleNamespace(config=SimpleNamespace(runs=[None, run]))


def _tool_proc() -> SimpleNamespace:
    return proc("invoke", run=1, turn=2, call=1, seg="w1:r1#1")


def tools(p: float = 0.3, mix=()) -> Tools:
    t = ToolConf("t", {"name": "t"}, Dist("fixed", 4.0), p, mix)
    dup = ToolConf("t", {"name": "t"}, Dist("fixed", 99.0), 1.0)  # a second entry: ignored
    return Tools(cfg(tools=(t, dup)), seed=5)


def test_tools_fail_below_the_called_tools_probability():
    ts = tools()
    w, p = _world("t"), _tool_proc()
    assert ts.called(p, w) == "t"
    assert ts.fault(Script(0.29), p, w) == "tool_error"
    assert ts.fault(Script(0.3), p, w) is None
    assert ts.delay(Script(), p, w) == 4.0  # the first entry of a name counts
    assert ts.kinds() == {"tool_error"} and ts.work
    assert tools(0.0).kinds() == set()
    rng = Script()
    assert tools(0.0).fault(rng, p, w) is None and rng.calls == []


def test_an_unconfigured_tool_takes_no_time_no_fault_and_no_draw():
    ts, w, p = tools(1.0), _world("unknown"), _tool_proc()
    rng = Script()
    assert ts.delay(rng, p, w) == 0.0 and ts.fault(rng, p, w) is None and rng.calls == []
    rec = SimpleNamespace(tool_errors=[])
    ts.note(rec, p, w, "tool_error")
    assert rec.tool_errors == [("unknown", "", "")]


def test_a_tool_error_names_an_error_of_its_mix_from_a_stream_of_its_own():
    mix = (("timeout", "connection", 1.0), ("bad_request", "clientError", 1.0))
    ts, w, p = tools(1.0, mix), _world("t"), _tool_proc()
    rec = SimpleNamespace(tool_errors=[])
    for _ in range(40):
        ts.note(rec, p, w, "tool_error")
    assert {e for e in rec.tool_errors} == {("t", "timeout", "connection"),
                                            ("t", "bad_request", "clientError")}
    again = SimpleNamespace(tool_errors=[])
    for _ in range(40):
        tools(1.0, mix).note(again, p, w, "tool_error")
    assert again.tool_errors == rec.tool_errors  # seeded: the same names every time
    plain = SimpleNamespace(tool_errors=[])
    tools(1.0).note(plain, p, w, "tool_error")
    assert plain.tool_errors == [("t", "", "")]  # no mix: no name


# -- the bus, crashes, pauses ----------------------------------------------------------------
def test_bus_dispatch_and_duplicates():
    b = Bus(cfg(dispatch_failure_probability=0.2, duplicate_probability=0.1,
                dispatch_latency=Dist("fixed", 0.5), delivery_delay=Dist("fixed", 1.5)))
    assert b.fault(Script(0.19)) == "dispatch_fails" and b.fault(Script(0.2)) is None
    assert b.duplicates(Script(0.09)) is True and b.duplicates(Script(0.1)) is False
    assert b.delay(Script(), proc(), None) == 0.5 and b.delivery(Script()) == 1.5
    assert b.kinds() == {"dispatch_fails", "duplicate_message"}
    off = Bus(cfg())
    rng = Script()
    assert off.fault(rng) is None and off.duplicates(rng) is False and rng.calls == []
    assert off.kinds() == set()
    assert Bus(cfg(duplicate_probability=0.1)).kinds() == {"duplicate_message"}
    assert Bus(cfg(dispatch_failure_probability=0.1)).kinds() == {"dispatch_fails"}


def test_crash_times_are_exponential_at_the_hourly_rate():
    c = Crashes(cfg(worker_crash_rate=2.0, web_crash_rate=4.0, restart_delay=Dist("fixed", 3.0)))
    rng = Script()
    assert c.next_worker_crash(rng) == pytest.approx(1800.0)
    assert c.web_crash_at(rng, 100.0) == pytest.approx(100.0 + 900.0)
    assert rng.calls == [("expovariate", 2.0 / 3600.0), ("expovariate", 4.0 / 3600.0)]
    assert c.restart(rng) == 3.0 and c.kinds() == {"crash"}
    off = Crashes(cfg())
    rng = Script()
    assert off.web_crash_at(rng, 5.0) == float("inf") and rng.calls == []
    assert off.kinds() == set()
    assert Crashes(cfg(web_crash_rate=1.0)).kinds() == {"crash"}
    assert Crashes(cfg(worker_crash_rate=1.0)).kinds() == {"crash"}


def test_pauses_stall_any_step_but_an_enqueue_or_settle():
    ps = Pauses(cfg(pause_probability=0.5, pause_duration=Dist("fixed", 30.0)))
    assert ps.stall(Script(0.49), proc("claim")) == 30.0
    assert ps.stall(Script(0.5), proc("claim")) == 0.0
    for p in (proc("settle"), proc("claim", kind=ENQUEUE)):
        rng = Script(0.0)
        assert ps.stall(rng, p) == 0.0 and rng.calls == []  # no draw either
    rng = Script(0.0)
    assert Pauses(cfg()).stall(rng, proc("claim")) == 0.0 and rng.calls == []
    assert ps.kinds() == {"slow_operation", "pause"} == Pauses(cfg()).kinds()


# -- draw: what a step may take decides what is drawn ------------------------------------------
def test_draw_takes_the_components_own_kind_only_where_the_step_may_take_it():
    s = RunStore(cfg(store_error_probability=0.5))
    rng = Script(0.1)
    assert s.draw(rng, ("store_error", "decode_error")) == "store_error" and len(rng.calls) == 1
    rng = Script()
    assert s.draw(rng, ("decode_error",)) is None and rng.calls == []  # no own kind: no draw
    rng = Script(0.9)
    assert s.draw(rng, ("store_error",), always=True) is None and len(rng.calls) == 1


def test_draw_then_each_faults_kind_the_step_may_take_in_the_tables_order():
    import simpy

    f = Faults(cfg(store_error_probability=0.5, fault_probabilities=(
        ("decode_error", 0.2), ("observer_error", 0.0), ("stale", 0.3))), simpy.Environment(), 1)
    assert f.store.extra == (("decode_error", 0.2), ("stale", 0.3)) == f.local.extra  # zeros dropped
    assert {"decode_error", "stale"} <= f.kinds() and "observer_error" not in f.kinds()
    # the own kind first; when it drew none, one draw per [faults] kind the step may take
    rng = Script(0.9, 0.5, 0.1)
    assert f.store.draw(rng, ("store_error", "decode_error", "stale")) == "stale"
    assert len(rng.calls) == 3
    rng = Script(0.1)
    assert f.store.draw(rng, ("store_error", "decode_error")) == "store_error" and len(rng.calls) == 1
    rng = Script(0.9)
    assert f.store.draw(rng, ("store_error",)) is None and len(rng.calls) == 1  # nothing else to take
    rng = Script(0.1)
    assert f.local.draw(rng, ("decode_error",)) == "decode_error"  # local work draws them too
    rng = Script()
    assert NOTHING.draw(rng, ("decode_error",)) is None and rng.calls == []


def test_a_workload_without_faults_table_draws_as_before():
    import simpy

    f = Faults(cfg(store_error_probability=0.5), simpy.Environment(), 1)
    for c in f.by_cost.values():
        assert c.extra == ()
    rng = Script(0.9)
    assert f.store.draw(rng, ("store_error", "decode_error")) is None and len(rng.calls) == 1


# -- the whole environment -------------------------------------------------------------------
def test_faults_kinds_is_the_union_of_the_components():
    import simpy

    f = Faults(cfg(store_error_probability=0.1, audit_failure_probability=0.1,
                   worker_crash_rate=1.0), simpy.Environment(), 1)
    assert f.kinds() == {"store_error", "audit_insert_fails", "crash", "slow_operation", "pause"}
    quiet = Faults(cfg(), simpy.Environment(), 1)
    assert quiet.kinds() == {"slow_operation", "pause"}


def test_by_step_maps_each_cost_class_to_its_component():
    import simpy

    f = Faults(cfg(), simpy.Environment(), 1)
    got = f.by_step({"a": STORE, "b": AUDIT, "c": PROVIDER, "d": TOOL, "e": DISPATCH, "f": NONE})
    assert got == {"a": f.store, "b": f.audit, "c": f.provider, "d": f.tools, "e": f.bus,
                   "f": f.local}
    # local work, and a step that touches nothing: no delay, no fault, no draw
    for c in (f.local, NOTHING):
        rng = Script()
        assert c.delay(rng, proc(), None) == 0.0 and c.fault(rng) is None
        assert c.draw(rng, ("observer_error",)) is None
        assert c.kinds() == set() and rng.calls == [] and not c.work


def test_sampled_latencies_draw_from_the_steps_stream():
    exp = Dist("exponential", 4.0)
    for component, call in [
        (audit(audit_latency=exp), lambda c, r: c.delay(r, proc(), None)),
        (Bus(cfg(dispatch_latency=exp)), lambda c, r: c.delay(r, proc(), None)),
        (Bus(cfg(delivery_delay=exp)), lambda c, r: c.delivery(r)),
        (Crashes(cfg(restart_delay=exp)), lambda c, r: c.restart(r)),
        (Provider(cfg(provider_latency=exp)), lambda c, r: c.delay(r, proc(), None)),
        (Pauses(cfg(pause_probability=1.0, pause_duration=exp)), lambda c, r: c.stall(r, proc())),
    ]:
        rng = Script(0.0)
        assert call(component, rng) == 4.0
        assert ("expovariate", 0.25) in rng.calls


def test_the_simulation_seed_reaches_the_outages_and_the_tool_errors():
    import simpy

    def outages(seed: int) -> list[float]:
        f = Faults(cfg(audit_mean_up=100.0, audit_mean_down=10.0), simpy.Environment(), seed)
        f.audit.env = SimpleNamespace(now=0.0, timeout=lambda d: d)
        gen = f.audit.flapping()
        return [next(gen), gen.send(None), gen.send(None)]

    assert outages(1) == outages(1) != outages(2)
    mix = (("timeout", "connection", 1.0), ("bad_request", "clientError", 1.0))
    w, p = _world("t"), _tool_proc()

    def names(seed: int) -> list:
        t = ToolConf("t", {"name": "t"}, Dist("fixed", 0.0), 1.0, mix)
        rec = SimpleNamespace(tool_errors=[])
        for _ in range(30):
            Tools(cfg(tools=(t,)), seed=seed).note(rec, p, w, "tool_error")
        return rec.tool_errors

    assert names(5) == names(5) != names(6)
