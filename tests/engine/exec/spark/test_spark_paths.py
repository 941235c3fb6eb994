"""Data-tree paths on Spark DataFrames agree with the local executor's trees on the same Arrow data."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.errors import TreePathError
from engine.exec.spark.names import quote_name
from engine.exec.spark.paths import (
    TopColumns,
    Typed,
    build_columns,
    get_path,
    with_path,
)
from engine.expr.arrow import trees

pytestmark = pytest.mark.spark

RECORDS = [
    {"e": {"id": 1, "tags": ["x", "y"], "m": {"k": 1}}, "items": [{"sku": "a", "n": 2}], "v": 10},
    {"e": None, "items": [], "v": None},
    {"e": {"id": 3, "tags": None, "m": None}, "items": None, "v": 30},
    {
        "e": {"id": None, "tags": [], "m": {"k": None}},
        "items": [{"sku": None, "n": 5}, None],
        "v": 40,
    },
]


def dropped(df, path):
    record = TopColumns(df.schema)
    record.drop(path)
    return record.select(df)


@pytest.fixture(scope="module")
def data(spark):
    batch = pa.RecordBatch.from_pylist(RECORDS)
    return batch, spark.createDataFrame(pa.Table.from_batches([batch]))


def rows(df) -> list[dict[str, Any]]:
    return df.toArrow().to_pylist()


READS = [
    ("e", "id"),
    ("e", "tags", 0),
    ("e", "tags", 1),
    ("e", "tags", 5),
    ("e", "tags", -1),
    ("items", "sku"),
    ("items", 0, "n"),
    ("items", 1, "sku"),
    ("e", "m", "k"),
    ("e", "missing"),
    ("missing",),
    ("v", "x"),
    ("v", 0),
    ("e", "tags", "nope"),
]


def test_reads_agree_with_the_local_trees(data) -> None:
    batch, df = data
    result = df.select(*[get_path(df, path).alias(f"r{i}") for i, path in enumerate(READS)])
    table = result.toArrow()
    for i, path in enumerate(READS):
        assert table.column(i).to_pylist() == trees.get_path(batch, path).to_pylist(), path


def test_a_missing_field_reads_as_a_typed_null_not_an_error(data) -> None:
    _, df = data
    assert str(df.select(get_path(df.schema, ("e", "nope", "deeper"))).schema[0].dataType) == (
        "NullType()"
    )


# (path, the Spark column, the same values for the local trees); columns need a live session.
WRITES = [
    (("e", "day"), lambda: F.lit("mon"), pa.array(["mon"] * 4)),
    (("e", "m", "k2"), lambda: F.col("v"), pa.array([10, None, 30, 40])),
    (("fresh", "a", "b"), lambda: F.col("v"), pa.array([10, None, 30, 40])),
    (("v", "inner"), lambda: F.lit(7), pa.array([7] * 4)),
    (("e",), lambda: F.lit(1), pa.array([1] * 4)),
]


@pytest.mark.parametrize(("path", "column", "values"), WRITES, ids=lambda v: str(v)[:20])
def test_writes_agree_with_the_local_trees(data, path, column, values) -> None:
    batch, df = data
    expected = trees.set_path(batch, path, values).to_pylist()
    assert rows(with_path(df, path, column())) == expected


def test_a_null_parent_map_exists_only_where_the_written_value_is_not_null(data) -> None:
    _, df = data
    written = rows(with_path(df, ("e", "extra"), F.col("v")))
    assert [r["e"] for r in written] == [
        {"id": 1, "tags": ["x", "y"], "m": {"k": 1}, "extra": 10},
        None,  # e was null and v is null: e stays null
        {"id": 3, "tags": None, "m": None, "extra": 30},
        {"id": None, "tags": [], "m": {"k": None}, "extra": 40},
    ]


def test_merge_maps_merges_member_by_member(data) -> None:
    batch, df = data
    update = F.struct(F.col("v").alias("k"), F.lit("z").alias("z"))
    local_update = pa.array([{"k": r["v"], "z": "z"} for r in RECORDS])
    expected = trees.set_path(batch, ("e", "m"), local_update, merge_maps=True).to_pylist()
    assert rows(with_path(df, ("e", "m"), update, merge_maps=True)) == expected


def test_writing_at_an_index_or_an_empty_path_is_refused(data) -> None:
    _, df = data
    with pytest.raises(TreePathError, match="list elements"):
        with_path(df, ("items", 0, "n"), F.lit(1))
    with pytest.raises(TreePathError, match="empty path"):
        with_path(df, (), F.lit(1))


@pytest.mark.parametrize(
    "path",
    [("e", "id"), ("e", "m", "k"), ("v",), ("missing",), ("e", "nope"), ("items", "sku")],
    ids=str,
)
def test_drops_agree_with_the_local_trees(data, path) -> None:
    batch, df = data
    assert rows(dropped(df, path)) == trees.remove_path(batch, path).to_pylist()


def test_dropping_the_last_member_leaves_an_empty_map_and_nulls_stay_null(spark) -> None:
    batch = pa.RecordBatch.from_pylist([{"m": {"k": 1}}, {"m": None}])
    df = spark.createDataFrame(pa.Table.from_batches([batch]))
    assert rows(dropped(df, ("m", "k"))) == [{"m": {}}, {"m": None}]
    assert trees.remove_path(batch, ("m", "k")).to_pylist() == [{"m": {}}, {"m": None}]


def test_build_columns_agrees_with_the_local_build_batch(data) -> None:
    batch, df = data
    spark_columns = [
        ((), F.col("e")),  # merge e's members into the root
        (("id",), F.col("v")),  # a later path overrides an earlier one
        (("out", "sku"), get_path(df, ("items", 0, "sku"))),
        (("out",), F.struct(F.col("v").alias("n"))),  # a later map merges into an earlier one
        ((), F.lit(None)),  # a null merged into the root adds nothing
    ]
    local_columns = [
        ((), trees.get_path(batch, ("e",))),
        (("id",), trees.get_path(batch, ("v",))),
        (("out", "sku"), trees.get_path(batch, ("items", 0, "sku"))),
        (("out",), pa.StructArray.from_arrays([trees.get_path(batch, ("v",))], names=["n"])),
        ((), pa.nulls(batch.num_rows)),
    ]
    expected = trees.build_batch(batch.num_rows, local_columns).to_pylist()
    assert rows(build_columns(df, spark_columns)) == expected


def test_members_written_one_by_one_agree_with_local_and_read_each_value_twice(data) -> None:
    # Ten members of a new map, then members of an existing one (null in a row), one replaced.
    batch, df = data
    writes = [(("r", f"m{i}"), 1000 + i) for i in range(10)]
    writes += [(("e", "id"), 2000), (("e", "extra"), 2001)]
    spark_columns = [(path, F.col("v") + F.lit(n)) for path, n in writes]
    plus = [pa.compute.add(trees.get_path(batch, ("v",)), n) for _, n in writes]
    local_columns = [(("e",), trees.get_path(batch, ("e",))), *zip((p for p, _ in writes), plus)]
    expected = trees.build_batch(batch.num_rows, local_columns).to_pylist()
    built = build_columns(df, [(("e",), F.col("e")), *spark_columns])
    assert rows(built) == expected
    # Each value is in the plan twice, as a member and in its map's null test: writes are not
    # nested in one another (ten writes nested gave Spark 10! copies of the first to analyse).
    plan = built._jdf.queryExecution().analyzed().toString()
    assert [plan.count(f"cast({n} as bigint)") for _, n in writes] == [2] * len(writes)


def test_build_columns_refuses_a_scalar_at_the_root(data) -> None:
    _, df = data
    with pytest.raises(TreePathError, match="only a map"):
        build_columns(df, [((), F.col("v"))])


def test_names_with_dots_and_backquotes_are_literal(spark) -> None:
    df = spark.createDataFrame([(1, {"x.y": 2})], "`a.b` bigint, `m` struct<`x.y`: bigint>")
    got = df.select(get_path(df, ("a.b",)), get_path(df, ("m", "x.y"))).collect()[0]
    assert tuple(got) == (1, 2)
    assert quote_name("we`ird") == "`we``ird`"


def test_top_columns_read_what_they_wrote_and_select_once(data) -> None:
    _, df = data
    record = TopColumns(df.schema)
    record.write(("e", "twice"), Typed(F.col("v") * 2, T.LongType()))
    doubled = record.read(("e", "twice"))
    record.write(("w",), Typed(doubled.column + 1, doubled.dtype))
    record.drop(("items",))
    record.drop(("e", "tags"))
    assert [(r["e"] or {}).get("twice") for r in rows(record.select(df))] == [20, None, 60, 80]
    assert [r["w"] for r in rows(record.select(df))] == [21, None, 61, 81]
    assert "items" not in record.select(df).columns
    assert record.read(("missing",)).dtype == T.NullType()
