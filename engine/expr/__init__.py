"""The expression language: parse, print, check and type Drill expressions.

>>> e = parse_expression("sum(donuts.ppu * quantity)")
>>> to_string(e), [str(f) for f in field_refs(e)], check_expression(e, "aggregate")
('sum(donuts.ppu * quantity)', ['donuts.ppu', 'quantity'], [])
"""

from __future__ import annotations

from engine.errors import ExpressionTypeError
from engine.expr.check import CONTEXTS, check_expression
from engine.expr.functions import (
    FUNCTIONS,
    FunctionKind,
    FunctionSpec,
    Operator,
    lookup_function,
)
from engine.expr.infer import infer_type
from engine.expr.nodes import (
    Call,
    Cast,
    Expr,
    FieldRef,
    IfElse,
    Literal,
    Position,
    field_refs,
    walk,
)
from engine.expr.parser import parse_expression, parse_field_ref
from engine.expr.printer import to_string

__all__ = [
    "CONTEXTS",
    "FUNCTIONS",
    "Call",
    "Cast",
    "Expr",
    "ExpressionTypeError",
    "FieldRef",
    "FunctionKind",
    "FunctionSpec",
    "IfElse",
    "Literal",
    "Operator",
    "Position",
    "check_expression",
    "field_refs",
    "infer_type",
    "lookup_function",
    "parse_expression",
    "parse_field_ref",
    "to_string",
    "walk",
]
