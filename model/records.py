"""The record types' fast form, generated from their one declaration (issue 12).

A record is declared once, in ``model/state.py``, as a class of annotated fields with
defaults, deriving from :class:`Record`; ``ghost(default)`` marks a ghost field (the spec
reads it, no guard does). :func:`record` turns the declaration into a frozen, slotted
dataclass: that is the *plain form* (``dataclasses`` writes ``__init__``, ``__repr__``,
``__eq__`` and ``__hash__`` from the fields, and assigning a field raises
``FrozenInstanceError``). Unless ``FAILCLOSED_PLAIN_RECORDS=1`` is set when the model is
imported (or :func:`use_plain` is called), the same classes then get their *fast form*, made
here from the same field list and nowhere else:

* ``__hash__`` cached in the slot ``_h`` (the same value as the plain hash, the hash of
  the tuple of compared fields): rows, events and processes are shared by successive
  worlds, so a world's hash re-reads its unchanged parts' cached hashes (remembering the
  hash of a world's tuples of records by their identity too was measured slower on
  ``small``);
* ``__eq__`` identity first, then as the plain one (one comparison of two tuples of the
  fields; an and-chain of field comparisons was measured slower: a shared field compares
  by identity only inside a tuple comparison);
* :func:`replace` (copy with changes): one generated function per class and set of changed
  fields. It fills a fresh instance of a *twin* class (the same slots, no frozen
  ``__setattr__``, so each field is one plain slot store) and then gives it the record's
  class. The result is an ordinary frozen instance: nothing can assign its fields later.

In the plain form :func:`replace` is ``dataclasses.replace`` and hashes are not cached.
Classes that are dataclasses but not records (the static ``Config``, ``Tool``...) are always
copied with ``dataclasses.replace``.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from typing import Any

__all__ = ["Record", "field", "ghost", "ghosts", "is_plain", "record", "replace", "use_plain"]

field = dataclasses.field


class Record:
    """Base of the record types: the one extra slot ``_h`` holds the cached hash (not a
    field: equality, ``fields()`` and serialisation do not see it)."""

    __slots__ = ("_h",)


def ghost(default: Any = dataclasses.MISSING) -> Any:
    """A ghost field's declaration (``default``: its default, none if left out): a field
    the spec reads and no guard does."""
    return dataclasses.field(default=default, metadata={"ghost": True})


def ghosts(cls: type) -> tuple[str, ...]:
    """The ghost fields of record ``cls``, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("ghost"))


_RECORDS: dict[type, dict[str, dict[str, Any]]] = {}  # class -> {"plain": {...}, "fast": {...}}
_TWINS: dict[type, type] = {}
_REPLACERS: dict[tuple, Any] = {}  # (class, changed field names in call order) -> replacer
_PLAIN = [os.environ.get("FAILCLOSED_PLAIN_RECORDS", "") not in ("", "0")]


def _compiled(src: str, ns: dict[str, Any], name: str) -> Any:
    exec(src, ns)  # noqa: S102 - generated from the record's own field names
    return ns[name]


def _fast_methods(cls: type) -> dict[str, Any]:
    fs = dataclasses.fields(cls)
    hashed = [f.name for f in fs if f.hash is not False and (f.hash or f.compare)]
    compared = [f.name for f in fs if f.compare]
    hash_src = (
        "def __hash__(self):\n"
        "    try:\n"
        "        h = self._h\n"
        "    except AttributeError:\n"
        "        h = None\n"
        "    if h is None:\n"
        f"        h = hash(({''.join(f'self.{k}, ' for k in hashed)}))\n"
        "        _set_h(self, h)\n"  # the slot's own setter: a frozen __setattr__ refuses
        "    return h\n"
    )
    eq_src = (
        "def __eq__(self, other):\n"
        "    if self is other:\n"
        "        return True\n"
        "    if other.__class__ is not self.__class__:\n"
        "        return NotImplemented\n"
        # one comparison of two tuples: a field that is the very same object in both is
        # equal at once (the tuple comparison tests identity first, element by element)
        f"    return ({''.join(f'self.{k}, ' for k in compared)}) == "
        f"({''.join(f'other.{k}, ' for k in compared)})\n"
    )
    ns: dict[str, Any] = {"_set_h": Record.__dict__["_h"].__set__}
    return {
        "__hash__": _compiled(hash_src, ns, "__hash__"),
        "__eq__": _compiled(eq_src, ns, "__eq__"),
    }


@typing.dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, ghost))
def record(cls: type) -> type:
    """Make the declaration ``cls`` (a subclass of :class:`Record`) a record type."""
    if not issubclass(cls, Record):
        raise TypeError(f"{cls.__name__}: a record derives from model.records.Record")
    dc = dataclasses.dataclass(frozen=True, slots=True)(cls)
    plain = {"__hash__": dc.__hash__, "__eq__": dc.__eq__}
    fast = _fast_methods(dc)
    _RECORDS[dc] = {"plain": plain, "fast": fast}
    # the twin: the same slots on the same base, no frozen __setattr__ (see replace)
    _TWINS[dc] = type(f"_{dc.__name__}Twin", dc.__bases__, {"__slots__": dc.__slots__})
    for k, v in (plain if _PLAIN[0] else fast).items():
        setattr(dc, k, v)
    return dc


def use_plain(plain: bool = True) -> None:
    """Switch every record type to its plain form (``True``) or its fast form. Values
    made under one form stay valid under the other (equal values, equal hashes)."""
    _PLAIN[0] = plain
    for cls, forms in _RECORDS.items():
        for k, v in forms["plain" if plain else "fast"].items():
            setattr(cls, k, v)


def is_plain() -> bool:
    return _PLAIN[0]


def _make_replacer(cls: type, keys: tuple[str, ...]) -> Any:
    """``r(old, changes)`` for one record type and one set of changed fields: a twin filled
    slot by slot from ``changes`` or ``old``, then given the record's class."""
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in keys if k not in names]
    if unknown:
        raise TypeError(f"{cls.__name__}: unknown fields {sorted(unknown)}")
    body = "".join(f"    n.{k} = c[{k!r}]\n" if k in keys else f"    n.{k} = o.{k}\n"
                   for k in names)
    src = ("def r(o, c):\n    n = _new(_twin)\n" + body + "    n._h = None\n"
           "    n.__class__ = _cls\n    return n\n")
    return _compiled(src, {"_new": object.__new__, "_twin": _TWINS[cls], "_cls": cls}, "r")


def replace(obj: Any, **changes: Any) -> Any:
    """``dataclasses.replace(obj, **changes)``, generated per record type and set of changed
    fields in the fast form (no per-call introspection: the model's hot path)."""
    key = (obj.__class__, *changes)
    r = _REPLACERS.get(key)
    if r is None:
        if _PLAIN[0] or key[0] not in _TWINS:
            return dataclasses.replace(obj, **changes)
        r = _REPLACERS[key] = _make_replacer(key[0], key[1:])
    elif _PLAIN[0]:
        return dataclasses.replace(obj, **changes)
    return r(obj, changes)
