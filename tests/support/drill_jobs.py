"""Reconstructable jobs of a plans project, for ``dagster.execute_job`` in tests.

``execute_job`` (re-execution, the multiprocess executor) needs a job Dagster can rebuild in
another run or process: :func:`reconstructable_job` points at :func:`every_asset_job` in this
module with its arguments (Dagster caches a rebuilt job by its pointer, arguments included).
A step process of the multiprocess executor imports this module: ``tests/support`` must be on
its ``PYTHONPATH``.
"""

from __future__ import annotations

from dagster import (
    AssetSelection,
    Definitions,
    JobDefinition,
    build_reconstructable_job,
    define_asset_job,
    in_process_executor,
    multiprocess_executor,
)

from drill_dagster import load_definitions

EXECUTORS = {"in_process": in_process_executor, "multiprocess": multiprocess_executor}


def every_asset_job(plans_dir: str, executor: str, dagster_executor: str) -> JobDefinition:
    """Every asset of the project (and its checks), the ``drill`` resource's ``executor``
    (``spark`` or ``local``), run by Dagster's ``in_process`` or ``multiprocess`` executor, or
    (``default``) by whatever Dagster uses when nobody sets one."""
    defs = load_definitions(plans_dir, executor=executor)
    job = define_asset_job(
        "everything",
        selection=AssetSelection.all(),
        executor_def=EXECUTORS.get(dagster_executor),
    )
    return Definitions.merge(defs, Definitions(jobs=[job])).resolve_job_def("everything")


def reconstructable_job(plans_dir: object, executor: str, dagster_executor: str = "in_process"):  # type: ignore[no-untyped-def]
    """:func:`every_asset_job` as a reconstructable job for ``execute_job``."""
    return build_reconstructable_job(
        "drill_jobs",
        "every_asset_job",
        reconstructable_args=(str(plans_dir), executor, dagster_executor),
    )
