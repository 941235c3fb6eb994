"""Row counts from parquet footers against observations, paired in one process (branch sparkobs).

For each query of ``spark_queries`` (after a warm-up), alternates the hand-written query, our run
as the code counts rows now (parquet stores and whole parquet scans from their footers), and our
run with the observations these replace put back (``scan_plan_dataframe`` not given ``counted``,
so such a scan observes its rows again; an observation of the DataFrame every parquet store
writes): the time the observations cost, measured in the same process, same data, same round.

Run from the repository root::

    .venv/bin/python benchmarks/spark_footer_counts.py --scale 0.1 --repeat 9
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyspark.sql import Observation
from pyspark.sql import functions as F
from spark_queries.check import run_ours
from spark_queries.data import generate
from spark_queries.handwritten import QUERIES

import engine.exec.spark.compiler as compiler
import engine.exec.spark.sources as sources
from engine.exec.spark.session import SparkConfig, create_session


@contextmanager
def _observed() -> Iterator[None]:
    """Our run with observations where the footers count: what the code did before."""
    scan, write = compiler.scan_plan_dataframe, sources._spark_write

    def scan_observing(*args: Any, counted: Any = None, **kwargs: Any) -> Any:
        return scan(*args, **kwargs)

    def write_observed(df: Any, spec: Any, path: Path, dynamic: Any) -> None:
        if spec.format == "parquet":
            df = df.observe(Observation(), F.count(F.lit(1)).alias("rows"))
        write(df, spec, path, dynamic)

    compiler.scan_plan_dataframe = scan_observing  # type: ignore[assignment]
    sources._spark_write = write_observed  # type: ignore[assignment]
    try:
        yield
    finally:
        compiler.scan_plan_dataframe = scan  # type: ignore[assignment]
        sources._spark_write = write  # type: ignore[assignment]


def main() -> int:
    """Print, per query, the medians of each contender and the median of the paired ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--query", action="append", choices=sorted(QUERIES))
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/drill-bench/spark_queries"))
    args = parser.parse_args()
    data = generate(args.data_dir, scale=args.scale)
    out = args.data_dir / "footer-counts-out"
    spark = create_session(SparkConfig(master="local[2]", shuffle_partitions=8))

    def contenders(name: str) -> list[tuple[str, Callable[[], None]]]:
        def observed() -> None:
            with _observed():
                run_ours(spark, name, data, out / "observed")

        return [
            ("hand", lambda: QUERIES[name](spark, data, out / "hand" / name)),
            ("observed", observed),
            ("footers", lambda: run_ours(spark, name, data, out / "footers")),
        ]

    print(
        f"{'query':24s} {'hand':>6s} {'observed':>8s} {'footers':>7s} "
        f"{'obs/hand':>8s} {'foot/hand':>9s} {'footers/observed (paired)':>25s}"
    )
    for name in args.query or list(QUERIES):
        runs = contenders(name)
        times: dict[str, list[float]] = defaultdict(list)
        for _label, run in runs:  # warm-up
            run()
        for round_ in range(args.repeat):
            for label, run in runs if round_ % 2 == 0 else runs[::-1]:
                start = time.perf_counter()
                run()
                times[label].append(time.perf_counter() - start)
        med = {k: statistics.median(v) for k, v in times.items()}
        paired = statistics.median(f / o for f, o in zip(times["footers"], times["observed"]))
        print(
            f"{name:24s} {med['hand']:6.3f} {med['observed']:8.3f} {med['footers']:7.3f} "
            f"{med['observed'] / med['hand']:8.2f} {med['footers'] / med['hand']:9.2f} "
            f"{paired:25.2f}",
            flush=True,
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
