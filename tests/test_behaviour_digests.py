"""Speed work changes no behaviour: the checker's verdicts, shortest lengths and exact
counterexample traces, and the simulator's histories and violation records, are those
recorded in ``tests/data/behaviour_digests.json`` before the speed-ups of issue 12
(``python -m tests.behaviour_digests --write`` records them; see that module).

A few quick configurations and workloads run in the default suite; every shipped
configuration and the shipped 1000-run workload under ``-m slow``."""

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
    configs = {k.split("|")[0] for k in RECORDED["checker"]}
    assert configs == set(bd.checker_configs())
    assert {k.split("|")[1] for k in RECORDED["checker"]} == set(bd.POLICIES)


@pytest.mark.parametrize("key", CHECKER)
def test_checker_verdicts_and_traces_unchanged(key):
    config, policy = key.split("|")
    assert bd.checker_digest(config, policy) == RECORDED["checker"][key]


@pytest.mark.parametrize("key", SIM)
def test_simulator_histories_and_violations_unchanged(key):
    name, policy, seed = key.split("|")
    raw = bd.sim_workloads()[name]
    assert bd.sim_digest(raw, policy, int(seed), bd.SIM_RUNS[name]) == RECORDED["sim"][key]
