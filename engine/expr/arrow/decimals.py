"""DECIMAL arithmetic over Arrow: exact, with the result types of :mod:`engine.expr.coercion`.

Arrow's decimal kernels have their own result types (and stop at 38 digits): each operation here
computes exactly in ``decimal256``, rounds half away from zero to the scale the rule gives, and
casts to ``decimal128(precision, scale)``; a value that does not fit is an :class:`ArgumentError`,
never a wrong or null value.

>>> import pyarrow as pa
>>> from decimal import Decimal as D
>>> a = pa.array([D("1.25"), D("-3.50")], pa.decimal128(15, 2))
>>> r = arithmetic("multiply", a, pa.array([D("0.06"), D("0.06")], pa.decimal128(3, 2)))
>>> r.type, r.to_pylist()
(Decimal128Type(decimal128(19, 4)), [Decimal('0.0750'), Decimal('-0.2100')])
>>> arithmetic("divide", a, pa.scalar(3)).to_pylist()
[Decimal('0.4166666666666666666667'), Decimal('-1.1666666666666666666667')]
"""

from __future__ import annotations

import decimal

import pyarrow as pa
import pyarrow.compute as pc

from engine.expr import coercion
from engine.types import MAX_DECIMAL_PRECISION, MajorType, from_arrow, to_arrow

Value = pa.Array | pa.Scalar
_WIDEST = 76  # decimal256's digits


class DecimalError(Exception):
    """A decimal operation whose result does not fit its type, or a division by zero."""


def decimal_type(value: Value) -> MajorType:
    """The DECIMAL an exact number (integer or decimal) is read as."""
    return coercion.as_decimal(from_arrow(value.type))


def as_decimal(value: Value) -> Value:
    """An integer or decimal value as a ``decimal128`` (integers as DECIMAL(10|19, 0))."""
    if pa.types.is_decimal(value.type):
        return value
    return pc.cast(value, to_arrow(decimal_type(value)))


def comparable(a: Value, b: Value) -> tuple[Value, Value]:
    """Two exact numbers as one decimal256 type, for a comparison kernel."""
    left, right = decimal_type(a), decimal_type(b)
    if left == right:
        return as_decimal(a), as_decimal(b)
    a, b = as_decimal(a), as_decimal(b)
    if isinstance(b, pa.Scalar) and (same := _exactly(b, a.type)) is not None:
        return a, same  # a constant in the column's type: the column is compared as it is
    if isinstance(a, pa.Scalar) and (same := _exactly(a, b.type)) is not None:
        return same, b
    scale = max(left.scale or 0, right.scale or 0)
    return _wide(as_decimal(a), left, scale, _WIDEST), _wide(as_decimal(b), right, scale, _WIDEST)


def _exactly(value: pa.Scalar, dtype: pa.DataType) -> pa.Scalar | None:
    """The decimal ``value`` as ``dtype`` when that keeps its value exactly, else None."""
    if not pa.types.is_decimal(dtype) or dtype.scale < value.type.scale:
        return None
    try:
        return pc.cast(value, dtype)  # a safe cast: a value that does not fit is an error
    except pa.ArrowInvalid:
        return None


def arithmetic(operation: str, a: Value, b: Value) -> Value:
    """``a <operation> b`` for ``add``, ``subtract``, ``multiply``, ``divide`` and ``modulo`` of
    two exact numbers, at least one a decimal."""
    left, right = decimal_type(a), decimal_type(b)
    target = coercion.arithmetic_type(operation, left, right)
    a, b = as_decimal(a), as_decimal(b)
    if operation == "modulo":
        return _per_value(operation, a, b, target)
    if operation == "divide":
        result = _divide(a, b, left, right, target)
    elif (narrow := _narrow(operation, a, b, left, right, target)) is not None:
        return narrow
    else:
        # a product has p1 + p2 + 1 digits, a sum one more than its widest operand
        scale = max(left.scale or 0, right.scale or 0) if operation != "multiply" else None
        cap = _WIDEST // 2 - 1 if operation == "multiply" else _WIDEST - 1
        wide_a, wide_b = _wide(a, left, scale, cap), _wide(b, right, scale, cap)
        if operation == "multiply" and wide_a.type.precision + wide_b.type.precision >= _WIDEST:
            # Arrow's product type, p1 + p2 + 1 digits, would pass 76 whatever the values (two
            # operands kept at 38 digits by their scales of 38)
            return _per_value(operation, a, b, target)
        kernel = {"add": pc.add, "subtract": pc.subtract, "multiply": pc.multiply}[operation]
        result = _checked(lambda: kernel(wide_a, wide_b), operation)
    return fit(result, target, operation)


def quotient(a: Value, b: Value, target: MajorType) -> Value:
    """``a / b`` of two exact numbers rounded half away from zero to ``target`` once (not first
    to the quotient's own type): an average's value.

    >>> ten = pa.array([decimal.Decimal("10.00")], pa.decimal128(12, 2))
    >>> quotient(ten, pa.scalar(3), MajorType.decimal(16, 6)).to_pylist()
    [Decimal('3.333333')]
    """
    left, right = decimal_type(a), decimal_type(b)
    return fit(_divide(as_decimal(a), as_decimal(b), left, right, target), target, "divide")


def fit(value: Value, target: MajorType, what: str) -> Value:
    """``value`` (a decimal) rounded half away from zero to ``target``'s scale and cast to it; an
    error when it does not fit ``target``'s precision."""
    assert target.scale is not None and target.precision is not None
    if (
        pa.types.is_decimal128(value.type)
        and value.type.scale == target.scale
        and value.type.precision <= target.precision
    ):
        return _retyped(value, to_arrow(target))  # every value fits: no rounding, no check
    if value.type.scale > target.scale:
        value = pc.round(value, ndigits=target.scale, round_mode="half_towards_infinity")
    try:
        return pc.cast(value, to_arrow(target))
    except pa.ArrowInvalid as err:
        raise DecimalError(coercion.overflow_message(target, what)) from err


def _narrow(
    operation: str, a: Value, b: Value, left: MajorType, right: MajorType, target: MajorType
) -> Value | None:
    """``a <operation> b`` (add, subtract, multiply) computed by Arrow's ``decimal128`` kernel,
    when its exact result type (the same rule as :func:`coercion.arithmetic_type`, unbounded)
    has at most 38 digits and ``target``'s scale: no ``decimal256``, no rounding. Operands whose
    declared precisions are too wide for that are retyped to the digits their values use. None
    when the exact result needs more digits or another scale."""
    if not (pa.types.is_decimal128(a.type) and pa.types.is_decimal128(b.type)):
        return None
    precision, scale = coercion.unbounded_arithmetic(operation, left, right)
    if scale != target.scale:
        return None
    if precision > MAX_DECIMAL_PRECISION:
        left, right = _used(a, left), _used(b, right)
        precision, scale = coercion.unbounded_arithmetic(operation, left, right)
        if precision > MAX_DECIMAL_PRECISION or scale != target.scale:
            return None
        a, b = _retyped(a, to_arrow(left)), _retyped(b, to_arrow(right))
    kernel = {"add": pc.add, "subtract": pc.subtract, "multiply": pc.multiply}[operation]
    result = kernel(a, b)
    if result.type != pa.decimal128(precision, scale):  # Arrow's rule differs: the exact path
        return None
    return fit(result, target, operation)


def _retyped(value: Value, dtype: pa.DataType) -> Value:
    """A ``decimal128`` value as another ``decimal128`` of the same scale that holds each of its
    values: the same 16 bytes a value, so arrays are reinterpreted, not converted."""
    if isinstance(value, pa.Scalar):
        return pc.cast(value, dtype)
    return value.view(dtype)


def _wide(value: Value, t: MajorType, scale: int | None, cap: int) -> Value:
    """``value`` as decimal256 at ``scale`` (or its own), with room for every value (up to ``cap``
    digits: a value that needs more is an error)."""
    assert t.precision is not None and t.scale is not None
    scale = t.scale if scale is None else scale
    precision = max(min(cap, t.precision - t.scale + scale), scale, 1)
    try:
        return pc.cast(value, pa.decimal256(precision, scale))
    except pa.ArrowInvalid as err:
        raise DecimalError(f"a DECIMAL value does not fit {precision} digits: {err}") from err


def _divide(a: Value, b: Value, left: MajorType, right: MajorType, target: MajorType) -> Value:
    """Arrow divides truncating to ``max(4, s1 + p2 - s2 + 1)`` digits: the dividend is given
    enough scale that one digit more than the target's is computed, then rounded. The operands'
    precisions are the digits their values use (Arrow's quotient type grows with them)."""
    left, right = _used(a, left), _used(b, right)
    assert left.scale is not None and right.scale is not None and right.precision is not None
    assert target.scale is not None
    scale = max(left.scale, target.scale + 1 + right.scale - right.precision, 0)
    wide_a = _wide(a, left, scale, _WIDEST)
    wide_b = _wide(b, right, None, _WIDEST)
    # NULL / 0 is NULL: only a value divided by zero is an error.
    zero = pc.and_(pc.equal(wide_b, pa.scalar(0, wide_b.type)), pc.is_valid(wide_a))
    if pc.any(zero).as_py() if isinstance(zero, pa.Array) else zero.as_py():
        raise DecimalError(coercion.DECIMAL_BY_ZERO)
    return _checked(lambda: pc.divide(wide_a, wide_b), "divide")


def used_digits(value: Value) -> int:
    """The digits the values of a decimal ``value`` use (at least its scale, and 1).

    >>> used_digits(pa.array([decimal.Decimal("-12.50"), None], pa.decimal128(38, 2)))
    4
    """
    digits = _used(value, decimal_type(value)).precision
    assert digits is not None
    return digits


def _used(value: Value, t: MajorType) -> MajorType:
    """``t`` with the precision the values of ``value`` need (at least 1 digit)."""
    assert t.precision is not None and t.scale is not None
    if isinstance(value, pa.Scalar):
        values = [value.as_py()]
    else:
        bounds = pc.min_max(value)
        values = [bounds["min"].as_py(), bounds["max"].as_py()]
    digits = 1
    for v in values:
        if v is not None and v != 0:
            digits = max(digits, v.adjusted() + 1 + t.scale)
    return MajorType.decimal(max(min(digits, t.precision), t.scale, 1), t.scale)


def _per_value(operation: str, a: Value, b: Value, target: MajorType) -> Value:
    """``a % b`` (with the sign of the dividend) or ``a * b``, per value in Python's exact
    decimals, rounded half away from zero to ``target``: where Arrow has no kernel (``%``) or
    its product type would need more than 76 digits (two operands with 38-digit scales)."""
    scalar = isinstance(a, pa.Scalar) and isinstance(b, pa.Scalar)
    length = 1 if scalar else max(len(v) for v in (a, b) if isinstance(v, pa.Array))
    xs = [a.as_py()] * length if isinstance(a, pa.Scalar) else a.to_pylist()
    ys = [b.as_py()] * length if isinstance(b, pa.Scalar) else b.to_pylist()
    unit = decimal.Decimal(1).scaleb(-(target.scale or 0))
    out = []
    with decimal.localcontext(prec=2 * _WIDEST):  # exact: a product has at most 77 digits
        for x, y in zip(xs, ys, strict=True):
            if x is None or y is None:
                out.append(None)
                continue
            x, y = decimal.Decimal(x), decimal.Decimal(y)
            if operation == "modulo" and y == 0:
                raise DecimalError(coercion.DECIMAL_BY_ZERO)
            exact = x % y if operation == "modulo" else x * y
            out.append(exact.quantize(unit, rounding=decimal.ROUND_HALF_UP))
    try:
        result = pa.array(out, pa.decimal256(_WIDEST, target.scale or 0))
    except pa.ArrowInvalid as err:
        raise DecimalError(coercion.overflow_message(target, operation)) from err
    fitted = fit(result, target, operation)
    return fitted[0] if scalar else fitted


def _checked(compute, operation: str) -> Value:  # type: ignore[no-untyped-def]
    try:
        return compute()
    except pa.ArrowInvalid as err:
        raise DecimalError(f"a DECIMAL {operation} overflows 76 digits: {err}") from err
