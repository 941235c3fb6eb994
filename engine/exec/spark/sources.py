"""Sources on Spark: scan and constant as DataFrames.

**Scan** (:func:`scan_dataframe`): the driver settles the scan's schema with the scan schema tracker
(:func:`~engine.exec.spark.scan_resolution.resolve_scan`), then one of two readers runs:

* *Spark's own reader* where its semantics equal Drill's for these files
  (:func:`~engine.exec.spark.native_scan.native_blocker` says where not): parquet always; JSON
  lines (every file's first line is one complete object) and CSV with a header when no provided
  schema converts values and bad records fail (not ``onError: skip``). One read covers every
  file; each row finds its file's implicit values (``dirN``, ``filename``, ...) and order by the
  file Spark reports for it (:mod:`engine.exec.spark.native_scan`).
* *The Drill data source* (:mod:`engine.exec.spark.datasource`) everywhere else: Drill's
  concatenated pretty-printed JSON, ``onError: skip``, provided schemas, Drill's ``columns`` mode.

Both give identical rows and the same Spark schema. The result has one struct column named after
the scan's ``ref`` holding the record (the columns themselves when ``ref`` is None) and
:data:`~engine.exec.spark.names.SEQ_COLUMN`, a long that orders rows as the local executor reads
them (file order, then file position). The record's struct carries one more member, never read,
so that Spark carries only the members a plan reads (:mod:`engine.exec.spark.unread_member`); a
store drops it (:mod:`engine.exec.spark.stores`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BooleanType,
    LongType,
    StructField,
    StructType,
)

from engine.errors import PlanningError
from engine.exec.local.sources import records_to_batch
from engine.exec.spark.columns import compile_condition
from engine.exec.spark.constant_columns import lit, lit_as
from engine.exec.spark.datasource import SKIPPED_COLUMN, register_data_source
from engine.exec.spark.file_ties import SharedValues
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.native_scan import column, native_blocker, native_scan_dataframe
from engine.exec.spark.paths import PendingColumns, Typed, record_value
from engine.exec.spark.scan_request import DATA_SOURCE_NAME, SchemaSampling
from engine.exec.spark.scan_resolution import ResolvedScan, resolve_scan
from engine.exec.spark.spark_types import conform_batch, nullable_type, spark_schema_of
from engine.exec.spark.unions import (
    has_variant,
    revive,
    storage_schema,
)
from engine.exec.spark.unread_member import UNREAD, with_unread, with_unread_type
from engine.expr import Call, Cast, Expr, FieldRef, IfElse, field_refs
from engine.scan.framework import DEFAULT_BATCH_ROWS
from engine.types import from_arrow_field

ReaderChoice = Literal["auto", "spark", "drill"]

_RECORD = "__drill_record"

# ---------------------------------------------------------------- scan


@dataclass(frozen=True)
class ScanPlan:
    """How a scan runs on Spark: its resolved schema and files, the reader, and why.

    ``reader`` is ``spark-parquet``, ``spark-json``, ``spark-csv`` or ``drill`` (the data source).
    """

    resolved: ResolvedScan
    reader: str
    reason: str

    @property
    def is_native(self) -> bool:
        return self.reader != "drill"


def plan_scan(
    engine: Any,
    selection: Mapping[str, Any],
    *,
    file_columns: Sequence[str] = (),
    sampling: SchemaSampling | None = None,
    reader: ReaderChoice = "auto",
    batch_rows: int = DEFAULT_BATCH_ROWS,
    projection: Sequence[str] | None = None,
) -> ScanPlan:
    """Resolve a scan on the driver and choose its reader (``reader`` forces one: a forced
    ``spark`` reader that would change the results is a :class:`PlanningError`).
    ``projection``: the paths of the record the plan uses (None: all of it)."""
    resolved = resolve_scan(
        engine,
        selection,
        file_columns=file_columns,
        sampling=sampling,
        batch_rows=batch_rows,
        projection=projection,
    )
    blocker = native_blocker(resolved)
    native = f"spark-{'csv' if resolved.format == 'text' else resolved.format}"
    if reader == "drill":
        return ScanPlan(resolved, "drill", "the Drill reader was asked for")
    if blocker is None:
        return ScanPlan(resolved, native, "Spark's reader has Drill's semantics for these files")
    if reader == "spark":
        raise PlanningError(
            f"Spark's own reader cannot read selection {dict(selection)!r} as Drill does: "
            f"{blocker}",
            hint="leave the reader choice to the planner (reader='auto')",
        )
    return ScanPlan(resolved, "drill", blocker)


def scan_dataframe(
    spark: Any,
    engine: Any,
    selection: Mapping[str, Any],
    ref: str | None,
    *,
    file_columns: Sequence[str] = (),
    sampling: SchemaSampling | None = None,
    reader: ReaderChoice = "auto",
    batch_rows: int = DEFAULT_BATCH_ROWS,
    projection: Sequence[str] | None = None,
    pushed_filter: Expr | None = None,
    count_skipped: bool = False,
    ordered: bool = True,
) -> DataFrame:
    """A scan as a DataFrame: ``ref`` (a struct holding each record; the record's columns at the
    root when ``ref`` is None) and :data:`SEQ_COLUMN`. See the module docstring; the keywords
    are :func:`plan_scan`'s, and ``pushed_filter`` (over the scan's output, ``ref.member``) keeps
    only the records where it is true: Spark's own reader gets it right after the read, so a
    parquet read skips what its statistics exclude. With ``count_skipped``, a scan that skips
    bad records (``onError: skip``) also has :data:`SKIPPED_COLUMN` and its counting rows (see
    :mod:`engine.exec.spark.datasource`), for :class:`~engine.exec.spark.metrics.OperatorMetrics`
    to count and drop. ``ordered=False`` (nothing observes the records' order):
    :data:`SEQ_COLUMN` is 0 where Spark's reader reads, with no file lookup."""
    plan = plan_scan(
        engine,
        selection,
        file_columns=file_columns,
        sampling=sampling,
        reader=reader,
        batch_rows=batch_rows,
        projection=projection,
    )
    return scan_plan_dataframe(
        spark,
        plan,
        ref,
        pushed_filter=pushed_filter,
        count_skipped=count_skipped,
        ordered=ordered,
    )


def scan_plan_dataframe(
    spark: Any,
    plan: ScanPlan,
    ref: str | None,
    *,
    pushed_filter: Expr | None = None,
    count_skipped: bool = False,
    ordered: bool = True,
    observe: Callable[[DataFrame], DataFrame] | None = None,
    counted: Callable[[int], None] | None = None,
    pending: str | None = None,
    numbered: bool = True,
    apart: bool = True,
    ties: SharedValues | None = None,
) -> DataFrame | PendingColumns:
    """The DataFrame of a scan already planned with :func:`plan_scan`. ``observe`` counts the
    rows as read (its pushed filter applied), before they are wrapped into records, unless the
    filter reads outside the record or bad records are counted. ``counted`` takes the rows the
    scan reads where its files' footers say it without an observation (Spark's parquet reader,
    no ``pushed_filter``: every row of every file); ``observe`` is then not applied. Give it
    only when no limit reads the scan (Spark pushes a limit into the read). ``numbered``:
    parquet rows are numbered densely (see :func:`native_scan_dataframe`), as a sequence paired with
    another's further on (a join, a union) needs; else by Spark's row ids, which are cheaper to
    read but not deterministic, so Spark merges no later select into the one computing them
    (give it False only with ``pending``, where no record struct is built in that select).
    ``ties``: where rows of two files may tie on the keys of the one order reading the scan
    (:mod:`~engine.exec.spark.file_ties`).

    With ``pending`` (a prefix no other scan of the plan gives), where Spark's own reader reads
    the files into records under ``ref``, the records are left to the scan's reader:
    :class:`~engine.exec.spark.paths.PendingColumns` over the rows read, each column and the
    sequence named with that prefix (so that joins join the plain columns), and the record a
    struct of them only where a reader builds it whole
    (:func:`~engine.exec.spark.paths.record_value`). Not ``apart`` (no join nor union reads
    them), they may stay the read's own columns (:func:`_left_to_reader`)."""
    resolved = plan.resolved
    # Only the Drill data source skips records (the planner sends `onError: skip` there).
    counting = (
        count_skipped
        and bool(resolved.files)
        and not plan.is_native
        and resolved.options.skip_errors
    )
    carried = [column(SEQ_COLUMN), *([column(SKIPPED_COLUMN)] if counting else [])]
    columns = list(resolved.output_types)
    row_filter = None if pushed_filter is None else unwrapped_filter(pushed_filter, ref)
    late_filter = pushed_filter if row_filter is None else None  # reads outside the record
    # Every row of every file: the footers count them (the native scan reads them anyway).
    whole = plan.reader == "spark-parquet" and pushed_filter is None and counted is not None
    observed = observe is not None and not whole and late_filter is None and not counting

    def record_of(values: Mapping[str, Column]) -> Column:
        # The cast gives both readers' records the declared (nullable) types, literals
        # included; UNION columns come as JSON text and become variants. A record under a
        # ref carries the unread member: Spark then carries only the members read (see
        # unread_member); without a ref the members are columns of their own.
        members = [values[c] for c in columns]
        stored, target = storage_schema(resolved.spark_schema), resolved.spark_schema
        if not ref or not members:
            return revive(F.struct(*members).cast(stored), target)
        record = with_unread(members).cast(with_unread_type(stored))
        return revive(record, with_unread_type(target))

    if not resolved.files:
        schema = StructType([*resolved.spark_schema.fields, StructField(SEQ_COLUMN, LongType())])
        frame = spark.createDataFrame([], schema)
        if whole:
            counted(0)
    elif plan.is_native:
        rows = counted if whole else None
        # Records wrapped in the reader's select; an observation counts the rows below the
        # records' structs, where it does not keep Spark from pruning them.
        shape = None if not ref else lambda values: [record_of(values).alias(ref)]

        def records(values: Mapping[str, Column]) -> dict[str, Typed]:
            target = resolved.spark_schema

            def struct() -> Column:
                # Members named as the record's, so that the cast changes no name and Spark
                # drops it: a struct its readers read only by member is then never built.
                return record_of({c: values[c].alias(c) for c in columns})

            def members() -> list[tuple[str, Typed]]:
                unread = Typed(lit_as(None, "boolean"), BooleanType())
                return [
                    *((c, Typed(values[c], target[c].dataType)) for c in columns),
                    (UNREAD, unread),
                ]

            return {ref: record_value(struct, with_unread_type(target), members)}

        leaves = ref and late_filter is None and not has_variant(resolved.spark_schema)
        frame = native_scan_dataframe(
            spark,
            resolved,
            row_filter=row_filter,
            ordered=ordered,
            rows=rows,
            shape=shape,
            observe=observe if observed and shape is not None else None,
            records=(pending, records, apart) if pending is not None and leaves else None,
            numbered=numbered,
            ties=ties,
        )
        if shape is not None:
            return frame if late_filter is None else _late_filtered(frame, late_filter)
        row_filter = None
    else:
        register_data_source(spark)
        schema = storage_schema(resolved.spark_schema)
        if counting:
            schema = StructType([*schema.fields, StructField(SKIPPED_COLUMN, LongType())])
        frame = (
            spark.read.format(DATA_SOURCE_NAME)
            .schema(schema)
            .options(**resolved.request.to_options())
            .load()
            .withColumn(SEQ_COLUMN, F.monotonically_increasing_id())
        )
    if row_filter is not None:
        frame = frame.where(_keeping_counts(compile_condition(row_filter, frame.schema), counting))
    if observe is not None and observed:
        frame = observe(frame)
    record = record_of({c: column(c) for c in columns})
    if ref:
        result = frame.select(record.alias(ref), *carried)
    else:
        wrapped = frame.select(record.alias(_RECORD), *carried)
        result = wrapped.select(f"{_RECORD}.*", *carried)
    if late_filter is not None:
        result = _late_filtered(result, late_filter, counting)
    return result


def _late_filtered(df: DataFrame, condition: Expr, counting: bool = False) -> DataFrame:
    """``df`` (a scan's records) where ``condition``, a pushed filter reading outside the
    records, is true."""
    return df.where(_keeping_counts(compile_condition(condition, df.schema), counting))


def _keeping_counts(predicate: Column, counting: bool) -> Column:
    """``predicate``, true also on the rows that count skipped records (filtered later)."""
    if not counting:
        return predicate
    return column(SKIPPED_COLUMN).isNotNull() | F.ifnull(predicate, lit(False))


def unwrapped_filter(expr: Expr, ref: str | None) -> Expr | None:
    """``expr`` over the scan's own columns (``ref.a`` -> ``a``); None when it reads anything
    outside ``ref`` (it then cannot run before the records are wrapped)."""
    if not ref:
        return expr
    refs = field_refs(expr)
    if any(r.path[0] != ref or len(r.path) < 2 or not isinstance(r.path[1], str) for r in refs):
        return None
    mapping = {r: FieldRef(r.path[1:]) for r in refs}
    return _replace_refs(expr, mapping)


def _replace_refs(expr: Expr, mapping: Mapping[FieldRef, FieldRef]) -> Expr:
    if isinstance(expr, FieldRef):
        return mapping.get(expr, expr)
    if isinstance(expr, Call):
        return Call(expr.name, tuple(_replace_refs(a, mapping) for a in expr.args), expr.position)
    if isinstance(expr, Cast):
        return Cast(_replace_refs(expr.expr, mapping), expr.type, expr.position)
    if isinstance(expr, IfElse):
        branches = tuple(
            (_replace_refs(c, mapping), _replace_refs(v, mapping)) for c, v in expr.branches
        )
        return IfElse(branches, _replace_refs(expr.otherwise, mapping), expr.position)
    return expr


# ---------------------------------------------------------------- constant


def constant_dataframe(spark: Any, content: Sequence[Any] | None) -> DataFrame:
    """A constant's records as a DataFrame, typed as the local executor types them (a JSON
    reader's types), with :data:`SEQ_COLUMN` in record order."""
    records = list(content or [])
    if not records:
        return spark.createDataFrame([], StructType([StructField(SEQ_COLUMN, LongType(), False)]))
    batch = records_to_batch(records)
    types = {f.name: nullable_type(from_arrow_field(f)) for f in batch.schema}
    schema = spark_schema_of(types)
    storage = storage_schema(schema)  # a UNION column travels as JSON text, then is parsed
    data = conform_batch(batch, to_arrow_schema(storage, timezone="UTC"))
    table = pa.Table.from_batches([data]).append_column(
        pa.field(SEQ_COLUMN, pa.int64(), nullable=False),
        pa.array(range(len(records)), pa.int64()),
    )
    full = StructType([*storage.fields, StructField(SEQ_COLUMN, LongType(), False)])
    frame = spark.createDataFrame(table, schema=full)
    if storage == schema:
        return frame
    return frame.select(
        *[revive(column(f.name), f.dataType).alias(f.name) for f in schema.fields],
        column(SEQ_COLUMN),
    )
