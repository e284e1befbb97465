"""The transition value: what the checker enumerates, the simulator fires and a scenario lists.

A transition is data: a name spelled as docs/RUNTIME.md spells the operation, the actor that
performs it, and its parameters as sorted ``(key, value)`` pairs (values are str, int, bool
or None), so a transition is hashable, printable and writable to a scenario file.
"""

from __future__ import annotations

from typing import Any, NamedTuple

_new = tuple.__new__  # Transition(...) without the NamedTuple's Python-level __new__


class Transition(NamedTuple):
    name: str
    actor: str
    args: tuple[tuple[str, Any], ...] = ()

    @staticmethod
    def make(name: str, actor: str, **args: Any) -> Transition:
        # sorted pairs compare by key only (keys are distinct); None values are left out
        items = sorted(args.items())
        for kv in items:
            if kv[1] is None:
                items = [kv for kv in items if kv[1] is not None]
                break
        return _new(Transition, (name, actor, tuple(items)))

    def arg(self, key: str, default: Any = None) -> Any:
        for k, v in self.args:
            if k == key:
                return v
        return default

    @property
    def fault(self) -> str | None:
        """The fault branch this transition takes (``None`` for the normal branch)."""
        return self.arg("fault")

    def label(self) -> str:
        """``name[fault]``: the unit the coverage report counts."""
        f = self.fault
        return f"{self.name}[{f}]" if f else self.name

    def __str__(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in self.args)
        return f"{self.actor}: {self.name}({inner})"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "actor": self.actor}
        d.update(dict(self.args))
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Transition:
        d = dict(d)
        name = d.pop("name")
        actor = d.pop("actor")
        return Transition.make(name, actor, **d)
