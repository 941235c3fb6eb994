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
per-operator properties (:mod:`engine.planner.properties`), copied into :class:`SparkRunContext`.
The visitors live by operator family in the ``compiler_visit_*`` modules, mixed into
:class:`SparkCompiler`; this module holds what they share: the columns an operator leaves
pending for its one reader (``_pending``), the row counts carried in columns (``_deferred``) and
the sort keys an output keeps (``_keys``), state that has yet to become what each visitor
returns.

>>> sorted(set(OPERATORS) - set(UNSUPPORTED)) == sorted(supported_operators())
True
>>> UNSUPPORTED
{}
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import types as T

from engine.errors import PlanningError
from engine.exec.spark.columns import compile_expression, compile_typed
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
from engine.exec.spark.compiler_window import FrameInput as _FrameInput
from engine.exec.spark.compiler_window import SegmentInput as _SegmentInput
from engine.exec.spark.metrics import InputCounter, RowCounter
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.paths import (
    PendingColumns,
    Typed,
    top_column,
)
from engine.exec.spark.spread import Spread, spread
from engine.expr import Expr, FieldRef, parse_field_ref
from engine.plan.expressions import parse_cached
from engine.plan.field_paths import Member, Path, member_of
from engine.plan.operators import (
    OPERATORS,
)
from engine.plan.parts import Ordering
from engine.plan.traits import traits
from engine.planner.rules.filter_pushdown import Remaining

UNSUPPORTED: dict[str, str] = {}
"""Logical operators the Spark executor cannot run, with the reason (none today)."""


@dataclass
class SparkRunContext:
    """What the operators of one Spark run share: storage engines, parameters and results."""

    engines: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    file_columns: dict[str, Sequence[str]] = field(default_factory=dict)  # scan id -> names
    broadcast: dict[str, str] = field(default_factory=dict)  # join id -> "left" | "right"
    store_results: dict[str, Any] = field(default_factory=dict)  # store id -> StoreResult
    scan_files: dict[str, set[str]] = field(default_factory=dict)  # file path -> ids of its scans
    # scan id -> the files it reads, where Spark reads them all (no limit reads the scan)
    files_read: dict[str, int] = field(default_factory=dict)
    # scans that read some file's bytes: Spark reads them, no local rows (see row_markers)
    reading_scans: set[str] = field(default_factory=set)
    sink_records: list[Any] = field(default_factory=list)  # queue/console records, in order
    # filter id -> what its scan's pushed filter left it to test (planner's remaining_conditions)
    remaining: dict[str, Remaining] = field(default_factory=dict)
    unordered: set[str] = field(default_factory=set)  # operators whose order nothing observes
    total: set[str] = field(default_factory=set)  # orders under which no two records tie
    # scan id -> the order reading it whose ties are equal records (planner property ``tie_free_order``)
    tie_free: dict[str, str] = field(default_factory=dict)
    # scan id -> the keys of the one order reading it (planner property ``ordered_by_keys``)
    ordered_by_keys: dict[str, frozenset[str]] = field(default_factory=dict)
    # operators whose rows a `limit` cuts short, so Spark reads only part of them (but an order
    # a top-N reads: it sorts every record of its input; see planner property ``cut_by_limit``)
    cut_by_limit: set[str] = field(default_factory=set)
    read_by_limit: set[str] = field(default_factory=set)  # operators any `limit` reads
    # scan id -> the rows it reads, from its parquet footers (a whole read: no filter, no limit)
    read_rows: dict[str, int] = field(default_factory=dict)
    # segments and windowframes whose own DataFrame no reader uses (:func:`fused_operators`)
    fused: set[str] = field(default_factory=set)
    # segments whose group numbers nothing reads (:func:`unnumbered_segments`)
    unnumbered: set[str] = field(default_factory=set)
    # fused windowframe id -> the aggregate giving a record per record of its input
    frame_passes: dict[str, str] = field(default_factory=dict)
    # joins whose inputs share no operator upstream (planner property ``unrelated_inputs``)
    unrelated: set[str] = field(default_factory=set)
    # projects whose one reader is a store (:func:`store_inputs`)
    store_inputs: set[str] = field(default_factory=set)
    # orders only top-N limits read (:func:`top_n_orders`)
    top_n_orders: set[str] = field(default_factory=set)
    # orders a store sorts by its project's copies of their keys (:func:`store_sorted_orders`)
    store_sorted: set[str] = field(default_factory=set)
    # limits whose records only a store's project reads (:func:`store_read_limits`)
    store_read: set[str] = field(default_factory=set)
    # operators one operator reads, whose last select may wait for it (:func:`one_reader`)
    one_reader: set[str] = field(default_factory=set)
    # orders whose one reader is such a limit (:func:`store_read_orders`)
    store_read_orders: set[str] = field(default_factory=set)
    # scans whose records their readers read as plain columns (:func:`read_through`)
    read_through: set[str] = field(default_factory=set)
    # scans whose sequence a join or a union pairs with another's (:func:`paired_scans`)
    paired: set[str] = field(default_factory=set)
    # stores that sort their records in one task (:func:`~.one_task_sort.one_task_sorts`)
    one_task_sorts: set[str] = field(default_factory=set)

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
    and returns ``op``'s DataFrame; a store writes its input and returns it.
    """

    def __init__(self, spark: Any, ctx: SparkRunContext) -> None:
        self.spark = spark
        self.ctx = ctx
        # What a consumer may fuse with: a segment's input and keys, an order's input and keys,
        # a windowframe's input and frame.
        self._segments: dict[str, _SegmentInput] = {}
        # order id -> its input, keys, whether ties break by input order, which keys read fields
        self._orders: dict[
            str, tuple[DataFrame, list[tuple[Column, str, str]], bool, list[bool]]
        ] = {}
        # The expressions an operator's records are grouped by, in sequence order (equal values
        # adjacent, in order of first appearance), most significant first.
        self._key_order: dict[str, list[Expr]] = {}
        # Keys of a window's partition kept as top-level columns (expression -> name, type), so
        # that later windows partition by the same attribute and Spark reuses the shuffle.
        self._keys: dict[str, dict[Expr, tuple[str, T.DataType]]] = {}
        self._key_names = itertools.count()
        self._frames: dict[str, _FrameInput] = {}
        # project id (ctx.store_inputs) -> the sort columns of its input's sequence
        self._store_orders: dict[str, Callable[[], list[Column]]] = {}
        # order id (ctx.store_sorted) -> its orderings, and whether ties keep the input order
        self._store_keys: dict[str, tuple[Sequence[Ordering], bool]] = {}
        # Operators below an `order` or `limit` (their stores keep the order), and operators whose
        # DataFrame is already in sequence order partition by partition (nothing to sort).
        self._ordered: set[str] = set()
        self._sorted: set[str] = set()
        # The pushed filter each scan applied, and the filters that had nothing left to test.
        self._pushed: dict[str, str | None] = {}
        self.unchanged: set[str] = set()
        # scan id -> what counts its rows as they are read (the run's observation of the scan)
        self.scan_observers: dict[str, Callable[[DataFrame], DataFrame]] = {}
        # collapsingaggregate id -> how it counts the rows of the operator it counts (another
        # op's), asked as it compiles (a marker needs its scans compiled)
        self.input_counters: dict[str, Callable[[], InputCounter]] = {}
        # fused windowframe id -> what observes its rows, summed over its aggregate's frames
        self.frame_counters: dict[str, RowCounter] = {}
        # op id -> counts its DataFrame carries in a column, observed further on (flushed);
        # None once a reader took the count, the column still to drop for the others
        self._deferred: dict[str, list[tuple[str, RowCounter | None]]] = {}
        # op id -> the record member each member of its sequence struct equals (see spread)
        self._seq_members: dict[str, list[Member | None]] = {}
        # op id -> its records' select, left to its one reader (its DataFrame is their base)
        self._pending: dict[str, PendingColumns] = {}
        self._reading: PendingColumns | None = None  # the pending input of the op compiling
        self._sides: list[PendingColumns | None] = []  # each input's, for a join

    def compile(self, op: Any, inputs: list[DataFrame]) -> DataFrame:
        """``op``'s DataFrame from its inputs' DataFrames."""
        if op.op in UNSUPPORTED:
            raise PlanningError(f"the Spark executor cannot run '{op.op}': {UNSUPPORTED[op.op]}")
        visit: Callable[[Any, list[DataFrame]], DataFrame] = getattr(self, f"visit_{op.op}")
        input_ids = op.input_ids()
        # An operator extending its input's records passes on the counts they carry in columns
        # (``_deferred``), a fused segment excepted (its reader reads its input); any other
        # observes them over its input and drops the columns, but a project a store reads, which
        # observes them over its own output.
        carries = traits(op.op).extends_records and op.id not in self.ctx.fused
        flushes = any(ref in self._deferred for ref in input_ids) and not (
            carries or (op.op == "project" and op.id in self.ctx.store_inputs)
        )
        # Kept for a reader compiled again (a Dagster op retried).
        pending = {ref: self._pending[ref] for ref in input_ids if ref in self._pending}
        for i, ref in enumerate(input_ids):
            if ref in pending and (flushes or not self._reads_pending(op, pending[ref])):
                inputs = [*inputs[:i], pending.pop(ref).over(inputs[i]).select(), *inputs[i + 1 :]]
        kept: dict[Expr, tuple[str, T.DataType]] = {}
        readings: list[PendingColumns | None] = [None] * len(input_ids)
        for i, ref in enumerate(input_ids):
            keys = self._keys.get(ref, {})
            kept = {e: k for e, k in keys.items() if keeps_key(op, e)}
            dropped = [name for e, (name, _) in keys.items() if e not in kept]
            # No longer the value of its expression, or a reader that would show it; a project
            # selects only what it writes.
            if ref in pending:
                readings[i] = pending[ref].over(inputs[i])
                if dropped and op.op != "project":
                    readings[i] = readings[i].without(dropped)
            elif dropped and op.op != "project":
                inputs = [*inputs[:i], inputs[i].drop(*dropped), *inputs[i + 1 :]]
        if any(ref in self._deferred for ref in input_ids):
            if carries:
                self._deferred[op.id] = self._take_deferred(input_ids[0])
            elif flushes:
                inputs = [self.flushed(ref, df) for ref, df in zip(input_ids, inputs)]
        self._reading = readings[0] if len(readings) == 1 else None
        self._sides = readings
        try:
            frame = visit(op, inputs)
        finally:
            self._reading, self._sides = None, []
        if kept:
            self._keys[op.id] = {**kept, **self._keys.get(op.id, {})}
        if traits(op.op).orders or any(i in self._ordered for i in input_ids):
            self._ordered.add(op.id)
        if traits(op.op).keeps_partitions and input_ids and input_ids[0] in self._sorted:
            self._sorted.add(op.id)
        return frame

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
        if op.op == "segment":  # its aggregates group their base (see _SegmentInput)
            return op.id in self.ctx.fused
        if op.op == "collapsingaggregate":  # one group of every record: aggregates their base
            return op.within is None
        if op.op == "join":  # joins their bases, its sides' columns named apart
            return op.id in self.ctx.unrelated and pending.apart
        if op.op == "filter":  # keeps their base's rows that hold, passes them on
            return op.id in self.ctx.one_reader
        if op.op == "store":  # selects them without the sequence, unless it sorts by it
            return not self._store_sorts(op)
        if op.op == "flatten":  # explodes their base, numbers nothing: selects them with it
            return op.id in self.ctx.unordered
        top_n = self.ctx.store_read_orders & self.ctx.top_n_orders
        if op.op == "limit":  # the top-N of an order that passed them on
            return op.input in top_n and op.input in self._orders
        if op.op != "order" or op.within:
            return False
        if op.id in self.ctx.store_sorted or op.id in top_n:  # passes them on
            return op.id in self.ctx.one_reader
        # Selects them with its sequence (a limit would read the order's keys instead).
        return op.id not in self.ctx.read_by_limit

    def materialized(self, op_id: str, df: DataFrame) -> DataFrame:
        """``df``, operator ``op_id``'s DataFrame, with the select it left to its reader made
        (for a reader outside :meth:`compile`: ``explain`` showing a store's input)."""
        pending = self._pending.get(op_id)
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
        for column, counter in self._take_deferred(op_id):
            df = (df if counter is None else counter(df, column)).drop(column)
        return df

    def _take_deferred(self, op_id: str) -> list[tuple[str, RowCounter | None]]:
        """The counts ``op_id``'s DataFrame carries, for one reader to observe: its other
        readers get the columns only, to drop (an observation is attached once)."""
        taken = self._deferred.get(op_id, [])
        if taken:
            self._deferred[op_id] = [(column, None) for column, _ in taken]
        return taken

    def _pass_members(
        self,
        op_id: str,
        input_id: str | None,
        written: Sequence[Path],
        carried: Sequence[Path] | None = None,
    ) -> None:
        """``op_id`` keeps its input's sequence as it is: what its members equal stays known
        unless ``op_id`` writes one of those record members (or, carrying only the paths
        ``carried``, does not carry one)."""
        members = self._seq_members.get(input_id or "")
        if not members:
            return
        refs: list[Expr] = [FieldRef(m) for m in members if m is not None]
        kept = (
            unwritten_keys(refs, written)
            if carried is None
            else leading_carried(refs, carried, written)
        )
        if len(kept) == len(refs):
            self._seq_members[op_id] = members

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
        members = self._seq_members.get(input_id or "")
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
        segment = self._segments.get(input_id or "")
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
        return self._typed_over(expr, df, self._pending.get(op_id)).column

    def field(self, name: str, df: DataFrame) -> Column:
        """The Column of the field at path ``name``."""
        return compile_expression(parse_field_ref(name), df.schema)
