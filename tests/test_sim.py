"""The simulator: determinism, violations found and replayable, config errors, sweeps, plots."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.cli import main  # noqa: E402
from failclosed.sim import config as sconfig  # noqa: E402
from failclosed.sim.batch import simulate_one  # noqa: E402

SMALL = """
policy = "current"
[runs]
count = 12
slots = 8
drain_seconds = 7200
[arrivals]
kind = "poisson"
rate_per_hour = 1200
[workers]
count = 3
[bus]
delivery_delay = {dist = "exponential", mean = 0.5}
duplicate_probability = 0.05
dispatch_failure_probability = 0.01
[audit_store]
insert_failure_probability = 0.02
ambiguous_commit_probability = 0.01
latency = 0.003
[run_store]
error_probability = 0.005
latency = {dist = "lognormal", median = 0.002, p99 = 0.02}
[crashes]
worker_rate_per_hour = 2.0
restart_delay = 10
[pauses]
probability = 0.005
duration = {dist = "exponential", mean = 300}
[provider]
latency = {dist = "lognormal", median = 2, p99 = 30}
failure_probability = 0.05
failure_mix = {serverError = 2, auth = 1}
[[tools]]
name = "search"
latency = 0.5
[[tools]]
name = "meta"
effect = "idempotent_write"
latency = 1.0
[[tools]]
name = "ticket"
effect = "non_idempotent_write"
remote = true
server_flag = 0
latency = {dist = "lognormal", median = 20, p99 = 1500}
error_probability = 0.05
[workload]
queued_fraction = 0.8
rounds = {dist = "empirical", values = [1, 2, 3]}
tool_mix = {search = 2, meta = 1, ticket = 1}
[workload.approvals]
delay = {dist = "exponential", mean = 60}
deny_probability = 0.2
[workload.cancels]
probability = 0.1
delay = 120
"""

# An unattended remote writer that always outlives a short lease, under a preset without
# the write fence: the reaper requeues the run while the write runs, and a second worker
# executes the write again (RUNTIME 16.8, "the operation outlives the lease").
OUTLIVES = (Path(__file__).resolve().parent / "data" / "outlives.toml").read_text()


def _raw(text: str) -> dict:
    import tomllib

    return tomllib.loads(text)


def _write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# -- determinism -----------------------------------------------------------------------------
def test_same_seed_same_history_hash_byte_for_byte(tmp_path):
    raw = _raw(SMALL)
    a, _ = simulate_one(raw, seed=7, keep_going=True, history=str(tmp_path / "a.jsonl"))
    b, _ = simulate_one(raw, seed=7, keep_going=True, history=str(tmp_path / "b.jsonl"))
    assert a["history_sha256"] == b["history_sha256"]
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert a["metrics"] == b["metrics"]


def test_different_seeds_give_different_histories():
    raw = _raw(SMALL)
    raw["runs"]["count"] = 5
    hashes = {simulate_one(raw, seed=s, keep_going=True)[0]["history_sha256"] for s in range(1, 21)}
    assert len(hashes) == 20


def test_every_fired_transition_was_enabled_when_it_fired():
    """The online assertion: every non-clock transition was found in enabled(world, actor)."""
    from failclosed.model.config import load_world
    from failclosed.model.runtime import apply

    res, sim = simulate_one(_raw(SMALL), seed=3, keep_going=True, keep_history=True)
    recs = sim.history.records
    assert res["asserted_enabled"] == sum(1 for _, t in recs if t.name != "advance_time") > 100
    assert res["transitions"] == len(recs)
    # and the clock only ever moves forward, to int(env.now)
    clocks = [t.arg("to") for _, t in recs if t.name == "advance_time"]
    assert clocks == sorted(clocks) and len(set(clocks)) == len(clocks)
    assert load_world  # (replay of whole windowed histories is covered per run by the scenarios)
    assert apply


def test_same_workload_under_every_policy():
    """Side-by-side runs share arrivals and plans: the same logical runs arrive."""
    raw = _raw(SMALL)
    a, sa = simulate_one(raw, policy="current", seed=2, keep_going=True)
    b, sb = simulate_one(raw, policy="adr-111", seed=2, keep_going=True)
    plans_a = {r.id: (r.entry, r.spec.plan, round(r.arrival, 9)) for r in sa.all_records()}
    plans_b = {r.id: (r.entry, r.spec.plan, round(r.arrival, 9)) for r in sb.all_records()}
    assert plans_a == plans_b
    assert a["history_sha256"] != b["history_sha256"]


# -- violations ------------------------------------------------------------------------------
def test_injected_violation_is_caught_and_its_scenario_replays(tmp_path, capsys):
    from failclosed.model.scenario import load_scenario, replay

    cfg = _write(tmp_path, "outlives.toml", OUTLIVES)
    out = tmp_path / "viol"
    js = tmp_path / "r.json"
    code = main(["simulate", cfg, "--seed", "1", "--violations-dir", str(out), "--json", str(js)])
    assert code == 1
    res = json.loads(js.read_text())
    assert res["violations"], res["outcomes"]
    files = sorted(out.glob("*.toml"))
    assert files
    for f in files:
        r = replay(load_scenario(f))
        assert r.ok, (f, r.stopped, [str(x) for x in r.failures])
    # the same preset with the fence: the reaper dead-letters instead of re-executing
    raw = _raw(OUTLIVES)
    cur, _ = simulate_one(raw, policy="current", seed=1, keep_going=True)
    ni = cur["metrics"]["writes"]["non_idempotent_write"]
    assert ni["double"]["k"] == 0 and ni["logical_calls"] > 0
    assert cur["metrics"]["dead_letter"]["k"] > 0


def test_keep_going_counts_instead_of_stopping():
    raw = _raw(OUTLIVES)
    stop, _ = simulate_one(raw, seed=1, keep_going=False)
    go, _ = simulate_one(raw, seed=1, keep_going=True)
    assert len(stop["violations"]) >= 1
    assert sum(len(v["runs"]) for v in go["violations"]) >= sum(len(v["runs"]) for v in stop["violations"])
    assert go["metrics"]["finished"] == 4


# -- config validation -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "patch, needle",
    [
        ("[workers]\ncuont = 3\n", "did you mean 'count'"),
        ("[bus]\nduplicate_probability = 1.5\n", "outside [0, 1]"),
        ("[crashes]\nrestart_delay = -4\n", "negative duration"),
        ("[runs]\ncount = \"many\"\n", "expected an integer"),
        ("[provider]\nlatency = {dist = \"lognormal\", median = 5, p99 = 2}\n", "p99"),
        ("[transport]\nkind = \"snyc\"\n", "use one of async, sync"),
        ("polcy = \"current\"\n", "did you mean 'policy'"),
    ],
)
def test_config_errors_are_one_line_exit_2(tmp_path, capsys, patch, needle):
    base = OUTLIVES.replace("[runs]\ncount = 4\nslots = 4\n", "").replace("[workers]\ncount = 2\n", "")
    base = base.replace("[provider]\nlatency = 1.0\n", "")
    text = patch + base if patch.startswith("polcy") else base + "\n" + patch
    cfg = _write(tmp_path, "bad.toml", text)
    code = main(["simulate", cfg])
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert ";" in err  # field: problem; fix


def test_config_module_validates_every_distribution_kind():
    for d in (3, {"dist": "fixed", "value": 3}, {"dist": "exponential", "mean": 2},
              {"dist": "lognormal", "median": 2, "p99": 50}, {"dist": "lognormal", "mu": 0.5, "sigma": 1},
              {"dist": "empirical", "values": [1, 2, 3]}):
        assert sconfig.parse_dist(d, "x").sample(__import__("random").Random(1)) >= 0
    lat = sconfig.parse_dist({"dist": "lognormal", "median": 20, "p99": 1200}, "x")
    assert abs(lat.quantile(0.99) - 1200) < 1e-6


def test_shipped_default_has_a_tool_tail_that_crosses_the_lease():
    cfg = sconfig.load_file(sconfig.default_path())
    lease = cfg.lease_seconds()
    remote = [t for t in cfg.tools if t.model.get("remote") and t.model.get("server_flag") == 0
              and t.model.get("effect") == "non_idempotent_write"]
    assert remote and remote[0].latency.quantile(0.99) > lease
    assert cfg.queued_fraction > 0.5


# -- sweep -----------------------------------------------------------------------------------
def _sweep_cfg(tmp_path) -> str:
    text = SMALL.replace("count = 12", "count = 4")
    return _write(tmp_path, "sweep.toml", text)


def test_sweep_with_local_processes_appends_rows_and_resumes(tmp_path, capsys):
    cfg = _sweep_cfg(tmp_path)
    out = tmp_path / "res.csv"
    args = ["sweep", cfg, "--param", "constants.LEASE_SECONDS=300,900", "--param", "policy=current,adr-111",
            "--seeds", "2", "--jobs", "2", "--out", str(out), "--quiet"]
    code = main(args)
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 8
    assert {r["param:constants.LEASE_SECONDS"] for r in rows} == {"300", "900"}
    assert {r["lease_seconds"] for r in rows} == {"300", "900"}
    # exit 1 exactly when some simulation violated a property (no baseline given)
    violated = {(r["policy"], p) for r in rows for p in r["violated"].split(";") if p}
    assert all((int(r["violations"]) > 0) == bool(r["violated"]) for r in rows)
    assert code == (1 if violated else 0)
    capsys.readouterr()
    assert main(args) == code  # a rerun skips what is there, and judges the rows in the file
    assert len(list(csv.DictReader(out.open()))) == 8
    assert "0 run now, 8 already in" in capsys.readouterr().out
    if violated:  # a baseline listing them all turns the verdict to 0
        bl = tmp_path / "bl.toml"
        bl.write_text("".join(f'[[known]]\npolicy = "{p}"\nproperty = "{q}"\nreason = "test"\n\n'
                              for p, q in sorted(violated)))
        assert main([*args, "--baseline", str(bl)]) == 0
        assert "0 new violations" in capsys.readouterr().out
    # and the plot of the sweep renders
    png = tmp_path / "curves.png"
    assert main(["plot", "lease-curves", str(out), "--out", str(png)]) == 0
    assert png.stat().st_size > 10_000


def test_sweep_on_a_dask_local_cluster(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    cfg = _sweep_cfg(tmp_path)
    out = tmp_path / "dask.csv"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        code = main(["sweep", cfg, "--param", "constants.LEASE_SECONDS=300,600", "--seeds", "2",
                     "--dask", cluster.scheduler_address, "--out", str(out), "--quiet"])
    assert code == 0
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 4
    # same grid point and seed -> the same history as a local run
    local = tmp_path / "local.csv"
    main(["sweep", cfg, "--param", "constants.LEASE_SECONDS=300,600", "--seeds", "2",
          "--out", str(local), "--quiet"])
    key = lambda r: (r["param:constants.LEASE_SECONDS"], r["seed"])  # noqa: E731
    assert {key(r): r["history_sha256"] for r in rows} == {
        key(r): r["history_sha256"] for r in csv.DictReader(local.open())}


def test_sweep_rejects_a_bad_param(tmp_path, capsys):
    cfg = _sweep_cfg(tmp_path)
    code = main(["sweep", cfg, "--param", "bus.duplicate_probability=2", "--seeds", "1",
                 "--out", str(tmp_path / "x.csv")])
    assert code == 2
    assert "outside [0, 1]" in capsys.readouterr().err


# -- plots -----------------------------------------------------------------------------------
def test_swimlane_from_a_history_and_from_a_scenario(tmp_path):
    cfg = _write(tmp_path, "outlives.toml", OUTLIVES)
    hist = tmp_path / "h.jsonl"
    vdir = tmp_path / "v"
    main(["simulate", cfg, "--keep-going", "--history", str(hist), "--violations-dir", str(vdir)])
    assert hist.stat().st_size > 0
    png = tmp_path / "lanes.png"
    assert main(["plot", "swimlane", str(hist), "--out", str(png)]) == 0
    assert png.stat().st_size > 10_000
    scen = sorted(vdir.glob("*.toml"))[0]
    svg = tmp_path / "scen.svg"
    assert main(["plot", "swimlane", str(scen), "--out", str(svg)]) == 0
    assert svg.stat().st_size > 10_000


def test_a_sweep_row_counts_the_violations_a_simulation_with_scenarios_finds():
    # a sweep replays no scenario (nothing of its row needs one); the violations, their runs
    # and the history are the same as a simulation that gives each its scenario
    from failclosed.model.config import read_toml
    from failclosed.sim.batch import sweep_task

    raw = sconfig.with_overrides(read_toml(sconfig.default_path()), {"runs.count": 200})
    res, sim = simulate_one(raw, policy="current", seed=3, keep_going=True)
    _, bare = simulate_one(raw, policy="current", seed=3, keep_going=True, scenarios=0)
    assert res["violations"], "the shipped workload violates properties under current"
    assert [(v.property, v.runs, v.time) for v in bare.violations] == \
        [(v.property, v.runs, v.time) for v in sim.violations]
    assert all(v.scenario is None for v in bare.violations)
    per: dict[str, int] = {}
    for v in sim.violations:
        per[v.property] = per.get(v.property, 0) + 1
        assert (v.scenario is not None) == (per[v.property] <= 3), v.property
    row = sweep_task(raw, {"policy": "current"}, 3)
    assert row["history_sha256"] == res["history_sha256"]
    assert row["violations"] == sum(len(v["runs"]) for v in res["violations"])
    assert row["violated"] == ";".join(sorted({v["property"] for v in res["violations"]}))
