"""The exhaustive checker: every reachable world of a bounded configuration, under a policy,
against the named properties of ``spec.properties``.

``check(policy, config, properties)`` explores each part of ``config`` with
``spec.engine.explore`` (safety properties are the invariants; witnesses are reachability
predicates that must hold somewhere), runs the fair-cycle analysis for the requested
liveness properties, and returns a :class:`CheckResult` with, per property, whether it holds
on every part and the shortest counterexample over all parts.

A configuration is a TOML file in model/config.py's format, or a file with
``parts = ["a.toml", "b.toml"]`` (paths relative to that file): "check each part; a property
holds iff it holds in every part". Named configurations live in ``spec/configs``.

Symmetry and the time shift (the state abstraction the search runs under) are
``spec.symmetry``.
"""

from __future__ import annotations

import difflib
import re
import sys
import textwrap
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from failclosed.model import names, rules
from failclosed.model.commands import exit_code
from failclosed.model.config import (
    ConfigError,
    UsageError,
    initial_world,
    parse_config,
    read_toml,
    under_policy,
)
from failclosed.model.policy import PRESET_ORDER, parse_policy, varied_preset
from failclosed.model.runtime import successors
from failclosed.model.state import Config, World
from failclosed.model.transition import Transition
from failclosed.model.vocab import OutcomeName, Request, TransitionName
from failclosed.spec import engine
from failclosed.spec import properties as P
from failclosed.spec.coverage import expected_labels
from failclosed.spec.pool import run_local, worker_share
from failclosed.spec.symmetry import make_canonical, reductions_of
from failclosed.spec.vocab import PropertyName, Reduction

CONFIG_DIR = Path(__file__).resolve().parent / "configs"
FINDINGS_DIR = Path(__file__).resolve().parent / "findings"

__all__ = [
    "CONFIG_DIR",
    "CheckResult",
    "ConfigPart",
    "Configuration",
    "PropertyResult",
    "WITNESSES",
    "Witness",
    "check",
    "config_names",
    "counterexample_scenario",
    "diff_worlds",
    "load_config",
    "pytest_text",
    "resolve_properties",
    "trace_compact",
    "trace_text",
]


# =========================================================================================
# configurations
# =========================================================================================
@dataclass(frozen=True)
class ConfigPart:
    """One part of a configuration: its TOML table (model/config.py format) and what the
    model's loader parsed from it, once, as the part is made (a malformed table is one
    ``ConfigError`` line naming the field)."""

    name: str  # file stem
    path: str
    data: dict[str, Any]  # the TOML table (a counterexample's scenario quotes it)
    config: Config = field(init=False, compare=False, repr=False)  # under the table's policy
    budget: int = field(init=False, compare=False, repr=False)  # [model] fault_budget

    def __post_init__(self) -> None:
        config, budget = parse_config(self.data)
        object.__setattr__(self, "config", config)
        object.__setattr__(self, "budget", budget)

    def under(self, policy: str | None) -> Config:
        """The part's ``Config`` under ``policy`` (its ``[switches]`` applied; None: the
        table's own policy)."""
        return under_policy(self.config, self.data, policy)


class Configuration(NamedTuple):
    """A configuration read and parsed: its name and its parts (``load_config``)."""

    name: str
    parts: list[ConfigPart]


def config_names() -> list[str]:
    """Every configuration that resolves by name: the files of spec/configs."""
    return sorted(x.stem for x in CONFIG_DIR.glob("*.toml"))


def config_path(config: str | Path) -> Path:
    """The file of a configuration of spec/configs by name (``small``, ``tiny``, ...:
    :func:`config_names`), or the path given."""
    s = str(config)
    p = Path(s)
    if not p.suffix and not p.exists():
        p = CONFIG_DIR / f"{s}.toml"
        if not p.exists():
            known = ", ".join(config_names())
            raise ConfigError(f"config: unknown configuration {s!r}; use one of {known} or a FILE")
    return p


def load_config(config: str | Path, data: dict[str, Any] | None = None) -> Configuration:
    """A configuration by name or path (:func:`config_path`), each part read and parsed
    once; ``data``: the file's table when the caller has read it already (the command
    line, which checks its kind). Returns (name, parts)."""
    p = config_path(config)
    return Configuration(p.stem, _parts(p, seen=(), data=data))


def _parts(p: Path, seen: tuple[str, ...], data: dict[str, Any] | None = None) -> list[ConfigPart]:
    if data is None:
        data = read_toml(str(p))
    if "parts" not in data:
        return [ConfigPart(p.stem, str(p), data)]
    extra = set(data) - {"parts", "description"}
    if extra:
        raise ConfigError(f"{p.name}: a parts file holds only parts (and description), not {sorted(extra)}")
    parts = data["parts"]
    if not isinstance(parts, list) or not parts or not all(isinstance(x, str) for x in parts):
        raise ConfigError(f"{p.name}: parts: expected a non-empty list of TOML file names")
    if str(p) in seen:
        raise ConfigError(f"{p.name}: parts: a configuration includes itself")
    out: list[ConfigPart] = []
    for x in parts:
        out.extend(_parts((p.parent / x).resolve(), seen + (str(p),)))
    return out


# =========================================================================================
# witnesses
# =========================================================================================
@dataclass(frozen=True)
class Witness:
    name: str
    holds: Callable[[World], bool]
    applies: Callable[[Any], bool]  # policy -> must this be reachable under it?
    statement: str
    reads: tuple[str, ...]  # the World fields ``holds`` reads (spec.engine.explore)


def _slow_tool_outlives_lease(w: World) -> bool:
    # A segment landed a write (the slow invoke), its lease went stale while it ran and the
    # reaper moved the row (requeued, or dead-lettered by T12: error_class ''), and the
    # segment then reached its boundary and found the row gone: LEASE_LOST.
    if not w.ledger or not w.outcomes:
        return False
    lost = {s for s, _, _, o in w.outcomes if o == OutcomeName.LEASE_LOST}
    for a in w.ledger:
        if a.seg in lost:
            row = w.rows[a.run]
            if row is not None and (
                row.requeue_count > 0
                or (row.termination_reason in ("not_retryable", "retries_exhausted")
                    and row.error_class == "")
            ):
                return True
    return False


def _audit_fails_in_write_step(w: World) -> bool:
    # The event of a write's tool step was not stored: either the runtime raised
    # AuditPersistenceFailed (ADR-111), or (fail-soft) the segment carried on past it.
    if any(p.error == rules.AUDIT_PERSISTENCE_FAILED for p in w.procs):
        return True
    if any(r is not None and r.error_class == rules.AUDIT_PERSISTENCE_FAILED for r in w.rows):
        return True
    return w.ledger != () and not P.SAFETY[PropertyName.NO_SUCCESS_OVER_UNRECORDED_WRITE].check(w)


def _retry_budget_runs_out(w: World) -> bool:
    k = w.config.constants.MAX_REQUEUES
    return any(
        r is not None and r.termination_reason == "retries_exhausted" and r.requeue_count >= k
        for r in w.rows
    )


def _duplicate_wakeup(w: World) -> bool:
    # A deliverable message for a run that was already claimed and is no longer QUEUED, with
    # a free worker: the run_queued that yields NONE is enabled here, so (the search being
    # exhaustive) the successor in which a worker takes it is explored too.
    if not w.messages:
        return False
    busy = {p.worker for p in w.procs if p.worker}
    if all(x in busy for x in w.config.workers):
        return False
    for m in w.messages:
        row = w.rows[m.run]
        if m.not_before <= w.clock and row is not None and row.attempts >= 1 and row.status != "queued":
            return True
    return False


def _reaped(w: World) -> bool:
    return any(
        r is not None and r.status == "failed" and r.error_class == ""
        and r.termination_reason in ("not_retryable", "retries_exhausted")
        for r in w.rows
    ) or any(r is not None and r.status == "queued" and r.requeue_count > 0 and r.attempts > 0
             and not any(p.run == i for p in w.procs) for i, r in enumerate(w.rows))


_REFUSALS = frozenset({
    "NotAwaitingApproval", "NotAwaitingInput", "AlreadyResuming", "StateUnavailable",
    "StaleApprovalTurn", "StaleInputTurn", "ApprovalNotAuditable", "CorruptSuspendedState",
    "ApproverNotPermitted", "InvalidInputSubmission",
})


def _resume_refused(w: World) -> bool:
    return any(o in _REFUSALS for _, _, _, o in w.outcomes)


def _write_in_resume(w: World) -> bool:
    return any(names.resume_number(a.seg) is not None for a in w.ledger)


def _cancel_stops_segment(w: World) -> bool:
    return any(o == OutcomeName.CANCELLED for _, _, _, o in w.outcomes)


def _resumed_after_input(w: World) -> bool:
    return any(e.kind == "input" for e in w.events)


WITNESSES: dict[str, Witness] = {
    x.name: x
    for x in (
        Witness("a slow tool outlives its lease and its segment then reaches its boundary",
                _slow_tool_outlives_lease, lambda p: p.reaper and p.queue,
                "∃a∈L: outcome(a.seg)=LEASE_LOST ∧ the reaper moved row(a.run)", ("ledger", "outcomes", "rows")),
        Witness("the audit store fails during a write step", _audit_fails_in_write_step,
                lambda p: True, "a write's tool event is not stored and the runtime notices", ("procs", "rows", "ledger", "events", "outcomes")),
        Witness("the retry budget runs out", _retry_budget_runs_out,
                lambda p: p.retry or p.reaper,
                "∃r: reason=retries_exhausted ∧ requeue_count ≥ MAX_REQUEUES", ("rows",)),
        Witness("a duplicate wake-up reaches a worker", _duplicate_wakeup, lambda p: p.queue,
                "a free worker can take a message for a claimed, no longer queued run", ("messages", "procs", "rows", "clock")),
        Witness("a run is reaped", _reaped, lambda p: p.reaper and p.queue,
                "T12 dead-lettered a row, or T11 requeued one", ("rows", "procs")),
        Witness("a resume is refused", _resume_refused, lambda p: True,
                "some resume ended with a refusal", ("outcomes",)),
        Witness("an approved write lands in a resume segment", _write_in_resume,
                lambda p: True, "∃a∈L: a.seg is a resume segment", ("ledger",)),
        Witness("a cancel stops a running segment at its probe", _cancel_stops_segment,
                lambda p: p.cancel_probe, "some segment ended CANCELLED", ("outcomes",)),
        Witness("a run resumes after input", _resumed_after_input, lambda p: p.input_suspend,
                "an input event is stored", ("events",)),
    )
}


# =========================================================================================
# results
# =========================================================================================
@dataclass
class PropertyResult:
    name: str
    kind: str  # safety | liveness
    holds: bool
    part: str | None = None  # the part of the shortest counterexample
    data: dict[str, Any] | None = None  # that part's TOML table
    initial: World | None = None
    trace: list[tuple[Transition, World]] = field(default_factory=list)  # prefix (+ cycle)
    cycle_start: int | None = None  # liveness lasso: index in trace where the cycle begins
    liveness_kind: str | None = None  # deadlock | fair_cycle
    explanation: str = ""
    complete: bool = True
    # liveness: the fairness it was checked under, tersely (spec.properties LivenessProperty)
    under: str = ""

    @property
    def trace_length(self) -> int | None:
        return None if self.holds else len(self.trace)


@dataclass
class PartStats:
    name: str
    stats: engine.Stats
    reduction: float | None
    group: int
    growth: str | None = None  # the growth line of a varied policy (see _GrowthWatch)
    # what its search ran under (spec.vocab.Reduction, in its order)
    reductions: tuple[str, ...] = ()


@dataclass
class CheckResult:
    policy: str
    config: str
    properties: dict[str, PropertyResult]
    parts: list[PartStats]
    witnesses: dict[str, str | None]  # name -> part reaching it (None: unreached)
    required_witnesses: list[str]
    coverage: engine.Coverage | None
    seconds: float

    @property
    def states(self) -> int:
        return sum(p.stats.states for p in self.parts)

    @property
    def transitions(self) -> int:
        return sum(p.stats.transitions for p in self.parts)

    @property
    def depth(self) -> int:
        return max((p.stats.max_depth for p in self.parts), default=0)

    @property
    def peak_rss_mib(self) -> float:
        return max((p.stats.peak_rss_mib for p in self.parts), default=0.0)

    @property
    def search_peak_rss_mib(self) -> float:
        """The largest resident size any part's own search reached (spec.engine.Stats)."""
        return max((p.stats.search_peak_rss_mib for p in self.parts), default=0.0)

    @property
    def seen(self) -> list[str]:
        """The parts whose seen set left memory, each as ``part: seen set ...``."""
        return [f"{p.name}: {p.stats.seen}" for p in self.parts if p.stats.seen]

    @property
    def complete(self) -> bool:
        return not any(p.stats.truncated for p in self.parts)

    @property
    def collision_probability(self) -> float:
        """The chance that some part's search took two states for one (64-bit fingerprints:
        spec.engine.Stats.collision_probability, summed over the parts)."""
        return sum(p.stats.collision_probability for p in self.parts)

    @property
    def unreached_witnesses(self) -> list[str]:
        return [w for w in self.required_witnesses if self.witnesses.get(w) is None]

    @property
    def growth(self) -> list[str]:
        """The growth lines of the parts (a varied policy far past its preset's states)."""
        return [p.growth for p in self.parts if p.growth]

    @property
    def reductions(self) -> tuple[str, ...]:
        """The reductions any part's search ran under (spec.vocab.Reduction), in their
        order."""
        return reductions_union(p.reductions for p in self.parts)

    @property
    def ok(self) -> bool:
        return all(r.holds for r in self.properties.values()) and not self.unreached_witnesses

    def stats_line(self) -> str:
        sps = self.states / self.seconds if self.seconds > 0 else 0.0
        red = [p.reduction for p in self.parts if p.reduction is not None]
        rtxt = f", symmetry reduction x{max(red):.2f}" if red else ""
        return (
            f"{self.states:,} distinct states, {self.transitions:,} transitions, depth {self.depth}, "
            f"{self.seconds:.2f}s ({sps:,.0f} states/s), peak memory {self.peak_rss_mib:.0f} MiB"
            f"{rtxt}, fingerprint collision probability {self.collision_probability:.1e}, "
            f"reductions: {', '.join(self.reductions) or 'none'}"
            f"{''.join(f', {s}' for s in self.seen)}{'' if self.complete else ', TRUNCATED'}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "config": self.config,
            "properties": {
                n: {"holds": r.holds, "trace_length": r.trace_length}
                | ({"under": r.under} if r.under else {})  # liveness: the fairness
                for n, r in self.properties.items()
            },
            "states": self.states,
            "transitions": self.transitions,
            "seconds": round(self.seconds, 3),
            "depth": self.depth,
            "states_per_second": round(self.states / self.seconds) if self.seconds > 0 else None,
            "peak_rss_mib": round(self.peak_rss_mib, 1),
            "seen_set": self.seen,
            "complete": self.complete,
            "collision_probability": self.collision_probability,
            "witnesses": {k: v is not None for k, v in self.witnesses.items()},
            "unreached_witnesses": self.unreached_witnesses,
            "reduction_factor": max(
                (p.reduction for p in self.parts if p.reduction is not None), default=None
            ),
            "reductions": list(self.reductions),
            "coverage_never_enabled": self.coverage.never_enabled if self.coverage else None,
            "growth": self.growth,
        }


def reductions_union(each: Iterable[Sequence[str]]) -> tuple[str, ...]:
    """The reductions named by any of ``each`` (one tuple per search), in Reduction's order."""
    names = {n for r in each for n in r}
    return tuple(r for r in Reduction if r in names) + tuple(sorted(names - set(Reduction)))


def resolve_properties(names: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """(safety names, liveness names) for ``names`` (None: all). Unknown: ConfigError."""
    if not names:
        return list(P.SAFETY), list(P.LIVENESS)
    safety, live = [], []
    for n in names:
        if n in P.SAFETY:
            safety.append(PropertyName(n))  # parsed once, here at the edge
        elif n in P.LIVENESS:
            live.append(PropertyName(n))
        else:
            valid = [*P.SAFETY, *P.LIVENESS]
            near = difflib.get_close_matches(n, valid, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise UsageError(f"--property: unknown property {n!r}; {hint}"
                             f"valid properties: {', '.join(valid)}")
    return safety, live


def _policy_name(policy: str | None) -> str | None:
    if policy is None:
        return None
    parse_policy(policy)  # UnknownPolicy: one line
    return policy


# =========================================================================================
# check
# =========================================================================================
def check(
    policy: str | None,
    config: str | Path | ConfigPart | Configuration = "small",
    properties: Sequence[str] | None = None,
    *,
    witnesses: bool = True,
    coverage: bool = True,
    symmetry: bool = True,
    logs: bool = True,
    measure_reduction: bool = False,
    max_states: int | None = None,
    on_part: Callable[[str, int], None] | None = None,
    jobs: int = 1,
    on_progress: Callable[[int, int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    memory_budget_mib: float | None = None,
) -> CheckResult:
    """Check ``properties`` (None: all) on every part of ``config`` under ``policy`` (None:
    each part's own policy). ``config`` is a name, a path, a :class:`Configuration` already
    loaded (``load_config``), or one :class:`ConfigPart` (a configuration already in memory,
    as a scope generates them: spec/scope.py).
    ``on_part(name, states)`` is called as each part is done (for progress reports);
    ``on_progress(stored, expanded)`` inside a running part's search, every few thousand
    states (in this process only: not with ``jobs`` > 1).
    ``on_note(line)``: a part's growth line (a varied policy's part far past its preset's
    states: :class:`_GrowthWatch`) as soon as it is measured (in this process; a worker
    process prints it on stderr); it is in the result's ``growth`` as well.
    ``jobs`` > 1: the parts (independent searches) run on that many spawned processes
    (spec/pool.py's run_local) and are merged in their order, so the result is the one of
    ``jobs=1`` (but for the measured seconds and memory).
    ``symmetry``, ``logs``: the state abstractions of spec/symmetry.py (the symmetry
    reduction, the log order; False: without).
    ``CheckResult.reductions`` says what ran.
    ``memory_budget_mib``: what the searches may store in memory, shared by the ``jobs``
    processes (each part's search gets its share: spec/seen.py); None: no bound."""
    t0 = time.perf_counter()
    pname = _policy_name(policy)
    if isinstance(config, ConfigPart):
        cname, parts = config.name, [config]
    elif isinstance(config, Configuration):
        cname, parts = config
    else:
        cname, parts = load_config(config)
    safety, live = resolve_properties(properties)
    results: dict[str, PropertyResult] = {
        n: PropertyResult(n, "safety", True) for n in safety
    } | {n: PropertyResult(n, "liveness", True, under=P.LIVENESS[n].under) for n in live}
    reached: dict[str, str | None] = {k: None for k in WITNESSES} if witnesses else {}
    search = _Search(pname, tuple(safety), tuple(live), coverage, symmetry, measure_reduction,
                     max_states, logs,
                     worker_share(memory_budget_mib, min(jobs, len(parts))))
    if jobs > 1 and len(parts) > 1:
        outcomes = _parts_in_processes(parts, search, tuple(reached), jobs, on_part)
        for part, out in zip(parts, outcomes, strict=True):
            _merge_part(results, reached, part, out)
    else:
        outcomes = _parts_here(parts, search, results, reached, on_part, on_progress, on_note)
    policy_obj = outcomes[-1].config.policy if outcomes else None
    required = [k for k, v in WITNESSES.items() if witnesses and policy_obj is not None
                and v.applies(policy_obj)]
    return CheckResult(
        policy=pname or (policy_obj.name if policy_obj else "?"),
        config=cname,
        properties=results,
        parts=[o.stats for o in outcomes],
        witnesses=reached,
        required_witnesses=required,
        coverage=_coverage(outcomes) if coverage else None,
        seconds=time.perf_counter() - t0,
    )


def _parts_here(parts: list[ConfigPart], search: _Search, results: dict[str, PropertyResult],
                reached: dict[str, str | None], on_part: Callable[[str, int], None] | None,
                on_progress: Callable[[int, int], None] | None,
                on_note: Callable[[str], None] | None) -> list[_PartOutcome]:
    """Every part searched in this process, in order, each folded into ``results`` and
    ``reached`` as it is done: a witness reached in an earlier part is not searched again."""
    outcomes = []
    for part in parts:
        out = _check_part(part, search, tuple(k for k, v in reached.items() if v is None),
                          on_progress, on_note)
        _merge_part(results, reached, part, out)
        outcomes.append(out)
        if on_part is not None:
            on_part(part.name, out.stats.stats.states)
    return outcomes


@dataclass(frozen=True)
class _Search:
    """How every part is searched (the arguments of check that a worker process needs)."""

    policy: str | None
    safety: tuple[str, ...]
    live: tuple[str, ...]
    coverage: bool
    symmetry: bool
    measure_reduction: bool
    max_states: int | None
    logs: bool = True  # the log order (spec/symmetry.py); False: each log in landing order
    memory_budget_mib: float | None = None  # one search's share (spec/seen.py)

    def canonical(self, cfg: Config) -> Callable[[World], Hashable] | None:
        """The key of ``cfg``'s worlds under this search's reductions (spec/symmetry.py)."""
        return make_canonical(cfg, self.symmetry, self.logs)


@dataclass
class _PartOutcome:
    """What one part's search contributes to the result; small and picklable (a worker
    process returns it), the explored graph stays behind."""

    stats: PartStats
    config: Config
    witnesses: list[str]  # reached in this part
    # safety: (name, initial world, trace, the violating world), in the engine's order
    violations: list[tuple[str, World, list[tuple[Transition, World]], World]]
    # liveness: (name, the analysis was complete, its counterexample or None)
    liveness: list[tuple[str, bool, PropertyResult | None]]
    enabled: dict[str, int]  # coverage: label -> times enabled, in first-seen order
    taken: dict[str, int]


def _goal(lp: Any) -> Callable[[World], bool]:
    """What the liveness analysis of ``lp`` counts as its goal (see :func:`_liveness`)."""
    goal = lp.goal

    def reached(w: World) -> bool:
        return goal(w) or P.at_bound(w)

    return reached


GROWTH = 10  # a varied policy's part past this many times its preset's states is reported


class _GrowthWatch:
    """Whether a part under a varied policy (``preset+switch``, ``preset-switch``) has grown
    far past the same part under the preset it varies: a switch that removes a bound (a
    counter no longer counted) can make a finite space huge or infinite, and the search
    then runs on with no hint. Called as the search's progress hook (every few thousand
    states); at a checkpoint of ``stored`` states it searches the preset's space with at
    most ``stored // GROWTH`` states (no properties): if that search is complete, the part
    has passed ``GROWTH`` times its preset and the growth line is given to ``say``, once;
    if not, the next checkpoint is at twice ``stored``. Sound: the line names a measured
    ratio, never a guess; cheap: the probes add up to at most 2/GROWTH of the part's own
    search (3/GROWTH with the probe after a ``max_states`` cut), and a preset policy has
    none."""

    def __init__(self, part: ConfigPart, policy: str, preset: str, search: _Search,
                 say: Callable[[str], None]) -> None:
        self.part, self.policy, self.preset, self.search = part, policy, preset, search
        self.say = say
        self.checkpoint = 0
        self.line: str | None = None

    def __call__(self, stored: int, expanded: int) -> None:
        if self.line is None and stored >= self.checkpoint:
            self.check(stored, searching=True)

    def check(self, stored: int, *, searching: bool) -> None:
        """Probe the preset at ``stored`` states (``searching``: the part's search goes on;
        else it was cut by ``max_states``)."""
        self.checkpoint = 2 * stored
        # the preset's own space: a [switches] table is part of the varied policy (it named
        # the part's policy preset+switch), so the probe leaves it out
        cfg = replace(self.part.config, policy=parse_policy(self.preset))
        probe = engine.explore([initial_world(cfg, self.part.budget)], successors, invariants={},
                               canonical=self.search.canonical(cfg),
                               max_states=max(1, stored // GROWTH))
        if probe.truncated:
            return
        how = "and is still growing" if searching else "when --max-states cut it"
        self.line = (
            f"growth: part {self.part.name} under {self.policy} has {stored:,} states, over "
            f"{GROWTH}x the {probe.stats.states:,} of {self.preset}, {how}: a switch may "
            "remove a bound that keeps the space finite; bound the search with --max-states "
            "N, a horizon ([model] horizon) or a budget ([model] fault_budget, [constants] "
            "MAX_REQUEUES), and see docs/CHANGING.md (switches)")
        self.say(self.line)


def _say(line: str) -> None:
    """A line for the person watching a part searched in a worker process (stderr)."""
    print(line, file=sys.stderr, flush=True)


def _both(a: Callable[[int, int], None] | None,
          b: Callable[[int, int], None] | None) -> Callable[[int, int], None] | None:
    """One progress hook calling ``a`` then ``b`` (either may be None)."""
    if a is None or b is None:
        return a or b

    def both(stored: int, expanded: int) -> None:
        a(stored, expanded)
        b(stored, expanded)

    return both


def _check_part(part: ConfigPart, search: _Search, witnesses: tuple[str, ...],
                on_progress: Callable[[int, int], None] | None = None,
                say: Callable[[str], None] | None = None) -> _PartOutcome:
    """Explore one part: its safety violations and reached ``witnesses``, the liveness
    analysis of ``search.live`` on its graph, and its coverage counters.
    ``on_progress(stored, expanded)``: spec.engine.explore's progress of the search;
    ``say(line)``: the growth line of a varied policy, as soon as it is measured (None:
    stderr, as in a worker process)."""
    spec = part.under(search.policy)
    w0 = initial_world(spec, part.budget)
    canon = search.canonical(spec)
    wit = {k: WITNESSES[k].holds for k in witnesses}
    # the liveness analysis reads per state only these (the worlds are not kept)
    goals = {f"goal {n}": _goal(P.LIVENESS[n]) for n in search.live}
    ignore = {f"ignore {n}": P.LIVENESS[n].ignore_deadlock for n in search.live
              if P.LIVENESS[n].ignore_deadlock is not None}
    preset = varied_preset(spec.policy.name)
    watch = None if preset is None else _GrowthWatch(part, spec.policy.name, preset,
                                                     search, say or _say)
    reads = ({n: P.SAFETY[n].reads for n in search.safety if P.SAFETY[n].reads}
             | {k: WITNESSES[k].reads for k in wit})
    ex = engine.explore(
        [w0], successors,
        invariants={n: P.SAFETY[n].check for n in search.safety},
        canonical=canon,
        witnesses=wit,
        keep_graph=bool(search.live),
        measure_reduction=search.measure_reduction and canon is not None,
        max_states=search.max_states,
        reads=reads,
        labels=goals,
        deadlock_labels=ignore,
        on_progress=_both(on_progress, watch),
        memory_budget_mib=search.memory_budget_mib,
    )
    if watch is not None and watch.line is None and ex.truncated:
        watch.check(ex.stats.states, searching=False)
    enabled: dict[str, int] = {}
    taken: dict[str, int] = {}
    if search.coverage:
        for t, e, k in zip(ex.transitions, ex.enabled_count, ex.taken_count, strict=True):
            lab = t.label()
            enabled[lab] = enabled.get(lab, 0) + e
            taken[lab] = taken.get(lab, 0) + k
    return _PartOutcome(
        PartStats(part.name, ex.stats, ex.reduction_factor, getattr(canon, "group_size", 1),
                  watch.line if watch is not None else None,
                  reductions_of(canon)),
        spec,
        [k for k, f in ex.witnesses.items() if f is not None],
        [(n, f.initial, list(f.trace), f.world) for n, f in ex.violations.items()],
        [_liveness(part, spec, ex, n) for n in search.live],
        enabled, taken,
    )


def _liveness(part: ConfigPart, spec: Config, ex: Any, n: str) -> tuple[str, bool, PropertyResult | None]:
    lp = P.LIVENESS[n]
    # Scope "always": every liveness property is a leads-to (true ~> goal, see
    # spec.properties.LivenessProperty), so it must hold from EVERY reachable state,
    # not only along paths from the initial world that have not met the goal yet
    # (a run settled once may be re-enqueued/resumed in later parts of a history).
    # States where the model's horizon, not the system, stops time count as goal:
    # there the clock cannot reach the next instant something waits on, so a reaper
    # idling there would otherwise form a "fair" cycle (or a deadlock) that only the
    # bound creates. Violations away from the bound are unaffected.
    res = engine.check_liveness(
        ex,
        f"goal {n}",  # lp.goal or P.at_bound, recorded per state by explore (_goal)
        lp.predicates(spec),
        name=n,
        ignore_deadlock=f"ignore {n}" if lp.ignore_deadlock is not None else None,
        scope="always",
        strong=lp.strong_predicates(spec),
    )
    if res.holds:
        return n, res.complete, None
    trace = list(res.prefix) + list(res.cycle)
    last = trace[-1][1] if trace else res.initial
    return n, res.complete, PropertyResult(
        n, "liveness", False, part.name, part.data, res.initial, trace,
        cycle_start=len(res.prefix) if res.kind == "fair_cycle" else None,
        liveness_kind=res.kind,
        explanation=P.explain(n, res.prefix[-1][1] if res.prefix else last),
        under=lp.under,
    )


def _merge_part(results: dict[str, PropertyResult], reached: dict[str, str | None],
                part: ConfigPart, out: _PartOutcome) -> None:
    """Fold one part into the result, parts in their order: a witness is credited to the
    first part reaching it, and a property's counterexample is the shortest (the earliest
    part's among equally short ones)."""
    for k in out.witnesses:
        if reached.get(k) is None:
            reached[k] = part.name
    for n, initial, trace, world in out.violations:
        r = results[n]
        if r.holds or len(trace) < len(r.trace):
            results[n] = PropertyResult(n, "safety", False, part.name, part.data, initial, trace,
                                        explanation=P.explain(n, world))
    for n, complete, cx in out.liveness:
        r = results[n]
        r.complete = r.complete and complete
        if cx is not None and (r.holds or len(cx.trace) < len(r.trace)):
            results[n] = cx


def _coverage(outcomes: list[_PartOutcome]) -> engine.Coverage:
    """The parts' coverage counters added up, judged against the labels their
    configurations can enable."""
    cov_en: dict[str, int] = {}
    cov_tk: dict[str, int] = {}
    for o in outcomes:
        for lab, e in o.enabled.items():
            cov_en[lab] = cov_en.get(lab, 0) + e
        for lab, k in o.taken.items():
            cov_tk[lab] = cov_tk.get(lab, 0) + k
    expected = expected_labels([o.config for o in outcomes])
    exp_set = set(expected)
    return engine.Coverage(
        enabled=cov_en,
        taken=cov_tk,
        never_enabled=[x for x in expected if cov_en.get(x, 0) == 0],
        never_taken=[x for x in expected if cov_en.get(x, 0) > 0 and cov_tk.get(x, 0) == 0],
        unexpected=sorted(x for x in cov_en if x not in exp_set),
    )


def _part_task(args: tuple[ConfigPart, _Search, tuple[str, ...]]) -> _PartOutcome:
    return _check_part(*args)


def _parts_in_processes(parts: list[ConfigPart], search: _Search, witnesses: tuple[str, ...],
                        jobs: int, on_part: Callable[[str, int], None] | None,
                        ) -> list[_PartOutcome]:
    """Every part on ``jobs`` spawned processes (spec.pool.run_local: Ctrl-C and SIGTERM
    stop the workers); the outcomes in part order."""
    outcomes: dict[int, _PartOutcome] = {}

    def done(i: int, out: _PartOutcome) -> None:
        outcomes[i] = out
        if on_part is not None:
            on_part(parts[i].name, out.stats.stats.states)

    run_local(min(jobs, len(parts)), {i: (p, search, witnesses) for i, p in enumerate(parts)},
              done, task=_part_task)
    return [outcomes[i] for i in range(len(parts))]


# =========================================================================================
# counterexamples
# =========================================================================================
def _row_fields(r: Any) -> dict[str, Any]:
    if r is None:
        return {}
    return {f: getattr(r, f) for f in r.__slots__}


def diff_worlds(a: World, b: World) -> list[str]:
    """Readable changes between two worlds: ``r1.status: running -> queued``, new events,
    ledger entries, outcomes, marks, messages, processes, clock, reaper."""
    out: list[str] = []
    if a.clock != b.clock:
        out.append(f"clock: {a.clock} -> {b.clock}")
    out.extend(_diff_rows(a, b))
    out.extend(_diff_appended(a, b))
    if a.messages != b.messages:
        def fmt(ms: tuple) -> str:
            return "[" + ", ".join(f"{b.run_id(m.run)}@{m.not_before}" for m in ms) + "]"
        out.append(f"messages: {fmt(a.messages)} -> {fmt(b.messages)}")
    out.extend(_diff_procs(a, b))
    if a.reapers != b.reapers:  # each reaper whose tick moved, by name
        for n in names.reaper_names(b.config):
            ra, rb = a.reaper(n), b.reaper(n)
            if ra != rb:
                out.append(f"{n}: {ra.pc if ra else 'idle'} -> {rb.pc if rb else 'idle'}")
    if a.faults != b.faults:
        out.append(f"fault budget: {a.faults} -> {b.faults}")
    if a.removed != b.removed:
        out.append(f"removed tools: {sorted(b.removed)}")
    return out


def _diff_rows(a: World, b: World) -> list[str]:
    """Rows inserted, and each changed field of a row: ``r1.status: 'running' -> 'queued'``."""
    out: list[str] = []
    for i, (ra, rb) in enumerate(zip(a.rows, b.rows, strict=True)):
        if ra == rb:
            continue
        rid = b.run_id(i)
        if ra is None:
            out.append(f"{rid}: row inserted ({rb.status})")
            fa: dict[str, Any] = {}
        else:
            fa = _row_fields(ra)
        fb = _row_fields(rb)
        for k, v in fb.items():
            if k in fa and fa[k] != v:
                out.append(f"{rid}.{k}: {fa[k]!r} -> {v!r}" if isinstance(v, str)
                           else f"{rid}.{k}: {fa[k]} -> {v}")
    return out


def _diff_appended(a: World, b: World) -> list[str]:
    """What ``b`` appended to the append-only parts of ``a``: events, ledger entries,
    outcomes, the commands' results, marks."""
    out: list[str] = []
    for e in b.events[len(a.events):]:
        what = f" {e.tool}" if e.tool else ""
        out.append(f"event {b.run_id(e.run)}#{e.seq} {e.kind}{what} (turn {e.turn}) by {e.seg}")
    for x in b.ledger[len(a.ledger):]:
        out.append(f"LEDGER +{x.tool} ({x.effect}) {b.run_id(x.run)} turn {x.turn} call {x.call} by {x.seg}")
    for s, _i, _k, o in b.outcomes[len(a.outcomes):]:
        out.append(f"outcome {s}: {o}")
    for c in b.commands[len(a.commands):]:
        given = f" {c.uuid!r}" if c.command == TransitionName.CANCEL_COMMAND else ""
        out.append(f"command {c.actor} {c.command}{given}: {c.outcome} (exit {exit_code(c.outcome)})")
    for m in sorted(b.marks - a.marks):
        out.append(f"mark {m}")
    for x in b.made[len(a.made):]:  # a named principal's request took effect (16.18)
        rid = b.run_id(x.run)
        if x.view:
            shown = ", ".join(f"{k}={v!r}" for k, v in x.view)
            out.append(f"{x.by} read the status of {rid}: {shown}")
        elif x.request == Request.EVENTS:
            out.append(f"{x.by} read the events of {rid}: sequences {list(x.seqs)}")
        else:
            out.append(f"{x.by}'s {x.request} of {rid} took effect")
    return out


def _diff_procs(a: World, b: World) -> list[str]:
    """Processes started, moved to another pc, and ended."""
    out: list[str] = []
    pa = {p.name: p for p in a.procs}
    pb = {p.name: p for p in b.procs}
    for n, p in pb.items():
        q = pa.get(n)
        if q is None:
            out.append(f"{n}: started ({p.kind}, at {p.pc})")
        elif q.pc != p.pc:
            out.append(f"{n}: {q.pc} -> {p.pc}")
    for n in pa:
        if n not in pb:
            out.append(f"{n}: ended")
    return out


def _trace_head(r: PropertyResult) -> str:
    head = f"{r.name} violated ({r.part}, {len(r.trace)} steps): {r.explanation}"
    if r.cycle_start is not None:
        head += f"\n(the lasso's cycle starts after step {r.cycle_start})"
    elif r.liveness_kind == "deadlock":
        head += "\n(the last world is a deadlock short of the goal)"
    return head


def trace_text(r: PropertyResult) -> str:
    """The wide form of a counterexample: a table, one changed field per line
    (``check --wide``, the ``.txt`` that ``--out`` writes)."""
    assert r.initial is not None
    table = engine.trace_table(r.trace, r.initial, diff_worlds)
    return _trace_head(r) + "\n" + table


def trace_compact(r: PropertyResult, width: int = 100) -> str:
    """The compact form: one entry per step with only the fields that change, wrapped at
    ``width`` (what ``check`` prints)."""
    assert r.initial is not None
    head = [textwrap.fill(line, max(40, width), subsequent_indent="  ", break_on_hyphens=False)
            for line in _trace_head(r).splitlines()]
    return "\n".join([*head, *engine.trace_lines(r.trace, r.initial, diff_worlds, width)])


def counterexample_scenario(r: PropertyResult, policy: str | None) -> dict[str, Any]:
    """The scenario (model/scenario.py's format) that ``failclosed replay`` replays to the
    same violation, as a document: the keyword arguments of the command line's writer
    (cli/scenario_writer.py ``dump_scenario``: ``config``, ``steps``, ``expectations``,
    ``description``, ``policy``). Safety: ``violates = [name]`` after the last step.
    Liveness: the lasso's prefix, expecting the offending goal not to be met at its end."""
    assert r.data is not None
    steps = [t for t, _ in r.trace]
    if r.kind == "safety":
        exp: dict[str, Any] = {"violates": [r.name]}
    else:
        exp = {}
        last = r.trace[-1][1] if r.trace else r.initial
        if last is not None:
            exp["rows"] = {
                last.run_id(i): {"status": row.status}
                for i, row in enumerate(last.rows) if row is not None
            }
    desc = f"checker counterexample: {r.name} under {policy or r.data.get('policy', 'current')} ({r.part})"
    return {"config": r.data, "steps": steps, "expectations": exp or None, "description": desc,
            "policy": policy}


def pytest_text(r: PropertyResult, scenario_path: str, policy: str | None) -> str:
    """A ready regression test: replays the scenario through model.runtime.apply and asserts
    the violation (flip ``EXPECT_VIOLATION`` once fixed: then the trace must either stop
    being enabled or end in a world where the property holds)."""
    fn = re.sub(r"[^a-z0-9_]", "_", f"{r.name}_{policy or 'config'}".lower())
    return f'''"""Regression: {r.name} under {policy or "the configuration's policy"} ({r.part}).

Generated by `failclosed check --out`: the checker's shortest counterexample
({len(r.trace)} transitions) as a scenario file, replayed through model.runtime.apply."""

from dataclasses import replace
from pathlib import Path

from failclosed.model.scenario import load_scenario, replay
from failclosed.spec.properties import LIVENESS, SAFETY, explain

SCENARIO = Path(__file__).resolve().parent / {Path(scenario_path).name!r}
PROPERTY = {r.name!r}
EXPECT_VIOLATION = True  # False after the fix


def _holds(world):
    if PROPERTY in SAFETY:
        return SAFETY[PROPERTY].check(world)
    return LIVENESS[PROPERTY].goal(world)


def test_{fn}():
    res = replay(replace(load_scenario(SCENARIO), expect=()))
    if EXPECT_VIOLATION:
        assert not res.stopped, res.stopped
        assert not _holds(res.world), explain(PROPERTY, res.world)
    else:
        assert res.stopped or _holds(res.world)
'''


def presets() -> list[str]:
    return list(PRESET_ORDER)
