"""Replication statistics (sim/stats.py): each interval against values computed independently,
coverage on synthetic data with a known between-seed variance, no interval narrower than the t
interval over seeds; and the commands that print them (sweep's summary, summarize, plot curves,
swimlanes that mark the violation)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from failclosed.cli import main
from failclosed.sim import stats
from scipy import stats as st

ROOT = Path(__file__).resolve().parents[1]


# -- each interval against independent values ---------------------------------------------------
def test_t_interval_matches_the_published_t_quantile():
    iv = stats.t_interval([1, 2, 3, 4, 5])
    # t(0.975, 4 df) = 2.776 (any t table); sd = 1.5811, se = 0.7071
    assert iv.estimate == 3
    assert iv.half_width == pytest.approx(2.7764 * math.sqrt(2.5) / math.sqrt(5), rel=1e-4)
    assert iv.n == 5 and "Student t over seeds" in iv.method


def test_t_interval_needs_two_replications():
    iv = stats.t_interval([7.0])
    assert iv.estimate == 7.0 and iv.lo is None and iv.hi is None and "no interval" in iv.method


def test_wilson_matches_the_textbook_values():
    # Wilson score interval of 5 in 100 (Newcombe 1998, table I: 0.0215 to 0.1118)
    iv = stats.wilson(5, 100)
    assert (round(iv.lo, 4), round(iv.hi, 4)) == (0.0215, 0.1118)
    assert "independent" in iv.method
    # 0 of 100: the upper bound z^2 / (n + z^2) = 0.0370
    assert stats.wilson(0, 100).hi == pytest.approx(1.959964 ** 2 / (100 + 1.959964 ** 2), rel=1e-5)


def test_proportion_interval_is_the_t_interval_over_seeds_widened_to_wilson():
    k, n = [3, 9, 1, 6], [100, 100, 100, 100]
    iv = stats.proportion_interval(k, n)
    p = np.array(k) / np.array(n)
    lo, hi = st.t.interval(0.95, df=3, loc=p.mean(), scale=p.std(ddof=1) / 2)
    assert iv.estimate == pytest.approx(p.mean())
    assert iv.lo == pytest.approx(max(0.0, lo)) and iv.hi == pytest.approx(hi)  # the t one is wider here
    # no event in any seed: t gives [0, 0]; the pooled Wilson interval keeps an upper bound
    zero = stats.proportion_interval([0, 0, 0], [200, 200, 200])
    assert zero.lo == 0 and zero.hi == pytest.approx(stats.wilson(0, 600).hi)


def test_ratio_interval_is_a_bootstrap_over_seeds_never_narrower_than_t():
    num, den = [10.0, 30.0, 12.0, 50.0, 22.0], [100.0, 110.0, 90.0, 120.0, 100.0]
    iv = stats.ratio_interval(num, den)
    assert iv.estimate == pytest.approx(sum(num) / sum(den))
    t = stats.t_interval(list(np.array(num) / np.array(den)), centre=iv.estimate)
    assert iv.lo <= t.lo and iv.hi >= t.hi
    assert "bootstrap over seeds" in iv.method
    assert stats.ratio_interval(num, den) == iv  # a fixed generator: reproducible


@pytest.mark.parametrize("seed", range(20))
def test_no_interval_is_narrower_than_the_t_interval_over_seeds(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 8))
    n = rng.integers(20, 400, size=m)
    k = rng.binomial(n, rng.uniform(0, 0.2))
    for iv in (stats.proportion_interval(k, n), stats.ratio_interval(k, n)):
        t = stats.t_interval(list(k / n), centre=iv.estimate)  # the t interval around the same estimate
        assert iv.lo <= max(0.0, t.lo) + 1e-12 and iv.hi >= min(1.0, t.hi) - 1e-12


def test_sections_cut_runs_in_order_into_near_equal_parts():
    secs = stats.sections(list(range(103)))
    assert len(secs) == stats.SECTIONS and sum(secs, []) == list(range(103))
    assert {len(s) for s in secs} <= {10, 11}
    assert len(stats.sections([1, 2, 3])) == 1 and len(stats.sections([1, 2, 3, 4])) == 2


# -- coverage: synthetic data with a known between-seed variance --------------------------------
def clustered_coverage(reps: int, seeds: int = 5, runs: int = 200, rng_seed: int = 1) -> dict[str, float]:
    """Each replication (a seed) has its own rate p_s ~ Beta(mean 0.1, sd 0.04) shared by its
    runs; the target is E[p_s] = 0.1. Coverage of the interval over seeds, and of the pooled
    Wilson interval that treats the runs as independent."""
    rng = np.random.default_rng(rng_seed)
    mean, sd = 0.1, 0.04
    c = mean * (1 - mean) / sd ** 2 - 1
    hit_t = hit_w = 0
    for _ in range(reps):
        p = rng.beta(mean * c, (1 - mean) * c, size=seeds)
        k = rng.binomial(runs, p)
        iv = stats.proportion_interval(k, [runs] * seeds)
        w = stats.wilson(int(k.sum()), runs * seeds)
        hit_t += iv.lo <= mean <= iv.hi
        hit_w += w.lo <= mean <= w.hi
    return {"over_seeds": hit_t / reps, "pooled_wilson": hit_w / reps}


def test_coverage_over_seeds_is_close_to_95_percent_and_pooling_is_not():
    cov = clustered_coverage(400)
    assert 0.92 <= cov["over_seeds"] <= 0.99
    assert cov["pooled_wilson"] < 0.85  # the runs of one seed are not independent


@pytest.mark.slow
def test_coverage_over_many_repetitions():
    cov = clustered_coverage(4000, rng_seed=7)
    assert 0.935 <= cov["over_seeds"] <= 0.975


# -- the commands -------------------------------------------------------------------------------
SMALL = (ROOT / "tests" / "data" / "outlives.toml").read_text()


@pytest.fixture
def cfg(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(SMALL)
    return str(p)


def _sweep(cfg, out, *extra):
    return main(["sweep", cfg, "--param", "constants.LEASE_SECONDS=300,900", "--param",
                 "reaper.period_seconds=30,300", "--out", str(out), "--quiet", *extra])


def test_sweep_writes_and_prints_a_summary_that_summarize_reproduces(tmp_path, cfg, capsys):
    out = tmp_path / "s.csv"
    _sweep(cfg, out, "--seeds", "3")
    text = capsys.readouterr().out
    summ = list(csv.DictReader((tmp_path / "s.summary.csv").open()))
    assert len(summ) == 4 and {r["n_seeds"] for r in summ} == {"3"}
    for r in summ:
        for m in ("p_dead_letter", "throughput_per_hour", "e2e_p99_s", "wasted_fraction"):
            if r[m]:
                assert float(r[f"{m}_lo"]) <= float(r[m]) <= float(r[f"{m}_hi"])
        assert "Student t over seeds" in r["interval_method"]
    assert "n seeds" not in text and "grid point" in text and "Student t over seeds" in text
    assert max(len(x) for x in text.splitlines()) <= 100 or "violated" in text
    tables = [x for x in text.splitlines() if "LEASE_SECONDS=" in x]
    assert tables and max(len(x) for x in tables) <= 100
    # summarize of the same CSV gives the same summary
    assert main(["summarize", str(out), "--summary", str(tmp_path / "again.csv")]) == 0
    assert (tmp_path / "again.csv").read_text() == (tmp_path / "s.summary.csv").read_text()


def test_sweep_precision_adds_seeds_until_each_arm_is_within_h_or_the_cap(tmp_path, cfg, capsys):
    out = tmp_path / "p.csv"
    _sweep(cfg, out, "--seeds", "5", "--precision", "p_reaped_alive=0.05", "--min-seeds", "2")
    text = capsys.readouterr().out
    summ = list(csv.DictReader((tmp_path / "p.summary.csv").open()))
    assert "precision p_reaped_alive +-0.05" in text and "reached at" in text
    for r in summ:
        est, lo, hi = (float(r[k]) for k in ("p_reaped_alive", "p_reaped_alive_lo", "p_reaped_alive_hi"))
        arm = max(est - lo, hi - est)  # judged per arm: an interval clipped at 0 is not symmetric
        n = int(r["n_seeds"])
        assert 2 <= n <= 5
        assert (r["precision_reached"] == "yes") == (arm <= 0.05)
        assert float(r["precision_widest_arm"]) == pytest.approx(arm)
        assert r["precision_reached"] == "yes" or n == 5  # stopped early only when within H
        label = " ".join(f"{k.split(':', 1)[1].rsplit('.', 1)[-1]}={r[k]}" for k in r if k.startswith("param:"))
        assert f"  {label}: {n} seeds," in text  # reported per point: the seeds it used, reached or not
    # the closing count is of seeds per point, never the range of the seed numbers (1 to 5)
    ns = sorted(int(r["n_seeds"]) for r in summ)
    per = f"x {ns[0]} seeds)" if ns[0] == ns[-1] else f"x {ns[0]} to {ns[-1]} seeds per point)"
    assert per in text.splitlines()[0]
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == sum(int(r["n_seeds"]) for r in summ)


def test_precision_judges_each_arm_of_an_asymmetric_interval():
    # near 0 a proportion's interval is clipped and widened: its half-width hides the long arm
    iv = stats.Interval(0.01, 0.0, 0.05, 3, "m")
    assert iv.half_width == pytest.approx(0.025) and iv.widest_arm == pytest.approx(0.04)


@pytest.mark.parametrize("bad, needle", [("p_nope=0.1", "not a metric"), ("p_dead_letter=0", "H > 0"),
                                         ("p_dead_letter", "METRIC=H")])
def test_sweep_precision_bad_input_is_one_line(tmp_path, cfg, capsys, bad, needle):
    code = _sweep(cfg, tmp_path / "x.csv", "--precision", bad)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and needle in err[0]
    assert not (tmp_path / "x.csv").exists()


def test_plot_curves_maps_every_varying_parameter_or_refuses(tmp_path, cfg, capsys):
    out = tmp_path / "s.csv"
    _sweep(cfg, out, "--seeds", "2")
    capsys.readouterr()
    png = tmp_path / "c.png"
    code = main(["plot", "curves", str(out), "--x", "constants.LEASE_SECONDS", "--out", str(png)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "reaper.period_seconds varies" in err[0] and "never merged" in err[0]
    assert not png.exists()
    assert main(["plot", "lease-curves", str(out), "--out", str(png)]) == 2
    assert "reaper.period_seconds" in capsys.readouterr().err and not png.exists()
    assert main(["plot", "curves", str(out), "--x", "constants.LEASE_SECONDS", "--color",
                 "reaper.period_seconds", "--metric", "p_reaped_alive", "--out", str(png)]) == 0
    assert png.stat().st_size > 10_000
    assert main(["plot", "curves", str(out), "--x", "constants.LEASE_SECONDS", "--facet",
                 "reaper.period_seconds", "--out", str(tmp_path / "f.png")]) == 0
    assert main(["plot", "curves", str(out), "--x", "nope", "--out", str(png)]) == 2
    assert "not a parameter" in capsys.readouterr().err


def test_lease_curves_of_a_sweep_without_the_lease_is_refused(tmp_path, cfg, capsys):
    out = tmp_path / "r.csv"
    main(["sweep", cfg, "--param", "reaper.period_seconds=30,300", "--seeds", "1", "--out", str(out), "--quiet"])
    capsys.readouterr()
    assert main(["plot", "lease-curves", str(out), "--out", str(tmp_path / "l.png")]) == 2
    err = capsys.readouterr().err
    assert "does not sweep constants.LEASE_SECONDS" in err and "plot curves" in err


def test_swimlane_of_the_f4_scenario_marks_the_violation_and_the_audit_events(tmp_path):
    from failclosed.sim import plots

    path = str(ROOT / "spec" / "findings" / "no_zombie_append--current--cancel-probe.toml")
    drawn = plots.swimlane(path, str(tmp_path / "f4.png"))
    assert drawn["violations"] >= 1
    recs = plots.load_records(path)
    violated = [r for r in recs if r.get("violated")]
    assert violated[0]["violated"] == ["no_zombie_append"] and violated[0]["name"] in plots.AUDIT_INSERTS
    keys = {m[2] for r in recs for m in plots._markers(r, r["actor"])}
    assert "audit_ok" in keys


def test_swimlane_of_a_history_zooms_to_a_violating_run_and_caps_lanes(tmp_path, violating_history):
    from failclosed.sim import plots

    hist, _js, viol = violating_history
    assert viol
    drawn = plots.swimlane(str(hist), str(tmp_path / "v.png"), violations=viol, max_lanes=8, axis="time",
                           first_violating=True)
    run = viol[0]["runs"][0]
    assert drawn["violations"] >= 1 and drawn["lanes"] <= 8
    own = [r["t"] for r in plots.load_records(str(hist)) if r.get("run") == run and r["name"] != "advance_time"]
    assert drawn["span"] == (min(own), max(own))  # the axis spans the run, not the reaper's ticks
    assert any(run in n and "--first-violating-run" in n for n in drawn["notes"])  # narrowed, and says so


def test_simulate_splits_unaudited_applications_by_run_outcome_and_names_its_intervals(tmp_path, cfg, capsys):
    import json

    js = tmp_path / "r.json"
    main(["simulate", cfg, "--policy", "adr-111", "--runs", "30", "--json", str(js), "--quiet"])
    out = capsys.readouterr().out
    m = json.loads(js.read_text())["metrics"]
    split = m["unaudited_by_outcome"]
    assert set(split) >= {"completed", "failed", "dead_lettered"}
    assert sum(split.values()) == m["unaudited_applications"]["k"]
    assert "batch means" in m["dead_letter"]["method"] and "batch means" in m["end_to_end_s"]["method"]
    for label in ("in runs completed", "in runs failed", "in runs dead-lettered", "batch means over 10 sections"):
        assert label in out


# -- fractions printed as fractions, intervals clipped to the metric's range ----------------------
def _wasted_csv(path: Path, pairs: list[tuple[float, float]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["param:constants.LEASE_SECONDS", "seed", "policy", "runs", "wasted_s", "busy_s"])
        for k, (a, b) in enumerate(pairs, 1):
            w.writerow([300, k, "current", 100, a, b])


def test_summarize_prints_a_share_as_a_percentage_not_an_integer(tmp_path, capsys):
    src = tmp_path / "w.csv"
    _wasted_csv(src, [(30.0, 100.0), (40.0, 100.0), (45.0, 100.0), (36.0, 100.0)])
    assert main(["summarize", str(src), "--metric", "wasted_fraction"]) == 0
    out = capsys.readouterr().out
    row = next(csv.DictReader((tmp_path / "w.summary.csv").open()))
    est, lo, hi = (float(row[k]) for k in ("wasted_fraction", "wasted_fraction_lo", "wasted_fraction_hi"))
    assert 0 < lo < est < hi < 1 and row["clipped"] == ""
    assert f"{100 * est:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]" in out


def test_an_interval_past_the_metrics_range_is_clipped_and_says_so(tmp_path, capsys):
    from failclosed.sim.metrics import SUMMARY_METRICS

    # three seeds far apart: the t interval over seeds reaches past 1 and below 0
    rows = [{"wasted_s": a, "busy_s": 100.0} for a in (2.0, 95.0, 99.0)]
    raw = stats.ratio_interval([2.0, 95.0, 99.0], [100.0] * 3)
    assert raw.hi > 1 and raw.lo < 0
    iv = stats.metric_interval(rows, SUMMARY_METRICS["wasted_fraction"])
    assert (iv.lo, iv.hi) == (0.0, 1.0) and iv.estimate == raw.estimate
    assert f"hi {raw.hi:.4g} clipped to 1" in iv.clipped and f"lo {raw.lo:.4g} clipped to 0" in iv.clipped
    src = tmp_path / "wide.csv"
    _wasted_csv(src, [(2.0, 100.0), (95.0, 100.0), (99.0, 100.0)])
    assert main(["summarize", str(src), "--metric", "wasted_fraction"]) == 0
    out = capsys.readouterr().out
    row = next(csv.DictReader((tmp_path / "wide.summary.csv").open()))
    assert float(row["wasted_fraction_hi"]) == 1.0 and "wasted_fraction hi" in row["clipped"]
    assert "[0.0, 100.0]*" in out and "clipped" in out
    # a mean is never negative either (a throughput, a time)
    t = stats.metric_interval([{"e2e_p99_s": v} for v in (1.0, 900.0)], SUMMARY_METRICS["e2e_p99_s"])
    assert t.lo == 0.0 and "lo" in t.clipped and t.hi > 900


# -- pictures: never narrowed silently, every label inside the figure, a marker per kind ----------
@pytest.fixture(scope="module")
def violating_history(tmp_path_factory):
    """One simulation's history and report, read (never written) by the tests that draw it."""
    import json

    d = tmp_path_factory.mktemp("violating")
    cfg = d / "c.toml"
    cfg.write_text(SMALL)
    hist, js = d / "h.jsonl", d / "h.json"
    main(["simulate", str(cfg), "--policy", "adr-111", "--runs", "30", "--history", str(hist), "--json",
          str(js), "--quiet"])
    viol = json.loads(js.read_text())["violations"]
    assert len({r for v in viol for r in v["runs"]}) > 1
    return hist, js, viol


def test_a_window_with_violations_is_drawn_as_asked_never_narrowed_to_one_run(tmp_path, violating_history,
                                                                              capsys):
    from failclosed.sim import plots

    hist, js, viol = violating_history
    recs = plots.load_records(str(hist))
    first = viol[0]["runs"][0]
    last_own = max(r["t"] for r in recs if r.get("run") == first and r["name"] != "advance_time")
    end = max(r["t"] for r in recs)
    assert end > last_own + 10  # a window after the first violating run's last transition
    window = f"{last_own + 1:.0f}:{end:.0f}"
    png = tmp_path / "w.png"
    assert main(["plot", "swimlane", str(hist), "--window", window, "--violations", str(js),
                 "--out", str(png)]) == 0
    out = capsys.readouterr().out
    assert png.exists() and "all drawn" in out and "drawing run" not in out
    # narrowed only when asked, and then it says so
    assert main(["plot", "swimlane", str(hist), "--violations", str(js), "--first-violating-run",
                 "--out", str(tmp_path / "f.png")]) == 0
    assert f"drawing run {first} alone" in capsys.readouterr().out
    # a window outside what --runs draws names the runs' span, not the history's
    assert main(["plot", "swimlane", str(hist), "--runs", first, "--window", window, "--out", str(png)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"the transitions of --runs {first} span" in err[0]


def _figures_drawn(monkeypatch):
    from failclosed.sim import plots

    figs = []
    close = plots.plt.close

    def keep(fig=None):
        figs.append(fig)
        close(fig)

    monkeypatch.setattr(plots.plt, "close", keep)
    return figs


def _texts_outside(fig) -> list[str]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # a closed figure's canvas: Agg again, as it was saved
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    box = fig.bbox
    out = []
    texts = list(fig.texts) + [t for ax in fig.axes for t in (*ax.texts, ax.title, ax.yaxis.label, ax.xaxis.label)]
    for ax in fig.axes:  # the tick labels drawn: those within the axes' limits
        (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        texts += [t for t in ax.get_xticklabels() if x0 <= t.get_position()[0] <= x1]
        texts += [t for t in ax.get_yticklabels() if y0 <= t.get_position()[1] <= y1]
    if getattr(fig, "_suptitle", None) is not None:
        texts.append(fig._suptitle)
    for t in texts:
        if not t.get_text() or not t.get_visible():
            continue
        e = t.get_window_extent(r)
        if e.x0 < box.x0 - 1 or e.x1 > box.x1 + 1 or e.y0 < box.y0 - 1 or e.y1 > box.y1 + 1:
            out.append(t.get_text())
    return out


@pytest.mark.parametrize("axis", ["time", "step"])
def test_every_swimlane_label_is_inside_the_figure(tmp_path, violating_history, monkeypatch, axis):
    from failclosed.sim import plots

    hist, _js, viol = violating_history
    figs = _figures_drawn(monkeypatch)
    drawn = plots.swimlane(str(hist), str(tmp_path / "s.png"), violations=viol, axis=axis)
    assert drawn["violations"] >= len(viol) and figs
    fig = figs[-1]
    labels = [t for ax in fig.axes for t in ax.texts if "violated" in t.get_text()]
    assert labels and not _texts_outside(fig)
    ax = fig.axes[0]
    r = fig.canvas.get_renderer()
    inside = ax.get_window_extent(r)
    for t in labels:  # within the plot area, not only the figure
        e = t.get_window_extent(r)
        assert inside.x0 - 1 <= e.x0 and e.x1 <= inside.x1 + 1 and e.y1 <= inside.y1 + 1, t.get_text()


def test_the_lease_curves_title_is_inside_the_figure(tmp_path, cfg, monkeypatch):
    from failclosed.sim import plots

    out = tmp_path / "lc.csv"
    main(["sweep", cfg, "--param", "constants.LEASE_SECONDS=300,900", "--param", "policy=current,adr-111",
          "--seeds", "2", "--out", str(out), "--quiet"])
    figs = _figures_drawn(monkeypatch)
    plots.lease_curves(str(out), str(tmp_path / "lc.png"))
    assert figs and not _texts_outside(figs[-1])


def test_each_swimlane_marker_kind_has_its_own_look_and_none_is_the_violation_star():
    from failclosed.sim import plots

    looks = {(st["marker"], st["color"]) for st in plots._MARKER_STYLE.values()}
    assert len(looks) == len(plots._MARKER_STYLE)
    assert all(st["marker"] != "*" for st in plots._MARKER_STYLE.values())  # "*": a violation
    labels = [st["label"] for st in plots._MARKER_STYLE.values()]
    assert len(set(labels)) == len(labels)  # one legend entry each
    assert {"provider_error", "tool_error"} <= set(plots._MARKER_STYLE)


def test_plot_curves_labels_its_axis_with_a_unit_names_its_method_and_marks_clipped_bands(
        tmp_path, capsys):
    """Issue 38 item 13: the x axis was the parameter's key without a unit, the caption did
    not name the interval's method (docs/SIMULATOR.md says captions name it), and a clipped
    band was not marked as the tables mark it (*). Read back from the saved PNG's metadata
    (the figure's own artists: axis labels, caption, clipped-band markers)."""
    import json

    from PIL import Image

    out = tmp_path / "lc.csv"
    # three seeds of 40 runs: Student t on two degrees of freedom, so bands leave their range
    main(["sweep", "default", "--param", "constants.LEASE_SECONDS=60,900", "--param",
          "runs.count=40", "--seeds", "3", "--out", str(out), "--quiet"])
    png = tmp_path / "c.png"
    assert main(["plot", "curves", str(out), "--x", "constants.LEASE_SECONDS", "--out",
                 str(png)]) == 0
    capsys.readouterr()
    facts = json.loads(Image.open(png).text["Description"])
    assert facts["xlabels"] and set(facts["xlabels"]) == {"constants.LEASE_SECONDS (s)"}
    summary = list(csv.DictReader(open(tmp_path / "lc.summary.csv")))
    methods = {r["interval_method"] for r in summary}
    caption = " ".join(facts["caption"].split())
    assert all(m in caption for m in methods), (caption, methods)
    n_clipped = sum(1 for r in summary for c in (r["clipped"] or "").split("; ")
                    if c and c.split(" ", 1)[0] in facts["metrics"])
    assert n_clipped and facts["clipped_marks"] == n_clipped
    assert "*: band clipped to its metric's range" in caption
