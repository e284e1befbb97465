"""The edges a CI job and an operator meet (issue 20): input checked when it is read,
contradictory options refused, sizes limited, messages that say what the input is."""

from __future__ import annotations

from pathlib import Path

import pytest

from failclosed.cli import main

ROOT = Path(__file__).resolve().parents[1]

SCENARIO = """policy = "current"
[[runs]]
id = "r1"
[[steps]]
do = "enqueue_run"
actor = "caller"
run = "r1"
[expect]
{expect}
"""


@pytest.mark.parametrize("expect, field, near", [
    ('rows.r1 = { status = "canceled" }', "expect.rows.r1.status", "did you mean 'cancelled'?"),
    ("rows.r1 = { status = 5 }", "expect.rows.r1.status", "expected a string"),
    ('rows.r1 = { status = { in = ["queued", "canceld"] } }', "expect.rows.r1.status.in[1]",
     "did you mean 'cancelled'?"),
    ('rows.r1 = { termination_reason = "canceled" }', "expect.rows.r1.termination_reason",
     "did you mean 'cancelled'?"),
    ('procs = ["nosuchproc"]', "expect.procs[0]", "did you mean one of reaper, w1?"),
    ('procs = ["w2"]', "expect.procs[0]", "did you mean one of reaper, w1?"),
    ('violates = ["stream_ordr"]', "expect.violates[0]", "did you mean 'stream_order'?"),
    ('holds = ["exclusive_claims"]', "expect.holds[0]", "did you mean 'exclusive_claim'?"),
])
def test_an_expectation_the_model_cannot_meet_is_bad_input(tmp_path, capsys, expect, field,
                                                           near) -> None:
    f = tmp_path / "s.toml"
    f.write_text(SCENARIO.format(expect=expect))
    assert main(["replay", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"failclosed: error: {field}:"), err
    assert near in err


def test_expectations_the_model_knows_still_replay(tmp_path) -> None:
    f = tmp_path / "s.toml"
    f.write_text(SCENARIO.format(expect='rows.r1 = { status = "queued" }\nprocs = ["enqueue:r1"]\n'
                                 'holds = ["stream_order"]'))
    assert main(["replay", str(f)]) == 0


SIM = (ROOT / "sim/configs/default.toml").read_text()


@pytest.mark.parametrize("key, value, limit", [
    ("runs.slots", "100000000", "10,000"),
    ("workers.count", "100000", "10,000"),
    ("constants.LEASE_SECONDS", "9223372036854775807", "1,000,000,000"),
])
def test_sizes_that_would_exhaust_memory_are_refused_naming_the_limit(tmp_path, capsys, key,
                                                                      value, limit) -> None:
    out = tmp_path / "r.csv"
    rc = main(["sweep", str(ROOT / "sim/configs/default.toml"), "--param", f"{key}={value}",
               "--seeds", "1", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and f"{key}:" in err and f"limit of {limit}" in err, err
    assert not out.exists()


def test_model_workers_are_limited(tmp_path, capsys) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[model]\nworkers = 100000\n[[runs]]\nid = "r1"\n')
    assert main(["check", "--policy", "current", "--config", str(f), "--quiet"]) == 2
    assert "model.workers: 100000 is above the limit of 64" in capsys.readouterr().err
