"""Progress shows life: a long command reports the work inside its running tasks, off a
terminal at least once an interval, on the clock the command line gives it (issue 20)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

from failclosed.spec.checker import CONFIG_DIR
from failclosed.spec.progress import Progress
from failclosed.spec.scope import load_scope, run_scope

ROOT = Path(__file__).resolve().parents[1]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_running_tasks_print_a_line_once_an_interval_without_any_task_finishing(monkeypatch):
    monkeypatch.delenv("FAILCLOSED_PROGRESS_INTERVAL", raising=False)
    clock, out = FakeClock(), io.StringIO()
    pg = Progress("scope full", 10, unit="configurations", clock=clock, stream=out, interval=60,
                  live=False)
    clock.now = 30
    pg.running(states=1234)
    assert out.getvalue() == ""  # not due yet
    clock.now = 61
    pg.running(states=250_000)
    assert out.getvalue().splitlines() == [
        "failclosed scope full: 0/10 configurations, 250,000 states in running tasks, "
        "elapsed 1:01"]
    clock.now = 100
    pg.tick()  # no news: nothing before the next interval
    assert len(out.getvalue().splitlines()) == 1
    clock.now = 125
    pg.tick()
    assert len(out.getvalue().splitlines()) == 2  # the same figures again: the command lives
    pg.advance(states=300_000)
    pg.running()  # that task finished: no running figure left
    assert "running" not in pg.line() and "300,000 states" in pg.line()


def _scope_file(tmp_path: Path) -> Path:
    p = tmp_path / "two.toml"
    p.write_text(f'description = "one member of 54k states"\n'
                 f'configs = ["{CONFIG_DIR / "small-approval.toml"}"]\n')
    return p


def test_run_scope_reports_states_of_running_members_from_worker_processes(tmp_path):
    scope = load_scope(_scope_file(tmp_path))
    seen: list[int] = []
    res = run_scope(scope, ["current", "proposed"], jobs=2, on_running=seen.append)
    total = max(r.states for r in res)
    assert [n for n in seen if n > 0], seen  # the workers reported while they searched
    assert max(seen) <= sum(r.states for r in res)
    assert all(n <= total * 2 for n in seen)


def test_scope_command_prints_running_states_off_a_terminal(tmp_path):
    env = {**os.environ, "FAILCLOSED_PROGRESS_INTERVAL": "0",
           "FAILCLOSED_CACHE": str(tmp_path / "cache")}
    p = subprocess.run([sys.executable, "-m", "failclosed", "scope", str(_scope_file(tmp_path)),
                        "--policy", "current", "--jobs", "1"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert p.returncode in (0, 1), p.stderr
    lines = [x for x in p.stderr.splitlines() if "in running tasks" in x]
    assert lines and lines[0].startswith("failclosed scope two: 0/1 configurations, "), p.stderr
