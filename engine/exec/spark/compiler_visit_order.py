"""The Spark compiler's visitors of ordering operators: ``order``, ``segment``, ``windowframe``."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.errors import DrillError
from engine.exec.spark.compiled import Compiled, OrderInput
from engine.exec.spark.compiler_keys import (
    reads_field,
    unwritten_keys,
)
from engine.exec.spark.compiler_order import (
    lazy_order,
    order_rows,
    sort_columns,
    temp,
    with_run_numbers,
)
from engine.exec.spark.compiler_window import FrameInput as _FrameInput
from engine.exec.spark.compiler_window import SegmentInput as _SegmentInput
from engine.exec.spark.compiler_window import segment_rows, windowframe_rows
from engine.exec.spark.constant_columns import col
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.paths import (
    Typed,
    with_path,
)
from engine.exec.spark.spread import Spread
from engine.expr import Expr
from engine.plan.expressions import parse_cached
from engine.plan.field_paths import Member, member_of, writable_path
from engine.plan.operators import (
    Order,
    Segment,
    WindowFrame,
)


class OrderVisitors:
    """The visitors of ``order``, ``segment`` and ``windowframe``.
    Mixed into :class:`~engine.exec.spark.compiler.SparkCompiler`: its visitors read their
    operator's properties (``ctx``) and what compiling their inputs made (``compiled``)."""

    # -- order -----------------------------------------------------------------------------

    def visit_order(self, op: Order, inputs: list[DataFrame]) -> Compiled:
        (df,) = inputs
        typed = [self._typed_read(o.expr, df) for o in op.orderings]
        keys = [(t.column, o.order, o.null_collation) for t, o in zip(typed, op.orderings)]
        types = [t.dtype for t in typed]
        for ordering, dtype in zip(op.orderings, types):
            if isinstance(dtype, T.StructType | T.ArrayType | T.MapType):
                raise DrillError(
                    f"cannot order by '{ordering.expr}', a value of type {dtype.simpleString()}",
                    hint="order by a scalar member of the map or array instead",
                )
        if op.within:
            within = self.field(op.within, df)
            return Compiled(order_rows(df, keys, seq=SEQ_COLUMN, within=within), sorted=True)
        props = self.ctx.props(op.id)
        # No tie-break by input order where no two records tie (the keys are unique).
        tie_break = not props.total_order or self.compiled(op.input).ties_differ
        found = Compiled(
            df,
            order=OrderInput(df, keys, tie_break, [reads_field(o.expr) for o in op.orderings]),
            key_order=tuple(parse_cached(o.expr) for o in op.orderings),
        )
        if props.top_n:
            # its limits sort `df` by `keys` themselves: no sequence to build (their base
            # sorted, the columns pending for its limit)
            return replace(found, pending=self._reading)
        if props.store_sorted:
            # its store sorts by its project's copies of the keys: no sequence to build (the
            # columns pending for its one reader, its store's project)
            return replace(found, store_keys=(op.orderings, tie_break), pending=self._reading)
        sources: list[int | None] = []
        reading = self._reading
        if reading is not None:  # its input's pending columns and its sequence: one select
            sequence = reading.read((SEQ_COLUMN,)).column
            lazy = lazy_order(
                keys, types, seq=SEQ_COLUMN, tie_break=tie_break, sources=sources, sequence=sequence
            )
            if lazy is not None:
                df = reading.without([SEQ_COLUMN]).select(lazy.alias(SEQ_COLUMN))
                return replace(found, df=df, seq_members=_order_members(op, sources))
            # Keys with no lazy order: their base sorted, numbered in the select (as renumber).
            by = sort_columns(keys, seq=SEQ_COLUMN, tie_break=tie_break, sequence=sequence)
            numbered = F.monotonically_increasing_id().alias(SEQ_COLUMN)
            df = reading.over(reading.base.orderBy(*by)).without([SEQ_COLUMN]).select(numbered)
            return replace(found, df=df, sorted=True)
        ordered = order_rows(
            df, keys, seq=SEQ_COLUMN, types=types, tie_break=tie_break, sources=sources
        )
        if ordered.schema[SEQ_COLUMN].dataType == T.LongType():
            # no lazy order for these keys: sorted and numbered again
            return replace(found, df=ordered, sorted=True)
        return replace(found, df=ordered, seq_members=_order_members(op, sources))

    def visit_segment(self, op: Segment, inputs: list[DataFrame]) -> Compiled:
        (df,) = inputs
        ref = writable_path(op.ref, "segment ref")
        exprs = tuple(parse_cached(text) for text in op.exprs)
        read = self.compiled(op.input)
        known = read.keys
        keys = [col(known[e][0]) if e in known else self._typed_read(e, df).column for e in exprs]
        reading = self._reading  # its aggregates group their base (fused)
        grouped = _in_key_order(read.key_order, exprs)
        leading = list(read.key_order) if grouped else list(exprs)
        found = Compiled(
            df,
            segment=_SegmentInput(df, keys, ref, exprs, op.input or "", reading),
            key_order=tuple(unwritten_keys(leading, [ref])),
        )
        props = self.ctx.props(op.id)
        if props.fused or (props.unnumbered and grouped):
            # its readers group `df` by `keys` themselves: no numbers to build
            return replace(found, seq_members=self._passed_members(op.input, []))
        number = temp("segment_number")
        df = segment_rows(df, keys, seq=SEQ_COLUMN, name=number, grouped=grouped)
        return replace(found, df=with_path(df, ref, Typed(col(number), T.LongType())).drop(number))

    def _runs(
        self, input_id: str | None, within: str | None, df: DataFrame, *, keep: Collection[str] = ()
    ) -> tuple[
        DataFrame, list[Column], str | None, dict[Expr, tuple[str, T.DataType]], Spread | None
    ]:
        """``df`` and the columns whose equal values are the runs of ``within`` (none: one run):
        a segment's keys when ``within`` is the group number of the segment that is the input
        (kept as columns, returned fourth), else run numbers (returned third, to drop); then
        ``df`` spread for windows (:meth:`_spread`, fifth; the first is then its frame). A key
        column that equals a spread record's member is the spread's, rebuilt from its leaf: no
        DataFrame step adds it before."""
        if within is None:
            return df, [], None, {}, self._spread(df, input_id, {}, keep=keep)
        path = writable_path(within, "within")
        segment = self.compiled(input_id).segment
        if segment is not None and segment.ref == path and not segment.writes_over_keys():
            known = self.compiled(input_id).keys.items()
            keys = {e: key for e, key in known if key[0] in df.columns}
            added: dict[str, Column] = {}
            for expr in segment.exprs:
                if expr not in keys:
                    name, value = temp(f"key{next(self._key_names)}"), self.typed(expr, df)
                    added[name] = value.column
                    keys[expr] = (name, value.dtype)
            spread_out = self._spread(df, input_id, keys, keep=keep, added=added)
            if spread_out is None and added:
                df = df.withColumns(added)  # one step for them all
                spread_out = self._spread(df, input_id, keys, keep=keep)
            return df, [col(keys[e][0]) for e in segment.exprs], None, keys, spread_out
        run = temp("run")
        df = with_run_numbers(df, self.field(within, df), seq=SEQ_COLUMN, name=run)
        return df, [col(run)], run, {}, self._spread(df, input_id, {}, keep=keep)

    def visit_windowframe(self, op: WindowFrame, inputs: list[DataFrame]) -> Compiled:
        (df,) = inputs
        # For a segment + collapsingaggregate that collapses these windows again.
        frame = _FrameInput(op, df, op.input)
        if self.ctx.props(op.id).fused:
            # its reader aggregates over each record's frame of `df`: no members
            return Compiled(df, frame=frame)
        within = self.field(op.within, df) if op.within else None
        segment, position = temp("wf_segment"), temp("wf_position")
        df = windowframe_rows(
            df,
            start=op.start,
            end=op.end,
            within=within,
            seq=SEQ_COLUMN,
            segment=segment,
            position=position,
        )
        long = T.LongType()
        df = with_path(
            df, writable_path(op.segment_ref, "windowframe ref"), Typed(col(segment), long)
        )
        df = with_path(
            df, writable_path(op.position_ref, "windowframe ref"), Typed(col(position), long)
        )
        return Compiled(df.drop(segment, position), frame=frame)


def _order_members(op: Order, sources: Sequence[int | None]) -> tuple[Member | None, ...] | None:
    """Which record member each member of ``op``'s lazy sequence equals (see :mod:`spread`)."""
    if not sources:
        return None
    exprs = [parse_cached(o.expr) for o in op.orderings]
    return tuple(member_of(exprs[i]) if i is not None else None for i in sources)


def _in_key_order(key_order: Sequence[Expr], exprs: Sequence[Expr]) -> bool:
    """Whether records grouped by ``key_order`` are grouped by ``exprs`` (in any order): their
    equal keys are adjacent, in order of first appearance."""
    leading = key_order[: len(exprs)]
    return len(leading) == len(exprs) and all(e in leading for e in exprs)
