"""The Spark compiler's visitors of aggregates: ``collapsingaggregate``, ``runningaggregate``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import types as T

from engine.exec.spark.columns import compile_typed
from engine.exec.spark.compiled import Compiled, KeyColumns
from engine.exec.spark.compiler_aggregate import (
    FRAME_ROWS,
    FrameSpec,
    aggregate_type,
    collapse_rows,
    running_columns,
    target_is_true,
)
from engine.exec.spark.compiler_keys import leading_carried, unwritten_keys
from engine.exec.spark.compiler_order import (
    SEQ_BITS,
    temp,
)
from engine.exec.spark.constant_columns import col
from engine.exec.spark.metrics import InputCounter
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.paths import (
    PendingColumns,
    Typed,
    get_in,
    get_typed,
    pending_columns,
    with_path,
)
from engine.exec.spark.spread import Spread
from engine.expr import Expr, FieldRef, FunctionKind, parse_field_ref
from engine.expr.rewrite import split_calls
from engine.plan.expressions import parse_cached
from engine.plan.field_paths import Path, writable_path
from engine.plan.operators import (
    CollapsingAggregate,
    RunningAggregate,
)


class AggregateVisitors:
    """The visitors of ``collapsingaggregate`` and ``runningaggregate``.
    Mixed into :class:`~engine.exec.spark.compiler.SparkCompiler`: its visitors read their
    operator's properties (``ctx``) and what compiling their inputs made (``compiled``)."""

    # -- aggregates ------------------------------------------------------------------------

    def visit_collapsingaggregate(
        self, op: CollapsingAggregate, inputs: list[DataFrame]
    ) -> Compiled:
        (df,) = inputs
        segment = self.compiled(op.input).segment
        props = self.ctx.props(op.id)
        group_by = None
        frame = None
        carried_keys: dict[int, int] = {}
        counter = self.counting.aggregates.get(op.id, InputCounter)()
        count_input, mark_input = counter.observe, counter.mark
        frame_rows = False
        spread_out: Spread | None = None
        reading = self._reading  # the input's records, if left to this aggregate
        windows = self.compiled(segment.input_id).frame if segment is not None else None
        made = Compiled(df)  # what its readers learn of it but its DataFrame
        keys_kept: KeyColumns = {}
        if segment is not None and windows is not None and windows.fuses_with(segment, op):
            # One aggregate over the windows counts them (an observation is used once).
            count_input, mark_input = self.counting.frames.get(op.id), None
            if (
                count_input is not None
                and self.ctx.props(windows.op.id).frame_collapsed_by == op.id
            ):
                # One record per record: the frame rows ride on, to be observed where no
                # record is left whole (an observation there would keep Spark from pruning it).
                made = replace(made, deferred=((FRAME_ROWS, count_input),))
                count_input, frame_rows = None, True
            # Collapsing each window of a windowframe again: aggregates over each record's frame.
            df, partition, run, keys, spread_out = self._runs(
                windows.input_id, windows.op.within, windows.input
            )
            order = [col(SEQ_COLUMN)]
            if spread_out is not None:
                df = spread_out.frame
                partition, order = self._spread_window(spread_out, windows.input_id, partition, run)
            spec = (Window.partitionBy(*partition) if partition else Window).orderBy(*order)
            frame = FrameSpec(spec, windows.op.start, windows.op.end)
            if windows.op.end == 0 and not op.target:
                # One record per record, in its order, carrying the record's own values.
                carried_paths = [writable_path(name, "carryover") for name in op.carryovers]
                written = [writable_path(a.ref, "aggregation ref") for a in op.aggregations]
                key_order = leading_carried(
                    list(self.compiled(windows.input_id).key_order), carried_paths, written
                )
                valid = leading_carried(list(keys), carried_paths, written)
                keys_kept = {e: keys[e] for e in valid}
                made = replace(
                    made,
                    key_order=tuple(key_order),
                    keys=keys_kept,
                    seq_members=self._passed_members(
                        windows.input_id, written, carried=carried_paths
                    ),
                )
        elif segment is not None and segment.fuses_with(op):
            # The runs of a segment's number are its groups: group the segment's input instead.
            df, group_by, reading = segment.input, segment.keys, segment.pending
            for i, name in enumerate(op.carryovers):
                if parse_cached(name) in segment.exprs:
                    carried_keys[i] = segment.exprs.index(parse_cached(name))

        def typed(arg: Expr) -> Typed:  # window functions read a spread record's leaves
            if spread_out is None:
                return self._typed_over(arg, df, reading)
            return compile_typed(arg, spread_out.schema, resolve=spread_out.resolve)

        scalars: list[tuple[Path, Expr]] = []
        calls: list[tuple[str, list[Typed]]] = []
        names: list[str] = []
        for i, aggregation in enumerate(op.aggregations):
            prefix = temp(f"agg{i}_")
            scalar, found = split_calls(aggregation.parsed, FunctionKind.AGGREGATE, prefix)
            scalars.append((writable_path(aggregation.ref, "aggregation ref"), scalar))
            for c, call in enumerate(found):
                calls.append((call.name, [typed(arg) for arg in call.args]))
                names.append(f"{prefix}{c}")
        carry_paths = [writable_path(name, "carryover") for name in op.carryovers]
        carry_names = [temp(f"carry{i}") for i in range(len(carry_paths))]
        # Carried as they are: a record keeps its unread member (Spark may still prune it).
        carried = [
            spread_out.value(parse_field_ref(name).path, keep_unread=True)
            if spread_out is not None
            else reading.read(parse_field_ref(name).path, keep_unread=True)
            if reading is not None
            else get_typed(df.schema, parse_field_ref(name).path, keep_unread=True)
            for name in op.carryovers
        ]
        sequence = None if reading is None else reading.values[SEQ_COLUMN]
        target = target_is_true(typed(parse_field_ref(op.target))) if op.target else None
        collapsed = collapse_rows(
            df if mark_input is None else mark_input(df),
            calls,
            [value.column for value in carried],
            within=self.field(op.within, df) if op.within else None,
            target=target,
            seq=SEQ_COLUMN,
            aggregate_names=names,
            carryover_names=carry_names,
            group_by=group_by,
            carried_keys=carried_keys,
            frame=frame,
            ordered=not props.unordered,
            kept=[name for name, _ in keys_kept.values()],
            count_input=count_input,
            frame_rows=frame_rows,
            rebuilt=spread_out.rebuilt if spread_out is not None else None,
            sequence=None if sequence is None else (sequence.column, _bits_of(reading)),
        )
        # The collapsed record's schema, known without asking Spark (but for decimal averages).
        types = [
            aggregate_type(n, [a.dtype for a in args], over_frame=frame is not None)
            for n, args in calls
        ]
        if any(t is None for t in types):
            schema = collapsed.select().schema
        else:
            seq_type = (
                spread_out.types[SEQ_COLUMN]
                if spread_out is not None
                else sequence.dtype
                if sequence is not None
                else df.schema[SEQ_COLUMN].dataType
            )
            if (group_by is None and op.within is None and frame is None) or (
                group_by is not None and props.unordered
            ):
                seq_type = T.LongType()
            fields = [*zip(names, types), *zip(carry_names, [c.dtype for c in carried])]
            schema = T.StructType(
                [T.StructField(n, t) for n, t in [*fields, (SEQ_COLUMN, seq_type)]]
            )

        def output(name: str) -> Typed:
            return Typed(collapsed.columns[name], schema[name].dataType)

        columns: list[tuple[Path, Column | Typed]] = [
            (path, output(name)) for path, name in zip(carry_paths, carry_names)
        ]
        aggregates = {name: output(name) for name in names}
        no_record = T.StructType([])  # an aggregation reads nothing of the record outside calls
        columns += [(path, _scalar_column(s, aggregates, no_record)) for path, s in scalars]
        kept = [
            *keys_kept.values(),
            *([(FRAME_ROWS, T.LongType())] if frame_rows else []),
        ]
        columns += [((n,), Typed(collapsed.columns[n], t)) for n, t in kept]
        records = pending_columns(collapsed.frame, [*columns, ((SEQ_COLUMN,), output(SEQ_COLUMN))])
        if not props.one_reader:
            return replace(made, df=records.select())
        # Its one reader selects its own columns through these, or selects them first.
        return replace(made, df=collapsed.frame, pending=records)

    def visit_runningaggregate(self, op: RunningAggregate, inputs: list[DataFrame]) -> Compiled:
        (df,) = inputs
        written = [writable_path(a.ref, "aggregation ref") for a in op.aggregations]
        # Not where an aggregation writes into a record or the sequence the spread takes apart.
        roots = {path[0] for path in written}
        df, partition, run, keys, spread_out = self._runs(op.input, op.within, df, keep=roots)
        made = Compiled(
            df,
            keys={e: keys[e] for e in unwritten_keys(list(keys), written)},
            seq_members=self._passed_members(op.input, written),
        )
        order = [col(SEQ_COLUMN)]
        if spread_out is not None:
            df = spread_out.frame
            partition, order = self._spread_window(spread_out, op.input, partition, run)

        def resolve(ref: FieldRef) -> Typed:  # leaves, then what `df` holds now
            if spread_out is None:
                return get_typed(df.schema, ref.path)
            return spread_out.value(ref.path, schema=df.schema)

        for i, aggregation in enumerate(op.aggregations):
            prefix = temp(f"running{i}_")
            scalar, found = split_calls(aggregation.parsed, FunctionKind.RUNNING, prefix)
            calls = [
                (call.name, [compile_typed(arg, df.schema, resolve=resolve) for arg in call.args])
                for call in found
            ]
            values = running_columns(calls, partition=partition, order=order)
            if any(dtype is None for _, dtype in values):  # typed by Spark's analysis
                fields = df.select(*[column for column, _ in values]).schema.fields
                values = [(c, f.dataType) for (c, _), f in zip(values, fields, strict=True)]
            by_name = {f"{prefix}{c}": Typed(*value) for c, value in enumerate(values)}
            path = writable_path(aggregation.ref, "aggregation ref")
            # The window functions inside the value written: one step per aggregation.
            df = with_path(df, path, _scalar_column(scalar, by_name, df.schema, resolve))
        if spread_out is None:
            return replace(made, df=df.drop(run) if run else df)
        # Counts the rows carry (see compile) are observed here, over the leaves, and
        # the rebuild leaves their columns out, with the run numbers: no step drops them.
        counts = self._carried
        for column, counter in counts:
            df = df if counter is None else counter(df, column)
        rebuilt = spread_out.pending(df, without=[*(c for c, _ in counts), *([run] if run else [])])
        made = replace(made, deferred=())
        if not self.ctx.props(op.id).one_reader:
            return replace(made, df=rebuilt.select())
        # its one reader selects through the rebuilt columns
        return replace(made, df=df, pending=rebuilt)


def _bits_of(pending: PendingColumns | None) -> dict[str, int]:
    """The metadata of a pending sequence column (its width, where known)."""
    if pending is None or pending.seq_bits is None:
        return {}
    return {SEQ_BITS: pending.seq_bits}


def _scalar_column(
    scalar: Expr,
    calls: Mapping[str, Typed],
    schema: T.StructType,
    fields: Callable[[FieldRef], Typed] | None = None,
) -> Typed:
    """The scalar part of an aggregation: ``calls`` are the values of its aggregate calls, by
    the names the scalar reads them as; any other field is read from ``schema`` (or by
    ``fields``)."""

    def read(ref: FieldRef) -> Typed:
        head = ref.path[0]
        if isinstance(head, str) and head in calls:
            return get_in(calls[head], ref.path[1:])
        return get_typed(schema, ref.path) if fields is None else fields(ref)

    return compile_typed(scalar, schema, resolve=read)
