"""The search's seen set: fingerprint -> state id, tiered in the manner of TLC's disk FPSet.

Without a memory budget (the default) the seen set is one dict and nothing else happens: the
search runs as it always has. With a budget (``explore(..., memory_budget_mib=B)``), at each
BFS layer boundary the search asks :meth:`SeenSet.settle` whether what it stores is over the
budget; the first time it is, the seen set becomes tiered:

* **hot**: a dict holding the ids of the layer about to be expanded and of the next one (the
  expander needs their ids for the fewest-switch parent updates and for the edges);
* **runs**: the older layers, as sorted runs of fingerprints (numpy ``int64``) with their
  ids (``int32``) in a parallel array, 12 bytes a state instead of a dict entry's hundred.
  Each layer moved out is a new run; runs are merged as TLC merges them (the newest into the
  one before while that one is not more than twice its size), so there are O(log n) runs.
  When the estimate is still over the budget, every run in memory is written to disk: an
  ``np.memmap`` in a temporary directory (``tempfile.mkdtemp``, under ``spill_dir`` or
  ``$TMPDIR``). Each file is unlinked as soon as it is mapped (so nothing is left behind even
  if the process is killed: the kernel frees an unlinked mapped file with its last mapping),
  and the directory itself is removed by :meth:`SeenSet.close`, which the search calls in a
  ``finally`` (an exception, Ctrl-C, SIGTERM raised as an exception by the command line or,
  in a worker process, by :func:`sigterm_raises`).

Membership of an older state is a binary search in each run; the expander asks for a whole
chunk of successors at once (:meth:`SeenSet.find_old`: one ``np.searchsorted`` per run), so
the tiered search stays vectorised. The answer is the same as the one dict's: the hot map and
the runs are disjoint and together hold every stored fingerprint, so a tiered search gives the
very same Exploration (tests/test_seen_set.py).

The budget bounds the estimate of what the search stores per state (the seen set and the
per-state arrays: :data:`PER_STATE_BYTES`) and the process's resident size, whichever is
larger. The worlds of the two live layers are not the seen set's: they stay in memory.
"""

from __future__ import annotations

import mmap
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["PER_STATE_BYTES", "SeenSet", "resident_mib", "sigterm_raises"]

# What one stored state costs besides its seen-set entry: fingerprint 'q' (8), parent, depth,
# switches and incoming transition 'i' (16), the actor mask and the world slot (two list
# pointers, 16). Labels (one byte each) are counted by the caller.
PER_STATE_BYTES = 40
# A hot dict entry: its share of the table (about 3 words at two-thirds load, plus the
# index) and the two int objects it points to (fingerprint 32, id 28).
HOT_ENTRY_BYTES = 100
RUN_ENTRY_BYTES = 12  # fingerprint int64 + id int32
CHUNK = 1 << 20  # entries per step of a streaming merge of runs on disk
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_mib() -> float:
    """The process's resident set size now (Linux: /proc/self/statm; elsewhere 0)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE / (1 << 20)
    except (OSError, IndexError, ValueError):
        return 0.0


@dataclass
class _Run:
    """One sorted run: ``fp`` ascending, ``ids`` aligned; on disk when ``disk``."""

    fp: np.ndarray
    ids: np.ndarray
    disk: bool

    def __len__(self) -> int:
        return len(self.fp)

    def find(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For the sorted queries ``q``: the mask of those in the run and their ids."""
        n = len(self.fp)
        pos = np.searchsorted(self.fp, q)
        np.minimum(pos, n - 1, out=pos)
        hit = self.fp[pos] == q
        return hit, self.ids[pos[hit]]

    def release(self) -> None:
        """A run on disk: give back the pages the look-ups of a layer made resident."""
        if self.disk:
            _drop_pages(self.fp)
            _drop_pages(self.ids)


def _drop_pages(a: np.ndarray) -> None:
    """Let the kernel take back the pages of a mapped run a search touched (they stay in the
    file; the next look-up reads them again): once a layer, at its boundary, so the pages a
    layer's look-ups touch are read once and the resident size does not keep them."""
    m = getattr(a, "_mmap", None)
    if m is not None and hasattr(m, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        m.madvise(mmap.MADV_DONTNEED)


class SeenSet:
    """Fingerprint -> state id: one dict (``hot``) and, once tiered, sorted runs of the
    older layers (see the module docstring). ``get``, ``in``, ``len``, ``items`` and ``==``
    behave as the one dict's would."""

    def __init__(self, budget_mib: float | None = None, spill_dir: str | None = None) -> None:
        self.hot: dict[int, int] = {}
        self.hot_lo = 0  # ids below it are in the runs
        self.runs: list[_Run] = []  # oldest (largest) first
        self.budget = None if budget_mib is None else budget_mib * (1 << 20)
        self.spill_dir = spill_dir
        self.dir: str | None = None  # the temporary directory, once a run went to disk
        self.spilled = 0  # runs written to disk so far (merges included)
        self.peak_rss_mib = 0.0  # largest resident size seen at a layer boundary

    # -- the mapping ------------------------------------------------------------------------

    def get(self, fp: int, default: Any = None) -> Any:
        j = self.hot.get(fp)
        if j is not None:
            return j
        if self.runs:
            found = self.find_old([fp])
            if found:
                return found[fp]
        return default

    def __contains__(self, fp: object) -> bool:
        return isinstance(fp, int) and self.get(fp) is not None

    def __len__(self) -> int:
        return len(self.hot) + sum(len(r) for r in self.runs)

    def items(self) -> Iterator[tuple[int, int]]:
        yield from self.hot.items()
        for r in self.runs:
            yield from zip(r.fp.tolist(), r.ids.tolist(), strict=True)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SeenSet | dict):
            return len(self) == len(other) and dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def find_old(self, fps: Iterable[int]) -> dict[int, int]:
        """The ids of those of ``fps`` that are in the runs (one binary search per run)."""
        if not self.runs:
            return {}
        q = np.unique(np.fromiter(fps, dtype=np.int64))
        out: dict[int, int] = {}
        for r in self.runs:
            if not len(q):
                break
            hit, ids = r.find(q)
            out.update(zip(q[hit].tolist(), ids.tolist(), strict=True))
            q = q[~hit]
        return out

    # -- tiers ------------------------------------------------------------------------------

    @property
    def tiered(self) -> bool:
        return bool(self.runs)

    def nbytes(self) -> int:
        """The estimated bytes the seen set holds in memory (disk runs not counted)."""
        return (len(self.hot) * HOT_ENTRY_BYTES
                + sum(len(r) * RUN_ENTRY_BYTES for r in self.runs if not r.disk))

    def disk_bytes(self) -> int:
        return sum(len(r) * RUN_ENTRY_BYTES for r in self.runs if r.disk)

    def settle(self, lo: int, fps: Any, other_bytes: int) -> None:
        """At a layer boundary (ids from ``lo`` on are the layer about to be expanded and
        the next one; ``fps``: fingerprint per id): if the estimate (this set's bytes plus
        ``other_bytes``) or the resident size is over the budget, move the ids
        ``hot_lo..lo-1`` to a new run; if still over, write every memory run to disk."""
        rss = resident_mib()
        self.peak_rss_mib = max(self.peak_rss_mib, rss)
        for r in self.runs:
            r.release()
        if self.budget is None:
            return
        over_rss = rss * (1 << 20) > self.budget
        if self.nbytes() + other_bytes <= self.budget and not over_rss:
            return
        if lo > self.hot_lo:
            self._demote(lo, fps)
        if self.nbytes() + other_bytes > self.budget or over_rss:
            self._spill()

    def _demote(self, lo: int, fps: Any) -> None:
        """Ids ``hot_lo..lo-1`` leave the hot map for a new sorted run (then merged)."""
        fp = np.frombuffer(fps, dtype=np.int64)
        old = fp[self.hot_lo:lo]
        order = np.argsort(old, kind="stable")
        run = _Run(old[order].copy(), (order + self.hot_lo).astype(np.int32), False)
        self.hot = dict(zip(fp[lo:].tolist(), range(lo, len(fp)), strict=True))
        self.hot_lo = lo
        self.runs.append(run)
        self._merge_tail()

    def _merge_tail(self) -> None:
        """TLC's policy: merge the newest run into the one before while that one is not
        more than twice its size (run sizes then grow geometrically: O(log n) runs)."""
        while len(self.runs) >= 2 and len(self.runs[-2]) <= 2 * len(self.runs[-1]):
            b = self.runs.pop()
            a = self.runs.pop()
            self.runs.append(self._merge(a, b))

    def _merge(self, a: _Run, b: _Run) -> _Run:
        if not (a.disk or b.disk):
            fp = np.concatenate([a.fp, b.fp])
            order = np.argsort(fp, kind="stable")
            return _Run(fp[order], np.concatenate([a.ids, b.ids])[order], False)
        out_fp, out_ids = self._files(len(a) + len(b))
        i = j = o = 0
        na, nb = len(a), len(b)
        while i < na or j < nb:  # streaming: at most 2 * CHUNK entries in memory
            ca, cb = a.fp[i:i + CHUNK], b.fp[j:j + CHUNK]
            # entries up to the smallest last entry of a chunk with more after it are final
            ends = [c[-1] for c, more in ((ca, i + CHUNK < na), (cb, j + CHUNK < nb)) if more]
            if ends:
                cut = min(ends)
                ka = int(np.searchsorted(ca, cut, side="right"))
                kb = int(np.searchsorted(cb, cut, side="right"))
            else:
                ka, kb = len(ca), len(cb)
            fp = np.concatenate([ca[:ka], cb[:kb]])
            ids = np.concatenate([a.ids[i:i + ka], b.ids[j:j + kb]])
            order = np.argsort(fp, kind="stable")
            out_fp[o:o + ka + kb] = fp[order]
            out_ids[o:o + ka + kb] = ids[order]
            i, j, o = i + ka, j + kb, o + ka + kb
        for r in (a, b):
            if r.disk:
                _drop_pages(r.fp)
                _drop_pages(r.ids)
        _drop_pages(out_fp)
        _drop_pages(out_ids)
        self.spilled += 1
        return _Run(out_fp, out_ids, True)

    def _spill(self) -> None:
        """Every memory run to disk (each merged with what the merge policy says)."""
        mem = [r for r in self.runs if not r.disk]
        if not mem:
            return
        self.runs = [r for r in self.runs if r.disk]
        for r in mem:
            fp, ids = self._files(len(r))
            fp[:] = r.fp
            ids[:] = r.ids
            _drop_pages(fp)
            _drop_pages(ids)
            self.spilled += 1
            self.runs.append(_Run(fp, ids, True))
            self._merge_tail()

    def _files(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Two new mapped arrays of ``n`` entries (fingerprints, ids), their files already
        unlinked (the mapping keeps the data)."""
        if self.dir is None:
            self.dir = tempfile.mkdtemp(prefix="failclosed-seen-", dir=self.spill_dir)
        out = []
        for dtype in (np.int64, np.int32):
            fd, path = tempfile.mkstemp(suffix=".run", dir=self.dir)
            os.close(fd)
            out.append(np.memmap(path, dtype=dtype, mode="w+", shape=(max(n, 1),))[:n])
            os.unlink(path)
        return out[0], out[1]

    def close(self) -> None:
        """Remove the temporary directory (the runs stay readable through their mappings,
        freed with the last reference to them)."""
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def describe(self) -> str:
        """``seen set 12.3M fingerprints, 3 runs on disk, 96 MiB``, or '' if never tiered."""
        if not self.runs:
            return ""
        disk = [r for r in self.runs if r.disk]
        n = len(self)
        size = f"{n / 1e6:.1f}M" if n >= 100_000 else f"{n:,}"
        mib = self.disk_bytes() / (1 << 20)
        where = (f"{len(disk)} run{'s' * (len(disk) != 1)} on disk, "
                 f"{mib:.1f} MiB" if disk
                 else f"{len(self.runs)} run{'s' * (len(self.runs) != 1)} in memory")
        return f"seen set {size} fingerprints, {where}"


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While the block runs in a process's main thread whose SIGTERM does the default (a
    pool's worker process), SIGTERM raises SystemExit instead, so ``finally`` blocks (the
    seen set's temporary directory) run, and then ends the process as the default would;
    otherwise (the command line raises already, or another thread) nothing changes."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    hit: list[int] = []

    def leave(signum: int, frame: Any) -> None:
        hit.append(signum)
        sys.exit(128 + signum)

    old = signal.signal(signal.SIGTERM, leave)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
        if hit:
            # SIGTERM's default, once the finally blocks inside have run: a pool's worker
            # catches what its task raises, SystemExit included, and would take the next
            # task queued to it (a new search, a new directory, then SIGKILL)
            os._exit(128 + hit[0])
