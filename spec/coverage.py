"""Coverage of the model's transition vocabulary by an exploration.

The canonical list of transition names and their fault branches lives in ONE place,
``model.names.TRANSITIONS`` (exported by the model, read by the scenario checker too);
this module only turns it into the ``name[fault]`` labels the engine's coverage report
counts, per configuration (provider faults are labelled by failure class).
"""

from __future__ import annotations

from collections.abc import Iterable

from failclosed.model import names
from failclosed.model.runtime import FAULT_KINDS
from failclosed.model.state import Config

__all__ = ["TRANSITION_NAMES", "expected_labels", "fault_kinds_used"]

TRANSITION_NAMES: tuple[str, ...] = tuple(names.TRANSITIONS)


def fault_kinds_used() -> set[str]:
    """Every fault kind named by some transition of the vocabulary (a consistency check
    against ``model.runtime.FAULT_KINDS``: the two must agree, see tests)."""
    out: set[str] = set()
    for _, faults in names.TRANSITIONS.values():
        out.update(faults)
    return out


def expected_labels(specs: Iterable[Config]) -> list[str]:
    """Every ``name[fault]`` label the model can produce for the given configurations:
    the provider-fault labels are the union of the configurations' failure classes."""
    classes: list[str] = []
    for s in specs:
        for c in s.provider_faults:
            if c not in classes:
                classes.append(c)
    return names.labels(tuple(classes))


assert fault_kinds_used() <= set(FAULT_KINDS) | {"provider_error"}, "model.names out of date"
