"""Scalar joins on Spark (planner property ``scalar_join``): a join with no conditions to a global
aggregate's one record is a scalar subquery Spark computes once, not a nested-loop join; the
records, their order and the row counts are the local executor's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.exec.spark.executor import SparkPlanRun
from engine.plan import parse_plan
from engine.run import build_engines, run_plan

pytestmark = pytest.mark.spark


@pytest.fixture
def data(tmp_path: Path) -> Path:
    prices = pa.table({"id": pa.array(range(12), pa.int64()), "price": [i % 5 for i in range(12)]})
    (tmp_path / "prices").mkdir()
    pq.write_table(prices, tmp_path / "prices" / "part-0.parquet")
    return tmp_path


def plan_of(root: Path, subquery_filter: str = "p.price >= 0", right_name: str = "s") -> Any:
    """Items priced above the average price of the items passing ``subquery_filter``, by price
    (ties in scan order); the average is named ``right_name``."""
    scan = {"op": "scan", "storageengine": "fs", "selection": {"path": "prices"}}
    ops = [
        {"@id": 1, **scan, "ref": "p"},
        {"@id": 2, **scan, "ref": "p"},
        {"@id": 3, "op": "filter", "input": 2, "expr": subquery_filter},
        {"@id": 4, "op": "collapsingaggregate", "input": 3,
         "aggregations": [{"ref": "avg_price", "expr": "avg(p.price)"},
                          {"ref": "n", "expr": "count(p.price)"}]},
        {"@id": 5, "op": "project", "input": 4,
         "projections": [{"ref": f"output.{right_name}", "expr": "avg_price"},
                         {"ref": "output.n", "expr": "n"}]},
        {"@id": 6, "op": "join", "left": 1, "right": 5, "type": "inner"},
        {"@id": 7, "op": "filter", "input": 6, "expr": f"n == 0 || p.price > {right_name}"},
        {"@id": 8, "op": "order", "input": 7, "orderings": [{"expr": "p.price", "order": "desc"}]},
        {"@id": 9, "op": "store", "input": 8, "storageengine": "q", "target": {}},
    ]  # fmt: skip
    storage = {"q": {"type": "queue"}, "fs": {"type": "fs", "root": str(root)}}
    return parse_plan({"storage": storage, "query": ops})


def spark_run(spark: Any, plan: Any) -> tuple[SparkPlanRun, Any]:
    run = SparkPlanRun(
        plan, spark, engines=build_engines(plan, base_dir=None, classpath=[]), params={}
    )
    return run, run.run()


def rows_of(result: Any) -> dict[str, Any]:
    return {op_id: counters.get("rows") for op_id, counters in result.metrics.items()}


@pytest.mark.parametrize("subquery_filter", ["p.price >= 0", "p.price > 100"])
def test_a_scalar_subquery_runs_once_as_spark_computes_its_own(
    spark: Any, data: Path, subquery_filter: str
) -> None:
    """Over some records and over none (the average is null, the count 0: every record kept)."""
    plan = plan_of(data, subquery_filter)
    run, result = spark_run(spark, plan)
    local = run_plan(plan, executor="local")
    assert result.records() == local.records() and result.records()
    assert rows_of(result) == rows_of(local)
    executed = run.frames["6"]._jdf.queryExecution().executedPlan().toString()
    assert "Subquery" in executed and "NestedLoopJoin" not in executed


def test_a_name_on_both_sides_is_merged_by_the_join(spark: Any, data: Path) -> None:
    """The right record's ``p`` merges with the left's (the right value wins unless null): no
    scalar subquery can say that, so the join runs as a join, with the local executor's result."""
    plan = plan_of(data, right_name="p.avg")
    run, result = spark_run(spark, plan)
    assert result.records() == run_plan(plan, executor="local").records()
    assert "Subquery" not in run.frames["6"]._jdf.queryExecution().executedPlan().toString()
