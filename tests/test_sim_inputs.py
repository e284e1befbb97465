"""The simulator's realistic inputs: failure mixes of concrete errors classified by
model.classify (RUNTIME 13), metrics by class and by error, the builtin catalogue in
simulator configs, and gate 2 (12.2 step 8) drawn per approver."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.cli import main  # noqa: E402
from failclosed.model.classify import classify, parse_error  # noqa: E402
from failclosed.sim import config as sconfig  # noqa: E402
from failclosed.sim.batch import simulate_one  # noqa: E402

from tests.test_sim import SMALL  # noqa: E402

# SMALL's provider mix is the per-class form {serverError = 2, auth = 1}; this one names the
# errors, in the same class order and with the same class weights
CONCRETE = SMALL.replace("failure_mix = {serverError = 2, auth = 1}",
                         "failure_mix = {http_503 = 1.25, http_500 = 0.75, http_401 = 1}")

APPROVALS = """
policy = "current"
[runs]
count = 20
slots = 8
[arrivals]
kind = "batch"
size = 20
[workers]
count = 2
[provider]
latency = 1.0
[[tools]]
name = "update_page_metadata"
latency = 1.0
[workload]
queued_fraction = 0.0
rounds = 1
tool_mix = {{update_page_metadata = 1}}
[workload.approvals]
delay = 10
not_permitted_probability = {p}
"""


def test_naming_the_errors_of_a_per_class_mix_changes_only_the_labels():
    """The same seed draws the same classes from either form: the history (which carries the
    class a provider call failed with) is the same byte for byte; the metrics name the errors."""
    old, _ = simulate_one(tomllib.loads(SMALL), seed=3, keep_going=True)
    new, _ = simulate_one(tomllib.loads(CONCRETE), seed=3, keep_going=True)
    assert CONCRETE != SMALL
    assert new["history_sha256"] == old["history_sha256"]
    fo, fn = old["metrics"]["failures"]["provider"], new["metrics"]["failures"]["provider"]
    assert fo["count"] == fn["count"] > 0
    assert fo["by_class"] == fn["by_class"]
    assert set(fo["by_error"]) <= {"serverError", "auth"}  # the per-class form names no error
    assert set(fn["by_error"]) <= {"http_503", "http_500", "http_401"}
    assert sum(v["count"] for v in fn["by_error"].values()) == fn["count"]


def test_every_drawn_error_is_reported_under_the_class_classify_gives():
    raw = tomllib.load(open(sconfig.default_path(), "rb"))
    res, sim = simulate_one(raw, seed=2, runs=300, keep_going=True)
    f = res["metrics"]["failures"]["provider"]
    assert f["count"] > 0
    for err, v in f["by_error"].items():
        assert v["class"] == classify(parse_error(err)), err
    for cls, v in f["by_class"].items():
        assert v["count"] == sum(e["count"] for e in f["by_error"].values() if e["class"] == cls)
    # the runs that met an auth error (not retryable) never complete; the record says how
    for cls, v in f["by_class"].items():
        if not v["retryable"]:
            assert not any(o.startswith("completed") for o in v["run_outcomes"]), (cls, v)
    # tool errors of the remote writer carry their concrete error too
    t = res["metrics"]["failures"]["tool"]
    assert t["count"] == sum(v["count"] for v in t["by_tool"].values())
    assert all(v["class"] == classify(parse_error(e)) for e, v in t["by_error"].items())


def test_the_shipped_default_mix_is_concrete_errors_a_user_recognises():
    cfg = sconfig.load_file(sconfig.default_path())
    keys = [k for k, _ in cfg.failure_mix]
    assert {"http_503", "http_429", "timeout", "connection_reset", "circuit_open", "http_401"} <= set(keys)
    assert set(cfg.failure_class.values()) >= {"serverError", "rateLimit", "connection", "circuitOpen",
                                               "auth", "clientError"}
    assert abs(sum(w for _, w in cfg.failure_mix) - 1.0) < 1e-9


@pytest.mark.parametrize(("patch", "needle"), [
    ("failure_mix = {http503 = 1}", "provider.failure_mix.http503: 'http503' is not an error this model knows; did you mean 'http_503'?"),
    ("failure_mix = {serverEror = 1}", "provider.failure_mix.serverEror: 'serverEror' is not an error"),
    ("failure_mix = {\"fallback(http_503\" = 1}", "provider.failure_mix.fallback(http_503:"),
    ("failure_mix = {http_503 = -1}", "provider.failure_mix.http_503: negative weight"),
    ("failure_mix = {http_503 = 1, \"http_503 \" = 2}", "the same error as an earlier entry"),
])
def test_a_bad_mix_entry_is_one_line_exit_2(tmp_path, capsys, patch, needle):
    text = SMALL.replace("failure_mix = {serverError = 2, auth = 1}", patch)
    p = tmp_path / "bad.toml"
    p.write_text(text)
    assert main(["simulate", str(p)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert needle in err, err


@pytest.mark.parametrize(("patch", "needle"), [
    ('name = "meta"\neffect = "idempotent_write"', None),
    ('name = "update_page_metadata"\neffect = "non_idempotent_write"',
     "tools[1].effect: 'update_page_metadata' is a builtin writer that declares idempotent_write"),
    ('name = "meta"\neffect = "idempotent_write"\nerror_mix = {htp_502 = 1}', "tools[1].error_mix.htp_502"),
])
def test_tool_tables_a_contradicting_builtin_effect_and_a_bad_tool_error(tmp_path, capsys, patch, needle):
    text = SMALL.replace('name = "meta"\neffect = "idempotent_write"', patch)
    if needle is None:
        sconfig.load(tomllib.loads(text))
        return
    p = tmp_path / "bad.toml"
    p.write_text(text)
    assert main(["simulate", str(p)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and needle in err, err


def test_a_builtin_writer_named_without_an_effect_writes_in_the_simulator():
    res, _ = simulate_one(tomllib.loads(APPROVALS.format(p=0.0)), seed=1, keep_going=True)
    m = res["metrics"]
    assert m["writes"]["idempotent_write"]["logical_calls"] == 20  # resolved by the catalogue
    assert res["outcomes"] == {"completed/completed": 20}


def test_gate2_refusals_release_the_run_and_a_later_approver_completes_it():
    res, _ = simulate_one(tomllib.loads(APPROVALS.format(p=0.5)), seed=1, keep_going=True)
    segs = res["metrics"]["segments"]
    assert segs.get("ApproverNotPermitted", 0) > 0
    assert res["outcomes"].get("completed/completed", 0) > 0
    assert not res["violations"]


def test_gate2_always_refused_leaves_every_run_waiting():
    res, _ = simulate_one(tomllib.loads(APPROVALS.format(p=1.0)), seed=1, keep_going=True)
    assert res["metrics"]["writes"]["idempotent_write"]["logical_calls"] == 0
    assert all(k == "unfinished/waiting_for_approval" for k in res["outcomes"]), res["outcomes"]


def test_the_faults_table_refuses_exactly_the_kinds_a_component_draws_from_its_own_knob(tmp_path, capsys):
    """``[faults]`` names the knob of a kind a component draws itself (sim/config.py KNOBS),
    and accepts every other declared kind: KNOBS is the components' ``owns``, no more."""
    from failclosed.sim import faults

    comps = (faults.RunStore, faults.AuditStore, faults.Provider, faults.Tools, faults.Bus,
             faults.Crashes, faults.Pauses)
    assert {k for c in comps for k in c.owns} == set(sconfig.KNOBS)
    p = tmp_path / "c.toml"
    p.write_text(SMALL + "\n[faults]\nstore_error = 0.1\n")
    assert main(["simulate", str(p), "--runs", "1", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("faults.store_error: run_store.error_probability sets it; set it there "
                        "and remove faults.store_error"), err
