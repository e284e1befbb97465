"""State abstraction for the exhaustive checker: symmetry reduction, the time shift and the
clock regions.

Symmetry: workers are interchangeable (their names only appear as identities and labels),
and so are runs whose ``RunSpec`` differs only in its id. :func:`make_canonical` returns a
key function that renames workers and permutes such runs everywhere (row tuple, per-run
tuples, every ``run`` index, and the worker names / run ids inside strings such as segment
labels, identities, ``claimed_by`` and marks) and keeps the least serialised form.

Time: without a horizon only the differences between instants matter, so every key is taken
of the world shifted as early as it goes (:func:`shift_time`).

Clock regions (:func:`clock_regions`): of the instants *before* now only their order
matters, so the gaps between them are closed up to one second each. The instants are the
fields ``model.state.INSTANTS`` declares (the clock, a row's lease, a message's not_before,
a reaper tick's now; "no instant" values such as a lease of 0 are left alone). The
argument that worlds with one key have the same futures (an exact bisimulation, up to the
instants' values in transition labels):

* What the model does with instants (model/store.py, model/runtime.py): every guard compares
  an instant with the clock or with another instant, with a constant of 0 or 1
  (``store.stale``: ``lease_expires + 1 <= now`` through ``store.lapses_at``, now being the
  clock, a tick's now or the clock's next instant; a pick-up's ``not_before <= now``; T10's
  order by ``lease_expires``, ties included; ``waiting_instants``' ``lease_expires == now +
  LEASE_SECONDS`` and its ``not_before > now``), and every write is now + c with c one of
  ``Constants.time_offsets()`` (all >= 0) or a copy of now (a tick's now). The clock only
  moves forward, to the instants ``waiting_instants`` names, which are later than now.
* An instant x before now (x < now) therefore stays before every later now, before every
  instant written from now on (now' + c >= now > x) and before every instant at or after
  now; each guard on x alone is decided (stale, deliverable, no same-second renewal, no
  clock target). What is left are comparisons of two instants both before now, and those
  read their order only (equal, or one earlier: integers one second apart already satisfy
  ``x + 1 <= y``). Closing each gap below now to one second keeps that order and every
  equality, and moves nothing at or after now: the worlds have the same guards' values now
  and after every step, step for step, so the same futures.
* The instants at or after now keep their exact distance from now: each was written as
  now + c for a constant c, so none lies more than ``max(time_offsets())`` ahead (the classic
  region bound; no gap there is "far") and their differences decide what the clock's next
  instants are and how new leases order against them.
* The properties read instants only through the same predicates (``stale`` at a tick's now,
  ``not_before <= now``, ``lease_expires > 0``); none reads a duration.
* With a horizon the clock is compared with an absolute instant (``to <= horizon``), but only
  instants at or after now are, and those are not moved: the regions are taken anchored at
  the clock there (no translation), without a horizon before the time shift.

Log order (:func:`group_logs`): the World tuples ``model.state.LOGS`` declares (the events,
the ledger, the outcomes, the principals' requests that took effect, the console commands)
are append-only, and what anything reads of them is each key's (each run's, each command
actor's) own entries in their order: a run's largest sequence, its events page, a call's
later re-application, a segment's outcome, a run's stream order. So every log is keyed with
its entries grouped by key, each key's order kept: two worlds that differ only in how two
runs' appends interleaved are one state. The argument: every transition appends at the end
of a log (each key's order grows the same way in both worlds) and reads a log only through a
filter on one key, a count or a membership; every property does the same
(spec/properties.py: each finder filters by run, call or segment, a segment belonging to one
run). tests/test_symmetry_soundness.py checks the bisimulation on random worlds whose logs
are interleaved afresh, and catches the reduction made unsound (a key that forgets each
run's own order too).

Every abstraction here is one in the sense of ``spec.engine.explore``'s ``canonical``: worlds
with the same key have successors with matching keys. A key names the reductions it applies
in its ``reductions`` attribute (``REDUCTIONS`` for the names).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Hashable
from dataclasses import fields, replace
from operator import attrgetter
from typing import Any

from failclosed.model import state
from failclosed.model.state import Config, World, instants, map_instants
from failclosed.spec.vocab import Reduction

__all__ = ["clock_regions", "group_logs", "make_canonical", "reductions_of", "shift_time"]


# =========================================================================================
# time
# =========================================================================================
def shift_time(w: World) -> World:
    """The same world with every instant moved earlier by one constant, as far as keeps every
    instant positive. Every guard compares instants with each other (``lease_expires < now``,
    ``not_before <= now``) or writes ``now + LEASE_SECONDS``, and ``0`` ("no lease") is kept,
    so the shifted world has exactly the same futures, moved in time. The checker uses it as
    a state abstraction (time symmetry); with a horizon there is nothing to shift against.
    The instants are those ``model.state.INSTANTS`` declares."""
    if w.config.horizon is not None:
        return w
    d = min(instants(w)) - 1
    if d <= 0:
        return w
    return map_instants(w, lambda t: t - d)


# the gap an instant before now keeps to the next one (see the module docstring: order only)
PAST_GAP = 1


def clock_regions(w: World, past_gap: int = PAST_GAP, future_gap: int | None = None) -> World:
    """The representative of ``w``'s clock region: every gap between two successive instants
    before now (the last of them and now included) closed to at most ``past_gap`` seconds,
    the instants at or after now kept where they are, then (without a horizon) every instant
    moved by one constant so the earliest is 1. ``future_gap`` (None: none) closes the gaps
    after now too: unsound for any value below the largest time offset, there only for the
    tests that show the checks catch it."""
    now: int = w.clock
    ts: list[int] = list(instants(w))
    lo = min(ts)
    moves: dict[int, int] = {}
    # no gap to close when every instant before now is now - 1 (or none is: lo is now)
    if lo < now - 1 or (past_gap != 1 and lo < now):
        below: list[int] = sorted({t for t in ts if t < now})
        prev_old = prev_new = now
        for t in below[::-1]:
            new = prev_new - min(prev_old - t, past_gap)
            if new != t:
                moves[t] = new
            prev_old, prev_new = t, new
    if future_gap is not None:
        prev_old = prev_new = now
        above: list[int] = sorted({t for t in ts if t > now})
        for t in above:
            new = prev_new + min(t - prev_old, future_gap)
            if new != t:
                moves[t] = new
            prev_old, prev_new = t, new
    d = 0
    if w.config.horizon is None:  # the earliest instant at 1 (0 too: a lease is never 0)
        d = moves.get(lo, lo) - 1
    if not moves:
        return w if d == 0 else map_instants(w, lambda t: t - d)

    def move(t: int) -> int:
        return moves.get(t, t) - d

    return map_instants(w, move)


# =========================================================================================
# logs
# =========================================================================================
def _log_keys() -> dict[str, str]:
    """{World field: the entries' key field} of every declared log (``model.state.LOGS``,
    read when a key function is made)."""
    return {log.field: log.key for log in state.LOGS}


def _grouped(ks: list[Any], v: tuple) -> tuple | None:
    """The entries ``v`` grouped by their keys ``ks`` (ascending; each key's order kept), or
    None if they already are."""
    for a, b in zip(ks, ks[1:]):  # noqa: B905 - one shorter on purpose
        if b < a:
            break
    else:
        return None
    return tuple(x for _, _, x in sorted(zip(ks, range(len(v)), v, strict=True)))


def group_logs(w: World, logs: dict[str, str] | None = None) -> World:
    """The same world with the entries of every log (``model.state.LOGS``; ``logs``: {field:
    key field} instead) grouped by their key, in ascending order, each key's own order kept:
    the representative of the worlds that differ only in how independent appends
    interleaved (the module docstring)."""
    ch: dict[str, Any] = {}
    for f, k in (_log_keys() if logs is None else logs).items():
        v = getattr(w, f)
        if len(v) > 1:
            g = _grouped(list(map(attrgetter(k), v)), v)
            if g is not None:
                ch[f] = g
    return replace(w, **ch) if ch else w


def _time_key(spec: Config, clock: bool) -> tuple[Callable[[World], World] | None,
                                                  tuple[Reduction, ...]]:
    """The time abstraction of ``spec`` and the reductions it applies (None: none)."""
    if clock:
        shift = (Reduction.TIME_SHIFT,) if spec.horizon is None else ()
        return clock_regions, shift + (Reduction.CLOCK_REGIONS,)
    if spec.horizon is None:
        return shift_time, (Reduction.TIME_SHIFT,)
    return None, ()


def reductions_of(canonical: Callable[[World], Hashable] | None) -> tuple[Reduction, ...]:
    """The reductions a key from :func:`make_canonical` applies (none for None)."""
    return getattr(canonical, "reductions", ())


# =========================================================================================
# workers and runs
# =========================================================================================
_TOKEN = re.compile(r"[^:/#]+|[:/#]")


def _sym_runs(spec: Config) -> list[list[int]]:
    """Classes of interchangeable runs: identical RunSpec up to the id. (T10 orders rows by
    lease only; the model lets rows of equal lease come back in any order, so no transition
    depends on a run's index and permuting identical runs is a symmetry.) A run the
    operator's cancel command names (``Config.operator_cancels``) is in no class: the
    command's next id is fixed by the configuration, not by the world, so permuting that run
    with another would change which one is cancelled next."""
    named = set(spec.operator_cancels)
    classes: dict[Any, list[int]] = {}
    for i, r in enumerate(spec.runs):
        classes.setdefault((replace(r, id=""), r.id if r.id in named else ""), []).append(i)
    return [c for c in classes.values() if len(c) > 1]


def _group(spec: Config) -> list[tuple[dict[str, str], list[int]]] | None:
    """The symmetry group of ``spec`` as ``(string renaming, run index map)`` per element
    (the identity included), or None if a name is both a worker and a run id."""
    workers = list(spec.workers)
    run_classes = _sym_runs(spec)
    ids = [r.id for r in spec.runs]
    if set(workers) & set(ids):
        return None
    wperms = list(itertools.permutations(workers)) if len(workers) > 1 else [tuple(workers)]
    rperms: list[list[int]] = []
    n = len(spec.runs)
    for combo in itertools.product(*(itertools.permutations(c) for c in run_classes)):
        perm = list(range(n))
        for cls, img in zip(run_classes, combo, strict=True):
            for src, dst in zip(cls, img, strict=True):
                perm[src] = dst
        rperms.append(perm)
    if not rperms:
        rperms = [list(range(n))]
    group = []
    for wp in wperms:
        for rp in rperms:
            smap = {a: b for a, b in zip(workers, wp, strict=True) if a != b}
            smap.update({ids[i]: ids[rp[i]] for i in range(n) if rp[i] != i})
            group.append((smap, rp))
    return group


def make_canonical(spec: Config, symmetry: bool = True, clock: bool = True,
                   logs: bool = True) -> Callable[[World], Hashable] | None:
    """A canonical key over the symmetry group of ``spec`` (None: no reduction applies).

    Key = min over the permutations of a serialised form of the world. A permutation renames
    the workers (Proc.name/worker/identity/seg/owner/guard, Row.claimed_by, Event.seg,
    Application.seg, outcomes) and moves runs with identical RunSpec (rows, started, cancels,
    decisions, resumes, every ``run`` index (dataclass fields, the reaper snapshot and the
    outcome tuples), and the run ids inside strings: labels, identities, marks). Processes
    and messages are multisets (sorted). tests/test_checker.py checks on
    ``medium-symmetric`` that the reduced search stores exactly one world per orbit of the
    plain search's worlds. Every key is taken of the world's time representative: its clock
    region (:func:`clock_regions`; ``clock=False``: the time shift alone, and nothing with a
    horizon); with a trivial group (or ``symmetry=False``) that representative alone is the
    key. ``logs``: every log's entries grouped by key (:func:`group_logs`; after the
    permutation, by the permuted key). The key's ``reductions`` attribute names what it
    applies, in this order: symmetry, time shift, clock regions, log order."""
    time, treds = _time_key(spec, clock)
    # a log keyed by run has one key with one run: nothing to group
    log_keys = {f: k for f, k in (_log_keys() if logs else {}).items()
                if k != "run" or len(spec.runs) > 1}
    if log_keys:
        treds = treds + (Reduction.LOG_ORDER,)
    group = _group(spec) if symmetry else None
    if group is None or len(group) == 1:  # None: a worker name that is also a run id
        if time is None and not log_keys:
            return None

        def timed(w: World) -> Hashable:
            if log_keys:
                w = group_logs(w, log_keys)
            return w if time is None else time(w)

        timed.reductions = treds  # type: ignore[attr-defined]
        return timed

    n = len(spec.runs)
    world_fields = tuple(f.name for f in fields(World) if f.name != "config")
    field_names: dict[type, tuple[str, ...]] = {}
    ser = _serialiser([_field_serialiser(_value_serialiser(smap, rp, field_names), rp, n,
                                         log_keys)
                       for smap, rp in group], world_fields)

    if time is None:
        def canonical(w: World) -> Hashable:
            return min(ser(w))
    else:
        def canonical(w: World) -> Hashable:
            return min(ser(time(w)))  # only the instants' order and near differences matter

    canonical.group_size = len(group)  # type: ignore[attr-defined]
    canonical.reductions = (Reduction.SYMMETRY,) + treds  # type: ignore[attr-defined]
    return canonical


class _Key:
    """A serialised world with its hash computed once from its fields' memoised hashes (the
    serialisation is a deep tuple: hashing it afresh at every index look-up would walk it)."""

    __slots__ = ("t", "h")

    def __init__(self, t: tuple, h: int) -> None:
        self.t = t
        self.h = h

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Key) and self.h == other.h and self.t == other.t

    def __lt__(self, other: _Key) -> bool:
        return self.t < other.t


_PER_RUN = frozenset({"rows", "started", "cancels", "decisions", "resumes"})

# The memos of the serialisers hold their keys (rows, processes, field tuples) alive: the
# search keeps no world past its layer, so a memo that grew without bound would hold most
# of the state space. Each is emptied when it reaches this many entries (a cache: the keys
# do not depend on it); successive worlds share their recent parts, which refill it at once.
MEMO_LIMIT = 1 << 12


def _serialiser(perms: list[Callable[[str, Any], Any]],
                world_fields: tuple[str, ...]) -> Callable[[World], list[_Key]]:
    """The serialisations of a world under every permutation of the group (``perms``: one
    field serialiser each; see :func:`_field_serialiser`), as keys. Generic over the
    dataclasses of model.state (new ghost fields are picked up): every string is renamed
    token-wise, every field called ``run`` is a run index. Each world field's serialisations
    are memoised on the field's value, all permutations' together (one look-up, one hash of
    the value, per field and world): successive worlds share most of their fields, so most
    look-ups hit."""
    k = len(perms)
    fmemo: dict[str, dict[Any, tuple[tuple[Any, int], ...]]] = {f: {} for f in world_fields}

    def ser(w: World) -> list[_Key]:
        outs: list[list[Any]] = [[] for _ in range(k)]
        hss: list[list[int]] = [[] for _ in range(k)]
        for f in world_fields:
            v = getattr(w, f)
            m = fmemo[f]
            r = m.get(v)
            if r is None:
                if len(m) >= MEMO_LIMIT:
                    m.clear()
                xs = [field(f, v) for field in perms]
                r = m[v] = tuple((x, hash(x)) for x in xs)
            for p in range(k):
                x, h = r[p]
                outs[p].append(x)
                hss[p].append(h)
        return [_Key(tuple(outs[p]), hash(tuple(hss[p]))) for p in range(k)]

    return ser


def _value_serialiser(smap: dict[str, str], rp: list[int],
                      field_names: dict[type, tuple[str, ...]]) -> Callable[[Any], Any]:
    """The serialisation of one value under the permutation: strings renamed token-wise,
    tuples element-wise, sets sorted, dataclasses field by field (memoised: rows, events and
    processes are shared between worlds) with each ``run`` field moved by ``rp``."""
    cache: dict[str, str] = {}
    memo: dict[Any, tuple] = {}  # row / event / proc ... -> its serialisation

    def rename(s: str) -> str:
        r = cache.get(s)
        if r is None:
            r = cache[s] = "".join(smap.get(t, t) for t in _TOKEN.findall(s))
        return r

    def val(v: Any) -> Any:
        if hasattr(v, "__dataclass_fields__"):  # rows, events, procs...: shared, memoised
            r = memo.get(v)
            if r is None:
                if len(memo) >= MEMO_LIMIT:
                    memo.clear()
                r = memo[v] = dval(v)
            return r
        if isinstance(v, str):
            return rename(v) if v else v
        if isinstance(v, tuple):
            return tuple(val(x) for x in v)
        if isinstance(v, (frozenset, set)):
            return tuple(sorted(val(x) for x in v))
        return v

    def dval(v: Any) -> tuple:
        names = field_names.get(type(v))
        if names is None:
            names = field_names[type(v)] = tuple(f.name for f in fields(v))
        return tuple(rp[getattr(v, f)] if f == "run" else val(getattr(v, f)) for f in names)

    return val


def _field_serialiser(val: Callable[[Any], Any], rp: list[int], n: int,
                      logs: dict[str, str]) -> Callable[[str, Any], Any]:
    """The serialisation of one World field: per-run tuples reordered by the permutation,
    processes and messages as sorted multisets, run indices inside each reaper's snapshot and
    the outcome tuples moved, the entries of each log in ``logs`` ({field: key field})
    grouped by their permuted key (:func:`group_logs`); any other field is a plain value."""
    inv = [0] * n
    for i, j in enumerate(rp):
        inv[j] = i

    def field(f: str, v: Any) -> Any:
        k = logs.get(f)
        if k is None or len(v) < 2:
            return plain(f, v)
        out = plain(f, v)
        ks = [rp[getattr(x, k)] if k == "run" else val(getattr(x, k)) for x in v]
        return _grouped(ks, out) or out

    def plain(f: str, v: Any) -> Any:
        if f in _PER_RUN:
            return tuple(val(v[inv[j]]) if v[inv[j]] is not None else () for j in range(n))
        if f in ("messages", "procs"):
            return tuple(sorted(val(x) for x in v))
        if f == "reapers":  # each reaper's tick (a reaper is not a run: its name stays)
            return tuple(
                (t.name, t.pc, t.now, tuple((rp[x[0]],) + tuple(val(x[1:])) for x in t.rows), t.idx)
                for t in v
            )
        if f == "outcomes":  # (segment, run, kind, OUTCOME): a run index inside
            return tuple((val(s), rp[r], k, o) for s, r, k, o in v)
        return val(v)

    return field
