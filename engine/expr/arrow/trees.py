"""Data trees on Arrow: read, write and remove values at field paths of a record batch.

A record is a row; its top-level fields are the batch's columns, maps are structs and arrays are lists.
A missing value reads as null (R-NULL-ABSENT). Paths are tuples of names and list indexes:
``a.b[0].c`` is ``("a", "b", 0, "c")``. A name applied to a list without an index projects it over the
list's elements (``items.sku`` on a list of maps is the list of their ``sku``), as Spark does.

Writes replace what is at the path (:func:`set_path`), or, with ``merge_maps``, merge a map into the
map already there, member by member, the new value winning (seed 000's project: "later projections
override earlier ones"). Writing below a value that is not a map (``a.b`` where ``a`` is a number or
a list) replaces that value by a map.

>>> import pyarrow as pa
>>> batch = pa.record_batch({"e": pa.array([{"id": 1, "tags": ["x"]}, None])})
>>> get_path(batch, ("e", "id")).to_pylist()
[1, None]
>>> set_path(batch, ("e", "day"), pa.array(["mon", "tue"])).to_pylist()
[{'e': {'id': 1, 'tags': ['x'], 'day': 'mon'}}, {'e': {'id': None, 'tags': None, 'day': 'tue'}}]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import TreePathError

Path = tuple[str | int, ...]
Batch = pa.RecordBatch


def null_array(length: int, dtype: pa.DataType | None = None) -> pa.Array:
    """``length`` nulls of ``dtype`` (Arrow's null type when not given: a value not seen yet)."""
    return pa.nulls(length, type=dtype or pa.null())


def is_list_type(dtype: pa.DataType) -> bool:
    """Whether ``dtype`` is an array of the data tree (a list or large list)."""
    return pa.types.is_list(dtype) or pa.types.is_large_list(dtype)


# ---------------------------------------------------------------- reading


def get_path(batch: Batch, path: Path) -> pa.Array:
    """The value at ``path`` in every row (null where any step is missing).

    >>> import pyarrow as pa
    >>> batch = pa.record_batch({"a": pa.array([[{"x": 1}, {"x": 4}], None])})
    >>> get_path(batch, ("a", "x")).to_pylist(), get_path(batch, ("a", 1, "x")).to_pylist()
    ([[1, 4], None], [4, None])
    """
    head, rest = path[0], path[1:]
    if not isinstance(head, str) or head not in batch.schema.names:
        return null_array(batch.num_rows)
    column = batch.column(batch.schema.get_field_index(head))
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    return get_in(column, rest)


def get_in(array: pa.Array, path: Sequence[str | int]) -> pa.Array:
    """The value at ``path`` inside every value of ``array`` (lists without an index are projected)."""
    for i, step in enumerate(path):
        dtype = array.type
        if isinstance(step, int):
            if not is_list_type(dtype):
                return null_array(len(array))
            array = _list_element(array, step)
        elif pa.types.is_struct(dtype):
            index = dtype.get_field_index(step)
            if index < 0:
                return null_array(len(array))
            array = pc.struct_field(array, [index])
        elif is_list_type(dtype):
            values = get_in(array.values, path[i:])
            return type(array).from_arrays(array.offsets, values, mask=array.is_null())
        else:
            return null_array(len(array))
    return array


def _list_element(array: pa.Array, index: int) -> pa.Array:
    """Element ``index`` of every list (negative counts from the end); null when out of range."""
    lengths = pc.fill_null(pc.list_value_length(array), 0)
    position = pc.add(lengths, index) if index < 0 else pa.scalar(index, lengths.type)
    in_range = pc.and_(pc.greater_equal(position, 0), pc.less(position, lengths))
    starts = pc.add(array.offsets[:-1], pc.cast(position, array.offsets.type))
    safe = pc.if_else(in_range, starts, 0)
    flat = array.values if len(array.values) else null_array(1, array.type.value_type)
    taken = flat.take(pc.cast(safe, pa.int64()))
    return pc.if_else(in_range, taken, pa.scalar(None, taken.type))


def list_parts(array: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The elements of every list of ``array`` in order, and the row each came from.

    >>> import pyarrow as pa
    >>> values, rows = list_parts(pa.array([[1, 2], None, [3]]))
    >>> values.to_pylist(), rows.tolist()
    ([1, 2, 3], [0, 0, 2])
    """
    values = pc.list_flatten(array)
    rows = pc.list_parent_indices(array).to_numpy(zero_copy_only=False).astype(np.int64)
    return values, rows


def keep_list_elements(
    array: pa.Array, keep: np.ndarray, *, elements: pa.Array | None = None
) -> tuple[pa.Array, np.ndarray]:
    """``array`` with only the elements where ``keep`` (aligned with :func:`list_parts`) is true,
    and how many elements each list kept. The type is unchanged; null lists stay null.
    ``elements`` replaces the list elements (same order and type) before they are filtered.

    >>> import numpy as np, pyarrow as pa
    >>> kept, counts = keep_list_elements(pa.array([[1, 4], None, [5]]), np.array([False, True, True]))
    >>> kept.to_pylist(), counts.tolist()
    ([[4], None, [5]], [1, 0, 1])
    """
    values, rows = list_parts(array)
    if elements is not None:
        values = elements
    counts = np.bincount(rows[keep], minlength=len(array)).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    offset_type = pa.int64() if pa.types.is_large_list(array.type) else pa.int32()
    kept = type(array).from_arrays(
        pa.array(offsets, offset_type),
        values.filter(pa.array(keep, pa.bool_())),
        type=array.type,
        mask=array.is_null() if array.null_count else None,
    )
    return kept, counts


# ---------------------------------------------------------------- writing


def set_path(
    batch: Batch, path: Sequence[str | int], values: pa.Array, *, merge_maps: bool = False
) -> Batch:
    """A batch with ``values`` written at ``path``; maps on the way are created or extended.

    With ``merge_maps``, a map written over a map merges into it (see :func:`merge_values`).

    >>> import pyarrow as pa
    >>> batch = pa.record_batch({"a": pa.array([{"x": 1, "y": 2}])})
    >>> set_path(batch, ("a",), pa.array([{"x": 9}]), merge_maps=True).to_pylist()
    [{'a': {'x': 9, 'y': 2}}]
    >>> set_path(batch, ("a",), pa.array([{"x": 9}])).to_pylist()
    [{'a': {'x': 9}}]
    """
    _check_writable(path)
    head, rest = str(path[0]), tuple(str(step) for step in path[1:])
    names = batch.schema.names
    existing = batch.column(names.index(head)) if head in names else None
    new = _write(existing, rest, values, merge_maps)
    if existing is not None:
        return batch.set_column(names.index(head), head, new)
    return batch.append_column(head, new)


def _check_writable(path: Sequence[str | int]) -> None:
    if not path:
        raise TreePathError("cannot write a value at an empty path")
    for step in path:
        if not isinstance(step, str):
            shown = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in path).lstrip(".")
            raise TreePathError(
                f"cannot write at '{shown}': a written path names map members, not list elements",
                hint="write the whole list, or flatten it first",
            )


def _write(
    target: pa.Array | None, path: tuple[str, ...], values: pa.Array, merge: bool
) -> pa.Array:
    if not path:
        if merge and target is not None:
            return merge_values(target, values)
        return values
    if target is not None and not pa.types.is_struct(target.type):
        target = None  # a scalar or list in the way is replaced by a map
    head, rest = path[0], path[1:]
    fields: list[pa.Field] = list(target.type) if target is not None else []
    children: list[pa.Array] = (
        [pc.struct_field(target, [i]) for i in range(len(fields))] if target is not None else []
    )
    names = [f.name for f in fields]
    index = names.index(head) if head in names else None
    child = _write(children[index] if index is not None else None, rest, values, merge)
    field = pa.field(head, child.type)
    if index is not None:
        children[index], fields[index] = child, field
    else:
        children.append(child)
        fields.append(field)
    mask = None
    if target is not None and target.null_count:
        # The map exists where it existed before or where the written value is not null.
        mask = pc.and_(target.is_null(), child.is_null())
    elif target is None and child.null_count:
        mask = child.is_null()
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def merge_values(earlier: pa.Array, later: pa.Array) -> pa.Array:
    """``later`` written over ``earlier``: two maps merge member by member (recursively); any other
    value is replaced. Where the later map is null the earlier value is kept (null is absent).

    >>> import pyarrow as pa
    >>> merge_values(pa.array([{"x": 1, "y": 2}, {"x": 3, "y": 4}]),
    ...              pa.array([{"x": 9}, None])).to_pylist()
    [{'x': 9, 'y': 2}, {'x': 3, 'y': 4}]
    """
    if not (pa.types.is_struct(earlier.type) and pa.types.is_struct(later.type)):
        return later
    later_valid = later.is_valid()
    fields = list(earlier.type)
    children = [pc.struct_field(earlier, [i]) for i in range(len(fields))]
    names = [f.name for f in fields]
    for j, later_field in enumerate(later.type):
        new = pc.struct_field(later, [j])
        if later_field.name not in names:
            fields.append(pa.field(later_field.name, new.type))
            children.append(new)
            continue
        i = names.index(later_field.name)
        merged = _merge_member(children[i], new, later_valid)
        children[i], fields[i] = merged, pa.field(later_field.name, merged.type)
    mask = pc.and_(earlier.is_null(), later.is_null())
    return pa.StructArray.from_arrays(
        children, fields=fields, mask=mask if earlier.null_count else None
    )


def _merge_member(earlier: pa.Array, later: pa.Array, later_valid: pa.Array) -> pa.Array:
    """A member present in both maps: the later map's member wins in the rows where it exists."""
    if pa.types.is_struct(earlier.type) and pa.types.is_struct(later.type):
        return merge_values(earlier, later)
    if pa.types.is_null(later.type):
        later = pa.nulls(len(later), earlier.type)
    if not later.type.equals(earlier.type):
        return later
    return pc.if_else(later_valid, later, earlier)


def replace_in(array: pa.Array, path: Sequence[str | int], value: pa.Array) -> pa.Array:
    """``array`` with the value at ``path`` (map members and list indexes) replaced by ``value``,
    which has the type of the value it replaces. Used to write filtered arrays back into records.

    >>> import pyarrow as pa
    >>> replace_in(pa.array([{"a": [1, 2], "b": 0}]), ("a",), pa.array([[2]])).to_pylist()
    [{'a': [2], 'b': 0}]
    """
    if not path:
        return value
    step, rest = path[0], path[1:]
    if isinstance(step, str):
        fields = list(array.type)
        children = [pc.struct_field(array, [i]) for i in range(len(fields))]
        index = array.type.get_field_index(step)
        children[index] = replace_in(children[index], rest, value)
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    return _replace_element(array, step, lambda element: replace_in(element, rest, value))


def _replace_element(array: pa.Array, index: int, rebuild) -> pa.Array:
    """Every list of ``array`` with element ``index`` replaced by ``rebuild(element)``."""
    element = _list_element(array, index)
    new_element = rebuild(element)
    values, rows = list_parts(array)
    lengths = pc.fill_null(pc.list_value_length(array), 0).to_numpy().astype(np.int64)
    starts = np.cumsum(lengths) - lengths
    position = np.arange(len(values)) - starts[rows]
    wanted = position == (index if index >= 0 else lengths[rows] + index)
    take = np.where(wanted, len(values) + rows, np.arange(len(values)))
    combined = pa.concat_arrays([values, new_element.cast(values.type)])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    offset_type = pa.int64() if pa.types.is_large_list(array.type) else pa.int32()
    return type(array).from_arrays(
        pa.array(offsets, offset_type),
        combined.take(pa.array(take, pa.int64())),
        type=array.type,
        mask=array.is_null() if array.null_count else None,
    )


def remove_path(batch: Batch, path: Sequence[str | int]) -> Batch:
    """A batch without the value at ``path`` (unchanged if there is none).

    >>> import pyarrow as pa
    >>> remove_path(pa.record_batch({"a": pa.array([{"x": 1, "y": 2}])}), ("a", "x")).to_pylist()
    [{'a': {'y': 2}}]
    """
    head, rest = path[0], tuple(path[1:])
    names = batch.schema.names
    if head not in names:
        return batch
    index = names.index(str(head))
    if not rest:
        return batch.remove_column(index)
    column = batch.column(index)
    return batch.set_column(index, str(head), _remove(column, rest))


def _remove(target: pa.Array, path: tuple[str | int, ...]) -> pa.Array:
    head, rest = path[0], path[1:]
    if not pa.types.is_struct(target.type) or not isinstance(head, str):
        return target
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
    if not children:
        return empty_maps(len(target), valid=target.is_valid())
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def empty_maps(length: int, *, valid: pa.Array | None = None) -> pa.Array:
    """``length`` empty maps (``{}``), null where ``valid`` is false.

    >>> empty_maps(2, valid=pa.array([True, False])).to_pylist()
    [{}, None]
    """
    validity = None
    if valid is not None and not pc.all(valid).as_py():
        validity = pc.fill_null(pc.and_(valid, True), False).buffers()[1]
    return pa.Array.from_buffers(pa.struct([]), length, [validity], children=[])


def build_batch(length: int, columns: Sequence[tuple[Sequence[str | int], pa.Array]]) -> Batch:
    """A new batch of ``length`` records from values at paths, written in order: a later map merges
    into an earlier one, any other later value replaces what was there (seed 000's project).

    An empty path merges a map value into the root: its members become top-level fields (Drill's
    ``project`` with ``ref: "output"``); a null value there adds nothing.

    >>> import pyarrow as pa
    >>> build_batch(1, [((), pa.array([{"b": 1, "c": 2}])), (("d",), pa.array([3]))]).to_pylist()
    [{'b': 1, 'c': 2, 'd': 3}]
    """
    batch = pa.record_batch([pa.nulls(length)], names=["__length"])
    for path, values in columns:
        if path:
            batch = set_path(batch, path, values, merge_maps=True)
        elif pa.types.is_struct(values.type):
            batch = _merge_into_root(batch, values)
        elif not pa.types.is_null(values.type):
            raise TreePathError(
                f"cannot merge a value of type {values.type} into the record: only a map can be"
            )
    return batch.remove_column(batch.schema.get_field_index("__length"))


def _merge_into_root(batch: Batch, values: pa.StructArray) -> Batch:
    valid = values.is_valid()
    for i, field in enumerate(values.type):
        member = pc.struct_field(values, [i])
        names = batch.schema.names
        if field.name in names:
            existing = batch.column(names.index(field.name))
            member = _merge_member(existing, member, valid)
        batch = set_path(batch, (field.name,), member)
    return batch
