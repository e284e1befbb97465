"""State abstraction for the exhaustive checker: symmetry reduction, the time shift and the
log order.

Symmetry: workers are interchangeable (their names only appear as identities and labels),
and so are runs whose ``RunSpec`` differs only in its id. :func:`make_canonical` returns a
key function that renames workers and permutes such runs everywhere (row tuple, per-run
tuples, every ``run`` index, and the worker names / run ids inside strings such as segment
labels, identities, ``claimed_by`` and marks) and keeps the least serialised form.

Time: without a horizon only the differences between instants matter, so every key is taken
of the world shifted as early as it goes (:func:`shift_time`).

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

__all__ = ["group_logs", "make_canonical", "reductions_of", "shift_time"]


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


def _time_key(spec: Config) -> tuple[Callable[[World], World] | None, tuple[Reduction, ...]]:
    """The time abstraction of ``spec`` and the reductions it applies (None: none, as with a
    horizon there is nothing to shift against)."""
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


def make_canonical(spec: Config, symmetry: bool = True,
                   logs: bool = True) -> Callable[[World], Hashable] | None:
    """A canonical key over the symmetry group of ``spec`` (None: no reduction applies).

    Key = min over the permutations of a serialised form of the world. A permutation renames
    the workers (Proc.name/worker/identity/seg/owner/guard, Row.claimed_by, Event.seg,
    Application.seg, outcomes) and moves runs with identical RunSpec (rows, started, cancels,
    decisions, resumes, every ``run`` index (dataclass fields, the reaper snapshot and the
    outcome tuples), and the run ids inside strings: labels, identities, marks). Processes
    and messages are multisets (sorted). tests/test_checker.py checks on
    ``medium-symmetric`` that the reduced search stores exactly one world per orbit of the
    plain search's worlds. Every key is taken of the world shifted in time
    (:func:`shift_time`; nothing with a horizon); with a trivial group (or
    ``symmetry=False``) that world alone is the key. ``logs``: every log's entries grouped by
    key (:func:`group_logs`; after the permutation, by the permuted key). The key's
    ``reductions`` attribute names what it applies, in this order: symmetry, time shift, log
    order."""
    time, treds = _time_key(spec)
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
            return min(ser(time(w)))  # only the differences between instants matter

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
