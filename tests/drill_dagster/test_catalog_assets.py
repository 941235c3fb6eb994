"""A store to a catalog table is an asset named by the table; a SQL step reads it by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from dagster import AssetKey, AssetsDefinition, DagsterInstance, materialize

from drill_dagster import load_definitions
from drill_dagster.errors import DrillDefinitionsError

pytestmark = pytest.mark.spark

ACTIVITY = {
    "storage": {
        "raw": {"type": "fs", "root": "../data/raw"},
        "cat": {"type": "catalog", "warehouse": "../data/warehouse", "database": "analytics"},
    },
    "query": [
        {"@id": 1, "op": "scan", "storageengine": "raw", "ref": "e",
         "selection": {"path": "events.json"}},
        {"@id": 2, "op": "project", "input": 1, "projections": [
            {"ref": "output.day", "expr": "e.day"}, {"ref": "output.user", "expr": "e.user"}]},
        {"@id": 3, "op": "store", "input": 2, "storageengine": "cat",
         "target": {"table": "daily_activity", "partitionBy": ["day"]}},
    ],
}  # fmt: skip

SUMMARY_SQL = """-- store: lake.summary
-- storage lake: {"type": "fs", "root": "../data/lake"}
SELECT day, count(*) AS users
FROM analytics.daily_activity
GROUP BY day
ORDER BY day
"""

EVENTS = [
    {"day": "d1", "user": "ann"},
    {"day": "d1", "user": "bob"},
    {"day": "d2", "user": "ann"},
]


def _project(root: Path) -> Path:
    raw = root / "data" / "raw"
    raw.mkdir(parents=True)
    (raw / "events.json").write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    plans = root / "plans"
    plans.mkdir()
    (plans / "activity.json").write_text(json.dumps(ACTIVITY))
    (plans / "summary.sql").write_text(SUMMARY_SQL)
    return plans


def test_catalog_table_asset_and_a_sql_step_reading_it(tmp_path: Path, spark: Any) -> None:
    plans = _project(tmp_path)
    defs = load_definitions(plans, executor="spark")
    graph = defs.resolve_asset_graph()
    table = AssetKey(["analytics", "daily_activity"])
    summary = next(k for k in graph.get_all_asset_keys() if k.path[-1] == "summary")
    assert table in graph.get(summary).parent_keys  # the SQL step depends on the table's asset
    specs = [s for a in defs.assets or () if isinstance(a, AssetsDefinition) for s in a.specs]
    spec = next(s for s in specs if s.key == table)
    assert spec.metadata["dagster/table_name"] == "spark_catalog.analytics.daily_activity"

    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [*defs.assets],  # type: ignore[list-item]
            resources=defs.resources,
            instance=instance,
        )
        assert result.success
        event = instance.get_latest_materialization_event(table)
        again = materialize([*defs.assets], resources=defs.resources, instance=instance)  # type: ignore[list-item]
        assert again.success
        latest = instance.get_latest_materialization_event(table)
    # A data version per store: the table's files, which each store writes anew.
    versions = [e.asset_materialization.tags["dagster/data_version"] for e in (event, latest)]  # type: ignore[union-attr]
    assert all(versions) and versions[0] != versions[1]
    metadata = event.asset_materialization.metadata  # type: ignore[union-attr]
    assert metadata["dagster/row_count"].value == 3
    columns = [c.name for c in metadata["dagster/column_schema"].value.columns]
    assert sorted(columns) == ["day", "user"]
    assert sorted((r.day, r.user) for r in spark.table("analytics.daily_activity").collect()) == [
        ("d1", "ann"),
        ("d1", "bob"),
        ("d2", "ann"),
    ]
    written = pq.read_table(tmp_path / "data" / "lake" / "summary").to_pylist()
    assert sorted((r["day"], r["users"]) for r in written) == [("d1", 2), ("d2", 1)]


def test_a_warehouse_outside_the_allowed_directories_is_refused(tmp_path: Path) -> None:
    plans = _project(tmp_path)
    plan = json.loads((plans / "activity.json").read_text())
    plan["storage"]["cat"]["warehouse"] = str(tmp_path.parent / "elsewhere")
    (plans / "activity.json").write_text(json.dumps(plan))
    with pytest.raises(DrillDefinitionsError, match=r"\$\.storage\.cat\.warehouse"):
        load_definitions(plans, executor="local")
