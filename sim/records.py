"""What the simulator keeps about runs, steps and violations, and its two exceptions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from failclosed.model.state import RunSpec
from failclosed.model.transition import Transition


class SimulationError(AssertionError):
    """A chosen transition was not enabled: a bug in the simulator, never in the run."""


class Stop(Exception):
    """The simulation stopped (its first violation, when not keeping going): a process
    that meets it ends."""


@dataclass
class RunRecord:
    """One logical run, as archived (or as left at the end of the simulation)."""

    id: str
    entry: str
    arrival: float
    spec: RunSpec
    admitted: float = 0.0
    first_claim: float | None = None
    terminal_at: float | None = None
    finished: bool = False
    status: str = ""
    reason: str = ""
    error_class: str = ""
    requeues: int = 0
    attempts: int = 0
    applications: list[tuple[int, int, str, str, str, bool]] = field(default_factory=list)
    outcomes: list[tuple[str, str, str]] = field(default_factory=list)  # (seg, kind, OUTCOME)
    reaped_alive: int = 0
    renewals: int = 0
    wasted: float = 0.0  # provider + tool seconds of segments that ended LEASE_LOST
    busy: float = 0.0  # provider + tool seconds of all segments
    violations: list[str] = field(default_factory=list)
    # the failures the run met, as drawn: (error, class) of a provider call; (tool, error,
    # class) of a tool call ("" error and class: the tool's error_mix is not given)
    provider_errors: list[tuple[str, str]] = field(default_factory=list)
    tool_errors: list[tuple[str, str, str]] = field(default_factory=list)
    # the requests by other principals that took effect (RUNTIME 16.18): (principal, request,
    # whether the access rule lets it make it)
    made: list[tuple[str, str, bool]] = field(default_factory=list)
    # the statements the run's transitions issued, by the cost class of the step that fired
    # each (model/steps.py: store, audit, dispatch; a statement that errored counts too)
    statements: dict[str, int] = field(default_factory=dict)
    # proposal P6: per re-dispatch of the run's QUEUED row by the sweep (T15 matched), the
    # seconds from its dispatch deadline passing (the row orphaned) to that T15
    redispatch_waits: list[float] = field(default_factory=list)


# how many violations of each property a simulation gives their scenario (replayed at its end)
SCENARIOS_PER_PROPERTY = 3

# From this many runs simulated, a fault kind the simulation enables but never draws is
# reported as a warning (``Simulation.fault_report``). Below it a rare kind (a store error at
# 5 in 10,000 statements) is often not drawn by chance, and the warning would be noise on every
# short run; above it a kind never drawn is most likely one no step the simulator takes draws
# (the reaper's steps before they drew their declared faults: 0 of every reaper decision).
NEVER_DRAWN_RUNS = 1000
# why a kind can be enabled and never drawn, said with the warning
NEVER_DRAWN_WHY = ("a component that does not draw a kind its steps declare, or a probability "
                   "too small for this many runs")


@dataclass
class Violation:
    property: str
    runs: list[str]
    time: float
    scenario: dict[str, Any] | None = None  # {"config": ..., "steps": [...]} of the affected runs


class Step(NamedTuple):
    """One transition in a run's trace."""

    fired: int  # the simulation's transition count after it (its order among all steps)
    clock: int  # the model clock it fired at
    transition: Transition
    now: float  # simulated seconds


class Culprit(NamedTuple):
    """A run a violation is attributed to."""

    slot: int
    id: str
    record: RunRecord
    trace: list[Step]
