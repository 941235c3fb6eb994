"""Every logical operator compiled to native Spark DataFrame operations.

:class:`SparkCompiler` has one ``visit_<op>(op, inputs) -> DataFrame`` per logical operator; each
DataFrame holds the record's top-level fields as columns plus :data:`SEQ_COLUMN`, the record order
(see :mod:`engine.exec.spark.compiler_order`); a scanned record's struct carries a member no one
reads (see :mod:`engine.exec.spark.unread_member`). Expressions become Columns through
:func:`engine.exec.spark.columns.compile_expression`, values are written at paths with
:mod:`engine.exec.spark.paths`. The operator semantics are those of the local executor and of the
conformance corpus (CASES.md); the work per operator lives in the ``compiler_*`` modules.

Nothing here runs Python per row: no UDF, no ``mapInArrow``, no SQL text. What is known of the
whole plan before compiling it (which DataFrames a reader makes unnecessary) is the planner's
per-operator properties (:mod:`engine.planner.properties`), which a visitor reads for its
operator (``ctx.props(op.id)``). The visitors live by operator family in the
``compiler_visit_*`` modules, mixed into :class:`SparkCompiler`. A visitor reads its operator,
its properties and what compiling its inputs made (:meth:`SparkCompiler.compiled`), and
returns its DataFrame or a :class:`~engine.exec.spark.compiled.Compiled` with what its readers
need to know (the columns it leaves pending for its one reader, the row counts it carries in
columns, the sort keys it keeps, ...): the compiler keeps one per operator, and nothing else
passes from one visitor to another.

>>> sorted(set(OPERATORS) - set(UNSUPPORTED)) == sorted(supported_operators())
True
>>> UNSUPPORTED
{}
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import types as T

from engine.errors import PlanningError
from engine.exec.spark.columns import compile_expression, compile_typed
from engine.exec.spark.compiled import NOTHING, Compiled, Deferred, KeyColumns, observed
from engine.exec.spark.compiler_keys import (
    keeps_key,
    leading_carried,
    read_pending_field,
    unwritten_keys,
)
from engine.exec.spark.compiler_visit_aggregates import AggregateVisitors
from engine.exec.spark.compiler_visit_order import OrderVisitors
from engine.exec.spark.compiler_visit_records import RecordVisitors
from engine.exec.spark.compiler_visit_sources import SourceVisitors
from engine.exec.spark.metrics import RowCounting
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.paths import (
    PendingColumns,
    Typed,
    top_column,
)
from engine.exec.spark.run_findings import RunFindings
from engine.exec.spark.spread import Spread, spread
from engine.expr import Expr, FieldRef, parse_field_ref
from engine.plan.expressions import parse_cached
from engine.plan.field_paths import Member, Path, member_of
from engine.plan.operators import (
    OPERATORS,
)
from engine.plan.traits import traits
from engine.planner.properties import OperatorProperties
from engine.planner.rules.filter_pushdown import Remaining

_NO_PROPERTIES = OperatorProperties()

UNSUPPORTED: dict[str, str] = {}
"""Logical operators the Spark executor cannot run, with the reason (none today)."""


@dataclass
class SparkRunContext:
    """What the operators of one Spark run read: storage engines, parameters and what the
    planner decided. What the run finds out is written in its
    :class:`~engine.exec.spark.run_findings.RunFindings`."""

    engines: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    file_columns: dict[str, Sequence[str]] = field(default_factory=dict)  # scan id -> names
    broadcast: dict[str, str] = field(default_factory=dict)  # join id -> "left" | "right"
    # filter id -> what its scan's pushed filter left it to test (planner's remaining_conditions)
    remaining: dict[str, Remaining] = field(default_factory=dict)
    # operator id -> what the planner decided of it (:mod:`engine.planner.properties`)
    properties: Mapping[str, OperatorProperties] = field(default_factory=dict)

    def props(self, op_id: str | None) -> OperatorProperties:
        """The planner's properties of operator ``op_id`` (none for an unknown one)."""
        return self.properties.get(op_id or "", _NO_PROPERTIES)

    def engine(self, name: str) -> Any:
        try:
            return self.engines[name]
        except KeyError:
            known = ", ".join(sorted(self.engines)) or "none"
            raise PlanningError(f"no storage engine '{name}' (engines: {known})") from None


def supported_operators() -> list[str]:
    """The ``op`` names :class:`SparkCompiler` has a ``visit_<op>`` method for."""
    return sorted(name for name in OPERATORS if hasattr(SparkCompiler, f"visit_{name}"))


class SparkCompiler(SourceVisitors, RecordVisitors, OrderVisitors, AggregateVisitors):
    """Compiles logical operators, one at a time, into DataFrames on ``spark``.

    ``compile(op, inputs)`` takes the DataFrames of ``op``'s inputs (in ``op.input_ids()`` order)
    and returns ``op``'s DataFrame; a store writes its input and returns it. What compiling finds
    out (files read, what a store wrote, ...) is written in ``findings``; ``counting`` says how
    it counts the operators' rows.
    """

    def __init__(
        self,
        spark: Any,
        ctx: SparkRunContext,
        findings: RunFindings | None = None,
        counting: RowCounting | None = None,
    ) -> None:
        self.spark = spark
        self.ctx = ctx
        self.findings = findings if findings is not None else RunFindings()
        # op id -> what compiling it made: the one thing a visitor learns of its inputs
        self._compiled: dict[str, Compiled] = {}
        self._key_names = itertools.count()  # unique names of key columns
        self.counting = counting if counting is not None else RowCounting()
        # What the visitor compiling in this thread reads of its inputs (scans are compiled in
        # threads of their own, see build_apart): see _reading, _sides and _carried.
        self._visiting = threading.local()

    @property
    def _reading(self) -> PendingColumns | None:
        """The select the one input of the operator compiling left pending for it, if any."""
        return getattr(self._visiting, "reading", None)

    @property
    def _sides(self) -> list[PendingColumns | None]:
        """The select each input of the operator compiling left pending for it (or None)."""
        return getattr(self._visiting, "sides", [])

    @property
    def _carried(self) -> Deferred:
        """The counts the input of the operator compiling carries, for it to carry on or
        observe (an operator extending its records, or a project a store reads)."""
        return getattr(self._visiting, "carried", ())

    def compiled(self, op_id: str | None) -> Compiled:
        """What compiling operator ``op_id`` made (:data:`NOTHING` before it is compiled)."""
        return self._compiled.get(op_id or "", NOTHING)

    def compile(self, op: Any, inputs: list[DataFrame]) -> DataFrame:
        """``op``'s DataFrame from its inputs' DataFrames."""
        if op.op in UNSUPPORTED:
            raise PlanningError(f"the Spark executor cannot run '{op.op}': {UNSUPPORTED[op.op]}")
        visit: Callable[[Any, list[DataFrame]], DataFrame | Compiled] = getattr(
            self, f"visit_{op.op}"
        )
        input_ids, inputs = op.input_ids(), list(inputs)
        found = [self.compiled(ref) for ref in input_ids]
        props = self.ctx.props(op.id)
        # An operator extending its input's records passes on the counts they carry in columns
        # (``deferred``), a fused segment excepted (its reader reads its input); any other
        # observes them over its input and drops the columns, but a project a store reads, which
        # observes them over its own output.
        takes = (traits(op.op).extends_records and not props.fused) or (
            op.op == "project" and props.store_input
        )
        deferred = any(c.deferred for c in found)
        flushes = deferred and not takes
        readings: list[PendingColumns | None] = [None] * len(input_ids)
        kept: KeyColumns = {}
        for i, c in enumerate(found):
            kept = {e: k for e, k in c.keys.items() if keeps_key(op, e)}
            dropped = [name for e, (name, _) in c.keys.items() if e not in kept]
            if c.pending is not None and (flushes or not self._reads_pending(op, c.pending)):
                inputs[i] = c.pending.over(inputs[i]).select()
            elif c.pending is not None:
                readings[i] = c.pending.over(inputs[i])
            # No longer the value of its expression, or a reader that would show it; a project
            # selects only what it writes.
            if dropped and op.op != "project":
                if readings[i] is not None:
                    readings[i] = readings[i].without(dropped)
                else:
                    inputs[i] = inputs[i].drop(*dropped)
        carried: Deferred = ()
        if deferred and takes:  # the visitor's to carry on or observe (``_carried``)
            carried = self._take_deferred(input_ids[0])
        elif flushes:
            inputs = [self.flushed(ref, df) for ref, df in zip(input_ids, inputs)]
        visiting = self._visiting
        visiting.reading = readings[0] if len(readings) == 1 else None
        visiting.sides, visiting.carried = readings, carried
        try:
            made = visit(op, list(inputs))
        finally:
            visiting.reading, visiting.sides, visiting.carried = None, [], ()
        out = made if isinstance(made, Compiled) else Compiled(made)
        self._compiled[op.id] = replace(
            out,
            keys={**kept, **out.keys} if kept else out.keys,
            ordered=traits(op.op).orders or any(c.ordered for c in found),
            sorted=out.sorted
            or (traits(op.op).keeps_partitions and bool(found) and found[0].sorted),
            deferred=carried if out.deferred is None else out.deferred,
        )
        return out.df

    def _reads_pending(self, op: Any, pending: PendingColumns) -> bool:
        """Whether ``op`` reads its input's ``pending`` columns (:class:`PendingColumns`): a
        project or a transform selects its own columns through them; a segment its aggregates
        fuse with, or an aggregate of every record, aggregates their base; a join of unrelated
        inputs joins their base where they are named apart (a scan's, see :func:`read_through`);
        a filter one operator reads filters their base and passes them on; so does an order its
        store sorts, or one a top-N limit a store's project reads runs (that limit sorts their
        base and passes them on to the project); any other order no limit reads selects them
        with its sequence, an unordered flatten with its elements (over their base exploded),
        and a store that sorts nothing without the sequence."""
        if traits(op.op).projects:
            return True
        props = self.ctx.props(op.id)
        if op.op == "segment":  # its aggregates group their base (see _SegmentInput)
            return props.fused
        if op.op == "collapsingaggregate":  # one group of every record: aggregates their base
            return op.within is None
        if op.op == "join":  # joins their bases, its sides' columns named apart
            return props.unrelated_inputs and pending.apart
        if op.op == "filter":  # keeps their base's rows that hold, passes them on
            return props.one_reader
        if op.op == "store":  # selects them without the sequence, unless it sorts by it
            return not self._store_sorts(op)
        if op.op == "flatten":  # explodes their base, numbers nothing: selects them with it
            return props.unordered
        if op.op == "limit":  # the top-N of an order that passed them on
            return self._top_n(op.input) and self.compiled(op.input).order is not None
        if op.op != "order" or op.within:
            return False
        if props.store_sorted or self._top_n(op.id):  # passes them on
            return props.one_reader
        # Selects them with its sequence (a limit would read the order's keys instead).
        return not props.read_by_limit

    def _top_n(self, op_id: str | None) -> bool:
        """Whether ``op_id`` is an order a top-N limit runs, whose records only a store's
        project reads."""
        props = self.ctx.props(op_id)
        return props.store_read_order and props.top_n

    def materialized(self, op_id: str, df: DataFrame) -> DataFrame:
        """``df``, operator ``op_id``'s DataFrame, with the select it left to its reader made
        (for a reader outside :meth:`compile`: ``explain`` showing a store's input)."""
        pending = self.compiled(op_id).pending
        return df if pending is None else pending.over(df).select()

    def _typed_read(self, expr: str | Expr, df: DataFrame) -> Typed:
        """:meth:`typed` over the pending columns of the input being read, if it has them."""
        return self._typed_over(expr, df, self._reading)

    def _typed_over(self, expr: str | Expr, df: DataFrame, pending: PendingColumns | None) -> Typed:
        """:meth:`typed` over ``df``, or over its ``pending`` columns."""
        if pending is None:
            return self.typed(expr, df)
        tree = parse_cached(expr) if isinstance(expr, str) else expr
        return compile_typed(
            tree, pending.schema, resolve=functools.partial(read_pending_field, pending)
        )

    def flushed(self, op_id: str, df: DataFrame) -> DataFrame:
        """``df``, operator ``op_id``'s DataFrame, with the counts it carries for operators
        before it observed, and their columns dropped (see :meth:`compile`)."""
        return observed(df, self._take_deferred(op_id))

    def _take_deferred(self, op_id: str | None) -> Deferred:
        """The counts ``op_id``'s DataFrame carries, for one reader to observe: its other
        readers get the columns only, to drop (an observation is attached once)."""
        found = self.compiled(op_id)
        taken = found.deferred or ()
        if taken:
            untaken = tuple((column, None) for column, _ in taken)
            self._compiled[op_id or ""] = replace(found, deferred=untaken)
        return taken

    def _passed_members(
        self,
        input_id: str | None,
        written: Sequence[Path],
        carried: Sequence[Path] | None = None,
    ) -> tuple[Member | None, ...] | None:
        """The sequence members of an operator keeping its input's sequence as it is: what they
        equal stays known unless it writes one of those record members (or, carrying only the
        paths ``carried``, does not carry one)."""
        members = self.compiled(input_id).seq_members
        if not members:
            return None
        refs: list[Expr] = [FieldRef(m) for m in members if m is not None]
        kept = (
            unwritten_keys(refs, written)
            if carried is None
            else leading_carried(refs, carried, written)
        )
        return members if len(kept) == len(refs) else None

    def _spread(
        self,
        df: DataFrame,
        input_id: str | None,
        keys: Mapping[Expr, tuple[str, T.DataType]],
        *,
        keep: Collection[str | int] = (),
        added: Mapping[str, Column] | None = None,
    ) -> Spread | None:
        """``df``, ``input_id``'s records, spread for windows (see :mod:`spread`), if its
        sequence's members are known to be members of its records, none of them a column in
        ``keep``. ``added``: key columns ``df`` does not hold yet (None unless each equals a
        member the spread takes apart)."""
        members = self.compiled(input_id).seq_members
        if not members or SEQ_COLUMN in keep or any(m[0] in keep for m in members if m):
            return None
        equal = {name: m for e, (name, _) in keys.items() if (m := member_of(e)) is not None}
        new = {name: equal.get(name) for name in added or {}}
        if any(m is None for m in new.values()):
            return None
        existing = {name: m for name, m in equal.items() if name not in new}
        return spread(df, SEQ_COLUMN, members, keys=existing, added=new)

    def _spread_window(
        self, spread_out: Spread, input_id: str | None, partition: list[Column], run: str | None
    ) -> tuple[list[Column], list[Column]]:
        """The partition and order of windows over ``spread_out``'s leaves: a segment's keys
        that are record members by their leaves (one shuffled column each), then the
        sequence's leaves (a key's leaf is the same in every row of a partition)."""
        segment = self.compiled(input_id).segment
        if run is not None or segment is None or not partition:
            return partition, [top_column(name) for name in spread_out.order]
        leaves = [spread_out.leaf(e) for e in segment.exprs]
        partition = [top_column(f) if f else p for f, p in zip(leaves, partition, strict=True)]
        return partition, [top_column(n) for n in spread_out.order if n not in leaves]

    # -- expressions -----------------------------------------------------------------------

    def column(self, expr: str | Expr, df: DataFrame) -> Column:
        """The Column of an expression (text or tree) over ``df``'s records."""
        return self.typed(expr, df).column

    def typed(self, expr: str | Expr, df: DataFrame) -> Typed:
        """The Column of an expression over ``df``'s records with its Spark type, typed by the
        compiler from ``df``'s schema (no analysis)."""
        tree = parse_cached(expr) if isinstance(expr, str) else expr
        return compile_typed(tree, df.schema)

    def column_over(self, expr: Expr, op_id: str, df: DataFrame) -> Column:
        """The Column of an expression over operator ``op_id``'s DataFrame ``df``, reading the
        columns it left pending for its reader, if it did."""
        return self._typed_over(expr, df, self.compiled(op_id).pending).column

    def field(self, name: str, df: DataFrame) -> Column:
        """The Column of the field at path ``name``."""
        return compile_expression(parse_field_ref(name), df.schema)
