"""``spark.drill.rowCounts``: ``operators`` (the default) counts every operator's rows;
``stores`` counts only what costs nothing (parquet footers, what a store wrote, the operators
whose count is another's) and the records a scan skips, and leaves Spark's plan without an
observation where rows flow. Records are the same either way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_settings import spark_setting

from engine.errors import PlanningError
from engine.exec.spark.executor import SparkPlanRun
from engine.exec.spark.settings import ROW_COUNTS
from engine.plan import parse_plan
from engine.run import build_engines, run_plan


@pytest.fixture
def data(tmp_path: Path) -> Path:
    for name, rows in {
        "orders": {"o": [1, 2, 3, 4, 5, 6], "c": [1, 1, 2, 3, 3, 9], "v": [5, 7, 1, 2, 8, 4]},
        "customers": {"c": [1, 2, 3], "name": ["ann", "bob", "cy"]},
    }.items():
        (tmp_path / name).mkdir()
        pq.write_table(pa.table(rows), tmp_path / name / "part-0.parquet")
    return tmp_path


def scan(op_id: int, name: str) -> dict[str, Any]:
    return {"@id": op_id, "op": "scan", "storageengine": "fs", "ref": name,
            "selection": {"path": name, "format": "parquet"}}  # fmt: skip


def joined_plan(root: Path) -> Any:
    """Orders over 2 joined to their customers, counted per customer, stored as parquet."""
    return parse_plan({
        "storage": {"fs": {"type": "fs", "root": str(root)}},
        "query": [
            scan(1, "orders"),
            {"@id": 2, "op": "filter", "input": 1, "expr": "orders.v > 2"},
            scan(3, "customers"),
            {"@id": 4, "op": "join", "left": 2, "right": 3, "type": "inner",
             "conditions": [{"relationship": "==", "left": "orders.c", "right": "customers.c"}]},
            {"@id": 5, "op": "segment", "input": 4, "ref": "g", "exprs": ["customers.name"]},
            {"@id": 6, "op": "collapsingaggregate", "input": 5, "within": "g",
             "carryovers": ["customers.name"], "aggregations": [{"ref": "n", "expr": "count(1)"}]},
            {"@id": 7, "op": "project", "input": 6, "projections": [
                {"ref": "output.name", "expr": "customers.name"}, {"ref": "output.n", "expr": "n"}]},
            {"@id": 8, "op": "store", "input": 7, "storageengine": "fs",
             "target": {"path": "out", "format": "parquet"}},
        ],
    })  # fmt: skip


def rows_of(result: Any) -> dict[str, int]:
    return {k: v["rows"] for k, v in result.metrics.items() if "rows" in v}


def stored(result: Any) -> list[dict[str, Any]]:
    (summary,) = result.stores
    rows = [row for file in summary.files for row in pq.read_table(file).to_pylist()]
    return sorted(rows, key=lambda r: r["name"])


def test_by_default_every_operator_is_counted(spark: Any, data: Path) -> None:
    result = run_plan(joined_plan(data), executor="spark", spark=spark)
    local = run_plan(joined_plan(data), executor="local")
    assert rows_of(result) == rows_of(local)
    assert set(rows_of(result)) == {str(i) for i in range(1, 9)}


def test_counting_stores_only_counts_what_costs_nothing(spark: Any, data: Path) -> None:
    """The filtered scan, the join and the aggregate's input flow uncounted; the unfiltered
    scan's footers, the store and the operators that emit its records keep their counts."""
    plan = joined_plan(data)
    with spark_setting(spark, ROW_COUNTS, "stores"):
        result = run_plan(plan, executor="spark", spark=spark)
    expected = [{"name": "ann", "n": 2}, {"name": "cy", "n": 1}]
    assert stored(result) == expected
    local = run_plan(plan, executor="local")  # replaces the store's files
    assert stored(local) == expected
    counted = rows_of(result)
    assert counted == {k: v for k, v in rows_of(local).items() if k in counted}
    assert set(counted) == {"3", "6", "7", "8"}
    assert result.stores[0].row_count == 2


def test_counting_stores_only_puts_no_observation_where_rows_flow(spark: Any, data: Path) -> None:
    plan = joined_plan(data)
    engines = build_engines(plan, base_dir=None, classpath=[])
    with spark_setting(spark, ROW_COUNTS, "stores"):
        run = SparkPlanRun(plan, spark, engines=engines, params={})
        run.run()
    executed = run.frames["7"]._jdf.queryExecution().executedPlan().toString()
    assert "CollectMetrics" not in str(executed)
    default = SparkPlanRun(plan, spark, engines=engines, params={})
    default.run()
    assert "CollectMetrics" in str(default.frames["7"]._jdf.queryExecution().executedPlan())


def test_counting_stores_only_still_counts_the_records_a_scan_skips(
    spark: Any, tmp_path: Path
) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.json").write_text('{"x": 1}\n{"x": \n{"x": 5}\n{"x": 7}\n')
    plan = parse_plan({
        "storage": {"fs": {"type": "fs", "root": str(tmp_path)}, "q": {"type": "queue"}},
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "t",
             "selection": {"path": "t", "format": "json", "onError": "skip"}},
            {"@id": 2, "op": "filter", "input": 1, "expr": "t.x > 2"},
            {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
        ],
    })  # fmt: skip
    with spark_setting(spark, ROW_COUNTS, "stores"):
        result = run_plan(plan, executor="spark", spark=spark)
    local = run_plan(plan, executor="local")
    assert result.records() == local.records() == [{"t": {"x": 5}}, {"t": {"x": 7}}]
    assert result.metrics["1"]["skipped_records"] == local.metrics["1"]["skipped_records"] == 1


def test_an_unknown_value_is_refused_naming_the_setting(spark: Any, data: Path) -> None:
    with spark_setting(spark, ROW_COUNTS, "some"), pytest.raises(PlanningError) as raised:
        run_plan(joined_plan(data), executor="spark", spark=spark)
    assert "spark.drill.rowCounts is 'some', not one of operators, stores" in str(raised.value)
