"""Making one reader column match its output type: members by name, typed nulls, casts.

All the work is column-at-a-time with pyarrow.compute; nothing loops over rows. Maps are matched
member by member (case-insensitive names, missing members become typed nulls, extra members are
dropped); lists align their values; scalars cast. Casting text to another type first turns blank
strings into nulls (a CSV's empty field is a missing value, as in Drill's text reader with a
provided schema). A REQUIRED target has no nulls: they become the type's default (0, "", false, the
epoch), as seed 003 asks of missing non-nullable columns.

>>> import pyarrow as pa
>>> from engine.types import MajorType, BIGINT, VARCHAR
>>> arr = pa.array([{"B": "1", "c": 2.5}, None])
>>> align_array(arr, MajorType.map({"a": VARCHAR, "b": BIGINT}), column="m").to_pylist()
[{'a': None, 'b': 1}, None]
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import SchemaConflictError, StorageError
from engine.scan.projection import name_key
from engine.types import (
    DataMode,
    MajorType,
    MinorType,
    from_arrow,
    is_union,
    json_text,
    to_arrow,
    union_array,
)

_DEFAULTS: dict[MinorType, object] = {
    MinorType.BIT: False,
    MinorType.INT: 0,
    MinorType.BIGINT: 0,
    MinorType.FLOAT4: 0.0,
    MinorType.FLOAT8: 0.0,
    MinorType.VARCHAR: "",
    MinorType.VARBINARY: b"",
    MinorType.DATE: dt.date(1970, 1, 1),
    MinorType.TIME: dt.time(0),
    MinorType.TIMESTAMP: dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
}
_TEXT = (MinorType.VARCHAR, MinorType.VARBINARY)


def _is_list(dtype: pa.DataType) -> bool:
    return (
        pa.types.is_list(dtype)
        or pa.types.is_large_list(dtype)
        or pa.types.is_fixed_size_list(dtype)
        or pa.types.is_list_view(dtype)
        or pa.types.is_large_list_view(dtype)
    )


def _element(target: MajorType) -> MajorType:
    if target.mode == DataMode.REPEATED:
        return target.with_mode(DataMode.REQUIRED)
    assert target.element is not None
    return target.element


def _describe(dtype: pa.DataType) -> str:
    try:
        return str(from_arrow(dtype))
    except TypeError:
        return str(dtype)


def typed_nulls(target: MajorType, length: int) -> pa.Array:
    """A column of ``length`` missing values: nulls, or the default where ``target`` is REQUIRED.

    >>> from engine.types import INT
    >>> typed_nulls(INT, 2).to_pylist(), typed_nulls(INT.with_mode(DataMode.REQUIRED), 2).to_pylist()
    ([None, None], [0, 0])
    """
    arrow = to_arrow(target)
    if target.mode == DataMode.OPTIONAL or target.minor == MinorType.NULL:
        return pa.nulls(length, arrow)
    if target.mode == DataMode.REPEATED or target.minor == MinorType.LIST:
        offsets = pa.array([0] * (length + 1), pa.int32())
        return pa.ListArray.from_arrays(offsets, pa.array([], arrow.value_type), type=arrow)
    if target.minor == MinorType.MAP:
        return _struct([typed_nulls(t, length) for _, t in target.fields], arrow, length, None)
    return pa.repeat(pa.scalar(_DEFAULTS[target.minor], arrow), length)


def constant(value: object, target: MajorType, length: int, *, column: str) -> pa.Array:
    """``value`` repeated ``length`` times as ``target``; an implicit column's value is text."""
    if value is None:
        return typed_nulls(target, length)
    text = pa.repeat(pa.scalar(str(value), pa.string()), length)
    return align_array(text, target, column=column)


def _struct(
    children: list[pa.Array], arrow: pa.StructType, length: int, mask: pa.Array | None
) -> pa.Array:
    if not children:  # a struct without members still has a length and validity
        valid = pa.array([{}] * length, arrow)
        return valid if mask is None else pc.if_else(mask, pa.scalar(None, arrow), valid)
    return pa.StructArray.from_arrays(children, fields=list(arrow), mask=mask)


def align_array(
    array: pa.Array | pa.ChunkedArray, target: MajorType, *, column: str, file: str | None = None
) -> pa.Array:
    """``array`` as an Arrow array of exactly ``to_arrow(target)``.

    Raises :class:`SchemaConflictError` where no conversion exists, and :class:`StorageError`
    naming the file and column where a value does not convert.
    """
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    arrow = to_arrow(target)
    if array.type.equals(arrow):
        result = array
    elif pa.types.is_null(array.type):
        return typed_nulls(target, len(array))
    elif target.minor == MinorType.UNION:
        result = union_array(array)  # any value fits a union: re-encoded as JSON text
    elif is_union(array.type):
        return align_array(
            _union_as_text(array, target, column, file), target, column=column, file=file
        )
    elif target.minor == MinorType.MAP and target.mode != DataMode.REPEATED:
        result = _align_struct(array, target, arrow, column=column, file=file)
    elif (target.mode == DataMode.REPEATED or target.minor == MinorType.LIST) and _is_list(
        array.type
    ):
        result = _align_list(array, target, arrow, column=column, file=file)
    else:
        result = _cast(array, target, arrow, column=column, file=file)
    if target.mode == DataMode.REQUIRED and result.null_count:
        result = _fill_defaults(result, target)
    return result


def _align_struct(
    array: pa.Array, target: MajorType, arrow: pa.StructType, *, column: str, file: str | None
) -> pa.Array:
    if not pa.types.is_struct(array.type):
        raise SchemaConflictError(
            column=column, old_type=str(target), new_type=_describe(array.type), file=file
        )
    children: dict[str, pa.Array] = {}
    for field, child in zip(array.type, array.flatten()):
        children.setdefault(name_key(field.name), child)
    aligned = []
    for name, member in target.fields:
        child = children.get(name_key(name))
        path = f"{column}.{name}"
        if child is None:
            aligned.append(typed_nulls(member, len(array)))
        else:
            aligned.append(align_array(child, member, column=path, file=file))
    mask = array.is_null() if array.null_count else None
    return _struct(aligned, arrow, len(array), mask)


def _align_list(
    array: pa.Array, target: MajorType, arrow: pa.ListType, *, column: str, file: str | None
) -> pa.Array:
    if not pa.types.is_list(array.type) and not pa.types.is_large_list(array.type):
        array = array.cast(pa.list_(array.type.value_field))
    values = align_array(array.values, _element(target), column=f"{column}[]", file=file)
    offsets = array.offsets
    if offsets.type != pa.int32():
        offsets = offsets.cast(pa.int32())
    mask = array.is_null() if array.null_count else None
    return pa.ListArray.from_arrays(offsets, values, type=arrow, mask=mask)


def _cast(
    array: pa.Array, target: MajorType, arrow: pa.DataType, *, column: str, file: str | None
) -> pa.Array:
    source = array.type
    if (pa.types.is_string(source) or pa.types.is_large_string(source)) and (
        target.minor not in _TEXT
    ):
        blank = pc.equal(pc.utf8_trim_whitespace(array), "")
        array = pc.if_else(blank, pa.scalar(None, source), array)
    try:
        return pc.cast(array, arrow)
    except pa.ArrowNotImplementedError:
        raise SchemaConflictError(
            column=column, old_type=str(target), new_type=_describe(source), file=file
        ) from None
    except pa.ArrowInvalid as exc:
        raise StorageError(
            f"column '{column}': a value does not convert to {target}: {exc}", file=file
        ) from None


def _union_as_text(array: pa.Array, target: MajorType, column: str, file: str | None) -> pa.Array:
    """A UNION column's values as text for a scalar ``target`` (a provided type): a string as
    itself, another scalar as its JSON text; arrays and maps only become VARCHAR (JSON text)."""
    texts = []
    for value in array.to_pylist():
        if isinstance(value, list | dict) and target.minor != MinorType.VARCHAR:
            raise SchemaConflictError(
                column=column, old_type=str(target), new_type="UNION", file=file
            )
        texts.append(value if isinstance(value, str) or value is None else json_text(value))
    return pa.array(texts, pa.string())


def _fill_defaults(array: pa.Array, target: MajorType) -> pa.Array:
    if target.minor == MinorType.MAP:
        return _struct(array.flatten(), array.type, len(array), None)
    default = typed_nulls(target, 1)[0]
    return pc.fill_null(array, default)


def check_conversion(
    source: MajorType, target: MajorType, *, column: str, file: str | None
) -> None:
    """Raise :class:`SchemaConflictError` if no value of ``source`` can become a ``target``."""
    align_array(pa.array([], to_arrow(source)), target, column=column, file=file)
