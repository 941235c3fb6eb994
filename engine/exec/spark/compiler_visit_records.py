"""The Spark compiler's visitors of record-at-a-time operators (``filter``, ``transform``,
``project``, ``limit``, ``flatten``) and of several inputs (``union``, ``join``)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.exec.spark.columns import compile_condition, compile_expression, compile_typed
from engine.exec.spark.compiled import Compiled, observed
from engine.exec.spark.compiler_flatten import flatten_rows
from engine.exec.spark.compiler_join import join_rows, scalar_join_rows, semi_join_rows, union_rows
from engine.exec.spark.compiler_keys import (
    read_pending_field,
    unwritten_keys,
)
from engine.exec.spark.compiler_order import (
    limit_rows,
    sequence_order,
    sort_columns,
    temp,
    top_rows,
)
from engine.exec.spark.constant_columns import lit_as
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.names import column as named_column
from engine.exec.spark.nested_filter import array_levels, filter_records
from engine.exec.spark.paths import (
    PendingColumns,
    TopColumns,
    Typed,
    build_columns,
)
from engine.exec.spark.union_filter import reaches_any_variant, union_filter
from engine.expr import FieldRef, field_refs
from engine.plan.expressions import parse_cached
from engine.plan.field_paths import OUTPUT, Member, Path, member_of, output_path, writable_path
from engine.plan.operators import (
    Filter,
    Flatten,
    Join,
    Limit,
    Project,
    Transform,
    Union,
)
from engine.plan.parts import Ordering
from engine.planner.properties.decisions import copied_paths as _copied_paths


class RecordVisitors:
    """The visitors of record-at-a-time operators and of several inputs.
    Mixed into :class:`~engine.exec.spark.compiler.SparkCompiler`: its visitors read their
    operator's properties (``ctx``) and what compiling their inputs made (``compiled``)."""

    # -- record at a time ------------------------------------------------------------------

    def visit_filter(self, op: Filter, inputs: list[DataFrame]) -> DataFrame | Compiled:
        (df,) = inputs
        condition = parse_cached(op.expr)
        rest = self.ctx.remaining.get(op.id)
        props = self.ctx.props(op.id)
        if props.match_tested:  # the semi (anti) join it reads applied its match test
            if props.rest_test is None:
                pending = self._reading.over(df) if self._reading is not None else None
                return Compiled(df, unchanged=True, pending=pending)
            condition, rest = parse_cached(props.rest_test), None
        if rest is not None:
            # The scan applied part of the condition: each test runs once.
            if rest.condition is None:
                pending = self._reading.over(df) if self._reading is not None else None
                return Compiled(df, unchanged=True, pending=pending)  # for its one reader
            condition = rest.condition
        reading = self._reading
        if reading is not None:
            schema = reading.schema
            if reaches_any_variant(schema, condition) or any(
                array_levels(schema, ref.path) for ref in field_refs(condition)
            ):
                df = reading.select()  # Appendix A rewrites records: it filters them built
            else:
                read = functools.partial(read_pending_field, reading)
                kept = df.where(compile_condition(condition, schema, resolve=read))
                return Compiled(kept, pending=reading.over(kept))  # for its one reader
        pruned = union_filter(df, condition)
        return pruned if pruned is not None else filter_records(df, condition)

    def visit_transform(self, op: Transform, inputs: list[DataFrame]) -> Compiled:
        (df,) = inputs
        written = [writable_path(t.ref, "transform ref") for t in op.transforms]
        key_order = unwritten_keys(list(self.compiled(op.input).key_order), written)
        # Every transform in one select (with its input's pending one); a later one reads what
        # earlier ones wrote.
        record = TopColumns(df.schema) if self._reading is None else TopColumns.of(self._reading)
        for transform in op.transforms:
            path = writable_path(transform.ref, "transform ref")
            tree = parse_cached(transform.expr)
            record.write(
                path, compile_typed(tree, df.schema, resolve=lambda r: record.read(r.path))
            )
        return Compiled(
            record.select(df),
            key_order=tuple(key_order),
            seq_members=self._passed_members(op.input, written),
        )

    def visit_project(self, op: Project, inputs: list[DataFrame]) -> DataFrame | Compiled:
        (df,) = inputs
        values = [(output_path(p.ref), self._typed_read(p.expr, df)) for p in op.projections]
        columns: list[tuple[Path, Column | Typed]] = []
        for path, value in values:
            if not path and not isinstance(value.dtype, T.StructType | T.NullType):
                path = (OUTPUT,)  # a plain value cannot be the record: keep it under its ref
            columns.append((path, value))
        if self.ctx.props(op.id).store_input:
            # Counts carried this far are observed over the project's plain columns.
            counts = self._carried
            carried = [((c,), self._column_read(c, df)) for c, _ in counts]
            out = observed(build_columns(df, [*columns, *carried]), counts)
            # The store sorts, if it does, by the sequence of the project's input (Spark carries
            # it through the project for the sort and drops it after): no step drops it. After
            # an order that built none, by the copies of the order's keys.
            reading = self._reading

            def sequence() -> Typed:  # the input's (over the input's base, if pending)
                if reading is None:
                    return Typed(df[SEQ_COLUMN], df.schema[SEQ_COLUMN].dataType)
                return reading.read((SEQ_COLUMN,), keep_unread=True)

            store_keys = self.compiled(op.input).store_keys

            def order() -> list[Column]:  # the columns the store sorts by
                if store_keys is not None:
                    return self._by_copied_keys(op, sequence, out, *store_keys)
                return self._by_sequence(op, sequence(), out)

            # `out` carries no counts: its readers drop nothing
            return Compiled(out, store_order=order, deferred=())
        return build_columns(df, [*columns, ((SEQ_COLUMN,), self._column_read(SEQ_COLUMN, df))])

    def _column_read(self, name: str, df: DataFrame) -> Typed:
        """Top-level column ``name`` of the input being read (``df``, or its pending columns)."""
        if self._reading is None:
            return Typed(named_column(name), df.schema[name].dataType)
        return self._reading.read((name,), keep_unread=True)

    def _by_copied_keys(
        self,
        op: Project,
        sequence: Callable[[], Typed],
        out: DataFrame,
        orderings: Sequence[Ordering],
        tie_break: bool,
    ) -> list[Column]:
        """The sort columns of the store of ``op``, a project of an order that built no sequence
        (:func:`store_sorted_orders`): the copies of the order's keys in ``op``'s output ``out``,
        then, where records may tie, the ``sequence`` of the order's input."""
        copies = _copies(op, out)
        keys = [
            (copies[member_of(parse_cached(o.expr))], o.order, o.null_collation) for o in orderings
        ]
        ties = _sequence_order(sequence()) if tie_break else []
        return [*sort_columns(keys, seq=SEQ_COLUMN, tie_break=False), *ties]

    def _by_sequence(self, op: Project, sequence: Typed, out: DataFrame) -> list[Column]:
        """The sort columns of the store of ``op``: the ``sequence`` of its input, its members
        that equal a record member ``op`` copies read from the copy in ``op``'s output ``out``.

        A store sorting by these columns, not by the sequence struct's members, lets Spark
        shuffle and sort the plain values it writes, and prune the struct (it prunes a struct
        only when some of its members go unread)."""
        members = self.compiled(op.input).seq_members or ()
        fields = sequence.dtype.fields if isinstance(sequence.dtype, T.StructType) else []
        if not fields or len(fields) != len(members):
            return _sequence_order(sequence)
        copies = _copies(op, out)
        equal = {f.name: copies[m] for f, m in zip(fields, members) if m in copies}
        return _sequence_order(sequence, equal)

    def visit_limit(self, op: Limit, inputs: list[DataFrame]) -> Compiled:
        (df,) = inputs
        ordered = self.compiled(op.input).order
        if ordered is not None and op.last is not None:
            # Top-N: sort and limit at once (Spark's TakeOrdered) instead of sorting twice.
            reading = self._reading  # the pending columns the order passed on, over its input
            top = top_rows(
                ordered.input,
                ordered.keys,
                op.first,
                op.last,
                seq=SEQ_COLUMN,
                tie_break=ordered.tie_break,
                fields=ordered.fields,
                numbered=not self.ctx.props(op.id).store_read_limit,
                sequence=None if reading is None else reading.values[SEQ_COLUMN].column,
            )
            pending = None if reading is None else reading.over(top)  # for the store's project
            return Compiled(top, sorted=True, pending=pending)
        # sorted by the sequence, then cut
        cut = bool(op.first) or op.last is not None
        return Compiled(limit_rows(df, op.first, op.last, seq=SEQ_COLUMN), sorted=cut)

    def visit_flatten(self, op: Flatten, inputs: list[DataFrame]) -> DataFrame | Compiled:
        (df,) = inputs
        expr = parse_cached(op.expr)
        element = temp("flatten_value")
        value = self._typed_read(expr, df)  # typed by the compiler: no analysis by Spark
        reading = self._reading  # unordered: its input's pending columns, exploded with their base
        base = df if reading is None else reading.base
        props = self.ctx.props(op.id)
        rows = flatten_rows(base, value, seq=SEQ_COLUMN, name=element, ordered=not props.unordered)
        # The record's changes in one select over the flattened rows.
        record = TopColumns(df.schema) if reading is None else TopColumns.of(reading)
        if op.drop:
            for ref in field_refs(expr):
                record.drop(tuple(ref.path))
        record.write(writable_path(op.ref, "flatten ref"), rows.element)
        if rows.sequence is None and props.one_reader:
            # its reader selects through them
            return Compiled(rows.frame, pending=record.pending(rows.frame))
        if rows.sequence is None:
            return record.select(rows.frame)
        record.drop((SEQ_COLUMN,))
        return record.select(rows.frame, rows.sequence.alias(SEQ_COLUMN))

    # -- several inputs --------------------------------------------------------------------

    def visit_union(self, op: Union, inputs: list[DataFrame]) -> DataFrame:
        ordered = not self.ctx.props(op.id).unordered
        return union_rows(inputs, distinct=op.distinct, seq=SEQ_COLUMN, ordered=ordered)

    def visit_join(self, op: Join, inputs: list[DataFrame]) -> DataFrame | Compiled:
        left, right = inputs
        sides = (self._sides[0], self._sides[1]) if self._sides else (None, None)
        typed_l = [self._typed_over(c.left, left, sides[0]) for c in op.conditions]
        typed_r = [self._typed_over(c.right, right, sides[1]) for c in op.conditions]
        conditions = []
        for condition, tl, tr in zip(op.conditions, typed_l, typed_r, strict=True):
            value_l, value_r, type_l, type_r = tl.column, tr.column, tl.dtype, tr.dtype
            if not comparable(type_l, type_r, condition.relationship):
                # Values that cannot be compared never match (and null never matches).
                value_l, value_r = lit_as(None, "long"), lit_as(None, "long")
            conditions.append((value_l, condition.relationship, value_r))
        props = self.ctx.props(op.id)
        if props.scalar_side is not None:
            records = [
                p.over(df).select() if p else df for df, p in zip(inputs, sides, strict=True)
            ]
            scalar = scalar_join_rows(*records, scalar_side=props.scalar_side, seq=SEQ_COLUMN)
            if scalar is not None:
                return scalar
        # The physical plan's broadcast-hash-join: the small side is shipped to every task.
        build = self.ctx.broadcast.get(op.id)
        if build == "left":
            left = F.broadcast(left)
        elif build == "right":
            right = F.broadcast(right)
        if props.semi_join is not None:
            return semi_join_rows(
                left,
                right,
                conditions,
                kind=props.semi_join.kind,
                seq=SEQ_COLUMN,
                sides=sides,
                broadcast=build is not None,
            )
        joined = join_rows(
            left,
            right,
            conditions,
            how=op.type,
            seq=SEQ_COLUMN,
            ordered=not props.unordered,
            related=not props.unrelated_inputs,
            pending=props.one_reader,
            sides=sides,
            broadcast=build is not None,
        )
        if isinstance(joined, PendingColumns):
            # its one reader selects through the joined records
            return Compiled(joined.base, pending=joined)
        return joined


def _sequence_order(sequence: Typed, equal: Mapping[str, Column] | None = None) -> list[Column]:
    """:func:`sequence_order` of a typed sequence value."""
    schema = T.StructType([T.StructField(SEQ_COLUMN, sequence.dtype)])
    return sequence_order(schema, SEQ_COLUMN, value=sequence.column, equal=equal)


def _copies(op: Project, out: DataFrame) -> dict[Member, Column]:
    """The record members ``op`` copies, each to the column of ``op``'s output ``out`` holding
    the copy."""
    return {
        member: compile_expression(FieldRef(tuple(path)), out.schema)
        for member, path in _copied_paths(op).items()
    }


def comparable(left: T.DataType, right: T.DataType, relationship: str) -> bool:
    """Whether a join condition can ever hold between values of these types.

    >>> comparable(T.LongType(), T.DoubleType(), "<"), comparable(T.StringType(), T.LongType(), "==")
    (True, False)
    """
    if isinstance(left, T.NullType) or isinstance(right, T.NullType):
        return False
    if isinstance(left, T.NumericType) and isinstance(right, T.NumericType):
        return True
    nested = (T.StructType, T.ArrayType, T.MapType)
    if isinstance(left, nested) or isinstance(right, nested):
        return relationship in ("==", "!=") and left == right
    return type(left) is type(right)
