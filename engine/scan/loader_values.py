"""Python values for the result set loader: their Drill type, how a column stores them, their size.

A scalar writer accepts a Python value when :func:`converter` says how a column of its type stores
a value of the value's type. The byte estimate of a value (for the batch byte limit) is the width of
the column's type, or ``len(value) + 4`` (data plus an offset) for VARCHAR and VARBINARY, where the
length of a string is counted in characters.

>>> minor_of_value(3), minor_of_value(2.5), minor_of_value({"a": 1})
(<MinorType.BIGINT: 'BIGINT'>, <MinorType.FLOAT8: 'FLOAT8'>, None)
>>> converter(MinorType.FLOAT8, MinorType.BIGINT)(3)
3.0
>>> converter(MinorType.BIGINT, MinorType.VARCHAR) is None
True
"""

from __future__ import annotations

import datetime
import decimal
import numbers
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from engine.types import MinorType

Converter = Callable[[Any], Any]

_INT32 = 2**31
_INT64 = 2**63

_VALUE_MINOR: dict[type, MinorType] = {
    bool: MinorType.BIT,
    int: MinorType.BIGINT,
    float: MinorType.FLOAT8,
    str: MinorType.VARCHAR,
    bytes: MinorType.VARBINARY,
    bytearray: MinorType.VARBINARY,
    datetime.datetime: MinorType.TIMESTAMP,
    datetime.date: MinorType.DATE,
    datetime.time: MinorType.TIME,
    decimal.Decimal: MinorType.FLOAT8,
}

# Bytes a value of the type adds to a batch; VARCHAR and VARBINARY are sized by value.
FIXED_WIDTH: dict[MinorType, int] = {
    MinorType.NULL: 1,
    MinorType.BIT: 1,
    MinorType.INT: 4,
    MinorType.BIGINT: 8,
    MinorType.FLOAT4: 4,
    MinorType.FLOAT8: 8,
    MinorType.DATE: 4,
    MinorType.TIME: 8,
    MinorType.TIMESTAMP: 8,
}
NULL_BYTES = 1
OFFSET_BYTES = 4

# The widenings a caller may ask for, and the Arrow data a column of the first type accepts as is.
WIDENINGS: frozenset[tuple[MinorType, MinorType]] = frozenset(
    {
        (MinorType.INT, MinorType.BIGINT),
        (MinorType.INT, MinorType.FLOAT4),
        (MinorType.INT, MinorType.FLOAT8),
        (MinorType.BIGINT, MinorType.FLOAT8),
        (MinorType.FLOAT4, MinorType.FLOAT8),
    }
)

# What a REQUIRED column holds in a row that did not write it (Drill fills such "empties" with zeros).
REQUIRED_DEFAULTS: dict[MinorType, Any] = {
    MinorType.BIT: False,
    MinorType.INT: 0,
    MinorType.BIGINT: 0,
    MinorType.FLOAT4: 0.0,
    MinorType.FLOAT8: 0.0,
    MinorType.VARCHAR: "",
    MinorType.VARBINARY: b"",
    MinorType.DATE: datetime.date(1970, 1, 1),
    MinorType.TIME: datetime.time(0),
    MinorType.TIMESTAMP: datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC),
}


class ValueOutOfRange(ValueError):
    """An integer too large for the column's type; the caller turns it into a DrillError."""


def minor_of_value(value: Any) -> MinorType | None:
    """The Drill type a Python scalar is written as; None for non-scalars (dicts, lists, ...)."""
    minor = _VALUE_MINOR.get(type(value))
    if minor is not None:
        return minor
    if isinstance(value, bool):
        return MinorType.BIT
    if isinstance(value, numbers.Integral):
        return MinorType.BIGINT
    if isinstance(value, numbers.Real | decimal.Decimal):
        return MinorType.FLOAT8
    if isinstance(value, str):
        return MinorType.VARCHAR
    if isinstance(value, bytes | bytearray | memoryview):
        return MinorType.VARBINARY
    if isinstance(value, datetime.datetime):
        return MinorType.TIMESTAMP
    if isinstance(value, datetime.date):
        return MinorType.DATE
    if isinstance(value, datetime.time):
        return MinorType.TIME
    return None


def describe_value(value: Any) -> str:
    """The type name of a value for an error message: a Drill type where there is one."""
    minor = minor_of_value(value)
    if minor is not None:
        return minor.value
    if isinstance(value, Mapping):
        return "MAP"
    if isinstance(value, list | tuple):
        return "LIST"
    return type(value).__name__


def _to_bigint(value: Any) -> int:
    value = int(value)
    if not -_INT64 <= value < _INT64:
        raise ValueOutOfRange(value)
    return value


def _to_int(value: Any) -> int:
    value = int(value)
    if not -_INT32 <= value < _INT32:
        raise ValueOutOfRange(value)
    return value


def _same(value: Any) -> Any:
    return value


_CONVERTERS: dict[tuple[MinorType, MinorType], Converter] = {
    (MinorType.BIGINT, MinorType.BIGINT): _to_bigint,
    (MinorType.INT, MinorType.BIGINT): _to_int,
    (MinorType.FLOAT8, MinorType.BIGINT): float,
    (MinorType.FLOAT4, MinorType.BIGINT): float,
    (MinorType.FLOAT8, MinorType.FLOAT8): float,
    (MinorType.FLOAT4, MinorType.FLOAT8): float,
    (MinorType.BIT, MinorType.BIT): bool,
    (MinorType.VARCHAR, MinorType.VARCHAR): _same,
    (MinorType.VARBINARY, MinorType.VARBINARY): bytes,
    (MinorType.DATE, MinorType.DATE): _same,
    (MinorType.TIME, MinorType.TIME): _same,
    (MinorType.TIMESTAMP, MinorType.TIMESTAMP): _same,
}


def converter(column: MinorType, value: MinorType) -> Converter | None:
    """How a column of type ``column`` stores a value of type ``value``; None if it cannot.

    Integers go into INT (when they fit), BIGINT, FLOAT4 and FLOAT8 columns; nothing else crosses types.
    """
    return _CONVERTERS.get((column, value))


def arrow_castable(data: MinorType, column: MinorType) -> bool:
    """Whether Arrow data of type ``data`` can be cast into a column of type ``column`` losslessly."""
    return data == column or data == MinorType.NULL or (data, column) in WIDENINGS


def required_default(minor: MinorType, dtype: pa.DataType) -> pa.Scalar:
    """The value a REQUIRED column of this type holds where nothing was written."""
    return pa.scalar(REQUIRED_DEFAULTS[minor], type=dtype)
