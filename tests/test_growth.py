"""A switch that removes a bound says so (docs/CHANGING.md, "Add a switch").

A user's switch stopped counting retryable requeues, removing the bound that keeps the state
space finite, and one part of a configuration ran for many minutes with no hint. The checker
now measures a varied policy (``preset+switch``) against the preset it varies: a part past
``GROWTH`` times the preset's states gets one line naming the growth and how to bound it.

The fixture makes a switch remove a bound for good: under it the operator may remove tools
without end (each removal a new tool name, so a new state), and ``--max-states`` cuts the
search so the test is quick.
"""

from __future__ import annotations

import dataclasses

import pytest
from failclosed.cli.app import main
from failclosed.model import PRESETS, steps
from failclosed.model.transition import Transition
from failclosed.model.vocab import ActorKind
from failclosed.spec.checker import CONFIG_DIR, GROWTH, check

from failclosed import build_info

TINY = CONFIG_DIR / "tiny.toml"
SWITCH = "mutant_requeue_keeps_count"  # the switch the fixture makes unbounded
PROPERTY = "bounded_attempts"

needs_pure = pytest.mark.skipif("failclosed.model.runtime" in build_info().compiled,
                                reason="patches a model function, which a compiled build calls "
                                "natively")


@pytest.fixture
def unbounded(monkeypatch):
    """Under a varied policy (``SWITCH`` on, or any policy that is not a preset as it is) the
    operator removes a new tool at every step, without end."""
    real = steps.ACTORS[ActorKind.OPERATOR]

    def moves(w, name, one_order, slots):
        if not getattr(w.config.policy, SWITCH) and w.config.policy.name in PRESETS:
            return real.moves(w, name, one_order, slots)
        return [Transition.make("remove_tool", "operator", tool=f"gone{len(w.removed)}")]

    monkeypatch.setitem(steps.ACTORS, ActorKind.OPERATOR, dataclasses.replace(real, moves=moves))


def _preset_states() -> int:
    return check("current", TINY, [PROPERTY], witnesses=False, coverage=False).states


@needs_pure
def test_a_switch_that_removes_a_bound_gets_a_line_naming_the_growth(unbounded, capsys):
    cut = 2 * GROWTH * _preset_states()
    rc = main(["check", "--policy", f"current+{SWITCH}", "--config", str(TINY), "--property",
               PROPERTY, "--max-states", str(cut), "--jobs", "1"])
    assert rc in (0, 1)
    out, err = capsys.readouterr()
    text = " ".join(out.split())  # the line is wrapped to the terminal's width
    assert text.count("growth: part tiny") == 1
    line = text[text.index("growth: part tiny"):]
    assert f"under current+{SWITCH} has {cut:,} states" in line
    assert f"over {GROWTH}x the {_preset_states():,} of current" in line
    for how in ("--max-states", "horizon", "fault_budget", "MAX_REQUEUES"):
        assert how in line
    assert "growth: part tiny" in err  # said as soon as it was measured, too


@needs_pure
def test_the_growth_is_said_while_the_search_still_runs(unbounded):
    said: list[str] = []
    cut = 4 * GROWTH * _preset_states()
    res = check(f"current+{SWITCH}", TINY, [PROPERTY], witnesses=False, coverage=False,
                max_states=cut, on_note=said.append)
    assert len(said) == 1 and res.growth == said
    assert "is still growing" in said[0]  # before --max-states cut it
    assert int(said[0].split(" has ")[1].split(" states")[0].replace(",", "")) < cut


@needs_pure
def test_the_preset_itself_gets_no_growth_line(unbounded):
    assert check("current", TINY, [PROPERTY], witnesses=False, coverage=False,
                 on_note=pytest.fail).growth == []


def test_a_switch_that_keeps_the_space_finite_gets_no_growth_line():
    # without the fixture the switch keeps tiny finite (its fault budget bounds the requeues)
    res = check(f"current+{SWITCH}", TINY, [PROPERTY], witnesses=False, coverage=False,
                on_note=pytest.fail)
    assert res.complete and res.growth == []


# every form of a varied policy the CLI accepts: a switch added or taken away after the
# preset's name (one with a dash in it too, and both at once), or a [switches] table in the
# configuration file (the policy is then named ``preset+switch`` / ``preset-switch``)
SMALL = ('[[runs]]\nid = "r1"\nentry = "interactive"\nplan = [{ final = "completed" }]\n')


@needs_pure
@pytest.mark.parametrize(("policy", "switches", "named", "preset"), [
    (f"current+{SWITCH}", "", f"current+{SWITCH}", "current"),
    ("current-renew_before_persist", "", "current-renew_before_persist", "current"),
    ("adr-112-write_fence", "", "adr-112-write_fence", "adr-112"),
    (f"current-renew_before_persist+{SWITCH}", "", f"current-renew_before_persist+{SWITCH}",
     "current"),
    ("current", "[switches]\nrenew_before_persist = false\n", "current-renew_before_persist",
     "current"),
    ("adr-111", "[switches]\nwrite_fence = true\n", "adr-111+write_fence", "adr-111"),
])
def test_every_form_of_a_varied_policy_gets_the_growth_line(unbounded, capsys, tmp_path,
                                                            policy, switches, named, preset):
    plain = tmp_path / "plain.toml"  # the preset's own space: the file without [switches]
    plain.write_text(SMALL)
    base = check(preset, plain, [PROPERTY], witnesses=False, coverage=False).states
    cfg = tmp_path / "small.toml"
    cfg.write_text(switches + SMALL)
    cut = 2 * GROWTH * base
    rc = main(["check", "--policy", policy, "--config", str(cfg), "--property", PROPERTY,
               "--max-states", str(cut), "--jobs", "1"])
    assert rc == 3  # nothing violated, the search cut by --max-states (cli/exits.py)
    text = " ".join(capsys.readouterr().out.split())
    assert text.count("growth: part small") == 1, text
    line = text[text.index("growth: part small"):]
    assert f"under {named} has {cut:,} states" in line
    assert f"over {GROWTH}x the {base:,} of {preset}" in line
