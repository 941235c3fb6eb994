"""compile_expression / compile_condition / compile_predicate: typed literals, field paths, conditionals, casts, and the
errors a schema shows before Spark runs anything."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pyspark.sql import types as T

from engine.exec.spark.columns import (
    ExpressionCompileError,
    compile_condition,
    compile_expression,
    compile_predicate,
    compile_typed,
)
from engine.expr import ExpressionTypeError, parse_expression

pytestmark = pytest.mark.spark

SCHEMA = T.StructType(
    [
        T.StructField("name", T.StringType()),
        T.StructField("qty", T.LongType()),
        T.StructField("price", T.DoubleType()),
        T.StructField("ok", T.BooleanType()),
        T.StructField(
            "e",
            T.StructType(
                [
                    T.StructField("id", T.IntegerType()),
                    T.StructField("tags", T.ArrayType(T.StringType())),
                    T.StructField(
                        "items",
                        T.ArrayType(T.StructType([T.StructField("sku", T.StringType())])),
                    ),
                ]
            ),
        ),
    ]
)

ROWS = [
    ("apple", 3, 1.5, True, (1, ["x", "y"], [("a",), ("b",)])),
    ("pear", None, None, None, None),
    ("plum", 0, -2.0, False, (None, [], None)),
]


@pytest.fixture(scope="module")
def df(spark):
    return spark.createDataFrame(ROWS, SCHEMA)


def values(df, *texts: str) -> list[tuple]:
    """Each expression's values, one tuple per expression (one Spark action)."""
    schema = df.schema
    columns = [
        compile_expression(parse_expression(t), schema).alias(f"c{i}") for i, t in enumerate(texts)
    ]
    rows = df.select(*columns).collect()
    return [tuple(row[i] for row in rows) for i in range(len(texts))]


def dtype(text: str) -> T.DataType:
    return compile_typed(parse_expression(text), SCHEMA).dtype


def test_field_paths_literals_conditionals_and_casts(df) -> None:
    got = values(
        df,
        "e.id",
        "e.tags[1]",
        "e.tags[9]",
        "e.items.sku",
        "e.nope",
        "nope.deeper[3]",
        "qty * 2",
        "price / qty",
        "if ok then 'yes' elseif qty == 0 then 'zero' else 'other' end",
        "cast(qty as VARCHAR)",
        "castFLOAT8(qty)",
        "'text'",
        "null",
        "1 + 2 * 3",
    )
    assert got == [
        (1, None, None),
        ("y", None, None),
        (None, None, None),
        (["a", "b"], None, None),
        (None, None, None),
        (None, None, None),
        (6, None, 0),
        (0.5, None, float("-inf")),
        ("yes", "other", "zero"),
        ("3", None, "0"),
        (3.0, None, 0.0),
        ("text", "text", "text"),
        (None, None, None),
        (7, 7, 7),
    ]


def test_predicate_reads_null_and_missing_as_false(df) -> None:
    kept = df.where(compile_predicate(parse_expression("qty > 0 || e.nope == 1"), df.schema))
    assert [r["name"] for r in kept.collect()] == ["apple"]


def test_a_predicate_is_false_where_its_condition_is_null(df) -> None:
    rows = df.select(compile_predicate(parse_expression("qty > 0"), df.schema)).collect()
    assert [row[0] for row in rows] == [True, False, False]


def test_a_condition_reaches_the_parquet_reader_with_its_not_null_tests(spark, tmp_path) -> None:
    """A ``where`` condition is Spark's own boolean (no ``coalesce``): Spark pushes each conjunct
    into the reader and infers the not-null tests, as for its own SQL."""
    path = str(tmp_path / "t.parquet")
    spark.createDataFrame([(1, 5), (3, 1), (None, 2)], "x bigint, y bigint").write.parquet(path)
    read = spark.read.parquet(path)
    kept = read.where(compile_condition(parse_expression("x > 2 && y < 3"), read.schema))
    plan = kept._jdf.queryExecution().executedPlan().toString()
    assert "GreaterThan(x,2)" in plan and "LessThan(y,3)" in plan and "IsNotNull(x)" in plan
    assert [tuple(row) for row in kept.collect()] == [(3, 1)]


def test_a_like_prefix_reaches_the_parquet_reader(spark, tmp_path) -> None:
    """``like(name, 'fo%')`` is Spark's ``startswith``, which the reader tests on row groups."""
    path = str(tmp_path / "t.parquet")
    spark.createDataFrame([("forest",), ("fog",), ("x%",)], "name string").write.parquet(path)
    read = spark.read.parquet(path)
    kept = read.where(compile_condition(parse_expression("like(name, 'fo%')"), read.schema))
    assert "StringStartsWith(name,fo)" in kept._jdf.queryExecution().executedPlan().toString()
    assert sorted(row[0] for row in kept.collect()) == ["fog", "forest"]


def test_decimal_arithmetic_that_always_fits_is_unchecked(spark) -> None:
    """DECIMAL(15, 2) * DECIMAL(15, 2) is DECIMAL(31, 4) exactly: Spark multiplies once, with no
    overflow test; past 38 digits the result is tested."""
    rows = [(Decimal("1.50"), Decimal("2.00")), (None, Decimal("1.00"))]
    df = spark.createDataFrame(rows, "a decimal(15,2), b decimal(30,2)")
    exact = compile_typed(parse_expression("a * a + a"), df.schema)
    assert exact.dtype == T.DecimalType(32, 4)
    assert [row[0] for row in df.select(exact.column).collect()] == [Decimal("3.7500"), None]
    assert "raise_error" not in str(df.select(exact.column)._jdf.queryExecution().optimizedPlan())
    wide = compile_typed(parse_expression("b * a"), df.schema)
    assert "raise_error" in str(df.select(wide.column)._jdf.queryExecution().optimizedPlan())


def test_types_follow_the_local_evaluator() -> None:
    assert dtype("qty + 1") == T.LongType()
    assert dtype("e.id + e.id") == T.LongType()  # INT arithmetic widens to BIGINT, as Arrow does
    assert dtype("qty + 1.5") == T.DoubleType()
    assert dtype("qty / 2") == T.DoubleType()
    assert dtype("-e.id") == T.IntegerType()  # negate keeps the width
    assert dtype("e.nope") == T.NullType()
    assert dtype("e.items.sku") == T.ArrayType(T.StringType(), True)
    assert dtype("length(name)") == T.LongType()
    assert dtype("if ok then qty else price end") == T.DoubleType()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name > 3", "cannot compare VARCHAR with BIGINT"),
        ("name + 1", "expected a number, got VARCHAR"),
        ("ok && qty", "expected a boolean, got BIGINT"),
        ("e.tags == 'x'", "cannot compare a"),
        ("coalesce(name, qty)", "mixes incompatible types"),
        ("if qty then 1 else 2 end", "condition must be true or false"),
        ("if ok then name else qty end", "incompatible types"),
        ("cast(e as BIGINT)", "cannot cast a MAP"),
        ("upper(qty)", "expected a string"),
    ],
)
def test_type_mismatches_the_schema_shows_fail_at_compile_time(text: str, message: str) -> None:
    with pytest.raises(ExpressionTypeError, match=message) as err:
        compile_expression(parse_expression(text), SCHEMA)
    assert "`" in str(err.value)  # the message quotes the expression


def test_a_non_boolean_condition_is_refused() -> None:
    with pytest.raises(ExpressionTypeError, match="must be true or false"):
        compile_predicate(parse_expression("qty + 1"), SCHEMA)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope(qty)", "unknown function 'nope'"),
        ("sum(qty)", "aggregate function"),
        ("row_number()", "aggregate function"),
        ("substr(name)", "takes 2 to 3 arguments, got 1"),
    ],
)
def test_calls_that_cannot_compile_say_why(text: str, message: str) -> None:
    with pytest.raises(ExpressionCompileError, match=message):
        compile_expression(parse_expression(text), SCHEMA)


def test_an_unknown_late_type_compiles() -> None:
    # A missing field is late (NULL): it takes part in any expression and yields null.
    assert dtype("nope > 3") == T.BooleanType()
    assert dtype("nope + qty") == T.LongType()
