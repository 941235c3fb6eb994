"""Compile expressions (``engine.expr`` trees) to native Spark Columns.

The semantics are the local evaluator's (``engine.expr.arrow.evaluate``): a literal is a typed
``lit``; a field reference reads the data tree (:mod:`engine.exec.spark.paths`: a missing field is
a typed null, never an AnalysisException; a name applied to an array projects it; an index out of
range is null); a call runs the builder of its registry function
(:data:`~engine.exec.spark.spark_functions.SPARK_FUNCTIONS`); ``if``/``case`` is an ``F.when``
chain whose null conditions fall through; a cast follows
:func:`~engine.exec.spark.spark_functions.cast_value`.

Types are tracked while compiling, from the DataFrame's schema, so a mismatch the schema shows
(``name > 3`` with ``name`` a string) raises an ``ExpressionTypeError`` before Spark runs anything.

Example (with a SparkSession)::

    df = spark.createDataFrame([({"id": 1},), ({"id": 5},)], "t struct<id:bigint>")
    df.select(compile_expression(parse_expression("t.id * 100 > 200"), df.schema))  # false, true
    df.where(compile_condition(parse_expression("t.id > 2"), df.schema))            # the 2nd row

A mismatch the schema shows fails at compile time (``name > 3`` with ``name`` a string gives
``cannot apply '>' (greater_than) to (VARCHAR, BIGINT): cannot compare VARCHAR with BIGINT``), and
so does a name no function has:

>>> from engine.expr import parse_expression
>>> compile_expression(parse_expression("nope(1)"), T.StructType([]))
Traceback (most recent call last):
...
engine.errors.ExpressionCompileError: unknown function 'nope' in `nope(1)`
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.errors import ExpressionCompileError, ExpressionTypeError
from engine.exec.spark.constant_columns import lit
from engine.exec.spark.paths import Typed, cast_column, get_typed, null_typed
from engine.exec.spark.spark_functions import (
    AGGREGATE_NAMES,
    SPARK_FUNCTIONS,
    UNSUPPORTED,
    ArgumentError,
    UnsupportedOnSpark,
    boolean,
    cast_value,
    common_type,
    family,
    is_integral,
    type_name,
    unify,
)
from engine.exec.spark.unions import narrow_variants
from engine.expr.functions import lookup_function
from engine.expr.nodes import Call, Cast, Expr, FieldRef, IfElse, Literal
from engine.types import MinorType, to_spark

FieldResolver = Callable[[FieldRef], Typed]
"""Where field references read their values: the DataFrame's columns, or lambda variables
(nested filtering binds references that cross arrays to array elements)."""


def compile_expression(expr: Expr, schema: T.StructType) -> Column:
    """The Column computing ``expr`` over rows of ``schema``."""
    return compile_typed(expr, schema).column


def compile_condition(
    expr: Expr, schema: T.StructType, *, resolve: FieldResolver | None = None
) -> Column:
    """``expr`` as the condition of ``DataFrame.where``: true keeps a row; false and null do not
    (Spark's ``Filter``), so no ``coalesce`` hides it from Spark's pushdown into a reader and its
    inferred not-null tests.

    A condition that gives something other than a boolean is an ``ExpressionTypeError``.
    """
    value = compile_typed(expr, schema, resolve=resolve)
    kind = family(value.dtype)
    if kind == "null":
        return lit(False)
    if kind != "bool":
        raise ExpressionTypeError(
            f"a condition must be true or false, but `{expr}` gives {type_name(value.dtype)} "
            "values",
            position=expr.position,
            hint="compare the value, for example `x > 0` or `isnotnull(x)`",
        )
    return value.column


def compile_predicate(
    expr: Expr, schema: T.StructType, *, resolve: FieldResolver | None = None
) -> Column:
    """``expr`` as a boolean that is never null (false where the condition is null): a test
    inside an expression, such as the elements an array keeps. For a ``where``, use
    :func:`compile_condition`."""
    return F.ifnull(compile_condition(expr, schema, resolve=resolve), lit(False))


def compile_typed(
    expr: Expr, schema: T.StructType, *, resolve: FieldResolver | None = None
) -> Typed:
    """The Column of ``expr`` with its Spark type; ``resolve`` overrides how fields are read."""
    reader = resolve or (lambda ref: get_typed(schema, ref.path))
    return _Compiler(reader).compile(expr)


class _Compiler:
    def __init__(self, resolve: FieldResolver) -> None:
        self.resolve = resolve

    def compile(self, expr: Expr) -> Typed:
        if isinstance(expr, Literal):
            return _literal(expr)
        if isinstance(expr, FieldRef):
            return self.resolve(expr)
        if isinstance(expr, Call):
            return self.call(expr)
        if isinstance(expr, IfElse):
            return self.if_else(expr)
        if isinstance(expr, Cast):
            inner = self.compile(expr.expr)
            if isinstance(inner.dtype, T.VariantType):  # a UNION casts as its text
                inner = Typed(inner.column.cast(T.StringType()), T.StringType())
            return _guard(
                expr, lambda: cast_value(inner, expr.type.minor, expr.type), f"cast to {expr.type}"
            )
        raise ExpressionCompileError(f"cannot compile {type(expr).__name__} `{expr}`")

    def call(self, expr: Call) -> Typed:
        spec = lookup_function(expr.name)
        name = spec.name if spec is not None else expr.name
        if spec is None:
            raise ExpressionCompileError(f"unknown function '{expr.name}' in `{expr}`")
        if name in AGGREGATE_NAMES or not spec.is_scalar:
            raise ExpressionCompileError(
                f"'{name}' is an aggregate function: it is computed by collapsingaggregate or "
                f"runningaggregate, not per record (in `{expr}`)"
            )
        if not spec.accepts(len(expr.args)):
            raise ExpressionCompileError(
                f"'{name}' takes {spec.arity_text()}, got {len(expr.args)} in `{expr}`"
            )
        if name == "or":
            listed = self.in_list(expr)
            if listed is not None:
                return listed
        builder = SPARK_FUNCTIONS.get(name)
        if builder is None:
            raise UnsupportedOnSpark(
                f"'{name}' has no Spark translation: {UNSUPPORTED.get(name, 'not implemented')}"
            )
        args = [self.compile(arg) for arg in expr.args]
        if any(isinstance(arg.dtype, T.VariantType) for arg in args):
            args = narrow_variants(args)  # a UNION value is compared by its kind
        label = f"'{spec.symbol}' ({name})" if spec.symbol else f"'{name}'"
        return _guard(expr, lambda: builder(*args), label, args)

    def in_list(self, expr: Call) -> Typed | None:
        """``x == a || x == b || ...`` (an ``IN`` list) as one ``x IN (a, b, ...)``: ``x``
        compiled once, where it is a string compared with texts or an integer with integers
        (the same answer, nulls included: no constant is null). None for any other ``or``."""
        tests = _disjuncts(expr)
        pairs = [_compared_with_constant(test) for test in tests]
        if len(tests) < 3 or any(pair is None for pair in pairs):
            return None
        subject = pairs[0][0]  # type: ignore[index]
        if not all(_identical(pair[0], subject) for pair in pairs):  # type: ignore[index]
            return None
        values = [pair[1].value for pair in pairs]  # type: ignore[index]
        x = self.compile(subject)
        texts = isinstance(x.dtype, T.StringType) and all(isinstance(v, str) for v in values)
        if texts or (is_integral(x.dtype) and all(_is_int(v) for v in values)):
            # Literals made once (constant_columns): not three py4j calls a value
            return Typed(x.column.isin([lit(v) for v in values]), T.BooleanType())
        return None

    def if_else(self, expr: IfElse) -> Typed:
        conditions = []
        for condition, _ in expr.branches:
            test = self.compile(condition)
            if family(test.dtype) not in ("bool", "null"):
                raise ExpressionTypeError(
                    f"an if/case condition must be true or false, but `{condition}` gives "
                    f"{type_name(test.dtype)} values (in `{expr}`)",
                    position=condition.position,
                )
            conditions.append(boolean(test).column)
        raw = [self.compile(value) for _, value in expr.branches]
        raw.append(self.compile(expr.otherwise))
        try:
            values = unify(raw, "if/case")
            dtype = common_type([v.dtype for v in values], "if/case")
        except ArgumentError as err:
            raise ExpressionTypeError(f"{err} in `{expr}`", position=expr.position) from None
        chain = F.when(conditions[0], values[0].column)
        for condition, value in zip(conditions[1:], values[1:-1], strict=True):
            chain = chain.when(condition, value.column)
        return Typed(chain.otherwise(values[-1].column), dtype)


def _literal(expr: Literal) -> Typed:
    if expr.type.minor == MinorType.NULL or expr.value is None:
        typed = null_typed(None if expr.type.minor == MinorType.NULL else to_spark(expr.type))
        return Typed(typed.column, typed.dtype, None)
    dtype = to_spark(expr.type)
    value = lit(expr.value)
    if _lit_type(expr.value) != dtype:
        value = cast_column(value, dtype)
    return Typed(value, dtype, expr.value)


def _disjuncts(expr: Expr) -> list[Expr]:
    """The operands of a chain of ``or`` calls, left to right."""
    if isinstance(expr, Call) and _canonical(expr.name) == "or":
        return [test for arg in expr.args for test in _disjuncts(arg)]
    return [expr]


def _canonical(name: str) -> str | None:
    spec = lookup_function(name)
    return spec.name if spec is not None else None


def _compared_with_constant(expr: Expr) -> tuple[Expr, Literal] | None:
    """``(x, c)`` for ``x == c`` or ``c == x`` with ``c`` a literal that is not null and ``x``
    no literal."""
    if not (isinstance(expr, Call) and len(expr.args) == 2 and _canonical(expr.name) == "equal"):
        return None
    left, right = expr.args
    if isinstance(left, Literal):
        left, right = right, left
    if isinstance(left, Literal) or not isinstance(right, Literal) or right.value is None:
        return None
    return left, right


def _identical(a: Expr, b: Expr) -> bool:
    """Whether ``a`` and ``b`` are the same expression: equal, and their literals of the same
    Python type and written alike (``0.0`` is not ``-0.0`` here)."""
    if type(a) is not type(b) or a != b:
        return False
    if isinstance(a, Literal):
        return type(a.value) is type(b.value) and repr(a.value) == repr(b.value)  # type: ignore[attr-defined]
    return all(_identical(x, y) for x, y in zip(a.children(), b.children(), strict=True))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


def _lit_type(value: object) -> T.DataType | None:
    """The type ``F.lit(value)`` gives by itself, for the plain Python values it types exactly.

    >>> _lit_type(2**31), _lit_type(1), _lit_type("a")
    (LongType(), IntegerType(), StringType())
    """
    if isinstance(value, bool):
        return T.BooleanType()
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return T.IntegerType()
        return T.LongType() if -(2**63) <= value < 2**63 else None
    if isinstance(value, float):
        return T.DoubleType()
    if isinstance(value, str):
        return T.StringType()
    return None


def _guard(
    expr: Expr, build: Callable[[], Typed], label: str, args: list[Typed] | None = None
) -> Typed:
    """Run ``build``, turning an argument mismatch into an ExpressionTypeError naming ``expr``."""
    try:
        return build()
    except ArgumentError as err:
        types = ", ".join(type_name(a.dtype) for a in args or []) or "no arguments"
        where = f"cannot apply {label} to ({types})" if args is not None else f"cannot {label}"
        raise ExpressionTypeError(f"{where}: {err} in `{expr}`", position=expr.position) from None
