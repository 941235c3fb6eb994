"""``drill-dagster run --pipes``: a plan run outside Dagster's process, reported through Pipes.

An asset body launches the command with a Pipes client (``PipesSubprocessClient``, or a cluster
client: EMR, Databricks, Kubernetes ...); the command runs the plan (Spark or the local
executor) and reports, through ``dagster-pipes``, one materialization per store with the
metadata the in-process ops record (column schema, row count, column lineage, the plan, operator
counters, code and data version, schema version) and the results of its checks::

    from dagster import PipesSubprocessClient
    from drill_dagster import drill_assets, pipes_extras

    @drill_assets(plan="plans/events_cleaned.json")
    def events_cleaned(context, pipes_subprocess_client: PipesSubprocessClient):
        return pipes_subprocess_client.run(
            command=["drill-dagster", "run", "--pipes", "plans/events_cleaned.json"],
            context=context,
            extras=pipes_extras(context),
        ).get_results()

:func:`pipes_extras` (orchestration side) tells the command which stores the run selected, under
which asset keys, with which checks, for which partition keys, and the schema version each
store had. Without it (a plain ``@asset`` around a one-store plan), the command reports every
store of the plan under the key Dagster gave the asset (one asset in scope) or under the default
translator's keys, the run's partition (a single key) from the Pipes context, and no checks.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dagster import (
    AssetKey,
    JsonMetadataValue,
    MarkdownMetadataValue,
    PathMetadataValue,
    TableColumnLineage,
    TableSchema,
)

from drill_dagster.execution import (
    materialization_metadata,
    previous_schema,
    run_stores_whole,
)

STORES = "drill/stores"
CHECKS = "drill/checks"
PARTITION_KEYS = "drill/partition_keys"
PREVIOUS = "drill/previous"


def pipes_extras(context: Any) -> dict[str, Any]:
    """The extras a Pipes client passes to ``drill-dagster run --pipes`` from a
    ``@drill_assets`` body: the selected stores and their asset keys, their selected checks,
    the run's partition keys and each store's last schema version."""
    from drill_dagster.partitions import run_keys

    specs = context.assets_def.specs_by_key
    stores: dict[str, str] = {}
    previous: dict[str, Any] = {}
    for key in context.selected_asset_keys:
        store_id = specs[key].metadata.get("drill/store_id")
        if store_id is None:
            continue
        stores[str(store_id)] = key.to_escaped_user_string()
        previous[str(store_id)] = previous_schema(context, key)
    by_key = {key: store_id for store_id, key in stores.items()}
    checks: dict[str, list[str]] = {}
    for check_key in context.selected_asset_check_keys:
        store_id = by_key.get(check_key.asset_key.to_escaped_user_string())
        if store_id is not None:
            checks.setdefault(store_id, []).append(check_key.name)
    return {
        STORES: stores,
        CHECKS: checks,
        PARTITION_KEYS: run_keys(context),
        PREVIOUS: previous,
    }


class PlanFailed(Exception):
    """A plan failed in a Pipes run; the message is the engine's (plan file, operator, data file
    and line). Pipes reports it to Dagster as the external process's exception."""


def run_with_pipes(args: argparse.Namespace) -> int:
    """``drill-dagster run --pipes``: run the plans, report each store through Pipes."""
    from dagster_pipes import open_dagster_pipes

    from drill_dagster.errors import DrillFailure
    from engine.errors import DrillError

    try:
        with open_dagster_pipes() as pipes:
            spark, own = _spark(args)
            try:
                for path in _plan_files(args.plans):
                    failure = None
                    try:
                        _report_plan(pipes, Path(path), args, spark)
                    except DrillFailure as err:
                        failure = err.description or str(err)
                    except DrillError as err:
                        failure = str(err)
                    if failure is not None:  # raised here: no chain of our frames to report
                        raise PlanFailed(failure)
            finally:
                if own:
                    spark.stop()
    except PlanFailed as err:
        print(str(err), file=sys.stderr)
        return 1
    return 0


def _plan_files(paths: Sequence[str]) -> list[str]:
    from engine.cli import _plan_files as plan_files

    return [str(p) for p in plan_files(paths)]


def _spark(args: argparse.Namespace) -> tuple[Any, bool]:
    if args.executor != "spark":
        return None, False
    from pyspark.sql import SparkSession

    from engine.exec.spark.session import SparkConfig, create_session

    spark = SparkSession.getActiveSession()
    if spark is not None:
        return spark, False
    conf = dict(item.split("=", 1) for item in args.conf)
    return create_session(SparkConfig(master=args.master, remote=args.remote, conf=conf)), True


def _report_plan(pipes: Any, path: Path, args: argparse.Namespace, spark: Any) -> None:
    from drill_dagster.assets import AssetKeys
    from drill_dagster.checks import check_results, written_rows
    from drill_dagster.errors import DrillFailure
    from drill_dagster.execution import data_version
    from drill_dagster.metadata import column_schema
    from drill_dagster.partitions import slices_for_keys
    from drill_dagster.plans import load_project
    from drill_dagster.project import PROJECT_FILE, load_project_config
    from drill_dagster.translator import DrillTranslator

    path = path.resolve()
    project = load_project(path.parent, config=load_project_config(path.parent / PROJECT_FILE))
    plan = next((p for p in project.plans if p.path == path), None)
    if plan is None:
        raise DrillFailure(description=f"{path}: not a plan of {path.parent}")
    keys = AssetKeys.of(project, DrillTranslator())
    extras = pipes.extras or {}
    stores = extras.get(STORES) or _default_stores(pipes, plan, keys)
    slices = slices_for_keys(
        plan.config.partitions,
        extras.get(PARTITION_KEYS) or _partition_keys(pipes),
        {**(plan.config.params or {}), **dict(item.split("=", 1) for item in args.param)},
    )
    writes = run_stores_whole(
        plan,
        list(stores),
        slices,
        executor=args.executor,
        classpath=args.classpath,
        spark=spark,
    )
    scan_keys = keys.scan_keys(plan)
    previous = extras.get(PREVIOUS) or {}
    for store_id, asset_key in stores.items():
        store, written = plan.store(store_id), writes[store_id]
        metadata = materialization_metadata(store, written, scan_keys, previous.get(store_id))
        if store_id not in previous:  # unknown without the instance: not guessed
            metadata.pop("drill/schema_version", None)
        if len(slices) == 1 and len(slices[0].partition_keys) == 1:  # one partition's own rows
            metadata["dagster/partition_row_count"] = metadata["dagster/row_count"]
        version = data_version([w for _, w in written.written])
        pipes.report_asset_materialization(
            metadata=pipes_metadata(metadata),
            data_version=version.value if version is not None else None,
            asset_key=asset_key,
        )
        selected = (extras.get(CHECKS) or {}).get(store_id, ())
        if store.config.checks is None or not selected:
            continue
        schema = column_schema(written.written[-1][1].schema)
        rows = written_rows(written.written)
        key = AssetKey.from_escaped_user_string(asset_key)
        for result in check_results(key, store.config.checks, selected, schema, rows):
            pipes.report_asset_check(
                check_name=str(result.check_name),
                passed=result.passed,
                severity=result.severity.value,
                metadata=pipes_metadata(
                    {**result.metadata, "description": result.description or ""}
                ),
                asset_key=asset_key,
            )


def _default_stores(pipes: Any, plan: Any, keys: Any) -> dict[str, str]:
    """Every store of the plan: under the one asset key in scope (a one-store plan), else under
    the default translator's keys."""
    in_scope = list(pipes.asset_keys or ()) if pipes.asset_keys is not None else []
    if len(plan.stores) == 1 and len(in_scope) == 1:
        return {plan.stores[0].id: in_scope[0]}
    return {s.id: keys.stores[(plan.name, s.id)].to_escaped_user_string() for s in plan.stores}


def _partition_keys(pipes: Any) -> list[str] | None:
    if not pipes.is_partition_step:
        return None
    key_range = pipes.partition_key_range
    if key_range["start"] != key_range["end"]:
        raise ValueError(
            "a run over a partition range needs its keys: pass "
            "extras=pipes_extras(context) to the Pipes client (drill_dagster.pipes_extras)"
        )
    return [key_range["start"]]


def pipes_metadata(metadata: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Dagster metadata values as Pipes metadata (``{"type": ..., "raw_value": ...}``)."""
    return {name: _pipes_value(value) for name, value in metadata.items()}


def _pipes_value(value: Any) -> dict[str, Any]:
    raw = getattr(value, "value", value)
    if isinstance(raw, TableSchema):
        return {"type": "table_schema", "raw_value": {"columns": [_column(c) for c in raw.columns]}}
    if isinstance(raw, TableColumnLineage):
        deps = {
            column: [{"asset_key": d.asset_key.path, "column_name": d.column_name} for d in deps]
            for column, deps in raw.deps_by_column.items()
        }
        return {"type": "table_column_lineage", "raw_value": {"deps_by_column": deps}}
    if isinstance(value, MarkdownMetadataValue):
        return {"type": "md", "raw_value": raw}
    if isinstance(value, PathMetadataValue):
        return {"type": "path", "raw_value": str(raw)}
    if isinstance(value, JsonMetadataValue):
        return {"type": "json", "raw_value": raw}
    if isinstance(raw, bool):
        return {"type": "bool", "raw_value": raw}
    if isinstance(raw, int):
        return {"type": "int", "raw_value": raw}
    if isinstance(raw, float):
        return {"type": "float", "raw_value": raw}
    if raw is None:
        return {"type": "null", "raw_value": None}
    return {"type": "text", "raw_value": str(raw)}


def _column(column: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": column.name, "type": column.type}
    if column.description:
        out["description"] = column.description
    if column.tags:
        out["tags"] = dict(column.tags)
    if column.constraints is not None:
        out["constraints"] = {
            "nullable": column.constraints.nullable,
            "unique": column.constraints.unique,
            "other": list(column.constraints.other),
        }
    return out
