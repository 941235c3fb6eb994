"""``drill_project.yaml``: what a plans directory declares beyond the plans themselves.

The file sits beside the plans and is optional; every key in it is optional. Plans are named by
their file stem, stores by their target path (``events_cleaned``) or by ``"@<id>"``::

    executor: spark                  # spark (default) or local: how the ops run
    allowed_roots: [../data, /mnt/lake]  # where plans' fs roots may lie (relative: to this
                                     # directory); default: the project directory (the one
                                     # holding this one) and the classpath data directories
    spark_config:                    # plain Spark settings for the run's session
      spark.sql.shuffle.partitions: "4"
    defaults:                        # applied to every plan, each plan may override
      owners: ["team:data"]
      tags: {domain: web}
    plans:
      events_cleaned:
        group: ingest                # default: the plan file stem
        description: Cleaned click events
        owners: ["alice@example.com"]
        tags: {tier: bronze}
        params: {env: prod}          # fixed values of ${name} in selections and targets
        partitions:
          daily: {start: "2024-01-01"}   # or hourly / weekly / monthly: {start, end?, timezone?},
                                         # or static: [eu, us]
          param: day                 # ${day} in a selection or target receives the key
          range: keys                # a range run runs the plan once per key (in one run), or
                                     # `params`: once, with ${partition_start} and ${partition_end}
        schedule: {cron: "0 3 * * *"}    # or {from_partitions: true}
        automation: eager            # eager | on_missing | {on_cron: "0 * * * *"}
        skip_unchanged: true         # skip a store whose code and input files did not change
        freshness: {fail_window: 24h, warn_window: 12h}   # or {cron: "0 9 * * *", lower_bound: 2h}
        stores:
          events_cleaned:            # the store whose target path is events_cleaned
            key: [lake, events_cleaned]
            checks:
              columns: {event_id: BIGINT, user_id: BIGINT, day: VARCHAR}
              exact: false           # true: no other columns allowed
              row_count: {min: 1}
              blocking: true

Every mistake is reported with the file and the key, e.g.
``drill_project.yaml: plans.events_cleaned.partitions: give exactly one of daily, hourly, ...``.

>>> config = ProjectConfig.model_validate({"plans": {"p": {"partitions": {"daily": "2024-01-01"}}}})
>>> config.plan("p").partitions.kind, config.plan("p").partitions.window.start
('daily', '2024-01-01')
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from drill_dagster.errors import DrillDefinitionsError
from drill_dagster.freshness import FreshnessConfig

PROJECT_FILE = "drill_project.yaml"
TIME_WINDOWS = ("hourly", "daily", "weekly", "monthly")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _text(value: Any) -> Any:
    # YAML reads 2024-01-01 as a date and 5 as a number; keys and dates are text here
    if isinstance(value, date | datetime | int | float) and not isinstance(value, bool):
        return value.isoformat() if isinstance(value, date | datetime) else str(value)
    return value


Text = Annotated[str, BeforeValidator(_text)]


class TimeWindowConfig(_Model):
    """A time-window partitioning: the first key (``start``), optionally the last, the timezone."""

    start: Text
    end: Text | None = None
    timezone: str | None = None
    fmt: str | None = Field(None, description="strftime format of the keys (Dagster's default)")
    end_offset: int = 0


class PartitionsConfig(_Model):
    """How a plan is partitioned and how a key (or a key range) reaches the plan."""

    hourly: TimeWindowConfig | None = None
    daily: TimeWindowConfig | None = None
    weekly: TimeWindowConfig | None = None
    monthly: TimeWindowConfig | None = None
    static: list[Text] | None = None
    param: str = Field("partition", description="the ${name} that receives the partition key")
    range: Literal["keys", "params"] = "keys"
    start_param: str = "partition_start"
    end_param: str = "partition_end"
    max_partitions_per_run: int | None = Field(
        None, ge=1, description="backfill runs cover at most this many keys (default: all, one run)"
    )

    @field_validator("hourly", "daily", "weekly", "monthly", mode="before")
    @classmethod
    def _start_only(cls, value: Any) -> Any:
        return {"start": value} if isinstance(_text(value), str) else value

    @field_validator("static")
    @classmethod
    def _unique_keys(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            if not value:
                raise ValueError("static partitions need at least one key")
            doubled = sorted({k for k in value if value.count(k) > 1})
            if doubled:
                raise ValueError(f"static partition keys repeat: {', '.join(doubled)}")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> PartitionsConfig:
        given = [name for name in (*TIME_WINDOWS, "static") if getattr(self, name) is not None]
        if len(given) != 1:
            choices = ", ".join((*TIME_WINDOWS, "static"))
            found = f" (found {', '.join(given)})" if given else ""
            raise ValueError(f"give exactly one of {choices}{found}")
        return self

    @property
    def kind(self) -> str:
        """``hourly``, ``daily``, ``weekly``, ``monthly`` or ``static``."""
        return next(n for n in (*TIME_WINDOWS, "static") if getattr(self, n) is not None)

    @property
    def window(self) -> TimeWindowConfig | None:
        """The time window settings (None for static partitions)."""
        return None if self.kind == "static" else getattr(self, self.kind)


class ScheduleConfig(_Model):
    """When the plan's job runs: a ``cron`` expression, or ``from_partitions`` (each new key)."""

    cron: str | None = None
    from_partitions: bool = False
    timezone: str | None = None
    name: str | None = None
    running: bool = Field(False, description="start the schedule as running (default: stopped)")

    @model_validator(mode="after")
    def _one_kind(self) -> ScheduleConfig:
        if (self.cron is None) == (not self.from_partitions):
            raise ValueError("give either cron or from_partitions: true")
        return self


class RowCountBounds(_Model):
    min: int | None = Field(None, ge=0)
    max: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> RowCountBounds:
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is larger than max ({self.max})")
        return self


class ChecksConfig(_Model):
    """Asset checks of one store: the columns and Drill types it promises, row-count bounds."""

    columns: dict[str, str] = Field(default_factory=dict)
    exact: bool = False
    row_count: RowCountBounds | None = None
    blocking: bool = False

    @field_validator("columns")
    @classmethod
    def _known_types(cls, value: dict[str, str]) -> dict[str, str]:
        from drill_dagster.checks import parse_type_contract

        for column, text in value.items():
            try:
                parse_type_contract(text)
            except ValueError as err:
                raise ValueError(f"column {column!r}: {err}") from None
        return value


class StoreConfig(_Model):
    """Settings of one store's asset."""

    key: list[str] | str | None = None
    description: str | None = None
    owners: list[str] | None = None
    tags: dict[str, str] | None = None
    metadata: dict[str, Any] | None = None
    checks: ChecksConfig | None = None
    freshness: FreshnessConfig | None = None


AutomationConfig = Literal["eager", "on_missing"] | dict[Literal["on_cron"], str]


class PlanDefaults(_Model):
    """What every plan gets unless it says otherwise."""

    group: str | None = None
    owners: list[str] | None = None
    tags: dict[str, str] | None = None
    automation: AutomationConfig | None = None
    params: dict[str, Text] | None = None
    skip_unchanged: bool | None = Field(
        None,
        description="skip a store whose code version and inputs are those of its last "
        "materialization",
    )
    freshness: FreshnessConfig | None = None


class PlanConfig(PlanDefaults):
    """Settings of one plan (named by its file stem)."""

    description: str | None = None
    partitions: PartitionsConfig | None = None
    schedule: ScheduleConfig | None = None
    stores: dict[str, StoreConfig] = Field(default_factory=dict)

    def with_defaults(self, defaults: PlanDefaults) -> PlanConfig:
        """This plan's settings, unset ones taken from ``defaults`` (tags and params merged)."""
        update: dict[str, Any] = {}
        for name in ("group", "owners", "automation", "skip_unchanged", "freshness"):
            if getattr(self, name) is None and getattr(defaults, name) is not None:
                update[name] = getattr(defaults, name)
        for name in ("tags", "params"):
            merged = {**(getattr(defaults, name) or {}), **(getattr(self, name) or {})}
            if merged:
                update[name] = merged
        return self.model_copy(update=update) if update else self  # frozen: sharing is safe


class ProjectConfig(_Model):
    """The whole ``drill_project.yaml``."""

    version: Literal[1] = 1
    executor: Literal["spark", "local"] | None = None
    spark_config: dict[str, Any] | None = None
    allowed_roots: list[str] | None = None
    defaults: PlanDefaults = Field(default_factory=PlanDefaults)
    plans: dict[str, PlanConfig] = Field(default_factory=dict)

    def plan(self, name: str) -> PlanConfig:
        """The settings of plan ``name`` with the defaults applied."""
        return self.plans.get(name, PlanConfig()).with_defaults(self.defaults)


def load_project_config(path: Path) -> ProjectConfig:
    """Read and validate ``path``; a missing file is an empty configuration.

    Raises :class:`~drill_dagster.errors.DrillDefinitionsError` naming the file and each bad key.
    """
    if not path.is_file():
        return ProjectConfig()
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise DrillDefinitionsError(f"{path}{where}: not valid YAML: {problem}") from None
    if document is None:
        return ProjectConfig()
    if not isinstance(document, dict):
        raise DrillDefinitionsError(
            f"{path}: expected a mapping with keys such as plans and defaults, "
            f"not {type(document).__name__}"
        )
    try:
        return ProjectConfig.model_validate(document)
    except ValidationError as err:
        raise DrillDefinitionsError(_describe(path, err)) from None


def _describe(path: Path, error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        key = ".".join(str(part) for part in item["loc"] if not _is_union_tag(part))
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown key"
        lines.append(f"  {key or '(top)'}: {message}")
    count = f"{len(lines)} problem" + ("s" if len(lines) != 1 else "")
    return f"{path}: {count}\n" + "\n".join(dict.fromkeys(lines))


def _is_union_tag(part: object) -> bool:
    # pydantic names union members in locations ("literal['eager','on_missing']"): not a key
    return isinstance(part, str) and ("[" in part or part.startswith("dict["))
