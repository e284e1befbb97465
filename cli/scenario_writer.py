"""The scenario writer: TOML text of a scenario file (model/scenario.py's format).

The checker and the simulator produce a counterexample as data, a *scenario document*: a dict
of ``dump_scenario``'s arguments (``config``, ``steps``, ``expectations``, ``description``,
``policy``; spec.checker.counterexample_scenario, sim.batch.violation_scenario). The command
line writes it here, so every trace they find can be replayed (``failclosed replay FILE``),
read and kept as a regression test. Reading a scenario file back stays in model/scenario.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from failclosed.model.scenario import STORE_ACTOR
from failclosed.model.transition import Transition

__all__ = ["dump_scenario", "write_scenario"]

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: str) -> str:
    return k if _BARE.match(k) else _str(k)


def _str(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            raise ValueError(f"cannot write {v!r} to TOML")
        return repr(v)
    if isinstance(v, str):
        return _str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        if not v:
            return "{}"
        return "{ " + ", ".join(f"{_key(str(k))} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} to TOML: {v!r}")


def _table(lines: list[str], header: str, d: dict[str, Any], sub: tuple[str, ...] = ()) -> None:
    """``d`` under ``header``; its keys named in ``sub`` as sub-tables (a table: ``[a.k]``;
    an array of tables: ``[[a.k]]``, each belonging to the last ``[[a]]``)."""
    lines.append(header)
    for k, v in d.items():
        if k not in sub:
            lines.append(f"{_key(k)} = {_value(v)}")
    for k in sub:
        if k in d:
            name = f"{header.strip('[]')}.{k}"
            if isinstance(d[k], list):
                for item in d[k]:
                    lines.append("")
                    _table(lines, f"[[{name}]]", item)
            else:
                lines.append("")
                _table(lines, f"[{name}]", d[k])


def _is_scalar(v: Any) -> bool:
    """Written as ``key = value`` at the top: anything but a table or a non-empty array of
    tables."""
    if isinstance(v, dict):
        return False
    return not isinstance(v, list) or not v or not all(isinstance(x, dict) for x in v)


def _config_lines(lines: list[str], data: dict[str, Any]) -> None:
    """The configuration part: description and policy first, the other top-level values,
    then the tables and arrays of tables (``[[runs]]`` with its ``row`` and ``events``)."""
    scalars = [k for k, v in data.items() if _is_scalar(v)]
    for k in ("description", "policy"):
        if k in scalars:
            lines.append(f"{k} = {_value(data[k])}")
    for k in scalars:
        if k not in ("description", "policy"):
            lines.append(f"{_key(k)} = {_value(data[k])}")
    for k, v in data.items():
        if k in scalars:
            continue
        if isinstance(v, dict):
            lines.append("")
            _table(lines, f"[{_key(k)}]", v)
        else:  # a non-empty array of tables
            for item in v:
                lines.append("")
                _table(lines, f"[[{_key(k)}]]", item, sub=("row", "events") if k == "runs" else ())


def _step_lines(lines: list[str], s: Any, note: str | None) -> None:
    """One ``[[steps]]`` table: a transition, ``(transition, step_expectations)``, or a step
    table as written by hand (partial arguments, ``until``)."""
    lines.append("")
    lines.append("[[steps]]")
    if isinstance(s, dict):
        for k, v in s.items():
            lines.append(f"{_key(k)} = {_value(v)}")
        return
    t, exp = (s if isinstance(s, tuple) and len(s) == 2 and isinstance(s[0], Transition)
              else (s, None))
    assert isinstance(t, Transition)
    if t.actor == STORE_ACTOR:  # a store statement run directly (run_statement)
        lines.append(f"store = {_value(t.name)}")
    else:
        lines.append(f"do = {_value(t.name)}")
        lines.append(f"actor = {_value(t.actor)}")
    for k, v in t.args:
        lines.append(f"{_key(k)} = {_value(v)}")
    if note is not None:
        lines.append(f"note = {_value(note)}")
    if exp:
        lines.append(f"expect = {_value(exp)}")


def dump_scenario(
    config: dict[str, Any],
    steps: list[Any],
    expectations: dict[str, Any] | list[dict[str, Any]] | None = None,
    description: str | None = None,
    policy: str | None = None,
    notes: dict[int, str] | None = None,
) -> str:
    """TOML text of a scenario: the configuration ``config`` (as given to ``parse_config``),
    one ``[[steps]]`` per transition (optionally ``(transition, step_expectations)``),
    then the final ``[expect]`` tables. ``policy`` overrides the configuration's policy
    (a counterexample found with a policy override). The text round-trips through tomllib.
    """
    data = {k: v for k, v in config.items() if k not in ("steps", "expect")}
    if description is not None:
        data["description"] = description
    if policy is not None:
        data["policy"] = policy
    lines: list[str] = []
    _config_lines(lines, data)
    for n, s in enumerate(steps):
        _step_lines(lines, s, notes.get(n) if notes else None)
    if expectations:
        for e in [expectations] if isinstance(expectations, dict) else expectations:
            lines.append("")
            lines.append("[[expect]]")
            for k, v in e.items():
                lines.append(f"{_key(k)} = {_value(v)}")
    return "\n".join(lines) + "\n"


def write_scenario(path: str | Path, doc: Mapping[str, Any]) -> Path:
    """Write a scenario document (the keyword arguments of :func:`dump_scenario`) to
    ``path``; returns the path."""
    p = Path(path)
    with open(p, "w", encoding="utf-8") as f:
        f.write(dump_scenario(**doc))
    return p
