"""Mutation testing of failclosed with mutmut: a slow job, never part of CI or the default suite.

    python benchmarks/mutation.py                       # every module listed in MODULES
    python benchmarks/mutation.py sim/faults.py         # some of them
    python benchmarks/mutation.py --jobs 2 --survivors  # two workers; list the survivors
    python benchmarks/mutation.py model/store.py --sample 50   # 50 drawn at random (seeded)
    python benchmarks/mutation.py model/store.py --rerun-survivors  # after adding tests
    python benchmarks/mutation.py model/steps.py --fresh       # survivors in code run at import

For each module it stages the source tree as it installs (``failclosed/model``,
``failclosed/spec``, ``failclosed/sim``, ``failclosed/cli`` beside ``tests/``) under
``build/mutation/<module>/`` -- mutmut names a mutant after the file's path, and the tests
import ``failclosed.*``, so the path must be the import path -- and runs ``mutmut run`` there
with that module as the only one mutated and the module's own test selection (``MODULES``).
mutmut runs, for each mutant, only the tests of the selection that call the mutated
function. The selections never include tests/test_behaviour_digests.py: a mutant must be
killed by a test that asserts behaviour, not by a recorded digest changing.

It prints, per module and per function group (``GROUPS``: the parts of a module the issue
names, e.g. the reduction of spec/scope.py, the liveness check of spec/liveness.py), the
mutants killed, survived, timed out and without a test, and the score
``killed / (killed + survived)`` (with its Wilson 95 % interval when only a sample was
checked); ``--survivors`` lists each survivor with its diff. ``--fresh`` checks survivors that
mutmut's forked workers cannot activate (code run at import or cached) in fresh interpreters.
docs/MUTATION.md records a run and classifies the survivors (equivalent or not).

Needs mutmut (``pip install 'mutmut>=3.8,<4'``); nothing else of the project changes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGE = ROOT / "build" / "mutation"

# module -> the tests that exercise it (pytest arguments, relative to the source tree). The
# slow ones (processes, sockets, the standard scope) are left out: they would time out
# mutants, not kill them.
_SCOPE_FAST = ("not parallel and not dask and not terminated and not matrix_over and "
               "not baseline_gate and not scope_command and not hypothesis_agrees")
# model/: the model's own tests, the checker's and the simulator's fast ones (by node id: a -k
# would apply to every file of the selection); every test of it takes under ~3 s
_MODEL = ["tests/test_model.py", "tests/test_steps.py", "tests/test_classify.py",
          "tests/test_records.py", "tests/test_properties.py", "tests/test_scenarios.py",
          "tests/test_inputs.py", "tests/test_model_units.py", "tests/test_recipes.py",
          "tests/test_sim_fastpaths.py",
          "tests/test_checker.py::test_tiny_proves_what_should_hold_under_current",
          "tests/test_checker.py::test_small_exhaustive_under_every_preset",
          "tests/test_checker.py::test_every_deliberate_mutant_kills_its_property",
          "tests/test_sim.py::test_every_fired_transition_was_enabled_when_it_fired",
          "tests/test_sim.py::test_same_workload_under_every_policy"]
# tests/test_sim.py but its sweeps (local processes, a dask cluster: mutmut's trampolines do
# not reach another process, those tests would only time out)
_SIM = ["tests/test_sim.py", "-k", "not sweep_with_local_processes and not sweep_on_a_dask"]
MODULES: dict[str, list[str]] = {
    **{f"model/{m}.py": _MODEL for m in (
        "store", "rules", "state", "policy", "steps", "table", "next", "runtime", "frames",
        "process", "pickup", "segment", "resume", "reaper", "caller", "bus", "operator",
        "clock", "identities", "names", "classify", "records", "config", "scenario",
        "scenario_check", "scenario_expect")},
    "sim/faults.py": ["tests/test_sim_faults.py", "tests/test_sim.py", "tests/test_sim_inputs.py"],
    "sim/checks.py": ["tests/test_sim_checks.py", *_SIM],
    "sim/metrics.py": ["tests/test_sim_metrics.py", *_SIM],
    "spec/symmetry.py": ["tests/test_symmetry_soundness.py", "tests/test_checker.py",
                         "-k", "soundness or run_symmetry or symmetry_reduces"],
    "spec/baseline.py": ["tests/test_baseline.py"],
    "spec/scope.py": ["tests/test_reduction_soundness.py", "tests/test_scope_units.py",
                      "tests/test_scope.py", "-k", _SCOPE_FAST],
    "spec/search.py": ["tests/test_engine.py"],
    "spec/liveness.py": ["tests/test_liveness.py", "tests/test_engine.py"],
}

# module -> group -> the functions (and classes) of the group; a module's other functions
# are counted under "other". The score the issue asks for is the groups'.
GROUPS: dict[str, dict[str, set[str]]] = {
    "spec/scope.py": {
        "generation": {"_expand_product", "_fault_sets"},
        "reduction": {"_normal", "_canonical_json", "_fault_free_key", "subsumes",
                      "_faults_cover", "reduce_members", "Member"},
        "merge": {"merge"},
    },
    "spec/liveness.py": {
        "liveness": {"check_liveness", "strongly_connected", "_trim_acyclic", "_tarjan",
                     "_pop_component", "_Edges", "_int32", "_distances", "_fair_sccs",
                     "_prefix", "_fair_cycle", "_nearest", "LivenessResult"},
    },
}

# modules mutated in part only: the functions of their groups (the rest of the staged copy is
# fenced with mutmut's "# pragma: no mutate start/end"; the source tree is never touched)
FOCUS = {"spec/liveness.py", "spec/scope.py"}

# files of the checkout the tests read (docs/RUNTIME.md's tables, the packages' source and
# recorded findings at the checkout's paths, benchmarks/bench_toy.py), copied beside the
# staged tests; never imported (the staged failclosed/ is)
ALSO_COPY = ("docs", "benchmarks", "model", "spec", "sim", "cli")

# a survivor killed by ``--fresh``: the mutant active from the interpreter's start
FRESH_KILLED = 101
# (-9: SIGKILL, the hard stop mutmut's runner sends one second after the CPU limit's SIGXCPU)
STATUS = {-9: "timeout", 1: "killed", FRESH_KILLED: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests",
          34: "skipped", 36: "timeout", -24: "timeout", 24: "timeout", 152: "timeout",
          255: "timeout", None: "not checked"}


def stage(module: str, tests: list[str]) -> Path:
    """A fresh copy of the source tree at ``build/mutation/<module>/`` with mutmut's
    configuration for ``module`` (the import layout: failclosed/<package>/...)."""
    d = STAGE / module.replace("/", "-").removesuffix(".py")
    shutil.rmtree(d, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.so", ".hypothesis")
    (d / "failclosed").mkdir(parents=True)
    shutil.copy2(ROOT / "failclosed" / "__init__.py", d / "failclosed" / "__init__.py")
    for pkg in ("model", "spec", "sim", "cli"):
        shutil.copytree(ROOT / pkg, d / "failclosed" / pkg, ignore=ignore)
    shutil.copytree(ROOT / "tests", d / "tests", ignore=ignore)
    for extra in ALSO_COPY:  # read by tests as text, never imported
        shutil.copytree(ROOT / extra, d / extra, ignore=ignore)
    if module in FOCUS:
        target = d / "failclosed" / module
        keep = set().union(*GROUPS[module].values())
        target.write_text(_fence(target.read_text(encoding="utf-8"), keep), encoding="utf-8")
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    text += (
        "\n[tool.mutmut]\n"
        'source_paths = ["failclosed"]\n'
        f"only_mutate = {json.dumps(['failclosed/' + module])}\n"
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q"]\n'
        f"also_copy = {json.dumps(list(ALSO_COPY))}\n"
        "use_git_change_detection = false\n"
    )
    (d / "pyproject.toml").write_text(text, encoding="utf-8")
    return d


def _fence(source: str, keep: set[str]) -> str:
    """``source`` with every top-level function and class not in ``keep`` inside a
    ``# pragma: no mutate start`` / ``end`` pair (mutmut leaves those lines alone)."""
    import ast

    lines = source.splitlines()
    fences: list[tuple[int, int]] = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name not in keep:
            first = min([node.lineno] + [x.lineno for x in node.decorator_list])
            fences.append((first - 1, node.end_lineno or node.lineno))
    for start, end in reversed(fences):
        lines.insert(end, "# pragma: no mutate end")
        lines.insert(start, "# pragma: no mutate start")
    return "\n".join(lines) + "\n"


def _dir(module: str) -> Path:
    return STAGE / module.replace("/", "-").removesuffix(".py")


def run(module: str, jobs: int, rerun: bool = False, sample: int = 0) -> Path:
    """Run mutmut on ``module``: every mutant; or with ``rerun`` only the last run's mutants
    that were not killed, against the current tests; or with ``sample`` that many of the
    last run's unchecked mutants, drawn at random (seeded; with no record yet, the mutants are
    generated first, all unchecked). The others keep their result."""
    old = _codes(module, _dir(module)) if rerun or sample else {}
    if sample and not old:
        old = _codes(module, generate(module))
    if sample:
        todo = sorted(k for k, c in old.items() if c is None)
        again = sorted(random.Random(0).sample(todo, min(sample, len(todo))))
        rerun = True
    else:
        again = sorted(k for k, c in old.items() if c is not None and STATUS.get(c) != "killed")
    d = stage(module, MODULES[module])
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    cmd = [sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs)]
    print(f"== {module}: {' '.join(cmd)}{f' <{len(again)} mutants>' if rerun else ''} "
          f"(in {d.relative_to(ROOT)})", flush=True)
    if rerun and not again:
        (d / "merged.json").write_text(json.dumps(old), encoding="utf-8")
        return d
    subprocess.run(cmd + again, cwd=d, env=env, check=False, stdout=subprocess.DEVNULL)
    if rerun:
        new = _codes(module, d, merged=False)
        # a mutant the run left unchecked (mutmut stopped early) keeps its last result
        merged = {k: (new[k] if k in again and new.get(k) is not None else c)
                  for k, c in old.items()}
        (d / "merged.json").write_text(json.dumps(merged), encoding="utf-8")
    return d


# mutmut's own first step of ``mutmut run`` (mutmut 3.8's functions, as ``_run`` calls them):
# write every mutant of the module and its record, all unchecked, and run no test
_GENERATE = """
import os
import mutmut.__main__ as m
from mutmut.mutation.trampoline import set_mutant_under_test
set_mutant_under_test("mutant_generation")
os.makedirs("mutants", exist_ok=True)
m.copy_src_dir()
m.copy_also_copy_files()
m.setup_source_paths()
m.create_mutants(1)
"""


def generate(module: str) -> Path:
    """Stage ``module`` and generate its mutants without checking any: the record a first
    ``--sample`` draws from (a sample needs the list of all mutants)."""
    d = stage(module, MODULES[module])
    print(f"== {module}: generating the mutants (no test run)", flush=True)
    subprocess.run([sys.executable, "-c", _GENERATE], cwd=d, check=True,
                   stdout=subprocess.DEVNULL)
    return d


# the functions of a module (mutmut's mangled names, unmutated) that run while every module
# of the package is imported
_AT_IMPORT = """
import importlib, pkgutil, sys
target, seen = sys.argv[1], set()
def prof(frame, event, arg):
    if event == "call" and frame.f_code.co_filename.endswith(target):
        seen.add(frame.f_code.co_name)
sys.setprofile(prof)
import failclosed
for m in pkgutil.walk_packages(failclosed.__path__, "failclosed."):
    try:
        importlib.import_module(m.name)
    except Exception:
        pass
sys.setprofile(None)
print("\\n".join(sorted(n for n in seen if n.endswith("__mutmut_orig"))))
"""


# functions whose results a module-level cache keeps (filled by the tests mutmut runs in its
# parent process before it forks: a worker reuses the cached result, the mutant never runs)
CACHED: dict[str, set[str]] = {
    "model/records.py": {"_make_replacer"},  # records._REPLACERS
    "model/steps.py": {"Vocabulary", "boundary_labels"},  # TRANSITIONS' table, steps._boundary
}


def at_import(module: str, d: Path) -> set[str]:
    """The functions (and classes, by their methods) of ``module`` that run when the package's
    modules are imported: the only ones whose mutants ``--fresh`` needs to check again."""
    p = subprocess.run([sys.executable, "-c", _AT_IMPORT, "failclosed/" + module],
                       cwd=d / "mutants", env={**os.environ, "MUTANT_UNDER_TEST": ""},
                       text=True, capture_output=True, check=True)
    return {_function("m." + n) for n in p.stdout.split()}


def fresh(module: str, d: Path) -> None:
    """Check the last run's survivors again, each in a fresh interpreter with the mutant active
    from the first import (``MUTANT_UNDER_TEST`` set before pytest starts). mutmut forks its
    workers from a process that has imported the modules already, so a mutant of code that
    runs at import -- a decorator such as model/steps.py's ``action``, a table built by a
    function at module level -- is never active in mutmut's own run: it survives whatever the
    tests assert; so is one in a function whose result a module-level cache keeps
    (``CACHED``). Only the survivors in those functions are checked. One that fails the
    module's selection (the current tests) here is recorded as killed (code 101); the others
    stay survivors. The unmutated tree must pass first."""
    codes = _codes(module, d)
    imported = at_import(module, d) | CACHED.get(module, set())
    todo = sorted(k for k, c in codes.items() if STATUS.get(c) in ("survived", "no tests")
                  and _function(k) in imported)
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *MODULES[module]]

    def passes(key: str) -> bool:
        env = {**os.environ, "PYTHONHASHSEED": "0", "MUTANT_UNDER_TEST": key}
        try:
            p = subprocess.run(cmd, cwd=d / "mutants", env=env, check=False, timeout=900,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return True  # not killed: it stays a survivor
        return p.returncode == 0

    # the current tests (written since the module was staged)
    ignore = shutil.ignore_patterns("__pycache__", ".hypothesis")
    shutil.copytree(ROOT / "tests", d / "mutants" / "tests", ignore=ignore, dirs_exist_ok=True)
    print(f"== {module}: {len(todo)} survivors in fresh interpreters", flush=True)
    if todo and not passes(""):
        raise SystemExit(f"mutation: the unmutated tests fail in {d / 'mutants'}")
    for k in todo:
        if not passes(k):
            codes[k] = FRESH_KILLED
        (d / "merged.json").write_text(json.dumps(codes), encoding="utf-8")


def _codes(module: str, d: Path, merged: bool = True) -> dict[str, int | None]:
    """mutant -> mutmut's exit code, of the last run (a rerun's merged record first)."""
    if merged and (d / "merged.json").exists():
        return json.loads((d / "merged.json").read_text(encoding="utf-8"))
    meta = d / "mutants" / "failclosed" / (module + ".meta")
    if not meta.exists():
        return {}
    return json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]




def _function(key: str) -> str:
    """``failclosed.spec.scope.x__normal__mutmut_3`` -> ``_normal``; a method -> its class."""
    tail = key.rsplit(".", 1)[1]
    if tail.startswith("xǁ"):
        return tail[2:].split("ǁ", 1)[0]
    return tail[2:].rsplit("__mutmut_", 1)[0]


def results(module: str, d: Path) -> dict[str, Counter]:
    """group -> status -> mutants, from mutmut's record of the module."""
    codes = _codes(module, d)
    groups = GROUPS.get(module, {})
    out: dict[str, Counter] = {}
    for key, code in codes.items():
        fn = _function(key)
        group = next((g for g, fns in groups.items() if fn in fns), "other" if groups else "all")
        out.setdefault(group, Counter())[STATUS.get(code, "suspicious")] += 1
        if groups:
            out.setdefault("(module)", Counter())[STATUS.get(code, "suspicious")] += 1
    return out


def survivors(module: str, d: Path) -> list[str]:
    codes = _codes(module, d)
    return sorted(k for k, c in codes.items() if STATUS.get(c) in ("survived", "no tests"))


def show(d: Path, key: str) -> str:
    p = subprocess.run([sys.executable, "-m", "mutmut", "show", key], cwd=d, text=True,
                       capture_output=True, check=False)
    return p.stdout


def _wilson(k: int, n: int) -> tuple[float, float]:
    """The Wilson 95 % interval of ``k`` killed of ``n`` checked (unit: one mutant, drawn at
    random), from the project's own statistics (sim/stats.py)."""
    from failclosed.sim.stats import wilson

    w = wilson(k, n)
    return w.lo, w.hi


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", help=f"of {', '.join(MODULES)} (default: all)")
    ap.add_argument("--jobs", type=int, default=1, help="mutmut's --max-children (default 1)")
    ap.add_argument("--survivors", action="store_true", help="list each survivor with its diff")
    ap.add_argument("--rerun-survivors", action="store_true",
                    help="run only the last run's surviving mutants again (after adding tests)")
    ap.add_argument("--sample", type=int, default=0, metavar="N",
                    help="check N more of the last run's unchecked mutants, drawn at random")
    ap.add_argument("--fresh", action="store_true",
                    help="check the last run's survivors in fresh interpreters (code run at import)")
    ap.add_argument("--report-only", action="store_true",
                    help="do not run: report the last run's results under build/mutation/")
    a = ap.parse_args(argv)
    mods = a.modules or list(MODULES)
    unknown = [m for m in mods if m not in MODULES]
    if unknown:
        print(f"mutation: unknown module {unknown[0]!r}; use one of {', '.join(MODULES)}",
              file=sys.stderr)
        return 2
    try:
        import mutmut  # noqa: F401
    except ImportError:
        print("mutation: mutmut is not installed; pip install 'mutmut>=3.8,<4'", file=sys.stderr)
        return 2
    rows = []
    for m in mods:
        d = _dir(m)
        if a.fresh:
            fresh(m, d)
        elif not a.report_only:
            d = run(m, a.jobs, a.rerun_survivors, a.sample)
        for group, c in results(m, d).items():
            rows.append((m, group, c["killed"], c["survived"] + c["no tests"], c["timeout"],
                         c["not checked"], sum(c.values())))
        if a.survivors:
            for key in survivors(m, d):
                print(show(d, key).rstrip() or key)
    # score: killed / (killed + survived) of the checked mutants, with its Wilson 95 %
    # interval when only a random sample was checked (timeouts are reported apart)
    print(f"{'module':24} {'group':11} {'killed':>6} {'survived':>8} {'timeout':>7} "
          f"{'unchecked':>9} {'total':>5}  score")
    for m, g, k, sv, t, nc, tot in rows:
        txt = "-"
        if k + sv:
            txt = f"{k / (k + sv):.1%}"
            if nc:
                lo, hi = _wilson(k, k + sv)
                txt += f" (sample; 95% {lo:.0%} to {hi:.0%})"
        print(f"{m:24} {g:11} {k:6} {sv:8} {t:7} {nc:9} {tot:5}  {txt}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
