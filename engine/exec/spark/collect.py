"""Collecting a DataFrame to the driver as an Arrow table, whatever its nesting depth.

``DataFrame.toArrow`` moves the rows as Arrow IPC, and pyarrow's IPC reader stops at 64 levels of
nesting ("Max recursion depth reached"). Records that deep (100-level JSON is legal, and the
local executor reads it) are collected as Spark rows instead and converted with the schema:
slower, but only for schemas past :data:`ARROW_IPC_DEPTH`; everything shallower goes through
Arrow unchanged.

>>> from pyspark.sql import types as T
>>> nesting_depth(T.StructType([T.StructField("a", T.ArrayType(T.StructType([])))]))
2
"""

from __future__ import annotations

import datetime
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

ARROW_IPC_DEPTH = 60
"""Schemas nested deeper than this are not collected through Arrow IPC (its limit is 64 levels;
the margin covers how Spark's Arrow writer counts a map's entries)."""


def nesting_depth(dtype: T.DataType) -> int:
    """How many nested levels a value of ``dtype`` has below itself (a map counts two: its
    entries list and their struct, as in Arrow)."""
    if isinstance(dtype, T.StructType):
        return max((1 + nesting_depth(f.dataType) for f in dtype.fields), default=0)
    if isinstance(dtype, T.ArrayType):
        return 1 + nesting_depth(dtype.elementType)
    if isinstance(dtype, T.MapType):
        return 2 + max(nesting_depth(dtype.keyType), nesting_depth(dtype.valueType))
    return 0


def to_arrow(df: DataFrame) -> pa.Table:
    """``df`` as an Arrow table: ``toArrow`` unless the schema is too deep for Arrow IPC."""
    if nesting_depth(df.schema) <= ARROW_IPC_DEPTH:
        return df.toArrow()
    schema = to_arrow_schema(df.schema, timezone="UTC")
    records = [_plain(row, df.schema) for row in df.collect()]
    return pa.Table.from_pylist(records, schema=schema)


def _plain(value: Any, dtype: T.DataType) -> Any:
    """A collected value as pyarrow takes it for the Arrow type of ``dtype``."""
    if value is None:
        return None
    if isinstance(dtype, T.StructType):
        return {f.name: _plain(v, f.dataType) for f, v in zip(dtype.fields, value)}
    if isinstance(dtype, T.ArrayType):
        return [_plain(v, dtype.elementType) for v in value]
    if isinstance(dtype, T.MapType):
        return [(_plain(k, dtype.keyType), _plain(v, dtype.valueType)) for k, v in value.items()]
    if isinstance(dtype, T.TimestampType) and value.tzinfo is None:
        # Spark gives an instant as a naive datetime in this process's local time zone.
        return value.astimezone(datetime.UTC)
    return value
