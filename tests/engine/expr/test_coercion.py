"""Type coercion, once (engine.expr.coercion): DECIMAL result types, widening, and the Arrow and
Spark executors agreeing with type inference."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from engine.errors import ExpressionTypeError
from engine.expr import coercion
from engine.expr.arrow.evaluate import evaluate
from engine.expr.infer import infer_type
from engine.expr.parser import parse_expression
from engine.types import BIGINT, FLOAT8, INT, VARCHAR, MajorType, from_arrow

D152 = MajorType.decimal(15, 2)


@pytest.mark.parametrize(
    ("operation", "left", "right", "expected"),
    [
        ("add", D152, D152, "DECIMAL(16, 2)"),
        ("subtract", D152, MajorType.decimal(3, 2), "DECIMAL(16, 2)"),
        ("add", D152, BIGINT, "DECIMAL(22, 2)"),
        ("multiply", D152, INT, "DECIMAL(26, 2)"),
        ("multiply", D152, D152, "DECIMAL(31, 4)"),
        ("divide", D152, D152, "DECIMAL(33, 18)"),
        ("modulo", D152, MajorType.decimal(5, 1), "DECIMAL(6, 2)"),
        ("multiply", MajorType.decimal(38, 4), MajorType.decimal(22, 2), "DECIMAL(38, 6)"),
        ("divide", MajorType.decimal(38, 4), MajorType.decimal(38, 4), "DECIMAL(38, 6)"),
        ("add", D152, FLOAT8, "FLOAT8"),
        ("add", BIGINT, INT, "BIGINT"),
        ("divide", BIGINT, INT, "FLOAT8"),
    ],
)
def test_arithmetic_types_follow_the_decimal_rule(operation, left, right, expected) -> None:
    assert str(coercion.arithmetic_type(operation, left, right)) == expected


def test_aggregates_and_widening() -> None:
    assert str(coercion.sum_type(D152)) == "DECIMAL(25, 2)"
    assert str(coercion.avg_type(D152)) == "DECIMAL(19, 6)"
    assert str(coercion.sum_type(MajorType.decimal(35, 3))) == "DECIMAL(38, 3)"
    assert str(coercion.common_type([INT, D152])) == "DECIMAL(15, 2)"
    assert str(coercion.common_type([D152, FLOAT8])) == "FLOAT8"
    with pytest.raises(coercion.CoercionError, match="incompatible types"):
        coercion.common_type([D152, VARCHAR])


SCHEMA = {("d",): D152, ("i",): BIGINT, ("f",): FLOAT8}
BATCH = pa.record_batch(
    {
        "d": pa.array([Decimal("1.25"), Decimal("-3.50"), None], pa.decimal128(15, 2)),
        "i": pa.array([1, 2, 3]),
        "f": pa.array([0.5, 1.5, 2.5]),
    }
)


@pytest.mark.parametrize(
    "text",
    [
        "d + 1",
        "d * d",
        "d / 3",
        "d % 2",
        "d - f",
        "coalesce(d, i)",
        "round(d, 1)",
        "ceil(d)",
        "-d",
        "cast(d as DECIMAL(4, 1))",
        "d * cast('0.06' as DECIMAL(2, 2))",
    ],
)
def test_the_local_executor_gives_the_inferred_type(text: str) -> None:
    expr = parse_expression(text)
    value = evaluate(expr, BATCH)
    assert from_arrow(value.type) == infer_type(expr, SCHEMA.get).with_mode(
        from_arrow(value.type).mode
    )


def test_decimal_values_are_exact_and_round_half_away_from_zero() -> None:
    def values(text: str) -> list[object]:
        return evaluate(parse_expression(text), BATCH).to_pylist()

    assert values("d * cast('0.06' as DECIMAL(2, 2))") == [
        Decimal("0.0750"),
        Decimal("-0.2100"),
        None,
    ]
    assert values("cast(d as DECIMAL(4, 1))") == [Decimal("1.3"), Decimal("-3.5"), None]
    assert values("d % 2") == [Decimal("1.25"), Decimal("-1.50"), None]
    assert values("cast('2.675' as DECIMAL(10, 3)) / 2") == [Decimal("1.3375")] * 3


def test_a_decimal_literal_prints_and_parses_back() -> None:
    expr = parse_expression("cast('0.06' as DECIMAL(2, 2))")
    assert str(expr) == "cast('0.06' as DECIMAL(2, 2))"
    assert str(infer_type(expr, SCHEMA.get)) == "DECIMAL(2, 2)"
    with pytest.raises(ExpressionTypeError, match="incompatible types"):
        infer_type(parse_expression("coalesce(d, 'x')"), SCHEMA.get)
