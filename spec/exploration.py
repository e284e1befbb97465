"""The result of a search (spec/search.py): what it stored, its findings and their traces.

Storage is compact, in the manner of TLC: a state is an ``int`` id, the seen set maps the
64-bit fingerprint of its key (``hash(key)``) to that id (``index``), and its fingerprint,
parent, depth, switch count and incoming transition id are kept in ``array``s. The worlds
themselves are kept only while the search needs them (the layer being expanded, its parents
for the property step, the next layer, and the initial worlds): traces are rebuilt by
re-executing ``successors`` from an initial world along the recorded parents, matching
fingerprints. Two distinct keys with the same fingerprint would be taken for one state
(:attr:`Stats.collision_probability`: about n^2 / 2^65 for n states, as TLC reports it);
``keep_worlds=True`` keeps every world (tests compare reachable sets with it). Transitions
are interned to ints. With ``keep_graph=True`` the edges are three ``array('i')`` (src, dst,
transition id). Ids are assigned in BFS order, so the edge ``src`` array is sorted.

Traces returned to the user are always concrete and replayable: they are re-derived by
re-walking ``successors`` from a concrete initial world (see :meth:`Exploration.replay`).
Also here: the coverage of the transitions' labels (:func:`coverage`).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from failclosed.spec.seen import SeenSet

if TYPE_CHECKING:
    from failclosed.model.transition import Transition

__all__ = ["Coverage", "Exploration", "Finding", "Stats", "count_switches", "coverage"]



# A candidate of trace replay (Exploration.replay): (world, last actor, switches, penalty,
# index of its predecessor in the previous layer, transition)
_Entry = tuple[Any, str | None, int, int, int, Any]


def _rank_switches(c: int, p: int) -> tuple[int, int]:
    """Replay's order: fewest switches, then the preference for the recorded transition."""
    return (c, p)


def _rank_exact(c: int, p: int) -> tuple[int, int]:
    """Replay's order of a fair cycle: the recorded transitions first, switches second."""
    return (p, c)


def _best_path(history: list[list[_Entry]], rank: Callable[[int, int], tuple[int, int]]
               ) -> list[tuple[Transition, Any]]:
    """The concrete steps of replay's best candidate of the last layer, walked back."""
    layer = history[-1]
    j = min(range(len(layer)), key=lambda k: rank(layer[k][2], layer[k][3]))
    out: list[tuple[Transition, Any]] = []
    for k in range(len(history) - 1, 0, -1):
        e = history[k][j]
        out.append((e[5], e[0]))
        j = e[4]
    out.reverse()
    return out


@dataclass
class Stats:
    states: int  # distinct (canonical) states stored
    transitions: int  # edges explored (successor pairs yielded by expanded states)
    expanded: int  # states whose successors were fully enumerated
    max_depth: int
    seconds: float
    states_per_second: float
    peak_rss_mib: float  # ru_maxrss of the whole process after the run
    rss_delta_mib: float  # growth of ru_maxrss during the run (0 if an earlier peak was higher)
    truncated: bool  # max_states was hit: the state space is NOT exhausted
    stopped_early: bool  # stop_at_first_violation ended the search
    # the largest resident size sampled at this search's layer boundaries and at its end
    # (this search's own peak, where ru_maxrss is the process's since it started)
    search_peak_rss_mib: float = 0.0
    stored_bytes: int = 0  # estimate of what the search stores in memory (spec/seen.py)
    seen: str = ""  # the tiered seen set at the end ("" if it never left memory)

    @property
    def bytes_per_state(self) -> float:
        """The estimated bytes stored in memory per state (seen set and per-state arrays)."""
        return self.stored_bytes / self.states if self.states else 0.0

    @property
    def collision_probability(self) -> float:
        """The chance that two of the stored states' keys share a 64-bit fingerprint (and one
        of them was taken for the other), assuming ``hash`` spreads distinct keys uniformly:
        n(n-1)/2 pairs, each with chance 2^-64 (TLC's "optimistic" estimate)."""
        n = self.states
        return n * (n - 1) / 2.0 ** 65

    def __str__(self) -> str:
        flag = (
            " TRUNCATED" if self.truncated else (" (stopped early)" if self.stopped_early else "")
        )
        return (
            f"{self.states} states, {self.transitions} transitions, depth {self.max_depth}, "
            f"{self.seconds:.2f}s ({self.states_per_second:,.0f} states/s), "
            f"peak RSS {self.peak_rss_mib:.0f} MiB (+{self.rss_delta_mib:.0f})"
            f"{', ' + self.seen if self.seen else ''}{flag}"
        )


@dataclass
class Finding:
    """A state where an invariant fails or a witness holds, with a concrete shortest trace."""

    name: str
    state: int  # state id
    depth: int  # = len(trace)
    switches: int  # actor switches along the (concrete) trace
    initial: Any  # concrete initial world the trace starts from
    trace: list[tuple[Transition, Any]]  # (transition, world after it), replayable

    @property
    def world(self) -> Any:
        return self.trace[-1][1] if self.trace else self.initial


@dataclass
class Exploration:
    successors: Callable[[Any], Iterable[tuple[Transition, Any]]]
    canonical: Callable[[Any], Hashable] | None
    index: SeenSet  # fingerprint of the key (hash(key)) -> state id (spec/seen.py)
    worlds: list[Any | None]  # first concrete world seen per id (None once released)
    fingerprints: array  # 'q', state id -> fingerprint of its key
    labels: dict[str, bytearray]  # name -> per state id, the label predicate (0/1)
    deadlock_labels: dict[str, bytearray]  # name -> per entry of deadlocks, the predicate
    initial_ids: list[int]
    parent: array  # 'i', -1 for initial states
    depth: array  # 'i'
    switches: array  # 'i', fewest actor switches over shortest paths (see explore)
    in_tr: array  # 'i', transition id of the chosen incoming edge, -1 for initial states
    actor_mask: list[int]  # bit set of last actors that achieve `switches` (all bits: initial)
    alt_parents: dict[tuple[int, int], tuple[int, int]]  # (state, actor id) -> (parent, tr id)
    transitions: list[Transition]  # interned: tr id -> transition
    tr_actor: array  # 'i', tr id -> actor id
    actors: list[str]  # actor id -> actor
    enabled_count: list[int]  # tr id -> times yielded by successors of an expanded state
    taken_count: list[int]  # tr id -> times it discovered a new state
    edges_src: array | None  # 'i', sorted (ids are expanded in order)
    edges_dst: array | None
    edges_tr: array | None
    expanded: int  # ids < expanded were fully expanded
    deadlocks: array  # 'i', expanded states with no successor at all
    violations: dict[str, Finding]  # first (shortest, fewest switches) per violated invariant
    witnesses: dict[str, Finding | None]  # None: never reached
    invariants_checked: list[str]
    concrete_seen: int | None  # distinct concrete worlds hashed (measure_reduction=True)
    stats: Stats

    @property
    def truncated(self) -> bool:
        return self.stats.truncated

    @property
    def complete(self) -> bool:
        """Every reachable state was stored and expanded (neither truncated nor stopped)."""
        return not (self.stats.truncated or self.stats.stopped_early)

    @property
    def ok(self) -> bool:
        """No invariant violated (does not imply exhaustiveness: check ``truncated``)."""
        return not self.violations

    @property
    def reduction_factor(self) -> float | None:
        """Distinct concrete worlds seen / distinct canonical states (``measure_reduction``).

        Only worlds produced as successors of stored representatives (and the initial worlds)
        are counted, so this is a lower bound on the true reduction factor of the full concrete
        state space (up to 64-bit hash collisions, which can only lower it further).
        """
        if self.concrete_seen is None or not self.fingerprints:
            return None
        return self.concrete_seen / len(self.fingerprints)

    @property
    def unreached_witnesses(self) -> list[str]:
        return [k for k, v in self.witnesses.items() if v is None]

    @property
    def kept_worlds(self) -> bool:
        """Every stored state's world is still in ``worlds`` (``keep_worlds=True``)."""
        return None not in self.worlds

    def state_id(self, world: Any) -> int | None:
        key = world if self.canonical is None else self.canonical(world)
        j: int | None = self.index.get(hash(key))
        return j

    # -- traces -------------------------------------------------------------------------------

    def abstract_path(self, sid: int) -> tuple[int, list[tuple[int, int]]]:
        """``(root id, [(transition id, state id), ...])`` of the chosen shortest path to ``sid``.

        Follows the per-(state, last actor) parents so the switch count is the optimum recorded
        in ``switches[sid]``.
        """
        parent, in_tr, tr_actor = self.parent, self.in_tr, self.tr_actor
        mask, alts = self.actor_mask, self.alt_parents
        steps: list[tuple[int, int]] = []
        want: int | None = None  # required last actor at s; None: the primary one
        s = sid
        while True:
            p = parent[s]
            if p < 0:
                break
            tid = in_tr[s]
            if want is not None and want != tr_actor[tid]:
                p, tid = alts[(s, want)]
            steps.append((tid, s))
            a = tr_actor[tid]
            want = a if (mask[p] >> a) & 1 else None
            s = p
        steps.reverse()
        return s, steps

    def replay(
        self,
        root: int,
        steps: Sequence[tuple[int, int]],
        start: Any | None = None,
        last_actor: str | None = None,
        beam: int = 512,
        exact: bool = False,
    ) -> tuple[Any, list[tuple[Transition, Any]]]:
        """Turn an abstract path into a concrete one by re-walking ``successors``.

        Starting from the concrete world of ``root`` (or ``start``), every step must produce a
        successor whose key equals the key of the next abstract state; the world actually
        produced is what the next step continues from, so the result always replays. Among
        the concrete candidates the choice is exact: a small dynamic programme over
        (concrete world, last actor) minimises (actor switches, preference), where the
        preference ranks the recorded transition first, then one with the same name and actor.
        With a symmetry ``canonical`` the recorded actors belong to representatives and may be
        renamed along the concrete path, which is why this is not a plain greedy walk. Each
        layer keeps at most ``beam`` candidates (orbits are small; the bound only guards
        against huge symmetry groups). ``last_actor`` continues the switch count of a prefix.
        ``exact``: the recorded transitions first, switches second (a fair cycle: each step was
        chosen to meet a fairness class, and a parallel edge with fewer switches may not).
        """
        rank = _rank_exact if exact else _rank_switches
        first = self.worlds[root] if start is None else start
        assert first is not None, "the initial worlds are always kept"
        layer: list[_Entry] = [(first, last_actor, 0, 0, -1, None)]
        history: list[list[_Entry]] = [layer]
        for n_step, (tid, sid) in enumerate(steps, 1):
            rec = self.transitions[tid]
            new = self._replay_step(layer, rec, self.fingerprints[sid], rank)
            if not new:
                raise RuntimeError(
                    f"trace replay failed at step {n_step} ({rec}): no successor of the "
                    "current world has the recorded key's fingerprint; successors() is not "
                    "deterministic or canonical() is not a bisimulation"
                )
            if len(new) > beam:
                new.sort(key=lambda e: rank(e[2], e[3]))
                del new[beam:]
            history.append(new)
            layer = new
        return first, _best_path(history, rank)

    def _replay_step(self, layer: list[_Entry], rec: Transition, target: int,
                     rank: Callable[[int, int], tuple[int, int]]) -> list[_Entry]:
        """One step of :meth:`replay`: the successors of the worlds of ``layer`` whose key has
        the fingerprint ``target``, the best entry per (world, last actor), in the order found."""
        canon, succ = self.canonical, self.successors
        by_world: dict[Any, list[int]] = {}
        for ix, e in enumerate(layer):
            by_world.setdefault(e[0], []).append(ix)
        new: list[_Entry] = []
        pos: dict[tuple[Any, str], int] = {}
        for w, ixs in by_world.items():
            for t, w2 in succ(w):
                if hash(w2 if canon is None else canon(w2)) != target:
                    continue
                pen = (
                    0 if t == rec else (1 if (t.name, t.actor) == (rec.name, rec.actor) else 2)
                )
                for ix in ixs:
                    _, a, s0, p0, _, _ = layer[ix]
                    c = s0 + (a is not None and a != t.actor)
                    cand = (w2, t.actor, c, p0 + pen, ix, t)
                    j = pos.get((w2, t.actor))
                    if j is None:
                        pos[(w2, t.actor)] = len(new)
                        new.append(cand)
                    elif rank(c, p0 + pen) < rank(new[j][2], new[j][3]):
                        new[j] = cand
        return new

    def trace(self, sid: int) -> list[tuple[Transition, Any]]:
        """Concrete replayable trace from ``trace_initial(sid)`` to a world with ``sid``'s key."""
        return self.replay(*self.abstract_path(sid))[1]

    def trace_initial(self, sid: int) -> Any:
        w = self.worlds[self.abstract_path(sid)[0]]
        assert w is not None, "the initial worlds are always kept"
        return w

    def finding(self, name: str, sid: int) -> Finding:
        root, steps = self.abstract_path(sid)
        initial, tr = self.replay(root, steps)
        return Finding(name, sid, self.depth[sid], count_switches(tr), initial, tr)



def count_switches(trace: Sequence[tuple[Transition, Any]]) -> int:
    """Number of consecutive steps of a trace performed by different actors."""
    return sum(a[0].actor != b[0].actor for a, b in zip(trace, trace[1:], strict=False))


# --------------------------------------------------------------------------------------------
# Coverage
# --------------------------------------------------------------------------------------------


@dataclass
class Coverage:
    enabled: dict[str, int]  # label -> times enabled (yielded by successors of expanded states)
    taken: dict[str, int]  # label -> times it led to a newly discovered state
    never_enabled: list[str]  # expected labels never enabled
    never_taken: list[str]  # expected labels enabled but never discovering a new state
    unexpected: list[str]  # labels seen that were not expected (typos, new branches)


def coverage(exploration: Exploration, expected_labels: Iterable[str]) -> Coverage:
    """Aggregate the per-transition counters by ``Transition.label()``."""
    en: dict[str, int] = {}
    tk: dict[str, int] = {}
    for t, e, k in zip(
        exploration.transitions, exploration.enabled_count, exploration.taken_count, strict=True
    ):
        lab = t.label()
        en[lab] = en.get(lab, 0) + e
        tk[lab] = tk.get(lab, 0) + k
    expected = list(dict.fromkeys(expected_labels))
    exp_set = set(expected)
    return Coverage(
        enabled=en,
        taken=tk,
        never_enabled=[lab for lab in expected if en.get(lab, 0) == 0],
        never_taken=[lab for lab in expected if en.get(lab, 0) > 0 and tk.get(lab, 0) == 0],
        unexpected=sorted(lab for lab in en if lab not in exp_set),
    )

