"""The packed worlds of the layers in flight (spec/frontier.py): a world read back is the
world packed (equal, the same hash, the same successors, the very same configuration
object), objects the worlds of a block shared are shared again, a packed block is a fraction
of its worlds' memory, and released blocks are forgotten. tests/test_seen_set.py checks that
a search that packs gives the very Exploration of one that does not."""

from __future__ import annotations

import re
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from failclosed.model.config import initial_world, parse_config  # noqa: E402
from failclosed.model.runtime import successors  # noqa: E402
from failclosed.spec import frontier  # noqa: E402
from failclosed.spec.checker import load_config  # noqa: E402
from failclosed.spec.frontier import PackedWorlds  # noqa: E402


def _worlds(part: str = "small-retry", n: int = 600) -> list:
    """The first ``n`` worlds a BFS from ``part``'s initial world reaches (repeats kept)."""
    cfg = next(p for p in load_config("small")[1] if p.name == part)
    spec, budget = parse_config(cfg.data, "current")
    layer = [initial_world(spec, budget)]
    out: list = []
    while layer and len(out) < n:
        layer = [w2 for w in layer for _, w2 in successors(w)][:n]
        out.extend(layer)
    return out[:n]


def test_a_world_read_back_is_the_world_packed() -> None:
    ws = _worlds()
    stored = list(ws)
    pk = PackedWorlds(block=64)
    for k in range(len(ws) // 64):
        pk.pack(stored, k)
    assert stored[:64] == [None] * 64 and len(pk) == len(ws) // 64
    for i, w in enumerate(ws):
        back = pk.get(i) if stored[i] is None else stored[i]
        assert back == w and hash(back) == hash(w)
        assert back.config is w.config  # held by reference, never copied
        assert [(t, hash(x)) for t, x in successors(back)] == [
            (t, hash(x)) for t, x in successors(w)]


def test_what_a_block_shared_is_shared_again() -> None:
    ws = _worlds()
    stored = list(ws)
    pk = PackedWorlds(block=len(ws))
    pk.pack(stored, 0)
    back = [pk.get(i) for i in range(len(ws))]
    pairs = [(a, b) for a, b in zip(ws, ws[1:], strict=False) if a.rows is b.rows]
    assert pairs  # successors take the rows over from their world
    again = [(x, y) for x, y in zip(back, back[1:], strict=False) if x.rows is y.rows]
    assert len(again) == len(pairs)


def test_a_packed_block_is_a_fraction_of_its_worlds() -> None:
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    ws = _worlds(n=2000)
    mid = tracemalloc.take_snapshot()
    pk = PackedWorlds(block=2000)
    stored = list(ws)
    pk.pack(stored, 0)
    del stored
    tracemalloc.stop()
    held = sum(s.size_diff for s in mid.compare_to(before, "filename"))
    assert 0 < pk.nbytes < held / 3


def test_released_blocks_are_forgotten_and_the_rest_unpacked() -> None:
    ws = _worlds()
    stored = list(ws)
    pk = PackedWorlds(block=50)
    for k in range(1, len(ws) // 50):
        pk.pack(stored, k)
    assert pk.get(120) == ws[120]
    pk.release(200)  # blocks 1 to 3 (ids 50 to 199)
    assert sorted(pk.blocks) == list(range(4, len(ws) // 50)) and 2 not in pk.cache
    pk.unpack_into(stored)
    assert stored[200:] == ws[200:] and not pk.blocks and pk.nbytes == 0
    assert stored[50:200] == [None] * 150  # released: a search had let them go already


def _held_bytes(pk: PackedWorlds) -> int:
    """What the packed blocks hold, measured on the objects (not read from the counter)."""
    return sum(sys.getsizeof(b) - sys.getsizeof(b"") for b in pk.blocks.values())


def _printed(pk: PackedWorlds) -> tuple[int, float]:
    """The worlds and the MiB ``describe`` prints (what ``check`` shows at a search's end)."""
    m = re.fullmatch(r"; ([\d,]+) worlds packed in flight, ([\d.]+) MiB at the end",
                     pk.describe())
    assert m, pk.describe()
    return int(m.group(1).replace(",", "")), float(m.group(2))


def test_the_printed_memory_figures_are_what_the_blocks_hold_as_blocks_are_released() -> None:
    """The figure a search prints at its end (``describe``) and the bytes the memory
    estimate counts (``nbytes``) are the bytes of the blocks still held, measured
    independently (the objects' sizes, and tracemalloc's count of what packing kept), after
    packing and after each release; the worlds count every world ever packed. Over 2 MiB
    packed, so that a MiB printed as a million bytes would show."""
    ws = _worlds(n=1200) * 45  # 45 blocks of the same 1,200 worlds
    stored = list(ws)
    pk = PackedWorlds(block=1200)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for k in range(45):
        pk.pack(stored, k)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    mine = [tracemalloc.Filter(True, frontier.__file__)]  # what the packing code allocated
    kept = sum(s.size_diff for s in after.filter_traces(mine).compare_to(
        before.filter_traces(mine), "filename"))
    assert pk.nbytes == _held_bytes(pk) > 2 << 20
    assert abs(kept - pk.nbytes) < 0.05 * pk.nbytes + 4096  # the dict and its entries
    for below in (0, 3600, 4000, 30000, 54000):
        pk.release(below)
        assert len(pk) == 45 - below // 1200
        assert pk.nbytes == _held_bytes(pk)
        if pk.nbytes:
            assert _printed(pk) == (54000, round(_held_bytes(pk) / (1 << 20), 1))
    assert pk.nbytes == 0


def test_the_spill_estimate_counts_the_packed_blocks() -> None:
    """What decides spilling (spec/seen.py's ``settle``, given ``_Store.other_bytes``) counts
    the bytes of the packed blocks still held: their measured size, no more, no less, before
    and after a release."""
    from failclosed.spec.engine import _Store
    from failclosed.spec.seen import SeenSet

    ws = _worlds(n=600)
    st = _Store.empty(False, {}, SeenSet(None))
    st.fps.extend(range(len(ws)))
    bare = st.other_bytes(0)
    st.packed = PackedWorlds(block=100)
    stored = list(ws)
    for k in range(6):
        st.packed.pack(stored, k)
    assert st.other_bytes(0) - bare == _held_bytes(st.packed) > 0
    st.packed.release(300)
    assert st.other_bytes(0) - bare == _held_bytes(st.packed) > 0
