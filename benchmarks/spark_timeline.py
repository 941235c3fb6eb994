"""Where each query's wall time goes, ours against hand-written, phase by phase on Spark's clock.

For each query of ``spark_queries`` (after ``--warmup`` rounds), alternates the hand-written query
and ours (:mod:`spark_queries.timeline`) and prints the medians of each phase in milliseconds:
``driver`` (to the write: building DataFrames; ``steps`` of them, each an analysis on the JVM),
``schema`` (jobs before the write: Spark's parquet reader inferring a schema), ``to_job1`` (Spark
optimizing and planning the write), ``jobs`` (the write's jobs), ``between`` (adaptive
re-planning between them), ``other`` (the write outside its jobs), ``after`` (a store's commit,
metrics). Then Spark's own analysis / optimization / planning times of each written DataFrame,
planned afresh (``QueryPlanningTracker``): adaptive execution plans again at each stage, so a
slower optimization costs more than once.

Run from the repository root::

    .venv/bin/python benchmarks/spark_timeline.py --scale 1 --repeat 7
    .venv/bin/python benchmarks/spark_timeline.py --query q3_shipping_priority
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

import spark_queries.handwritten as handwritten
from spark_queries.check import run_ours
from spark_queries.data import generate
from spark_queries.handwritten import QUERIES
from spark_queries.timeline import Clock, Timeline, planning_phases

import engine.exec.spark.stores as stores
from engine.exec.spark.session import SparkConfig, create_session

PHASES = ["driver", "steps", "schema_jobs", "to_first_job", "jobs", "between", "other", "after"]
HEADINGS = ["driver", "steps", "schema", "to_job1", "jobs", "between", "other", "after", "total"]


def measure(
    spark: Any, name: str, data: Path, out: Path, *, repeat: int, warmup: int = 1
) -> dict[str, list[Timeline]]:
    """``{"ours": [...], "hand": [...]}``: the timelines of ``repeat`` alternating rounds."""
    clock = Clock(spark)
    contenders = {
        "hand": (lambda target: QUERIES[name](spark, data, target), (handwritten, "_write")),
        "ours": (lambda target: run_ours(spark, name, data, target), (stores, "_spark_write")),
    }
    found: dict[str, list[Timeline]] = {label: [] for label in contenders}
    for round_ in range(warmup + repeat):
        order = list(contenders) if round_ % 2 == 0 else list(contenders)[::-1]
        for label in order:
            target = out / f"{label}-{round_}"
            call, writer = contenders[label]
            timeline = clock.run(lambda: call(target), writer)  # noqa: B023 (called at once)
            shutil.rmtree(target, ignore_errors=True)
            if round_ >= warmup:
                found[label].append(timeline)
    return found


def written_dataframes(spark: Any, name: str, data: Path, out: Path) -> dict[str, Any]:
    """The DataFrame each contender writes (caught at the write, which then writes nothing)."""
    caught: dict[str, Any] = {}

    def catch(label: str) -> Any:
        return lambda df, *args, **kwargs: caught.setdefault(label, df)

    original = stores._spark_write, handwritten._write
    stores._spark_write, handwritten._write = catch("ours"), catch("hand")
    try:
        QUERIES[name](spark, data, out / "caught-hand")
        # The store then finds nothing written and fails: the DataFrame is caught already.
        with contextlib.suppress(Exception):
            run_ours(spark, name, data, out / "caught-ours")
    finally:
        stores._spark_write, handwritten._write = original
    return caught


def medians(timelines: list[Timeline]) -> list[float]:
    values = [[getattr(t, phase) for t in timelines] for phase in PHASES]
    values.append([t.total for t in timelines])
    return [statistics.median(v) for v in values]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--query", action="append", choices=sorted(QUERIES))
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/drill-bench/spark_queries"))
    args = parser.parse_args(argv)
    data = generate(args.data_dir, scale=args.scale)
    out = args.data_dir / "timeline-out"
    shutil.rmtree(out, ignore_errors=True)
    spark = create_session(SparkConfig(master="local[2]", shuffle_partitions=8))
    print(f"{'query':24s} {'':4s}" + "".join(f"{h:>8s}" for h in HEADINGS) + "   planning (ms)")
    for name in args.query or list(QUERIES):
        found = measure(spark, name, data, out, repeat=args.repeat, warmup=args.warmup)
        frames = written_dataframes(spark, name, data, out)
        for label in ("ours", "hand"):
            cells = [
                f"{v:8.0f}" if phase == "steps" else f"{v * 1000:8.0f}"
                for phase, v in zip([*PHASES, "total"], medians(found[label]), strict=True)
            ]
            phases = planning_phases(frames[label])
            shown = " ".join(f"{k} {v * 1000:.0f}" for k, v in sorted(phases.items()))
            print(f"{name:24s} {label:4s}" + "".join(cells) + f"   {shown}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
