"""Sources and sinks on Spark: scan, constant and store as DataFrames.

**Scan** (:func:`scan_dataframe`): the driver settles the scan's schema with the scan schema tracker
(:func:`~engine.exec.spark.datasource.resolve_scan`), then one of two readers runs:

* *Spark's own reader* where its semantics equal Drill's for these files: parquet always; JSON
  lines (every file's first line is one complete object) and CSV with a header when no provided
  schema converts values and bad records fail (not ``onError: skip``). One read covers every
  file; each row finds its file's implicit values (``dirN``, ``filename``, ...) and order by the
  file Spark reports for it (see :func:`_native_scan`).
* *The Drill data source* (:mod:`engine.exec.spark.datasource`) everywhere else: Drill's
  concatenated pretty-printed JSON, ``onError: skip``, provided schemas, Drill's ``columns`` mode.

Both give identical rows and the same Spark schema. The result has one struct column named after
the scan's ``ref`` holding the record (the columns themselves when ``ref`` is None) and
:data:`SEQ_COLUMN`, a long that orders rows as the local executor reads them (file order, then
file position). The record's struct carries one more member, never read, so that Spark carries
only the members a plan reads (:mod:`engine.exec.spark.unread_member`); a store drops it.

**Store** (:func:`store_dataframe`): queue and console sinks collect the (small) result; ``fs``
stores write with Spark into the staging directory of :mod:`engine.storage.commit` and commit with
its atomic protocol, so a failed write leaves the previous version. The row count of a parquet
store is the sum of the row counts in the footers of the files Spark wrote; json and csv stores
count with ``DataFrame.observe`` during the write; neither takes a second pass.

**Errors** (:func:`translate_spark_error`): the DrillError behind a failed Spark job, rebuilt from
Spark's error text (a data source task's note, the file Spark's reader failed on, read again
by the Drill reader to find the line and column, or a value an expression could not take).
"""

from __future__ import annotations

import contextlib
import csv
import functools
import operator
import os
import re
import string
import threading
import unicodedata
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
)
from pyspark.sql.utils import is_remote

from engine.errors import DrillError, PlanningError, SchemaConflictError, StorageError
from engine.exec.local.sources import records_to_batch
from engine.exec.spark.columns import compile_expression, compile_predicate
from engine.exec.spark.compiler_order import with_bits
from engine.exec.spark.data_errors import data_error
from engine.exec.spark.datasource import (
    DATA_SOURCE_NAME,
    ERROR_NOTE,
    SKIPPED_COLUMN,
    ResolvedScan,
    SchemaSampling,
    conform_batch,
    decode_error,
    is_json_lines,
    nullable_type,
    read_file,
    register_data_source,
    resolve_scan,
    spark_schema_of,
)
from engine.exec.spark.file_ties import SharedValues
from engine.exec.spark.paths import PendingColumns, Typed, cast_column, record_value, top_column
from engine.exec.spark.unions import (
    collect_arrow,
    has_variant,
    marked_texts,
    revive,
    storage_schema,
)
from engine.exec.spark.unread_member import UNREAD, with_unread, with_unread_type, without_unread
from engine.expr import Call, Cast, Expr, FieldRef, IfElse, field_refs
from engine.expr import Literal as LiteralNode
from engine.expr.rewrite import constant_date
from engine.scan.framework import DEFAULT_BATCH_ROWS, PartitionLayout, implicit_values
from engine.scan.projection import name_key
from engine.storage.catalog import CatalogEngine
from engine.storage.commit import remove
from engine.storage.engines import ClasspathEngine, ConsoleEngine, FsEngine, QueueEngine
from engine.storage.formats import WRITERS
from engine.storage.formats.csv import header_names
from engine.storage.formats.parquet_unions import arrow_schema_of
from engine.storage.jdbc.engine import JdbcEngine
from engine.storage.partitions import static_prefix
from engine.storage.paths import InputFile, has_glob, is_hidden
from engine.storage.store import (
    DEFAULT_LOCK_TIMEOUT,
    StoreResult,
    StoreTarget,
    check_compatible,
    check_readable,
    open_commit,
    partition_columns,
    under_any,
)
from engine.types import DataMode, MajorType, MinorType, from_arrow_field

SEQ_COLUMN = "__drill_seq"
"""The column that carries a row's input order through a Spark plan (a long; smaller is earlier)."""

LITERAL_LOOKUP_FILES = 64
"""Up to this many files, a scan by Spark's reader finds a row's file values in array literals;
beyond, in a broadcast join (see :func:`_native_scan`)."""

ROW_INDEX_COLUMN = "_tmp_metadata_row_index"
"""A parquet read by Spark's reader with this long column in its schema fills it with each row's
index in its file: Spark's own name for what ``_metadata.row_index`` reads (its
``FileFormat.ROW_INDEX_TEMPORARY_COLUMN_NAME``, pinned with pyspark and checked by the tests).
Read as a column, it costs less than through ``_metadata``, which Spark builds as a struct for
every row (in-process A/Bs of executor CPU: topn at scale 4 847 against 861 ms, q3 at scale 1
322 against 331; a PySpark top-N reading the index alone 791 against 841). A projection that
does not read it prunes it: no index is computed."""

CASE_LOOKUP_FILES = 8
"""Up to this many files, a row's position in those literals comes from compares of its file's
key, not from ``array_position`` (:func:`_position_of`)."""

ReaderChoice = Literal["auto", "spark", "drill"]

_JSON_NATIVE_TYPES = frozenset(
    {
        MinorType.BIT,
        MinorType.INT,
        MinorType.BIGINT,
        MinorType.FLOAT4,
        MinorType.FLOAT8,
        MinorType.VARCHAR,
    }
)
_NATIVE_FILE_LIMIT = 50_000
_RECORD = "__drill_record"
_FILE = "__drill_file"
_BASE = "__drill_file_base"
_ROW = "__drill_file_row"
# java.net.URI leaves these as they are in a path: unreserved, punct, '/' and '@'.
_URI_KEPT = frozenset(string.ascii_letters + string.digits + "-_.!~*'()" + ",;:$&+=" + "/@")
# Non-ASCII characters it quotes: controls and spaces (Character.isISOControl, isSpaceChar).
_URI_QUOTED = frozenset({"Cc", "Zs", "Zl", "Zp"})


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


def native_blocker(resolved: ResolvedScan) -> str | None:
    """Why Spark's own reader would not read these files as Drill does (None: it would)."""
    odd = next((f for f in resolved.files if not _spark_readable_path(f.real_path)), None)
    if odd is not None:
        return f"the path {odd.real_path} holds characters Spark's reader does not take literally"
    if len({f.real_path for f in resolved.files}) < len(resolved.files):
        return "the selection lists one file twice (through a symbolic link)"
    fmt = resolved.format
    if fmt == "parquet":
        if resolved.foreign_types:
            return f"Spark's parquet reader types {resolved.foreign_types[0]} otherwise than Drill"
        return None
    if resolved.options.skip_errors:
        return "onError: skip counts the bad records it skips, which Spark's reader cannot"
    if resolved.request.selection.get("schema") is not None:
        return "a provided schema converts values the Drill way"
    types = [resolved.output_types[name] for name in resolved.table_columns]
    if fmt == "json":
        odd = next((t for t in types if not _json_native(t)), None)
        if odd is not None:
            return f"the type {odd} has no equal in Spark's JSON reader"
        pretty = next((f for f in resolved.files if not is_json_lines(f)), None)
        if pretty is not None:
            return f"{pretty.path} is not JSON lines (a record spans lines)"
        return None
    if fmt in ("csv", "text"):
        if not _csv_header(resolved):
            return "Drill's columns mode (no header) has no equal in Spark's CSV reader"
        if any(t.minor != MinorType.VARCHAR or t.mode == DataMode.REPEATED for t in types):
            return "only text columns read the same way in Spark's CSV reader"
        if len({tuple(_header_of(f, resolved)) for f in _nonempty(resolved.files)}) > 1:
            return "the files have different headers"
        return None
    return f"format {fmt} has no Spark reader"


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
    parquet rows are numbered densely (see :func:`_native_scan`), as a sequence paired with
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
    row_filter = None if pushed_filter is None else _unwrapped(pushed_filter, ref)
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
                unread = Typed(F.lit(None).cast("boolean"), BooleanType())
                return [
                    *((c, Typed(values[c], target[c].dataType)) for c in columns),
                    (UNREAD, unread),
                ]

            return {ref: record_value(struct, with_unread_type(target), members)}

        leaves = ref and late_filter is None and not has_variant(resolved.spark_schema)
        frame = _native_scan(
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
        frame = frame.where(_keeping_counts(compile_predicate(row_filter, frame.schema), counting))
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
    return df.where(_keeping_counts(compile_predicate(condition, df.schema), counting))


def _keeping_counts(predicate: Column, counting: bool) -> Column:
    """``predicate``, true also on the rows that count skipped records (filtered later)."""
    if not counting:
        return predicate
    return column(SKIPPED_COLUMN).isNotNull() | F.coalesce(predicate, F.lit(False))


def column(name: str) -> Column:
    """The top-level column ``name``, whatever characters it holds (dots included)."""
    return top_column(name)


def _unwrapped(expr: Expr, ref: str | None) -> Expr | None:
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


_SPARK_COMPARISONS = {
    "equal": "__eq__",
    "not_equal": "__ne__",
    "less_than": "__lt__",
    "less_than_or_equal": "__le__",
    "greater_than": "__gt__",
    "greater_than_or_equal": "__ge__",
}
_MIRRORED = {"__lt__": "__gt__", "__le__": "__ge__", "__gt__": "__lt__", "__ge__": "__le__"}


def _reader_tests(expr: Expr, schema: StructType) -> tuple[list[Column], list[Expr]]:
    """Plain Spark comparisons for ``expr``'s ``column <op> literal`` conjuncts, for the reader's
    own filter pushdown (parquet row groups), and the conjuncts still to test the Drill way.

    A plain test keeps a superset of what Drill's test keeps, and is exactly Drill's where both
    compare alike (a null drops the row in both): integer, string, boolean and date columns
    against a literal of their kind, and a double column against a number by ``<``, ``<=``,
    ``==`` or ``!=``. A double's ``>`` and ``>=`` are not (Spark's NaN is greater than every
    number, Drill's compares false), nor are other mixed kinds (Spark's implicit casts are not
    Drill's): their conjuncts stay."""
    types = {f.name: f.dataType for f in schema.fields}
    tests: list[Column] = []
    rest: list[Expr] = []
    for conjunct in _conjuncts(expr):
        test, exact = _reader_test(conjunct, types)
        if test is not None:
            tests.append(test)
        if not exact:
            rest.append(conjunct)
    return tests, rest


def _conjuncts(expr: Expr) -> list[Expr]:
    if isinstance(expr, Call) and expr.name == "and":
        return [c for arg in expr.args for c in _conjuncts(arg)]
    return [expr]


def _reader_test(expr: Expr, types: Mapping[str, DataType]) -> tuple[Column | None, bool]:
    """The plain test of one conjunct (None if it is not ``column <op> literal``), and whether it
    is exactly Drill's."""
    if not isinstance(expr, Call) or expr.name not in _SPARK_COMPARISONS:
        return None, False
    left, right = expr.args
    method = _SPARK_COMPARISONS[expr.name]
    if isinstance(right, FieldRef) and isinstance(left, LiteralNode):
        left, right, method = right, left, _MIRRORED.get(method, method)
    if not isinstance(left, FieldRef) or len(left.path) != 1:
        return None, False
    name = str(left.path[0])
    dtype = types.get(name)
    if constant_date(right) is not None:  # Spark folds to_date('...') to a date the reader uses
        value = compile_expression(right, StructType([]))
        return getattr(column(name), method)(value), isinstance(dtype, DateType)
    if not isinstance(right, LiteralNode):
        return None, False
    literal = right.value
    if literal is None or (isinstance(literal, float) and literal != literal):
        return None, False
    test = getattr(column(name), method)(F.lit(literal))
    return test, _same_kind(dtype, literal) or _nan_agrees(dtype, literal, method)


def _same_kind(dtype: DataType | None, literal: Any) -> bool:
    """Whether Spark compares a column of ``dtype`` with ``literal`` exactly as Drill does."""
    if isinstance(literal, bool):
        return isinstance(dtype, BooleanType)
    if isinstance(literal, int):
        return isinstance(dtype, ByteType | ShortType | IntegerType | LongType)
    return isinstance(literal, str) and isinstance(dtype, StringType)


def _nan_agrees(dtype: DataType | None, literal: Any, method: str) -> bool:
    """Whether Spark's ``double <method> number`` is Drill's: NaN, the one value they order
    differently, is false in both for ``<``, ``<=`` and ``==``, true in both for ``!=``."""
    number = isinstance(literal, int | float) and not isinstance(literal, bool)
    return isinstance(dtype, DoubleType) and number and method in _NAN_AGREES


_NAN_AGREES = frozenset({"__lt__", "__le__", "__eq__", "__ne__"})


def _native_scan(
    spark: Any,
    resolved: ResolvedScan,
    *,
    row_filter: Expr | None = None,
    ordered: bool = True,
    rows: Callable[[int], None] | None = None,
    shape: Shape | None = None,
    observe: Callable[[DataFrame], DataFrame] | None = None,
    records: tuple[str, Callable[[Mapping[str, Column]], dict[str, Typed]], bool] | None = None,
    numbered: bool = True,
    ties: SharedValues | None = None,
) -> DataFrame | PendingColumns:
    """One read of every file by Spark's reader, each row given its file's implicit values and a
    sequence number ``file base + row id``; ``rows``, for parquet files, takes the rows they hold
    (the sum of their footers' row counts, what the read gives without ``row_filter``).
    ``shape`` turns the output columns (table and implicit ones, by name) into the columns to
    give instead, in the same select (one analysis less); the sequence follows them.
    ``observe`` (with ``shape``) counts the rows read, ``row_filter`` applied, below the shape:
    right above the read where nothing reads the files' ``_metadata`` (one select less), else
    above the select of the columns and sequence (above an observation, Spark would read the
    ``_metadata`` struct whole, its row index too, which the reader refuses beside
    :data:`ROW_INDEX_COLUMN`). ``records`` (a prefix, the records of columns and whether
    they are named apart, with ``shape``) leaves the shape to the reader: the columns and
    sequence are selected under names with that prefix and observed (see
    :func:`_left_to_reader`), and the records of them are their
    :class:`~engine.exec.spark.paths.PendingColumns`.

    Spark packs files into partitions by size, not in the scan's order. Parquet rows are numbered
    densely where ``numbered`` (the sequence is paired with another's further on): the row id is
    the row's index in its file (:data:`ROW_INDEX_COLUMN`) and a file's base the rows of the
    files before it (from the footers), so the sequence is a long of known width
    (``compiler_order.SEQ_BITS``) and pairs of such sequences stay longs. Other formats, and
    parquet elsewhere, use ``monotonically_increasing_id`` (within a file, rows keep their order
    and the file's splits get increasing partition ids; reading the row index costs more: topn
    at scale 1, 1.14x hand-written against 1.05x) and a file's index shifted above the bits it
    uses. The file
    comes from ``_metadata.file_size`` when the files' sizes differ, else ``_metadata.file_path``:
    its position among the files (:func:`_position_of`, or in an array literal), its base and
    implicit values from array literals at that position (a projection Spark prunes when
    nothing uses it), or beyond ``LITERAL_LOOKUP_FILES`` files from a broadcast join (by path); a
    single parquet file without implicit columns needs no lookup. A scan only an order reads,
    to break ties (``ties``: where rows of two files may hold the same key), looks a row's file
    up only where its key is such a value, by the name Spark gives the row, and orders the
    other rows by row id alone (:mod:`~engine.exec.spark.file_ties`).
    """
    files = [f for f in resolved.files if f.size > 0 or resolved.format != "parquet"]
    _remember_native(resolved, files)
    dense = resolved.format == "parquet"
    if not files:
        if dense and rows is not None:
            rows(0)
        schema = StructType([*resolved.spark_schema.fields, StructField(SEQ_COLUMN, LongType())])
        return spark.createDataFrame([], schema)
    implicit = [n for n in resolved.output_types if n in resolved.implicit]
    counts = [resolved.parquet_rows[str(f.real_path)] for f in files] if dense else []
    if dense and rows is not None:
        rows(sum(counts))
    if dense and numbered:
        bases = dict(zip((f.real_path for f in files), accumulate(counts, initial=0), strict=False))
        bits: int | None = max(sum(counts) - 1, 0).bit_length()
        row_id = column(ROW_INDEX_COLUMN)  # never null; nullable in Spark's eyes (coalesced)
    else:
        shift = 63 - max(1, (len(resolved.files) - 1).bit_length())
        bases = {f.real_path: i << shift for i, f in enumerate(resolved.files)}
        bits = None
        row_id = F.monotonically_increasing_id()
    read = _spark_read(spark, resolved, files)
    if row_filter is not None:  # before the row ids, so that Spark pushes it into the reader
        tests, rest = _reader_tests(row_filter, read.schema)
        # One Filter (one analysis): the reader's tests first, then what they leave to test.
        exact = [compile_predicate(conjunct, read.schema) for conjunct in rest]
        read = read.where(functools.reduce(operator.and_, [*tests, *exact]))
    names = resolved.table_columns
    shape = shape or _as_columns

    def shaped(
        source: DataFrame, values: dict[str, Column], seq: Column, *, reads_metadata: bool = True
    ) -> DataFrame | PendingColumns:
        if records is not None:
            return _left_to_reader(source, values, seq, bits, observe, *records)
        if observe is not None and not reads_metadata:
            source = observe(source)
        elif observe is not None:
            source = observe(source.select(*_as_columns(values), seq))
            values, seq = {name: column(name) for name in values}, column(SEQ_COLUMN)
        return source.select(*shape(values), seq)

    table = {n: column(n) for n in names}
    if not ordered and not implicit:
        bits = 0
        zero = with_bits(cast_column(F.lit(0), LongType()), SEQ_COLUMN, 0)
        return shaped(read, table, zero, reads_metadata=False)
    if dense and len(files) == 1 and not implicit:
        if bits is None:  # the row ids of one file, in its order
            return shaped(read, table, row_id.alias(SEQ_COLUMN), reads_metadata=False)
        row_id = F.coalesce(row_id, F.lit(0))  # non-nullable, like the data source's
        return shaped(read, table, with_bits(row_id, SEQ_COLUMN, bits), reads_metadata=False)
    if ties is not None and bits is None and not implicit and len(files) <= CASE_LOOKUP_FILES:
        seq = _tied_sequence(ties, files, bases, row_id)
        return shaped(read, table, seq, reads_metadata=False)
    in_literals = len(files) <= LITERAL_LOOKUP_FILES
    # Files of distinct sizes (Spark reads only these) are known by their size: a long compare
    # per row instead of a path's (topn at scale 1: 1.10x hand-written instead of 1.23x).
    # Like the footers' row counts, this trusts the listing: a file rewritten between planning
    # and reading (to another listed file's size, or to more rows) is numbered wrongly, silently.
    by_size = in_literals and len({f.size for f in files}) == len(files)
    key = F.col("_metadata.file_size" if by_size else "_metadata.file_path")
    if in_literals:
        # Up to CASE_LOOKUP_FILES files, compares of the row's file key give its base (and its
        # position, for implicit values); beyond, its position in an array literal of the files
        # (-1: not listed) gives both from array literals (null beyond the ends). An unknown
        # file fails the read, in every column it gives.
        keys = [f.size if by_size else spark_file_uri(f.real_path) for f in files]
        file_bases = [bases[f.real_path] for f in files]
        if len(keys) <= CASE_LOOKUP_FILES:
            base = _value_of(key, keys, file_bases, otherwise=_unknown_file(key, "long"))
            at = _position_of(key, keys) if implicit else None
        else:
            at = F.array_position(_array_literal(keys, "bigint" if by_size else "string"), key) - 1
            found = F.get(_array_literal(file_bases, "bigint"), at)
            base = F.coalesce(found, _unknown_file(key, "long"))
        values = dict(table)
        for name in implicit if at is not None else ():
            value = _optional_string_at(at, [implicit_values(f).get(name) for f in files])
            values[name] = F.when(at < 0, _unknown_file(key)).otherwise(value).alias(name)
        return shaped(read, values, _sequence(base, row_id, bits))
    lookup_rows = []
    for file in files:
        values = implicit_values(file)
        base = bases[file.real_path]
        lookup_rows.append(
            (spark_file_uri(file.real_path), base, *[values.get(n) for n in implicit])
        )
    lookup_schema = StructType(
        [
            StructField(_FILE, StringType(), False),
            StructField(_BASE, LongType(), False),
            *[StructField(n, StringType(), True) for n in implicit],
        ]
    )
    lookup = spark.createDataFrame(lookup_rows, lookup_schema)
    scanned = read.select("*", key.alias(_FILE), row_id.alias(_ROW))
    joined = scanned.join(F.broadcast(lookup), on=_FILE, how="left")
    base = F.when(column(_BASE).isNull(), _unknown_file(column(_FILE))).otherwise(column(_BASE))
    values = {n: column(n) for n in [*names, *implicit]}
    return shaped(joined, values, _sequence(base, column(_ROW), bits))


Shape = Callable[[dict[str, Column]], list[Column]]
"""What :func:`_native_scan` selects, given the scan's columns by name (each named so)."""


def _left_to_reader(
    source: DataFrame,
    values: Mapping[str, Column],
    seq: Column,
    bits: int | None,
    observe: Callable[[DataFrame], DataFrame] | None,
    prefix: str,
    records: Callable[[Mapping[str, Column]], dict[str, Typed]],
    apart: bool = True,
) -> PendingColumns:
    """``source``'s ``values`` and sequence ``seq`` (of width ``bits``) selected under names
    starting with ``prefix`` (two scans a join reads never share one), observed, and the
    ``records`` of them left to the reader. Where no join or union reads them (not ``apart``)
    and the sequence is a constant (width 0), the reader's select is the only one: the values
    stay ``source``'s columns, observed as read (they read no ``_metadata``)."""
    if not apart and bits == 0:
        zero = Typed(cast_column(F.lit(0), LongType()), LongType(), 0)
        base = source if observe is None else observe(source)
        return PendingColumns(base, {**records(values), SEQ_COLUMN: zero}, bits)
    names = {name: f"{prefix}{i}" for i, name in enumerate(values)}
    selected = [v.alias(names[n]) for n, v in values.items()]
    # A column never null, so null only where an outer join's side is missing: the sequence,
    # or beside a sequence of width 0 (0: a literal Spark folds, not a column carried along)
    # a mark Spark prunes unless a join pads it.
    if bits == 0:
        present = column(f"{prefix}row")
        order = Typed(cast_column(F.lit(0), LongType()), LongType(), 0)
        selected.append(F.lit(True).alias(f"{prefix}row"))
    else:
        present = column(f"{prefix}seq")
        order = Typed(present, LongType())
        selected.append(seq.alias(f"{prefix}seq"))
    base = source.select(*selected)
    if observe is not None:
        base = observe(base)
    built = records({n: column(names[n]) for n in values})
    return PendingColumns(base, {**built, SEQ_COLUMN: order}, bits, present, apart=True)


def _as_columns(values: dict[str, Column]) -> list[Column]:
    return list(values.values())


def _position_of(key: Column, keys: Sequence[str | int]) -> Column:
    """The position of ``key`` in ``keys`` (-1: not there) as a ``CASE WHEN`` of compares, which
    Spark's generated code runs as such. ``array_position`` over an array literal costs more per
    row (topn at scale 1: ~5% of its executor CPU) but fewer py4j calls when there are many keys."""
    return _value_of(key, keys, range(len(keys)), otherwise=F.lit(-1))


def _value_of(
    key: Column, keys: Sequence[str | int], values: Sequence[int], *, otherwise: Column
) -> Column:
    """``values[i]`` where ``key`` is ``keys[i]``, else ``otherwise``: a ``CASE WHEN`` of compares
    (no array literal to index, which Spark's optimizer folds and each row indexes)."""
    value = F.when(key == keys[0], values[0])
    for key_value, value_i in zip(keys[1:], values[1:], strict=True):
        value = value.when(key == key_value, value_i)
    return value.otherwise(otherwise)


def _array_literal(values: Sequence[str | int], dtype: str) -> Column:
    """``values`` as an array literal of ``dtype`` in a few py4j calls however many there are
    (an array of literals costs a few per value): one string, split on the NUL character that
    no file path or number holds, then cast; Spark folds it to a constant."""
    return F.split(F.lit(_NUL.join(map(str, values))), _NUL).cast(f"array<{dtype}>")


_NUL = "\x00"


def _optional_string_at(at: Column, values: Sequence[str | None]) -> Column:
    """``values[at]`` from one array literal: each value behind a one-character mark, so that a
    None (the empty string) keeps its own element and comes back as null."""
    marked = _array_literal(["" if v is None else f"={v}" for v in values], "string")
    return F.substring(F.nullif(F.get(marked, at), F.lit("")), 2, _MAX_CHARS)


_MAX_CHARS = 2**31 - 1


def _sequence(base: Column, row_id: Column, bits: int | None) -> Column:
    # Never null (an unknown file raises first, a row id is always there); the coalesce tells
    # Spark so, and keeps the column non-nullable like the data source's.
    value = F.coalesce(base + row_id, F.lit(0))
    return value.alias(SEQ_COLUMN) if bits is None else with_bits(value, SEQ_COLUMN, bits)


def _tied_sequence(
    ties: SharedValues, files: Sequence[InputFile], bases: Mapping[Path, int], row_id: Column
) -> Column:
    """The sequence of a scan only an order reads, to break ties: a row's file position only
    where rows of another file may hold its key (``ties``), from its file's name, which Spark
    gives each row without building ``_metadata``; else the row id alone."""
    shared = ties.condition(column(ties.column))
    if shared is None:
        return F.coalesce(row_id, F.lit(0)).alias(SEQ_COLUMN)
    name = F.input_file_name()
    names = [spark_input_file_name(f.real_path) for f in files]
    base = _value_of(
        name, names, [bases[f.real_path] for f in files], otherwise=_unknown_file(name, "long")
    )
    return _sequence(F.when(shared, base).otherwise(0), row_id, None)


def _unknown_file(key: Column, dtype: str | None = None) -> Column:
    """Fails the read of a file the scan did not list, naming its ``key`` (path or size)."""
    message = F.concat(F.lit("the scan did not list the file Spark read: "), key.cast("string"))
    error = F.raise_error(message)
    return error.cast(dtype) if dtype else error


def spark_input_file_name(path: Path | str) -> str:
    """What Spark's ``input_file_name()`` gives for the rows of a local file: its
    :func:`spark_file_uri` with an empty authority.

    >>> spark_input_file_name("/data/a b.parquet")
    'file:///data/a%20b.parquet'
    """
    return "file://" + spark_file_uri(path).removeprefix("file:")


def spark_file_uri(path: Path | str) -> str:
    """The URI Spark's readers report for a local file (``_metadata.file_path``): Hadoop's
    ``Path.toUri``, i.e. ``java.net.URI`` quoting, UTF-8 ``%XX``.

    >>> spark_file_uri("/data/day=1/a b+c/ü.json")
    'file:/data/day=1/a%20b+c/ü.json'
    """
    quoted = []
    for ch in str(path):
        if ch in _URI_KEPT or (ord(ch) > 127 and unicodedata.category(ch) not in _URI_QUOTED):
            quoted.append(ch)
        else:
            quoted.extend(f"%{byte:02X}" for byte in ch.encode("utf-8"))
    return "file:" + "".join(quoted)


def _spark_read(spark: Any, resolved: ResolvedScan, files: Sequence[InputFile]) -> DataFrame:
    """Spark's reader over ``files``, giving the table columns in output order and types (and,
    for parquet, each row's index in its file: :data:`ROW_INDEX_COLUMN`)."""
    root = spark_read_root(files)
    paths = [str(root)] if root else spark_read_paths(files)
    # Under one root, partition directories are directories like any other: no partition columns.
    reader = spark.read.option("recursiveFileLookup", True) if root else spark.read
    # The paths are files and directories the engine listed: names, never patterns (a root or
    # a file whose name holds ``[``, ``*`` or ``?`` is read as it is, not globbed by Hadoop).
    reader = reader.option("__globPaths__", "false")
    names = resolved.table_columns
    table = StructType([resolved.spark_schema[name] for name in names])
    # Given a schema, the parquet and JSON readers give exactly its columns, in its order (files
    # named one by one or under one root: no partition columns), so no select after them (one
    # analysis less). The parquet schema holds the files' other columns after the table's: the
    # scan's select leaves them out and Spark prunes them, but sizes the read as a plain one
    # (``unread_schema``).
    if resolved.format == "parquet":
        fields = [*table.fields, *resolved.unread_schema.fields]
        with_index = StructType([*fields, StructField(ROW_INDEX_COLUMN, LongType())])
        return reader.schema(with_index).parquet(*paths)
    if resolved.format == "json":
        return reader.schema(table).option("mode", "FAILFAST").json(paths)
    header = _header_of(next(iter(_nonempty(resolved.files)), files[0]), resolved)
    positional = StructType([StructField(f"_c{i}", StringType()) for i in range(len(header))])
    options = resolved.options
    frame = (
        reader.schema(positional)
        .options(
            header=True,
            enforceSchema=True,
            sep=options.delimiter,
            quote=options.quote,
            escape=options.quote,
            multiLine=True,
            mode="FAILFAST",
        )
        .csv(paths)
    )
    keys = [name_key(h) for h in header]
    selected = []
    for name in names:
        if name_key(name) in keys:
            raw = column(f"_c{keys.index(name_key(name))}")
            # Spark reads an empty field as null; Drill's CSV reader gives an empty string.
            selected.append(F.when(raw.isNull(), F.lit("")).otherwise(raw).alias(name))
        else:
            selected.append(F.lit(None).cast(StringType()).alias(name))
    return frame.select(*selected)


def spark_read_paths(files: Sequence[InputFile]) -> list[str]:
    """The paths to give Spark's reader for ``files``: a directory instead of its files where
    they are all that Spark lists in it (regular files, no subdirectory). Spark checks a path
    given by name on its own (a file status each: 14 JSON files take 42 ms to open, their 7
    directories 18 ms); a directory is one listing. Like the footers' row counts, this trusts
    the listing: a file added between this check and Spark's listing is read (a scan that
    numbers its rows fails on it, as on any file it did not list)."""
    chosen: dict[Path, set[str]] = {}
    for file in files:
        chosen.setdefault(file.real_path.parent, set()).add(file.real_path.name)
    paths = []
    for directory, names in chosen.items():
        if len(names) > 1 and _spark_lists(directory) == names:
            paths.append(str(directory))
        else:
            paths.extend(str(directory / name) for name in sorted(names))
    return paths


def spark_read_root(files: Sequence[InputFile]) -> Path | None:
    """The directory to give Spark's reader, listing it recursively, for ``files`` in more than
    one directory: the deepest holding them all, where every file Spark lists below it is one of
    them. Spark checks each path it is given on its own; one root is one listing (the 7 day
    directories of the benchmark's events: 29 ms to open, their root 13 ms). None where below it
    lies anything else Spark would read or might (another file, a directory holding none of
    ``files``, a symbolic link): the reader is then given :func:`spark_read_paths`. Like the
    footers' row counts, this trusts the listing: a file added since is read (a scan that numbers
    its rows fails on it, as on any file it did not list)."""
    wanted = {f.real_path for f in files}
    parents = {path.parent for path in wanted}
    if len(parents) < 2:
        return None
    root = Path(os.path.commonpath(parents))
    ancestors = {a for parent in parents for a in (parent, *parent.parents)}
    found: set[Path] = set()
    pending = [root]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    path = Path(entry.path)
                    if _spark_skips(entry.name):
                        continue
                    if entry.is_dir(follow_symlinks=False) and path in ancestors:
                        pending.append(path)
                    elif entry.is_file(follow_symlinks=False) and path in wanted:
                        found.add(path)
                    else:
                        return None
        except OSError:
            return None
    return root if found == wanted else None


def _spark_lists(directory: Path) -> set[str] | None:
    """The names Spark's file listing keeps in ``directory``, None if it holds anything but
    regular files there (a subdirectory, a symbolic link)."""
    names = set()
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if _spark_skips(entry.name):
                    continue
                if not entry.is_file(follow_symlinks=False):
                    return None
                names.add(entry.name)
    except OSError:
        return None
    return names


def _spark_skips(name: str) -> bool:
    """Whether Spark's file listing leaves ``name`` out (``HadoopFSUtils.shouldFilterOutPathName``:
    hidden and underscore names but partition directories and parquet summaries, files being
    copied)."""
    excluded = (
        (name.startswith("_") and "=" not in name)
        or name.startswith(".")
        or name.endswith("._COPYING_")
    )
    return excluded and not name.startswith(("_common_metadata", "_metadata"))


def _json_native(t: MajorType) -> bool:
    if t.minor == MinorType.MAP:
        return bool(t.fields) and all(_json_native(child) for _, child in t.fields)
    if t.minor == MinorType.LIST:
        return t.element is not None and _json_native(t.element)
    return t.minor in _JSON_NATIVE_TYPES


def _spark_readable_path(path: Path) -> bool:
    """Whether Spark reads ``path`` as it is: no glob characters, no ':' (Hadoop takes it for
    a scheme), valid UTF-8."""
    text = str(path)
    if has_glob(text) or any(ch in text for ch in "{}\\:"):
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _nonempty(files: Iterable[InputFile]) -> list[InputFile]:
    return [f for f in files if f.size > 0]


def _csv_header(resolved: ResolvedScan) -> bool:
    default = resolved.format == "csv"
    return default if resolved.options.header is None else resolved.options.header


@functools.lru_cache(maxsize=1024)
def _read_header(
    path: str, size: int, modified: int, delimiter: str, quote: str
) -> tuple[str, ...]:
    """A CSV file's header, kept for the file as it is (a process runs many plans: a file
    rewritten since, even to the same size, is read again)."""
    with open(path, encoding="utf-8-sig", newline="") as text:
        for fields in csv.reader(text, delimiter=delimiter, quotechar=quote, strict=False):
            if fields:
                return tuple(header_names(fields))
    return ()


def _header_of(file: InputFile, resolved: ResolvedScan) -> tuple[str, ...]:
    options = resolved.options
    path = str(file.real_path)
    try:
        modified = os.stat(path).st_mtime_ns
    except OSError:
        modified = -1  # gone: opening it says so
    return _read_header(path, file.size, modified, options.delimiter, options.quote)


# ---------------------------------------------------------------- what Spark's readers read

_NATIVE_FILES: OrderedDict[str, tuple[ResolvedScan, InputFile]] = OrderedDict()
_NATIVE_FILES_LOCK = threading.Lock()


def _remember_native(resolved: ResolvedScan, files: Iterable[InputFile]) -> None:
    """Keep which scan read each file with Spark's reader, to explain its errors the Drill way."""
    with _NATIVE_FILES_LOCK:  # a run's scans are built in threads of their own
        for file in files:
            _NATIVE_FILES[str(file.real_path)] = (resolved, file)
            _NATIVE_FILES.move_to_end(str(file.real_path))
        while len(_NATIVE_FILES) > _NATIVE_FILE_LIMIT:
            _NATIVE_FILES.popitem(last=False)


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


# ---------------------------------------------------------------- store


def store_dataframe(
    df: DataFrame,
    engine: Any,
    target: Mapping[str, Any] | None,
    *,
    partition_values: Mapping[str, Any] | None = None,
    sink_records: list[Any] | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> StoreResult:
    """Write ``df`` to ``target`` of ``engine`` (see the module docstring and
    :func:`engine.storage.store.write_store`, whose target format and outcomes this follows).

    Records reaching a queue or console sink are also appended to ``sink_records`` when given
    (what ``RunResult.records()`` returns). A :data:`SEQ_COLUMN` still present is dropped.
    """
    if SEQ_COLUMN in df.columns:
        df = df.drop(SEQ_COLUMN)
    df = without_unread(df)
    if isinstance(engine, ConsoleEngine | QueueEngine):
        from engine.storage.store import write_store

        table = _collect(df)
        if sink_records is not None:
            sink_records.extend(table.to_pylist())
        return write_store(engine, target, table)
    if isinstance(engine, ClasspathEngine):
        raise StorageError(f"{engine.label} is read-only; store to an fs engine")
    if isinstance(engine, CatalogEngine):
        from engine.exec.spark.catalog_tables import store_table

        return store_table(df, engine, target)
    if isinstance(engine, JdbcEngine):
        from engine.exec.spark.jdbc import store_jdbc

        return store_jdbc(df, engine, target)
    if not isinstance(engine, FsEngine):
        raise StorageError(f"{getattr(engine, 'label', engine)} cannot be written to")
    spec = StoreTarget.parse(target, engine=engine)
    return _store_fs(df, spec, dict(partition_values or {}), lock_timeout)


def _collect(df: DataFrame) -> pa.Table:
    try:
        return collect_arrow(df)
    except Exception as err:
        translated = translate_spark_error(err)
        if translated is not None:
            raise translated from err
        raise


def _store_fs(
    df: DataFrame, spec: StoreTarget, static: dict[str, Any], lock_timeout: float
) -> StoreResult:
    columns = partition_columns(spec, static, df.columns)
    dynamic = columns[len(static) :]
    _check_columns(df, spec, dynamic)
    prefix = static_prefix(static) if static else ""
    partitioned = bool(columns)
    # Parquet files say how many rows they hold: their footers count the store, no observation.
    observation = None if spec.format == "parquet" else Observation(f"store {spec.path}")
    written_df = df
    if spec.format == "parquet" and has_variant(df.schema):
        written_df = marked_texts(df)  # UNION columns as the local executor's files hold them
    observed = (
        written_df
        if observation is None
        else written_df.observe(observation, F.count(F.lit(1)).alias("rows"))
    )
    directory = spec.mode == "append" or partitioned  # else the whole target is replaced
    with open_commit(
        spec, lock_timeout, needs_directory=directory, explain=_store_failure
    ) as commit:
        spark_dir = commit.staging / f".spark-{uuid.uuid4().hex}"
        spark_sees = _path_for_writers(df, spark_dir)
        _spark_write(observed, spec, spark_sees / prefix if prefix else spark_sees, dynamic)
        written = _data_files(spark_dir)
        if not written and not partitioned:
            written = [_write_empty(df, spec, spark_dir)]
        footers = _footers(spark_dir, written)
        paths = sorted({os.path.dirname(rel) for rel in written if os.path.dirname(rel)})
        if directory:
            replaced = [] if spec.mode == "append" else [prefix] if prefix else paths
            kept = commit.carry_over(lambda rel: not under_any(rel, replaced))
            check_compatible(spec, commit.staging, kept, _written_schema(footers))
        for rel in written:
            destination = commit.staging / rel
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.replace(spark_dir / rel, destination)
        remove(spark_dir)
        check_readable(spec, commit.staging, written)
        commit.metadata_file = spec.metadata_file  # the metadata repository's record
        commit.metadata_root = spec.root
        commit.commit()
    if observation is None:
        rows = sum(footer.num_rows for footer in footers)
    else:
        rows = observation.get.get("rows", 0) if written else 0
    return StoreResult(
        location=str(spec.location),
        format=spec.format,
        row_count=int(rows),
        files=tuple(str(spec.location / rel) for rel in written),
        schema=to_arrow_schema(df.schema, timezone="UTC"),
        mode=spec.mode,
        partitions=tuple(sorted(set(paths) | ({prefix} if prefix else set()))),
        version=commit.version,
    )


def _path_for_writers(df: DataFrame, path: Path) -> Path:
    """``path`` as Spark's writers should be given it. Staging is reached through this process's
    open directory (``/proc/<pid>/fd/<fd>``: a directory swapped for a link meanwhile is not
    followed), which the JVM of a ``local`` master can use; executors elsewhere (a cluster,
    Spark Connect) get the directory's current location instead, and the commit checks staging
    was not swapped before renaming it."""
    session = df.sparkSession
    local = not is_remote() and session.sparkContext.master.startswith("local")
    return path if local else Path(os.path.realpath(path))


def _check_columns(df: DataFrame, spec: StoreTarget, dynamic: Sequence[str]) -> None:
    fields = {f.name: f.dataType for f in df.schema.fields}
    missing = [c for c in dynamic if c not in fields]
    if missing:
        raise StorageError(
            f"partitionBy names {', '.join(repr(c) for c in missing)}, not among the columns "
            f"stored ({', '.join(fields)})"
        )
    nested_types = (StructType, ArrayType, MapType)
    for name in dynamic:
        if isinstance(fields[name], nested_types):
            raise StorageError(
                f"cannot partition by '{name}': it is {fields[name].simpleString()}, not a scalar"
            )
    if spec.format == "csv":
        nested = [n for n, t in fields.items() if n not in dynamic and isinstance(t, nested_types)]
        if nested:
            raise StorageError(
                f"csv stores only scalar columns, and {', '.join(repr(n) for n in nested)} "
                f"{'is' if len(nested) == 1 else 'are'} nested",
                hint="store nested data as parquet or json, or flatten it first",
            )


def _spark_write(df: DataFrame, spec: StoreTarget, path: Path, dynamic: Sequence[str]) -> None:
    # "error" and not its alias "errorifexists", which PySpark's Spark Connect client refuses
    writer = df.write.mode("error")
    if dynamic:
        writer = writer.partitionBy(*dynamic)
    if spec.format == "json":
        writer.option("ignoreNullFields", "false").json(str(path))
    elif spec.format == "csv":
        writer.options(header=True, quote='"', escape='"').csv(str(path))
    else:
        writer.parquet(str(path))


def _write_empty(df: DataFrame, spec: StoreTarget, spark_dir: Path) -> str:
    """An unpartitioned store of no rows still writes one file, so the schema survives."""
    rel = f"part-00000-{uuid.uuid4().hex[:8]}.{spec.format}"
    spark_dir.mkdir(parents=True, exist_ok=True)
    schema = to_arrow_schema(df.schema, timezone="UTC")
    WRITERS[spec.format](schema.empty_table(), spark_dir / rel)
    return rel


def _data_files(directory: Path) -> list[str]:
    """The data files Spark wrote below ``directory`` (markers and checksums left out)."""
    found = []
    for root, subdirs, files in os.walk(directory):
        subdirs[:] = sorted(d for d in subdirs if not is_hidden(d))
        rel_dir = os.path.relpath(root, directory)
        for name in sorted(files):
            if not is_hidden(name):
                found.append(name if rel_dir == "." else f"{rel_dir}/{name}")
    return found


def _footers(spark_dir: Path, written: Sequence[str]) -> list[pq.FileMetaData]:
    """The footers of the parquet files Spark wrote (each read once: the store's row count and
    the schema compared with the files kept)."""
    return [pq.read_metadata(spark_dir / rel) for rel in written if rel.endswith(".parquet")]


def _written_schema(footers: Sequence[pq.FileMetaData]) -> pa.Schema | None:
    """The schema of the first parquet file Spark wrote, to compare with the files kept."""
    return arrow_schema_of(footers[0]) if footers else None


def _store_failure(err: Exception) -> DrillError | str:
    return translate_spark_error(err) or _spark_reason(_error_text(err))


# ---------------------------------------------------------------- errors

_NOTE = re.compile(re.escape(ERROR_NOTE) + r"(\{.*\})")
# "... reading file <uri>. SQLSTATE", or "... reading file <uri>. File does not exist. ..."
_READ_FILE = re.compile(r"Encountered error while reading file (\S+?)\.?(?:\s|$)", re.M)
_PSQL = re.compile(r"org\.postgresql\.util\.PSQLException: ([^\n]*)")
_PY_ERROR = re.compile(r"^engine\.errors\.(\w+): (.*)$", re.M)
_CONFLICT = re.compile(r"^(?:(.*): )?column '(.*)' changed type from (.+) to (.+)$")
_CAUSE = re.compile(r"^Caused by: [\w.$]+: (.*)$", re.M)
_ERROR_CLASS = re.compile(r"\[([A-Z_]+(?:\.[A-Z_]+)*)\] ([^\n]*)")


def translate_spark_error(exc: BaseException) -> DrillError | None:
    """The engine error behind a Spark failure, or None when it is not one of ours.

    Finds, in this order: the note a Drill data source task attached to its DrillError; a file
    Spark's own reader failed on (read again by the Drill reader, which names line and column);
    the text of an engine error raised in a Python worker; a value an expression could not take
    (:mod:`~engine.exec.spark.data_errors`).

    >>> text = "Traceback ...\\nengine.errors.StorageError: /d/a.json:3:1: malformed JSON\\n"
    >>> str(translate_spark_error(RuntimeError(text)))
    '/d/a.json:3:1: malformed JSON'
    >>> translate_spark_error(RuntimeError("boom")) is None
    True
    """
    if isinstance(exc, DrillError):
        return exc
    text = _error_text(exc)
    note = _NOTE.search(text)
    if note:
        decoded = decode_error(note.group(1))
        if decoded is not None:
            return decoded
    failed = _READ_FILE.search(text)
    if failed:
        return _explain_read_failure(failed.group(1), text)
    raised = _PY_ERROR.search(text)
    if raised:
        return _rebuild(raised.group(1), raised.group(2))
    database = _PSQL.search(text)
    if database:  # a jdbc engine's read or write the database refused (no credentials in it)
        return StorageError(f"PostgreSQL refused a read or write of a jdbc engine: {database[1]}")
    return data_error(text)


def _error_text(exc: BaseException) -> str:
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(str(current))
        for attribute in ("desc", "stackTrace", "_stackTrace"):
            value = getattr(current, attribute, None)
            if isinstance(value, str):
                parts.append(value)
        java = getattr(current, "java_exception", None)
        if java is not None:
            with contextlib.suppress(Exception):
                parts.append(str(java.toString()))
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


def _rebuild(kind: str, message: str) -> DrillError:
    if kind == "SchemaConflictError":
        match = _CONFLICT.match(message)
        if match:
            file, name, old, new = match.groups()
            return SchemaConflictError(column=name, old_type=old, new_type=new, file=file)
    if kind == "StorageError":
        return StorageError(message)
    return DrillError(message)


def _explain_read_failure(uri: str, text: str) -> DrillError:
    path = unquote(urlsplit(uri).path) if ":" in uri else uri
    reason = _spark_reason(text)
    known = _NATIVE_FILES.get(path)
    if known is None:
        return StorageError(f"Spark could not read the file: {reason}", file=path)
    resolved, file = known
    layout = PartitionLayout.of(resolved.files)
    try:
        for _ in read_file(resolved.request, file, resolved.spark_schema, layout=layout):
            pass
    except DrillError as err:
        return err
    except Exception:  # the Drill reader cannot say more: Spark's reason is the error
        return StorageError(f"Spark could not read the file: {reason}", file=str(file.path))
    return StorageError(
        f"Spark's {resolved.format} reader failed where the Drill reader does not: {reason}",
        file=str(file.path),
        hint="report this; meanwhile `onError: skip` in the selection has the Drill reader read "
        "these files (it skips nothing when nothing is malformed), or run with the local executor",
    )


def _spark_reason(text: str) -> str:
    """The innermost Spark error message in ``text`` (the most specific one)."""
    causes = _CAUSE.findall(text)
    for cause in reversed(causes):
        if "FAILED_READ_FILE" not in cause:
            return cause.strip()
    classes = _ERROR_CLASS.findall(text)
    for name, message in reversed(classes):
        if not name.startswith("FAILED_READ_FILE"):
            return f"[{name}] {message.strip()}"
    first = text.strip().splitlines()
    return first[0] if first else "unknown error"


__all__ = [
    "LITERAL_LOOKUP_FILES",
    "SEQ_COLUMN",
    "ScanPlan",
    "column",
    "constant_dataframe",
    "native_blocker",
    "plan_scan",
    "scan_dataframe",
    "scan_plan_dataframe",
    "spark_file_uri",
    "store_dataframe",
    "translate_spark_error",
]
