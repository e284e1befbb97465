"""``--junit F.xml``: a command's verdicts as JUnit XML, the format CI systems read (GitLab,
Jenkins, GitHub test reporters).

One root element for every command, ``<testsuites>`` holding one ``<testsuite>`` per command
run (``inspect`` too), one ``<testcase>`` per verdict: per (policy, property)
for ``check``, ``matrix``, ``scope`` and ``simulate``, per scenario for ``replay``. A
violation that is new (not in ``--baseline``) is a ``<failure>`` carrying the shortest trace
as text; a violation the baseline lists is a passing case whose ``<system-out>`` says so
(``known: F1 ...``); a property that held in a search cut short (``--max-states``) is
``<skipped>`` with the reason: not reached, never a pass. Written with xml.etree; any command can add it with :func:`add_junit`,
:func:`check_junit` (before the work) and :func:`write_junit` (after it).

Times are measured (a monotonic clock, read here in cli/, never in model/, spec/ or sim/):
the suite's ``time`` is the command's wall time from :func:`start_clock` (app.main calls it
before the command runs) to the writing of the file, or the duration the command passes; a
case's ``time`` is its own work where a case is one (a scenario replayed), else 0: the
verdicts of one search share its time, which the suite carries.
"""

from __future__ import annotations

import argparse
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from failclosed.cli.checking import require_writable_file

__all__ = ["Case", "add_junit", "check_junit", "command_seconds", "junit_text", "junit_tree",
           "start_clock", "write_junit"]

_started: list[float] = []


def start_clock() -> None:
    """The command starts now: the suite's time is measured from here."""
    _started[:] = [time.perf_counter()]


def command_seconds() -> float:
    """The wall time since :func:`start_clock` (0 when it was not called)."""
    return time.perf_counter() - _started[0] if _started else 0.0


@dataclass
class Case:
    """One verdict: ``failure`` (its one-line message) and ``text`` (the trace) when it
    failed; ``out``: a note shown beside a passing case (a known violation, say)."""

    classname: str
    name: str
    failure: str | None = None
    text: str = ""
    out: str = ""
    seconds: float = 0.0
    kind: str = "violation"  # the failure's type (inspect: the check's certainty)
    skipped: str | None = None  # not judged, and why (a search cut short before reaching it)


def add_junit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--junit", metavar="F.xml", help="also write the verdicts as JUnit XML: one "
                   "test case per verdict, a new violation a failure with its shortest trace "
                   "(default: none written)")


def check_junit(args: argparse.Namespace) -> None:
    """The ``--junit`` path can be written (before any work)."""
    if getattr(args, "junit", None):
        require_writable_file(args.junit, "--junit")


def _clean(text: str) -> str:
    """XML 1.0 cannot carry most control characters: they become U+FFFD."""
    return "".join(c if c in "\t\n\r" or ord(c) >= 0x20 else "\ufffd" for c in text)


def junit_tree(suite: str, cases: list[Case], seconds: float = 0.0) -> ET.ElementTree:
    failures = sum(c.failure is not None for c in cases)
    skipped = sum(c.failure is None and c.skipped is not None for c in cases)
    root = ET.Element("testsuites", name="failclosed", tests=str(len(cases)),
                      failures=str(failures), errors="0", skipped=str(skipped),
                      time=f"{seconds:.3f}")
    s = ET.SubElement(root, "testsuite", name=suite, tests=str(len(cases)),
                      failures=str(failures), errors="0", skipped=str(skipped),
                      time=f"{seconds:.3f}")
    for c in cases:
        e = ET.SubElement(s, "testcase", classname=c.classname, name=c.name,
                          time=f"{c.seconds:.3f}")
        if c.failure is not None:
            f = ET.SubElement(e, "failure", message=_clean(c.failure), type=c.kind)
            f.text = _clean(c.text)
        elif c.skipped is not None:
            ET.SubElement(e, "skipped", message=_clean(c.skipped))
        if c.out:
            ET.SubElement(e, "system-out").text = _clean(c.out)
    ET.indent(root)
    return ET.ElementTree(root)


def junit_text(suite: str, cases: list[Case], seconds: float | None = None) -> str:
    """The XML document of :func:`junit_tree` as text (``seconds``: None, the command's)."""
    tree = junit_tree(suite, cases, command_seconds() if seconds is None else seconds)
    return ('<?xml version="1.0" encoding="utf-8"?>\n'
            + ET.tostring(tree.getroot(), encoding="unicode") + "\n")


def write_junit(args: argparse.Namespace, suite: str, cases: list[Case],
                seconds: float | None = None) -> None:
    """Write ``cases`` to ``args.junit`` (nothing without ``--junit``): to a temporary name
    beside it, then renamed, so the file is complete or absent. ``seconds``: the suite's
    time (None: the command's wall time so far, :func:`command_seconds`)."""
    path = getattr(args, "junit", None)
    if not path:
        return
    p = Path(path)
    tmp = p.with_name(f".{p.name}.partial")
    try:
        tmp.write_text(junit_text(suite, cases, seconds), encoding="utf-8")
        tmp.replace(p)
    finally:
        tmp.unlink(missing_ok=True)


def cell_cases(classname: str, cells: list[tuple[str, str, bool]], new: set[tuple[str, str]],
               known: dict[tuple[str, str], object], trace, what: str = "",
               incomplete: str | None = None) -> list[Case]:
    """A case per (policy, property, violated): a new violation fails with ``trace(policy,
    property)`` (its text, the shortest trace); a known one passes, saying which entry;
    with ``incomplete`` (why the search was cut short) a holding one is ``skipped``: not
    reached, never a pass."""
    out = []
    for pol, prop, bad in cells:
        c = Case(classname, f"{pol} / {prop}")
        if bad and (pol, prop) in new:
            text = trace(pol, prop)
            c.failure = f"{prop} violated under {pol}{what}: {text.splitlines()[0] if text else ''}"
            c.text = text
        elif bad:
            k = known.get((pol, prop))
            label = getattr(k, "finding", None) or "in the baseline"
            c.out = f"known violation ({label}): {getattr(k, 'reason', '')}"
        elif incomplete is not None:
            c.skipped = f"not reached: {prop} not violated {incomplete}, which proves nothing"
        out.append(c)
    return out

