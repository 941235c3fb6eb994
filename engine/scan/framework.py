"""The scan framework: files of a selection -> readers -> result set loader -> schema tracker -> batches.

One :class:`FileScan` is one scan operator's work. For each file it opens the storage engine's
reader, takes the reader's Arrow fast path when it has one, else writes the reader's records through
a :class:`~engine.scan.loader.ResultSetLoader` (one :class:`~engine.scan.vector_cache.VectorCache`
for the whole scan, so every reader produces the same layout), then aligns each batch to the scan's
output schema with the :class:`~engine.scan.tracker.ScanSchemaTracker` (missing columns as typed
nulls, implicit ``filename``/``dirN`` columns, provided-schema types).

The same code runs in the local executor and inside Spark tasks (the Spark data source).

>>> import tempfile, pathlib
>>> from engine.storage.engines import create_engine
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> _ = (tmp / "2024").mkdir(); _ = (tmp / "2024" / "a.json").write_text('{"x": 1}\\n{"x": 2, "y": "b"}')
>>> scan = FileScan(create_engine("fs", {"type": "fs", "root": str(tmp)}), {"path": "/"})
>>> [b.to_pylist() for b in scan.batches()]
[[{'x': 1, 'y': None, 'dir0': '2024'}, {'x': 2, 'y': 'b', 'dir0': '2024'}]]
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import SchemaConflictError, StorageError
from engine.scan.loader import ResultSetLoader
from engine.scan.projection import name_key
from engine.scan.tracker import ScanSchemaTracker
from engine.scan.vector_cache import VectorCache
from engine.storage.partitions import parse_partition_dir
from engine.storage.paths import InputFile

DEFAULT_BATCH_ROWS = 65_536
FILE_COLUMNS = ("fqn", "filepath", "filename", "suffix")


def allows_union(selection: Mapping[str, Any]) -> bool:
    """Whether a scan gives a column whose values change kind the UNION type (else: a conflict).

    Drill's ``exec.enable_union_type`` as a selection option, ``unionType``. It is on by default:
    the logical plan's records are schemaless (the reference interpreter takes any value anywhere),
    and the corpus flattens a field that is an array in one record and a string in the next.
    It is off where a schema is promised: ``schemaMode: strict`` (the first batch commits the
    types) and ``unionType: false``; a provided ``schema`` converts to its own types instead.

    >>> allows_union({"path": "a.json"}), allows_union({"path": "a.json", "unionType": False})
    (True, False)
    """
    if str(selection.get("schemaMode", "change")).lower() == "strict":
        return False
    value = selection.get("unionType", True)
    return value if isinstance(value, bool) else str(value).lower() not in ("false", "0", "no")


def implicit_values(file: InputFile) -> dict[str, str | None]:
    """The implicit column values of one file: file columns, ``dir0``, ``dir1``, ... and the
    Hive-style partition columns (a directory ``day=2024-01-02`` is column ``day``, as a
    partitioned store writes it and Spark's readers read it back; its ``dirN`` is left out).

    >>> from pathlib import Path
    >>> f = InputFile(Path("t/day=2024-01-02/x/a.json"), Path("/r/t/day=2024-01-02/x/a.json"),
    ...               ("day=2024-01-02", "x"), 1)
    >>> {k: v for k, v in implicit_values(f).items() if k not in FILE_COLUMNS}
    {'day': '2024-01-02', 'dir1': 'x'}
    """
    path = file.path.as_posix()
    name = posixpath.basename(path)
    values: dict[str, str | None] = {
        "fqn": path,
        "filepath": posixpath.dirname(path),
        "filename": name,
        "suffix": name.rsplit(".", 1)[1] if "." in name else None,
    }
    for i, directory in enumerate(file.dirs):
        hive = parse_partition_dir(directory)
        if hive is None:
            values[f"dir{i}"] = directory
        else:
            values[hive[0]] = hive[1]
    return values


class RowFilter(Protocol):
    """A filter a parquet read applies: row groups whose statistics exclude ``expression`` are not
    read, and of the rows read those where ``mask`` is true are kept."""

    @property
    def expression(self) -> pc.Expression: ...

    def mask(self, columns: pa.Table) -> pa.Array | pa.ChunkedArray: ...


@dataclass(frozen=True)
class PartitionLayout:
    """The partition columns of a scan's files: ``dirN`` up to ``depth`` and the Hive ``keys``."""

    depth: int = 0
    keys: tuple[str, ...] = ()

    @staticmethod
    def of(files: Iterable[InputFile]) -> PartitionLayout:
        """The layout of ``files``: ``dirN`` for each level some file has a plain directory at,
        a column per Hive key (``k=v``) in the order first met.

        >>> from pathlib import Path
        >>> files = [InputFile(Path(p), Path(p), tuple(p.split("/")[:-1]), 1)
        ...          for p in ["a/day=1/f.json", "day=2/f.json"]]
        >>> PartitionLayout.of(files)
        PartitionLayout(depth=1, keys=('day',))
        """
        depth = 0
        keys: list[str] = []
        for file in files:
            for i, directory in enumerate(file.dirs):
                hive = parse_partition_dir(directory)
                if hive is None:
                    depth = max(depth, i + 1)
                elif name_key(hive[0]) not in {name_key(k) for k in keys}:
                    keys.append(hive[0])
        return PartitionLayout(depth, tuple(keys))

    def is_partition(self, name: str) -> bool:
        """Whether ``name`` is one of the layout's partition columns."""
        lowered = name.lower()
        if lowered.startswith("dir") and lowered[3:].isdigit():
            return int(lowered[3:]) < self.depth
        return name_key(name) in {name_key(k) for k in self.keys}


class FileScan:
    """Reads one selection of a file-based storage engine as aligned Arrow batches.

    ``projection`` is the scan's projection list (None: the whole record); ``file_columns`` are the
    implicit file columns the plan references (they are not part of the wildcard).

    ``row_filter`` is asked, for each parquet file, for a filter to apply in the read: it gets
    the file's columns that reach the output unchanged (same name, same type) and returns a
    :class:`RowFilter` over them, or None to read every row. :meth:`filtered_batches` says which
    batches it filtered.

    Batches hold ``batch_rows`` records; given ``batch_bytes``, a file read through Arrow whose
    records are narrow comes in batches of up to that many bytes (at most eight times the
    rows), so that the operators reading them spend less of their time per batch.
    """

    def __init__(
        self,
        engine: Any,
        selection: Mapping[str, Any],
        *,
        projection: Sequence[str] | None = None,
        file_columns: Sequence[str] = (),
        batch_rows: int = DEFAULT_BATCH_ROWS,
        batch_bytes: int | None = None,
        row_filter: Callable[[pa.Schema], RowFilter | None] | None = None,
    ) -> None:
        self.engine = engine
        self.row_filter = row_filter
        self.selection = dict(selection)
        self.projection = projection
        self.file_columns = [c for c in file_columns if c in FILE_COLUMNS]
        self.batch_rows = batch_rows
        self.batch_bytes = batch_bytes
        self.files_read = 0
        self.skipped = 0
        self.tracker: ScanSchemaTracker | None = None
        self._filtered = False

    def _batch_rows_of(self, table: pa.Table) -> int:
        """Rows per batch of ``table``: ``batch_rows``, or more of narrow records, up to
        ``batch_bytes`` a batch (at most eight times as many rows): each operator then handles
        fewer, larger batches, spending less of its time per batch in Python."""
        if self.batch_bytes is None or not table.num_rows:
            return self.batch_rows
        per_row = max(1, table.nbytes // table.num_rows)
        return max(self.batch_rows, min(8 * self.batch_rows, self.batch_bytes // per_row))

    def files(self) -> list[InputFile]:
        return self.engine.list_files(self.selection)

    def _tracker(self, files: list[InputFile]) -> ScanSchemaTracker:
        projection: list[str] | None = None
        if self.projection is not None or self.file_columns:
            projection = [*(self.projection if self.projection is not None else ["**"])]
            projection += [c for c in self.file_columns if c not in projection]
        layout = PartitionLayout.of(files)
        return ScanSchemaTracker(
            projection,
            provided_schema=self.selection.get("schema"),
            mode=str(self.selection.get("schemaMode", "change")).lower(),
            partition_depth=layout.depth,
            partition_keys=layout.keys,
            union=allows_union(self.selection),
        )

    def _reader_columns(self) -> list[str] | None:
        """The file columns a reader must read (None: all): the projection's top-level names."""
        if self.projection is None or any(p.startswith("*") for p in self.projection):
            return None
        return sorted({p.split(".", 1)[0].split("[", 1)[0] for p in self.projection})

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Every batch of every file, aligned to the scan's (possibly widening) output schema."""
        for batch, _ in self.filtered_batches():
            yield batch

    def filtered_batches(self) -> Iterator[tuple[pa.RecordBatch, bool]]:
        """:meth:`batches`, each with whether ``row_filter``'s Expression was applied to it."""
        files = self.files()
        tracker = self.tracker = self._tracker(files)
        cache = VectorCache()
        open_reader = self.engine.reader_factory(self.selection) if files else None
        for file in files:
            assert open_reader is not None
            self.files_read += 1
            implicit = implicit_values(file)
            self._filtered = False
            for batch in self._read_file(open_reader(file), file, cache, tracker):
                projected = tracker.project_batch(
                    batch, file=str(file.path), implicit_values=implicit
                )
                yield projected, self._filtered

    def _pushed_filter(
        self, reader: Any, columns: list[str] | None, tracker: ScanSchemaTracker, file: InputFile
    ) -> RowFilter | None:
        """``row_filter``'s filter for one parquet file, over the columns whose values reach
        the output as read (a column the tracker converts is left out: the filter would test
        other values than the records hold)."""
        if self.row_filter is None or reader.format != "parquet" or "schema" in self.selection:
            return None
        try:
            schema = reader.arrow_schema(columns)
        except (KeyError, pa.ArrowInvalid):
            return None  # duplicate names: leave the read (and its error) as it was
        tracker.apply_reader_schema(schema, file=str(file.path))
        output = tracker.output_schema()
        hidden = {name_key(name) for name in tracker.implicit_schema().names}
        exact = [
            f
            for f in schema
            if name_key(f.name) not in hidden
            and output.get_field_index(f.name) >= 0
            and output.field(f.name).type == f.type
        ]
        return self.row_filter(pa.schema(exact))

    def _read_file(
        self, reader: Any, file: InputFile, cache: VectorCache, tracker: ScanSchemaTracker
    ) -> Iterator[pa.RecordBatch]:
        # Only parquet reads fewer columns faster; text formats parse whole records anyway.
        columns = self._reader_columns() if reader.format == "parquet" else None
        pushed = self._pushed_filter(reader, columns, tracker, file)
        tables = None
        if pushed is not None:
            tables = reader.read_tables(columns=columns, prune=pushed.expression, keep=pushed.mask)
            self._filtered = True
        if tables is None:
            tables = reader.read_tables(columns=columns)
        if tables is not None:
            rows, schema = 0, None
            for table in tables:  # one part of the file at a time (parquet: row groups)
                rows, schema = rows + table.num_rows, table.schema
                if table.num_rows or not self._filtered:
                    yield from table.to_batches(max_chunksize=self._batch_rows_of(table))
            if self._filtered and rows == 0 and schema is not None:
                # nothing passed: the schema still reaches downstream, as unfiltered reads do
                yield pa.RecordBatch.from_pylist([], schema=schema)
            self.skipped += reader.skipped  # rows the fast path dropped under onError: skip
            return
        loader = ResultSetLoader(
            row_limit=self.batch_rows,
            vector_cache=cache,
            source=str(file.path),
            allow_union=allows_union(self.selection),
        )
        loader.start_batch()
        for value, line in reader.records():
            if loader.is_full():
                yield loader.harvest()
                loader.start_batch()
            if not isinstance(value, Mapping):
                raise StorageError(
                    f"a record must be a JSON object, not {type(value).__name__}",
                    file=str(file.path),
                    line=line,
                    hint='wrap the value in an object, e.g. {"value": ...}',
                )
            try:
                loader.write_record(value)
            except SchemaConflictError as err:
                raise SchemaConflictError(
                    column=err.column,
                    old_type=err.old_type,
                    new_type=err.new_type,
                    file=f"{file.path}:{line}",
                    hint="give the column one type in the selection's `schema`",
                ) from err
        if loader.row_count or loader.pending_rows:
            yield loader.harvest()
        self.skipped += reader.skipped
        loader.close()
