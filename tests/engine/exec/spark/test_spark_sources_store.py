"""Stores on Spark: fs targets written by Spark and committed atomically (the protocol of
engine.storage.commit), partitions, modes, and the queue and console sinks."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from engine.errors import StorageError
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.sources import constant_dataframe
from engine.exec.spark.stores import store_dataframe
from engine.scan.framework import FileScan
from engine.storage.engines import ConsoleEngine, create_engine

ROWS = [
    {"id": 1, "day": "d1", "city": "a/b", "v": 1.5},
    {"id": 2, "day": "d2", "city": "c", "v": None},
    {"id": 3, "day": "d1", "city": None, "v": 3.0},
]


def fs(root: Path):
    return create_engine("out", {"type": "fs", "root": str(root)})


def read_back(root: Path, path: str, fmt: str) -> list[dict]:
    scan = FileScan(fs(root), {"path": path, "format": fmt})
    return sorted((r for b in scan.batches() for r in b.to_pylist()), key=lambda r: r["id"])


def leftovers(root: Path) -> list[str]:
    return sorted(n for n in os.listdir(root) if ".staging-" in n or ".spark-" in n)


@pytest.fixture(scope="module")
def rows(spark):
    return constant_dataframe(spark, ROWS)


@pytest.mark.parametrize("fmt", ["parquet", "json", "csv"])
def test_fs_stores_write_every_row_and_commit_a_version(rows, tmp_path: Path, fmt: str) -> None:
    result = store_dataframe(rows, fs(tmp_path), {"path": "t", "format": fmt})
    assert result.row_count == 3 and result.format == fmt and result.version
    assert result.schema.names == ["id", "day", "city", "v"]  # the sequence column is dropped
    assert all(Path(f).is_file() and f.startswith(str(tmp_path / "t")) for f in result.files)
    assert (tmp_path / "t").is_symlink()
    back = read_back(tmp_path, "t", fmt)
    if fmt == "csv":  # csv is text: every value comes back as a string, null as ""
        assert back == [{k: "" if v is None else str(v) for k, v in r.items()} for r in ROWS]
    else:
        assert back == ROWS


def test_partitioned_overwrite_replaces_only_the_partitions_written(rows, tmp_path: Path) -> None:
    engine = fs(tmp_path)
    target = {"path": "p", "partitionBy": ["day"]}
    first = store_dataframe(rows, engine, target)
    assert first.partitions == ("day=d1", "day=d2")
    second = store_dataframe(
        rows.filter(F.col("id") == 2).withColumn("v", F.lit(9.0)), engine, target
    )
    assert second.row_count == 1 and second.partitions == ("day=d2",)
    back = read_back(tmp_path, "p", "parquet")
    assert [(r["id"], r["day"], r["v"]) for r in back] == [  # day=... directories: column day
        (1, "d1", 1.5),
        (2, "d2", 9.0),
        (3, "d1", 3.0),
    ]
    retyped = rows.filter(F.col("id") == 2).withColumn("v", F.lit("nine"))
    with pytest.raises(
        StorageError, match=r"has the schema \(id: int64, city: string, v: double\)"
    ):
        store_dataframe(retyped, engine, target)


def test_static_partition_values_name_the_leading_directories(rows, tmp_path: Path) -> None:
    engine = fs(tmp_path)
    target = {"path": "s", "partitionBy": ["run", "day"]}
    result = store_dataframe(rows, engine, target, partition_values={"run": "r1"})
    assert result.partitions == ("run=r1", "run=r1/day=d1", "run=r1/day=d2")
    assert sorted(p.name for p in (tmp_path / "s" / "run=r1").iterdir()) == ["day=d1", "day=d2"]


def test_a_failed_write_leaves_the_previous_version(rows, tmp_path: Path) -> None:
    engine = fs(tmp_path)
    store_dataframe(rows, engine, {"path": "t"})
    before = read_back(tmp_path, "t", "parquet")
    failing = rows.withColumn(
        "v", F.when(F.col("id") == 3, F.raise_error(F.lit("disk on fire"))).otherwise(F.col("v"))
    )
    with pytest.raises(StorageError, match=r"disk on fire.*previous version is unchanged"):
        store_dataframe(failing, engine, {"path": "t"})
    assert read_back(tmp_path, "t", "parquet") == before
    assert leftovers(tmp_path) == []


def test_modes_error_and_append(rows, tmp_path: Path) -> None:
    engine = fs(tmp_path)
    store_dataframe(rows, engine, {"path": "m", "mode": "error"})
    with pytest.raises(StorageError, match="already exists"):
        store_dataframe(rows, engine, {"path": "m", "mode": "error"})
    appended = store_dataframe(rows.limit(1), engine, {"path": "m", "mode": "append"})
    assert appended.row_count == 1
    assert [r["id"] for r in read_back(tmp_path, "m", "parquet")] == [1, 1, 2, 3]


def test_an_empty_result_still_writes_its_schema(rows, tmp_path: Path) -> None:
    result = store_dataframe(rows.filter(F.col("id") > 9), fs(tmp_path), {"path": "e"})
    assert result.row_count == 0 and len(result.files) == 1


def test_bad_targets_fail_before_spark_runs(rows, tmp_path: Path) -> None:
    engine = fs(tmp_path)
    nested = rows.select("id", F.struct("day").alias("m"))
    with pytest.raises(StorageError, match="csv stores only scalar columns"):
        store_dataframe(nested, engine, {"path": "c", "format": "csv"})
    with pytest.raises(StorageError, match="partitionBy names 'nope'"):
        store_dataframe(rows, engine, {"path": "c", "partitionBy": ["nope"]})
    with pytest.raises(StorageError, match="escapes the root"):
        store_dataframe(rows, engine, {"path": "../c"})
    assert not (tmp_path / "c").exists()


def test_queue_and_console_sinks_collect_the_records(rows) -> None:
    queue = create_engine("q", {"type": "queue"})
    received: list = []
    result = store_dataframe(rows.orderBy(SEQ_COLUMN), queue, {"number": 1}, sink_records=received)
    assert result.row_count == 3 and queue.records(1) == ROWS == received
    console = ConsoleEngine("c", stream=io.StringIO())
    store_dataframe(rows.orderBy(SEQ_COLUMN).limit(1), console, {"pipe": "STD_OUT"})
    assert console.stream.getvalue() == '{"id": 1, "day": "d1", "city": "a/b", "v": 1.5}\n'
