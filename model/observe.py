"""The observable view of a world: what a world *is*, named by entity, not by Python layout.

:func:`observe` flattens a :class:`~failclosed.model.state.World` into one dictionary from
names to plain values (str, int, bool, None, lists and dicts of them: JSON-able), named after
the things the runtime has rather than after the records that hold them:

* ``clock``: the model's clock; ``faults``: the fault budget left; ``marks``: the history
  facts the spec reads (sorted); ``catalogue.removed``: the tools removed (sorted);
* ``row <run id>`` (True while the row exists) and ``row <run id>.<column>``: the run row
  (RUNTIME 3.1), its ghost counters included; no key for a run with no row yet;
* ``events <run id>``: the run's audit events in order; ``ledger <run id>``: the effects
  that landed in the outside world for it (each a dict by field name, without ``run``);
* ``bus``: the messages in flight (``run`` is the run id); ``outcomes``: what processes
  returned, in order; ``commands``: what the runtime's console commands ended with, in
  order (only once one has: no key while there is none);
* ``proc <name>`` (True while the process lives) and ``proc <name>.<field>``: a process by
  its actor name, the fields of its kind's part (a queued worker's ``worker``, a resume's
  ``decision``, ...) as its own; ``proc <name>.outer`` the frames a sync dispatch suspended;
* ``<reaper actor>`` (True while it is mid-tick) and ``<reaper actor>.<field>``: each reaper
  by its actor name (``names.reaper_name``: ``reaper``, ``reaper#2``, ...);
* ``caller <run id>.started`` / ``.cancels`` / ``.decisions`` / ``.resumes``: the caller's
  per-run counters;
* ``world.<field>``: a field of ``World`` this view does not name yet (name it here).

A record held inside a value (an event, a settle plan, a snapshot row) is a dict of its
fields by name; a field named ``run`` holds the run's id (the index into ``Config.runs`` is
layout). With ``defaults=False`` a field at its declared default is left out (of the flat
keys and of every record inside a value), so a field added with a default that no step sets
never shows, and neither does the class a record is an instance of: the view of a world
moves only when the world's behaviour does. :func:`changes` is what one step changed.

The behaviour digests (tests/behaviour_digests.py) record counterexample traces through
this view.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .state import World

__all__ = ["observe", "changes"]


# the World fields observe names by entity (any other shows as ``world.<field>``)
_NAMED = frozenset({"clock", "rows", "events", "ledger", "messages", "procs", "reapers",
                    "outcomes", "commands", "started", "cancels", "decisions", "resumes",
                    "removed", "faults", "marks"})


def _fields(v: Any) -> list[tuple[str, Any, Any]]:
    """``(name, value, default)`` of a record or named tuple (``MISSING``: no default)."""
    if dataclasses.is_dataclass(v):
        return [(f.name, getattr(v, f.name), f.default) for f in dataclasses.fields(v)
                if f.name != "config"]
    defaults = v._field_defaults
    return [(n, getattr(v, n), defaults.get(n, dataclasses.MISSING)) for n in v._fields]


def _is_record(v: Any) -> bool:
    return (dataclasses.is_dataclass(v) and not isinstance(v, type)) or (
        isinstance(v, tuple) and hasattr(v, "_fields"))


def _items(w: World, v: Any, defaults: bool, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """A record's fields by name, as plain values (``run``: the run's id)."""
    out: dict[str, Any] = {}
    for name, x, default in _fields(v):
        if name in skip or (not defaults and default is not dataclasses.MISSING and x == default):
            continue
        out[name] = w.run_id(x) if name == "run" and type(x) is int else _plain(w, x, defaults)
    return out


def _plain(w: World, v: Any, defaults: bool) -> Any:
    if v is None or isinstance(v, (str, int, float)):
        return v
    if _is_record(v):
        return _items(w, v, defaults)
    if isinstance(v, (tuple, list)):
        return [_plain(w, x, defaults) for x in v]
    if isinstance(v, (frozenset, set)):
        return sorted((_plain(w, x, defaults) for x in v), key=repr)
    raise TypeError(f"observe: no plain form for {type(v).__name__}")


def _proc(w: World, p: Any, defaults: bool) -> dict[str, Any]:
    """A process's own fields and its part's, as one flat dict (without ``name``)."""
    own = _items(w, p, defaults, skip=("name", "part", "outer"))
    if p.part is not None:
        own.update(_items(w, p.part, defaults))
    if p.outer or defaults:
        own["outer"] = [_proc(w, f, defaults) for f in p.outer]
    return own


def _reapers(w: World) -> list[tuple[str, Any]]:
    """``(actor name, state)`` of each reaper mid-tick (``World.reapers``, by name)."""
    return [(r.name, r) for r in w.reapers]


def _commands(w: World, defaults: bool) -> dict[str, Any]:
    """``commands``: what the runtime's console commands ended with, once one has (so a
    world in which none ran has the view it had before commands were modelled)."""
    return {"commands": _plain(w, w.commands, defaults)} if w.commands or defaults else {}


def observe(world: World, defaults: bool = True) -> dict[str, Any]:
    """The observable view of ``world`` (module docstring); ``defaults=False`` leaves out
    every field at its declared default."""
    w = world
    view: dict[str, Any] = {"clock": w.clock, "faults": w.faults,
                            "marks": _plain(w, w.marks, defaults),
                            "catalogue.removed": _plain(w, w.removed, defaults)}
    for i, spec in enumerate(w.config.runs):
        rid = spec.id
        row = w.rows[i] if i < len(w.rows) else None
        if row is not None:
            view[f"row {rid}"] = True
            for k, v in _items(w, row, defaults).items():
                view[f"row {rid}.{k}"] = v
        for name, per_run in (("started", w.started), ("cancels", w.cancels),
                              ("decisions", w.decisions), ("resumes", w.resumes)):
            if i < len(per_run):
                view[f"caller {rid}.{name}"] = per_run[i]
        for name, entries in (("events", w.events), ("ledger", w.ledger)):
            mine = [_items(w, e, defaults, skip=("run",)) for e in entries if e.run == i]
            if mine or defaults:
                view[f"{name} {rid}"] = mine
    view["bus"] = _plain(w, w.messages, defaults)
    view["outcomes"] = _plain(w, w.outcomes, defaults)
    view.update(_commands(w, defaults))
    for p in w.procs:
        view[f"proc {p.name}"] = True
        for k, v in _proc(w, p, defaults).items():
            view[f"proc {p.name}.{k}"] = v
    for actor, s in _reapers(w):
        view[actor] = True
        for k, v in _items(w, s, defaults, skip=("name",)).items():
            view[f"{actor}.{k}"] = v
    for f in dataclasses.fields(w):  # a field of World this view does not name yet
        if f.name not in _NAMED and f.name != "config":
            v = getattr(w, f.name)
            if defaults or f.default is dataclasses.MISSING or v != f.default:
                view[f"world.{f.name}"] = _plain(w, v, defaults)
    return view


def changes(before: dict[str, Any], after: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """What one step changed between two views: ``({name: new value}, [names gone])``, both
    sorted by name. Between views made with ``defaults=False`` a name gone is a field back
    at its default, or an entity gone (its bare name goes too: ``proc w1``, ``row r1``)."""
    changed = {k: after[k] for k in sorted(after) if k not in before or before[k] != after[k]}
    return changed, sorted(k for k in before if k not in after)
