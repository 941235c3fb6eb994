"""A ``segment`` and the ``collapsingaggregate`` over its groups, run as one hash aggregation.

A collapsingaggregate whose ``within`` is the group number a segment writes collapses exactly the
segment's groups: every group is one run of the segment's output, in first-appearance order
(R-SEG-ORDER), holding its records in input order. So instead of reordering the whole input into
runs, the fused operator numbers each record's group (:func:`~engine.exec.local.segment.group_numbers`,
the segment's own equality), aggregates by that number and takes the carryovers from each group's
last record (or its last whose ``target`` is true). Groups come out in first-appearance order, as
the segment would have emitted them; the aggregate functions are the same Arrow hash aggregates the
unfused operator uses, so the results are the same.

The executor fuses only when nothing else reads the segment and the aggregate reads neither the
group number nor anything it was written over (:func:`fusable`); ``ctx.params["fuse_segments"] =
False`` turns the rewrite off.

>>> import pyarrow as pa
>>> from engine.exec.protocol import BatchSource, FragmentExecutor
>>> from engine.plan.operators import CollapsingAggregate, Segment
>>> segment = Segment(id="2", ref="seg", exprs=["g"])
>>> collapse = CollapsingAggregate.model_validate({"@id": 3, "op": "collapsingaggregate",
...     "within": "seg", "carryovers": ["g"], "aggregations": [{"ref": "n", "expr": "count(1)"}]})
>>> source = BatchSource("1", [pa.record_batch({"g": ["b", "a", "b"]})])
>>> fused = SegmentAggregateOperator(segment, collapse, source, ExecContext())
>>> FragmentExecutor(fused).run().to_pylist()
[{'g': 'b', 'n': 2}, {'g': 'a', 'n': 1}]
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.exec.local.aggregate import (
    CollapsingAggregateOperator,
    _argument,
    _emit,
    _is_true,
    reads_only_aggregates,
)
from engine.exec.local.aggregate_functions import COUNT_ALL, aggregate_groups
from engine.exec.local.buffering import BatchBuffer
from engine.exec.local.partial_aggregate import (
    PartialAggregates,
    combinable,
    hashed_exactly,
)
from engine.exec.local.registry import ExecContext
from engine.exec.local.segment import group_numbers
from engine.exec.protocol import BatchOperator
from engine.expr import Call, Expr, FieldRef, Literal, field_refs, parse_expression, parse_field_ref
from engine.expr.arrow.evaluate import evaluate
from engine.expr.arrow.trees import build_batch, get_path
from engine.plan.operators import CollapsingAggregate, Segment

FUSE_PARAM = "fuse_segments"


def _path(name: str) -> tuple[str, ...]:
    return tuple(str(step) for step in parse_field_ref(name).path)


def _overlap(path: tuple[str, ...], other: tuple[str, ...]) -> bool:
    shorter = min(len(path), len(other))
    return path[:shorter] == other[:shorter]


def fusable(segment: Segment, collapse: CollapsingAggregate) -> bool:
    """Whether ``collapse`` collapses exactly ``segment``'s groups without reading the group number
    (nor anything it was written over), so both can run as one aggregation.

    >>> from engine.plan.operators import CollapsingAggregate, Segment
    >>> segment = Segment(id="2", ref="seg", exprs=["g"])
    >>> def collapse(within, carryovers):
    ...     return CollapsingAggregate.model_validate({"@id": 3, "op": "collapsingaggregate",
    ...         "within": within, "carryovers": carryovers, "aggregations": []})
    >>> fusable(segment, collapse("seg", ["g"])), fusable(segment, collapse("seg", ["seg"]))
    (True, False)
    >>> fusable(segment, collapse("g", ["g"]))
    False
    """
    if collapse.within is None or _path(collapse.within) != _path(segment.ref):
        return False
    ref = _path(segment.ref)
    paths = [_path(name) for name in (*collapse.carryovers, collapse.target) if name]
    for aggregation in collapse.aggregations:
        for field in field_refs(parse_expression(aggregation.expr)):
            paths.append(tuple(str(step) for step in field.path))
    return not any(_overlap(path, ref) for path in paths)


class SegmentAggregateOperator(CollapsingAggregateOperator):
    """Blocking: one record per group of the segment's ``exprs``, groups in first-appearance order."""

    kind = "collapsingaggregate"  # what the plan names; errors read as the unfused ones do

    def __init__(
        self,
        segment: Segment,
        op: CollapsingAggregate,
        upstream: BatchOperator,
        ctx: ExecContext,
    ) -> None:
        super().__init__(op, upstream, ctx)
        self.exprs = [parse_expression(text) for text in segment.exprs]
        keys = [_field_path(expr) for expr in self.exprs]
        # Carryovers that are keys can be read from each group's key, with no row to look up,
        # unless the record matters: a target, or a field read outside an aggregate.
        self.carried_keys = [keys.index(path) if path in keys else None for path in self.carryovers]
        self.calls = [c for a in self.aggregations for c in a.calls]
        self.keys_suffice = (
            self.target is None
            and None not in self.carried_keys
            and reads_only_aggregates(self.aggregations)
        )

    def generate(self) -> Iterator[pa.RecordBatch]:
        buffer = BatchBuffer(self.operator_id, self.kind, max_bytes=self.ctx.max_buffered_bytes)
        # Groups whose carryovers are their keys keep partial results past a chunk of input
        partials = PartialAggregates(self.operator_id, max_bytes=self.ctx.max_buffered_bytes)
        streams = self.keys_suffice and combinable(self.calls)
        for batch in self.drain():
            buffer.add(batch)
            if streams and buffer.nbytes >= partials.chunk_bytes:
                streams = self._add_chunk(partials, buffer)
        if buffer.last_schema is None:
            return
        if not partials.empty:
            if buffer.num_rows:
                self._add_chunk(partials, buffer)
            yield from _emit(self._grouped_output(*partials.result()), self.ctx.batch_rows)
            return
        batch = buffer.batch()
        buffer.clear()
        if batch.num_rows:
            yield from _emit(self.collapse_groups(batch), self.ctx.batch_rows)

    def _add_chunk(self, partials: PartialAggregates, buffer: BatchBuffer) -> bool:
        """Aggregate what ``buffer`` holds into ``partials`` (and empty it); False (the buffer
        kept) where the first chunk's keys (or the values a ``count_distinct`` counts) are not
        hashed exactly: the input is then buffered."""
        batch = buffer.batch()
        keys = [evaluate(expr, batch) for expr in self.exprs]
        calls = [_call_input(c, batch) for c in self.calls]
        if not partials.takes(keys, calls):
            return False
        buffer.clear()
        partials.add(keys, calls, batch.num_rows)
        return True

    def _grouped_output(self, keys: list[pa.Array], results: list[pa.Array]) -> pa.RecordBatch:
        """The output record of each group, its carryovers read from its keys."""
        carried = build_batch(
            len(keys[0]) if keys else 1,  # no key: the whole input is one group
            [(path, keys[k]) for path, k in zip(self.carryovers, self.carried_keys, strict=True)],
        )
        return self._output(carried, results)

    def collapse_groups(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """One record per group of ``batch`` (a group without a true target gives none)."""
        n = batch.num_rows
        keys = [evaluate(expr, batch) for expr in self.exprs]
        calls = [_call_input(c, batch) for c in self.calls]
        if keys and all(hashed_exactly(key.type) for key in keys):
            if self.keys_suffice:  # equal keys are identical values: any row's are the last's
                return self._grouped_output(*aggregate_groups(calls, keys))
        else:
            keys = [pa.array(group_numbers(keys, n), pa.int64())]  # the segment's own equality
        rows = pa.array(np.arange(n, dtype=np.int64))
        if self.target is not None:  # carry over from the last record whose target is true
            rows = pc.if_else(pa.array(_is_true(get_path(batch, self.target))), rows, None)
        _, (chosen, *results) = aggregate_groups([("max", rows), *calls], keys)
        kept = pc.indices_nonzero(chosen.is_valid())
        carried = batch.take(chosen.filter(chosen.is_valid()))
        return self._output(carried, [result.take(kept) for result in results])


def _call_input(call: Call, batch: pa.RecordBatch) -> tuple[str, pa.Array | None]:
    """``(name, argument values)`` for :func:`aggregate_groups`; ``count`` of a literal that is not
    null (``count(1)``) counts rows, with no column of ones built for it."""
    name = _call_name(call)
    return (name, None) if name == COUNT_ALL else (name, _argument(call, batch))


def _call_name(call: Call) -> str:
    """The aggregate function :func:`_call_input` gives ``call``."""
    if call.name == "count" and len(call.args) == 1:
        argument = call.args[0]
        if isinstance(argument, Literal) and argument.value is not None:
            return COUNT_ALL
    return call.name


def _field_path(expr: Expr) -> tuple[str, ...] | None:
    """The path of a key that is a field (names only), else None."""
    if isinstance(expr, FieldRef) and all(isinstance(step, str) for step in expr.path):
        return tuple(str(step) for step in expr.path)
    return None
