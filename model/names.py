"""The transition vocabulary: every name the model can fire, where docs/RUNTIME.md names it,
and which fault branches it has. It is derived from the step table (``model.steps``: each
step of a process declares the transitions it fires and their faults) and the few
transitions no process step fires (``model.steps.OTHER_TRANSITIONS``); the coverage reports
and the scenario format read it here."""

from __future__ import annotations

# the process and identity names (model/identities.py), re-exported
from .identities import REAPER as REAPER
from .identities import caller_identity as caller_identity
from .identities import caller_process as caller_process
from .identities import enqueue_process as enqueue_process
from .identities import identity_process as identity_process
from .identities import is_reaper as is_reaper
from .identities import process_names as process_names
from .identities import reaper_name as reaper_name
from .identities import reaper_names as reaper_names
from .identities import resume_number as resume_number
from .identities import resume_process as resume_process
from .identities import sync_segment as sync_segment
from .identities import worker_identity as worker_identity
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
