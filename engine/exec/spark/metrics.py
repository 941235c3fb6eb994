"""Per-operator row counts on Spark, from ``DataFrame.observe``: no extra pass over the data.

Each operator's DataFrame is wrapped in an observation counting the rows that flow through it
while the plan's actions (the stores) run. Counts are read after the run without blocking: an
operator Spark never executed (optimised away, e.g. below ``limit 0``) has no count. Spark pushes
limits below the observation, so the operators feeding a ``limit`` count only the rows Spark read.

>>> OperatorMetrics().collect()
{}
"""

from __future__ import annotations

import uuid
from typing import Any

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

ROWS = "rows"
"""The metric name of an operator's row count."""


class OperatorMetrics:
    """Observations of the operators of one run, by operator id."""

    def __init__(self) -> None:
        self._observations: dict[str, Observation] = {}
        self._run = uuid.uuid4().hex[:12]

    def observe(self, operator_id: str, df: DataFrame) -> DataFrame:
        """``df`` counting its rows into operator ``operator_id``'s metrics."""
        observation = Observation(f"drill_{self._run}_{len(self._observations)}")
        self._observations[operator_id] = observation
        return df.observe(observation, F.count(F.lit(1)).alias(ROWS))

    def collect(self) -> dict[str, dict[str, Any]]:
        """``{operator id: {"rows": n}}`` for every observed operator Spark executed."""
        found: dict[str, dict[str, Any]] = {}
        for operator_id, observation in self._observations.items():
            values = _ready(observation)
            if values and values.get(ROWS) is not None:
                found[operator_id] = {ROWS: int(values[ROWS])}
        return found


def _ready(observation: Observation) -> dict[str, Any] | None:
    """The observed values, or None when no action has produced them (never waits)."""
    java = getattr(observation, "_jo", None)
    if java is not None and not java.future().isCompleted():
        return None
    try:
        return dict(observation.get)  # Spark Connect fills it when the action returns
    except Exception:  # an observation never attached, or one whose action failed
        return None
