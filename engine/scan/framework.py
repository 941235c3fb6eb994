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
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from engine.errors import SchemaConflictError, StorageError
from engine.scan.loader import ResultSetLoader
from engine.scan.tracker import ScanSchemaTracker
from engine.scan.vector_cache import VectorCache
from engine.storage.paths import InputFile

DEFAULT_BATCH_ROWS = 65_536
FILE_COLUMNS = ("fqn", "filepath", "filename", "suffix")


def implicit_values(file: InputFile) -> dict[str, str | None]:
    """The implicit column values of one file: file columns and ``dir0``, ``dir1``, ..."""
    path = file.path.as_posix()
    name = posixpath.basename(path)
    values: dict[str, str | None] = {
        "fqn": path,
        "filepath": posixpath.dirname(path),
        "filename": name,
        "suffix": name.rsplit(".", 1)[1] if "." in name else None,
    }
    values.update({f"dir{i}": d for i, d in enumerate(file.dirs)})
    return values


class FileScan:
    """Reads one selection of a file-based storage engine as aligned Arrow batches.

    ``projection`` is the scan's projection list (None: the whole record); ``file_columns`` are the
    implicit file columns the plan references (they are not part of the wildcard).
    """

    def __init__(
        self,
        engine: Any,
        selection: Mapping[str, Any],
        *,
        projection: Sequence[str] | None = None,
        file_columns: Sequence[str] = (),
        batch_rows: int = DEFAULT_BATCH_ROWS,
    ) -> None:
        self.engine = engine
        self.selection = dict(selection)
        self.projection = projection
        self.file_columns = [c for c in file_columns if c in FILE_COLUMNS]
        self.batch_rows = batch_rows
        self.files_read = 0
        self.skipped = 0
        self.tracker: ScanSchemaTracker | None = None

    def files(self) -> list[InputFile]:
        return self.engine.list_files(self.selection)

    def _tracker(self, files: list[InputFile]) -> ScanSchemaTracker:
        projection: list[str] | None = None
        if self.projection is not None or self.file_columns:
            projection = [*(self.projection if self.projection is not None else ["**"])]
            projection += [c for c in self.file_columns if c not in projection]
        return ScanSchemaTracker(
            projection,
            provided_schema=self.selection.get("schema"),
            mode=str(self.selection.get("schemaMode", "change")).lower(),
            partition_depth=max((len(f.dirs) for f in files), default=0),
        )

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Every batch of every file, aligned to the scan's (possibly widening) output schema."""
        files = self.files()
        tracker = self.tracker = self._tracker(files)
        cache = VectorCache()
        for file in files:
            self.files_read += 1
            implicit = implicit_values(file)
            for batch in self._read_file(file, cache):
                yield tracker.project_batch(batch, file=str(file.path), implicit_values=implicit)

    def _read_file(self, file: InputFile, cache: VectorCache) -> Iterator[pa.RecordBatch]:
        reader = self.engine.open_reader(file, self.selection)
        table = reader.read_arrow()
        if table is not None:
            self.skipped += reader.skipped  # rows the fast path dropped under onError: skip
            yield from table.to_batches(max_chunksize=self.batch_rows)
            return
        loader = ResultSetLoader(
            row_limit=self.batch_rows, vector_cache=cache, source=str(file.path)
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
