"""What the Spark executor leaves out when nothing needs it: the sequence of scans whose order no
one observes, the filter tests a scan already applied (each test runs once), the observations of
operators whose row count is known."""

from __future__ import annotations

import contextlib
import datetime as dt
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from grouped_join import grouped_join_query
from spark_plans import physical_plan
from spark_settings import spark_setting

from engine.exec.spark.compiler_order import TEMP_PREFIX
from engine.exec.spark.executor import SparkPlanRun
from engine.exec.spark.session import KEEP_EMPTY_RELATIONS_RULES
from engine.exec.spark.settings import ROW_MARKERS
from engine.plan import parse_plan
from engine.planner.properties import ids_where
from engine.planner.properties.order_needs import (
    left_grouped_joins,
    tie_free_orders,
    top_names,
    total_orders,
    unordered_outputs,
)
from engine.planner.rules.filter_pushdown import remaining_conditions
from engine.run import build_engines, run_plan

ROWS = pa.table(
    {
        "x": pa.array([1, 5, 3, 7, None], pa.int64()),
        "d": pa.array(
            [dt.date(2019, 5, 1), dt.date(2020, 1, 2), None, dt.date(2021, 3, 4)] * 1
            + [dt.date(2020, 6, 1)]
        ),
        "s": pa.array(["a", "b", "c", "d", "e"]),
    }
)


def plan_of(*ops: dict[str, Any], root: Path | None = None) -> Any:
    storage: dict[str, Any] = {"q": {"type": "queue"}}
    if root is not None:
        storage["fs"] = {"type": "fs", "root": str(root)}
    return parse_plan({"storage": storage, "query": list(ops)})


SCAN = {
    "@id": 1,
    "op": "scan",
    "storageengine": "fs",
    "ref": "t",
    "selection": {"path": "t", "format": "parquet"},
}


def unordered_ids(*ops: dict[str, Any], sinks: set[str] = frozenset()) -> set[str]:
    plan = plan_of(*ops)
    return unordered_outputs(plan.topological_order(), sinks)


def test_only_operators_whose_order_nothing_observes_are_unordered() -> None:
    scan = {**SCAN, "storageengine": "q"}
    store = {"@id": 9, "op": "store", "input": 3, "storageengine": "q", "target": {}}
    filtered = [scan, {"@id": 2, "op": "filter", "input": 1, "expr": "t.x > 1"}]
    total = {
        "@id": 3,
        "op": "collapsingaggregate",
        "input": 2,
        "aggregations": [{"ref": "n", "expr": "count(1)"}],
    }
    # A global aggregate into a file store: no order anywhere below it.
    assert unordered_ids(*filtered, total, store) == {"1", "2", "3", "9"}
    # The same into a queue sink: the aggregate's record order is observed, not its input's.
    assert unordered_ids(*filtered, total, store, sinks={"9"}) == {"1", "2", "9"}
    # An order, a segment, a limit read their input's order (ties, first appearance, first n).
    for reader in (
        {"@id": 3, "op": "order", "input": 2, "orderings": [{"order": "asc", "expr": "t.x"}]},
        {"@id": 3, "op": "segment", "input": 2, "ref": "g", "exprs": ["t.x"]},
        {"@id": 3, "op": "limit", "input": 2, "first": 0, "last": 1},
    ):
        assert not {"1", "2"} & unordered_ids(*filtered, reader, store)
    # Carryovers are the run's last record: ordered.
    carry = {**total, "carryovers": ["t.s"]}
    assert unordered_ids(*filtered, carry, store) == {"3", "9"}
    # An operator no one reads is collected in order.
    assert unordered_ids(*filtered) == set()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    (tmp_path / "t").mkdir()
    pq.write_table(ROWS, tmp_path / "t" / "part-0.parquet")
    return tmp_path


def run_of(spark: Any, plan: Any) -> SparkPlanRun:
    return SparkPlanRun(
        plan, spark, engines=build_engines(plan, base_dir=None, classpath=[]), params={}
    )


def test_a_filter_its_scan_applied_whole_runs_once_and_counts_the_scans_rows(
    spark: Any, data: Path
) -> None:
    plan = plan_of(
        SCAN,
        {
            "@id": 2,
            "op": "filter",
            "input": 1,
            "expr": "t.x > 2 && t.d >= to_date('2020-01-01')",
        },
        {
            "@id": 3,
            "op": "collapsingaggregate",
            "input": 2,
            "aggregations": [{"ref": "n", "expr": "count(1)"}, {"ref": "s", "expr": "sum(t.x)"}],
        },
        {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}},
        root=data,
    )
    run = run_of(spark, plan)
    assert run.planned.operator("1").pushed_filter is not None  # both conjuncts, the date too
    assert run.properties["1"].unordered  # a global aggregate: the scan needs no sequence
    result = run.run()
    assert result.records() == [{"n": 2, "s": 12}]
    # Nothing left for the filter to test: its DataFrame is its scan's, no test runs twice.
    assert run.frames["2"].sameSemantics(run.frames["1"])
    assert result.metrics["1"]["rows"] == result.metrics["2"]["rows"] == 2
    assert result.metrics["3"]["rows"] == 1  # one record, known without observing it


def test_a_filter_tests_what_its_scan_did_not(spark: Any, data: Path) -> None:
    plan = plan_of(
        SCAN,
        {"@id": 2, "op": "filter", "input": 1, "expr": "t.x > 2 && t.x * 1 != 7"},
        {"@id": 3, "op": "order", "input": 2, "orderings": [{"order": "desc", "expr": "t.x"}]},
        {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}},
        root=data,
    )
    run = run_of(spark, plan)
    assert not run.properties["1"].unordered  # ordered: the sort's ties keep the scan's order
    result = run.run()
    assert [r["t"]["x"] for r in result.records()] == [5, 3]
    assert not run.frames["2"].sameSemantics(run.frames["1"])  # it tests what is left
    assert result.metrics["2"]["rows"] == 2


GROUPS = pa.table(
    {
        "g": pa.array(["b", "a", None, "b", "a", None, "c"]),
        "h": pa.array([1, 2, 1, 1, 2, 1, None], pa.int64()),
        "v": pa.array([1, 2, 3, 4, 5, 6, 7], pa.int64()),
    }
)


def grouped_plan(root: Path, orderings: list[dict[str, str]], carryovers: list[str]) -> Any:
    """scan -> segment by g, h -> collapse (sum v, ``carryovers``) -> order -> file store."""
    return plan_of(
        SCAN,
        {"@id": 2, "op": "segment", "input": 1, "ref": "grp", "exprs": ["t.g", "t.h"]},
        {
            "@id": 3,
            "op": "collapsingaggregate",
            "input": 2,
            "within": "grp",
            "carryovers": carryovers,
            "aggregations": [{"ref": "s", "expr": "sum(t.v)"}],
        },
        {"@id": 4, "op": "order", "input": 3, "orderings": orderings},
        {"@id": 5, "op": "store", "input": 4, "storageengine": "fs", "target": {"path": "out"}},
        root=root,
    )


def test_an_order_by_the_unique_keys_of_a_collapse_carries_no_sequence(
    spark: Any, tmp_path: Path
) -> None:
    (tmp_path / "t").mkdir()
    pq.write_table(GROUPS, tmp_path / "t" / "part-0.parquet")
    keys = [{"order": "desc", "expr": "t.h"}, {"order": "asc", "expr": "t.g"}]
    plan = grouped_plan(tmp_path, keys, ["t.g", "t.h"])
    run = run_of(spark, plan)
    assert ids_where(run.properties, lambda p: p.total_order) == {
        "4"
    }  # (g, h) is unique after the collapse: no ties
    assert {"1", "2", "3"} <= ids_where(
        run.properties, lambda p: p.unordered
    )  # so no one observes the scan's order
    (frame,) = run_of(spark, plan).compile_frames().values()
    text = physical_plan(frame)
    assert "monotonically_increasing_id" not in text
    assert "file_path" not in text
    # The order's sequence value: a value per key (nulls first, where Spark puts a null member:
    # no null flag), no input order after them.
    assert len(frame.schema["__drill_seq"].dataType.fields) == 2
    result = run.run()
    stored = [
        row
        for f in sorted((tmp_path / "out").glob("*.parquet"))
        for row in pq.read_table(f).to_pylist()
    ]
    assert [(r["t"]["g"], r["t"]["h"], r["s"]) for r in stored] == [
        ("c", None, 7),  # nulls first by default, whatever the direction
        ("a", 2, 7),
        (None, 1, 9),
        ("b", 1, 5),
    ]
    assert result.metrics["5"]["rows"] == 4


@pytest.mark.parametrize(
    ("orderings", "carryovers"),
    [
        ([{"order": "asc", "expr": "t.g"}], ["t.g", "t.h"]),  # not every key: ties
        ([{"order": "asc", "expr": "t.g"}, {"order": "asc", "expr": "t.h"}], ["t.g"]),  # h not carried
        (  # a carryover that is no key is the group's last record: ordered
            [{"order": "asc", "expr": "t.g"}, {"order": "asc", "expr": "t.h"}],
            ["t.g", "t.h", "t.v"],
        ),
    ],
)  # fmt: skip
def test_orders_that_may_tie_keep_the_sequence(
    orderings: list[dict[str, str]], carryovers: list[str], tmp_path: Path
) -> None:
    plan = grouped_plan(tmp_path, orderings, carryovers)
    order = plan.topological_order()
    total = total_orders(order)
    unordered = unordered_outputs(order, set())
    if "t.v" in carryovers:
        assert total == {"4"}  # no ties, but the last record of a group is read
        assert "1" not in unordered
    else:
        assert total == set()
        assert not {"1", "2", "3"} & unordered


def test_a_collected_window_frame_collapse_shows_no_key_columns(spark: Any, data: Path) -> None:
    # The window's partition key is kept as a column for the windows after it; a result that
    # nobody reads is collected without it.
    plan = plan_of(
        SCAN,
        {"@id": 2, "op": "segment", "input": 1, "ref": "g", "exprs": ["t.s"]},
        {"@id": 3, "op": "windowframe", "input": 2, "within": "g", "start": -1, "end": 0,
         "ref": {"segment": "w.k", "position": "w.p"}},
        {"@id": 4, "op": "segment", "input": 3, "ref": "pair", "exprs": ["w.k"]},
        {"@id": 5, "op": "collapsingaggregate", "input": 4, "within": "pair",
         "carryovers": ["t"], "aggregations": [{"ref": "n", "expr": "count(1)"}]},
        root=data,
    )  # fmt: skip
    run = run_of(spark, plan)
    result = run.run()
    assert any(c.startswith(TEMP_PREFIX) for c in run.frames["5"].columns)  # a key kept ...
    assert result.records() == [{"t": row, "n": 1} for row in ROWS.to_pylist()]  # ... not shown


def stored_records(result: Any) -> list[str]:
    """The records the run's one file store wrote, as sorted JSON texts (order unobserved)."""
    import json

    (store,) = result.stores
    rows = [r for f in store.files for r in pq.read_table(f).to_pylist()]
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def test_joins_unions_and_flattens_whose_order_nothing_observes_build_no_sequence(
    spark: Any, data: Path, tmp_path: Path
) -> None:
    from pyspark.sql import types as T

    from engine.exec.spark.names import SEQ_COLUMN
    from engine.run import run_plan

    (tmp_path / "out").mkdir()
    items = [{"k": 1, "a": [1, 2]}, {"k": 3, "a": []}, {"k": 5, "a": None}, {"k": 9, "a": [4]}]
    ops = [
        SCAN,
        {**SCAN, "@id": 2, "ref": "u"},
        {"@id": 3, "op": "constant", "content": items},
        {"@id": 4, "op": "flatten", "input": 3, "ref": "v", "expr": "a"},
        {
            "@id": 5,
            "op": "join",
            "left": 1,
            "right": 4,
            "type": "left",
            "conditions": [{"relationship": "==", "left": "t.x", "right": "k"}],
        },
        {"@id": 6, "op": "project", "input": 5, "projections": [
            {"ref": "output.x", "expr": "t.x"}, {"ref": "output.v", "expr": "v"}]},
        {"@id": 7, "op": "project", "input": 2, "projections": [
            {"ref": "output.x", "expr": "u.x"}, {"ref": "output.v", "expr": "u.x"}]},
        {"@id": 8, "op": "union", "inputs": [6, 7], "distinct": True},
        {"@id": 9, "op": "store", "input": 8, "storageengine": "out",
         "target": {"path": "o", "format": "parquet"}},
    ]  # fmt: skip
    plan = {
        "storage": {
            "fs": {"type": "fs", "root": str(data)},
            "out": {"type": "fs", "root": str(tmp_path / "out")},
        },
        "query": ops,
    }
    run = SparkPlanRun(
        parse_plan(plan),
        spark,
        engines=build_engines(parse_plan(plan), base_dir=None, classpath=[]),
        params={},
    )
    assert {"4", "5", "8"} <= ids_where(run.properties, lambda p: p.unordered)
    ours = run.run()
    for op_id in ("4", "5", "8"):  # a constant 0, not a (record, element) or (left, right) pair
        assert run.frames[op_id].schema[SEQ_COLUMN].dataType == T.LongType()
    written = stored_records(ours)
    local = run_plan(plan, executor="local")  # replaces the stored version
    assert written == stored_records(local)
    assert len(written) == 9  # 4 left rows (1 matching twice) + the 5 scanned, distinct
    assert rows_of(ours) == rows_of(local)


def rows_of(result: Any) -> dict[str, int]:
    return {k: v["rows"] for k, v in result.metrics.items() if "rows" in v}


def test_operators_whose_records_all_reach_a_store_count_what_it_wrote(
    spark: Any, data: Path
) -> None:
    from engine.exec.spark.metrics import store_counted

    plan = plan_of(
        SCAN,
        {"@id": 2, "op": "flatten", "input": 1, "ref": "v", "expr": "t.s"},
        {"@id": 3, "op": "project", "input": 2, "projections": [{"ref": "output.v", "expr": "v"}]},
        {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}},
        root=data,
    )
    assert store_counted(plan.topological_order()) == {"2": "4", "3": "4"}
    run = run_of(spark, plan)
    result = run.run()
    # The store counts for the flatten; the scan reads its whole file: its footer counts it.
    assert "CollectMetrics" not in physical_plan(run.frames["3"])  # nothing observes
    assert rows_of(result) == {"1": 5, "2": 5, "3": 5, "4": 5}
    # A second reader, or a limit, takes the operator out of the store's count.
    limited = plan_of(
        SCAN,
        {"@id": 2, "op": "limit", "input": 1, "first": 0, "last": 2},
        {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
        root=data,
    )
    assert store_counted(limited.topological_order()) == {"2": "3"}
    shared = plan_of(
        SCAN,
        {"@id": 2, "op": "store", "input": 1, "storageengine": "q", "target": {}},
        {"@id": 3, "op": "store", "input": 1, "storageengine": "q", "target": {}},
        root=data,
    )
    assert store_counted(shared.topological_order()) == {}


@pytest.fixture(params=[True, False], ids=["marked", "observed"])
def markers(request: pytest.FixtureRequest, spark: Any) -> Iterator[bool]:
    """Runs counting rows by markers (the ``spark.drill.rowMarkers`` opt-in, ``row_markers``),
    and runs without them, as by default and under Spark Connect, where they are observed."""
    if not request.param:
        yield False
        return
    with spark_setting(spark, ROW_MARKERS, "true"):
        yield True


@pytest.fixture(params=[False, True], ids=["spark-rules", "empty-kept"])
def empty_kept(request: pytest.FixtureRequest, spark: Any) -> Iterator[bool]:
    """Runs on a session with Spark's optimizer rules as they are (the default: an operator
    over an input Spark proves empty may not run, and then has no count), and on one that
    leaves out the rules dropping them (what ``spark.drill.keepEmptyRelations`` sets on a
    session the engine creates): every operator runs and counts."""
    if not request.param:
        yield False
        return
    rules = KEEP_EMPTY_RELATIONS_RULES
    with contextlib.ExitStack() as stack:
        for key, value in rules.items():
            stack.enter_context(spark_setting(spark, key, value))
        yield True


def agree(spark_rows: dict[str, Any], local_rows: dict[str, Any], *, complete: bool) -> None:
    """Spark's row counts are the local executor's: all of them (``complete``), or those Spark
    gives (an operator Spark did not run has none; none is ever wrong)."""
    if complete:
        assert spark_rows == local_rows
    else:
        assert spark_rows == {k: v for k, v in local_rows.items() if k in spark_rows}


def counters_in(df: Any, *, markers: bool) -> int:
    """The marker filters (with ``markers``) or ``CollectMetrics`` nodes in ``df``'s plan."""
    return physical_plan(df).count("SPARK_PARTITION_ID() >= -" if markers else "CollectMetrics")


def test_a_scan_counts_its_rows_as_read_before_they_become_records(
    spark: Any, data: Path, markers: bool
) -> None:
    plan = plan_of(
        SCAN,
        {"@id": 2, "op": "filter", "input": 1, "expr": "t.x > 2"},
        {
            "@id": 3,
            "op": "project",
            "input": 2,
            "projections": [{"ref": "output.x", "expr": "t.x"}],
        },
        {
            "@id": 4,
            "op": "collapsingaggregate",
            "input": 3,
            "aggregations": [{"ref": "s", "expr": "sum(x)"}],
        },
        {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {}},
        # A second reader: not all the scan's records reach the aggregate, which cannot count them.
        {"@id": 6, "op": "store", "input": 3, "storageengine": "q", "target": {}},
        root=data,
    )
    run = run_of(spark, plan)
    result = run.run()
    assert {"s": 15} in result.records()
    assert rows_of(result) == {"1": 3, "2": 3, "3": 3, "4": 1, "5": 1, "6": 3}
    optimized = str(run.frames["3"]._jdf.queryExecution().optimizedPlan())
    # The count sits under the record struct, which Spark then never builds.
    assert ("SPARK_PARTITION_ID() >= -" if markers else "CollectMetrics") in optimized
    assert "struct(" not in optimized


def test_a_left_side_test_runs_in_the_left_reader_below_a_left_join(spark: Any, data: Path) -> None:
    from engine.run import run_plan

    ops = [
        {**SCAN, "ref": "o"},
        {**SCAN, "@id": 2, "ref": "c"},
        {
            "@id": 3,
            "op": "join",
            "left": 1,
            "right": 2,
            "type": "left",
            "conditions": [{"relationship": "==", "left": "o.x", "right": "c.x"}],
        },
        {
            "@id": 4,
            "op": "filter",
            "input": 3,
            "expr": "o.d >= to_date('2020-01-01') && (isnull(c.s) || c.s != 'b')",
        },
        {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {}},
    ]
    plan = plan_of(*ops, root=data)
    run = run_of(spark, plan)
    planned = run.planned
    assert planned.operator("1").pushed_filter == "o.d >= to_date('2020-01-01')"
    # The planner moves the left side's test onto the join's left input, where the scan's
    # reader applies it (nothing is left for the filter to test) and the filter keeps the rest.
    below = planned.operator(planned.operator("3").left)
    assert below.op == "filter" and below.input == "1"
    assert remaining_conditions(planned)[below.id].condition is None
    assert "o.d" not in planned.operator("4").expr
    ours = run.run()
    local = run_plan(plan, executor="local")
    assert ours.records() == local.records()
    assert [r["o"]["x"] for r in ours.records()] == [7, None]  # 5 is dropped: its c.s is b
    assert rows_of(ours) == rows_of(local)
    assert rows_of(ours)["3"] == 3  # the join saw only the three records the reader kept


NULLS_AND_NAN = pa.table(
    {
        "x": pa.array([1.0, float("nan"), None, -2.0, 3.0, None, float("nan")]),
        "n": pa.array([2, None, 5, -1, None, 0, 3], pa.int64()),
        "id": pa.array(range(7), pa.int64()),
    }
)


@pytest.mark.parametrize("column", ["x", "n"])
@pytest.mark.parametrize("direction", ["asc", "desc"])
@pytest.mark.parametrize("nulls", ["first", "last"])
def test_an_orders_sequence_places_nulls_and_nan_as_drill_does(
    spark: Any, tmp_path: Path, column: str, direction: str, nulls: str
) -> None:
    """A null flag leads a key's members only where Spark's own place for a null member (first)
    is not the asked one, or before a descending double's NaN test; the stored order is the
    local executor's either way."""
    (tmp_path / "t").mkdir()
    pq.write_table(NULLS_AND_NAN, tmp_path / "t" / "part-0.parquet")
    ordering = {"order": direction, "expr": f"t.{column}", "nullCollation": nulls}
    plan = plan_of(
        SCAN,
        {"@id": 2, "op": "order", "input": 1, "orderings": [ordering]},
        {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
        root=tmp_path,
    )
    (frame,) = run_of(spark, plan).compile_frames().values()
    members = frame.schema["__drill_seq"].dataType.fields
    descending_double = direction == "desc" and column == "x"
    flag = nulls == "last" or descending_double
    encoded = 2 if descending_double else 1  # (not NaN, -x) for a descending double
    assert len(members) == flag + encoded + 1  # and the input order, for ties
    ids = [r["t"]["id"] for r in run_plan(plan, executor="spark", spark=spark).records()]
    assert ids == [r["t"]["id"] for r in run_plan(plan, executor="local").records()]


def test_an_order_a_top_n_reads_counts_its_inputs_rows(spark: Any, data: Path) -> None:
    """The compiler runs an order and the limit with an end that reads it as one top-N, which
    reads every record of the order's input: the order counts its input's rows (its own
    DataFrame never runs, so an observation of it would count nothing)."""
    plan = plan_of(
        SCAN,
        {"@id": 2, "op": "order", "input": 1, "orderings": [{"order": "desc", "expr": "t.x"}]},
        {"@id": 3, "op": "limit", "input": 2, "first": 1, "last": 3},
        {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}},
        root=data,
    )
    run = run_of(spark, plan)
    result = run.run()
    assert "2" not in run.metrics.counting()
    assert (
        rows_of(result)
        == rows_of(run_plan(plan, executor="local"))
        == {
            "1": 5,
            "2": 5,
            "3": 2,
            "4": 2,
        }
    )


def aggregate_plan(root: Path, condition: str, *, grouped: bool) -> Any:
    collapse: dict[str, Any] = {
        "@id": 4,
        "op": "collapsingaggregate",
        "input": 3 if grouped else 2,
        "aggregations": [{"ref": "n", "expr": "count(1)"}, {"ref": "top", "expr": "max(t.x)"}],
    }
    segment = {"@id": 3, "op": "segment", "input": 2, "ref": "g", "exprs": ["t.s"]}
    if grouped:
        collapse.update(within="g", carryovers=["t.s"])
    return plan_of(
        SCAN,
        {"@id": 2, "op": "filter", "input": 1, "expr": condition},
        *([segment] if grouped else []),
        collapse,
        {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {}},
        root=root,
    )


@pytest.mark.parametrize("grouped", [True, False], ids=["grouped", "whole"])
@pytest.mark.parametrize("condition", ["t.x > 2", "t.x > 100"], ids=["some", "none"])
def test_an_aggregate_counts_the_rows_of_the_scan_whose_records_all_reach_it(
    spark: Any, data: Path, grouped: bool, condition: str, markers: bool
) -> None:
    """The scan's rows (its pushed filter applied) are counted at the aggregate: by a marker on
    its input, or, without markers, summed from a hidden count per group at the aggregate's few
    output rows, not observed as they are read (which splits Spark's code generation where the
    observation stands)."""
    plan = aggregate_plan(data, condition, grouped=grouped)
    run = run_of(spark, plan)
    result = run.run()
    assert counters_in(run.frames["1"], markers=markers) == 0
    assert counters_in(run.frames["4"], markers=markers) == 1
    assert "CollectMetrics" not in physical_plan(run.frames["4"]) or not markers
    assert result.records() == run_plan(plan, executor="local").records()
    expected = rows_of(run_plan(plan, executor="local"))
    assert rows_of(result) == expected
    assert expected["1"] == (3 if condition == "t.x > 2" else 0)


@pytest.mark.parametrize("condition", ["t.x > 2", "t.x > 100"], ids=["some", "none"])
def test_an_aggregate_counts_its_groups_with_the_rows_of_its_input(
    spark: Any, data: Path, condition: str, markers: bool, empty_kept: bool
) -> None:
    """An aggregate counted for its own rows (a filter reads it: no store counts them) counts
    its groups by a marker of its own beside its input's, or, without markers, in the one
    observation that sums its input's rows. The filter keeps no record ("some": each group has
    one): Spark's adaptive execution may then replace the stages below it, counts included,
    unless the session leaves that rule out (``empty_kept``)."""
    plan = aggregate_plan(data, condition, grouped=True)
    ops = [op.model_dump(by_alias=True, exclude_none=True) for op in plan.query]
    kept = {"@id": 6, "op": "filter", "input": 4, "expr": "n > 1"}
    store = {**ops[-1], "input": 6}
    plan = plan_of(*ops[:-1], kept, store, root=data)
    run = run_of(spark, plan)
    result = run.run()
    assert counters_in(run.frames["4"], markers=markers) == (2 if markers else 1)
    assert "CollectMetrics" not in physical_plan(run.frames["4"]) or not markers
    local = run_plan(plan, executor="local")
    assert result.records() == local.records()
    agree(rows_of(result), rows_of(local), complete=empty_kept)
    if empty_kept:
        assert {"1", "4", "6"} <= set(rows_of(result))


def test_a_scan_that_counts_skipped_records_is_observed_as_it_is_read(
    spark: Any, tmp_path: Path
) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.json").write_text('{"x": 1}\n{"x": \n{"x": 5}\n{"x": 7}\n')
    scan = {**SCAN, "selection": {"path": "t", "format": "json", "onError": "skip"}}
    plan = plan_of(
        scan,
        {"@id": 2, "op": "collapsingaggregate", "input": 1,
         "aggregations": [{"ref": "n", "expr": "count(1)"}]},
        {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
        root=tmp_path,
    )  # fmt: skip
    result = run_plan(plan, executor="spark", spark=spark)
    local = run_plan(plan, executor="local")
    assert result.records() == local.records() == [{"n": 3}]
    counted = ("rows", "skipped_records")
    assert [result.metrics["1"][k] for k in counted] == [local.metrics["1"][k] for k in counted]
    assert result.metrics["1"]["skipped_records"] == 1


@pytest.mark.parametrize("condition", ["t.missing == 1", "1 == 2", "t.x > 100"])
def test_a_filter_that_keeps_nothing_leaves_its_scan_read_and_counted(
    spark: Any, tmp_path: Path, condition: str, empty_kept: bool
) -> None:
    """A filter Spark's optimizer finds always false (a column no file holds, compared; two
    constants) has Spark drop the scan below it unread, its count with it; a session leaving
    that rule out (``empty_kept``) reads the scan and counts it as the local executor does."""
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.json").write_text('{"x": 1}\n{"x": 5}\n{"x": 7}\n')
    plan = plan_of(
        {**SCAN, "selection": {"path": "t", "format": "json"}},
        {"@id": 2, "op": "filter", "input": 1, "expr": condition},
        {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
        root=tmp_path,
    )
    result = run_plan(plan, executor="spark", spark=spark)
    local = run_plan(plan, executor="local")
    assert result.records() == local.records() == []
    agree(result.metrics, local.metrics, complete=empty_kept)
    if empty_kept:
        assert result.metrics["1"]["rows"] == 3


def test_an_aggregate_counts_the_rows_of_a_join_whose_records_all_reach_it(
    spark: Any, data: Path
) -> None:
    """Any operator the run would observe, not only a scan: here a join (its parquet scans
    read whole, counted by their footers), so no observation stands where rows flow."""
    plan = plan_of(
        SCAN,
        {**SCAN, "@id": 2, "ref": "u"},
        {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "inner",
         "conditions": [{"relationship": "==", "left": "t.s", "right": "u.s"}]},
        {"@id": 4, "op": "segment", "input": 3, "ref": "g", "exprs": ["t.x"]},
        {"@id": 5, "op": "collapsingaggregate", "input": 4, "within": "g",
         "carryovers": ["t.x"], "aggregations": [{"ref": "n", "expr": "count(1)"}]},
        {"@id": 6, "op": "store", "input": 5, "storageengine": "q", "target": {}},
        root=data,
    )  # fmt: skip
    run = run_of(spark, plan)
    result = run.run()
    assert "CollectMetrics" not in physical_plan(run.frames["3"])
    assert result.records() == run_plan(plan, executor="local").records()
    assert rows_of(result) == rows_of(run_plan(plan, executor="local"))
    assert rows_of(result)["3"] == 5


EVENTS = pa.table(
    {
        "user": pa.array([2, 1, 2, 1, 1, None, 2, 1], pa.int64()),
        "ts": pa.array([5, 3, 5, 1, 3, 4, 2, 3], pa.int64()),
        "kind": pa.array(["a", "b", "c", "d", "e", "f", "g", "h"]),
        "score": pa.array([0.0, -0.0, -0.0, 1.5, 0.0, 2.0, 0.0, 0.0], pa.float64()),
    }
)


def events_plan(root: Path, keys: list[str], read: list[str], stable: bool = True) -> Any:
    """scan e -> order by ``keys`` (``stable``) -> project ``read`` (members of e) -> file
    store."""
    return plan_of(
        {**SCAN, "ref": "e", "selection": {"path": "e", "format": "parquet"}},
        {
            "@id": 2,
            "op": "order",
            "input": 1,
            "orderings": [{"order": "asc", "expr": f"e.{k}"} for k in keys],
            "stable": stable,
        },
        {
            "@id": 3,
            "op": "project",
            "input": 2,
            "projections": [{"ref": f"output.{m}", "expr": f"e.{m}"} for m in read],
        },
        {"@id": 4, "op": "store", "input": 3, "storageengine": "fs", "target": {"path": "out"}},
        root=root,
    )


def written_to_out(root: Path) -> list[dict[str, Any]]:
    files = sorted((root / "out").glob("*.parquet"))
    return [row for f in files for row in pq.read_table(f).to_pylist()]


@pytest.fixture
def events(tmp_path: Path) -> Path:
    (tmp_path / "e").mkdir()
    pq.write_table(EVENTS.slice(0, 4), tmp_path / "e" / "part-0.parquet")
    pq.write_table(EVENTS.slice(4), tmp_path / "e" / "part-1.parquet")
    return tmp_path


def test_an_order_by_every_member_its_scan_reads_breaks_no_ties(spark: Any, events: Path) -> None:
    # Tied records (user 2 at 5, user 1 at 3) hold nothing but their keys: they are equal, so
    # no reader can tell their order, and the scan numbers no rows.
    plan = events_plan(events, ["user", "ts"], ["ts", "user"])
    run = run_of(spark, plan)
    assert run.planned.operator("1").projection == ["ts", "user"]
    assert run.properties["1"].tie_free_order == "2"
    assert run.properties["2"].total_order
    assert run.properties["1"].unordered
    (frame,) = run_of(spark, plan).compile_frames().values()
    text = physical_plan(frame)
    assert "_metadata" not in text
    assert "row_index" not in text
    run.run()
    local = run_plan(events_plan(events, ["user", "ts"], ["ts", "user"]), executor="local")
    assert local.metrics["4"]["rows"] == 8
    assert [(r["user"], r["ts"]) for r in written_to_out(events)] == [
        (None, 4),
        (1, 1),
        (1, 3),
        (1, 3),
        (1, 3),
        (2, 2),
        (2, 5),
        (2, 5),
    ]


def test_an_order_whose_tied_records_may_differ_keeps_the_tie_break(
    spark: Any, events: Path
) -> None:
    plan = events_plan(events, ["user", "ts"], ["user", "ts", "kind"])
    run = run_of(spark, plan)
    assert run.properties["1"].tie_free_order is None  # kind tells tied records apart
    assert not run.properties["2"].total_order
    assert not run.properties["1"].unordered
    run.run()
    kinds = [r["kind"] for r in written_to_out(events)]
    run_plan(plan, executor="local")
    assert kinds == [r["kind"] for r in written_to_out(events)] == list("fdbehgac")


def test_an_order_that_need_not_be_stable_breaks_no_ties(spark: Any, events: Path) -> None:
    # SQL's ORDER BY: tied records may come in any order, so the scan numbers no rows.
    plan = events_plan(events, ["user", "ts"], ["user", "ts", "kind"], stable=False)
    run = run_of(spark, plan)
    assert run.properties["2"].total_order
    assert run.properties["1"].unordered
    (frame,) = run.compile_frames().values()
    assert "row_index" not in physical_plan(frame)
    run_of(spark, plan).run()
    on_spark = written_to_out(events)
    keys = [(r["user"] is not None, r["user"], r["ts"]) for r in on_spark]
    assert keys == sorted(keys)  # nulls first, as the order's default
    run_plan(plan, executor="local")
    local = written_to_out(events)
    assert sorted(map(str, on_spark)) == sorted(map(str, local))
    assert [r["kind"] for r in local] == list("fdbehgac")  # the local sort keeps input order


def test_a_floating_key_keeps_the_tie_break_where_ties_may_differ_in_sign(
    spark: Any, events: Path
) -> None:
    # -0.0 ties 0.0: records equal in every key may still differ, so input order decides.
    plan = events_plan(events, ["user", "score"], ["user", "score"])
    run = run_of(spark, plan)
    assert run.properties["1"].tie_free_order == "2"  # by the plan alone
    run.run()
    # By the types the scan gives, ties may differ: the rows are numbered: both files hold users 1 and 2, so their rows' files are looked up.
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    written = executions.apply(executions.size() - 1).physicalPlanDescription()
    assert "input_file_name()" in written and "monotonically_increasing_id()" in written

    def signs(records: list[dict[str, Any]]) -> list[tuple[Any, float]]:
        return [(r["user"], math.copysign(1.0, r["score"])) for r in records]

    on_spark = signs(written_to_out(events))
    run_plan(plan, executor="local")
    assert on_spark == signs(written_to_out(events))
    # user 1: -0.0 (read second), 0.0, 0.0 tie, then 1.5; user 2: 0.0, -0.0, 0.0 tie.
    user_1 = [(1, -1.0), (1, 1.0), (1, 1.0), (1, 1.0)]
    user_2 = [(2, 1.0), (2, -1.0), (2, 1.0)]
    assert on_spark == [(None, 1.0), *user_1, *user_2]


def test_tie_free_orders_are_orders_by_every_member_their_scan_reads() -> None:
    def found(projection: list[str] | None, order: dict[str, Any], **scan: Any) -> dict[str, str]:
        plan = plan_of(
            {**SCAN, "ref": "e", "projection": projection, **scan},
            {"@id": 2, "op": "order", "input": 1, **order},
            {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
            root=Path("/data"),
        )
        return tie_free_orders(plan.topological_order())

    by = {"orderings": [{"order": "desc", "expr": "e.TS"}, {"expr": "e.user"}]}
    assert found(["ts", "user"], by) == {"2": "1"}  # names in any case, either direction
    assert found(["ts"], by) == {"2": "1"}  # more keys than members: still equal when tied
    assert found(["kind", "ts", "user"], by) == {}  # kind is read and no key
    assert found(None, by) == {}  # the whole record is read
    assert found(["ts", "user"], {**by, "within": "e.user"}) == {}
    assert found(["ts", "user"], by, pushedLimit=3) == {}
    computed = {"orderings": [{"expr": "e.ts + 1"}, {"expr": "e.user"}]}
    assert found(["ts", "user"], computed) == {}  # a key that is no member


ORDERS = pa.table(
    {
        "key": pa.array([3, 1, 2, 4], pa.int64()),
        "day": pa.array([7, 7, 5, 7], pa.int64()),
    }
)
LINES = pa.table(
    {
        "okey": pa.array([2, 1, 3, 1, 2, 3, 9, 4], pa.int64()),
        "qty": pa.array([1, 2, 1, 1, 1, 3, 5, 2], pa.int64()),
    }
)


def grouped_join_plan(root: Path, *, how: str = "inner", keys: tuple[str, ...] = ()) -> Any:
    """orders o join lines l on o.key == l.okey -> segment by ``keys`` -> collapse (sum qty)
    carrying the keys -> order by the sum (ties: the groups' first appearance) -> file store."""
    query = grouped_join_query(
        "o",
        "l",
        ("o.key", "l.okey"),
        how=how,
        keys=keys or ("l.okey", "o.day"),
        aggregations=[{"ref": "qty", "expr": "sum(l.qty)"}],
        order_by="qty",
    )
    return plan_of(*query, root=root)


@pytest.fixture
def orders_and_lines(tmp_path: Path) -> Path:
    for name, table in (("o", ORDERS), ("l", LINES)):
        (tmp_path / name).mkdir()
        half = table.num_rows // 2
        pq.write_table(table.slice(0, half), tmp_path / name / "part-0.parquet")
        pq.write_table(table.slice(half), tmp_path / name / "part-1.parquet")
    return tmp_path


@pytest.mark.parametrize("how", ["inner", "left"])
def test_groups_their_left_records_determine_need_no_order_of_the_right_records(
    spark: Any, orders_and_lines: Path, how: str
) -> None:
    plan = grouped_join_plan(orders_and_lines, how=how)
    run = run_of(spark, plan)
    assert not run.properties["3"].unordered  # the groups appear in the order of the orders
    assert (
        not run.properties["1"].unordered and run.properties["2"].unordered
    )  # the lines' order is never read
    (frame,) = run_of(spark, plan).compile_frames().values()
    text = physical_plan(frame)
    assert "ReadSchema: struct<okey:bigint,qty:bigint>" in text  # no row index for the lines
    run.run()
    on_spark = written_to_out(orders_and_lines)
    run_plan(plan, executor="local")
    assert on_spark == written_to_out(orders_and_lines)
    # Orders 3 and 1 sum to 4 and 3; orders 2 and 4 both to 2: they tie, and come in the order
    # the orders were read (2 before 4), whatever the order of their lines.
    assert [(r["l"]["okey"], r["qty"]) for r in on_spark] == [(3, 4), (1, 3), (2, 2), (4, 2)]


@pytest.mark.parametrize(
    ("how", "keys", "why"),
    [
        ("outer", ("l.okey", "o.day"), "unmatched lines have no left record"),
        ("inner", ("l.qty", "o.day"), "a line's quantity is no left record's"),
        ("inner", ("o.key", "o.day"), ""),
    ],
)
def test_groups_the_left_records_may_not_determine_keep_the_right_order(
    orders_and_lines: Path, how: str, keys: tuple[str, ...], why: str
) -> None:
    ops = grouped_join_plan(orders_and_lines, how=how, keys=keys).topological_order()
    assert left_grouped_joins(ops) == (set() if why else {"3"}), why


def test_a_join_read_otherwise_or_a_right_side_holding_a_left_name_keeps_the_right_order(
    orders_and_lines: Path,
) -> None:
    plan = grouped_join_plan(orders_and_lines)
    ops = plan.topological_order()
    by_id = {op.id: op for op in ops}
    assert top_names(by_id["3"], by_id) == {"o", "l"}
    # The right input writes a field named like the left record ("o"): the merge may take it.
    renamed = plan_of(
        *[op.model_dump(by_alias=True, exclude_none=True) for op in plan.query[:2]],
        {
            "@id": 8,
            "op": "transform",
            "input": 2,
            "transforms": [{"ref": "O.day", "expr": "l.qty"}],
        },
        *[
            {**op.model_dump(by_alias=True, exclude_none=True), "right": 8}
            if op.op == "join"
            else op.model_dump(by_alias=True, exclude_none=True)
            for op in plan.query[2:]
        ],
        root=orders_and_lines,
    )
    assert left_grouped_joins(renamed.topological_order()) == set()
    # A carryover that is no key is a group's last record: the right order decides it.
    carried = [
        op.model_copy(update={"carryovers": [*op.carryovers, "l.qty"]})
        if op.op == "collapsingaggregate"
        else op
        for op in ops
    ]
    assert left_grouped_joins(carried) == set()
