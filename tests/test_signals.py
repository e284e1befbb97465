"""SIGTERM (what CI and ``timeout`` send) and SIGKILL of the parent leave no process and no
half-written file behind (issue 20), tested with real signals on real commands."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

psutil = pytest.importorskip("psutil")

ROOT = Path(__file__).resolve().parents[1]
SIM = str(ROOT / "sim/configs/default.toml")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals")


def _start(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "failclosed", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def _children(proc: subprocess.Popen, want: int, timeout: float = 60) -> list:
    """The command's descendants, once ``want`` of them run (the pool is up)."""
    parent = psutil.Process(proc.pid)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        kids = parent.children(recursive=True)
        if len(kids) >= want:
            time.sleep(1.0)  # the workers have started their tasks
            return parent.children(recursive=True)
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    raise AssertionError(f"no {want} worker processes within {timeout} s")


def _gone(kids: list, timeout: float = 15) -> list:
    """The descendants still alive after ``timeout`` seconds."""
    _, alive = psutil.wait_procs(kids, timeout=timeout)
    for p in alive:  # do not leak them into the rest of the suite
        p.kill()
    return alive


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_sweep_workers_die_with_their_parent(tmp_path, sig) -> None:
    proc = _start(["sweep", SIM, "--seeds", "40", "--jobs", "2", "--out", "r.csv", "--quiet"],
                  tmp_path)
    kids = _children(proc, 3)  # two workers and the resource tracker
    proc.send_signal(sig)
    rc = proc.wait(timeout=30)
    err = proc.stderr.read()
    assert _gone(kids) == [], "worker processes outlived the sweep"
    if sig == signal.SIGTERM:
        assert rc == 143, err
        assert "terminated" in err and "Traceback" not in err, err
    else:
        assert rc == -signal.SIGKILL


def test_scope_workers_stop_on_sigterm(tmp_path) -> None:
    # standard, not quick: quick finishes in seconds on an idle machine, before the signal
    proc = _start(["scope", "standard", "--policy", "current", "--policy", "proposed", "--jobs",
                   "2", "--no-cache", "--quiet"], tmp_path)
    kids = _children(proc, 3)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    assert _gone(kids) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_simulate_history_leaves_no_partial_file(tmp_path, sig) -> None:
    (tmp_path / "h.jsonl").write_text("an earlier history\n")
    proc = _start([
        "simulate", SIM, "--runs", "200000", "--history", "h.jsonl", "--quiet"], tmp_path)
    time.sleep(4)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(sig)
    rc = proc.wait(timeout=30)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.jsonl"]  # no .h.jsonl.partial
    assert (tmp_path / "h.jsonl").read_text() == "an earlier history\n"
    if sig == signal.SIGTERM:
        assert rc == 143
        assert "h.jsonl not written" in proc.stderr.read()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_simulate_jobs_workers_stop_with_the_command(tmp_path, sig) -> None:
    # the side-by-side run (no CONFIG) on two processes, long enough to be interrupted
    proc = _start(["simulate", "--runs", "200000", "--jobs", "2", "--quiet"], tmp_path)
    kids = _children(proc, 3)  # two workers and the resource tracker
    proc.send_signal(sig)
    rc = proc.wait(timeout=30)
    err = proc.stderr.read()
    assert _gone(kids) == [], "worker processes outlived simulate --jobs"
    assert rc == (143 if sig == signal.SIGTERM else 130), err
    assert "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []  # nothing written in the working directory
