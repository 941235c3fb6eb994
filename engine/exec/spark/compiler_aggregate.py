"""``collapsingaggregate`` and ``runningaggregate`` on Spark: the aggregate and window forms of
every AGGREGATE and RUNNING function of the registry (:mod:`engine.expr.functions`).

A *run* is a maximal stretch of consecutive records (in sequence order) with the same ``within``
value; without ``within`` the whole input is one run.

* collapsing: one output record per run, from Spark aggregates grouped by the run number;
  carryovers come from the run's last record (``max_by`` over the sequence) or, with a target,
  from its last record whose target is true; a run with no such record emits nothing. With no
  ``within`` and no input, the aggregates of nothing are emitted once (0 for counts, null else).
* running: every record gets the aggregate of its run up to and including itself (window
  functions over the sequence, partitioned by the run number, or by a segment's keys).
* over a window frame (a ``windowframe`` whose windows a ``segment`` + ``collapsingaggregate``
  collapse again): one output record per target record, from the same aggregates over the frame,
  without copying each record into its windows.

>>> sorted(AGGREGATE_FORMS), sorted(RUNNING_FORMS)
(['avg', 'count', 'count_distinct', 'max', 'min', 'sum'], ['avg', 'count', 'max', 'min', 'row_number', 'sum'])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.errors import AggregateError
from engine.exec.spark.compiler_order import temp, with_run_numbers
from engine.exec.spark.constant_columns import col, lit, lit_as
from engine.exec.spark.metrics import RowCounter
from engine.exec.spark.names import column
from engine.exec.spark.paths import Typed, top_column
from engine.expr import coercion
from engine.types import from_spark, to_spark

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


TypedCall = tuple[str, Sequence[Typed]]
"""A registry function name and its compiled, typed arguments."""


def prepare_arguments(calls: Sequence[TypedCall]) -> list[AggregateCall]:
    """``calls`` checked against the types of their arguments: ``sum``/``avg`` of values that are
    not numbers raise :class:`AggregateError`; an untyped null argument becomes a null long (Spark
    cannot sum an untyped null)."""
    prepared: list[AggregateCall] = []
    for name, args in calls:
        columns = [arg.column for arg in args]
        if name in _NUMERIC_ONLY:
            dtype = args[0].dtype
            if isinstance(dtype, T.NullType):
                columns = [columns[0].cast("long")]
            elif not isinstance(dtype, T.NumericType):
                raise AggregateError(
                    f"{name}() needs numbers, got values of type {dtype.simpleString()}"
                )
        prepared.append((name, columns))
    return prepared


def aggregate_type(
    name: str, args: Sequence[T.DataType], *, over_frame: bool = False
) -> T.DataType | None:
    """The Spark type of the aggregate ``name`` of values of types ``args`` (as
    :data:`AGGREGATE_FORMS` computes it; over a window frame with ``over_frame``); a DECIMAL's
    ``sum`` and ``avg`` as :mod:`engine.expr.coercion` gives them (Spark's own).

    >>> aggregate_type("sum", [T.IntegerType()]), aggregate_type("avg", [T.LongType()])
    (LongType(), DoubleType())
    >>> aggregate_type("count_distinct", [T.StringType()], over_frame=True)
    IntegerType()
    """
    if name == "count":
        return T.LongType()
    if name == "count_distinct":
        return T.IntegerType() if over_frame else T.LongType()  # size(collect_set) in a frame
    if name in ("min", "max"):
        return args[0]
    dtype = args[0]
    if isinstance(dtype, T.DecimalType):
        drill = from_spark(dtype)
        return to_spark(coercion.sum_type(drill) if name == "sum" else coercion.avg_type(drill))
    if name == "sum":
        integral = (T.NullType, T.ByteType, T.ShortType, T.IntegerType, T.LongType)
        return T.LongType() if isinstance(dtype, integral) else T.DoubleType()
    if name == "avg":
        return T.DoubleType()
    return None


@dataclass(frozen=True)
class Collapsed:
    """What :func:`collapse_rows` gives: the rows of ``frame``, one per output record, and each
    output column as a Column over ``frame``. The caller builds its records in one select from
    them (each DataFrame step is an analysis on the driver)."""

    frame: DataFrame
    columns: Mapping[str, Column]

    def select(self) -> DataFrame:
        """The output columns as a DataFrame."""
        return self.frame.select(*[column.alias(name) for name, column in self.columns.items()])


def collapse_rows(
    df: DataFrame,
    typed_calls: Sequence[TypedCall],
    carryovers: Sequence[Column],
    *,
    within: Column | None,
    target: Column | None,
    seq: str,
    aggregate_names: Sequence[str],
    carryover_names: Sequence[str],
    group_by: Sequence[Column] | None = None,
    carried_keys: dict[int, int] | None = None,
    frame: FrameSpec | None = None,
    ordered: bool = True,
    kept: Sequence[str] = (),
    count_input: RowCounter | None = None,
    frame_rows: bool = False,
    rebuilt: Mapping[str, Column] | None = None,
    sequence: tuple[Column, dict[str, Any]] | None = None,
) -> Collapsed:
    """One row per run with ``aggregate_names[i]`` (aggregate of ``calls[i]``),
    ``carryover_names[i]`` (value of ``carryovers[i]``) and the run's first sequence number in
    ``seq``, as the columns of a :class:`Collapsed`.

    ``group_by`` replaces runs by groups of equal key values wherever they are (what the runs of a
    segment's group number are): a plain, parallel ``groupBy``, ordered by first appearance;
    ``carried_keys`` maps a carryover that is key ``j`` to ``j`` (read from the group's key, so the
    aggregation stays a hash aggregate). ``frame`` replaces runs by each record's window frame.
    With ``group_by`` and not ``ordered`` (nothing observes the groups' order), ``seq`` is 0.
    With ``frame``, the columns ``kept`` of ``df`` are kept as they are. ``count_input`` is
    given the aggregated DataFrame and the name of a column holding each group's input rows
    (with ``frame``: each record's frame rows, the records of the windows), to observe them.
    ``frame_rows`` (with ``frame`` whose every record has a frame holding it, and no ``target``:
    one output row per row) adds that column to the output instead, as :data:`FRAME_ROWS`.
    ``sequence`` (not with ``frame``): the value of ``df``'s sequence and its metadata, where
    ``df`` is the base of pending columns, which holds no column ``seq``."""
    calls = prepare_arguments(typed_calls)
    if frame is not None:
        return _collapse_frames(
            df,
            calls,
            [args[0] if args else None for _, args in typed_calls],
            carryovers,
            target,
            frame,
            seq,
            aggregate_names,
            carryover_names,
            kept,
            count_frames=count_input,
            frame_rows=frame_rows,
            rebuilt=rebuilt or {},
        )
    counted = [F.count(lit(1)).alias(INPUT_ROWS)] if count_input is not None else []
    aggregates = [
        AGGREGATE_FORMS[name](*args).alias(alias)
        for (name, args), alias in zip(calls, aggregate_names, strict=True)
    ]
    first_of, metadata = sequence or (col(seq), df.schema[seq].metadata)
    chosen = first_of
    has_target = temp("has_target")
    if target is not None:
        chosen = F.when(target, first_of)
    carried_keys = carried_keys if group_by is not None else {}
    carried = [
        F.max_by(value, chosen).alias(alias)
        for i, (value, alias) in enumerate(zip(carryovers, carryover_names, strict=True))
        if i not in (carried_keys or {})
    ]
    extras = [F.max(chosen).alias(has_target)] if target is not None else []
    # The first sequence keeps the width of a long sequence (so that pairs with it stay longs).
    first = F.min(first_of).alias(seq, metadata=metadata or None)
    columns = {name: column(name) for name in (*aggregate_names, *carryover_names)}
    if group_by is not None:
        keys = [key.alias(temp(f"key{i}")) for i, key in enumerate(group_by)]
        if not keys:  # one group, and none for no input (a literal key would be an ordinal)
            keys = [lit(0).alias(temp("one_group"))]
        grouped = df.groupBy(*keys).agg(
            *aggregates, *carried, *extras, *([first] if ordered else []), *counted
        )
        for i, key in carried_keys.items():
            columns[carryover_names[i]] = col(temp(f"key{key}"))
        columns[seq] = col(seq) if ordered else lit_as(0, "long")
    elif within is None:
        grouped = df.agg(*aggregates, *carried, *extras, *counted)
        columns[seq] = lit_as(0, "long")  # one record
    else:
        run = temp("ca_run")
        grouped = (
            with_run_numbers(df, within, seq=seq, name=run)
            .groupBy(run)
            .agg(*aggregates, *carried, *extras, first, *counted)
        )
        columns[seq] = col(seq)
    if count_input is not None:
        grouped = count_input(grouped, INPUT_ROWS)
    if target is not None:
        grouped = grouped.where(col(has_target).isNotNull())
    return Collapsed(grouped, columns)


INPUT_ROWS = temp("input_rows")
"""The hidden aggregate counting a group's input rows (``collapse_rows(count_input=...)``)."""

FRAME_ROWS = temp("frame_rows")
"""The hidden window count of a record's frame rows (``collapse_rows(frame=..., count_input=...)``):
their sum is the rows of the windowframe the aggregate collapses."""


class FrameSpec:
    """A window frame over the records: ``spec`` (partitioned by runs, ordered by the sequence,
    rows ``start`` to ``end`` around each record; None is unbounded)."""

    def __init__(self, spec: WindowSpec, start: int | None, end: int | None) -> None:
        self.start, self.end = start, end
        self.ordered = spec
        self.spec = spec.rowsBetween(
            Window.unboundedPreceding if start is None else start,
            Window.unboundedFollowing if end is None else end,
        )

    @property
    def holds_current_row(self) -> bool:
        return (self.start is None or self.start <= 0) and (self.end is None or self.end >= 0)

    @property
    def offsets(self) -> range | None:
        """The offsets of a frame of at most :data:`OFFSET_ROWS` rows around each record (None
        for a longer, unbounded or always empty frame)."""
        if self.start is None or self.end is None or not 0 <= self.end - self.start < OFFSET_ROWS:
            return None
        return range(self.start, self.end + 1)

    def at(self, value: Column, offset: int) -> Column:
        """``value`` of the record ``offset`` records from each record in its run (``lag`` or
        ``lead``: null beyond the run's ends)."""
        if offset == 0:
            return value
        shifted = F.lag(value, -offset) if offset < 0 else F.lead(value, offset)
        return shifted.over(self.ordered)


class Shifts:
    """The values of the records a few offsets away (:meth:`FrameSpec.at`), each value at each
    offset one named window column however many aggregates read it: Spark computes every window
    function it is given, equal ones too (sessionize's ``count(1)``, ``max(ts)``, ``min(ts)``
    and its frame rows read two shifts, not four). ``shifts.at(F.col("ts"), -1)`` twice gives
    the same column, and :meth:`columns` one ``lag``.
    """

    def __init__(self, frame: FrameSpec) -> None:
        self.frame = frame
        self._named: dict[tuple[str, int], tuple[str, Column]] = {}

    def at(self, value: Column, offset: int) -> Column:
        """``value`` of the record ``offset`` records away, as a column :meth:`columns` gives."""
        if offset == 0:
            return value
        key = (str(value), offset)  # equal expressions print the same
        if key not in self._named:
            name = temp(f"shift{len(self._named)}")
            self._named[key] = (name, self.frame.at(value, offset))
        return col(self._named[key][0])

    def holds(self, offset: int) -> Column:
        """Whether each record's run has a record ``offset`` records from it."""
        return lit(True) if offset == 0 else self.at(lit(1), offset).isNotNull()

    def columns(self) -> list[Column]:
        """The named window columns the values read."""
        return [shifted.alias(name) for name, shifted in self._named.values()]


OFFSET_ROWS = 8
"""Up to this many rows, the aggregates of a frame are combinations of the values at each of its
offsets (``lag``/``lead``, :func:`_offset_aggregates`): a sliding frame re-aggregates its rows for
every record, which cost sessionize at scale 1 a tenth of its executor CPU."""


def _collapse_frames(
    df: DataFrame,
    calls: Sequence[AggregateCall],
    first_args: Sequence[Typed | None],
    carryovers: Sequence[Column],
    target: Column | None,
    frame: FrameSpec,
    seq: str,
    aggregate_names: Sequence[str],
    carryover_names: Sequence[str],
    kept: Sequence[str] = (),
    *,
    count_frames: RowCounter | None = None,
    frame_rows: bool = False,
    rebuilt: Mapping[str, Column] | None = None,
) -> Collapsed:
    """One row per record whose frame is not empty: the aggregates and carryovers of its frame
    (carryovers from the frame's last record, or its last whose target is true), and the
    columns ``kept`` of its record. A frame of a few rows shifts the values it reads in a select
    of their own (:class:`Shifts`), and its output columns combine them; otherwise, where every
    record's frame holds one and ``df`` is not taken apart, the window functions are the output
    columns over ``df`` itself (no step of their own). ``count_frames`` is given
    ``df`` (every record, empty frames and frames without a target too) with a column, named
    second, of each record's frame rows, to observe them; ``frame_rows`` outputs that column
    (:data:`FRAME_ROWS`) instead. ``rebuilt`` gives ``seq`` and columns ``kept`` that ``df``
    holds taken apart (:mod:`~engine.exec.spark.spread`)."""
    over = frame.spec
    # A frame of a few rows whose aggregates and carryovers need no window over the whole frame.
    offsets = frame.offsets if target is None and (frame.end == 0 or not carryovers) else None
    shifts = Shifts(frame)
    columns = _offset_aggregates(shifts, offsets, calls, first_args, aggregate_names)
    if columns is None:  # one sliding window for all, the frame's rows too
        offsets, columns = None, {}
        for (name, args), alias in zip(calls, aggregate_names, strict=True):
            if name == "count_distinct":  # Spark has no distinct window aggregates
                columns[alias] = F.size(F.collect_set(*args).over(over))
            else:
                columns[alias] = AGGREGATE_FORMS[name](*args).over(over)
    rebuilt = rebuilt or {}
    sequence = rebuilt.get(seq, col(seq))
    chosen = sequence if target is None else F.when(target, sequence)
    plain: dict[str, Column] = {}  # values of the record itself, no window's
    for value, alias in zip(carryovers, carryover_names, strict=True):
        if target is None and frame.end == 0:
            plain[alias] = value  # the frame ends at the record itself
        else:
            columns[alias] = F.max_by(value, chosen).over(over)
    plain[seq] = sequence
    plain.update((name, rebuilt.get(name, column(name))) for name in kept)
    if offsets is None:
        rows = F.count(lit(1)).over(over)  # the rows of each record's frame
    else:
        rows = _total([shifts.holds(o).cast("long") for o in offsets])
    if frame_rows:
        columns[FRAME_ROWS] = rows
    if offsets is not None:
        # The shifts in a select of their own (the only windows: the values over them and the
        # records rebuilt follow in the caller's select).
        df = df.select("*", *shifts.columns())
    elif rebuilt:
        # ``df`` is taken apart: the windows in a select of their own, the records rebuilt
        # after them (rebuilt in the windows' select, Spark would build them below the
        # windows and shuffle their members twice).
        df = df.select("*", *[value.alias(name) for name, value in columns.items()])
        columns = {name: top_column(name) for name in columns}
        rows = col(FRAME_ROWS) if frame_rows else rows
    columns = {**plain, **columns}
    if count_frames is not None:
        df = count_frames(df.withColumn(FRAME_ROWS, rows), FRAME_ROWS)
        rows = col(FRAME_ROWS)
    keep = None
    if target is not None:
        keep = F.max(chosen).over(over).isNotNull()
    elif not frame.holds_current_row:
        keep = rows > 0
    if keep is None:
        return Collapsed(df, columns)
    out = Collapsed(df, {**columns, temp("keep"): keep}).select()
    return Collapsed(out.where(col(temp("keep"))), {name: column(name) for name in columns})


def _offset_aggregates(
    shifts: Shifts,
    offsets: range | None,
    calls: Sequence[AggregateCall],
    first_args: Sequence[Typed | None],
    names: Sequence[str],
) -> dict[str, Column] | None:
    """The aggregates over a frame of a few ``offsets`` from the values at each offset, as
    Spark's aggregates compute them (nulls skipped; sums and averages adding from zero in frame
    order); None where one of them has no such form (then none is given one)."""
    if offsets is None:
        return None
    columns: dict[str, Column] = {}
    for (name, args), first, alias in zip(calls, first_args, names, strict=True):
        dtype = first.dtype if first is not None else None
        if (
            name == "count"
            and first is not None
            and first.is_constant
            and first.constant is not None
        ):
            # A constant counts rows: the shifts of the frame's rows, not of the constant.
            columns[alias] = _total([shifts.holds(o).cast("long") for o in offsets])
        elif name == "count":
            values = [shifts.at(args[0], o).isNotNull().cast("long") for o in offsets]
            columns[alias] = _total(values)
        elif name in ("min", "max") and isinstance(dtype, _LEAST_TYPES):
            values = [shifts.at(args[0], o) for o in offsets]
            pick = F.least if name == "min" else F.greatest
            columns[alias] = pick(*values) if len(values) > 1 else values[0]
        elif name in ("sum", "avg") and isinstance(dtype, _ADDED_TYPES):
            integral = name == "sum" and not isinstance(dtype, T.FloatType | T.DoubleType)
            added = "long" if integral else "double"
            values = [shifts.at(args[0], o).cast(added) for o in offsets]
            present = [v.isNotNull().cast("long") for v in values]
            total = _total([F.ifnull(v, lit(0).cast(added)) for v in values], start=added)
            if name == "sum":
                columns[alias] = F.when(_total(present) > 0, total)
            else:
                count = _total(present)
                columns[alias] = F.when(count > 0, total / count.cast("double"))
        else:
            return None
    return columns


_LEAST_TYPES = (T.NumericType, T.StringType, T.BooleanType, T.DateType, T.TimestampType)
_ADDED_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType)


def _total(values: Sequence[Column], start: str | None = None) -> Column:
    """``values`` added in order, from a zero of type ``start`` when given (as Spark's ``sum``
    and ``avg`` add)."""
    total = lit(0).cast(start) if start else values[0]
    for value in values if start else values[1:]:
        total = total + value
    return total


def target_is_true(value: Typed) -> Column:
    """A predicate for "the target is boolean true"; a target that is not a boolean never is."""
    if isinstance(value.dtype, T.BooleanType):
        return F.ifnull(value.column, lit(False))
    return lit(False)


def running_columns(
    typed_calls: Sequence[TypedCall],
    *,
    partition: str | Sequence[Column] | None,
    order: Sequence[Column],
) -> list[tuple[Column, T.DataType | None]]:
    """The running value of each of ``calls`` (see the module docstring): a window Column and
    its type (None where only Spark's analysis knows: decimal averages); ``partition`` names a
    column of run numbers (:func:`with_run_numbers`) or gives the columns whose equal values
    are a run, None for one run; ``order`` is the records' order (their sequence, or its
    members: :mod:`~engine.exec.spark.spread`)."""
    calls = prepare_arguments(typed_calls)
    columns = [partition] if isinstance(partition, str) else list(partition or [])
    ordered = (Window.partitionBy(*columns) if columns else Window).orderBy(*order)
    framed = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    values: list[tuple[Column, T.DataType | None]] = []
    for (name, args), (_, typed_args) in zip(calls, typed_calls, strict=True):
        if name == "row_number":
            values.append((F.row_number().over(ordered).cast("long"), T.LongType()))
        else:
            dtype = aggregate_type(name, [a.dtype for a in typed_args])
            values.append((RUNNING_FORMS[name](*args).over(framed), dtype))
    return values
