"""Records Spark can take apart: a scan's record struct carries one more member, always null and
never read (:data:`UNREAD`).

Spark's optimizer replaces a struct column by the members a plan reads from it, through sorts,
windows, joins, limits, aggregates and shuffles (``NestedColumnAliasing``), but only when some
member is left unread. The projection pushdown gives a scan only the members its plan reads, so
without one more member every record would be built whole for each row and carried whole
through every shuffle, sort and top-N. With it, Spark carries the members read, as plain
columns, and the struct is not built past the scan.

Nothing outside the compiler sees the member: an expression reading the record whole gets it
without (:func:`drop_unread`, applied where field paths are resolved), and the stores and the
collected outputs drop it (:func:`without_unread`). Only a record's own struct (a top-level
column) carries it.

>>> from pyspark.sql import types as T
>>> with_unread_type(T.StructType([T.StructField("id", T.LongType())])).fieldNames()
['id', '__drill_unread']
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.exec.spark.constant_columns import lit_as

UNREAD = "__drill_unread"
"""The name of the member no one reads."""


def with_unread(members: Sequence[Column]) -> Column:
    """A record struct of ``members`` (named Columns) and the unread member."""
    return F.struct(*members, lit_as(None, "boolean").alias(UNREAD))


def with_unread_type(dtype: T.StructType) -> T.StructType:
    """``dtype`` with the unread member last (the type of :func:`with_unread`'s struct)."""
    return T.StructType([*dtype.fields, T.StructField(UNREAD, T.BooleanType())])


def has_unread(dtype: T.DataType) -> bool:
    """Whether ``dtype`` is a struct carrying the unread member."""
    return isinstance(dtype, T.StructType) and UNREAD in dtype.fieldNames()


def drop_unread(column: Column, dtype: T.DataType) -> tuple[Column, T.DataType]:
    """``column`` of type ``dtype`` and its type, without the unread member (as they are when
    ``dtype`` has none)."""
    if not has_unread(dtype):
        return column, dtype
    assert isinstance(dtype, T.StructType)
    fields = [f for f in dtype.fields if f.name != UNREAD]
    if not fields:  # Spark drops no struct's last member: the record is empty
        return F.when(column.isNotNull(), F.struct()), T.StructType()
    return column.dropFields(UNREAD), T.StructType(fields)


def without_unread(df: DataFrame) -> DataFrame:
    """``df`` with no record carrying the unread member (``df`` itself when none does)."""
    from engine.exec.spark.paths import top_column  # paths imports this module

    fields = df.schema.fields
    if not any(has_unread(f.dataType) for f in fields):
        return df
    return df.select(
        *[
            drop_unread(top_column(f.name), f.dataType)[0].alias(f.name)
            if has_unread(f.dataType)
            else top_column(f.name)
            for f in fields
        ]
    )
