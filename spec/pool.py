"""Worker processes that never outlive the command that started them.

``spawn_pool(jobs)`` is a ``ProcessPoolExecutor`` on spawned processes (never forked: safe
in a notebook kernel or a threaded caller) whose every worker dies with its parent,
whatever signal ends the parent (SIGKILL included): on Linux the kernel sends the worker
SIGKILL when the parent dies (``prctl(PR_SET_PDEATHSIG)``, through ctypes); elsewhere a
daemon thread in the worker polls ``os.getppid()`` and ends the worker once it changes.
``stop_pool(ex)`` ends a pool at once (cancelled work, terminated workers, killed if they
do not leave within a few seconds): what an interrupted command does before it exits. The
multiprocessing resource tracker holds only the pipes of the parent and its workers, so it
ends with them.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

__all__ = ["die_with_parent", "spawn_pool", "stop_pool"]

PR_SET_PDEATHSIG = 1  # linux/prctl.h
POLL_SECONDS = 1.0


def die_with_parent(parent: int) -> None:
    """A pool initializer: end this worker when process ``parent`` dies."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0:
                if os.getppid() != parent:  # the parent died before the prctl
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="failclosed-parent-watch", daemon=True).start()


def _start(parent: int, init: Any, initargs: tuple[Any, ...]) -> None:
    die_with_parent(parent)
    if init is not None:
        init(*initargs)


def spawn_pool(jobs: int, initializer: Any = None, initargs: tuple[Any, ...] = ()) -> Any:
    """A process pool of ``jobs`` spawned workers that die with this process; each worker
    runs ``initializer(*initargs)`` too, if given (a module-level function)."""
    ctx = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_start,
                               initargs=(os.getpid(), initializer, tuple(initargs)))


# how long a terminated worker has to leave on its own (its ``finally`` blocks: the seen
# set's temporary directory) before it is killed
GRACE_SECONDS = 5.0
# how long a killed worker (SIGKILL cannot be ignored) may take to be reaped on a loaded machine
KILL_WAIT_SECONDS = 30.0


def stop_pool(ex: Any, grace: float = GRACE_SECONDS) -> None:
    """Cancel what has not started and end the workers (an interrupted command): SIGTERM,
    then SIGKILL for a worker still there after ``grace`` seconds. A worker may outlive its
    SIGTERM: Python runs a signal's handler only between bytecodes, which a search in the
    compiled build (mypyc) does not execute for minutes, and a handler that only raised would
    end the task, not the worker (the pool catches what a task raises; spec.seen's handler
    ends the worker once the search's finally blocks have run)."""
    procs = list((getattr(ex, "_processes", None) or {}).values())
    manager = getattr(ex, "_executor_manager_thread", None)  # shutdown forgets it
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
    # The pool's manager thread reaps the workers too (it joins them once it sees one die),
    # and two threads waiting on one child race: the loser's waitpid fails, and until the
    # winner records the exit code the worker still reads as alive. So the pool has ended
    # when its manager thread has, and every exit code is recorded then.
    if manager is not None:
        manager.join(timeout=KILL_WAIT_SECONDS)
    for p in procs:
        p.join(timeout=KILL_WAIT_SECONDS)
