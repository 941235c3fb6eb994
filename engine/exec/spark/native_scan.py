"""Scans read by Spark's own readers (parquet, JSON lines, CSV with a header): where their
semantics are Drill's (:func:`native_blocker`), one read of every file, each row given its
file's implicit values (``dirN``, ``filename``, ...) and a sequence number that orders rows as
the local executor reads them (:func:`native_scan_dataframe`); the filter Spark's reader applies
(:func:`_reader_tests`); and which scan read a file, to explain its errors the Drill way
(:func:`read_natively`).
"""

from __future__ import annotations

import csv
import functools
import operator
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from engine.exec.spark.columns import compile_condition, compile_expression
from engine.exec.spark.compiler_order import with_bits
from engine.exec.spark.constant_columns import col, constant, lit, lit_as
from engine.exec.spark.datasource import is_json_lines
from engine.exec.spark.file_ties import SharedValues
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.paths import PendingColumns, Typed, top_column
from engine.exec.spark.read_paths import (
    spark_file_uri,
    spark_input_file_name,
    spark_read_paths,
    spark_read_root,
    spark_readable_path,
)
from engine.exec.spark.scan_resolution import ResolvedScan
from engine.exec.spark.spark_reads import reused_read
from engine.expr import Call, Expr, FieldRef
from engine.expr import Literal as LiteralNode
from engine.expr.rewrite import constant_date
from engine.scan.framework import implicit_values
from engine.scan.projection import name_key
from engine.storage.formats.csv import header_names
from engine.storage.paths import InputFile
from engine.types import DataMode, MajorType, MinorType

LITERAL_LOOKUP_FILES = 64
"""Up to this many files, a scan by Spark's reader finds a row's file values in array literals;
beyond, in a broadcast join (see :func:`native_scan_dataframe`)."""

ROW_INDEX_COLUMN = "_tmp_metadata_row_index"
"""A parquet read by Spark's reader with this long column in its schema fills it with each row's
index in its file: Spark's own name for what ``_metadata.row_index`` reads (its
``FileFormat.ROW_INDEX_TEMPORARY_COLUMN_NAME``, pinned with pyspark and checked by the tests).
Read as a column, it costs less than through ``_metadata``, which Spark builds as a struct for
every row. A projection that does not read it prunes it: no index is computed."""

CASE_LOOKUP_FILES = 8
"""Up to this many files, a row's position in those literals comes from compares of its file's
key, not from ``array_position`` (:func:`_position_of`)."""


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
_FILE = "__drill_file"
_BASE = "__drill_file_base"
_ROW = "__drill_file_row"


def native_blocker(resolved: ResolvedScan) -> str | None:
    """Why Spark's own reader would not read these files as Drill does (None: it would)."""
    odd = next((f for f in resolved.files if not spark_readable_path(f.real_path)), None)
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


def native_scan_dataframe(
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
    and the file's splits get increasing partition ids; the row index costs more where it is
    not needed dense) and a file's index shifted above the bits it uses. The file
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
        exact = [compile_condition(conjunct, read.schema) for conjunct in rest]
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
        zero = constant("zero sequence", lambda: with_bits(lit_as(0, LongType()), SEQ_COLUMN, 0))
        return shaped(read, table, zero, reads_metadata=False)
    if dense and len(files) == 1 and not implicit:
        if bits is None:  # the row ids of one file, in its order
            return shaped(read, table, row_id.alias(SEQ_COLUMN), reads_metadata=False)
        row_id = F.ifnull(row_id, lit(0))  # non-nullable, like the data source's
        return shaped(read, table, with_bits(row_id, SEQ_COLUMN, bits), reads_metadata=False)
    if ties is not None and bits is None and not implicit and len(files) <= CASE_LOOKUP_FILES:
        seq = _tied_sequence(ties, files, bases, row_id)
        return shaped(read, table, seq, reads_metadata=False)
    in_literals = len(files) <= LITERAL_LOOKUP_FILES
    # Files of distinct sizes (Spark reads only these) are known by their size: a long compare
    # per row instead of a path's.
    # Like the footers' row counts, this trusts the listing: a file rewritten between planning
    # and reading (to another listed file's size, or to more rows) is numbered wrongly, silently.
    by_size = in_literals and len({f.size for f in files}) == len(files)
    key = col("_metadata.file_size" if by_size else "_metadata.file_path")
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
            base = F.ifnull(found, _unknown_file(key, "long"))
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
"""What :func:`native_scan_dataframe` selects, given the scan's columns by name (each named so)."""


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
        zero = Typed(lit_as(0, LongType()), LongType(), 0)
        base = source if observe is None else observe(source)
        return PendingColumns(base, {**records(values), SEQ_COLUMN: zero}, bits)
    names = {name: f"{prefix}{i}" for i, name in enumerate(values)}
    selected = [v.alias(names[n]) for n, v in values.items()]
    # A column never null, so null only where an outer join's side is missing: the sequence,
    # or beside a sequence of width 0 (0: a literal Spark folds, not a column carried along)
    # a mark Spark prunes unless a join pads it.
    if bits == 0:
        present = column(f"{prefix}row")
        order = Typed(lit_as(0, LongType()), LongType(), 0)
        selected.append(lit(True).alias(f"{prefix}row"))
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
    return _value_of(key, keys, range(len(keys)), otherwise=lit(-1))


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
    return F.split(lit(_NUL.join(map(str, values))), _NUL).cast(f"array<{dtype}>")


_NUL = "\x00"


def _optional_string_at(at: Column, values: Sequence[str | None]) -> Column:
    """``values[at]`` from one array literal: each value behind a one-character mark, so that a
    None (the empty string) keeps its own element and comes back as null."""
    marked = _array_literal(["" if v is None else f"={v}" for v in values], "string")
    return F.substring(F.nullif(F.get(marked, at), lit("")), 2, _MAX_CHARS)


_MAX_CHARS = 2**31 - 1


def _sequence(base: Column, row_id: Column, bits: int | None) -> Column:
    # Never null (an unknown file raises first, a row id is always there); the coalesce tells
    # Spark so, and keeps the column non-nullable like the data source's.
    value = F.ifnull(base + row_id, lit(0))
    return value.alias(SEQ_COLUMN) if bits is None else with_bits(value, SEQ_COLUMN, bits)


def _tied_sequence(
    ties: SharedValues, files: Sequence[InputFile], bases: Mapping[Path, int], row_id: Column
) -> Column:
    """The sequence of a scan only an order reads, to break ties: a row's file position only
    where rows of another file may hold its key (``ties``), from its file's name, which Spark
    gives each row without building ``_metadata``; else the row id alone."""
    shared = ties.condition(column(ties.column))
    if shared is None:
        return F.ifnull(row_id, lit(0)).alias(SEQ_COLUMN)
    name = F.input_file_name()
    names = [spark_input_file_name(f.real_path) for f in files]
    base = _value_of(
        name, names, [bases[f.real_path] for f in files], otherwise=_unknown_file(name, "long")
    )
    return _sequence(F.when(shared, base).otherwise(0), row_id, None)


def _unknown_file(key: Column, dtype: str | None = None) -> Column:
    """Fails the read of a file the scan did not list, naming its ``key`` (path or size)."""
    message = F.concat(lit("the scan did not list the file Spark read: "), key.cast("string"))
    error = F.raise_error(message)
    return error.cast(dtype) if dtype else error


def _spark_read(spark: Any, resolved: ResolvedScan, files: Sequence[InputFile]) -> DataFrame:
    """Spark's reader over ``files``, giving the table columns in output order and types (and,
    for parquet, each row's index in its file: :data:`ROW_INDEX_COLUMN`); the same read as
    before while the files are as they were (:func:`~engine.exec.spark.spark_reads.reused_read`)."""
    names = resolved.table_columns
    how = (
        resolved.format,
        resolved.options,
        StructType([resolved.spark_schema[name] for name in names]).json(),
        resolved.unread_schema.json(),
    )
    return reused_read(
        spark, [f.real_path for f in files], how, lambda: _new_read(spark, resolved, files)
    )


def _new_read(spark: Any, resolved: ResolvedScan, files: Sequence[InputFile]) -> DataFrame:
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
            selected.append(F.when(raw.isNull(), lit("")).otherwise(raw).alias(name))
        else:
            selected.append(lit(None).cast(StringType()).alias(name))
    return frame.select(*selected)


def _json_native(t: MajorType) -> bool:
    if t.minor == MinorType.MAP:
        return bool(t.fields) and all(_json_native(child) for _, child in t.fields)
    if t.minor == MinorType.LIST:
        return t.element is not None and _json_native(t.element)
    return t.minor in _JSON_NATIVE_TYPES


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


def column(name: str) -> Column:
    """The top-level column ``name``, whatever characters it holds (dots included)."""
    return top_column(name)


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
    test = getattr(column(name), method)(lit(literal))
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


def read_natively(path: str) -> tuple[ResolvedScan, InputFile] | None:
    """The scan that read the file at ``path`` (its real path) with Spark's reader, and the file,
    if one did (the latest ones are kept): its errors are explained the Drill way."""
    with _NATIVE_FILES_LOCK:
        return _NATIVE_FILES.get(path)
