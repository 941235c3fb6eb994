"""Asset checks a plan asks for in ``drill_project.yaml``: a schema contract, row-count bounds.

Both are ``check_specs`` of the plan's multi-asset: the store's own step judges them from what it
has just written (its schema, each partition's rows), right after its materialization, so they
cost no Spark work and no step of their own. A ``blocking`` check that fails fails the store's
step (after the data is written and materialized), so the assets downstream do not run. A run
that selects only the checks judges the store's latest materialization (of the run's partition)
and writes nothing.

Dagster's own builders do not do this job, so these are ours: ``build_metadata_bounds_checks``
and ``build_column_schema_change_checks`` make checks of their own steps that read the latest
materialization from the instance (one value: in a run of several partitions, only the last
partition's row count), and the schema-change check compares two materializations with each
other rather than with the columns a plan promises.

* ``columns: {name: TYPE}``: each column must exist with that Drill type; ``TYPE`` is a minor type
  (``BIGINT``, ``VARCHAR``, ``MAP``, ...; aliases such as ``STRING`` or ``DOUBLE`` accepted),
  optionally preceded by a data mode (``REQUIRED``, ``OPTIONAL``, ``REPEATED``). Nested members are
  named ``parent.child``. ``exact: true`` also forbids columns not listed.
* ``row_count: {min, max}``: the rows written must lie within the bounds; in a run of several
  partitions, each partition's own rows.

>>> parse_type_contract("repeated string")
('VARCHAR', 'REPEATED')
>>> parse_type_contract("BIGINT")
('BIGINT', None)
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSpec,
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    TableSchema,
)

from drill_dagster.metadata import WrittenStore, column_type
from drill_dagster.partitions import RunSlice
from drill_dagster.plans import DrillStore
from drill_dagster.project import ChecksConfig
from engine.types import DataMode, MinorType, type_from_name

MODES = {m.value for m in DataMode}


def parse_type_contract(text: str) -> tuple[str, str | None]:
    """``(minor type, data mode or None)`` of a contract such as ``OPTIONAL BIGINT``."""
    words = text.upper().split()
    mode = words.pop(0) if len(words) == 2 and words[0] in MODES else None
    if len(words) != 1:
        raise ValueError(f"'{text}' is not a type: write a Drill type, e.g. BIGINT or REPEATED MAP")
    minor = type_from_name(words[0])
    if minor is None and words[0] in (MinorType.MAP.value, MinorType.LIST.value):
        minor = MinorType(words[0])
    if minor is None:
        raise ValueError(f"unknown Drill type '{words[0]}' (e.g. BIGINT, VARCHAR, FLOAT8, MAP)")
    return minor.value, mode


def schema_problems(schema: TableSchema, columns: Mapping[str, str], *, exact: bool) -> list[str]:
    """What is wrong with ``schema`` against the promised ``columns`` (empty: nothing)."""
    actual = {c.name: c for c in schema.columns}
    problems = []
    for name, text in columns.items():
        minor, mode = parse_type_contract(text)
        column = actual.get(name)
        if column is None:
            problems.append(f"column '{name}' is missing")
            continue
        found_minor, found_mode = column_type(column)
        if found_minor != minor or (mode is not None and found_mode != mode):
            expected = f"{mode} {minor}" if mode else minor
            problems.append(f"column '{name}' is {found_mode} {found_minor}, not {expected}")
    if exact:
        promised = set(columns)
        extra = [c.name for c in schema.columns if "." not in c.name and c.name not in promised]
        if extra:
            problems.append(f"columns not in the contract: {', '.join(extra)}")
    return problems


SCHEMA_CONTRACT = "schema_contract"
ROW_COUNT_BOUNDS = "row_count_bounds"


def store_check_specs(
    store: DrillStore, asset_key: AssetKey, config: ChecksConfig
) -> list[AssetCheckSpec]:
    """The check specs of one store (``schema_contract``, ``row_count_bounds``, where configured):
    ``check_specs`` of the plan's multi-asset, evaluated by the store's own step."""
    specs = []
    if config.columns:
        specs.append(
            AssetCheckSpec(
                SCHEMA_CONTRACT,
                asset=asset_key,
                description=f"The columns and Drill types {store.plan.path.name} promises.",
                blocking=config.blocking,
                metadata={"drill/columns": dict(config.columns), "drill/exact": config.exact},
            )
        )
    if config.row_count is not None:
        bounds = config.row_count
        own = " (each partition's own)" if store.plan.config.partitions else ""
        specs.append(
            AssetCheckSpec(
                ROW_COUNT_BOUNDS,
                asset=asset_key,
                description=f"Rows written: {bounds_text(bounds.min, bounds.max)}{own}.",
                blocking=config.blocking,
            )
        )
    return specs


def check_results(
    asset_key: AssetKey,
    config: ChecksConfig,
    selected: Collection[str],
    schema: TableSchema | None,
    rows_by_partition: Mapping[str | None, int],
) -> list[AssetCheckResult]:
    """The results of the ``selected`` checks (by name) of a store, judged from the schema and
    rows it wrote (or, when the step only checks, those of its latest materialization)."""
    results = []
    if SCHEMA_CONTRACT in selected and config.columns:
        if schema is None:
            results.append(_not_materialized(asset_key, SCHEMA_CONTRACT))
        else:
            problems = schema_problems(schema, config.columns, exact=config.exact)
            results.append(
                AssetCheckResult(
                    asset_key=asset_key,
                    check_name=SCHEMA_CONTRACT,
                    passed=not problems,
                    description="; ".join(problems) or "every promised column has its type",
                    metadata={"problems": len(problems)},
                )
            )
    if ROW_COUNT_BOUNDS in selected and config.row_count is not None:
        if not rows_by_partition:
            results.append(_not_materialized(asset_key, ROW_COUNT_BOUNDS))
        else:
            bounds = config.row_count
            results.append(
                row_count_result(
                    rows_by_partition, bounds.min, bounds.max, asset_key, ROW_COUNT_BOUNDS
                )
            )
    return results


def bounds_text(low: int | None, high: int | None) -> str:
    """The bounds in words.

    >>> bounds_text(1, None), bounds_text(None, 5), bounds_text(1, 5)
    ('at least 1', 'at most 5', 'between 1 and 5')
    """
    if low is not None and high is not None:
        return f"between {low} and {high}"
    return f"at least {low}" if low is not None else f"at most {high}"


def row_count_result(
    rows_by_partition: Mapping[str | None, int],
    low: int | None,
    high: int | None,
    asset_key: AssetKey | None = None,
    check_name: str | None = None,
) -> AssetCheckResult:
    """Whether every partition's rows (or the unpartitioned asset's, under None) lie within the
    bounds.

    >>> row_count_result({None: 7}, 1, None).description
    '7 rows'
    >>> row_count_result({"a": 2, "b": 0}, 1, None).description
    'partition b: 0 rows, not at least 1 (2 partitions, 2 rows)'
    """
    outside = {
        key: rows
        for key, rows in rows_by_partition.items()
        if (low is not None and rows < low) or (high is not None and rows > high)
    }
    total = sum(rows_by_partition.values())
    if len(rows_by_partition) == 1:
        text = f"{total} rows"
        if outside:
            text += f", not {bounds_text(low, high)}"
    elif outside:
        named = ", ".join(f"partition {key}: {rows} rows" for key, rows in outside.items())
        count = len(rows_by_partition)
        text = f"{named}, not {bounds_text(low, high)} ({count} partitions, {total} rows)"
    else:
        text = ", ".join(f"{key}: {rows} rows" for key, rows in rows_by_partition.items())
    return AssetCheckResult(
        asset_key=asset_key,
        check_name=check_name,
        passed=not outside,
        description=text,
        metadata={"rows": total, "partitions_outside": len(outside)},
    )


def _not_materialized(asset_key: AssetKey, name: str) -> AssetCheckResult:
    return AssetCheckResult(
        asset_key=asset_key,
        check_name=name,
        passed=False,
        description=f"{asset_key.to_user_string()} has no materialization with metadata yet",
    )


def written_rows(written: Sequence[tuple[RunSlice, WrittenStore]]) -> dict[str | None, int]:
    """Rows a store wrote: by partition key when each slice was one partition, else the total
    under None (an unpartitioned run, or a range passed to the plan at once)."""
    keyed = {s.partition_keys[0]: w.row_count for s, w in written if len(s.partition_keys) == 1}
    if keyed and len(keyed) == len(written):
        return keyed
    return {None: sum(w.row_count for _, w in written)}


def latest_written(
    instance: DagsterInstance, asset_key: AssetKey, partition_keys: Sequence[str]
) -> tuple[TableSchema | None, dict[str | None, int]]:
    """The schema and rows of the store's latest materialization (of each partition key), for a
    step that only checks."""
    schema = None
    rows: dict[str | None, int] = {}
    for key in partition_keys or [None]:
        records = instance.fetch_materializations(
            AssetRecordsFilter(asset_key=asset_key, asset_partitions=[key] if key else None),
            limit=1,
        ).records
        materialization = records[0].asset_materialization if records else None
        if materialization is None:
            continue
        metadata = materialization.metadata
        found = _value(metadata.get("dagster/column_schema"))
        schema = found if isinstance(found, TableSchema) else schema
        count = _value(metadata.get("dagster/row_count"))
        if isinstance(count, int):
            rows[key] = count
    return schema, rows


def _value(entry: Any) -> Any:
    return getattr(entry, "value", entry)
