"""The history: ``(time, transition)`` records, their canonical serialization and hash.

The canonical line of a record is ``{"t": "<seconds, 6 decimals>", "name": .., "actor": ..,
<args>}`` as compact JSON with sorted keys; the history hash is SHA-256 over the canonical
lines, each followed by ``\\n``. The JSON-lines file written with ``--history`` holds the same
fields plus an optional ``note`` (lease changes, segment outcomes, landed effects) that the
swimlane plot reads; notes are derived from the model's worlds and are not hashed.

The file is written under a temporary name beside it (``.NAME.partial``) and renamed to
NAME when the simulation ends (:meth:`History.close`); an interrupted or failed simulation
calls :meth:`History.abort`, which removes the temporary file, so NAME is either a complete
history or left as it was (an earlier file of that name is not touched).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from json.encoder import encode_basestring_ascii as _enc
from typing import Any, TextIO

from failclosed.model.state import World
from failclosed.model.transition import Transition


def canonical(time: float, t: Transition) -> str:
    """The canonical line of one record (what the history hash covers)."""
    pre, post = _halves(t)
    if pre is None or post is None:
        return _canonical_json(time, t)
    return pre + f"{time:.6f}" + post


def _halves(t: Transition) -> tuple[str, str] | tuple[None, None]:
    """The canonical line of ``t`` around its time value: ``pre + "<t>" + post``, written
    without json for plain arguments: str, int, bool or None values under distinct str keys
    other than the record's own (``(None, None)`` otherwise: the caller uses json)."""
    items: list[tuple[str, Any]] = [("actor", t.actor), ("name", t.name)]
    items += t.args
    try:
        items.sort()  # distinct keys compare alone; a repeated key is refused below
    except TypeError:
        return None, None
    pre = "{"
    post = '"'
    prev = None
    for k, v in items:
        enc = _VALUE.get(type(v))
        if k == prev or enc is None or type(k) is not str or k == "t":
            return None, None
        prev = k
        if k < "t":
            pre += _enc(k) + ":" + enc(v) + ","
        else:
            post += "," + _enc(k) + ":" + enc(v)
    return pre + '"t":"', post + "}"


def _canonical_json(time: float, t: Transition) -> str:
    """The definition: compact JSON with sorted keys (``canonical`` agrees with it byte for
    byte on transitions whose arguments are plain, and falls back to it on any other)."""
    d: dict[str, Any] = {"t": f"{time:.6f}", "name": t.name, "actor": t.actor}
    for k, v in t.args:
        d[k] = v
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


_VALUE = {
    str: _enc,
    int: int.__repr__,
    bool: lambda v: "true" if v else "false",
    type(None): lambda v: "null",
}


class History:
    """Hashes every record; optionally keeps them in memory and/or writes a JSONL file."""

    def __init__(self, keep: bool = False, path: str | None = None):
        self.sha = hashlib.sha256()
        self.records: list[tuple[float, Transition]] | None = [] if keep else None
        self.count = 0
        self.path = path
        self.partial = partial_path(path) if path else None
        self._unnamed = False  # the file has no name until it is complete (O_TMPFILE)
        self._file: TextIO | None = self._open() if path else None
        self.annotate = self._file is not None
        self._halves: dict[Transition, tuple] = {}  # a transition's canonical line, around "t"
        self._pending: list[str] = []  # canonical lines not hashed yet

    def add(self, time: float, t: Transition, note: dict[str, Any] | None = None) -> None:
        halves = self._halves.get(t)
        if halves is None:
            if len(self._halves) >= 1 << 16:
                self._halves.clear()
            halves = self._halves[t] = _halves(t)
        pre, post = halves
        line = _canonical_json(time, t) if pre is None else pre + f"{time:.6f}" + post
        self._pending.append(line)
        if len(self._pending) >= 512:
            self._flush()
        self.count += 1
        if self.records is not None:
            self.records.append((time, t))
        if self._file is not None:
            if note:
                d = json.loads(line)
                d["note"] = note
                line = json.dumps(d, sort_keys=True, separators=(",", ":"))
            self._file.write(line + "\n")

    def _flush(self) -> None:
        """Hash the pending lines (one update of their concatenation: the same digest)."""
        if self._pending:
            self._pending.append("")
            self.sha.update("\n".join(self._pending).encode())
            self._pending.clear()

    def hexdigest(self) -> str:
        self._flush()
        return self.sha.hexdigest()

    def _open(self) -> TextIO:
        """The file being written: on Linux an unnamed file in NAME's directory (O_TMPFILE),
        which the kernel drops if the process dies, even by SIGKILL, so nothing half-written
        is ever left; elsewhere ``.NAME.partial``."""
        assert self.path is not None and self.partial is not None
        flag = getattr(os, "O_TMPFILE", 0)
        if flag:
            try:
                fd = os.open(os.path.dirname(os.path.abspath(self.path)), flag | os.O_RDWR, 0o666)
            except OSError:  # a file system without O_TMPFILE
                pass
            else:
                self._unnamed = True
                return open(fd, "w+", encoding="utf-8")  # noqa: SIM115
        return open(self.partial, "w", encoding="utf-8")  # noqa: SIM115

    def close(self) -> None:
        """The history is complete: flush it and give the file its name."""
        if self._file is not None:
            f, self._file = self._file, None
            assert self.path is not None and self.partial is not None
            if self._unnamed:
                f.flush()
                try:
                    os.remove(self.partial)  # a leftover of an older build
                except OSError:
                    pass
                try:
                    os.link(f"/proc/self/fd/{f.fileno()}", self.partial)
                except OSError:  # no /proc, or /proc on another device: copy it out
                    f.seek(0)
                    with open(self.partial, "w", encoding="utf-8") as out:
                        shutil.copyfileobj(f, out)
            f.close()
            os.replace(self.partial, self.path)

    def abort(self) -> None:
        """The simulation did not finish: drop the temporary file, leave NAME as it was."""
        if self._file is not None:
            self._file.close()
            self._file = None
            if self._unnamed or self.partial is None:
                return
            try:
                os.remove(self.partial)
            except OSError:
                pass


def file_sha256(path: str) -> tuple[str, int]:
    """The history hash recomputed from a ``--history`` file: SHA-256 over the canonical
    line of every record, each followed by a newline (compact JSON, sorted keys: t, name,
    actor and the transition's arguments), the ``note`` of each line left out. Returns
    (hex digest, records)."""
    sha = hashlib.sha256()
    n = 0
    with open(path, encoding="utf-8") as f:
        for k, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"line {k} is not JSON ({e.msg})") from None
            if not isinstance(d, dict) or not {"t", "name", "actor"} <= d.keys():
                raise ValueError(f"line {k} is not a history record (t, name, actor)")
            d.pop("note", None)
            sha.update((json.dumps(d, sort_keys=True, separators=(",", ":")) + "\n").encode())
            n += 1
    return sha.hexdigest(), n


def partial_path(path: str) -> str:
    """Where a history is written until it is complete: ``DIR/.NAME.partial``."""
    d, base = os.path.split(path)
    return os.path.join(d, f".{base}.partial")


def note(before: World, t: Transition, after: World) -> dict[str, Any]:
    """What a swimlane needs to know about one transition, read off the two worlds."""
    out: dict[str, Any] = {}
    rid = t.arg("run")
    if rid is not None:
        try:
            i = after.config.run_index(rid)
        except KeyError:
            i = -1
        if i >= 0:
            r0, r1 = before.rows[i], after.rows[i]
            if r1 is not None and (r0 is None or (r0.claimed_by, r0.lease_expires, r0.status)
                                   != (r1.claimed_by, r1.lease_expires, r1.status)):
                out["row"] = [r1.status, r1.claimed_by, r1.lease_expires, r1.pending_effect]
    if len(after.outcomes) > len(before.outcomes):
        out["end"] = [[o[0], o[3]] for o in after.outcomes[len(before.outcomes):]]
    if len(after.ledger) > len(before.ledger):
        out["landed"] = [[a.tool, a.effect, a.seg] for a in after.ledger[len(before.ledger):]]
    return out


def read_jsonl(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
