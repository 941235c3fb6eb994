"""The schedules plans declare, each running a job of its plan's stores (``<plan>_job``).

``schedule: {cron: "0 3 * * *"}`` runs the plan's job on that cron (for a partitioned plan: the
latest partition at each tick); ``schedule: {from_partitions: true}`` runs each new time-window
partition when it closes (Dagster's ``build_schedule_from_partitioned_job``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

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

from drill_dagster.errors import DrillDefinitionsError
from drill_dagster.plans import DrillPlan

# What define_asset_job returns (its class is not public API).
AssetJob = Any


def plan_job(plan: DrillPlan, keys: Sequence[AssetKey]) -> AssetJob:
    """The job that materializes every store of ``plan``: ``<plan>_job`` (made for a schedule)."""
    return define_asset_job(
        name=f"{plan.name}_job",
        selection=AssetSelection.assets(*keys),
        description=f"Every store of {plan.path.name}.",
        tags={"drill/plan": plan.name},
        executor_def=in_process_executor,  # the plan's ops share one process and Spark session
    )


def plan_schedule(plan: DrillPlan, job: AssetJob) -> ScheduleDefinition | None:
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
    job: AssetJob,
    name: str,
    cron: str,
    timezone: str | None,
    status: DefaultScheduleStatus,
) -> ScheduleDefinition:
    """A cron schedule of a partitioned plan: the latest time window closed at the tick, or
    every key of static partitions."""
    from drill_dagster.translator import partitions_def_from_config

    config = plan.config.partitions
    assert config is not None
    partitions = partitions_def_from_config(config)
    # The same windows with no end: the window that closed at a tick, even past the end.
    window = config.window
    unbounded = (
        partitions_def_from_config(
            config.model_copy(update={config.kind: window.model_copy(update={"end": None})})
        )
        if window is not None and window.end is not None
        else partitions
    )

    def requests(context: ScheduleEvaluationContext) -> Iterator[RunRequest | SkipReason]:
        # A generator: Dagster reads a returned list as one (invalid) item.
        if not isinstance(partitions, TimeWindowPartitionsDefinition):
            for key in partitions.get_partition_keys():
                yield RunRequest(partition_key=key)
            return
        now = context.scheduled_execution_time
        key = _last_key(partitions, now)
        if key is None:
            yield SkipReason("no partition has closed yet")
        elif _last_key(unbounded, now) != key:
            yield SkipReason(
                f"the partitions end with {key}, which has run its course: no partition "
                "closes any more (extend `end` in drill_project.yaml or stop the schedule)"
            )
        else:
            yield RunRequest(partition_key=key)

    return ScheduleDefinition(
        name=name,
        job=job,
        cron_schedule=cron,
        execution_timezone=timezone,
        default_status=status,
        execution_fn=requests,
    )


def _last_key(partitions: Any, now: Any) -> str | None:
    """The last partition key closed at ``now``."""
    keys = partitions.get_partition_keys(current_time=now)
    return keys[-1] if keys else None
