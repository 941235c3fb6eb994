"""The Spark function table: what does not depend on Spark's session settings, run-time errors, the
argument forms refused on Spark, and that every function compiles to native expressions."""

from __future__ import annotations

import datetime as dt
import operator

import pytest
from pyspark.sql import types as T

from engine.errors import UnsupportedOnSpark
from engine.exec.spark.columns import compile_expression
from engine.expr import ExpressionTypeError, parse_expression
from engine.expr.like import like_to_java

pytestmark = pytest.mark.spark

SCHEMA = T.StructType(
    [
        T.StructField("x", T.LongType()),
        T.StructField("s", T.StringType()),
        T.StructField("d", T.DateType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("unit", T.StringType()),
    ]
)
ROW = (
    7,
    "a.c",
    dt.date(1970, 1, 3),
    dt.datetime(1970, 1, 1, 0, 0, 1, 500, tzinfo=dt.UTC),
    "fortnight",
)


@pytest.fixture(scope="module")
def df(spark):
    return spark.createDataFrame([ROW], SCHEMA)


def select(df, *texts: str):
    schema = df.schema
    columns = [
        compile_expression(parse_expression(t), schema).alias(f"c{i}") for i, t in enumerate(texts)
    ]
    return df.select(*columns)


def test_ieee_division_and_casts_hold_whatever_the_ansi_setting(spark, df) -> None:
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"  # Spark would raise DIVIDE_BY_ZERO
    row = select(
        df, "x / 0", "-x / 0", "0 / 0", "x % 0.0", "cast(d as BIGINT)", "cast(ts as BIGINT)"
    ).first()
    assert row[0] == float("inf") and row[1] == float("-inf")
    assert row[2] != row[2] and row[3] != row[3]  # NaN
    assert (row[4], row[5]) == (2, 1_000_500)  # days since the epoch; microseconds


NAN_OPERANDS = [
    ("f", "1.5"),
    ("1.5", "f"),
    ("f", "i"),
    ("i", "f"),
    ("f", "g"),
    ("f", "0.0 / 0"),
    ("f", "cast('NaN' as DOUBLE)"),
]


@pytest.mark.parametrize(("left", "right"), NAN_OPERANDS)
@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">="])
def test_comparisons_answer_for_nan_as_ieee_does(spark, left: str, right: str, op: str) -> None:
    # Spark orders NaN above every number and equal to itself; Drill (Java, Arrow) compares
    # IEEE's way. A plain comparison already agrees where only one side may be NaN and Spark's
    # order gives IEEE's answer (NaN < 1.5); the others are guarded.
    nan, values = float("nan"), [1.5, float("nan"), 0.0, None, 3.0]
    schema = T.StructType(
        [T.StructField(n, T.DoubleType()) for n in ("f", "g")] + [T.StructField("i", T.LongType())]
    )
    rows = [(f, g, 1) for f in values for g in values]
    frame = spark.createDataFrame(rows, schema)
    text = f"{left} {op} {right}"
    compiled = compile_expression(parse_expression(text), frame.schema)
    got = [r[0] for r in frame.select(compiled).collect()]

    def value(name: str, row: tuple) -> float | None:
        known = {"f": row[0], "g": row[1], "i": row[2], "1.5": 1.5}
        return known.get(name, nan)

    # Python compares floats IEEE's way.
    ieee = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge}[op]  # fmt: skip
    expected = [
        None if a is None or b is None else ieee(a, b)
        for a, b in ((value(left, r), value(right, r)) for r in rows)
    ]
    assert got == expected
    one_side = sum(name in ("f", "g") or "NaN" in name or "/" in name for name in (left, right))
    plain = one_side == 1 and (
        op in ("==", "!=")
        or (op in ("<", "<=") and left == "f")
        or (op in (">", ">=") and right == "f")
    )
    assert ("isNaN" not in str(compiled)) == plain, str(compiled)


def test_integer_modulo_by_zero_fails_at_run_time(df) -> None:
    with pytest.raises(Exception, match="integer division by zero"):
        select(df, "x % (x - 7)").collect()


def test_a_unit_read_from_data_that_no_function_knows_fails_naming_it(df) -> None:
    with pytest.raises(Exception, match="date_trunc has no unit 'fortnight'"):
        select(df, "date_trunc(unit, ts)").collect()


def test_a_constant_unknown_unit_fails_at_compile_time() -> None:
    with pytest.raises(ExpressionTypeError, match="extract has no unit 'fortnight'"):
        compile_expression(parse_expression("extract('fortnight', ts)"), SCHEMA)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("round(x, x)", "round: the number of digits must be a constant"),
        ("like(s, 'a%', s)", "like: the escape character must be a constant"),
        ("like(s, s, '!')", "like: a pattern used with an escape must be a constant"),
    ],
)
def test_argument_forms_without_a_native_translation_are_refused(text: str, message: str) -> None:
    with pytest.raises(UnsupportedOnSpark, match=message):
        compile_expression(parse_expression(text), SCHEMA)


def test_like_patterns_are_anchored_and_escape_regex_characters() -> None:
    assert like_to_java("a.c%") == "(?s)\\Aa\\.c.*\\z"
    assert like_to_java("100!%", "!") == "(?s)\\A100%\\z"
    assert like_to_java("_(x)") == "(?s)\\A.\\(x\\)\\z"


def test_every_function_compiles_to_native_expressions_without_python(df, capsys) -> None:
    texts = [
        "x + 1 > 2 && !(x < 0) || x == 1",
        "coalesce(x % 2, abs(-x), ceil(1.5), floor(x / 3), round(x ^ 2), sqrt(x))",
        "concat(lower(s), upper(s), trim(s), length(s), substr(s, 2, 1))",
        "like(s, s) || regex_like(s, 'a') || isnull(s) || isnotnull(d)",
        "extract('year', date_trunc('month', to_timestamp(to_date(s, 'yyyy'))))",
        "if x > 1 then cast(s as BIGINT) else -x end",
    ]
    select(df, *texts).explain(True)
    plan = capsys.readouterr().out
    assert "Project" in plan
    for python_node in ("PythonUDF", "BatchEvalPython", "ArrowEvalPython", "MapInArrow"):
        assert python_node not in plan
