"""Drill types in Arrow: the one mapping both ways, and the UNION type as an Arrow extension type.

Imported on first use of one of its names through :mod:`engine.types` (``from engine.types import
to_arrow`` works), so parsing and validating a plan does not load pyarrow.

>>> from engine.types import BIGINT, MajorType
>>> to_arrow(MajorType.map({"a": BIGINT}))
StructType(struct<a: int64>)
"""

from __future__ import annotations

import contextlib
import json

import pyarrow as pa
import pyarrow.compute as pc

from engine.types import MAX_DECIMAL_PRECISION, DataMode, MajorType, MinorType, json_text

# ---------------------------------------------------------------- UNION
# A UNION column holds, per record, any JSON value: a scalar, an array or a map (Drill's UNION
# type, what its JSON reader makes of a field whose kind changes between records when
# ``exec.enable_union_type`` is on). In Arrow it is the extension type ``drill.union`` whose storage
# is each value's JSON text (null for null); ``to_pylist()`` gives the values back. In Spark it is
# a VARIANT.


class UnionScalar(pa.ExtensionScalar):
    """One value of a ``drill.union`` array; ``as_py()`` decodes its JSON text."""

    def as_py(self, **kwargs: object) -> object:
        text = self.value
        return None if text is None or not text.is_valid else json.loads(text.as_py())


class UnionArrowType(pa.ExtensionType):
    """The Arrow type of a Drill UNION column: ``drill.union``, stored as JSON text."""

    def __init__(self) -> None:
        super().__init__(pa.string(), "drill.union")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(
        cls, storage_type: pa.DataType, serialized: bytes
    ) -> UnionArrowType:
        return cls()

    def __arrow_ext_scalar_class__(self) -> type[pa.ExtensionScalar]:
        return UnionScalar


UNION_ARROW = UnionArrowType()
with contextlib.suppress(pa.ArrowKeyError):  # already registered (a module reload)
    pa.register_extension_type(UNION_ARROW)


def is_union(dtype: pa.DataType) -> bool:
    return isinstance(dtype, pa.ExtensionType) and dtype.extension_name == "drill.union"


def union_array(values: list[object] | pa.Array | pa.ChunkedArray) -> pa.ExtensionArray:
    """A ``drill.union`` array of Python values, or of any Arrow array (its values re-encoded).

    >>> union_array([["x", "y"], "solo", None]).to_pylist()
    [['x', 'y'], 'solo', None]
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        if is_union(values.type):
            return values
        values = values.to_pylist()
    storage = pa.array([json_text(v) for v in values], pa.string())
    return pa.ExtensionArray.from_storage(UNION_ARROW, storage)


def union_text(array: pa.Array) -> pa.Array:
    """A UNION array as text: a string value as itself, any other value as its JSON text.

    >>> union_text(union_array(["a", 1, [True]])).to_pylist()
    ['a', '1', '[true]']
    """
    values = array.to_pylist()
    return pa.array([v if v is None or isinstance(v, str) else json_text(v) for v in values])


# ---------------------------------------------------------------- Arrow

_TO_ARROW: dict[MinorType, pa.DataType] = {
    MinorType.NULL: pa.null(),
    MinorType.BIT: pa.bool_(),
    MinorType.INT: pa.int32(),
    MinorType.BIGINT: pa.int64(),
    MinorType.FLOAT4: pa.float32(),
    MinorType.FLOAT8: pa.float64(),
    MinorType.VARCHAR: pa.string(),
    MinorType.VARBINARY: pa.binary(),
    MinorType.DATE: pa.date32(),
    MinorType.TIME: pa.time64("us"),
    MinorType.TIMESTAMP: pa.timestamp("us", tz="UTC"),
}
_FROM_ARROW = {str(v): k for k, v in _TO_ARROW.items()}
_ARROW_ALIASES: dict[str, MinorType] = {
    "int8": MinorType.INT,
    "int16": MinorType.INT,
    "uint8": MinorType.INT,
    "uint16": MinorType.INT,
    "uint32": MinorType.BIGINT,
    "uint64": MinorType.BIGINT,
    "halffloat": MinorType.FLOAT4,
    "large_string": MinorType.VARCHAR,
    "string_view": MinorType.VARCHAR,
    "large_binary": MinorType.VARBINARY,
    "date64[ms]": MinorType.DATE,
}


def to_arrow(t: MajorType) -> pa.DataType:
    """The Arrow type of a Drill type; nullability is the field's (see :func:`to_arrow_field`)."""
    if t.mode == DataMode.REPEATED:
        return pa.list_(
            pa.field("element", to_arrow(t.with_mode(DataMode.REQUIRED)), nullable=False)
        )
    if t.minor == MinorType.MAP:
        return pa.struct([to_arrow_field(name, child) for name, child in t.fields])
    if t.minor == MinorType.LIST:
        assert t.element is not None
        return pa.list_(to_arrow_field("element", t.element))
    if t.minor == MinorType.UNION:
        return UNION_ARROW
    if t.minor == MinorType.DECIMAL:
        return pa.decimal128(t.precision or MAX_DECIMAL_PRECISION, t.scale or 0)
    return _TO_ARROW[t.minor]


def to_arrow_field(name: str, t: MajorType) -> pa.Field:
    return pa.field(name, to_arrow(t), nullable=t.mode != DataMode.REQUIRED)


def from_arrow(dtype: pa.DataType, *, nullable: bool = True) -> MajorType:
    """The Drill type of an Arrow type. A list of non-null scalars or maps is REPEATED."""
    mode = DataMode.OPTIONAL if nullable else DataMode.REQUIRED
    if is_union(dtype):
        return MajorType(MinorType.UNION, mode)
    if pa.types.is_struct(dtype):
        return MajorType.map({f.name: from_arrow_field(f) for f in dtype}, mode)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        element = from_arrow_field(dtype.value_field)
        if element.mode == DataMode.REQUIRED and element.minor != MinorType.LIST:
            return element.with_mode(DataMode.REPEATED)
        return MajorType.list_of(element, mode)
    if pa.types.is_timestamp(dtype):
        return MajorType(MinorType.TIMESTAMP, mode)
    if pa.types.is_time(dtype):
        return MajorType(MinorType.TIME, mode)
    if pa.types.is_decimal(dtype):
        if dtype.precision > MAX_DECIMAL_PRECISION:
            raise TypeError(
                f"no Drill type for Arrow type {dtype}: a DECIMAL has at most "
                f"{MAX_DECIMAL_PRECISION} digits"
            )
        return MajorType.decimal(dtype.precision, dtype.scale, mode)
    minor = _FROM_ARROW.get(str(dtype)) or _ARROW_ALIASES.get(str(dtype))
    if minor is None:
        raise TypeError(f"no Drill type for Arrow type {dtype}")
    return MajorType(minor, mode)


def from_arrow_field(f: pa.Field) -> MajorType:
    return from_arrow(f.type, nullable=f.nullable)


def schema_from_arrow(schema: pa.Schema) -> dict[str, MajorType]:
    return {f.name: from_arrow_field(f) for f in schema}


def align(array: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array:
    """``array`` as an array of type ``target``: nulls of a null array, missing map members as
    nulls, members matched by name case-insensitively, any value into a UNION."""
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
