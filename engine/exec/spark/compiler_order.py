"""Order on Spark: the sequence column, runs of equal values, ``order`` and ``limit``.

Spark keeps no row order across shuffles, so every DataFrame of a run carries a *sequence column*:
any orderable value, increasing in record order (smaller is earlier). An operator that keeps the
order keeps the column. One that makes a new order does not sort: it builds a new sequence value
from what defines the order (:func:`lazy_order`, :func:`sequence_pair`), and only what needs the
order sorts by it (a store whose plan orders its records, ``limit``, a queue sink). So a plan whose
order no one observes runs without a sort, and Spark prunes the unused sequence values.

A long sequence may carry its *width* (column metadata :data:`SEQ_BITS`: every value is in
``[0, 2**bits)``; parquet scans number their rows densely, see ``native_scan.native_scan_dataframe``). Two longs
whose widths add up to at most 63 pair into a long (``a << bits_b | b``), otherwise into a
``decimal(38, 0)`` (``a * 2**63 + b``): both fixed-width values, so aggregates over them (a group's
first record) stay hash aggregates; anything else pairs into a struct.
:func:`renumber` (sort, then ``monotonically_increasing_id``, increasing in sort order because a
sort's partitions are ranges in order) is left for where a dense order is needed.

Which operators' order is observed at all is the planner's
(:mod:`engine.planner.properties.order_needs`).

>>> temp("run")
'__drill_run'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.exec.spark.constant_columns import col, lit
from engine.exec.spark.names import quote_name
from engine.exec.spark.paths import cast_column

TEMP_PREFIX = "__drill_"
"""Columns the compiler adds for a while start with this; records never see them."""


def temp(name: str) -> str:
    """The name of a temporary column (``temp("run") == "__drill_run"``)."""
    return f"{TEMP_PREFIX}{name}"


def sequence_order(
    df: DataFrame | T.StructType,
    seq: str,
    *,
    value: Column | None = None,
    equal: Mapping[str, Column] | None = None,
) -> list[Column]:
    """Sort columns for ``df``'s sequence order: a struct sequence's members one by one (the same
    order: Spark compares structs member by member, nulls first), else the column itself; the
    column is ``value`` (``F.col(seq)`` if not given). Spark sorts a leading plain member by a
    radix prefix; a struct it compares whole, row by row (sorting 400,000 events: 1.42 s by
    members, 1.61 s by the struct). Windows still order by the column: the windows of one
    partitioning then share one sort (members would be new columns to each).

    ``equal`` maps a struct sequence's member (by name) to a column holding the same value,
    sorted by instead: reading only some members lets Spark prune the struct. ``df`` may be
    given by its schema."""
    value = col(seq) if value is None else value
    dtype = (df if isinstance(df, T.StructType) else df.schema)[seq].dataType
    if not equal or not isinstance(dtype, T.StructType):
        return _members(value, dtype)
    return [
        m
        for f in dtype.fields
        for m in (
            [equal[f.name]] if f.name in equal else _members(value.getField(f.name), f.dataType)
        )
    ]


def _members(value: Column, dtype: T.DataType) -> list[Column]:
    if not isinstance(dtype, T.StructType):
        return [value]
    return [m for f in dtype.fields for m in _members(value.getField(f.name), f.dataType)]


def renumber(df: DataFrame, order: Sequence[Column | str], *, seq: str) -> DataFrame:
    """``df`` sorted by ``order`` with a new sequence column ``seq`` that follows that order."""
    return df.orderBy(*order).withColumn(seq, F.monotonically_increasing_id())


PAIR = T.DecimalType(38, 0)
"""The type of two paired long sequence values (``a * 2**63 + b`` fits 38 digits)."""
_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)

SEQ_BITS = "drill_seq_bits"
"""Column metadata of a long sequence: its values are in ``[0, 2**bits)``."""
LONG_BITS = 63
"""The width of a long sequence whose width is not known (any non-negative long)."""


def sequence_bits(df: DataFrame, seq: str) -> int:
    """The width of ``df``'s long sequence column ``seq`` (:data:`LONG_BITS` when not known)."""
    return int(df.schema[seq].metadata.get(SEQ_BITS, LONG_BITS))


def with_bits(value: Column, name: str, bits: int) -> Column:
    """``value`` named ``name``, marked as a long sequence of width ``bits``."""
    return value.alias(name, metadata={SEQ_BITS: bits})


def pair_bits(first_bits: int, second_bits: int) -> int | None:
    """The width of two long sequence values paired into a long, None if it does not fit."""
    total = first_bits + second_bits
    return total if total <= LONG_BITS else None


def pair_long(first: Column, second: Column, second_bits: int) -> Column:
    """``first << second_bits | second`` (``second`` in ``[0, 2**second_bits)``)."""
    return F.shiftleft(cast_column(first, T.LongType()), second_bits) + cast_column(
        second, T.LongType()
    )


def sequence_pair(
    first: Column,
    first_type: T.DataType,
    second: Column,
    second_type: T.DataType,
    bits: tuple[int, int] | None = None,
) -> Column:
    """A sequence value ordering by ``first``, then ``second`` (each non-null, and for longs at
    most ``2**63``): for two integers a long when their widths ``bits`` fit
    (:func:`pair_bits`), else a ``decimal(38, 0)``; a struct otherwise."""
    if isinstance(first_type, _INTEGRAL) and isinstance(second_type, _INTEGRAL):
        if bits is not None and pair_bits(*bits) is not None:
            return pair_long(first, second, bits[1])
        return pair_decimal(first, second)
    return F.struct(first.alias("a"), second.alias("b"))


def pair_decimal(first: Column, second: Column) -> Column:
    """``first * 2**63 + second`` as a ``decimal(38, 0)`` (both non-negative, at most ``2**63``)."""
    return first.cast(PAIR) * lit(Decimal(2**63)).cast(PAIR) + second.cast(PAIR)


def lazy_order(
    keys: Sequence[tuple[Column, str, str]],
    types: Sequence[T.DataType],
    *,
    seq: str,
    tie_break: bool = True,
    sources: list[int | None] | None = None,
    sequence: Column | None = None,
) -> Column | None:
    """A sequence value that orders like :func:`sort_columns` (keys, then ``seq``, or the value
    ``sequence`` when given, unless not ``tie_break``), or None when a key's type has no
    order-reversing encoding (``desc`` on strings). ``sources``, if given, is filled with each
    member's key index where the member is the key's value itself (ascending, nulls first),
    else None."""
    parts: list[Column] = []
    found: list[int | None] = []
    for i, ((value, direction, nulls), dtype) in enumerate(zip(keys, types, strict=True)):
        # Spark puts a null member first; a flag places it otherwise, or before a descending
        # double's NaN (whose encoding leads with a NaN test that is false for NaN alone).
        if nulls == "last" or (
            direction == "desc" and isinstance(dtype, T.FloatType | T.DoubleType)
        ):
            parts.append(value.isNull() if nulls == "last" else value.isNotNull())
            found.append(None)
        encoded = _ascending(value, dtype) if direction != "desc" else _descending(value, dtype)
        if encoded is None:
            return None
        parts.extend(encoded)
        found.extend([i if direction != "desc" and nulls != "last" else None] * len(encoded))
    if tie_break:
        parts.append(col(seq) if sequence is None else sequence)
        found.append(None)
    if sources is not None:
        sources.extend(found)
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


def sort_columns(
    keys: Sequence[tuple[Column, str, str]],
    *,
    seq: str,
    tie_break: bool = True,
    sequence: Column | None = None,
) -> list[Column]:
    """Sort columns for ``(value, "asc"|"desc", "first"|"last")`` keys, most significant first,
    then ``seq`` (or the ``sequence`` value given) so that ties keep input order (R-ORDER-STABLE;
    left out without ``tie_break``, where no two records tie). Nulls go where
    ``first``/``last`` says whatever the direction."""
    columns = []
    for value, direction, nulls in keys:
        if direction == "desc":
            columns.append(
                value.desc_nulls_first() if nulls == "first" else value.desc_nulls_last()
            )
        else:
            columns.append(value.asc_nulls_first() if nulls == "first" else value.asc_nulls_last())
    by_sequence = col(seq) if sequence is None else sequence
    return [*columns, by_sequence.asc()] if tie_break else columns


def with_run_numbers(df: DataFrame, value: Column, *, seq: str, name: str) -> DataFrame:
    """``df`` with column ``name``: 0 for the first record, +1 each time ``value`` differs from the
    previous record's (null equals null; maps and arrays compare deeply)."""
    by_seq = Window.orderBy(seq)
    previous, change = temp("previous"), temp("change")
    starts = (
        F.when(col(previous).isNull(), lit(0))
        .when(value.eqNullSafe(col(previous).getField("v")), lit(0))
        .otherwise(lit(1))
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
    tie_break: bool = True,
    sources: list[int | None] | None = None,
) -> DataFrame:
    """``df`` in stable ``keys`` order; with ``within``, inside each run of equal ``within`` values
    (runs stay in place). Without ``within``, and with the key ``types``, the order is a new
    sequence value (:func:`lazy_order`, which fills ``sources``) rather than a sort; without
    ``tie_break`` (no two records tie) the input order is not part of it."""
    if within is None:
        lazy = (
            lazy_order(keys, types, seq=seq, tie_break=tie_break, sources=sources)
            if types is not None
            else None
        )
        if lazy is not None:
            return df.withColumn(seq, lazy)
        return renumber(df, sort_columns(keys, seq=seq, tie_break=tie_break), seq=seq)
    run = temp("order_run")
    df = with_run_numbers(df, within, seq=seq, name=run)
    return renumber(df, [col(run), *sort_columns(keys, seq=seq)], seq=seq).drop(run)


def limit_rows(df: DataFrame, first: int, last: int | None, *, seq: str) -> DataFrame:
    """The records with 0-based index ``first <= i < last`` in sequence order (R-LIMIT)."""
    if last is not None and last <= first:
        return df.limit(0)
    if first == 0 and last is None:
        return df
    ordered = df.orderBy(*sequence_order(df, seq))
    if last is not None:
        ordered = ordered.limit(last)
    return ordered.offset(first) if first else ordered


def top_rows(
    df: DataFrame,
    keys: Sequence[tuple[Column, str, str]],
    first: int,
    last: int,
    *,
    seq: str,
    tie_break: bool = True,
    fields: Sequence[bool] | None = None,
    numbered: bool = True,
    sequence: Column | None = None,
) -> DataFrame:
    """The records with index ``first <= i < last`` of ``df`` sorted by ``keys`` (as
    :func:`sort_columns`), numbered again: one top-N sort instead of a sort and a limit.
    ``fields[i]``: key ``i`` reads a column or a record's member, sorted by as it is (Spark reads
    the member once per row where the record is built, or prunes the record to it); any other
    key is computed once per row into a column of its own, not at each comparison. Not
    ``numbered``, the records keep ``df``'s sequence and the computed keys' columns (a select
    less, for a reader that reads neither: a store's project). ``sequence``: the value ties
    are sorted by, if not ``df``'s column ``seq``."""
    if last <= first:
        return df.limit(0)
    fields = fields or [False] * len(keys)
    computed = {i: temp(f"top{i}") for i, field in enumerate(fields) if not field}
    flat = df
    if computed:  # one select for them all
        flat = df.select("*", *[keys[i][0].alias(name) for i, name in computed.items()])
    by = [
        (col(computed[i]) if i in computed else value, direction, nulls)
        for i, (value, direction, nulls) in enumerate(keys)
    ]
    order = sort_columns(by, seq=seq, tie_break=tie_break, sequence=sequence)
    top = flat.orderBy(*order).limit(last)
    if first:
        top = top.offset(first)
    if not numbered:
        return top
    # The top rows come out of one partition, in order: the new ids follow that order.
    kept = [col(quote_name(n)) for n in df.columns if n != seq]
    return top.select(*kept, F.monotonically_increasing_id().alias(seq))


def with_row_index(df: DataFrame, *, seq: str, name: str) -> DataFrame:
    """``df`` with column ``name``: the record's 0-based index in sequence order (a long)."""
    return df.withColumn(name, (F.row_number().over(Window.orderBy(seq)) - 1).cast("long"))


_EXACT_TYPES = (
    T.BooleanType,
    T.ByteType,
    T.ShortType,
    T.IntegerType,
    T.LongType,
    T.DecimalType,
    T.DateType,
    T.TimestampType,
    T.TimestampNTZType,
    T.BinaryType,
    T.NullType,
)


def exact_type(dtype: T.DataType) -> bool:
    """Whether two values of ``dtype`` that a sort ties are equal: not so for floating values
    (-0.0 ties 0.0), strings of a collation other than binary, maps, arrays and variants.

    >>> exact_type(T.LongType()), exact_type(T.StringType()), exact_type(T.DoubleType())
    (True, True, False)
    """
    if isinstance(dtype, T.StringType):
        return dtype == T.StringType()  # the default, binary collation
    return isinstance(dtype, _EXACT_TYPES)
