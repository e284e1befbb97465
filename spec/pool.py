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
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any

__all__ = ["PROGRESS", "die_with_parent", "run_local", "spawn_pool", "stop_pool", "worker_share"]

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


# A worker process's channel to its parent for the progress of the task it runs (set by
# run_local's pool initializer; None in the parent, on Dask, and in a pool without it). A
# task reports ``(key, figure)`` on it (spec/scope.py's task: ``((member, policy), states
# stored)``).
PROGRESS: list[Any] = [None]


def _init_progress(queue: Any) -> None:
    PROGRESS[0] = queue


def worker_share(budget_mib: float | None, workers: int) -> float | None:
    """One worker's share of a memory budget that ``workers`` processes split evenly."""
    return None if budget_mib is None else budget_mib / max(1, workers)


def run_local(jobs: int, args: dict[int, tuple], done: Callable[[int, Any], None],
              task: Callable[[tuple], Any],
              on_progress: Callable[[Any, int], None] | None = None,
              poll: float = 5.0) -> None:
    """``done(i, task(args[i]))`` for every ``i``, as each finishes, on ``jobs`` spawned
    processes (``task`` must be importable by name: a module-level function).
    ``on_progress(key, figure)`` receives what the workers' tasks report through
    ``PROGRESS``, and ``(None, 0)`` when ``poll`` seconds pass without any news (so the
    caller may show life)."""
    # spawn, never fork (safe inside a notebook kernel); the workers die with this process
    queue = multiprocessing.get_context("spawn").SimpleQueue() if on_progress is not None else None
    ex = spawn_pool(jobs, _init_progress if queue is not None else None,
                    (queue,) if queue is not None else ())
    old = _sigterm_interrupts()
    try:
        pending = {ex.submit(task, a): i for i, a in args.items()}
        while pending:
            fin, _ = wait(pending, timeout=poll if queue is not None else None,
                          return_when=FIRST_COMPLETED)
            if queue is not None and on_progress is not None:
                _drain(queue, on_progress)
            for f in fin:
                done(pending.pop(f), f.result())
    except BaseException:
        # interrupted (Ctrl-C, SIGTERM) or failed: no worker may outlive the command; what
        # finished is already kept by ``done``
        stop_pool(ex)
        raise
    else:
        ex.shutdown(wait=True)
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def _drain(queue: Any, on_progress: Callable[[Any, int], None]) -> None:
    """Hand on every report waiting in ``queue`` (the latest per key), or ``(None, 0)``."""
    latest: dict[Any, int] = {}
    while not queue.empty():
        key, figure = queue.get()
        latest[key] = figure
    for key, figure in latest.items():
        on_progress(key, figure)
    if not latest:
        on_progress(None, 0)


def _sigterm_interrupts() -> Any:
    """While a pool runs in the main thread, SIGTERM interrupts like Ctrl-C (so the workers
    are stopped too); returns the previous handler, or None where it cannot be set."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        return None  # the caller handles it already (the command line does)

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)
