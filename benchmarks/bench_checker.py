"""Benchmark of the exhaustive checker (one core, one process).

Prints: distinct states/s on the standard bound (``small``, every property, liveness
included), the seconds ``small`` takes exhaustively, and the symmetry reduction factor on a
2-worker configurations: states without symmetry / states with it (exact), on
``medium-symmetric`` (two workers and two identical runs: a group of 4) and ``medium-queued``
(two workers, one run: a group of 2, so at most x2).

    /work/venv/bin/python benchmarks/bench_checker.py [--policy current]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spec.checker import CONFIG_DIR, check  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="current")
    args = ap.parse_args(argv)

    res = check(args.policy, "small", None)
    sps = res.states / res.seconds
    print(f"standard bound (small, {len(res.parts)} parts, {args.policy}): {res.stats_line()}")
    for p in res.parts:
        print(f"  {p.name:24s} {p.stats}")
    print(f"distinct states/s on small: {sps:,.0f}")
    print(f"small exhaustive: {res.seconds:.2f} s (all {len(res.properties)} properties, "
          f"witnesses, coverage)")

    same = True
    for cfg in ("medium-symmetric.toml", "medium-queued.toml"):
        two = CONFIG_DIR / cfg
        sym = check(args.policy, two, None, witnesses=False, coverage=False)
        flat = check(args.policy, two, None, witnesses=False, coverage=False, symmetry=False)
        print(f"2-worker configuration {two.name} (group of {sym.parts[0].group}): "
              f"{flat.states} states without symmetry ({flat.seconds:.2f} s), "
              f"{sym.states} with ({sym.seconds:.2f} s)")
        print(f"  symmetry reduction factor: x{flat.states / sym.states:.2f}")
        agree = {n: r.trace_length for n, r in sym.properties.items()} == {
            n: r.trace_length for n, r in flat.properties.items()
        }
        print(f"  verdicts and shortest lengths agree with and without symmetry: {agree}")
        same = same and agree
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
