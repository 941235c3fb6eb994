"""Fold constant sub-expressions: literal arithmetic, comparisons and boolean identities.

A call of a scalar function whose arguments are all literals is evaluated once, by the local
executor's own implementation (so the folded value is exactly what a run would compute), and
replaced by its literal. Only plain values are folded (booleans, integers, finite doubles, text);
a null, a date or a call that fails at run time is left as written. ``true && x``, ``x && true``,
``false || x`` and ``x || false`` become ``x`` when ``x`` is itself a boolean test.

>>> from engine.plan import parse_plan
>>> plan = parse_plan({"query": [
...     {"@id": 1, "op": "constant", "content": [{"a": 1}]},
...     {"@id": 2, "op": "filter", "input": 1, "expr": "(3 < 4) && a > 2 * 10"}]})
>>> fold_constants(plan).operator("2").expr
'a > 20'
"""

from __future__ import annotations

import math
from functools import lru_cache

from engine.expr import Call, Expr, FunctionKind, Literal, lookup_function, to_string
from engine.expr.rewrite import COMPARISONS
from engine.plan import LogicalPlan
from engine.plan.expressions import parse_cached
from engine.planner.rewrite import map_expressions, replace_operators
from engine.types import MinorType

BOOLEAN_TESTS = COMPARISONS | {"and", "or", "not", "isnull", "isnotnull", "like", "regex_like"}
"""Functions whose value is always a boolean (or null)."""

_PLAIN = {
    MinorType.BIT: bool,
    MinorType.BIGINT: int,
    MinorType.FLOAT8: float,
    MinorType.VARCHAR: str,
}


def fold_constants(plan: LogicalPlan) -> LogicalPlan:
    """The plan with every expression's constant parts folded (see the module docstring)."""
    changed = {}
    for op in plan.query:
        new = map_expressions(op, fold_text)
        if new is not op:
            changed[op.id] = new
    return replace_operators(plan, changed)


@lru_cache(maxsize=4096)  # a pure function of the text; plans repeat their expressions
def fold_text(text: str) -> str:
    """``text`` folded, or ``text`` itself when nothing folds (the author's spelling is kept).

    >>> fold_text("1 + 2 * 3"), fold_text("x + 1"), fold_text("1 / 0 > 1")
    ('7', 'x + 1', '1 / 0 > 1')
    """
    tree = parse_cached(text)
    folded = fold(tree)
    return text if folded == tree else to_string(folded)


def fold(expr: Expr) -> Expr:
    """``expr`` with constant calls evaluated, bottom-up."""
    if not isinstance(expr, Call):
        return expr
    args = tuple(fold(arg) for arg in expr.args)
    call = Call(expr.name, args, expr.position) if args != expr.args else expr
    if call.name in ("and", "or") and len(args) == 2:
        simplified = _boolean_identity(call.name, *args)
        if simplified is not None:
            return simplified
    if args and all(_plain_literal(arg) for arg in args):
        return _evaluate(call) or call
    return call


def _boolean_identity(name: str, left: Expr, right: Expr) -> Expr | None:
    neutral = name == "and"  # true for &&, false for ||
    for constant, other in ((left, right), (right, left)):
        if (
            isinstance(constant, Literal)
            and constant.value is neutral
            and isinstance(other, Call)
            and other.name in BOOLEAN_TESTS
        ):
            return other
    return None


def _plain_literal(expr: Expr) -> bool:
    return isinstance(expr, Literal) and expr.value is not None and expr.type.minor in _PLAIN


def _evaluate(call: Call) -> Literal | None:
    spec = lookup_function(call.name)
    if spec is None or FunctionKind.SCALAR not in spec.kinds:
        return None
    from engine.expr.arrow.evaluate import evaluate_fields

    try:
        value = evaluate_fields(call, 1, _no_fields)
    except Exception:  # a call that fails is left for the run to report
        return None
    result = value[0].as_py()
    folded = Literal.of(result) if isinstance(result, bool | int | float | str) else None
    if folded is None or (isinstance(result, float) and not math.isfinite(result)):
        return None
    if _PLAIN[folded.type.minor] is not type(result) or not _same_kind(value.type, folded):
        return None
    return folded


def _same_kind(arrow_type: object, literal: Literal) -> bool:
    import pyarrow as pa

    expected = {
        MinorType.BIT: pa.bool_(),
        MinorType.BIGINT: pa.int64(),
        MinorType.FLOAT8: pa.float64(),
        MinorType.VARCHAR: pa.string(),
    }
    return arrow_type == expected[literal.type.minor]


def _no_fields(ref: object) -> object:
    raise LookupError("a constant has no fields")
