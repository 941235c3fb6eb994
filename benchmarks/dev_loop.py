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
and the checks. Prints each run with where its time went (:data:`STAGES`, from the run's events),
the medians and the load average. The stack's Dagster instance is ``make dev``'s throwaway one (in
memory); ``--dagster-home-on-disk`` gives it a ``DAGSTER_HOME`` in the temporary directory, as a
user's own ``DAGSTER_HOME`` is. Run from the repository root::

    .venv/bin/python benchmarks/dev_loop.py [--repeat 3] [--modes warm,cold] [--dagster-home-on-disk]

Target: warm under 15 s on a 2-core machine (cold ~120 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))

from dev_stack import DevStack, example_project, materialize_examples  # noqa: E402

ASSET = "customer_summary"


STAGES = (
    ("launch", "the webserver plans the run and enqueues it"),
    ("queue", "until the daemon takes it off the queue and launches it"),
    ("worker", "the run worker's process up: Python, Dagster's imports, its instance"),
    ("load", "the code location's load in the run worker"),
    ("resources", "from the run's start to its first op: resources, the execution plan"),
    ("first op", "the first op: the Spark session (cold: Spark's start), the plan's compile"),
    ("ops", "the other ops before the store"),
    ("store", "the store op: the Spark job"),
    ("checks", "the steps after the store: its checks"),
    ("end", "from the last step to the run's end (resources' teardown)"),
    ("seen", "until GraphQL reports it done"),
)


@dataclass
class Timed:
    """One run: its wall time from the launch to done, and where that went (:data:`STAGES`)."""

    wall: float
    stages: dict[str, float]


def timed_runs(stack: DevStack, repeat: int, warm_up: bool) -> list[Timed]:
    """Each timed run's wall time and stages."""
    if warm_up:
        _one(stack)
    return [_one(stack) for _ in range(repeat)]


def _one(stack: DevStack) -> Timed:
    launched = time.time()
    began = time.monotonic()
    run_id = stack.launch(ASSET)
    run = stack.wait_run(run_id)
    wall = time.monotonic() - began
    if run["status"] != "SUCCESS":
        raise SystemExit(f"run {run['runId']} ended {run['status']}:\n{stack.log_tail()}")
    return Timed(wall, stages(stack.events(run_id), launched, wall))


def stages(events: list[dict[str, Any]], launched: float, wall: float) -> dict[str, float]:
    """Seconds per stage of :data:`STAGES` from a run's events (each step counted from the end
    of the one before it, so Dagster's work between steps is in the step after it)."""

    def first(kind: str, text: str = "") -> float:
        return next(
            float(e["timestamp"]) / 1000
            for e in events
            if e.get("eventType") == kind and text in e.get("message", "")
        )

    marks = {
        "launch": first("RUN_ENQUEUED"),
        "queue": first("RUN_STARTING"),
        "worker": first("ENGINE_EVENT", "Started process for run"),
        "load": first("RUN_START"),
    }
    step_ends = [
        (e["stepKey"], float(e["timestamp"]) / 1000)
        for e in events
        if e.get("eventType") == "STEP_SUCCESS"
    ]
    steps = [key for key, _ in step_ends]
    store = max(
        range(len(steps)), key=lambda i: step_ends[i][1] - step_ends[i - 1][1] if i else 0.0
    )
    marks["resources"] = first("STEP_START")
    marks["first op"] = step_ends[0][1]
    marks["ops"] = step_ends[store - 1][1] if store > 1 else marks["first op"]
    marks["store"] = step_ends[store][1]
    marks["checks"] = step_ends[-1][1]
    marks["end"] = first("RUN_SUCCESS")
    marks["seen"] = launched + wall
    out, before = {}, launched
    for name, _ in STAGES:
        out[name] = marks[name] - before
        before = marks[name]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--modes", default="warm,cold")
    parser.add_argument(
        "--dagster-home-on-disk",
        action="store_true",
        help="give the stack a DAGSTER_HOME on disk (default: make dev's throwaway one in memory)",
    )
    args = parser.parse_args(argv)
    # What a user's machine does: the stack's processes cache their modules' bytecode (the first,
    # untimed run writes it); a test environment that disables that makes every run worker
    # compile the project's modules again.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    results: dict[str, list[Timed]] = {}
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory(prefix="drill-dev-loop-") as tmp:
        project = example_project(Path(tmp))
        seed_home = Path(tmp) / "seed_home"
        seed_home.mkdir()
        materialize_examples(project, seed_home)
        for mode in modes:
            home = Path(tmp) / f"home_{mode}"
            started = time.monotonic()
            with DevStack(
                project, home, warm_spark=mode == "warm", dagster_home=args.dagster_home_on_disk
            ) as stack:
                print(f"{mode}: stack up in {time.monotonic() - started:.0f} s", flush=True)
                results[mode] = timed_runs(stack, args.repeat, warm_up=mode == "warm")
            for timed in results[mode]:
                where = ", ".join(f"{k} {v:.1f}" for k, v in timed.stages.items())
                print(f"  {mode}: {timed.wall:6.1f} s wall ({where})", flush=True)
    print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'mode':<6} {'runs':>4} {'median wall':>12} {'min':>7} {'max':>7}")
    for mode, runs in results.items():
        walls = [t.wall for t in runs]
        print(
            f"{mode:<6} {len(walls):>4} {statistics.median(walls):>11.1f}s"
            f" {min(walls):>6.1f}s {max(walls):>6.1f}s"
        )
    print("median seconds per stage:")
    for name, what in STAGES:
        cells = "  ".join(
            f"{mode} {statistics.median(t.stages[name] for t in runs):5.1f}"
            for mode, runs in results.items()
        )
        print(f"  {name:<10} {cells}   {what}")
    if "warm" in results:
        median = statistics.median(t.wall for t in results["warm"])
        print(f"target: warm median under 15 s: {'met' if median < 15 else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
