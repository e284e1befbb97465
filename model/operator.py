"""The operator (RUNTIME 14.2, 11): removes a tool between attempts, and runs the console's
cancel command."""

from __future__ import annotations

from . import store
from .frames import T, other_faults, with_faults
from .state import CommandResult, World, replace
from .transition import Transition
from .vocab import ActorKind, OutcomeName, TransitionName


def answers(w: World, name: str) -> bool:
    return name == ActorKind.OPERATOR


def moves(w: World, name: str | None, one_order: bool, slots: list[int] | None) -> list[Transition]:
    """A removable tool removed, and the next cancel command."""
    out = [
        T(TransitionName.REMOVE_TOOL, ActorKind.OPERATOR, tool=tool.name)
        for tool in w.config.tools
        if tool.removable and tool.name not in w.removed
    ]
    return out + _cancel_command_moves(w)


def _cancel_command_moves(w: World) -> list[Transition]:
    """The operator's next cancel command (RUNTIME 11), each of ``Config.operator_cancels``
    once and in order: ``run=<id>`` for a run's id (with the fault branches of its T13),
    ``uuid=<id>`` for "" or an id no run has."""
    ids = w.config.operator_cancels
    if not ids:
        return []
    k = _commands_issued(w)
    if k >= len(ids):
        return []
    uuid = ids[k]
    name = TransitionName.CANCEL_COMMAND
    if uuid and any(r.id == uuid for r in w.config.runs):
        return with_faults(w, T(name, ActorKind.OPERATOR, run=uuid), other_faults(name))
    return [T(name, ActorKind.OPERATOR, uuid=uuid)]


def _commands_issued(w: World) -> int:
    """How many cancel commands the operator has run so far."""
    return sum(1 for c in w.commands if c.command == TransitionName.CANCEL_COMMAND)


def fire(w: World, t: Transition) -> World:
    """The cancel command's run, or a tool gone."""
    if t.name == TransitionName.CANCEL_COMMAND:
        return _cancel_command(w, t)
    return replace(w, removed=w.removed | {t.arg("tool")})


def _cancel_command(w: World, t: Transition) -> World:
    """``nrllm:agent:cancel <uuid>`` (11): an empty id is refused before the runtime is
    called (UUID_REQUIRED); otherwise the runtime's cancel runs T13 and the command reports
    whether the row transitioned (RUN_CANCELLED), or not: an unknown run (no row matches),
    a finished one (T13's guard) and a store error alike (NOT_CANCELLED, 11 step 3)."""
    rid = t.arg("run")
    uuid = rid if rid is not None else t.arg("uuid")
    if not uuid:
        outcome = OutcomeName.UUID_REQUIRED
    elif rid is None or t.fault:
        outcome = OutcomeName.NOT_CANCELLED
    else:
        w, ok = store.cancel(w, w.config.run_index(rid))
        outcome = OutcomeName.RUN_CANCELLED if ok else OutcomeName.NOT_CANCELLED
    done = CommandResult(ActorKind.OPERATOR, TransitionName.CANCEL_COMMAND, uuid, outcome)
    return replace(w, commands=w.commands + (done,))
