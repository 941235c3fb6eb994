"""Per-operator row counts on Spark, from ``DataFrame.observe``: no extra pass over the data.

Each operator's DataFrame is wrapped in an observation counting the rows that flow through it
while the plan's actions (the stores) run. Counts are read after the run without blocking: an
operator Spark never executed (optimised away, e.g. below ``limit 0``) has no count. Spark pushes
limits below the observation, so the operators feeding a ``limit`` count only the rows Spark read.

A scan that skips bad records (``onError: skip``) carries, from the Drill data source, rows that
count what each file skipped (:data:`~engine.exec.spark.datasource.SKIPPED_COLUMN`); the same
observation sums them into ``skipped_records`` and the rows are dropped right after it.

An operator that emits exactly one record per input record (:data:`ONE_TO_ONE`, and a filter left
with nothing to test because its scan applied its whole condition) is not observed: its count is
its input's; a ``collapsingaggregate`` without ``within`` nor ``target`` emits one record. Each
observation is a ``CollectMetrics`` node that splits Spark's whole-stage code generation and
costs the driver a dozen py4j calls and one more analysis. :meth:`OperatorMetrics.track` applies
this rule for both the engine's executor and the Dagster ops.

>>> OperatorMetrics().collect()
{}
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import Any

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from engine.exec.spark.datasource import SKIPPED_COLUMN

ROWS = "rows"
"""The metric name of an operator's row count."""

SKIPPED = "skipped_records"
"""The metric name of the bad records a scan skipped (``onError: skip``), as the local executor's."""


ONE_TO_ONE = frozenset({"transform", "project", "order", "segment"})
"""Operators whose row count is always their (single) input's."""


def limit_inputs(operators: Any) -> set[str]:
    """The ids of the operators a ``limit`` reads (Spark pushes the limit below them)."""
    return {op.input for op in operators if op.op == "limit" and op.input}


class OperatorMetrics:
    """Observations of the operators of one run, by operator id."""

    def __init__(self) -> None:
        self._observations: dict[str, Observation] = {}
        self._same: dict[str, str] = {}
        self._fixed: dict[str, int] = {}
        self._run = uuid.uuid4().hex[:12]

    def track(
        self,
        op: Any,
        df: DataFrame,
        *,
        before_limit: Collection[str] = (),
        unchanged: bool = False,
    ) -> DataFrame:
        """``df``, operator ``op``'s DataFrame, with its row count: observed, or derived from its
        input's (one-to-one operators; ``unchanged``: the operator returned its input as it is)
        or known (one record). ``before_limit``: ids read by a ``limit``
        (:func:`limit_inputs`), always observed since Spark counts only what the limit read."""
        if op.id in before_limit:
            return self.observe(op.id, df)
        if (op.op in ONE_TO_ONE or unchanged) and getattr(op, "input", None):
            self.same_as(op.id, op.input)
            return df
        if op.op == "collapsingaggregate" and op.within is None and op.target is None:
            self._fixed[op.id] = 1  # the aggregates of the whole input, even of no input
            return df
        return self.observe(op.id, df)

    def observe(self, operator_id: str, df: DataFrame) -> DataFrame:
        """``df`` counting its rows into operator ``operator_id``'s metrics (and, for a scan
        that counts skipped records, those too: its counting rows are dropped)."""
        observation = Observation(f"drill_{self._run}_{len(self._observations)}")
        self._observations[operator_id] = observation
        if SKIPPED_COLUMN not in df.columns:
            return df.observe(observation, F.count(F.lit(1)).alias(ROWS))
        skipped = F.col(SKIPPED_COLUMN)
        observed = df.observe(
            observation,
            F.count(F.when(skipped.isNull(), F.lit(1))).alias(ROWS),
            F.coalesce(F.sum(skipped), F.lit(0)).alias(SKIPPED),
        )
        return without_skip_counts(observed)

    def same_as(self, operator_id: str, input_id: str) -> None:
        """Operator ``operator_id`` counts what ``input_id`` counts (declared in plan order)."""
        self._same[operator_id] = input_id

    def collect(self) -> dict[str, dict[str, Any]]:
        """``{operator id: {"rows": n}}`` for every observed operator Spark executed
        (``skipped_records`` too for a scan that counts them)."""
        found: dict[str, dict[str, Any]] = {k: {ROWS: n} for k, n in self._fixed.items()}
        for operator_id, observation in self._observations.items():
            values = _ready(observation)
            if values and values.get(ROWS) is not None:
                found[operator_id] = {k: int(values[k]) for k in (ROWS, SKIPPED) if k in values}
        for operator_id, input_id in self._same.items():  # plan order: chains resolve in turn
            if input_id in found:
                found[operator_id] = {ROWS: found[input_id][ROWS]}
        return found


def without_skip_counts(df: DataFrame) -> DataFrame:
    """``df`` without a scan's rows that count skipped records (see the module docstring)."""
    if SKIPPED_COLUMN not in df.columns:
        return df
    return df.where(F.col(SKIPPED_COLUMN).isNull()).drop(SKIPPED_COLUMN)


def _ready(observation: Observation) -> dict[str, Any] | None:
    """The observed values, or None when no action has produced them (never waits)."""
    java = getattr(observation, "_jo", None)
    if java is not None and not java.future().isCompleted():
        return None
    try:
        return dict(observation.get)  # Spark Connect fills it when the action returns
    except Exception:  # an observation never attached, or one whose action failed
        return None
