"""How the model names the processes it starts, the identities they claim rows with and the
segments they record (RUNTIME 5: a caller is ``interactive:<uuid>``, a worker
``worker:<process>``). Everything outside model/ builds or parses such a name through
model/names.py, which re-exports these."""

from __future__ import annotations


def caller_process(run_id: str) -> str:
    """The interactive caller's process (it runs the synchronous segment, 11)."""
    return f"caller:{run_id}"


def caller_identity(run_id: str) -> str:
    """The identity a synchronous segment claims its row with (T1, 5)."""
    return f"interactive:{run_id}"


def sync_segment(run_id: str) -> str:
    """The synchronous segment's name in the audit trail."""
    return f"sync:{run_id}"


def enqueue_process(run_id: str) -> str:
    """The enqueue caller's process (6.1)."""
    return f"enqueue:{run_id}"


def resume_process(run_id: str, k: int) -> str:
    """The k-th resume of a run (k from 1): the process, its identity and its segment."""
    return f"resume:{run_id}#{k}"


def resume_number(name: str) -> int | None:
    """k of a resume process, identity or segment named by :func:`resume_process`; None for
    any other name."""
    if not name.startswith("resume:"):
        return None
    head, sep, k = name.rpartition("#")
    return int(k) if sep and k.isdigit() else None


REAPER = "reaper"  # the first (or only) reaper's process name, and its actor kind's name


def reaper_name(k: int) -> str:
    """The k-th reaper's process name (k from 1): ``reaper``, then ``reaper#2``, ``reaper#3``
    ... (a deployment that runs the scheduler on several hosts runs one reaper on each: 10)."""
    return REAPER if k == 1 else f"{REAPER}#{k}"


def reaper_names(config: object) -> tuple[str, ...]:
    """The reapers a configuration declares (``Config.reapers``), in order."""
    return tuple(reaper_name(k) for k in range(1, config.reapers + 1))  # type: ignore[attr-defined]


def is_reaper(name: str) -> bool:
    """``name`` is a reaper's process name (:func:`reaper_name`)."""
    if name == REAPER:
        return True
    head, sep, k = name.partition("#")
    return head == REAPER and bool(sep) and k.isdigit() and int(k) >= 2


def worker_identity(process: str) -> str:
    """The identity a pick-up in ``process`` claims with (5: a worker, or on the sync
    transport the dispatching process)."""
    return f"worker:{process}"


def identity_process(identity: str) -> str:
    """The process an identity belongs to (a caller's identity names the caller process)."""
    kind, sep, rest = identity.partition(":")
    if sep and kind == "worker":
        return rest
    if sep and kind == "interactive":
        return caller_process(rest)
    return identity


def process_names(config: object) -> tuple[str, ...]:
    """Every process name a configuration can create: its workers, each run's caller (an
    interactive run's or an enqueue caller) and one resume per caller decision (the owner's,
    and the named principals' approve, deny and input requests). The reapers
    (:func:`reaper_names`) are not in it: each has a fairness class of its own."""
    names = list(config.workers)  # type: ignore[attr-defined]
    for r in config.runs:  # type: ignore[attr-defined]
        names.append(caller_process(r.id) if r.entry == "interactive" else enqueue_process(r.id))
        names.extend(resume_process(r.id, k) for k in range(1, len(r.resume_decisions) + 1))
    return tuple(names)
