"""The printer: tree -> expression text with the fewest parentheses the precedences need.

``parse_expression(to_string(e)) == e`` for every tree the parser can produce (literals typed as
``Literal.of`` types them, casts carrying ``cast_type``).

>>> from engine.expr.parser import parse_expression
>>> to_string(parse_expression("((a + b) * c) - (d - e)"))
'(a + b) * c - (d - e)'
>>> to_string(parse_expression("case when x = 1 then 'one' when x = 2 then \\"two\\" end"))
"if x == 1 then 'one' elseif x == 2 then 'two' else null end"
"""

from __future__ import annotations

import math
from decimal import Decimal

from engine.expr.functions import FUNCTIONS, PREC_UNARY, Associativity, Operator
from engine.expr.nodes import Call, Cast, Expr, FieldRef, IfElse, Literal
from engine.types import DataMode, MajorType, MinorType

_OPERATORS: dict[str, Operator] = {
    spec.name: spec.operator for spec in FUNCTIONS.values() if spec.operator is not None
}
_ATOM = 100
_STRING_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def to_string(expr: Expr) -> str:
    """The expression as text that parses back to the same tree.

    >>> from engine.expr.nodes import Literal, FieldRef, Call
    >>> to_string(Call("power", (Call("power", (FieldRef.of("a"), Literal.of(2))), Literal.of(3))))
    '(a ^ 2) ^ 3'
    """
    if isinstance(expr, Literal):
        return _literal(expr)
    if isinstance(expr, FieldRef):
        return str(expr)
    if isinstance(expr, Cast):
        return f"cast({to_string(expr.expr)} as {_type_name(expr.type)})"
    if isinstance(expr, IfElse):
        parts = []
        for i, (condition, value) in enumerate(expr.branches):
            parts.append(
                f"{'elseif' if i else 'if'} {to_string(condition)} then {to_string(value)}"
            )
        return " ".join(parts) + f" else {to_string(expr.otherwise)} end"
    if isinstance(expr, Call):
        return _call(expr)
    raise TypeError(f"not an expression: {expr!r}")


def _call(call: Call) -> str:
    op = _OPERATORS.get(call.name)
    if op is None or len(call.args) != op.arity:
        return f"{call.name}({', '.join(to_string(arg) for arg in call.args)})"
    symbol = op.symbols[0]
    if op.arity == 1:
        (operand,) = call.args
        # `-(1)`: written `-1`, it would read back as the literal -1.
        folds = symbol == "-" and _is_number(operand) and not _is_negative_number(operand)
        text = _wrap(operand, PREC_UNARY, force=folds)
        return f"{symbol}{text}"
    left, right = call.args
    p = op.precedence
    left_min = p if op.associativity == Associativity.LEFT else p + 1
    right_min = p if op.associativity == Associativity.RIGHT else p + 1
    return f"{_wrap(left, left_min)} {symbol} {_wrap(right, right_min)}"


def _wrap(expr: Expr, minimum: int, *, force: bool = False) -> str:
    text = to_string(expr)
    return f"({text})" if force or _precedence(expr) < minimum else text


def _precedence(expr: Expr) -> int:
    if isinstance(expr, Call):
        op = _OPERATORS.get(expr.name)
        if op is not None and len(expr.args) == op.arity:
            return op.precedence
    if _is_negative_number(expr):
        return PREC_UNARY  # `-1` reads like a prefix minus
    return _ATOM


def _is_number(expr: Expr) -> bool:
    return (
        isinstance(expr, Literal)
        and isinstance(expr.value, int | float)
        and not isinstance(expr.value, bool)
    )


def _is_negative_number(expr: Expr) -> bool:
    return _is_number(expr) and math.copysign(1, expr.value) < 0  # type: ignore[union-attr, arg-type]


def _type_name(t: MajorType) -> str:
    return str(t.with_mode(DataMode.OPTIONAL)) if t.minor == MinorType.DECIMAL else t.minor.value


def _literal(literal: Literal) -> str:
    value = literal.value
    if value is None:
        if literal.type.minor == MinorType.NULL:
            return "null"
        return f"cast(null as {_type_name(literal.type)})"
    if isinstance(value, Decimal):  # an exact number: a cast the parser reads back as this literal
        return f"cast('{value}' as {_type_name(literal.type)})"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return f"cast('{value}' as FLOAT8)"  # no literal syntax for inf and nan
        return repr(value)
    return quote_string(value)


def quote_string(value: str) -> str:
    """A single-quoted string literal with backslash escapes.

    >>> print(quote_string("it's"))
    'it\\'s'
    """
    out = []
    for ch in value:
        if ch in _STRING_ESCAPES:
            out.append(_STRING_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"
