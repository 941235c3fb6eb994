"""Asset checks a plan asks for in ``drill_project.yaml``: a schema contract, row-count bounds.

Both read the store's latest materialization (``dagster/column_schema``, ``dagster/row_count``),
so they cost no Spark work and run right after the store in the same run.

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

from collections.abc import Mapping
from typing import Any

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetKey,
    TableSchema,
    asset_check,
)

from drill_dagster.metadata import materialized_in_run
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
        found_minor = column.tags.get("drill/type", column.type)
        found_mode = column.tags.get("drill/mode")
        if found_minor != minor or (mode is not None and found_mode != mode):
            expected = f"{mode} {minor}" if mode else minor
            problems.append(f"column '{name}' is {found_mode} {found_minor}, not {expected}")
    if exact:
        promised = set(columns)
        extra = [c.name for c in schema.columns if "." not in c.name and c.name not in promised]
        if extra:
            problems.append(f"columns not in the contract: {', '.join(extra)}")
    return problems


def build_store_checks(
    store: DrillStore, asset_key: AssetKey, config: ChecksConfig
) -> list[AssetChecksDefinition]:
    """The checks of one store: ``schema_contract`` and ``row_count_bounds`` where configured."""
    checks = []
    prefix = "_".join(asset_key.path)
    if config.columns:

        def schema_contract(context: AssetCheckExecutionContext) -> AssetCheckResult:
            metadata = _latest(context, asset_key)
            schema = _value(metadata.get("dagster/column_schema"))
            if not isinstance(schema, TableSchema):
                return _not_materialized(asset_key)
            problems = schema_problems(schema, config.columns, exact=config.exact)
            return AssetCheckResult(
                passed=not problems,
                severity=AssetCheckSeverity.ERROR,
                description="; ".join(problems) or "every promised column has its type",
                metadata={"problems": len(problems)},
            )

        schema_contract.__name__ = f"{prefix}_schema_contract"
        checks.append(
            asset_check(
                asset=asset_key,
                name="schema_contract",
                description=f"The columns and Drill types {store.plan.path.name} promises.",
                blocking=config.blocking,
                metadata={"drill/columns": dict(config.columns), "drill/exact": config.exact},
            )(_annotated(schema_contract))
        )
    if config.row_count is not None:
        bounds = config.row_count

        def row_count_bounds(context: AssetCheckExecutionContext) -> AssetCheckResult:
            rows_by_partition = _rows_by_partition(context, asset_key)
            if not rows_by_partition:
                return _not_materialized(asset_key)
            return row_count_result(rows_by_partition, bounds.min, bounds.max)

        row_count_bounds.__name__ = f"{prefix}_row_count_bounds"
        checks.append(
            asset_check(
                asset=asset_key,
                name="row_count_bounds",
                description=f"Rows written: {bounds_text(bounds.min, bounds.max)}"
                + (" (each partition's own)" if store.plan.config.partitions else "")
                + ".",
                blocking=config.blocking,
            )(_annotated(row_count_bounds))
        )
    return checks


def bounds_text(low: int | None, high: int | None) -> str:
    """The bounds in words.

    >>> bounds_text(1, None), bounds_text(None, 5), bounds_text(1, 5)
    ('at least 1', 'at most 5', 'between 1 and 5')
    """
    if low is not None and high is not None:
        return f"between {low} and {high}"
    return f"at least {low}" if low is not None else f"at most {high}"


def row_count_result(
    rows_by_partition: Mapping[str | None, int], low: int | None, high: int | None
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
        passed=not outside,
        description=text,
        metadata={"rows": total, "partitions_outside": len(outside)},
    )


def _rows_by_partition(
    context: AssetCheckExecutionContext, asset_key: AssetKey
) -> dict[str | None, int]:
    """Rows written by the store's latest run: by partition key when it wrote several, else
    under None."""
    written = materialized_in_run(context.run.run_id, asset_key)
    if written is not None and len(written.partition_rows) > 1:
        return dict(written.partition_rows)
    metadata = written.metadata if written is not None else _latest(context, asset_key)
    rows = _value(metadata.get("dagster/row_count"))
    if written is not None and written.partition_rows:
        (key,) = written.partition_rows
        return {key: written.partition_rows[key]}
    return {None: rows} if isinstance(rows, int) else {}


def _annotated(fn: Any) -> Any:
    # Dagster compares the annotation object itself; with postponed annotations it is a string.
    fn.__annotations__["context"] = AssetCheckExecutionContext
    return fn


def _latest(context: AssetCheckExecutionContext, asset_key: AssetKey) -> Mapping[str, Any]:
    written = materialized_in_run(context.run.run_id, asset_key)
    if written is not None:  # the store ran in this run: no query of the event log
        return written.metadata
    event = context.instance.get_latest_materialization_event(asset_key)
    if event is None or event.asset_materialization is None:
        return {}
    return event.asset_materialization.metadata


def _value(entry: Any) -> Any:
    return getattr(entry, "value", entry)


def _not_materialized(asset_key: AssetKey) -> AssetCheckResult:
    return AssetCheckResult(
        passed=False,
        description=f"{asset_key.to_user_string()} has no materialization with metadata yet",
    )
