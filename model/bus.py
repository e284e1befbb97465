"""The message bus (RUNTIME 6.3; 1.3): delivers a message twice (the fault
``duplicate_message``)."""

from __future__ import annotations

from .frames import T, add_message, can
from .state import Message, World
from .transition import Transition
from .vocab import ActorKind, FaultKind, TransitionName


def answers(w: World, name: str) -> bool:
    return name == ActorKind.BUS


def moves(w: World, name: str | None, one_order: bool, slots: list[int] | None) -> list[Transition]:
    """Each message on the bus delivered a second time (while the fault budget lasts)."""
    if not w.messages or not can(w, FaultKind.DUPLICATE_MESSAGE):
        return []
    return [
        T(TransitionName.DUPLICATE_MESSAGE, ActorKind.BUS, run=w.run_id(m.run), not_before=m.not_before)
        for m in sorted(set(w.messages), key=lambda m: (m.run, m.not_before))
    ]


def fire(w: World, t: Transition) -> World:
    """The message again, with its not_before."""
    return add_message(w, Message(w.config.run_index(t.arg("run")), t.arg("not_before")))
