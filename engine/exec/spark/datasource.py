"""The Drill scan framework as a Spark Python data source (``spark.read.format("drill")``).

The driver resolves a scan's schema once (:func:`~engine.exec.spark.scan_resolution.resolve_scan`);
Spark then runs one task per file, and each task reads its file with the same
:class:`~engine.scan.framework.FileScan` the local executor uses (readers, result set loader, schema
tracker) and yields Arrow batches cast exactly to ``to_arrow_schema(spark_schema, timezone="UTC")``
(Spark rejects anything else). A DrillError a task raises travels to the driver as a note on the
task's error (:func:`encode_error`, :func:`decode_error`).
"""

from __future__ import annotations

import contextlib
import json
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.json as pa_json
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from engine.errors import DrillError, ExecutionError, SchemaConflictError, StorageError
from engine.exec.spark.scan_request import DATA_SOURCE_NAME, ScanRequest
from engine.exec.spark.scan_resolution import SubsetScan, is_implicit, resolve_request, scan_tracker
from engine.exec.spark.spark_types import committed_schema, conform_batch
from engine.scan.framework import (
    PartitionLayout,
    implicit_values,
)
from engine.scan.tracker import SchemaMode
from engine.storage.engines import FileEngine
from engine.storage.paths import InputFile

SKIPPED_COLUMN = "__drill_skipped"
"""A long column a scan's schema may end with (``onError: skip``): null on every record; each
file that skipped bad records adds one row, all else null, holding how many it skipped. The
executor counts and drops those rows (:mod:`engine.exec.spark.metrics`)."""
ERROR_NOTE = "drill-error: "
"""Prefix of the note a task adds to a DrillError: the error as JSON, rebuilt on the driver."""

_JSON_BLOCK = 16 << 20
_registered: weakref.WeakSet[Any] = weakref.WeakSet()  # the sessions the source is registered in
_registered_lock = threading.Lock()


# ---------------------------------------------------------------- tasks


def read_file(
    request: ScanRequest, file: InputFile, spark_schema: StructType, *, layout: PartitionLayout
) -> Iterator[pa.RecordBatch]:
    """The batches of one file of a resolved scan, as the data source yields them.

    The tracker starts from the committed schema (``spark_schema``'s table columns) in strict
    mode. A :class:`DrillError` leaves with a note (:data:`ERROR_NOTE`) that lets the driver
    rebuild it from Spark's error text (:func:`decode_error`). When ``spark_schema`` ends with
    :data:`SKIPPED_COLUMN`, the batches carry it, and a last row counts the records skipped.
    """
    counting = bool(spark_schema.fields) and spark_schema.fields[-1].name == SKIPPED_COLUMN
    if counting:
        spark_schema = StructType(spark_schema.fields[:-1])
    with carrying_drill_errors():
        engine = request.engine.create()
        implicit = [
            f.name for f in spark_schema.fields if is_implicit(f.name, request.file_columns, layout)
        ]
        tracker = scan_tracker(
            request.selection,
            request.file_columns,
            layout,
            projection=request.projection,
            mode=SchemaMode.STRICT,
        )
        committed = committed_schema(spark_schema, implicit)
        if len(committed):
            tracker.apply_reader_schema(committed, file=None)
        target = to_arrow_schema(spark_schema, timezone="UTC")

        def conformed(batch: pa.RecordBatch, skipped: int | None = None) -> pa.RecordBatch:
            batch = conform_batch(batch, target)
            if not counting:
                return batch
            marks = pa.nulls(batch.num_rows, pa.int64()) if skipped is None else [skipped]
            return batch.append_column(SKIPPED_COLUMN, pa.array(marks, pa.int64()))

        fast = _json_lines_table(engine, request, file, committed)
        if fast is not None:
            implicit_of_file = implicit_values(file)
            for batch in fast.to_batches(max_chunksize=request.batch_rows):
                projected = tracker.project_batch(
                    batch, file=str(file.path), implicit_values=implicit_of_file
                )
                yield conformed(projected)
            return
        scan = SubsetScan(engine, request, [file], tracker)
        for batch in scan.batches():
            yield conformed(batch)
        if counting and scan.skipped:
            yield conformed(pa.record_batch({SKIPPED_COLUMN: pa.nulls(1)}), skipped=scan.skipped)


@contextlib.contextmanager
def carrying_drill_errors() -> Iterator[None]:
    """Give a DrillError leaving this block the note that rebuilds it on the driver."""
    try:
        yield
    except DrillError as err:
        if not any(note.startswith(ERROR_NOTE) for note in getattr(err, "__notes__", ())):
            err.add_note(ERROR_NOTE + encode_error(err))
        raise


def _json_lines_table(
    engine: FileEngine, request: ScanRequest, file: InputFile, committed: pa.Schema
) -> pa.Table | None:
    """JSON lines parsed straight into the committed types, reading only the committed columns.

    pyarrow's reader with an explicit schema is strict (a string where a number was committed,
    a fraction in an integer column, an array in a text column all fail), so anything it refuses
    goes the general way (:class:`FileScan`), which reports the conflict or the bad line. Keys are
    matched with their exact spelling here.
    """
    if not len(committed) or file.size == 0 or engine.format_of(request.selection) != "json":
        return None
    try:
        if engine.reader_options(request.selection).skip_errors or not is_json_lines(file):
            return None
    except OSError:  # gone or unreadable: the general way says so, naming the file
        return None
    parse = pa_json.ParseOptions(explicit_schema=committed, unexpected_field_behavior="ignore")
    read = pa_json.ReadOptions(block_size=min(file.size + 1, _JSON_BLOCK))
    try:
        return pa_json.read_json(file.real_path, read_options=read, parse_options=parse)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError):  # a UNION is not for pyarrow
        return None


def is_json_lines(file: InputFile) -> bool:
    """Whether the first non-blank line of ``file`` is one complete JSON object."""
    if file.size == 0:
        return True
    with open(file.real_path, "rb") as binary:
        for line in binary:
            if line.strip():
                try:
                    return isinstance(json.loads(line), dict)
                except (ValueError, RecursionError):
                    return False
    return True


class DrillFilePartition(InputPartition):
    """One input partition: one file of the scan (``index`` is its place in the file order)."""

    def __init__(self, index: int, file: InputFile) -> None:
        super().__init__(index)
        self.index = index
        self.file = file


class DrillScanReader(DataSourceReader):
    """Reads a resolved scan: one partition per file, in the scan's file order."""

    def __init__(self, request: ScanRequest, schema: StructType) -> None:
        self.request = request
        self.schema = schema
        if request.files is None:
            self.request = request.with_files(request.engine.create().list_files(request.selection))
        assert self.request.files is not None
        self.layout = PartitionLayout.of(self.request.files)

    def partitions(self) -> Sequence[InputPartition]:
        assert self.request.files is not None
        return [DrillFilePartition(i, f) for i, f in enumerate(self.request.files)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, DrillFilePartition)
        yield from read_file(self.request, partition.file, self.schema, layout=self.layout)


class DrillDataSource(DataSource):
    """``spark.read.format("drill").options(**ScanRequest(...).to_options())``; see the module
    docstring. Without a schema given to the reader, the schema is resolved when Spark asks."""

    @classmethod
    def name(cls) -> str:
        return DATA_SOURCE_NAME

    def schema(self) -> StructType:
        with carrying_drill_errors():
            request = ScanRequest.from_options(self.options)
            return resolve_request(request.engine.create(), request).spark_schema

    def reader(self, schema: StructType) -> DataSourceReader:
        with carrying_drill_errors():
            return DrillScanReader(ScanRequest.from_options(self.options), schema)


def register_data_source(spark: Any) -> None:
    """Register :class:`DrillDataSource` with ``spark`` (once per session; later calls are no-ops).

    The sessions it is registered with are remembered here, not in their configuration: the
    engine sets no setting of a user's session."""
    with _registered_lock:
        if spark in _registered:
            return
        with _active(spark):
            spark.dataSource.register(DrillDataSource)
        _registered.add(spark)


@contextlib.contextmanager
def _active(spark: Any) -> Iterator[None]:
    """``spark`` as the JVM thread's active session for the block, then the one before it.

    Spark checks a new data source's name against the data sources of the *active* session
    and registers it in ``spark``'s: with another session active (the first one made, where
    ``spark`` came from ``newSession()``), a name that one knows is refused
    (``DATA_SOURCE_ALREADY_EXISTS``) and ``spark`` is left without it."""
    from pyspark.sql.utils import is_remote

    if is_remote():  # the server registers in the client's own session
        yield
        return
    sessions = spark._jvm.org.apache.spark.sql.SparkSession
    before = sessions.getActiveSession()
    sessions.setActiveSession(spark._jsparkSession)
    try:
        yield
    finally:
        if before.isDefined():
            sessions.setActiveSession(before.get())
        else:
            sessions.clearActiveSession()


# ---------------------------------------------------------------- errors across processes


def encode_error(err: DrillError) -> str:
    """A DrillError as one line of JSON (:func:`decode_error` rebuilds it).

    >>> err = StorageError("malformed JSON", file="/d/a.json", line=3, column=7)
    >>> str(decode_error(encode_error(err))) == str(err)
    True
    """
    data: dict[str, Any] = {"class": type(err).__name__, "hint": err.hint}
    if isinstance(err, SchemaConflictError):
        data.update(column=err.column, old_type=err.old_type, new_type=err.new_type, file=err.file)
    elif isinstance(err, StorageError):
        where = err.file or ""
        if err.line is not None:
            where += f":{err.line}" + (f":{err.column}" if err.column is not None else "")
        message = err.message
        if where and message.startswith(where + ": "):
            message = message[len(where) + 2 :]
        data.update(message=message, file=err.file, line=err.line, column=err.column)
    elif isinstance(err, ExecutionError):
        data.update(
            message=err.reason,
            operator_id=err.operator_id,
            operator_kind=err.operator_kind,
            fragment=err.fragment,
        )
    else:
        data.update(message=err.message)
    return json.dumps(data, ensure_ascii=True)


def decode_error(text: str) -> DrillError | None:
    """The DrillError :func:`encode_error` wrote, or None if ``text`` is not one."""
    try:
        data = json.loads(text)
        kind = data.pop("class")
        hint = data.pop("hint", None)
        if kind == "SchemaConflictError":
            return SchemaConflictError(hint=hint, **data)
        if kind == "StorageError":
            message = data.pop("message")
            return StorageError(message, hint=hint, **data)
        if kind == "ExecutionError":
            message = data.pop("message")
            return ExecutionError(message, hint=hint, **data)
        return DrillError(data["message"], hint=hint)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
