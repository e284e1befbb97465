"""Mutations of the project's own TOML files never escape as a traceback (issue 20).

Every shipped TOML kind (model configuration, scenario, simulator configuration, scope,
baseline) is read, mutated by Hypothesis (a key dropped or misspelt, a value of another
type, a number out of range, the file truncated) and handed to the loader the command line
uses. What a command would do with it is one of: load it (exit 0 or 1 later) or refuse it
with one line (``ConfigError`` / ``UsageError`` / ``UnknownPolicy``: exit 2). Any other
exception is a traceback a user would see, and fails the test. Truncated files go through
``failclosed.cli.main`` itself, which must return 0, 1 or 2.

The default suite runs a modest budget; ``-m slow`` a larger one.
"""

from __future__ import annotations

import copy
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from failclosed.cli import main
from failclosed.cli.exits import EXIT_TRUNCATED
from failclosed.model.config import ConfigError, UsageError, parse_config
from failclosed.model.policy import UnknownPolicy
from failclosed.model.scenario import replay, scenario_from_dict
from failclosed.sim import config as sconfig
from failclosed.spec.baseline import baseline_from_dict
from failclosed.spec.scope import TOP_KEYS as SCOPE_KEYS
from failclosed.spec.scope import expand
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
REFUSED = (ConfigError, UsageError, UnknownPolicy)


def _model_config(data: dict[str, Any], path: Path) -> None:
    if "parts" not in data:
        parse_config(data)


def _scenario(data: dict[str, Any], path: Path) -> None:
    replay(scenario_from_dict(data, path.stem, str(path)))


def _sim_config(data: dict[str, Any], path: Path) -> None:
    sconfig.load(data)


def _scope(data: dict[str, Any], path: Path) -> None:
    from failclosed.model.config import check_keys

    check_keys(data, SCOPE_KEYS, f"{path.name}: ")
    expand(data, path.name, path.parent)


def _baseline(data: dict[str, Any], path: Path) -> None:
    baseline_from_dict(data, str(path))


def _files(pattern: str) -> list[Path]:
    return sorted(ROOT.glob(pattern))


# kind -> (its files, the loader, the command a truncated file goes through)
KINDS = {
    "model config": (_files("spec/configs/*.toml") + _files("spec/mutant_configs/*.toml"),
                     _model_config, ["check", "--policy", "current", "--max-states", "30",
                                     "--jobs", "1", "--quiet", "--config"]),
    "scenario": (_files("model/scenarios/*.toml") + _files("spec/findings/*.toml"), _scenario,
                 ["replay"]),
    "simulator config": (_files("sim/configs/*.toml"), _sim_config,
                         ["simulate", "--runs", "1", "--quiet", "--no-baseline"]),
    "scope": (_files("spec/scopes/*.toml"), _scope, ["scope", "--list"]),
    "baseline": (_files("spec/baselines/*.toml"), _baseline,
                 ["check", "--policy", "current", "--config", "tiny", "--max-states", "30",
                  "--jobs", "1", "--quiet", "--baseline"]),
}
FILES = [(kind, p) for kind, (paths, _, _) in KINDS.items() for p in paths]

OTHER_VALUES = [0, -1, 1, 5, 2**63 - 1, -(2**63), 10**9, 1.5, -0.5, 1e308, "", "x", "canceled",
                True, False, [], [1], ["x"], {}, {"a": 1}, [{"x": 1}]]


def test_every_kind_has_files() -> None:
    assert all(paths for paths, _, _ in KINDS.values()), "a TOML kind without a shipped file"


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside a parsed TOML table (dict keys, list indices)."""
    out = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        out.append(prefix + (k,))
        out.extend(_paths(v, prefix + (k,)))
    return out


def _parent(data: Any, path: tuple) -> Any:
    for k in path[:-1]:
        data = data[k]
    return data


@st.composite
def mutated(draw: Any) -> tuple[str, Path, dict[str, Any], str]:
    kind, path = draw(st.sampled_from(FILES))
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out = copy.deepcopy(data)
    paths = _paths(out)
    what = draw(st.sampled_from(["drop", "misspell", "retype", "range"]))
    target = draw(st.sampled_from(paths))
    parent, key = _parent(out, target), target[-1]
    if what == "drop":
        del parent[key]
    elif what == "misspell" and isinstance(parent, dict):
        bad = draw(st.sampled_from([key + "x", key[:-1], key.upper(), "_" + key]))
        parent[bad] = parent.pop(key)
    elif what == "range":
        parent[key] = draw(st.sampled_from([-1, 0, 2**63 - 1, 10**12, -(10**9), 1e300, -1e-9]))
    else:
        parent[key] = draw(st.sampled_from(OTHER_VALUES))
    return kind, path, out, f"{what} {'.'.join(map(str, target))}"


def _load(kind: str, path: Path, data: dict[str, Any]) -> int:
    loader = KINDS[kind][1]
    try:
        loader(data, path)
    except REFUSED as e:
        assert "\n" not in str(e), f"a refusal of more than one line: {e}"
        return 2
    return 0


BUDGET = int(os.environ.get("FAILCLOSED_FUZZ_EXAMPLES", "60"))


@settings(max_examples=BUDGET, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_a_mutated_shipped_file_is_loaded_or_refused(case) -> None:
    kind, path, data, what = case
    assert _load(kind, path, data) in (0, 2), what


@pytest.mark.slow
@settings(max_examples=2000, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_a_mutated_shipped_file_is_loaded_or_refused_large_budget(case) -> None:
    kind, path, data, what = case
    assert _load(kind, path, data) in (0, 2), what


@settings(max_examples=max(10, BUDGET // 3), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(FILES), st.floats(0.0, 1.0, exclude_max=True))
def test_a_truncated_shipped_file_exits_0_1_2_or_3(tmp_path_factory, case, cut) -> None:
    """A cut file is loaded or refused: never an internal error (its code is 70); the
    checks run with --max-states, so 3 (a truncated search) is an answer too."""
    kind, path = case
    text = path.read_text(encoding="utf-8")
    d = tmp_path_factory.mktemp("trunc")
    f = d / path.name
    f.write_text(text[: int(len(text) * cut)], encoding="utf-8")
    cwd = os.getcwd()
    os.chdir(d)  # anything a command writes stays in the temporary directory
    try:
        rc = main([*KINDS[kind][2], str(f)])
    finally:
        os.chdir(cwd)
    assert rc in (0, 1, 2, EXIT_TRUNCATED), (kind, path.name, cut, rc)


def test_the_two_tracebacks_of_the_issue_are_one_line_each() -> None:
    """A scope's tool table without ``name`` (was a KeyError) and a scenario whose
    ``plan`` is a number (was a TypeError)."""
    scope = tomllib.loads((ROOT / "spec/scopes/quick.toml").read_text(encoding="utf-8"))
    del scope["tools"]["read"]["name"]
    with pytest.raises(ConfigError, match=r"tools\.read\.name"):
        _scope(scope, ROOT / "spec/scopes/quick.toml")
    sc = ROOT / "model/scenarios" / sorted(os.listdir(ROOT / "model/scenarios"))[0]
    data = tomllib.loads(sc.read_text(encoding="utf-8"))
    data["runs"][0]["plan"] = 5
    with pytest.raises(ConfigError, match=r"runs\[0\]\.plan"):
        scenario_from_dict(data)
