"""Buffering for blocking local operators (order, segment, union distinct, join, aggregates, windowframe).

A blocking operator reads its whole input before it emits anything. :class:`BatchBuffer` holds those
batches, counts their bytes against ``ctx.max_buffered_bytes`` (raising :class:`BufferLimitError`
instead of ever dropping rows), and concatenates them into one table whose schema unifies every
batch's (a column missing from a batch is null there, maps gain the union of their members).
:func:`rechunk` cuts the result into output batches of at most ``ctx.batch_rows`` rows.

>>> import pyarrow as pa
>>> buffer = BatchBuffer("7", "order", max_bytes=1 << 20)
>>> buffer.add(pa.record_batch({"a": [3, 1]}))
>>> buffer.add(pa.record_batch({"a": [2], "b": ["x"]}))
>>> table = buffer.table()
>>> table.to_pylist()
[{'a': 3, 'b': None}, {'a': 1, 'b': None}, {'a': 2, 'b': 'x'}]
>>> [batch.num_rows for batch in rechunk(table, 2)]
[2, 1]
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from engine.errors import BufferLimitError
from engine.types.batches import concat_batches

BUFFER_LIMIT_HINT = (
    "raise the limit: run_plan(..., max_buffered_bytes=N) or "
    "`drill-dagster run --max-buffered-bytes N`; or run the plan on the spark executor"
)
"""What to do when an operator needs more than ``max_buffered_bytes``."""


class BatchBuffer:
    """The input batches of a blocking operator, bounded by ``max_bytes``.

    ``operator_id`` and ``kind`` only name the operator in the error message.

    >>> import pyarrow as pa
    >>> buffer = BatchBuffer("3", "segment", max_bytes=8)
    >>> buffer.add(pa.record_batch({"a": [1, 2]}))
    Traceback (most recent call last):
    ...
    engine.errors.BufferLimitError: segment 3 needs to buffer more than 8 bytes ...
    """

    def __init__(self, operator_id: str, kind: str, *, max_bytes: int) -> None:
        self.operator_id = operator_id
        self.kind = kind
        self.max_bytes = max_bytes
        self.batches: list[pa.RecordBatch] = []
        self.nbytes = 0
        self.num_rows = 0
        self.last_schema: pa.Schema | None = None

    def add(self, batch: pa.RecordBatch) -> None:
        """Keep ``batch``; raises :class:`BufferLimitError` when the total passes the limit."""
        self.last_schema = batch.schema
        if batch.num_rows == 0:
            return
        size = batch.nbytes
        if self.nbytes + size > self.max_bytes:
            raise BufferLimitError(
                f"{self.kind} {self.operator_id} needs to buffer more than {self.max_bytes} bytes "
                f"of input ({self.num_rows + batch.num_rows} rows so far) and stopped rather "
                "than drop rows",
                hint=BUFFER_LIMIT_HINT,
            )
        self.nbytes += size
        self.num_rows += batch.num_rows
        self.batches.append(batch)

    def extend(self, batches: Iterable[pa.RecordBatch]) -> BatchBuffer:
        """Add every batch of ``batches``; returns the buffer."""
        for batch in batches:
            self.add(batch)
        return self

    def table(self) -> pa.Table:
        """Everything buffered as one table (see :func:`concat_batches`)."""
        return concat_batches(self.batches, schema=self.last_schema)

    def batch(self) -> pa.RecordBatch:
        """Everything buffered as one record batch, ready for ``evaluate`` and ``take``."""
        return to_batch(self.table())

    def clear(self) -> None:
        self.batches = []
        self.nbytes = 0
        self.num_rows = 0


def to_batch(table: pa.Table) -> pa.RecordBatch:
    """``table`` as a single record batch (its chunks combined).

    >>> import pyarrow as pa
    >>> to_batch(pa.table({"a": [1]})).num_rows
    1
    """
    batches = table.combine_chunks().to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)


def rechunk(table: pa.Table, batch_rows: int) -> list[pa.RecordBatch]:
    """``table`` as batches of at most ``batch_rows`` rows; one empty batch for an empty table, so
    the schema still reaches downstream operators.
    """
    if table.num_rows == 0:
        return [pa.RecordBatch.from_pylist([], schema=table.schema)]
    return [b for b in table.to_batches(max_chunksize=batch_rows) if b.num_rows]
