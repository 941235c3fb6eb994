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

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from engine.exec.local.registry import ExecContext, creator
from engine.exec.protocol import BatchOperator, SingleInputOperator
from engine.expr import field_refs, parse_expression, parse_field_ref
from engine.expr.arrow.evaluate import evaluate
from engine.expr.arrow.trees import remove_path, set_path
from engine.plan.operators import Flatten
from engine.types import is_union, union_array


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
    """Streams: each input batch becomes one output batch (possibly empty)."""

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

    def process(self, batch: pa.RecordBatch) -> Iterable[pa.RecordBatch]:
        parents, elements = flatten_values(evaluate(self.expr, batch))
        output = batch.take(parents)
        for path in self.dropped:
            output = remove_path(output, path)
        return [set_path(output, self.ref, elements)]


@creator("flatten")
def create_flatten(op: Flatten, inputs: list[BatchOperator], ctx: ExecContext) -> BatchOperator:
    return FlattenOperator(op, inputs[0])
