"""Which safety properties the simulator checks, and on which world.

The properties are ``spec.properties.SAFETY`` (name -> object with ``.check(world) -> bool``):
the same predicates the exhaustive checker uses.

When they are checked (documented in docs/SIMULATOR.md):

* after every step, on the projection of each run the step touched, those properties whose
  declared inputs the step changed (sim.engine ``check_steps``, the default); with
  keep-going only the transient ones, a stable one (``Property.stable``) being dated back to
  its step when found at the archive or a whole-world check;
* per run, when the run is archived (its row is terminal and no process or message refers
  to it), on the run's *projection* (the world with only that run's row, events, ledger
  entries, outcomes, processes, messages and marks): every run is checked once, completely;
* on the whole world every ``check_every`` transitions and at the end; a failure there is
  attributed to the live runs whose projections fail (or to every live run if none does).
"""

from __future__ import annotations

from failclosed.model.state import World, replace
from failclosed.spec.properties import SAFETY


def load_safety() -> tuple[dict[str, object], str]:
    """``(properties, source)``: spec's SAFETY, the checker's own predicates."""
    return dict(SAFETY), "spec.properties.SAFETY"


def project(w: World, i: int, events: tuple | None = None, ledger: tuple | None = None) -> World:
    """The world restricted to run slot ``i`` (see the module docstring). ``events`` and
    ``ledger``: the run's own, when the caller has them at hand."""
    rid = w.config.runs[i].id
    suffix = ":" + rid
    n = len(w.rows)
    rows = (None,) * i + (w.rows[i],) + (None,) * (n - i - 1)
    reapers = tuple(  # each reaper whose current row is the run's, with only the run's rows
        replace(r, rows=tuple(x for x in r.rows if x[0] == i), idx=0)
        for r in w.reapers if r.rows[r.idx][0] == i
    )
    return replace(
        w,
        rows=rows,
        events=tuple(e for e in w.events if e.run == i) if events is None else events,
        ledger=tuple(a for a in w.ledger if a.run == i) if ledger is None else ledger,
        messages=tuple(m for m in w.messages if m.run == i),
        procs=tuple(p for p in w.procs if p.run == i),
        reapers=reapers,
        outcomes=tuple(o for o in w.outcomes if o[1] == i),
        marks=frozenset(m for m in w.marks if m.endswith(suffix)),
        asked=frozenset(a for a in w.asked if a.run == i) if w.asked else w.asked,
        made=tuple(m for m in w.made if m.run == i) if w.made else w.made,
    )


class RunItems:
    """A world's events (or ledger entries) by run slot, kept up to date across steps: a
    step that only appends to the tuple adds the new items to their runs' tuples; any other
    change (an archive takes a run's items out) rebuilds the index. ``of(items, i)`` is
    ``tuple(x for x in items if x.run == i)``, without the scan of every run's items."""

    def __init__(self) -> None:
        self.src: tuple = ()
        self.by_run: dict[int, tuple] = {}

    def of(self, items: tuple, i: int) -> tuple:
        src = self.src
        if items is not src:
            n = len(src)
            by_run = self.by_run
            if len(items) >= n and items[:n] == src:
                for x in items[n:]:
                    by_run[x.run] = by_run.get(x.run, ()) + (x,)
            else:
                by_run.clear()
                for x in items:
                    by_run[x.run] = by_run.get(x.run, ()) + (x,)
            self.src = items
        return self.by_run.get(i, ())


def failing(props: dict[str, object], w: World) -> list[str]:
    out = []
    for name, p in props.items():
        try:
            ok = p.check(w)  # type: ignore[attr-defined]
        except Exception as e:  # a property that cannot read this world is a finding too
            raise RuntimeError(f"property {name} raised {e!r}") from e
        if not ok:
            out.append(name)
    return out
