"""The worlds of the layers in flight, packed: what a search over its memory budget keeps of
the states it has stored but not yet expanded (or still compares with).

Fingerprints are all a search needs to know a state is seen (spec/seen.py), but the states
of the layer being expanded and of the next one must be kept whole: they are expanded, and
the property step reads them. Their worlds are most of a wide search's memory (a two-run
member of ``full``: 8.8 GB resident at 17 million states, the seen set spilled). TLC keeps
its queue of unexplored states on disk (``DiskStateQueue``) for the same reason; here the
next layer is kept packed in memory: once a search's seen set is tiered (spec/seen.py), each
block of ``BLOCK`` consecutive ids the next layer fills is pickled as one list, so that what
its worlds share (the rows, records and tuples one world's successor takes over from it) is
written once, and the configuration, which every world of a search holds, by reference. A
block takes about a tenth of the memory of its worlds (100 to 200 bytes a world against 1 to
2 KB).

A packed world is read back through :meth:`PackedWorlds.get`, a block at a time (the
expander and the property step read a layer in id order, and a state's parent in the layer
before: :data:`CACHED` blocks are kept unpacked). A world read back is equal to the one
packed, with the same hash, and has the very same configuration object; objects two worlds
of one block shared are shared again, those of two blocks are equal copies. The search's
result is the same (tests/test_seen_set.py): the engine unpacks what is still packed when
the search ends.
"""

from __future__ import annotations

import gc
import io
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["BLOCK", "CACHED", "PackedWorlds"]

BLOCK = 4096  # consecutive ids pickled together
CACHED = 4  # blocks kept unpacked at once (the layer read, its parents', a look ahead)


@contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic collector off while a block is pickled or read back: it makes no cycle,
    and each of the collections its many new objects would start walks every object the
    search holds (measured: 25.8 against 8.8 us a world read back beside 6 million live
    objects)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class PackedWorlds:
    """Blocks of ``block`` consecutive state ids, pickled; ``get(i)`` reads state ``i``'s
    world back. The list the engine stores worlds in holds None for a packed id."""

    def __init__(self, block: int | None = None) -> None:
        self.block = BLOCK if block is None else block
        self.blocks: dict[int, bytes] = {}  # block number -> its worlds, pickled
        self.cache: dict[int, list[Any]] = {}  # block number -> its worlds, unpacked
        self.config: Any = None  # held by reference, never pickled
        self.nbytes = 0  # bytes of the packed blocks
        self.packed = 0  # worlds packed so far

    def __len__(self) -> int:
        return len(self.blocks)

    def describe(self) -> str:
        """``; 1.2M worlds packed in flight, 150.3 MiB`` (what the search packed, and the
        size of what it held packed at its end), or '' if it packed none."""
        if not self.packed:
            return ""
        n = self.packed
        size = f"{n / 1e6:.1f}M" if n >= 100_000 else f"{n:,}"
        return f"; {size} worlds packed in flight, {self.nbytes / (1 << 20):.1f} MiB at the end"

    def _persistent_id(self, obj: Any) -> int | None:
        return 0 if obj is self.config else None

    def _persistent_load(self, pid: Any) -> Any:
        return self.config

    def pack(self, worlds: list[Any], k: int) -> None:
        """Pack block ``k`` (ids ``k * block`` to ``(k + 1) * block - 1``, every one stored
        and in memory) and set its ids to None in ``worlds``."""
        lo = k * self.block
        part = worlds[lo:lo + self.block]
        if self.config is None:
            self.config = getattr(part[0], "config", None)
        f = io.BytesIO()
        p = pickle.Pickler(f, protocol=pickle.HIGHEST_PROTOCOL)
        p.persistent_id = self._persistent_id  # type: ignore[method-assign]
        with _no_gc():
            p.dump(part)
        data = f.getvalue()
        self.blocks[k] = data
        self.nbytes += len(data)
        self.packed += len(part)
        worlds[lo:lo + self.block] = [None] * len(part)

    def _load(self, k: int) -> list[Any]:
        u = pickle.Unpickler(io.BytesIO(self.blocks[k]))
        u.persistent_load = self._persistent_load  # type: ignore[method-assign]
        with _no_gc():
            got: list[Any] = u.load()
        return got

    def get(self, i: int) -> Any:
        """State ``i``'s world (its block is packed)."""
        k = i // self.block
        got = self.cache.get(k)
        if got is None:
            got = self._load(k)
            if len(self.cache) >= CACHED:
                del self.cache[next(iter(self.cache))]  # the oldest read
            self.cache[k] = got
        return got[i - k * self.block]

    def release(self, below: int) -> None:
        """Forget the blocks whose ids are all below ``below`` (their worlds are released)."""
        for k in [k for k in self.blocks if (k + 1) * self.block <= below]:
            self.nbytes -= len(self.blocks.pop(k))
            self.cache.pop(k, None)

    def unpack_into(self, worlds: list[Any]) -> None:
        """Put every world still packed back in ``worlds`` and forget the blocks (the end of
        the search: its result holds the worlds a search without packing would)."""
        for k in sorted(self.blocks):
            part = self.cache.pop(k, None) or self._load(k)
            worlds[k * self.block:k * self.block + len(part)] = part
        self.blocks.clear()
        self.cache.clear()
        self.nbytes = 0
