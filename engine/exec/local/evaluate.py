"""Evaluate expressions on Arrow record batches with pyarrow.compute (no per-row Python).

>>> import pyarrow as pa
>>> from engine.expr import parse_expression
>>> batch = pa.record_batch({"t": pa.array([{"id": 1}, {"id": 5}])})
>>> evaluate(parse_expression("t.id * 100 > 200"), batch).to_pylist()
[False, True]
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import DrillError
from engine.exec.local.trees import get_path
from engine.expr.nodes import Call, Cast, Expr, FieldRef, IfElse, Literal
from engine.types import to_arrow


class EvaluationError(DrillError):
    """An expression that cannot be evaluated on the data it meets (e.g. ``'a' + 1`` at run time)."""


ArrowFunction = Callable[..., pa.Array]

# Functions whose Arrow form is one pyarrow.compute call; the rest are in _SPECIAL.
SIMPLE: dict[str, ArrowFunction] = {
    "add": pc.add_checked,
    "subtract": pc.subtract_checked,
    "multiply": pc.multiply_checked,
    "equal": pc.equal,
    "not_equal": pc.not_equal,
    "less_than": pc.less,
    "less_than_or_equal": pc.less_equal,
    "greater_than": pc.greater,
    "greater_than_or_equal": pc.greater_equal,
    "and": pc.and_kleene,
    "or": pc.or_kleene,
    "not": pc.invert,
    "negate": pc.negate_checked,
    "isnull": pc.is_null,
    "isnotnull": pc.is_valid,
    "abs": pc.abs_checked,
    "lower": pc.utf8_lower,
    "upper": pc.utf8_upper,
    "length": pc.utf8_length,
    "sqrt": pc.sqrt,
    "ceil": pc.ceil,
    "floor": pc.floor,
    "power": pc.power,
    "coalesce": pc.coalesce,
}


def _divide(a: pa.Array, b: pa.Array) -> pa.Array:
    return pc.divide(pc.cast(a, pa.float64()), pc.cast(b, pa.float64()))


_SPECIAL: dict[str, ArrowFunction] = {"divide": _divide}


def evaluate(expr: Expr, batch: pa.RecordBatch) -> pa.Array:
    """The value of ``expr`` for every row of ``batch``, as an array of ``batch.num_rows`` values."""
    value = _eval(expr, batch)
    if isinstance(value, pa.Scalar):
        return pa.array([value.as_py()] * batch.num_rows, type=value.type)
    if isinstance(value, pa.ChunkedArray):
        return value.combine_chunks()
    return value


def _eval(expr: Expr, batch: pa.RecordBatch) -> pa.Array | pa.Scalar:
    if isinstance(expr, Literal):
        return pa.scalar(expr.value, type=to_arrow(expr.type))
    if isinstance(expr, FieldRef):
        return get_path(batch, expr.path)
    if isinstance(expr, Call):
        args = [_eval(a, batch) for a in expr.args]
        function = SIMPLE.get(expr.name) or _SPECIAL.get(expr.name)
        if function is None:
            raise EvaluationError(f"function '{expr.name}' has no local implementation yet")
        try:
            return function(*args)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:
            raise EvaluationError(f"cannot evaluate {expr}: {err}") from err
    if isinstance(expr, IfElse):
        result = _eval(expr.otherwise, batch)
        for condition, value in reversed(expr.branches):
            result = pc.if_else(pc.fill_null(_eval(condition, batch), False), _eval(value, batch), result)
        return result
    if isinstance(expr, Cast):
        return pc.cast(_eval(expr.expr, batch), to_arrow(expr.type))
    raise EvaluationError(f"cannot evaluate {type(expr).__name__} {expr}")
