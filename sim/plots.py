"""Plots (matplotlib, Agg backend): a swimlane of one history, and curves of a sweep.

swimlane
    One lane per worker process, per caller / enqueue / segment process, the reaper, the bus,
    the run store, the audit store and the outside world; at most ``max_lanes`` (the busiest,
    the caption says how to choose others). A lease is a bar on the lane of the process that
    holds it (from claim to release or loss), coloured per run; the dashed tail is the time from
    the last renewal's deadline being passed to the takeover. Provider calls and tool calls are
    thin bars (their simulated duration); audit inserts (stored, failed, an ambiguous commit
    that stores the event but reports a failure: the model's step table says which transitions
    insert), store errors, reaps, crashes and landed effects are markers. A violation is a red
    line and star at its step, labelled with the property, the step and the time: a scenario's
    are found by replaying it against spec.properties.SAFETY, a history's are given (the
    ``violations`` of ``simulate --json``). Selecting runs zooms the axis to their transitions.

curves
    From a sweep CSV: the summary of each grid point (sim/stats.py, 95 % intervals over seeds)
    against any swept parameter, one line per ``color`` value, one column of panels per
    ``facet`` value, one row per metric; a parameter that varies and is not mapped to one of
    them is refused (``check_mapping``), never merged. ``lease_curves`` is its preset.
"""

from __future__ import annotations

import csv
import json
import math
import textwrap
from types import SimpleNamespace
from typing import Any

# matplotlib at the top (not lazily): this module is the plots, imported only to draw one
import matplotlib
from failclosed.model.vocab import ActorKind, FaultKind, TransitionName

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from failclosed.model import names, steps  # noqa: E402
from failclosed.model.config import ConfigError, UsageError  # noqa: E402
from failclosed.model.scenario import load_scenario, replay  # noqa: E402
from failclosed.model.store import DEAD_LETTER_STALE, FIND_STALE_RUNNING, REQUEUE_STALE  # noqa: E402
from failclosed.spec.properties import SAFETY  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from . import stats  # noqa: E402
from .history import note  # noqa: E402
from .metrics import FLAT_COLUMNS, SUMMARY_METRICS  # noqa: E402
from .stats import param_names  # noqa: E402


# -- records -----------------------------------------------------------------------------------
def _records_from_scenario(path: str) -> list[dict[str, Any]]:
    """A scenario's steps as records; a step after which a safety property stops holding
    carries it in ``violated`` (the checker's own predicates, spec.properties.SAFETY)."""
    res = replay(load_scenario(path))
    out = []
    prev = res.scenario.world
    broken = {n for n, p in SAFETY.items() if not p.check(prev)}
    for k, s in enumerate(res.steps, 1):
        d = {"t": float(s.world.clock), **s.transition.to_dict(), "step": k}
        n = note(prev, s.transition, s.world)
        if n:
            d["note"] = n
        now = {n for n, p in SAFETY.items() if not p.check(s.world)}
        if now - broken:
            d["violated"] = sorted(now - broken)
        broken = now
        out.append(d)
        prev = s.world
    return out


def load_violations(path: str) -> list[dict[str, Any]]:
    """The violations of ``failclosed simulate CONFIG --json FILE`` (one object, or the first
    of a list): ``[{"property", "runs", "time"}, ...]``; else one ``ConfigError`` line."""
    fix = "give the --json FILE of the failclosed simulate run that wrote the history"
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"--violations {path}: not a JSON file ({type(e).__name__}); {fix}") from None
    if isinstance(data, list):
        data = data[0] if data else {}
    vs = data.get("violations") if isinstance(data, dict) else None
    if not isinstance(vs, list) or not all(isinstance(v, dict) and {"property", "runs", "time"} <= set(v)
                                           for v in vs):
        raise ConfigError(f"--violations {path}: no violations list (property, runs, time); {fix}")
    return vs


def mark_violations(recs: list[dict[str, Any]], violations: list[dict[str, Any]]) -> list[str]:
    """Attach each violation of a history to its step: the last transition of its runs at or
    before its instant. Returns the violating runs, in order of first violation."""
    order: list[str] = []
    for v in sorted(violations, key=lambda v: float(v["time"])):
        runs = set(v["runs"])
        at = None
        for k, r in enumerate(recs):
            if r["t"] > float(v["time"]) + 1e-6:
                break
            if r.get("run") in runs and r["name"] != TransitionName.ADVANCE_TIME:
                at = k
        if at is not None:
            recs[at].setdefault("violated", []).append(v["property"])
        order += [x for x in v["runs"] if x not in order]
    return order


def load_records(path: str) -> list[dict[str, Any]]:
    """The records of a history (JSONL, from ``simulate --history``) or a scenario (TOML);
    a file that is neither is one ``ConfigError`` line."""
    if path.endswith(".toml"):
        return _records_from_scenario(path)
    fix = "give a history written by failclosed simulate CONFIG --history FILE.jsonl, or a scenario .toml"
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except UnicodeDecodeError:
        raise ConfigError(f"HISTORY {path}: not a text file; {fix}") from None
    except OSError as e:
        raise ConfigError(f"HISTORY {path}: cannot read it ({e.strerror or e}); check the path") from None
    recs = []
    for k, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            raise ConfigError(f"HISTORY {path}: line {k} is not JSON; {fix}") from None
        if not isinstance(r, dict) or not {"t", "name", "actor"} <= set(r):
            raise ConfigError(f"HISTORY {path}: line {k} is not a history record (t, name, actor); {fix}")
        try:
            r["t"] = float(r["t"])
        except (TypeError, ValueError):
            raise ConfigError(f"HISTORY {path}: line {k}: t = {r['t']!r} is not a number; {fix}") from None
        r["step"] = len(recs) + 1
        recs.append(r)
    if not recs:
        raise ConfigError(f"HISTORY {path}: empty, no records; {fix}")
    return recs


def run_ids(recs: list[dict[str, Any]]) -> list[str]:
    """The run ids of a history, in numeric order (r2 before r10)."""
    return sorted({r["run"] for r in recs if isinstance(r.get("run"), str)}, key=lambda s: (len(s), s))


def check_runs(recs: list[dict[str, Any]], runs: list[str], path: str) -> None:
    """Every id of ``--runs`` is a run of the history (else one UsageError line listing some)."""
    have = run_ids(recs)
    missing = [r for r in runs if r not in set(have)]
    if missing:
        some = ", ".join(have[:8]) + (f", ... ({len(have)} runs)" if len(have) > 8 else "")
        raise UsageError(f"--runs {','.join(missing)}: not in {path}; its runs are {some or 'none'}")


def _lane_of_identity(identity: str) -> str:
    return names.identity_process(identity)  # the process that holds the lease


def swimlane(path: str, out: str, runs: list[str] | None = None,
             window: tuple[float, float] | None = None, axis: str = "auto",
             records: list[dict[str, Any]] | None = None, max_lanes: int = 24,
             violations: list[dict[str, Any]] | None = None,
             first_violating: bool = False) -> dict[str, Any]:
    """A lane per worker, segment, the reaper, the stores and the outside world.

    ``runs`` and ``window`` select the transitions; the axis spans the selected runs' own
    transitions (the reaper's ticks outside it are dropped). ``violations`` (a history's,
    ``load_violations``): marked at their step. Nothing is narrowed unless asked:
    ``first_violating`` (with no ``runs``) draws the first violating run alone, and a note says
    so. At most ``max_lanes`` lanes: the busiest; the returned ``notes`` say how to choose
    others. ``axis``: ``time`` (simulated seconds), ``step`` (transition order: a checker
    counterexample happens in a few seconds, and what matters is the interleaving) or
    ``auto`` (step when the clock moves less than one second per transition)."""
    notes: list[str] = []
    recs = [dict(r) for r in (load_records(path) if records is None else records)]
    violating = mark_violations(recs, violations) if violations else []
    some = f"{', '.join(violating[:6])}{' ...' if len(violating) > 6 else ''}"
    if first_violating and not runs:
        if not violating:
            raise UsageError(f"--first-violating-run: {path} has no violation to draw (give --violations "
                             "FILE.json of the simulate run that wrote it, or drop the flag)")
        runs = violating[:1]
        notes.append(f"drawing run {runs[0]} alone, the first violating run (--first-violating-run; "
                     f"{len(violating)} violating: {some}); choose others with --runs")
    elif violating and not runs:
        notes.append(f"{len(violating)} violating runs ({some}), all drawn; --runs RUN or "
                     "--first-violating-run draws one alone")
    recs = _selected(recs, path, runs, window)
    by_step = _by_step(recs, axis)
    if by_step:  # x = the step of the trace; leases are drawn as held, without deadlines
        recs = [dict(r, t=float(r.get("step", k + 1)), time=r["t"]) for k, r in enumerate(recs)]
    t_end = max(r["t"] for r in recs)
    t_start = min(r["t"] for r in recs)
    lanes, dropped = _capped_lanes(recs, max_lanes)
    if dropped:
        notes.append(f"{dropped} of {len(lanes) + dropped} lanes not drawn (--max-lanes {max_lanes}, the busiest "
                     "drawn); choose runs with --runs r1,r2 or a time span with --window START:END")
    y = {name: k for k, name in enumerate(reversed(lanes))}
    ids = sorted({r.get("run") for r in recs if r.get("run")}, key=lambda s: (len(s), s))
    cmap = plt.get_cmap("tab10")
    colour = {rid: cmap(k % 10) for k, rid in enumerate(ids)}

    fig_h = 1.6 + 0.45 * len(lanes) + 0.2 * min(VIOLATION_LABELS + 1, sum(bool(r.get("violated")) for r in recs))
    fig, ax = plt.subplots(figsize=(13, max(3.8, fig_h)))
    drawing = _Swimlane(ax, y, colour, by_step)
    for r in recs:
        drawing.add(r)
    for rid in list(drawing.lease):
        drawing.close_lease(rid, t_end)
    _draw_markers(ax, y, drawing.markers)
    span = max(t_end - t_start, 1.0)
    x_range = (t_start - 0.02 * span, t_end + 0.02 * span)
    marked, labels = _draw_violations(ax, y, recs, x_range)
    label_rows = _lines(labels)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(list(reversed(lanes)))
    ax.set_xlim(*x_range)
    ax.set_ylim(-0.7, len(lanes) - 0.3 + (0.3 + LABEL_LINE * label_rows if label_rows else 0))
    ax.set_xlabel("step of the trace (transition order)" if by_step else "simulated time (s)")
    ax.set_title(f"Swimlane: {path.split('/')[-1]}" + (f" (runs {', '.join(runs)})" if runs else ""))
    ax.grid(axis="x", alpha=0.3)
    _legend(ax, ids)
    if dropped:
        fig.text(0.01, 0.005, _wrap(notes[-1], 150), fontsize=8, color="dimgrey")
    fig.tight_layout(rect=(0, 0.02 if dropped else 0, 1, 1))
    _keep_inside(fig, ax, labels)
    facts = _swimlane_facts(ax, y)
    fig.savefig(out, dpi=110, metadata=_png_metadata(out, facts | {"caption": ax.get_title()}))
    plt.close(fig)
    return {"lanes": len(lanes), "dropped_lanes": dropped, "violations": marked, "notes": notes,
            "span": (t_start, t_end), **facts}


def _swimlane_facts(ax: Any, y: dict[str, int]) -> dict[str, Any]:
    """Where the violation stars and the lines of their idle processes were drawn, read back
    from the axes' artists: ``stars`` [lane, x], ``stalled`` [lane, x0, x1]."""
    lane = {v: k for k, v in y.items()}
    stars = [[lane[round(float(o[1]))], float(o[0])] for c in ax.collections
             if c.get_gid() == "violation" for o in c.get_offsets()]
    stalled = [[lane[round(float(line.get_ydata()[0]))], float(line.get_xdata()[0]),
                float(line.get_xdata()[-1])] for line in ax.get_lines()
               if line.get_gid() == "stalled"]
    return {"stars": stars, "stalled": stalled}


def _capped_lanes(recs: list[dict[str, Any]], max_lanes: int) -> tuple[list[str], int]:
    """The lanes to draw, at most ``max_lanes``: the shared ones first, then the processes
    with the most transitions (kept in their stable order); and how many were left out."""
    lanes = _lanes(recs)
    if len(lanes) <= max_lanes:
        return lanes, 0
    fixed = lanes[:len(FIXED_LANES)]
    procs = lanes[len(FIXED_LANES):]
    count: dict[str, int] = {}
    for r in recs:
        count[r["actor"]] = count.get(r["actor"], 0) + 1
    hot = {r.get("actor") for r in recs if r.get("violated")}
    keep = set(sorted(procs, key=lambda a: (a not in hot, -count.get(a, 0)))[:max(0, max_lanes - len(fixed))])
    kept = [a for a in procs if a in keep]
    return fixed + kept, len(procs) - len(kept)


VIOLATION_LABELS = 6  # instants labelled one per line; the rest are counted on one more line


def _draw_violations(ax: Any, y: dict[str, int], recs: list[dict[str, Any]],
                     x_range: tuple[float, float]) -> tuple[int, list[Any]]:
    """A red line and star at each violating step, and one label per instant (its properties,
    steps and time) in rows above the lanes. Returns the violations drawn and the labels (kept
    inside the axes by :func:`_keep_inside` once the figure is laid out)."""
    n = 0
    at: dict[float, tuple[list[int], list[str], float]] = {}  # x -> (steps, properties, time)
    before: dict[str, float] = {}  # actor -> the time of its transition before this one
    for r in recs:
        props = r.get("violated", [])
        prev = before.get(r["actor"])
        before[r["actor"]] = r["t"]
        if not props:
            continue
        ax.axvline(r["t"], color="red", lw=1.4, ls="-", alpha=0.8, zorder=4)
        lane = r["actor"] if r["actor"] in y else None
        if lane is not None and prev is not None and r["t"] > prev:
            # the process was there all along (stalled, its lease gone): its lane is not
            # empty up to the violating step, it is a process that had not moved
            ax.plot([prev, r["t"]], [y[lane], y[lane]], color="red", lw=1.2, ls=":", zorder=5,
                    label=STALLED_LABEL, gid="stalled")
        if lane is not None:
            ax.scatter([r["t"]], [y[lane]], marker="*", s=220, color="red", edgecolor="black",
                       zorder=6, label="violation" if n == 0 else None, gid="violation")
        steps_, names, _t = at.setdefault(r["t"], ([], [], r.get("time", r["t"])))
        steps_.append(r.get("step", 0))
        names += [q for q in props if q not in names]
        n += len(props)
    if not at:
        return 0, []
    y0 = max(y.values(), default=0) + 0.45
    lo, hi = x_range
    labels = []
    items = list(at.items())
    for x, (steps_, names, t) in items[:VIOLATION_LABELS]:
        which = f"step {steps_[0]}" if len(steps_) == 1 else (
            f"steps {', '.join(map(str, steps_))}" if len(steps_) <= 3 else f"steps {steps_[0]} to {steps_[-1]}")
        left_half = x < (lo + hi) / 2
        text = _wrap(f"{', '.join(names)} violated ({which}, t={t:,.1f}\u00a0s)", LABEL_CHARS)
        labels.append(ax.annotate(text, (x, y0 + LABEL_LINE * _lines(labels)), fontsize=8, color="red",
                                  fontweight="bold", ha="left" if left_half else "right", va="bottom",
                                  xytext=(4 if left_half else -4, 0), textcoords="offset points", zorder=6))
    if len(items) > len(labels):
        rest = sum(len(v[1]) for _x, v in items[len(labels):])
        labels.append(ax.annotate(f"and {plural_of(rest, 'violation')} at {len(items) - len(labels)} more instants "
                                  "(red lines; --runs or --window draws fewer)", (lo, y0 + LABEL_LINE * _lines(labels)),
                                  fontsize=8, color="red", ha="left", va="bottom", xytext=(4, 0),
                                  textcoords="offset points"))
    return n, labels


STALLED_LABEL = "the violating process, idle since its previous step"
LABEL_CHARS = 110  # a violation's label wraps at its words past this (the swimlane is 13 in wide)
LABEL_LINE = 0.42  # the height of a label's line, in lanes


def _lines(labels: list[Any]) -> int:
    return sum(1 + a.get_text().count("\n") for a in labels)


def _keep_inside(fig: Any, ax: Any, labels: list[Any]) -> None:
    """Move each label that reaches past the axes' left or right edge back inside it (the
    other side of its line, else against the edge): every label stays in the figure."""
    if not labels:
        return
    renderer = fig.canvas.get_renderer()
    box = ax.get_window_extent(renderer)
    for ann in labels:
        ext = ann.get_window_extent(renderer)
        if ext.x0 >= box.x0 and ext.x1 <= box.x1:
            continue
        flip = "right" if ann.get_ha() == "left" else "left"
        ann.set_ha(flip)
        ann.xyann = (4 if flip == "left" else -4, 0)
        ext = ann.get_window_extent(renderer)
        if ext.x0 >= box.x0 and ext.x1 <= box.x1:
            continue
        # wider than either side of its line: from the axes' left edge (LABEL_CHARS fits the axes)
        ann.set_ha("left")
        ann.xyann = (4, 0)
        ann.xycoords = ("axes fraction", "data")
        ann.xy = (0.0, ann.xy[1])


def plural_of(n: int, word: str) -> str:
    return f"{n} {word if n == 1 else word + 's'}"


def _selected(recs: list[dict[str, Any]], path: str, runs: list[str] | None,
              window: tuple[float, float] | None) -> list[dict[str, Any]]:
    """The transitions to draw: of ``runs`` (and the reaper's ticks), in ``window``, without
    the clock's moves; none is one UsageError line."""
    if runs:
        keep = set(runs)
        own = [r["t"] for r in recs if r.get("run") in keep and r["name"] != TransitionName.ADVANCE_TIME]
        lo, hi = (min(own), max(own)) if own else (0.0, -1.0)
        recs = [r for r in recs if r.get("run") in keep
                or (r["name"] == FIND_STALE_RUNNING and lo <= r["t"] <= hi)]
    recs0 = recs
    if window:
        recs = [r for r in recs if window[0] <= r["t"] <= window[1]]
    recs = [r for r in recs if r["name"] != TransitionName.ADVANCE_TIME]
    if not recs:
        span = f"span {min(r['t'] for r in recs0):.0f} to {max(r['t'] for r in recs0):.0f} s" if recs0 else "are none"
        what = f"the transitions of --runs {','.join(runs)}" if runs else "the history's transitions"
        flag = f"--window {window[0]:g}:{window[1]:g}" if window else "--runs"
        raise UsageError(f"{path}: no transitions to draw in {flag} "
                         f"({what} {span}); give a --window within it" + (" or other --runs" if runs else ""))
    return recs


def _by_step(recs: list[dict[str, Any]], axis: str) -> bool:
    """Whether the x axis is the step of the trace rather than simulated time."""
    if axis not in ("auto", "time", "step"):
        raise UsageError(f"--axis {axis}: use auto, time or step")
    if axis == "auto":
        span_t = max(r["t"] for r in recs) - min(r["t"] for r in recs)
        return span_t < len(recs)
    return axis == "step"


def _lanes(recs: list[dict[str, Any]]) -> list[str]:
    """The lanes, in a stable order: the outside world, the stores, the bus, the reaper, then
    every other process (callers, enqueue callers, segments), the workers last."""
    actors = {r["actor"] for r in recs} - set(FIXED_LANES) - {ActorKind.CLOCK}
    reapers = sorted(a for a in actors if names.is_reaper(a))  # a second reaper's own lane
    workers = sorted((a for a in actors if a[:1] == "w" and a[1:].isdigit()), key=lambda a: int(a[1:]))
    others = sorted(actors - set(workers) - set(reapers), key=lambda a: (a != ActorKind.CALLER, a))
    return [*FIXED_LANES, *reapers, *others, *workers]


FIXED_LANES = ("outside world", "audit store", "run store", ActorKind.BUS, names.reaper_name(1))


class _Swimlane:
    """The swimlane drawn record by record: calls and leases as bars at once, the markers
    collected (drawn last, over the bars)."""

    def __init__(self, ax: Any, y: dict[str, int], colour: dict[str, Any], by_step: bool):
        self.ax = ax
        self.y = y  # lane -> its row
        self.colour = colour  # run -> its colour
        self.by_step = by_step
        self.last_t: dict[str, float] = {}  # actor -> time of its last transition
        self.lease: dict[str, tuple[str, float, int]] = {}  # run -> (lane, since, lease_expires)
        self.markers: list[tuple[float, str, str, str]] = []  # (t, lane, marker style key, label)

    def add(self, r: dict[str, Any]) -> None:
        t, name, actor, rid = r["t"], r["name"], r["actor"], r.get("run")
        lane = actor if actor in self.y else None
        if name in WORK_CALLS and lane is not None:
            self._call(r, lane)
        self.markers += _markers(r, lane)
        row = r.get("note", {}).get("row")
        if row is not None and rid is not None:
            self._row(rid, t, row, lane)
        self.last_t[actor] = t

    def _call(self, r: dict[str, Any], lane: str) -> None:
        """A provider or tool call: a thin bar since the process's previous transition."""
        t, name = r["t"], r["name"]
        t0 = self.last_t.get(r["actor"], t)
        tool = name in TOOL_CALLS
        self.ax.barh(self.y[lane] + (0.28 if tool else -0.28), t - t0, left=t0, height=0.12,
                     color="tab:purple" if tool else "tab:grey")

    def _row(self, rid: str, t: float, row: list, lane: str | None) -> None:
        """The run's row after the transition (the note): who holds its lease, till when."""
        status, owner, expires = row[:3]
        cur = self.lease.get(rid)
        new_lane = _lane_of_identity(owner) if (status == "running" and owner) else None
        if cur is not None and new_lane != cur[0]:
            self.close_lease(rid, t)
            cur = None
        if new_lane is not None:
            if cur is None:
                self.lease[rid] = (new_lane, t, expires)
            else:
                held_by, since, _expires = cur
                self.lease[rid] = (held_by, since, expires)
        if status in ("completed", "failed", "cancelled") and lane is not None:
            self.markers.append((t, lane, "settled", status))

    def close_lease(self, rid: str, t: float) -> None:
        if rid not in self.lease:
            return
        lane, since, exp = self.lease.pop(rid)
        if lane not in self.y:
            return
        if self.by_step:
            exp = 0  # no deadlines on a step axis
        c = self.colour.get(rid, "grey")
        end_solid = min(t, float(exp)) if exp > 0 else t
        self.ax.barh(self.y[lane], max(end_solid - since, 0.0), left=since, height=0.5,
                     color=c, alpha=0.35, edgecolor=c)
        if exp > 0 and t > exp:  # held past its deadline: the lease had lapsed
            self.ax.barh(self.y[lane], t - exp, left=exp, height=0.5, fill=False, hatch="//",
                         edgecolor=c, linestyle="--")


def _markers(r: dict[str, Any], lane: str | None) -> list[tuple[float, str, str, str]]:
    """The markers of one record but its run's settling: a fault by its kind
    (``_fault_marker``; a call's too, at the end of its bar), stored audit events, reaps and
    ticks, dispatches, landed effects, a step of a kind drawn nowhere else."""
    t, name, rid, fault = r["t"], r["name"], r.get("run"), r.get("fault")
    out = []
    if _kind_of(r) is not None:
        out.append(_fault_marker(r, lane))
    elif name in AUDIT_INSERTS:
        out.append((t, "audit store", "audit_ok", name))
    reaper = r["actor"] if names.is_reaper(r["actor"]) else names.reaper_name(1)  # its lane
    if name in (REQUEUE_STALE, DEAD_LETTER_STALE) and not fault:
        out.append((t, reaper, "reap", f"{name} {rid}"))
    if name == FIND_STALE_RUNNING:
        out.append((t, reaper, "reaper_tick", ""))
    if name == TransitionName.DISPATCH and not fault:
        out.append((t, ActorKind.BUS, "dispatch", ""))
    for tool, effect, _seg in r.get("note", {}).get("landed", []):
        out.append((t, "outside world", "landed_ni" if effect == "non_idempotent_write" else "landed_i", tool))
    other = steps.OTHER_TRANSITIONS.get(name)
    if not out and other is not None and other.actor not in DRAWN_KINDS and lane is not None:
        out.append((t, lane, f"{STEP}{name}", other.actor))  # a kind drawn nowhere else
    return out


# The actor kinds whose steps the swimlane draws above (bars, leases, the markers of their
# transitions); a step of any other kind (one declared since) is a marker named by its
# transition on its actor's lane (``STEP``), never left out.
DRAWN_KINDS = frozenset({ActorKind.CALLER, ActorKind.PROCESS, ActorKind.WORKER, ActorKind.BUS,
                         ActorKind.REAPER, ActorKind.OPERATOR, ActorKind.CLOCK, "any process"})
STEP = "step:"


def _kind_of(r: dict[str, Any]) -> str | None:
    """The fault kind a record injects (``model.steps.injected``: its fault branch, a
    provider failure class as provider_error, or a transition that is a kind of its own)."""
    return steps.injected(SimpleNamespace(name=r["name"], fault=r.get("fault")))


# The lane of a fault kind's declared component (model/steps.py ``FAULTS``): the stores and
# the bus have lanes of their own; a kind of any other component (the provider, a tool, the
# process, the clock) is drawn on the lane of the process that took it.
COMPONENT_LANES = {steps.STORE: "run store", steps.AUDIT: "audit store",
                   steps.DISPATCH: ActorKind.BUS, ActorKind.BUS: ActorKind.BUS}


def _fault_marker(r: dict[str, Any], lane: str | None) -> tuple[float, str, str, str]:
    """A fault, drawn by its declared kind: on the lane of the component the kind breaks,
    with the kind's own marker (``_style``); never as another kind's failure."""
    kind = _kind_of(r)
    assert kind is not None
    where = COMPONENT_LANES.get(steps.FAULTS[kind].component, lane)
    return (r["t"], where if where is not None else "", kind, f"{r['name']}[{r.get('fault') or kind}]")


def _audit_inserts() -> tuple[frozenset[str], str]:
    """The transitions that insert an audit event, and the fault that stores it but reports
    a failure: read from the model's step table (model/steps.py)."""
    inserts = frozenset(n for a in steps.steps() if a.cost == steps.AUDIT for n in a.fires)
    assert AMBIGUOUS in steps.FAULTS and steps.FAULTS[AMBIGUOUS].component == steps.AUDIT
    return inserts, AMBIGUOUS


AMBIGUOUS = FaultKind.AMBIGUOUS_COMMIT  # the audit fault that stores the event but reports a failure
AUDIT_INSERTS, _ = _audit_inserts()


def _calls(*costs: str) -> frozenset[str]:
    """The transitions of the steps that wait on these components (the step table)."""
    return frozenset(n for a in steps.steps() if a.cost in costs for n in a.fires)


TOOL_CALLS = _calls(steps.TOOL)
WORK_CALLS = _calls(steps.PROVIDER, steps.TOOL)  # a provider or tool call: a bar on the lane

_MARKER_STYLE = {
    "audit_ok": dict(marker="o", color="seagreen", s=14, label="audit event stored"),
    FaultKind.AUDIT_INSERT_FAILS: dict(marker="x", color="red", s=60, label="audit insert failed (nothing stored)"),
    FaultKind.AMBIGUOUS_COMMIT: dict(marker="D", color="darkorange", s=45,
                                     label="ambiguous commit (stored, reported failed)"),
    FaultKind.STORE_ERROR: dict(marker="x", color="darkorange", s=40, label="run store error"),
    "reap": dict(marker="v", color="black", s=60, label="reaped (requeue / dead-letter)"),
    "reaper_tick": dict(marker="|", color="grey", s=30, label="reaper tick"),
    "dispatch": dict(marker=">", color="tab:blue", s=20, label="message dispatched"),
    FaultKind.DISPATCH_FAILS: dict(marker="x", color="tab:blue", s=40, label="dispatch failed"),
    FaultKind.DUPLICATE_MESSAGE: dict(marker="d", color="tab:cyan", s=30, label="duplicate delivery"),
    FaultKind.CRASH: dict(marker="X", color="black", s=90, label="process crash"),
    # a call's error: never a star (the violation's marker), one shape per kind of call
    FaultKind.PROVIDER_ERROR: dict(marker="^", color="tab:grey", edgecolor="black", s=45, label="provider call error"),
    FaultKind.TOOL_ERROR: dict(marker="p", color="tab:purple", edgecolor="black", s=50, label="tool call error"),
    "landed_ni": dict(marker="P", color="crimson", s=70, label="non-idempotent effect landed"),
    "landed_i": dict(marker="P", color="seagreen", s=50, label="idempotent effect landed"),
    "settled": dict(marker="s", color="black", s=25, label="run settled (terminal)"),
}


# a fault kind with no look of its own above (one declared since): a look of the kind's own,
# by its place in the declaration order, labelled with its name and what it breaks
_KIND_MARKERS = ("h", "<", "8", "H", "p", "d", "^")
_KIND_COLOURS = ("tab:olive", "tab:pink", "tab:brown", "gold", "teal", "navy", "magenta")


def _style(key: str) -> dict[str, Any]:
    """The look and legend label of a marker kind: its own, or a fault kind's by its name."""
    if key in _MARKER_STYLE:
        return dict(_MARKER_STYLE[key])
    if key.startswith(STEP):
        name = key[len(STEP):]
        return dict(marker="o", color="white", edgecolor="tab:green", s=40,
                    label=f"{name} (a step of {steps.OTHER_TRANSITIONS[name].actor})")
    kinds = steps.fault_kinds()
    k = kinds.index(key) if key in kinds else len(kinds)
    return dict(marker=_KIND_MARKERS[k % len(_KIND_MARKERS)], s=50, edgecolor="black",
                color=_KIND_COLOURS[k // len(_KIND_MARKERS) % len(_KIND_COLOURS)],
                label=_kind_label(key))


def _kind_label(kind: str) -> str:
    """A fault kind's legend label: its name, and the component it breaks (its declaration)."""
    component = steps.FAULTS[kind].component if kind in steps.FAULTS else steps.NONE
    return kind if component == steps.NONE else f"{kind} ({component})"


def _draw_markers(ax: Any, y: dict[str, int], markers: list[tuple[float, str, str, str]]) -> None:
    used = set()
    for t, lane, key, _label in markers:
        if lane not in y:
            continue
        st = _style(key)
        lab = st.pop("label")
        ax.scatter([t], [y[lane]], zorder=3, label=None if key in used else lab, **st)
        used.add(key)


def _legend(ax: Any, ids: list[str]) -> None:
    handles, labels = ax.get_legend_handles_labels()
    once: dict[str, Any] = {}  # each label once (a stalled line per violation shares one)
    for h, lab in zip(handles, labels, strict=True):
        once.setdefault(lab, h)
    handles = list(once.values())
    handles += [Patch(facecolor="grey", alpha=0.35, label="lease held (colour = run)"),
                Patch(fill=False, hatch="//", label="held after the lease expired"),
                Line2D([0], [0], color="tab:grey", lw=3, label="provider call"),
                Line2D([0], [0], color="tab:purple", lw=3, label="tool call")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    if ids and len(ids) <= 10:
        ax.text(1.01, 0.0, "runs: " + ", ".join(ids), transform=ax.transAxes, fontsize=8, va="bottom")


# -- curves over any swept parameter ----------------------------------------------------------------
LEASE_CURVE_COLUMNS = ("policy", "seed", "runs", "lease_seconds", "finished", "dead_letters",
                       "nonidem_calls", "nonidem_double", "throughput_per_hour", "wasted_s")
SWEEP_COLUMNS_NEEDED = ("policy", "seed", "runs")
LEASE_PARAM = "constants.LEASE_SECONDS"
LEASE_CURVE_METRICS = ("p_double_nonidem", "p_dead_letter", "throughput_per_hour", "wasted_fraction")
CURVE_METRICS = LEASE_CURVE_METRICS


def read_sweep_csv(csv_path: str, required: tuple[str, ...] = SWEEP_COLUMNS_NEEDED,
                   with_header: bool = False):
    """The rows of a sweep CSV, checked: a text CSV with the ``required`` columns and numbers
    where numbers belong (else one ``ConfigError`` line). ``with_header``: (header, rows)."""
    fix = "give a CSV written by failclosed sweep CONFIG --param NAME=V1,V2 --out FILE.csv"
    try:
        with open(csv_path, newline="", encoding="utf-8") as f:
            rd = csv.DictReader(f)
            rows = list(rd)
            header = rd.fieldnames or []
    except UnicodeDecodeError:
        raise ConfigError(f"CSV {csv_path}: not a text file; {fix}") from None
    except csv.Error as e:
        raise ConfigError(f"CSV {csv_path}: not a readable CSV ({e}); {fix}") from None
    except OSError as e:
        raise ConfigError(f"CSV {csv_path}: cannot read it ({e.strerror or e}); check the path") from None
    if not header:
        raise ConfigError(f"CSV {csv_path}: empty; {fix}")
    missing = [c for c in required if c not in header]
    if missing:
        raise ConfigError(f"CSV {csv_path}: no column {', '.join(missing[:4])}; {fix}")
    if not rows:
        raise ConfigError(f"CSV {csv_path}: a header but no rows; run the sweep first ({fix})")
    numeric = [c for c in (*required, "violations", *FLAT_COLUMNS)
               if c in header and c not in ("policy", "p_dead_letter", "p_double_nonidem",
                                            "e2e_p50_s", "e2e_p99_s", "redispatch_wait_max_s")]
    for k, r in enumerate(rows, 2):
        for c in dict.fromkeys(numeric):
            try:
                float(r[c])
            except (TypeError, ValueError):
                raise ConfigError(f"CSV {csv_path}: line {k}, column {c}: {r[c]!r} is not a number; {fix}") from None
    return (list(header), rows) if with_header else rows


def sweep_parameters(header: list[str]) -> list[str]:
    """The parameters a sweep CSV can map: its swept ``param:NAME`` columns, and ``policy``
    (a column of every sweep CSV, swept or not)."""
    names = param_names(header)
    return names + ([] if "policy" in names else ["policy"])


def _param_values(rows: list[dict[str, str]], name: str) -> list[str]:
    col = f"param:{name}" if f"param:{name}" in rows[0] else name
    return [r[col] for r in rows]


def check_mapping(header: list[str], rows: list[dict[str, str]], x: str, color: str | None,
                  facet: str | None, path: str, command: str = "plot curves") -> None:
    """``x``, ``color`` and ``facet`` are parameters of the sweep, distinct, and every
    parameter that takes more than one value is mapped to one of them (never merged): else one
    UsageError line naming it."""
    params = sweep_parameters(header)
    for flag, name in (("--x", x), ("--color", color), ("--facet", facet)):
        if name is not None and name not in params:
            raise UsageError(f"{command} {flag} {name}: not a parameter of {path}; its parameters are "
                             f"{', '.join(params)}")
    mapped = [m for m in (x, color, facet) if m is not None]
    if len(set(mapped)) < len(mapped):
        raise UsageError(f"{command}: --x, --color and --facet must name different parameters")
    for name in params:
        vals = list(dict.fromkeys(_param_values(rows, name)))
        if len(vals) > 1 and name not in mapped:
            free = "--color" if color is None else ("--facet" if facet is None else None)
            how = (f"add {free} {name}" if free else "sweep it at one value") if command == "plot curves" else (
                f"use failclosed plot curves {path} --x {x} --color {color or 'policy'} "
                f"--facet {name}")
            raise UsageError(f"{command}: parameter {name} varies ({', '.join(vals[:4])}"
                             f"{' ...' if len(vals) > 4 else ''}) and is not mapped to an axis; {how} "
                             "(parameters are never merged)")


def _as_number(v: str) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def curves(rows: list[dict[str, str]], header: list[str], out: str, x: str, color: str | None = None,
           facet: str | None = None, metrics: tuple[str, ...] | list[str] = CURVE_METRICS,
           title: str = "") -> dict[str, Any]:
    """The summary's estimates against ``x`` with their 95 % intervals over seeds as bands
    (``sim.stats.summarize``): one panel per metric (rows) and facet value (columns), one
    line per ``color`` value. Call :func:`check_mapping` first. Returns what was drawn."""
    summ = stats.summarize(rows, header)
    have = stats.summary_metrics(header)
    metrics = [m for m in metrics if m in have]

    def key(r, name):
        if name is None:
            return ""
        return str(r.get(f"param:{name}", rows[0].get(name, "")))

    facets = list(dict.fromkeys(key(r, facet) for r in summ))
    colours = list(dict.fromkeys(key(r, color) for r in summ))
    xs_all = list(dict.fromkeys(key(r, x) for r in summ))
    numeric = all(_as_number(v) is not None for v in xs_all)
    pos = {v: (float(v) if numeric else k) for k, v in enumerate(xs_all)}
    clipped = 0
    fig, axes = plt.subplots(len(metrics), len(facets), figsize=(5.2 * len(facets) + 1.5, 3.0 * len(metrics) + 1.2),
                             squeeze=False, sharex=True, sharey="row")
    for i, m in enumerate(metrics):
        spec = SUMMARY_METRICS[m]
        for j, fv in enumerate(facets):
            ax = axes[i][j]
            for c, cv in enumerate(colours):
                pts = sorted((pos[key(r, x)], r) for r in summ if key(r, facet) == fv and key(r, color) == cv)
                clipped += _curve(ax, pts, m, 100.0 if spec.fraction else 1.0, c,
                                  f"{color} = {cv}" if color else None)
            if i == 0 and facet:
                ax.set_title(f"{facet} = {fv}", fontsize=10)
            if j == 0:
                ax.set_ylabel(("%\n" if spec.fraction else "\n") + _wrap(spec.text, 34), fontsize=8)
            if not numeric:
                ax.set_xticks(list(pos.values()))
                ax.set_xticklabels(xs_all)
            ax.grid(alpha=0.3)
            if i == len(metrics) - 1:
                ax.set_xlabel(param_label(x))
    if color or clipped:
        _curves_legend(axes)
    ns = sorted({int(r["n_seeds"]) for r in summ})
    fig.suptitle(_curves_caption(fig, summ, ns, title, clipped), fontsize=10)
    fig.tight_layout()
    drawn = _figure_facts(fig) | {"metrics": metrics}
    fig.savefig(out, dpi=100, metadata=_png_metadata(out, drawn))
    plt.close(fig)
    return {"points": len(summ), "metrics": metrics, "facets": facets, "colours": colours, "seeds": ns,
            **drawn}


def _curve(ax: Any, pts: list[tuple[float, dict[str, Any]]], m: str, scale: float, c: int,
           label: str | None) -> int:
    """One line of metric ``m`` (its points ``pts``, x and summary row) with its band; a
    bound clipped to the metric's range is marked there, as the tables mark it (cli/
    summarize.py's *). Returns how many were."""
    if not pts:
        return 0
    px = [p for p, _ in pts]
    est = [_nan(r[m]) * scale for _, r in pts]
    lo = [_nan(r[f"{m}_lo"]) * scale for _, r in pts]
    hi = [_nan(r[f"{m}_hi"]) * scale for _, r in pts]
    line, = ax.plot(px, est, marker="o", ms=4, color=plt.get_cmap("tab10")(c % 10), label=label)
    ax.fill_between(px, lo, hi, color=line.get_color(), alpha=0.18, lw=0)
    clipped = 0
    for p, r, lo_v, hi_v in zip(px, [r for _, r in pts], lo, hi, strict=True):
        for side in _clipped_notes(r, m):
            ax.plot([p], [lo_v if side.startswith("lo") else hi_v], ls="none",
                    marker=CLIPPED_MARKER, ms=9, color=line.get_color(), label=CLIPPED_LABEL)
            clipped += 1
    return clipped


def _curves_legend(axes: Any) -> None:
    """One legend, on the first row's last panel: each label once (every clipped marker
    carries the same one)."""
    by = dict(zip(*reversed(axes[0][-1].get_legend_handles_labels()), strict=True))
    for ax in axes.flat:
        h, lab = ax.get_legend_handles_labels()
        by.update({k: v for v, k in zip(h, lab, strict=True) if k not in by})
    axes[0][-1].legend(list(by.values()), list(by), fontsize=8, loc="best")


def _curves_caption(fig: Any, summ: list[dict[str, Any]], ns: list[int], title: str,
                    clipped: int) -> str:
    """The caption: the points, the seeds per point, the intervals' method; wrapped to the
    figure's width (a 10 pt character is about 0.08 in): never cut at its sides."""
    seeds = f"{ns[0]}" if len(ns) == 1 else f"{ns[0]} to {ns[-1]}"
    methods = "; ".join(dict.fromkeys(str(r.get("interval_method") or "") for r in summ)) or "?"
    mark = f"; {CLIPPED_MARKER_TEXT}: {CLIPPED_LABEL}" if clipped else ""
    caption = ((title or f"{len(summ)} grid points") + f"; {seeds} seeds (simulations) per point; "
               f"bands: intervals over seeds ({methods}){mark}")
    return _wrap(caption, int(fig.get_size_inches()[0] / 0.085))


CLIPPED_MARKER = "$*$"  # a band's bound moved to its metric's range, as the tables' *
CLIPPED_MARKER_TEXT = "*"
CLIPPED_LABEL = "band clipped to its metric's range"


def _clipped_notes(row: dict[str, Any], metric: str) -> list[str]:
    """The clipping notes of ``metric`` in a summary row (``lo 0.0123 clipped to 0``)."""
    return [c.split(" ", 1)[1] for c in str(row.get("clipped") or "").split("; ")
            if c.startswith(f"{metric} ")]


def param_unit(key: str) -> str:
    """The unit of a swept parameter, from its name (sim/config.py: durations are seconds,
    rates per hour, probabilities in [0, 1]; counts have none)."""
    k = key.rsplit(".", 1)[-1].lower()
    if "seconds" in k:
        return "s"
    if "per_hour" in k:
        return "per hour"
    if k.startswith(("p_", "prob")) or k.endswith(("_p", "_probability", "probability")):
        return "probability, 0 to 1"
    return "count" if k.startswith(("max_", "count", "limit", "size", "slots")) or k.endswith(
        ("count", "limit", "size", "slots", "requeues", "attempts")) else ""


def param_label(key: str) -> str:
    """An axis label of a swept parameter: its key and its unit (``constants.LEASE_SECONDS
    (s)``)."""
    unit = param_unit(key)
    return f"{key} ({unit})" if unit else key


def _figure_facts(fig: Any) -> dict[str, Any]:
    """What a figure shows, read back from its artists: the axis labels, the caption and the
    number of clipped-band markers (kept in the PNG's metadata, which tests read)."""
    axes = fig.get_axes()
    marks = sum(len(line.get_xdata()) for ax in axes for line in ax.get_lines()
                if line.get_label() == CLIPPED_LABEL)
    return {"xlabels": [ax.get_xlabel() for ax in axes if ax.get_xlabel()],
            "ylabels": [ax.get_ylabel() for ax in axes if ax.get_ylabel()],
            "caption": fig._suptitle.get_text() if fig._suptitle is not None else "",
            "clipped_marks": marks}


def _png_metadata(out: str, facts: dict[str, Any]) -> dict[str, str] | None:
    """The figure's facts as PNG text chunks (``Description``: JSON), for a PNG only."""
    if not out.lower().endswith(".png"):
        return None
    return {"Title": facts["caption"].replace("\n", " "), "Description": json.dumps(facts)}


def _nan(v: Any) -> float:
    return math.nan if v is None else float(v)


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width))


def lease_curves(csv_path: str, out: str, rows: list[dict[str, str]] | None = None,
                 header: list[str] | None = None) -> dict[str, Any]:
    """The preset of :func:`curves`: x = the lease (``constants.LEASE_SECONDS``), colour = the
    policy, the four panels of ``LEASE_CURVE_METRICS``; a parameter that varies besides is
    refused (``check_mapping``), never merged."""
    if rows is None or header is None:
        header, rows = read_sweep_csv(csv_path, LEASE_CURVE_COLUMNS, with_header=True)
    if f"param:{LEASE_PARAM}" not in header:
        others = ", ".join(p for p in sweep_parameters(header) if p != "policy") or "none but policy"
        raise UsageError(f"plot lease-curves: {csv_path} does not sweep {LEASE_PARAM} (its parameters: "
                         f"{others}); use failclosed plot curves {csv_path} --x PARAM")
    check_mapping(header, rows, LEASE_PARAM, "policy", None, csv_path, command="plot lease-curves")
    return curves(rows, header, out, LEASE_PARAM, "policy", None, LEASE_CURVE_METRICS,
                  title=f"Lease length vs safety and cost ({csv_path.split('/')[-1]})")
