"""The runtime's console commands as the model has them: each outcome's exit code and message.

The runtime's commands are console commands with the console framework's exit codes (success
0, failure 1, invalid input 2). The model fires two of them (docs/RUNTIME.md 6.4, 11):

* the operator's cancel command, ``nrllm:agent:cancel <uuid>`` (``cancel_command``): an
  empty id is refused before the runtime is called (invalid input); otherwise the runtime's
  ``cancel`` (T13) says whether the row transitioned: cancelled (success), or not, for an
  unknown run, a finished one or a store error alike (failure);
* the reaper's tick, ``nrllm:agent:reap``: without a transport it fails before its SELECT
  (``tick_refused``, failure); with one it always succeeds and prints its counters.

:data:`RESULTS` is the one table of these facts, keyed by the outcomes' vocabulary
(``OutcomeName``); ``World.commands`` records which outcome each command ended with, and
every other layer reads the exit code and the message from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from .vocab import Keyed, OutcomeName

# the console framework's exit codes, as the runtime's commands return them
SUCCESS = 0
FAILURE = 1
INVALID = 2

CANCEL = "nrllm:agent:cancel"  # the operator's cancel command
REAP = "nrllm:agent:reap"  # the reaper's tick, scheduled


@dataclass(frozen=True, slots=True)
class Result:
    """How a command ends with one outcome: the command, its exit code and what it prints
    (``{uuid}``: the id it was given)."""

    command: str
    exit: int
    message: str


RESULTS: dict[str, Result] = Keyed(OutcomeName, {
    OutcomeName.RUN_CANCELLED: Result(CANCEL, SUCCESS, 'run "{uuid}" was cancelled'),
    OutcomeName.NOT_CANCELLED: Result(
        CANCEL, FAILURE, 'run "{uuid}" was not cancelled: it is unknown or already finished'),
    OutcomeName.UUID_REQUIRED: Result(CANCEL, INVALID, "a run uuid is required"),
    OutcomeName.NO_MESSAGE_BUS: Result(
        REAP, FAILURE, "no message bus is available: stale runs cannot be reclaimed"),
})


def exit_code(outcome: str) -> int:
    """The exit code a command ends with when its outcome is ``outcome``."""
    return RESULTS[outcome].exit


def message(outcome: str, uuid: str = "") -> str:
    """What the command prints when it ends with ``outcome`` for the id ``uuid``."""
    return RESULTS[outcome].message.format(uuid=uuid)
