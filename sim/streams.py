"""Reproducible random streams: one per simulated process, none global.

A stream is seeded from SHA-256 of ``(seed, name)``, so a process draws the same numbers
whatever the other processes draw, and a run's plan (the stream of its arrival number) is
the same under every policy.
"""

from __future__ import annotations

import hashlib
import random


def stream(seed: int, name: str) -> random.Random:
    """An independent, reproducible random stream for one process."""
    h = hashlib.sha256(f"{seed}\x00{name}".encode()).digest()
    return random.Random(int.from_bytes(h[:8], "big"))
