"""The record types' fast form, generated from their one declaration (issue 12).

A record is declared once, in ``model/state.py``, as a class of annotated fields with
defaults, deriving from :class:`Record`; ``ghost(default)`` marks a ghost field (the spec
reads it, no guard does). :func:`record` turns the declaration into a frozen, slotted
dataclass (``dataclasses`` writes ``__init__`` and ``__repr__`` from the fields, and
assigning a field raises ``FrozenInstanceError``) and gives it its *fast form*, made here
from the same field list and nowhere else:

* ``__hash__`` cached in the slot ``_h`` (the dataclass's own hash: the hash of the tuple
  of compared fields): rows, events and processes are shared by successive
  worlds, so a world's hash re-reads its unchanged parts' cached hashes (remembering the
  hash of a world's tuples of records by their identity too was measured slower on
  ``small``);
* ``__eq__`` identity first, then as the dataclass's own (one comparison of two tuples of the
  fields; an and-chain of field comparisons was measured slower: a shared field compares
  by identity only inside a tuple comparison);
* :func:`replace` (copy with changes): one generated function per class and set of changed
  fields. It fills a fresh instance of a *twin* class (the same slots, no frozen
  ``__setattr__``, so each field is one plain slot store) and then gives it the record's
  class. The result is an ordinary frozen instance: nothing can assign its fields later.

The methods are generated source (``exec`` of the fields' names): measured side by side,
``check --config small --policy current`` takes x1.52 the CPU time with the dataclasses' own
``__eq__``, ``__hash__`` and ``dataclasses.replace``, and x1.09 with the same methods written
as closures over ``operator.attrgetter`` (issue 41). Classes that are dataclasses but not
records (the static ``Config``, ``Tool``...) are copied with ``dataclasses.replace``.

The *compiled form* is the other, made from the same declarations for ``pip install .``:
:func:`compiled_source` rewrites the source of ``model/state.py`` (setup.py compiles the
result with mypyc; the source tree never holds it), each record an explicit native class with
the same fields, ``__slots__``, ``__init__``, cached ``__hash__``, ``__eq__`` and a ``_replace``
that :func:`replace` calls; the dataclass decorator still runs on it (``fields()``, ghost
metadata, ``repr`` and the frozen ``__setattr__`` are the dataclass's). Equal values, equal
hashes in both forms; a build has one of them.
"""

from __future__ import annotations

import ast
import copyreg
import dataclasses
import typing
from typing import Any

__all__ = [
    "Record", "compiled_source", "field", "ghost", "ghosts", "is_compiled", "record",
    "picklable", "rebuild", "register_compiled", "replace",
]

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


_TWINS: dict[type, type] = {}
_REPLACERS: dict[tuple, Any] = {}  # (class, changed field names in call order) -> replacer
_COMPILED: set[type] = set()  # record types of the compiled form (register_compiled)


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
    # the twin: the same slots on the same base, no frozen __setattr__ (see replace)
    _TWINS[dc] = type(f"_{dc.__name__}Twin", dc.__bases__, {"__slots__": dc.__slots__})
    for k, v in _fast_methods(dc).items():
        setattr(dc, k, v)
    return dc


def is_compiled(cls: type) -> bool:
    """Is ``cls`` a record type of the compiled form?"""
    return cls in _COMPILED


def register_compiled(*classes: type) -> None:
    """Called by the compiled ``model/state.py`` (see :func:`compiled_source`)."""
    _COMPILED.update(classes)


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
    if obj.__class__ in _COMPILED:
        return obj._replace(changes)
    key = (obj.__class__, *changes)
    r = _REPLACERS.get(key)
    if r is None:
        if key[0] not in _TWINS:
            return dataclasses.replace(obj, **changes)
        r = _REPLACERS[key] = _make_replacer(key[0], key[1:])
    return r(obj, changes)


# -- the compiled form (setup.py; never imported at run time) -----------------------------
_COMPILED_PRELUDE = """
from dataclasses import dataclass as _compiled_dataclass
from dataclasses import replace as _dataclasses_replace
from typing import Any as _Any

from . import records as _records


class _CompiledRecord:
    \"\"\"The compiled records' base: ``_h`` is the cached hash (-1: not computed yet).\"\"\"

    _h: int = -1

    def _replace(self, c: dict[str, _Any]) -> _Any:
        raise NotImplementedError


def replace(obj: _Any, **changes: _Any) -> _Any:
    \"\"\"``dataclasses.replace(obj, **changes)``: a record's own ``_replace``.\"\"\"
    if isinstance(obj, _CompiledRecord):
        return obj._replace(changes)
    return _dataclasses_replace(obj, **changes)
"""


def _spec(node: ast.AnnAssign, src: str) -> tuple[str, str, str | None, bool, bool, bool]:
    """(name, annotation, default, compared, hashed, keyword-only) of a field declaration,
    by the rules of ``dataclasses.field`` (a ghost field is compared and hashed)."""
    assert isinstance(node.target, ast.Name)
    ann = ast.get_source_segment(src, node.annotation) or ""
    v = node.value
    if not (isinstance(v, ast.Call) and isinstance(v.func, ast.Name)
            and v.func.id in ("field", "ghost")):
        return node.target.id, ann, None if v is None else ast.get_source_segment(src, v), \
            True, True, False
    kw = {k.arg: k.value for k in v.keywords if k.arg}
    unknown = set(kw) - {"default", "compare", "hash", "repr", "kw_only", "metadata"}
    if unknown or len(v.args) > (v.func.id == "ghost"):
        raise ValueError(f"{node.target.id}: the compiled form does not write "
                         f"{sorted(unknown) or 'positional arguments'} (records.py)")
    d = kw.get("default", v.args[0] if v.func.id == "ghost" and v.args else None)
    compare = ast.literal_eval(kw["compare"]) if "compare" in kw else True
    hashed = ast.literal_eval(kw["hash"]) if "hash" in kw else None
    kw_only = ast.literal_eval(kw["kw_only"]) if "kw_only" in kw else False
    return (node.target.id, ann, None if d is None else ast.get_source_segment(src, d),
            compare, hashed is not False and bool(hashed or compare), kw_only)


def _compiled_class(node: ast.ClassDef, src: str, body: str) -> str:
    """The compiled form of one record declaration (``body``: its body as written)."""
    cls = node.name
    fs = [_spec(s, src) for s in node.body
          if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    names = [f[0] for f in fs]

    def param(f: tuple) -> str:
        return f"{f[0]}: {f[1]}" + ("" if f[2] is None else f" = {f[2]}")

    params = [param(f) for f in fs if not f[5]]
    if any(f[5] for f in fs):
        params += ["*"] + [param(f) for f in fs if f[5]]
    hashed = "".join(f"self.{f[0]}, " for f in fs if f[4])
    mine = "".join(f"self.{f[0]}, " for f in fs if f[3])
    theirs = "".join(f"other.{f[0]}, " for f in fs if f[3])
    args = ", ".join((f"{f[0]}=" if f[5] else "") + f"c[{f[0]!r}] if {f[0]!r} in c else self.{f[0]}"
                     for f in fs)
    return (
        f"@_compiled_dataclass(frozen=True, eq=False)\nclass {cls}(_CompiledRecord):\n{body}\n"
        f"    def __init__(self, {', '.join(params)}) -> None:\n"
        + "".join(f"        self.{n} = {n}  # type: ignore[misc]\n" for n in names)
        + "\n    def __hash__(self) -> int:\n        h = self._h\n        if h == -1:\n"
        f"            h = hash(({hashed}))\n            self._h = h\n        return h\n\n"
        "    def __eq__(self, other: object) -> bool:\n        if self is other:\n"
        f"            return True\n        if not isinstance(other, {cls}):\n"
        f"            return NotImplemented\n        return ({mine}) == ({theirs})\n\n"
        f"    def _replace(self, c: dict[str, _Any]) -> {cls}:\n"
        f"        if not c.keys() <= _{cls}_FIELDS:\n"
        f"            raise TypeError(f\"{cls}: unknown fields {{sorted(c.keys() - _{cls}_FIELDS)}}\")\n"
        f"        return {cls}({args})\n\n\n"
        f"_{cls}_FIELDS = frozenset({tuple(names)!r})\n"
        # the dataclass's __slots__ (a class attribute in the body would become a field)
        f"setattr({cls}, \"__slots__\", {tuple(names)!r})\n"
    )


def rebuild(cls: type, values: tuple) -> Any:
    """A frozen dataclass from its fields in declaration order (see :func:`picklable`)."""
    names = [f.name for f in dataclasses.fields(cls)]
    return cls(**dict(zip(names, values, strict=True)))


def _reduce(obj: Any) -> tuple[Any, ...]:
    return (rebuild, (type(obj), tuple(getattr(obj, f.name) for f in dataclasses.fields(obj))))


def picklable(*classes: type) -> None:
    """Pickle these frozen dataclasses as their class and their fields, rebuilt by calling
    the class. Worlds cross process boundaries (``check --jobs``, ``mutants``, scopes); the
    default protocol of a slotted frozen dataclass restores the slots by assignment, which a
    compiled (mypyc) class's frozen ``__setattr__`` refuses."""

    for cls in classes:
        copyreg.pickle(cls, _reduce)


def compiled_source(src: str) -> str:
    """The compiled form of a module that declares records (``model/state.py``): every class
    decorated ``@record`` becomes the explicit class :func:`_compiled_class` writes, the
    module's ``replace`` the one that calls it, and the module registers them at its end."""
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []  # (first line, end line, text), 0-based, end excluded
    done: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "records" and node.level == 1:
            keep = [a.name for a in node.names if a.name not in ("record", "replace")]
            text = f"from .records import {', '.join(keep)}  # noqa: F401\n" if keep else ""
            edits.append((node.lineno - 1, node.end_lineno or node.lineno,
                          text + _COMPILED_PRELUDE))
        elif isinstance(node, ast.ClassDef) and [
                d for d in node.decorator_list if isinstance(d, ast.Name) and d.id == "record"]:
            if len(node.decorator_list) > 1 or [b for b in node.bases
                                                if not (isinstance(b, ast.Name) and b.id == "Record")]:
                raise ValueError(f"{node.name}: the compiled form writes a record with no other "
                                 "decorator or base (records.py)")
            first = min(d.lineno for d in node.decorator_list) - 1
            body = "".join(lines[node.body[0].lineno - 1:node.end_lineno])
            edits.append((first, node.end_lineno or node.lineno,
                          _compiled_class(node, src, body.rstrip("\n"))))
            done.append(node.name)
    if not done:
        raise ValueError("no @record class to compile")
    for first, end, text in sorted(edits, reverse=True):
        lines[first:end] = [text]
    return "".join(lines) + f"\n\n_records.register_compiled({', '.join(done)})\n"

