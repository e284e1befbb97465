"""The guarantees of RUNTIME 16 as predicates: each one holds on a world the model
reaches under the policy that has the mechanism, and is violated on one it reaches without.

Worlds are driven through the model's own transitions (model.runtime.apply), so each test
also documents what the runtime does; a few worlds the model cannot reach are built with
dataclasses.replace to show what the predicate would reject.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from failclosed.model import apply, enabled, load_world, names, steps
from failclosed.model import store as model_store
from failclosed.model.runtime import clock_move
from failclosed.model.state import Application, Event, World
from failclosed.model.steps import Fair
from failclosed.model.transition import Transition
from failclosed.spec.properties import LIVENESS, SAFETY, at_bound, explain, fairness
from hypothesis import given, settings
from hypothesis import strategies as st

from failclosed import build_info

T = Transition.make

REMOTE_WRITER = {"name": "mcp_create_record", "remote": True, "server_flag": 0}
PAGE_DRAFT = {"name": "create_page_draft", "effect": "non_idempotent_write"}
APPROVED_DRAFT = {**PAGE_DRAFT, "approval": True}  # suspends before ADR-134 too
PAGE_META = {"name": "update_page_metadata", "effect": "idempotent_write"}


def world(
    policy: str = "current",
    *,
    tools: tuple[dict, ...] = (),
    runs: tuple[dict, ...] = ({"id": "r1"},),
    workers: int = 1,
    faults: tuple[str, ...] = (),
    budget: int = 0,
    switches: dict[str, bool] | None = None,
    provider_faults: tuple[str, ...] = (),
) -> World:
    data: dict[str, Any] = {
        "policy": policy,
        # a lease lapse is a fault (slow_operation / pause): the tests move the clock freely
        "model": {"workers": workers,
                  "faults": sorted(set(faults) | {"slow_operation", "pause"}),
                  "fault_budget": budget + 4,
                  "provider_faults": list(provider_faults)},
        "tools": list(tools),
        "runs": list(runs),
    }
    if switches:
        data["switches"] = switches
    return load_world(data)


def do(w: World, name: str, actor: str, **args: Any) -> World:
    """Fire the one enabled transition of ``actor`` named ``name`` whose args include ``args``
    (a normal branch unless ``fault`` is given)."""
    cands = [
        t for t in enabled(w)
        if t.name == name and t.actor == actor
        and all(t.arg(k) == v for k, v in args.items())
        and ("fault" in args or t.fault is None)
    ]
    assert len(cands) == 1, (name, actor, args, [str(t) for t in enabled(w)])
    return apply(w, cands[0])


def until(w: World, actor: str, name: str) -> World:
    """Fire the actor's only normal move until its next move is ``name`` ("end": it ended)."""
    for _ in range(200):
        alive = w.reaper(actor) is not None if names.is_reaper(actor) else w.proc(actor) is not None
        moves = [t for t in enabled(w) if t.actor == actor and t.fault is None
                 and t.name != "crash"]
        if name == "end" and not alive:
            return w
        if any(t.name == name for t in moves):
            return w
        assert len(moves) == 1, (actor, name, [str(t) for t in moves])
        w = apply(w, moves[0])
    raise AssertionError(f"{actor} never reached {name}")


def at(w: World, to: int) -> World:
    """Move the clock; the model names the fault branch when a live lease lapses."""
    return apply(w, clock_move(w, to))


def holds(name: str, w: World) -> bool:
    return SAFETY[name].check(w)


def enqueue_and_claim(w: World, run: str = "r1", worker: str = "w1") -> World:
    w = do(w, "enqueue_run", "caller", run=run)
    w = do(w, "dispatch", f"enqueue:{run}")
    w = do(w, "run_queued", worker, run=run)
    return do(w, "claim_queued", worker)


def reap(w: World) -> World:
    """One reaper tick to its end (requeue or dead-letter, then dispatch)."""
    w = do(w, "find_stale_running", "reaper")
    return until(w, "reaper", "end")


# =========================================================================================
# the registry
# =========================================================================================
def test_the_registry_names_every_guarantee_in_order():
    # the two central guarantees lead (the matrix and the reports list them first); the
    # order of the rest is their declaration order (SPEC.md may group them its own way)
    assert list(SAFETY)[:2] == ["no_unaudited_write_settles_successfully",
                                "no_write_applied_twice_without_audit"]
    assert not set(SAFETY) & set(LIVENESS)
    for name, p in [*SAFETY.items(), *LIVENESS.items()]:
        assert p.name == name and p.statement and "RUNTIME " in p.source, name
        assert "16." in p.source.split("RUNTIME ", 1)[1], name
    for name, p in SAFETY.items():
        assert p.statement.startswith("□"), name
        assert p.check.__name__ == name and p.statement in p.check.__doc__, name
    for name, lp in LIVENESS.items():
        assert lp.statement.startswith("true ~>"), name


def test_the_bool_form_is_derived_from_the_finder():
    # check(w) is find(w) is None, on worlds where each finder answers both ways
    w = world("current")
    marked = replace(w, marks=frozenset({"zombie_append:r1", "resurrection:r1"}))
    e = Event(0, 0, "request", 0, -1, "", "w1/r1#1")
    dup = replace(w, events=(e, replace(e, seg="w2/r1#2")))
    for x in (w, marked, dup):
        for name, p in SAFETY.items():
            why = p.find(x)
            assert p.check(x) is (why is None), name
            assert explain(name, x) == ("holds" if why is None else why), name
    assert [n for n, p in SAFETY.items() if not p.check(marked)] == [
        "terminal_is_absorbing", "no_zombie_append", "no_resurrection_by_suspend"]
    assert [n for n, p in SAFETY.items() if not p.check(dup)] == ["stream_order"]


def test_a_property_is_declared_once():
    from failclosed.spec.properties import always, leads_to

    with pytest.raises(ValueError, match="declared twice"):
        always("stream_order", "□ true", source="RUNTIME 16.17")(lambda w: None)
    with pytest.raises(ValueError, match="declared twice"):
        leads_to("stream_order", "true ~> true", source="RUNTIME 16.17",
                 describe=lambda w: "")(lambda w: True)
    assert SAFETY["stream_order"].find(world()) is None  # the first declaration stands


def test_every_property_holds_on_the_initial_world_and_explain_says_so():
    w = world()
    for name in [*SAFETY, *LIVENESS]:
        if name in SAFETY:
            assert holds(name, w), name
        assert explain(name, w).startswith("holds"), name
    with pytest.raises(KeyError):
        explain("no_such_property", w)


# =========================================================================================
# 16.10 and the ledger: unaudited writes
# =========================================================================================
def write_run(policy: str, fault: str | None) -> World:
    """A queued run whose provider calls an unattended remote writer once, then answers;
    the write's tool step meets ``fault`` at record_step."""
    w = world(policy, tools=(REMOTE_WRITER,),
              runs=({"id": "r1", "plan": [{"tools": ["mcp_create_record"]},
                                         {"final": "completed"}]},),
              faults=("audit_insert_fails", "ambiguous_commit"), budget=1)
    w = enqueue_and_claim(w)
    w = until(w, "w1", "invoke")
    w = do(w, "invoke", "w1")
    w = until(w, "w1", "record_step")
    w = do(w, "record_step", "w1", **({"fault": fault} if fault else {}))
    return until(w, "w1", "end")


def test_a_completed_run_over_an_unaudited_write_is_caught_before_adr_111():
    w = write_run("owner-guard", "audit_insert_fails")  # fail-soft audit: the run goes on
    assert w.rows[0].status == "completed"
    assert not holds("no_unaudited_write_settles_successfully", w)
    assert "r1 turn 0 call 0" in explain("no_unaudited_write_settles_successfully", w)
    assert not holds("no_success_over_unrecorded_write", w)
    assert "after its unrecorded write" in explain("no_success_over_unrecorded_write", w)


def test_fail_closed_audit_dead_letters_instead_of_completing():
    w = write_run("current", "audit_insert_fails")
    assert (w.rows[0].status, w.rows[0].termination_reason) == ("failed", "not_retryable")
    assert holds("no_unaudited_write_settles_successfully", w)
    assert holds("no_success_over_unrecorded_write", w)


def test_an_ambiguous_commit_counts_as_audited():
    w = write_run("current", "ambiguous_commit")
    assert len(w.ledger) == 1 and any(e.kind == "tool" for e in w.events)
    assert holds("no_unaudited_write_settles_successfully", w)
    assert holds("no_success_over_unrecorded_write", w)


def test_an_idempotent_write_redone_later_with_its_event_may_complete():
    w = write_run("current", None)
    a = w.ledger[0]
    lost = replace(a, effect="idempotent_write", seg="w1/r1#0")  # an earlier, unaudited try
    later = replace(a, effect="idempotent_write")
    redone = replace(w, ledger=(lost, later))
    assert redone.rows[0].status == "completed"
    assert holds("no_unaudited_write_settles_successfully", redone)
    # the same history with a non-idempotent effect is not excused
    not_idem = replace(w, ledger=(replace(a, seg="w1/r1#0"), a))
    assert not holds("no_unaudited_write_settles_successfully", not_idem)


def test_an_idempotent_write_audited_before_a_late_unaudited_landing_may_complete():
    """spec/SPEC.md, the property's reading (ADR-112, RUNTIME 14.1, 16.8): the audited
    application may come first; a late landing of the same idempotent call is excused, the
    same without any audited application is not, and an unaudited non-idempotent one never."""
    w = write_run("current", None)
    a = replace(w.ledger[0], effect="idempotent_write")
    late = replace(a, seg="w1/r1#0")  # the first attempt's write, landing after the retry's
    assert holds("no_unaudited_write_settles_successfully", replace(w, ledger=(a, late)))
    alone = replace(w, ledger=(late,))
    assert not holds("no_unaudited_write_settles_successfully", alone)
    ni = w.ledger[0]
    assert not holds("no_unaudited_write_settles_successfully",
                     replace(w, ledger=(ni, replace(ni, seg="w1/r1#0"))))


def test_an_intent_event_records_its_application_and_no_other():
    """A write-ahead ``intent`` of the call by the segment that landed it (proposal
    write_intent_recorded) audits that application; an intent of another segment does not."""
    w = write_run("current", None)
    a = replace(w.ledger[0], seg="w1/r1#0")
    bare = replace(w, ledger=(a,), events=tuple(e for e in w.events if e.kind != "tool"))
    assert not holds("no_unaudited_write_settles_successfully", bare)
    intent = Event(a.run, 99, "intent", a.turn, a.call, a.tool, a.seg)
    assert holds("no_unaudited_write_settles_successfully",
                 replace(bare, events=bare.events + (intent,)))
    other = replace(intent, seg="w1/r1#1")
    assert not holds("no_unaudited_write_settles_successfully",
                     replace(bare, events=bare.events + (other,)))


def remote_write_landed(policy: str) -> World:
    """A queued run's unattended remote writer W has just landed (one crash in the budget)."""
    w = world(policy, tools=(REMOTE_WRITER,),
              runs=({"id": "r1", "plan": [{"tools": ["mcp_create_record"]},
                                         {"final": "completed"}]},),
              faults=("crash",), budget=1)
    w = enqueue_and_claim(w)
    w = until(w, "w1", "invoke")
    return do(w, "invoke", "w1")


def crash_during_write(policy: str) -> World:
    """16.8's first history: W lands, A dies before its tool boundary, the reaper acts."""
    w = remote_write_landed(policy)
    w = do(w, "crash", "w1", run="r1")
    w = at(w, w.rows[0].lease_expires + 1)
    return reap(w)


def test_an_interrupted_write_is_executed_again_without_the_fence():
    w = crash_during_write("adr-111")
    assert w.rows[0].status == "queued" and w.messages  # requeued and dispatched
    w = do(w, "run_queued", "w1", run="r1")
    w = do(w, "claim_queued", "w1")
    assert not holds("interrupted_non_idempotent_write_not_repeated", w)  # the T3 claim
    assert "attempt 2" in explain("interrupted_non_idempotent_write_not_repeated", w)
    w = until(w, "w1", "invoke")
    w = do(w, "invoke", "w1")
    assert not holds("non_idempotent_write_at_most_once", w)
    assert not holds("no_write_applied_twice_without_audit", w)
    assert "unaudited: w1/r1#1" in explain("no_write_applied_twice_without_audit", w)


def test_the_fence_dead_letters_the_interrupted_write():
    w = crash_during_write("adr-112")
    assert (w.rows[0].status, w.rows[0].termination_reason) == ("failed", "not_retryable")
    for name in ("interrupted_non_idempotent_write_not_repeated",
                 "non_idempotent_write_at_most_once", "no_write_applied_twice_without_audit"):
        assert holds(name, w), name


def test_a_twice_applied_write_with_both_events_is_audited_but_not_at_most_once():
    w = write_run("current", None)
    a = w.ledger[0]
    again = replace(a, seg="w2/r1#2")
    ev = next(e for e in w.events if e.kind == "tool")
    w2 = replace(w, ledger=(a, again), events=w.events + (replace(ev, seq=99, seg=again.seg),))
    assert holds("no_write_applied_twice_without_audit", w2)
    assert not holds("non_idempotent_write_at_most_once", w2)


def test_current_repeats_a_write_whose_segment_died_between_clear_and_insert():
    """A gap at current (RUNTIME 7.4): the fence is cleared BEFORE the step's event is
    stored, so a death between the two leaves a RUNNING row with no fence; the reaper
    requeues it and the non-idempotent write runs again, with no event for the first."""
    w = remote_write_landed("current")
    w = do(w, "find_run", "w1")
    w = do(w, "mark_pending_effect", "w1", effect="")  # the clear
    w = do(w, "crash", "w1", run="r1")  # before record_step
    w = at(w, w.rows[0].lease_expires + 1)
    w = reap(w)
    assert w.rows[0].status == "queued"
    w = do(w, "run_queued", "w1", run="r1")
    w = until(w, "w1", "invoke")
    w = do(w, "invoke", "w1")
    assert not holds("no_write_applied_twice_without_audit", w)
    assert not holds("interrupted_non_idempotent_write_not_repeated", w)


# =========================================================================================
# 16.1, 16.16, 16.15: terminal rows and cancellation
# =========================================================================================
def sync_run(policy: str, **kw: Any) -> World:
    return world(policy, runs=({"id": "r1", "entry": "interactive", "cancels": 1},), **kw)


def test_terminal_rows_absorb_a_late_cancel():
    w = sync_run("current")
    w = do(w, "start_run", "caller", run="r1")
    w = until(w, "caller:r1", "end")
    w = do(w, "cancel", "caller", run="r1")
    assert w.rows[0].status == "completed"
    assert holds("terminal_is_absorbing", w)


def test_without_the_terminal_guard_a_cancel_overwrites_a_completed_row():
    w = sync_run("current", switches={"terminal_guard": False})
    w = do(w, "start_run", "caller", run="r1")
    w = until(w, "caller:r1", "end")
    w = do(w, "cancel", "caller", run="r1")
    assert w.rows[0].status == "cancelled"
    assert not holds("terminal_is_absorbing", w)
    assert "overwrote" in explain("terminal_is_absorbing", w)


def suspend_after_cancel(policy: str) -> World:
    """16.16's history: the approval scan raised, a cancel commits, then the late suspend."""
    w = world(policy, tools=({"name": "needs_ok", "approval": True},),
              runs=({"id": "r1", "entry": "interactive", "cancels": 1,
                     "plan": [{"tools": ["needs_ok"]}]},))
    w = do(w, "start_run", "caller", run="r1")
    w = until(w, "caller:r1", "suspend")
    w = do(w, "cancel", "caller", run="r1")
    return until(w, "caller:r1", "end")


def test_a_late_suspend_resurrects_a_cancelled_run_before_adr_101():
    w = suspend_after_cancel("adr-092")
    assert w.rows[0].status == "waiting_for_approval"
    for name in ("no_resurrection_by_suspend", "terminal_is_absorbing", "cooperative_cancel"):
        assert not holds(name, w), name
    assert "waiting_for_approval" in explain("cooperative_cancel", w)


def test_suspend_requires_running_keeps_the_cancel():
    w = suspend_after_cancel("adr-101")
    assert w.rows[0].status == "cancelled"
    for name in ("no_resurrection_by_suspend", "terminal_is_absorbing", "cooperative_cancel"):
        assert holds(name, w), name


def test_the_probe_stops_a_cancelled_segment_at_its_next_boundary():
    w = sync_run("current")
    w = do(w, "start_run", "caller", run="r1")
    w = until(w, "caller:r1", "provider_call")
    w = do(w, "cancel", "caller", run="r1")
    w = until(w, "caller:r1", "end")
    assert w.outcomes[-1][3] == "CANCELLED"
    assert holds("cooperative_cancel", w)


def test_a_past_cancel_mark_violates_cooperative_cancel():
    w = sync_run("current").mark("past_cancel:r1")
    assert not holds("cooperative_cancel", w)


# =========================================================================================
# 16.2, 16.3, 16.5, 16.4, 16.17: claims, owners, zombies, the stream
# =========================================================================================
def zombie_and_new_owner(policy: str, plan: list[dict], **kw: Any) -> World:
    """A claims and hangs in its provider call; at lease+1 the reaper requeues; B claims.
    Each claim is followed by a second of work, so that a renewal changes the row (before
    commit 2029c781 a same-second renewal reports lost ownership)."""
    w = world(policy, runs=({"id": "r1", "plan": plan, "cancels": 1},), workers=2, **kw)
    w = at(enqueue_and_claim(w), 1)
    w = until(w, "w1", "provider_call")
    w = at(w, w.rows[0].lease_expires + 1)
    w = reap(w)
    w = do(w, "run_queued", "w2", run="r1")
    return at(do(w, "claim_queued", "w2"), w.clock + 1)


def test_claims_are_exclusive_even_with_a_zombie_beside_the_owner():
    w = zombie_and_new_owner("current", [{"final": "completed"}])
    assert {p.epoch for p in w.procs} == {1, 2}
    assert holds("exclusive_claim", w)
    p = w.proc("w2")
    doubled = w.set_proc(replace(p, epoch=1))
    assert not holds("exclusive_claim", doubled)
    assert "both hold claim 1" in explain("exclusive_claim", doubled)


def test_a_zombie_cannot_renew_but_a_foreign_renewal_is_caught():
    w = zombie_and_new_owner("current", [{"final": "completed"}])
    w = until(w, "w1", "end")  # A's boundary: its renewal fails
    assert w.outcomes[-1][3] == "LEASE_LOST"
    assert holds("owner_only_mutation", w) and holds("no_zombie_append", w)
    # a renewal matching the guard for a segment of an older claim is what 16.3 forbids
    row = w.rows[0]
    zombie = replace(w.proc("w2"), epoch=row.epoch - 1)
    bad, ok = model_store.renew_lease(w, 0, row.claimed_by, zombie)
    assert ok and not holds("owner_only_mutation", bad)


def test_a_zombie_settle_kills_the_new_owners_run_before_commit_3c1f5699():
    plan = [{"fail": "auth"}]
    w = zombie_and_new_owner("adr-104", plan)
    w = until(w, "w1", "end")  # A's call fails 401; the unguarded dead-letter matches
    assert (w.rows[0].status, w.rows[0].termination_reason) == ("failed", "not_retryable")
    assert not holds("no_zombie_settle", w)
    w = zombie_and_new_owner("owner-guard", plan)
    w = until(w, "w1", "end")
    assert w.rows[0].status == "running" and holds("no_zombie_settle", w)


def test_persist_before_renew_lets_a_zombie_append_and_breaks_stream_order():
    plan = [{"final": "completed"}]
    w = zombie_and_new_owner("adr-104-renew_before_persist", plan)
    w = until(w, "w2", "provider_call")  # B resolved max+1 and stored its request
    w = until(w, "w1", "end")  # A persists its llm step, then fails to renew
    assert not holds("no_zombie_append", w)
    assert not holds("stream_order", w)
    assert "w1/r1#1" in explain("stream_order", w)
    w = zombie_and_new_owner("adr-104", plan)
    w = until(w, "w2", "provider_call")
    w = until(w, "w1", "end")
    assert holds("no_zombie_append", w) and holds("stream_order", w)


def test_current_lets_a_zombie_append_through_the_cancellation_probe():
    """A gap at current (RUNTIME 7.2 step 3): the probe path persists the step without a
    renewal, so a zombie whose run was cancelled appends beside the new owner's events."""
    w = zombie_and_new_owner("current", [{"final": "completed"}])
    w = until(w, "w2", "provider_call")
    w = do(w, "cancel", "caller", run="r1")
    w = until(w, "w1", "end")
    assert w.outcomes[-1][3] == "CANCELLED"
    assert not holds("no_zombie_append", w)
    assert not holds("stream_order", w)


def test_an_ambiguous_commit_reuses_a_sequence_number():
    """The handle advances only when the insert reports success (RUNTIME 3.2), so an
    insert that committed but reported failure is followed by a second event at its number."""
    w = world("current", faults=("ambiguous_commit",), budget=1)
    w = enqueue_and_claim(w)
    w = do(w, "max_sequence", "w1")
    w = until(w, "w1", "record_step")
    w = do(w, "record_step", "w1", fault="ambiguous_commit")
    assert holds("stream_order", w)
    w = until(w, "w1", "end")
    assert [e.seq for e in w.events][:2] == [0, 0]
    assert not holds("stream_order", w)
    assert "within its segment" in explain("stream_order", w)


# =========================================================================================
# 16.6, 16.7: attempts and retry classes
# =========================================================================================
def test_attempts_stay_bounded_through_retries_and_beyond_the_bound_are_caught():
    w = world("current", runs=({"id": "r1", "plan": [{"fail": "serverError"}]},))
    w = do(w, "enqueue_run", "caller", run="r1")
    w = do(w, "dispatch", "enqueue:r1")
    while w.rows[0].status not in ("failed", "completed"):
        w = at(w, max(m.not_before for m in w.messages)) if w.messages[0].not_before > w.clock else w
        w = do(w, "run_queued", "w1", run="r1")
        w = until(w, "w1", "end")
    assert (w.rows[0].attempts, w.rows[0].termination_reason) == (4, "retries_exhausted")
    assert holds("bounded_attempts", w)
    over = w.set_row(0, replace(w.rows[0], attempts=5))
    assert not holds("bounded_attempts", over)
    assert "5 times" in explain("bounded_attempts", over)


def test_a_non_retryable_failure_is_dead_lettered_and_a_requeue_of_one_is_caught():
    w = world("current", runs=({"id": "r1", "plan": [{"fail": "auth"}]},))
    w = enqueue_and_claim(w)
    w = until(w, "w1", "end")
    assert (w.rows[0].termination_reason, w.rows[0].requeue_count) == ("not_retryable", 0)
    assert holds("no_retry_of_non_retryable", w)
    # recovery's requeue fired for a failure of class auth (a recovery that skipped branch 2)
    w = world("current", runs=({"id": "r1", "plan": [{"fail": "auth"}]},))
    w = enqueue_and_claim(w)
    w = until(w, "w1", "provider_call")
    p = w.proc("w1")
    w = w.set_proc(replace(p, pc="requeue", eclass="auth", error="ProviderError"))
    w = do(w, "requeue", "w1")
    assert not holds("no_retry_of_non_retryable", w)


# =========================================================================================
# 16.9, 16.11: the fence and the recorded approval
# =========================================================================================
def approved_write(policy: str, record_fault: bool = False) -> World:
    w = world(policy, tools=(APPROVED_DRAFT,),
              runs=({"id": "r1", "entry": "interactive", "decisions": ["approve"],
                     "plan": [{"tools": ["create_page_draft"]}, {"final": "completed"}]},),
              faults=("audit_insert_fails",), budget=1)
    w = do(w, "start_run", "caller", run="r1")
    w = until(w, "caller:r1", "end")
    assert w.rows[0].status == "waiting_for_approval"
    w = do(w, "approve", "caller", run="r1")
    w = until(w, "resume:r1#1", "record_approval")
    w = do(w, "record_approval", "resume:r1#1",
           **({"fault": "audit_insert_fails"} if record_fault else {}))
    return until(w, "resume:r1#1", "end")


def _approved_write_landed(policy: str) -> World:
    """A synchronous run suspends for its builtin writer; the approved resume invokes it."""
    w = world(policy, tools=(PAGE_DRAFT,),
              runs=({"id": "r1", "entry": "interactive", "decisions": ["approve"],
                     "plan": [{"tools": ["create_page_draft"]}, {"final": "completed"}]},))
    w = do(w, "start_run", "caller", run="r1")
    w = until(w, "caller:r1", "end")
    w = do(w, "approve", "caller", run="r1")
    w = until(w, "resume:r1#1", "invoke")
    return do(w, "invoke", "resume:r1#1")


def test_shipped_writes_ran_unfenced_in_resume_segments_before_adr_141():
    w = _approved_write_landed("adr-134")
    assert not holds("writes_only_under_fence", w)  # ADR-135: no lease, no stamp
    assert "unfenced" in explain("writes_only_under_fence", w)


def test_every_segment_writes_under_its_stamp_at_current():
    w = _approved_write_landed("current")
    assert w.rows[0].pending_effect == "non_idempotent_write"
    assert holds("writes_only_under_fence", w)
    w = until(w, "resume:r1#1", "end")
    assert w.rows[0].status == "completed" and holds("writes_only_under_fence", w)


def test_a_worker_write_without_the_hook_is_unstamped_before_adr_112():
    w = world("adr-111", tools=(REMOTE_WRITER,),
              runs=({"id": "r1", "plan": [{"tools": ["mcp_create_record"]}]},))
    w = enqueue_and_claim(w)
    w = until(w, "w1", "invoke")
    w = do(w, "invoke", "w1")
    assert not holds("writes_only_under_fence", w)
    assert "unfenced" in explain("writes_only_under_fence", w)


def test_a_write_with_no_persisted_run_is_caught():
    w = world("current")
    a = Application(0, 0, 0, "create_page_draft", "non_idempotent_write", "sync:r1")
    assert not holds("writes_only_under_fence", replace(w, ledger=(a,)))


def test_an_approved_write_turn_runs_only_after_its_approval_event():
    w = approved_write("current")
    assert len(w.ledger) == 1 and holds("no_write_without_recorded_approval", w)
    w = approved_write("current", record_fault=True)  # gate 3 releases the run
    assert w.ledger == () and w.rows[0].status == "waiting_for_approval"
    assert holds("no_write_without_recorded_approval", w)


def test_before_adr_132_an_unrecorded_approval_still_executes_the_write():
    w = approved_write("adr-122", record_fault=True)
    assert len(w.ledger) == 1
    assert not holds("no_write_without_recorded_approval", w)
    assert "no approval event" in explain("no_write_without_recorded_approval", w)


# =========================================================================================
# 16.14: race-safe staleness
# =========================================================================================
def renewed_after_select() -> World:
    """The reaper SELECTs A's stale row; A's slow call returns and A renews before the
    reaper's per-row statement."""
    w = world("current", runs=({"id": "r1", "plan": [{"final": "completed"}]},))
    w = enqueue_and_claim(w)
    w = until(w, "w1", "provider_call")
    w = at(w, w.rows[0].lease_expires + 1)
    w = do(w, "find_stale_running", "reaper")
    assert w.reaper("reaper") is not None and w.reaper("reaper").pc == "row"
    w = do(w, "provider_call", "w1")
    w = until(w, "w1", "record_step")  # the llm boundary renewed
    assert w.rows[0].lease_expires > w.reaper("reaper").now
    return w


def test_a_renewal_after_the_select_wins_over_the_reaper():
    w = renewed_after_select()
    assert holds("race_safe_staleness", w)
    w = until(w, "reaper", "end")
    assert w.rows[0].status == "running"


@pytest.mark.skipif(
    "failclosed.model.runtime" in build_info().compiled,
    reason="mypyc binds model.runtime's call of model.store.requeue_stale when it compiles "
           "them: a monkeypatched store function is not seen (the mutant "
           "mutant_reaper_trusts_snapshot tests the same catch on every build)")
def test_a_reaper_trusting_its_select_is_caught(monkeypatch: pytest.MonkeyPatch):
    w = renewed_after_select()

    def requeue_on_select(w: World, i: int, now: int):  # the stale check left out
        return w.set_row(i, model_store._requeued(w, w.rows[i])), True

    monkeypatch.setattr(model_store, "requeue_stale", requeue_on_select)
    assert not holds("race_safe_staleness", w)
    assert "renewed or moved since its SELECT" in explain("race_safe_staleness", w)


# =========================================================================================
# liveness: goals and fairness
# =========================================================================================
def test_liveness_goals_on_driven_worlds():
    w = world("current")
    w = do(w, "enqueue_run", "caller", run="r1")
    assert not LIVENESS["no_orphan_queued_run"].goal(w)
    assert "QUEUED with 0 pending" in explain("no_orphan_queued_run", w)
    w = do(w, "dispatch", "enqueue:r1")
    w = do(w, "run_queued", "w1", run="r1")
    w = do(w, "claim_queued", "w1")
    assert LIVENESS["no_orphan_queued_run"].goal(w)
    assert LIVENESS["leased_runs_leave_running"].goal(w)  # its owner is alive
    assert not LIVENESS["every_run_terminates"].goal(w)
    dead = replace(w, procs=())
    assert not LIVENESS["leased_runs_leave_running"].goal(dead)
    assert "no live owner" in explain("leased_runs_leave_running", dead)
    w = until(w, "w1", "end")
    assert all(p.goal(w) for p in LIVENESS.values())


def test_fairness_is_derived_per_actor_instance_from_the_table_and_gives_faults_none():
    w = world("current", runs=({"id": "r1", "decisions": ["approve"]},
                               {"id": "r2", "entry": "interactive"}), workers=2)
    fair = fairness(w.config)
    # one class per instance of each fair kind, in the table's order, as the kind declares
    expected = [(a.kind, inst, a.fairness) for a in steps.ACTORS.values()
                for inst in a.fair_instances(w.config)]
    assert [(f.kind, f.name, f.strength) for f in fair] == expected
    assert [f.name for f in fair if f.kind == "process"] == [
        "w1", "w2", "enqueue:r1", "resume:r1#1", "caller:r2"]
    assert {f.kind for f in fair} == {"process", "worker", "reaper", "clock"}
    assert all(f.strength is Fair.WEAK for f in fair)  # no shipped kind is strongly fair
    t_crash = T("crash", "w1", run="r1")
    t_fault = T("record_step", "w1", run="r1", step="llm", fault="audit_insert_fails")
    t_step = T("record_step", "w1", run="r1", step="llm")
    assert not any(f.applies(t_crash) or f.applies(t_fault) for f in fair)
    assert [f.name for f in fair if f.applies(t_step)] == ["w1"]
    delivery = T("run_queued", "w2", run="r1", not_before=0)  # a free worker takes a message
    assert [f.kind for f in fair if f.applies(delivery)] == ["worker"]
    nested = T("run_queued", "w2", run="r1")  # sync: the pick-up nested in w2's own dispatch
    assert [(f.kind, f.name) for f in fair if f.applies(nested)] == [("process", "w2"),
                                                                     ("worker", "worker")]
    assert [f.kind for f in fair if f.applies(T("find_stale_running", "reaper"))] == ["reaper"]
    assert not any(f.applies(T("cancel", "caller", run="r1")) for f in fair)
    assert any(f.applies(T("advance_time", "clock", to=5))
               for f in LIVENESS["every_run_terminates"].classes(w.config))
    assert LIVENESS["every_run_terminates"].under == (
        "WF(process, worker, reaper, clock), unfair: caller, bus, operator")


def test_a_kind_declared_fair_must_say_which_steps_its_fairness_covers():
    from failclosed.model import vocab

    with vocab.extended([(vocab.ActorKind, "judge")]):
        with pytest.raises(ValueError, match="needs takes="):
            steps.declare_actor("judge", place="-", answers=lambda w, n: False,
                                moves=lambda w, n, o, s: [], fire=lambda w, t: w,
                                fairness=Fair.STRONG)
        assert "judge" not in steps.ACTORS


def test_at_bound_only_when_the_horizon_stops_a_waiting_clock():
    data_w = world("current")
    assert not at_bound(data_w)
    w = load_world({"model": {"horizon": 10}, "runs": [{"id": "r1"}]})
    w = enqueue_and_claim(w)
    w = at(w, 10)
    assert at_bound(w)


# =========================================================================================
# random walks at current
# =========================================================================================
SMALL = {
    "policy": "current",
    "model": {"workers": 2, "faults": ["crash", "store_error", "audit_insert_fails"],
              "fault_budget": 2, "provider_faults": ["serverError"], "horizon": 4000},
    "tools": [REMOTE_WRITER, PAGE_META],
    "runs": [
        {"id": "r1", "plan": [{"tools": ["mcp_create_record"]}, {"final": "completed"}],
         "cancels": 1},
        {"id": "r2", "entry": "interactive", "decisions": ["approve"],
         "plan": [{"tools": ["update_page_metadata"]}, {"final": "completed"}]},
    ],
}
WALKED = ("terminal_is_absorbing", "bounded_attempts", "exclusive_claim")


@settings(derandomize=True, max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=120))
def test_random_walks_at_current_keep_terminal_attempts_and_claims(choices: list[int]):
    w = load_world(SMALL)
    for c in choices:
        en = enabled(w)
        if not en:
            break
        w = apply(w, en[c % len(en)])
        for name in WALKED:
            assert SAFETY[name].check(w), (name, explain(name, w))


def test_explain_names_the_event_for_a_hand_built_duplicate():
    w = world("current")
    e = Event(0, 0, "request", 0, -1, "", "w1/r1#1")
    dup = replace(w, events=(e, replace(e, seg="w2/r1#2")))
    assert not holds("stream_order", dup)
    assert "after w1/r1#1" in explain("stream_order", dup)


@pytest.mark.parametrize("policy", ["current", "adr-092", "adr-111"])
@pytest.mark.parametrize("part", ["small-zombie", "small-interactive", "small-history-zombie"])
def test_each_property_and_witness_reads_only_the_fields_it_declares(part, policy):
    # The checker skips a successor whose declared fields are the parent's very objects
    # (spec.engine.explore, ``reads``). That is sound only if the predicate is a function of
    # those fields: on every explored edge that leaves them untouched, parent and child must
    # get the same verdict. A field left out of a declaration shows up here as an edge where
    # the verdict changes.
    from failclosed.model.config import initial_world
    from failclosed.model.runtime import successors
    from failclosed.spec import engine
    from failclosed.spec.checker import CONFIG_DIR, WITNESSES, load_config, parse_config

    _, (cfg,) = load_config(CONFIG_DIR / f"{part}.toml")
    spec, budget = parse_config(cfg.data, policy)
    ex = engine.explore([initial_world(spec, budget)], successors, invariants={},
                        keep_graph=True, keep_worlds=True)
    preds = [(n, p.check, p.reads) for n, p in SAFETY.items() if p.reads]
    preds += [(n, x.holds, x.reads) for n, x in WITNESSES.items()]
    assert len(preds) >= 16 + len(WITNESSES)
    verdict = {n: [bool(f(w)) for w in ex.worlds] for n, f, _ in preds}
    edges = list(zip(ex.edges_src, ex.edges_dst, strict=True))
    for name, _, reads in preds:
        v = verdict[name]
        for s, d in edges:
            a, b = ex.worlds[s], ex.worlds[d]
            if all(getattr(a, f) is getattr(b, f) for f in reads):
                assert v[s] == v[d], (name, reads, s, d)
    # and the skip changes nothing the checker reports
    names = {n: p.check for n, p in SAFETY.items()}
    reads = {n: p.reads for n, p in SAFETY.items() if p.reads}
    plain = engine.explore([initial_world(spec, budget)], successors, invariants=names)
    fast = engine.explore([initial_world(spec, budget)], successors, invariants=names,
                          reads=reads)
    assert {n: f.trace for n, f in plain.violations.items()} == {
        n: f.trace for n, f in fast.violations.items()
    }
