"""A set of output files written atomically as a set: :func:`output_set`.

A command that writes several files into one directory (``check --out DIR``, ``scope --out
DIR``, ``simulate --violations-dir DIR``) writes them into a temporary directory beside DIR
and moves them in at the end, with SIGINT and SIGTERM held back while it does: an
interrupted or failed command leaves DIR as it was (no file of the set, no temporary
directory), a finished one leaves every file. A signal that arrives during the move is
delivered right after it (the command then exits 130 or 143 with its set complete).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["OutputSet", "as_umask_allows", "current_umask", "output_set", "write_text_atomic"]

_HELD = (signal.SIGINT, signal.SIGTERM)


class OutputSet:
    """Where the files of a set are written (``staging``) and where they end up
    (``final``): :meth:`path` a file to write, :meth:`final_path` the name to print."""

    def __init__(self, final: Path, staging: Path) -> None:
        self.final = final
        self.staging = staging

    def path(self, name: str) -> Path:
        return self.staging / name

    def final_path(self, staged: str | os.PathLike[str]) -> Path:
        """The path a file written under ``staging`` has once the set is in place."""
        return self.final / Path(staged).relative_to(self.staging)


def current_umask() -> int:
    """The process's umask (read from /proc where it can be, else set and put back)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def as_umask_allows(path: str | os.PathLike[str], directory: bool = False) -> None:
    """Give a file made by ``tempfile`` (0600, a directory 0700) the mode the umask gives
    any file the command creates (0644, 0755 under umask 022): the outputs of every command
    are readable alike, as the umask says (a shared CI artefact folder)."""
    os.chmod(path, (0o777 if directory else 0o666) & ~current_umask())


def _nearest_existing(p: Path) -> Path:
    anc = p.parent
    while not anc.exists():
        anc = anc.parent
    return anc


@contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block is done: their handlers are replaced by one
    that only notes the signal, and the first one noted is handed to the handler it was meant
    for once the block is over (a signal mask would not do: the kernel gives a process's
    signal to any thread that does not block it, and Python runs its handler in the main
    thread all the same). Outside the main thread, where handlers cannot be set, the block
    just runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    old = {s: signal.signal(s, lambda signum, frame: noted.append(signum)) for s in _HELD}
    try:
        yield
    finally:
        for s, h in old.items():  # None: a handler not set from Python, left to the default
            signal.signal(s, h if h is not None else signal.SIG_DFL)
    if noted:  # the block is done: now the signal does what it would have done
        h = old[noted[0]]
        if callable(h):
            h(noted[0], None)
        elif h == signal.SIG_DFL:
            signal.raise_signal(noted[0])


def _commit(staging: Path, final: Path) -> None:
    """Move the staged files into ``final``: one rename when it does not exist yet, else a
    rename per entry (a file of the same name is replaced, the others stay)."""
    entries = sorted(staging.iterdir())
    if not entries:
        staging.rmdir()
        return
    with _signals_held():
        if not final.exists():
            final.parent.mkdir(parents=True, exist_ok=True)
            os.rename(staging, final)
            return
        for e in entries:
            target = final / e.name
            if target.is_dir() and not e.is_dir():
                raise IsADirectoryError(21, "Is a directory", str(target))
            os.replace(e, target)
        staging.rmdir()


@contextmanager
def output_set(directory: str | os.PathLike[str] | None) -> Iterator[OutputSet | None]:
    """``with output_set(DIR) as out:`` write each file at ``out.path(name)``; at the end of
    the block they are all in DIR, or (on any exception, an interrupt included) none is and
    DIR is untouched. ``None`` (no directory asked for) yields None."""
    if directory is None:
        yield None
        return
    final = Path(directory)  # as given: the paths printed keep the user's form
    where = _nearest_existing(final.absolute())
    staging = Path(tempfile.mkdtemp(prefix=f".{final.absolute().name}.partial-", dir=where))
    try:
        as_umask_allows(staging, directory=True)  # it becomes DIR when DIR does not exist
        yield OutputSet(final, staging)
        _commit(staging, final)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """One output file, complete or not at all: written under a temporary name beside it and
    renamed (an earlier file of that name stays as it was until then)."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".partial", dir=p.absolute().parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        as_umask_allows(tmp)
        os.replace(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
