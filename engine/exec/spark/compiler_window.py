"""``segment`` and ``windowframe`` on Spark, over the sequence column.

Both produce their values in temporary columns (named by the caller); the compiler writes them at
the operator's ``ref`` paths.

* segment: records grouped globally by the key values, groups in order of first appearance,
  records in input order inside a group, group numbers 1, 2, 3, ... in that order (R-SEG-ORDER).
  The first sequence value of each group (a window ``min`` partitioned by the keys) orders the
  groups: the new sequence value is (group's first, record's), and the group number is the
  ``dense_rank`` of the group's first. Spark computes the number only if something reads it;
  an input already in key order keeps its sequence.
* windowframe: for target record *k* (0-based global index), one copy of every record *j* with
  ``k + start <= j <= k + end`` inside *k*'s run of equal ``within`` values, in (k, j) order, with
  ``segment = k`` and ``position = j - k`` (R-WF-POS). The members are gathered by
  ``collect_list`` over a row frame of the run (no self-join) and exploded.

The global numbering (group numbers, record indexes, runs) runs in window functions over the
sequence column without a partition, that is in one partition; :func:`frame_window` gives the
partitioned window where the runs are a segment's groups.

>>> quote_name("a.b")
'`a.b`'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.exec.spark.compiler_order import sequence_pair, temp, with_row_index, with_run_numbers
from engine.exec.spark.constant_columns import col, lit
from engine.exec.spark.names import quote_name
from engine.exec.spark.paths import PendingColumns
from engine.expr import Expr
from engine.plan.field_paths import Path
from engine.plan.operators import CollapsingAggregate, WindowFrame
from engine.planner.properties.decisions import SegmentShape, frame_fuses_with


def segment_rows(
    df: DataFrame, keys: Sequence[Column], *, seq: str, name: str, grouped: bool = False
) -> DataFrame:
    """``df`` grouped by ``keys`` (see the module docstring), the 1-based group number in ``name``
    (a long). ``grouped`` says the input is already in key order (equal keys are adjacent, in
    order of first appearance): the sequence stays."""
    if not keys:
        return df.withColumn(name, lit(1).cast("long"))
    first = temp(f"{name}_first")
    seq_type = df.schema[seq].dataType
    df = df.withColumn(first, F.min(seq).over(Window.partitionBy(*keys)))
    df = df.withColumn(name, F.dense_rank().over(Window.orderBy(first)).cast("long"))
    if not grouped:
        df = df.withColumn(seq, sequence_pair(col(first), seq_type, col(seq), seq_type))
    return df.drop(first)


def windowframe_rows(
    df: DataFrame,
    *,
    start: int | None,
    end: int | None,
    within: Column | None,
    seq: str,
    segment: str,
    position: str,
) -> DataFrame:
    """One copy of each window member per target record, with ``segment`` (k) and ``position``
    (j - k) as long columns; a missing ``start`` or ``end`` is unbounded inside the run."""
    names = [n for n in df.columns if n != seq]
    index, run, members, member = (temp(n) for n in ("wf_j", "wf_run", "wf_members", "wf_member"))
    df = with_row_index(df, seq=seq, name=index)
    if within is not None:
        df = with_run_numbers(df, within, seq=seq, name=run)
        in_run = Window.partitionBy(run).orderBy(index)
    else:
        in_run = Window.orderBy(index)
    frame = in_run.rowsBetween(
        Window.unboundedPreceding if start is None else start,
        Window.unboundedFollowing if end is None else end,
    )
    record = F.struct(col(index).alias(index), *[col(quote_name(n)).alias(n) for n in names])
    windows = df.select(
        col(index).alias(segment), F.collect_list(record).over(frame).alias(members)
    )
    copies = windows.select(segment, F.posexplode(members).alias(temp("wf_pos"), member))
    value = col(member)
    j = value.getField(index)
    return copies.select(
        *[value.getField(n).alias(n) for n in names],
        col(segment),
        (j - col(segment)).alias(position),
        sequence_pair(col(segment), T.LongType(), j, T.LongType()).alias(seq),
    )


@dataclass(frozen=True)
class SegmentInput:
    """A segment's input DataFrame, its key Columns and where it writes the group number."""

    input: DataFrame
    keys: list[Column]
    ref: Path
    exprs: tuple[Expr, ...] = ()
    input_id: str = ""
    pending: PendingColumns | None = None  # the input's records, left to the segment's reader

    @property
    def shape(self) -> SegmentShape:
        """What the planner's decisions read of the segment."""
        return SegmentShape(self.ref, self.exprs)

    def writes_over_keys(self) -> bool:
        """Whether the group number is written over (a part of) a key it groups by."""
        return self.shape.writes_over_keys()

    def fuses_with(self, op: CollapsingAggregate) -> bool:
        """Whether ``op`` collapses this segment's groups without reading its group number."""
        return self.shape.fuses_with(op)


@dataclass(frozen=True)
class FrameInput:
    """A windowframe, its input DataFrame and input operator id."""

    op: WindowFrame
    input: DataFrame
    input_id: str | None

    def fuses_with(self, segment: SegmentInput, op: CollapsingAggregate) -> bool:
        """Whether ``op``'s records are aggregates over each record's frame
        (:func:`~engine.planner.properties.decisions.frame_fuses_with`)."""
        return frame_fuses_with(self.op, segment.shape, op)
