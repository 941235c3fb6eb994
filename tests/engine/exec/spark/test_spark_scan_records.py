"""A scan whose one reader selects its own columns of the records (a project, a transform) or
joins them (a join of unrelated inputs), directly or through readers that pass them on (a
filter, a store-sorted or top-N order, its limit), leaves its records to that reader
(:func:`~engine.exec.spark.compiler.read_through`): the rows read, each column and the sequence
under a name of the scan's own, and the record a struct of them only where a reader reads it
whole. Joins join plain columns and their observations count them; the records stay the local
executor's, a side an outer join misses included."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from py4j_calls import without_property
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.exec.spark.executor import SparkPlanRun
from engine.exec.spark.paths import PendingColumns, Typed, get_in, read_in, record_value
from engine.plan import parse_plan
from engine.planner.properties import ids_where
from engine.planner.properties.decisions import paired_scans, read_through
from engine.run import build_engines, run_plan


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """``t``: 2 parquet files (keys with duplicates and a null); ``u``: 1 file, one key matching
    twice and keys matching nothing; ``one``: a single row (a sequence of width 0)."""
    for name, table in {
        "t/a": {"k": [3, 1, None, 1], "f": ["a", "b", "c", "d"]},
        "t/b": {"k": [2, 5], "f": ["e", "f"]},
        "u/part": {"k": [1, 2, 2, 7], "r": ["u", "v", "w", "x"]},
        "one/part": {"k": [2], "o": ["z"]},
    }.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        arrays = {c: pa.array(v, pa.int64() if c == "k" else pa.string()) for c, v in table.items()}
        pq.write_table(pa.table(arrays), tmp_path / f"{name}.parquet")
    return tmp_path


def scan(op_id: int, ref: str, path: str) -> dict[str, Any]:
    return {"@id": op_id, "op": "scan", "storageengine": "fs", "ref": ref,
            "selection": {"path": path, "format": "parquet"}}  # fmt: skip


def join(op_id: int, how: str, right: str = "u.k", left: int = 1, right_id: int = 2) -> Any:
    conditions = [{"relationship": "==", "left": "t.k", "right": right}]
    return {"@id": op_id, "op": "join", "left": left, "right": right_id, "type": how,
            "conditions": conditions}  # fmt: skip


def plan_of(root: Path, *ops: dict[str, Any]) -> Any:
    storage = {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}}
    last = ops[-1]["@id"]
    store = {"@id": last + 1, "op": "store", "input": last, "storageengine": "q", "target": {}}
    return parse_plan({"storage": storage, "query": [*ops, store]})


def run_of(spark: Any, plan: Any, *, through: bool = True) -> tuple[SparkPlanRun, Any]:
    """The run of ``plan`` and its result; ``through=False`` makes every scan select its
    records itself (what the compiler did before)."""
    with without_property(None if through else "read_through"):
        run = SparkPlanRun(plan, spark, engines=build_engines(plan, base_dir=None, classpath=[]),
                           params={})  # fmt: skip
    return run, run.run()


def executed(run: SparkPlanRun, op_id: str) -> str:
    frame = run.dataframe(op_id)
    return str(frame._jdf.queryExecution().executedPlan().toString())


def below_the_join(plan_text: str) -> str:
    """The lines of an executed plan from its (first) join down."""
    lines = plan_text.splitlines()
    return "\n".join(lines[next(i for i, line in enumerate(lines) if "Join" in line) :])


def local_records(plan: Any) -> list[Any]:
    return run_plan(plan, executor="local").records()


@pytest.mark.parametrize("how", ["inner", "left", "outer"])
def test_a_join_of_two_scans_joins_plain_columns(spark: Any, data: Path, how: str) -> None:
    plan = plan_of(data, scan(1, "t", "t"), scan(2, "u", "u"), join(3, how))
    run, result = run_of(spark, plan)
    assert {"1", "2"} <= ids_where(run.properties, lambda p: p.read_through)
    below_join = below_the_join(executed(run, "3"))
    assert " struct(" not in below_join  # the records are built above the join, if at all
    assert "__drill_s" in below_join  # joined by the scans' own columns
    # A side the join misses is a null record, not a map of nulls; the order is Drill's.
    assert result.records() == local_records(plan)
    assert result.records() == run_of(spark, plan, through=False)[1].records()


def test_an_operators_dataframe_is_built_when_asked_with_its_records_made(
    spark: Any, data: Path
) -> None:
    # SparkPlanRun.dataframe before any run: the join, which leaves its records' select to its
    # reader, is built with its inputs, and its DataFrame holds the joined records themselves.
    plan = plan_of(data, scan(1, "t", "t"), scan(2, "u", "u"), join(3, "inner"))
    run = SparkPlanRun(plan, spark, engines=build_engines(plan, base_dir=None, classpath=[]),
                       params={})  # fmt: skip
    frame = run.dataframe("3")
    visible = [name for name in frame.columns if not name.startswith("__drill")]
    assert visible == ["t", "u"]
    rows = [row.asDict(recursive=True) for row in frame.select(*visible).collect()]
    # the compiler's own members of a record (what a reader did not read) aside
    records = [{side: _visible(record) for side, record in row.items()} for row in rows]
    assert sorted(records, key=repr) == sorted(local_records(plan), key=repr)


def _visible(record: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in record.items() if not name.startswith("__drill")}


@pytest.mark.parametrize("how", ["left", "outer"])
def test_a_scan_of_one_row_an_outer_join_misses_reads_null(
    spark: Any, data: Path, how: str
) -> None:
    # One row: a sequence of width 0, the literal 0; a mark of the scan's tells a missing side.
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        scan(2, "n", "one"),
        join(3, how, right="n.k"),
        {"@id": 4, "op": "project", "input": 3,
         "projections": [{"ref": "output.f", "expr": "t.f"}, {"ref": "output.n", "expr": "n"}]},
    )  # fmt: skip
    run, result = run_of(spark, plan)
    assert {"1", "2"} <= ids_where(run.properties, lambda p: p.read_through)
    records = result.records()
    assert records == local_records(plan)
    assert {"f": "e", "n": {"k": 2, "o": "z"}} in records
    assert {"f": "a", "n": None} in records


def test_a_filter_the_scan_applied_passes_the_records_to_the_join(spark: Any, data: Path) -> None:
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        {"@id": 2, "op": "filter", "input": 1, "expr": "t.k > 1"},  # pushed into the scan
        scan(3, "u", "u"),
        join(4, "inner", left=2, right_id=3),
    )
    run, result = run_of(spark, plan)
    assert {"1", "3"} <= ids_where(run.properties, lambda p: p.read_through)
    assert " struct(" not in below_the_join(executed(run, "4"))
    assert result.records() == local_records(plan)


def test_sides_sharing_a_field_join_their_columns_selected_apart(spark: Any, data: Path) -> None:
    # Both records under `t`: the join selects each side's columns over the scan's rows (the
    # step it takes anyway) and merges the records member by member.
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        scan(2, "t", "u"),
        {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "left",
         "conditions": [{"relationship": "==", "left": "t.k", "right": "t.k"}]},
    )  # fmt: skip
    run, result = run_of(spark, plan)
    assert {"1", "2"} <= ids_where(run.properties, lambda p: p.read_through)
    records = result.records()
    assert records == local_records(plan)
    assert {"t": {"k": 1, "f": "b", "r": "u"}} in records


def test_a_project_and_a_transform_read_members_and_whole_records(spark: Any, data: Path) -> None:
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        {"@id": 2, "op": "transform", "input": 1,
         "transforms": [{"ref": "t.g", "expr": "t.k * 2"}]},
        scan(3, "u", "u"),
        {"@id": 4, "op": "project", "input": 3,
         "projections": [{"ref": "output.u", "expr": "u"}, {"ref": "output.r", "expr": "u.r"}]},
        join(5, "inner", right="u.r", left=2, right_id=4),
    )  # fmt: skip
    run, result = run_of(spark, plan)
    assert {"1", "3"} <= ids_where(run.properties, lambda p: p.read_through)
    assert result.records() == local_records(plan)
    # The whole record `u` is read: built, without the member no one reads.
    assert all("__drill_unread" not in (r.get("u") or {}) for r in result.records())


def test_a_scan_leaving_its_select_to_its_reader_gives_the_same_records(
    spark: Any, data: Path
) -> None:
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        scan(2, "u", "u"),
        join(3, "inner"),
        {"@id": 4, "op": "filter", "input": 3, "expr": "u.r != 'w'"},
        {"@id": 5, "op": "project", "input": 4, "projections": [{"ref": "output.f", "expr": "t.f"}]},
    )  # fmt: skip

    _, through = run_of(spark, plan, through=True)
    _, selected = run_of(spark, plan, through=False)
    assert through.records() == selected.records() == local_records(plan)


def test_read_through_follows_one_reader_to_a_selecting_or_joining_one(data: Path) -> None:
    ops = [
        scan(1, "t", "t"),
        scan(2, "u", "u"),
        {"@id": 3, "op": "filter", "input": 2, "expr": "u.k > 1"},
        join(4, "inner", right_id=3),
        scan(5, "v", "u"),
        {"@id": 6, "op": "segment", "input": 5, "ref": "g", "exprs": ["v.k"]},
        {"@id": 7, "op": "collapsingaggregate", "input": 6, "within": "g",
         "aggregations": [{"ref": "n", "expr": "count(1)"}]},
        scan(8, "w", "u"),
        {"@id": 9, "op": "project", "input": 8, "projections": [{"ref": "output.x", "expr": "w.k"}]},
        {"@id": 10, "op": "project", "input": 8, "projections": [{"ref": "output.y", "expr": "w.r"}]},
        {"@id": 11, "op": "union", "inputs": [4, 7, 9, 10]},
    ]  # fmt: skip
    plan = plan_of(data, *ops)
    # 1 and 2 (through the filter) reach the join; 5 an aggregate; 8 has two readers.
    assert read_through(plan, _decided(unrelated={"4"})) == {"1", "2"}
    assert read_through(plan, _decided()) == set()  # the join is related


def test_paired_scans_are_the_ones_a_join_or_a_union_reads(data: Path) -> None:
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        scan(2, "u", "u"),
        {"@id": 3, "op": "filter", "input": 2, "expr": "u.k > 1"},
        join(4, "inner", right_id=3),
        scan(5, "v", "u"),
        {"@id": 6, "op": "order", "input": 5, "orderings": [{"order": "asc", "expr": "v.k"}]},
        {"@id": 7, "op": "union", "inputs": [4, 6]},
        scan(8, "w", "u"),
        {"@id": 9, "op": "limit", "input": 8, "first": 0, "last": 2},
    )
    # 1, 2 (through the filter) and 5 (through the order) may be paired; 8 only reaches a store.
    assert paired_scans(plan) == {"1", "2", "5"}


def test_a_record_value_reads_its_members_without_building_the_struct(spark: Any) -> None:
    built: list[str] = []

    def struct() -> Any:
        built.append("struct")
        return F.struct(F.lit(1).alias("a"))

    dtype = T.StructType([T.StructField("a", T.LongType())])
    record = record_value(struct, dtype, lambda: [("a", Typed(F.lit(1), T.LongType()))])
    assert get_in(record, ["a"]).dtype == T.LongType()
    assert built == []
    pending = PendingColumns(spark.range(1), {"r": record})
    assert pending.select().collect()[0]["r"]["a"] == 1
    assert built == ["struct"]
    read_in(record, [])  # made once
    assert built == ["struct"]


def test_a_fused_segment_and_its_aggregates_group_the_scans_columns(spark: Any, data: Path) -> None:
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        {"@id": 2, "op": "filter", "input": 1, "expr": "t.f != 'b'"},
        {"@id": 3, "op": "segment", "input": 2, "ref": "g", "exprs": ["t.k"]},
        {"@id": 4, "op": "collapsingaggregate", "input": 3, "within": "g",
         "carryovers": ["t.k", "t"],
         "aggregations": [{"ref": "n", "expr": "count(1)"}, {"ref": "last", "expr": "max(t.f)"}]},
    )  # fmt: skip
    run, result = run_of(spark, plan)
    assert run.properties["1"].read_through
    assert result.records() == local_records(plan)
    assert result.records() == run_of(spark, plan, through=False)[1].records()


def test_an_aggregate_of_every_record_reads_the_scans_columns(spark: Any, data: Path) -> None:
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        {"@id": 2, "op": "collapsingaggregate", "input": 1, "target": "t.f",
         "carryovers": ["t"], "aggregations": [{"ref": "total", "expr": "sum(t.k * 2)"}]},
    )  # fmt: skip
    run, result = run_of(spark, plan)
    assert run.properties["1"].read_through
    assert re.search(r"sum\(\(__drill_s\d+_\d+#\d+L \* 2\)\)", executed(run, "2"))
    assert result.records() == local_records(plan)


def test_a_scan_no_join_reads_leaves_its_reads_own_columns(spark: Any, data: Path) -> None:
    # Unordered (the sum observes no order), counted by the aggregate (no observation), read by
    # no join: the aggregate reads the read's columns, the scan makes no select of its own.
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        {"@id": 2, "op": "collapsingaggregate", "input": 1,
         "aggregations": [{"ref": "total", "expr": "sum(t.k * 2)"}]},
    )  # fmt: skip
    run, result = run_of(spark, plan)
    assert run.properties["1"].read_through and not run.properties["1"].paired
    text = executed(run, "2")
    assert re.search(r"sum\(\(k#\d+L \* 2\)\)", text)
    assert "__drill_s1_" not in text
    assert result.records() == local_records(plan) == [{"total": 24}]
    assert run_of(spark, plan, through=False)[1].records() == [{"total": 24}]


@pytest.mark.parametrize(
    "orderings",
    [
        [{"order": "asc", "expr": "t.k"}],  # a sequence of the key and the scan's (ties)
        [{"order": "desc", "expr": "t.f"}],  # strings descending: sorted and numbered
    ],
)
def test_an_order_builds_its_sequence_over_the_scans_columns(
    spark: Any, data: Path, orderings: list[dict[str, str]]
) -> None:
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        {"@id": 2, "op": "order", "input": 1, "orderings": orderings},
        {"@id": 3, "op": "project", "input": 2,
         "projections": [{"ref": "output.ten", "expr": "t.k * 10"}, {"ref": "output.f", "expr": "t.f"}]},
    )  # fmt: skip
    run, result = run_of(spark, plan)
    assert run.properties["1"].read_through
    assert result.records() == local_records(plan)
    assert run_of(spark, plan, through=False)[1].records() == local_records(plan)


def test_a_joins_columns_are_grouped_where_it_left_them(spark: Any, data: Path) -> None:
    # Two scans joined, grouped by a member of each: no record struct below the aggregate
    # (q3's shape); the aggregate's own records are built from its keys.
    plan = plan_of(
        data,
        scan(1, "t", "t"),
        scan(2, "u", "u"),
        join(3, "inner"),
        {"@id": 4, "op": "segment", "input": 3, "ref": "g", "exprs": ["t.f", "u.r"]},
        {"@id": 5, "op": "collapsingaggregate", "input": 4, "within": "g",
         "carryovers": ["t.f", "u.r"], "aggregations": [{"ref": "n", "expr": "sum(t.k)"}]},
        {"@id": 6, "op": "order", "input": 5, "orderings": [{"order": "asc", "expr": "n"}]},
    )  # fmt: skip
    run, result = run_of(spark, plan)
    assert {"1", "2"} <= ids_where(run.properties, lambda p: p.read_through)
    aggregated = executed(run, "5")
    assert " struct(" not in aggregated[aggregated.index("HashAggregate") :]
    assert result.records() == local_records(plan)


def _decided(**ids: set[str]) -> SimpleNamespace:
    """The decisions :func:`read_through` builds on: none but ``ids``."""
    names = ("store_read_orders", "top_n_orders", "store_sorted", "unordered")
    names += ("read_by_limit", "unrelated", "fused")
    return SimpleNamespace(**{name: ids.get(name, set()) for name in names})
