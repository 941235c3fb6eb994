"""`dagster/column_schema` on the spec, before any materialization: from the plan's types where
they are known (a scan's provided schema, typed expressions), and nothing where they are not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dagster import AssetKey, DagsterInstance
from dagster_runs import materialize_ok

from drill_dagster import load_definitions

Kit = Any
SCHEMA = [
    {"name": "id", "type": "BIGINT"},
    {"name": "amount", "type": "DOUBLE"},
    {"name": "kind", "type": "VARCHAR"},
]


def _typed_plan(projections: list[dict[str, str]]) -> dict[str, Any]:
    return {
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
                "selection": {"path": "events/2024-01-01", "format": "json", "schema": SCHEMA},
            },
            {"@id": 2, "op": "filter", "input": 1, "expr": "e.amount > 0"},
            {"@id": 3, "op": "project", "input": 2, "projections": projections},
            {
                "@id": 4,
                "op": "store",
                "input": 3,
                "storageengine": "lake",
                "target": {"path": "typed", "format": "parquet"},
            },
        ],
    }


def _columns(schema: Any) -> list[tuple[str, str, bool]]:
    return [(c.name, c.type, c.constraints.nullable) for c in schema.columns]


def test_the_spec_shows_the_schema_the_store_then_writes(tmp_path: Path, kit: Kit) -> None:
    plan = _typed_plan(
        [
            {"ref": "output.id", "expr": "e.id"},
            {"ref": "output.double_amount", "expr": "e.amount * 2"},
            {"ref": "output.kind", "expr": "upper(e.kind)"},
            {"ref": "output.big", "expr": "e.amount > 5"},
        ]
    )
    plans_dir = kit.write(tmp_path, plans={"typed": plan}, project_yaml=None)
    defs = load_definitions(plans_dir, executor="local")
    spec = defs.resolve_asset_graph().get(AssetKey("typed"))
    declared = spec.metadata["dagster/column_schema"]
    assert [(n, t) for n, t, _ in _columns(declared)] == [
        ("id", "BIGINT"),
        ("double_amount", "FLOAT8"),
        ("kind", "VARCHAR"),
        ("big", "BIT"),
    ]
    result = materialize_ok(defs, DagsterInstance.ephemeral())
    (event,) = result.get_asset_materialization_events()
    written = event.materialization.metadata["dagster/column_schema"].value
    assert _columns(written) == _columns(declared)  # what the spec said is what was written


def test_unknown_types_are_left_out_not_guessed(tmp_path: Path, kit: Kit) -> None:
    # A field the provided schema does not list: its type comes from the data.
    partly = _typed_plan(
        [{"ref": "output.id", "expr": "e.id"}, {"ref": "output.user", "expr": "e.user"}]
    )
    # Schemaless JSON read as is (the conftest's `clean` plan), and an aggregate.
    plans_dir = kit.write(
        tmp_path,
        plans={"partly": partly, "clean": kit.CLEAN, "split": kit.SPLIT},
        project_yaml=None,
    )
    defs = load_definitions(plans_dir, executor="local")
    graph = defs.resolve_asset_graph()
    for key in ("typed", "clean", "totals", "enriched"):
        metadata = graph.get(AssetKey(key)).metadata
        assert "dagster/column_schema" not in metadata, key
        assert "dagster/table_name" in metadata  # the rest of the spec metadata stays
