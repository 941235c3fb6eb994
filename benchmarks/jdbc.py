"""The jdbc benchmark: a PostgreSQL table of ``--rows`` rows into a parquet store, ours against
the same work written by hand, in the same run.

* ``spark``: our plan on Spark (the ``jdbc`` engine, a range-partitioned read, an ``fs`` parquet
  store) over ``spark.read.jdbc(url, table, column="id", lowerBound, upperBound, numPartitions)
  .write.parquet(path)`` with the same partitioning; target <= 1.1.
* ``local``: our plan on the local executor (ADBC) over ADBC by hand: ``fetch_record_batch`` of
  ``SELECT *``, the numeric column cast to decimal (the same file), a ``pyarrow.parquet`` writer;
  target <= 1.2.

The benchmark starts its own PostgreSQL server (as the tests do: ``tests/support/postgres.py``)
and stops it at the end. The contenders alternate; medians of ``--repeat`` rounds after a warm-up.
Run from the repository root::

    PYTHONPATH=. .venv/bin/python benchmarks/jdbc.py            # 1M rows, ~3-5 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.exec.spark.session import SparkConfig, create_session
from engine.run import run_plan
from engine.storage.jdbc.adbc import conform
from tests.support.postgres import start_server

PASSWORD_ENV = "DRILL_BENCH_PG_PASSWORD"
COLUMNS = ["id", "amount", "name", "day", "seen", "ok"]


def fill(server, rows: int) -> None:
    server.execute(
        "DROP TABLE IF EXISTS bench",
        "CREATE TABLE bench (id bigint, amount numeric(10,2), name text, day date, "
        "seen timestamp, ok bool)",
        f"INSERT INTO bench SELECT i, (i % 100000) / 100.0, 'name' || (i % 5000), "
        f"date '2024-01-01' + (i % 365), timestamp '2024-01-01' + i * interval '1 second', "
        f"i % 3 = 0 FROM generate_series(1, {rows}) AS i",
        "ANALYZE bench",
    )


def plan(server, root: Path, rows: int, partitions: int) -> dict:
    jdbc = {"type": "jdbc", "url": server.url, "user": "drill", "password_env": PASSWORD_ENV}
    selection = {
        "table": "public.bench",
        "partitionColumn": "id",
        "numPartitions": partitions,
        "lowerBound": 1,
        "upperBound": rows,
    }
    return {
        "storage": {"pg": jdbc, "lake": {"type": "fs", "root": str(root)}},
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "pg", "ref": "b", "selection": selection},
            {
                "@id": 2,
                "op": "project",
                "input": 1,
                "projections": [{"ref": f"output.{c}", "expr": f"b.{c}"} for c in COLUMNS],
            },
            {"@id": 3, "op": "store", "input": 2, "storageengine": "lake",
             "target": {"path": "out", "format": "parquet"}},
        ],
    }  # fmt: skip


def timed(run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    server = start_server()
    root = Path(tempfile.mkdtemp(prefix="drill-bench-jdbc-"))
    try:
        os.environ[PASSWORD_ENV] = server.password
        fill(server, args.rows)
        spark = create_session(SparkConfig(master="local[2]", shuffle_partitions=2))
        the_plan = plan(server, root, args.rows, args.partitions)
        properties = {
            "user": "drill",
            "password": server.password,
            "driver": "org.postgresql.Driver",
        }
        jdbc_url = f"jdbc:postgresql://{server.host}:{server.port}/drill"

        def ours_spark() -> None:
            result = run_plan(the_plan, executor="spark", spark=spark)
            assert result.stores[0].row_count == args.rows

        def spark_by_hand() -> None:
            out = root / "by_hand_spark"
            shutil.rmtree(out, ignore_errors=True)
            df = spark.read.jdbc(
                jdbc_url, "public.bench", column="id", lowerBound=1, upperBound=args.rows,
                numPartitions=args.partitions, properties={**properties, "fetchsize": "10000"},
            )  # fmt: skip
            df.write.parquet(str(out))

        def ours_local() -> None:
            result = run_plan(the_plan, executor="local")
            assert result.stores[0].row_count == args.rows

        def local_by_hand() -> None:
            import adbc_driver_postgresql.dbapi as pg

            out = root / "by_hand_local.parquet"
            with pg.connect(server.uri(), autocommit=True) as conn, conn.cursor() as cur:
                cur.execute("SELECT * FROM bench")
                reader = cur.fetch_record_batch()
                writer = None
                for batch in reader:
                    batch = conform(batch)  # numeric text -> decimal(10,2): the same file
                    if writer is None:
                        writer = pq.ParquetWriter(out, batch.schema)
                    writer.write_batch(batch)
                if writer is not None:
                    writer.close()

        contenders = {
            "ours_spark": ours_spark,
            "spark_by_hand": spark_by_hand,
            "ours_local": ours_local,
            "local_by_hand": local_by_hand,
        }
        for run in contenders.values():  # warm-up
            run()
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for _ in range(args.repeat):
            for name, run in contenders.items():
                times[name].append(timed(run))
        medians = {name: statistics.median(values) for name, values in times.items()}
        load = os.getloadavg()
        print(f"rows {args.rows}, partitions {args.partitions}, repeat {args.repeat}, "
              f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")  # fmt: skip
        for name, value in medians.items():
            print(f"  {name:14} {value:7.2f} s  ({', '.join(f'{t:.2f}' for t in times[name])})")
        print(f"spark ours / by hand: {medians['ours_spark'] / medians['spark_by_hand']:.2f} "
              "(target <= 1.1)")  # fmt: skip
        print(f"local ours / by hand: {medians['ours_local'] / medians['local_by_hand']:.2f} "
              "(target <= 1.2)")  # fmt: skip
        rows = pq.read_metadata(root / "by_hand_local.parquet").num_rows
        assert rows == args.rows and pa is not None
        spark.stop()
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
