"""Drill types, and their one mapping to Arrow (:mod:`engine.types.arrow`) and to Spark.

A Drill type is a *minor type* (BIGINT, VARCHAR, MAP, ...) with a *data mode*: REQUIRED (never null),
OPTIONAL (nullable) or REPEATED (a list of non-null values of the minor type). MAP carries its member
fields; LIST carries the type of its elements (for lists that hold nulls or other lists).

>>> t = MajorType.map({"a": BIGINT, "tags": MajorType(MinorType.VARCHAR, DataMode.REPEATED)})
>>> str(t)
'MAP<a: BIGINT, tags: REPEATED VARCHAR>'
>>> from engine.types import from_arrow, to_arrow
>>> from_arrow(to_arrow(t), nullable=True) == t
True
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import enum
import json
from dataclasses import dataclass, field, replace


class MinorType(enum.StrEnum):
    """The scalar and composite types of Drill's value vectors."""

    NULL = "NULL"  # the type of a column with no value seen yet (Drill's "late" type)
    BIT = "BIT"
    INT = "INT"
    BIGINT = "BIGINT"
    FLOAT4 = "FLOAT4"
    FLOAT8 = "FLOAT8"
    DECIMAL = "DECIMAL"  # exact: ``precision`` digits, ``scale`` of them after the point
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
    """A minor type with its data mode; ``fields`` for MAP, ``element`` for LIST, ``precision``
    and ``scale`` for DECIMAL."""

    minor: MinorType
    mode: DataMode = DataMode.OPTIONAL
    fields: tuple[tuple[str, MajorType], ...] = field(default=())
    element: MajorType | None = None
    precision: int | None = None
    scale: int | None = None

    @staticmethod
    def decimal(precision: int, scale: int, mode: DataMode = DataMode.OPTIONAL) -> MajorType:
        """DECIMAL(precision, scale): 1 <= precision <= 38, 0 <= scale <= precision.

        >>> str(MajorType.decimal(15, 2))
        'DECIMAL(15, 2)'
        """
        if not (1 <= precision <= MAX_DECIMAL_PRECISION and 0 <= scale <= precision):
            raise ValueError(
                f"DECIMAL({precision}, {scale}) is not a decimal type: the precision is 1 to "
                f"{MAX_DECIMAL_PRECISION} digits and the scale 0 to the precision"
            )
        return MajorType(MinorType.DECIMAL, mode, precision=precision, scale=scale)

    @staticmethod
    def map(fields: dict[str, MajorType], mode: DataMode = DataMode.OPTIONAL) -> MajorType:
        return MajorType(MinorType.MAP, mode, tuple(fields.items()))

    @staticmethod
    def list_of(element: MajorType, mode: DataMode = DataMode.OPTIONAL) -> MajorType:
        return MajorType(MinorType.LIST, mode, element=element)

    def __repr__(self) -> str:
        sizes = (
            "" if self.precision is None else f", precision={self.precision}, scale={self.scale}"
        )
        return (
            f"MajorType(minor={self.minor!r}, mode={self.mode!r}, fields={self.fields!r}, "
            f"element={self.element!r}{sizes})"
        )

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
        if self.minor == MinorType.DECIMAL:
            return f"{prefix}DECIMAL({self.precision}, {self.scale})"
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

MAX_DECIMAL_PRECISION = 38
DEFAULT_DECIMAL = (MAX_DECIMAL_PRECISION, 0)
"""DECIMAL without a precision and scale: Drill's DECIMAL(38, 0)."""

NUMERIC = frozenset(
    {MinorType.INT, MinorType.BIGINT, MinorType.DECIMAL, MinorType.FLOAT4, MinorType.FLOAT8}
)

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
    "NUMERIC": MinorType.DECIMAL,
    "DEC": MinorType.DECIMAL,
}


def type_from_name(name: str) -> MinorType | None:
    """The minor type a plan's type name stands for (case-insensitive), or None.

    >>> type_from_name("double")
    <MinorType.FLOAT8: 'FLOAT8'>
    """
    return TYPE_NAMES.get(name.upper())


def merge_modes(*modes: DataMode) -> DataMode:
    """OPTIONAL if any input may be null, else REQUIRED."""
    return DataMode.OPTIONAL if DataMode.OPTIONAL in modes else DataMode.REQUIRED


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
        return float(value)  # JSON has one kind of number; text columns keep the digits
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


# ---------------------------------------------------------------- Arrow
# The Arrow mapping (and the UNION extension type) lives in engine.types.arrow, imported on first
# use of one of its names, so that parsing and validating a plan does not load pyarrow.

_ARROW_NAMES = frozenset(
    {
        "UNION_ARROW",
        "UnionArrowType",
        "UnionScalar",
        "align",
        "from_arrow",
        "from_arrow_field",
        "is_union",
        "schema_from_arrow",
        "to_arrow",
        "to_arrow_field",
        "union_array",
        "union_text",
    }
)


def __getattr__(name: str) -> object:
    if name not in _ARROW_NAMES:
        raise AttributeError(f"module 'engine.types' has no attribute {name!r}")
    from engine.types import arrow

    value = getattr(arrow, name)
    globals()[name] = value
    return value


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
    if t.minor == MinorType.DECIMAL:
        return st.DecimalType(t.precision or DEFAULT_DECIMAL[0], t.scale or 0)
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
    if isinstance(dtype, st.DecimalType):
        return MajorType.decimal(dtype.precision, dtype.scale, mode)
    scalars = {
        st.NullType: MinorType.NULL,
        st.BooleanType: MinorType.BIT,
        st.ByteType: MinorType.INT,
        st.ShortType: MinorType.INT,
        st.IntegerType: MinorType.INT,
        st.LongType: MinorType.BIGINT,
        st.FloatType: MinorType.FLOAT4,
        st.DoubleType: MinorType.FLOAT8,
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
