"""compile_expression on Spark gives the values the local evaluator gives, on the same nested data.

One select per batch of expressions (one Spark action), compared value by value with
``engine.expr.arrow.evaluate.evaluate`` over the equivalent Arrow batch.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.exec.spark.columns import compile_expression, compile_typed
from engine.expr import Call, Expr, FieldRef, IfElse, Literal, parse_expression
from engine.expr.arrow.evaluate import evaluate

pytestmark = pytest.mark.spark

UTC = dt.UTC

SAMPLE = pa.table(
    {
        "i": pa.array([1, -7, None, 0, 42], pa.int64()),
        "n": pa.array([3, 2, 5, None, -1], pa.int32()),
        "f": pa.array([1.5, -2.25, 0.0, None, 3.0], pa.float64()),
        "g": pa.array([2.5, -0.5, None, 7.0, -3.5], pa.float32()),
        "s": pa.array(["apple", "Banana", None, "", "a%b_c"]),
        "b": pa.array([True, False, None, True, False]),
        "d": pa.array(
            [
                dt.date(2020, 3, 4),
                dt.date(1969, 12, 31),
                None,
                dt.date(2024, 2, 29),
                dt.date(2000, 1, 1),
            ]
        ),
        "ts": pa.array(
            [
                dt.datetime(2020, 3, 4, 10, 11, 12, 345000, tzinfo=UTC),
                dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC),
                None,
                dt.datetime(2024, 2, 29, 0, 0, tzinfo=UTC),
                dt.datetime(2000, 1, 2, 3, 4, 5, tzinfo=UTC),
            ],
            pa.timestamp("us", tz="UTC"),
        ),
        "m": pa.array(
            [
                {"id": 1, "name": "x", "tags": ["p", "q"], "at": "2021-05-06"},
                None,
                {"id": 3, "name": None, "tags": [], "at": "1999-12-31 23:00:00"},
                {"id": None, "name": "z", "tags": None, "at": None},
                {"id": 5, "name": "w", "tags": ["r"], "at": "2000-02-03T04:05:06Z"},
            ]
        ),
        "l": pa.array(
            [
                [{"x": 1, "y": "a"}, {"x": 4, "y": "b"}],
                [],
                None,
                [{"x": None, "y": None}, None],
                [{"x": 9, "y": "c"}],
            ]
        ),
        "nl": pa.array([[[1, 2], [3]], [[]], None, [None, [4]], [[5, 6, 7]]]),
        "pat": pa.array(["a%", "%an%", "x", None, "a\\%b%"]),
        "unit": pa.array(["year", "Month", "day", None, " hours "]),
    }
)

# Every scalar function of the registry appears at least once.
EXPRESSIONS = [
    # field references: nested, projected over arrays, indexes in and out of range, missing
    "m.id",
    "m.tags",
    "m.tags[1]",
    "m.tags[7]",
    "l.x",
    "l[0].y",
    "l[3].x",
    "nl[1]",
    "nl[0][1]",
    "missing",
    "m.missing",
    "l.missing",
    # arithmetic
    "i + n",
    "i - f",
    "i * n * 2",
    "n * n",
    "g + g",
    "i / n",
    "f / 0",
    "i / 0",
    "-f / 0",
    "0.0 / 0",
    "i % 3",
    "-7 % 3",
    "f % 2",
    "f % 0",
    "n ^ 2",
    "2 ^ -1",
    "-n",
    "-g",
    "abs(i)",
    "abs(g)",
    "sqrt(f)",
    "avg_ratio(i, n, f)",
    "avg_ratio(i, n - n, g)",
    "avg_ratio(cast(i as DECIMAL(9, 2)), n, cast(n as DECIMAL(5, 2)))",
    "ceil(f)",
    "floor(f)",
    "ceil(g)",
    "floor(-2.5)",
    "ceil(i)",
    "round(f)",
    "round(2.5)",
    "round(-2.5)",
    "round(g)",
    "round(i, -1)",
    "round(1234.5678, 2)",
    "round(f, null)",
    "missing + 1",
    "missing * f",
    # comparisons and logic
    "i == f",
    "i != n",
    "i < n",
    "f <= g",
    "i > 1.5",
    "n >= 2",
    "s < 'b'",
    "s == 'apple'",
    "d > '2000-01-01'",
    "ts >= '2020-01-01T00:00:00Z'",
    "d == ts",
    "b && i > 0",
    "b || missing",
    # IN lists: one `IN` on Spark for a string or an integer against constants, else the chain
    "s == 'apple' || s == 'x' || s == ''",
    "s == 'apple' || 'Banana' == s || s == 'a%b_c' || s == 'zz'",
    "i == 1 || i == 42 || i == -99",
    "n == 3 || n == 5 || n == 7",
    "f == 1.5 || f == 0.0 || f == -0.0",
    "i == 1 || i == 42 || n == 5",
    "substr(s, 1, 2) == 'ap' || substr(s, 1, 2) == 'Ba' || substr(s, 1, 3) == 'a%b'",
    "m.id == 1 || m.id == 3 || m.id == 9",
    "!b",
    "b && missing",
    "missing == missing",
    "(0.0 / 0) == (0.0 / 0)",
    "(0.0 / 0) != 1",
    "isnull(s)",
    "isnotnull(l)",
    "isnull(missing)",
    "coalesce(missing, i)",
    "coalesce(i, f, 0)",
    "coalesce(s, 'none')",
    "coalesce(missing, missing)",
    "greatest(i, f, 0)",
    "least(s, 'b', missing)",
    "greatest(missing, missing)",
    # strings
    "lower(s)",
    "upper(s)",
    "length(s)",
    "trim('  padded ')",
    "substr(s, 2)",
    "substr(s, 2, 3)",
    "substr(s, -3, 2)",
    "substr(s, -9, 7)",
    "substr(s, 0, 2)",
    "substr(s, 1, 0)",
    "substr(s, n)",
    "substr(s, n, i)",
    "substr(s, 2.7, 1)",
    "concat(s, '-', i, '-', f, '-', b)",
    "concat(missing, d, ts)",
    "concat(0.0 / 0, '|', 1.0 / 0, '|', 3.0)",
    "concatoperator(s, '-', i, '-', f, '-', b)",
    "concatoperator(missing, s)",
    "like(s, 'a%')",  # a prefix, a suffix, a substring and equality are plain tests on Spark
    "like(s, '%an%')",
    "like(s, '%e')",
    "like(s, 'apple')",
    "like(s, '%')",
    "like(s, '%%')",
    "like(s, '')",
    "like(s, 'a%%')",
    "like(s, 'a%b%')",
    "!like(s, '%a%')",
    "like(s, '_pple')",
    "like(s, 'a!%b%', '!')",
    "like(s, pat)",
    "like('a.c', 'a.c')",
    "regex_like(s, 'an+')",
    "regex_like(s, '^[A-Z]')",
    # dates and times
    "to_date('2020-03-04')",
    "to_date(m.at)",
    "to_date(i * 86400000)",
    "to_date(ts)",
    "to_date('03/04/2021', 'MM/dd/yyyy')",
    "to_timestamp(m.at)",
    "to_timestamp(f)",
    "to_timestamp(d)",
    "to_timestamp('2021-05-06 07:08:09.123', 'yyyy-MM-dd HH:mm:ss.SSS')",
    "date_trunc('month', ts)",
    "date_trunc('week', d)",
    "date_trunc('hours', ts)",
    "date_trunc(unit, ts)",
    "date_trunc('year', missing)",
    "extract('year', d)",
    "extract('month', ts)",
    "extract('day', ts)",
    "extract('hour', ts)",
    "extract('minute', ts)",
    "extract('second', ts)",
    "extract('millisecond', ts)",
    "extract('quarter', d)",
    "extract('week', d)",
    "extract('dayofweek', d)",
    "extract('doy', ts)",
    "extract('epoch', ts)",
    "extract(unit, ts)",
    # conditionals and casts
    "if b then i else f end",
    "if missing then 1 elseif i > 0 then 2 else 3 end",
    "case when s == 'apple' then 'A' when b then 'B' else s end",
    "cast(f as BIGINT)",
    "cast(g as INT)",
    "cast(f * 1.5 as INT)",
    "cast(cast(f as DECIMAL(9, 2)) * 1.5 as BIGINT)",
    "cast(i as FLOAT8)",
    "cast('12' as BIGINT)",
    "cast(i as VARCHAR)",
    "cast(f as VARCHAR)",
    "cast(b as VARCHAR)",
    "cast(d as VARCHAR)",
    "cast(ts as VARCHAR)",
    "cast(i as BIT)",
    "cast('TRUE' as BIT)",
    "cast(b as INT)",
    "cast(m.at as TIMESTAMP)",
    "cast(ts as BIGINT)",
    "cast(d as TIMESTAMP)",
    "cast(i as DATE)",
    "cast('10:11:12' as TIME)",
    "cast(ts as TIME)",
    "cast(missing as BIGINT)",
    "castFLOAT4(i)",
]


def same(left: Any, right: Any) -> bool:
    """Values equal as JSON-like trees: floats by value (NaN equals NaN), datetimes as UTC."""
    if isinstance(left, dict) and isinstance(right, dict):
        keys = {k for k, v in left.items() if v is not None} | {
            k for k, v in right.items() if v is not None
        }
        return all(same(left.get(k), right.get(k)) for k in keys)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right))
    if isinstance(left, float) or isinstance(right, float):
        if left is None or right is None:
            return left is right
        if math.isnan(left) or math.isnan(right):
            return math.isnan(left) and math.isnan(right)
        return math.isclose(left, right, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(left, dt.datetime) and isinstance(right, dt.datetime):
        return _utc(left) == _utc(right)
    if isinstance(left, dt.datetime) and isinstance(right, dt.time):
        # TIME is TIMESTAMP_NTZ on 1970-01-01 in Spark (engine.types), time64 in Arrow.
        return left.date() == dt.date(1970, 1, 1) and left.time() == right
    return left == right


def _utc(value: dt.datetime) -> dt.datetime:
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


def spark_values(df, exprs: list[Expr]) -> list[list[Any]]:
    schema = df.schema  # each DataFrame.schema is a round trip to the JVM
    columns = [compile_expression(e, schema).alias(f"c{k}") for k, e in enumerate(exprs)]
    table = df.select(*columns).toArrow()
    return [table.column(k).to_pylist() for k in range(len(exprs))]


@pytest.fixture(scope="module")
def sample(spark):
    batch = SAMPLE.combine_chunks().to_batches()[0]
    return batch, spark.createDataFrame(SAMPLE)


def test_every_expression_gives_the_local_values(sample) -> None:
    batch, df = sample
    exprs = [parse_expression(text) for text in EXPRESSIONS]
    remote = spark_values(df, exprs)
    mismatches = []
    for text, expr, got in zip(EXPRESSIONS, exprs, remote, strict=True):
        want = evaluate(expr, batch).to_pylist()
        if not same(got, want):
            mismatches.append(f"{text}: spark {got} != local {want}")
    assert not mismatches, "\n".join(mismatches)


def test_compiled_types_are_the_types_spark_analyses(sample) -> None:
    """The compiler's own type of every expression (no analysis) is what Spark's analysis gives:
    the operators rely on it instead of asking Spark."""
    _, df = sample
    typed = [compile_typed(parse_expression(text), df.schema) for text in EXPRESSIONS]
    analysed = df.select(*[t.column.alias(f"c{k}") for k, t in enumerate(typed)]).schema
    mismatches = [
        f"{text}: compiled {t.dtype.simpleString()}, analysed {f.dataType.simpleString()}"
        for text, t, f in zip(EXPRESSIONS, typed, analysed.fields, strict=True)
        if t.dtype.simpleString() != f.dataType.simpleString()
    ]
    assert not mismatches, "\n".join(mismatches)


def test_every_registry_scalar_function_is_exercised() -> None:
    from engine.exec.spark.spark_functions import SPARK_FUNCTIONS
    from engine.expr import walk

    called = {
        node.name
        for text in EXPRESSIONS
        for node in walk(parse_expression(text))
        if isinstance(node, Call)
    }
    assert set(SPARK_FUNCTIONS) <= called, set(SPARK_FUNCTIONS) - called


# ---------------------------------------------------------------- hypothesis

NUMBER_FIELDS = ["i", "n", "f", "g", "missing"]
COMPARISONS = ["equal", "not_equal", "less_than", "less_than_or_equal", "greater_than"]
COMPARISONS += ["greater_than_or_equal"]

NUMBER_LEAVES = st.one_of(
    st.sampled_from([FieldRef.of(name) for name in NUMBER_FIELDS]),
    st.integers(-5, 5).map(Literal.of),
    st.sampled_from([0.5, -2.0, 0.0, 10.25]).map(Literal.of),
)
NONZERO = st.sampled_from([Literal.of(3), Literal.of(-2), Literal.of(1.5)])


@st.composite
def numbers(draw: st.DrawFn, depth: int = 2) -> Expr:
    """A numeric expression at most ``depth`` operators deep (values stay far from overflow)."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(NUMBER_LEAVES)
    kind = draw(st.sampled_from(["binary", "modulo", "unary", "if"]))
    if kind == "binary":
        name = draw(st.sampled_from(["add", "subtract", "multiply", "divide"]))
        return Call(name, (draw(numbers(depth - 1)), draw(numbers(depth - 1))))
    if kind == "modulo":
        return Call("modulo", (draw(numbers(depth - 1)), draw(NONZERO)))
    if kind == "unary":
        return Call(draw(st.sampled_from(["negate", "abs"])), (draw(numbers(depth - 1)),))
    condition = draw(booleans(depth - 1))
    return IfElse(((condition, draw(numbers(depth - 1))),), draw(numbers(depth - 1)))


@st.composite
def booleans(draw: st.DrawFn, depth: int = 2) -> Expr:
    """A boolean expression: comparisons of numbers, the column b, and, or, not."""
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        if draw(st.integers(0, 4)) == 0:
            return FieldRef.of("b")
        name = draw(st.sampled_from(COMPARISONS))
        return Call(name, (draw(numbers(depth)), draw(numbers(depth))))
    name = draw(st.sampled_from(["and", "or", "not"]))
    if name == "not":
        return Call(name, (draw(booleans(depth - 1)),))
    return Call(name, (draw(booleans(depth - 1)), draw(booleans(depth - 1))))


EXPRESSION_BATCHES = st.lists(st.one_of(numbers(), booleans()), min_size=6, max_size=8)


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(exprs=EXPRESSION_BATCHES)
def test_random_arithmetic_comparison_and_logic_agree(sample, exprs: list[Expr]) -> None:
    batch, df = sample
    remote = spark_values(df, exprs)
    for expr, got in zip(exprs, remote, strict=True):
        want = evaluate(expr, batch).to_pylist()
        assert same(got, want), f"{expr}: spark {got} != local {want}"
