"""``load_definitions``: a plans directory as Dagster definitions.

>>> import tempfile, json, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "copy.json").write_text(json.dumps({
...     "storage": {"fs": {"type": "fs", "root": "data"}}, "query": [
...     {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "r", "selection": {"path": "raw.json"}},
...     {"@id": 2, "op": "store", "input": 1, "storageengine": "fs", "target": {"path": "copy"}}]}))
>>> defs = load_definitions(d)
>>> sorted(k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys())
['copy', 'data/raw_json']
"""

from __future__ import annotations

import gc
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dagster import AssetsDefinition, Definitions

from drill_dagster.assets import AssetKeys, build_plan_assets
from drill_dagster.errors import DrillDefinitionsError
from drill_dagster.plans import DrillPlan, DrillProject, load_project, warehouses
from drill_dagster.project import PROJECT_FILE, load_project_config
from drill_dagster.resource import default_resources
from drill_dagster.schedules import plan_job, plan_schedule
from drill_dagster.translator import DrillTranslator


def load_definitions(
    plans_dir: Path | str,
    *,
    translator: DrillTranslator | None = None,
    spark_config: Mapping[str, Any] | None = None,
    classpath: Sequence[Path | str] = (),
    executor: str | None = None,
    project_file: Path | str | None = None,
    resources: Mapping[str, Any] | None = None,
    allowed_roots: Sequence[Path | str] | None = None,
) -> Definitions:
    """Every plan of ``plans_dir`` as assets, with checks, schedules (each with its plan's job)
    and resources.

    No executor is set: merge with ``Definitions(executor=in_process_executor)`` for one process
    (and one Spark session) per run, or keep Dagster's default, where each op runs in a process
    of its own and compiles what it reads from the plan (correct, but each starts Spark).

    ``spark_config`` (plain Spark settings) and ``executor`` (``spark`` or ``local``) override
    ``drill_project.yaml``'s; ``project_file`` defaults to ``drill_project.yaml`` in
    ``plans_dir``; ``resources`` are added to (or replace) the default ``drill`` resource and IO
    managers. ``allowed_roots`` lists the directories the plans' ``fs`` roots may lie under
    (:mod:`drill_dagster.allowed_roots`; default: ``drill_project.yaml``'s ``allowed_roots``, else
    the project directory and ``classpath``). A bad plan or project file raises
    :class:`~drill_dagster.errors.DrillDefinitionsError` naming the file and the JSON path or key.
    """
    plans_dir = Path(plans_dir)
    config_path = Path(project_file) if project_file else plans_dir / PROJECT_FILE
    with _collector_paused():
        try:
            config = load_project_config(config_path)
            project = load_project(
                plans_dir,
                config=config,
                config_path=config_path,
                allowed_roots=allowed_roots,
                data_dirs=classpath,
            )
            defs = definitions_for_project(
                project,
                translator=translator,
                spark_config=spark_config if spark_config is not None else config.spark_config,
                classpath=classpath,
                executor=executor or config.executor,
                resources=resources,
            )
            # What a code location does first with Definitions (Dagster caches it on the
            # object): binding resources rebuilds every assets definition, and doing it while
            # the collector is paused halves its cost.
            defs.get_repository_def()
            return defs
        except DrillDefinitionsError as err:
            # The message names the file and JSON path; our frames would only hide it.
            raise err.with_traceback(None) from None


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Definitions are many long-lived objects: cycle collection while building them only costs
    time (a third of it for a thousand plans).

    Afterwards the objects go straight to the oldest generation (``freeze`` then ``unfreeze``):
    the first young collection would otherwise scan all of them at once (~0.2 s for a thousand
    plans) only to promote them there. Garbage among them is still freed by the next full
    collection."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()


def definitions_for_project(
    project: DrillProject,
    *,
    translator: DrillTranslator | None = None,
    spark_config: Mapping[str, Any] | None = None,
    classpath: Sequence[Path | str] = (),
    executor: str | None = None,
    resources: Mapping[str, Any] | None = None,
    plans: Collection[str] | None = None,
) -> Definitions:
    """:func:`load_definitions` for an already loaded :class:`~drill_dagster.plans.DrillProject`.

    ``plans`` (plan names) limits the assets to those plans; a store of another plan that they
    read stays a dependency (by its key).
    """
    translator = translator or DrillTranslator()
    keys = AssetKeys.of(project, translator)
    chosen = [p for p in project.plans if plans is None or p.name in plans]
    read = None if plans is None else {id(scan) for p in chosen for scan in p.scans}
    assets: list[Any] = [
        translator.get_source_spec(source)
        for source in project.sources
        if read is None or any(id(scan) in read for scan in source.scans)
    ]
    jobs = []
    schedules = []
    for plan in chosen:
        plan_assets: AssetsDefinition = build_plan_assets(plan, translator, keys)
        assets.append(plan_assets)  # with its stores' checks (check_specs)
        if plan.config.schedule is not None:
            # Only a schedule needs a job: Dagster resolves every job against the whole asset
            # graph and snapshots it at each load (1,000 per-plan jobs were ~22 s of a code
            # server's 35-41 s load). A plan's assets are its group, materialized from there.
            job = plan_job(plan, [keys.stores[(plan.name, s.id)] for s in plan.stores])
            jobs.append(job)
            schedules.append(plan_schedule(plan, job))
    all_resources = {
        **default_resources(
            executor=executor,
            spark_config=spark_config,
            classpath=[str(Path(p).resolve()) for p in classpath],
            catalog_config=catalog_settings(chosen),
        ),
        **(resources or {}),
    }
    return Definitions(
        assets=assets,
        jobs=jobs,
        schedules=schedules,
        resources=all_resources,
    )


def catalog_settings(plans: Sequence[DrillPlan]) -> dict[str, str]:
    """The session settings of the plans' ``catalog`` engines: Hive support with the Derby
    metastore under the first warehouse (:func:`engine.storage.catalog.session_settings`)."""
    from engine.storage.catalog import CatalogEngine, session_settings

    engines = {
        f"{plan.name}.{name}": CatalogEngine(name, warehouse=warehouse)
        for plan in plans
        for name, warehouse in warehouses(plan).items()
    }
    return session_settings(engines)
