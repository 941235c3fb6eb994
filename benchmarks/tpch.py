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
answers exist for scale factors 0.01, 0.1 and 1), then ``--repeat`` times, the contenders of a
pair alternating; the medians and the ratios (ours / peer) per query, and the median of the
ratios, are printed with the load average. Targets (issue): Spark median <= 1.0, none above
1.25; local / DuckDB median <= 4.

Run from the repository root::

    .venv/bin/python benchmarks/tpch.py --sf 0.1                 # a few minutes
    .venv/bin/python benchmarks/tpch.py --sf 1 --repeat 3         # the target scale
    .venv/bin/python benchmarks/tpch.py --sf 1 --no-spark --query 1 --query 3
    .venv/bin/python benchmarks/tpch.py --sf 1 --no-local --conf spark.drill.rowCounts=stores
    .venv/bin/python benchmarks/tpch.py --sf 1 --data /tmp/tpch/sf1  # data generated elsewhere:
    .venv-tpch/bin/python scripts/tpch_data.py --sf 1 --out /tmp/tpch  # makes /tmp/tpch/sf1
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

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


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def pair(
    ours: Callable[[], Any], peer: Callable[[], Any], repeat: int
) -> tuple[float, float, Any, Any]:
    """Medians of ``ours`` and ``peer`` run alternately (after one warm-up each), and the
    warm-up results."""
    _, our_rows = timed(ours)
    _, peer_rows = timed(peer)
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        times[0].append(timed(ours)[0])
        times[1].append(timed(peer)[0])
    return statistics.median(times[0]), statistics.median(times[1]), our_rows, peer_rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0, help="scale factor (default 1)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--query", type=int, action="append", help="a query number, repeatable")
    parser.add_argument("--no-spark", action="store_true", help="only local against DuckDB")
    parser.add_argument("--no-local", action="store_true", help="only Spark against spark.sql")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
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
    args = parser.parse_args(argv)

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

    results: dict[str, dict[int, tuple[float, float]]] = {}
    if not args.no_local:
        con = duckdb.connect()
        for table in TABLES:
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM '{data / table}.parquet'")
        results["local / DuckDB"] = {}
        for number, (sql, plan) in plans.items():
            ours, peer, rows, _ = pair(
                lambda plan=plan: run_plan(plan).records(),
                lambda sql=sql: con.execute(sql).fetchall(),
                args.repeat,
            )
            _check(data, number, sql, rows, has_answers)
            results["local / DuckDB"][number] = (ours, peer)
            print(f"q{number:02d} local {ours:.2f} s, DuckDB {peer:.2f} s: {ours / peer:.2f}")
    if not args.no_spark:
        from engine.exec.spark.session import SparkConfig, create_session

        conf = dict(item.split("=", 1) for item in args.conf)
        spark = create_session(
            SparkConfig(master=args.master, shuffle_partitions=args.shuffle_partitions, conf=conf)
        )
        for table in TABLES:
            spark.read.parquet(str(data / f"{table}.parquet")).createOrReplaceTempView(table)
        results["ours on Spark / spark.sql"] = {}
        for number, (sql, plan) in plans.items():
            ours, peer, rows, _ = pair(
                lambda plan=plan: run_plan(plan, executor="spark", spark=spark).records(),
                lambda sql=sql: spark.sql(sql).collect(),
                args.repeat,
            )
            _check(data, number, sql, rows, has_answers)
            results["ours on Spark / spark.sql"][number] = (ours, peer)
            print(f"q{number:02d} ours {ours:.2f} s, spark.sql {peer:.2f} s: {ours / peer:.2f}")
        spark.stop()
    print(f"\nscale factor {args.sf:g}, {args.repeat} rounds, load average after: {_load()}")
    for title, figures in results.items():
        ratios = [ours / peer for ours, peer in figures.values()]
        print(f"\n| query | ours (s) | peer (s) | {title} |\n|---|---|---|---|")
        for number, (ours, peer) in figures.items():
            print(f"| q{number:02d} | {ours:.2f} | {peer:.2f} | {ours / peer:.2f} |")
        if ratios:
            print(f"| median | | | {statistics.median(ratios):.2f} (worst {max(ratios):.2f}) |")
    return 0


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
