"""The local ``union`` operator.

Without ``distinct`` it streams its inputs one after the other, in ``inputs`` order (U12); a schema
change between inputs reaches downstream as ``OK_NEW_SCHEMA``. With ``distinct`` it is blocking: it
buffers every input under one unified schema (a field missing from an input is null there) and keeps
the first occurrence of each record, in arrival order. Records are equal when every field is equal,
deeply, with null equal to absent (R-NULL-ABSENT).

>>> import pyarrow as pa
>>> from engine.exec.local.registry import ExecContext
>>> from engine.exec.protocol import BatchSource, FragmentExecutor
>>> from engine.plan.operators import Union
>>> a = BatchSource("1", [pa.record_batch({"x": [1, 2]})])
>>> b = BatchSource("2", [pa.record_batch({"x": [2, 3], "y": [None, "q"]})])
>>> op = create_union(Union(id="3", inputs=["1", "2"], distinct=True), [a, b], ExecContext())
>>> FragmentExecutor(op).run().to_pylist()
[{'x': 1, 'y': None}, {'x': 2, 'y': None}, {'x': 3, 'y': 'q'}]
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pyarrow as pa

from engine.exec.local.buffering import BatchBuffer, rechunk
from engine.exec.local.registry import ExecContext, creator
from engine.exec.local.segment import group_numbers
from engine.exec.protocol import BatchOperator
from engine.plan.operators import Union


def first_occurrences(table: pa.Table) -> pa.Array:
    """Indexes of the first record of each distinct record of ``table``, in table order.

    >>> import pyarrow as pa
    >>> first_occurrences(pa.table({"a": [1, 1, None, None], "b": ["x", "x", "y", "y"]})).to_pylist()
    [0, 2]
    """
    numbers = group_numbers(table.columns, table.num_rows)
    # Numbers follow first appearance, so the first index of each number is already increasing.
    _, first = np.unique(numbers, return_index=True)
    return pa.array(first, type=pa.int64())


class UnionOperator(BatchOperator):
    """Concatenates its inputs in order; with ``distinct``, keeps each distinct record once."""

    kind = "union"

    def __init__(self, op: Union, inputs: list[BatchOperator], ctx: ExecContext) -> None:
        super().__init__(op.id, inputs)
        self.distinct = op.distinct
        self.batch_rows = ctx.batch_rows
        self.buffer = BatchBuffer(op.id, self.kind, max_bytes=ctx.max_buffered_bytes)
        self._current = 0  # the input being streamed
        self._pending: deque[pa.RecordBatch] | None = None

    def produce(self) -> pa.RecordBatch | None:
        if self.distinct:
            return self._produce_distinct()
        while self._current < len(self.inputs):
            if self.pull(self._current).has_batch:
                return self.inputs[self._current].batch
            self._current += 1
        return None

    def _produce_distinct(self) -> pa.RecordBatch | None:
        if self._pending is None:
            for index in range(len(self.inputs)):
                self.buffer.extend(self.drain(index))
            self._pending = deque(self._distinct_batches())
        return self._pending.popleft() if self._pending else None

    def _distinct_batches(self) -> list[pa.RecordBatch]:
        if self.buffer.last_schema is None:
            return []
        table = self.buffer.table()
        self.buffer.clear()
        return rechunk(table.take(first_occurrences(table)), self.batch_rows)

    def release(self) -> None:
        self.buffer.clear()
        self._pending = None


@creator("union")
def create_union(op: Union, inputs: list[BatchOperator], ctx: ExecContext) -> BatchOperator:
    return UnionOperator(op, inputs, ctx)
