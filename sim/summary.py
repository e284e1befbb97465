"""The metrics of a sweep's summary over seeds (``sim.stats.summarize``): which interval each
gets, from which of the per-seed ``flat`` columns (``sim.metrics.FLAT_COLUMNS``), and its range.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["SUMMARY_METRICS", "SummaryMetric"]


class SummaryMetric(NamedTuple):
    """One metric of a sweep's summary: how its interval over seeds is computed (``kind``),
    from which columns, what it is, and the range its values lie in (an interval is clipped to
    it, and says so). ``fraction``: a share in [0, 1], printed as a percentage."""

    kind: str  # "proportion", "ratio" (a ratio of sums) or "mean" (one value per seed)
    column: str
    den: str  # the denominator column ("" for a mean)
    text: str
    lo: float = 0.0  # every metric here is a count, a share, a time or a rate: never negative
    hi: float | None = None  # None: no upper bound
    fraction: bool = False

    @property
    def range(self) -> tuple[float, float | None]:
        return self.lo, self.hi


def _share(kind: str, column: str, den: str, text: str) -> SummaryMetric:
    return SummaryMetric(kind, column, den, text, 0.0, 1.0, True)


# The summary's metrics over seeds (sim.stats.summarize): name -> SummaryMetric. kind:
# "proportion" (column of den per seed: t over per-seed proportions, widened to the pooled
# Wilson interval), "ratio" (a ratio of sums: bootstrap over seeds, widened to the t interval),
# "mean" (one value per seed: t over seeds). Each interval is clipped to the metric's range.
SUMMARY_METRICS: dict[str, SummaryMetric] = {
    "p_double_nonidem": _share("proportion", "nonidem_double", "nonidem_calls",
                               "P(a non-idempotent write call applied twice or more)"),
    "p_double_idem": _share("proportion", "idem_double", "idem_calls",
                            "P(an idempotent write call applied twice or more)"),
    "p_dead_letter": _share("proportion", "dead_letters", "finished", "P(a finished run is dead-lettered)"),
    "p_failed": _share("proportion", "failed", "finished", "P(a finished run failed)"),
    "p_completed": _share("proportion", "completed", "finished", "P(a finished run completed)"),
    "p_completed_unaudited": _share("proportion", "completed_unaudited", "finished",
                                    "P(a finished run completed over an unaudited write)"),
    "p_unaudited": _share("proportion", "unaudited", "applications", "P(a write application is unaudited)"),
    "p_unfinished": _share("proportion", "unfinished", "runs", "P(a run is unfinished at the end)"),
    "p_reaped_alive": _share("proportion", "reaped_alive", "runs",
                             "P(a run is reaped while its segment is alive)"),
    # wasted seconds are a part of the busy seconds: a share, though a ratio of sums
    "wasted_fraction": _share("ratio", "wasted_s", "busy_s",
                              "wasted work: provider + tool time of LEASE_LOST segments / all of it"),
    "throughput_per_hour": SummaryMetric("mean", "throughput_per_hour", "", "throughput (runs finished per hour)"),
    "e2e_p50_s": SummaryMetric("mean", "e2e_p50_s", "", "end-to-end time, median of a simulation (s)"),
    "e2e_p99_s": SummaryMetric("mean", "e2e_p99_s", "", "end-to-end time, p99 of a simulation (s)"),
    "violations": SummaryMetric("mean", "violations", "", "violating runs per simulation"),
    # what each proposal costs (docs/PROPOSALS.md "The cost of each proposal")
    "store_statements_per_run": SummaryMetric("ratio", "store_statements", "runs",
                                              "run-store statements per run (the reaper's SELECTs included)"),
    "reaper_selects_per_run": SummaryMetric("ratio", "reaper_selects", "runs",
                                            "the reaper's SELECTs per run (T10, and T14 under P6)"),
    "audit_inserts_per_run": SummaryMetric("ratio", "audit_inserts", "runs", "audit inserts per run"),
    "dispatches_per_run": SummaryMetric("ratio", "dispatches", "runs", "dispatches onto the bus per run"),
    "redispatches_per_run": SummaryMetric("ratio", "redispatches", "runs",
                                          "re-dispatches of an overdue QUEUED row by the sweep (P6) per run"),
    "redispatch_wait_s": SummaryMetric("ratio", "redispatch_wait_s", "redispatches",
                                       "seconds from a row's dispatch deadline passing to the sweep's "
                                       "re-dispatch, mean over re-dispatches"),
    "redispatch_wait_max_s": SummaryMetric("mean", "redispatch_wait_max_s", "",
                                           "that wait's maximum in a simulation (s)"),
}
