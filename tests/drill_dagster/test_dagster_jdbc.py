"""Dagster over ``jdbc`` plans, materialized for real against PostgreSQL: a table read is a source
asset keyed by database and table, a table store an asset with ``dagster/table_name``, its
columns and rows, and lineage runs from a table through files to a table."""

from __future__ import annotations

import json
import os
from pathlib import Path

from dagster import AssetKey, AssetSpec, DagsterInstance
from dagster_runs import materialize_ok

from drill_dagster import load_definitions

PASSWORD_ENV = "DRILL_TEST_PG_DAGSTER"


def write_plans(plans: Path, url: str) -> None:
    jdbc = {"type": "jdbc", "url": url, "user": "drill", "password_env": PASSWORD_ENV}
    lake = {"type": "fs", "root": "../lake"}
    columns = ["id", "name", "amount"]
    extract = {
        "storage": {"pg": jdbc, "lake": lake},
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "pg", "ref": "c",
             "selection": {"table": "public.shop_customers"}},
            {"@id": 2, "op": "project", "input": 1,
             "projections": [{"ref": f"output.{c}", "expr": f"c.{c}"} for c in columns]},
            {"@id": 3, "op": "store", "input": 2, "storageengine": "lake",
             "target": {"path": "customers_copy"}},
        ],
    }  # fmt: skip
    load = {
        "storage": {"pg": jdbc, "lake": lake},
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "lake", "ref": "c",
             "selection": {"path": "customers_copy", "format": "parquet"}},
            {"@id": 2, "op": "filter", "input": 1, "expr": "c.amount > 1"},
            {"@id": 3, "op": "project", "input": 2,
             "projections": [{"ref": "output.id", "expr": "c.id"},
                             {"ref": "output.big_amount", "expr": "c.amount"}]},
            {"@id": 4, "op": "store", "input": 3, "storageengine": "pg",
             "target": {"table": "analytics.big_customers"}},
        ],
    }  # fmt: skip
    (plans / "extract.json").write_text(json.dumps(extract))
    (plans / "load.json").write_text(json.dumps(load))


def test_tables_and_files_materialize_with_lineage(postgres, tmp_path: Path, capfd) -> None:
    os.environ[PASSWORD_ENV] = postgres.password
    postgres.execute(
        "DROP TABLE IF EXISTS shop_customers",
        "CREATE TABLE shop_customers (id int, name text, amount numeric(8,2))",
        "INSERT INTO shop_customers VALUES (1, 'ann', 0.50), (2, 'bob', 12.00), (3, NULL, 3.25)",
        "CREATE SCHEMA IF NOT EXISTS analytics",
    )
    plans = tmp_path / "plans"
    plans.mkdir()
    (tmp_path / "lake").mkdir()
    write_plans(plans, postgres.url)
    defs = load_definitions(plans, executor="local")
    source_key = AssetKey(["drill", "public", "shop_customers"])
    store_key = AssetKey(["drill", "analytics", "big_customers"])
    specs = {
        spec.key: spec
        for a in defs.assets or ()
        for spec in ([a] if isinstance(a, AssetSpec) else getattr(a, "specs", ()))
    }
    assert source_key in specs
    assert specs[source_key].metadata["dagster/table_name"] == "drill.public.shop_customers"
    assert specs[store_key].metadata["dagster/table_name"] == "drill.analytics.big_customers"
    assert {d.asset_key for d in specs[store_key].deps} == {AssetKey("customers_copy")}
    assert source_key in {d.asset_key for d in specs[AssetKey("customers_copy")].deps}

    result = materialize_ok(defs, DagsterInstance.ephemeral())
    events = {e.asset_key: e.materialization for e in result.get_asset_materialization_events()}
    metadata = events[store_key].metadata
    assert metadata["dagster/table_name"].value == "drill.analytics.big_customers"
    assert metadata["dagster/row_count"].value == 2
    assert [c.name for c in metadata["dagster/column_schema"].value.columns] == [
        "id",
        "big_amount",
    ]
    lineage = metadata["dagster/column_lineage"].value
    deps = lineage.deps_by_column["big_amount"]
    assert [(d.asset_key, d.column_name) for d in deps] == [(AssetKey("customers_copy"), "amount")]
    assert postgres.query("SELECT id FROM analytics.big_customers ORDER BY id") == [(2,), (3,)]
    # Each store of the table is a new data version: the transaction that swapped it in.
    first = events[store_key].tags["dagster/data_version"]
    again = materialize_ok(defs, DagsterInstance.ephemeral(), store_key)
    (second,) = [
        e.materialization.tags["dagster/data_version"]
        for e in again.get_asset_materialization_events()
        if e.asset_key == store_key
    ]
    xids = [int(v.split(".")[0]) for v in (first, second)]
    assert first != second and xids[0] < xids[1]
    out, err = capfd.readouterr()
    shown = [out, err, *(repr(dict(m.metadata)) for m in events.values())]
    assert all(postgres.password not in text for text in shown)
