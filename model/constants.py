"""Constants with the runtime's upstream defaults (RUNTIME section 2), all overridable."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class Constants:
    LEASE_SECONDS: int = 900
    MAX_REQUEUES: int = 3
    REQUEUE_BACKOFF_MS: int = 30_000
    REQUEUE_BACKOFF_CAP_MS: int = 600_000
    MAX_ITERATIONS: int = 20
    DEFAULT_ROUND_CAP: int = 5
    REAPER_DEFAULT_LIMIT: int = 50

    def retry_delay_ms(self, count: int) -> int:
        """``min(30000 * 2^c, 600000)`` ms, ``c`` = requeue_count before the requeue."""
        return min(self.REQUEUE_BACKOFF_MS * (2 ** max(count, 0)), self.REQUEUE_BACKOFF_CAP_MS)

    def retry_delay_s(self, count: int) -> int:
        return -(-self.retry_delay_ms(count) // 1000)


CONSTANT_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Constants))
# the largest value a configuration may give a constant (seconds, milliseconds or counts):
# 10^9 s is 31 years; larger values only overflow the simulator's clock and the C integers
# of a compiled build
CONSTANT_MAX = 10**9
