"""TPC-H through our SQL front end: on Spark against ``spark.sql``, locally against DuckDB.

The data, the 22 query texts and the answers come from DuckDB's tpch extension (``make tpch-data
TPCH_SF=<sf>``, cached in ``.tpch/``; this script runs it when the scale is missing). For each
query (one the SQL front end cannot translate is listed as skipped, with the reason):

* ``ours_spark``: SQL -> plan -> our Spark executor (``run_plan(..., executor="spark")``), the
  records collected; against ``spark_sql``: ``spark.sql`` of the same text over the same parquet
  files (each table a temporary view), collected, in the same SparkSession;
* ``ours_local``: SQL -> plan -> the local executor; against ``duckdb``: DuckDB (the project's
  version) running the same text over views of the same files.

Each contender runs once to warm up and to check its rows against the official answer (TPC-H's
answers exist for scale factors 0.01, 0.1 and 1), then ``--repeat`` rounds, each running both
back to back (which goes first alternating). Per query: the medians, the ratio ours / peer (the
median of the rounds' own ratios) and its 90% bootstrap interval; then the median ratio over the
queries, its interval, and whether the rounds meet the target, miss it or leave it undecided at
this noise (as ``spark_queries.py``). Targets: Spark median <= 1.0, none above 1.25; local /
DuckDB median <= 4. ``--record`` writes the rounds as JSON; ``--pool`` reports the rounds of
several such files together, without running anything.

Run from the repository root::

    .venv/bin/python benchmarks/tpch.py --sf 0.1                 # a few minutes
    .venv/bin/python benchmarks/tpch.py --sf 1 --repeat 3         # the target scale
    .venv/bin/python benchmarks/tpch.py --sf 1 --no-spark --query 1 --query 3
    .venv/bin/python benchmarks/tpch.py --sf 1 --no-local --conf spark.drill.rowCounts=stores
    .venv/bin/python benchmarks/tpch.py --sf 1 --no-local --record a.json   # then b.json, and:
    .venv/bin/python benchmarks/tpch.py --pool a.json b.json
    .venv/bin/python benchmarks/tpch.py --sf 1 --data /tmp/tpch/sf1  # data generated elsewhere:
    .venv-tpch/bin/python scripts/tpch_data.py --sf 1 --out /tmp/tpch  # makes /tmp/tpch/sf1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
from spark_queries.check import (
    median_interval,
    median_ratio,
    pooled_rounds,
    ratio_interval,
    verdict,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from tpch_suite import (  # the TPC-H helpers the tests use
    QUERIES,
    TABLES,
    answer,
    mismatches,
    ordered,
    query_text,
    repository,
    tpch_dir,
)

from engine.errors import DrillError
from engine.run import run_plan
from engine.sql import sql_to_plan

SPARK, LOCAL = "ours on Spark / spark.sql", "local / DuckDB"


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def pair(
    ours: Callable[[], Any], peer: Callable[[], Any], repeat: int, warmup: int = 1
) -> tuple[list[float], list[float], Any]:
    """The times of ``repeat`` rounds of ``ours`` and ``peer`` (after ``warmup`` untimed runs
    each, at least one), which goes first alternating, and ours' first result."""
    _, our_rows = timed(ours)
    timed(peer)
    for _ in range(warmup - 1):
        timed(ours)
        timed(peer)
    times: tuple[list[float], list[float]] = ([], [])
    for round_ in range(repeat):
        order = ((0, ours), (1, peer)) if round_ % 2 == 0 else ((1, peer), (0, ours))
        for index, run in order:
            times[index].append(timed(run)[0])
    return times[0], times[1], our_rows


TARGETS = {SPARK: (1.0, 1.25), LOCAL: (4.0, None)}
"""Each comparison's target: the most its median ratio may be, and the most any query's."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0, help="scale factor (default 1)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="untimed runs of each contender per query (default 1; the JVM still compiles "
        "Spark's code paths after one: 3 gives steadier ratios)",
    )
    parser.add_argument("--query", type=int, action="append", help="a query number, repeatable")
    parser.add_argument("--no-spark", action="store_true", help="only local against DuckDB")
    parser.add_argument("--no-local", action="store_true", help="only Spark against spark.sql")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
    parser.add_argument(
        "--driver-memory",
        default="4g",
        help="the local JVM's heap (default 4g; Spark's own 1g runs out in q21 at SF 1)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting of the session, e.g. spark.drill.rowCounts=stores (repeatable)",
    )
    parser.add_argument(
        "--data", type=Path, help="the generated data of that scale (default: .tpch/sf<sf>)"
    )
    parser.add_argument("--record", type=Path, help="write the rounds as JSON here")
    parser.add_argument(
        "--pool", type=Path, nargs="+", help="no run: report the rounds of these --record files"
    )
    args = parser.parse_args(argv)
    if args.pool:
        report(pooled([json.loads(path.read_text()) for path in args.pool]))
        return 0

    data = args.data or tpch_dir(args.sf)
    repo = repository(data, Path(tempfile.mkdtemp()) / "catalog.json")
    plans: dict[int, tuple[str, dict[str, Any]]] = {}
    for number in args.query or QUERIES:
        sql = query_text(data, number)
        try:
            plans[number] = sql, sql_to_plan(sql, repo)
        except DrillError as error:
            print(f"q{number:02d}: skipped: {str(error).splitlines()[0]}")
    has_answers = (data / "answers" / "q01.csv").exists()
    print(f"data: {data}; load average before: {_load()}")

    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    if not args.no_local:
        con = duckdb.connect()
        for table in TABLES:
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM '{data / table}.parquet'")
        results[LOCAL] = {}
        for number, (sql, plan) in plans.items():
            ours, peer, rows = pair(
                lambda plan=plan: run_plan(plan).records(),
                lambda sql=sql: con.execute(sql).fetchall(),
                args.repeat,
                args.warmup,
            )
            _check(data, number, sql, rows, has_answers)
            results[LOCAL][f"q{number:02d}"] = {"ours": ours, "peer": peer}
            print(f"q{number:02d} local / DuckDB {median_ratio(ours, peer):.2f}", flush=True)
    if not args.no_spark:
        from engine.exec.spark.session import SparkConfig, create_session

        conf = {"spark.driver.memory": args.driver_memory}
        conf.update(item.split("=", 1) for item in args.conf)
        spark = create_session(
            SparkConfig(master=args.master, shuffle_partitions=args.shuffle_partitions, conf=conf)
        )
        for table in TABLES:
            spark.read.parquet(str(data / f"{table}.parquet")).createOrReplaceTempView(table)
        results[SPARK] = {}
        for number, (sql, plan) in plans.items():
            ours, peer, rows = pair(
                lambda plan=plan: run_plan(plan, executor="spark", spark=spark).records(),
                lambda sql=sql: spark.sql(sql).collect(),
                args.repeat,
                args.warmup,
            )
            _check(data, number, sql, rows, has_answers)
            results[SPARK][f"q{number:02d}"] = {"ours": ours, "peer": peer}
            print(f"q{number:02d} ours / spark.sql {median_ratio(ours, peer):.2f}", flush=True)
        spark.stop()
    print(
        f"\nscale factor {args.sf:g}, {args.warmup} warm-up and {args.repeat} rounds, "
        f"load average after: {_load()}"
    )
    report(results)
    if args.record:
        record = {
            "sf": args.sf,
            "warmup": args.warmup,
            "conf": args.conf,
            "load": _load(),
            "results": results,
        }
        args.record.write_text(json.dumps(record, indent=1))
    return 0


def report(results: dict[str, dict[str, dict[str, list[float]]]]) -> None:
    """A table per comparison of ``results`` (each query's rounds of ``ours`` and ``peer``):
    medians, the paired ratio and its interval, the median ratio and the target's verdict."""
    for title, queries in results.items():
        if not queries:
            continue
        print(f"\n| query | ours (s) | peer (s) | {title} | 90% |\n|---|---:|---:|---:|---:|")
        intervals = {}
        for name, runs in queries.items():
            ours, peer = runs["ours"], runs["peer"]
            intervals[name] = low, high = ratio_interval(ours, peer)
            print(
                f"| {name} | {statistics.median(ours):.2f} | {statistics.median(peer):.2f} "
                f"| {median_ratio(ours, peer):.2f} | {low:.2f}-{high:.2f} |"
            )
        ratios = {name: median_ratio(r["ours"], r["peer"]) for name, r in queries.items()}
        worst = max(ratios, key=ratios.__getitem__)
        low, high = median_interval([(r["ours"], r["peer"]) for r in queries.values()])
        print(
            f"| median | | | **{statistics.median(ratios.values()):.2f}** (worst "
            f"{ratios[worst]:.2f}, {worst}) | {low:.2f}-{high:.2f} |"
        )
        median_target, max_target = TARGETS[title]
        said = verdict((low, high), intervals, median_target=median_target, max_target=max_target)
        print(f"target: {said}")


def pooled(records: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, list[float]]]]:
    """The rounds of several ``--record`` files together: per comparison, the queries every
    file that has the comparison holds."""
    results: dict[str, dict[str, dict[str, list[float]]]] = {}
    for title in (SPARK, LOCAL):
        held = [r["results"][title] for r in records if title in r["results"]]
        if not held:
            continue
        results[title] = pooled_rounds(held)
    return results


def _check(data: Path, number: int, sql: str, rows: list[dict[str, Any]], answers: bool) -> None:
    if not answers:
        return
    columns, expected = answer(data, number)
    problems = mismatches(rows, columns, expected, in_order=ordered(sql))
    if problems:
        print(f"q{number:02d}: WRONG ANSWER: {problems[:3]}")


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())
