"""``@drill_assets``: one plan's stores as a multi-asset whose body you write, like ``@dbt_assets``.

The decorated function runs in one op; ``drill.run(context)`` runs the part of the plan the
selected stores need (on Spark, or the local executor) and yields one ``MaterializeResult`` per
store, with the same metadata and checks as :func:`~drill_dagster.load_definitions`' graph
assets::

    from drill_dagster import DrillResource, drill_assets

    @drill_assets(plan="plans/events_cleaned.json")
    def events_cleaned(context, drill: DrillResource):
        context.log.info("before the plan")
        yield from drill.run(context)
        context.log.info("after the plan")

Keys, groups, deps, partitions and backfill policy are those the translator gives the plan's
stores; scans of other plans' stores in the same directory are dependencies, as in
:func:`load_definitions`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dagster import AssetCheckResult, AssetKey, AssetsDefinition, MaterializeResult, multi_asset

from drill_dagster.assets import AssetKeys, store_specs
from drill_dagster.checks import store_check_specs
from drill_dagster.errors import DrillDefinitionsError, DrillFailure
from drill_dagster.execution import run_stores_whole, store_checks, store_output
from drill_dagster.plans import DrillPlan, load_project
from drill_dagster.project import PROJECT_FILE, load_project_config
from drill_dagster.translator import DrillTranslator

PLAN_FILE_TAG = "drill/plan_file"
SCAN_KEYS_TAG = "drill/scan_keys"
PROJECT_FILE_TAG = "drill/project_file"


def drill_assets(
    *,
    plan: Path | str,
    translator: DrillTranslator | None = None,
    name: str | None = None,
    project_file: Path | str | None = None,
) -> Callable[[Callable[..., Any]], AssetsDefinition]:
    """Decorate a function that runs ``plan`` (usually ``yield from drill.run(context)``)."""
    path = Path(plan).resolve()
    translator = translator or DrillTranslator()
    config_path = Path(project_file).resolve() if project_file else path.parent / PROJECT_FILE
    config = load_project_config(config_path)
    project = load_project(path.parent, config=config)
    drill_plan = next((p for p in project.plans if p.path == path), None)
    if drill_plan is None:
        raise DrillDefinitionsError(f"plan file not found: {path}")
    keys = AssetKeys.of(project, translator)
    specs = store_specs(drill_plan, translator, keys)
    scan_keys = {k: v.to_user_string() for k, v in keys.scan_keys(drill_plan).items()}

    def decorate(fn: Callable[..., Any]) -> AssetsDefinition:
        return multi_asset(
            name=name or drill_plan.name,
            specs=specs,
            check_specs=[
                spec
                for store in drill_plan.stores
                if store.config.checks is not None
                for spec in store_check_specs(
                    store, keys.stores[(drill_plan.name, store.id)], store.config.checks
                )
            ],
            can_subset=True,
            backfill_policy=translator.get_backfill_policy(drill_plan),
            op_tags={
                **translator.get_op_tags(drill_plan),
                PLAN_FILE_TAG: str(path),
                PROJECT_FILE_TAG: str(config_path),
                SCAN_KEYS_TAG: json.dumps(scan_keys),
            },
        )(fn)

    return decorate


def run_in_context(drill: Any, context: Any) -> Iterator[MaterializeResult | AssetCheckResult]:
    """Run the selected stores of a ``@drill_assets`` plan; one result per store, with its
    checks' results."""
    from drill_dagster.assets import plan_slices

    tags = context.op_execution_context.op_def.tags
    if PLAN_FILE_TAG not in tags:
        raise DrillFailure(description="drill.run(context) works inside @drill_assets functions")
    plan = _plan(Path(tags[PLAN_FILE_TAG]), Path(tags[PROJECT_FILE_TAG]))
    scan_keys = {
        k: AssetKey.from_user_string(v) for k, v in json.loads(tags[SCAN_KEYS_TAG]).items()
    }
    specs = context.assets_def.specs_by_key
    checked_alone = {k.asset_key for k in context.selected_asset_check_keys}
    checked_alone -= set(context.selected_asset_keys)
    for key in sorted(checked_alone):  # checks without their asset: the latest materialization
        store = plan.store(str(specs[key].metadata["drill/store_id"]))
        yield from store_checks(context, store, key, None)
    selected = [
        (key, str(specs[key].metadata["drill/store_id"])) for key in context.selected_asset_keys
    ]
    if not selected:
        return
    slices = plan_slices(plan, context)
    spark = drill.spark_session() if drill.executor == "spark" else None
    writes = run_stores_whole(
        plan,
        [store_id for _, store_id in selected],
        slices,
        executor=drill.executor,
        classpath=drill.classpath,
        spark=spark,
    )
    for key, store_id in selected:
        store = plan.store(store_id)
        output = store_output(context, store, key, writes[store_id], scan_keys)
        yield MaterializeResult(
            asset_key=key,
            metadata=output.metadata,
            data_version=output.data_version,
            check_results=store_checks(context, store, key, writes[store_id]),
        )


_PLANS: dict[tuple[Path, float, Path, float], DrillPlan] = {}


def _plan(path: Path, config_path: Path) -> DrillPlan:
    config_time = config_path.stat().st_mtime if config_path.exists() else 0.0
    stamp = (path, path.stat().st_mtime, config_path, config_time)
    if stamp not in _PLANS:
        project = load_project(path.parent, config=load_project_config(config_path))
        _PLANS[stamp] = next(p for p in project.plans if p.path == path)
    return _PLANS[stamp]
