"""DECIMAL arithmetic on Spark with the local executor's types and errors.

The result type of every operation comes from :mod:`engine.expr.coercion` (the rule Spark's own
``allowPrecisionLoss`` analysis also follows); each operand is cast to its DECIMAL first (an
integer as DECIMAL(10|19, 0), as the local executor reads it) and the result to the rule's type.
Spark's ``try_`` functions and ``try_cast`` give null where a value does not fit, whatever
``spark.sql.ansi.enabled`` says; such a null (from non-null operands) raises the engine's
message, which :mod:`~engine.exec.spark.data_errors` reads back to name the expression. An
addition, subtraction or multiplication whose exact result always fits its type (at most 38
digits: ``DECIMAL(15, 2) * DECIMAL(15, 2)`` is ``DECIMAL(31, 4)``) is Spark's own operator, unchecked.
"""

from __future__ import annotations

import operator

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.exec.spark.constant_columns import lit
from engine.exec.spark.paths import Typed, cast_column, try_cast_column
from engine.expr import coercion
from engine.types import MAX_DECIMAL_PRECISION, MajorType, from_spark, to_spark

DECIMAL_OVERFLOW = coercion.DECIMAL_OVERFLOW
DECIMAL_BY_ZERO = coercion.DECIMAL_BY_ZERO

_TRY = {
    "add": F.try_add,
    "subtract": F.try_subtract,
    "multiply": F.try_multiply,
    "divide": F.try_divide,
    "modulo": F.try_mod,
}


_EXACT = {
    "add": operator.add,
    "subtract": operator.sub,
    "multiply": operator.mul,
}


def is_decimal(dtype: T.DataType) -> bool:
    return isinstance(dtype, T.DecimalType)


def as_decimal(value: Typed) -> Typed:
    """An integer or decimal operand as the DECIMAL that holds it."""
    if is_decimal(value.dtype):
        return value
    dtype = to_spark(coercion.as_decimal(from_spark(value.dtype)))
    return Typed(cast_column(value.column, dtype), dtype)


def arithmetic(operation: str, a: Typed, b: Typed) -> Typed:
    """``a <operation> b`` of two exact numbers, at least one a DECIMAL."""
    left, right = from_spark(a.dtype), from_spark(b.dtype)
    target = coercion.arithmetic_type(operation, left, right)
    x, y = as_decimal(a).column, as_decimal(b).column
    if operation in _EXACT:
        precision, _ = coercion.unbounded_arithmetic(
            operation, coercion.as_decimal(left), coercion.as_decimal(right)
        )
        if precision <= MAX_DECIMAL_PRECISION:
            # Spark's own operator gives the rule's type and every result fits it: no check
            # (one that would compute the value twice: a DECIMAL over 18 digits is a BigDecimal).
            dtype = to_spark(target)
            return Typed(cast_column(_EXACT[operation](x, y), dtype), dtype)
    result = _TRY[operation](x, y)
    checked = _fits(result, target, x.isNotNull() & y.isNotNull(), operation)
    if operation in ("divide", "modulo"):
        # NULL / 0 is NULL: only a value divided by zero is an error.
        by_zero = (y == 0) & x.isNotNull()
        checked = F.when(by_zero, F.raise_error(lit(DECIMAL_BY_ZERO))).otherwise(checked)
    return Typed(checked, to_spark(target))


def fit(value: Typed, target: MajorType, what: str) -> Typed:
    """``value`` as ``target`` (rounded half away from zero); an error where it does not fit."""
    dtype = to_spark(target)
    return Typed(_fits(value.column, target, value.column.isNotNull(), what), dtype)


def _fits(result: Column, target: MajorType, defined: Column, what: str) -> Column:
    fitted = try_cast_column(result, to_spark(target))
    failure = F.raise_error(lit(coercion.overflow_message(target, what)))
    return F.when(fitted.isNull() & defined, failure).otherwise(fitted)
