"""docs/CHANGING.md's recipe "Add a liveness property and its fairness", made in a fixture.

A user added a liveness property (every run waiting for approval is eventually resumed or
denied) and the checker reported it violated on small-approval: the lasso is the reaper's idle
tick repeating while no caller ever decides. Callers have no fairness (the actor table says
so), so that lasso is a fair path of the spec as declared. The property states the assumption
it needs (``@leads_to(..., assumes=...)``: the caller eventually decides) and is then checked
under it; the verdict line says which fairness each check ran under.
"""

from __future__ import annotations

from failclosed.cli.app import main
from failclosed.model import steps
from failclosed.model.state import WAITING_FOR_APPROVAL, World
from failclosed.model.steps import Fair
from failclosed.model.transition import Transition
from failclosed.spec import properties
from failclosed.spec.checker import CONFIG_DIR, check

APPROVAL = CONFIG_DIR / "small-approval.toml"

# The caller's decisions: the transitions a caller fires that carry a refusal check of their
# own (approve, deny, submit_input), read from the transition table.
DECIDES = frozenset(n for n, o in steps.OTHER_TRANSITIONS.items()
                    if o.actor == "caller" and "configured" in o.args)


def _decides(t: Transition) -> bool:
    return t.name in DECIDES and t.fault is None


CALLER_DECIDES = properties.Fairness(
    "caller decides", _decides, "SF(caller decides): a decision the caller can make is made",
    Fair.STRONG, "caller")


def _decided(w: World) -> bool:
    """No run waits for approval while its caller still has a decision to make."""
    return all(row is None or row.status != WAITING_FOR_APPROVAL
               or w.decisions[i] >= len(w.config.runs[i].decisions)
               for i, row in enumerate(w.rows))


def declare_approval_liveness(name: str, assumes: tuple[properties.Fairness, ...]) -> None:
    """The recipe: the name in the vocabulary, the goal declared by ``@leads_to`` with the
    fairness it assumes."""
    from failclosed.model import vocab
    from failclosed.spec.vocab import PropertyName

    vocab.extend(PropertyName, name)  # a real property adds the member to PropertyName
    properties.leads_to(
        name, "true ~> ∀r: row(r).status = waiting_for_approval ⇒ decisions(r) are used up",
        source="(the recipe's property); RUNTIME 12.2", assumes=assumes,
        describe=lambda w: "a run waits for a decision")(_decided)


def test_without_the_assumption_the_reapers_idle_tick_is_a_fair_lasso(restore_tables):
    declare_approval_liveness("approval_decided", ())
    r = check("current", APPROVAL, ["approval_decided"], witnesses=False, coverage=False)
    pr = r.properties["approval_decided"]
    assert not pr.holds and pr.liveness_kind == "fair_cycle"
    cycle = [t for t, _ in pr.trace[pr.cycle_start:]]
    assert cycle and {t.actor for t in cycle} == {steps.REAPER}  # only the reaper acts
    entry = pr.trace[pr.cycle_start - 1][1]
    assert not _decided(entry)  # a decision was possible all along the cycle
    assert "unfair: caller" in pr.under and "assumed" not in pr.under


def test_with_the_assumption_it_holds_and_the_verdict_line_says_under_what(restore_tables,
                                                                           capsys):
    declare_approval_liveness("approval_decided", (CALLER_DECIDES,))
    assert main(["check", "--policy", "current", "--config", str(APPROVAL),
                 "--property", "approval_decided", "--jobs", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    line = next(x for x in out if "approval_decided" in x)
    # issue 38 item 14: the fairness is a legend, said once, not on each verdict line
    assert line.split()[1:3] == ["[A]", "holds"]
    text = " ".join(" ".join(out).split())
    legend = text[text.index("[A] liveness checked under "):]
    assert "unfair: caller, bus, operator + assumed SF(caller decides)" in legend


def test_the_assumption_leaves_every_other_verdict_alone(restore_tables):
    tiny = CONFIG_DIR / "tiny.toml"
    before = check("current", tiny, list(properties.LIVENESS), witnesses=False, coverage=False)
    declare_approval_liveness("approval_decided", (CALLER_DECIDES,))
    after = check("current", tiny, None, witnesses=False, coverage=False)
    assert after.properties["approval_decided"].holds  # tiny never waits for approval
    cells = after.to_json()["properties"]
    assert cells["approval_decided"]["under"].endswith(" + assumed SF(caller decides)")
    assert "under" not in cells[next(iter(properties.SAFETY))]  # safety has no fairness
    assert {n: (r.holds, r.trace_length, r.under) for n, r in after.properties.items()
            if n in before.properties} == {
        n: (r.holds, r.trace_length, r.under) for n, r in before.properties.items()}
