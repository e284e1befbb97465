"""Issue 37: every mechanism by which an idempotent write lands without its event and the run
then completes (FINDINGS.md 7, spec/configs/unaudited-*.toml) fails under ``current`` and
under the P1-P8 ``proposed``, and P9 (``idempotent_stamp_blocks_retry`` with
``fence_cleared_after_audit``, docs/PROPOSALS.md) stops the retry that completes over it."""

from __future__ import annotations

import tomllib

import pytest
from failclosed.model.policy import PRESETS, parse_policy
from failclosed.model.rules import may_retry_after_fence
from failclosed.spec.checker import CONFIG_DIR, ConfigPart, check

UNAUDITED = CONFIG_DIR / "unaudited"  # not recorded by the behaviour digests (spec/configs/*.toml)

PROP = "no_unaudited_write_settles_successfully"
P1_P8 = "proposed-idempotent_stamp_blocks_retry-fence_cleared_after_audit"
# configuration -> its shortest counterexample under current (FINDINGS.md 7's table)
MECHANISMS = {
    "unaudited-store-error-deny": 55,
    "unaudited-crash-deny": 54,
    "unaudited-pause-deny": 55,
    "unaudited-slow-deny": 55,
    "unaudited-retry-tool-error": 56,
    "unaudited-tool-removed": 51,
}


def _path(name: str) -> str:
    return str(UNAUDITED / f"{name}.toml")


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_each_mechanism_violates_the_property_under_current(name: str) -> None:
    r = check("current", _path(name), [PROP], witnesses=False, coverage=False).properties[PROP]
    assert not r.holds and len(r.trace) == MECHANISMS[name]


def test_the_late_landing_is_no_violation_under_current() -> None:
    r = check("current", _path("unaudited-late-landing"), [PROP], witnesses=False,
              coverage=False).properties[PROP]
    assert r.holds


@pytest.mark.slow  # proposed explores the whole configuration: about a minute
def test_finding_7_as_written_fails_without_p9_and_holds_with_it() -> None:
    name = "unaudited-store-error-deny"
    without = check(P1_P8, _path(name), [PROP], witnesses=False, coverage=False).properties[PROP]
    assert not without.holds and len(without.trace) == MECHANISMS[name]
    assert check("proposed", _path(name), [PROP], witnesses=False,
                 coverage=False).properties[PROP].holds


def test_the_mutant_without_a_fail_closed_audit_still_violates_the_property() -> None:
    """The property's reading (spec/SPEC.md) excuses only an idempotent call audited by another
    application: ``proposed`` without ADR-111's fail-closed audit, on a write whose event
    insert fails, completes over it and is caught."""
    data = tomllib.loads((UNAUDITED / "unaudited-store-error-deny.toml").read_text())
    data["model"]["faults"] = ["audit_insert_fails"]
    data["runs"][0]["decisions"] = ["approve"]
    part = ConfigPart("audit-fails", "inline", data)
    broken = check("proposed-audit_failclosed_writes", part, [PROP], witnesses=False,
                   coverage=False).properties[PROP]
    assert not broken.holds
    assert check("proposed", part, [PROP], witnesses=False, coverage=False).properties[PROP].holds


def test_p9_deciders_refuse_a_retry_on_either_write_stamp() -> None:
    """14.3 as P9 changes it: false for both write stamps, true for no stamp, a read and an
    unrecognised string (as before); without P9 only the non-idempotent stamp refuses."""
    p9, cur = PRESETS["proposed"], PRESETS["current"]
    assert p9.idempotent_stamp_blocks_retry and not cur.idempotent_stamp_blocks_retry
    for stamp, before, after in (("", True, True), ("read_only", True, True), ("bogus", True, True),
                                 ("idempotent_write", True, False),
                                 ("non_idempotent_write", False, False)):
        assert may_retry_after_fence(stamp, cur) is before
        assert may_retry_after_fence(stamp, p9) is after
    assert may_retry_after_fence("idempotent_write", parse_policy(P1_P8))
