"""Plots (matplotlib, Agg backend): a swimlane of one history, and lease curves of a sweep.

swimlane
    One lane per worker process, per interactive/resume segment process, the reaper, the
    bus, the run store, the audit store and the outside world. A lease is a bar on the lane
    of the process that holds it (from claim to release or loss), coloured per run; the
    dashed tail is the time from the last renewal's deadline being passed to the takeover.
    Provider calls and tool calls are thin bars (their simulated duration); audit insert
    failures, store errors, reaps, crashes and landed effects are markers.

lease-curves
    From a sweep CSV with a ``param:constants.LEASE_SECONDS`` column: P(double application
    of a non-idempotent write), P(dead-letter), throughput and wasted work against the lease
    length, one line per policy, with 95 % bands (Wilson intervals over the pooled counts
    for proportions, mean +- 1.96 standard errors over seeds otherwise).
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from failclosed.model.config import ConfigError, UsageError  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from .history import note  # noqa: E402


# -- records -----------------------------------------------------------------------------------
def _records_from_scenario(path: str) -> list[dict[str, Any]]:
    from failclosed.model.scenario import load_scenario, replay

    res = replay(load_scenario(path))
    out = []
    prev = res.scenario.world
    for s in res.steps:
        d = {"t": float(s.world.clock), **s.transition.to_dict()}
        n = note(prev, s.transition, s.world)
        if n:
            d["note"] = n
        out.append(d)
        prev = s.world
    return out


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
    if identity.startswith("worker:"):
        return identity.split(":", 1)[1]
    if identity.startswith("interactive:"):
        return "caller:" + identity.split(":", 1)[1]
    return identity  # resume:<run>#k is also its process name


STORE_NAMES = {
    "claim_queued", "max_sequence", "find_run", "renew_lease", "mark_pending_effect", "suspend",
    "suspend_for_input", "requeue", "claim_for_resume", "claim_for_resume_from_input",
    "settle_completed", "settle_failed", "settle_policy_stopped", "settle_dead_lettered",
    "start_run", "enqueue_run", "cancel", "find_stale_running", "requeue_stale", "dead_letter_stale",
}


def swimlane(path: str, out: str, runs: list[str] | None = None,
             window: tuple[float, float] | None = None, axis: str = "auto",
             records: list[dict[str, Any]] | None = None) -> None:
    """A lane per worker, segment, the reaper, the stores and the outside world.

    ``axis``: ``time`` (simulated seconds), ``step`` (transition order: a checker
    counterexample happens in a few seconds, and what matters is the interleaving) or
    ``auto`` (step when the clock moves less than one second per transition)."""
    recs = _selected(load_records(path) if records is None else records, path, runs, window)
    by_step = _by_step(recs, axis)
    if by_step:  # x = position in the trace; leases are drawn as held, without deadlines
        recs = [dict(r, t=float(k + 1)) for k, r in enumerate(recs)]
    t_end = max(r["t"] for r in recs)
    t_start = min(r["t"] for r in recs)
    lanes = _lanes(recs)
    y = {name: k for k, name in enumerate(reversed(lanes))}
    ids = sorted({r.get("run") for r in recs if r.get("run")}, key=lambda s: (len(s), s))
    cmap = plt.get_cmap("tab10")
    colour = {rid: cmap(k % 10) for k, rid in enumerate(ids)}

    fig_h = 1.2 + 0.45 * len(lanes)
    fig, ax = plt.subplots(figsize=(13, max(3.5, fig_h)))
    drawing = _Swimlane(ax, y, colour, by_step)
    for r in recs:
        drawing.add(r)
    for rid in list(drawing.lease):
        drawing.close_lease(rid, t_end)
    _draw_markers(ax, y, drawing.markers)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(list(reversed(lanes)))
    span = max(t_end - t_start, 1.0)
    ax.set_xlim(t_start - 0.02 * span, t_end + 0.02 * span)
    ax.set_xlabel("step of the trace (transition order)" if by_step else "simulated time (s)")
    ax.set_title(f"Swimlane: {path.split('/')[-1]}" + (f" (runs {', '.join(runs)})" if runs else ""))
    ax.grid(axis="x", alpha=0.3)
    _legend(ax, ids)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _selected(recs: list[dict[str, Any]], path: str, runs: list[str] | None,
              window: tuple[float, float] | None) -> list[dict[str, Any]]:
    """The transitions to draw: of ``runs`` (and the reaper's ticks), in ``window``, without
    the clock's moves; none is one UsageError line."""
    if runs:
        keep = set(runs)
        recs = [r for r in recs if r.get("run") in keep or r["name"] == "find_stale_running"]
    recs0 = recs
    if window:
        recs = [r for r in recs if window[0] <= r["t"] <= window[1]]
    recs = [r for r in recs if r["name"] != "advance_time"]
    if not recs:
        span = f"{min(r['t'] for r in recs0):.0f} to {max(r['t'] for r in recs0):.0f} s" if recs0 else "empty"
        raise UsageError(f"{path}: no transitions to draw in --window/--runs (the history spans {span}); widen --window")
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
    """The lanes, in a stable order: the outside world, the stores, the bus, the reaper, the
    segments, the workers."""
    workers = sorted({r["actor"] for r in recs if r["actor"][:1] == "w" and r["actor"][1:].isdigit()},
                     key=lambda a: int(a[1:]))
    segs = sorted({r["actor"] for r in recs if r["actor"].startswith(("caller:", "resume:"))})
    return ["outside world", "audit store", "run store", "bus", "reaper", *segs, *workers]


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
        if name in ("provider_call", "invoke") and lane is not None:
            self._call(r, lane)
        self.markers += _markers(r, lane)
        row = r.get("note", {}).get("row")
        if row is not None and rid is not None:
            self._row(rid, t, row, lane)
        self.last_t[actor] = t

    def _call(self, r: dict[str, Any], lane: str) -> None:
        """A provider or tool call: a thin bar since the process's previous transition."""
        t, name, fault = r["t"], r["name"], r.get("fault")
        t0 = self.last_t.get(r["actor"], t)
        self.ax.barh(self.y[lane] + (0.28 if name == "invoke" else -0.28), t - t0, left=t0, height=0.12,
                     color="tab:purple" if name == "invoke" else "tab:grey")
        if fault:
            self.markers.append((t, lane, "fault", f"{name}[{fault}]"))

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
            self.markers.append((t, lane, "settle", status))

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
    """The markers of one record but its call's fault and its run's settling: failures,
    reaps and ticks, bus events, crashes, landed effects."""
    t, name, rid, fault = r["t"], r["name"], r.get("run"), r.get("fault")
    out = []
    if fault and name in ("record_step", "record_approval", "record_input"):
        out.append((t, "audit store", "audit_fail", fault))
    elif fault == "store_error":
        out.append((t, "run store", "store_error", name))
    if name in ("requeue_stale", "dead_letter_stale") and not fault:
        out.append((t, "reaper", "reap", f"{name} {rid}"))
    if name == "find_stale_running":
        out.append((t, "reaper", "tick", ""))
    if name in ("dispatch", "duplicate_message"):
        out.append((t, "bus", "dup" if name == "duplicate_message" else ("dispatch_fail" if fault else "dispatch"), ""))
    if name == "crash" and lane is not None:
        out.append((t, lane, "crash", "crash"))
    for tool, effect, _seg in r.get("note", {}).get("landed", []):
        out.append((t, "outside world", "landed_ni" if effect == "non_idempotent_write" else "landed_i", tool))
    return out


_MARKER_STYLE = {
    "audit_fail": dict(marker="x", color="red", s=60, label="audit insert failed"),
    "store_error": dict(marker="x", color="darkorange", s=40, label="run store error"),
    "reap": dict(marker="v", color="black", s=60, label="reaped (requeue / dead-letter)"),
    "tick": dict(marker="|", color="grey", s=30, label="reaper tick"),
    "dispatch": dict(marker=">", color="tab:blue", s=20, label="message dispatched"),
    "dispatch_fail": dict(marker="x", color="tab:blue", s=40, label="dispatch failed"),
    "dup": dict(marker="d", color="tab:cyan", s=30, label="duplicate delivery"),
    "crash": dict(marker="X", color="black", s=90, label="process crash"),
    "fault": dict(marker="*", color="red", s=60, label="provider / tool error"),
    "landed_ni": dict(marker="P", color="crimson", s=70, label="non-idempotent effect landed"),
    "landed_i": dict(marker="P", color="seagreen", s=50, label="idempotent effect landed"),
    "settle": dict(marker="s", color="black", s=25, label="run settled (terminal)"),
}


def _draw_markers(ax: Any, y: dict[str, int], markers: list[tuple[float, str, str, str]]) -> None:
    used = set()
    for t, lane, key, _label in markers:
        if lane not in y:
            continue
        st = dict(_MARKER_STYLE[key])
        lab = st.pop("label")
        ax.scatter([t], [y[lane]], zorder=3, label=None if key in used else lab, **st)
        used.add(key)


def _legend(ax: Any, ids: list[str]) -> None:
    handles, labels = ax.get_legend_handles_labels()
    handles += [Patch(facecolor="grey", alpha=0.35, label="lease held (colour = run)"),
                Patch(fill=False, hatch="//", label="held after the lease expired"),
                Line2D([0], [0], color="tab:grey", lw=3, label="provider call"),
                Line2D([0], [0], color="tab:purple", lw=3, label="tool call")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    if ids and len(ids) <= 10:
        ax.text(1.01, 0.0, "runs: " + ", ".join(ids), transform=ax.transAxes, fontsize=8, va="bottom")


# -- lease curves --------------------------------------------------------------------------------
def _wilson(k: int, n: int) -> tuple[float, float, float]:
    if n == 0:
        return (math.nan, math.nan, math.nan)
    z = 1.959963984540054
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return p, max(0.0, c - h), min(1.0, c + h)


def _mean_ci(xs: list[float]) -> tuple[float, float, float]:
    if not xs:
        return (math.nan, math.nan, math.nan)
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, m, m
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    h = 1.96 * sd / math.sqrt(len(xs))
    return m, m - h, m + h


LEASE_CURVE_COLUMNS = ("policy", "seed", "runs", "lease_seconds", "finished", "dead_letters",
                       "nonidem_calls", "nonidem_double", "throughput_per_hour", "wasted_s")


def read_sweep_csv(csv_path: str) -> list[dict[str, str]]:
    """The rows of a sweep CSV, checked: a text CSV with the columns lease-curves reads and
    numbers where numbers belong (else one ``ConfigError`` line)."""
    fix = "give a CSV written by failclosed sweep CONFIG --param constants.LEASE_SECONDS=... --out FILE.csv"
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
    missing = [c for c in LEASE_CURVE_COLUMNS if c not in header]
    if missing:
        raise ConfigError(f"CSV {csv_path}: no column {', '.join(missing[:4])}; {fix}")
    if not rows:
        raise ConfigError(f"CSV {csv_path}: a header but no rows; run the sweep first ({fix})")
    for k, r in enumerate(rows, 2):
        for c in LEASE_CURVE_COLUMNS[2:]:
            try:
                float(r[c])
            except (TypeError, ValueError):
                raise ConfigError(f"CSV {csv_path}: line {k}, column {c}: {r[c]!r} is not a number; {fix}") from None
    return rows


def lease_curves(csv_path: str, out: str, rows: list[dict[str, str]] | None = None) -> None:
    if rows is None:
        rows = read_sweep_csv(csv_path)
    xkey = "lease_seconds"
    groups: dict[str, dict[float, list[dict[str, str]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        groups[r["policy"]][float(r[xkey])].append(r)
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharex=True)
    panels = [
        (axes[0][0], "P(double application)\nper non-idempotent write call", "prop", ("nonidem_double", "nonidem_calls")),
        (axes[0][1], "P(dead-letter) per finished run", "prop", ("dead_letters", "finished")),
        (axes[1][0], "throughput (finished runs per hour)", "mean", "throughput_per_hour"),
        (axes[1][1], "wasted work: provider + tool time\nof LEASE_LOST segments (s per run)", "wasted", None),
    ]
    for ax, title, kind, key in panels:
        for pol, byx in sorted(groups.items()):
            xs = sorted(byx)
            est, lo, hi = [], [], []
            for x in xs:
                rs = byx[x]
                if kind == "prop":
                    k = sum(int(float(r[key[0]])) for r in rs)
                    n = sum(int(float(r[key[1]])) for r in rs)
                    e = _wilson(k, n)
                elif kind == "mean":
                    e = _mean_ci([float(r[key]) for r in rs])
                else:
                    e = _mean_ci([float(r["wasted_s"]) / max(1.0, float(r["runs"])) for r in rs])
                est.append(e[0])
                lo.append(max(0.0, e[1]))
                hi.append(e[2])
            line, = ax.plot(xs, est, marker="o", label=pol)
            ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.18)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("LEASE_SECONDS (s)")
    axes[0][0].set_ylabel("probability")
    axes[0][1].set_ylabel("probability")
    axes[1][0].set_ylabel("runs / hour")
    axes[1][1].set_ylabel("seconds per run")
    seeds = len({r["seed"] for r in rows})
    axes[0][0].legend(title="policy", fontsize=8)
    fig.suptitle(f"Lease length vs safety and cost ({csv_path.split('/')[-1]}, {seeds} seeds per point, 95% bands)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
