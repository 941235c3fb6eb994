"""``collapsingaggregate`` and ``runningaggregate`` on Spark: the aggregate and window forms of
every AGGREGATE and RUNNING function of the registry (:mod:`engine.expr.functions`).

A *run* is a maximal stretch of consecutive records (in sequence order) with the same ``within``
value; without ``within`` the whole input is one run.

* collapsing: one output record per run, from Spark aggregates grouped by the run number;
  carryovers come from the run's last record (``max_by`` over the sequence) or, with a target,
  from its last record whose target is true; a run with no such record emits nothing. With no
  ``within`` and no input, the aggregates of nothing are emitted once (0 for counts, null else).
* running: every record gets the aggregate of its run up to and including itself (window
  functions over the sequence, partitioned by the run number).

>>> sorted(AGGREGATE_FORMS), sorted(RUNNING_FORMS)
(['avg', 'count', 'count_distinct', 'max', 'min', 'sum'], ['avg', 'count', 'max', 'min', 'row_number', 'sum'])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.errors import DrillError
from engine.exec.spark.compiler_order import temp, with_run_numbers

AggregateCall = tuple[str, Sequence[Column]]
"""A registry function name and its compiled arguments."""

AGGREGATE_FORMS: dict[str, Callable[..., Column]] = {
    "count": F.count,  # non-null values; a constant argument counts rows
    "count_distinct": F.count_distinct,
    "sum": F.sum,
    "min": F.min,
    "max": F.max,
    "avg": F.avg,
}
"""Spark aggregate of each AGGREGATE function, applied to its argument columns."""

RUNNING_FORMS: dict[str, Callable[..., Column]] = {
    "row_number": F.row_number,  # no frame: the position in the run
    "count": F.count,
    "sum": F.sum,
    "min": F.min,
    "max": F.max,
    "avg": F.avg,
}
"""Spark window function of each RUNNING function (framed from the run's start to the record)."""

_NUMERIC_ONLY = ("sum", "avg")


class AggregateError(DrillError):
    """An aggregate that cannot be computed over its values (``sum`` of strings)."""


def prepare_arguments(df: DataFrame, calls: Sequence[AggregateCall]) -> list[AggregateCall]:
    """``calls`` checked against the types of their arguments: ``sum``/``avg`` of values that are
    not numbers raise :class:`AggregateError`; an untyped null argument becomes a null long (Spark
    cannot sum an untyped null)."""
    numeric = [(i, args[0]) for i, (name, args) in enumerate(calls) if name in _NUMERIC_ONLY]
    if not numeric:
        return [(name, list(args)) for name, args in calls]
    types = df.select(*[arg.alias(f"a{i}") for i, arg in numeric]).schema
    prepared = [(name, list(args)) for name, args in calls]
    for (i, arg), field in zip(numeric, types.fields):
        name = calls[i][0]
        if isinstance(field.dataType, T.NullType):
            prepared[i] = (name, [arg.cast("long")])
        elif not isinstance(field.dataType, T.NumericType):
            raise AggregateError(
                f"{name}() needs numbers, got values of type {field.dataType.simpleString()}"
            )
    return prepared


def collapse_rows(
    df: DataFrame,
    calls: Sequence[AggregateCall],
    carryovers: Sequence[Column],
    *,
    within: Column | None,
    target: Column | None,
    seq: str,
    aggregate_names: Sequence[str],
    carryover_names: Sequence[str],
    group_by: Sequence[Column] | None = None,
) -> DataFrame:
    """One row per run with ``aggregate_names[i]`` (aggregate of ``calls[i]``),
    ``carryover_names[i]`` (value of ``carryovers[i]``) and the run's first sequence number in
    ``seq``.

    ``group_by`` replaces runs by groups of equal key values wherever they are (what the runs of a
    segment's group number are): a plain, parallel ``groupBy``, ordered by first appearance."""
    calls = prepare_arguments(df, calls)
    aggregates = [
        AGGREGATE_FORMS[name](*args).alias(alias)
        for (name, args), alias in zip(calls, aggregate_names, strict=True)
    ]
    chosen = F.col(seq)
    has_target = temp("has_target")
    if target is not None:
        chosen = F.when(target, F.col(seq))
    carried = [
        F.max_by(value, chosen).alias(alias)
        for value, alias in zip(carryovers, carryover_names, strict=True)
    ]
    extras = [F.max(chosen).alias(has_target)] if target is not None else []
    first = F.min(seq).alias(seq)
    if group_by is not None:
        keys = list(group_by)
        if not keys:  # one group, and none for no input (a literal key would be an ordinal)
            df = df.withColumn(temp("one_group"), F.lit(0))
            keys = [F.col(temp("one_group"))]
        grouped = df.groupBy(*keys).agg(*aggregates, *carried, *extras, first)
        grouped = grouped.select(
            *aggregate_names,
            *carryover_names,
            *[n for n in (has_target, seq) if n in grouped.columns],
        )
    elif within is None:
        grouped = df.agg(*aggregates, *carried, *extras, first)
        grouped = grouped.withColumn(seq, F.coalesce(F.col(seq), F.lit(0).cast("long")))
    else:
        run = temp("ca_run")
        grouped = (
            with_run_numbers(df, within, seq=seq, name=run)
            .groupBy(run)
            .agg(*aggregates, *carried, *extras, first)
            .drop(run)
        )
    if target is not None:
        grouped = grouped.where(F.col(has_target).isNotNull()).drop(has_target)
    return grouped


def target_is_true(df: DataFrame, value: Column) -> Column:
    """A predicate for "the target is boolean true"; a target that is not a boolean never is."""
    dtype = df.select(value.alias("t")).schema.fields[0].dataType
    if isinstance(dtype, T.BooleanType):
        return F.coalesce(value, F.lit(False))
    return F.lit(False)


def running_rows(
    df: DataFrame,
    calls: Sequence[AggregateCall],
    *,
    partition: str | None,
    seq: str,
    names: Sequence[str],
) -> DataFrame:
    """``df`` with ``names[i]`` = the running value of ``calls[i]`` (see the module docstring);
    ``partition`` names a column of run numbers (:func:`with_run_numbers`), None for one run."""
    calls = prepare_arguments(df, calls)
    ordered = (Window.partitionBy(partition) if partition else Window).orderBy(seq)
    framed = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    for (name, args), alias in zip(calls, names, strict=True):
        if name == "row_number":
            value = F.row_number().over(ordered).cast("long")
        else:
            value = RUNNING_FORMS[name](*args).over(framed)
        df = df.withColumn(alias, value)
    return df
