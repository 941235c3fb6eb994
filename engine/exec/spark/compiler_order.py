"""Order on Spark: the sequence column, runs of equal values, ``order`` and ``limit``.

Spark keeps no row order across shuffles, so every DataFrame of a run carries a *sequence column*:
any orderable value, increasing in record order (smaller is earlier). An operator that keeps the
order keeps the column. One that makes a new order does not sort: it builds a new sequence value
from what defines the order (:func:`lazy_order`, :func:`sequence_pair`), and only what needs the
order sorts by it (a store whose plan orders its records, ``limit``, a queue sink). So a plan whose
order no one observes runs without a sort, and Spark prunes the unused sequence values.

Two longs pair into a ``decimal(38, 0)`` (``a * 2**63 + b``): still a fixed-width value, so
aggregates over it (a group's first record) stay hash aggregates; anything else pairs into a struct.
:func:`renumber` (sort, then ``monotonically_increasing_id``, increasing in sort order because a
sort's partitions are ranges in order) is left for where a dense order is needed.

>>> temp("run")
'__drill_run'
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from decimal import Decimal
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

TEMP_PREFIX = "__drill_"
"""Columns the compiler adds for a while start with this; records never see them."""


def temp(name: str) -> str:
    """The name of a temporary column (``temp("run") == "__drill_run"``)."""
    return f"{TEMP_PREFIX}{name}"


def renumber(df: DataFrame, order: Sequence[Column | str], *, seq: str) -> DataFrame:
    """``df`` sorted by ``order`` with a new sequence column ``seq`` that follows that order."""
    return df.orderBy(*order).withColumn(seq, F.monotonically_increasing_id())


PAIR = T.DecimalType(38, 0)
"""The type of two paired long sequence values (``a * 2**63 + b`` fits 38 digits)."""
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def sequence_pair(
    first: Column, first_type: T.DataType, second: Column, second_type: T.DataType
) -> Column:
    """A sequence value ordering by ``first``, then ``second`` (each non-null, and for longs at
    most ``2**63``): a ``decimal(38, 0)`` for two integers, a struct otherwise."""
    if isinstance(first_type, _INTEGRAL) and isinstance(second_type, _INTEGRAL):
        return pair_decimal(first, second)
    return F.struct(first.alias("a"), second.alias("b"))


def pair_decimal(first: Column, second: Column) -> Column:
    """``first * 2**63 + second`` as a ``decimal(38, 0)`` (both non-negative, at most ``2**63``)."""
    return first.cast(PAIR) * F.lit(Decimal(2**63)).cast(PAIR) + second.cast(PAIR)


def lazy_order(
    keys: Sequence[tuple[Column, str, str]], types: Sequence[T.DataType], *, seq: str
) -> Column | None:
    """A sequence value that orders like :func:`sort_columns` (keys, then ``seq``), or None when a
    key's type has no order-reversing encoding (``desc`` on strings)."""
    parts: list[Column] = []
    for (value, direction, nulls), dtype in zip(keys, types, strict=True):
        parts.append(value.isNull() if nulls == "last" else value.isNotNull())
        encoded = _ascending(value, dtype) if direction != "desc" else _descending(value, dtype)
        if encoded is None:
            return None
        parts.extend(encoded)
    parts.append(F.col(seq))
    return F.struct(*[part.alias(f"k{i}") for i, part in enumerate(parts)])


def _ascending(value: Column, dtype: T.DataType) -> list[Column] | None:
    return [value]


def _descending(value: Column, dtype: T.DataType) -> list[Column] | None:
    """Values that sort ascending as ``value`` sorts descending (nulls are placed by a flag)."""
    if isinstance(dtype, _INTEGRAL):
        return [F.bitwise_not(value)]  # -x - 1: reverses the order and never overflows
    if isinstance(dtype, T.FloatType | T.DoubleType):
        return [~F.isnan(value), -value]  # Spark orders NaN above every number
    if isinstance(dtype, T.DecimalType):
        return [-value]
    if isinstance(dtype, T.BooleanType):
        return [~value]
    if isinstance(dtype, T.DateType):
        return [-F.unix_date(value)]
    if isinstance(dtype, T.TimestampType):
        return [-F.unix_micros(value)]
    return None


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
    types: Sequence[T.DataType] | None = None,
) -> DataFrame:
    """``df`` in stable ``keys`` order; with ``within``, inside each run of equal ``within`` values
    (runs stay in place). Without ``within``, and with the key ``types``, the order is a new
    sequence value (:func:`lazy_order`) rather than a sort."""
    if within is None:
        lazy = lazy_order(keys, types, seq=seq) if types is not None else None
        if lazy is not None:
            return df.withColumn(seq, lazy)
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


# Operators whose output order is their inputs' order (or built from it, for the next reader).
_PASS_ORDER = frozenset({"filter", "project", "transform", "flatten", "union", "join"})


def unordered_outputs(operators: Sequence[Any], sinks: Collection[str]) -> set[str]:
    """The ids of the operators whose record order nothing observes, from ``operators`` in
    topological order (``sinks``: the ids of the stores returning records in order, queues and
    consoles). Such an operator's sequence value may be anything (a scan's may be a constant:
    no file lookup, no row ids).

    Order is observed by ``order`` (ties keep the input order), ``limit``, ``segment``,
    ``windowframe``, ``runningaggregate``, a ``collapsingaggregate`` with runs, a target or
    carryovers, a sink, a file store below an ``order`` or ``limit``, and an output no one reads
    (collected in order); filters, projects, transforms, flattens, unions and joins pass their
    readers' needs on to their inputs. Anything else observes it.
    """
    readers: dict[str, list[Any]] = {op.id: [] for op in operators}
    below_order: set[str] = set()
    for op in operators:
        for ref in op.input_ids():
            readers.setdefault(ref, []).append(op)
        if op.op in ("order", "limit") or any(i in below_order for i in op.input_ids()):
            below_order.add(op.id)
    observed: set[str] = set()
    for op in reversed(operators):
        if (not readers.get(op.id) and op.op != "store") or any(
            _observes(reader, observed, sinks, below_order) for reader in readers[op.id]
        ):
            observed.add(op.id)
    return {op.id for op in operators} - observed


def _observes(reader: Any, observed: set[str], sinks: Collection[str], below: set[str]) -> bool:
    """Whether ``reader`` observes the order of its inputs."""
    kind = reader.op
    if kind in _PASS_ORDER:
        return reader.id in observed
    if kind == "store":
        return reader.id in sinks or (reader.input or "") in below
    if kind == "collapsingaggregate":
        return bool(reader.within or reader.target or reader.carryovers)
    return True
