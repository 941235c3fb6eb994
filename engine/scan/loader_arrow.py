"""Whole Arrow data in the result set loader: its Drill types, and aligning it to the loader's types.

The fast path accepts record batches whose columns are a subset, superset or reordering of the
loader's columns. :func:`drill_type_of` gives the Drill type a column of such data adds to the loader
(always nullable: a file's non-null column does not make the scan's column REQUIRED), and
:func:`align` turns an array into the loader's Arrow type at harvest: members matched by name
(case-insensitive), unprojected members dropped, missing ones null, scalars cast losslessly.

>>> target = pa.struct([("a", pa.string()), ("b", pa.float64())])
>>> align(pa.array([{"B": 1, "c": "x"}]), target).to_pylist()
[{'a': None, 'b': 1.0}]
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import StorageError
from engine.scan.loader_values import required_default
from engine.types import (
    DataMode,
    MajorType,
    MinorType,
    align,
    from_arrow,
    from_arrow_field,
)


def plain_type(dtype: pa.DataType) -> pa.DataType:
    """The type with dictionary encodings replaced by their value types, at any depth."""
    if pa.types.is_dictionary(dtype):
        return plain_type(dtype.value_type)
    if pa.types.is_struct(dtype):
        return pa.struct([field.with_type(plain_type(field.type)) for field in dtype])
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return pa.list_(dtype.value_field.with_type(plain_type(dtype.value_type)))
    return dtype


def _optional(major: MajorType) -> MajorType:
    if major.minor == MinorType.MAP:
        fields = tuple((name, _optional(t)) for name, t in major.fields)
        mode = DataMode.OPTIONAL if major.mode == DataMode.REQUIRED else major.mode
        return MajorType(MinorType.MAP, mode, fields)
    if major.minor == MinorType.LIST and major.element is not None:
        return MajorType.list_of(major.element, DataMode.OPTIONAL)
    return major.with_mode(DataMode.OPTIONAL) if major.mode == DataMode.REQUIRED else major


def drill_type_of(field: pa.Field, *, source: str | None = None) -> MajorType:
    """The Drill type Arrow column ``field`` brings into a loader (StorageError if it has none)."""
    try:
        return _optional(from_arrow(plain_type(field.type)))
    except TypeError as error:
        raise StorageError(f"column '{field.name}': {error}", file=source) from None


def empty_columns_batch(rows: int, metadata: dict[bytes, bytes] | None) -> pa.RecordBatch:
    """A batch with no columns that still counts ``rows`` rows (an empty projection)."""
    struct = pa.array([{}] * rows, type=pa.struct([]))
    batch = pa.RecordBatch.from_struct_array(struct)
    return batch.replace_schema_metadata(metadata) if metadata else batch


def join_segments(segments: list[pa.RecordBatch], field: pa.Field, written: pa.Array) -> pa.Array:
    """Column ``field`` of a batch: the Arrow segments' columns aligned to it, then ``written``."""
    parts = []
    key = field.name.lower()
    for segment in segments:
        names = [name.lower() for name in segment.schema.names]
        if key in names:
            parts.append(align(segment.column(names.index(key)), field.type))
        else:
            parts.append(pa.nulls(segment.num_rows, field.type))
    parts.append(written)
    joined = pa.concat_arrays(parts)
    if not field.nullable and joined.null_count:
        major = from_arrow_field(field)
        joined = pc.fill_null(joined, required_default(major.minor, field.type))
    return joined
