"""Literals and casts compiled for Spark have the types the plan declares, as Spark analyses them.

What a run costs the driver (py4j calls, DataFrames built) is measured by
``benchmarks/spark_profile.py``, not asserted here."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.exec.spark.columns import compile_typed
from engine.exec.spark.paths import cast_column, top_column
from engine.expr import parse_expression


@pytest.mark.parametrize(
    ("text", "dtype"),
    [
        ("1", T.LongType()),
        ("cast(1 as int)", T.IntegerType()),
        ("cast('2024-01-02' as date)", T.DateType()),
        ("'x'", T.StringType()),
        ("1.5", T.DoubleType()),
        ("true", T.BooleanType()),
        ("cast(1 as bigint)", T.LongType()),
        ("5000000000", T.LongType()),
    ],
)
def test_literals_have_their_declared_type(text: str, dtype: T.DataType, spark: Any) -> None:
    typed = compile_typed(parse_expression(text), T.StructType([]))
    assert typed.dtype == dtype
    analysed = spark.range(1).select(typed.column.alias("v")).schema["v"].dataType
    assert analysed == dtype


@pytest.mark.parametrize(
    "dtype",
    [T.DecimalType(9, 2), T.DecimalType(38, 0), T.ShortType(), T.FloatType(), T.BinaryType()],
)
def test_a_cast_by_name_is_a_cast_to_the_type(dtype: T.DataType, spark: Any) -> None:
    value = F.lit("1").cast("binary") if isinstance(dtype, T.BinaryType) else F.lit(1)
    df = spark.range(1).select(cast_column(value, dtype).alias("v"))
    assert df.schema["v"].dataType == dtype


def test_a_column_name_with_a_dot_reads_that_column(spark: Any) -> None:
    df = spark.createDataFrame([(1, 2)], "`a.b` int, c int")
    assert df.select(top_column("a.b").alias("x")).collect()[0]["x"] == 1
