"""Evaluate expressions on Arrow record batches with pyarrow.compute (no per-row Python).

Literals broadcast; a field reference reads the batch with :func:`~engine.expr.arrow.trees.get_path`
(a missing field is null, a path through a list without an index gives the list projected); calls
run the Arrow implementation of their registry function (``kernels.ARROW_FUNCTIONS``);
``if``/``case`` takes the first branch whose condition is true (a null condition is not true);
casts follow :func:`~engine.expr.arrow.kernels.cast_value`. Aggregate and running functions
are computed by their operators, never here.

>>> import pyarrow as pa
>>> from engine.expr import parse_expression
>>> batch = pa.record_batch({"t": pa.array([{"id": 1}, {"id": 5}, None])})
>>> evaluate(parse_expression("t.id * 100 > 200"), batch).to_pylist()
[False, True, None]
>>> evaluate_predicate(parse_expression("t.id * 100 > 200"), batch).to_pylist()
[False, True, False]
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import EvaluationError
from engine.expr.arrow.kernels import (
    ARROW_FUNCTIONS,
    ArgumentError,
    Value,
    boolean,
    cast_value,
    family,
    type_name,
    unify,
)
from engine.expr.arrow.trees import get_path
from engine.expr.functions import lookup_function
from engine.expr.nodes import Call, Cast, Expr, FieldRef, IfElse, Literal
from engine.types import is_union, to_arrow, union_text

FieldResolver = Callable[[FieldRef], pa.Array]
"""Where field references read their values: the batch, or a prepared view (nested filtering)."""


def evaluate(expr: Expr, batch: pa.RecordBatch) -> pa.Array:
    """The value of ``expr`` for every row of ``batch``, as an array of ``batch.num_rows`` values.

    >>> import pyarrow as pa
    >>> from engine.expr import parse_expression
    >>> evaluate(parse_expression("concat(b, '-', 7 % 4)"), pa.record_batch({"b": ["x", None]})).to_pylist()
    ['x-3', '-3']
    """
    return evaluate_fields(expr, batch.num_rows, lambda ref: get_path(batch, ref.path))


def evaluate_fields(expr: Expr, length: int, resolve: FieldResolver) -> pa.Array:
    """The value of ``expr`` for ``length`` rows whose field references ``resolve`` reads."""
    try:
        value = _eval(expr, length, resolve)
    except EvaluationError as err:
        whole = str(expr)
        if err.expression is None or err.expression == whole:
            raise
        raise EvaluationError(
            f"{err.message} (in `{whole}`)", expression=whole, hint=err.hint
        ) from err
    if isinstance(value, pa.Scalar):
        return pa.repeat(value, length)
    if isinstance(value, pa.ChunkedArray):
        return value.combine_chunks()
    return value


def evaluate_predicate(expr: Expr, batch: pa.RecordBatch) -> pa.BooleanArray:
    """``expr`` as a filter condition: true keeps a row; false, null and missing do not.

    A condition that yields something other than a boolean (a number, a string) is an error.
    """
    return predicate_fields(expr, batch.num_rows, lambda ref: get_path(batch, ref.path))


def predicate_fields(expr: Expr, length: int, resolve: FieldResolver) -> pa.BooleanArray:
    """:func:`evaluate_predicate` over field values that ``resolve`` reads."""
    value = evaluate_fields(expr, length, resolve)
    if pa.types.is_null(value.type):
        return pa.repeat(pa.scalar(False), length)
    if not pa.types.is_boolean(value.type):
        raise EvaluationError(
            f"a condition must be true or false, but `{expr}` gives {type_name(value.type)} values",
            expression=str(expr),
            hint="compare the value, for example `x > 0` or `isnotnull(x)`",
        )
    return pc.fill_null(value, False)


def _eval(expr: Expr, length: int, resolve: FieldResolver) -> Value:
    if isinstance(expr, Literal):
        return pa.scalar(expr.value, type=to_arrow(expr.type))
    if isinstance(expr, FieldRef):
        return resolve(expr)
    if isinstance(expr, Call):
        return _call(expr, [_eval(a, length, resolve) for a in expr.args])
    if isinstance(expr, IfElse):
        return _if_else(expr, length, resolve)
    if isinstance(expr, Cast):
        if isinstance(expr.expr, Literal) and _hashable(expr):
            return _constant_cast(expr)
        inner = _eval(expr.expr, length, resolve)
        if is_union(inner.type):
            inner = union_text(inner)  # a UNION casts as its text (strings as themselves)
        return _guard(expr, lambda: cast_value(inner, expr.type.minor, expr.type))
    raise EvaluationError(f"cannot evaluate {type(expr).__name__} `{expr}`", expression=str(expr))


@functools.lru_cache(maxsize=1024)
def _constant_cast(expr: Cast) -> Value:
    """A cast of a literal (``cast('1994-01-01' as DATE)``, a SQL constant), computed once and
    not once per batch: reading a date is a dozen kernel calls."""
    assert isinstance(expr.expr, Literal)
    inner = _eval(expr.expr, 1, _no_fields)
    return _guard(expr, lambda: cast_value(inner, expr.type.minor, expr.type))


def _hashable(expr: Expr) -> bool:
    try:
        hash(expr)
    except TypeError:
        return False
    return True


def _no_fields(ref: FieldRef) -> pa.Array:
    raise AssertionError(f"a literal reads no field ({ref})")


def _call(expr: Call, args: list[Value]) -> Value:
    spec = lookup_function(expr.name)
    name = spec.name if spec is not None else expr.name
    function = ARROW_FUNCTIONS.get(name)
    if function is None:
        if spec is not None and not spec.is_scalar:
            raise EvaluationError(
                f"'{name}' is an aggregate function: it is computed by collapsingaggregate or "
                f"runningaggregate, not per record (in `{expr}`)",
                expression=str(expr),
            )
        raise EvaluationError(f"unknown function '{expr.name}' in `{expr}`", expression=str(expr))
    if any(is_union(arg.type) for arg in args):
        args = _narrow_unions(args)
    return _guard(expr, lambda: function(*args))


def _narrow_unions(args: list[Value]) -> list[Value]:
    """Union arguments as plain arrays: each value kept where it has the kind of the other
    arguments' type (a string where a string is compared), null elsewhere, as Drill compares a
    UNION value by value. Without a typed argument, the values' common type is inferred."""
    like = next((arg.type for arg in args if not is_union(arg.type)), None)
    narrowed: list[Value] = []
    for arg in args:
        if not is_union(arg.type):
            narrowed.append(arg)
            continue
        values = arg.to_pylist()
        if like is None or pa.types.is_null(like):
            narrowed.append(pa.array(values))
            continue
        kind = family(like)
        kept = [v if _value_family(v) == kind else None for v in values]
        narrowed.append(pa.array(kept, type=like if kind != "number" else None))
    return narrowed


def _value_family(value: object) -> str | None:
    if value is None:
        return None
    try:
        return family(pa.scalar(value).type)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None


def _guard(expr: Expr, compute: Callable[[], Value]) -> Value:
    """Run ``compute``, turning argument and Arrow errors into errors naming ``expr``."""
    try:
        return compute()
    except ArgumentError as err:
        raise EvaluationError(f"{err} in `{expr}`", expression=str(expr)) from err
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:
        raise EvaluationError(f"cannot evaluate `{expr}`: {err}", expression=str(expr)) from err


def _if_else(expr: IfElse, length: int, resolve: FieldResolver) -> Value:
    raw = [_eval(value, length, resolve) for _, value in expr.branches]
    raw.append(_eval(expr.otherwise, length, resolve))
    try:
        values = unify(raw, "if/case")
    except ArgumentError as err:
        raise EvaluationError(f"{err} in `{expr}`", expression=str(expr)) from err
    result = values[-1]
    for (condition, _), value in zip(reversed(expr.branches), reversed(values[:-1]), strict=True):
        test = _eval(condition, length, resolve)
        if family(test.type) not in ("bool", "null"):
            raise EvaluationError(
                f"an if/case condition must be true or false, but `{condition}` gives "
                f"{type_name(test.type)} values (in `{expr}`)",
                expression=str(expr),
            )
        result = pc.if_else(pc.fill_null(boolean(test), False), value, result)
    return result
