"""Order on Spark: the sequence column, runs of equal values, ``order`` and ``limit``.

Spark keeps no row order across shuffles, so every DataFrame of a run carries a *sequence column*
(a long, increasing in record order). An operator that keeps the order keeps the column; one that
makes a new order sorts by what defines it and numbers the rows again (:func:`renumber`:
``monotonically_increasing_id`` right above the sort is increasing in sort order, because a sort's
partitions are ranges in order and each is read in order).

>>> temp("run")
'__drill_run'
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

TEMP_PREFIX = "__drill_"
"""Columns the compiler adds for a while start with this; records never see them."""


def temp(name: str) -> str:
    """The name of a temporary column (``temp("run") == "__drill_run"``)."""
    return f"{TEMP_PREFIX}{name}"


def renumber(df: DataFrame, order: Sequence[Column | str], *, seq: str) -> DataFrame:
    """``df`` sorted by ``order`` with a new sequence column ``seq`` that follows that order."""
    return df.orderBy(*order).withColumn(seq, F.monotonically_increasing_id())


def sort_columns(keys: Sequence[tuple[Column, str, str]], *, seq: str) -> list[Column]:
    """Sort columns for ``(value, "asc"|"desc", "first"|"last")`` keys, most significant first,
    then ``seq`` so that ties keep input order (R-ORDER-STABLE). Nulls go where ``first``/``last``
    says whatever the direction."""
    columns = []
    for value, direction, nulls in keys:
        if direction == "desc":
            columns.append(
                value.desc_nulls_first() if nulls == "first" else value.desc_nulls_last()
            )
        else:
            columns.append(value.asc_nulls_first() if nulls == "first" else value.asc_nulls_last())
    return [*columns, F.col(seq).asc()]


def with_run_numbers(df: DataFrame, value: Column, *, seq: str, name: str) -> DataFrame:
    """``df`` with column ``name``: 0 for the first record, +1 each time ``value`` differs from the
    previous record's (null equals null; maps and arrays compare deeply)."""
    by_seq = Window.orderBy(seq)
    previous, change = temp("previous"), temp("change")
    starts = (
        F.when(F.col(previous).isNull(), F.lit(0))
        .when(value.eqNullSafe(F.col(previous).getField("v")), F.lit(0))
        .otherwise(F.lit(1))
    )
    running = by_seq.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return (
        df.withColumn(previous, F.lag(F.struct(value.alias("v"))).over(by_seq))
        .withColumn(change, starts)
        .withColumn(name, F.sum(change).over(running).cast("long"))
        .drop(previous, change)
    )


def order_rows(
    df: DataFrame,
    keys: Sequence[tuple[Column, str, str]],
    *,
    seq: str,
    within: Column | None = None,
) -> DataFrame:
    """``df`` sorted stably by ``keys``; with ``within``, inside each run of equal ``within`` values
    (runs stay in place)."""
    if within is None:
        return renumber(df, sort_columns(keys, seq=seq), seq=seq)
    run = temp("order_run")
    df = with_run_numbers(df, within, seq=seq, name=run)
    return renumber(df, [F.col(run), *sort_columns(keys, seq=seq)], seq=seq).drop(run)


def limit_rows(df: DataFrame, first: int, last: int | None, *, seq: str) -> DataFrame:
    """The records with 0-based index ``first <= i < last`` in sequence order (R-LIMIT)."""
    if last is not None and last <= first:
        return df.limit(0)
    if first == 0 and last is None:
        return df
    ordered = df.orderBy(seq)
    if last is not None:
        ordered = ordered.limit(last)
    return ordered.offset(first) if first else ordered


def top_rows(
    df: DataFrame, order: Sequence[Column], first: int, last: int, *, seq: str
) -> DataFrame:
    """The records with index ``first <= i < last`` of ``df`` sorted by ``order`` (which ends with
    the sequence column), numbered again: one top-N sort instead of a sort and a limit."""
    if last <= first:
        return df.limit(0)
    top = df.orderBy(*order).limit(last)
    if first:
        top = top.offset(first)
    # The top rows come out of one partition, in order: the new ids follow that order.
    return top.withColumn(seq, F.monotonically_increasing_id())


def with_row_index(df: DataFrame, *, seq: str, name: str) -> DataFrame:
    """``df`` with column ``name``: the record's 0-based index in sequence order (a long)."""
    return df.withColumn(name, (F.row_number().over(Window.orderBy(seq)) - 1).cast("long"))
