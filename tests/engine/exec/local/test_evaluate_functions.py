"""Every scalar registry function on Arrow: a golden table of expression -> values, nulls included.

The batch has three rows; the third row holds nulls (or the odd case) so every function shows what a
null argument gives.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from engine.expr import FUNCTIONS, FunctionKind, parse_expression
from engine.expr.arrow.evaluate import evaluate
from engine.expr.arrow.kernels import ARROW_FUNCTIONS

UTC = dt.UTC

BATCH = pa.record_batch(
    {
        "i": pa.array([7, -7, None], pa.int64()),
        "j": pa.array([2, 2, 3], pa.int64()),
        "n": pa.array([1, 2, None], pa.int32()),
        "f": pa.array([2.5, -2.5, None], pa.float64()),
        "s": pa.array(["Drill", "  a b  ", None]),
        "p": pa.array(["D%", "%b%", "x"]),
        "b": pa.array([True, False, None]),
        "d": pa.array([dt.date(2021, 3, 14), dt.date(1969, 12, 31), None], pa.date32()),
        "t": pa.array(
            [
                dt.datetime(2021, 3, 14, 15, 9, 26, 535000, tzinfo=UTC),
                dt.datetime(2020, 1, 1),
                None,
            ],
            pa.timestamp("us", tz="UTC"),
        ),
        "m": pa.array([{"k": 1}, {"k": None}, None]),
    }
)


def ts(*parts: int) -> dt.datetime:
    return dt.datetime(*parts, tzinfo=UTC)


# (function, expression, expected values for the three rows)
GOLDEN: list[tuple[str, str, list[Any]]] = [
    # logic: Kleene
    ("and", "b && true", [True, False, None]),
    ("and", "b && false", [False, False, False]),
    ("or", "b || true", [True, True, True]),
    ("or", "b || false", [True, False, None]),
    ("not", "!b", [False, True, None]),
    # comparisons: null gives null, numbers by value
    ("equal", "i == 7", [True, False, None]),
    ("equal", "n == 1.0", [True, False, None]),
    ("equal", "s == 'Drill'", [True, False, None]),
    ("equal", "b == true", [True, False, None]),
    ("not_equal", "i != 7", [False, True, None]),
    ("less_than", "f < j", [False, True, None]),
    ("less_than", "s < 'E'", [True, True, None]),
    ("less_than_or_equal", "n <= 1", [True, False, None]),
    ("greater_than", "i > 0", [True, False, None]),
    ("greater_than", "d > '2000-01-01'", [True, False, None]),
    ("greater_than_or_equal", "t >= '2020-01-01T00:00:00Z'", [True, True, None]),
    # arithmetic
    ("add", "i + j", [9, -5, None]),
    ("add", "i + f", [9.5, -9.5, None]),
    ("add", "n + 1", [2, 3, None]),
    ("subtract", "i - j", [5, -9, None]),
    ("multiply", "i * j", [14, -14, None]),
    ("multiply", "j * 0.5", [1.0, 1.0, 1.5]),
    ("divide", "i / j", [3.5, -3.5, None]),
    ("divide", "j / 0", [math.inf, math.inf, math.inf]),
    ("modulo", "i % 3", [1, -1, None]),
    ("modulo", "i % -3", [1, -1, None]),
    ("modulo", "mod(f, 2)", [0.5, -0.5, None]),
    ("power", "j ^ 3", [8.0, 8.0, 27.0]),
    ("power", "pow(n, 2)", [1.0, 4.0, None]),
    ("negate", "-i", [-7, 7, None]),
    ("negate", "-f", [-2.5, 2.5, None]),
    # nulls
    ("isnull", "isnull(i)", [False, False, True]),
    ("isnull", "isnull(m)", [False, False, True]),
    ("isnotnull", "isnotnull(s)", [True, True, False]),
    ("isnotnull", "is_not_null(nothere)", [False, False, False]),
    ("coalesce", "coalesce(i, j)", [7, -7, 3]),
    ("coalesce", "coalesce(f, j)", [2.5, -2.5, 3.0]),
    ("coalesce", "coalesce(s, 'none')", ["Drill", "  a b  ", "none"]),
    ("coalesce", "coalesce(nothere, null)", [None, None, None]),
    ("greatest", "greatest(i, j, 0)", [7, 2, 3]),
    ("greatest", "greatest(f, nothere)", [2.5, -2.5, None]),
    ("least", "least(i, f, j)", [2.0, -7.0, 3.0]),
    ("least", "least(s, 'b')", ["Drill", "  a b  ", "b"]),
    ("least", "least(nothere, f)", [2.5, -2.5, None]),
    ("least", "least(nothere, null)", [None, None, None]),
    # math
    ("abs", "abs(i)", [7, 7, None]),
    ("abs", "abs(f)", [2.5, 2.5, None]),
    ("ceil", "ceil(f)", [3.0, -2.0, None]),
    ("ceil", "ceiling(i)", [7, -7, None]),
    ("floor", "floor(f)", [2.0, -3.0, None]),
    ("round", "round(f)", [3.0, -3.0, None]),
    ("round", "round(f * 1.11, 1)", [2.8, -2.8, None]),
    ("round", "round(i * 10 + 5, -1)", [80, -70, None]),
    ("round", "round(f, j)", [2.5, -2.5, None]),
    ("sqrt", "sqrt(j)", [math.sqrt(2), math.sqrt(2), math.sqrt(3)]),
    ("sqrt", "sqrt(i)", [math.sqrt(7), "nan", None]),
    # an average's ratio: typed as avg of its third argument; a zero count gives null
    ("avg_ratio", "avg_ratio(i, j, f)", [3.5, -3.5, None]),
    ("avg_ratio", "avg_ratio(j, j - 2, f)", [None, None, 3.0]),
    (
        "avg_ratio",
        "avg_ratio(cast(i as DECIMAL(5, 2)), j, cast(j as DECIMAL(5, 2)))",
        [Decimal("3.500000"), Decimal("-3.500000"), None],
    ),
    # strings
    ("lower", "lower(s)", ["drill", "  a b  ", None]),
    ("upper", "ucase(s)", ["DRILL", "  A B  ", None]),
    ("length", "length(s)", [5, 7, None]),
    ("substr", "substr(s, 2)", ["rill", " a b  ", None]),
    ("substr", "substr(s, 1, 3)", ["Dri", "  a", None]),
    ("substr", "substring(s, -3, 2)", ["il", "b ", None]),
    ("substr", "substr(s, 0, 2)", ["", "", None]),
    ("substr", "substr(s, 2, 0)", ["", "", None]),
    ("substr", "substr(s, j, j)", ["ri", " a", None]),
    ("concat", "concat(s, '-', i)", ["Drill-7", "  a b  --7", "-"]),
    ("concat", "concat(f, b)", ["2.5true", "-2.5false", ""]),
    ("concat", "concat(j * 1.0)", ["2.0", "2.0", "3.0"]),
    ("concatoperator", "concatoperator(s, '-', i)", ["Drill-7", "  a b  --7", None]),
    ("concatoperator", "concatoperator(f, b)", ["2.5true", "-2.5false", None]),
    ("trim", "trim(s)", ["Drill", "a b", None]),
    ("like", "like(s, 'D%')", [True, False, None]),
    ("like", "like(s, '%a_b%')", [False, True, None]),
    ("like", "like('50%', '50!%', '!')", [True, True, True]),
    ("like", "like('a.c', 'a_c')", [True, True, True]),
    ("like", "like(s, p)", [True, True, None]),
    ("regex_like", "regex_like(s, 'r.l')", [True, False, None]),
    ("regex_like", "regexp_like(s, '^D')", [True, False, None]),
    ("regex_like", "regex_like(s, '\\\\s')", [False, True, None]),
    # dates and times
    ("to_date", "to_date('2021-03-14')", [dt.date(2021, 3, 14)] * 3),
    ("to_date", "to_date('14/03/2021', 'dd/MM/yyyy')", [dt.date(2021, 3, 14)] * 3),
    ("to_date", "to_date(t)", [dt.date(2021, 3, 14), dt.date(2020, 1, 1), None]),
    (
        "to_date",
        "to_date(86400000 * j)",
        [dt.date(1970, 1, 3), dt.date(1970, 1, 3), dt.date(1970, 1, 4)],
    ),
    ("to_date", "to_date(-1)", [dt.date(1969, 12, 31)] * 3),
    ("to_date", "to_date(s)", "error"),
    (
        "to_timestamp",
        "to_timestamp('2021-03-14 15:09:26.5')",
        [ts(2021, 3, 14, 15, 9, 26, 500000)] * 3,
    ),
    ("to_timestamp", "to_timestamp('2021-03-14T15:09:26+02:00')", [ts(2021, 3, 14, 13, 9, 26)] * 3),
    (
        "to_timestamp",
        "to_timestamp('Mar 14, 2021 3:09 PM', 'MMM dd, yyyy h:mm a')",
        [ts(2021, 3, 14, 15, 9)] * 3,
    ),
    (
        "to_timestamp",
        "to_timestamp('2021-03-14 15:09:26.535', 'yyyy-MM-dd HH:mm:ss.SSS')",
        [ts(2021, 3, 14, 15, 9, 26, 535000)] * 3,
    ),
    (
        "to_timestamp",
        "to_timestamp(j * 1.5)",
        [ts(1970, 1, 1, 0, 0, 3), ts(1970, 1, 1, 0, 0, 3), ts(1970, 1, 1, 0, 0, 4, 500000)],
    ),
    ("to_timestamp", "to_timestamp(d)", [ts(2021, 3, 14), ts(1969, 12, 31), None]),
    ("date_trunc", "date_trunc('month', t)", [ts(2021, 3, 1), ts(2020, 1, 1), None]),
    ("date_trunc", "date_trunc('hour', t)", [ts(2021, 3, 14, 15), ts(2020, 1, 1), None]),
    ("date_trunc", "date_trunc('year', d)", [dt.date(2021, 1, 1), dt.date(1969, 1, 1), None]),
    ("date_trunc", "date_trunc('week', d)", [dt.date(2021, 3, 8), dt.date(1969, 12, 29), None]),
    ("extract", "extract('year', t)", [2021, 2020, None]),
    ("extract", "extract('month', d)", [3, 12, None]),
    ("extract", "extract('day', d)", [14, 31, None]),
    ("extract", "extract('hour', t)", [15, 0, None]),
    ("extract", "extract('minute', t)", [9, 0, None]),
    ("extract", "extract('second', t)", [26, 0, None]),
    ("extract", "extract('quarter', d)", [1, 4, None]),
    ("extract", "extract('dayofweek', d)", [7, 3, None]),
]


def _values(expression: str) -> list[Any]:
    return evaluate(parse_expression(expression), BATCH).to_pylist()


def _same(actual: Any, expected: Any) -> bool:
    """Equal values of the same Python type (so 2 is not 2.0: integer results stay BIGINT)."""
    if expected == "nan":
        return isinstance(actual, float) and math.isnan(actual)
    if type(expected) is float and type(actual) is float:
        return actual == expected or math.isclose(actual, expected, rel_tol=1e-12)
    return type(actual) is type(expected) and actual == expected


@pytest.mark.parametrize(("function", "expression", "expected"), GOLDEN, ids=[g[1] for g in GOLDEN])
def test_golden(function: str, expression: str, expected: Any) -> None:
    if expected == "error":
        from engine.errors import EvaluationError

        with pytest.raises(EvaluationError):
            _values(expression)
        return
    actual = _values(expression)
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        assert _same(got, want), f"{expression}: got {actual}, expected {expected}"


def _scalar_functions() -> list[str]:
    return sorted(name for name, spec in FUNCTIONS.items() if FunctionKind.SCALAR in spec.kinds)


def test_every_scalar_function_has_an_arrow_implementation() -> None:
    assert sorted(ARROW_FUNCTIONS) == _scalar_functions()


def test_every_scalar_function_is_in_the_golden_table_with_a_null_case() -> None:
    covered: dict[str, bool] = {}
    for function, _, expected in GOLDEN:
        shows_null = expected == "error" or None in expected or function in ("isnull", "isnotnull")
        covered[function] = covered.get(function, False) or shows_null
    missing = [name for name in _scalar_functions() if name not in covered]
    without_null = [name for name, has in covered.items() if not has]
    assert not missing, f"functions without a golden case: {missing}"
    # A few functions never give null for the inputs of this batch (literal arguments, concat).
    assert set(without_null) <= {"power", "sqrt", "to_date", "to_timestamp", "concat", "divide"}


def test_integer_arithmetic_is_bigint_and_float_arithmetic_is_double() -> None:
    assert evaluate(parse_expression("n + n"), BATCH).type == pa.int64()
    assert evaluate(parse_expression("n * f"), BATCH).type == pa.float64()
    assert evaluate(parse_expression("j / j"), BATCH).type == pa.float64()
    assert evaluate(parse_expression("n % 2"), BATCH).type == pa.int64()
    assert evaluate(parse_expression("length(s)"), BATCH).type == pa.int64()
    assert evaluate(parse_expression("extract('year', d)"), BATCH).type == pa.int64()
