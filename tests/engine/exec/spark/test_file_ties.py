"""An order reading a parquet scan looks up a row's file only where rows of another file may hold
its key (engine.exec.spark.file_ties): the files' footers bound each file's key values; rows
outside the values two files share are ordered by Spark's row ids alone. Either way the records
are the local executor's, in the same order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.exec.spark.file_ties import (
    MAX_INTERVALS,
    KeyRange,
    SharedValues,
    cross_file_ties,
    key_range,
    shared_values,
)
from engine.exec.spark.read_paths import spark_input_file_name
from engine.plan import parse_plan
from engine.planner.properties.order_needs import scans_ordered_by_keys
from engine.run import run_plan

# Files in path order a, b, c of growing sizes: Spark packs them biggest first (c, b, a), so its
# row ids put c's rows before a's; a tie on k = 5 must keep a's rows first.
FILES = {
    "a": [5, 1, 5, 2],
    "b": [7, 5, *range(100, 300)],
    "c": [5, 9, *range(1000, 3000)],
}


def write_files(directory: Path, files: dict[str, list[int | None]], **columns: Any) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, keys in files.items():
        table = pa.table({
            "k": pa.array(keys, pa.int64()),
            "f": [name] * len(keys),
            "i": list(range(len(keys))),
            **{c: pa.array([make(k) for k in keys]) for c, make in columns.items()},
        })  # fmt: skip
        pq.write_table(table, directory / f"{name}.parquet")


def ordered(root: Path, keys: list[str], *, last: int | None = None) -> dict[str, Any]:
    """``t`` ordered by ``keys`` (ascending), optionally its first ``last`` records only."""
    ops: list[dict[str, Any]] = [
        {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "t",
         "selection": {"path": "t", "format": "parquet"}},
        {"@id": 2, "op": "order", "input": 1,
         "orderings": [{"order": "asc", "expr": f"t.{key}"} for key in keys]},
    ]  # fmt: skip
    if last is not None:
        ops.append({"@id": 3, "op": "limit", "input": 2, "first": 0, "last": last})
    ops += [
        {"@id": 4, "op": "project", "input": ops[-1]["@id"], "projections": [
            {"ref": "output.k", "expr": "t.k"}, {"ref": "output.f", "expr": "t.f"},
            {"ref": "output.i", "expr": "t.i"}]},
        {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {}},
    ]  # fmt: skip
    storage = {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}}
    return {"storage": storage, "query": ops}


def run_both(spark: Any, plan: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The Spark executor's records (checked equal to the local executor's) and its plan."""
    records = run_plan(parse_plan(plan), executor="spark", spark=spark).records()
    assert records == run_plan(parse_plan(plan), executor="local").records()
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    return records, executions.apply(executions.size() - 1).physicalPlanDescription()


# -- on Spark -----------------------------------------------------------------------------------


def test_rows_of_files_sharing_a_key_are_found_by_file_name(spark: Any, tmp_path: Path) -> None:
    write_files(tmp_path / "t", FILES)
    records, plan = run_both(spark, ordered(tmp_path, ["k"]))
    fives = [(r["f"], r["i"]) for r in records if r["k"] == 5]
    assert fives == [("a", 0), ("a", 2), ("b", 1), ("c", 0)]  # file order, then row order
    # Only rows with a shared value (5 to 299: b's and c's values meet) read their file's name;
    # no row builds _metadata.
    assert "input_file_name()" in plan and "(k#" in plan and "299" in plan, plan
    assert "_metadata" not in plan and "file_size" not in plan, plan


def test_a_top_n_cut_inside_a_tie_keeps_the_first_files_rows(spark: Any, tmp_path: Path) -> None:
    write_files(tmp_path / "t", FILES)
    records, _ = run_both(spark, ordered(tmp_path, ["k"], last=4))
    assert [(r["k"], r["f"], r["i"]) for r in records] == [
        (1, "a", 1), (2, "a", 3), (5, "a", 0), (5, "a", 2)]  # fmt: skip


def test_files_sharing_no_key_value_order_by_row_ids_alone(spark: Any, tmp_path: Path) -> None:
    files = {"a": [3, 1, 3], "b": [10, 12, 10, *range(20, 200)], "c": [500, 500, *range(600, 900)]}
    write_files(tmp_path / "t", files)
    records, plan = run_both(spark, ordered(tmp_path, ["k"]))
    assert [(r["f"], r["i"]) for r in records[:3]] == [("a", 1), ("a", 0), ("a", 2)]
    assert "monotonically_increasing_id()" in plan
    assert "input_file_name()" not in plan and "_metadata" not in plan, plan


def test_nulls_in_two_files_are_shared_values(spark: Any, tmp_path: Path) -> None:
    files: dict[str, list[int | None]] = {
        "a": [None, 1, None],
        "b": [40, None, *range(50, 250)],
        "c": [900, *range(1000, 3000)],
    }
    write_files(tmp_path / "t", files)
    records, plan = run_both(spark, ordered(tmp_path, ["k"]))
    # Nulls sort first: a's two, then b's.
    assert [(r["f"], r["i"]) for r in records[:3]] == [("a", 0), ("a", 2), ("b", 1)]
    assert "isnull(k#" in plan and "input_file_name()" in plan, plan


def test_a_floating_key_keeps_the_lookup_of_every_rows_file(spark: Any, tmp_path: Path) -> None:
    # Footers do not bound floating values as a sort compares them (-0.0 ties 0.0, NaN).
    write_files(tmp_path / "t", FILES, x=lambda k: float(k % 3))
    _, plan = run_both(spark, ordered(tmp_path, ["x"]))  # many ties, in the local order
    assert "file_size" in plan and "input_file_name()" not in plan, plan


def test_more_files_than_compares_keep_the_lookup_of_every_rows_file(
    spark: Any, tmp_path: Path
) -> None:
    # Beyond CASE_LOOKUP_FILES files a row's file is found in array literals, for every row.
    files = {f"f{i}": [10 * i + 1, 10 * i, *range(10 * i + 2, 10 * i + 2 + i)] for i in range(9)}
    write_files(tmp_path / "t", files)
    records, plan = run_both(spark, ordered(tmp_path, ["k"]))
    assert [(r["f"], r["i"]) for r in records[:2]] == [("f0", 1), ("f0", 0)]
    assert "file_size" in plan and "input_file_name()" not in plan, plan


def test_the_file_name_spark_gives_each_row(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "a b%c" / "ü+x" / "f #1;=,ä.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.table({"x": [1]}), path)
    (row,) = spark.read.parquet(str(path)).select(F.input_file_name().alias("name")).collect()
    assert row["name"] == spark_input_file_name(path)


# -- which scans ---------------------------------------------------------------------------------


def plan_ops(*ops: dict[str, Any]) -> list[Any]:
    storage = {"fs": {"type": "fs", "root": "/d"}}
    return parse_plan({"storage": storage, "query": list(ops)}).topological_order()


SCAN = {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "t", "selection": {"path": "t"}}


def order(op_id: int, source: int, *exprs: str, **extra: Any) -> dict[str, Any]:
    orderings = [{"expr": e} for e in exprs]
    return {"@id": op_id, "op": "order", "input": source, "orderings": orderings, **extra}


def store(op_id: int, source: int) -> dict[str, Any]:
    return {"@id": op_id, "op": "store", "input": source, "storageengine": "fs",
            "target": {"path": f"o{op_id}"}}  # fmt: skip


def test_a_scan_only_an_order_reads_is_ordered_by_its_member_keys() -> None:
    ops = plan_ops(SCAN, order(2, 1, "t.K", "t.a.b", "t.x * 2", "u.y"), store(3, 2))
    assert scans_ordered_by_keys(ops) == {"1": frozenset({"k"})}


@pytest.mark.parametrize(
    "ops",
    [
        # Another reader reads the scan's order too.
        [SCAN, order(2, 1, "t.k"), store(3, 2), store(4, 1)],
        # An order within runs keeps the runs in input order.
        [SCAN, order(2, 1, "t.k", within="t.g"), store(3, 2)],
        # A filter first: not the order reading the scan.
        [SCAN, {"@id": 2, "op": "filter", "input": 1, "expr": "t.k > 1"}, order(3, 2, "t.k"),
         store(4, 3)],
        # No key reads a member of the scan's records.
        [SCAN, order(2, 1, "t.k + 1"), store(3, 2)],
        # A pushed limit: the scan's first records are the ones read.
        [{**SCAN, "pushedLimit": 3}, order(2, 1, "t.k"), store(3, 2)],
    ],
    ids=["two-readers", "within", "filter", "no-member-key", "pushed-limit"],
)  # fmt: skip
def test_other_scans_keep_their_whole_order(ops: list[dict[str, Any]]) -> None:
    assert scans_ordered_by_keys(plan_ops(*ops)) == {}


# -- footers and shared values -------------------------------------------------------------------


def footer(tmp_path: Path, table: pa.Table, **options: Any) -> pq.FileMetaData:
    path = tmp_path / f"f{len(list(tmp_path.iterdir()))}.parquet"
    pq.write_table(table, path, **options)
    return pq.read_metadata(path)


def test_a_footer_bounds_a_signed_integer_column_over_its_row_groups(tmp_path: Path) -> None:
    table = pa.table({"K": pa.array([7, None, -3, 12, 4], pa.int8())})
    meta = footer(tmp_path, table, row_group_size=2)
    assert meta.num_row_groups == 3
    assert key_range(meta, "k") == KeyRange(-3, 12, True)  # names compare case-insensitively
    only_nulls = footer(tmp_path, pa.table({"k": pa.array([None, None], pa.int64())}))
    assert key_range(only_nulls, "k") == KeyRange(None, None, True)


@pytest.mark.parametrize(
    "values",
    [
        pa.array([1, 2], pa.uint32()),
        pa.array([1.0, 2.0], pa.float64()),
        pa.array([1, 2], pa.date32()),
        pa.array([1, 2], pa.timestamp("us")),
        pa.array(["a", "b"]),
        pa.array([[1], [2]]),
    ],
    ids=["unsigned", "double", "date", "timestamp", "string", "list"],
)
def test_other_columns_are_not_bounded(tmp_path: Path, values: pa.Array) -> None:
    assert key_range(footer(tmp_path, pa.table({"k": values})), "k") is None


def test_a_file_without_statistics_or_the_column_is_not_bounded(tmp_path: Path) -> None:
    table = pa.table({"k": pa.array([1, 2], pa.int64())})
    assert key_range(footer(tmp_path, table, write_statistics=False), "k") is None
    assert key_range(footer(tmp_path, table), "other") is None


def test_shared_values_are_those_two_files_may_hold() -> None:
    assert shared_values("k", [KeyRange(1, 4, False), KeyRange(5, 9, False)]).intervals == ()
    ranges = [KeyRange(1, 10, True), KeyRange(3, 4, False), KeyRange(8, 20, False)]
    assert shared_values("k", ranges) == SharedValues("k", ((3, 4), (8, 10)), False)
    # One file's nulls tie with none of another file.
    assert not shared_values("k", [KeyRange(None, None, True), KeyRange(1, 2, False)]).nulls


def test_too_many_shared_intervals_become_one() -> None:
    ranges = [KeyRange(10 * i, 10 * i + 1, False) for i in range(MAX_INTERVALS + 2)]
    ranges += [KeyRange(10 * i + 1, 10 * i + 2, False) for i in range(MAX_INTERVALS + 2)]
    assert shared_values("k", ranges).intervals == ((1, 10 * (MAX_INTERVALS + 1) + 1),)


@given(
    st.lists(
        st.tuples(st.integers(-20, 20), st.integers(0, 8), st.booleans(), st.booleans()),
        max_size=6,
    )
)
def test_shared_values_are_exactly_the_values_two_ranges_hold(
    drawn: list[tuple[int, int, bool, bool]],
) -> None:
    ranges = [
        KeyRange(None, None, True) if empty else KeyRange(low, low + width, nulls)
        for low, width, nulls, empty in drawn
    ]
    found = shared_values("k", ranges)
    covered = {
        v
        for v in range(-30, 31)
        if sum(r.low is not None and r.high is not None and r.low <= v <= r.high for r in ranges)
        > 1
    }
    # Six ranges share at most five intervals: none merged into one.
    assert {v for low, high in found.intervals for v in range(low, high + 1)} == covered
    assert found.nulls == (sum(r.nulls for r in ranges) > 1)
    assert list(found.intervals) == sorted(found.intervals)


def test_the_key_whose_files_share_fewest_values_is_chosen(tmp_path: Path) -> None:
    first = footer(tmp_path, pa.table({"a": [1, 5], "b": [1, 3], "x": [0.5, 1.5]}))
    second = footer(tmp_path, pa.table({"a": [2, 9], "b": [3, 4], "x": [0.5, 1.5]}))
    schema = T.StructType([
        T.StructField("a", T.LongType()), T.StructField("b", T.LongType()),
        T.StructField("x", T.DoubleType()),
    ])  # fmt: skip
    assert cross_file_ties(["x", "a", "b"], schema, [first, second]) == SharedValues(
        "b", ((3, 3),), False
    )
    assert cross_file_ties(["x"], schema, [first, second]) is None
