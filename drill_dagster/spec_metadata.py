"""Metadata a store's asset carries before it is ever materialized (on its spec).

What the plan says without running: ``dagster/table_name`` (the target path without its ``${...}`` parts;
``spark_catalog.<database>.<table>`` for a table of the catalog engine),
``dagster/column_schema`` where the plan settles every column's type (:mod:`drill_dagster.spec_schema`),
``dagster/column_lineage`` (each column the plan names and the upstream asset columns it is
computed from, by :mod:`engine.lineage`) and ``drill/column_lineage``, the same as a Markdown
table (Dagster's open-source UI does not draw ``dagster/column_lineage``). A materialization
records them again from what was actually written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dagster import AssetKey, MetadataValue, TableColumnDep, TableColumnLineage

from drill_dagster.plans import DrillStore, location_parts
from drill_dagster.spec_schema import definition_column_schema


def definition_metadata(
    store: DrillStore, key_of_scan: Callable[[str], AssetKey | None]
) -> Mapping[str, Any]:
    """The definition-time metadata of ``store``'s asset (nothing it cannot know)."""
    metadata: dict[str, Any] = {}
    table = "/".join(location_parts(store.target_path)) if store.target_path else ""
    if table:  # the fixed part of the path: clean for clean/day=${day}
        metadata["dagster/table_name"] = table
    if store.table is not None:  # a jdbc table or one of the session's catalog
        metadata["dagster/table_name"] = store.table.name
    schema = definition_column_schema(store)
    if schema is not None:  # only where the plan settles every column's type
        metadata["dagster/column_schema"] = schema
    lineage = store.plan.outline.lineage[store.id]
    rows: list[tuple[str, list[TableColumnDep]]] = []
    for column, sources in lineage.by_column().items():
        deps: dict[tuple[str, str], TableColumnDep] = {}
        for source in sorted(sources):
            key = key_of_scan(source.scan_id)
            if key is not None and source.column:
                deps[(key.to_user_string(), source.column)] = TableColumnDep(
                    asset_key=key, column_name=source.column
                )
        rows.append((column, list(deps.values())))
    if any(deps for _, deps in rows):
        metadata["dagster/column_lineage"] = TableColumnLineage(
            deps_by_column={column: deps for column, deps in rows if deps}
        )
    if rows:
        metadata["drill/column_lineage"] = MetadataValue.md(_markdown(rows, lineage.is_open))
    return metadata


def _markdown(rows: list[tuple[str, list[TableColumnDep]]], is_open: bool) -> str:
    lines = ["| column | computed from |", "|---|---|"]
    for column, deps in rows:
        sources = ", ".join(
            f"`{dep.asset_key.to_user_string()}`.`{dep.column_name}`" for dep in deps
        )
        lines.append(f"| `{column}` | {sources or '(no source column)'} |")
    if is_open:
        lines.append("")
        lines.append("The store also writes the columns of a scanned record as it is read.")
    return "\n".join(lines)
