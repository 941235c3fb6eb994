"""A store written by one executor can be overwritten by the other: same parquet types."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from engine import run_plan


def _plan(root: Path) -> dict:
    return {
        "storage": {"fs": {"type": "fs", "root": str(root)}},
        "query": [
            {"@id": 1, "op": "constant", "content": [{"ts": "2024-01-01T10:00:00Z", "n": 1}]},
            {"@id": 2, "op": "project", "input": 1, "projections": [
                {"ref": "output.ts", "expr": "to_timestamp(ts)"}, {"ref": "output.n", "expr": "n"}]},
            {"@id": 3, "op": "store", "input": 2, "storageengine": "fs",
             "target": {"path": "out", "format": "parquet"}},
        ],
    }  # fmt: skip


def test_spark_and_local_stores_write_the_same_timestamp_type(tmp_path: Path, spark) -> None:
    plan = _plan(tmp_path)
    run_plan(plan, executor="spark", spark=spark)
    spark_schema = pq.read_table(tmp_path / "out").schema
    assert spark_schema.field("ts").type == pa.timestamp("us", tz="UTC")
    run_plan(plan, executor="local")  # an overwrite: the schemas must agree
    run_plan(plan, executor="spark", spark=spark)
    assert pq.read_table(tmp_path / "out").column("n").to_pylist() == [1]
