"""The liveness properties on a finished history: which the simulator judges, and which not.

A liveness property ``true ~> G`` (``spec.properties.LIVENESS``) says every fair path
reaches its goal ``G``. A simulation is one finite path: it cannot show that a goal is
reached on every path, but it can show, run by run, whether the run's own end reached it.
The simulator judges each property it can on each run's projection at the run's end (its
archive, or the end of the simulation for a run still live then): the runs whose end does
not satisfy ``G`` are named, with whether the run had finished or the simulation ended
first (a run cut short by the drain may still have reached it later).

It judges every property except one that assumes fairness of its own
(``LivenessProperty.assumes``: e.g. SF(caller decides)): the simulator's processes are
declared nowhere to give such an assumption, so such a property is listed as not judged,
with the reason; so is one whose goal cannot read a run's projection (it raised). Nothing
is left out silently: ``report()`` lists each property as judged or not, and the command
line prints the ones not judged (cli/simulate.py).
"""

from __future__ import annotations

from typing import Any

from failclosed.model.state import World
from failclosed.spec.properties import LIVENESS

SHOWN_RUNS = 10  # runs named per property in the report (all are counted)


class Liveness:
    """The judgement of the liveness properties ``props`` (default: spec's ``LIVENESS``),
    run by run at each run's end (``at_end``)."""

    def __init__(self, props: dict[str, Any] | None = None) -> None:
        props = dict(LIVENESS) if props is None else props
        self.unjudged: dict[str, str] = {
            n: f"assumes {', '.join(a.text for a in p.assumes)}, fairness the simulator's "
               "processes are not declared to give"
            for n, p in props.items() if p.assumes}
        self.judged = {n: p for n, p in props.items() if n not in self.unjudged}
        self.runs = 0
        # property -> the runs whose end did not reach its goal: (run, finished)
        self.unreached: dict[str, list[tuple[str, bool]]] = {n: [] for n in self.judged}

    def at_end(self, projection: World, run: str, finished: bool) -> None:
        """Run ``run`` ended (``finished``: archived; else the simulation ended first): judge
        each property's goal on its projection."""
        self.runs += 1
        for name, p in list(self.judged.items()):
            try:
                reached = p.goal(projection)
            except Exception as e:  # a goal that cannot read one run's world: not judged
                self.unjudged[name] = f"its goal cannot be read on a run's projection ({e!r})"
                del self.judged[name], self.unreached[name]
                continue
            if not reached:
                self.unreached[name].append((run, finished))

    def report(self) -> dict[str, Any]:
        """``{"runs", "judged": {name: {"reached", "unreached", "runs", "cut_short"}},
        "not_judged": {name: why}}``: per judged property, how many runs' ends reached its
        goal, how many did not (the first ``SHOWN_RUNS`` named) and how many of those the
        simulation ended before they finished."""
        judged = {}
        for name, missed in self.unreached.items():
            judged[name] = {"reached": self.runs - len(missed), "unreached": len(missed),
                            "runs": [r for r, _ in missed[:SHOWN_RUNS]],
                            "cut_short": sum(1 for _, done in missed if not done)}
        return {"runs": self.runs, "judged": judged, "not_judged": dict(self.unjudged)}


def summary_lines(report: dict[str, Any], policy: str) -> list[str]:
    """What the command line prints of a report: one line of the verdicts, one per property
    not judged (never silent about one)."""
    parts = []
    for name, j in report["judged"].items():
        if j["unreached"] == 0:
            parts.append(f"{name} reached by all {report['runs']:,} runs")
        else:
            cut = f", {j['cut_short']:,} of them cut short by the end" if j["cut_short"] else ""
            parts.append(f"{name} NOT reached by {j['unreached']:,} runs "
                         f"({', '.join(j['runs'])}{' ...' if j['unreached'] > len(j['runs']) else ''}{cut})")
    lines = [f"liveness at each run's end ({policy}): " + ("; ".join(parts) or "none judged")]
    lines += [f"liveness not judged ({policy}): {name}: {why}"
              for name, why in report["not_judged"].items()]
    return lines
