"""Replication statistics: every interval the project prints or plots, in one module.

The runs of one simulation share its workers, its queue, its outages and its stalls, so they
are not independent samples: an interval over runs pooled across seeds is too narrow. The
unit of replication is one simulation (one seed). Every interval here is computed from the
spread *between* replications, with scipy.stats:

* :func:`t_interval`: Student t over per-replication values (a mean, a percentile, a
  throughput: one value per seed), ``n - 1`` degrees of freedom;
* :func:`proportion_interval`: a proportion (k of n per replication): Student t over the
  per-replication proportions, widened to the Wilson interval of the pooled counts where that
  one is wider (a rare event seen in no seed: the t interval would be [0, 0]);
* :func:`ratio_interval`: a ratio of sums (wasted seconds over busy seconds): scipy's
  ``bootstrap`` over replications (seeds resampled, the runs of one seed kept together),
  widened to the t interval over per-replication ratios where that one is wider;
* :func:`sectioned`: one simulation alone (``failclosed simulate``): its runs are cut, in
  arrival order, into ``SECTIONS`` sections of consecutive runs (batch means by sectioning:
  the estimate is the whole simulation's, its spread is that of the sections' estimates;
  Student t with ``sections - 1`` degrees of freedom);
* :func:`wilson`: the pooled Wilson score interval, for units that really are independent
  (and labelled so); it is never the interval of runs within one simulation.

So no interval is narrower than the t interval over replications. Each :class:`Interval`
names its method (``method``), which the CSVs, the JSON and the plots carry.

:func:`summarize` makes a sweep's summary: one row per grid point, ``n_seeds`` and, for each
metric of ``sim.summary.SUMMARY_METRICS``, the estimate, ``_lo`` and ``_hi``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .summary import SUMMARY_METRICS

__all__ = ["CONFIDENCE", "SECTIONS", "Interval", "grid_points", "proportion_interval", "ratio_interval",
           "sectioned", "sections", "summary_columns", "summarize", "t_interval", "varying", "wilson"]


def _scipy_stats() -> Any:
    """scipy.stats, imported when an interval is computed: it costs about 0.5 s of CPU at
    start-up, which every command would pay (the simulator's results import this module)."""
    from scipy import stats  # heavy: only when an interval is computed

    return stats

CONFIDENCE = 0.95
SECTIONS = 10  # sections of one simulation's runs (batch means), when it has enough runs
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261201  # a fixed generator: the same rows give the same interval

T_SEEDS = "Student t over seeds"
T_SECTIONS = "Student t over sections of consecutive runs (batch means)"
WIDENED = "widened to the pooled Wilson interval where that is wider"


@dataclass(frozen=True)
class Interval:
    """An estimate with its 95 % interval over ``n`` replications (None: not computable)."""

    estimate: float | None
    lo: float | None
    hi: float | None
    n: int  # replications: seeds, or sections of one simulation
    method: str
    # the bounds clipped to the metric's range, in words ("hi 2.81 clipped to 1"; "": none)
    clipped: str = ""

    @property
    def half_width(self) -> float | None:
        if self.lo is None or self.hi is None:
            return None
        return (self.hi - self.lo) / 2

    @property
    def widest_arm(self) -> float | None:
        """The larger of estimate - lo and hi - estimate (an interval need not be symmetric)."""
        if self.estimate is None or self.lo is None or self.hi is None:
            return None
        return max(self.estimate - self.lo, self.hi - self.estimate)

    def as_list(self) -> list[float | None]:
        return [self.estimate, self.lo, self.hi]


def _clean(values: Sequence[float | None]) -> np.ndarray:
    a = np.asarray([v for v in values if v is not None], dtype=float)
    return a[np.isfinite(a)]


def _t_bounds(a: np.ndarray, centre: float, confidence: float) -> tuple[float, float]:
    """``centre`` +- t quantile x standard error of the mean of ``a`` (scipy.stats.t)."""
    sd = float(np.std(a, ddof=1))
    if sd == 0.0:
        return centre, centre
    lo, hi = _scipy_stats().t.interval(confidence, df=len(a) - 1, loc=centre, scale=sd / math.sqrt(len(a)))
    return float(lo), float(hi)


def t_interval(values: Sequence[float | None], unit: str = "seeds", confidence: float = CONFIDENCE,
               centre: float | None = None) -> Interval:
    """The mean of ``values`` (one per replication) and its Student t interval, ``n - 1``
    degrees of freedom. ``centre``: the estimate to centre it on instead of the mean (the whole
    simulation's, for sections). Fewer than two values: the estimate alone, no interval."""
    a = _clean(values)
    method = f"Student t over {unit}"
    if len(a) == 0:
        return Interval(None, None, None, 0, method)
    est = float(a.mean()) if centre is None else float(centre)
    if len(a) < 2:
        return Interval(est, None, None, len(a), f"{method}: no interval from 1 {unit.rstrip('s')}")
    lo, hi = _t_bounds(a, est, confidence)
    return Interval(est, lo, hi, len(a), method)


def wilson(k: int, n: int, confidence: float = CONFIDENCE) -> Interval:
    """The Wilson score interval of ``k`` successes in ``n`` independent trials (scipy's
    ``binomtest``): only for independent units; never for the runs of one simulation."""
    if n == 0:
        return Interval(None, None, None, 0, "Wilson (independent trials)")
    ci = _scipy_stats().binomtest(int(k), int(n)).proportion_ci(confidence, method="wilson")
    return Interval(k / n, float(ci.low), float(ci.high), int(n), "Wilson (independent trials)")


def _hull(a: Interval, b: Interval, method: str) -> Interval:
    lo = min(x for x in (a.lo, b.lo) if x is not None) if a.lo is not None or b.lo is not None else None
    hi = max(x for x in (a.hi, b.hi) if x is not None) if a.hi is not None or b.hi is not None else None
    return Interval(a.estimate, lo, hi, a.n, method, "; ".join(_kept_notes(a, lo, hi) + _kept_notes(b, lo, hi)))


def _kept_notes(iv: Interval, lo: float | None, hi: float | None) -> list[str]:
    """The clipping notes of ``iv`` whose bound is the hull's (``lo``, ``hi``)."""
    return [n for n in iv.clipped.split("; ") if n and ((n.startswith("lo") and iv.lo == lo)
                                                     or (n.startswith("hi") and iv.hi == hi))]


def clip(iv: Interval, lo: float | None = 0.0, hi: float | None = None) -> Interval:
    """``iv`` with its bounds clipped to the range [``lo``, ``hi``] (None: unbounded) its metric
    lies in; ``clipped`` says which bound was moved and from where (kept from ``iv`` too)."""
    if iv.lo is None or iv.hi is None:
        return iv
    notes = [iv.clipped] if iv.clipped else []
    new_lo, new_hi = iv.lo, iv.hi
    if lo is not None and iv.lo < lo:
        new_lo = lo
        notes.append(f"lo {iv.lo:.4g} clipped to {lo:g}")
    if hi is not None and iv.hi > hi:
        new_hi = hi
        notes.append(f"hi {iv.hi:.4g} clipped to {hi:g}")
    if (new_lo, new_hi) == (iv.lo, iv.hi):
        return iv
    return Interval(iv.estimate, new_lo, new_hi, iv.n, iv.method, "; ".join(notes))


def proportion_interval(k: Sequence[int], n: Sequence[int], unit: str = "seeds",
                        confidence: float = CONFIDENCE, centre: float | None = None) -> Interval:
    """A proportion from ``k[i]`` of ``n[i]`` per replication: the mean of the per-replication
    proportions (or ``centre``) and the Student t interval over them, clipped to [0, 1] and
    widened to the Wilson interval of the pooled counts where that is wider. Replications
    with ``n[i] = 0`` have no proportion and are left out."""
    pairs = [(int(a), int(b)) for a, b in zip(k, n, strict=True) if b]
    t = t_interval([a / b for a, b in pairs], unit, confidence, centre=centre)
    if t.estimate is None or t.lo is None:
        return t
    t = clip(t, 0.0, 1.0)
    w = wilson(sum(a for a, _ in pairs), sum(b for _, b in pairs), confidence)
    return _hull(t, w, f"{t.method}, {WIDENED}")


def ratio_interval(num: Sequence[float], den: Sequence[float], unit: str = "seeds",
                   confidence: float = CONFIDENCE) -> Interval:
    """A ratio of sums, sum(num) / sum(den), with a percentile bootstrap over replications
    (scipy.stats.bootstrap, the pairs (num[i], den[i]) resampled together), widened to the
    Student t interval over the per-replication ratios where that is wider."""
    pairs = [(float(a), float(b)) for a, b in zip(num, den, strict=True) if b]
    method = f"bootstrap over {unit} (percentile), widened to the Student t interval over {unit} where that is wider"
    if not pairs:
        return Interval(None, None, None, 0, method)
    x = np.array([a for a, _ in pairs])
    y = np.array([b for _, b in pairs])
    est = float(x.sum() / y.sum())
    t = t_interval(list(x / y), unit, confidence, centre=est)
    if len(pairs) < 2:
        return Interval(est, None, None, len(pairs), t.method)
    if np.ptp(x / y) == 0.0:
        return Interval(est, t.lo, t.hi, len(pairs), method)
    res = _scipy_stats().bootstrap((x, y), lambda a, b: a.sum() / b.sum(), paired=True, vectorized=False,
                        n_resamples=BOOTSTRAP_RESAMPLES, confidence_level=confidence,
                        method="percentile", rng=np.random.default_rng(BOOTSTRAP_SEED))
    b = Interval(est, float(res.confidence_interval.low), float(res.confidence_interval.high), len(pairs), method)
    return _hull(b, t, method)


# -- one simulation: sections of consecutive runs (batch means) ---------------------------------
def sections(items: Sequence[Any], count: int = SECTIONS) -> list[list[Any]]:
    """``items`` (in arrival order) cut into ``count`` contiguous sections of near-equal size
    (fewer when there are fewer than two items per section; at least two sections when there
    are two items)."""
    k = max(1, min(count, len(items) // 2)) if len(items) >= 2 else 1
    bounds = np.linspace(0, len(items), k + 1).round().astype(int)
    return [list(items[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def sectioned(items: Sequence[Any], overall: Callable[[Sequence[Any]], float | None],
              kind: str = "mean", count: int = SECTIONS,
              counts: Callable[[Sequence[Any]], tuple[int, int]] | None = None) -> Interval:
    """The estimate ``overall(items)`` of one simulation, with the Student t interval of
    batch means by sectioning: the spread of ``overall`` over ``sections(items, count)``.
    ``kind="proportion"`` with ``counts(section) -> (k, n)``: a proportion, clipped to [0, 1]
    and widened to the pooled Wilson interval where that is wider (as across seeds)."""
    secs = sections(items, count)
    est = overall(items)
    if est is None:
        return Interval(None, None, None, len(secs), T_SECTIONS)
    if kind == "proportion":
        assert counts is not None
        kn = [counts(s) for s in secs]
        iv = proportion_interval([a for a, _ in kn], [b for _, b in kn], "sections of consecutive runs",
                                 centre=est)
        return Interval(iv.estimate, iv.lo, iv.hi, iv.n, iv.method.replace(
            "Student t over sections of consecutive runs", T_SECTIONS), iv.clipped)
    iv = t_interval([overall(s) for s in secs], "sections of consecutive runs", centre=est)
    return Interval(iv.estimate, iv.lo, iv.hi, iv.n, iv.method.replace(
        "Student t over sections of consecutive runs", T_SECTIONS))


# -- a sweep's summary: one row per grid point -----------------------------------------------------
def _num(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def param_names(header: Sequence[str]) -> list[str]:
    """The swept parameters of a sweep CSV's header (its ``param:NAME`` columns)."""
    return [c.split(":", 1)[1] for c in header if c.startswith("param:")]


def grid_points(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[tuple, list[dict[str, Any]]]:
    """The rows of each grid point (the values of ``names``), in order of first appearance;
    a (grid point, seed) given twice counts once (the first row)."""
    out: dict[tuple, list[dict[str, Any]]] = {}
    seen: set[tuple] = set()
    for r in rows:
        key = tuple(str(r[f"param:{n}"]) for n in names)
        if key + (str(r.get("seed")),) in seen:
            continue
        seen.add(key + (str(r.get("seed")),))
        out.setdefault(key, []).append(r)
    return out


def varying(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, list[str]]:
    """The parameters among ``names`` that take more than one value in ``rows``, with their
    values in order of first appearance."""
    out = {}
    for n in names:
        vals = list(dict.fromkeys(str(r[f"param:{n}"]) for r in rows))
        if len(vals) > 1:
            out[n] = vals
    return out


def metric_interval(rows: Sequence[dict[str, Any]], spec: Any) -> Interval:
    """One metric of ``sim.metrics.SUMMARY_METRICS`` (a ``SummaryMetric``) over the rows of
    one grid point (one row per seed), its interval clipped to the metric's range (the
    Interval's ``clipped`` says where it was)."""
    kind, a, b = spec.kind, spec.column, spec.den
    if kind == "proportion":
        kn = [(_num(r.get(a)), _num(r.get(b))) for r in rows]
        kn = [(int(x), int(y)) for x, y in kn if x is not None and y is not None]
        iv = proportion_interval([x for x, _ in kn], [y for _, y in kn])
    elif kind == "ratio":
        xy = [(_num(r.get(a)), _num(r.get(b))) for r in rows]
        xy = [(x, y) for x, y in xy if x is not None and y is not None]
        iv = ratio_interval([x for x, _ in xy], [y for _, y in xy])
    else:
        iv = t_interval([_num(r.get(a)) for r in rows])
    return clip(iv, spec.lo, spec.hi)


def summary_metrics(header: Sequence[str]) -> dict[str, tuple]:
    """The metrics of ``SUMMARY_METRICS`` whose columns the CSV has."""
    have = set(header)
    return {m: s for m, s in SUMMARY_METRICS.items() if all(c in have for c in (s.column, s.den) if c)}


def summary_columns(names: Sequence[str], metrics: Sequence[str]) -> list[str]:
    cols = [f"param:{n}" for n in names] + ["n_seeds"]
    for m in metrics:
        cols += [m, f"{m}_lo", f"{m}_hi"]
    return cols + ["interval_method", "clipped"]


def summarize(rows: Sequence[dict[str, Any]], header: Sequence[str]) -> list[dict[str, Any]]:
    """One row per grid point: its parameters, ``n_seeds`` and, for every metric the CSV
    allows, ``METRIC``, ``METRIC_lo``, ``METRIC_hi`` (None where not computable), and the
    ``interval_method`` of each kind of metric."""
    names = param_names(header)
    specs = summary_metrics(header)
    out = []
    for key, rs in grid_points(rows, names).items():
        row: dict[str, Any] = {f"param:{n}": v for n, v in zip(names, key, strict=True)}
        row["n_seeds"] = len(rs)
        methods: dict[str, str] = {}
        clipped: list[str] = []
        for m, spec in specs.items():
            iv = metric_interval(rs, spec)
            row[m], row[f"{m}_lo"], row[f"{m}_hi"] = iv.estimate, iv.lo, iv.hi
            methods.setdefault(spec.kind, iv.method)
            clipped += [f"{m} {c}" for c in iv.clipped.split("; ") if c]
        row["interval_method"] = "; ".join(f"{k}: {v}" for k, v in methods.items()) + f"; {CONFIDENCE:.0%}"
        row["clipped"] = "; ".join(clipped)
        out.append(row)
    return out


def method_text() -> str:
    """The methods of a summary, in words (the docs and the printed summary say the same)."""
    return (f"{CONFIDENCE:.0%} intervals over seeds (one simulation = one replication): means and "
            f"percentiles by {T_SEEDS}; proportions by {T_SEEDS} of the per-seed "
            f"proportions, {WIDENED}; ratios of sums by a bootstrap over seeds, widened to the t interval; "
            "each clipped to its metric's range (0 and up; shares within 0 to 100%)")
