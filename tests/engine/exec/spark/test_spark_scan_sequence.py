"""The scan sequence on Spark: parquet rows numbered densely (footer row counts and each row's
index in its file), with widths that keep pairs of sequences longs, and decimals only where
the widths do not fit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T
from spark_plans import physical_plan

from engine.exec.spark.compiler_join import join_sequence_long
from engine.exec.spark.compiler_order import LONG_BITS, SEQ_BITS, pair_bits
from engine.exec.spark.executor import SparkPlanRun
from engine.exec.spark.names import SEQ_COLUMN
from engine.plan import parse_plan
from engine.run import build_engines, run_plan


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """``t``: 3 parquet files of 5, 0 and 7 rows (row groups of 2); ``u``: 1 file of 6 rows;
    ``j``: the same 6 rows as JSON lines."""
    (tmp_path / "t").mkdir()
    (tmp_path / "u").mkdir()
    (tmp_path / "j").mkdir()
    for name, keys in [("a", [3, 1, 2, 1, 4]), ("b", []), ("c", [2, 2, 5, 1, 3, 9, 4])]:
        table = pa.table(
            {"k": pa.array(keys, pa.int64()), "f": pa.array([name] * len(keys), pa.string())}
        )
        pq.write_table(table, tmp_path / "t" / f"{name}.parquet", row_group_size=2)
    right = pa.table({"k": pa.array([1, 2, 2, 4, 7, 3], pa.int64()), "r": list("uvwxyz")})
    pq.write_table(right, tmp_path / "u" / "part-0.parquet", row_group_size=2)
    lines = [json.dumps(r) for r in right.to_pylist()]
    (tmp_path / "j" / "part-0.json").write_text("\n".join(lines) + "\n")
    return tmp_path


def scan(op_id: int, ref: str, path: str, fmt: str = "parquet") -> dict[str, Any]:
    selection = {"path": path, "format": fmt}
    return {"@id": op_id, "op": "scan", "storageengine": "fs", "ref": ref, "selection": selection}


def plan_of(root: Path, *ops: dict[str, Any]) -> dict[str, Any]:
    storage = {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}}
    return {"storage": storage, "query": list(ops)}


def queue(op_id: int, source: int) -> dict[str, Any]:
    return {"@id": op_id, "op": "store", "input": source, "storageengine": "q", "target": {}}


def run_of(spark: Any, plan: dict[str, Any]) -> SparkPlanRun:
    parsed = parse_plan(plan)
    engines = build_engines(parsed, base_dir=None, classpath=[])
    return SparkPlanRun(parsed, spark, engines=engines, params={})


def join(op_id: int, how: str, left: int = 1, right: int = 2, key: str = "u.k") -> dict[str, Any]:
    conditions = [{"relationship": "==", "left": "t.k", "right": key}]
    return {"@id": op_id, "op": "join", "left": left, "right": right, "type": how,
            "conditions": conditions}  # fmt: skip


def test_a_parquet_scan_numbers_its_rows_densely_in_file_order(spark: Any, data: Path) -> None:
    # A union pairs the scan's sequence with its other input's: the rows are numbered densely.
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        {"@id": 2, "op": "filter", "input": 1, "expr": "t.k > 1"},
        {"@id": 3, "op": "constant", "content": [{"t": {"k": 0, "f": "z"}}]},
        {"@id": 4, "op": "union", "inputs": [2, 3]},
        queue(5, 4),
    )
    run = run_of(spark, plan)
    result = run.run()
    assert run.properties["1"].paired
    field = run.frames["2"].schema[SEQ_COLUMN]
    assert field.dataType == T.LongType()
    assert field.metadata[SEQ_BITS] == 4  # 12 rows: 0..11
    # The filter skips row groups; the numbers stay the rows' places in the whole scan.
    seqs = [r[SEQ_COLUMN] for r in run.frames["2"].orderBy(SEQ_COLUMN).collect()]
    assert seqs == [0, 2, 4, 5, 6, 7, 9, 10, 11]
    assert [r["t"]["k"] for r in result.records()] == [3, 2, 4, 2, 2, 5, 3, 9, 4, 0]


def test_a_parquet_scan_nothing_pairs_numbers_its_rows_by_spark_row_ids(
    spark: Any, data: Path
) -> None:
    # No join or union, and the records left to the project: the row ids Spark gives (no row
    # index read), in file order all the same; ties on the order's key keep that order.
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        {"@id": 2, "op": "filter", "input": 1, "expr": "t.k > 1"},
        {"@id": 3, "op": "order", "input": 2, "orderings": [{"order": "asc", "expr": "t.f"}]},
        {"@id": 4, "op": "project", "input": 3, "projections": [
            {"ref": "output.f", "expr": "t.f"}, {"ref": "output.k", "expr": "t.k"}]},
        queue(5, 4),
    )  # fmt: skip
    run = run_of(spark, plan)
    result = run.run()
    assert not run.properties["1"].paired and run.properties["1"].read_through
    records = run.dataframe("1")
    assert SEQ_BITS not in records.schema[SEQ_COLUMN].metadata  # no width known
    assert "row_index" not in physical_plan(records)
    assert result.records() == run_plan(parse_plan(plan), executor="local").records()
    assert [r["k"] for r in result.records()] == [3, 2, 4, 2, 2, 5, 3, 9, 4]


@pytest.mark.parametrize("how", ["inner", "left", "outer"])
def test_a_join_of_two_parquet_scans_pairs_sequences_into_a_long(
    spark: Any, data: Path, how: str
) -> None:
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        scan(2, "u", "u"),
        join(3, how),
        {"@id": 4, "op": "limit", "input": 3, "first": 0, "last": 100},
        queue(5, 4),
    )
    run = run_of(spark, plan)
    result = run.run()
    # The join leaves its records' select to the limit (PendingColumns): its frame is their base.
    field = run.dataframe("3").schema[SEQ_COLUMN]
    assert field.dataType == T.LongType()
    # Widths 4 and 3, plus one bit for each side that may be null.
    assert field.metadata[SEQ_BITS] == {"inner": 7, "left": 8, "outer": 9}[how]
    assert "decimal" not in physical_plan(run.frames["4"]).lower()
    assert result.records() == run_plan(plan, executor="local").records()


def test_a_group_of_joined_parquet_rows_takes_its_first_sequence_in_a_hash_aggregate(
    spark: Any, data: Path
) -> None:
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        scan(2, "u", "u"),
        join(3, "inner"),
        {"@id": 4, "op": "segment", "input": 3, "ref": "grp", "exprs": ["u.r"]},
        {"@id": 5, "op": "collapsingaggregate", "input": 4, "within": "grp",
         "carryovers": ["u.r"], "aggregations": [{"ref": "n", "expr": "count(1)"}]},
        join(6, "inner", left=1, right=5, key="n"),
        queue(7, 6),
    )  # fmt: skip
    run = run_of(spark, plan)
    result = run.run()
    text = physical_plan(run.frames["5"])
    assert "HashAggregate" in text
    assert "SortAggregate" not in text
    assert run.frames["5"].schema[SEQ_COLUMN].metadata[SEQ_BITS] == 7
    assert run.frames["6"].schema[SEQ_COLUMN].dataType == T.LongType()
    assert result.records() == run_plan(plan, executor="local").records()


def test_a_union_of_parquet_scans_pairs_the_input_index_into_a_long(spark: Any, data: Path) -> None:
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        scan(2, "t", "u"),
        {"@id": 3, "op": "union", "inputs": [1, 2], "distinct": True},
        queue(4, 3),
    )
    run = run_of(spark, plan)
    result = run.run()
    field = run.frames["3"].schema[SEQ_COLUMN]
    assert (field.dataType, field.metadata[SEQ_BITS]) == (T.LongType(), 5)
    assert "decimal" not in physical_plan(run.frames["3"]).lower()
    assert result.records() == run_plan(plan, executor="local").records()


def test_a_json_scan_has_no_known_width_so_its_join_pairs_into_a_decimal(
    spark: Any, data: Path
) -> None:
    plan = plan_of(data, scan(1, "t", "t"), scan(2, "u", "j", "json"), join(3, "left"), queue(4, 3))
    run = run_of(spark, plan)
    result = run.run()
    # The join leaves its records' select to the store (PendingColumns): its frame is their base.
    joined = run.dataframe("3")
    assert joined.schema[SEQ_COLUMN].dataType == T.DecimalType(38, 0)
    assert result.records() == run_plan(plan, executor="local").records()


def test_widths_that_do_not_fit_a_long_pair_into_a_decimal(spark: Any) -> None:
    assert pair_bits(40, 23) == 63
    assert pair_bits(40, 24) is None
    assert join_sequence_long(F.col("l"), F.col("r"), (40, False), (22, True))[1] == 63
    value, bits = join_sequence_long(F.col("l"), F.col("r"), (40, False), (23, True))
    assert bits is None
    frame = spark.createDataFrame([(2**40 - 1, None), (0, 2**23 - 1)], "l long, r long")
    assert frame.select(value.alias("s")).schema["s"].dataType == T.DecimalType(38, 0)
    # Unknown widths (any long) keep the decimal pairing.
    assert join_sequence_long(F.col("l"), F.col("r"))[1] is None
    long_value, long_bits = join_sequence_long(
        F.col("l"), F.col("r"), (LONG_BITS - 24, True), (22, True)
    )
    assert long_bits == LONG_BITS
    rows = [(None, 5), (3, None), (3, 0), (2**38, 2**22 - 1)]
    frame = spark.createDataFrame(rows, "l long, r long")
    got = [r["s"] for r in frame.select(long_value.alias("s")).collect()]
    # An unmatched right row goes past every left value; no match sorts before a match.
    assert got == [(2**39 << 23) + 6, 3 << 23, (3 << 23) + 1, (2**38 << 23) + 2**22]


@pytest.mark.parametrize("same_sizes", [False, True])
def test_a_scan_finds_a_rows_file_by_its_size_unless_two_files_share_one(
    spark: Any, data: Path, same_sizes: bool
) -> None:
    if same_sizes:  # a copy of c: two files of one size, found by path
        (data / "t" / "d.parquet").write_bytes((data / "t" / "c.parquet").read_bytes())
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        {"@id": 2, "op": "project", "input": 1, "projections": [
            {"ref": "output.k", "expr": "t.k"}, {"ref": "output.file", "expr": "filename"}]},
        {"@id": 3, "op": "limit", "input": 2, "first": 0, "last": 100},
        queue(4, 3),
    )  # fmt: skip
    run = run_of(spark, plan)
    result = run.run()
    text = physical_plan(run.frames["3"])
    assert ("file_path" in text, "file_size" in text) == (same_sizes, not same_sizes)
    assert run.frames["1"].schema[SEQ_COLUMN].metadata[SEQ_BITS] == (5 if same_sizes else 4)
    records = result.records()
    assert records == run_plan(plan, executor="local").records()
    assert len(records) == (19 if same_sizes else 12)


def test_the_row_index_column_spark_fills_is_metadata_row_index(spark: Any, data: Path) -> None:
    """The scan reads each row's index in its file as a column Spark's parquet reader fills
    (``sources.ROW_INDEX_COLUMN``, Spark's internal name, cheaper than ``_metadata``): the same
    values as ``_metadata.row_index`` over row groups and files, pushed filters included, and a
    plan with a filter on the scan keeps the sequence numbers dense and non-nullable."""
    from engine.exec.spark.native_scan import ROW_INDEX_COLUMN

    files = [str(data / "t" / f"{name}.parquet") for name in ("a", "c")]
    schema = T.StructType(
        [T.StructField("k", T.LongType()), T.StructField(ROW_INDEX_COLUMN, T.LongType())]
    )
    ours = spark.read.schema(schema).parquet(*files).where(F.col("k") > 1)
    theirs = spark.read.parquet(*files).where(F.col("k") > 1)  # Spark reads not both at once
    indexed = sorted(tuple(r) for r in ours.select("k", ROW_INDEX_COLUMN).collect())
    expected = sorted(tuple(r) for r in theirs.select("k", "_metadata.row_index").collect())
    assert indexed == expected
    assert {i for _, i in indexed} == {0, 2, 4, 1, 5, 6}  # a: 3, 2, 4; c: 2, 2, 5, 3, 9, 4
    filtered = {"@id": 2, "op": "filter", "input": 1, "expr": "t.k > 1"}
    also = {"@id": 3, "op": "constant", "content": [{"t": {"k": 0, "f": "z"}}]}
    union = {"@id": 4, "op": "union", "inputs": [2, 3]}  # pairs the scan's sequence: dense
    plan = plan_of(data, scan(1, "t", "t"), filtered, also, union, queue(5, 2))
    run = run_of(spark, plan)
    run.compile_frames()
    frame = run.frames["2"]
    assert not frame.schema[SEQ_COLUMN].nullable
    seqs = [r[SEQ_COLUMN] for r in frame.select(SEQ_COLUMN).collect()]
    assert sorted(seqs) == [0, 2, 4, 5, 6, 7, 9, 10, 11]  # a's rows 0-4, c's from 5
    assert (
        run_plan(parse_plan(plan), executor="spark", spark=spark).records()
        == run_plan(parse_plan(plan), executor="local").records()
    )
