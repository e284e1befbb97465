"""The shipped hard workloads (sim/configs: approval-heavy, short-lease, tool-errors) find what
they are shipped for: under ``current``, a run that settles over an unaudited write
(no_unaudited_write_settles_successfully, FINDINGS.md 7), by the trigger each is named after,
with a counterexample that replays through the model."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.cli.scenario_writer import dump_scenario  # noqa: E402
from failclosed.cli.simulate import shipped_sim_configs  # noqa: E402
from failclosed.model.scenario import load_scenario, replay  # noqa: E402
from failclosed.model.vocab import FaultKind  # noqa: E402
from failclosed.sim.batch import simulate_one, violation_scenario  # noqa: E402
from failclosed.spec.vocab import PropertyName  # noqa: E402

CENTRAL = PropertyName.NO_UNAUDITED_WRITE_SETTLES_SUCCESSFULLY


def _denied(steps: list[dict]) -> bool:  # the caller denied a retry's request
    return any(s["name"] == "deny" for s in steps)


def _tool_error(steps: list[dict]) -> bool:  # a call of the run raised (no effect, error step)
    return any(s.get("fault") == str(FaultKind.TOOL_ERROR) for s in steps)


def _requeued(steps: list[dict]) -> bool:  # a reaper took the run from a live segment's lease
    return any(s["name"] == "requeue_stale" for s in steps)


# each workload, and the trigger some violating run of its shipped seed shows
WORKLOADS = {"approval-heavy": _denied, "tool-errors": _tool_error, "short-lease": _requeued}
SEEDS = (1, 2, 3)


def test_every_hard_workload_is_shipped_and_tested():
    assert set(WORKLOADS) <= set(shipped_sim_configs())


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_hard_workload_finds_an_unaudited_write_settled_under_current(name, tmp_path):
    raw = tomllib.loads(shipped_sim_configs()[name].read_text())
    # one seed is one replication: a workload shows the violation on most seeds, not on every
    # one (docs/SIMULATOR.md "Workloads" counts them over 20), so the first of three that does
    for seed in SEEDS:
        res, sim = simulate_one(raw, policy="current", seed=seed, keep_going=True, scenarios=None)
        found = [v for v in sim.violations if v.property == str(CENTRAL)]
        if found:
            break
    assert found, (name, res["violations"])
    assert any(WORKLOADS[name](v.scenario["steps"]) for v in found), name
    # the first one's counterexample replays through the model and violates the property again
    doc = violation_scenario(found[0], "current", res["seed"])
    path = tmp_path / "v.toml"
    path.write_text(dump_scenario(**doc))
    r = replay(load_scenario(path))
    assert r.ok, (name, r.stopped, [str(x) for x in r.failures])
