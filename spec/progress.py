"""Progress of a long command, on stderr: done / total, elapsed, ETA.

On a terminal a live bar (rich); otherwise one plain line at most every ``interval``
seconds (default 30, ``FAILCLOSED_PROGRESS_INTERVAL`` overrides it; 0 prints a line on
every step), so a CI log shows life without drowning in it. Elapsed time is measured for
the person watching, on the ``clock`` the command line gives (spec/ reads no clock of its
own); it never reaches a result, so histories and verdicts stay deterministic.

    with Progress("matrix", total=11, unit="policies", clock=time.monotonic) as pg:
        for pol in policies:
            ...
            pg.advance(states=res.states)

The keyword arguments of :meth:`advance` are added up and shown beside the count
(``states=1,234``); :meth:`note` prints one line above the bar (or plainly).
:meth:`running` reports the work inside the tasks still running (the states a running
search has stored so far): shown beside the counters, and off a terminal a line is printed
when ``interval`` has passed since the last one even if no task finished (:meth:`tick`
without new figures does the same), so a long task shows life at least once an interval.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["Progress", "fmt_seconds"]


def fmt_seconds(s: float) -> str:
    """1:02:03 / 2:05 / 0:07."""
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def _interval(default: float) -> float:
    raw = os.environ.get("FAILCLOSED_PROGRESS_INTERVAL")
    if raw is None:
        return default
    try:
        return max(0.0, float(raw))
    except ValueError:
        return default


class Progress:
    """done / total of ``unit`` for the command ``what``; silent when ``enabled`` is False."""

    def __init__(self, what: str, total: int | None, *, clock: Callable[[], float], unit: str = "",
                 stream: TextIO | None = None, interval: float = 30.0, enabled: bool = True,
                 live: bool | None = None) -> None:
        self.what = what
        self.total = total
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.interval = _interval(interval)
        self.enabled = enabled
        self.done = 0
        self.counters: dict[str, int] = {}
        self.in_progress: dict[str, int] = {}  # running tasks' figures so far (running)
        self.clock = clock  # seconds, monotonic (the command line's: time.monotonic)
        self._t0 = clock()
        self._last = self._t0
        isatty = getattr(self.stream, "isatty", lambda: False)()
        self.live = isatty if live is None else live
        self._bar: Any = None
        self._task: Any = None
        if self.enabled and self.live:
            # rich is heavy (about 50 ms to import): only for a live bar on a terminal
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as _RichProgress

            self._bar = _RichProgress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn(unit), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                TextColumn("{task.fields[extra]}"),
                console=Console(file=self.stream), transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task(what, total=total, extra="")

    # -------------------------------------------------------------------------------------
    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def elapsed(self) -> float:
        return self.clock() - self._t0

    def eta(self) -> float | None:
        if not self.total or not self.done:
            return None
        return self.elapsed / self.done * max(0, self.total - self.done)

    def _extra(self) -> str:
        out = [f"{v:,} {k}" for k, v in self.counters.items()]
        if self.in_progress:
            out.append(" ".join(f"{v:,} {k}" for k, v in self.in_progress.items())
                       + " in running tasks")
        return ", ".join(out)

    def line(self) -> str:
        """``what: 3/11 policies, 12,345 states, elapsed 0:42, ETA 1:54``."""
        count = f"{self.done}/{self.total}" if self.total is not None else f"{self.done}"
        parts = [f"{count} {self.unit}".rstrip()]
        if self.counters or self.in_progress:
            parts.append(self._extra())
        parts.append(f"elapsed {fmt_seconds(self.elapsed)}")
        eta = self.eta()
        if eta is not None and self.done < (self.total or 0):
            parts.append(f"ETA {fmt_seconds(eta)}")
        return f"failclosed {self.what}: " + ", ".join(parts)

    def advance(self, n: int = 1, **counters: int) -> None:
        self.done += n
        for k, v in counters.items():
            self.counters[k] = self.counters.get(k, 0) + int(v)
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, extra=self._extra())
            return
        self.tick()

    def running(self, **figures: int) -> None:
        """The figures of the tasks still running, as they stand now (replacing the last
        ones: ``states=`` a running search's stored states); a line if one is due."""
        self.in_progress = {k: int(v) for k, v in figures.items() if v}
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, extra=self._extra())
            return
        self.tick()

    def tick(self) -> None:
        """Off a terminal: print the line if ``interval`` has passed since the last one."""
        if not self.enabled or self._bar is not None:
            return
        now = self.clock()
        if now - self._last >= self.interval:
            self._last = now
            self._print(self.line())

    def note(self, text: str) -> None:
        """One line for the person watching (above the bar on a terminal)."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.console.print(text, highlight=False, markup=False)
        else:
            self._print(text)

    def _print(self, text: str) -> None:
        try:
            print(text, file=self.stream, flush=True)
        except (BrokenPipeError, ValueError):  # stderr closed: progress is best effort
            self.enabled = False

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
