"""``join`` and ``union`` on Spark.

join: ``inner``, ``left`` and ``outer`` (full); a pair joins when *all* conditions hold
(R-JOIN-AND), a null operand never matches, no condition is a cartesian product. The output record
is a deep merge of the left and right records: maps present on both sides merge member by member,
and for any other value present on both sides the right one wins unless it is null. Order
(R-JOIN-ORDER): left-major, each left record followed by its matches in right order, an
unmatched left record in its place, then (outer) the unmatched right records in right order.

union: the inputs one after the other, in ``inputs`` order; ``distinct`` keeps the first occurrence
of each record (fields compared deeply; a field missing from one input is null there).

When nothing observes the output's order (``ordered=False``), both give every record the
sequence 0: no sequence pair to compute, and a union distinct is a plain ``distinct``.

>>> RELATIONSHIPS["<="](1, 2)
True
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.errors import JoinError
from engine.exec.spark.compiler_order import (
    LONG_BITS,
    PAIR,
    pair_bits,
    pair_decimal,
    pair_long,
    sequence_bits,
    sequence_order,
    sequence_pair,
    temp,
    with_bits,
)
from engine.exec.spark.constant_columns import col, lit, lit_as
from engine.exec.spark.names import quote_name
from engine.exec.spark.paths import PendingColumns, Typed, top_column

RELATIONSHIPS: dict[str, Callable[[object, object], object]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
"""A join condition's relationship as a comparison of two Columns."""

JOIN_TYPES = {"inner": "inner", "left": "left", "outer": "full"}
"""Drill join type -> Spark join type."""

SEMI_JOIN_TYPES = {"semi": "left_semi", "anti": "left_anti"}
"""A semi or anti join (planner property ``semi_join``) -> Spark join type."""


Condition = tuple[Column, str, Column]
"""``(left value, relationship, right value)``, each side compiled against its own input."""


def record_names(df: DataFrame, seq: str) -> list[str]:
    """The record's top-level fields: every column but the sequence column."""
    return [name for name in df.columns if name != seq]


@dataclass(frozen=True)
class JoinSide:
    """What a join reads of one input: the DataFrame joined, its record's top-level fields as
    values over it, and its sequence (value, type, width)."""

    df: DataFrame
    values: dict[str, Typed]
    seq: Column
    seq_type: T.DataType
    bits: int
    bound_seq: bool = False  # whether ``seq`` is read as ``df``'s own (not by name)

    @classmethod
    def of(
        cls, df: DataFrame, seq: str, pending: PendingColumns | None = None, *, missing: bool
    ) -> JoinSide:
        """``df``'s records, or (``pending``) the columns ``df``, their base, left to the join;
        ``missing``: the side may be missing from a joined row (an outer join's)."""
        if pending is not None and missing:
            if pending.present is None:  # nothing tells a missing record: select them first
                return cls.of(pending.over(df).select(), seq, missing=missing)
            pending = pending.absent_where_null()
        if pending is not None:
            values = {n: v for n, v in pending.values.items() if n != seq}
            order = pending.values[seq]
            bits = LONG_BITS if pending.seq_bits is None else pending.seq_bits
            value = order.column
            if missing and order.is_constant and pending.present is not None:
                value = F.when(pending.present.isNotNull(), value)  # null where missing
            return cls(df, values, value, order.dtype, bits, bound_seq=True)
        types = {f.name: f.dataType for f in df.schema.fields}
        values = {n: Typed(top_column(n), types[n]) for n in record_names(df, seq)}
        return cls(df, values, top_column(seq), types[seq], sequence_bits(df, seq))

    def with_seq(self, seq: Column) -> JoinSide:
        return JoinSide(self.df, self.values, seq, self.seq_type, self.bits, bound_seq=True)

    def bound(self, seq: str) -> JoinSide:
        """This side with its sequence read as ``df``'s own column ``seq`` where it is read by
        name (Spark then tells it from the other side's)."""
        return self if self.bound_seq else self.with_seq(self.df[seq])


def join_rows(
    left: DataFrame,
    right: DataFrame,
    conditions: Sequence[Condition],
    *,
    how: str,
    seq: str,
    ordered: bool = True,
    related: bool = True,
    pending: bool = False,
    sides: tuple[PendingColumns | None, PendingColumns | None] = (None, None),
    broadcast: bool = False,
) -> DataFrame | PendingColumns:
    """``left`` joined with ``right`` (see the module docstring); ``how`` is a Drill join type.
    ``related``: the inputs may derive from one DataFrame (planner property
    ``unrelated_inputs``). With ``pending``, the records of sides with no field in common, where
    their sequence is a long or a decimal pair, are left unselected (:class:`~engine.exec.spark.paths.PendingColumns` over
    the join). ``sides``: an input's own pending columns named apart (``PendingColumns.apart``),
    read over their base (``left`` or ``right``; not for ``related`` inputs), so that plain
    columns are joined, not records. ``broadcast``: the planner ships one side whole (how keys
    compare: :func:`_relation`)."""
    missing = (how == "outer", how != "inner")
    lside, rside = (
        JoinSide.of(df, seq, p, missing=m)
        for df, p, m in zip((left, right), sides, missing, strict=True)
    )
    left_names, right_names = list(lside.values), list(rside.values)
    left_seq, right_seq = temp("join_lseq"), temp("join_rseq")
    if not set(left_names) & set(right_names):
        # No field on both sides: the conditions read each side's columns by name in the join
        # itself, and each side's sequence is read as that side's own column (each DataFrame
        # step is an analysis on the driver), but for inputs that may derive from one DataFrame
        # (Spark could not tell their columns apart): the right sequence is renamed.
        on = _all_hold([_relation(lc, r, rc, broadcast=broadcast) for lc, r, rc in conditions])
        if related and ordered and sides == (None, None):
            renamed = rside.df.withColumnRenamed(seq, right_seq)
            joined = lside.df.join(renamed, on=on, how=JOIN_TYPES[how])
            lside, rside = lside.with_seq(col(seq)), rside.with_seq(col(right_seq))
        else:
            joined = lside.df.join(rside.df, on=on, how=JOIN_TYPES[how])
            if ordered:  # both sides may hold a column `seq`: each read as its side's own
                lside, rside = (s.bound(seq) for s in (lside, rside))
        order, bits = _join_order(lside, rside, how, seq, ordered)
        values = {**lside.values, **rside.values}
        if pending and not isinstance(order.dtype, T.NullType):
            # Not named apart for another join: its select makes one column of the pair of
            # sequences, carried through that join's exchange (at scale 10, q3's orders side
            # then stays small enough for Spark to broadcast it at run time).
            return PendingColumns(joined, {**values, seq: order}, seq_bits=bits)
        # One select: each step is an analysis.
        return joined.select(*[_named(v.column, n) for n, v in values.items()], order.column)
    lhs = lside.df.select(
        *[v.column.alias(temp(f"l{i}")) for i, v in enumerate(lside.values.values())],
        *[c.alias(temp(f"jl{i}")) for i, (c, _, _) in enumerate(conditions)],
        lside.seq.alias(left_seq),
    )
    rhs = rside.df.select(
        *[v.column.alias(temp(f"r{i}")) for i, v in enumerate(rside.values.values())],
        *[c.alias(temp(f"jr{i}")) for i, (_, _, c) in enumerate(conditions)],
        rside.seq.alias(right_seq),
    )
    matches = _all_hold(
        [
            _relation(col(temp(f"jl{i}")), relationship, col(temp(f"jr{i}")), broadcast=broadcast)
            for i, (_, relationship, _) in enumerate(conditions)
        ]
    )
    joined = lhs.join(rhs, on=matches, how=JOIN_TYPES[how])
    merged = []
    for name in [*left_names, *(n for n in right_names if n not in left_names)]:
        l_col = col(temp(f"l{left_names.index(name)}")) if name in left_names else None
        r_col = col(temp(f"r{right_names.index(name)}")) if name in right_names else None
        if l_col is None:
            merged.append(r_col.alias(name))
        elif r_col is None:
            merged.append(l_col.alias(name))
        else:
            left_type, right_type = lside.values[name].dtype, rside.values[name].dtype
            merged.append(deep_merge(l_col, r_col, left_type, right_type, name=name).alias(name))
    lside, rside = lside.with_seq(col(left_seq)), rside.with_seq(col(right_seq))
    order, _ = _join_order(lside, rside, how, seq, ordered)
    return joined.select(*merged, order.column)


def scalar_join_rows(
    left: DataFrame, right: DataFrame, *, scalar_side: str, seq: str
) -> DataFrame | None:
    """The records of the side other than ``scalar_side``, each extended with the members of the
    one record of ``scalar_side`` (planner property ``scalar_side``), read as a scalar subquery:
    Spark computes it once, as it does its own SQL's, where a join would pair it with every row
    by nested loops. The order is the other side's. None where a top-level name is on both
    sides (the records merge: a join)."""
    rows, one = (left, right) if scalar_side == "right" else (right, left)
    left_names, right_names = record_names(left, seq), record_names(right, seq)
    if set(left_names) & set(right_names):
        return None
    columns = {name: top_column(name) for name in record_names(rows, seq)}
    one_names = record_names(one, seq)
    if one_names:
        value = one.select(F.struct(*[top_column(n) for n in one_names]).alias("v")).scalar()
        columns.update({name: value.getField(name).alias(name) for name in one_names})
    return rows.select(*[columns[name] for name in left_names + right_names], top_column(seq))


def semi_join_rows(
    left: DataFrame,
    right: DataFrame,
    conditions: Sequence[Condition],
    *,
    kind: str,
    seq: str,
    sides: tuple[PendingColumns | None, PendingColumns | None] = (None, None),
    broadcast: bool = False,
) -> DataFrame:
    """The records of ``left`` that some record of ``right`` matches (``kind="semi"``) or none
    does (``"anti"``), each once, in their order: Spark's ``left_semi`` / ``left_anti`` join
    (it may broadcast ``right``, and never repeats a left record). ``sides`` and ``broadcast`` as
    for :func:`join_rows`. The right side is read by its keys only, named apart, so that inputs
    deriving from one DataFrame join as two."""
    lside, rside = (
        JoinSide.of(df, seq, p, missing=False) for df, p in zip((left, right), sides, strict=True)
    )
    names = list(lside.values)
    left_seq = temp("join_lseq")
    lhs = lside.df.select(
        *[v.column.alias(temp(f"l{i}")) for i, v in enumerate(lside.values.values())],
        *[c.alias(temp(f"jl{i}")) for i, (c, _, _) in enumerate(conditions)],
        lside.seq.alias(left_seq),
    )
    rhs = rside.df.select(*[c.alias(temp(f"jr{i}")) for i, (_, _, c) in enumerate(conditions)])
    matches = _all_hold(
        [
            _relation(col(temp(f"jl{i}")), relationship, col(temp(f"jr{i}")), broadcast=broadcast)
            for i, (_, relationship, _) in enumerate(conditions)
        ]
    )
    joined = lhs.join(rhs, on=matches, how=SEMI_JOIN_TYPES[kind])
    return joined.select(
        *[col(temp(f"l{i}")).alias(name) for i, name in enumerate(names)],
        col(left_seq).alias(seq),
    )


def _named(column: Column, name: str) -> Column:
    """``column`` as top-level column ``name`` (unaliased where it already reads that column:
    each alias is a py4j call)."""
    return column if column is top_column(name) else column.alias(name)


def _relation(left: Column, relationship: str, right: Column, *, broadcast: bool) -> Column:
    """``left`` and ``right`` compared by a join condition's ``relationship``.

    In a shuffled join an equality compares the columns as they are: the join's output is then
    partitioned by them, so an aggregate or another join on the same keys above it needs no
    exchange of its own (q3's aggregate by ``l_orderkey`` over the join on it). In a broadcast
    join (``broadcast``: the planner ships one side whole; the output keeps the streamed side's
    partitioning whatever the keys) it compares ``ifnull(x, x)`` of each side: the same values,
    a null still matches nothing, and Spark infers no ``isnotnull`` filter from it. Spark moves no
    filter below an observation (``DataFrame.observe``), so an inferred one lands above the
    observation counting a side's rows, and in the build side that filter runs in generated code
    of its own between the count and the hash table: every row is copied once more. Null keys
    find no match in the join itself, so the filter saves the join nothing. Other relationships
    are compared as they are (``a < b``): Spark joins them by nested loops, where a filter before
    the loop only helps.
    """
    if relationship == "==" and broadcast:
        return F.ifnull(left, left) == F.ifnull(right, right)
    return RELATIONSHIPS[relationship](left, right)


def _all_hold(conditions: Sequence[Column]) -> Column:
    """All ``conditions`` (none: every pair, a cartesian product)."""
    if not conditions:
        return lit(True)
    return functools.reduce(operator.and_, conditions)


def _join_order(
    left: JoinSide, right: JoinSide, how: str, seq: str, ordered: bool
) -> tuple[Typed, int | None]:
    """The joined records' sequence, named ``seq``, from each side's (read only when
    ``ordered``), and its width where it is a long. Typed where it is a long or a decimal (a
    struct of the sides' sequences gets :class:`~pyspark.sql.types.NullType`: not known)."""
    if not ordered:
        return Typed(_unordered().alias(seq), T.LongType()), 0
    if not (isinstance(left.seq_type, T.LongType) and isinstance(right.seq_type, T.LongType)):
        order = join_sequence(left.seq, left.seq_type, right.seq, right.seq_type)
        return Typed(order.alias(seq), T.NullType()), None
    sides = ((left.bits, how not in ("inner", "left")), (right.bits, how != "inner"))
    order, bits = join_sequence_long(left.seq, right.seq, *sides)
    if bits is None:
        return Typed(order.alias(seq), PAIR), None
    return Typed(with_bits(order, seq, bits), T.LongType()), bits


def join_sequence_long(
    left_seq: Column,
    right_seq: Column,
    left: tuple[int, bool] = (LONG_BITS, True),
    right: tuple[int, bool] = (LONG_BITS, True),
) -> tuple[Column, int | None]:
    """The sequence value of a joined record of two long sequences (see :func:`join_sequence`)
    and its width; ``left`` and ``right`` are each side's (width, may be null). Unmatched right
    records take ``2**width`` on the left, past every left value; a right side that may be null
    moves up by one so that 0 is "no match". A long when the widths fit (:func:`pair_bits`),
    else a ``decimal(38, 0)`` (width None)."""
    (left_bits, left_null), (right_bits, right_null) = left, right
    width = pair_bits(left_bits + left_null, right_bits + right_null)
    if width is None:  # the sum stays below 10**38
        left_key = F.ifnull(left_seq.cast(PAIR), lit(Decimal(2**63)).cast(PAIR))
        right_key = F.ifnull(right_seq.cast(PAIR) + lit(1), lit(0).cast(PAIR))
        return pair_decimal(left_key, right_key), None
    long = T.LongType()
    left_key = F.ifnull(left_seq, lit(1 << left_bits).cast(long)) if left_null else left_seq
    right_key = F.ifnull(right_seq + lit(1), lit(0).cast(long)) if right_null else right_seq
    return pair_long(left_key, right_key, right_bits + right_null), width


def join_sequence(
    left_seq: Column, left_type: T.DataType, right_seq: Column, right_type: T.DataType
) -> Column:
    """The sequence value of a joined record (R-JOIN-ORDER): left-major, a left record's
    unmatched row before its matches, unmatched right records (no left) last."""
    if isinstance(left_type, T.LongType) and isinstance(right_type, T.LongType):
        return join_sequence_long(left_seq, right_seq)[0]
    return F.struct(
        left_seq.isNull().alias("a"),
        left_seq.alias("l"),
        right_seq.isNotNull().alias("b"),
        right_seq.alias("r"),
    )


def deep_merge(
    left: Column, right: Column, left_type: T.DataType, right_type: T.DataType, *, name: str
) -> Column:
    """The merge of two values of field ``name``: maps member by member, anything else the right
    value unless it is null; values of kinds that cannot share a column raise :class:`JoinError`."""
    if isinstance(left_type, T.StructType) and isinstance(right_type, T.StructType):
        left_fields = {f.name: f.dataType for f in left_type.fields}
        right_fields = {f.name: f.dataType for f in right_type.fields}
        members = []
        for member in [*left_fields, *(n for n in right_fields if n not in left_fields)]:
            if member not in right_fields:
                members.append(left.getField(member).alias(member))
            elif member not in left_fields:
                members.append(right.getField(member).alias(member))
            else:
                value = deep_merge(
                    left.getField(member),
                    right.getField(member),
                    left_fields[member],
                    right_fields[member],
                    name=f"{name}.{member}",
                )
                members.append(value.alias(member))
        return F.when(left.isNull() & right.isNull(), lit(None)).otherwise(F.struct(*members))
    if isinstance(left_type, T.NullType):
        return right
    if isinstance(right_type, T.NullType):
        return left
    if left_type == right_type or (
        isinstance(left_type, T.NumericType) and isinstance(right_type, T.NumericType)
    ):
        return F.ifnull(right, left)
    raise JoinError(
        f"field '{name}' is {left_type.simpleString()} on the left and "
        f"{right_type.simpleString()} on the right; the joined record cannot hold both",
        hint="rename the field on one side (project) before the join",
    )


def union_rows(
    inputs: Sequence[DataFrame], *, distinct: bool, seq: str, ordered: bool = True
) -> DataFrame:
    """The records of ``inputs`` one input after the other; ``distinct`` keeps first occurrences."""
    if not ordered:
        # One sequence value for all, set above the union where the inputs' sequences share a
        # type (one step), else in each input; distinct records grouped by their values alone.
        same = all(df.schema[seq].dataType == inputs[0].schema[seq].dataType for df in inputs)
        parts = inputs if same else [df.withColumn(seq, _unordered()) for df in inputs]
        combined = parts[0]
        for df in parts[1:]:
            combined = combined.unionByName(df, allowMissingColumns=True)
        names = [quote_name(n) for n in record_names(combined, seq)] if distinct else []
        if names:
            return combined.groupBy(*names).agg(_unordered().alias(seq))
        if same:
            combined = combined.withColumn(seq, _unordered())
        return combined.distinct() if distinct else combined
    index = temp("union_input")
    types = [df.schema[seq].dataType for df in inputs]
    if any(t != types[0] for t in types):
        # One struct type for every input: field i holds input i's sequence, the others are null.
        inputs = [
            df.withColumn(
                seq,
                F.struct(
                    *[
                        (col(seq) if j == i else lit(None).cast(t)).alias(f"s{j}")
                        for j, t in enumerate(types)
                    ]
                ),
            )
            for i, df in enumerate(inputs)
        ]
    tagged = [df.withColumn(index, lit(i)) for i, df in enumerate(inputs)]
    combined = tagged[0]
    for df in tagged[1:]:
        combined = combined.unionByName(df, allowMissingColumns=True)
    seq_type = inputs[0].schema[seq].dataType
    bits = (max(1, (len(inputs) - 1).bit_length()), max(sequence_bits(df, seq) for df in inputs))
    order = sequence_pair(col(index), T.IntegerType(), col(seq), seq_type, bits)
    width = pair_bits(*bits) if isinstance(seq_type, T.LongType) else None
    if width is not None:
        order = with_bits(order, seq, width)
    combined = combined.withColumn(seq, order).drop(index)
    if not distinct:
        return combined
    names = [quote_name(n) for n in record_names(combined, seq)]
    if not names:
        return combined.orderBy(*sequence_order(combined, seq)).limit(1)
    first = F.min(seq)
    return combined.groupBy(*names).agg(
        with_bits(first, seq, width) if width is not None else first.alias(seq)
    )


def _unordered() -> Column:
    """The sequence value of records whose order nothing observes."""
    return lit_as(0, T.LongType())
