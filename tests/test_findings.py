"""FINDINGS.md as regression tests: every finding's shortest trace still reproduces on the
current runtime, and the proposed policy (docs/PROPOSALS.md) closes the central ones."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from failclosed.model.scenario import load_scenario, replay, scenario_from_dict
from failclosed.spec.properties import SAFETY

FINDINGS = sorted((Path(__file__).resolve().parents[1] / "spec" / "findings").glob("*.toml"))
# the findings' traces that the proposal must close (file stems of spec/findings)
CLOSED_BY_PROPOSAL = (
    "no_write_applied_twice_without_audit--current",  # F1, by P1
    "no_unaudited_write_settles_successfully--current",  # F1, by P1
    "interrupted_non_idempotent_write_not_repeated--current",  # F1, by P1
    "no_zombie_append--current--cancel-probe",  # F4, by P3
    "no_zombie_settle--current--pause-after-claim",  # F6, by P4 and P5
    "stream_order--current",  # F2, by P8
    "no_zombie_append--current--pause-after-renewal",  # F5, by P7
    "no_unaudited_write_settles_successfully--current--approve-then-deny",  # F7, by P9
    # found by `failclosed hunt` outside standard (FINDINGS.md 8)
    "no_unaudited_write_settles_successfully--current--hunt",  # F1 settled by a 2nd approval, P1
    "interrupted_non_idempotent_write_not_repeated--current--hunt",  # F1 on a gated write, P1
    "no_zombie_append--current--hunt",  # F5 on a gated write, by P7
    "no_zombie_settle--current--hunt",  # F6 on a gated write, by P4 and P5
)
# and those it leaves open, each for the reason FINDINGS.md gives
# (F3's liveness lassos are closed by P6: docs/PROPOSALS.md's regression scenarios
# proposal-p6-* replay them under proposed; a lasso is not a safety property's end state)
OPEN_UNDER_PROPOSAL = (
    "no_orphan_queued_run--current",  # F3: a liveness lasso (closed by P6, see above)
    "every_run_terminates--current",  # F3
    "every_run_terminates--current--hunt",  # F8: no bus, no reaper tick (FINDINGS.md 8)
)


def test_finding_7_stays_open_without_p9():
    """F7 (FINDINGS.md 7) under the P1-P8 ``proposed``: no proposal before P9 stops a retry
    of a run whose idempotent write may have landed, so the same steps violate the central
    guarantee there too; P9 closes it (test_proposal_closes_the_trace)."""
    stem = "no_unaudited_write_settles_successfully--current--approve-then-deny"
    (path,) = [p for p in FINDINGS if p.stem == stem]
    data = tomllib.loads(path.read_text())
    data["policy"] = "proposed-idempotent_stamp_blocks_retry-fence_cleared_after_audit"
    res = replay(scenario_from_dict(data, stem + "-p1-p8"))
    assert res.ok and not SAFETY[stem.split("--")[0]].check(res.world), res.failures


def test_every_finding_has_a_scenario():
    stems = {p.stem for p in FINDINGS}
    assert stems == set(CLOSED_BY_PROPOSAL) | set(OPEN_UNDER_PROPOSAL)


@pytest.mark.parametrize("path", FINDINGS, ids=[p.stem for p in FINDINGS])
def test_finding_reproduces_on_current(path: Path):
    res = replay(load_scenario(path))
    assert res.ok, (res.stopped, [str(f) for f in res.failures])


@pytest.mark.parametrize("stem", CLOSED_BY_PROPOSAL)
def test_proposal_closes_the_trace(stem: str):
    """The same steps under ``proposed``: either a step is no longer enabled (the window is
    gone) or the property holds at the end."""
    (path,) = [p for p in FINDINGS if p.stem == stem]
    name = stem.split("--")[0]
    data = tomllib.loads(path.read_text())
    data["policy"] = "proposed"
    data.pop("expect", None)
    for step in data.get("steps", []):
        step.pop("expect", None)
    res = replay(scenario_from_dict(data, path.stem + "-proposed"))
    assert res.stopped or SAFETY[name].check(res.world), res.world


def test_the_cancel_probe_finding_is_found_on_both_transports():
    # FINDINGS F4: 7.2 step 3 persists without renewal. The checker finds it in as many steps
    # on each transport as the recorded (sync) trace; on sync the second executor is the
    # reaper's own process.
    from failclosed.spec.checker import CONFIG_DIR, check

    f4 = tomllib.loads((FINDINGS[0].parent / "no_zombie_append--current--cancel-probe.toml").read_text())
    recorded = len(f4["steps"])

    for part in ("cancel-probe-sync", "cancel-probe-async"):
        r = check("current", CONFIG_DIR / f"{part}.toml", ["no_zombie_append", "stream_order"],
                  witnesses=False, coverage=False)
        assert r.properties["no_zombie_append"].trace_length == recorded, part
        assert not r.properties["stream_order"].holds, part
        actors = {t.actor for t, _ in r.properties["no_zombie_append"].trace}
        assert ("w2" in actors) if part.endswith("async") else ("reaper" in actors and "w1" not in actors)
        # proposal P3 closes both on this configuration
        r = check("proposed", CONFIG_DIR / f"{part}.toml", ["no_zombie_append", "stream_order"],
                  witnesses=False, coverage=False)
        assert r.properties["no_zombie_append"].holds and r.properties["stream_order"].holds, part
