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


def _writing_in(proc: subprocess.Popen, directory: Path, timeout: float = 60) -> None:
    """Returns once the command holds a file open in ``directory`` (the history it writes: an
    unnamed O_TMPFILE file there, or its ``.NAME.partial``), however long a loaded machine
    takes to start it."""
    fds = Path(f"/proc/{proc.pid}/fd")  # psutil's open_files leaves the unnamed file out
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()
        targets = []
        for fd in fds.iterdir():
            try:
                targets.append(os.readlink(fd))
            except OSError:  # closed meanwhile
                pass
        if any(t.startswith(f"{directory}{os.sep}") for t in targets):
            return
        time.sleep(0.1)
    raise AssertionError(f"the command opened no file in {directory} within {timeout} s")


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
    _writing_in(proc, tmp_path)  # the signal lands while the history is being written
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


# -- a set of output files is written as a set (cli/outputs.py) ------------------------------
OUTLIVES = str(ROOT / "tests" / "data" / "outlives.toml")
OUTPUT_SETS = {  # command -> its argv without the directory, and the flag that names it
    "check --out": (["check", "--policy", "current", "--config", "tiny", "--quiet"], "--out"),
    "scope --out": (["scope", "quick", "--policy", "current", "--no-cache", "--jobs", "1",
                     "--quiet"], "--out"),
    "simulate --violations-dir": (["simulate", OUTLIVES, "--no-baseline", "--quiet"],
                                  "--violations-dir"),
}


def _interrupt_at_file(monkeypatch, n: int) -> list[str]:
    """SIGTERM's exception (app.Terminated, what the handler raises) while the n-th file of
    the set is written; the files written before it are listed."""
    from failclosed.cli import app, scenario_writer, simulate

    real = scenario_writer.write_scenario
    seen: list[str] = []

    def write(path, doc):
        if len(seen) + 1 == n:
            raise app.Terminated
        real(path, doc)
        seen.append(str(path))

    monkeypatch.setattr(scenario_writer, "write_scenario", write)
    monkeypatch.setattr(simulate, "write_scenario", write)
    return seen


@pytest.mark.parametrize("command", OUTPUT_SETS)
def test_an_output_set_is_all_there_or_not_at_all(command, tmp_path, monkeypatch, capsys):
    from failclosed.cli import main

    argv, flag = OUTPUT_SETS[command]
    d = tmp_path / "D"
    d.mkdir()
    (d / "earlier.txt").write_text("an earlier file\n")
    monkeypatch.chdir(tmp_path)
    seen = _interrupt_at_file(monkeypatch, 2)
    assert main([*argv, flag, str(d)]) == 143
    assert "terminated" in capsys.readouterr().err
    assert seen, "the set was interrupted before its first file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D"]  # no temporary directory left
    assert [p.name for p in d.iterdir()] == ["earlier.txt"]  # not one file of the set
    monkeypatch.undo()

    monkeypatch.chdir(tmp_path)
    assert main([*argv, flag, str(d)]) == 1
    out = capsys.readouterr().out
    names = sorted(p.name for p in d.iterdir())
    assert "earlier.txt" in names and len(names) > 2, names
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D"]
    import re

    printed = re.findall(r"/D/([\w.-]+)", out)  # the files named in the output: where they are now
    assert printed and set(printed) <= set(names), (printed, names)


def test_a_new_output_directory_appears_whole_or_not(tmp_path, monkeypatch, capsys):
    from failclosed.cli import main

    argv, flag = OUTPUT_SETS["check --out"]
    monkeypatch.chdir(tmp_path)
    _interrupt_at_file(monkeypatch, 2)
    assert main([*argv, flag, "a/b/D"]) == 143
    assert list(tmp_path.iterdir()) == []  # neither D nor its parents nor a partial directory


@pytest.mark.parametrize("existing", [False, True], ids=["new D", "D exists"])
def test_a_real_sigterm_while_the_set_moves_in_waits_for_it(existing, tmp_path, monkeypatch,
                                                            capsys):
    """A SIGTERM that arrives while the files move into D (a real signal, to this process) is
    delivered once they are all there: exit 143 with the whole set, never a part of it."""
    from failclosed.cli import main, outputs

    argv, flag = OUTPUT_SETS["check --out"]
    d = tmp_path / "D"
    if existing:
        d.mkdir()
    monkeypatch.chdir(tmp_path)
    name = "replace" if existing else "rename"
    real = getattr(os, name)
    sent = []

    def move(*a, **k):
        if not sent:
            sent.append(os.kill(os.getpid(), signal.SIGTERM))
        return real(*a, **k)

    monkeypatch.setattr(outputs.os, name, move)
    assert main([*argv, flag, str(d)]) == 143
    assert sent and "terminated" in capsys.readouterr().err
    monkeypatch.undo()
    files = sorted(p.name for p in d.iterdir())
    assert main([*argv, flag, str(tmp_path / "E")]) == 1  # the same set, uninterrupted
    capsys.readouterr()
    assert files == sorted(p.name for p in (tmp_path / "E").iterdir()) and files
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_stop_pool_kills_a_worker_that_outlives_its_sigterm() -> None:
    """A worker that does not leave on SIGTERM (as a search in the compiled build does not:
    it runs no bytecode for Python to call the handler between) is killed after the grace
    period: an interrupted command never waits on it, and none outlives the command."""
    from failclosed.spec.pool import spawn_pool, stop_pool

    ex = spawn_pool(1, signal.signal, (signal.SIGTERM, signal.SIG_IGN))
    ex.submit(time.sleep, 0).result()  # the worker has run its initializer
    ex.submit(time.sleep, 60)
    time.sleep(0.5)
    procs = list(ex._processes.values())
    t0 = time.monotonic()
    stop_pool(ex, grace=0.5)
    assert time.monotonic() - t0 < 10
    assert procs and not any(p.is_alive() for p in procs)
    assert [p.exitcode for p in procs] == [-signal.SIGKILL]
