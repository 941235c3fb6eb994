"""The scan benchmark: our JSON scans against Spark's own JSON reader, same files, same run.

Generates nested JSON lines (``--files`` files of ``--records`` records each), then times
count + sum(amount) as one action per scan, alternating the contenders, ``--repeat`` times after a
warm-up, and prints the medians and two ratios:

* ``wildcard``: our wildcard scan (the tracker commits the schema from a sample, then the fastest
  correct reader runs: here Spark's own JSON reader) over ``spark.read.json`` inferring the schema;
  target <= 0.6.
* ``datasource``: our Drill data source path (the scan framework inside Spark tasks) over
  ``spark.read.json`` given the same schema; target <= 1.5.

Run from the repository root::

    .venv/bin/python benchmarks/scan_json.py                 # ~1-2 minutes on 2 cores
    .venv/bin/python benchmarks/scan_json.py --records 312500 --repeat 3   # 584 MB, the large size
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from engine.exec.spark.session import SparkConfig, create_session
from engine.exec.spark.sources import plan_scan, scan_plan_dataframe
from engine.storage.engines import create_engine

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"]


def record(rng: random.Random, i: int) -> dict:
    """One nested record (about 240 bytes of JSON)."""
    return {
        "id": i,
        "amount": round(rng.uniform(0, 1000), 2),
        "user": {
            "name": rng.choice(WORDS) + str(rng.randrange(10_000)),
            "age": rng.randrange(18, 90),
            "tags": rng.sample(WORDS, rng.randrange(0, 4)),
        },
        "items": [
            {"sku": f"s{rng.randrange(100_000)}", "qty": rng.randrange(1, 9), "price": 9.99}
            for _ in range(rng.randrange(1, 4))
        ],
        "note": rng.choice(WORDS) * rng.randrange(1, 4),
        "ok": rng.random() < 0.5,
    }


def generate(directory: Path, files: int, records: int) -> Path:
    """Write the data set once (reused when the same size already exists)."""
    data = directory / f"json_{files}x{records}"
    if data.is_dir() and len(list(data.glob("*.json"))) == files:
        return data
    data.mkdir(parents=True, exist_ok=True)
    rng = random.Random(42)
    for f in range(files):
        lines = (json.dumps(record(rng, f * records + i)) for i in range(records))
        (data / f"part-{f:03d}.json").write_text("\n".join(lines) + "\n")
    return data


def count_sum(df: DataFrame) -> tuple[int, float]:
    row = df.agg(F.count(F.lit(1)).alias("n"), F.sum("amount").alias("s")).collect()[0]
    return int(row["n"]), float(row["s"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--records", type=int, default=40_000, help="records per file")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/drill-bench"))
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)

    data = generate(args.data_dir, args.files, args.records)
    size = sum(p.stat().st_size for p in data.glob("*.json"))
    print(f"data: {args.files} files, {args.files * args.records:,} records, {size / 1e6:.0f} MB")
    spark = create_session(SparkConfig(master=args.master, shuffle_partitions=4))
    engine = create_engine("bench", {"type": "fs", "root": str(data.parent)})
    selection = {"path": data.name}
    paths = [str(p) for p in sorted(data.glob("*.json"))]
    schema = plan_scan(engine, selection).resolved.spark_schema

    def ours_wildcard() -> tuple[int, float]:
        plan = plan_scan(engine, selection)  # schema commit from a sample, on the driver
        assert plan.reader == "spark-json", plan.reason
        return count_sum(scan_plan_dataframe(spark, plan, None))

    def spark_inferred() -> tuple[int, float]:
        return count_sum(spark.read.json(paths))

    def ours_datasource() -> tuple[int, float]:
        plan = plan_scan(engine, selection, reader="drill", projection=["amount"])
        return count_sum(scan_plan_dataframe(spark, plan, None))

    def ours_datasource_whole() -> tuple[int, float]:
        plan = plan_scan(engine, selection, reader="drill")
        return count_sum(scan_plan_dataframe(spark, plan, None))

    def spark_with_schema() -> tuple[int, float]:
        return count_sum(spark.read.schema(schema).json(paths))

    contenders: dict[str, Callable[[], tuple[int, float]]] = {
        "ours_wildcard": ours_wildcard,
        "spark_inferred": spark_inferred,
        "ours_datasource": ours_datasource,
        "ours_datasource_whole": ours_datasource_whole,
        "spark_with_schema": spark_with_schema,
    }
    times: dict[str, list[float]] = {name: [] for name in contenders}
    answers = {}
    for round_ in range(args.repeat + 1):  # round 0 warms up the JVM and the Python workers
        for name, run in contenders.items():
            start = time.perf_counter()
            answers[name] = run()
            if round_:
                times[name].append(time.perf_counter() - start)
    counts = {answer[0] for answer in answers.values()}
    sums = [answer[1] for answer in answers.values()]
    assert len(counts) == 1 and max(sums) - min(sums) < 1e-6 * max(1.0, abs(sums[0])), answers
    median = {name: statistics.median(values) for name, values in times.items()}
    for name, value in median.items():
        print(f"{name:22s} {value:7.2f} s  (runs: {', '.join(f'{t:.2f}' for t in times[name])})")
    wildcard = median["ours_wildcard"] / median["spark_inferred"]
    datasource = median["ours_datasource"] / median["spark_with_schema"]
    print(f"ratio wildcard   (ours / spark.read.json inferring): {wildcard:.2f}  target <= 0.6")
    whole = median["ours_datasource_whole"] / median["spark_with_schema"]
    print(f"ratio datasource (ours / spark.read.json + schema):  {datasource:.2f}  target <= 1.5")
    print(f"  (the data source moving whole records into the JVM:   {whole:.2f})")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
