"""Static checks of an expression against the registry and the operator it appears in.

Contexts: ``scalar`` (filter, project, transform, order, join, ...), ``aggregate`` (collapsingaggregate's
aggregations) and ``running`` (runningaggregate's aggregations).

>>> check_expression(parse_expression("sum(count(x))"), "aggregate")
["aggregate 'count' nested inside aggregate 'sum' at column 5"]
>>> check_expression(parse_expression("sum(a) / count(a)"), "aggregate")
[]
"""

from __future__ import annotations

from engine.expr.functions import FunctionKind, FunctionSpec, function_names, lookup_function
from engine.expr.nodes import Call, Expr
from engine.expr.parser import parse_expression
from engine.types import TYPE_NAMES

CONTEXTS = ("scalar", "aggregate", "running")
_ALLOWED_KIND = {"aggregate": FunctionKind.AGGREGATE, "running": FunctionKind.RUNNING}
_OPERATORS = {
    frozenset(
        {FunctionKind.AGGREGATE, FunctionKind.RUNNING}
    ): "collapsingaggregate/runningaggregate",
    frozenset({FunctionKind.AGGREGATE}): "collapsingaggregate",
    frozenset({FunctionKind.RUNNING}): "runningaggregate",
}


def check_expression(expr: Expr | str, context: str = "scalar") -> list[str]:
    """Problems with ``expr`` in ``context``, one human message each; empty when it is fine.

    Reports unknown functions (with close names), wrong argument counts, aggregate or running
    functions where they are not allowed, and an aggregate nested inside another. A scalar function
    may wrap aggregates: ``sum(a) / count(a)``.

    >>> check_expression("sume(x)", "aggregate")
    ["unknown function 'sume' at column 1; did you mean 'sum'?"]
    >>> check_expression("a + sum(b)", "scalar")
    ["aggregate function 'sum' is only allowed in collapsingaggregate/runningaggregate at column 5"]
    """
    if context not in CONTEXTS:
        raise ValueError(f"context is one of {', '.join(CONTEXTS)}, got {context!r}")
    if isinstance(expr, str):
        expr = parse_expression(expr)
    messages: list[str] = []
    _check(expr, context, None, messages)
    return messages


def _check(node: Expr, context: str, enclosing: Call | None, messages: list[str]) -> None:
    if isinstance(node, Call):
        spec = lookup_function(node.name)
        if spec is None:
            messages.append(_unknown(node))
        elif not spec.accepts(len(node.args)):
            messages.append(
                f"function '{spec.name}' takes {spec.arity_text()}, got {len(node.args)}{_at(node)}"
            )
        if spec is not None and not spec.is_scalar:
            if _ALLOWED_KIND.get(context) not in spec.kinds:
                messages.append(_not_allowed(spec, node))
            if enclosing is not None:
                messages.append(
                    f"aggregate '{spec.name}' nested inside aggregate '{enclosing.name}'{_at(node)}"
                )
            enclosing = node
    for child in node.children():
        _check(child, context, enclosing, messages)


def _not_allowed(spec: FunctionSpec, node: Call) -> str:
    label = "aggregate function" if FunctionKind.AGGREGATE in spec.kinds else "running function"
    where = _OPERATORS.get(spec.kinds - {FunctionKind.SCALAR}, "an aggregate operator")
    return f"{label} '{spec.name}' is only allowed in {where}{_at(node)}"


def _unknown(node: Call) -> str:
    message = f"unknown function '{node.name}'{_at(node)}"
    if node.name.lower().startswith("cast"):
        types = ", ".join(sorted(TYPE_NAMES))
        return f"{message}; write cast(x as TYPE) or castTYPE(x) with TYPE one of {types}"
    import difflib  # only for a misspelling: a valid expression never needs it

    close = difflib.get_close_matches(node.name.lower(), function_names(), n=3, cutoff=0.6)
    if close:
        return f"{message}; did you mean " + " or ".join(f"'{name}'" for name in close) + "?"
    return message


def _at(node: Expr) -> str:
    return f" at {node.position}" if node.position is not None else ""
