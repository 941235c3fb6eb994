"""The local ``order`` and ``limit`` operators.

``order`` is blocking and stable (R-ORDER-STABLE): it sorts by each ordering's expression, ``asc`` or
``desc``, with nulls first (the default) or last whatever the direction; a float NaN is greater than
every number (last ascending, first descending), as on Spark. With ``within`` it sorts
inside each segment (a run of records with equal ``within`` values) and keeps segments in place.

``limit`` streams the records with 0-based index ``first <= i < last`` over the whole input (R-LIMIT)
and stops reading its input once it is past ``last``.

>>> import pyarrow as pa
>>> from engine.exec.local.registry import ExecContext
>>> from engine.exec.protocol import BatchSource, FragmentExecutor
>>> from engine.plan.operators import Limit, Order
>>> source = BatchSource("1", [pa.record_batch({"k": [2, None, 1, 3]})])
>>> plan = Order.model_validate(
...     {"@id": 2, "op": "order", "orderings": [{"order": "desc", "expr": "k"}]}
... )
>>> order = create_order(plan, [source], ExecContext())
>>> limit = create_limit(Limit(id="3", first=1, last=3), [order], ExecContext())
>>> FragmentExecutor(limit).run().column("k").to_pylist()
[3, 2]
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import DrillError
from engine.exec.local.buffering import BatchBuffer, rechunk
from engine.exec.local.registry import ExecContext, creator
from engine.exec.local.segment import group_numbers
from engine.exec.protocol import BatchOperator, IterOutcome, SingleInputOperator
from engine.expr import Expr, parse_expression, parse_field_ref
from engine.expr.arrow.evaluate import evaluate
from engine.expr.arrow.trees import get_path
from engine.plan.operators import Limit, Order
from engine.types import is_union as is_drill_union

SortKey = tuple[str, str]


def sort_indices(
    keys: list[tuple[pa.Array, str, str]], *, runs: np.ndarray | None = None
) -> pa.Array:
    """The stable sort permutation for ``keys``: ``(values, "asc"|"desc", "first"|"last")`` each,
    most significant first; ``runs`` (non-decreasing run numbers) keeps runs in place.

    >>> import pyarrow as pa
    >>> sort_indices([(pa.array([1, None, 2, 1]), "desc", "last")]).to_pylist()
    [2, 0, 3, 1]
    >>> sort_indices([(pa.array([1.0, float("nan"), 2.0]), "desc", "first")]).to_pylist()
    [1, 2, 0]
    """
    for values, _, _ in keys:
        if not _sortable(values.type):
            if is_drill_union(values.type):
                raise DrillError(
                    "cannot order by a UNION value (its records hold values of several kinds)",
                    hint="order by cast(x as VARCHAR) or another typed expression of it",
                )
            raise DrillError(
                f"cannot order by a value of type {values.type}",
                hint="order by a scalar member of the map or array instead",
            )
    columns: dict[str, pa.Array] = {}
    sort_keys: list[SortKey] = []
    if runs is not None:
        columns["run"] = pa.array(runs, type=pa.int64())
        sort_keys.append(("run", "ascending"))
    for i, (values, direction, nulls) in enumerate(keys):
        if values.null_count:
            # A key of its own places this column's nulls, whatever the direction of the values.
            columns[f"null{i}"] = values.is_null()
            sort_keys.append((f"null{i}", "descending" if nulls == "first" else "ascending"))
        if pa.types.is_null(values.type):
            continue
        if pa.types.is_floating(values.type) and pc.any(pc.is_nan(values)).as_py():
            # NaN is the greatest value, as in Spark (Arrow alone puts it last either way).
            columns[f"nan{i}"] = pc.is_nan(values)
            sort_keys.append((f"nan{i}", "descending" if direction == "desc" else "ascending"))
        columns[f"key{i}"] = values
        sort_keys.append((f"key{i}", "descending" if direction == "desc" else "ascending"))
    if not sort_keys:
        length = len(runs) if runs is not None else (len(keys[0][0]) if keys else 0)
        return pa.array(np.arange(length, dtype=np.int64))
    return pc.sort_indices(pa.table(columns), sort_keys=sort_keys)


def _sortable(dtype: pa.DataType) -> bool:
    nested = pa.types.is_nested(dtype) or pa.types.is_union(dtype) or is_drill_union(dtype)
    return not nested


def runs_of(values: pa.Array) -> np.ndarray:
    """Run numbers: 0 for the first record, +1 each time the value differs from the previous one.

    >>> import pyarrow as pa
    >>> runs_of(pa.array([1, 1, None, None, 1])).tolist()
    [0, 0, 1, 1, 2]
    """
    codes = group_numbers([values], len(values))
    changes = np.empty(len(codes), dtype=np.int64)
    if len(codes):
        changes[0] = 0
        changes[1:] = codes[1:] != codes[:-1]
    return np.cumsum(changes)


class OrderOperator(SingleInputOperator):
    """Blocking: buffers the input, sorts it stably, emits batches of ``ctx.batch_rows`` rows."""

    kind = "order"

    def __init__(self, op: Order, upstream: BatchOperator, ctx: ExecContext) -> None:
        super().__init__(op.id, upstream)
        self.orderings: list[tuple[Expr, str, str]] = [
            (parse_expression(o.expr), o.order.lower(), o.null_collation.lower())
            for o in op.orderings
        ]
        self.within = parse_field_ref(op.within).path if op.within else None
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
        keys = [(evaluate(expr, batch), order, nulls) for expr, order, nulls in self.orderings]
        runs = runs_of(get_path(batch, self.within)) if self.within else None
        ordered = batch.take(sort_indices(keys, runs=runs))
        return rechunk(pa.Table.from_batches([ordered]), self.batch_rows)

    def release(self) -> None:
        super().release()
        self.buffer.clear()


@creator("order")
def create_order(op: Order, inputs: list[BatchOperator], ctx: ExecContext) -> BatchOperator:
    return OrderOperator(op, inputs[0], ctx)


class LimitOperator(BatchOperator):
    """Streams the records with index ``first <= i < last``; reads no input past ``last``."""

    kind = "limit"

    def __init__(self, op: Limit, upstream: BatchOperator) -> None:
        super().__init__(op.id, [upstream])
        self.first = op.first
        self.last = op.last
        self.position = 0  # index of the next input record

    def produce(self) -> pa.RecordBatch | None:
        while self.last is None or self.position < self.last:
            if self.pull() is IterOutcome.NONE:
                return None
            batch = self.inputs[0].batch
            assert batch is not None
            start = self.position
            self.position += batch.num_rows
            begin = max(self.first - start, 0)
            end = batch.num_rows if self.last is None else min(self.last - start, batch.num_rows)
            if begin < end:
                return batch.slice(begin, end - begin)
        return None


@creator("limit")
def create_limit(op: Limit, inputs: list[BatchOperator], ctx: ExecContext) -> BatchOperator:
    return LimitOperator(op, inputs[0])
