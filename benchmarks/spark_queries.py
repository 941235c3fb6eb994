"""Issue 5's Spark benchmark: our plans against hand-written PySpark, same data, same session.

For each query of ``benchmarks/spark_queries/plans`` (TPC-H Q1, Q3 and Q6 shapes, a windowframe
sessionization, a flatten, a left join with a filter, a union distinct, a top-N), checks once that
our run (``engine.run_plan(..., executor="spark", spark=spark)``, storing parquet) and the
hand-written PySpark (:mod:`spark_queries.handwritten`, writing parquet) give the same records,
then times both alternately, ``--repeat`` rounds after ``--warmup`` rounds, and prints the median
of each and the median ratio ours / hand-written: the median of the rounds' own ratios (each
round runs both, back to back), the paired estimate; the ratio of the two medians follows it
(``of medians``). Target: median ratio <= 1.0, none above 1.10.

The ``rounds`` column is the spread of the rounds' own ratios (the 25th to 75th percentile): how
far apart two runs of the same code may land on this machine.

Run from the repository root::

    .venv/bin/python benchmarks/spark_queries.py --scale 1 --repeat 5
    .venv/bin/python benchmarks/spark_queries.py --scale 0.1 --query q1_pricing_summary
    .venv/bin/python benchmarks/spark_queries.py --scale 1 --cpu   # executor CPU too
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

from spark_queries.check import (
    median_ratio,
    round_spread,
    run_ours,
    same_records,
    stored_rows,
    written_rows,
)
from spark_queries.data import generate
from spark_queries.executor_cpu import ExecutorCpu
from spark_queries.handwritten import ORDERED, QUERIES

from engine.exec.spark.session import SparkConfig, create_session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="1.0: about 1M lineitems")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--query", action="append", choices=sorted(QUERIES), help="repeatable")
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/drill-bench/spark_queries"))
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
    parser.add_argument("--record", type=Path, help="write the figures as JSON here")
    parser.add_argument(
        "--cpu", action="store_true", help="also compare the executors' CPU time (steadier)"
    )
    args = parser.parse_args(argv)

    data = generate(args.data_dir, scale=args.scale)
    manifest = json.loads((data / "_generated.json").read_text())
    print(f"data: {data} rows {manifest['rows']}")
    out = args.data_dir / "out"
    shutil.rmtree(out, ignore_errors=True)
    spark = create_session(
        SparkConfig(master=args.master, shuffle_partitions=args.shuffle_partitions)
    )
    names = args.query or list(QUERIES)
    figures = {}
    cpu = ExecutorCpu(spark) if args.cpu else None
    for name in names:
        hand_out = out / "handwritten" / name

        def ours(name: str = name) -> None:
            run_ours(spark, name, data, out / "ours")

        def handwritten(name: str = name, hand_out: Path = hand_out) -> None:
            QUERIES[name](spark, data, hand_out)

        ours_rows = stored_rows(run_ours(spark, name, data, out / "ours"))
        QUERIES[name](spark, data, hand_out)
        if not same_records(ours_rows, written_rows(hand_out), ordered=name in ORDERED):
            print(f"{name}: ours and hand-written differ", file=sys.stderr)
            return 1
        times: dict[str, list[float]] = {"ours": [], "handwritten": []}
        cpu_ms: dict[str, list[float]] = {"ours": [], "handwritten": []}
        if cpu is not None:
            cpu.take()  # the check's runs above
        for round_ in range(args.warmup + args.repeat):
            pair = [("ours", ours), ("handwritten", handwritten)]
            for label, run in pair if round_ % 2 == 0 else pair[::-1]:
                start = time.perf_counter()
                run()
                elapsed = time.perf_counter() - start
                used = cpu.take() if cpu is not None else None
                if round_ >= args.warmup:
                    times[label].append(elapsed)
                    if used is not None:
                        cpu_ms[label].append(used)
        median = {label: statistics.median(values) for label, values in times.items()}
        ratio = median_ratio(times["ours"], times["handwritten"])
        of_medians = median["ours"] / median["handwritten"]
        low, high = round_spread(times["ours"], times["handwritten"])
        figures[name] = {
            "rows": len(ours_rows),
            **median,
            "ratio": ratio,
            "ratio_of_medians": of_medians,
            "rounds": [low, high],
            "runs": times,
        }
        cpu_column = ""
        if cpu_ms["ours"] and cpu_ms["handwritten"]:
            cpu_ratio = statistics.median(cpu_ms["ours"]) / statistics.median(cpu_ms["handwritten"])
            figures[name].update(cpu_ratio=cpu_ratio, cpu_ms=cpu_ms)
            cpu_column = f"  executor cpu ratio {cpu_ratio:5.2f}"
        print(
            f"{name:24s} rows {len(ours_rows):>9,}  ours {median['ours']:6.2f} s  "
            f"hand-written {median['handwritten']:6.2f} s  ratio {ratio:5.2f}  "
            f"of medians {of_medians:5.2f}  rounds {low:4.2f}-{high:4.2f}{cpu_column}",
            flush=True,
        )
    ratios = [f["ratio"] for f in figures.values()]
    overall = statistics.median(ratios)
    print(f"median ratio {overall:.2f} (target <= 1.0), max {max(ratios):.2f} (target <= 1.10)")
    if args.record:
        args.record.write_text(
            json.dumps({"scale": args.scale, "median": overall, "queries": figures}, indent=1)
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
