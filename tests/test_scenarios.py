"""Scenario files: every shipped scenario replays green, historical pairs exist, bad files exit 2."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model.scenario import (  # noqa: E402
    SCENARIO_DIR,
    dump_scenario,
    load_scenario,
    replay,
    scenario_from_dict,
    shipped,
)
from model.transition import Transition  # noqa: E402
from sim.cli import main  # noqa: E402

SHIPPED = shipped()
HISTORICAL = [
    "hist-16.1-terminal-overwrite", "hist-16.4-zombie-append", "hist-16.5-zombie-settle",
    "hist-16.8-crash-during-write", "hist-16.8-outlives-lease", "hist-16.10-unrecorded-write",
    "hist-16.12-abandoned-worker", "hist-16.12-abandoned-sync", "hist-16.16-resurrection",
]


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_scenario_replays(path: Path) -> None:
    res = replay(load_scenario(path))
    assert res.ok, (res.stopped, [str(f) for f in res.failures])
    assert res.checked > 0, "a scenario must assert something"


@pytest.mark.parametrize("stem", HISTORICAL)
def test_historical_pair_differs_in_policy(stem: str) -> None:
    red, green = SCENARIO_DIR / f"{stem}.red.toml", SCENARIO_DIR / f"{stem}.green.toml"
    assert red.exists() and green.exists()
    r, g = load_scenario(red), load_scenario(green)
    assert r.world.spec.policy.switches() != g.world.spec.policy.switches()


def _write(tmp_path: Path, text: str) -> str:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return str(p)


BASE = '[[runs]]\nid = "r1"\n'


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (BASE + 'polcy = "current"\n', "polcy"),
        (BASE + '[[steps]]\ndo = "enqueue_run"\nactor = "caller"\nrun = 3.5\n', "steps[1].run"),
        ('[constants]\nLEASE_SECONDS = -5\n' + BASE, "LEASE_SECONDS"),
        ('policy = "adr-999"\n' + BASE, "policy"),
        (BASE + '[[steps]]\ndo = "enqueue_rnu"\n', "enqueue_run"),
        (BASE + '[expect]\nrows.r9 = { status = "failed" }\n', "r9"),
        (BASE + '[expect]\nrows.r1 = { stauts = "failed" }\n', "status"),
        (BASE + "[[steps]\n", "not valid TOML"),
    ],
)
def test_malformed_file_exits_2_with_one_line(tmp_path, capsys, text: str, needle: str) -> None:
    assert main(["replay", _write(tmp_path, text)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert needle in err


def test_guard_failure_names_guard_and_enabled(tmp_path, capsys) -> None:
    text = BASE + '[[steps]]\ndo = "claim_queued"\nactor = "w1"\nrun = "r1"\n'
    assert main(["replay", _write(tmp_path, text)]) == 1
    out = capsys.readouterr().out
    assert "guard does not hold" in out
    assert "enabled at that point" in out and "enqueue_run" in out


def test_failed_expectation_exit_1_expected_vs_actual(tmp_path, capsys) -> None:
    text = BASE + '[[steps]]\ndo = "enqueue_run"\nactor = "caller"\nrun = "r1"\n' \
        '[expect]\nrows.r1 = { status = "failed" }\n'
    assert main(["replay", _write(tmp_path, text)]) == 1
    out = capsys.readouterr().out
    assert "expected 'failed', actual 'queued'" in out


def test_json_output(tmp_path, capsys) -> None:
    assert main(["replay", "--json", str(SHIPPED[0])]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and data["steps"]


def test_replay_all_table(capsys) -> None:
    assert main(["replay", "--all"]) == 0
    assert f"{len(SHIPPED)}/{len(SHIPPED)} scenarios pass" in capsys.readouterr().out


def test_dump_load_round_trip() -> None:
    sc = load_scenario(SCENARIO_DIR / "hist-16.5-zombie-settle.red.toml")
    res = replay(sc)
    steps = [s.transition for s in res.steps]
    steps[3] = (steps[3], {"rows": {"r1": {"status": "running"}}})
    exp = {"rows": {"r1": {"status": "failed", "termination_reason": "not_retryable"}},
           "marks": ["zombie_settle:r1"], "ledger": [{"count": 0}]}
    data = dict(sc.data, description='quotes " and \\ survive\nnewlines too')
    text = dump_scenario(data, steps, exp)
    parsed = tomllib.loads(text)
    again = scenario_from_dict(parsed)
    assert again.description == data["description"]
    assert again.world.spec == sc.world.spec
    res2 = replay(again)
    assert res2.ok, (res2.stopped, [str(f) for f in res2.failures])
    assert [s.transition for s in res2.steps] == [t if isinstance(t, Transition) else t[0] for t in steps]
    assert res2.world == res.world


def test_holds_and_violates_name_spec_properties(tmp_path, capsys) -> None:
    """A scenario can assert a property by name; an unknown name is bad input."""
    ok = BASE + '[expect]\nholds = ["no_zombie_settle", "terminal_is_absorbing"]\n'
    assert main(["replay", _write(tmp_path, ok)]) == 0
    bad = BASE + '[expect]\nholds = ["no_such_property"]\n'
    assert main(["replay", _write(tmp_path, bad)]) in (1, 2)
