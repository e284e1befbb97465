"""The simulator's configuration: a TOML file, every field validated.

A simulator configuration describes *when* things happen and *how often* faults strike;
``model/`` still decides what every transition does. Errors are one ``ConfigError`` line,
``field: problem; fix`` (the CLI prints it and exits 2). Every table and key is optional
except ``[[tools]]`` and ``[workload] tool_mix`` (a workload needs tools). Durations are in
seconds (floats allowed); probabilities are in [0, 1]. Sizes that would exhaust memory are
refused with the limit named: ``runs.count`` and ``arrivals.size`` at most ``MAX_RUNS``,
``runs.slots`` ``MAX_SLOTS``, ``workers.count`` ``MAX_WORKERS``, every constant
``model.constants.CONSTANT_MAX`` (10^9).

Distributions (durations, and the integer counts ``rounds`` / ``calls_per_round``, which are
rounded to the nearest integer >= 1)::

    x = 2.5                                        # fixed (a bare number)
    x = {dist = "fixed", value = 2.5}
    x = {dist = "exponential", mean = 2.5}
    x = {dist = "lognormal", median = 2.0, p99 = 1200.0}   # or {mu = .., sigma = ..} (of ln x)
    x = {dist = "empirical", values = [1, 2, 2, 3]}        # uniform over the listed values

Schema (defaults in brackets)::

    policy = "current"                   # a preset, "adr-111+write_fence", ... (model.policy)
    seed = 1                             # overridden by --seed
    [constants]                          # LEASE_SECONDS, MAX_REQUEUES, ... (model.constants)
    [runs]
    count = 500                          # logical runs that arrive                     [500]
    slots = 64                           # run slots of the bounded world (windowing)    [64]
    drain_seconds = 14400                # simulated time allowed after the last arrival [14400]
    [arrivals]
    kind = "poisson"                     # poisson (rate_per_hour) | batch (size at every_seconds)
    rate_per_hour = 600.0
    size = 100                           # batch only
    every_seconds = 0                    # batch only: 0 = one batch at t=0, else a batch per period
    [workers]
    count = 8
    [transport]
    kind = "async"                       # async | sync: how dispatch wakes a run (see below)
    [bus]
    delivery_delay = 0.2                 # from dispatch (or not_before) to delivery to a worker
    duplicate_probability = 0.01         # per delivered message: the bus delivers it twice
    dispatch_failure_probability = 0.001
    dispatch_latency = 0.002
    [reaper]
    enabled = true                       # false: nobody schedules the reaper (its default upstream)
    period_seconds = 60.0
    limit = 50
    count = 1                            # reapers racing on the store (the scheduler on N hosts)
    [audit_store]
    insert_failure_probability = 0.001   # per insert (record_step, record_approval, record_input)
    ambiguous_commit_probability = 0.0   # stored, but reported as failed
    latency = 0.003
    outages = [{start = 3600.0, duration = 120.0}]   # scheduled windows: every insert fails
    [audit_store.flapping]               # optional on/off process (exponential up/down times)
    mean_up_seconds = 7200.0
    mean_down_seconds = 30.0
    [run_store]
    error_probability = 0.0005           # per statement (T1..T13, find_run, max_sequence, T10)
    latency = 0.002
    [crashes]
    worker_rate_per_hour = 0.2           # per worker process
    web_rate_per_hour = 0.0              # per interactive / resume segment (web processes)
    restart_delay = 30.0
    [pauses]
    probability = 0.0005                 # per segment step: a stall (GC, VM freeze) before it
    duration = {dist = "exponential", mean = 600.0}
    [provider]
    latency = {dist = "lognormal", median = 4.0, p99 = 60.0}
    failure_probability = 0.02
    failure_mix = {http_503 = 0.4, http_429 = 0.3, timeout = 0.1, connection_reset = 0.05,
                   circuit_open = 0.05, http_401 = 0.05, http_400 = 0.05}
                                         # concrete errors (model/classify.py spelling), each
                                         # classified by classify() (RUNTIME 13); a key
                                         # may also be a class (serverError = 0.5: the
                                         # per-class form); "fallback(http_503, http_429)"
                                         # is an exhausted fallback chain
    [[tools]]                            # model.config [[tools]] keys, plus:
    name = "create_ticket"
    effect = "non_idempotent_write"      # optional for a builtin writer (RUNTIME 14.5)
    remote = true
    server_flag = 0
    latency = {dist = "lognormal", median = 30.0, p99 = 1500.0}
    error_probability = 0.01             # the tool raises (an error result; no effect lands)
    error_mix = {http_502 = 3, timeout = 1}   # optional: which errors, for the metrics
    [workload]
    queued_fraction = 0.9                # the rest start interactively (start_run)
    rounds = {dist = "empirical", values = [1, 2, 3]}   # tool rounds before the final answer
    calls_per_round = 1
    tool_mix = {search_pages = 5, create_ticket = 1}     # weights
    cap = 20                             # optional explicit round cap
    observer_fraction = 0.0              # runs whose caller passes a step observer (7.2 step
                                         # 1: the hook at every step boundary of the run's
                                         # interactive and resume segments, not a worker's;
                                         # [faults] observer_error makes it raise)
    [workload.approvals]
    delay = {dist = "exponential", mean = 300.0}
    deny_probability = 0.1
    not_permitted_probability = 0.0      # the approver may not run the turn's writes: gate 2
                                         # refuses after the claim and releases the run
    [workload.cancels]
    probability = 0.0                    # a caller cancels the run ...
    delay = 60.0                         # ... this long after it arrived
    [workload.strangers]                 # requests by other principals (RUNTIME 16.18):
    probability = 0.0                    # the fraction of runs on which a mix of principals
    delay = 60.0                         # (a stranger, an anonymous caller, a grant holder,
                                         # service accounts with and without scopes) approve,
                                         # cancel and read, this long after the run arrived
                                         # (docs/SIMULATOR.md; refusals counted by kind)
    [faults]                             # any other declared fault kind (model/steps.py FAULTS),
    decode_error = 0.001                 # by name: its probability at each step that may take
    observer_error = 0.0                 # it now (its faults / faults_now), drawn by the
                                         # component the step touches after its own faults
                                         # (sim/faults.py); a kind with a knob of its own above
                                         # (store_error: run_store.error_probability, ...) is
                                         # set there

Transports (RUNTIME 6.3; the model's ``[model] transport``). ``async`` (the default
here): every dispatch puts a message on the bus, delivered to a free worker after
``bus.delivery_delay``, possibly twice (``bus.duplicate_probability``). ``sync`` (the
runtime's own default): ``dispatch`` runs the handler inline in the dispatching process,
ignoring any delay: the enqueue caller runs the whole run before enqueue returns (and is
exposed to ``crashes.web_rate_per_hour`` while it does), recovery runs its retry nested in
the failing segment's process, and the reaper runs a reclaimed run before its next row. No
message is ever sent, so the workers stay idle and the bus's delivery delay and duplicates
do not apply; ``bus.dispatch_failure_probability`` and ``bus.dispatch_latency`` still do.
``none`` (RUNTIME 6.4): no bus is wired. Every enqueue fails up front (EnqueueFailed,
nothing stored: the run ends ``never_stored``) and every reaper tick fails before its
SELECT; interactive runs run as usual. The result counts both (``"refusals"``, and a line
of the report).
"""

from __future__ import annotations

import copy
import difflib
import math
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

from failclosed.model.classify import BadError, mix_entry
from failclosed.model.config import (
    REQUEST_REFUSALS,
    ConfigError,
    check_keys,
    constants_of,
    policy_of,
    read_toml,
    tool_of,
)
from failclosed.model.state import FAILURE_CLASSES, TRANSPORTS, Config, RunSpec
from failclosed.model.steps import fault_kinds
from failclosed.model.vocab import ActorKind, FaultKind

Z99 = 2.3263478740408408  # the standard normal's 0.99 quantile

# Sizes refused up front, before any memory is taken (each names its limit in the error):
# every step of the simulated World copies its tuples of run slots, every worker is a
# SimPy process, every arrival is kept in the metrics.
MAX_SLOTS = 10_000
MAX_WORKERS = 10_000
MAX_RUNS = 10_000_000


# -- distributions --------------------------------------------------------------------------
@dataclass(frozen=True)
class Dist:
    """A sampled duration (seconds) or count. ``kind``: fixed, exponential, lognormal, empirical."""

    kind: str
    a: float = 0.0  # fixed: value; exponential: mean; lognormal: mu
    b: float = 0.0  # lognormal: sigma
    values: tuple[float, ...] = ()

    def sample(self, rng) -> float:
        k = self.kind
        if k == "fixed":
            return self.a
        if k == "exponential":
            return rng.expovariate(1.0 / self.a) if self.a > 0 else 0.0
        if k == "lognormal":
            return rng.lognormvariate(self.a, self.b)
        return self.values[int(rng.random() * len(self.values))]

    def sample_count(self, rng) -> int:
        return max(1, int(round(self.sample(rng))))

    def quantile(self, q: float) -> float:
        """For documentation and plots (e.g. does a tool's tail cross the lease?)."""
        if self.kind == "fixed":
            return self.a
        if self.kind == "exponential":
            return -self.a * math.log(1 - q)
        if self.kind == "lognormal":
            return math.exp(self.a + self.b * NormalDist().inv_cdf(q))
        vs = sorted(self.values)
        return vs[min(len(vs) - 1, int(q * len(vs)))]

    def mean(self) -> float:
        if self.kind == "fixed":
            return self.a
        if self.kind == "exponential":
            return self.a
        if self.kind == "lognormal":
            return math.exp(self.a + self.b * self.b / 2)
        return sum(self.values) / len(self.values)


ZERO = Dist("fixed", 0.0)


# -- the validated configuration -------------------------------------------------------------
@dataclass(frozen=True)
class ToolConf:
    name: str
    model: dict[str, Any]  # the model.config [[tools]] table (name, effect, remote, ...)
    latency: Dist
    error_probability: float
    # which error a failing call raises: (spelling, class, weight); empty: unspecified
    error_mix: tuple[tuple[str, str, float], ...] = ()


@dataclass(frozen=True)
class SimConfig:
    """A simulator configuration, validated: the model's ``Config`` of the simulated world
    (``model``: policy, constants, tools, workers, reapers, transport, one run spec per
    slot; parsed by model/config.py's readers, the one validator of each of its fields) and
    the simulator's own timing and workload. The fault kinds the world may take are the
    environment's to say (sim/faults.py), so ``model`` has none: sim/engine.py adds them."""

    raw: dict[str, Any]
    model: Config
    seed: int = 1
    runs: int = 500
    slots: int = 64
    drain_seconds: float = 14400.0
    arrival_kind: str = "poisson"
    rate_per_hour: float = 600.0
    batch_size: int = 100
    batch_every: float = 0.0
    delivery_delay: Dist = ZERO
    duplicate_probability: float = 0.0
    dispatch_failure_probability: float = 0.0
    dispatch_latency: Dist = ZERO
    reaper_enabled: bool = True
    reaper_period: float = 60.0
    audit_failure_probability: float = 0.0
    ambiguous_commit_probability: float = 0.0
    audit_latency: Dist = ZERO
    audit_outages: tuple[tuple[float, float], ...] = ()
    audit_mean_up: float = 0.0  # 0: no on/off process
    audit_mean_down: float = 0.0
    store_error_probability: float = 0.0
    store_latency: Dist = ZERO
    worker_crash_rate: float = 0.0  # per hour
    web_crash_rate: float = 0.0
    restart_delay: Dist = ZERO
    pause_probability: float = 0.0
    pause_duration: Dist = ZERO
    provider_latency: Dist = ZERO
    provider_failure_probability: float = 0.0
    # (key, weight): a key is a failure class (the per-class form) or a concrete error's
    # spelling; failure_class maps each key to its class (classify, RUNTIME 13)
    failure_mix: tuple[tuple[str, float], ...] = ()
    failure_class: dict[str, str] = field(default_factory=dict)
    tools: tuple[ToolConf, ...] = ()
    queued_fraction: float = 1.0
    rounds: Dist = Dist("fixed", 1.0)
    calls_per_round: Dist = Dist("fixed", 1.0)
    tool_mix: tuple[tuple[str, float], ...] = ()
    cap: int | None = None
    approval_delay: Dist = ZERO
    deny_probability: float = 0.0
    not_permitted_probability: float = 0.0
    cancel_probability: float = 0.0
    cancel_delay: Dist = ZERO
    stranger_probability: float = 0.0  # [workload.strangers]: requests by other principals
    stranger_delay: Dist = ZERO
    observer_fraction: float = 0.0
    # [faults]: (kind, probability at each step that may take it), in the table's order
    fault_probabilities: tuple[tuple[str, float], ...] = ()

    @property
    def policy(self) -> str:
        """The configuration's policy, by name (``--policy`` may simulate another)."""
        return self.model.policy.name

    @property
    def workers(self) -> int:
        """``[workers] count``: the model's workers (``w1`` .. ``wN``)."""
        return len(self.model.workers)

    @property
    def transport(self) -> str:
        """``[transport] kind``, as the model holds it."""
        return self.model.transport

    @property
    def reapers(self) -> int:
        """``[reaper] count``: reapers racing on the store (names from model.names)."""
        return self.model.reapers

    @property
    def reaper_limit(self) -> int:
        """``[reaper] limit``: rows a tick reads (absent: ``constants.REAPER_DEFAULT_LIMIT``)."""
        return self.model.reaper_limit

    def lease_seconds(self) -> int:
        """``LEASE_SECONDS``, as the model reads it (its default: model/constants.py)."""
        return self.model.constants.LEASE_SECONDS

    def tool(self, name: str) -> ToolConf:
        for t in self.tools:
            if t.name == name:
                return t
        raise KeyError(name)


# -- validation helpers ----------------------------------------------------------------------
_unknown = check_keys  # one rule for every config of the project (model/config.py)


def _table(d: dict, key: str, where: str = "") -> dict:
    v = d.get(key, {})
    if not isinstance(v, dict):
        raise ConfigError(f"{where}{key}: expected a table, got {v!r}; write [{where}{key}]")
    return v


def _num(v: Any, f: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ConfigError(f"{f}: expected a number, got {v!r}; write e.g. {f.split('.')[-1]} = 1.5")
    if math.isnan(v) or math.isinf(v):
        raise ConfigError(f"{f}: {v!r} is not finite; give a finite number")
    return float(v)


def _dur(v: Any, f: str) -> float:
    x = _num(v, f)
    if x < 0:
        raise ConfigError(f"{f}: negative duration {v!r}; durations are seconds >= 0")
    return x


def _pos(v: Any, f: str) -> float:
    x = _num(v, f)
    if x <= 0:
        raise ConfigError(f"{f}: must be > 0, got {v!r}; give a positive number")
    return x


def _prob(v: Any, f: str) -> float:
    x = _num(v, f)
    if not 0.0 <= x <= 1.0:
        raise ConfigError(f"{f}: probability {v!r} outside [0, 1]; give a value between 0 and 1")
    return x


def _int(v: Any, f: str, lo: int = 0, hi: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ConfigError(f"{f}: expected an integer, got {v!r}; write e.g. {f.split('.')[-1]} = {max(lo, 1)}")
    if v < lo:
        raise ConfigError(f"{f}: must be >= {lo}, got {v}; give an integer >= {lo}")
    if hi is not None and v > hi:
        raise ConfigError(f"{f}: {v:,} is above the limit of {hi:,}; give an integer <= {hi:,}")
    return v


def _bool(v: Any, f: str) -> bool:
    if not isinstance(v, bool):
        raise ConfigError(f"{f}: expected true or false, got {v!r}; write {f.split('.')[-1]} = true")
    return v


def _str(v: Any, f: str, choices: tuple[str, ...] | None = None) -> str:
    if not isinstance(v, str):
        raise ConfigError(f"{f}: expected a string, got {v!r}; write {f.split('.')[-1]} = \"...\"")
    if choices is not None and v not in choices:
        raise ConfigError(f"{f}: {v!r} is not allowed; use one of {', '.join(choices)}")
    return v


DIST_KEYS = {
    "fixed": {"dist", "value"},
    "exponential": {"dist", "mean"},
    "lognormal": {"dist", "median", "p99", "mu", "sigma"},
    "empirical": {"dist", "values"},
}


def parse_dist(v: Any, f: str) -> Dist:
    """A distribution of non-negative values (see the module docstring)."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        return Dist("fixed", _dur(v, f))
    if not isinstance(v, dict):
        raise ConfigError(f"{f}: expected a number or a table such as {{dist = \"exponential\", mean = 1.0}}, got {v!r}; see sim/config.py")
    kind = v.get("dist")
    if kind is None:
        raise ConfigError(f"{f}.dist: missing; give dist = fixed | exponential | lognormal | empirical")
    _str(kind, f + ".dist", tuple(DIST_KEYS))
    _unknown(v, DIST_KEYS[kind], f + ".")
    if kind == "fixed":
        return Dist("fixed", _dur(v.get("value", 0.0), f + ".value"))
    if kind == "exponential":
        if "mean" not in v:
            raise ConfigError(f"{f}.mean: missing; give the mean in seconds")
        return Dist("exponential", _dur(v["mean"], f + ".mean"))
    if kind == "lognormal":
        if "median" in v or "p99" in v:
            if "mu" in v or "sigma" in v:
                raise ConfigError(f"{f}: give either median and p99, or mu and sigma; not both")
            if "median" not in v or "p99" not in v:
                raise ConfigError(f"{f}: lognormal needs both median and p99; add the missing one")
            med = _pos(v["median"], f + ".median")
            p99 = _pos(v["p99"], f + ".p99")
            if p99 < med:
                raise ConfigError(f"{f}.p99: {p99} is below the median {med}; the p99 must be >= the median")
            mu = math.log(med)
            return Dist("lognormal", mu, (math.log(p99) - mu) / Z99)
        if "mu" not in v or "sigma" not in v:
            raise ConfigError(f"{f}: lognormal needs median and p99 (or mu and sigma); add them")
        return Dist("lognormal", _num(v["mu"], f + ".mu"), _dur(v["sigma"], f + ".sigma"))
    vals = v.get("values")
    if not isinstance(vals, list) or not vals:
        raise ConfigError(f"{f}.values: expected a non-empty list of numbers, got {vals!r}; write values = [1.0, 2.0]")
    return Dist("empirical", values=tuple(_dur(x, f"{f}.values[{k}]") for k, x in enumerate(vals)))


def _weights(v: Any, f: str, allowed: tuple[str, ...] | None) -> tuple[tuple[str, float], ...]:
    if not isinstance(v, dict):
        raise ConfigError(f"{f}: expected a table of name = weight, got {v!r}; write {f.split('.')[-1]} = {{name = 1.0}}")
    out = []
    for k, x in v.items():
        if allowed is not None and k not in allowed:
            near = difflib.get_close_matches(k, list(allowed), n=1)
            hint = f"did you mean {near[0]!r}?" if near else f"use one of {', '.join(allowed)}"
            raise ConfigError(f"{f}.{k}: unknown name; {hint}")
        w = _num(x, f"{f}.{k}")
        if w < 0:
            raise ConfigError(f"{f}.{k}: negative weight {x!r}; weights are >= 0")
        out.append((k, w))
    return tuple(out)


def _error_mix(v: Any, f: str) -> tuple[tuple[tuple[str, float], ...], dict[str, str]]:
    """A failure mix: ``name = weight`` where a name is a failure class (the per-class form,
    RUNTIME 13) or a concrete error (``http_503``, ``timeout``, ``circuit_open``,
    ``"fallback(http_503, http_429)"``: model/classify.py). Returns the entries in order, a
    concrete error under its canonical spelling, and each entry's class."""
    if not isinstance(v, dict):
        raise ConfigError(f"{f}: expected a table of error = weight, got {v!r}; write {f.split('.')[-1]} = {{http_503 = 1.0}}")
    out: list[tuple[str, float]] = []
    classes: dict[str, str] = {}
    for k, x in v.items():
        try:
            cls, spelling = mix_entry(k)
        except BadError as e:
            raise ConfigError(f"{f}.{k}: {e}; or name a failure class ({', '.join(FAILURE_CLASSES)})") from None
        key = spelling or k
        if key in classes:
            raise ConfigError(f"{f}.{k}: the same error as an earlier entry ({key!r}); merge their weights")
        w = _num(x, f"{f}.{k}")
        if w < 0:
            raise ConfigError(f"{f}.{k}: negative weight {x!r}; weights are >= 0")
        out.append((key, w))
        classes[key] = cls
    return tuple(out), classes


TOP = {
    "policy", "seed", "description", "constants", "runs", "arrivals", "workers", "transport",
    ActorKind.BUS, ActorKind.REAPER, "audit_store", "run_store", "crashes", "pauses", "provider", "tools",
    "workload", "faults",
}
MODEL_TOOL_KEYS = {"name", "effect", "remote", "approval", "server_flag", "needs_input", "removable"}


def load(data: dict[str, Any]) -> SimConfig:
    """Validate a parsed TOML table; raises ``ConfigError`` (one line) on the first problem.
    The tables are read in the order of the schema above, each by its own function."""
    if not isinstance(data, dict):
        raise ConfigError("config: expected a TOML table; see sim/configs/default.toml")
    _unknown(data, TOP, "")
    kw: dict[str, Any] = {"raw": data}
    policy = _head(data, kw)
    constants = constants_of(data)  # the model's reader of [constants]
    for section in (_runs, _arrivals, _workers, _transport, _bus, _reaper,
                    _audit_store, _run_store, _crashes, _pauses, _provider):
        kw.update(section(data))
    tools, model_tools = _tools(data)
    kw["tools"] = tools
    kw.update(_workload(data, tuple(sorted(t.name for t in tools))))
    kw.update(_faults(data))
    limit = kw.pop("reaper_limit", constants.REAPER_DEFAULT_LIMIT)
    kw["model"] = Config(
        policy=policy, constants=constants, tools=model_tools,
        # a free run slot: a queued run with the default plan (sim/window.py admits a run
        # into it by replacing its spec)
        runs=tuple(RunSpec(id=f"_slot{i}", entry="queued") for i in range(kw["slots"])),
        workers=tuple(f"w{k + 1}" for k in range(kw.pop("workers"))),
        reaper_limit=limit, reapers=kw.pop("reapers"), transport=kw.pop("transport"),
        # gate 2 (12.2 step 8): approvers who may not run the turn's writes
        refusals=frozenset({NOT_PERMITTED}) if kw["not_permitted_probability"] > 0 else frozenset())
    return SimConfig(**kw)


NOT_PERMITTED = "ApproverNotPermitted"  # the refusal of gate 2 (model/state.py REQUEST_REFUSALS)
assert NOT_PERMITTED in REQUEST_REFUSALS


def _head(data: dict[str, Any], kw: dict[str, Any]) -> Any:
    """The top-level keys: ``description``, ``seed`` (into ``kw``) and ``policy`` (read by
    the model's reader; returned)."""
    if "description" in data:
        _str(data["description"], "description")
    policy = policy_of(data)
    kw["seed"] = _int(data.get("seed", 1), "seed")
    return policy


def _runs(data: dict[str, Any]) -> dict[str, Any]:
    r = _table(data, "runs")
    _unknown(r, {"count", "slots", "drain_seconds"}, "runs.")
    return {
        "runs": _int(r.get("count", 500), "runs.count", 1, MAX_RUNS),
        "slots": _int(r.get("slots", 64), "runs.slots", 1, MAX_SLOTS),
        "drain_seconds": _dur(r.get("drain_seconds", 14400.0), "runs.drain_seconds"),
    }


def _arrivals(data: dict[str, Any]) -> dict[str, Any]:
    a = _table(data, "arrivals")
    _unknown(a, {"kind", "rate_per_hour", "size", "every_seconds"}, "arrivals.")
    return {
        "arrival_kind": _str(a.get("kind", "poisson"), "arrivals.kind", ("poisson", "batch")),
        "rate_per_hour": _pos(a.get("rate_per_hour", 600.0), "arrivals.rate_per_hour"),
        "batch_size": _int(a.get("size", 100), "arrivals.size", 1, MAX_RUNS),
        "batch_every": _dur(a.get("every_seconds", 0.0), "arrivals.every_seconds"),
    }


def _workers(data: dict[str, Any]) -> dict[str, Any]:
    w = _table(data, "workers")
    _unknown(w, {"count"}, "workers.")
    return {"workers": _int(w.get("count", 8), "workers.count", 1, MAX_WORKERS)}


def _transport(data: dict[str, Any]) -> dict[str, Any]:
    tr = _table(data, "transport")
    _unknown(tr, {"kind"}, "transport.")
    return {"transport": _str(tr.get("kind", "async"), "transport.kind", TRANSPORTS)}


def _bus(data: dict[str, Any]) -> dict[str, Any]:
    b = _table(data, ActorKind.BUS)
    _unknown(b, {"delivery_delay", "duplicate_probability", "dispatch_failure_probability", "dispatch_latency"}, "bus.")
    return {
        "delivery_delay": parse_dist(b.get("delivery_delay", 0.2), "bus.delivery_delay"),
        "duplicate_probability": _prob(b.get("duplicate_probability", 0.0), "bus.duplicate_probability"),
        "dispatch_failure_probability": _prob(b.get("dispatch_failure_probability", 0.0),
                                              "bus.dispatch_failure_probability"),
        "dispatch_latency": parse_dist(b.get("dispatch_latency", 0.0), "bus.dispatch_latency"),
    }


def _reaper(data: dict[str, Any]) -> dict[str, Any]:
    rp = _table(data, ActorKind.REAPER)
    _unknown(rp, {"enabled", "period_seconds", "limit", "count"}, "reaper.")
    return {
        "reaper_enabled": _bool(rp.get("enabled", True), "reaper.enabled"),
        "reaper_period": _pos(rp.get("period_seconds", 60.0), "reaper.period_seconds"),
        # absent: the model's default limit (constants.REAPER_DEFAULT_LIMIT), set in load
        **({"reaper_limit": _int(rp["limit"], "reaper.limit", 1)} if "limit" in rp else {}),
        "reapers": _int(rp.get("count", 1), "reaper.count", 1),
    }


def _audit_store(data: dict[str, Any]) -> dict[str, Any]:
    """``[audit_store]``: failure probabilities, latency, outage windows and the optional
    ``[audit_store.flapping]`` on/off process."""
    au = _table(data, "audit_store")
    _unknown(au, {"insert_failure_probability", "ambiguous_commit_probability", "latency", "outages", "flapping"}, "audit_store.")
    kw: dict[str, Any] = {}
    kw["audit_failure_probability"] = _prob(au.get("insert_failure_probability", 0.0), "audit_store.insert_failure_probability")
    kw["ambiguous_commit_probability"] = _prob(au.get("ambiguous_commit_probability", 0.0), "audit_store.ambiguous_commit_probability")
    if kw["audit_failure_probability"] + kw["ambiguous_commit_probability"] > 1:
        raise ConfigError("audit_store.ambiguous_commit_probability: together with insert_failure_probability it exceeds 1; lower one of them")
    kw["audit_latency"] = parse_dist(au.get("latency", 0.0), "audit_store.latency")
    kw["audit_outages"] = _outages(au.get("outages", []))
    fl = _table(au, "flapping", "audit_store.")
    _unknown(fl, {"mean_up_seconds", "mean_down_seconds"}, "audit_store.flapping.")
    if fl:
        if "mean_up_seconds" not in fl or "mean_down_seconds" not in fl:
            raise ConfigError("audit_store.flapping: needs mean_up_seconds and mean_down_seconds; add the missing key")
        kw["audit_mean_up"] = _pos(fl["mean_up_seconds"], "audit_store.flapping.mean_up_seconds")
        kw["audit_mean_down"] = _pos(fl["mean_down_seconds"], "audit_store.flapping.mean_down_seconds")
    return kw


def _outages(outs: Any) -> tuple[tuple[float, float], ...]:
    """``audit_store.outages``: the (start, duration) windows, sorted."""
    if not isinstance(outs, list):
        raise ConfigError(f"audit_store.outages: expected a list of {{start, duration}} tables, got {outs!r}; write outages = [{{start = 3600, duration = 60}}]")
    windows = []
    for k, o in enumerate(outs):
        f = f"audit_store.outages[{k}]"
        if not isinstance(o, dict):
            raise ConfigError(f"{f}: expected a table {{start, duration}}, got {o!r}; write {{start = 3600, duration = 60}}")
        _unknown(o, {"start", "duration"}, f + ".")
        if "start" not in o or "duration" not in o:
            raise ConfigError(f"{f}: needs start and duration (seconds); add the missing key")
        windows.append((_dur(o["start"], f + ".start"), _dur(o["duration"], f + ".duration")))
    return tuple(sorted(windows))


def _run_store(data: dict[str, Any]) -> dict[str, Any]:
    rs = _table(data, "run_store")
    _unknown(rs, {"error_probability", "latency"}, "run_store.")
    return {
        "store_error_probability": _prob(rs.get("error_probability", 0.0), "run_store.error_probability"),
        "store_latency": parse_dist(rs.get("latency", 0.0), "run_store.latency"),
    }


def _crashes(data: dict[str, Any]) -> dict[str, Any]:
    c = _table(data, "crashes")
    _unknown(c, {"worker_rate_per_hour", "web_rate_per_hour", "restart_delay"}, "crashes.")
    return {
        "worker_crash_rate": _dur(c.get("worker_rate_per_hour", 0.0), "crashes.worker_rate_per_hour"),
        "web_crash_rate": _dur(c.get("web_rate_per_hour", 0.0), "crashes.web_rate_per_hour"),
        "restart_delay": parse_dist(c.get("restart_delay", 30.0), "crashes.restart_delay"),
    }


def _pauses(data: dict[str, Any]) -> dict[str, Any]:
    p = _table(data, "pauses")
    _unknown(p, {"probability", "duration"}, "pauses.")
    return {
        "pause_probability": _prob(p.get("probability", 0.0), "pauses.probability"),
        "pause_duration": parse_dist(p.get("duration", 0.0), "pauses.duration"),
    }


def _provider(data: dict[str, Any]) -> dict[str, Any]:
    """``[provider]``: latency, failure probability and the failure mix (zero weights dropped)."""
    pv = _table(data, "provider")
    _unknown(pv, {"latency", "failure_probability", "failure_mix"}, "provider.")
    latency = parse_dist(pv.get("latency", 1.0), "provider.latency")
    prob = _prob(pv.get("failure_probability", 0.0), "provider.failure_probability")
    mix, classes = _error_mix(pv.get("failure_mix", {"serverError": 1.0}), "provider.failure_mix")
    if prob > 0 and not any(x > 0 for _, x in mix):
        raise ConfigError("provider.failure_mix: all weights are 0 but failure_probability > 0; give an error a positive weight")
    return {
        "provider_latency": latency, "provider_failure_probability": prob,
        "failure_mix": tuple((k, x) for k, x in mix if x > 0), "failure_class": classes,
    }


def _tools(data: dict[str, Any]) -> tuple[tuple[ToolConf, ...], tuple[Any, ...]]:
    """The ``[[tools]]`` tables (at least one), names unique: the simulator's view of each
    and the model's (``Tool``)."""
    tools = data.get("tools", [])
    if not isinstance(tools, list) or not tools:
        raise ConfigError("tools: expected a non-empty array of [[tools]] tables; add at least one [[tools]] with a name")
    tconfs: list[ToolConf] = []
    model_tools = []
    for k, t in enumerate(tools):
        tconf, tool = _tool(t, f"tools[{k}]", {x.name for x in tconfs})
        tconfs.append(tconf)
        model_tools.append(tool)
    return tuple(tconfs), tuple(model_tools)


def _tool(t: Any, f: str, taken: set[str]) -> tuple[ToolConf, Any]:
    """One ``[[tools]]`` table: the model's keys (read by model/config.py ``tool_of``) and
    the simulator's; ``taken``: the names of the tools before it."""
    if not isinstance(t, dict):
        raise ConfigError(f"{f}: expected a table, got {t!r}; write [[tools]]")
    _unknown(t, MODEL_TOOL_KEYS | {"latency", "error_probability", "error_mix"}, f + ".")
    model_tab = {kk: vv for kk, vv in t.items() if kk in MODEL_TOOL_KEYS}
    tool = tool_of(model_tab, f, taken)
    for bk in ("needs_input", "removable"):
        if t.get(bk):
            raise ConfigError(f"{f}.{bk}: not simulated (no process submits input or removes tools); remove it or set it to false")
    emix = _tool_error_mix(t["error_mix"], f + ".error_mix") if "error_mix" in t else ()
    return ToolConf(
        name=tool.name, model=model_tab,
        latency=parse_dist(t.get("latency", 0.5), f + ".latency"),
        error_probability=_prob(t.get("error_probability", 0.0), f + ".error_probability"),
        error_mix=emix,
    ), tool


def _tool_error_mix(v: Any, f: str) -> tuple[tuple[str, str, float], ...]:
    """A tool's ``error_mix``: (spelling, class, weight), zero weights dropped."""
    m, cls = _error_mix(v, f)
    if not any(x > 0 for _, x in m):
        raise ConfigError(f"{f}: every weight is 0; give an error a positive weight")
    return tuple((k, cls[k], x) for k, x in m if x > 0)


def _workload(data: dict[str, Any], tool_names: tuple[str, ...]) -> dict[str, Any]:
    """``[workload]`` and its ``approvals``, ``cancels`` and ``strangers`` tables; ``tool_mix`` weighs
    ``tool_names`` (the [[tools]])."""
    wl = _table(data, "workload")
    _unknown(wl, {"queued_fraction", "rounds", "calls_per_round", "tool_mix", "cap", "approvals", "cancels",
                  "observer_fraction", "strangers"}, "workload.")
    kw: dict[str, Any] = {}
    kw["queued_fraction"] = _prob(wl.get("queued_fraction", 1.0), "workload.queued_fraction")
    kw["rounds"] = parse_dist(wl.get("rounds", 1), "workload.rounds")
    kw["calls_per_round"] = parse_dist(wl.get("calls_per_round", 1), "workload.calls_per_round")
    if "tool_mix" not in wl:
        raise ConfigError("workload.tool_mix: missing; give weights such as tool_mix = {search_pages = 3}")
    tmix = _weights(wl["tool_mix"], "workload.tool_mix", tool_names)
    if not any(x > 0 for _, x in tmix):
        raise ConfigError("workload.tool_mix: every weight is 0; give a tool a positive weight")
    kw["tool_mix"] = tuple((k, x) for k, x in tmix if x > 0)
    if "cap" in wl:
        kw["cap"] = _int(wl["cap"], "workload.cap", 1)
    kw["observer_fraction"] = _prob(wl.get("observer_fraction", 0.0), "workload.observer_fraction")
    ap = _table(wl, "approvals", "workload.")
    _unknown(ap, {"delay", "deny_probability", "not_permitted_probability"}, "workload.approvals.")
    kw["approval_delay"] = parse_dist(ap.get("delay", 60.0), "workload.approvals.delay")
    kw["deny_probability"] = _prob(ap.get("deny_probability", 0.0), "workload.approvals.deny_probability")
    kw["not_permitted_probability"] = _prob(ap.get("not_permitted_probability", 0.0),
                                            "workload.approvals.not_permitted_probability")
    ca = _table(wl, "cancels", "workload.")
    _unknown(ca, {"probability", "delay"}, "workload.cancels.")
    kw["cancel_probability"] = _prob(ca.get("probability", 0.0), "workload.cancels.probability")
    kw["cancel_delay"] = parse_dist(ca.get("delay", 60.0), "workload.cancels.delay")
    st = _table(wl, "strangers", "workload.")
    _unknown(st, {"probability", "delay"}, "workload.strangers.")
    kw["stranger_probability"] = _prob(st.get("probability", 0.0), "workload.strangers.probability")
    kw["stranger_delay"] = parse_dist(st.get("delay", 60.0), "workload.strangers.delay")
    return kw


# The fault kinds a component of the environment (sim/faults.py) draws from a knob of its
# own -> that knob ([faults] refuses these kinds, naming the knob; each component's ``owns``).
KNOBS: dict[str, str] = {
    FaultKind.STORE_ERROR: "run_store.error_probability",
    FaultKind.AUDIT_INSERT_FAILS: "audit_store.insert_failure_probability (or outages, flapping)",
    FaultKind.AMBIGUOUS_COMMIT: "audit_store.ambiguous_commit_probability",
    FaultKind.PROVIDER_ERROR: "provider.failure_probability",
    FaultKind.TOOL_ERROR: "tools[].error_probability",
    FaultKind.DISPATCH_FAILS: "bus.dispatch_failure_probability",
    FaultKind.DUPLICATE_MESSAGE: "bus.duplicate_probability",
    FaultKind.CRASH: "crashes.worker_rate_per_hour and crashes.web_rate_per_hour",
    FaultKind.PAUSE: "pauses.probability",
    FaultKind.SLOW_OPERATION: "the provider's and the tools' latencies (a call past the lease)",
}


def _faults(data: dict[str, Any]) -> dict[str, Any]:
    """``[faults]``: ``kind = probability`` for fault kinds declared in ``model/steps.py``
    ``FAULTS`` (read now: a kind declared at run time is accepted at once).
    A kind a component draws from a knob of its own (``KNOBS``) is refused, naming the knob."""
    ft = _table(data, "faults")
    kinds = fault_kinds()
    out = []
    for k, v in ft.items():
        if k not in kinds:
            near = difflib.get_close_matches(k, list(kinds), n=1)
            hint = f"did you mean {near[0]!r}?" if near else f"use one of {', '.join(kinds)}"
            raise ConfigError(f"faults.{k}: unknown fault kind; {hint} (declared in model/steps.py FAULTS)")
        if k in KNOBS:
            raise ConfigError(f"faults.{k}: {KNOBS[k]} sets it; set it there and remove faults.{k}")
        out.append((k, _prob(v, f"faults.{k}")))
    return {"fault_probabilities": tuple(out)}


def load_file(path: str) -> SimConfig:
    return load(read_toml(path))


def default_path() -> str:
    return str(Path(__file__).resolve().parent / "configs" / "default.toml")


def with_overrides(data: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``data`` with dotted keys set (``runs.count=100``, ``constants.LEASE_SECONDS=300``,
    ``tools.create_ticket.latency.p99=2000``: a [[tools]] entry is addressed by its name)."""
    out = copy.deepcopy(data)
    for key, value in params.items():
        parts = key.split(".")
        cur: Any = out
        for k, part in enumerate(parts[:-1]):
            if isinstance(cur, list):
                match = [x for x in cur if isinstance(x, dict) and x.get("name") == part]
                if not match:
                    raise ConfigError(f"{'.'.join(parts[:k + 1])}: no [[tools]] entry named {part!r}; use a tool's name")
                cur = match[0]
                continue
            if not isinstance(cur, dict):
                raise ConfigError(f"{key}: {'.'.join(parts[:k])} is not a table; address a table field")
            nxt = cur.get(part)
            if nxt is None:
                nxt = cur[part] = {}
            elif isinstance(nxt, int | float) and not isinstance(nxt, bool):
                nxt = cur[part] = {"dist": "fixed", "value": nxt}
            cur = nxt
        if not isinstance(cur, dict):
            raise ConfigError(f"{key}: cannot set a field here; address a table field")
        cur[parts[-1]] = value
    return out
