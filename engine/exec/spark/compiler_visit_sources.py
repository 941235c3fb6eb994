"""The Spark compiler's visitors of sources and sinks: ``scan``, ``constant`` and ``store``."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from engine.exec.spark.catalog_tables import scan_table
from engine.exec.spark.columns import compile_condition
from engine.exec.spark.compiled import Compiled
from engine.exec.spark.compiler_order import (
    exact_type,
    limit_rows,
    sequence_order,
)
from engine.exec.spark.file_ties import SharedValues, cross_file_ties
from engine.exec.spark.jdbc import jdbc_scan_dataframe
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.names import column as named_column
from engine.exec.spark.native_scan import CASE_LOOKUP_FILES
from engine.exec.spark.one_task_sort import sorted_records
from engine.exec.spark.paths import (
    PendingColumns,
)
from engine.exec.spark.progress import fragment_jobs
from engine.exec.spark.sources import constant_dataframe, plan_scan, scan_plan_dataframe
from engine.exec.spark.stores import store_dataframe
from engine.plan.expressions import parse_cached
from engine.plan.operators import (
    Constant,
    Scan,
    Store,
)
from engine.storage.catalog import CatalogEngine
from engine.storage.engines import ConsoleEngine, QueueEngine
from engine.storage.jdbc.engine import JdbcEngine


class SourceVisitors:
    """The visitors of ``scan``, ``constant`` and ``store``.
    Mixed into :class:`~engine.exec.spark.compiler.SparkCompiler`: its visitors read their
    operator's properties (``ctx``) and what compiling their inputs made (``compiled``), and
    write what the run finds out (files read, what a store wrote) in ``findings``."""

    # -- sources and sinks -----------------------------------------------------------------

    def visit_scan(self, op: Scan, inputs: list[DataFrame]) -> DataFrame | Compiled:
        engine = self.ctx.engine(op.storage_engine)
        if isinstance(engine, CatalogEngine):
            return self._catalog_scan(op, engine)
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
                self.findings.scan_files.setdefault(path, set()).add(op.id)
        props = self.ctx.props(op.id)
        if op.pushed_limit is None and not props.cut_by_limit:
            self.findings.files_read[op.id] = len(plan.resolved.files)
        if any(file.size > 0 for file in plan.resolved.files):
            self.findings.reading_scans.add(op.id)
        # Records that tie may differ after all (-0.0 ties 0.0): the order breaks ties by this
        # scan's order.
        ties_differ = props.tie_free_order is not None and not _exact_members(
            plan.resolved, op.projection or ()
        )
        leaves_records = props.read_through and op.pushed_limit is None
        df = scan_plan_dataframe(
            self.spark,
            plan,
            op.ref,
            pushed_filter=parse_cached(op.pushed_filter) if op.pushed_filter else None,
            # The run's observation of the scan counts skipped records; a pushed limit would
            # take their counting rows for records.
            count_skipped=op.pushed_limit is None,
            ordered=not props.unordered or ties_differ or op.pushed_limit is not None,
            observe=self.counting.scans.get(op.id) if op.pushed_limit is None else None,
            # Spark pushes a limit into the read: its footers' rows are not what it reads.
            counted=(
                functools.partial(self.findings.read_rows.__setitem__, op.id)
                if op.pushed_limit is None and not props.cut_by_limit
                else None
            ),
            # Named by the scan: the same names each run (Columns made once, see top_column).
            pending=f"__drill_s{op.id}_" if leaves_records else None,
            # Spark's row ids where nothing pairs the sequence and no record is built over them
            # (they are not deterministic: Spark merges no select into theirs).
            numbered=props.paired or not leaves_records,
            apart=props.paired,
            ties=self._cross_file_ties(op, engine, plan.resolved),
        )
        if isinstance(df, PendingColumns):
            # its reader reads the columns, its joins join them
            return Compiled(df.base, pending=df, ties_differ=ties_differ)
        if op.pushed_limit is not None:
            df = limit_rows(df, 0, op.pushed_limit, seq=SEQ_COLUMN)
        return Compiled(df, ties_differ=ties_differ)

    def _catalog_scan(self, op: Scan, engine: CatalogEngine) -> DataFrame:
        """A scan of a catalog table (:mod:`~engine.exec.spark.catalog_tables`)."""
        df = scan_table(self.spark, engine, op.selection, op.ref, projection=op.projection)
        if op.pushed_filter:
            df = df.where(compile_condition(parse_cached(op.pushed_filter), df.schema))
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
            observe=self.counting.scans.get(op.id) if op.pushed_limit is None else None,
        )
        self.findings.reading_scans.add(op.id)
        if op.pushed_limit is not None:
            df = limit_rows(df, 0, op.pushed_limit, seq=SEQ_COLUMN)
        return df

    def _cross_file_ties(self, op: Scan, engine: Any, resolved: Any) -> SharedValues | None:
        """Where the rows of different files of a parquet scan that only an order reads may tie
        on its keys (:mod:`~engine.exec.spark.file_ties`), from the footers the scan's
        resolution read."""
        keys = self.ctx.props(op.id).ordered_by_keys
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
        order = self.compiled(op.input).store_order or (lambda: sequence_order(df, SEQ_COLUMN))
        one_task = self.ctx.props(op.id).one_task_sort
        ordered = sorted_records(df, order(), one_task=one_task) if sort else df
        if sink:
            ordered = nullable_everywhere(ordered)  # the records are collected through Arrow
        with fragment_jobs(self.spark, "store", op.id):
            self.findings.store_results[op.id] = store_dataframe(
                ordered, engine, op.target, sink_records=self.findings.sink_records
            )
        return df

    def _store_sorts(self, op: Store) -> bool:
        """Whether store ``op`` sorts its records. Sinks return the records in order. A file
        store keeps the order a plan gave its records (an `order` or `limit` upstream);
        otherwise each task writes its records as they come, as Drill's fragments do, and
        nothing is sorted."""
        engine = self.ctx.engine(op.storage_engine)
        read = self.compiled(op.input)
        needs_order = isinstance(engine, ConsoleEngine | QueueEngine) or read.ordered
        return needs_order and not read.sorted


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
