"""``failclosed proposals`` and the switches of proposals P6-P8 (docs/PROPOSALS.md)."""

from __future__ import annotations

import json

import pytest
from failclosed.cli.app import main
from failclosed.cli.proposals import necessity_table
from failclosed.model import store
from failclosed.model.policy import PRESETS, proposal_switches
from failclosed.model.state import RUNNING, Event, Row, replace
from failclosed.model.steps import REAPER_ACTIONS, REAPER_REDISPATCH, REAPER_RESEND

from tests.test_model_units import standard_world


def test_proposal_switches_are_what_proposed_adds_to_current():
    cur, prop = PRESETS["current"], PRESETS["proposed"]
    assert proposal_switches()
    for s in proposal_switches():
        assert getattr(prop, s) and not getattr(cur, s)
    assert {s for s in cur.switches() if cur.switches()[s] != prop.switches()[s]} == set(
        proposal_switches())


def test_the_table_names_each_switch_and_what_fails_without_it_shortest_first():
    cells = {"proposed": {"a": {"holds": True, "trace_length": None}}}
    for k, s in enumerate(proposal_switches()):
        cells[f"proposed-{s}"] = {"a": {"holds": k % 2 == 1, "trace_length": None if k % 2 else 9},
                                  "b": {"holds": k % 2 == 1, "trace_length": None if k % 2 else 3}}
    lines = necessity_table(cells, "configuration x")
    assert lines[0].startswith("| `proposed` without | properties violated over configuration x")
    assert lines[2] == "| (nothing: `proposed` itself) | none |"
    for k, s in enumerate(proposal_switches()):
        row = lines[3 + k]
        assert row.startswith(f"| `{s}` | ")
        assert row.endswith("| none |" if k % 2 else "| `b` 3, `a` 9 |")


def test_proposals_over_a_configuration_exits_by_whether_every_switch_is_shown_necessary(capsys):
    rc = main(["proposals", "--config", "tiny", "--jobs", "1", "--quiet", "--json", "-"])
    d = json.loads(capsys.readouterr().out)
    assert d["switches"] == list(proposal_switches())
    assert set(d["policies"]) == {"proposed", *(f"proposed-{s}" for s in proposal_switches())}
    unneeded = [s for s in proposal_switches()
                if all(c["holds"] for c in d["policies"][f"proposed-{s}"].values())]
    assert d["not_shown_necessary"] == unneeded
    assert rc == (1 if unneeded or d["proposed_violates"] else 0)


def test_proposals_refuses_a_scope_only_option_with_a_configuration(capsys):
    assert main(["proposals", "--config", "tiny", "--max-states", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--max-states applies to a scope" in err[0]


def _policy(w, **switches):
    cfg = replace(w.config, policy=w.config.policy.with_(**switches))
    return replace(w, config=cfg)


def test_the_owner_guarded_insert_stores_only_for_the_live_claim():
    w = _policy(standard_world(), event_insert_owner_guarded=True)
    w = w.set_row(0, Row(status=RUNNING, claimed_by="worker:w1", lease_expires=w.clock + 1))
    ev = Event(0, 0, "llm", 0, -1, "", "w1/q1#1")
    assert store.append_event(w, 0, ev, "worker:w1")[1] == store.INSERT_STORED
    assert store.append_event(w, 0, ev, "worker:w2")[1] == store.INSERT_REFUSED
    lapsed = replace(w, clock=w.clock + 2)  # the lease has lapsed: no live claim
    assert store.append_event(lapsed, 0, ev, "worker:w1")[1] == store.INSERT_REFUSED
    assert store.append_event(lapsed, 0, ev, "")[1] == store.INSERT_STORED  # no lease owner


def test_a_taken_sequence_is_a_duplicate_key_only_with_the_unique_key():
    w = standard_world().set_row(0, Row(status=RUNNING))
    w, _ = store.append_event(w, 0, Event(0, 0, "request", 0, -1, "", "s"))
    again = Event(0, 0, "llm", 0, -1, "", "s")
    assert store.append_event(w, 0, again)[1] == store.INSERT_STORED
    u = _policy(w, event_sequence_unique=True)
    assert store.append_event(u, 0, again) == (u, store.INSERT_CONFLICT)


def test_the_sweep_redispatches_an_overdue_queued_row_once():
    w = _policy(standard_world(), overdue_queued_redispatched=True)
    w, _ = store.enqueue_run(w, 0)
    due = w.rows[0].dispatch_deadline
    assert due == w.clock + w.config.constants.LEASE_SECONDS
    assert store.find_overdue_queued(w, due, 10) == ()  # strict: not yet overdue at the deadline
    late = replace(w, clock=due + 1)
    assert [r.run for r in store.find_overdue_queued(late, late.clock, 10)] == [0]
    late, ok = store.redispatch_queued(late, 0, late.clock)
    assert ok and late.rows[0].dispatch_deadline == late.clock + w.config.constants.LEASE_SECONDS
    assert store.redispatch_queued(late, 0, late.clock) == (late, False)  # a racing reaper
    assert REAPER_ACTIONS[REAPER_REDISPATCH].fires == (store.REDISPATCH_QUEUED,)
    assert REAPER_REDISPATCH in REAPER_ACTIONS and REAPER_RESEND in REAPER_ACTIONS


def test_without_the_sweep_no_statement_writes_a_deadline():
    w, _ = store.enqueue_run(standard_world(), 0)
    assert w.rows[0].dispatch_deadline == 0
    assert store.find_overdue_queued(replace(w, clock=10**6), 10**6, 10) == ()


# -- `proposed` on two runs (a default-suite check, not only a digest) ----------------------
TWO_RUN_K = {"LEASE_SECONDS": 1, "MAX_REQUEUES": 1, "REQUEUE_BACKOFF_MS": 1000,
             "REQUEUE_BACKOFF_CAP_MS": 2000}


def _two_runs(second: dict) -> dict:
    """A queued run failing with a retryable class while a recovery dispatch may fail
    (docs/PROPOSALS.md, "Each switch necessary": the orphaned QUEUED row P2 and P6 close),
    beside a second live run."""
    return {"constants": TWO_RUN_K,
            "model": {"faults": ["dispatch_fails"], "fault_budget": 1, "horizon": 2},
            "runs": [{"id": "r1", "entry": "queued", "plan": [{"fail": "rateLimit"}]}, second]}


def _violated(policy: str, name: str, data: dict) -> set[str]:
    """The properties a complete search of ``data`` under ``policy`` violates."""
    from failclosed.spec.checker import ConfigPart, check

    res = check(policy, ConfigPart(name, "", data), None, witnesses=False, coverage=False,
                max_states=50_000)
    assert res.complete, policy
    return {n for n, r in res.properties.items() if not r.holds}


@pytest.mark.parametrize("second", [
    {"id": "r2", "entry": "interactive"},
    {"id": "r2", "entry": "queued", "plan": [{"fail": "rateLimit"}]},
], ids=["queued+interactive", "queued+queued"])
def test_proposed_holds_every_property_on_two_runs_where_current_orphans_a_row(second):
    """``proposed`` holds every property (docs/PROPOSALS.md: "(nothing: proposed itself)
    none") on a complete search of two runs, and so does ``proposed`` without P2 (P6's
    sweep alone); ``current``, and ``proposed`` without both P2 and P6 (one of the two is
    needed), leave a failed run's row QUEUED with no message."""
    def violated(policy: str) -> set[str]:
        return _violated(policy, "two-runs", _two_runs(second))

    assert violated("proposed") == set()
    # P6 alone (its sweep over every QUEUED row) closes it too (docs/PROPOSALS.md)
    assert violated("proposed-fallback_settles_requeued_row") == set()
    orphan = {"no_orphan_queued_run", "every_run_terminates"}
    assert violated("current") >= orphan
    assert violated("proposed-fallback_settles_requeued_row-overdue_queued_redispatched") >= orphan


def test_a_row_left_queued_before_the_migration_is_swept_after_it():
    """docs/PROPOSALS.md "Migration": every row QUEUED when the new code starts gets a
    deadline one lease on, so a row an earlier version left QUEUED with no message
    (FINDINGS.md 3) is dispatched again by P6's sweep. Without the migration the sweep never
    selects it (its deadline is none) and the run never terminates under `proposed` either."""
    from failclosed.model.config import load_world

    data = {"constants": TWO_RUN_K, "model": {"horizon": 4},
            "runs": [{"id": "r1", "entry": "queued", "plan": [{"final": "completed"}],
                      "row": {"status": "queued"}}]}
    lease = TWO_RUN_K["LEASE_SECONDS"]
    assert load_world(data, "proposed").rows[0].dispatch_deadline == lease
    assert load_world(data, "current").rows[0].dispatch_deadline == 0  # no column before P6
    # a deadline the configuration gives is the row's own (written by the new code)
    given = {**data, "runs": [{**data["runs"][0], "row": {"status": "queued",
                                                          "dispatch_deadline": 3}}]}
    assert load_world(given, "proposed").rows[0].dispatch_deadline == 3

    def violated(policy: str) -> set[str]:
        return _violated(policy, "left-queued", data)

    assert violated("proposed") == set()
    assert violated("current") >= {"no_orphan_queued_run", "every_run_terminates"}


def test_a_row_left_running_without_a_lease_before_the_migration_is_reaped_after_it():
    """RUNTIME 16.12: a row RUNNING with `lease_expires = 0` (written before ADR-141) "stayed
    RUNNING until it was purged", under `current` too; the migration gives it a lease, and
    the reaper takes it once the lease lapses."""
    from failclosed.model.config import load_world

    data = {"constants": TWO_RUN_K, "model": {"horizon": 4},
            "runs": [{"id": "r1", "entry": "interactive", "row": {"status": "running"}}]}
    assert load_world(data, "proposed").rows[0].lease_expires == TWO_RUN_K["LEASE_SECONDS"]
    assert load_world(data, "current").rows[0].lease_expires == 0

    def violated(policy: str) -> set[str]:
        return _violated(policy, "left-running", data)

    assert violated("proposed") == set()
    assert "every_run_terminates" in violated("current")
