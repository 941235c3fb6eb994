"""The result set loader of seed 002: readers write rows (or whole Arrow batches), it makes batches.

Lifecycle::

    loader = ResultSetLoader(row_limit=4096, byte_limit=8 * 2**20, projection={"a", "m.x"})
    writer = loader.writer()
    loader.start_batch()
    while rows remain and not loader.is_full():
        writer.start_row(); ...; writer.save_row()      # or loader.write_record({...})
    batch = loader.harvest()                            # a pyarrow.RecordBatch
    ... loader.start_batch() for the next batch ...
    loader.close()

**Columns** are added implicitly, on first use of a writer by name (Drill's late NULL type until the
first value) or by ``write_record`` (typed by the first value); ``writer.add_column(name, type)`` and
the ``schema`` argument declare them. ``append_batch`` adds whole Arrow data after the rows written
so far (see :mod:`engine.scan.loader_arrow`). ``harvest()`` refuses a row in progress, except the
overflow row, which continues in the next batch.

**Limits and overflow.** A batch is full at ``row_limit`` rows or when its estimated size reaches
``byte_limit``. Sizes are estimated from the values written (see :mod:`engine.scan.loader_values`:
type width or string length, 1 byte per null or map, 4 per array); the estimate only grows as values
are written. When a value would push the batch past the byte limit, the row in progress *overflows*:
it, with everything written for it so far (array elements included, at any depth), becomes the first
row of the next batch; the harvested batch holds only the complete rows before it. Starting a row in
a batch that is already full by rows or bytes overflows the same way. A column added during the
overflow row is not in the harvested batch but appears in the next one (seed 002, "Schema
Considerations"), and a type settled or widened in that row applies from the next batch on. A single
row larger than ``byte_limit`` is not split and does not loop: in an empty batch it is written whole,
alone, and the batch is full after it.

**Schema versions.** ``schema_version`` goes up on every schema change: a column or member added, a
late (NULL) type settled by the first value, a widening, an array whose elements turn out nullable.
Every harvested batch carries the version of its own schema in its metadata
(``b"drill.schema_version"``; see :func:`batch_schema_version`): two batches of one loader with the
same version have the same schema. After an overflow the loader's version may be ahead of the
harvested batch's.

**Projection and types.** Unprojected columns get dummy writers (see :mod:`engine.scan.writers`).
Output types are Drill types mapped by :func:`engine.types.to_arrow`; a value of the wrong type for
its column raises :class:`~engine.errors.SchemaConflictError` naming ``source``. With a
:class:`~engine.scan.vector_cache.VectorCache` shared by the readers of a scan, columns come out in
the cache's order with its types.

**Unions.** With ``allow_union`` (what a JSON scan asks for unless its selection says
``unionType: false``), a column meeting a value of another kind (an array after strings, a map
after numbers) does not conflict: it becomes a UNION column (Drill's UNION type, an Arrow
``drill.union`` array of JSON texts, see :mod:`engine.types`), its earlier values re-encoded. A
conflict inside an array makes the enclosing named column the union.

>>> loader = ResultSetLoader(row_limit=2)
>>> loader.start_batch()
>>> for record in [{"a": 1}, {"a": 2, "b": "x"}, {"a": 3}]:
...     if loader.is_full():
...         print(loader.harvest().to_pylist()); loader.start_batch()
...     loader.write_record(record)
[{'a': 1, 'b': None}, {'a': 2, 'b': 'x'}]
>>> loader.harvest().to_pylist(), loader.schema_version
([{'a': 3, 'b': None}], 2)
"""

from __future__ import annotations

import enum
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from engine.errors import LoaderStateError
from engine.scan.loader_arrow import drill_type_of, empty_columns_batch, join_segments
from engine.scan.loader_build import kind_of
from engine.scan.loader_projection import LoaderProjection, ProjectionFilter
from engine.scan.loader_state import ColumnState
from engine.scan.loader_tuple import RootState
from engine.scan.vector_cache import VectorCache
from engine.scan.writers import RowSetWriter
from engine.types import from_arrow_field, to_arrow_field

SCHEMA_VERSION_KEY = b"drill.schema_version"

__all__ = [
    "SCHEMA_VERSION_KEY",
    "LoaderStateError",
    "ResultSetLoader",
    "batch_schema_version",
]


def batch_schema_version(batch: pa.RecordBatch) -> int:
    """The schema version a harvested batch carries.

    >>> loader = ResultSetLoader(); loader.start_batch(); loader.write_record({"a": 1})
    >>> batch_schema_version(loader.harvest())
    1
    """
    return int((batch.schema.metadata or {})[SCHEMA_VERSION_KEY])


class _Lifecycle(enum.Enum):
    NEW = "new"
    ACTIVE = "active"
    HARVESTED = "harvested"
    CLOSED = "closed"


class ResultSetLoader:
    """Assembles a reader's rows into record batches (see the module docstring)."""

    def __init__(
        self,
        *,
        row_limit: int = 4096,
        byte_limit: int = 8 * 2**20,
        projection: Iterable[str | Sequence[str]] | ProjectionFilter | None = None,
        vector_cache: VectorCache | None = None,
        schema: pa.Schema | None = None,
        source: str | None = None,
        allow_union: bool = False,
    ) -> None:
        if row_limit < 1 or byte_limit < 1:
            raise ValueError(
                f"row_limit and byte_limit must be positive: {row_limit}, {byte_limit}"
            )
        self.row_limit = row_limit
        self.byte_limit = byte_limit
        self.cache = vector_cache
        self.source = source
        self.allow_union = allow_union
        self._version = 0
        self._output_version: int | None = None
        self._lifecycle = _Lifecycle.NEW
        self._py_rows = 0  # saved rows held in the column states (after the segments)
        self._row_open = False
        self._row_version = 0
        self._overflow_at: int | None = None  # the overflow row's slot in the column states
        self._overflow_version = 0
        self._batch_bytes = 0
        self._row_bytes = 0
        self._lookahead_bytes = 0
        self._segments: list[pa.RecordBatch] = []  # whole Arrow data, before the written rows
        self._segment_rows = 0
        self._queue: deque[pa.RecordBatch] = deque()  # Arrow data for the following batches
        self._frozen: list[ColumnState] = []
        self._batch_count = 0
        self._total_rows = 0
        self._root = RootState(self, LoaderProjection.of(projection))
        self._writer = RowSetWriter(self._root, self)
        for field in schema or ():
            major = from_arrow_field(field)
            state = self._root.member(field.name, kind_of(major), major)
            if state is not None:
                state.declared = True

    # ------------------------------------------------------------ what the column states call

    @property
    def schema_version(self) -> int:
        """The version of the current schema (it may include the overflow row's changes)."""
        return self._version

    @property
    def harvest_version(self) -> int:
        """The schema version the batch being written will have when harvested."""
        return self._overflow_version if self._overflow_at is not None else self._version

    def row_slot(self) -> int:
        if not self._row_open:
            raise LoaderStateError("a column was written outside a row: call start_row() first")
        return self._py_rows

    def add_bytes(self, size: int) -> None:
        self._row_bytes += size
        if (
            self._overflow_at is None
            and self._batch_bytes + self._row_bytes > self.byte_limit
            and self._segment_rows + self._py_rows > 0
        ):
            self._begin_overflow()

    def schema_changed(self, state: ColumnState) -> int:
        self._version += 1
        if self.cache is not None:
            owner: Any = state
            while owner.name is None:
                owner = owner.parent
            self.cache.register(owner.path, owner.major_type())
        return self._version

    def freezing(self, state: ColumnState) -> bool:
        if self._row_open or self._overflow_at is not None:
            self._frozen.append(state)
            return True
        return False

    # ------------------------------------------------------------ lifecycle

    def writer(self) -> RowSetWriter:
        """The row writer (the same object for the loader's whole life)."""
        self._require_open()
        return self._writer

    def start_batch(self) -> None:
        """Begin a batch; it starts with the look-ahead row and queued Arrow data, if any."""
        self._require_open()
        if self._lifecycle is _Lifecycle.ACTIVE:
            raise LoaderStateError("start_batch() while a batch is active: harvest() it first")
        self._lifecycle = _Lifecycle.ACTIVE
        self._segments = []
        self._segment_rows = 0
        self._batch_bytes = self._lookahead_bytes
        self._lookahead_bytes = 0
        self._fill_from_queue()

    def is_full(self) -> bool:
        """Whether the batch can take no more rows: harvest it (overflow data waits for the next)."""
        return (
            self._overflow_at is not None
            or bool(self._queue)
            or self.row_count >= self.row_limit
            or self._batch_bytes >= self.byte_limit
        )

    @property
    def row_count(self) -> int:
        """Complete rows in the batch being written (not counting an overflow row)."""
        rows = self._py_rows if self._overflow_at is None else self._overflow_at
        return self._segment_rows + rows

    @property
    def pending_rows(self) -> int:
        """Complete rows given to the loader that wait for a later batch (overflow, queued data)."""
        queued = sum(batch.num_rows for batch in self._queue)
        if self._lifecycle is not _Lifecycle.ACTIVE:
            return self._py_rows + queued
        if self._overflow_at is not None:
            return self._py_rows - self._overflow_at + queued
        return queued

    @property
    def batch_bytes(self) -> int:
        """The estimated size of the complete rows of the batch being written."""
        return self._batch_bytes

    @property
    def batch_count(self) -> int:
        return self._batch_count

    @property
    def total_rows(self) -> int:
        """Rows harvested so far."""
        return self._total_rows

    @property
    def output_schema_version(self) -> int | None:
        """The schema version of the last harvested batch (None before the first harvest)."""
        return self._output_version

    @property
    def schema(self) -> pa.Schema:
        """The current schema of all projected columns, with the current schema version."""
        fields = [to_arrow_field(s.name or "", s.major_type()) for s in self._root.ordered()]
        return pa.schema(fields, metadata={SCHEMA_VERSION_KEY: str(self._version).encode()})

    def _require_open(self) -> None:
        if self._lifecycle is _Lifecycle.CLOSED:
            raise LoaderStateError("the result set loader is closed")

    def _require_active(self, what: str) -> None:
        self._require_open()
        if self._lifecycle is not _Lifecycle.ACTIVE:
            raise LoaderStateError(f"{what} outside a batch: call start_batch() first")

    # ------------------------------------------------------------ rows

    def _start_row(self) -> None:
        self._require_active("start_row()")
        if self._row_open:
            raise LoaderStateError("start_row() while a row is in progress: save_row() it first")
        if self._overflow_at is not None or self._queue:
            raise LoaderStateError("the batch is full: harvest() it, then start_batch()")
        self._row_open = True
        self._row_version = self._version
        self._row_bytes = 0
        if self.row_count > 0 and (
            self.row_count >= self.row_limit or self._batch_bytes >= self.byte_limit
        ):
            self._begin_overflow()

    def _save_row(self) -> None:
        if not self._row_open:
            raise LoaderStateError("save_row() without start_row()")
        self._row_open = False
        self._py_rows += 1
        if self._overflow_at is None:
            self._batch_bytes += self._row_bytes
            self._unfreeze()
        else:
            self._lookahead_bytes = self._row_bytes
        self._row_bytes = 0

    def _discard_row(self) -> None:
        if not self._row_open:
            return
        self._root.truncate(self._py_rows)
        self._row_open = False
        self._row_bytes = 0
        self._overflow_at = None  # only the open row can be the overflow row
        self._unfreeze()

    def _begin_overflow(self) -> None:
        self._overflow_at = self._py_rows
        self._overflow_version = self._row_version

    def _unfreeze(self) -> None:
        for state in self._frozen:
            state.unfreeze()
        self._frozen.clear()

    def write_record(self, record: Mapping[str, Any]) -> None:
        """Write one row from a (nested) dict: dicts are maps, lists arrays, None null.

        A record that fails (a type conflict) leaves no row behind (the columns it added stay);
        the error propagates.
        """
        self._start_row()
        try:
            write = self._root.write_member
            for name, value in record.items():
                write(name, value)
        except BaseException:
            self._discard_row()
            raise
        self._save_row()

    # ------------------------------------------------------------ whole Arrow data

    def append_batch(self, data: pa.RecordBatch | pa.Table) -> None:
        """Add whole rows of Arrow data, after the rows written so far.

        Columns are matched to the loader's by name; new ones are added, missing ones are null,
        unprojected ones dropped. Rows beyond the batch's limits wait, sliced (not copied), for the
        following batches: ``is_full()`` says when to harvest.
        """
        self._require_active("append_batch()")
        if self._row_open:
            raise LoaderStateError("append_batch() while a row is in progress")
        batches = data.to_batches() if isinstance(data, pa.Table) else [data]
        for batch in batches:
            if batch.num_rows:
                self._queue.append(batch)
            elif not self.is_full():
                self._absorb(batch.schema)
        if not batches and not self.is_full():
            self._absorb(data.schema)
        self._fill_from_queue()

    def append_arrays(self, columns: Mapping[str, pa.Array | pa.ChunkedArray]) -> None:
        """Add whole rows given as named Arrow arrays of equal length (see :meth:`append_batch`)."""
        self.append_batch(pa.table(dict(columns)))

    def _absorb(self, schema: pa.Schema) -> None:
        for field in schema:
            major = drill_type_of(field, source=self.source)
            self._root.member(field.name, kind_of(major), major)

    def _seal(self) -> None:
        """Turn the rows written so far into a segment, so Arrow data can follow them."""
        if self._py_rows == 0:
            return
        fields, arrays = self._root.take_columns(self._py_rows)
        if fields:
            segment = pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
        else:
            segment = empty_columns_batch(self._py_rows, None)
        self._segments.append(segment)
        self._segment_rows += self._py_rows
        self._py_rows = 0

    def _fill_from_queue(self) -> None:
        while self._queue and self._overflow_at is None and not self._row_open:
            rows = self.row_count
            if rows >= self.row_limit:
                return
            head = self._queue[0]
            per_row = max(head.nbytes / head.num_rows, 1.0)
            room = self.byte_limit - self._batch_bytes
            fit = min(head.num_rows, self.row_limit - rows, int(room // per_row) if room > 0 else 0)
            if fit <= 0:
                if rows > 0:
                    return
                fit = 1  # a row larger than the byte limit goes alone
            try:
                self._absorb(head.schema)
            except BaseException:
                self._queue.popleft()  # rejected data must not block the queue
                raise
            self._seal()
            if fit == head.num_rows:
                self._queue.popleft()
                part = head
            else:
                part = head.slice(0, fit)
                self._queue[0] = head.slice(fit)
            self._segments.append(part)
            self._segment_rows += fit
            self._batch_bytes += math.ceil(fit * per_row)

    # ------------------------------------------------------------ harvest

    def harvest(self) -> pa.RecordBatch:
        """The batch's complete rows as a record batch; the overflow row stays for the next."""
        self._require_active("harvest()")
        overflow = self._overflow_at is not None
        if self._row_open and not overflow:
            raise LoaderStateError("harvest() while a row is in progress: save_row() it first")
        if overflow:
            assert self._overflow_at is not None
            rows, version = self._overflow_at, self._overflow_version
        else:
            rows, version = self._py_rows, self._version
            self._unfreeze()
        fields, arrays = self._root.take_columns(rows)
        if self._segments:
            arrays = [
                join_segments(self._segments, field, array) for field, array in zip(fields, arrays)
            ]
        total = self._segment_rows + rows
        metadata = {SCHEMA_VERSION_KEY: str(version).encode()}
        if fields:
            batch = pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields, metadata=metadata))
        else:
            batch = empty_columns_batch(total, metadata)
        self._py_rows -= rows
        self._overflow_at = None
        self._unfreeze()
        self._segments = []
        self._segment_rows = 0
        self._batch_bytes = 0
        self._lifecycle = _Lifecycle.HARVESTED
        self._output_version = version
        self._batch_count += 1
        self._total_rows += total
        return batch

    def close(self) -> None:
        """Release everything; the loader cannot be used afterwards."""
        self._lifecycle = _Lifecycle.CLOSED
        self._segments = []
        self._queue.clear()
        self._frozen.clear()
        self._root = RootState(self, LoaderProjection.of(()))

    def __enter__(self) -> ResultSetLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
