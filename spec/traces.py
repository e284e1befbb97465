"""A trace rendered for a person: the compact form (:func:`trace_lines`) and the wide table
(:func:`trace_table`)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from failclosed.model.transition import Transition

__all__ = ["trace_lines", "trace_table"]

W = TypeVar("W")


def _tr_text(t: Transition) -> str:
    return f"{t.name}({', '.join(f'{k}={v}' for k, v in t.args)})"


def trace_lines(
    trace: Sequence[tuple[Transition, W]],
    initial: W,
    diff: Callable[[W, W], list[str]],
    width: int = 100,
) -> list[str]:
    """The compact form of a trace, in the spirit of TLC's state-per-step output: one entry
    per step, ``N  actor  transition  what changed`` (only the fields that change, ``;``
    between them), wrapped at ``width`` under the changes. :func:`trace_table` is the wide
    form (one changed field per line)."""
    steps = [(str(n), t.actor, _tr_text(t)) for n, (t, _) in enumerate(trace, 1)]
    nw = max([1, *(len(s[0]) for s in steps)])
    aw = min(14, max([1, *(len(s[1]) for s in steps)]))
    out: list[str] = []
    prev = initial
    for (n, actor, tr), (_, w) in zip(steps, trace, strict=True):
        changes = "; ".join(diff(prev, w)) or "(no change)"
        prev = w
        head = f"{n.rjust(nw)}  {actor.ljust(aw)}  {tr}"
        indent = " " * (nw + 2 + aw + 2 + 2)
        out += textwrap.wrap(f"{head}  | {changes}", max(40, width), subsequent_indent=indent,
                             break_on_hyphens=False, break_long_words=True)
    return out


def trace_table(
    trace: Sequence[tuple[Transition, W]],
    initial: W,
    diff: Callable[[W, W], list[str]],
) -> str:
    """Fixed-width table: step | actor | transition (name + args) | changed fields.

    ``diff(before, after)`` returns one string per changed field; each gets its own line.
    """
    rows: list[tuple[str, str, str, str]] = []
    prev = initial
    for n, (t, w) in enumerate(trace, 1):
        changes = diff(prev, w) or ["(no change)"]
        rows.append((str(n), t.actor, _tr_text(t), changes[0]))
        rows.extend(("", "", "", c) for c in changes[1:])
        prev = w
    head = ("step", "actor", "transition", "changed")
    widths = [max([len(h)] + [len(r[c]) for r in rows]) for c, h in enumerate(head)]

    def line(r: tuple[str, str, str, str]) -> str:
        return " | ".join(
            [r[0].rjust(widths[0]), r[1].ljust(widths[1]), r[2].ljust(widths[2]), r[3]]
        ).rstrip()

    sep = "-+-".join("-" * w for w in widths)
    return "\n".join([line(head), sep, *(line(r) for r in rows)])
