"""The exit codes of every ``failclosed`` command, in one place (README "Exit codes" and
``failclosed --help`` list them from here).

0 everything checked holds (or matches ``--baseline``); 1 something new is violated (a
property, an expectation); 2 bad input (one line naming the field and the fix); 3 nothing
new is violated, but a search was cut short by ``--max-states`` (check, matrix, scope): what
was not explored was not checked, so a CI gate must not read it as 0; 70 an internal error
(a bug of failclosed: one line, the full traceback in a file it names; sysexits' EX_SOFTWARE);
130 interrupted (Ctrl-C); 141 stdout closed by its reader (``| head``); 143 terminated
(SIGTERM).
"""

from __future__ import annotations

__all__ = ["EXIT_BAD_INPUT", "EXIT_HOLDS", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_NEW_VIOLATION",
           "EXIT_STDOUT_CLOSED", "EXIT_TERMINATED", "EXIT_TRUNCATED", "exit_codes_text",
           "with_truncation"]

EXIT_HOLDS = 0
EXIT_NEW_VIOLATION = 1
EXIT_BAD_INPUT = 2
EXIT_TRUNCATED = 3
EXIT_INTERNAL = 70  # EX_SOFTWARE of sysexits.h
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_STDOUT_CLOSED = 141  # 128 + SIGPIPE, what a shell reports for a program killed by it
EXIT_TERMINATED = 143  # 128 + SIGTERM


def exit_codes_text() -> str:
    """One line of every code, for ``--help`` epilogs."""
    return (f"exit codes, the same for every command: {EXIT_HOLDS} everything checked holds (or "
            f"matches --baseline); {EXIT_NEW_VIOLATION} something new is violated; "
            f"{EXIT_BAD_INPUT} bad input (one line); {EXIT_TRUNCATED} nothing new violated but "
            f"the search was truncated by --max-states (check, matrix, scope); {EXIT_INTERNAL} "
            f"internal error (one line, the traceback in a file it names); {EXIT_INTERRUPTED} "
            f"interrupted; {EXIT_TERMINATED} terminated (SIGTERM); {EXIT_STDOUT_CLOSED} stdout "
            "closed by its reader (| head).")


def with_truncation(rc: int, truncated: bool) -> int:
    """A checking command's code: a new violation (1) stands; otherwise a truncated search
    is 3, never 0."""
    return EXIT_TRUNCATED if rc == EXIT_HOLDS and truncated else rc
