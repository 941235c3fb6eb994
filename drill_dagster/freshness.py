"""``freshness:``: how stale a store's asset may get before Dagster flags it.

A plan, a store (``drill_project.yaml``) or a whole :class:`~drill_dagster.component.
DrillPlansComponent` may declare either a time window or a cron deadline::

    freshness: {fail_window: 24h, warn_window: 12h}      # materialized within the last 24 h
    freshness: {cron: "0 9 * * *", lower_bound: 2h}     # by 09:00, from data after 07:00

Durations are a number of seconds or text such as ``90s``, ``30m``, ``12h``, ``1d`` or ``1d12h``.
The setting becomes the asset's Dagster ``FreshnessPolicy`` (``time_window`` or ``cron``).

>>> policy = FreshnessConfig.model_validate({"fail_window": "1d", "warn_window": "6h"}).policy()
>>> policy.fail_window.to_timedelta(), policy.warn_window.to_timedelta()
(datetime.timedelta(days=1), datetime.timedelta(seconds=21600))
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, model_validator

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")


def parse_duration(value: Any) -> timedelta:
    """``90``, ``"90s"``, ``"30m"``, ``"12h"``, ``"1d12h"`` as a :class:`~datetime.timedelta`.

    >>> parse_duration("1h30m")
    datetime.timedelta(seconds=5400)
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and value.strip():
        text = value.strip().lower().replace(" ", "")
        if text.replace(".", "", 1).isdigit():
            seconds = float(text)
        else:
            parts = _PART.findall(text)
            if "".join(n + u for n, u in parts) != text:
                raise ValueError(
                    f"{value!r} is not a duration: use seconds or e.g. 90s, 30m, 12h, 1d, 1d12h"
                )
            seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    else:
        raise ValueError(f"{value!r} is not a duration: use seconds or e.g. 30m, 12h, 1d")
    if seconds <= 0:
        raise ValueError(f"{value!r}: a duration must be positive")
    return timedelta(seconds=seconds)


Duration = Annotated[timedelta, BeforeValidator(parse_duration)]


class FreshnessConfig(BaseModel):
    """A freshness setting: ``fail_window`` (and ``warn_window``), or a ``cron`` deadline with
    ``lower_bound`` (how far before the deadline the data may come from) and ``timezone``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fail_window: Duration | None = None
    warn_window: Duration | None = None
    cron: str | None = None
    lower_bound: Duration | None = None
    timezone: str = "UTC"

    @model_validator(mode="after")
    def _one_kind(self) -> FreshnessConfig:
        if (self.fail_window is None) == (self.cron is None):
            raise ValueError("give either fail_window (and optionally warn_window) or cron")
        if self.cron is not None:
            if self.warn_window is not None:
                raise ValueError("warn_window goes with fail_window, not with cron")
            if self.lower_bound is None:
                raise ValueError(
                    "a cron deadline needs lower_bound: how long before the deadline the "
                    "data may have been materialized (e.g. 1h)"
                )
            from dagster import FreshnessPolicy

            try:
                FreshnessPolicy.cron(
                    deadline_cron=self.cron,
                    lower_bound_delta=self.lower_bound,
                    timezone=self.timezone,
                )
            except Exception as err:  # Dagster's own validation: cron, timezone, bound
                message = str(err).splitlines()[0].removeprefix("Invariant failed. Description: ")
                raise ValueError(f"cron {self.cron!r}: {message}") from None
        elif self.lower_bound is not None:
            raise ValueError("lower_bound goes with cron, not with fail_window")
        elif self.warn_window is not None and self.warn_window >= self.fail_window:
            raise ValueError("warn_window must be shorter than fail_window")
        return self

    def policy(self) -> Any:
        """The Dagster ``FreshnessPolicy`` of this setting."""
        from dagster import FreshnessPolicy

        if self.cron is not None:
            assert self.lower_bound is not None
            return FreshnessPolicy.cron(
                deadline_cron=self.cron, lower_bound_delta=self.lower_bound, timezone=self.timezone
            )
        assert self.fail_window is not None
        return FreshnessPolicy.time_window(
            fail_window=self.fail_window, warn_window=self.warn_window
        )
