"""The transition vocabulary: every name the model can fire, where docs/RUNTIME.md names it,
and which fault branches it has. It is derived from the step table (``model.steps``: each
step of a process declares the transitions it fires and their faults) and the few
transitions no process step fires (``model.steps.OTHER_TRANSITIONS``); the coverage reports
and the scenario format read it here."""

from __future__ import annotations

from .steps import Vocabulary

# name -> (docs/RUNTIME.md places, fault kinds the transition can take); read live
TRANSITIONS = Vocabulary()


def labels(provider_classes: tuple[str, ...] = ()) -> list[str]:
    """Every ``name[fault]`` label the model can produce (provider faults by class)."""
    out = []
    for name, (_, faults) in TRANSITIONS.items():
        out.append(name)
        for f in faults:
            if f == "provider_error":
                out.extend(f"{name}[{c}]" for c in provider_classes)
            else:
                out.append(f"{name}[{f}]")
    return out
