"""A Drill scan's schema and files, resolved once on the driver (:func:`resolve_scan`), before
Spark's reader or the Drill data source (:mod:`engine.exec.spark.datasource`) reads the files.

**How the driver resolves the schema** (the choice is documented here because it is visible):

* Parquet: every file's footer is read (cheap), so the schema is exact.
* Other formats, when the selection's provided ``schema`` types every column the scan projects
  (an explicit projection, as projection pushdown gives): no file is read on the driver, since
  the readers convert their values to the provided types (no record can change the schema).
* Other formats, when the selection holds at most ``SchemaSampling.full_read_bytes`` (8 MiB by
  default): every file is read on the driver with the selection's schema mode, exactly as the local
  executor reads it, so both executors give the same schema.
* Larger selections: the driver reads a *sample*, the first ``records_per_file`` records of up to
  ``max_files`` files spread over the selection (the first file always among them), in the
  selection's schema mode, and commits the result (seed 003's strict schema-commit mode). There is
  no second pass over the data. Tasks then run the tracker in strict mode from that committed
  schema: a column first seen after the sample is dropped with a warning in the task's log; a value
  whose type conflicts with the committed one fails the task with the
  :class:`~engine.errors.SchemaConflictError` naming file, line and column. Give the selection a
  ``schema`` (or raise the sampling limits) when the first records do not show every column.
* A scan this process resolved already, over files unchanged since (path, size and modification
  time, each older than a couple of seconds), is not read again
  (:mod:`~engine.exec.spark.resolved_scans`): scheduled runs and backfills over settled files
  sample them once per process.

>>> import tempfile, pathlib
>>> from engine.storage.engines import create_engine
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> _ = (tmp / "2024").mkdir(); _ = (tmp / "2024" / "a.json").write_text('{"x": 1, "m": {"k": "v"}}')
>>> scan = resolve_scan(create_engine("fs", {"type": "fs", "root": str(tmp)}), {"path": "/"})
>>> scan.spark_schema.simpleString()
'struct<x:bigint,m:struct<k:string>,dir0:string>'
>>> [f.dirs for f in scan.files], scan.complete
([('2024',)], True)
"""

from __future__ import annotations

import io
import itertools
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import StructField, StructType

from engine.errors import StorageError
from engine.exec.spark.resolved_scans import ResolvedScans
from engine.exec.spark.scan_request import EngineSpec, ScanRequest, SchemaSampling
from engine.exec.spark.spark_types import nullable_type, spark_schema_of
from engine.exec.spark.unions import nullable_spark_type
from engine.scan.framework import (
    DEFAULT_BATCH_ROWS,
    FILE_COLUMNS,
    FileScan,
    PartitionLayout,
    allows_union,
)
from engine.scan.tracker import ScanSchemaTracker, SchemaMode
from engine.storage.engines import FileEngine
from engine.storage.formats.options import ReaderOptions
from engine.storage.formats.parquet_unions import arrow_schema_of
from engine.storage.paths import InputFile
from engine.types import MAX_DECIMAL_PRECISION, MajorType, is_union

# ---------------------------------------------------------------- schema resolution (driver)


@dataclass(frozen=True)
class ResolvedScan:
    """A scan with its files listed and its output schema settled on the driver.

    ``complete`` is True when the driver saw every record (or every parquet footer), False when
    it committed a sample. ``implicit`` names the implicit columns of the output.
    ``foreign_types`` lists parquet column types that Spark's reader would type differently from
    Drill (decimals over 38 digits, unsigned integers, times, nanosecond timestamps).
    """

    request: ScanRequest
    files: tuple[InputFile, ...]
    format: str
    options: ReaderOptions
    output_types: Mapping[str, MajorType]
    implicit: tuple[str, ...]
    spark_schema: StructType
    complete: bool
    warnings: tuple[str, ...] = ()
    foreign_types: tuple[str, ...] = ()
    # parquet file (real path) -> its rows, from the footer the schema came from
    parquet_rows: Mapping[str, int] = field(default_factory=dict)
    # parquet: the files' other columns (the output's excluded), as Spark's reader types them
    unread_schema: StructType = field(default_factory=lambda: StructType([]))

    @property
    def table_columns(self) -> list[str]:
        """The output columns the files provide (the implicit ones excluded), in output order."""
        return [name for name in self.output_types if name not in self.implicit]


def resolve_scan(
    engine: Any,
    selection: Mapping[str, Any],
    *,
    file_columns: Sequence[str] = (),
    sampling: SchemaSampling | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    projection: Sequence[str] | None = None,
) -> ResolvedScan:
    """List a selection's files and settle its output schema (see the module docstring).

    ``projection`` is the scan's explicit projection (paths in the record, e.g. ``a``, ``m.b``)
    as projection pushdown finds it; None reads the whole record.
    """
    request = ScanRequest(
        EngineSpec.of(engine),
        dict(selection),
        tuple(c for c in file_columns if c in FILE_COLUMNS),
        batch_rows,
        sampling or SchemaSampling(),
        projection=None if projection is None else tuple(projection),
    )
    return resolve_request(engine, request)


_RESOLVED: ResolvedScans[ResolvedScan] = ResolvedScans()


def resolve_request(engine: FileEngine, request: ScanRequest) -> ResolvedScan:
    """The scan resolved, or as this process resolved it already if its files did not change
    since (:mod:`~engine.exec.spark.resolved_scans`)."""
    files = tuple(engine.list_files(request.selection)) if request.files is None else request.files
    return _RESOLVED.get(
        json.dumps(request.with_files(files).to_options(), sort_keys=True),
        [f.real_path for f in files],
        lambda: _resolve_files(engine, request, files),
    )


def _resolve_files(
    engine: FileEngine, request: ScanRequest, files: tuple[InputFile, ...]
) -> ResolvedScan:
    selection = request.selection
    known = bool(files) or _names_format(selection)  # an empty directory has no format
    fmt = engine.format_of(selection) if known else "json"
    options = engine.reader_options(selection) if known else ReaderOptions()
    layout = PartitionLayout.of(files)
    tracker = scan_tracker(selection, request.file_columns, layout, projection=request.projection)
    sampling = request.sampling
    complete = True
    foreign: dict[str, set[str]] = {}  # column name key -> the types Spark reads otherwise
    parquet_rows: dict[str, int] = {}
    file_columns: dict[str, pa.DataType | None] = {}
    if fmt == "parquet":
        for file in files:
            if file.size:
                footer = _parquet_footer(engine, file)
                parquet_rows[str(file.real_path)] = footer.num_rows
                schema = arrow_schema_of(footer)
                for f in schema:
                    if not _spark_parquet_type(f.type):
                        foreign.setdefault(f.name.lower(), set()).add(str(f.type))
                tracker.apply_early_reader_schema(schema, file=str(file.path))
                for f in schema:
                    seen = file_columns.setdefault(f.name, f.type)
                    if seen is not None and seen != f.type:
                        file_columns[f.name] = None  # differs between files
    elif tracker.is_resolved:
        pass  # the provided schema types every projected column: no record can change them
    elif sum(f.size for f in files) <= sampling.full_read_bytes:
        _read_whole(engine, request, files, tracker)
    else:
        complete = _sample(engine, request, files, tracker)
    if not tracker.is_resolved:  # no file had a column: only the implicit columns are known
        tracker.apply_reader_schema(pa.schema([]), file=None)
    types = {name: nullable_type(t) for name, t in tracker.output_types().items()}
    implicit = tuple(name for name in types if is_implicit(name, request.file_columns, layout))
    return ResolvedScan(
        request=request.with_files(files),
        files=files,
        format=fmt,
        options=options,
        output_types=types,
        implicit=implicit,
        spark_schema=spark_schema_of(types),
        complete=complete,
        warnings=tuple(tracker.warnings),
        foreign_types=_read_foreign(foreign, types),
        parquet_rows=parquet_rows,
        unread_schema=_unread_schema(file_columns, types),
    )


def _read_foreign(
    foreign: Mapping[str, set[str]], output: Mapping[str, MajorType]
) -> tuple[str, ...]:
    """The foreign types of the columns the scan outputs: a column it does not read (pruned by
    projection pushdown) is no reason to leave Spark's reader, which would not read it either."""
    read = {name.lower() for name in output}
    return tuple(sorted({t for name, types in foreign.items() if name in read for t in types}))


def _unread_schema(
    file_columns: Mapping[str, pa.DataType | None], output: Mapping[str, MajorType]
) -> StructType:
    """The parquet files' columns that are not output (one type in every file, one Spark's
    reader gives as Drill does, or a decimal), as Spark types.

    Given to Spark's reader with the output columns, they are pruned from the read, but Spark
    sizes the scan as it sizes any read of these files: the files' bytes times the share of
    the row the scan keeps. A read of the output columns alone is sized at the whole files'
    bytes, and Spark then shuffles both sides of a join that it broadcasts for a plain read
    (q3's lines at scale 1: 13.9 MB, against 4.8 MB now and 4.1 MB for ``spark.read.parquet``;
    the broadcast threshold is 10 MB)."""
    taken = {name.lower() for name in output}
    fields = []
    for name, dtype in file_columns.items():
        if dtype is None or name.lower() in taken:
            continue
        if not (_spark_parquet_type(dtype) or pa.types.is_decimal(dtype)):  # pruned: any type
            continue
        try:
            spark_type = from_arrow_type(dtype)
        except Exception:  # a type PySpark does not map: the estimate leaves it out
            continue
        taken.add(name.lower())
        fields.append(StructField(name, nullable_spark_type(spark_type), True))
    return StructType(fields)


def _names_format(selection: Mapping[str, Any]) -> bool:
    return "format" in selection or "type" in selection


def scan_tracker(
    selection: Mapping[str, Any],
    file_columns: Sequence[str],
    layout: PartitionLayout,
    *,
    projection: Sequence[str] | None = None,
    mode: SchemaMode | str | None = None,
) -> ScanSchemaTracker:
    """The tracker a scan of ``selection`` uses (as :class:`FileScan` builds it)."""
    columns: list[str] | None = None
    if projection is not None or file_columns:
        columns = list(projection) if projection is not None else ["**"]
        columns += [c for c in file_columns if c not in columns]
    return ScanSchemaTracker(
        columns,
        provided_schema=selection.get("schema"),
        mode=mode or str(selection.get("schemaMode", "change")).lower(),
        partition_depth=layout.depth,
        partition_keys=layout.keys,
        union=allows_union(selection),
    )


def is_implicit(name: str, file_columns: Sequence[str], layout: PartitionLayout) -> bool:
    """Whether output column ``name`` is an implicit (file or partition) column of the scan."""
    lowered = name.lower()
    if lowered in (c.lower() for c in file_columns):
        return True
    return layout.is_partition(name)


def _parquet_footer(engine: FileEngine, file: InputFile) -> pq.FileMetaData:
    """The file's footer, read once per run (the engine's cache: the planner read it already
    for its statistics)."""
    try:
        return engine.footers.read(file.real_path)
    except (OSError, pa.ArrowInvalid) as err:
        raise StorageError(f"cannot read the parquet footer: {err}", file=str(file.path)) from err


def _spark_parquet_type(dtype: pa.DataType) -> bool:
    """Whether Spark's parquet reader gives this column the type Drill gives it (a UNION
    column, JSON text marked ``drill.union``, it would read as a plain string)."""
    if is_union(dtype):
        return False
    if pa.types.is_struct(dtype):
        return all(_spark_parquet_type(f.type) for f in dtype)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return _spark_parquet_type(dtype.value_type)
    if pa.types.is_dictionary(dtype):
        return _spark_parquet_type(dtype.value_type)
    if pa.types.is_timestamp(dtype):
        return dtype.unit in ("ms", "us")
    if pa.types.is_decimal(dtype):  # DECIMAL(p, s) in both, up to 38 digits
        return dtype.precision <= MAX_DECIMAL_PRECISION
    return not (
        pa.types.is_unsigned_integer(dtype)
        or pa.types.is_time(dtype)
        or pa.types.is_float16(dtype)
        or pa.types.is_map(dtype)
        or pa.types.is_null(dtype)
    )


def _consume(batches: Iterator[pa.RecordBatch]) -> None:
    for _ in batches:
        pass


def _sample(
    engine: FileEngine, request: ScanRequest, files: Sequence[InputFile], tracker: Any
) -> bool:
    """Feed the first records of some files to ``tracker``; True if that was everything.

    The files' first records are found and parsed in a few threads (Arrow parses without the
    GIL, and the driver waits for nothing else meanwhile); the tracker takes them in file order,
    so the schema and the first error are those of a read one file after the other."""
    sampling = request.sampling
    count = min(len(files), max(1, sampling.max_files))
    step = len(files) / count
    chosen = sorted({int(i * step) for i in range(count)})
    complete = count == len(files)
    open_reader = engine.reader_factory(request.selection)
    workdir = Path(tempfile.mkdtemp(prefix="drill-sample-"))

    def prefix_of(index: int) -> _Prefix:
        copy = workdir / f"{index}{files[index].path.suffix}"
        return _record_prefix(open_reader, files[index], sampling.records_per_file, copy)

    try:
        with _threads(len(chosen)) as pool:
            for prefix in pool.map(prefix_of, chosen):
                complete = complete and prefix.whole
                scan = SubsetScan(
                    engine, request, [prefix.file], tracker, tables=lambda _, p=prefix: p.table
                )
                _consume(scan.batches())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return complete


def _read_whole(
    engine: FileEngine, request: ScanRequest, files: Sequence[InputFile], tracker: Any
) -> None:
    """Feed every record of ``files`` to ``tracker``, Arrow parsing the files ahead in a few
    threads (the tracker still takes them in file order)."""
    if not files:
        return  # an empty directory: no format to find
    open_reader = engine.reader_factory(request.selection)
    with _threads(len(files)) as pool:
        ahead = {f.real_path: pool.submit(_arrow_lines, open_reader(f)) for f in files}

        def tables(file: InputFile) -> pa.Table | None:
            return ahead[file.real_path].result()

        _consume(SubsetScan(engine, request, files, tracker, tables=tables).batches())


def _threads(tasks: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=max(1, min(tasks, os.cpu_count() or 1, 8)))


def _arrow_lines(reader: Any) -> pa.Table | None:
    """The file as ``reader`` reads it through Arrow (JSON lines), or None: the scan reads it."""
    arrow_lines = getattr(reader, "arrow_lines", None)
    return arrow_lines() if arrow_lines is not None else None


@dataclass(frozen=True)
class _Prefix:
    """What a sample takes of one file: ``file`` itself (``whole``) or a copy of its records
    before its record ``records + 1`` (``file`` has the original's path and directories and the
    copy's bytes), and those records as Arrow read them where it did (``table``)."""

    file: InputFile
    whole: bool
    table: pa.Table | None


def _record_prefix(open_reader: Any, file: InputFile, records: int, copy: Path) -> _Prefix:
    """The first ``records`` records of ``file``, in ``copy`` where it has more."""
    with open(file.real_path, "rb") as binary:
        lines = list(itertools.islice(binary, records + 1))
    if len(lines) <= records:  # at most that many lines: read it whole
        return _Prefix(file, True, _arrow_lines(open_reader(file)))
    prefix = b"".join(lines[:records])
    copy.write_bytes(prefix)
    copied = InputFile(file.path, copy, file.dirs, len(prefix))
    # JSON lines, as most JSON files hold them: Arrow's parse of the copy is the scan's own, and
    # only a record per line makes it ``records`` rows (one parse checks and reads).
    table = _arrow_lines(open_reader(copied))
    if table is not None and table.num_rows == records:
        return _Prefix(copied, False, table)
    if _json_lines(prefix) == records:
        return _Prefix(copied, False, None)  # a record per line Arrow does not type: scan reads
    # Records spanning lines (or sharing one): find where record `records + 1` starts.
    stream = open_reader(file).records()
    try:
        nth = next(itertools.islice(stream, records, None), None)
    finally:
        stream.close()
    if nth is None:
        return _Prefix(file, True, None)
    with open(file.real_path, "rb") as binary:
        prefix = b"".join(itertools.islice(binary, nth[1] - 1))
    copy.write_bytes(prefix)
    return _Prefix(InputFile(file.path, copy, file.dirs, len(prefix)), False, None)


# Checking the structure only: no columns built (a third of a full parse), no thread pool.
_ONE_THREAD = pa_json.ReadOptions(use_threads=False)
_STRUCTURE_ONLY = pa_json.ParseOptions(
    explicit_schema=pa.schema([]), unexpected_field_behavior="ignore"
)


def _json_lines(data: bytes) -> int | None:
    """How many records ``data`` holds if each of its lines is one JSON object (Arrow's reader
    reads only that, in C++), else None."""
    try:
        return pa_json.read_json(
            io.BytesIO(data), read_options=_ONE_THREAD, parse_options=_STRUCTURE_ONLY
        ).num_rows
    except pa.ArrowInvalid:
        return None


class SubsetScan(FileScan):
    """A :class:`FileScan` of some files of a selection, feeding a tracker the caller owns;
    ``tables`` gives a file's records where the caller has read them already (None: the scan
    reads the file)."""

    def __init__(
        self,
        engine: Any,
        request: ScanRequest,
        files: Sequence[InputFile],
        tracker: ScanSchemaTracker,
        *,
        tables: Callable[[InputFile], pa.Table | None] | None = None,
    ) -> None:
        super().__init__(
            engine,
            request.selection,
            file_columns=request.file_columns,
            batch_rows=request.batch_rows,
        )
        self._subset = list(files)
        self._given_tracker = tracker
        self._tables = tables

    def files(self) -> list[InputFile]:
        return list(self._subset)

    def _tracker(self, files: list[InputFile]) -> ScanSchemaTracker:
        return self._given_tracker

    def _read_file(
        self, reader: Any, file: InputFile, cache: Any, tracker: ScanSchemaTracker
    ) -> Iterator[pa.RecordBatch]:
        table = self._tables(file) if self._tables is not None else None
        if table is None:
            yield from super()._read_file(reader, file, cache, tracker)
        else:  # read already, as ``reader`` reads it
            yield from table.to_batches(max_chunksize=self.batch_rows)
