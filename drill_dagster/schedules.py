"""The schedules plans declare, each running a job of its plan's stores (``<plan>_job``).

``schedule: {cron: "0 3 * * *"}`` runs the plan's job on that cron (for a partitioned plan: the
latest partition at each tick); ``schedule: {from_partitions: true}`` runs each new time-window
partition when it closes (Dagster's ``build_schedule_from_partitioned_job``).
"""

from __future__ import annotations

from collections.abc import Sequence

from dagster import (
    AssetKey,
    AssetSelection,
    DefaultScheduleStatus,
    RunRequest,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SkipReason,
    TimeWindowPartitionsDefinition,
    build_schedule_from_partitioned_job,
    define_asset_job,
    in_process_executor,
)
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)

from drill_dagster.errors import DrillDefinitionsError
from drill_dagster.plans import DrillPlan


def plan_job(plan: DrillPlan, keys: Sequence[AssetKey]) -> UnresolvedAssetJobDefinition:
    """The job that materializes every store of ``plan``: ``<plan>_job`` (made for a schedule)."""
    return define_asset_job(
        name=f"{plan.name}_job",
        selection=AssetSelection.assets(*keys),
        description=f"Every store of {plan.path.name}.",
        tags={"drill/plan": plan.name},
        executor_def=in_process_executor,  # the plan's ops share one process and Spark session
    )


def plan_schedule(plan: DrillPlan, job: UnresolvedAssetJobDefinition) -> ScheduleDefinition | None:
    """The schedule ``plan`` declares (None when it declares none)."""
    config = plan.config.schedule
    if config is None:
        return None
    name = config.name or f"{plan.name}_schedule"
    status = DefaultScheduleStatus.RUNNING if config.running else DefaultScheduleStatus.STOPPED
    partitions = plan.config.partitions
    where = f"drill_project.yaml: plans.{plan.path.stem}.schedule"
    if config.from_partitions and (partitions is None or partitions.kind == "static"):
        raise DrillDefinitionsError(
            f"{where}: from_partitions needs hourly, daily, weekly or monthly partitions; "
            "give a cron instead"
        )
    if config.from_partitions:
        return build_schedule_from_partitioned_job(job, name=name, default_status=status)  # type: ignore[return-value]
    if partitions is not None:
        return _cron_for_partitions(plan, job, name, config.cron or "", config.timezone, status)
    return ScheduleDefinition(
        name=name,
        job=job,
        cron_schedule=config.cron or "",
        execution_timezone=config.timezone,
        default_status=status,
    )


def _cron_for_partitions(
    plan: DrillPlan,
    job: UnresolvedAssetJobDefinition,
    name: str,
    cron: str,
    timezone: str | None,
    status: DefaultScheduleStatus,
) -> ScheduleDefinition:
    """A cron schedule of a partitioned plan: the latest time window closed at the tick, or
    every key of static partitions."""
    from drill_dagster.translator import partitions_def_from_config

    partitions = partitions_def_from_config(plan.config.partitions)  # type: ignore[arg-type]

    def requests(context: ScheduleEvaluationContext) -> list[RunRequest] | SkipReason:
        if isinstance(partitions, TimeWindowPartitionsDefinition):
            key = partitions.get_last_partition_key(current_time=context.scheduled_execution_time)
            if key is None:
                return SkipReason("no partition has closed yet")
            return [RunRequest(partition_key=key)]
        return [RunRequest(partition_key=key) for key in partitions.get_partition_keys()]

    return ScheduleDefinition(
        name=name,
        job=job,
        cron_schedule=cron,
        execution_timezone=timezone,
        default_status=status,
        execution_fn=requests,
    )
