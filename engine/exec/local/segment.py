"""The local ``segment`` operator, and :func:`group_numbers`, value equality for any Arrow type.

Segment is blocking: it reads every record, groups them (globally, not in runs) by the tuple of its
``exprs``, and emits each group contiguously, groups in order of first appearance and records in input
order inside a group. It writes the group's number (1, 2, 3, ... in that order) at ``ref``
(R-SEG-ORDER). Null is a group value like any other.

>>> import pyarrow as pa
>>> from engine.exec.local.registry import ExecContext
>>> from engine.exec.protocol import BatchSource, FragmentExecutor
>>> from engine.plan.operators import Segment
>>> source = BatchSource("1", [pa.record_batch({"g": ["b", "a", "b", None]})])
>>> op = create_segment(Segment(id="2", ref="seg", exprs=["g"]), [source], ExecContext())
>>> FragmentExecutor(op).run().to_pylist()  # doctest: +NORMALIZE_WHITESPACE
[{'g': 'b', 'seg': 1}, {'g': 'b', 'seg': 1}, {'g': 'a', 'seg': 2}, {'g': None, 'seg': 3}]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import DrillError
from engine.exec.local.buffering import BatchBuffer, rechunk
from engine.exec.local.registry import ExecContext, creator
from engine.exec.protocol import BatchOperator, SingleInputOperator
from engine.expr import parse_expression, parse_field_ref
from engine.expr.arrow.evaluate import evaluate
from engine.expr.arrow.trees import set_path
from engine.plan.operators import Segment
from engine.types import is_union


def group_numbers(columns: Sequence[pa.Array], length: int) -> np.ndarray:
    """For each row, the 0-based number of its tuple of values in ``columns``, in order of first
    appearance. Equal tuples get equal numbers; null equals null; maps and arrays compare deeply
    (a map's members by name, an array's elements in order). No columns: every row is group 0.

    >>> import pyarrow as pa
    >>> group_numbers([pa.array([3, None, 3, None]), pa.array([[1], [2], [1], [2]])], 4).tolist()
    [0, 1, 0, 1]
    """
    codes = [_codes(column) for column in columns]
    if not codes:
        return np.zeros(length, dtype=np.int64)
    if len(codes) == 1:
        return codes[0]  # already dense, in first-appearance order
    return _combine(codes)


def _codes(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Dense codes (first-appearance order) with equal codes exactly for equal values."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    dtype = array.type
    if pa.types.is_dictionary(dtype):
        return _codes(array.dictionary_decode())
    if pa.types.is_null(dtype):
        return np.zeros(len(array), dtype=np.int64)
    if is_union(dtype):  # JSON texts with sorted keys: equal texts are equal values
        return _codes(array.storage)
    if pa.types.is_struct(dtype):
        members = [_codes(pc.struct_field(array, [i])) for i in range(dtype.num_fields)]
        return _combine([_validity(array), *members])
    if pa.types.is_fixed_size_list(dtype):
        return _codes(pc.cast(array, pa.list_(dtype.value_field)))
    if pa.types.is_map(dtype):
        entries = pa.StructArray.from_arrays([array.keys, array.items], names=["key", "value"])
        as_list = pa.LargeListArray.from_arrays(
            pc.cast(array.offsets, pa.int64()), entries, mask=array.is_null()
        )
        return _codes(as_list)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return _combine([_validity(array), _list_codes(array)])
    try:
        encoded = pc.dictionary_encode(array, null_encoding="encode")
    except pa.ArrowNotImplementedError:
        raise DrillError(
            f"values of type {dtype} cannot be compared for equality",
            hint="transform the value into a scalar, map or array first",
        ) from None
    return np.asarray(encoded.indices, dtype=np.int64)


def _list_codes(array: pa.ListArray | pa.LargeListArray) -> np.ndarray:
    """Codes of each list's sequence of element codes, packed as bytes and encoded."""
    element_codes = _codes(array.values)
    offsets = np.asarray(array.offsets, dtype=np.int64) * 8
    packed = pa.Array.from_buffers(
        pa.large_binary(),
        len(array),
        [None, pa.py_buffer(offsets), pa.py_buffer(element_codes.tobytes())],
    )
    return np.asarray(pc.dictionary_encode(packed).indices, dtype=np.int64)


def _validity(array: pa.Array) -> np.ndarray:
    if not array.null_count:
        return np.zeros(len(array), dtype=np.int64)
    return np.asarray(array.is_null(), dtype=np.int64)


def _combine(codes: list[np.ndarray]) -> np.ndarray:
    """One code per row for the tuple of codes; re-encoded after each step so nothing overflows."""
    combined = _dense(codes[0])
    for part in codes[1:]:
        if not len(part):
            break
        width = int(part.max()) + 1
        combined = _dense(combined * width + part)
    return combined


def _dense(values: np.ndarray) -> np.ndarray:
    encoded = pc.dictionary_encode(pa.array(values, type=pa.int64()))
    return np.asarray(encoded.indices, dtype=np.int64)


def stable_order(numbers: np.ndarray) -> np.ndarray:
    """The stable sort order of dense group numbers (a radix sort when they fit 16 bits).

    >>> stable_order(np.array([2, 0, 2, 1, 0])).tolist()
    [1, 4, 3, 0, 2]
    """
    if len(numbers) and int(numbers.max()) < 1 << 16:
        return np.argsort(numbers.astype(np.uint16), kind="stable")  # NumPy radix-sorts these
    return np.argsort(numbers, kind="stable")


class SegmentOperator(SingleInputOperator):
    """Blocking: buffers the input, then emits it grouped by ``exprs`` with the group number."""

    kind = "segment"

    def __init__(self, op: Segment, upstream: BatchOperator, ctx: ExecContext) -> None:
        super().__init__(op.id, upstream)
        self.ref = tuple(str(step) for step in parse_field_ref(op.ref).path)
        self.exprs = [parse_expression(text) for text in op.exprs]
        self.batch_rows = ctx.batch_rows
        self.buffer = BatchBuffer(op.id, self.kind, max_bytes=ctx.max_buffered_bytes)

    def process(self, batch: pa.RecordBatch) -> Iterable[pa.RecordBatch]:
        self.buffer.add(batch)
        return ()

    def finish(self) -> Iterable[pa.RecordBatch]:
        if self.buffer.last_schema is None:
            return ()
        batch = self.buffer.batch()
        self.buffer.clear()
        values = [evaluate(expr, batch) for expr in self.exprs]
        numbers = group_numbers(values, batch.num_rows)
        order = stable_order(numbers)
        grouped = batch.take(pa.array(order))
        keyed = set_path(grouped, self.ref, pa.array(numbers[order] + 1, type=pa.int64()))
        return rechunk(pa.Table.from_batches([keyed]), self.batch_rows)

    def release(self) -> None:
        super().release()
        self.buffer.clear()


@creator("segment")
def create_segment(op: Segment, inputs: list[BatchOperator], ctx: ExecContext) -> BatchOperator:
    return SegmentOperator(op, inputs[0], ctx)
