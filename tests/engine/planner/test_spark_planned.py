"""The Spark executor runs the planned plan: the scan gets the projection and the pushed filter
(seen in Spark's own plan), the small side of a join is broadcast, and results equal the local
executor's."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import explain, parse_plan, run_plan
from engine.exec.spark.executor import SparkPlanRun
from engine.run import build_engines


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "orders").mkdir(parents=True)
    pq.write_table(
        pa.table({"id": [1, 2, 3, 4], "amount": [5.0, 50.0, 500.0, 7.5], "note": list("abcd")}),
        root / "orders" / "part-0.parquet",
    )
    lines = [
        {"id": i, "amount": i * 1.5, "user": {"name": f"u{i}", "tags": ["x"]}, "pad": "z" * 50}
        for i in range(20)
    ]
    (root / "events.json").write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    (root / "kinds.json").write_text('{"id": 1, "kind": "a"}\n{"id": 3, "kind": "b"}\n')
    return root


def plan_of(root: Path, query: list[dict]) -> object:
    storage = {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}}
    return parse_plan({"storage": storage, "query": query})


def test_parquet_scan_gets_projection_and_pushed_filter(spark, data: Path) -> None:
    plan = plan_of(
        data,
        [
            {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "o",
             "selection": {"path": "orders", "format": "parquet"}},
            {"@id": 2, "op": "filter", "input": 1, "expr": "o.amount > 10 * 2"},
            {"@id": 3, "op": "project", "input": 2,
             "projections": [{"ref": "output.id", "expr": "o.id"}]},
            {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}},
        ],
    )  # fmt: skip
    text = explain(plan, spark=spark)
    assert "scan-parquet #1 (scan 1): columns=[amount, id], filter=o.amount > 20" in text
    assert "PushedFilters: [IsNotNull(amount), GreaterThan(amount,20.0)]" in text
    # The plan's two columns, and the row index that numbers rows for the queue's record order.
    assert "ReadSchema: struct<amount:double,id:bigint,_tmp_metadata_row_index:bigint>" in text
    spark_records = run_plan(plan, executor="spark", spark=spark).records()
    assert spark_records == run_plan(plan, executor="local").records() == [{"id": 2}, {"id": 3}]


def test_nested_json_scan_using_one_field_reads_only_it(spark, data: Path) -> None:
    plan = plan_of(
        data,
        [
            {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e",
             "selection": {"path": "events.json"}},
            {"@id": 2, "op": "collapsingaggregate", "input": 1,
             "aggregations": [{"ref": "total", "expr": "sum(e.amount)"}]},
            {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
        ],
    )  # fmt: skip
    engines = build_engines(plan, base_dir=None, classpath=[])
    run = SparkPlanRun(plan, spark, engines=engines, params={})
    assert run.planned.operator("1").projection == ["amount"]
    (frame,) = run.compile_frames().values()
    scan_line = next(
        line for line in frame._jdf.queryExecution().toString().splitlines() if "ReadSchema" in line
    )
    assert "ReadSchema: struct<amount:double>" in scan_line
    assert run_plan(plan, executor="spark", spark=spark).records() == [{"total": 285.0}]


def test_small_join_side_is_broadcast(spark, data: Path) -> None:
    plan = plan_of(
        data,
        [
            {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "o",
             "selection": {"path": "orders", "format": "parquet"}},
            {"@id": 2, "op": "scan", "storageengine": "fs", "ref": "k",
             "selection": {"path": "kinds.json"}},
            {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "left",
             "conditions": [{"relationship": "==", "left": "o.id", "right": "k.id"}]},
            {"@id": 4, "op": "project", "input": 3, "projections": [
                {"ref": "output.id", "expr": "o.id"}, {"ref": "output.kind", "expr": "k.kind"}]},
            {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {}},
        ],
    )  # fmt: skip
    text = explain(plan, spark=spark)
    assert "broadcast-hash-join #4 (join 3): build=right" in text
    assert "BroadcastHashJoin" in text
    expected = [{"id": 1, "kind": "a"}, {"id": 2}, {"id": 3, "kind": "b"}, {"id": 4}]
    records = run_plan(plan, executor="spark", spark=spark).records()
    assert [{k: v for k, v in r.items() if v is not None} for r in records] == expected
