"""The checker's engine, by the names its users import: the search (spec/search.py), its
result and traces (spec/exploration.py), the liveness analysis (spec/liveness.py) and the
rendering of a trace (spec/traces.py). Each lives in its own module; this one only gathers
their public names (``from failclosed.spec import engine``; ``engine.explore``)."""

from __future__ import annotations

from failclosed.spec.exploration import (
    Coverage,
    Exploration,
    Finding,
    Stats,
    count_switches,
    coverage,
)
from failclosed.spec.liveness import LivenessResult, check_liveness, strongly_connected
from failclosed.spec.search import FieldReads, explore
from failclosed.spec.traces import trace_lines, trace_table

__all__ = [
    "Coverage",
    "Exploration",
    "FieldReads",
    "Finding",
    "LivenessResult",
    "Stats",
    "check_liveness",
    "strongly_connected",
    "count_switches",
    "coverage",
    "explore",
    "trace_lines",
    "trace_table",
]
