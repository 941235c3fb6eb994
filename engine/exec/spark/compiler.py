"""Every logical operator compiled to native Spark DataFrame operations.

:class:`SparkCompiler` has one ``visit_<op>(op, inputs) -> DataFrame`` per logical operator; each
DataFrame holds the record's top-level fields as columns plus :data:`SEQ_COLUMN`, the record order
(see :mod:`engine.exec.spark.compiler_order`); a scanned record's struct carries a member no one
reads (see :mod:`engine.exec.spark.unread_member`). Expressions become Columns through
:func:`engine.exec.spark.columns.compile_expression`, values are written at paths with
:mod:`engine.exec.spark.paths`. The operator semantics are those of the local executor and of the
conformance corpus (CASES.md); the work per operator lives in the ``compiler_*`` modules.

Nothing here runs Python per row: no UDF, no ``mapInArrow``, no SQL text. What the run decided
about the whole plan before compiling it (which DataFrames a reader makes unnecessary) are the
planner's per-operator properties (:mod:`engine.planner.properties`); this module is still over 600 lines because the
visitors share the state of the columns they leave pending for their readers
(``SparkCompiler._pending``, ``_deferred``, ``_keys``), which has yet to become per-operator
properties the visitors return.

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

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.errors import DrillError, PlanningError
from engine.exec.spark.catalog_tables import scan_table
from engine.exec.spark.columns import compile_expression, compile_predicate, compile_typed
from engine.exec.spark.compiler_aggregate import (
    FRAME_ROWS,
    FrameSpec,
    aggregate_type,
    collapse_rows,
    running_columns,
    target_is_true,
)
from engine.exec.spark.compiler_flatten import flatten_rows
from engine.exec.spark.compiler_join import join_rows, union_rows
from engine.exec.spark.compiler_order import (
    SEQ_BITS,
    exact_type,
    lazy_order,
    limit_rows,
    order_rows,
    sequence_order,
    sort_columns,
    temp,
    top_rows,
    with_run_numbers,
)
from engine.exec.spark.compiler_window import FrameInput as _FrameInput
from engine.exec.spark.compiler_window import SegmentInput as _SegmentInput
from engine.exec.spark.compiler_window import segment_rows, windowframe_rows
from engine.exec.spark.file_ties import SharedValues, cross_file_ties
from engine.exec.spark.jdbc import jdbc_scan_dataframe
from engine.exec.spark.metrics import InputCounter, RowCounter
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.names import column as named_column
from engine.exec.spark.native_scan import CASE_LOOKUP_FILES
from engine.exec.spark.nested_filter import array_levels, filter_records
from engine.exec.spark.one_task_sort import sorted_records
from engine.exec.spark.paths import (
    PendingColumns,
    TopColumns,
    Typed,
    build_columns,
    get_in,
    get_typed,
    pending_columns,
    top_column,
    with_path,
)
from engine.exec.spark.progress import fragment_jobs
from engine.exec.spark.sources import constant_dataframe, plan_scan, scan_plan_dataframe
from engine.exec.spark.spread import Spread, spread
from engine.exec.spark.stores import store_dataframe
from engine.exec.spark.union_filter import reaches_any_variant, union_filter
from engine.expr import Expr, FieldRef, FunctionKind, field_refs, parse_field_ref
from engine.expr.rewrite import split_calls
from engine.plan.expressions import parse_cached
from engine.plan.field_paths import OUTPUT, Member, Path, member_of, output_path, writable_path
from engine.plan.field_paths import overlaps as _overlap
from engine.plan.field_paths import path_of as _path_of
from engine.plan.field_paths import under as _under
from engine.plan.operators import (
    OPERATORS,
    CollapsingAggregate,
    Constant,
    Filter,
    Flatten,
    Join,
    Limit,
    Order,
    Project,
    RunningAggregate,
    Scan,
    Segment,
    Store,
    Transform,
    Union,
    WindowFrame,
)
from engine.plan.parts import Ordering
from engine.plan.traits import traits
from engine.planner.properties.decisions import copied_paths as _copied_paths
from engine.planner.rules.filter_pushdown import Remaining
from engine.storage.catalog import CatalogEngine
from engine.storage.engines import ConsoleEngine, QueueEngine
from engine.storage.jdbc.engine import JdbcEngine

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


class SparkCompiler:
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
            kept = {e: k for e, k in keys.items() if _keeps_key(op, e)}
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
        return compile_typed(tree, pending.schema, resolve=functools.partial(_read_field, pending))

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
        kept = _unwritten(refs, written) if carried is None else _carried(refs, carried, written)
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

    # -- sources and sinks -----------------------------------------------------------------

    def visit_scan(self, op: Scan, inputs: list[DataFrame]) -> DataFrame:
        engine = self.ctx.engine(op.storage_engine)
        if isinstance(engine, CatalogEngine):
            return self._catalog_scan(op, engine)
        self._pushed[op.id] = op.pushed_filter
        if isinstance(engine, JdbcEngine):
            return self._jdbc_scan(op, engine)
        plan = plan_scan(
            engine,
            op.selection or {},
            file_columns=tuple(self.ctx.file_columns.get(op.id, ())),
            projection=op.projection,
        )
        for file in plan.resolved.files:  # a read that fails in a store's job names a scan
            for path in {str(file.path), str(file.real_path)}:
                self.ctx.scan_files.setdefault(path, set()).add(op.id)
        if op.pushed_limit is None and op.id not in self.ctx.cut_by_limit:
            self.ctx.files_read[op.id] = len(plan.resolved.files)
        if any(file.size > 0 for file in plan.resolved.files):
            self.ctx.reading_scans.add(op.id)
        tie_free = self.ctx.tie_free.get(op.id)
        if tie_free is not None and not _exact_members(plan.resolved, op.projection or ()):
            # Records that tie may differ after all (-0.0 ties 0.0): the order breaks ties by
            # this scan's order.
            self.ctx.total.discard(tie_free)
            self.ctx.unordered.discard(op.id)
        leaves_records = op.id in self.ctx.read_through and op.pushed_limit is None
        df = scan_plan_dataframe(
            self.spark,
            plan,
            op.ref,
            pushed_filter=parse_cached(op.pushed_filter) if op.pushed_filter else None,
            # The run's observation of the scan counts skipped records; a pushed limit would
            # take their counting rows for records.
            count_skipped=op.pushed_limit is None,
            ordered=op.id not in self.ctx.unordered or op.pushed_limit is not None,
            observe=self.scan_observers.get(op.id) if op.pushed_limit is None else None,
            # Spark pushes a limit into the read: its footers' rows are not what it reads.
            counted=(
                functools.partial(self.ctx.read_rows.__setitem__, op.id)
                if op.pushed_limit is None and op.id not in self.ctx.cut_by_limit
                else None
            ),
            # Named by the scan: the same names each run (Columns made once, see top_column).
            pending=f"__drill_s{op.id}_" if leaves_records else None,
            # Spark's row ids where nothing pairs the sequence and no record is built over them
            # (they are not deterministic: Spark merges no select into theirs).
            numbered=op.id in self.ctx.paired or not leaves_records,
            apart=op.id in self.ctx.paired,
            ties=self._cross_file_ties(op, engine, plan.resolved),
        )
        if isinstance(df, PendingColumns):
            self._pending[op.id] = df  # its reader reads the columns, its joins join them
            return df.base
        if op.pushed_limit is not None:
            df = limit_rows(df, 0, op.pushed_limit, seq=SEQ_COLUMN)
        return df

    def _catalog_scan(self, op: Scan, engine: CatalogEngine) -> DataFrame:
        """A scan of a catalog table (:mod:`~engine.exec.spark.catalog_tables`)."""
        self._pushed[op.id] = op.pushed_filter
        df = scan_table(self.spark, engine, op.selection, op.ref, projection=op.projection)
        if op.pushed_filter:
            df = df.where(compile_predicate(parse_cached(op.pushed_filter), df.schema))
        if op.pushed_limit is not None:
            df = limit_rows(df, 0, op.pushed_limit, seq=SEQ_COLUMN)
        return df

    def _jdbc_scan(self, op: Scan, engine: JdbcEngine) -> DataFrame:
        """A database table's scan (:mod:`engine.exec.spark.jdbc`)."""
        df = jdbc_scan_dataframe(
            self.spark,
            engine,
            op.selection or {},
            op.ref,
            seq_column=SEQ_COLUMN,
            projection=op.projection,
            pushed_filter=parse_cached(op.pushed_filter) if op.pushed_filter else None,
            observe=self.scan_observers.get(op.id) if op.pushed_limit is None else None,
        )
        self.ctx.reading_scans.add(op.id)
        if op.pushed_limit is not None:
            df = limit_rows(df, 0, op.pushed_limit, seq=SEQ_COLUMN)
        return df

    def _cross_file_ties(self, op: Scan, engine: Any, resolved: Any) -> SharedValues | None:
        """Where the rows of different files of a parquet scan that only an order reads may tie
        on its keys (:mod:`~engine.exec.spark.file_ties`), from the footers the scan's
        resolution read."""
        keys = self.ctx.ordered_by_keys.get(op.id)
        if not keys or resolved.format != "parquet" or not hasattr(engine, "footers"):
            return None
        files = [f for f in resolved.files if f.size > 0]
        if not 1 < len(files) <= CASE_LOOKUP_FILES:  # one file: nothing to look up
            return None  # more: looked up by size or path for every row (see _native_scan)
        columns = [c for c in resolved.table_columns if c.lower() in keys]
        footers = [engine.footers.read(f.real_path) for f in files]
        return cross_file_ties(columns, resolved.spark_schema, footers)

    def visit_constant(self, op: Constant, inputs: list[DataFrame]) -> DataFrame:
        return constant_dataframe(self.spark, op.content)

    def visit_store(self, op: Store, inputs: list[DataFrame]) -> DataFrame:
        (df,) = inputs
        engine = self.ctx.engine(op.storage_engine)
        sink = isinstance(engine, ConsoleEngine | QueueEngine)
        sort = self._store_sorts(op)
        if self._reading is not None:  # its input's pending columns: one select, no sequence
            df = self._reading.without([SEQ_COLUMN]).select()
        order = self._store_orders.get(op.input or "") or (lambda: sequence_order(df, SEQ_COLUMN))
        one_task = op.id in self.ctx.one_task_sorts
        ordered = sorted_records(df, order(), one_task=one_task) if sort else df
        if sink:
            ordered = nullable_everywhere(ordered)  # the records are collected through Arrow
        with fragment_jobs(self.spark, "store", op.id):
            self.ctx.store_results[op.id] = store_dataframe(
                ordered, engine, op.target, sink_records=self.ctx.sink_records
            )
        return df

    def _store_sorts(self, op: Store) -> bool:
        """Whether store ``op`` sorts its records. Sinks return the records in order. A file
        store keeps the order a plan gave its records (an `order` or `limit` upstream);
        otherwise each task writes its records as they come, as Drill's fragments do, and
        nothing is sorted."""
        engine = self.ctx.engine(op.storage_engine)
        needs_order = isinstance(engine, ConsoleEngine | QueueEngine) or op.input in self._ordered
        return needs_order and op.input not in self._sorted

    # -- record at a time ------------------------------------------------------------------

    def visit_filter(self, op: Filter, inputs: list[DataFrame]) -> DataFrame:
        (df,) = inputs
        condition = parse_cached(op.expr)
        rest = self.ctx.remaining.get(op.id)
        if rest is not None and all(self._pushed.get(i) == text for i, text in rest.scans):
            # The scan applied part of the condition: each test runs once.
            if rest.condition is None:
                self.unchanged.add(op.id)
                if self._reading is not None:
                    self._pending[op.id] = self._reading.over(df)  # for its one reader
                return df
            condition = rest.condition
        reading = self._reading
        if reading is not None:
            schema = reading.schema
            if reaches_any_variant(schema, condition) or any(
                array_levels(schema, ref.path) for ref in field_refs(condition)
            ):
                df = reading.select()  # Appendix A rewrites records: it filters them built
            else:
                read = functools.partial(_read_field, reading)
                kept = df.where(compile_predicate(condition, schema, resolve=read))
                self._pending[op.id] = reading.over(kept)  # for its one reader
                return kept
        pruned = union_filter(df, condition)
        return pruned if pruned is not None else filter_records(df, condition)

    def visit_transform(self, op: Transform, inputs: list[DataFrame]) -> DataFrame:
        (df,) = inputs
        written = [writable_path(t.ref, "transform ref") for t in op.transforms]
        self._key_order[op.id] = _unwritten(self._key_order.get(op.input or "", []), written)
        self._pass_members(op.id, op.input, written)
        # Every transform in one select (with its input's pending one); a later one reads what
        # earlier ones wrote.
        record = TopColumns(df.schema) if self._reading is None else TopColumns.of(self._reading)
        for transform in op.transforms:
            path = writable_path(transform.ref, "transform ref")
            tree = parse_cached(transform.expr)
            record.write(
                path, compile_typed(tree, df.schema, resolve=lambda r: record.read(r.path))
            )
        return record.select(df)

    def visit_project(self, op: Project, inputs: list[DataFrame]) -> DataFrame:
        (df,) = inputs
        values = [(output_path(p.ref), self._typed_read(p.expr, df)) for p in op.projections]
        columns: list[tuple[Path, Column | Typed]] = []
        for path, value in values:
            if not path and not isinstance(value.dtype, T.StructType | T.NullType):
                path = (OUTPUT,)  # a plain value cannot be the record: keep it under its ref
            columns.append((path, value))
        if op.id in self.ctx.store_inputs:
            # Counts carried this far are observed over the project's plain columns.
            self._deferred[op.id] = self._take_deferred(op.input or "")
            carried = [((c,), self._column_read(c, df)) for c, _ in self._deferred[op.id]]
            out = self.flushed(op.id, build_columns(df, [*columns, *carried]))
            del self._deferred[op.id]  # `out` carries none of them: its readers drop nothing
            # The store sorts, if it does, by the sequence of the project's input (Spark carries
            # it through the project for the sort and drops it after): no step drops it. After
            # an order that built none, by the copies of the order's keys.
            reading = self._reading

            def sequence() -> Typed:  # the input's (over the input's base, if pending)
                if reading is None:
                    return Typed(df[SEQ_COLUMN], df.schema[SEQ_COLUMN].dataType)
                return reading.read((SEQ_COLUMN,), keep_unread=True)

            store_keys = self._store_keys.get(op.input or "")
            if store_keys is not None:
                self._store_orders[op.id] = lambda: self._by_copied_keys(
                    op, sequence, out, *store_keys
                )
            else:
                self._store_orders[op.id] = lambda: self._by_sequence(op, sequence(), out)
            return out
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
        members = self._seq_members.get(op.input or "", [])
        fields = sequence.dtype.fields if isinstance(sequence.dtype, T.StructType) else []
        if not fields or len(fields) != len(members):
            return _sequence_order(sequence)
        copies = _copies(op, out)
        equal = {f.name: copies[m] for f, m in zip(fields, members) if m in copies}
        return _sequence_order(sequence, equal)

    def visit_limit(self, op: Limit, inputs: list[DataFrame]) -> DataFrame:
        (df,) = inputs
        ordered = self._orders.get(op.input or "")
        if ordered is not None and op.last is not None:
            # Top-N: sort and limit at once (Spark's TakeOrdered) instead of sorting twice.
            source, keys, tie_break, fields = ordered
            self._sorted.add(op.id)
            reading = self._reading  # the pending columns the order passed on, over `source`
            top = top_rows(
                source,
                keys,
                op.first,
                op.last,
                seq=SEQ_COLUMN,
                tie_break=tie_break,
                fields=fields,
                numbered=op.id not in self.ctx.store_read,
                sequence=None if reading is None else reading.values[SEQ_COLUMN].column,
            )
            if reading is not None:
                self._pending[op.id] = reading.over(top)  # for the store's project
            return top
        if op.first or op.last is not None:
            self._sorted.add(op.id)  # sorted by the sequence, then cut
        return limit_rows(df, op.first, op.last, seq=SEQ_COLUMN)

    def visit_flatten(self, op: Flatten, inputs: list[DataFrame]) -> DataFrame:
        (df,) = inputs
        expr = parse_cached(op.expr)
        element = temp("flatten_value")
        value = self._typed_read(expr, df)  # typed by the compiler: no analysis by Spark
        reading = self._reading  # unordered: its input's pending columns, exploded with their base
        base = df if reading is None else reading.base
        rows = flatten_rows(
            base, value, seq=SEQ_COLUMN, name=element, ordered=op.id not in self.ctx.unordered
        )
        # The record's changes in one select over the flattened rows.
        record = TopColumns(df.schema) if reading is None else TopColumns.of(reading)
        if op.drop:
            for ref in field_refs(expr):
                record.drop(tuple(ref.path))
        record.write(writable_path(op.ref, "flatten ref"), rows.element)
        if rows.sequence is None and op.id in self.ctx.one_reader:
            self._pending[op.id] = record.pending(rows.frame)  # its reader selects through them
            return rows.frame
        if rows.sequence is None:
            return record.select(rows.frame)
        record.drop((SEQ_COLUMN,))
        return record.select(rows.frame, rows.sequence.alias(SEQ_COLUMN))

    # -- order -----------------------------------------------------------------------------

    def visit_order(self, op: Order, inputs: list[DataFrame]) -> DataFrame:
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
            self._sorted.add(op.id)
            return order_rows(df, keys, seq=SEQ_COLUMN, within=self.field(op.within, df))
        # No tie-break by input order where no two records tie (the keys are unique).
        tie_break = op.id not in self.ctx.total
        self._orders[op.id] = (df, keys, tie_break, [_reads_field(o.expr) for o in op.orderings])
        self._key_order[op.id] = [parse_cached(o.expr) for o in op.orderings]
        if op.id in self.ctx.top_n_orders:
            if self._reading is not None:
                self._pending[op.id] = self._reading  # for its limit, sorting their base
            return df  # its limits sort `df` by `keys` themselves: no sequence to build
        if op.id in self.ctx.store_sorted:
            self._store_keys[op.id] = (op.orderings, tie_break)
            if self._reading is not None:
                self._pending[op.id] = self._reading  # for its one reader, its store's project
            return df  # its store sorts by its project's copies of the keys: no sequence to build
        sources: list[int | None] = []
        reading = self._reading
        if reading is not None:  # its input's pending columns and its sequence: one select
            sequence = reading.read((SEQ_COLUMN,)).column
            lazy = lazy_order(
                keys, types, seq=SEQ_COLUMN, tie_break=tie_break, sources=sources, sequence=sequence
            )
            if lazy is not None:
                self._order_members(op, sources)
                return reading.without([SEQ_COLUMN]).select(lazy.alias(SEQ_COLUMN))
            # Keys with no lazy order: their base sorted, numbered in the select (as renumber).
            by = sort_columns(keys, seq=SEQ_COLUMN, tie_break=tie_break, sequence=sequence)
            self._sorted.add(op.id)
            numbered = F.monotonically_increasing_id().alias(SEQ_COLUMN)
            return reading.over(reading.base.orderBy(*by)).without([SEQ_COLUMN]).select(numbered)
        ordered = order_rows(
            df, keys, seq=SEQ_COLUMN, types=types, tie_break=tie_break, sources=sources
        )
        if ordered.schema[SEQ_COLUMN].dataType == T.LongType():
            self._sorted.add(op.id)  # no lazy order for these keys: sorted and numbered again
        else:
            self._order_members(op, sources)
        return ordered

    def _order_members(self, op: Order, sources: Sequence[int | None]) -> None:
        """Which record member each member of ``op``'s lazy sequence equals (see :mod:`spread`)."""
        if sources:
            exprs = [parse_cached(o.expr) for o in op.orderings]
            self._seq_members[op.id] = [
                member_of(exprs[i]) if i is not None else None for i in sources
            ]

    def visit_segment(self, op: Segment, inputs: list[DataFrame]) -> DataFrame:
        (df,) = inputs
        ref = writable_path(op.ref, "segment ref")
        exprs = tuple(parse_cached(text) for text in op.exprs)
        known = self._keys.get(op.input or "", {})
        keys = [F.col(known[e][0]) if e in known else self._typed_read(e, df).column for e in exprs]
        reading = self._reading  # its aggregates group their base (fused)
        self._segments[op.id] = _SegmentInput(df, keys, ref, exprs, op.input or "", reading)
        grouped = self._in_key_order(op.input, exprs)
        leading = self._key_order.get(op.input or "", []) if grouped else list(exprs)
        self._key_order[op.id] = _unwritten(leading, [ref])
        if op.id in self.ctx.fused or (op.id in self.ctx.unnumbered and grouped):
            self._pass_members(op.id, op.input, [])
            return df  # its readers group `df` by `keys` themselves: no numbers to build
        number = temp("segment_number")
        df = segment_rows(df, keys, seq=SEQ_COLUMN, name=number, grouped=grouped)
        return with_path(df, ref, Typed(F.col(number), T.LongType())).drop(number)

    def _in_key_order(self, input_id: str | None, exprs: Sequence[Expr]) -> bool:
        """Whether ``input_id``'s records are grouped by ``exprs`` (in any order): its equal keys
        are adjacent, in order of first appearance."""
        leading = self._key_order.get(input_id or "", [])[: len(exprs)]
        return len(leading) == len(exprs) and all(e in leading for e in exprs)

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
        segment = self._segments.get(input_id or "")
        if segment is not None and segment.ref == path and not segment.writes_over_keys():
            known = self._keys.get(input_id or "", {}).items()
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
            return df, [F.col(keys[e][0]) for e in segment.exprs], None, keys, spread_out
        run = temp("run")
        df = with_run_numbers(df, self.field(within, df), seq=SEQ_COLUMN, name=run)
        return df, [F.col(run)], run, {}, self._spread(df, input_id, {}, keep=keep)

    def visit_windowframe(self, op: WindowFrame, inputs: list[DataFrame]) -> DataFrame:
        (df,) = inputs
        # For a segment + collapsingaggregate that collapses these windows again.
        self._frames[op.id] = _FrameInput(op, df, op.input)
        if op.id in self.ctx.fused:
            return df  # its reader aggregates over each record's frame of `df`: no members
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
            df, writable_path(op.segment_ref, "windowframe ref"), Typed(F.col(segment), long)
        )
        df = with_path(
            df, writable_path(op.position_ref, "windowframe ref"), Typed(F.col(position), long)
        )
        return df.drop(segment, position)

    # -- aggregates ------------------------------------------------------------------------

    def visit_collapsingaggregate(
        self, op: CollapsingAggregate, inputs: list[DataFrame]
    ) -> DataFrame:
        (df,) = inputs
        segment = self._segments.get(op.input or "")
        group_by = None
        frame = None
        carried_keys: dict[int, int] = {}
        counter = self.input_counters.get(op.id, InputCounter)()
        count_input, mark_input = counter.observe, counter.mark
        frame_rows = False
        spread_out: Spread | None = None
        reading = self._reading  # the input's records, if left to this aggregate
        windows = self._frames.get(segment.input_id) if segment is not None else None
        if segment is not None and windows is not None and windows.fuses_with(segment, op):
            # The first aggregate over the windows counts them (an observation is used once).
            count_input, mark_input = self.frame_counters.pop(windows.op.id, None), None
            if count_input is not None and op.id in self.ctx.frame_passes.values():
                # One record per record: the frame rows ride on, to be observed where no
                # record is left whole (an observation there would keep Spark from pruning it).
                self._deferred[op.id] = [(FRAME_ROWS, count_input)]
                count_input, frame_rows = None, True
            # Collapsing each window of a windowframe again: aggregates over each record's frame.
            df, partition, run, keys, spread_out = self._runs(
                windows.input_id, windows.op.within, windows.input
            )
            order = [F.col(SEQ_COLUMN)]
            if spread_out is not None:
                df = spread_out.frame
                partition, order = self._spread_window(spread_out, windows.input_id, partition, run)
            spec = (Window.partitionBy(*partition) if partition else Window).orderBy(*order)
            frame = FrameSpec(spec, windows.op.start, windows.op.end)
            if windows.op.end == 0 and not op.target:
                # One record per record, in its order, carrying the record's own values.
                carried_paths = [writable_path(name, "carryover") for name in op.carryovers]
                written = [writable_path(a.ref, "aggregation ref") for a in op.aggregations]
                self._key_order[op.id] = _carried(
                    self._key_order.get(windows.input_id or "", []), carried_paths, written
                )
                valid = _carried(list(keys), carried_paths, written)
                self._keys[op.id] = {e: keys[e] for e in valid}
                self._pass_members(op.id, windows.input_id, written, carried=carried_paths)
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
            ordered=op.id not in self.ctx.unordered,
            kept=[name for name, _ in self._keys.get(op.id, {}).values()],
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
                group_by is not None and op.id in self.ctx.unordered
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
            *self._keys.get(op.id, {}).values(),
            *([(FRAME_ROWS, T.LongType())] if frame_rows else []),
        ]
        columns += [((n,), Typed(collapsed.columns[n], t)) for n, t in kept]
        records = pending_columns(collapsed.frame, [*columns, ((SEQ_COLUMN,), output(SEQ_COLUMN))])
        if op.id not in self.ctx.one_reader:
            return records.select()
        # Its one reader selects its own columns through these, or selects them first.
        self._pending[op.id] = records
        return collapsed.frame

    def visit_runningaggregate(self, op: RunningAggregate, inputs: list[DataFrame]) -> DataFrame:
        (df,) = inputs
        written = [writable_path(a.ref, "aggregation ref") for a in op.aggregations]
        # Not where an aggregation writes into a record or the sequence the spread takes apart.
        roots = {path[0] for path in written}
        df, partition, run, keys, spread_out = self._runs(op.input, op.within, df, keep=roots)
        self._keys[op.id] = {e: keys[e] for e in _unwritten(list(keys), written)}
        self._pass_members(op.id, op.input, written)
        order = [F.col(SEQ_COLUMN)]
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
            return df.drop(run) if run else df
        # Counts the rows carry (see compile) are observed here, over the leaves, and
        # the rebuild leaves their columns out, with the run numbers: no step drops them.
        counts = self._deferred.pop(op.id, [])
        for column, counter in counts:
            df = df if counter is None else counter(df, column)
        rebuilt = spread_out.pending(df, without=[*(c for c, _ in counts), *([run] if run else [])])
        if op.id not in self.ctx.one_reader:
            return rebuilt.select()
        self._pending[op.id] = rebuilt  # its one reader selects through the rebuilt columns
        return df

    # -- several inputs --------------------------------------------------------------------

    def visit_union(self, op: Union, inputs: list[DataFrame]) -> DataFrame:
        ordered = op.id not in self.ctx.unordered
        return union_rows(inputs, distinct=op.distinct, seq=SEQ_COLUMN, ordered=ordered)

    def visit_join(self, op: Join, inputs: list[DataFrame]) -> DataFrame:
        left, right = inputs
        sides = (self._sides[0], self._sides[1]) if self._sides else (None, None)
        typed_l = [self._typed_over(c.left, left, sides[0]) for c in op.conditions]
        typed_r = [self._typed_over(c.right, right, sides[1]) for c in op.conditions]
        conditions = []
        for condition, tl, tr in zip(op.conditions, typed_l, typed_r, strict=True):
            value_l, value_r, type_l, type_r = tl.column, tr.column, tl.dtype, tr.dtype
            if not comparable(type_l, type_r, condition.relationship):
                # Values that cannot be compared never match (and null never matches).
                value_l, value_r = F.lit(None).cast("long"), F.lit(None).cast("long")
            conditions.append((value_l, condition.relationship, value_r))
        # The physical plan's broadcast-hash-join: the small side is shipped to every task.
        build = self.ctx.broadcast.get(op.id)
        if build == "left":
            left = F.broadcast(left)
        elif build == "right":
            right = F.broadcast(right)
        ordered = op.id not in self.ctx.unordered
        related = op.id not in self.ctx.unrelated
        joined = join_rows(
            left,
            right,
            conditions,
            how=op.type,
            seq=SEQ_COLUMN,
            ordered=ordered,
            related=related,
            pending=op.id in self.ctx.one_reader,
            sides=sides,
        )
        if isinstance(joined, PendingColumns):
            self._pending[op.id] = joined  # its one reader selects through the joined records
            return joined.base
        return joined


def _bits_of(pending: PendingColumns | None) -> dict[str, int]:
    """The metadata of a pending sequence column (its width, where known)."""
    if pending is None or pending.seq_bits is None:
        return {}
    return {SEQ_BITS: pending.seq_bits}


def _read_field(pending: PendingColumns, ref: FieldRef) -> Typed:
    """A field read through pending columns (a ``compile_typed`` resolver)."""
    return pending.read(ref.path)


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


def _keeps_key(op: Any, expr: Expr) -> bool:
    """Whether ``op``'s output keeps ``expr``'s value of its input in the same column."""
    if not traits(op.op).extends_records:
        return False
    if isinstance(op, Transform):
        written = [writable_path(t.ref, "transform ref") for t in op.transforms]
    elif isinstance(op, Segment):
        written = [writable_path(op.ref, "segment ref")]
    else:
        written = [writable_path(a.ref, "aggregation ref") for a in op.aggregations]
    return bool(_unwritten([expr], written))


def _exact_members(resolved: Any, members: Sequence[str]) -> bool:
    """Whether every one of a scan's ``members`` has a type whose values tie in a sort only
    when equal (:func:`~engine.exec.spark.compiler_order.exact_type`); implicit columns are
    strings."""
    types = {f.name.lower(): f.dataType for f in resolved.spark_schema.fields}
    implicit = {name.lower() for name in resolved.implicit}
    for member in members:
        dtype = types.get(member.lower())
        if dtype is None and member.lower() not in implicit:
            return False
        if dtype is not None and not exact_type(dtype):
            return False
    return True


def _reads_field(text: str) -> bool:
    """Whether an expression reads a column or a record's member by name, and nothing else.

    >>> _reads_field("l.l_orderkey"), _reads_field("revenue"), _reads_field("a.b + 1")
    (True, True, False)
    """
    tree = parse_cached(text)
    return isinstance(tree, FieldRef) and all(isinstance(p, str) for p in tree.path)


def _unwritten(leading: Sequence[Expr], written: Sequence[Path]) -> list[Expr]:
    """The leading keys before the first that reads a path in ``written``."""
    kept: list[Expr] = []
    for expr in leading:
        if any(_overlap(_path_of(r), w) for r in field_refs(expr) for w in written):
            break
        kept.append(expr)
    return kept


def _carried(
    leading: Sequence[Expr], carried: Sequence[Path], written: Sequence[Path]
) -> list[Expr]:
    """The leading keys before the first that reads a path outside ``carried`` (a record's values
    carried over as they are) or in ``written``."""
    kept: list[Expr] = []
    for expr in _unwritten(leading, written):
        refs = field_refs(expr)
        if not refs or not all(any(_under(_path_of(r), c) for c in carried) for r in refs):
            break
        kept.append(expr)
    return kept


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


def nullable_everywhere(df: DataFrame) -> DataFrame:
    """``df`` with every nested field nullable, as Arrow needs it for a null map whose members
    Spark calls non-nullable (an unmatched join side, a member missing from a union input)."""
    return df.select(
        *[
            named_column(f.name).cast(_nullable(f.dataType)).alias(f.name)
            if _nullable(f.dataType) != f.dataType
            else named_column(f.name)
            for f in df.schema.fields
        ]
    )


def _nullable(dtype: T.DataType) -> T.DataType:
    if isinstance(dtype, T.StructType):
        return T.StructType(
            [T.StructField(f.name, _nullable(f.dataType), True) for f in dtype.fields]
        )
    if isinstance(dtype, T.ArrayType):
        return T.ArrayType(_nullable(dtype.elementType), True)
    if isinstance(dtype, T.MapType):
        return T.MapType(dtype.keyType, _nullable(dtype.valueType), True)
    return dtype


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
