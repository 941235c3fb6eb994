"""Row counts by marker filters (engine.exec.spark.row_markers): where every row of a scan or a
join flows, a filter that keeps every row counts them in Spark's own SQL metrics, with no
``CollectMetrics`` node in the plan, and the counts are the local executor's. Where a marker
cannot count (local rows only, a limit reading the operator, a scan counting skipped records),
the run observes. Markers are an opt-in (``spark.drill.rowMarkers``): every test here turns it on."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_settings import spark_setting

from engine.exec.spark.executor import SparkPlanRun
from engine.exec.spark.one_task_sort import ONE_TASK_SORT_BYTES
from engine.exec.spark.row_markers import (
    SLOT_SIZE,
    RowMarkers,
    _compile_reader,
    marker_condition,
    parse_counts,
    row_markers,
)
from engine.exec.spark.session import KEEP_EMPTY_RELATIONS_RULES
from engine.exec.spark.settings import ROW_MARKERS
from engine.plan import parse_plan
from engine.run import build_engines, run_plan


@pytest.fixture(autouse=True)
def markers_on(request: pytest.FixtureRequest) -> Any:
    """The session opts in to markers for each test that uses it."""
    if "spark" not in request.fixturenames:
        yield
        return
    with spark_setting(request.getfixturevalue("spark"), ROW_MARKERS, "true"):
        yield


@pytest.fixture
def data(tmp_path: Path) -> Path:
    orders = pa.table(
        {"o_key": pa.array(range(40), pa.int64()), "cust": [i % 7 for i in range(40)]}
    )
    (tmp_path / "orders").mkdir()
    pq.write_table(orders.slice(0, 25), tmp_path / "orders" / "part-0.parquet")
    pq.write_table(orders.slice(25), tmp_path / "orders" / "part-1.parquet")
    (tmp_path / "customers").mkdir()
    customers = pa.table({"c_key": pa.array(range(5), pa.int64()), "name": list("abcde")})
    pq.write_table(customers, tmp_path / "customers" / "part-0.parquet")
    (tmp_path / "none").mkdir()  # a scan of no files
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "a.json").write_text(
        "".join(f'{{"id": {i}, "kind": "{"ab"[i % 2]}"}}\n' for i in range(9))
    )
    return tmp_path


def scan(op_id: int, path: str, ref: str, fmt: str = "parquet") -> dict[str, Any]:
    return {
        "@id": op_id,
        "op": "scan",
        "storageengine": "fs",
        "ref": ref,
        "selection": {"path": path, "format": fmt},
    }


def store(op_id: int, input_id: int) -> dict[str, Any]:
    """A parquet store: it keeps no order (none upstream), so nothing sorts the stage."""
    target = {"path": f"out/s{op_id}", "format": "parquet"}
    return {"@id": op_id, "op": "store", "input": input_id, "storageengine": "fs", "target": target}


def sink(op_id: int, input_id: int) -> dict[str, Any]:
    """A queue sink: it returns its records in order, sorting them (a global sort)."""
    return {"@id": op_id, "op": "store", "input": input_id, "storageengine": "q", "target": {}}


def inner_join(op_id: int, left: int, right: int, keys: tuple[str, str]) -> dict[str, Any]:
    condition = {"relationship": "==", "left": keys[0], "right": keys[1]}
    return {"@id": op_id, "op": "join", "left": left, "right": right, "type": "inner",
            "conditions": [condition]}  # fmt: skip


JOIN_PIPELINE = [
    scan(1, "orders", "o"),
    {"@id": 2, "op": "filter", "input": 1, "expr": "o.o_key > 4"},
    scan(3, "customers", "c"),
    inner_join(4, 2, 3, ("o.cust", "c.c_key")),
    # A test of both sides: it stays above the join, which then counts its own rows.
    {"@id": 5, "op": "filter", "input": 4, "expr": "c.name != 'b' || o.o_key > 30"},
    {
        "@id": 6,
        "op": "project",
        "input": 5,
        "projections": [{"ref": "output.k", "expr": "o.o_key"}],
    },
    store(7, 6),
]


def plan_of(root: Path, ops: list[dict[str, Any]]) -> Any:
    storage = {"q": {"type": "queue"}, "fs": {"type": "fs", "root": str(root)}}
    return parse_plan({"storage": storage, "query": ops})


def spark_run(spark: Any, root: Path, ops: list[dict[str, Any]]) -> tuple[SparkPlanRun, Any]:
    plan = plan_of(root, ops)
    engines = build_engines(plan, base_dir=None, classpath=[])
    run = SparkPlanRun(plan, spark, engines=engines, params={})
    return run, run.run()


def local_rows(root: Path, ops: list[dict[str, Any]]) -> dict[str, int | None]:
    result = run_plan(plan_of(root, ops), executor="local")
    return {op_id: counters.get("rows") for op_id, counters in result.metrics.items()}


def spark_rows(result: Any) -> dict[str, int | None]:
    return {op_id: counters.get("rows") for op_id, counters in result.metrics.items()}


def observations_in(run: SparkPlanRun, op_id: str) -> int:
    """The ``CollectMetrics`` nodes in operator ``op_id``'s optimized plan."""
    return str(run.frames[op_id]._jdf.queryExecution().optimizedPlan()).count("CollectMetrics")


def markers_in(run: SparkPlanRun, op_id: str) -> int:
    """The marker filters (``row_markers``) in operator ``op_id``'s optimized plan."""
    plan = str(run.frames[op_id]._jdf.queryExecution().optimizedPlan())
    return plan.count("SPARK_PARTITION_ID() >= -")


def test_a_join_pipeline_counts_its_flowing_rows_with_markers_as_the_local_executor(
    spark: Any, data: Path
) -> None:
    run, result = spark_run(spark, data, JOIN_PIPELINE)
    # The scan after its pushed filter and the join are counted as their rows flow: by markers.
    assert {"1", "4"} <= run.metrics.counting()
    assert observations_in(run, "5") == 0
    assert spark_rows(result) == local_rows(data, JOIN_PIPELINE)
    assert result.metrics["1"]["rows"] == 35 and result.metrics["4"]["rows"] == 25


def test_a_join_with_an_empty_scan_still_counts_zero_rows(spark: Any, data: Path) -> None:
    """A session leaving ``PropagateEmptyRelation`` out (``spark.drill.keepEmptyRelations``):
    the join over a scan of no files is planned, not replaced by an empty relation that would
    take its marker with it."""
    ops = [dict(op) for op in JOIN_PIPELINE]
    ops[2] = scan(3, "none", "c")
    ops[4] = {"@id": 5, "op": "filter", "input": 4, "expr": "o.o_key > 6 || c.c_key == 3"}
    with contextlib.ExitStack() as kept:
        for key, rules in KEEP_EMPTY_RELATIONS_RULES.items():
            kept.enter_context(spark_setting(spark, key, rules))
        run, result = spark_run(spark, data, ops)
    assert "4" in run.metrics.counting()
    assert result.metrics["4"]["rows"] == 0
    assert spark_rows(result) == local_rows(data, ops)


def test_local_rows_are_observed_not_marked(spark: Any, data: Path) -> None:
    """Spark evaluates a filter over local rows while planning (a constant, a scan of no files):
    a marker there would vanish, so those operators are observed."""
    ops = [
        {"@id": 1, "op": "constant", "content": [{"x": i} for i in range(6)]},
        {"@id": 2, "op": "filter", "input": 1, "expr": "x > 1"},
        {"@id": 3, "op": "constant", "content": [{"y": 2}, {"y": 3}, {"y": 3}]},
        inner_join(4, 2, 3, ("x", "y")),
        # A test of both sides: it stays above the join, which then counts its own rows.
        {"@id": 5, "op": "filter", "input": 4, "expr": "x + y > 4"},
        store(6, 5),  # a store that sorts nothing: only the local rows keep markers away
    ]
    run, result = spark_run(spark, data, ops)
    assert {"2", "4"} <= run.metrics.counting() and markers_in(run, "5") == 0
    assert result.metrics["2"]["rows"] == 4 and result.metrics["4"]["rows"] == 3
    assert spark_rows(result) == local_rows(data, ops)


def test_an_operator_a_limit_reads_is_observed(spark: Any, data: Path) -> None:
    ops = [
        scan(1, "events", "e", "json"),
        {"@id": 2, "op": "limit", "input": 1, "first": 0, "last": 3},
        sink(3, 2),
    ]
    run, result = spark_run(spark, data, ops)
    assert "1" in run.metrics.counting()
    assert observations_in(run, "1") == 1 and markers_in(run, "1") == 0
    assert result.metrics["2"]["rows"] == 3


def test_an_operator_two_stores_read_counts_once(spark: Any, data: Path) -> None:
    """Each store's job runs the marker; the count is the first's (as an observation's)."""
    ops = [
        scan(1, "events", "e", "json"),
        {"@id": 2, "op": "filter", "input": 1, "expr": "e.kind == 'a'"},
        store(3, 2),
        {
            "@id": 4,
            "op": "project",
            "input": 2,
            "projections": [{"ref": "output.i", "expr": "e.id"}],
        },
        store(5, 4),
    ]
    run, result = spark_run(spark, data, ops)
    assert "2" in run.metrics.counting() and observations_in(run, "4") == 0  # by a marker
    assert result.metrics["2"]["rows"] == 5
    assert spark_rows(result) == local_rows(data, ops)


def test_rows_a_global_sort_may_read_twice_are_observed(spark: Any, data: Path) -> None:
    """A sink sorts its records: Spark's range partitioning samples the stage below it in a job
    of its own, which a marker would count too (twice the rows); there the run observes."""
    ops = [*JOIN_PIPELINE[:-1], sink(7, 6)]
    with spark_setting(spark, ONE_TASK_SORT_BYTES, "-1"):  # always Spark's range partitioning
        run, result = spark_run(spark, data, ops)
    assert {"1", "4"} <= run.metrics.counting() and markers_in(run, "6") == 0
    assert spark_rows(result) == local_rows(data, ops)
    assert result.metrics["4"]["rows"] == 25


def test_rows_a_store_sorts_in_one_task_are_marked(spark: Any, data: Path) -> None:
    """A sort in one task samples nothing: the rows below it are counted once, by markers, and
    so are those of an order the store sorts for it (by its project's copies of the keys)."""
    sorted_by_store = [
        *JOIN_PIPELINE[:5],
        {"@id": 8, "op": "order", "input": 5, "orderings": [{"order": "desc", "expr": "o.o_key"}]},
        {**JOIN_PIPELINE[5], "input": 8},
    ]
    for ops in ([*JOIN_PIPELINE[:-1], sink(7, 6)], [*sorted_by_store, store(7, 6)]):
        run, result = spark_run(spark, data, ops)
        assert run.properties["7"].one_task_sort
        assert {"1", "4"} <= run.metrics.counting() and observations_in(run, "6") == 0
        assert spark_rows(result) == local_rows(data, ops)
        assert result.metrics["4"]["rows"] == 25
    assert run.properties["8"].store_sorted


AGGREGATE_PIPELINE = [
    scan(1, "orders", "o"),
    {"@id": 2, "op": "filter", "input": 1, "expr": "o.o_key > 4"},
    {"@id": 3, "op": "segment", "input": 2, "ref": "g", "exprs": ["o.cust"]},
    {
        "@id": 4,
        "op": "collapsingaggregate",
        "input": 3,
        "within": "g",
        "carryovers": ["o.cust"],
        "aggregations": [{"ref": "n", "expr": "count(1)"}],
    },
    {"@id": 6, "op": "filter", "input": 4, "expr": "o.cust > 4"},
    store(5, 6),
]


def test_an_aggregate_counts_its_input_and_its_groups_with_markers(spark: Any, data: Path) -> None:
    """Every record of the scan (after its pushed filter) reaches the aggregate: a marker on the
    aggregate's input counts them, another its groups (a filter reads them: no store counts
    them); no observation, no hidden count."""
    run, result = spark_run(spark, data, AGGREGATE_PIPELINE)
    assert {"1", "4"} <= run.metrics.counting() and observations_in(run, "4") == 0
    assert "input_rows" not in str(run.frames["4"]._jdf.queryExecution().optimizedPlan())
    assert spark_rows(result) == local_rows(data, AGGREGATE_PIPELINE)
    assert result.metrics["1"]["rows"] == 35 and result.metrics["4"]["rows"] == 7
    assert result.metrics["6"]["rows"] == 2


def test_an_aggregate_a_global_sort_reads_observes_its_input_with_its_groups(
    spark: Any, data: Path
) -> None:
    """An order its store does not sort for it may sort the groups globally, sampling the
    aggregate's stage again: its groups are not marked, and the rows it counts are observed with
    them, in one observation."""
    ops = [
        *AGGREGATE_PIPELINE[:-1],
        {"@id": 7, "op": "order", "input": 6, "orderings": [{"order": "desc", "expr": "n"}]},
        store(5, 7),
    ]
    run, result = spark_run(spark, data, ops)
    assert "1" in run.metrics.counting() and markers_in(run, "4") == 0
    assert observations_in(run, "4") == 1  # the aggregate's input and its groups
    assert spark_rows(result) == local_rows(data, ops)
    assert result.metrics["1"]["rows"] == 35 and result.metrics["4"]["rows"] == 7


def test_markers_count_the_rows_a_filter_lets_through(spark: Any) -> None:
    markers = row_markers(spark)
    assert isinstance(markers, RowMarkers)
    first, a = markers.mark(spark.range(10), 0)
    second, b = markers.mark(first.where("id % 3 = 0"), 1)
    assert second.count() == 4
    assert first.where(marker_condition(999)).count() == 10
    assert markers.counts([a, b]) == {a: 10, b: 4}
    assert markers.counts([]) == {}
    # A second run in progress marks its operators apart; one after the first reuses its numbers
    # (the code Spark generated for a marker's stage is reused with them).
    other = row_markers(spark)
    assert other is not None
    number = other.mark(spark.range(1), 0)[1]
    assert number != a and number % SLOT_SIZE == 1
    other.close()
    markers.close()
    again = row_markers(spark)
    assert again is not None and again.mark(spark.range(1), 0)[1] == a
    again.close()


def test_counts_read_only_the_wanted_markers_from_the_earliest_execution() -> None:
    text = (
        "7\t1,204\tSPARK_PARTITION_ID() >= -3)\n"
        "6\t12\tSPARK_PARTITION_ID() >= -3)\n"
        "6\t12\tSPARK_PARTITION_ID() >= -3)\n"
        "6\t5\tSPARK_PARTITION_ID() >= -4) AND (SPARK_PARTITION_ID() >= -5)\n"
        "6\t9\tSPARK_PARTITION_ID() >= -30)\n"
    )
    assert parse_counts(text, {3, 4, 5}) == {3: 12}
    assert parse_counts(text, {30}) == {30: 9}


def test_counts_that_cannot_be_read_leave_the_run_written_without_them(
    spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The stores are written when the counts are read: a reader that fails (another Spark's
    internals) costs the run its counts and a warning, not its result."""

    class Failing:
        def nextExecution(self, sc: Any, store: Any) -> int:  # the Java method
            return 0

        def counts(self, *args: Any) -> str:  # as py4j says a Java exception
            raise RuntimeError(
                "An error occurred while calling o132.counts.\n"
                ": java.lang.NoSuchMethodError: executionsList\n"
                "\tat py4j.reflection.MethodInvoker.invoke(MethodInvoker.java:244)\n"
            )

    markers = RowMarkers(spark, Failing())
    assert markers.counts([1]) == {}
    assert [r.getMessage() for r in caplog.records] == [
        "row counts of the run's operators could not be read: "
        "java.lang.NoSuchMethodError: executionsList"
    ]
    markers.close()


def test_a_reader_compiled_again_counts_as_the_first(spark: Any) -> None:
    """A new SparkContext in the same process compiles its reader again. py4j caches the
    methods it calls by class name: each reader's class has a name of its own, so the second
    is not called through the first one's methods ("object is not an instance of declaring
    class")."""
    first = row_markers(spark)
    assert first is not None
    again = RowMarkers(spark, _compile_reader(spark))
    for markers in (first, again):
        df, number = markers.mark(spark.range(6), 0)
        assert df.count() == 6
        assert markers.counts([number]) == {number: 6}
        markers.close()
