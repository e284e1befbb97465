"""Baselines: the violations a project knows about and accepts for a stated reason, so that
a CI job fails only on a new one.

A baseline is a TOML file of ``[[known]]`` entries (spec/baselines/current.toml is the
shipped one)::

    [[known]]
    policy = "current"                                  # or policies = ["adr-112", ...]
    property = "no_write_applied_twice_without_audit"   # or properties = [...]
    finding = "F1"                                      # optional
    config = "small"                                    # optional: where it was observed
    variants = true                                     # optional: see below
    reason = "FINDINGS.md F1: a crash between a write's fence clear and its audit insert ..."

Policies are compared as written on the command line (``current`` and ``adr-141`` are two
names of one policy: list both, as current.toml does). An entry with ``variants = true``
accepts its violation under every variant of its policies too (``PRESET+switch`` /
``PRESET-switch``: ``current-write_fence`` is judged against the entries of ``current``
that say so): a finding no switch touches (F2, F3 in current.toml) stays known when a
variant is checked, and a violation the variant brings is new. Such an entry is reported as
fixed only under its own policies, never because a variant holds. ``load_baseline(path)`` validates it
like a configuration (one ``ConfigError`` line naming
the entry, the field and the fix). ``Baseline.compare(cells)`` takes what a command observed,
``{(policy, property): violated}``, and sorts it into

* known: violated and listed (accepted),
* new: violated and not listed (a regression: exit 1),
* fixed: listed but holding now after a complete search (a warning: the entry can go),
* not reached: listed and holding, but the search that would have found it was cut short
  (``incomplete``: why, e.g. ``--max-states``): no verdict on the entry, and the reason.

An entry whose (policy, property) was not checked is not judged at all; nor is an entry with
a ``config`` when another configuration was checked: a violation is accepted on any
configuration, but that it holds only means "fixed" on the configuration it was observed on
(a smaller one may simply not reach it), and only under the entry's own policy (never
because a variant holds). ``Comparison.matched`` maps each observed violated cell to the
entry accepting it (a variant's cell to its preset's entry).

Any command that judges (policy, property) cells can use it: ``check``, ``matrix`` and
``mutants`` (cli/check.py), ``simulate`` (its observed violations per policy), ``scope``.
:func:`write_baseline` records observed violations as a baseline to start from.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from failclosed.model.config import ConfigError, check_keys, read_toml
from failclosed.model.policy import UnknownPolicy, parse_policy, split_policy
from failclosed.spec.properties import LIVENESS, SAFETY

__all__ = ["BASELINE_DIR", "Baseline", "Comparison", "Known", "baseline_text", "load_baseline",
           "resolve_baseline", "write_baseline"]

Cell = tuple[str, str]  # (policy, property)

BASELINE_KEYS = frozenset({"known", "description"})
ENTRY_KEYS = {"policy", "policies", "property", "properties", "finding", "config", "reason",
              "variants"}


@dataclass(frozen=True)
class Known:
    """One accepted violation: ``property`` is violated under ``policy`` for ``reason``
    (observed on ``config``: only there does a holding cell make it "fixed")."""

    policy: str
    property: str
    reason: str
    finding: str | None = None
    config: str | None = None
    variants: bool = False  # accepts the violation under PRESET+switch / PRESET-switch too

    @property
    def cell(self) -> Cell:
        return (self.policy, self.property)

    def accepts(self, policy: str, prop: str) -> bool:
        """Is (policy, prop) this entry's cell, or (``variants``) a variant of its policy?"""
        if prop != self.property:
            return False
        if policy == self.policy:
            return True
        if not self.variants:
            return False
        try:
            return split_policy(policy)[0] == self.policy
        except UnknownPolicy:
            return False

    def judged_on(self, config: str | None) -> bool:
        """May a holding cell on ``config`` report this entry as fixed?"""
        return self.config is None or self.config == config

    def label(self) -> str:
        f = f" [{self.finding}]" if self.finding else ""
        return f"{self.policy} / {self.property}{f}"


@dataclass
class Comparison:
    """Observed cells against a baseline (see the module docstring)."""

    known: list[Known] = field(default_factory=list)
    new: list[Cell] = field(default_factory=list)
    fixed: list[Known] = field(default_factory=list)
    not_reached: list[tuple[Known, str]] = field(default_factory=list)  # (entry, why)
    matched: dict[Cell, Known] = field(default_factory=dict)  # observed cell -> its entry

    @property
    def ok(self) -> bool:
        """Nothing new is violated (fixed entries are warnings, not failures)."""
        return not self.new

    def lines(self) -> list[str]:
        """One line per new violation and per fixed entry, for the person reading."""
        out = [f"NEW violation (not in the baseline): {pol} / {prop}" for pol, prop in self.new]
        out += [f"warning: fixed (listed in the baseline, holds now; remove the entry): {k.label()}"
                for k in self.fixed]
        out += [f"not reached (listed in the baseline, not violated {why}: no verdict, keep the "
                f"entry): {k.label()}" for k, why in self.not_reached]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "known": [list(k.cell) for k in self.known],
            "new": [list(c) for c in self.new],
            "fixed": [list(k.cell) for k in self.fixed],
            "not_reached": [{"cell": list(k.cell), "why": why} for k, why in self.not_reached],
        }


@dataclass(frozen=True)
class Baseline:
    entries: tuple[Known, ...] = ()
    path: str | None = None

    def find(self, policy: str, prop: str, config: str | None = None) -> Known | None:
        """The entry accepting (policy, property): its own entry (the one observed on
        ``config`` if there is one, else any), else one accepting the policy's ``variants``."""
        hits = [k for k in self.entries if k.policy == policy and k.property == prop]
        if not hits:
            hits = [k for k in self.entries if k.accepts(policy, prop)]
        return next((k for k in hits if k.config == config), hits[0] if hits else None)

    def compare(self, cells: Mapping[Cell, bool], config: str | None = None,
                incomplete: str | None = None) -> Comparison:
        """``cells``: (policy, property) -> violated, for every cell the command checked.
        ``config``: the checked configuration's name (an entry observed on another one is
        never reported as fixed). ``incomplete``: why the search was not complete (``"in a
        search truncated by --max-states 2,000"``), or None: a holding entry is then "not
        reached", never "fixed"."""
        cmp = Comparison()
        for (pol, prop), violated in cells.items():
            if not violated:
                continue
            k = self.find(pol, prop, config)
            if k is None:
                cmp.new.append((pol, prop))
            else:
                cmp.known.append(k)
                cmp.matched[(pol, prop)] = k
        for k in self.entries:
            if k.judged_on(config) and k.cell in cells and not cells[k.cell]:
                if incomplete is None:
                    cmp.fixed.append(k)
                else:
                    cmp.not_reached.append((k, incomplete))
        return cmp


def _names(e: dict[str, Any], one: str, many: str, where: str, fix: str) -> list[str]:
    if (one in e) == (many in e):
        raise ConfigError(f"{where}{one}: give exactly one of {one} = \"...\" or {many} = [...]")
    if one in e:
        v = e[one]
        if not isinstance(v, str) or not v:
            raise ConfigError(f"{where}{one}: expected {fix}, got {v!r}")
        return [v]
    v = e[many]
    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
        raise ConfigError(f"{where}{many}: expected a non-empty list of {fix}s, got {v!r}")
    return list(v)


def baseline_from_dict(data: dict[str, Any], source: str = "baseline") -> Baseline:
    """Validate a parsed baseline table (``source`` prefixes every error)."""
    props = [*SAFETY, *LIVENESS]
    check_keys(data, BASELINE_KEYS, f"{source}: ")
    raw = data.get("known", [])
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        raise ConfigError(f"{source}: known: expected an array of [[known]] tables")
    entries: list[Known] = []
    seen: dict[tuple[str, str, str | None], int] = {}
    for i, e in enumerate(raw):
        where = f"{source}: known[{i}]."
        check_keys(e, ENTRY_KEYS, where)
        pols = _names(e, "policy", "policies", where, "a policy name")
        names = _names(e, "property", "properties", where, "a property name")
        for p in pols:
            try:
                parse_policy(p)
            except UnknownPolicy as err:
                raise ConfigError(f"{where}policy: {err}") from None
        for n in names:
            if n not in props:
                near = difflib.get_close_matches(n, props, n=1)
                hint = f"did you mean {near[0]!r}?" if near else f"use one of {', '.join(props)}"
                raise ConfigError(f"{where}property: unknown property {n!r}; {hint}")
        reason = e.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise ConfigError(f"{where}reason: missing; say why this violation is accepted "
                              "(a finding, a docs/RUNTIME.md section)")
        finding = e.get("finding")
        if finding is not None and (not isinstance(finding, str) or not finding):
            raise ConfigError(f"{where}finding: expected a finding's name such as \"F1\", "
                              f"got {finding!r}")
        config = e.get("config")
        if config is not None and (not isinstance(config, str) or not config):
            raise ConfigError(f"{where}config: expected a configuration's name such as "
                              f"\"small\", got {config!r}")
        variants = e.get("variants", False)
        if not isinstance(variants, bool):
            raise ConfigError(f"{where}variants: expected true or false (accept the violation "
                              f"under PRESET+switch / PRESET-switch too), got {variants!r}")
        for p in pols:
            for n in names:
                key = (p, n, config)
                if key in seen:
                    raise ConfigError(f"{where.rstrip('.')}: {p} / {n} is already listed in "
                                      f"known[{seen[key]}]; remove one of them")
                seen[key] = i
                entries.append(Known(p, n, reason.strip(), finding, config, variants))
    return Baseline(tuple(entries), source)


BASELINE_DIR = Path(__file__).resolve().parent / "baselines"


def resolve_baseline(name: str | Path) -> Path:
    """A shipped baseline by name (``current``: spec/baselines/current.toml, wherever the
    package is installed), or a path."""
    p = Path(name)
    if p.suffix or p.exists():
        return p
    shipped = BASELINE_DIR / f"{p}.toml"
    if shipped.exists():
        return shipped
    known = ", ".join(sorted(x.stem for x in BASELINE_DIR.glob("*.toml")))
    raise ConfigError(f"--baseline {name}: no such file, and no shipped baseline of that name; "
                      f"give a file or one of {known}")


def load_baseline(path: str | Path) -> Baseline:
    """The baseline at ``path`` (or a shipped one by name: :func:`resolve_baseline`); any
    problem is one ConfigError line naming the path."""
    p = resolve_baseline(path)
    return baseline_from_dict(read_toml(str(p)), str(p))


def _q(s: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(s, ensure_ascii=False)


def baseline_text(entries: Iterable[Known], header: str = "") -> str:
    """TOML text of ``entries``, one ``[[known]]`` table each (``header``: comment lines)."""
    out = [f"# {line}".rstrip() for line in header.splitlines()]
    for k in entries:
        out += ["", "[[known]]", f"policy = {_q(k.policy)}", f"property = {_q(k.property)}"]
        if k.finding:
            out.append(f"finding = {_q(k.finding)}")
        if k.config:
            out.append(f"config = {_q(k.config)}")
        if k.variants:
            out.append("variants = true")
        out.append(f"reason = {_q(k.reason)}")
    return "\n".join(out).lstrip("\n") + "\n"


def write_baseline(path: str | Path, entries: Iterable[Known], header: str = "") -> Path:
    """Write ``entries`` as a baseline file (it loads back with :func:`load_baseline`)."""
    p = Path(path)
    p.write_text(baseline_text(entries, header), encoding="utf-8")
    return p
