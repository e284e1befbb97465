"""Footprints (model/footprint.py): what each transition may read or write, derived from the
step table. Random walks over every member of ``quick`` and a few named configurations (each
under its own policy, ``proposed`` and a proposal's switch), and every edge of three small
spaces, fire every enabled transition and check it changes nothing outside its footprint (a
World field, another run's row or inputs, another process); together they fire every
declaration of the step table. A declaration made too narrow fails the check. Partial-order reduction (spec/por.py) reads
these footprints: tests/test_por.py."""

from __future__ import annotations

import random
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.model import footprint as fp  # noqa: E402
from failclosed.model import steps  # noqa: E402
from failclosed.model.config import initial_world, parse_config  # noqa: E402
from failclosed.model.runtime import successors  # noqa: E402
from failclosed.model.state import World  # noqa: E402
from failclosed.model.transition import Transition  # noqa: E402
from failclosed.model.vocab import Label, Touch, TransitionName  # noqa: E402
from failclosed.spec.checker import load_config  # noqa: E402
from failclosed.spec.mutants import MUTANT_CONFIG_DIR  # noqa: E402
from failclosed.spec.scope import load_scope  # noqa: E402

WORLD_FIELDS = tuple(f for f in World.__slots__ if f != "config")


# --------------------------------------------------------------------------------------------
# footprints
# --------------------------------------------------------------------------------------------
def outside(w: World, t: Transition, w2: World) -> list[str]:
    """What firing ``t`` in ``w`` (giving ``w2``) changed outside ``t``'s footprint."""
    foot = fp.footprint(w, t)
    allowed = fp.fields(foot)
    out = [f for f in WORLD_FIELDS
           if f not in allowed and getattr(w2, f) is not getattr(w, f)
           and getattr(w2, f) != getattr(w, f)]
    for part in (Touch.ROW, Touch.RUN_INPUTS):
        runs = {i for k, i in foot if k == part}
        if not runs or fp.ANY in runs:
            continue
        for f in fp.FIELDS[part]:
            out += [f"{f}[{j}]" for j, (a, b) in enumerate(zip(getattr(w, f), getattr(w2, f),
                                                              strict=True))
                    if j not in runs and a != b]
    if not any(k == Touch.PROCS for k, _ in foot):
        before = {p.name: p for p in w.procs}
        after = {p.name: p for p in w2.procs}
        if set(before) != set(after):
            out.append("procs (which exist)")
        out += [f"procs[{n}]" for n, p in before.items()
                if n != t.actor and n in after and after[n] != p]
    return out


# None: the part's own; the last reaches the candidate proposals' own step (the write-ahead
# intent) that no preset takes
POLICIES = (None, "proposed", "current+fence_cleared_after_audit",
            "current+write_intent_recorded+decision_kept_across_retry")


def _configs() -> list[tuple[str, dict]]:
    """Every quick member and the named configurations that reach the steps quick does not
    (recovery, resume, input, the reaper's fail-closed dispatch); the access mutants' bound
    (a run with requests by named principals: a stranger's approve, cancel and events page, a
    scopeless service account's and the owner's status reads) and the no-transport one
    (``transport = "none"``: the enqueue and the reaper's tick refused; ``operator_cancels``
    with a run's id, no id and an unknown id). Every one is walked under ``proposed`` too,
    whose overdue sweep (P6) redispatches a queued row its enqueue left without a message."""
    out = [(m.name, m.data) for m in load_scope("quick").members]
    for name in ("small", "small-sync", "cancel-probe-sync", "small-input", "medium-queued",
                 "small-queued", "small-retry", "small-input-gates", "small-approval-gates",
                 "small-history-suspend", "small-interactive",
                 MUTANT_CONFIG_DIR / "access.toml", MUTANT_CONFIG_DIR / "no-transport.toml"):
        out += [(p.name, p.data) for p in load_config(name)[1]]
    return out


def _walk(configs: list[tuple[str, dict]], walks: int, depth: int, seed: int = 29,
          reached: set[int] | None = None) -> dict[tuple[str, str], list[str]]:
    """Per (step, transition label) that changed something outside its footprint, what;
    ``reached`` collects the declarations fired (by identity). Each configuration is walked
    under its own policy and those of :data:`POLICIES`."""
    rng = random.Random(seed)
    bad: dict[tuple[str, str], list[str]] = {}
    for (_name, data), policy in [(c, p) for c in configs for p in POLICIES]:
        spec, budget = parse_config(data, policy)
        w0 = initial_world(spec, budget)
        for _ in range(walks):
            w = w0
            for _ in range(depth):
                succ = successors(w)
                if not succ:
                    break
                for t, w2 in succ:
                    d = fp.declared(w, t)
                    if reached is not None:
                        reached.add(id(d))
                    v = outside(w, t, w2)
                    if v:
                        bad.setdefault((str(getattr(d, "pc", t.name)), t.label()), v)
                w = rng.choice(succ)[1]
    return bad


def _exhaustive(data: dict, reached: set[int]) -> int:
    """Every edge of ``data``'s state space checked (as :func:`_walk`); the edge count."""
    spec, budget = parse_config(data, None)
    seen = {initial_world(spec, budget)}
    todo = list(seen)
    edges = 0
    while todo:
        w = todo.pop()
        for t, w2 in successors(w):
            edges += 1
            reached.add(id(fp.declared(w, t)))
            assert outside(w, t, w2) == [], (str(t), outside(w, t, w2))
            if w2 not in seen:
                seen.add(w2)
                todo.append(w2)
    return edges


def test_every_fired_transition_stays_in_its_footprint() -> None:
    """Random walks, and every edge of three small spaces (``tiny``; the interactive run
    whose caller denies, and the run waiting for input, which a walk seldom reaches): every
    declaration of the step table is fired, so each footprint is tried."""
    reached: set[int] = set()
    assert _walk(_configs(), walks=8, depth=100, reached=reached) == {}
    for name in ("tiny", "small-interactive", "small-input"):
        assert _exhaustive(load_config(name)[1][0].data, reached) > 0
    declared = [(f"{a.actor}:{a.pc}", a) for a in steps.steps()]
    declared += [(str(n), o) for n, o in steps.OTHER_TRANSITIONS.items()]
    assert [n for n, d in declared if id(d) not in reached] == []


def test_a_declaration_too_narrow_fails_the_walk(restore_tables) -> None:
    """The reaper's steps declared without the rows: its per-row decision writes one."""
    for pc, a in list(steps.REAPER_ACTIONS.items()):
        steps.REAPER_ACTIONS[pc] = replace(a, touches=tuple(x for x in a.touches
                                                            if x != Touch.ROW))
    bad = _walk([(p.name, p.data) for p in load_config("small-zombie")[1]], walks=20, depth=80)
    assert any(step == Label.ROW and "rows" in what for (step, _), what in bad.items()), bad


def test_the_parts_map_to_world_fields() -> None:
    assert set(fp.FIELDS) == set(Touch)
    assert {f for fs in fp.FIELDS.values() for f in fs} == set(WORLD_FIELDS)


def test_the_access_and_command_parts_are_each_needed(restore_tables) -> None:
    """Each part the new transitions declare alone is what catches it declared too narrow:
    a status read without ``made`` (what the owner's read was answered), a stranger's
    request without ``asked``, the operator's cancel command without ``commands``, a refused
    tick without ``commands``."""
    cases = ((TransitionName.READ_STATUS, Touch.MADE, "access.toml", "made"),
             (TransitionName.READ_EVENTS, Touch.ASKED, "access.toml", "asked"),
             (TransitionName.CANCEL_COMMAND, Touch.COMMANDS, "no-transport.toml", "commands"),
             (TransitionName.TICK_REFUSED, Touch.COMMANDS, "no-transport.toml", "commands"))
    for name, part, config, field in cases:
        o = steps.OTHER_TRANSITIONS[name]
        steps.OTHER_TRANSITIONS[name] = replace(o, touches=tuple(x for x in o.touches
                                                                 if x != part))
        data = load_config(MUTANT_CONFIG_DIR / config)[1][0].data
        bad = _walk([(config, data)], walks=8, depth=60)
        steps.OTHER_TRANSITIONS[name] = o
        assert field in bad.get((str(name), _label_of(bad, name)), []), (name, bad)


def _label_of(bad: dict[tuple[str, str], list[str]], name: str) -> str:
    """The transition label ``_walk`` keyed ``name``'s finding by (its first)."""
    return next((lab for step, lab in bad if step == name), "")
