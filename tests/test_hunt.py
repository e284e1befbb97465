"""The shrinking search over configurations (spec/hunt.py, ``failclosed hunt``).

* On each mutant preset (spec/mutants.py: a guard the runtime has always had, removed), the
  hunt finds the mutant's violation from the dimension table alone, and the configuration it
  shrank to still violates it (checked again here, independently of the hunt).
* Deterministic by its seed; its reach counts what it checked; bad input is one line.

The default suite hunts two mutants with small budgets; ``-m slow`` hunts every one.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.cli.app import main  # noqa: E402
from failclosed.spec import dimensions as D  # noqa: E402
from failclosed.spec.checker import ConfigPart, check  # noqa: E402
from failclosed.spec.hunt import Outside, describe, hunt  # noqa: E402
from failclosed.spec.mutants import MUTANT_SWITCHES  # noqa: E402
from failclosed.spec.scope import load_scope  # noqa: E402

MAX_STATES = 1500  # per configuration: a mutant's violation is short


@functools.cache  # one hunt per mutant and budget for the whole module
def _hunt_mutant(switch: str, examples: int, seed: int = 0, max_states: int = MAX_STATES):
    prop = MUTANT_SWITCHES[switch][0]
    policy = f"current+{switch}"
    res = hunt([policy], [prop], seed=seed, examples=examples, max_states=max_states)
    return res, policy, prop


def _assert_found_and_still_violates(switch: str, examples: int,
                                     max_states: int = MAX_STATES) -> None:
    res, policy, prop = _hunt_mutant(switch, examples, max_states=max_states)
    assert [(f.policy, f.property) for f in res.found] == [(policy, prop)], (
        f"no violation of {prop} under {policy} in {res.drawn} drawn configurations")
    f = res.found[0]
    again = check(policy, ConfigPart("shrunk", "", f.data), [prop], witnesses=False,
                  coverage=False, max_states=max_states)
    assert not again.properties[prop].holds, describe(f.point)
    assert again.properties[prop].trace_length == f.length
    # the same configuration under current (the guard in place) holds it or fails it no
    # shorter: the mutant is what the hunt found
    base = check("current", ConfigPart("shrunk", "", f.data), [prop], witnesses=False,
                 coverage=False, max_states=max_states).properties[prop]
    assert base.holds or base.trace_length <= f.length


@pytest.mark.parametrize("switch", ["mutant_claim_ignores_status", "mutant_requeue_keeps_count"])
def test_hunt_finds_a_mutant_and_the_shrunk_configuration_still_violates(switch):
    _assert_found_and_still_violates(switch, 60)


@pytest.mark.slow
@pytest.mark.parametrize("switch", sorted(MUTANT_SWITCHES))
def test_hunt_finds_every_mutant(switch):
    _assert_found_and_still_violates(switch, 2000, max_states=4000)


def test_shrinking_reaches_a_minimal_configuration():
    """The shrunk configuration differs from the base in few dimensions: the claim race of
    the mutant needs a run resumed twice (a gated call, two approvals), and nothing else."""
    res, _, _ = _hunt_mutant("mutant_claim_ignores_status", 60)
    f = res.found[0]
    assert len(f.point["runs"]) == 1 and len(f.point["tools"]) == 1
    assert len(describe(f.point).split()) <= 3, describe(f.point)


def test_same_seed_same_hunt_and_reach_counts():
    a = hunt(["current"], ["no_zombie_settle"], seed=3, examples=12, max_states=1500)
    b = hunt(["current"], ["no_zombie_settle"], seed=3, examples=12, max_states=1500)
    assert (a.drawn, a.checked, a.states, a.truncated) == (b.drawn, b.checked, b.states, b.truncated)
    assert [(f.policy, f.property, f.data) for f in a.found] == [
        (f.policy, f.property, f.data) for f in b.found]
    assert a.values == b.values and a.pairs == b.pairs
    reach = {x["dimension"]: x for x in a.reach()}
    assert set(reach) == {d.name for d in D.DIMENSIONS}
    assert all(1 <= x["values"] <= x["of_values"] for x in reach.values())


def test_outside_skips_the_members_of_a_scope():
    quick = load_scope("quick")
    out = Outside(quick)
    assert not any(out(m.data) for m in quick.members)
    assert Outside(None)(quick.members[0].data)
    # a member's tool renamed (not a builtin writer) is still the member
    m = next(m for m in quick.members if m.data["tools"][0]["name"] == "lookup_page")
    renamed = json.loads(json.dumps(m.data).replace("lookup_page", "some_reader"))
    assert not out(renamed)


@pytest.mark.parametrize("argv, field", [
    (["--minutes", "0"], "--minutes"),
    (["--examples", "0"], "--examples"),
    (["--property", "no_such"], "no_such"),
    (["--outside", "nowhere"], "nowhere"),
    (["--policy", "nopolicy"], "nopolicy"),
])
def test_hunt_bad_input_is_one_line(capsys, argv, field):
    assert main(["hunt", "--quiet", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and field in err[0] and "Traceback" not in err[0]


def test_hunt_command_writes_the_minimal_counterexample(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["hunt", "--quiet", "--policy", "current+mutant_claim_ignores_status",
               "--property", "exclusive_claim", "--examples", "60", "--jobs", "1",
               "--max-states", str(MAX_STATES), "--outside", "none", "--no-cache",
               "--out", str(out), "--json", str(tmp_path / "h.json")])
    assert rc == 1
    text = capsys.readouterr().out
    assert "each shrunk to a minimal configuration" in text and "holds" not in text.split()
    d = json.loads((tmp_path / "h.json").read_text())
    assert d["exit_code"] == 1 and d["found"][0]["property"] == "exclusive_claim"
    assert d["checked"] >= 1 and d["states"] > 0
    names = sorted(p.name for p in out.iterdir())
    assert len(names) == 3 and any(n.endswith(".toml") for n in names)
    # the scenario it wrote replays to the same violation
    scen = next(p for p in out.iterdir() if p.suffix == ".toml")
    assert main(["replay", str(scen), "--quiet"]) in (0, 1)


def test_hunt_that_finds_nothing_says_so_with_its_reach(capsys):
    rc = main(["hunt", "--quiet", "--policy", "current", "--property",
               "exclusive_claim", "--examples", "6", "--jobs", "1", "--max-states", "800",
               "--no-cache", "--seed", "1"])
    out = capsys.readouterr().out
    last = out.strip().splitlines()[-1]
    assert last.startswith("no violation in ") and "drawn configuration" in last
    assert rc in (0, 3)
