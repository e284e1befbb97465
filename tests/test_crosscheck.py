"""Hypothesis against the exhaustive checker, on the standard bound (``small``).

* Where the checker PROVES a safety property under a preset, a Hypothesis state machine
  whose single rule fires any enabled transition (faults included) runs clean with that
  property as an ``@invariant``.
* Where the checker REFUTES one, Hypothesis (find mode, over lists of choices into
  ``model.runtime.enabled``) also finds a violation, and its shrunk example replays as a
  valid trace through ``model.runtime.apply``.

Both read a choice the way ``spec.coverage._pick`` walks at random (:func:`pick`): an actor
first, weighted by tier (a process half the time, a command of the caller, the bus or the
operator and the clock or the reaper a quarter each), then that actor's normal step three
times in four over its fault branches and ``crash``. A uniform pick over transitions spends
a walk on idle reaper ticks and faults; a uniform pick over actors lets the caller cancel
and the clock expire leases before a segment reaches the step that matters.

A disagreement is a bug in one of them. Budgets are kept small (derandomized); the larger
ones are behind ``@pytest.mark.slow``.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.model.config import load_world  # noqa: E402
from failclosed.model.policy import PRESET_ORDER  # noqa: E402

# every historical preset, and the proposal of docs/PROPOSALS.md (the slow tests); the default
# run takes the first preset, the runtime's `current` and the proposal: each preset costs a
# check of `small` in the verdicts below (about 15 s of CPU in pure Python, 13 presets)
CROSS = (*PRESET_ORDER, "proposed")
FAST_CROSS = (PRESET_ORDER[0], "current", "proposed")
from failclosed.model.runtime import apply, enabled, fire  # noqa: E402
from failclosed.model.transition import Transition  # noqa: E402
from failclosed.spec.checker import load_config  # noqa: E402
from failclosed.spec.properties import SAFETY, explain  # noqa: E402

CONFIG = "small"
PARTS = {p.name: p.data for p in load_config(CONFIG)[1]}

# Refuted properties whose shortest trace is at most this long get a find-mode test in the
# default run; the longer ones (a random choice sequence rarely hits them) are slow tests.
FAST_FIND_MAX = 12


@pytest.fixture(autouse=True)
def _draws_independent_of_loaded_modules(monkeypatch):
    """Hypothesis (6.131 on) mixes the constants of every first-party module in sys.modules
    into its draws, so a derandomized search here would depend on which modules (source and
    test files) the run happened to import before it: the full suite, one file or one test
    would each explore other examples. Pin that pool to empty: a search depends on its seed."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - another Hypothesis layout: nothing to pin
        providers = None
    if providers is not None and hasattr(providers, "_get_local_constants"):
        empty = providers.Constants()
        monkeypatch.setattr(providers, "_get_local_constants", lambda: empty)
        providers.CONSTANTS_CACHE.cache.clear()
    yield
    if providers is not None and hasattr(providers, "CONSTANTS_CACHE"):
        providers.CONSTANTS_CACHE.cache.clear()


@functools.cache
def verdicts(preset: str) -> dict[str, tuple[bool, str | None, int | None]]:
    """The checker's safety verdicts on the standard bound: name -> (holds, part, length)."""
    from failclosed.spec.checker import check

    res = check(preset, CONFIG, list(SAFETY), witnesses=False, coverage=False)
    assert res.complete
    return {n: (r.holds, r.part, r.trace_length) for n, r in res.properties.items()}


# -- choosing a transition ----------------------------------------------------------------
BACKGROUND = ("clock", "reaper")
COMMANDS = ("caller", "bus", "operator")
CHOICE = st.integers(0, 2**16 - 1)


def _tier(actor: str) -> int:
    return 2 if actor in BACKGROUND else 1 if actor in COMMANDS else 0


def pick(en: list[Transition], c: int) -> Transition:
    """The transition of ``en`` that choice ``c`` names (any ``c`` names one, so every choice
    list is a valid walk and shrinking keeps it valid).

    Bits 0-1 choose a tier of actors: the processes (segments, workers, enqueue, resume) two
    times in four, the commands (caller, bus, operator) and the background (clock, reaper)
    once each; an empty tier falls through to the processes, then the commands. Bits 2-5
    choose the actor in the tier; bits 6-7 a fault branch or ``crash`` only when they are 0
    (or the actor has no normal step); the rest the transition."""
    actors = sorted({t.actor for t in en})
    tiers = [[a for a in actors if _tier(a) == k] for k in range(3)]
    want = (0, 0, 1, 2)[c & 3]
    pool_a = next(tiers[k] for k in (want, 0, 1, 2) if tiers[k])
    a = pool_a[(c >> 2) % len(pool_a)]
    c >>= 6
    mine = [t for t in en if t.actor == a]
    normal = [t for t in mine if t.fault is None and t.name != "crash"]
    pool = normal if normal and c & 3 else mine
    return pool[(c >> 2) % len(pool)]


# -- the state machine --------------------------------------------------------------------
class QueueMachine(RuleBasedStateMachine):
    """Any enabled transition, faults included; invariants = the properties the checker
    proves under ``preset`` (set by :func:`machine_for`)."""

    preset = "current"
    proven: frozenset[str] = frozenset()

    def __init__(self) -> None:
        super().__init__()
        self.world = None
        self.trace: list = []

    @initialize(part=st.sampled_from(sorted(PARTS)))
    def start(self, part: str) -> None:
        self.world = load_world(PARTS[part], self.preset)

    @rule(choice=CHOICE)
    def step(self, choice: int) -> None:
        en = enabled(self.world)
        if not en:
            return
        t = pick(en, choice)
        self.world = apply(self.world, t)
        self.trace.append(t)


def _invariant(name: str):
    check = SAFETY[name].check

    def inv(self: QueueMachine) -> None:
        if self.world is not None and name in self.proven:
            assert check(self.world), f"{name}: {explain(name, self.world)}"

    inv.__name__ = f"inv_{name}"
    return invariant()(inv)


for _n in SAFETY:
    setattr(QueueMachine, f"inv_{_n}", _invariant(_n))


def machine_for(preset: str) -> type[QueueMachine]:
    proven = frozenset(n for n, (holds, _, _) in verdicts(preset).items() if holds)
    return type(f"QueueMachine_{preset.replace('-', '_')}", (QueueMachine,),
                {"preset": preset, "proven": proven})


FAST = settings(max_examples=25, stateful_step_count=60, derandomize=True, deadline=None,
                database=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("preset", FAST_CROSS)
def test_hypothesis_clean_where_checker_proves(preset: str):
    run_state_machine_as_test(machine_for(preset), settings=FAST)


@pytest.mark.slow
@pytest.mark.parametrize("preset", CROSS)
def test_hypothesis_clean_where_checker_proves_large(preset: str):
    run_state_machine_as_test(
        machine_for(preset),
        settings=settings(FAST, max_examples=400, stateful_step_count=120),
    )


# -- find mode ----------------------------------------------------------------------------
def walk(data: dict, preset: str, choices: list[int], name: str):
    """Interpret choices as indexes into ``enabled``; stop at the first violation."""
    w = load_world(data, preset)
    trace = []
    check = SAFETY[name].check
    for c in choices:
        if not check(w):
            break
        en = enabled(w)
        if not en:
            break
        t = pick(en, c)
        w = fire(w, t)
        trace.append(t)
    return w, trace


def _find_and_replay(preset: str, name: str, examples: int) -> None:
    holds, part, length = verdicts(preset)[name]
    assert not holds and part is not None and length is not None
    data = PARTS[part]
    try:
        # at least as many choices as the checker's shortest counterexample has steps: no
        # shorter walk can violate the property (and Hypothesis's lists are short by default)
        choices = find(
            st.lists(CHOICE, min_size=length, max_size=2 * length + 10),
            lambda xs: not SAFETY[name].check(walk(data, preset, xs, name)[0]),
            settings=settings(max_examples=examples, derandomize=True, database=None,
                              deadline=None, suppress_health_check=list(HealthCheck)),
        )
    except NoSuchExample:
        pytest.fail(f"Hypothesis found no violation of {name} under {preset} ({part}) in "
                    f"{examples} examples; the checker's is {length} steps")
    _, trace = walk(data, preset, choices, name)
    # the shrunk example is a valid trace: it replays through the validating apply
    w = load_world(data, preset)
    for t in trace:
        w = apply(w, t)
    assert not SAFETY[name].check(w)
    # and it is no shorter than the checker's shortest counterexample
    assert len(trace) >= length


_PAIRS = [(p, n) for p in CROSS for n in SAFETY]
_IDS = [f"{p}:{n}" for p, n in _PAIRS]
_FAST_PAIRS = [(p, n) for p in FAST_CROSS for n in SAFETY]
_FAST_IDS = [f"{p}:{n}" for p, n in _FAST_PAIRS]


def _refuted_or_skip(preset: str, name: str, lo: int, hi: int | None) -> None:
    holds, _, length = verdicts(preset)[name]
    if holds:
        pytest.skip("proved by the checker: covered by the state machine")
    assert length is not None
    if length <= lo or (hi is not None and length > hi):
        pytest.skip(f"shortest counterexample has {length} steps: the other budget's test")


@pytest.mark.parametrize(("preset", "name"), _FAST_PAIRS, ids=_FAST_IDS)
def test_hypothesis_finds_what_checker_refutes(preset: str, name: str):
    _refuted_or_skip(preset, name, 0, FAST_FIND_MAX)
    _find_and_replay(preset, name, examples=3000)


@pytest.mark.slow
@pytest.mark.parametrize(("preset", "name"), _PAIRS, ids=_IDS)
def test_hypothesis_finds_what_checker_refutes_deep(preset: str, name: str):
    _refuted_or_skip(preset, name, -1, None)
    _find_and_replay(preset, name, examples=20_000)


@pytest.mark.parametrize("name", ["no_write_applied_twice_without_audit",
                                  "interrupted_non_idempotent_write_not_repeated"])
def test_hypothesis_finds_the_central_finding_on_current(name: str):
    """FINDINGS.md F1 is long (23-33 steps), beyond the default find budget of the pairs
    above; the central guarantees get the deep budget in the default run."""
    _find_and_replay("current", name, examples=20_000)
