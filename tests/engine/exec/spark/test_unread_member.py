"""The unread member of a scanned record (engine.exec.spark.unread_member): Spark carries only the
members a plan reads, and no record leaving the compiler shows the member."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine import run_plan
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.paths import TopColumns, get_typed
from engine.exec.spark.sources import plan_scan, scan_plan_dataframe
from engine.exec.spark.unread_member import UNREAD, drop_unread, with_unread, without_unread
from engine.storage.engines import create_engine

EVENTS = [
    {"id": 1, "user": "a", "ts": 30},
    {"id": 2, "user": "b", "ts": 10},
    {"id": 3, "user": "a", "ts": 20},
]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    (tmp_path / "events.json").write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    return tmp_path


def scanned(spark: Any, root: Path, ref: str | None = "e") -> Any:
    engine = create_engine("fs", {"type": "fs", "root": str(root)})
    return scan_plan_dataframe(spark, plan_scan(engine, {"path": "events.json"}), ref)


def optimized(df: Any) -> str:
    return df._jdf.queryExecution().optimizedPlan().toString()


def test_a_scanned_record_carries_the_member_and_a_record_without_a_ref_does_not(
    spark: Any, data: Path
) -> None:
    assert scanned(spark, data).schema["e"].dataType.fieldNames() == ["id", "user", "ts", UNREAD]
    assert UNREAD not in scanned(spark, data, ref=None).columns


def test_spark_carries_the_members_read_through_a_sort_not_the_record(
    spark: Any, data: Path
) -> None:
    every_member = [F.col("e.id"), F.col("e.ts"), F.col("e.user")]
    ours = scanned(spark, data).orderBy("e.ts").select(*every_member)
    # The same record without the member: every member is read, so Spark sorts whole records.
    plain = scanned(spark, data).withColumn("e", F.col("e").dropFields(UNREAD))
    theirs = plain.orderBy("e.ts").select(*every_member)
    assert "_extract_id" in optimized(ours)
    assert "_extract_" not in optimized(theirs)
    assert [tuple(r) for r in ours.collect()] == [(2, 10, "b"), (3, 20, "a"), (1, 30, "a")]


def test_a_record_read_whole_has_no_unread_member(spark: Any, data: Path) -> None:
    df = scanned(spark, data)
    whole = get_typed(df.schema, ("e",))
    assert whole.dtype.fieldNames() == ["id", "user", "ts"]
    assert TopColumns(df.schema).read(("e",)).dtype == whole.dtype
    assert get_typed(df.schema, ("e", "ts")).dtype.simpleString() == "bigint"
    assert drop_unread(F.col("x"), whole.dtype)[1] is whole.dtype  # nothing to drop
    assert df.orderBy(SEQ_COLUMN).select(whole.column.alias("r")).first()["r"].asDict() == EVENTS[0]


def test_without_unread_drops_the_member_of_every_record_column(spark: Any, data: Path) -> None:
    df = scanned(spark, data).withColumn("f", F.col("e"))
    out = without_unread(df)
    assert [f.dataType.fieldNames() for f in out.schema if f.name in ("e", "f")] == [
        ["id", "user", "ts"],
        ["id", "user", "ts"],
    ]
    plain = without_unread(out)
    assert plain is out  # nothing left to drop: the same DataFrame


def plan_over(root: Path, out: Path, *ops: dict[str, Any]) -> dict[str, Any]:
    return {
        "storage": {
            "data": {"type": "fs", "root": str(root)},
            "out": {"type": "fs", "root": str(out)},
            "q": {"type": "queue"},
        },
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "data", "ref": "e",
             "selection": {"path": "events.json"}},
            *ops,
        ],
    }  # fmt: skip


def test_stores_and_outputs_never_show_the_member(spark: Any, data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    plan = plan_over(
        data,
        out,
        # The record stored as it was scanned, read whole by a project, and carried by an
        # aggregate; a union with records made by a constant; a join merging two records `e`.
        {"@id": 2, "op": "store", "input": 1, "storageengine": "out",
         "target": {"path": "scanned", "format": "parquet"}},
        {"@id": 3, "op": "project", "input": 1, "projections": [{"ref": "output.copy", "expr": "e"}]},
        {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {"number": 0}},
        {"@id": 5, "op": "segment", "input": 1, "ref": "g", "exprs": ["e.user"]},
        {"@id": 6, "op": "collapsingaggregate", "input": 5, "within": "g", "carryovers": ["e"],
         "aggregations": [{"ref": "n", "expr": "count(1)"}]},
        {"@id": 7, "op": "store", "input": 6, "storageengine": "q", "target": {"number": 1}},
        {"@id": 8, "op": "constant", "content": [{"e": {"id": 9, "user": "z", "ts": 0}}]},
        {"@id": 9, "op": "union", "inputs": [1, 8]},
        {"@id": 10, "op": "store", "input": 9, "storageengine": "q", "target": {"number": 2}},
        {"@id": 11, "op": "join", "left": 1, "right": 1, "type": "inner",
         "conditions": [{"relationship": "==", "left": "e.id", "right": "e.id"}]},
        {"@id": 12, "op": "store", "input": 11, "storageengine": "q", "target": {"number": 3}},
    )  # fmt: skip
    result = run_plan(plan, executor="spark", spark=spark)
    assert pq.read_table(out / "scanned").schema.field("e").type.names == ["id", "user", "ts"]
    records = result.records()
    assert all(UNREAD not in json.dumps(r) for r in records)
    assert [r for r in records if "copy" in r] == [{"copy": e} for e in EVENTS]
    assert [r for r in records if "n" in r] == [{"e": EVENTS[2], "n": 2}, {"e": EVENTS[1], "n": 1}]
    made = {"id": 9, "user": "z", "ts": 0}
    assert [r["e"] for r in records if set(r) == {"e"}] == [*EVENTS, made, *EVENTS]


def test_a_record_left_with_the_member_alone_reads_as_an_empty_record(spark: Any) -> None:
    df = spark.createDataFrame([({"x": 1},), (None,)], "e struct<x:bigint>").select(
        F.when(F.col("e").isNotNull(), with_unread([F.col("e.x").alias("x")])).alias("e")
    )
    emptied = df.select(F.col("e").dropFields("x").alias("e"))  # as a flatten's `drop` may leave it
    value = get_typed(emptied.schema, ("e",))
    assert value.dtype == T.StructType()
    assert [r["e"] for r in without_unread(emptied).collect()] == [Row(), None]
    assert [r["v"] for r in emptied.select(value.column.alias("v")).collect()] == [Row(), None]


def test_a_value_carried_as_it_is_keeps_the_member(spark: Any, data: Path) -> None:
    schema = scanned(spark, data).schema
    assert get_typed(schema, ("e",), keep_unread=True).dtype == schema["e"].dataType
    assert UNREAD not in get_typed(schema, ("e",)).dtype.fieldNames()
