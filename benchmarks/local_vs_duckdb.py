"""The local executor's benchmark: the local executor against DuckDB, same parquet files, same run.

Two queries over generated data (``--rows`` fact rows, default 1,000,000; a 10,000-row dimension):

* ``pipeline``: scan -> filter -> project -> segment -> collapsingaggregate -> order -> queue store
  (about 1,000 groups reach the queue), against DuckDB's
  ``SELECT g, sum(x * 2), count(*) FROM fact WHERE x > 100 GROUP BY g ORDER BY g``;
* ``join``: scan fact -> join (==) scan dimension -> store parquet (every joined row written),
  against DuckDB's ``COPY (SELECT ... FROM fact JOIN dim USING (k)) TO 'x.parquet'``.

Both contenders read the same parquet files and produce the same rows (checked). They alternate,
``--repeat`` times after one warm-up each, and the medians and the ratio (local / DuckDB; target
<= 3) are printed. DuckDB runs with ``--threads`` threads (default: all cores, as it ships).

Run from the repository root::

    .venv/bin/python benchmarks/local_vs_duckdb.py                  # 1M rows, ~1-2 minutes
    .venv/bin/python benchmarks/local_vs_duckdb.py --rows 200000 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine import run_plan

GROUPS = 1_000
DIMENSION_ROWS = 10_000


def generate(root: Path, rows: int, seed: int = 7) -> None:
    """``fact/part-*.parquet`` (id, g, k, x, s) and ``dim/dim.parquet`` (k, name, weight)."""
    rng = np.random.default_rng(seed)
    (root / "fact").mkdir(parents=True)
    (root / "dim").mkdir()
    per_file = max(1, rows // 4)
    for part, start in enumerate(range(0, rows, per_file)):
        n = min(per_file, rows - start)
        table = pa.table(
            {
                "id": np.arange(start, start + n, dtype=np.int64),
                "g": rng.integers(0, GROUPS, n),
                "k": rng.integers(0, DIMENSION_ROWS, n),
                "x": rng.integers(0, 1_000, n),
                "s": pa.array(rng.choice(["alpha", "bravo", "charlie", "delta"], n)),
            }
        )
        pq.write_table(table, root / "fact" / f"part-{part}.parquet")
    keys = np.arange(DIMENSION_ROWS, dtype=np.int64)
    dim = pa.table(
        {
            "k": keys,
            "name": pa.array([f"name-{k}" for k in keys]),
            "weight": rng.random(DIMENSION_ROWS),
        }
    )
    pq.write_table(dim, root / "dim" / "dim.parquet")


def pipeline_plan(root: Path) -> dict[str, Any]:  # fmt: skip
    return {
        "storage": {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}},
        "query": [
            {
                "@id": 1,
                "op": "scan",
                "storageengine": "fs",
                "ref": "f",
                "selection": {"path": "/fact"},
            },
            {"@id": 2, "op": "filter", "input": 1, "expr": "f.x > 100"},
            {
                "@id": 3,
                "op": "project",
                "input": 2,
                "projections": [
                    {"ref": "output.g", "expr": "f.g"},
                    {"ref": "output.v", "expr": "f.x * 2"},
                ],
            },
            {"@id": 4, "op": "segment", "input": 3, "ref": "seg", "exprs": ["g"]},
            {
                "@id": 5,
                "op": "collapsingaggregate",
                "input": 4,
                "within": "seg",
                "carryovers": ["g"],
                "aggregations": [
                    {"ref": "total", "expr": "sum(v)"},
                    {"ref": "n", "expr": "count(1)"},
                ],
            },
            {"@id": 6, "op": "order", "input": 5, "orderings": [{"expr": "g"}]},
            {"@id": 7, "op": "store", "input": 6, "storageengine": "q", "target": {}},
        ],
    }


PIPELINE_SQL = """
SELECT g, sum(x * 2) AS total, count(*) AS n FROM read_parquet('{root}/fact/*.parquet')
WHERE x > 100 GROUP BY g ORDER BY g
"""


def join_plan(root: Path, out: str) -> dict[str, Any]:
    return {
        "storage": {"fs": {"type": "fs", "root": str(root)}},
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "f",
             "selection": {"path": "/fact"}},
            {"@id": 2, "op": "scan", "storageengine": "fs", "ref": "d",
             "selection": {"path": "/dim"}},
            {
                "@id": 3,
                "op": "join",
                "left": 1,
                "right": 2,
                "type": "inner",
                "conditions": [{"relationship": "==", "left": "f.k", "right": "d.k"}],
            },
            {"@id": 4, "op": "store", "input": 3, "storageengine": "fs",
             "target": {"path": out, "format": "parquet"}},
        ],
    }  # fmt: skip


JOIN_SQL = """
COPY (
  SELECT {{'id': f.id, 'g': f.g, 'k': f.k, 'x': f.x, 's': f.s}} AS f,
         {{'k': d.k, 'name': d.name, 'weight': d.weight}} AS d
  FROM read_parquet('{root}/fact/*.parquet') f JOIN read_parquet('{root}/dim/*.parquet') d
  ON f.k = d.k
) TO '{out}' (FORMAT parquet)
"""


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def compare(
    name: str, ours: Callable[[], Any], peer: Callable[[], Any], repeat: int
) -> tuple[float, float]:
    ours(), peer()  # warm-up: imports, page cache, DuckDB's first query
    ours_times, peer_times = [], []
    for _ in range(repeat):
        ours_times.append(timed(ours)[0])
        peer_times.append(timed(peer)[0])
    local, duck = statistics.median(ours_times), statistics.median(peer_times)
    print(f"{name:<9} local {local:7.2f} s   duckdb {duck:7.2f} s   ratio {local / duck:5.2f}")
    return local, duck


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="DuckDB threads")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-local-") as tmp:
        root = Path(tmp)
        generate(root, args.rows)
        con = duckdb.connect()
        if args.threads:
            con.execute(f"SET threads = {args.threads}")

        def ours_pipeline() -> list[dict[str, Any]]:
            return run_plan(pipeline_plan(root), executor="local").records()

        def ours_unfused() -> list[dict[str, Any]]:  # segment and collapsingaggregate apart
            plan = pipeline_plan(root)
            return run_plan(plan, executor="local", params={"fuse_segments": False}).records()

        def duck_pipeline() -> list[dict[str, Any]]:
            table = con.sql(PIPELINE_SQL.format(root=root)).to_arrow_table()
            return table.to_pylist()

        expected = duck_pipeline()
        assert ours_pipeline() == expected, "the pipeline's records differ from DuckDB's"
        assert ours_unfused() == expected, "the unfused pipeline's records differ from DuckDB's"
        outs = iter(range(1_000_000))

        def ours_join() -> int:
            result = run_plan(join_plan(root, f"/out/local-{next(outs)}"), executor="local")
            return result.stores[0].row_count

        def duck_join() -> int:
            out = root / f"duck-{next(outs)}.parquet"
            con.execute(JOIN_SQL.format(root=root, out=out))
            return pq.ParquetFile(out).metadata.num_rows

        assert ours_join() == duck_join() == args.rows, "the join wrote another row count"
        print(f"{args.rows:,} rows x {DIMENSION_ROWS:,}; medians of {args.repeat} alternating runs")
        compare("pipeline", ours_pipeline, duck_pipeline, args.repeat)
        compare("unfused", ours_unfused, duck_pipeline, args.repeat)
        compare("join", ours_join, duck_join, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
