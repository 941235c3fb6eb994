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
    from_arrow,
    from_arrow_field,
    is_union,
    union_array,
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


def align(array: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array:
    """``array`` as an array of type ``target`` (see the module docstring)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type == target:
        return array
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), target)
    if is_union(target):
        return union_array(array)
    if is_union(array.type):  # into text: the JSON texts themselves (Spark's storage of a union)
        array = array.storage
    if pa.types.is_dictionary(array.type):
        return align(array.dictionary_decode(), target)
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(target):
        positions = {field.name.lower(): i for i, field in enumerate(array.type)}
        children = []
        for field in target:
            position = positions.get(field.name.lower())
            if position is None:
                children.append(pa.nulls(len(array), field.type))
            else:
                children.append(align(array.field(position), field.type))
        if not children:
            valid = pc.invert(array.is_null()).to_pylist()
            return pa.array([{} if v else None for v in valid], type=target)
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_list(target):
        offsets = array.offsets
        start = offsets[0].as_py()
        end = offsets[-1].as_py()
        values = align(array.values.slice(start, end - start), target.value_type)
        rebased = pc.subtract(offsets, pa.scalar(start, offsets.type)).cast(pa.int32())
        return pa.ListArray.from_arrays(rebased, values, type=target, mask=mask)
    return array.cast(target)


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
