"""What a TOML file given on the command line is: a simulator config, a model
configuration, a scenario, a baseline or a scope. A file of one kind given where another
is expected is one line naming what it is (``--baseline sim/configs/default.toml: is a
simulator config, not a baseline``), instead of a complaint about its first key.

Each kind's keys are read from the module that validates it, never listed here.
"""

from __future__ import annotations

from typing import Any

from failclosed.model.config import TOP_KEYS as MODEL
from failclosed.model.config import ConfigError
from failclosed.sim.config import TOP as SIM
from failclosed.spec.baseline import BASELINE_KEYS
from failclosed.spec.scope import TOP_KEYS as SCOPE

__all__ = ["KINDS", "identify", "require_kind"]

# kind -> (what it is, called in a message; the command that reads it)
KINDS = {
    "sim": ("a simulator config", "failclosed simulate CONFIG"),
    "model": ("a model configuration", "failclosed check --config FILE"),
    "scenario": ("a scenario", "failclosed replay FILE"),
    "baseline": ("a baseline", "--baseline FILE"),
    "scope": ("a scope", "failclosed scope FILE"),
}


def _keys() -> dict[str, set[str]]:
    return {"sim": set(SIM), "model": (set(MODEL) - {"steps", "expect"}) | {"parts"},
            "scenario": set(MODEL) | {"messages"}, "baseline": set(BASELINE_KEYS),
            "scope": set(SCOPE)}


def identify(data: Any) -> str | None:
    """The kind whose own keys (those no other kind has) the table uses most; None if it
    uses none."""
    if not isinstance(data, dict):
        return None
    keys = _keys()
    best, score = None, 0
    sibling = {"model": "scenario", "scenario": "model"}  # a scenario is a model config + steps
    for kind, ks in keys.items():
        others = set().union(*(v for k, v in keys.items() if k not in (kind, sibling.get(kind))))
        own = len((ks - others) & data.keys())
        if own > score:
            best, score = kind, own
    if best == "model" and data.keys() & {"steps", "expect"}:
        return "scenario"
    return best


def require_kind(data: Any, kind: str, flag: str, path: str) -> None:
    """``data`` (the TOML table at ``path``, given as ``flag``) is of ``kind``, or at least
    not plainly of another kind: else one ConfigError line saying what it is."""
    if not isinstance(data, dict) or data.keys() <= _keys()[kind]:
        return
    other = identify(data)
    if other is None or other == kind or (kind == "model" and other == "scenario"):
        return
    what, reader = KINDS[other]
    want = KINDS[kind][0]
    raise ConfigError(f"{flag} {path}: is {what} (read by `{reader}`), not {want}; "
                      f"give {want}")
