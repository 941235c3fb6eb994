"""A Dagster run runs the plan the planner made, as ``run_plan`` does: the same pushdowns, the same
rows per operator, the same records; an operator the planner removed stays an op that says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import DagsterInstance
from dagster_runs import materialize_ok

from drill_dagster import load_definitions
from engine import run_plan

pytestmark = pytest.mark.spark

PLAN = {
    "storage": {
        "raw": {"type": "fs", "root": "../data/raw"},
        "lake": {"type": "fs", "root": "../data/lake"},
    },
    "query": [
        {
            "@id": 1,
            "op": "scan",
            "storageengine": "raw",
            "ref": "e",
            "selection": {"path": "orders", "format": "parquet"},
        },
        {"@id": 2, "op": "filter", "input": 1, "expr": "e.amount > 10"},
        {"@id": 3, "op": "filter", "input": 2, "expr": "1 < 2"},  # always true: removed
        {
            "@id": 4,
            "op": "project",
            "input": 3,
            "projections": [{"ref": "output.id", "expr": "e.id"}],
        },
        {
            "@id": 5,
            "op": "store",
            "input": 4,
            "storageengine": "lake",
            "target": {"path": "big", "format": "parquet"},
        },
    ],
}


def project(root: Path) -> Path:
    orders = root / "data/raw/orders"
    orders.mkdir(parents=True)
    table = pa.table(
        {
            "id": pa.array(range(40), pa.int64()),
            "amount": pa.array([i % 20 for i in range(40)], pa.int64()),
            "note": pa.array([f"n{i}" for i in range(40)]),
        }
    )
    pq.write_table(table, orders / "part-0.parquet")
    plans = root / "plans"
    plans.mkdir()
    (plans / "big.json").write_text(json.dumps(PLAN))
    return plans


def step_metadata(result: Any, step: str) -> dict[str, Any]:
    (event,) = [
        e for e in result.all_events if e.is_successful_output and e.step_key.endswith(step)
    ]
    return {k: v.value for k, v in event.event_specific_data.metadata.items()}


@pytest.mark.parametrize("executor", ["spark", "local"])
def test_a_dagster_run_runs_the_planned_plan(tmp_path: Path, executor: str, spark: Any) -> None:
    plans = project(tmp_path)
    defs = load_definitions(plans, executor=executor)
    graph = defs.resolve_assets_def("big").node_def
    # The graph keeps every operator as written; the one the planner removes says so.
    assert {node.name for node in graph.nodes} == {
        "scan_1",
        "filter_2",
        "filter_3",
        "project_4",
        "store_5",
    }
    removed = graph.description.split("#### filter_3\n\n")[1]
    assert removed.startswith("Removed by the planner: it passes every record through unchanged")
    assert "its readers read filter 2" in removed
    with DagsterInstance.ephemeral() as instance:
        result = materialize_ok(defs, instance, "big")
    written = pq.read_table(tmp_path / "data/lake/big").column("id").to_pylist()
    assert sorted(written) == [i for i in range(40) if i % 20 > 10]
    (event,) = result.get_asset_materialization_events()
    counters = event.materialization.metadata["drill/operator_counters"].value
    expected = run_plan(plans / "big.json", executor=executor, spark=spark)
    assert expected.stores[0].row_count == 18  # amounts 11..19, twice
    assert event.materialization.metadata["dagster/row_count"].value == 18
    for op_id in ("1", "2", "4", "5"):
        assert counters[op_id]["rows"] == expected.metrics[op_id]["rows"], op_id
    assert counters["3"]["rows"] == counters["2"]["rows"]  # it passed filter 2's rows on
    if executor == "spark":
        # The filter on a parquet column is pushed into the scan's read, as in run_plan.
        scan = step_metadata(result, "scan_1")
        assert scan["drill/planner"] == (
            "reads only the members amount, id; applies the pushed filter e.amount > 10 as it reads"
        )


def test_op_steps_carry_the_rows_known_before_the_store_runs(tmp_path: Path, spark: Any) -> None:
    """A parquet scan that reads every row counts them from its files' footers when its op
    compiles, and a project passes on one record per record: both op steps carry
    ``dagster/row_count``; every operator's rows, counted as the store wrote, are on the
    store step's output."""
    plans = project(tmp_path)
    plan = {**PLAN, "query": [PLAN["query"][0], {**PLAN["query"][3], "input": 1}, PLAN["query"][4]]}
    (plans / "big.json").write_text(json.dumps(plan))
    defs = load_definitions(plans, executor="spark")
    with DagsterInstance.ephemeral() as instance:
        result = materialize_ok(defs, instance, "big")
        records = instance.get_records_for_run(result.run_id).records
    outputs = {
        r.event_log_entry.step_key.split(".")[-1]: r.event_log_entry.dagster_event
        for r in records
        if r.event_log_entry.is_dagster_event
        and r.event_log_entry.dagster_event.is_successful_output
    }
    rows = {
        step: event.event_specific_data.metadata.get("dagster/row_count")
        for step, event in outputs.items()
    }
    assert rows["scan_1"].value == 40 and rows["project_4"].value == 40
    store = outputs["store_5"].event_specific_data.metadata
    assert store["dagster/row_count"].value == 40
    assert {k: v["rows"] for k, v in store["drill/operator_counters"].value.items()} == {
        "1": 40,
        "4": 40,
        "5": 40,
    }
