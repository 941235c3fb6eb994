"""Arrow implementations of the scalar functions of the registry (``engine.expr.functions``).

``ARROW_FUNCTIONS`` maps every SCALAR registry name to an implementation over Arrow values (arrays
or scalars, pyarrow.compute kernels). An implementation raises :class:`ArgumentError` for arguments
it cannot work on; the evaluator turns that into an ``EvaluationError`` naming the expression.

Semantics (Drill's, on Arrow):

- Comparisons: null gives null; numbers compare by value whatever their width; strings compare with
  dates and times by reading the string as one; other mixes (a string with a number) are errors.
- ``+ - *`` of integers give BIGINT (int64, overflow is an error), with a float FLOAT8; ``/`` of
  integers or floats, ``^`` and ``sqrt`` FLOAT8 (IEEE: ``1 / 0`` is infinity, as in Java); ``%``
  has the sign of the dividend (Java); an integer ``% 0`` is an error. With a DECIMAL (and no
  float) ``+ - * / %`` are exact (:mod:`engine.expr.arrow.decimals`, types from
  :mod:`engine.expr.coercion`); a result that does not fit its type or a division by zero is an
  error.
- ``and``/``or`` are Kleene (``null and false`` is false); ``round`` rounds half away from zero.
- ``substr`` is 1-based, a negative start counts from the end, start 0 or a length <= 0 give '';
  ``concat`` reads null as ''; ``trim`` strips spaces; ``like`` is SQL ``%``/``_`` (whole string),
  ``regex_like`` a search anywhere in the string (RE2 syntax).
- ``to_date``/``to_timestamp`` read ISO-8601 strings, strings in a Java (Joda) pattern
  (``yyyy-MM-dd HH:mm:ss.SSS``), epoch milliseconds (``to_date``) or epoch seconds
  (``to_timestamp``); timestamps are UTC. ``date_trunc``/``extract`` take a unit name.

>>> import pyarrow as pa
>>> ARROW_FUNCTIONS["modulo"](pa.array([7, -7, 7]), pa.array([2, 2, -2])).to_pylist()
[1, -1, 1]
>>> ARROW_FUNCTIONS["substr"](pa.array(["drill"]), pa.scalar(2), pa.scalar(3)).to_pylist()
['ril']
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.expr import coercion
from engine.expr.arrow import decimals
from engine.expr.like import like_to_re2
from engine.types import MajorType, MinorType, from_arrow, to_arrow

Value = pa.Array | pa.Scalar
ArrowFunction = Callable[..., Value]

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")


class ArgumentError(Exception):
    """Arguments a function cannot work on (``'a' + 1``, ``cast('x' as INT)``)."""


# ---------------------------------------------------------------- types and coercions


def type_name(dtype: pa.DataType) -> str:
    """The Drill name of an Arrow type, for messages (``BIGINT``, ``MAP<...>``)."""
    try:
        return str(from_arrow(dtype))
    except TypeError:
        return str(dtype)


def family(dtype: pa.DataType) -> str:
    """The kind of value: null, bool, number, string, binary, temporal, map, list or other."""
    if pa.types.is_null(dtype):
        return "null"
    if pa.types.is_boolean(dtype):
        return "bool"
    if pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype):
        return "number"
    if (
        pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_string_view(dtype)
    ):
        return "string"
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return "binary"
    if pa.types.is_temporal(dtype) and not pa.types.is_duration(dtype):
        return "temporal"
    if pa.types.is_struct(dtype):
        return "map"
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return "list"
    return "other"


def cast(value: Value, dtype: pa.DataType) -> Value:
    """``value`` as ``dtype`` (a null-typed value becomes typed nulls)."""
    if value.type.equals(dtype):
        return value
    if pa.types.is_null(value.type):
        if isinstance(value, pa.Scalar):
            return pa.scalar(None, dtype)
        return pa.nulls(len(value), dtype)
    return pc.cast(value, dtype)


def _is_integer(dtype: pa.DataType) -> bool:
    return pa.types.is_integer(dtype)


def number(value: Value, *, keep_width: bool = False) -> Value:
    """A numeric argument: integers as int64 and floats as float64 (unless ``keep_width``),
    decimals as they are; null becomes a typed null."""
    kind = family(value.type)
    if kind == "null":
        return cast(value, pa.int64())
    if kind != "number":
        raise ArgumentError(f"expected a number, got {type_name(value.type)}")
    if keep_width or pa.types.is_decimal(value.type):
        return value
    return cast(value, pa.int64() if _is_integer(value.type) else pa.float64())


def floating(value: Value) -> Value:
    return cast(number(value), pa.float64())


def string(value: Value) -> Value:
    """A string argument (binary is read as UTF-8; null becomes a typed null)."""
    kind = family(value.type)
    if kind in ("null", "binary"):
        return cast(value, pa.string())
    if kind != "string":
        raise ArgumentError(f"expected a string, got {type_name(value.type)}")
    return value


def boolean(value: Value) -> Value:
    kind = family(value.type)
    if kind == "null":
        return cast(value, pa.bool_())
    if kind != "bool":
        raise ArgumentError(f"expected a boolean, got {type_name(value.type)}")
    return value


def common_type(values: list[Value], what: str) -> pa.DataType:
    """The type values from several branches (``coalesce``, ``if``) are unified to:
    :func:`engine.expr.coercion.common_type` of their Drill types."""
    known = [v.type for v in values if family(v.type) != "null"]
    if not known:
        return pa.null()
    try:
        return coercion.common_native_type(
            known, from_arrow, to_arrow, pa.DataType.equals, type_name
        )
    except coercion.CoercionError as err:
        raise ArgumentError(f"{what} mixes {err}") from None


def unify(values: list[Value], what: str) -> list[Value]:
    """``values`` cast to their :func:`common_type`."""
    target = common_type(values, what)
    if pa.types.is_null(target):
        return values
    return [cast(v, target) for v in values]


def _names(types: list[pa.DataType]) -> str:
    return ", ".join(type_name(t) for t in types)


# ---------------------------------------------------------------- option-like arguments


_VARIES = object()


def constant(value: Value) -> Any:
    """The one Python value of ``value`` if it is the same in every row, else ``_VARIES``."""
    if isinstance(value, pa.Scalar):
        return value.as_py()
    if len(value) == 0 or value.null_count == len(value):
        return None
    if value.null_count == 0 and family(value.type) in ("bool", "number", "string", "temporal"):
        low, high = pc.min_max(value).values()
        if low.is_valid and low == high:
            return low.as_py()
    return _VARIES


def by_value(option: Value, compute: Callable[[Any], Value]) -> Value:
    """``compute(v)`` for the value ``v`` of an option-like argument (a pattern, a unit, a start).

    Arrow kernels take such arguments as options, not per row: when ``option`` varies between
    rows, ``compute`` runs once per distinct value (vectorised over all rows) and the results are
    combined by mask. That loop is over distinct values, never over rows.
    """
    single = constant(option)
    if single is not _VARIES:
        return compute(single)
    result: Value | None = None
    for v in pc.unique(option).to_pylist():
        part = compute(v)
        if result is None:
            result = part
            continue
        mask = pc.is_null(option) if v is None else pc.fill_null(pc.equal(option, v), False)
        result = pc.if_else(mask, part, result)
    assert result is not None
    return result


def _nulls_like(value: Value, dtype: pa.DataType) -> Value:
    if isinstance(value, pa.Scalar):
        return pa.scalar(None, dtype)
    return pa.nulls(len(value), dtype)


# ---------------------------------------------------------------- comparisons and logic


def comparable(a: Value, b: Value) -> tuple[Value, Value]:
    """``a`` and ``b`` cast so that an Arrow comparison kernel accepts them."""
    fa, fb = family(a.type), family(b.type)
    for kind, value in ((fa, a), (fb, b)):
        if kind in ("map", "list", "other"):
            raise ArgumentError(f"cannot compare a {type_name(value.type)} value")
    if fa == "null" and fb == "null":
        return cast(a, pa.bool_()), cast(b, pa.bool_())
    if fa == "null":
        return cast(a, b.type), b
    if fb == "null":
        return a, cast(b, a.type)
    if fa == fb == "number":
        if pa.types.is_decimal(a.type) or pa.types.is_decimal(b.type):
            return _mixed_numbers(a, b)
        return number(a, keep_width=True), number(b, keep_width=True)
    if {fa, fb} <= {"string", "binary"}:
        return string(a), string(b)
    if fa == fb == "temporal":
        if a.type.equals(b.type):
            return a, b
        if pa.types.is_time(a.type) or pa.types.is_time(b.type):
            raise ArgumentError(f"cannot compare {type_name(a.type)} with {type_name(b.type)}")
        return cast(a, TIMESTAMP_TYPE), cast(b, TIMESTAMP_TYPE)
    if fa == "temporal" and fb == "string":
        return a, _read_temporal(b, a.type)
    if fa == "string" and fb == "temporal":
        return _read_temporal(a, b.type), b
    if fa == fb:
        return a, b
    raise ArgumentError(f"cannot compare {type_name(a.type)} with {type_name(b.type)}")


def _mixed_numbers(a: Value, b: Value) -> tuple[Value, Value]:
    """A decimal with a float (both as float64), or with an integer or a decimal (both as one
    decimal256 type, where Arrow's own common type can pass 38 digits)."""
    if pa.types.is_floating(a.type) or pa.types.is_floating(b.type):
        return cast(a, pa.float64()), cast(b, pa.float64())
    return decimals.comparable(a, b)


def _comparison(kernel: ArrowFunction) -> ArrowFunction:
    def compare(a: Value, b: Value) -> Value:
        return kernel(*comparable(a, b))

    compare.__name__ = kernel.__name__
    return compare


def _and(a: Value, b: Value) -> Value:
    return pc.and_kleene(boolean(a), boolean(b))


def _or(a: Value, b: Value) -> Value:
    return pc.or_kleene(boolean(a), boolean(b))


def _not(a: Value) -> Value:
    return pc.invert(boolean(a))


# ---------------------------------------------------------------- arithmetic


def _exact(operation: str, a: Value, b: Value) -> Value | None:
    """``a <operation> b`` when a decimal meets a decimal or an integer, else None."""
    if not (pa.types.is_decimal(a.type) or pa.types.is_decimal(b.type)):
        return None
    if pa.types.is_floating(a.type) or pa.types.is_floating(b.type):
        return None
    try:
        return decimals.arithmetic(operation, a, b)
    except decimals.DecimalError as err:
        raise ArgumentError(str(err)) from err


def _arithmetic(operation: str, kernel: ArrowFunction) -> ArrowFunction:
    def run(a: Value, b: Value) -> Value:
        a, b = number(a), number(b)
        exact = _exact(operation, a, b)
        if exact is not None:
            return exact
        return kernel(_plain(a), _plain(b))

    run.__name__ = kernel.__name__
    return run


def _plain(value: Value) -> Value:
    """A number as int64 or float64 (a decimal meeting a float becomes a float64)."""
    if pa.types.is_decimal(value.type):
        return cast(value, pa.float64())
    return value


def _divide(a: Value, b: Value) -> Value:
    exact = _exact("divide", number(a), number(b))
    if exact is not None:
        return exact
    return pc.divide(floating(a), floating(b))


def _modulo(a: Value, b: Value) -> Value:
    a, b = number(a), number(b)
    exact = _exact("modulo", a, b)
    if exact is not None:
        return exact
    a, b = _plain(a), _plain(b)
    if _is_integer(a.type) and _is_integer(b.type):
        try:
            quotient = pc.divide_checked(a, b)  # truncates toward zero, like Java
        except pa.ArrowInvalid as err:
            raise ArgumentError("integer division by zero (in %)") from err
        return pc.subtract_checked(a, pc.multiply_checked(quotient, b))
    return _fmod(cast(a, pa.float64()), cast(b, pa.float64()))


def _fmod(a: Value, b: Value) -> Value:
    """Java's floating ``%`` (C ``fmod``: exact, sign of the dividend); numpy, vectorised."""
    valid = pc.and_(pc.is_valid(a), pc.is_valid(b))
    left = _numpy(a)
    right = _numpy(b)
    with np.errstate(invalid="ignore", divide="ignore"):
        result = np.fmod(left, right)
    if isinstance(valid, pa.Scalar):
        return pa.scalar(float(result) if valid.as_py() else None, pa.float64())
    return pa.array(result, pa.float64(), mask=pc.invert(valid).to_numpy(zero_copy_only=False))


def _numpy(value: Value) -> np.ndarray | float:
    if isinstance(value, pa.Scalar):
        return np.float64(value.as_py() if value.is_valid else np.nan)
    return pc.fill_null(value, np.nan).to_numpy(zero_copy_only=False)


def _power(a: Value, b: Value) -> Value:
    return pc.power(floating(a), floating(b))


def _negate(a: Value) -> Value:
    return pc.negate_checked(number(a, keep_width=True))


def _abs(a: Value) -> Value:
    return pc.abs_checked(number(a, keep_width=True))


def _sqrt(a: Value) -> Value:
    return pc.sqrt(floating(a))


def _ceil(a: Value) -> Value:
    a = number(a, keep_width=True)
    return a if _is_integer(a.type) else _whole_decimal(pc.ceil(a), a)


def _floor(a: Value) -> Value:
    a = number(a, keep_width=True)
    return a if _is_integer(a.type) else _whole_decimal(pc.floor(a), a)


def _whole_decimal(result: Value, given: Value) -> Value:
    """ceil/floor of a decimal as DECIMAL(p - s + 1, 0) (:func:`coercion.rounded_type`)."""
    if not pa.types.is_decimal(given.type):
        return result
    return _fit(result, coercion.rounded_type(from_arrow(given.type), 0), "ceil/floor")


def _fit(value: Value, target: MajorType, what: str) -> Value:
    try:
        return decimals.fit(value, target, what)
    except decimals.DecimalError as err:
        raise ArgumentError(str(err)) from err


def _round(a: Value, digits: Value | None = None) -> Value:
    a = number(a, keep_width=True)

    def with_digits(d: Any) -> Value:
        if d is None:
            return _nulls_like(a, a.type)
        d = int(d)
        if _is_integer(a.type) and d >= 0:
            return a
        if pa.types.is_decimal(a.type):  # DECIMAL(p + 1, s): one more digit for the carry
            target = coercion.round_type(from_arrow(a.type))
            widened = cast(a, pa.decimal256(target.precision or 1, target.scale or 0))
            rounded = pc.round(widened, ndigits=d, round_mode="half_towards_infinity")
            return _fit(rounded, target, "round")
        return pc.round(a, ndigits=d, round_mode="half_towards_infinity")

    if digits is None:
        return with_digits(0)
    return by_value(number(digits), with_digits)


# ---------------------------------------------------------------- nulls


def _coalesce(*args: Value) -> Value:
    return pc.coalesce(*unify(list(args), "coalesce"))


def _greatest(*args: Value) -> Value:
    return _extreme(pc.max_element_wise, args, "greatest")


def _least(*args: Value) -> Value:
    return _extreme(pc.min_element_wise, args, "least")


def _extreme(function: Callable[..., Value], args: tuple[Value, ...], what: str) -> Value:
    """The largest (smallest) of ``args`` row by row, nulls left out: null where all are."""
    values = unify(list(args), what)
    if all(pa.types.is_null(v.type) for v in values):
        return values[0]
    return function(*values, skip_nulls=True)


# ---------------------------------------------------------------- strings


def _lower(s: Value) -> Value:
    return pc.utf8_lower(string(s))


def _upper(s: Value) -> Value:
    return pc.utf8_upper(string(s))


def _length(s: Value) -> Value:
    return pc.cast(pc.utf8_length(string(s)), pa.int64())


def _trim(s: Value) -> Value:
    return pc.utf8_trim(string(s), characters=" ")


def _substr(s: Value, start: Value, length: Value | None = None) -> Value:
    s = string(s)

    def slice_from(first: Any) -> Value:
        if length is None:
            return _slice(s, first, None, has_length=False)
        return by_value(number(length), lambda count: _slice(s, first, count, has_length=True))

    return by_value(number(start), slice_from)


def _slice(s: Value, start: Any, count: Any, *, has_length: bool) -> Value:
    if start is None or (has_length and count is None):
        return _nulls_like(s, pa.string())
    start = int(start)
    if start == 0 or (has_length and int(count) <= 0):
        return pc.utf8_slice_codeunits(s, start=0, stop=0)
    begin = start - 1 if start > 0 else start
    stop = begin + int(count) if has_length else None
    if stop is not None and begin < 0 <= stop:
        stop = None  # a slice from the end that runs past the last character
    return pc.utf8_slice_codeunits(s, start=begin, stop=stop)


def to_text(value: Value) -> Value:
    """A value as Drill would print it into a string (``1.0`` for a whole float, as Java does)."""
    kind = family(value.type)
    if kind in ("string", "null", "binary"):
        return string(value)
    if kind in ("map", "list", "other"):
        raise ArgumentError(f"cannot turn a {type_name(value.type)} value into a string")
    text = pc.cast(value, pa.string())
    if pa.types.is_floating(value.type):
        whole = pc.match_substring_regex(text, r"^-?\d+$")
        text = pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""), text)
    return text


def _concat(*args: Value) -> Value:
    texts = [to_text(a) for a in args]
    return pc.binary_join_element_wise(*texts, "", null_handling="replace", null_replacement="")


def _concat_operator(*args: Value) -> Value:
    texts = [to_text(a) for a in args]
    return pc.binary_join_element_wise(*texts, "", null_handling="emit_null")


def _like(s: Value, pattern: Value, escape: Value | None = None) -> Value:
    s = string(s)

    def match(p: Any, e: Any) -> Value:
        if p is None:
            return _nulls_like(s, pa.bool_())
        if e is not None and len(e) != 1:
            raise ArgumentError(f"a LIKE escape is one character, got {e!r}")
        return _search(s, like_to_re2(p, e))

    if escape is None:
        return by_value(string(pattern), lambda p: match(p, None))
    return by_value(string(pattern), lambda p: by_value(string(escape), lambda e: match(p, e)))


def _regex_like(s: Value, regex: Value) -> Value:
    s = string(s)

    def search(r: Any) -> Value:
        return _nulls_like(s, pa.bool_()) if r is None else _search(s, r)

    return by_value(string(regex), search)


def _search(s: Value, regex: str) -> Value:
    try:
        return pc.match_substring_regex(s, pattern=regex)
    except pa.ArrowInvalid as err:
        raise ArgumentError(f"invalid regular expression {regex!r} (RE2 syntax): {err}") from err


# ---------------------------------------------------------------- dates and times

_ISO = (
    r"^(?P<y>[+-]?\d{4,})-(?P<M>\d{1,2})-(?P<d>\d{1,2})"
    r"(?:[T ](?P<H>\d{1,2}):(?P<m>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<f>\d{1,9}))?)?)?"
    r"\s*(?P<z>Z|[+-]\d{2}(?::?\d{2})?)?$"
)
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_PATTERN_TOKEN = re.compile(r"'(?:[^']|'')*'|([A-Za-z])\1*|.", re.DOTALL)


def java_pattern_to_regex(pattern: str) -> str:
    """A Java (Joda) date pattern as a regex with named groups for :func:`parse_timestamps`.

    >>> java_pattern_to_regex("yyyy-MM-dd")
    '^(?P<y>[+-]?\\\\d{4})\\\\-(?P<M>\\\\d{2})\\\\-(?P<d>\\\\d{2})$'
    """
    parts: list[str] = []
    for match in _PATTERN_TOKEN.finditer(pattern):
        token = match.group(0)
        if token.startswith("'"):
            literal = token[1:-1].replace("''", "'") if len(token) > 2 else "'"
            parts.append(re.escape(literal))
            continue
        if not token[0].isalpha():
            parts.append(re.escape(token))
            continue
        parts.append(_pattern_letter(token, pattern))
    return "^" + "".join(parts) + "$"


def _pattern_letter(token: str, pattern: str) -> str:
    letter, width = token[0], len(token)
    digits = rf"\d{{{width}}}" if width > 1 else r"\d{1,2}"
    if letter == "y":
        return r"(?P<yy>\d{2})" if width == 2 else r"(?P<y>[+-]?\d{4})"
    if letter == "M":
        if width >= 3:
            return r"(?P<Mname>[A-Za-z]{3})[A-Za-z]*" if width == 3 else r"(?P<Mname>[A-Za-z]+)"
        return f"(?P<M>{digits})"
    groups = {"d": "d", "H": "H", "h": "h", "m": "m", "s": "s"}
    if letter in groups:
        return f"(?P<{groups[letter]}>{digits})"
    if letter == "S":
        return rf"(?P<f>\d{{{width}}})"
    if letter == "a":
        return r"(?P<a>[AaPp][Mm])"
    if letter == "E":
        return r"[A-Za-z]+"
    if letter in ("Z", "X"):
        return r"(?P<z>Z|[+-]\d{2}(?::?\d{2})?)"
    raise ArgumentError(f"the date pattern letter '{letter}' in {pattern!r} is not supported")


def parse_timestamps(text: Value, pattern: str | None = None) -> Value:
    """Strings as UTC timestamps: ISO-8601 without ``pattern``, else a Java (Joda) pattern.

    >>> import pyarrow as pa
    >>> parse_timestamps(pa.array(["12/31/2020 23:59"]), "MM/dd/yyyy HH:mm").to_pylist()[0].isoformat()
    '2020-12-31T23:59:00+00:00'
    """
    text = string(text)
    regex = _ISO if pattern is None else java_pattern_to_regex(pattern)
    scalar = isinstance(text, pa.Scalar)
    values = pa.array([text.as_py()], pa.string()) if scalar else text
    parts = pc.extract_regex(values, pattern=regex)
    unmatched = pc.and_(pc.is_valid(values), pc.is_null(parts))
    if pc.any(unmatched).as_py():
        bad = values.filter(unmatched)[0].as_py()
        how = f"with the pattern {pattern!r}" if pattern else "as an ISO-8601 date or timestamp"
        raise ArgumentError(f"cannot read {bad!r} {how}")
    result = _assemble(parts, {f.name for f in parts.type})
    return result[0] if scalar else result


def _assemble(parts: pa.StructArray, names: set[str]) -> pa.Array:
    """ISO text ``YYYY-MM-DDTHH:MM:SS.ffffff+zone`` from regex groups, then one Arrow cast."""

    def group(name: str) -> pa.Array:
        return pc.struct_field(parts, [parts.type.get_field_index(name)])

    def two(name: str, default: str) -> Any:
        if name not in names:
            return default
        return pc.utf8_lpad(pc.if_else(pc.equal(group(name), ""), default, group(name)), 2, "0")

    if "y" in names:
        year: Any = group("y")
    elif "yy" in names:
        year = pc.binary_join_element_wise("20", group("yy"), "")
    else:
        year = "1970"
    if "Mname" in names:
        index = pc.index_in(
            pc.utf8_slice_codeunits(pc.utf8_lower(group("Mname")), 0, 3), pa.array(_MONTHS)
        )
        month: Any = pc.utf8_lpad(pc.cast(pc.add(index, 1), pa.string()), 2, "0")
    else:
        month = two("M", "01")
    hour = two("H", "00")
    if "h" in names:
        twelve = pc.cast(group("h"), pa.int64())
        pm = pc.equal(pc.utf8_lower(group("a")), "pm") if "a" in names else pa.scalar(False)
        hours = pc.add(
            pc.subtract(twelve, pc.multiply(pc.divide(twelve, 12), 12)), pc.if_else(pm, 12, 0)
        )
        hour = pc.utf8_lpad(pc.cast(hours, pa.string()), 2, "0")
    fraction: Any = "000000"
    if "f" in names:
        fraction = pc.utf8_slice_codeunits(pc.utf8_rpad(group("f"), 6, "0"), 0, 6)
    zone: Any = "Z"
    if "z" in names:
        written = group("z")
        hours_only = pc.match_substring_regex(written, r"^[+-]\d{2}$")
        written = pc.if_else(hours_only, pc.binary_join_element_wise(written, ":00", ""), written)
        zone = pc.if_else(pc.equal(written, ""), "Z", written)
    text = pc.binary_join_element_wise(
        year, "-", month, "-", two("d", "01"), "T", hour, ":", two("m", "00"), ":",
        two("s", "00"), ".", fraction, zone, "",
    )  # fmt: skip
    try:
        return pc.cast(text, TIMESTAMP_TYPE)
    except pa.ArrowInvalid as err:
        raise ArgumentError(f"not a valid date or time: {_parse_failure(err)}") from err


def _parse_failure(err: Exception) -> str:
    found = re.search(r"Failed to parse string: '(.*?)' as a scalar", str(err))
    return repr(found.group(1)) if found else str(err)


def _to_timestamp(value: Value, pattern: Value | None = None) -> Value:
    kind = family(value.type)
    if kind == "string" or kind == "binary":
        if pattern is None:
            return parse_timestamps(value)
        return by_value(string(pattern), lambda p: parse_timestamps(value, p))
    if kind == "null":
        return cast(value, TIMESTAMP_TYPE)
    if kind == "number":  # epoch seconds
        micros = pc.round(pc.multiply(floating(value), 1_000_000.0))
        return pc.cast(pc.cast(micros, pa.int64()), TIMESTAMP_TYPE)
    if kind == "temporal" and not pa.types.is_time(value.type):
        return cast(value, TIMESTAMP_TYPE)
    raise ArgumentError(f"cannot read a timestamp from a {type_name(value.type)} value")


def _to_date(value: Value, pattern: Value | None = None) -> Value:
    kind = family(value.type)
    if kind == "number":  # epoch milliseconds
        days = pc.floor(pc.divide(floating(value), 86_400_000.0))
        return pc.cast(pc.cast(days, pa.int32()), pa.date32())
    if kind == "temporal" and pa.types.is_date(value.type):
        return cast(value, pa.date32())
    return pc.cast(_to_timestamp(value, pattern), pa.date32())


def read_time(value: Value) -> Value:
    """``HH:mm[:ss[.f]]`` strings as TIME (time64[us])."""
    text = pc.binary_join_element_wise("1970-01-01T", string(value), "")
    return pc.cast(parse_timestamps(text), pa.time64("us"))


def _read_temporal(value: Value, dtype: pa.DataType) -> Value:
    """A string compared with a date or time, read as one."""
    if pa.types.is_time(dtype):
        return cast(read_time(value), dtype)
    if pa.types.is_date(dtype):
        return cast(_to_date(value), dtype)
    return cast(parse_timestamps(value), dtype)


_TRUNC_UNITS = {
    "year": "year",
    "quarter": "quarter",
    "month": "month",
    "week": "week",
    "day": "day",
    "hour": "hour",
    "minute": "minute",
    "second": "second",
    "millisecond": "millisecond",
}


def _unit(value: Any, units: dict[str, Any], function: str) -> Any:
    name = str(value).strip().lower()
    name = name[:-1] if name.endswith("s") and name[:-1] in units else name
    if name not in units:
        raise ArgumentError(
            f"{function} has no unit {value!r}; use one of " + ", ".join(sorted(units))
        )
    return units[name]


def _temporal(value: Value, function: str) -> Value:
    kind = family(value.type)
    if kind == "null":
        return cast(value, TIMESTAMP_TYPE)
    if kind != "temporal":
        raise ArgumentError(
            f"{function} needs a date or time, got {type_name(value.type)}; "
            "convert strings with to_timestamp(...) or to_date(...)"
        )
    return value


def _date_trunc(unit: Value, value: Value) -> Value:
    value = _temporal(value, "date_trunc")

    def trunc(u: Any) -> Value:
        if u is None:
            return _nulls_like(value, value.type)
        arrow_unit = _unit(u, _TRUNC_UNITS, "date_trunc")
        return pc.floor_temporal(value, unit=arrow_unit, week_starts_monday=True)

    return by_value(string(unit), trunc)


def _epoch_seconds(t: Value) -> Value:
    micros = pc.cast(cast(t, TIMESTAMP_TYPE), pa.int64())
    return pc.floor(pc.divide(pc.cast(micros, pa.float64()), 1_000_000.0))


_EXTRACT_UNITS: dict[str, Callable[[Value], Value]] = {
    "year": pc.year,
    "quarter": pc.quarter,
    "month": pc.month,
    "week": pc.iso_week,
    "day": pc.day,
    "dayofyear": pc.day_of_year,
    "doy": pc.day_of_year,
    "dayofweek": lambda t: pc.day_of_week(t, count_from_zero=False, week_start=1),
    "dow": lambda t: pc.day_of_week(t, count_from_zero=False, week_start=1),
    "hour": pc.hour,
    "minute": pc.minute,
    "second": pc.second,
    "millisecond": pc.millisecond,
    "epoch": _epoch_seconds,
}


def _extract(unit: Value, value: Value) -> Value:
    value = _temporal(value, "extract")
    if pa.types.is_date(value.type):
        value = cast(value, TIMESTAMP_TYPE)  # Arrow's hour/minute kernels need a time of day

    def field_of(u: Any) -> Value:
        if u is None:
            return _nulls_like(value, pa.int64())
        part = _unit(u, _EXTRACT_UNITS, "extract")
        return pc.cast(part(value), pa.int64())

    return by_value(string(unit), field_of)


# ---------------------------------------------------------------- casts


_INTEGER_TARGETS = {MinorType.INT: pa.int32(), MinorType.BIGINT: pa.int64()}
_FLOAT_TARGETS = {MinorType.FLOAT4: pa.float32(), MinorType.FLOAT8: pa.float64()}


def cast_value(value: Value, target: MinorType, decimal: MajorType | None = None) -> Value:
    """``cast(value as target)``: strings read as numbers, booleans, dates; numbers round half away
    from zero into integers (as Drill's casts and SQL's); a string that is not a number is an
    error naming it.

    >>> import pyarrow as pa
    >>> cast_value(pa.array(["12", None]), MinorType.BIGINT).to_pylist()
    [12, None]
    >>> cast_value(pa.array([2.7, -2.5, 2.49]), MinorType.INT).to_pylist()
    [3, -3, 2]
    >>> import datetime
    >>> cast_value(pa.array([datetime.date(1970, 1, 3)]), MinorType.BIGINT).to_pylist()
    [2]
    """
    kind = family(value.type)
    if kind in ("map", "list", "other"):
        raise ArgumentError(f"cannot cast a {type_name(value.type)} value to {target}")
    if target == MinorType.DECIMAL:
        return _to_decimal(value, kind, decimal or MajorType.decimal(38, 0))
    if target in _INTEGER_TARGETS:
        return _to_integer(value, kind, _INTEGER_TARGETS[target])
    if target in _FLOAT_TARGETS:
        return (
            _parse(value, _FLOAT_TARGETS[target])
            if kind != "bool"
            else pc.cast(value, _FLOAT_TARGETS[target])
        )
    if target == MinorType.VARCHAR:
        return to_text(value)
    if target == MinorType.VARBINARY:
        return cast(to_text(value), pa.binary())
    if target == MinorType.BIT:
        return _to_boolean(value, kind)
    if target == MinorType.DATE:
        return _to_date(value)
    if target == MinorType.TIMESTAMP:
        return _to_timestamp(value)
    if target == MinorType.TIME:
        if kind in ("string", "binary"):
            return read_time(value)
        if kind == "temporal" and not pa.types.is_date(value.type):
            return pc.cast(cast(value, TIMESTAMP_TYPE), pa.time64("us"))
        return _strict_cast(value, pa.time64("us"), target)
    if target == MinorType.NULL:
        return _nulls_like(value, pa.null())
    raise ArgumentError(f"cannot cast a {type_name(value.type)} value to {target}")


def _to_decimal(value: Value, kind: str, target: MajorType) -> Value:
    """``cast(value as DECIMAL(p, s))``: rounded half away from zero to the scale; a value with
    more integer digits than ``p - s`` is an error, as is text that is not a number."""
    what = f"cast to {target}"
    if kind == "null":
        return _nulls_like(value, to_arrow(target))
    if kind == "bool":
        value = pc.cast(value, pa.int64())
    elif kind in ("string", "binary"):
        value = _parse_decimals(string(value), target.scale or 0)
    elif kind == "number" and pa.types.is_floating(value.type):
        finite = pc.is_finite(value)
        if not pc.all(finite if isinstance(finite, pa.Array) else pa.array([finite])).as_py():
            raise ArgumentError(f"cannot cast NaN or infinity to {target}")
        rounded = pc.round(value, ndigits=target.scale or 0, round_mode="half_towards_infinity")
        value = _strict_cast(rounded, pa.decimal256(76, target.scale or 0), target)
    elif kind != "number":
        raise ArgumentError(f"cannot cast a {type_name(value.type)} value to {target}")
    return _fit(decimals.as_decimal(value), target, what)


def _parse_decimals(text: Value, scale: int) -> Value:
    """Numbers written as text, exactly, rounded half away from zero to ``scale`` digits."""
    import decimal

    quantum = decimal.Decimal(1).scaleb(-scale)
    scalar = isinstance(text, pa.Scalar)
    out = []
    for item in [text.as_py()] if scalar else text.to_pylist():
        if item is None:
            out.append(None)
            continue
        try:
            number = decimal.Decimal(item.strip())
        except decimal.InvalidOperation:
            number = None
        if number is None or not number.is_finite():
            raise ArgumentError(f"cannot read {item!r} as a DECIMAL")
        try:
            out.append(number.quantize(quantum, rounding=decimal.ROUND_HALF_UP))
        except decimal.InvalidOperation as err:
            raise ArgumentError(f"cannot read {item!r} as a DECIMAL: too many digits") from err
    array = pa.array(out, pa.decimal256(76, scale))
    return array[0] if scalar else array


def _to_integer(value: Value, kind: str, dtype: pa.DataType) -> Value:
    if kind == "temporal":
        # As Spark's executor (unix_date, unix_micros): a date counts days since 1970-01-01,
        # a timestamp or time microseconds.
        if pa.types.is_date(value.type):
            days = pc.cast(pc.cast(value, pa.date32()), pa.int32())
            return _strict_cast(days, dtype, str(dtype))
        if pa.types.is_time(value.type):
            micros = pc.cast(pc.cast(value, pa.time64("us")), pa.int64())
        else:
            micros = pc.cast(cast(value, TIMESTAMP_TYPE), pa.int64())
        return _strict_cast(micros, dtype, str(dtype))
    if kind == "number" and not _is_integer(value.type):
        value = pc.round(value, ndigits=0, round_mode="half_towards_infinity")
    if kind in ("string", "binary"):
        return _parse(value, dtype)
    return _strict_cast(value, dtype, str(dtype))


def _parse(value: Value, dtype: pa.DataType) -> Value:
    try:
        return pc.cast(value, dtype)
    except pa.ArrowInvalid as err:
        raise ArgumentError(f"cannot read {_parse_failure(err)} as {type_name(dtype)}") from err


def _strict_cast(value: Value, dtype: pa.DataType, target: Any) -> Value:
    try:
        return cast(value, dtype)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        raise ArgumentError(f"cannot cast {type_name(value.type)} to {target}: {err}") from err


def _to_boolean(value: Value, kind: str) -> Value:
    if kind == "number":
        return pc.not_equal(value, 0)
    if kind in ("string", "binary"):
        return _parse(pc.utf8_lower(pc.utf8_trim_whitespace(string(value))), pa.bool_())
    return _strict_cast(value, pa.bool_(), MinorType.BIT)


def _avg_ratio(total: Value, count: Value, like: Value) -> Value:
    """``total / count`` typed as ``avg(like)``: for a DECIMAL ``like`` the exact quotient rounded
    half away from zero to avg's DECIMAL, else a FLOAT8; null where ``count`` is 0."""
    total, count, like = number(total), number(count), number(like)
    counted = pc.if_else(pc.equal(count, 0), pa.scalar(None, count.type), count)
    if pa.types.is_decimal(like.type) and not pa.types.is_floating(total.type):
        target = coercion.avg_type(from_arrow(like.type))
        try:
            return decimals.quotient(total, counted, target)
        except decimals.DecimalError as err:
            raise ArgumentError(str(err)) from err
    return pc.divide(floating(total), floating(counted))


# ---------------------------------------------------------------- the table

ARROW_FUNCTIONS: dict[str, ArrowFunction] = {
    "or": _or,
    "and": _and,
    "not": _not,
    "equal": _comparison(pc.equal),
    "not_equal": _comparison(pc.not_equal),
    "less_than": _comparison(pc.less),
    "less_than_or_equal": _comparison(pc.less_equal),
    "greater_than": _comparison(pc.greater),
    "greater_than_or_equal": _comparison(pc.greater_equal),
    "add": _arithmetic("add", pc.add_checked),
    "subtract": _arithmetic("subtract", pc.subtract_checked),
    "multiply": _arithmetic("multiply", pc.multiply_checked),
    "divide": _divide,
    "modulo": _modulo,
    "power": _power,
    "negate": _negate,
    "isnull": pc.is_null,
    "isnotnull": pc.is_valid,
    "coalesce": _coalesce,
    "greatest": _greatest,
    "least": _least,
    "abs": _abs,
    "ceil": _ceil,
    "floor": _floor,
    "round": _round,
    "sqrt": _sqrt,
    "avg_ratio": _avg_ratio,
    "lower": _lower,
    "upper": _upper,
    "length": _length,
    "substr": _substr,
    "concat": _concat,
    "concatoperator": _concat_operator,
    "trim": _trim,
    "like": _like,
    "regex_like": _regex_like,
    "to_date": _to_date,
    "to_timestamp": _to_timestamp,
    "date_trunc": _date_trunc,
    "extract": _extract,
}
"""Every scalar registry function by canonical name -> its Arrow implementation."""
