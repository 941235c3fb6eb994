"""Literals and named columns made once (``engine.exec.spark.constant_columns``): the same Column
for the same value or name, never one value's Column for another's, right in every DataFrame it
is used in."""

from __future__ import annotations

import math
from typing import Any

from py4j_calls import counted
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.exec.spark.constant_columns import col, constant, lit, lit_as


def test_a_literal_or_a_name_is_one_column(spark: Any) -> None:
    assert lit(7) is lit(7)
    assert lit("x") is lit("x")
    assert lit(None) is lit(None)
    assert col("a") is col("a")
    assert col("a") is not col("`a`")
    assert lit_as(None, T.LongType()) is lit_as(None, T.LongType())
    assert lit_as(0, "long") is not lit_as(0, "int")


def test_values_that_python_calls_equal_keep_their_own_literals(spark: Any) -> None:
    # True == 1 == 1.0 and -0.0 == 0.0 in Python; in Spark they are other values and types.
    row = spark.range(1).select(
        lit(1).alias("one"),
        lit(True).alias("true"),
        lit(0).alias("zero"),
        lit(False).alias("false"),
        lit(-0.0).alias("negative_zero"),
        lit(0.0).alias("zero_double"),
        lit(float("nan")).alias("nan"),
        lit("1").alias("text"),
    )
    assert [f.dataType.simpleString() for f in row.schema.fields] == [
        "int", "boolean", "int", "boolean", "double", "double", "double", "string"
    ]  # fmt: skip
    values = row.first()
    assert (values.one, values.true, values.zero, values.false) == (1, True, 0, False)
    assert math.copysign(1.0, values.negative_zero) == -1.0
    assert math.copysign(1.0, values.zero_double) == 1.0
    assert math.isnan(values.nan) and values.text == "1"


def test_typed_literals_keep_their_types(spark: Any) -> None:
    row = spark.range(1).select(
        lit_as(None, "boolean").alias("b"),
        lit_as(None, T.DecimalType(12, 2)).alias("d"),
        lit_as(None, T.DecimalType(20, 4)).alias("e"),
        lit_as(0, T.LongType()).alias("z"),
        lit_as(0, "int").alias("i"),
        lit_as(1.5, "decimal(4,2)").alias("f"),
    )
    assert [f.dataType.simpleString() for f in row.schema.fields] == [
        "boolean", "decimal(12,2)", "decimal(20,4)", "bigint", "int", "decimal(4,2)"
    ]  # fmt: skip
    assert tuple(row.first())[:5] == (None, None, None, 0, 0)


def test_an_expression_of_constants_is_made_once_per_key(spark: Any) -> None:
    made: list[int] = []

    def zero() -> Any:
        made.append(1)
        return lit_as(0, "long").alias("seq", metadata={"bits": 0})

    first = constant("test zero sequence", zero)
    assert constant("test zero sequence", zero) is first and len(made) == 1
    assert constant("test another key", zero) is not first
    df = spark.range(2).select(col("id"), first)
    assert df.schema["seq"].metadata == {"bits": 0}
    assert [tuple(r) for r in df.collect()] == [(0, 0), (1, 0)]


def test_one_column_resolves_in_each_dataframe_using_it(spark: Any) -> None:
    left = spark.createDataFrame([(1, "a"), (2, "b")], "k int, v string")
    right = spark.createDataFrame([(2, 20), (3, 30)], "k int, w int")
    k, flag = col("k"), lit(True)
    picked = left.where(k > lit(1)).select(k, flag.alias("f")).collect()
    assert [tuple(r) for r in picked] == [(2, True)]
    others = right.select(k, flag.alias("f"), (col("w") + lit(1)).alias("w1")).orderBy(k)
    assert [tuple(r) for r in others.collect()] == [(2, True, 21), (3, True, 31)]
    joined = left.join(right, "k").select(k, col("v"), col("w")).collect()
    assert [tuple(r) for r in joined] == [(2, "b", 20)]


def test_other_values_are_made_as_pyspark_makes_them(spark: Any) -> None:
    assert lit(1.5) is not lit(1.5)  # floats are not shared
    assert lit([1, 2]) is not lit([1, 2])
    long_text = "x" * 257  # nor long texts (a scan's array literal of its files): none is kept
    assert lit(long_text) is not lit(long_text) and col(long_text) is not col(long_text)
    assert lit("x" * 256) is lit("x" * 256)
    column = lit(F.col("x"))  # a Column passes through, as F.lit passes it
    assert str(column) == str(F.col("x"))


def test_a_made_literal_or_name_costs_no_round_trip(spark: Any) -> None:
    lit(123456), col("some_name")
    with counted() as counts:
        kept = [(lit(123456), col("some_name")) for _ in range(10)]
    assert counts.calls == 0
    with counted() as counts:
        kept = [(F.lit(123456), F.col("some_name")) for _ in range(10)]
    assert counts.calls >= 20  # PySpark's own: a lookup and a call each, at least
    assert kept
