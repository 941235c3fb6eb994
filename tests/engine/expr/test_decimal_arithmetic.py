"""DECIMAL add, subtract and multiply on Arrow give what Python's decimals give (rounded half
away from zero where the rule's scale is smaller), with the types of engine.expr.coercion."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, localcontext

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.expr import coercion
from engine.expr.arrow import decimals
from engine.types import from_arrow, to_arrow

OPERATIONS = {"add": "__add__", "subtract": "__sub__", "multiply": "__mul__"}


@st.composite
def decimal_arrays(draw: st.DrawFn, length: int) -> pa.Array:
    precision = draw(st.integers(1, 38))
    scale = draw(st.integers(0, precision))
    digits = draw(st.integers(1, min(precision, 20)))
    bound = 10**digits - 1
    values = draw(
        st.lists(st.one_of(st.none(), st.integers(-bound, bound)), min_size=length, max_size=length)
    )
    dtype = pa.decimal128(precision, scale)
    return pa.array([None if v is None else Decimal(v).scaleb(-scale) for v in values], dtype)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), operation=st.sampled_from(sorted(OPERATIONS)), length=st.integers(1, 6))
def test_arithmetic_is_exact_with_the_rule_types(
    data: st.DataObject, operation: str, length: int
) -> None:
    a = data.draw(decimal_arrays(length))
    b = data.draw(decimal_arrays(length))
    if data.draw(st.booleans()):
        b = b[0]  # a constant
    target = coercion.arithmetic_type(operation, from_arrow(a.type), from_arrow(b.type))
    scalar = isinstance(b, pa.Scalar)
    expected = []
    with localcontext(prec=100):
        for i, x in enumerate(a.to_pylist()):
            y = b.as_py() if scalar else b[i].as_py()
            exact = None if x is None or y is None else getattr(x, OPERATIONS[operation])(y)
            # past 38 digits the rule's scale is smaller: rounded half away from zero to it
            unit = Decimal(1).scaleb(-(target.scale or 0))
            expected.append(None if exact is None else exact.quantize(unit, ROUND_HALF_UP))
    try:
        result = decimals.arithmetic(operation, a, b)
    except decimals.DecimalError:
        limit = Decimal(10) ** ((target.precision or 38) - (target.scale or 0))
        assert any(v is not None and abs(v) >= limit for v in expected)  # only a true overflow
        return
    assert result.type == to_arrow(target)
    assert result.to_pylist() == expected


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_values_past_an_int64_are_exact(operation: str) -> None:
    big = Decimal("9" * 18)
    a = pa.array([big, -big, None], pa.decimal128(20, 0))
    result = decimals.arithmetic(operation, a, pa.array([big, big, big], pa.decimal128(20, 0)))
    with localcontext(prec=100):
        want = [getattr(big, OPERATIONS[operation])(big), getattr(-big, OPERATIONS[operation])(big)]
    assert result.to_pylist() == [*want, None]


def test_a_product_of_two_38_digit_scales_is_exact() -> None:
    # Arrow's product type would need 77 digits (38 + 38 + 1), even for nulls only
    half = pa.array([Decimal("0.5"), None, Decimal("-0.00000000000000000000000000000000000001")])
    a = half.cast(pa.decimal128(38, 38))
    target = coercion.arithmetic_type("multiply", from_arrow(a.type), from_arrow(a.type))
    result = decimals.arithmetic("multiply", a, a)
    assert result.type == to_arrow(target)
    assert result.to_pylist() == [Decimal("0.25"), None, 0]  # -1e-76 rounds to 0
    nulls = pa.array([None, None], pa.decimal128(38, 38))
    assert decimals.arithmetic("multiply", nulls, nulls).to_pylist() == [None, None]
    assert decimals.arithmetic("multiply", nulls, a[0]).to_pylist() == [None, None]
