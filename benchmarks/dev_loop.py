"""The dev loop: wall time of a GraphQL-launched materialization of the example ``customer_summary``
under ``make dev``'s stack, with and without the warm Spark Connect server.

Copies the example project to a temporary directory, generates its data and materializes every
asset once with the local executor (the inputs ``customer_summary`` reads), then for each mode:

* ``warm``: ``scripts/dev.py`` (Spark Connect started with the UI; runs connect to it); one
  untimed run first (a fresh server's first queries compile and JIT-warm its code), then
  ``--repeat`` timed runs;
* ``cold``: ``scripts/dev.py --no-warm-spark`` (what ``dagster dev`` alone does: each run starts
  Spark in its first op); ``--repeat`` timed runs.

Each run is launched the way the UI's Materialize button launches it (``launchRun`` of the asset
job with ``customer_summary`` selected, its checks included) and timed from the launch until
GraphQL reports it done: the run worker's start, the code location's load in it, Spark, the plan
and the checks. Prints each run, the medians and the load average. Run from the repository
root::

    .venv/bin/python benchmarks/dev_loop.py [--repeat 3] [--modes warm,cold]

Target: warm under 15 s on a 2-core machine (cold ~120 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from dev_stack import DevStack, example_project, materialize_examples  # noqa: E402

ASSET = "customer_summary"


def timed_runs(stack: DevStack, repeat: int, warm_up: bool) -> list[tuple[float, float]]:
    """(wall seconds from launch to done, seconds the run itself took) per timed run."""
    if warm_up:
        _one(stack)
    return [_one(stack) for _ in range(repeat)]


def _one(stack: DevStack) -> tuple[float, float]:
    began = time.monotonic()
    run = stack.wait_run(stack.launch(ASSET))
    wall = time.monotonic() - began
    if run["status"] != "SUCCESS":
        raise SystemExit(f"run {run['runId']} ended {run['status']}:\n{stack.log_tail()}")
    return wall, run["endTime"] - run["startTime"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--modes", default="warm,cold")
    args = parser.parse_args(argv)
    # What a user's machine does: the stack's processes cache their modules' bytecode (the first,
    # untimed run writes it); a test environment that disables that makes every run worker
    # compile the project's modules again.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    results: dict[str, list[tuple[float, float]]] = {}
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory(prefix="drill-dev-loop-") as tmp:
        project = example_project(Path(tmp))
        seed_home = Path(tmp) / "seed_home"
        seed_home.mkdir()
        materialize_examples(project, seed_home)
        for mode in modes:
            home = Path(tmp) / f"home_{mode}"
            started = time.monotonic()
            with DevStack(project, home, warm_spark=mode == "warm") as stack:
                print(f"{mode}: stack up in {time.monotonic() - started:.0f} s", flush=True)
                results[mode] = timed_runs(stack, args.repeat, warm_up=mode == "warm")
            for wall, run in results[mode]:
                print(f"  {mode}: {wall:6.1f} s wall ({run:5.1f} s in the run worker)", flush=True)
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'mode':<6} {'runs':>4} {'median wall':>12} {'min':>7} {'max':>7}")
    for mode, runs in results.items():
        walls = [w for w, _ in runs]
        print(
            f"{mode:<6} {len(walls):>4} {statistics.median(walls):>11.1f}s"
            f" {min(walls):>6.1f}s {max(walls):>6.1f}s"
        )
    if "warm" in results:
        median = statistics.median(w for w, _ in results["warm"])
        print(f"target: warm median under 15 s: {'met' if median < 15 else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
