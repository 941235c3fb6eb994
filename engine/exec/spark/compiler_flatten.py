"""``flatten`` on Spark: one record per element of an array, one for anything else.

An array gives one copy of the record per element, in element order; an empty array gives no
record (R-FLATTEN-EMPTY); a null or missing array, a scalar or a map gives one record carrying that
value. Arrays go through ``posexplode`` of ``coalesce(value, [null])``, so a null array keeps its
record with a null element.

>>> FLATTEN_POSITION
'__drill_flatten_pos'
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.exec.spark.compiler_order import sequence_pair, temp

FLATTEN_POSITION = temp("flatten_pos")


def flatten_rows(df: DataFrame, value: Column, *, seq: str, name: str) -> DataFrame:
    """``df`` with column ``name`` holding each element of ``value`` (see the module docstring);
    the records' order is (record, element): a sequence pair, no sort."""
    dtype = df.select(value.alias("v")).schema.fields[0].dataType
    if not isinstance(dtype, T.ArrayType):
        return df.withColumn(name, value)
    one_null = F.array(F.lit(None).cast(dtype.elementType))
    exploded = df.select(
        "*", F.posexplode(F.coalesce(value, one_null)).alias(FLATTEN_POSITION, name)
    )
    seq_type = df.schema[seq].dataType
    order = sequence_pair(F.col(seq), seq_type, F.col(FLATTEN_POSITION), T.IntegerType())
    return exploded.withColumn(seq, order).drop(FLATTEN_POSITION)
