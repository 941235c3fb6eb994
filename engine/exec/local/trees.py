"""Data trees on Arrow: read, write and remove values at field paths of a record batch.

A record is a row; its top-level fields are the batch's columns, maps are structs and arrays are lists.
A missing value reads as null (R-NULL-ABSENT). Paths are tuples of names and list indexes:
``a.b[0].c`` is ``("a", "b", 0, "c")``. A name applied to a list without an index projects it over the
list's elements (``items.sku`` on a list of maps is the list of their ``sku``), as Spark does.

>>> import pyarrow as pa
>>> batch = pa.record_batch({"e": pa.array([{"id": 1, "tags": ["x"]}, None])})
>>> get_path(batch, ("e", "id")).to_pylist()
[1, None]
>>> set_path(batch, ("e", "day"), pa.array(["mon", "tue"])).to_pylist()
[{'e': {'id': 1, 'tags': ['x'], 'day': 'mon'}}, {'e': {'id': None, 'tags': None, 'day': 'tue'}}]
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

Path = tuple[str | int, ...]
Batch = pa.RecordBatch


def null_array(length: int, dtype: pa.DataType | None = None) -> pa.Array:
    return pa.nulls(length, type=dtype or pa.null())


def _field_index(dtype: pa.StructType, name: str) -> int:
    return dtype.get_field_index(name)


def get_path(batch: Batch, path: Path) -> pa.Array:
    """The value at ``path`` in every row (null where any step is missing)."""
    head, rest = path[0], path[1:]
    if not isinstance(head, str) or head not in batch.schema.names:
        return null_array(batch.num_rows)
    column = batch.column(batch.schema.get_field_index(head))
    return _descend(column, rest)


def _descend(array: pa.Array, path: Sequence[str | int]) -> pa.Array:
    for i, step in enumerate(path):
        dtype = array.type
        if isinstance(step, int):
            if not pa.types.is_list(dtype) and not pa.types.is_large_list(dtype):
                return null_array(len(array))
            array = _list_element(array, step)
        elif pa.types.is_struct(dtype):
            index = _field_index(dtype, step)
            if index < 0:
                return null_array(len(array))
            array = pc.struct_field(array, [index])
        elif pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
            values = _descend(array.values, path[i:])
            return type(array).from_arrays(array.offsets, values, mask=array.is_null())
        else:
            return null_array(len(array))
    return array


def _list_element(array: pa.Array, index: int) -> pa.Array:
    """Element ``index`` of every list (negative counts from the end); null when out of range."""
    lengths = pc.fill_null(pc.list_value_length(array), 0)
    position = pc.add(lengths, index) if index < 0 else pa.scalar(index, pa.int32())
    in_range = pc.and_(pc.greater_equal(position, 0), pc.less(position, lengths))
    starts = pc.add(array.offsets[:-1], pc.cast(position, pa.int32()))
    safe = pc.if_else(in_range, starts, 0)
    flat = array.values if len(array.values) else null_array(1, array.type.value_type)
    taken = flat.take(pc.cast(safe, pa.int64()))
    return pc.if_else(in_range, taken, pa.scalar(None, taken.type))


def set_path(batch: Batch, path: Sequence[str], values: pa.Array) -> Batch:
    """A batch with ``values`` written at ``path``; maps on the way are created or extended."""
    head, rest = path[0], tuple(path[1:])
    names = batch.schema.names
    existing = batch.column(names.index(head)) if head in names else None
    new = _write(existing, rest, values, batch.num_rows)
    if existing is not None:
        return batch.set_column(names.index(head), head, new)
    return batch.append_column(head, new)


def _write(target: pa.Array | None, path: tuple[str, ...], values: pa.Array, length: int) -> pa.Array:
    if not path:
        return values
    if target is None or not pa.types.is_struct(target.type):
        target = None
    head, rest = path[0], path[1:]
    fields: list[pa.Field] = list(target.type) if target is not None else []
    children: list[pa.Array] = (
        [pc.struct_field(target, [i]) for i in range(len(fields))] if target is not None else []
    )
    names = [f.name for f in fields]
    child = _write(children[names.index(head)] if head in names else None, rest, values, length)
    if head in names:
        children[names.index(head)] = child
        fields[names.index(head)] = pa.field(head, child.type)
    else:
        children.append(child)
        fields.append(pa.field(head, child.type))
    mask = None
    if target is not None and target.null_count:
        # The map exists where it existed before or where the written value is not null.
        mask = pc.and_(target.is_null(), child.is_null())
    elif target is None:
        mask = child.is_null() if child.null_count else None
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def remove_path(batch: Batch, path: Sequence[str]) -> Batch:
    """A batch without the value at ``path`` (unchanged if there is none)."""
    head, rest = path[0], tuple(path[1:])
    names = batch.schema.names
    if head not in names:
        return batch
    index = names.index(head)
    if not rest:
        return batch.remove_column(index)
    column = batch.column(index)
    return batch.set_column(index, head, _remove(column, rest))


def _remove(target: pa.Array, path: tuple[str, ...]) -> pa.Array:
    if not pa.types.is_struct(target.type):
        return target
    head, rest = path[0], path[1:]
    fields = list(target.type)
    names = [f.name for f in fields]
    if head not in names:
        return target
    children = [pc.struct_field(target, [i]) for i in range(len(fields))]
    index = names.index(head)
    if rest:
        children[index] = _remove(children[index], rest)
        fields[index] = pa.field(head, children[index].type)
    else:
        del children[index], fields[index]
    mask = target.is_null() if target.null_count else None
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def build_batch(length: int, columns: Sequence[tuple[Sequence[str], pa.Array]]) -> Batch:
    """A new batch from values at paths, written in order (later paths override earlier ones).

    An empty path merges a map value into the root: its members become top-level fields (Drill's
    ``project`` with ``ref: "output"``).
    """
    batch = pa.record_batch([pa.array([None] * length)], names=["__length"])
    for path, values in columns:
        if path:
            batch = set_path(batch, path, values)
        elif pa.types.is_struct(values.type):
            for i, f in enumerate(values.type):
                member = pc.struct_field(values, [i])
                batch = set_path(batch, (f.name,), member)
    return batch.remove_column(0)
