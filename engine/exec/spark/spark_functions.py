"""The Spark function table: every scalar registry function as a native Column builder.

``SPARK_FUNCTIONS`` maps a canonical registry name (``engine.expr.functions``) to a builder over
:class:`~engine.exec.spark.paths.Typed` arguments (Column + Spark type). The semantics are the local
executor's (``engine.expr.arrow.kernels``), reproduced with ``pyspark.sql.functions`` only:
no UDFs, no SQL text. A builder raises :class:`ArgumentError` for argument types it can never
work on; :mod:`engine.exec.spark.columns` turns that into an ``ExpressionTypeError`` at compile
time.

- Comparisons: numbers by value; strings with dates and times by reading the string as one; other
  mixes are errors; NaN compares as IEEE does (equal to nothing), as in Arrow.
- ``+ - *``: integers as BIGINT, with a float FLOAT8; ``/ ^ sqrt`` FLOAT8 with IEEE results
  (``1 / 0`` is infinity, also under ANSI mode); ``%`` takes the dividend's sign, an integer
  ``% 0`` is an error and a float ``% 0`` NaN; ``round`` rounds half away from zero. With a
  DECIMAL and no float, ``+ - * / %`` are exact (:mod:`engine.exec.spark.spark_decimals`).
- ``substr`` 1-based (negative start from the end, start 0 or length <= 0 give ''), ``concat``
  reads null as '', ``trim`` strips spaces, ``like`` is SQL ``%``/``_`` over the whole string
  (no escape unless given), ``regex_like`` a search (Java regex syntax on Spark).
- ``to_date``/``to_timestamp``: ISO strings, Java patterns, epoch milliseconds / seconds.

``UNSUPPORTED`` lists functions with no native form (with the reason); ``PARTIAL`` lists argument
forms a native builder refuses; ``AGGREGATE_NAMES`` are compiled by the aggregate operators.

The module is longer than most (about 850 lines) because it is one table: a builder of a few lines
per registry function, grouped by family as above, and the coercions they share.

>>> sorted(AGGREGATE_NAMES)[:3]
['avg', 'count', 'count_distinct']
>>> like_to_java("a%b_")
'(?s)\\\\Aa.*b.\\\\z'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.errors import UnsupportedOnSpark
from engine.exec.spark import spark_decimals
from engine.exec.spark.constant_columns import lit, lit_as
from engine.exec.spark.paths import Typed, cast_column, null_typed, same_type
from engine.expr import coercion
from engine.expr.like import like_shape, like_to_java
from engine.types import MajorType, MinorType, from_spark, to_spark

Builder = Callable[..., Typed]

LONG = T.LongType()
DOUBLE = T.DoubleType()
STRING = T.StringType()
BOOLEAN = T.BooleanType()
DATE = T.DateType()
TIMESTAMP = T.TimestampType()
TIME = T.TimestampNTZType()  # engine.types maps Drill TIME to TIMESTAMP_NTZ on 1970-01-01


class ArgumentError(Exception):
    """Arguments a function can never work on (``'a' + 1``); names the types."""


AGGREGATE_NAMES: frozenset[str] = frozenset(
    {"count", "sum", "min", "max", "avg", "count_distinct", "row_number"}
)
"""Aggregate and running functions: compiled by the aggregate operators, never here."""

UNSUPPORTED: dict[str, str] = {}
"""Scalar functions without a native Spark form -> why. Every scalar function has one today."""

PARTIAL: dict[str, str] = {
    "round": "the digits must be a constant (Spark's round takes a literal scale)",
    "like": "a LIKE escape must be a constant, and with an escape the pattern must be one too",
}
"""Argument forms a native builder refuses, by function (an ``UnsupportedOnSpark`` error)."""


# ---------------------------------------------------------------- types and coercions

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_FLOATING = (T.FloatType, T.DoubleType)


def family(dtype: T.DataType) -> str:
    """The kind of value: null, bool, number, string, binary, temporal, map, list or other."""
    if isinstance(dtype, T.NullType):
        return "null"
    if isinstance(dtype, T.BooleanType):
        return "bool"
    if isinstance(dtype, (*_INTEGRAL, *_FLOATING, T.DecimalType)):
        return "number"
    if isinstance(dtype, (T.StringType, T.VarcharType, T.CharType)):
        return "string"
    if isinstance(dtype, T.BinaryType):
        return "binary"
    if isinstance(dtype, (T.DateType, T.TimestampType, T.TimestampNTZType)):
        return "temporal"
    if isinstance(dtype, T.StructType):
        return "map"
    if isinstance(dtype, T.ArrayType):
        return "list"
    return "other"


def type_name(dtype: T.DataType) -> str:
    """The Drill name of a Spark type, for messages (``BIGINT``, ``MAP<...>``)."""
    try:
        return str(from_spark(dtype))
    except TypeError:
        return dtype.simpleString()


def is_integral(dtype: T.DataType) -> bool:
    return isinstance(dtype, _INTEGRAL)


def is_floating(dtype: T.DataType) -> bool:
    return isinstance(dtype, _FLOATING)


def cast(value: Typed, dtype: T.DataType) -> Typed:
    """``value`` as ``dtype`` (a NullType value becomes a typed null)."""
    if same_type(value.dtype, dtype):
        return value
    if isinstance(value.dtype, T.NullType):
        return Typed(lit_as(None, dtype), dtype, value.constant)
    return Typed(cast_column(value.column, dtype), dtype)


def number(value: Typed, *, keep_width: bool = False) -> Typed:
    """A numeric argument: integers as BIGINT and floats as FLOAT8 (unless ``keep_width``),
    decimals as they are; null becomes a BIGINT null."""
    kind = family(value.dtype)
    if kind == "null":
        return cast(value, LONG)
    if kind != "number":
        raise ArgumentError(f"expected a number, got {type_name(value.dtype)}")
    if keep_width or isinstance(value.dtype, T.DecimalType):
        return value
    return cast(value, LONG if is_integral(value.dtype) else DOUBLE)


def floating(value: Typed) -> Typed:
    return cast(number(value), DOUBLE)


def string(value: Typed) -> Typed:
    """A string argument (binary is read as UTF-8; null becomes a typed null)."""
    kind = family(value.dtype)
    if kind in ("null", "binary"):
        return cast(value, STRING)
    if kind != "string":
        raise ArgumentError(f"expected a string, got {type_name(value.dtype)}")
    return value


def boolean(value: Typed) -> Typed:
    kind = family(value.dtype)
    if kind == "null":
        return cast(value, BOOLEAN)
    if kind != "bool":
        raise ArgumentError(f"expected a boolean, got {type_name(value.dtype)}")
    return value


def common_type(types: Sequence[T.DataType], what: str) -> T.DataType:
    """The type values from several branches (``coalesce``, ``if``) are unified to:
    :func:`engine.expr.coercion.common_type` of their Drill types."""
    known = [t for t in types if family(t) != "null"]
    if not known:
        return T.NullType()
    try:
        return coercion.common_native_type(known, from_spark, to_spark, same_type, type_name)
    except coercion.CoercionError as err:
        raise ArgumentError(f"{what} mixes {err}") from None


def unify(values: Sequence[Typed], what: str) -> list[Typed]:
    """``values`` cast to their :func:`common_type`."""
    target = common_type([v.dtype for v in values], what)
    if isinstance(target, T.NullType):
        return list(values)
    return [cast(v, target) for v in values]


def _names(types: Sequence[T.DataType]) -> str:
    return ", ".join(type_name(t) for t in types)


def _typed(column: Column, dtype: T.DataType) -> Typed:
    return Typed(column, dtype)


def _require_constant(value: Typed, function: str, what: str) -> Any:
    if not value.is_constant:
        raise UnsupportedOnSpark(
            f"{function}: {what} must be a constant on Spark",
            hint=PARTIAL.get(function),
        )
    return value.constant


# ---------------------------------------------------------------- comparisons and logic


def comparable(a: Typed, b: Typed) -> tuple[Typed, Typed]:
    """``a`` and ``b`` cast so that a Spark comparison means what the local one means."""
    fa, fb = family(a.dtype), family(b.dtype)
    for kind, value in ((fa, a), (fb, b)):
        if kind in ("map", "list", "other"):
            raise ArgumentError(f"cannot compare a {type_name(value.dtype)} value")
    if fa == "null" and fb == "null":
        return cast(a, BOOLEAN), cast(b, BOOLEAN)
    if fa == "null":
        return cast(a, b.dtype), b
    if fb == "null":
        return a, cast(b, a.dtype)
    if fa == fb == "number":
        if isinstance(a.dtype, T.DecimalType) != isinstance(b.dtype, T.DecimalType):
            if is_floating(a.dtype) or is_floating(b.dtype):
                return cast(a, DOUBLE), cast(b, DOUBLE)
            return spark_decimals.as_decimal(a), spark_decimals.as_decimal(b)
        return number(a, keep_width=True), number(b, keep_width=True)
    if {fa, fb} <= {"string", "binary"}:
        return string(a), string(b)
    if fa == fb == "temporal":
        if same_type(a.dtype, b.dtype):
            return a, b
        if isinstance(a.dtype, T.TimestampNTZType) or isinstance(b.dtype, T.TimestampNTZType):
            raise ArgumentError(f"cannot compare {type_name(a.dtype)} with {type_name(b.dtype)}")
        return cast(a, TIMESTAMP), cast(b, TIMESTAMP)
    if fa == "temporal" and fb == "string":
        return a, read_temporal(b, a.dtype)
    if fa == "string" and fb == "temporal":
        return read_temporal(a, b.dtype), b
    if fa == fb:
        return a, b
    raise ArgumentError(f"cannot compare {type_name(a.dtype)} with {type_name(b.dtype)}")


def _comparison(
    operator: Callable[[Column, Column], Column], nan_result: bool, *, nan_agrees: str = ""
) -> Builder:
    """A comparison whose answer for NaN is IEEE's (``nan_result``), as Arrow's and Java's are:
    Spark orders NaN above every number and equal to itself. Where only the operand on the side
    ``nan_agrees`` names (``"left"``, ``"right"``, ``"both"``) may be NaN, Spark's order already
    gives IEEE's answer (``NaN < 1`` is false in both) and the comparison stays plain."""

    def compare(a: Typed, b: Typed) -> Typed:
        compared = comparable(a, b)
        may_be_nan = [_may_be_nan(given, v) for given, v in zip((a, b), compared, strict=True)]
        a, b = compared
        result = operator(a.column, b.column)
        nan = [v.column for v, maybe in zip((a, b), may_be_nan, strict=True) if maybe]
        side = "left" if may_be_nan[0] else "right"
        if nan and not (len(nan) == 1 and nan_agrees in (side, "both")):
            is_nan = F.isnan(nan[0]) if len(nan) == 1 else F.isnan(nan[0]) | F.isnan(nan[1])
            result = F.when(is_nan & result.isNotNull(), lit(nan_result)).otherwise(result)
        return _typed(result, BOOLEAN)

    return compare


def _may_be_nan(given: Typed, compared: Typed) -> bool:
    """Whether an operand (``given``, as compared: ``compared``) may be NaN: a floating value,
    compared as one, that is not a constant other than NaN (an integer cast to a double is
    never NaN)."""
    if not (is_floating(given.dtype) and is_floating(compared.dtype)):
        return False
    if not given.is_constant:
        return True
    value = given.constant
    return isinstance(value, float) and value != value


def _and(a: Typed, b: Typed) -> Typed:
    return _typed(boolean(a).column & boolean(b).column, BOOLEAN)


def _or(a: Typed, b: Typed) -> Typed:
    return _typed(boolean(a).column | boolean(b).column, BOOLEAN)


def _not(a: Typed) -> Typed:
    return _typed(~boolean(a).column, BOOLEAN)


# ---------------------------------------------------------------- arithmetic


def _exact(operation: str, a: Typed, b: Typed) -> Typed | None:
    """``a <operation> b`` when a decimal meets a decimal or an integer, else None."""
    decimal = isinstance(a.dtype, T.DecimalType) or isinstance(b.dtype, T.DecimalType)
    if not decimal or is_floating(a.dtype) or is_floating(b.dtype):
        return None
    return spark_decimals.arithmetic(operation, a, b)


def _plain(value: Typed) -> Typed:
    """A number as BIGINT or FLOAT8 (a decimal meeting a float becomes a FLOAT8)."""
    return cast(value, DOUBLE) if isinstance(value.dtype, T.DecimalType) else value


def _arithmetic(operation: str, operator: Callable[[Column, Column], Column]) -> Builder:
    def run(a: Typed, b: Typed) -> Typed:
        a, b = number(a), number(b)
        exact = _exact(operation, a, b)
        if exact is not None:
            return exact
        a, b = _plain(a), _plain(b)
        if is_integral(a.dtype) and is_integral(b.dtype):
            return _typed(operator(a.column, b.column), LONG)
        return _typed(operator(cast(a, DOUBLE).column, cast(b, DOUBLE).column), DOUBLE)

    return run


_INF = float("inf")
_NAN = float("nan")


def _divide(a: Typed, b: Typed) -> Typed:
    exact = _exact("divide", number(a), number(b))
    if exact is not None:
        return exact
    x, y = floating(a).column, floating(b).column
    # IEEE division by (signed) zero, whatever spark.sql.ansi.enabled says.
    zero_sign = F.when(y.cast(STRING).startswith("-"), lit(-1.0)).otherwise(lit(1.0))
    by_zero = (
        F.when(F.isnan(x) | (x == 0), lit(_NAN))
        .otherwise(F.signum(x) * zero_sign * lit(_INF))
    )  # fmt: skip
    return _typed(F.when(y == 0, by_zero).otherwise(F.try_divide(x, y)), DOUBLE)


def _avg_ratio(total: Typed, count: Typed, like: Typed) -> Typed:
    """``total / count`` typed as ``avg(like)`` (avg's DECIMAL for a DECIMAL ``like``, rounded
    half away from zero, else FLOAT8); null where ``count`` is 0."""
    total, count, like = number(total), number(count), number(like)
    none = count.column == 0
    if isinstance(like.dtype, T.DecimalType) and not is_floating(total.dtype):
        target = coercion.avg_type(from_spark(like.dtype))
        x, y = spark_decimals.as_decimal(total), spark_decimals.as_decimal(count)
        ratio = Typed(F.try_divide(x.column, y.column), DOUBLE)  # dtype unused by fit
        fitted = spark_decimals.fit(ratio, target, "avg")
        return _typed(F.when(none, lit(None)).otherwise(fitted.column), fitted.dtype)
    ratio = F.try_divide(floating(total).column, floating(count).column)
    return _typed(F.when(none, lit(None)).otherwise(ratio), DOUBLE)


MODULO_BY_ZERO = "integer division by zero (in %)"
"""What an integer ``%`` by zero raises (in the Spark job: ``data_errors`` reads it back)."""


def no_unit(function: str) -> str:
    """How a date function's error about a unit it has not starts (``date_trunc has no unit``)."""
    return f"{function} has no unit"


def _modulo(a: Typed, b: Typed) -> Typed:
    a, b = number(a), number(b)
    exact = _exact("modulo", a, b)
    if exact is not None:
        return exact
    a, b = _plain(a), _plain(b)
    if is_integral(a.dtype) and is_integral(b.dtype):
        failure = F.raise_error(lit(MODULO_BY_ZERO))
        by_zero = (b.column == 0) & a.column.isNotNull()
        return _typed(F.when(by_zero, failure).otherwise(a.column % b.column), LONG)
    x, y = cast(a, DOUBLE).column, cast(b, DOUBLE).column
    return _typed(F.when((y == 0) & x.isNotNull(), lit(_NAN)).otherwise(x % y), DOUBLE)


def _power(a: Typed, b: Typed) -> Typed:
    return _typed(F.pow(floating(a).column, floating(b).column), DOUBLE)


def _negate(a: Typed) -> Typed:
    a = number(a, keep_width=True)
    return _typed(-a.column, a.dtype)


def _abs(a: Typed) -> Typed:
    a = number(a, keep_width=True)
    return _typed(F.abs(a.column), a.dtype)


def _sqrt(a: Typed) -> Typed:
    return _typed(F.sqrt(floating(a).column), DOUBLE)


_EXACT_WHOLE = float(2**52)  # every double at least this large is a whole number


def _whole(function: Callable[[Column], Column]) -> Builder:
    """ceil / floor that keep a float a float (Spark's return BIGINT and overflow past 2**63)."""

    def run(a: Typed) -> Typed:
        a = number(a, keep_width=True)
        if is_integral(a.dtype):
            return a
        if isinstance(a.dtype, T.DecimalType):
            target = coercion.rounded_type(from_spark(a.dtype), 0)
            return spark_decimals.fit(_typed(function(a.column), a.dtype), target, "ceil/floor")
        x = cast(a, DOUBLE).column
        # NaN is not < 2**52 in Spark's ordering, so NaN and infinities pass through unchanged.
        whole = F.when(F.abs(x) < lit(_EXACT_WHOLE), cast_column(function(x), DOUBLE)).otherwise(x)
        return _typed(cast_column(whole, a.dtype), a.dtype)

    return run


def _round(a: Typed, digits: Typed | None = None) -> Typed:
    a = number(a, keep_width=True)
    places = 0
    if digits is not None:
        number(digits)
        places = _require_constant(digits, "round", "the number of digits")
        if places is None:
            return null_typed(a.dtype)
        places = int(places)
    if is_integral(a.dtype) and places >= 0:
        return a
    if isinstance(a.dtype, T.DecimalType):
        target = coercion.round_type(from_spark(a.dtype))
        return spark_decimals.fit(_typed(F.round(a.column, places), a.dtype), target, "round")
    return _typed(F.round(a.column, places), a.dtype)  # HALF_UP: half away from zero


# ---------------------------------------------------------------- nulls


def _isnull(a: Typed) -> Typed:
    return _typed(a.column.isNull(), BOOLEAN)


def _isnotnull(a: Typed) -> Typed:
    return _typed(a.column.isNotNull(), BOOLEAN)


def _coalesce(*args: Typed) -> Typed:
    return _of_common_type(F.coalesce, args, "coalesce")


def _greatest(*args: Typed) -> Typed:
    return _of_common_type(F.greatest, args, "greatest")  # Spark's leaves nulls out


def _least(*args: Typed) -> Typed:
    return _of_common_type(F.least, args, "least")


def _of_common_type(function: Callable[..., Column], args: Sequence[Typed], what: str) -> Typed:
    values = unify(args, what)
    dtype = common_type([v.dtype for v in values], what)
    return _typed(function(*[v.column for v in values]), dtype)


# ---------------------------------------------------------------- strings


def _lower(s: Typed) -> Typed:
    return _typed(F.lower(string(s).column), STRING)


def _upper(s: Typed) -> Typed:
    return _typed(F.upper(string(s).column), STRING)


def _length(s: Typed) -> Typed:
    return _typed(cast_column(F.char_length(string(s).column), LONG), LONG)


def _trim(s: Typed) -> Typed:
    return _typed(F.trim(string(s).column), STRING)  # spaces only, like the local trim


_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def _as_int(value: Column) -> Column:
    """A BIGINT clamped into INT range, for Spark's int-only positions (null stays null)."""
    clamped = (
        F.when(value > lit(_INT_MAX), lit(_INT_MAX))
        .when(value < lit(_INT_MIN), lit(_INT_MIN))
        .otherwise(value)
    )  # fmt: skip
    return cast_column(clamped, T.IntegerType())


def _substr(s: Typed, start: Typed, length: Typed | None = None) -> Typed:
    text = string(s).column
    plain = _plain_slice(start, length)
    if plain is not None:  # constants Spark slices as given: no test, no clamp (fewer py4j calls)
        return _typed(
            text.substr(*plain) if len(plain) == 2 else F.substr(text, lit(plain[0])), STRING
        )
    first = cast(number(start), LONG).column  # a float start truncates, as int() does
    missing = text.isNull() | first.isNull()
    empty = first == 0
    if length is None:
        sliced = F.substr(text, _as_int(first))
    else:
        count = cast(number(length), LONG).column
        missing = missing | count.isNull()
        empty = empty | (count <= 0)
        sliced = text.substr(_as_int(first), _as_int(count))
    result = (
        F.when(missing, lit_as(None, STRING)).when(empty, lit("")).otherwise(sliced)
    )  # fmt: skip
    return _typed(result, STRING)


def _plain_slice(start: Typed, length: Typed | None) -> tuple[int, ...] | None:
    """``(start,)`` or ``(start, length)`` where both are integer constants that need none of
    ``_substr``'s cases: a start other than 0 and a positive length, both within INT range."""
    bounds = [start] if length is None else [start, length]
    values = [b.constant if b.is_constant else None for b in bounds]
    if not all(
        isinstance(v, int) and not isinstance(v, bool) and _INT_MIN <= v <= _INT_MAX for v in values
    ):
        return None
    if values[0] == 0 or (length is not None and values[1] <= 0):
        return None
    return tuple(values)


def to_text(value: Typed) -> Typed:
    """A value as the local executor prints it into a string (``1.0``, ``nan``, ``...Z``)."""
    kind = family(value.dtype)
    if kind in ("string", "null", "binary"):
        return string(value)
    if kind in ("map", "list", "other"):
        raise ArgumentError(f"cannot turn a {type_name(value.dtype)} value into a string")
    x = value.column
    if is_floating(value.dtype):
        text = (
            F.when(F.isnan(x), lit("nan"))
            .when(x == lit(_INF), lit("inf"))
            .when(x == lit(-_INF), lit("-inf"))
            .otherwise(x.cast(STRING))
        )  # fmt: skip
        return _typed(text, STRING)
    if isinstance(value.dtype, T.TimestampType):
        return _typed(F.date_format(x, "yyyy-MM-dd HH:mm:ss.SSSSSS'Z'"), STRING)
    if isinstance(value.dtype, T.TimestampNTZType):
        return _typed(F.date_format(x, "HH:mm:ss.SSSSSS"), STRING)
    return _typed(x.cast(STRING), STRING)


def _concat(*args: Typed) -> Typed:
    return _typed(F.concat_ws("", *[to_text(a).column for a in args]), STRING)


def _concat_operator(*args: Typed) -> Typed:
    return _typed(F.concat(*[to_text(a).column for a in args]), STRING)  # null if any is


def _like_regex_column(pattern: Column) -> Column:
    """:func:`~engine.expr.like.like_to_java` for a pattern that varies by row (no escape), with regexp_replace."""
    escaped = F.regexp_replace(pattern, r"([\\.^$|?*+()\[\]{}])", r"\\$1")
    wild = F.regexp_replace(F.regexp_replace(escaped, "%", ".*"), "_", ".")
    return F.concat(lit("(?s)\\A"), wild, lit("\\z"))


_PLAIN_LIKE: dict[str, Callable[[Column, Column], Column]] = {
    "equals": lambda text, value: text == value,
    "prefix": lambda text, value: text.startswith(value),
    "suffix": lambda text, value: text.endswith(value),
    "contains": lambda text, value: text.contains(value),
}


def _like(s: Typed, pattern: Typed, escape: Typed | None = None) -> Typed:
    text, pattern = string(s), string(pattern)
    escape_char: str | None = None
    if escape is not None:
        string(escape)
        escape_char = _require_constant(escape, "like", "the escape character")
        if escape_char is not None and len(escape_char) != 1:
            raise ArgumentError(f"a LIKE escape is one character, got {escape_char!r}")
    if pattern.is_constant:
        if pattern.constant is None:
            return null_typed(BOOLEAN)
        shape = like_shape(pattern.constant, escape_char)
        if shape is not None:  # a plain test Spark's optimizer knows (and a reader may push)
            kind, value = shape
            return _typed(_PLAIN_LIKE[kind](text.column, lit(value)), BOOLEAN)
        regex = like_to_java(pattern.constant, escape_char)
        return _typed(text.column.rlike(regex), BOOLEAN)
    if escape_char is not None:
        _require_constant(pattern, "like", "a pattern used with an escape")
    return _typed(F.regexp_like(text.column, _like_regex_column(pattern.column)), BOOLEAN)


def _regex_like(s: Typed, regex: Typed) -> Typed:
    text, regex = string(s), string(regex)
    if regex.is_constant and regex.constant is None:
        return null_typed(BOOLEAN)
    return _typed(F.regexp_like(text.column, regex.column), BOOLEAN)


# ---------------------------------------------------------------- dates and times


def _parse_timestamp(text: Typed, pattern: Typed | None) -> Column:
    s = string(text).column
    if pattern is None or (pattern.is_constant and pattern.constant is None):
        return F.to_timestamp(s)
    pattern = string(pattern)
    if pattern.is_constant:
        return F.to_timestamp(s, str(pattern.constant))
    # A pattern that varies by row: the same built-in, called with a Column format.
    return F.call_function("to_timestamp", s, pattern.column)


def to_timestamp(value: Typed, pattern: Typed | None = None) -> Typed:
    """Strings (ISO or a Java pattern), epoch seconds, dates and timestamps as a TIMESTAMP."""
    kind = family(value.dtype)
    if kind in ("string", "binary"):
        return _typed(_parse_timestamp(value, pattern), TIMESTAMP)
    if kind == "null":
        return null_typed(TIMESTAMP)
    if kind == "number":
        micros = cast_column(F.bround(floating(value).column * lit(1_000_000.0)), LONG)
        return _typed(F.timestamp_micros(micros), TIMESTAMP)
    if kind == "temporal" and not isinstance(value.dtype, T.TimestampNTZType):
        return cast(value, TIMESTAMP)
    raise ArgumentError(f"cannot read a timestamp from a {type_name(value.dtype)} value")


def to_date(value: Typed, pattern: Typed | None = None) -> Typed:
    """Strings, epoch milliseconds, dates and timestamps as a DATE (UTC)."""
    kind = family(value.dtype)
    if kind == "number":
        days = F.floor(floating(value).column / lit(86_400_000.0))
        return _typed(F.date_from_unix_date(_as_int(days)), DATE)
    if isinstance(value.dtype, T.DateType):
        return value
    return _typed(F.to_date(to_timestamp(value, pattern).column), DATE)


def read_time(value: Typed) -> Typed:
    """``HH:mm[:ss[.f]]`` strings as TIME."""
    text = F.concat(lit("1970-01-01 "), string(value).column)
    return _typed(F.to_timestamp_ntz(text), TIME)


def time_of_day(value: Column) -> Column:
    """The time of day of a timestamp, as TIME (on 1970-01-01)."""
    seconds = F.extract(lit("SECOND"), value)
    one = lit(1)
    return F.make_timestamp_ntz(lit(1970), one, one, F.hour(value), F.minute(value), seconds)


def read_temporal(value: Typed, dtype: T.DataType) -> Typed:
    """A string compared with a date or time, read as one."""
    if isinstance(dtype, T.TimestampNTZType):
        return read_time(value)
    if isinstance(dtype, T.DateType):
        return to_date(value)
    return to_timestamp(value)


def _temporal(value: Typed, function: str) -> Typed:
    kind = family(value.dtype)
    if kind == "null":
        return cast(value, TIMESTAMP)
    if kind != "temporal":
        raise ArgumentError(
            f"{function} needs a date or time, got {type_name(value.dtype)}; "
            "convert strings with to_timestamp(...) or to_date(...)"
        )
    return value


def _normal_unit(value: Any) -> str:
    return str(value).strip().lower()


def _by_unit(
    function: str,
    unit: Typed,
    units: dict[str, Callable[[], Column]],
    result: T.DataType,
) -> Typed:
    """The value for a unit name: resolved now for a constant unit, else a CASE over the units."""
    unit = string(unit)
    if unit.is_constant:
        if unit.constant is None:
            return null_typed(result)
        name = _normal_unit(unit.constant)
        if name not in units and name.endswith("s") and name[:-1] in units:
            name = name[:-1]
        if name not in units:
            raise ArgumentError(
                f"{no_unit(function)} {unit.constant!r}; use one of " + ", ".join(sorted(units))
            )
        return _typed(cast_column(units[name](), result), result)
    given = F.lower(F.regexp_replace(unit.column, r"^\s+|\s+$", ""))
    chosen = F.when(given.isNull(), lit_as(None, result))
    for name, build in units.items():
        chosen = chosen.when(given.isin(name, name + "s"), cast_column(build(), result))
    failure = F.raise_error(
        F.concat(
            lit(f"{no_unit(function)} '"),
            unit.column,
            lit("'; use one of " + ", ".join(sorted(units))),
        )
    )
    return _typed(chosen.otherwise(failure), result)


_TRUNC_UNITS = ("year", "quarter", "month", "week", "day", "hour", "minute", "second")


def _date_trunc(unit: Typed, value: Typed) -> Typed:
    value = _temporal(value, "date_trunc")
    x = value.column

    def trunc(name: str) -> Callable[[], Column]:
        return lambda: F.date_trunc(name, x)

    units = {name: trunc(name) for name in (*_TRUNC_UNITS, "millisecond")}
    return _by_unit("date_trunc", unit, units, value.dtype)


def _extract(unit: Typed, value: Typed) -> Typed:
    value = _temporal(value, "extract")
    x = cast(value, TIMESTAMP).column  # dates read as midnight, times on 1970-01-01 (UTC)
    micros = F.unix_micros(x)
    units: dict[str, Callable[[], Column]] = {
        "year": lambda: F.year(x),
        "quarter": lambda: F.quarter(x),
        "month": lambda: F.month(x),
        "week": lambda: F.weekofyear(x),
        "day": lambda: F.dayofmonth(x),
        "dayofyear": lambda: F.dayofyear(x),
        "doy": lambda: F.dayofyear(x),
        "dayofweek": lambda: F.weekday(x) + 1,
        "dow": lambda: F.weekday(x) + 1,
        "hour": lambda: F.hour(x),
        "minute": lambda: F.minute(x),
        "second": lambda: F.second(x),
        "millisecond": lambda: F.pmod(F.floor(micros / lit(1000)), lit(1000)),
        "epoch": lambda: F.unix_seconds(x),
    }
    return _by_unit("extract", unit, units, LONG)


# ---------------------------------------------------------------- casts

_INTEGER_TARGETS: dict[MinorType, T.DataType] = {
    MinorType.INT: T.IntegerType(),
    MinorType.BIGINT: LONG,
}
_FLOAT_TARGETS: dict[MinorType, T.DataType] = {
    MinorType.FLOAT4: T.FloatType(),
    MinorType.FLOAT8: DOUBLE,
}


def cast_value(value: Typed, target: MinorType, decimal: MajorType | None = None) -> Typed:
    """``cast(value as target)``: strings read as numbers, booleans and dates; numbers round half
    away from zero into integers (as Drill's casts and SQL's); dates cast to integers count days,
    timestamps microseconds; a DECIMAL (``decimal`` gives its precision and scale) rounds half
    away from zero."""
    kind = family(value.dtype)
    if kind in ("map", "list", "other"):
        raise ArgumentError(f"cannot cast a {type_name(value.dtype)} value to {target}")
    if target == MinorType.DECIMAL:
        return _to_decimal(value, kind, decimal or MajorType.decimal(38, 0))
    if kind == "null" and target != MinorType.NULL:
        return null_typed(to_spark(MajorType(target)))
    if target in _INTEGER_TARGETS:
        dtype = _INTEGER_TARGETS[target]
        if isinstance(value.dtype, T.DateType):
            return _typed(cast_column(F.unix_date(value.column), dtype), dtype)
        if kind == "temporal":
            return _typed(cast_column(F.unix_micros(cast(value, TIMESTAMP).column), dtype), dtype)
        if is_floating(value.dtype):
            value = _typed(F.round(value.column, 0), value.dtype)  # half away from zero
        elif isinstance(value.dtype, T.DecimalType):
            whole = T.DecimalType(min(38, value.dtype.precision - value.dtype.scale + 1), 0)
            value = _typed(F.round(value.column, 0), whole)
        return cast(string(value) if kind == "binary" else value, dtype)
    if target in _FLOAT_TARGETS:
        if kind == "temporal":
            raise ArgumentError(f"cannot cast a {type_name(value.dtype)} value to {target}")
        return cast(string(value) if kind == "binary" else value, _FLOAT_TARGETS[target])
    if target == MinorType.VARCHAR:
        return to_text(value)
    if target == MinorType.VARBINARY:
        return cast(to_text(value), T.BinaryType())
    if target == MinorType.BIT:
        if kind == "number":
            return _typed(value.column != 0, BOOLEAN)
        if kind in ("string", "binary"):
            return _typed(cast_column(F.lower(F.trim(string(value).column)), BOOLEAN), BOOLEAN)
        if kind == "bool":
            return value
        raise ArgumentError(f"cannot cast a {type_name(value.dtype)} value to {target}")
    if target == MinorType.DATE:
        return to_date(value)
    if target == MinorType.TIMESTAMP:
        return to_timestamp(value)
    if target == MinorType.TIME:
        if kind in ("string", "binary"):
            return read_time(value)
        if isinstance(value.dtype, T.TimestampNTZType):
            return value
        if isinstance(value.dtype, T.TimestampType):
            return _typed(time_of_day(value.column), TIME)
        raise ArgumentError(f"cannot cast a {type_name(value.dtype)} value to {target}")
    if target == MinorType.NULL:
        return null_typed()
    raise ArgumentError(f"cannot cast a {type_name(value.dtype)} value to {target}")


def _to_decimal(value: Typed, kind: str, target: MajorType) -> Typed:
    dtype = to_spark(target)
    if kind == "null":
        return null_typed(dtype)
    if kind in ("string", "binary"):  # malformed text fails as any cast of text does
        return cast(_typed(F.trim(string(value).column), STRING), dtype)
    if kind == "bool":
        value = cast(value, LONG)
    elif kind != "number":
        raise ArgumentError(f"cannot cast a {type_name(value.dtype)} value to {target}")
    if is_floating(value.dtype):
        finite = ~F.isnan(value.column) & (F.abs(value.column) < lit(float("inf")))
        failure = F.raise_error(lit(f"{spark_decimals.DECIMAL_OVERFLOW} {target} (NaN or inf)"))
        value = _typed(
            F.when(finite | value.column.isNull(), value.column).otherwise(failure), DOUBLE
        )
    return spark_decimals.fit(value, target, f"cast to {target}")


# ---------------------------------------------------------------- the table

SPARK_FUNCTIONS: dict[str, Builder] = {
    "or": _or,
    "and": _and,
    "not": _not,
    "equal": _comparison(lambda a, b: a == b, nan_result=False, nan_agrees="both"),
    "not_equal": _comparison(lambda a, b: a != b, nan_result=True, nan_agrees="both"),
    "less_than": _comparison(lambda a, b: a < b, nan_result=False, nan_agrees="left"),
    "less_than_or_equal": _comparison(lambda a, b: a <= b, nan_result=False, nan_agrees="left"),
    "greater_than": _comparison(lambda a, b: a > b, nan_result=False, nan_agrees="right"),
    "greater_than_or_equal": _comparison(lambda a, b: a >= b, nan_result=False, nan_agrees="right"),
    "add": _arithmetic("add", lambda a, b: a + b),
    "subtract": _arithmetic("subtract", lambda a, b: a - b),
    "multiply": _arithmetic("multiply", lambda a, b: a * b),
    "divide": _divide,
    "modulo": _modulo,
    "power": _power,
    "negate": _negate,
    "isnull": _isnull,
    "isnotnull": _isnotnull,
    "coalesce": _coalesce,
    "abs": _abs,
    "ceil": _whole(F.ceil),
    "floor": _whole(F.floor),
    "round": _round,
    "sqrt": _sqrt,
    "avg_ratio": _avg_ratio,
    "lower": _lower,
    "upper": _upper,
    "length": _length,
    "substr": _substr,
    "concat": _concat,
    "greatest": _greatest,
    "least": _least,
    "concatoperator": _concat_operator,
    "trim": _trim,
    "like": _like,
    "regex_like": _regex_like,
    "to_date": to_date,
    "to_timestamp": to_timestamp,
    "date_trunc": _date_trunc,
    "extract": _extract,
}
"""Every scalar registry function by canonical name -> its native Spark builder."""
