"""Type coercion, once: what type mixed values widen to and what arithmetic on them gives.

Type inference (:mod:`engine.expr.functions`), the Arrow kernels and the Spark builders all ask
here, mapping their own types to and from :class:`~engine.types.MajorType`, so the two executors
cannot disagree about a result's type.

Numbers widen INT < BIGINT < DECIMAL < FLOAT4 < FLOAT8: an integer mixed with a DECIMAL is read as
DECIMAL(10, 0) (INT) or DECIMAL(19, 0) (BIGINT), a DECIMAL mixed with a float gives FLOAT8.

DECIMAL arithmetic follows the rule Drill, Spark (``allowPrecisionLoss``, its default), Hive and
SQL Server share, for ``p1, s1`` and ``p2, s2``:

====================  =====================================  ===================
operation             precision                              scale
====================  =====================================  ===================
``+``, ``-``          ``max(p1 - s1, p2 - s2) + s + 1``       ``max(s1, s2)``
``*``                 ``p1 + p2 + 1``                         ``s1 + s2``
``/``                 ``p1 - s1 + s2 + s``                    ``max(6, s1 + p2 + 1)``
``%``                 ``min(p1 - s1, p2 - s2) + s``           ``max(s1, s2)``
====================  =====================================  ===================

A precision over 38 is capped at 38 and the scale shrinks to keep the integer digits, but not below
``min(scale, 6)``; digits dropped from the scale are rounded half away from zero. A value that
still does not fit is an error naming the expression, never a null or a wrong number.

``sum`` of DECIMAL(p, s) is DECIMAL(min(38, p + 10), s) and ``avg`` DECIMAL(min(38, p + 4),
min(38, s + 4)), as Spark's.

>>> from engine.types import BIGINT, FLOAT8, MajorType
>>> d = MajorType.decimal(15, 2)
>>> str(arithmetic_type("multiply", d, d)), str(arithmetic_type("add", d, BIGINT))
('DECIMAL(31, 4)', 'DECIMAL(22, 2)')
>>> str(arithmetic_type("divide", d, d)), str(arithmetic_type("add", d, FLOAT8))
('DECIMAL(33, 18)', 'FLOAT8')
>>> str(bounded(61, 6))
'DECIMAL(38, 6)'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from engine.types import (
    FLOAT8,
    MAX_DECIMAL_PRECISION,
    DataMode,
    MajorType,
    MinorType,
)

_RANK = [MinorType.INT, MinorType.BIGINT, MinorType.DECIMAL, MinorType.FLOAT4, MinorType.FLOAT8]
_INTEGER_DIGITS = {MinorType.INT: 10, MinorType.BIGINT: 19}
_MIN_ADJUSTED_SCALE = 6
_STRINGS = frozenset({MinorType.VARCHAR})
_TEMPORAL = frozenset({MinorType.DATE, MinorType.TIME, MinorType.TIMESTAMP})


DECIMAL_OVERFLOW = "a DECIMAL result does not fit its type"
"""How both executors' message about a DECIMAL value that does not fit its type starts."""

DECIMAL_BY_ZERO = "division by zero (DECIMAL)"
"""Both executors' message about a DECIMAL ``/`` or ``%`` by zero."""


def overflow_message(target: MajorType, what: str) -> str:
    """``a DECIMAL result does not fit its type DECIMAL(38, 0) (in add)``."""
    return f"{DECIMAL_OVERFLOW} {target} (in {what})"


class CoercionError(Exception):
    """Values of types that have no common type (a string with a number)."""


def is_decimal(t: MajorType) -> bool:
    return t.minor == MinorType.DECIMAL


def as_decimal(t: MajorType) -> MajorType:
    """An integer or DECIMAL as the DECIMAL that holds every value of it.

    >>> from engine.types import INT
    >>> str(as_decimal(INT))
    'DECIMAL(10, 0)'
    """
    if is_decimal(t):
        return t
    digits = _INTEGER_DIGITS.get(t.minor)
    if digits is None:
        raise CoercionError(f"{t} is not an exact number")
    return MajorType.decimal(digits, 0, t.mode)


def bounded(precision: int, scale: int) -> MajorType:
    """DECIMAL(precision, scale) with the precision capped at 38; the scale gives way first, down
    to ``min(scale, 6)``, so that the integer digits are kept."""
    if precision <= MAX_DECIMAL_PRECISION:
        return MajorType.decimal(max(precision, 1), scale)
    integer_digits = precision - scale
    minimum = min(scale, _MIN_ADJUSTED_SCALE)
    adjusted = max(MAX_DECIMAL_PRECISION - integer_digits, minimum)
    return MajorType.decimal(MAX_DECIMAL_PRECISION, adjusted)


def numeric_common(left: MajorType, right: MajorType) -> MajorType:
    """The type two numbers widen to (OPTIONAL; the caller sets the mode).

    >>> from engine.types import INT, BIGINT, MajorType
    >>> str(numeric_common(INT, BIGINT)), str(numeric_common(MajorType.decimal(5, 2), INT))
    ('BIGINT', 'DECIMAL(12, 2)')
    """
    minor = max(left.minor, right.minor, key=_RANK.index)
    if minor != MinorType.DECIMAL:
        return MajorType(minor)
    a, b = as_decimal(left), as_decimal(right)
    assert a.scale is not None and b.scale is not None
    assert a.precision is not None and b.precision is not None
    scale = max(a.scale, b.scale)
    integer_digits = max(a.precision - a.scale, b.precision - b.scale)
    return bounded(integer_digits + scale, scale)


def common_type(args: list[MajorType]) -> MajorType | None:
    """The type values from several branches (``coalesce``, ``if``, a union) are unified to;
    None when only late (NULL) types are seen. Numbers widen, strings are VARCHAR, a DATE with a
    TIMESTAMP is a TIMESTAMP; other mixes raise :class:`CoercionError`.

    >>> from engine.types import DATE, TIMESTAMP, INT, FLOAT8
    >>> str(common_type([INT, FLOAT8])), str(common_type([DATE, TIMESTAMP]))
    ('FLOAT8', 'TIMESTAMP')
    """
    known = [a for a in args if a.minor != MinorType.NULL]
    if not known:
        return None
    if all(a.is_numeric for a in known):
        widest = known[0].with_mode(DataMode.OPTIONAL)
        for a in known[1:]:
            widest = numeric_common(widest, a)
        return widest
    if all(a.minor in _STRINGS and a.mode != DataMode.REPEATED for a in known):
        return MajorType(MinorType.VARCHAR)
    first = known[0].with_mode(DataMode.OPTIONAL)
    if all(a.with_mode(DataMode.OPTIONAL) == first for a in known):
        return first
    if all(a.minor in _TEMPORAL and a.mode != DataMode.REPEATED for a in known):
        if any(a.minor == MinorType.TIME for a in known):
            raise CoercionError("times with dates: " + _names(known))
        return MajorType(MinorType.TIMESTAMP)
    raise CoercionError("incompatible types: " + _names(known))


def _names(types: list[MajorType]) -> str:
    return ", ".join(str(t) for t in types)


Native = TypeVar("Native")
"""An executor's own type (an Arrow ``DataType``, a Spark ``DataType``)."""


def common_native_type(
    known: Sequence[Native],
    to_drill: Callable[[Native], MajorType],
    from_drill: Callable[[MajorType], Native],
    same: Callable[[Native, Native], bool],
    name: Callable[[Native], str],
) -> Native:
    """:func:`common_type` over an executor's own types (nulls left out, at least one): the rule
    lives here once, each executor maps its types through ``to_drill`` and ``from_drill``. Types
    with no Drill counterpart unify only with themselves (``same``); nested types, alike in every
    branch, stay the first branch's. Raises :class:`CoercionError` naming the types (``name``).

    >>> from engine.types import FLOAT8, INT
    >>> common_native_type(["int", "double"], {"int": INT, "double": FLOAT8}.__getitem__,
    ...                    str, str.__eq__, str)
    'FLOAT8'
    """
    try:
        drill = [to_drill(t) for t in known]
    except TypeError:
        if all(same(t, known[0]) for t in known):
            return known[0]
        raise CoercionError("incompatible types: " + ", ".join(name(t) for t in known)) from None
    common = common_type(drill)
    assert common is not None
    if common.minor in (MinorType.MAP, MinorType.LIST) or common.mode == DataMode.REPEATED:
        return known[0]  # the same nested type in every branch
    return from_drill(common)


def arithmetic_type(operation: str, left: MajorType, right: MajorType) -> MajorType:
    """The type of ``left <operation> right`` for ``add``, ``subtract``, ``multiply``,
    ``divide`` and ``modulo`` of two numbers (OPTIONAL; the caller sets the mode): integers give
    BIGINT (``/`` FLOAT8), any float FLOAT8, a DECIMAL with an integer or a DECIMAL a DECIMAL."""
    minors = {left.minor, right.minor}
    if minors & {MinorType.FLOAT4, MinorType.FLOAT8}:
        return FLOAT8
    if MinorType.DECIMAL not in minors:
        return FLOAT8 if operation == "divide" else MajorType(MinorType.BIGINT)
    a, b = as_decimal(left), as_decimal(right)
    p1, s1, p2, s2 = a.precision, a.scale, b.precision, b.scale
    assert p1 is not None and s1 is not None and p2 is not None and s2 is not None
    if operation in ("add", "subtract"):
        scale = max(s1, s2)
        return bounded(max(p1 - s1, p2 - s2) + scale + 1, scale)
    if operation == "multiply":
        return bounded(p1 + p2 + 1, s1 + s2)
    if operation == "divide":
        scale = max(_MIN_ADJUSTED_SCALE, s1 + p2 + 1)
        return bounded(p1 - s1 + s2 + scale, scale)
    if operation == "modulo":
        scale = max(s1, s2)
        return bounded(min(p1 - s1, p2 - s2) + scale, scale)
    raise ValueError(f"no arithmetic {operation!r}")


def unbounded_arithmetic(operation: str, left: MajorType, right: MajorType) -> tuple[int, int]:
    """``(precision, scale)`` of the exact result of ``add``, ``subtract`` or ``multiply`` of two
    DECIMALs, the precision not capped at 38: where it is at most 38, every result fits
    :func:`arithmetic_type` exactly and the operation can neither round nor overflow.

    >>> unbounded_arithmetic("multiply", MajorType.decimal(15, 2), MajorType.decimal(15, 2))
    (31, 4)
    """
    assert left.precision is not None and left.scale is not None
    assert right.precision is not None and right.scale is not None
    if operation == "multiply":
        return left.precision + right.precision + 1, left.scale + right.scale
    scale = max(left.scale, right.scale)
    digits = max(left.precision - left.scale, right.precision - right.scale)
    return digits + scale + 1, scale


def sum_type(t: MajorType) -> MajorType:
    """``sum`` of a number: BIGINT for integers, FLOAT8 for floats, a wider DECIMAL for DECIMAL."""
    if is_decimal(t):
        assert t.precision is not None and t.scale is not None
        return MajorType.decimal(min(MAX_DECIMAL_PRECISION, t.precision + 10), t.scale)
    if t.minor in _INTEGER_DIGITS:
        return MajorType(MinorType.BIGINT)
    return FLOAT8


def avg_type(t: MajorType) -> MajorType:
    """``avg`` of a number: FLOAT8, or for DECIMAL(p, s) DECIMAL(p + 4, s + 4) (capped at 38)."""
    if is_decimal(t):
        assert t.precision is not None and t.scale is not None
        precision = min(MAX_DECIMAL_PRECISION, t.precision + 4)
        return MajorType.decimal(precision, min(precision, t.scale + 4))
    return FLOAT8


def round_type(t: MajorType) -> MajorType:
    """``round(x, digits)`` of DECIMAL(p, s): DECIMAL(p + 1, s) (the digits given are only known
    at run time; the ones past them are zeros), capped at 38."""
    assert t.precision is not None and t.scale is not None
    return MajorType.decimal(min(MAX_DECIMAL_PRECISION, t.precision + 1), t.scale)


def rounded_type(t: MajorType, digits: int) -> MajorType:
    """``round(x, digits)`` (``ceil``/``floor`` with ``digits`` 0) of a DECIMAL: the scale drops
    to ``digits`` (never below 0), with room for one more integer digit."""
    assert t.precision is not None and t.scale is not None
    scale = min(t.scale, max(digits, 0))
    if scale == t.scale:
        return t.with_mode(DataMode.OPTIONAL)
    return MajorType.decimal(min(MAX_DECIMAL_PRECISION, t.precision - t.scale + scale + 1), scale)
