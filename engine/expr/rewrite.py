"""Rewriting expressions: every call of a kind replaced (by a column reference, say).

Both executors and the planner split an aggregate or running-aggregate expression this way into
its calls (computed by the operator) and the scalar expression over their results.

>>> from engine.expr import parse_expression
>>> scalar, calls = split_calls(parse_expression("sum(a) + 1"), FunctionKind.AGGREGATE, "$")
>>> str(scalar), [str(c) for c in calls]
('$0 + 1', ['sum(a)'])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from engine.expr.functions import FunctionKind, lookup_function
from engine.expr.nodes import Call, Cast, Expr, FieldRef, IfElse, Literal
from engine.types import MinorType


def map_calls(expr: Expr, function: Callable[[Call], Expr]) -> Expr:
    """``expr`` with every call replaced by ``function(call)``, arguments first.

    >>> from engine.expr import parse_expression
    >>> str(map_calls(parse_expression("f(g(a))"), lambda c: FieldRef((c.name,)) if c.name == "g" else c))
    'f(g)'
    """

    def visit(node: Expr) -> Expr:
        if isinstance(node, Call):
            return function(dataclasses.replace(node, args=tuple(visit(a) for a in node.args)))
        if isinstance(node, IfElse):
            branches = tuple((visit(c), visit(v)) for c, v in node.branches)
            return dataclasses.replace(node, branches=branches, otherwise=visit(node.otherwise))
        if isinstance(node, Cast):
            return dataclasses.replace(node, expr=visit(node.expr))
        return node

    return visit(expr)


def split_calls(expr: Expr, kind: FunctionKind, prefix: str) -> tuple[Expr, list[Call]]:
    """``expr`` with every ``kind`` call replaced by a reference to a column ``{prefix}{i}``, and
    the calls (i-th call -> column i). Equal calls share a column.

    >>> from engine.expr import parse_expression
    >>> scalar, calls = split_calls(parse_expression("sum(a) / count(a)"), FunctionKind.AGGREGATE, "$")
    >>> str(scalar), [str(c) for c in calls]
    ('$0 / $1', ['sum(a)', 'count(a)'])
    """
    calls: list[Call] = []

    def replace(call: Call) -> Expr:
        spec = lookup_function(call.name)
        if spec is None or spec.is_scalar or kind not in spec.kinds:
            return call
        if call not in calls:
            calls.append(call)
        return FieldRef((f"{prefix}{calls.index(call)}",))

    return map_calls(expr, replace), calls


COMPARISONS = frozenset(
    {
        "equal",
        "not_equal",
        "less_than",
        "less_than_or_equal",
        "greater_than",
        "greater_than_or_equal",
    }
)
"""The comparison functions: each null when either side is null."""


def conjuncts(expr: Expr) -> list[Expr]:
    """The operands of a chain of ``&&`` (the expression itself when it is not one)."""
    if isinstance(expr, Call) and expr.name == "and":
        return [part for arg in expr.args for part in conjuncts(arg)]
    return [expr]


def constant_date(expr: Expr) -> Literal | None:
    """The text literal of ``to_date('...')`` or ``cast('...' as DATE)`` (a date constant:
    there is no date literal; SQL's ``DATE '...'`` is the cast), or None when ``expr`` is not one.

    >>> from engine.expr import parse_expression
    >>> constant_date(parse_expression("to_date('1994-01-01')")).value
    '1994-01-01'
    >>> constant_date(parse_expression("cast('1994-01-01' as DATE)")).value
    '1994-01-01'
    """
    if isinstance(expr, Call) and expr.name == "to_date" and len(expr.args) == 1:
        (arg,) = expr.args
    elif isinstance(expr, Cast) and expr.type.minor == MinorType.DATE:
        arg = expr.expr
    else:
        return None
    return arg if isinstance(arg, Literal) and isinstance(arg.value, str) else None
