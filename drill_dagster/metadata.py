"""Metadata of a store materialization: schema, row counts, location, column lineage, the plan.

Keys written on every materialization of a store asset:

========================== ==========================================================
``dagster/column_schema``  the stored columns; nested map members as ``parent.child``,
                           each with its Drill type (``REPEATED`` in the type, ``OPTIONAL``
                           as nullable)
``dagster/row_count``      rows written: each partition's own in a run of several keys
``dagster/partition_row_count`` rows of one partition (per partition, in partitioned runs)
``dagster/uri``            ``file://`` URI of the store target
``dagster/table_name``     ``database.schema.table`` of a ``jdbc`` store (instead of a URI)
``dagster/column_lineage`` the upstream asset columns each column is computed from
``drill/plan``             the plan, as Markdown (explain)
``drill/operator_metrics`` per-operator counters of the run (rows, files, ...)
``drill/plan_file``        the plan file
``drill/schema_version``   1 for the first schema seen, +1 each time the schema changes
========================== ==========================================================

>>> import pyarrow as pa
>>> schema = column_schema(pa.schema([pa.field("id", pa.int64(), nullable=False),
...     pa.field("user", pa.struct([pa.field("name", pa.string())]))]))
>>> [(c.name, c.type, c.constraints.nullable) for c in schema.columns]
[('id', 'BIGINT', False), ('user', 'MAP', True), ('user.name', 'VARCHAR', True)]
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from dagster import (
    AssetKey,
    MetadataValue,
    TableColumn,
    TableColumnConstraints,
    TableColumnDep,
    TableColumnLineage,
    TableSchema,
)

from engine.lineage import SourceColumn, StoreLineage
from engine.types import DataMode, MajorType, MinorType, from_arrow_field

SCHEMA_VERSION = "drill/schema_version"
SCHEMA_FINGERPRINT = "drill/schema_fingerprint"


@dataclass(frozen=True)
class WrittenStore:
    """What one run of a store wrote (from the engine's store result)."""

    location: str
    format: str
    row_count: int
    schema: pa.Schema
    files: tuple[str, ...] = ()
    version: str | None = None

    @staticmethod
    def of(result: Any) -> WrittenStore:
        """From an engine ``StoreResult`` or ``StoreSummary``."""
        return WrittenStore(
            location=str(result.location),
            format=str(result.format),
            row_count=int(result.row_count),
            schema=result.schema,
            files=tuple(str(f) for f in getattr(result, "files", ()) or ()),
            version=getattr(result, "version", None),
        )


def column_schema(schema: pa.Schema) -> TableSchema:
    """The Dagster table schema of an Arrow schema, nested map members included."""
    return TableSchema(columns=list(_columns(schema)))


def _columns(fields: Iterable[pa.Field], prefix: str = "") -> Iterable[TableColumn]:
    for arrow_field in fields:
        name = f"{prefix}{arrow_field.name}"
        try:
            drill = from_arrow_field(arrow_field)
        except TypeError:
            yield TableColumn(
                name,
                str(arrow_field.type),
                description=f"Arrow type {arrow_field.type} (no Drill type)",
                constraints=TableColumnConstraints(nullable=arrow_field.nullable),
            )
            continue
        # The type once: its name (REPEATED for a repeated mode) and nullable for OPTIONAL;
        # column_type() reads both back.
        yield TableColumn(
            name,
            _type_name(drill),
            constraints=TableColumnConstraints(nullable=drill.mode is not DataMode.REQUIRED),
        )
        members = _struct_members(arrow_field.type)
        if members is not None:
            yield from _columns(members, prefix=f"{name}.")


def column_type(column: TableColumn) -> tuple[str, str]:
    """``(minor type, data mode)`` of a column of :func:`column_schema`.

    >>> column_type(TableColumn("a", "REPEATED VARCHAR"))
    ('VARCHAR', 'REPEATED')
    >>> column_type(TableColumn("b", "LIST<MAP<x: BIGINT>>", constraints=TableColumnConstraints(nullable=False)))
    ('LIST', 'REQUIRED')
    """
    if "drill/type" in column.tags:  # materializations written before the tags were dropped
        return column.tags["drill/type"], column.tags.get("drill/mode", "")
    text = column.type
    repeated = text.startswith("REPEATED ")
    minor = text.removeprefix("REPEATED ").split("<", 1)[0]
    if repeated:
        return minor, DataMode.REPEATED.value
    nullable = column.constraints.nullable if column.constraints is not None else True
    return minor, (DataMode.OPTIONAL if nullable is not False else DataMode.REQUIRED).value


def _type_name(drill: MajorType) -> str:
    repeated = "REPEATED " if drill.mode is DataMode.REPEATED else ""
    if drill.minor is MinorType.LIST:
        return f"{repeated}{drill}"
    return f"{repeated}{drill.minor.value}"


def _struct_members(dtype: pa.DataType) -> list[pa.Field] | None:
    while pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        dtype = dtype.value_type
    return list(dtype) if pa.types.is_struct(dtype) else None


def lineage_metadata(
    lineage: StoreLineage,
    schema: pa.Schema,
    key_of_scan: Callable[[str], AssetKey | None],
) -> TableColumnLineage:
    """Which upstream asset columns each stored column is computed from.

    A column that holds a whole scanned record is traced member by member.
    """
    deps: dict[str, list[TableColumnDep]] = {}
    for arrow_field in schema:
        sources = set(lineage.sources_of(arrow_field.name))
        whole = {s for s in sources if not s.column}
        members = _struct_members(arrow_field.type)
        if whole and members is not None:
            sources -= whole
            for member in members:
                sources |= lineage.sources_of(arrow_field.name, member.name)
        found = _deps(sources, key_of_scan)
        if found:
            deps[arrow_field.name] = found
    return TableColumnLineage(deps_by_column=deps)


def _deps(
    sources: Iterable[SourceColumn], key_of_scan: Callable[[str], AssetKey | None]
) -> list[TableColumnDep]:
    found = {}
    for source in sorted(sources):
        key = key_of_scan(source.scan_id)
        if key is None or not source.column:
            continue
        found[(key.to_user_string(), source.column)] = TableColumnDep(
            asset_key=key, column_name=source.column
        )
    return list(found.values())


def schema_fingerprint(schema: pa.Schema) -> str:
    """A short hash of the stored columns and their types (metadata excluded)."""
    text = ";".join(f"{f.name}:{f.type}:{f.nullable}" for f in schema.remove_metadata())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def next_schema_version(previous: Mapping[str, Any] | None, fingerprint: str) -> int:
    """The schema version: the previous one if the schema is unchanged, else one more.

    >>> next_schema_version(None, "a"), next_schema_version({SCHEMA_VERSION: 3, SCHEMA_FINGERPRINT: "a"}, "a")
    (1, 3)
    >>> next_schema_version({SCHEMA_VERSION: 3, SCHEMA_FINGERPRINT: "a"}, "b")
    4
    """
    if not previous or SCHEMA_VERSION not in previous:
        return 1
    version = _plain(previous[SCHEMA_VERSION])
    same = _plain(previous.get(SCHEMA_FINGERPRINT)) == fingerprint
    return int(version) if same else int(version) + 1


def _plain(value: Any) -> Any:
    return getattr(value, "value", value)


def operator_metrics_markdown(
    metrics: Mapping[str, Mapping[str, Any]], names: Mapping[str, str]
) -> str:
    """Per-operator counters as a Markdown table, in plan order.

    >>> print(operator_metrics_markdown({"1": {"rows": 3}}, {"1": "scan 1"}))
    | operator | counters |
    |---|---|
    | scan 1 | rows=3 |
    """
    lines = ["| operator | counters |", "|---|---|"]
    for op_id, label in names.items():
        counters = metrics.get(op_id)
        if counters:
            text = ", ".join(f"{k}={v}" for k, v in counters.items())
            lines.append(f"| {label} | {text} |")
    return "\n".join(lines)


def store_metadata(
    *,
    written: list[WrittenStore],
    lineage: TableColumnLineage | None,
    explain: str,
    metrics: Mapping[str, Mapping[str, Any]],
    operator_names: Mapping[str, str],
    plan_file: Path,
    schema_version: int,
) -> dict[str, Any]:
    """The metadata of one store materialization (all slices of the run together)."""
    last = written[-1]
    metadata: dict[str, Any] = {
        "dagster/column_schema": column_schema(last.schema),
        "dagster/row_count": sum(w.row_count for w in written),
        "drill/plan": MetadataValue.md(f"```\n{explain}\n```"),
        "drill/operator_metrics": MetadataValue.md(
            operator_metrics_markdown(metrics, operator_names)
        ),
        "drill/operator_counters": MetadataValue.json(
            {
                op_id: dict(counters)
                for op_id, counters in metrics.items()
                if op_id in operator_names
            }
        ),
        "drill/plan_file": MetadataValue.path(str(plan_file)),
        "drill/format": last.format,
        "drill/files": sum(len(w.files) for w in written),
        SCHEMA_VERSION: schema_version,
        SCHEMA_FINGERPRINT: schema_fingerprint(last.schema),
    }
    if lineage is not None:
        metadata["dagster/column_lineage"] = lineage
    location = Path(last.location)
    if last.format == "table":  # a database table: database.schema.table
        metadata["dagster/table_name"] = last.location
    elif location.is_absolute():
        metadata["dagster/uri"] = location.as_uri()
    else:
        metadata["dagster/uri"] = last.location
    if last.version:
        metadata["drill/commit_version"] = last.version
    return metadata
