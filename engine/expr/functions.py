"""The function registry: the one place a function (or operator) is added.

Every operator of the grammar is a registry function with an :class:`Operator` entry that gives its
symbols and precedence; the parser and the printer read their operator tables from here. A function
has kinds (scalar, aggregate, running), an arity and a return type computed from argument types.

>>> lookup_function("countDistinct").name
'count_distinct'
>>> lookup_function("+") is None  # symbols are not names; `a + b` parses to Call("add")
True
>>> str(lookup_function("add").return_type([BIGINT, FLOAT8]))
'FLOAT8'
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.expr import coercion
from engine.types import (
    BIGINT,
    BIT,
    DATE,
    FLOAT8,
    TIMESTAMP,
    VARCHAR,
    DataMode,
    MajorType,
    MinorType,
    merge_modes,
)


class FunctionKind(enum.StrEnum):
    """Where a function may appear: any expression, a collapsing aggregate, a running aggregate."""

    SCALAR = "scalar"
    AGGREGATE = "aggregate"
    RUNNING = "running"


class Associativity(enum.StrEnum):
    LEFT = "left"
    RIGHT = "right"
    NONE = "none"  # `a < b < c` is a syntax error


# Binding strength, lowest first. UNARY binds tighter than every binary operator (`-a ^ 2` is `(-a) ^ 2`).
PREC_OR = 1
PREC_AND = 2
PREC_EQUALITY = 3
PREC_COMPARISON = 4
PREC_ADDITIVE = 5
PREC_MULTIPLICATIVE = 6
PREC_POWER = 7
PREC_UNARY = 8


@dataclass(frozen=True)
class Operator:
    """The operator syntax of a function: ``symbols[0]`` is what the printer writes."""

    symbols: tuple[str, ...]
    precedence: int
    arity: int = 2
    associativity: Associativity = Associativity.LEFT


class ArgumentTypeMismatch(Exception):
    """Raised by a return-type rule for argument types that can never work (``'a' + 1``).

    Type inference turns it into an ``ExpressionTypeError`` that names the function and the types.
    """


ReturnType = Callable[[list[MajorType]], MajorType]


@dataclass(frozen=True)
class FunctionSpec:
    """One function: its name, kinds, arity, return type rule, aliases and operator syntax.

    >>> spec = lookup_function("substr")
    >>> (spec.min_args, spec.max_args, FunctionKind.SCALAR in spec.kinds)
    (2, 3, True)
    """

    name: str
    kinds: frozenset[FunctionKind]
    min_args: int
    max_args: int | None  # None: variadic
    return_type: ReturnType
    aliases: tuple[str, ...] = ()
    operator: Operator | None = None
    doc: str = ""

    @property
    def symbol(self) -> str | None:
        return self.operator.symbols[0] if self.operator else None

    @property
    def precedence(self) -> int | None:
        return self.operator.precedence if self.operator else None

    @property
    def is_scalar(self) -> bool:
        return FunctionKind.SCALAR in self.kinds

    def accepts(self, count: int) -> bool:
        """Whether ``count`` arguments is a valid arity."""
        return count >= self.min_args and (self.max_args is None or count <= self.max_args)

    def arity_text(self) -> str:
        """The arity in words: ``1 argument``, ``2 to 3 arguments``, ``at least 1 argument``."""
        lo, hi = self.min_args, self.max_args
        if hi is None:
            return f"at least {lo} argument" + ("s" if lo != 1 else "")
        if lo == hi:
            return f"{lo} argument" + ("s" if lo != 1 else "")
        return f"{lo} to {hi} arguments"


# ---------------------------------------------------------------- argument families

_INTEGRAL = frozenset({MinorType.INT, MinorType.BIGINT})
_STRINGS = frozenset({MinorType.VARCHAR, MinorType.VARBINARY})
_TEMPORAL = frozenset({MinorType.DATE, MinorType.TIME, MinorType.TIMESTAMP})
_COMPLEX = frozenset({MinorType.MAP, MinorType.LIST})


def _late(t: MajorType) -> bool:
    """A type not known until data is read (an unknown field or a null literal)."""
    return t.minor == MinorType.NULL


def _mode(args: list[MajorType]) -> DataMode:
    return merge_modes(*(a.mode for a in args)) if args else DataMode.REQUIRED


def _expect(t: MajorType, ok: bool, what: str) -> None:
    if not (ok or _late(t)):
        raise ArgumentTypeMismatch(f"expected {what}, got {t}")


def _numeric(t: MajorType) -> None:
    _expect(t, t.is_numeric, "a number")


def _string(t: MajorType) -> None:
    _expect(t, t.minor in _STRINGS and t.mode != DataMode.REPEATED, "a string")


def _boolean(t: MajorType) -> None:
    _expect(t, t.minor == MinorType.BIT and t.mode != DataMode.REPEATED, "a boolean (BIT)")


def _scalar_value(t: MajorType) -> None:
    _expect(t, t.minor not in _COMPLEX and t.mode != DataMode.REPEATED, "a scalar value")


def _family(t: MajorType) -> str:
    if t.minor in _STRINGS or t.minor in _TEMPORAL:
        return "text-or-time"  # strings compare with dates and times by implicit cast
    if t.is_numeric:
        return "number"
    return t.minor.value


def _comparable(args: list[MajorType]) -> None:
    known = [a for a in args if not _late(a)]
    for a in known:
        if a.mode == DataMode.REPEATED or a.minor in _COMPLEX:
            raise ArgumentTypeMismatch(f"cannot compare {a}")
    if len({_family(a) for a in known}) > 1:
        raise ArgumentTypeMismatch("cannot compare " + " with ".join(str(a) for a in known))


def common_type(args: list[MajorType]) -> MajorType | None:
    """The common type of values from several branches (:func:`engine.expr.coercion.common_type`);
    None when only late types are seen."""
    try:
        return coercion.common_type(args)
    except coercion.CoercionError as err:
        raise ArgumentTypeMismatch(str(err)) from None


# ---------------------------------------------------------------- return-type rules


def _of(minor: MinorType, mode: DataMode) -> MajorType:
    return MajorType(minor, mode)


def _arithmetic(operation: str) -> ReturnType:
    """``+ - * / %``: :func:`engine.expr.coercion.arithmetic_type` (integers give BIGINT, ``/``
    of integers FLOAT8, any float FLOAT8, a DECIMAL a DECIMAL)."""

    def rule(args: list[MajorType]) -> MajorType:
        for a in args:
            _numeric(a)
        if any(_late(a) for a in args):
            return (
                FLOAT8.with_mode(_mode(args))
                if operation == "divide"
                else _of(MinorType.NULL, DataMode.OPTIONAL)
            )
        left, right = args
        return coercion.arithmetic_type(operation, left, right).with_mode(_mode(args))

    return rule


def _floating(args: list[MajorType]) -> MajorType:
    """``^ sqrt``: always FLOAT8."""
    for a in args:
        _numeric(a)
    return _of(MinorType.FLOAT8, _mode(args))


def _same_number(args: list[MajorType]) -> MajorType:
    """``negate abs``: the type of the argument."""
    for a in args:
        _numeric(a)
    return args[0].with_mode(_mode(args))


def _whole_number(args: list[MajorType]) -> MajorType:
    """``ceil floor``: the type of the argument; a DECIMAL's becomes DECIMAL(p - s + 1, 0)."""
    for a in args:
        _numeric(a)
    if coercion.is_decimal(args[0]):
        return coercion.rounded_type(args[0], 0).with_mode(_mode(args))
    return args[0].with_mode(_mode(args))


def _round(args: list[MajorType]) -> MajorType:
    """``round``: the type of the first argument; a DECIMAL keeps its scale (the digits past the
    ones kept are zeros) with one more digit for the carry."""
    for a in args:
        _numeric(a)
    if coercion.is_decimal(args[0]):
        return coercion.round_type(args[0]).with_mode(_mode(args))
    return args[0].with_mode(_mode(args))


def _comparison(args: list[MajorType]) -> MajorType:
    _comparable(args)
    return _of(MinorType.BIT, _mode(args))


def _logic(args: list[MajorType]) -> MajorType:
    for a in args:
        _boolean(a)
    return _of(MinorType.BIT, _mode(args))


def _never_null_bit(args: list[MajorType]) -> MajorType:
    return BIT.with_mode(DataMode.REQUIRED)


def _coalesce(args: list[MajorType]) -> MajorType:
    widest = common_type(args)
    if widest is None:
        return MajorType(MinorType.NULL)
    required = any(a.mode == DataMode.REQUIRED for a in args)
    return widest.with_mode(DataMode.REQUIRED if required else DataMode.OPTIONAL)


def _string_result(args: list[MajorType]) -> MajorType:
    _string(args[0])
    for a in args[1:]:
        _scalar_value(a)
    return _of(MinorType.VARCHAR, _mode(args))


def _substr(args: list[MajorType]) -> MajorType:
    _string(args[0])
    for a in args[1:]:
        _numeric(a)
    return _of(MinorType.VARCHAR, _mode(args))


def _length(args: list[MajorType]) -> MajorType:
    _string(args[0])
    return _of(MinorType.BIGINT, _mode(args))


def _concat(args: list[MajorType]) -> MajorType:
    for a in args:
        _scalar_value(a)
    return VARCHAR.with_mode(DataMode.REQUIRED)  # Drill's concat reads a null as ''


def _concat_operator(args: list[MajorType]) -> MajorType:
    for a in args:
        _scalar_value(a)
    return _of(MinorType.VARCHAR, _mode(args))


def _matches(args: list[MajorType]) -> MajorType:
    for a in args:
        _string(a)
    return _of(MinorType.BIT, _mode(args))


def _to_date(args: list[MajorType]) -> MajorType:
    for a in args:
        _scalar_value(a)
    return DATE.with_mode(_mode(args))


def _to_timestamp(args: list[MajorType]) -> MajorType:
    for a in args:
        _scalar_value(a)
    return TIMESTAMP.with_mode(_mode(args))


def _date_trunc(args: list[MajorType]) -> MajorType:
    unit, value = args
    _string(unit)
    _expect(value, value.minor in _TEMPORAL and value.mode != DataMode.REPEATED, "a date or time")
    minor = value.minor if value.minor in _TEMPORAL else MinorType.TIMESTAMP
    return _of(minor, _mode(args))


def _extract(args: list[MajorType]) -> MajorType:
    unit, value = args
    _string(unit)
    _expect(value, value.minor in _TEMPORAL and value.mode != DataMode.REPEATED, "a date or time")
    return BIGINT.with_mode(_mode(args))


def _count(args: list[MajorType]) -> MajorType:
    return BIGINT.with_mode(DataMode.REQUIRED)


def _sum(args: list[MajorType]) -> MajorType:
    (a,) = args
    _numeric(a)
    if _late(a):
        return MajorType(MinorType.NULL)
    return coercion.sum_type(a).with_mode(_mode(args))


def _avg(args: list[MajorType]) -> MajorType:
    _numeric(args[0])
    if _late(args[0]):
        return FLOAT8.with_mode(_mode(args))
    return coercion.avg_type(args[0]).with_mode(_mode(args))


def _avg_ratio(args: list[MajorType]) -> MajorType:
    """``avg_ratio(total, count, x)``: the type ``avg(x)`` has, always OPTIONAL (a zero count
    gives null)."""
    for a in args:
        _numeric(a)
    return _avg([args[2]]).with_mode(DataMode.OPTIONAL)


def _min_max(args: list[MajorType]) -> MajorType:
    (a,) = args
    _scalar_value(a)
    return a


# ---------------------------------------------------------------- the registry

_S = frozenset({FunctionKind.SCALAR})
_A = frozenset({FunctionKind.AGGREGATE})
_R = frozenset({FunctionKind.RUNNING})
_AR = frozenset({FunctionKind.AGGREGATE, FunctionKind.RUNNING})


def _op(*symbols: str, precedence: int, arity: int = 2, assoc: Associativity = Associativity.LEFT):
    return Operator(symbols, precedence, arity, assoc)


_NONE = Associativity.NONE
_SPECS: list[FunctionSpec] = [
    # logic
    FunctionSpec(
        "or", _S, 2, 2, _logic, operator=_op("||", "or", precedence=PREC_OR), doc="a || b"
    ),
    FunctionSpec(
        "and", _S, 2, 2, _logic, operator=_op("&&", "and", precedence=PREC_AND), doc="a && b"
    ),
    FunctionSpec(
        "not", _S, 1, 1, _logic, operator=_op("!", "not", precedence=PREC_UNARY, arity=1), doc="!a"
    ),
    # equality and comparison
    FunctionSpec(
        "equal",
        _S,
        2,
        2,
        _comparison,
        operator=_op("==", "=", precedence=PREC_EQUALITY),
        doc="a == b",
    ),
    FunctionSpec(
        "not_equal",
        _S,
        2,
        2,
        _comparison,
        operator=_op("!=", "<>", precedence=PREC_EQUALITY),
        doc="a != b",
    ),
    FunctionSpec(
        "less_than",
        _S,
        2,
        2,
        _comparison,
        operator=_op("<", precedence=PREC_COMPARISON, assoc=_NONE),
        doc="a < b",
    ),
    FunctionSpec(
        "less_than_or_equal",
        _S,
        2,
        2,
        _comparison,
        operator=_op("<=", precedence=PREC_COMPARISON, assoc=_NONE),
        doc="a <= b",
    ),
    FunctionSpec(
        "greater_than",
        _S,
        2,
        2,
        _comparison,
        operator=_op(">", precedence=PREC_COMPARISON, assoc=_NONE),
        doc="a > b",
    ),
    FunctionSpec(
        "greater_than_or_equal",
        _S,
        2,
        2,
        _comparison,
        operator=_op(">=", precedence=PREC_COMPARISON, assoc=_NONE),
        doc="a >= b",
    ),
    # arithmetic
    FunctionSpec(
        "add",
        _S,
        2,
        2,
        _arithmetic("add"),
        operator=_op("+", precedence=PREC_ADDITIVE),
        doc="a + b",
    ),
    FunctionSpec(
        "subtract",
        _S,
        2,
        2,
        _arithmetic("subtract"),
        operator=_op("-", precedence=PREC_ADDITIVE),
        doc="a - b",
    ),
    FunctionSpec(
        "multiply",
        _S,
        2,
        2,
        _arithmetic("multiply"),
        operator=_op("*", precedence=PREC_MULTIPLICATIVE),
        doc="a * b",
    ),
    FunctionSpec(
        "divide",
        _S,
        2,
        2,
        _arithmetic("divide"),
        operator=_op("/", precedence=PREC_MULTIPLICATIVE),
        doc="a / b: FLOAT8, DECIMAL for decimals and integers with a decimal",
    ),
    FunctionSpec(
        "modulo",
        _S,
        2,
        2,
        _arithmetic("modulo"),
        aliases=("mod",),
        operator=_op("%", precedence=PREC_MULTIPLICATIVE),
        doc="a % b, also mod(a, b)",
    ),
    FunctionSpec(
        "power",
        _S,
        2,
        2,
        _floating,
        aliases=("pow",),
        operator=_op("^", precedence=PREC_POWER, assoc=Associativity.RIGHT),
        doc="a ^ b (right-associative), also pow(a, b)",
    ),
    FunctionSpec(
        "negate",
        _S,
        1,
        1,
        _same_number,
        operator=_op("-", precedence=PREC_UNARY, arity=1),
        doc="-a",
    ),
    # nulls
    FunctionSpec("isnull", _S, 1, 1, _never_null_bit, aliases=("is_null",), doc="isnull(a)"),
    FunctionSpec(
        "isnotnull", _S, 1, 1, _never_null_bit, aliases=("is_not_null",), doc="isnotnull(a)"
    ),
    FunctionSpec("coalesce", _S, 1, None, _coalesce, doc="coalesce(a, b, ...): the first non-null"),
    FunctionSpec(
        "greatest", _S, 2, None, _coalesce, doc="greatest(a, b, ...): the largest, nulls left out"
    ),
    FunctionSpec(
        "least", _S, 2, None, _coalesce, doc="least(a, b, ...): the smallest, nulls left out"
    ),
    # math
    FunctionSpec("abs", _S, 1, 1, _same_number, doc="abs(x)"),
    FunctionSpec("ceil", _S, 1, 1, _whole_number, aliases=("ceiling",), doc="ceil(x)"),
    FunctionSpec("floor", _S, 1, 1, _whole_number, doc="floor(x)"),
    FunctionSpec("round", _S, 1, 2, _round, doc="round(x[, digits])"),
    FunctionSpec("sqrt", _S, 1, 1, _floating, doc="sqrt(x), FLOAT8"),
    FunctionSpec(
        "avg_ratio",
        _S,
        3,
        3,
        _avg_ratio,
        doc="avg_ratio(total, count, x): total / count as avg(x) types it (DECIMAL(p + 4, s + 4) "
        "for a DECIMAL x, else FLOAT8); null where count is 0",
    ),
    # strings
    FunctionSpec("lower", _S, 1, 1, _string_result, aliases=("lcase",), doc="lower(s)"),
    FunctionSpec("upper", _S, 1, 1, _string_result, aliases=("ucase",), doc="upper(s)"),
    FunctionSpec(
        "length", _S, 1, 1, _length, aliases=("char_length",), doc="length(s): characters"
    ),
    FunctionSpec(
        "substr",
        _S,
        2,
        3,
        _substr,
        aliases=("substring",),
        doc="substr(s, start[, length]), start is 1-based",
    ),
    FunctionSpec("concat", _S, 1, None, _concat, doc="concat(a, b, ...), nulls read as ''"),
    FunctionSpec(
        "concatoperator",
        _S,
        2,
        None,
        _concat_operator,
        doc="concatoperator(a, b, ...): SQL's a || b, null where any is null",
    ),
    FunctionSpec("trim", _S, 1, 1, _string_result, doc="trim(s): strip blanks at both ends"),
    FunctionSpec("like", _S, 2, 3, _matches, doc="like(s, pattern[, escape]), SQL % and _"),
    FunctionSpec(
        "regex_like",
        _S,
        2,
        2,
        _matches,
        aliases=("regexp_like", "regexp_matches"),
        doc="regex_like(s, regex): the regex matches somewhere in s",
    ),
    # dates and times
    FunctionSpec("to_date", _S, 1, 2, _to_date, doc="to_date(s[, format])"),
    FunctionSpec("to_timestamp", _S, 1, 2, _to_timestamp, doc="to_timestamp(s | epoch[, format])"),
    FunctionSpec("date_trunc", _S, 2, 2, _date_trunc, doc="date_trunc('day', t)"),
    FunctionSpec("extract", _S, 2, 2, _extract, doc="extract('year', t) -> BIGINT"),
    # aggregates (collapsingaggregate) and running aggregates (runningaggregate)
    FunctionSpec("count", _AR, 1, 1, _count, doc="count(x): non-null values; count(1): rows"),
    FunctionSpec(
        "sum", _AR, 1, 1, _sum, doc="sum(x): BIGINT for integers, DECIMAL(p + 10, s), else FLOAT8"
    ),
    FunctionSpec("min", _AR, 1, 1, _min_max, doc="min(x)"),
    FunctionSpec("max", _AR, 1, 1, _min_max, doc="max(x)"),
    FunctionSpec(
        "avg", _AR, 1, 1, _avg, aliases=("mean",), doc="avg(x): FLOAT8, DECIMAL(p + 4, s + 4)"
    ),
    FunctionSpec(
        "count_distinct",
        _A,
        1,
        1,
        _count,
        aliases=("countDistinct",),
        doc="count_distinct(x): distinct non-null values",
    ),
    FunctionSpec("row_number", _R, 0, 0, _count, doc="row_number(): 1-based row in the segment"),
]

FUNCTIONS: dict[str, FunctionSpec] = {spec.name: spec for spec in _SPECS}
"""Every function by its canonical name."""

_BY_NAME: dict[str, FunctionSpec] = {}
for _spec in _SPECS:
    for _name in (_spec.name, *_spec.aliases):
        if _name.lower() in _BY_NAME:
            raise RuntimeError(f"function name {_name!r} registered twice")
        _BY_NAME[_name.lower()] = _spec


def lookup_function(name: str) -> FunctionSpec | None:
    """The function called ``name`` (case-insensitive, aliases included), or None.

    >>> lookup_function("SUM").name, lookup_function("pow").name
    ('sum', 'power')
    """
    return _BY_NAME.get(name.lower())


def function_names() -> list[str]:
    """Every name a plan may call, canonical names and aliases, lower-cased and sorted."""
    return sorted(_BY_NAME)


@dataclass(frozen=True)
class OperatorEntry:
    """A symbol the parser reads, with the function it stands for."""

    function: str
    operator: Operator = field(repr=False)


def binary_operators() -> dict[str, OperatorEntry]:
    """Binary operator symbols (lower-case for word operators) -> function."""
    return _operators(2)


def unary_operators() -> dict[str, OperatorEntry]:
    """Prefix operator symbols -> function."""
    return _operators(1)


def _operators(arity: int) -> dict[str, OperatorEntry]:
    return {
        symbol: OperatorEntry(spec.name, spec.operator)
        for spec in _SPECS
        if spec.operator is not None and spec.operator.arity == arity
        for symbol in spec.operator.symbols
    }
