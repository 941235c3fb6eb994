"""The local ``flatten`` operator.

For every record, the value of ``expr`` decides the output: an array gives one copy of the record per
element, with the element written at ``ref``; an empty array gives no record (R-FLATTEN-EMPTY); a
scalar, a map, a null or a missing value gives one record with that value at ``ref``. With ``drop``
the fields that ``expr`` references are removed from the output records first.

>>> import pyarrow as pa
>>> from engine.exec.local.registry import ExecContext
>>> from engine.exec.protocol import BatchSource, FragmentExecutor
>>> from engine.plan.operators import Flatten
>>> source = BatchSource("1", [pa.record_batch({"id": [1, 2, 3], "tags": [["x", "y"], [], None]})])
>>> plan = Flatten(id="2", ref="tag", expr="tags", drop=True)
>>> FragmentExecutor(create_flatten(plan, [source], ExecContext())).run().to_pylist()
[{'id': 1, 'tag': 'x'}, {'id': 1, 'tag': 'y'}, {'id': 3, 'tag': None}]
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.exec.local.registry import ExecContext, creator
from engine.exec.protocol import BatchOperator, SingleInputOperator
from engine.expr import field_refs, parse_expression, parse_field_ref
from engine.expr.arrow.evaluate import evaluate
from engine.expr.arrow.trees import remove_path, set_path
from engine.plan.operators import Flatten
from engine.types import is_union, union_array

# Flatten's output batches hold about this much: an array of n elements copies its record n times.
OUTPUT_BATCH_BYTES = 8 * 2**20


def flatten_values(values: pa.Array) -> tuple[pa.Array, pa.Array]:
    """``(parents, elements)``: for each output record, the input row it copies and its value.

    >>> import pyarrow as pa
    >>> parents, elements = flatten_values(pa.array([[1, 2], [], None, [3]]))
    >>> parents.to_pylist(), elements.to_pylist()
    ([0, 0, 2, 3], [1, 2, None, 3])
    """
    dtype = values.type
    if is_union(dtype):
        return _flatten_union(values)
    if not (pa.types.is_list(dtype) or pa.types.is_large_list(dtype)):
        return pa.array(range(len(values)), type=pa.int64()), values
    parents, elements = pc.list_parent_indices(values), pc.list_flatten(values)
    if not values.null_count:
        return parents, elements
    # A null array stands for one null element, so its record is kept (R-FLATTEN-EMPTY): append
    # (row, null) pairs and put them in row order with a stable sort (works for list<null> too).
    null_rows = pc.indices_nonzero(values.is_null()).cast(pa.int64())
    parents = pa.concat_arrays([parents.cast(pa.int64()), null_rows])
    elements = pa.concat_arrays([elements, pa.nulls(len(null_rows), elements.type)])
    order = pc.sort_indices(parents)
    return parents.take(order), elements.take(order)


def _flatten_union(values: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Flatten a UNION column value by value: an array gives its elements, anything else itself."""
    parents: list[int] = []
    elements: list[object] = []
    for row, value in enumerate(values.to_pylist()):
        items = value if isinstance(value, list) else [value]
        parents.extend([row] * len(items))
        elements.extend(items)
    return pa.array(parents, type=pa.int64()), union_array(elements)


class FlattenOperator(SingleInputOperator):
    """Streams: each input batch becomes output batches of about :data:`OUTPUT_BATCH_BYTES` each.

    An array of n elements gives n copies of its record, so the output can be far larger than
    the input: the copies take only the columns the output keeps (not the dropped ones, not the
    value ``ref`` replaces), and are made one bounded batch at a time, as the consumer asks.
    """

    kind = "flatten"

    def __init__(self, op: Flatten, upstream: BatchOperator) -> None:
        super().__init__(op.id, upstream)
        self.expr = parse_expression(op.expr)
        self.ref = tuple(str(step) for step in parse_field_ref(op.ref).path)
        self.dropped = (
            [tuple(str(step) for step in ref.path) for ref in field_refs(self.expr)]
            if op.drop
            else []
        )

    def process(self, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        parents, elements = flatten_values(evaluate(self.expr, batch))
        kept = batch
        for path in self.dropped:
            kept = remove_path(kept, path)
        if len(self.ref) == 1 and self.ref[0] in kept.schema.names:
            # Replaced by the elements: not worth copying (a null column keeps its place).
            index = kept.schema.get_field_index(self.ref[0])
            kept = kept.set_column(index, self.ref[0], pa.nulls(kept.num_rows))
        if len(parents) == 0:
            yield set_path(kept.take(parents), self.ref, elements)
            return
        sizes = row_bytes(kept)[parents.to_numpy(zero_copy_only=False)] + row_bytes(elements)
        for start, stop in bounded_slices(sizes, OUTPUT_BATCH_BYTES):
            rows = parents.slice(start, stop - start)
            yield set_path(kept.take(rows), self.ref, elements.slice(start, stop - start))


def bounded_slices(sizes: np.ndarray, limit: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` ranges covering ``sizes`` whose sums stay near ``limit`` (a range holds
    at least one item).

    >>> list(bounded_slices(np.array([4, 4, 4, 9, 1]), 8))
    [(0, 2), (2, 3), (3, 4), (4, 5)]
    """
    ends = np.cumsum(sizes, dtype=np.int64)
    start = 0
    while start < len(sizes):
        base = ends[start - 1] if start else 0
        stop = int(np.searchsorted(ends, base + limit, side="right"))
        stop = max(stop, start + 1)
        yield start, stop
        start = stop


def row_bytes(data: pa.RecordBatch | pa.Array) -> np.ndarray:
    """About how many bytes each row of ``data`` takes (nested values counted per row, so one
    row holding a large array weighs what it holds)."""
    if isinstance(data, pa.RecordBatch):
        total = np.zeros(data.num_rows, dtype=np.int64)
        for column in data.columns:
            total += row_bytes(column)
        return total
    dtype, count = data.type, len(data)
    if pa.types.is_struct(dtype):
        total = np.ones(count, dtype=np.int64)
        for index in range(dtype.num_fields):
            total += row_bytes(pc.struct_field(data, [index]))
        return total
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        lengths = pc.fill_null(pc.list_value_length(data), 0).to_numpy().astype(np.int64)
        inner = np.concatenate([[0], np.cumsum(row_bytes(pc.list_flatten(data)))])
        stops = np.cumsum(lengths)
        return inner[stops] - inner[stops - lengths] + 8
    if (
        pa.types.is_string(dtype)
        or pa.types.is_binary(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_large_binary(dtype)
    ):
        return pc.fill_null(pc.binary_length(data), 0).to_numpy().astype(np.int64) + 8
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    try:
        width = dtype.bit_width // 8 or 1
    except ValueError:  # variable width (maps, unions, ...): the average row
        width = data.nbytes // count + 1
    return np.full(count, width, dtype=np.int64)


@creator("flatten")
def create_flatten(op: Flatten, inputs: list[BatchOperator], ctx: ExecContext) -> BatchOperator:
    return FlattenOperator(op, inputs[0])
