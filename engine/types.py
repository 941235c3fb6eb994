"""Drill types, and their one mapping to Arrow and to Spark.

A Drill type is a *minor type* (BIGINT, VARCHAR, MAP, ...) with a *data mode*: REQUIRED (never null),
OPTIONAL (nullable) or REPEATED (a list of non-null values of the minor type). MAP carries its member
fields; LIST carries the type of its elements (for lists that hold nulls or other lists).

>>> t = MajorType.map({"a": BIGINT, "tags": MajorType(MinorType.VARCHAR, DataMode.REPEATED)})
>>> str(t)
'MAP<a: BIGINT, tags: REPEATED VARCHAR>'
>>> from_arrow(to_arrow(t), nullable=True) == t
True
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import decimal
import enum
import json
from dataclasses import dataclass, field, replace

import pyarrow as pa


class MinorType(enum.StrEnum):
    """The scalar and composite types of Drill's value vectors."""

    NULL = "NULL"  # the type of a column with no value seen yet (Drill's "late" type)
    BIT = "BIT"
    INT = "INT"
    BIGINT = "BIGINT"
    FLOAT4 = "FLOAT4"
    FLOAT8 = "FLOAT8"
    VARCHAR = "VARCHAR"
    VARBINARY = "VARBINARY"
    DATE = "DATE"
    TIME = "TIME"
    TIMESTAMP = "TIMESTAMP"
    MAP = "MAP"
    LIST = "LIST"
    UNION = "UNION"  # values of several kinds in one column (Drill's UNION type); see below


class DataMode(enum.StrEnum):
    REQUIRED = "REQUIRED"
    OPTIONAL = "OPTIONAL"
    REPEATED = "REPEATED"


@dataclass(frozen=True)
class MajorType:
    """A minor type with its data mode; ``fields`` for MAP, ``element`` for LIST."""

    minor: MinorType
    mode: DataMode = DataMode.OPTIONAL
    fields: tuple[tuple[str, MajorType], ...] = field(default=())
    element: MajorType | None = None

    @staticmethod
    def map(fields: dict[str, MajorType], mode: DataMode = DataMode.OPTIONAL) -> MajorType:
        return MajorType(MinorType.MAP, mode, tuple(fields.items()))

    @staticmethod
    def list_of(element: MajorType, mode: DataMode = DataMode.OPTIONAL) -> MajorType:
        return MajorType(MinorType.LIST, mode, element=element)

    def with_mode(self, mode: DataMode) -> MajorType:
        return replace(self, mode=mode)

    @property
    def is_numeric(self) -> bool:
        return self.minor in NUMERIC and self.mode != DataMode.REPEATED

    def field(self, name: str) -> MajorType | None:
        """The type of member ``name`` of a MAP, or None."""
        return dict(self.fields).get(name)

    def __str__(self) -> str:
        prefix = "REPEATED " if self.mode == DataMode.REPEATED else ""
        if self.minor == MinorType.MAP:
            inner = ", ".join(f"{name}: {typ}" for name, typ in self.fields)
            return f"{prefix}MAP<{inner}>"
        if self.minor == MinorType.LIST:
            return f"{prefix}LIST<{self.element}>"
        return f"{prefix}{self.minor.value}"


def scalar(minor: MinorType, mode: DataMode = DataMode.OPTIONAL) -> MajorType:
    return MajorType(minor, mode)


NULL = scalar(MinorType.NULL)
BIT = scalar(MinorType.BIT)
INT = scalar(MinorType.INT)
BIGINT = scalar(MinorType.BIGINT)
FLOAT4 = scalar(MinorType.FLOAT4)
FLOAT8 = scalar(MinorType.FLOAT8)
VARCHAR = scalar(MinorType.VARCHAR)
VARBINARY = scalar(MinorType.VARBINARY)
UNION = scalar(MinorType.UNION)
DATE = scalar(MinorType.DATE)
TIME = scalar(MinorType.TIME)
TIMESTAMP = scalar(MinorType.TIMESTAMP)

NUMERIC = frozenset({MinorType.INT, MinorType.BIGINT, MinorType.FLOAT4, MinorType.FLOAT8})
_NUMERIC_RANK = [MinorType.INT, MinorType.BIGINT, MinorType.FLOAT4, MinorType.FLOAT8]

# Names a plan may use for a type (in `cast(x as T)`, `castT(x)` and provided schemas).
TYPE_NAMES: dict[str, MinorType] = {
    **{m.value: m for m in MinorType if m not in (MinorType.NULL, MinorType.UNION)},
    "BOOLEAN": MinorType.BIT,
    "BOOL": MinorType.BIT,
    "INTEGER": MinorType.INT,
    "INT4": MinorType.INT,
    "LONG": MinorType.BIGINT,
    "INT8": MinorType.BIGINT,
    "FLOAT": MinorType.FLOAT4,
    "REAL": MinorType.FLOAT4,
    "DOUBLE": MinorType.FLOAT8,
    "STRING": MinorType.VARCHAR,
    "TEXT": MinorType.VARCHAR,
    "VARCHAR": MinorType.VARCHAR,
    "BINARY": MinorType.VARBINARY,
    "BYTES": MinorType.VARBINARY,
}


def type_from_name(name: str) -> MinorType | None:
    """The minor type a plan's type name stands for (case-insensitive), or None.

    >>> type_from_name("double")
    <MinorType.FLOAT8: 'FLOAT8'>
    """
    return TYPE_NAMES.get(name.upper())


def common_numeric(left: MinorType, right: MinorType) -> MinorType:
    """The type two numbers widen to: the wider of the two (INT < BIGINT < FLOAT4 < FLOAT8)."""
    return max(left, right, key=_NUMERIC_RANK.index)


def merge_modes(*modes: DataMode) -> DataMode:
    """OPTIONAL if any input may be null, else REQUIRED."""
    return DataMode.OPTIONAL if DataMode.OPTIONAL in modes else DataMode.REQUIRED


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


def json_default(value: object) -> object:
    """JSON for the Python values Arrow gives that ``json`` does not know.

    >>> json.dumps({"d": dt.date(2024, 1, 2), "b": b"hi"}, default=json_default)
    '{"d": "2024-01-02", "b": "aGk="}'
    """
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"cannot write a {type(value).__name__} as JSON")


def json_text(value: object) -> str | None:
    """The JSON text a UNION column stores for a Python value (None stays null); map keys are
    sorted and the text compact (as Spark writes a VARIANT), so equal values have equal texts.

    >>> json_text({"t": [1, 2.5, "x"], "a": None}), json_text(None)
    ('{"a":null,"t":[1,2.5,"x"]}', None)
    """
    if value is None:
        return None
    return json.dumps(
        value, default=json_default, ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )


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
        return MajorType(MinorType.FLOAT8, mode)
    minor = _FROM_ARROW.get(str(dtype)) or _ARROW_ALIASES.get(str(dtype))
    if minor is None:
        raise TypeError(f"no Drill type for Arrow type {dtype}")
    return MajorType(minor, mode)


def from_arrow_field(f: pa.Field) -> MajorType:
    return from_arrow(f.type, nullable=f.nullable)


def schema_from_arrow(schema: pa.Schema) -> dict[str, MajorType]:
    return {f.name: from_arrow_field(f) for f in schema}


# ---------------------------------------------------------------- Spark
# pyspark is imported lazily: the engine's plan and expression layers must not need a JVM.


def to_spark(t: MajorType):
    """The Spark DataType of a Drill type (``pyspark.sql.types``)."""
    from pyspark.sql import types as st

    if t.mode == DataMode.REPEATED:
        return st.ArrayType(to_spark(t.with_mode(DataMode.REQUIRED)), containsNull=False)
    if t.minor == MinorType.MAP:
        return st.StructType(
            [st.StructField(n, to_spark(c), c.mode != DataMode.REQUIRED) for n, c in t.fields]
        )
    if t.minor == MinorType.LIST:
        assert t.element is not None
        return st.ArrayType(to_spark(t.element), containsNull=t.element.mode != DataMode.REQUIRED)
    if t.minor == MinorType.UNION:
        return st.VariantType()
    return {
        MinorType.NULL: st.NullType(),
        MinorType.BIT: st.BooleanType(),
        MinorType.INT: st.IntegerType(),
        MinorType.BIGINT: st.LongType(),
        MinorType.FLOAT4: st.FloatType(),
        MinorType.FLOAT8: st.DoubleType(),
        MinorType.VARCHAR: st.StringType(),
        MinorType.VARBINARY: st.BinaryType(),
        MinorType.DATE: st.DateType(),
        MinorType.TIME: st.TimestampNTZType(),
        MinorType.TIMESTAMP: st.TimestampType(),
    }[t.minor]


def from_spark(dtype, *, nullable: bool = True) -> MajorType:
    """The Drill type of a Spark DataType."""
    from pyspark.sql import types as st

    mode = DataMode.OPTIONAL if nullable else DataMode.REQUIRED
    if isinstance(dtype, st.VariantType):
        return MajorType(MinorType.UNION, mode)
    if isinstance(dtype, st.StructType):
        return MajorType.map(
            {f.name: from_spark(f.dataType, nullable=f.nullable) for f in dtype}, mode
        )
    if isinstance(dtype, st.ArrayType):
        element = from_spark(dtype.elementType, nullable=dtype.containsNull)
        if element.mode == DataMode.REQUIRED and element.minor != MinorType.LIST:
            return element.with_mode(DataMode.REPEATED)
        return MajorType.list_of(element, mode)
    scalars = {
        st.NullType: MinorType.NULL,
        st.BooleanType: MinorType.BIT,
        st.ByteType: MinorType.INT,
        st.ShortType: MinorType.INT,
        st.IntegerType: MinorType.INT,
        st.LongType: MinorType.BIGINT,
        st.FloatType: MinorType.FLOAT4,
        st.DoubleType: MinorType.FLOAT8,
        st.DecimalType: MinorType.FLOAT8,
        st.StringType: MinorType.VARCHAR,
        st.BinaryType: MinorType.VARBINARY,
        st.DateType: MinorType.DATE,
        st.TimestampNTZType: MinorType.TIME,
        st.TimestampType: MinorType.TIMESTAMP,
    }
    for cls, minor in scalars.items():
        if isinstance(dtype, cls):
            return MajorType(minor, mode)
    raise TypeError(f"no Drill type for Spark type {dtype.simpleString()}")
