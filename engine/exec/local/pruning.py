"""Dropping the members a filter alone reads from the records after it (which ones, and where
that cannot change a result: :mod:`engine.planner.properties.filtered_members`)."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from engine.exec.protocol import BatchOperator, SingleInputOperator


class DropMembersOperator(SingleInputOperator):
    """Its input's batches without ``members`` of the record under ``ref``."""

    kind = "filter"

    def __init__(self, operator_id: str, upstream: BatchOperator, ref: str, members: Iterable[str]):
        super().__init__(operator_id, upstream)
        self.ref = ref
        self.members = frozenset(members)

    def process(self, batch: pa.RecordBatch) -> Iterable[pa.RecordBatch]:
        return [drop_members(batch, self.ref, self.members)]


def drop_members(batch: pa.RecordBatch, ref: str, members: frozenset[str]) -> pa.RecordBatch:
    """``batch`` with the record under ``ref`` (a struct column) without ``members``.

    >>> b = pa.record_batch({"t": [{"a": 1, "n": "x"}, None]})
    >>> drop_members(b, "t", frozenset({"n"})).to_pylist()
    [{'t': {'a': 1}}, {'t': None}]
    """
    index = batch.schema.get_field_index(ref)
    if index < 0 or not pa.types.is_struct(batch.schema.field(index).type):
        return batch
    column = batch.column(index)
    fields = [f for f in column.type if f.name not in members]
    if len(fields) == column.type.num_fields or not fields:
        return batch
    children = [c for f, c in zip(column.type, column.flatten()) if f.name not in members]
    mask = column.is_null() if column.null_count else None
    kept = pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    return batch.set_column(index, batch.schema.field(index).with_type(kept.type), kept)
