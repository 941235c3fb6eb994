"""Arrow record batches of one stream as one table, under the schema they share.

The operator protocol (draining an operator), the local executor's buffers and the streaming stores
need this; it lives with the types, below all of them.
"""

from __future__ import annotations

import pyarrow as pa

from engine.errors import SchemaConflictError
from engine.types.arrow import UNION_ARROW, align, is_union


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
    return pa.Table.from_batches([conform(batch, common) for batch in batches], schema=common)


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
    if pa.types.is_decimal(a) and pa.types.is_integer(b):
        return _decimal_holding(a, b)
    if pa.types.is_integer(a) and pa.types.is_decimal(b):
        return _decimal_holding(b, a)
    try:
        pair = [pa.schema([pa.field("c", a)]), pa.schema([pa.field("c", b)])]
        return pa.unify_schemas(pair, promote_options="permissive").field("c").type
    except (pa.ArrowTypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _decimal_holding(decimal: pa.DataType, integer: pa.DataType) -> pa.DataType:
    """The DECIMAL holding both ``decimal``'s values and ``integer``'s, as Spark widens them (Arrow
    gives DECIMAL(20, 2) for DECIMAL(15, 2) and int64, too narrow for a 19-digit integer): the
    integer's digits beside the decimal's scale, at most 38 digits.

    >>> import pyarrow as pa
    >>> _decimal_holding(pa.decimal128(15, 2), pa.int64())
    Decimal128Type(decimal128(21, 2))
    >>> _decimal_holding(pa.decimal128(12, 2), pa.int32())
    Decimal128Type(decimal128(12, 2))
    """
    bits = integer.bit_width - (0 if pa.types.is_unsigned_integer(integer) else 1)
    largest = 2**bits  # as many digits as the integer's largest magnitude
    whole = max(decimal.precision - decimal.scale, len(str(largest)))  # int64: 19 digits
    return pa.decimal128(min(whole + decimal.scale, 38), decimal.scale)


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` under ``schema``, a schema it unifies with: its columns aligned to their types
    there (into UNIONs where ``schema`` has one), missing columns null."""
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
