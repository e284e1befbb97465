"""The tiered seen set (spec/seen.py): a search forced to move its older layers out of memory,
to disk, gives exactly the Exploration of the one-dict search (states, ids, depths, parents,
switches, edges, violations, traces), on shipped configurations and policies, mutant presets
that violate safety and liveness included, and on random small configurations (Hypothesis);
its temporary directory is gone after the search, after an exception and after SIGTERM of a
`failclosed check` process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from failclosed.spec import checker, engine, seen  # noqa: E402
from failclosed.spec.checker import ConfigPart, check, load_config  # noqa: E402
from failclosed.spec.mutants import MUTANT_CONFIG_DIR, MUTANT_SWITCHES  # noqa: E402
from test_symmetry_soundness import configs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TINY = 1e-6  # MiB: over budget at every layer boundary, so every older layer goes to disk


def _claim() -> tuple[str, str]:
    sw = next(s for s, (_, cfg) in MUTANT_SWITCHES.items() if cfg == "claim.toml")
    return f"current+{sw}", str(MUTANT_CONFIG_DIR / "claim.toml")


def _zombie() -> tuple[str, str]:
    sw = next(s for s, (_, cfg) in MUTANT_SWITCHES.items() if cfg == "zombie.toml")
    return f"current+{sw}", str(MUTANT_CONFIG_DIR / "zombie.toml")


def _finding(f: engine.Finding | None) -> object:
    if f is None:
        return None
    return (f.name, f.state, f.depth, f.switches, f.initial, [(t, w) for t, w in f.trace])


def snapshot(ex: engine.Exploration) -> dict:
    """Everything an Exploration says, in comparable form."""
    edges = (None if ex.edges_src is None else
             (bytes(ex.edges_src), bytes(ex.edges_dst), bytes(ex.edges_tr)))
    return {
        "index": dict(ex.index.items()),
        "fingerprints": bytes(ex.fingerprints), "parent": bytes(ex.parent),
        "depth": bytes(ex.depth), "switches": bytes(ex.switches), "in_tr": bytes(ex.in_tr),
        "actor_mask": list(ex.actor_mask), "alt_parents": dict(ex.alt_parents),
        "transitions": list(ex.transitions), "tr_actor": bytes(ex.tr_actor),
        "enabled": list(ex.enabled_count), "taken": list(ex.taken_count), "edges": edges,
        "expanded": ex.expanded, "deadlocks": bytes(ex.deadlocks),
        "labels": {k: bytes(v) for k, v in ex.labels.items()},
        "deadlock_labels": {k: bytes(v) for k, v in ex.deadlock_labels.items()},
        "violations": {k: _finding(f) for k, f in ex.violations.items()},
        "witnesses": {k: _finding(f) for k, f in ex.witnesses.items()},
        "worlds": [w for w in ex.worlds if w is not None],
        "truncated": ex.truncated, "stopped": ex.stats.stopped_early,
    }


def _checked(monkeypatch: pytest.MonkeyPatch, policy: str, config: str | ConfigPart,
             budget: float | None, **kw: object) -> tuple[list[engine.Exploration], object]:
    """The explorations a check makes (and its result), under ``budget``."""
    made: list[engine.Exploration] = []
    real = engine.explore

    def spy(*a: object, **k: object) -> engine.Exploration:
        ex = real(*a, **k)  # type: ignore[arg-type]
        made.append(ex)
        return ex

    monkeypatch.setattr(checker.engine, "explore", spy)
    res = check(policy, config, None, memory_budget_mib=budget, **kw)  # type: ignore[arg-type]
    monkeypatch.setattr(checker.engine, "explore", real)
    return made, res


def _assert_same(monkeypatch: pytest.MonkeyPatch, policy: str, config: str | ConfigPart,
                 **kw: object) -> list[engine.Exploration]:
    mem, res_mem = _checked(monkeypatch, policy, config, None, **kw)
    disk, res_disk = _checked(monkeypatch, policy, config, TINY, **kw)
    assert len(mem) == len(disk)
    for a, b in zip(mem, disk, strict=True):
        assert not a.stats.seen
        assert snapshot(a) == snapshot(b)
        for fp, j in list(a.index.items())[:: max(1, len(a.index) // 200)]:
            assert b.index.get(fp) == j
    assert res_mem.to_json()["properties"] == res_disk.to_json()["properties"]  # type: ignore[attr-defined]
    return disk


@pytest.mark.parametrize("which", ["claim", "zombie"])
def test_spilled_search_is_the_in_memory_one_on_mutants(monkeypatch: pytest.MonkeyPatch,
                                                       which: str) -> None:
    """Mutant presets that violate safety (claim) and liveness (zombie: keep_graph): the same
    violations and traces, and the spilled search did go to disk."""
    policy, config = _claim() if which == "claim" else _zombie()
    disk = _assert_same(monkeypatch, policy, config)
    assert any(ex.violations for ex in disk)
    assert any(ex.edges_src is not None for ex in disk)
    # the part's own search (a growth probe of a varied policy runs without the budget)
    biggest = max(disk, key=lambda ex: ex.stats.states).stats.seen
    assert "on disk" in biggest


@pytest.mark.parametrize(("policy", "part"), [("current", "small-retry"),
                                              ("proposed", "small-zombie"),
                                              ("adr-111", "small-input")])
def test_spilled_search_is_the_in_memory_one_on_shipped_parts(
        monkeypatch: pytest.MonkeyPatch, policy: str, part: str) -> None:
    cfg = next(p for p in load_config("small")[1] if p.name == part)
    _assert_same(monkeypatch, policy, cfg, witnesses=True)


def test_a_cut_search_spills_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """``max_states`` cutting a layer in the middle of a prefetched chunk: the same cut."""
    policy, config = _zombie()
    _assert_same(monkeypatch, policy, config, max_states=5001)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(configs())
def test_spilled_search_is_the_in_memory_one_on_random_configs(case: tuple[dict, str]) -> None:
    data, policy = case
    with pytest.MonkeyPatch.context() as mp:
        _assert_same(mp, policy, ConfigPart("random", "", data), max_states=4000)


# -- the seen set itself ------------------------------------------------------------------------


def _filled(n: int, seed: int) -> tuple[seen.SeenSet, np.ndarray]:
    rng = np.random.default_rng(seed)
    fps = np.unique(rng.integers(-(2**63), 2**63 - 1, size=n, dtype=np.int64))
    rng.shuffle(fps)
    s = seen.SeenSet(budget_mib=None)
    s.hot = {int(f): j for j, f in enumerate(fps)}
    return s, fps


@pytest.mark.parametrize("to_disk", [False, True])
def test_runs_answer_as_the_dict(monkeypatch: pytest.MonkeyPatch, to_disk: bool) -> None:
    """Layers demoted one by one into runs (in memory, or spilled and merged on disk with a
    small streaming chunk): every fingerprint still maps to its id, absent ones to None, and
    the merge policy keeps the runs few."""
    monkeypatch.setattr(seen, "CHUNK", 7)
    s, fps = _filled(5000, 1)
    arr = fps.tobytes()
    bounds = [1, 3, 10, 40, 100, 400, 700, 1500, 2600, 4000]
    for lo in bounds:
        s._demote(lo, arr)
        if to_disk:
            s._spill()
        assert s.hot_lo == lo and min(s.hot.values()) == lo
    assert len(s.runs) <= 2 + int(np.log2(len(fps)))
    assert all(r.disk == to_disk for r in s.runs)
    for r in s.runs:
        assert np.all(np.diff(r.fp) > 0)
    want = {int(f): j for j, f in enumerate(fps)}
    assert dict(s.items()) == want and len(s) == len(want)
    assert all(s.get(int(fps[j])) == j for j in range(0, len(fps), 37))
    absent = [int(x) for x in np.random.default_rng(2).integers(0, 2**62, 50)
              if int(x) not in want]
    assert all(s.get(x) is None for x in absent)
    assert s.find_old([*map(int, fps[:50]), *absent]) == {int(f): j for j, f in enumerate(fps[:50])}
    if to_disk:
        d = s.dir
        assert d is not None and os.path.isdir(d) and not os.listdir(d)  # files unlinked
        s.close()
        assert not os.path.exists(d)
        assert s.get(int(fps[5])) == 5  # the mappings outlive the directory
        assert "on disk" in s.describe()


def test_below_the_budget_nothing_moves(tmp_path: Path) -> None:
    policy, config = _claim()
    ex = [p for p in load_config(config)[1]][0]
    res = check(policy, ex, None, memory_budget_mib=10_000)
    assert not res.seen


def _dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith("failclosed-seen-"))


def test_directory_gone_after_search_and_after_an_exception(tmp_path: Path) -> None:
    from failclosed.model.config import initial_world, parse_config
    from failclosed.model.runtime import successors
    from failclosed.spec.symmetry import make_canonical

    policy, config = _zombie()
    part = load_config(config)[1][0]
    spec, budget = parse_config(part.data, policy)
    w0 = initial_world(spec, budget)
    canon = make_canonical(spec)
    ex = engine.explore([w0], successors, invariants={}, canonical=canon,
                        memory_budget_mib=TINY, spill_dir=str(tmp_path))
    assert "on disk" in ex.stats.seen and _dirs(tmp_path) == []
    assert ex.state_id(w0) == 0

    calls = [0]

    def failing(w: object) -> object:
        calls[0] += 1
        if calls[0] > 3000:
            raise RuntimeError("boom")
        return successors(w)  # type: ignore[arg-type]

    with pytest.raises(RuntimeError, match="boom"):
        engine.explore([w0], failing, invariants={}, canonical=canon,
                       memory_budget_mib=TINY, spill_dir=str(tmp_path))
    assert _dirs(tmp_path) == []


def test_directory_gone_after_sigterm_of_check(tmp_path: Path) -> None:
    """`failclosed check --memory-budget` spilling, then SIGTERM: exit 143, no directory."""
    policy, config = _zombie()
    _sigterm_while_spilling(tmp_path, ["check", "--policy", policy, "--config", config], 60)


def _sigterm_while_spilling(tmp_path: Path, argv: list[str], wait_s: float,
                            settle_s: float = 0.0) -> None:
    """Run ``failclosed ARGV --memory-budget`` (tiny) with its spill directories under
    ``tmp_path``, SIGTERM it once one exists: it exits 143 and leaves no directory (after
    ``settle_s``, the time its terminated workers' finally blocks take)."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    p = subprocess.Popen(
        [sys.executable, "-m", "failclosed", *argv, "--memory-budget", "0.000001", "--quiet"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + wait_s
    while not _dirs(tmp_path) and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.02)
    assert _dirs(tmp_path), "nothing spilled"
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    time.sleep(settle_s)
    assert _dirs(tmp_path) == []


def test_scope_passes_the_budget_and_reports_each_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scope under a tiny budget: the same verdicts, every search that went past its first
    layers says it spilled, and each search's figures (its own peak RSS) are in the JSON."""
    from failclosed.spec.scope import check_scope, load_scope, worker_share

    s = load_scope("quick")
    s.members = s.members[:: max(1, len(s.members) // 6)]
    a = check_scope(s, ["current"], jobs=1)
    b = check_scope(s, ["current"], jobs=1, memory_budget_mib=TINY)
    assert a.to_json()["policies"] == b.to_json()["policies"]
    assert all(not r.seen for r in a.results)
    assert all("on disk" in r.seen for r in b.results)
    members = b.to_json()["members"]
    assert [m["member"] for m in members] == [r.member for r in b.results]
    assert all(m["peak_rss_mib"] > 0 and m["states"] > 0 for m in members)
    assert worker_share(4000, 2) == 2000 and worker_share(None, 2) is None


def test_check_json_names_the_spilled_part(tmp_path: Path) -> None:
    import json

    policy, config = _claim()
    out = subprocess.run(
        [sys.executable, "-m", "failclosed", "check", "--policy", policy, "--config", config,
         "--memory-budget", "0.000001", "--json", "-", "--quiet", "--jobs", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    d = json.loads(out.stdout[: out.stdout.rindex("}") + 1])
    assert len(d["seen_set"]) == 1 and "on disk" in d["seen_set"][0]


def test_directory_gone_after_sigterm_of_scope_workers(tmp_path: Path) -> None:
    """`failclosed scope --jobs 2 --memory-budget`: SIGTERM while workers spill stops them
    (spec.pool.stop_pool terminates them), and neither leaves its directory behind."""
    _sigterm_while_spilling(tmp_path, ["scope", "standard", "--jobs", "2", "--no-cache"], 120,
                            settle_s=0.5)
