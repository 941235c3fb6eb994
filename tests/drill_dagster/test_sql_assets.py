"""A plan step written in SQL (``.sql`` beside the plans) becomes an asset with lineage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from dagster import AssetKey, DagsterInstance, materialize

from drill_dagster import load_definitions
from engine.metadata import MetadataRepository

ORDERS = {
    "storage": {
        "raw": {"type": "fs", "root": "../data/raw"},
        "lake": {"type": "fs", "root": "../data/lake"},
    },
    "query": [
        {"@id": 1, "op": "scan", "storageengine": "raw", "ref": "o",
         "selection": {"path": "orders.json"}},
        {"@id": 2, "op": "project", "input": 1, "projections": [
            {"ref": "output.customer", "expr": "o.customer"},
            {"ref": "output.amount", "expr": "o.amount"}]},
        {"@id": 3, "op": "store", "input": 2, "storageengine": "lake",
         "target": {"path": "orders", "format": "parquet"}},
    ],
}  # fmt: skip

REVENUE_SQL = """-- store: lake.revenue
-- format: parquet
-- The revenue of each customer with more than one order.
SELECT customer, count(*) AS orders, sum(amount) AS revenue
FROM lake.orders
GROUP BY customer
HAVING count(*) > 1
ORDER BY revenue DESC
"""


def _project(tmp_path: Path) -> Path:
    raw = tmp_path / "data" / "raw"
    raw.mkdir(parents=True)
    rows = [("ann", 5), ("bob", 7), ("ann", 3), ("cy", 1), ("bob", 1)]
    (raw / "orders.json").write_text(
        "".join(json.dumps({"customer": c, "amount": a}) + "\n" for c, a in rows)
    )
    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "orders.json").write_text(json.dumps(ORDERS))
    (plans / "revenue.sql").write_text(REVENUE_SQL)
    return plans


def materialize_all(defs: Any) -> Any:
    """Materialize every asset of ``defs`` in one run on an ephemeral instance."""
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [*defs.assets],
            resources=defs.resources,
            instance=instance,
        )
    assert result.success
    return result


def test_sql_step_is_an_asset_reading_the_store_of_another_plan(tmp_path: Path) -> None:
    plans = _project(tmp_path)
    defs = load_definitions(plans, executor="local")
    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string(): key for key in graph.get_all_asset_keys()}
    revenue = next(k for name, k in keys.items() if "revenue" in name)
    orders = next(k for name, k in keys.items() if name.endswith("orders"))
    assert orders in graph.get(revenue).parent_keys

    materialize_all(defs)
    lake = tmp_path / "data" / "lake"
    table = pq.read_table(lake / "revenue")
    assert sorted(table.to_pylist(), key=lambda r: r["customer"]) == [
        {"customer": "ann", "orders": 2, "revenue": 8},
        {"customer": "bob", "orders": 2, "revenue": 8},
    ]
    # The store recorded what it wrote; a new repository (a new process) reads it back.
    repo = MetadataRepository({"lake": {"type": "fs", "root": str(lake)}})
    stats = repo.statistics(repo.resolve(["lake", "revenue"]))
    assert stats is not None and stats.row_count == 2 and stats.file_count == 1
    assert repo.schema(repo.resolve(["lake", "orders"])).names == ["customer", "amount"]
    assert isinstance(revenue, AssetKey)


SEMI_SQL = """-- store: lake.repeat_buyers
-- format: parquet
SELECT o.customer, o.amount
FROM lake.orders o
WHERE o.customer IN (SELECT i.customer FROM lake.orders i WHERE i.amount > 4)
  AND NOT EXISTS (SELECT 1 FROM lake.orders x WHERE x.customer = o.customer AND x.amount = 3)
"""


@pytest.mark.parametrize("executor", ["local", "spark"])
def test_sql_semi_and_anti_joins_materialize_op_by_op(
    tmp_path: Path, executor: str, spark: Any
) -> None:
    # The planner runs IN and NOT EXISTS as semi and anti joins, skipping the subquery's distinct
    # keys; the Dagster graph still has an op per operator as written.
    plans = _project(tmp_path)
    (plans / "repeat_buyers.sql").write_text(SEMI_SQL)
    defs = load_definitions(plans, executor=executor)
    result = materialize_all(defs)
    table = pq.read_table(tmp_path / "data" / "lake" / "repeat_buyers")
    assert sorted(table.to_pylist(), key=lambda r: (r["customer"], r["amount"])) == [
        {"customer": "bob", "amount": 1},
        {"customer": "bob", "amount": 7},
    ]
    if executor == "spark":  # the ops of the skipped keys compile nothing, and say why
        notes = [
            e.event_specific_data.metadata["drill/planner"].value
            for e in result.all_events
            if e.is_successful_output and "drill/planner" in e.event_specific_data.metadata
        ]
        skipped = [n for n in notes if "as a semi or anti join" in n]
        assert len(skipped) >= 2, notes  # one subquery's keys for IN, one for NOT EXISTS
