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

from engine.errors import DrillError, SchemaConflictError
from engine.scan.loader_arrow import align
from engine.types import UNION_ARROW, is_union


class BufferLimitError(DrillError):
    """A blocking operator would buffer more than ``max_buffered_bytes`` of input."""


class BatchBuffer:
    """The input batches of a blocking operator, bounded by ``max_bytes``.

    ``operator_id`` and ``kind`` only name the operator in the error message.

    >>> import pyarrow as pa
    >>> buffer = BatchBuffer("3", "segment", max_bytes=8)
    >>> buffer.add(pa.record_batch({"a": [1, 2]}))
    Traceback (most recent call last):
    ...
    engine.exec.local.buffering.BufferLimitError: segment 3 needs to buffer more than 8 bytes ...
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
                hint="raise the limit: run_plan(..., max_buffered_bytes=N) or "
                "`drill-dagster run --max-buffered-bytes N`; or run the plan on the spark executor",
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


def concat_batches(batches: list[pa.RecordBatch], *, schema: pa.Schema | None = None) -> pa.Table:
    """``batches`` as one table under their unified schema; ``schema`` types an empty result.

    Columns missing from some batches are null there; where a column is a UNION in some batch
    (a scan met another type of it in a later file), it is a UNION in all; a column whose types
    cannot be unified otherwise (``int64`` in one batch, ``string`` in another) raises
    :class:`SchemaConflictError`.

    >>> import pyarrow as pa
    >>> from engine.types import union_array
    >>> concat_batches([pa.record_batch({"a": [1]}), pa.record_batch({"b": [None]})]).to_pylist()
    [{'a': 1, 'b': None}, {'a': None, 'b': None}]
    >>> changed = pa.record_batch({"v": union_array(["one"])})
    >>> concat_batches([pa.record_batch({"v": [1]}), changed]).to_pylist()
    [{'v': 1}, {'v': 'one'}]
    """
    if not batches:
        return (schema or pa.schema([])).empty_table()
    first = batches[0].schema
    if all(batch.schema.equals(first) for batch in batches[1:]):
        return pa.Table.from_batches(batches)
    tables = [pa.Table.from_batches([batch]) for batch in batches]
    try:
        return pa.concat_tables(tables, promote_options="permissive")
    except (pa.ArrowTypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass  # a UNION beside another type: Arrow knows no common type of the two
    common = _common_schema([batch.schema for batch in batches])
    if common is None:
        raise _conflict([batch.schema for batch in batches])
    return pa.Table.from_batches([_conformed(batch, common) for batch in batches], schema=common)


def _common_schema(schemas: list[pa.Schema]) -> pa.Schema | None:
    fields: dict[str, pa.DataType] = {}
    for schema in schemas:
        for field in schema:
            seen = fields.get(field.name)
            common = field.type if seen is None else _common_type(seen, field.type)
            if common is None:
                return None
            fields[field.name] = common
    return pa.schema([pa.field(name, dtype) for name, dtype in fields.items()])


def _common_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    """The type both ``a`` and ``b`` values fit: a UNION beside any other type is a UNION,
    also inside maps and lists; None where there is none."""
    if a.equals(b) or pa.types.is_null(b):
        return a
    if pa.types.is_null(a):
        return b
    if is_union(a) or is_union(b):
        return UNION_ARROW
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        members = _common_schema([pa.schema(list(a)), pa.schema(list(b))])
        return None if members is None else pa.struct(list(members))
    if pa.types.is_list(a) and pa.types.is_list(b):
        value = _common_type(a.value_type, b.value_type)
        return None if value is None else pa.list_(value)
    try:
        pair = [pa.schema([pa.field("c", a)]), pa.schema([pa.field("c", b)])]
        return pa.unify_schemas(pair, promote_options="permissive").field("c").type
    except (pa.ArrowTypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _conformed(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    names = batch.schema.names
    columns = [
        align(batch.column(names.index(field.name)), field.type)
        if field.name in names
        else pa.nulls(batch.num_rows, field.type)
        for field in schema
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _conflict(schemas: list[pa.Schema]) -> SchemaConflictError:
    """The first column whose type differs in a way Arrow cannot unify."""
    seen: dict[str, pa.DataType] = {}
    for schema in schemas:
        for field in schema:
            old = seen.get(field.name)
            if old is None or pa.types.is_null(old):
                seen[field.name] = field.type
                continue
            try:
                pa.unify_schemas(
                    [pa.schema([pa.field("c", old)]), pa.schema([field.with_name("c")])],
                    promote_options="permissive",
                )
            except (pa.ArrowTypeError, pa.ArrowInvalid):
                return SchemaConflictError(
                    column=field.name,
                    old_type=str(old),
                    new_type=str(field.type),
                    hint="cast the column to one type before this operator",
                )
    return SchemaConflictError(column="?", old_type="?", new_type="?")


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
