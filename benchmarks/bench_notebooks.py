"""The notebooks in full mode: how long a first "Run All" takes, from an empty sweep cache.

    .venv/bin/python benchmarks/bench_notebooks.py [lease_timing audit_store_flakiness ...]
        [--quick] [--timeout 3600]

Each notebook is executed with nbclient on the ``python3`` kernel, as a user runs it: its
shipped parameters (full mode, unless ``--quick`` sets ``FAILCLOSED_NOTEBOOK_QUICK=1``), from a
copy in a temporary directory (outside the checkout: it imports the installed package, and no
figure is written), its sweep cache (``FAILCLOSED_CACHE``) in a fresh temporary directory, so
every simulation of its grid runs. Printed per notebook: the wall time, the CPU time of the
kernel and the processes it started (user + system, from ``getrusage`` of this process's
children: the kernel is one), the load average before and after (the machine may be shared:
on two idle cores the wall time approaches the CPU time over the notebook's ``JOBS``), and the
same notebook again with the cache now filled (what a rerun after changing a threshold costs).

Run it from a copy of the checkout without ``failclosed/`` to measure the installed (compiled)
build, as the other benchmarks.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ("lease_timing", "audit_store_flakiness")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def execute(path: Path, cache: Path, quick: bool, timeout: int) -> tuple[float, float]:
    """(wall s, CPU s of the kernel and its processes) of one execution of ``path``."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    env = {**os.environ, "FAILCLOSED_CACHE": str(cache)}
    env.pop("FAILCLOSED_NOTEBOOK_QUICK", None)
    if quick:
        env["FAILCLOSED_NOTEBOOK_QUICK"] = "1"
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # the kernel inherits this process's environment
    try:
        client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                         resources={"metadata": {"path": str(path.parent)}})
        c0, t0 = _children_cpu(), time.perf_counter()
        client.execute()
        return time.perf_counter() - t0, _children_cpu() - c0
    finally:
        os.environ.clear()
        os.environ.update(old)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebooks", nargs="*", default=list(DEFAULT),
                    help=f"names under notebooks/ (default: {' '.join(DEFAULT)})")
    ap.add_argument("--quick", action="store_true", help="the quick grids the test suite runs")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per cell")
    a = ap.parse_args()
    mode = "quick" if a.quick else "full"
    for name in a.notebooks:
        src = ROOT / "notebooks" / f"{name}.ipynb"
        if not src.is_file():
            print(f"bench_notebooks: no notebook {src}", file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory() as tmp:
            work, cache = Path(tmp) / "nb", Path(tmp) / "cache"
            work.mkdir()
            cache.mkdir()
            nb = work / src.name
            shutil.copy2(src, nb)
            load0 = os.getloadavg()[0]
            wall, cpu = execute(nb, cache, a.quick, a.timeout)
            load1 = os.getloadavg()[0]
            print(f"{name} ({mode} mode, empty cache): {wall:.1f} s wall, {cpu:.1f} s CPU of the "
                  f"kernel and its processes (load average {load0:.2f} before, {load1:.2f} after)",
                  flush=True)
            wall2, cpu2 = execute(nb, cache, a.quick, a.timeout)
            print(f"{name} ({mode} mode, the cache filled): {wall2:.1f} s wall, {cpu2:.1f} s CPU",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
