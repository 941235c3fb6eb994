"""``flatten`` on Spark: one record per element of an array, one for anything else.

An array gives one copy of the record per element, in element order; an empty array gives no
record (R-FLATTEN-EMPTY); a null or missing array, a scalar or a map gives one record carrying that
value. Arrays go through ``posexplode`` of ``coalesce(value, [null])``, so a null array keeps its
record with a null element. A UNION (VARIANT) value is flattened per record: a variant array gives
its elements, any other value one record (``try_variant_get(value, '$', 'array<variant>')``).
When nothing observes the records' order (``ordered=False``), a plain ``explode`` gives the
elements and the sequence stays as it is: no position, no sequence pair.

>>> FLATTEN_POSITION
'__drill_flatten_pos'
"""

from __future__ import annotations

from typing import NamedTuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.exec.spark.compiler_order import sequence_pair, temp
from engine.exec.spark.constant_columns import col, lit
from engine.exec.spark.paths import Typed

FLATTEN_POSITION = temp("flatten_pos")


def element_type(dtype: T.DataType) -> T.DataType:
    """The type of what flattening a value of ``dtype`` gives: an array's elements, a variant,
    anything else itself."""
    return dtype.elementType if isinstance(dtype, T.ArrayType) else dtype


class Flattened(NamedTuple):
    """What :func:`flatten_rows` gives: ``frame`` with a row per element, the ``element`` of each
    row (a column of ``frame`` or a value over it) and the rows' ``sequence`` value (None: the
    input's, unchanged). The caller writes them in one select."""

    frame: DataFrame
    element: Typed
    sequence: Column | None


def flatten_rows(
    df: DataFrame, typed: Typed, *, seq: str, name: str, ordered: bool = True
) -> Flattened:
    """A row of ``df`` per element of ``typed`` (see the module docstring; the element of type
    :func:`element_type`, in column ``name`` where there is one); the rows' order is (record,
    element): a sequence pair, no sort (``ordered``)."""
    value, dtype = typed.column, typed.dtype
    if isinstance(dtype, T.VariantType):
        # A UNION value: a variant array gives its elements, anything else (null included) itself.
        elements = F.try_variant_get(value, "$", "array<variant>")
        items = F.when(elements.isNotNull(), elements).otherwise(F.array(value))
    elif isinstance(dtype, T.ArrayType):
        items = F.ifnull(value, F.array(lit(None).cast(dtype.elementType)))
    else:
        return Flattened(df, typed, None)  # the value itself, one row per record
    element = Typed(col(name), element_type(dtype))
    if not ordered:
        return Flattened(df.select("*", F.explode(items).alias(name)), element, None)
    exploded = df.select("*", F.posexplode(items).alias(FLATTEN_POSITION, name))
    seq_type = df.schema[seq].dataType
    order = sequence_pair(col(seq), seq_type, col(FLATTEN_POSITION), T.IntegerType())
    return Flattened(exploded, element, order)
