"""The expression tree: literals, field references, calls, conditionals and casts.

Nodes are frozen dataclasses. Every operator is a :class:`Call` of a registry function (``a + 1`` is
``Call("add", ...)``). The source position is kept for messages but is not part of equality, so two
trees are equal when their structure is.

>>> Call("add", (FieldRef(("a", "b", 0)), Literal.of(1))) == Call("add", (FieldRef(("a", "b", 0)), Literal.of(1)))
True
>>> str(FieldRef(("a", "odd name", 0, "c")))
'a.`odd name`[0].c'
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal

from engine.types import (
    BIGINT,
    BIT,
    DEFAULT_DECIMAL,
    FLOAT8,
    NULL,
    VARCHAR,
    DataMode,
    MajorType,
    MinorType,
)

KEYWORDS = frozenset(
    {"and", "or", "not", "if", "then", "else", "elseif", "end", "case", "when", "true", "false"}
    | {"null", "cast", "as"}
)
"""Words that are not field names unless backquoted (case-insensitive)."""

_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")


@dataclass(frozen=True)
class Position:
    """Where a node starts in the expression text; ``line`` and ``column`` are 1-based."""

    offset: int
    line: int
    column: int

    def __str__(self) -> str:
        return (
            f"column {self.column}" if self.line == 1 else f"line {self.line}, column {self.column}"
        )


class Expr:
    """Base of every expression node. ``str(expr)`` is the printed expression."""

    __slots__ = ()
    position: Position | None

    def children(self) -> tuple[Expr, ...]:
        return ()

    def __str__(self) -> str:
        from engine.expr.printer import to_string

        return to_string(self)


@dataclass(frozen=True)
class Literal(Expr):
    """A constant. ``Literal.of`` picks the type the parser would give the value.

    >>> Literal.of(1.0).type.minor, Literal.of(None).type.minor
    (<MinorType.FLOAT8: 'FLOAT8'>, <MinorType.NULL: 'NULL'>)
    """

    value: bool | int | float | Decimal | str | None
    type: MajorType
    position: Position | None = field(default=None, compare=False, repr=False)

    @staticmethod
    def of(
        value: bool | int | float | Decimal | str | None, position: Position | None = None
    ) -> Literal:
        required = DataMode.REQUIRED
        if isinstance(value, Decimal):
            return Literal(value, decimal_type_of(value).with_mode(required), position)
        if value is None:
            return Literal(None, NULL, position)
        if isinstance(value, bool):
            return Literal(value, BIT.with_mode(required), position)
        if isinstance(value, int):
            return Literal(value, BIGINT.with_mode(required), position)
        if isinstance(value, float):
            return Literal(value, FLOAT8.with_mode(required), position)
        if isinstance(value, str):
            return Literal(value, VARCHAR.with_mode(required), position)
        raise TypeError(f"no literal for a {type(value).__name__}: {value!r}")


@dataclass(frozen=True)
class FieldRef(Expr):
    """A path into the record: names for map members, integers for list elements.

    >>> FieldRef.of("a", "b", 0, "c").path
    ('a', 'b', 0, 'c')
    """

    path: tuple[str | int, ...]
    position: Position | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", tuple(self.path))
        if not self.path or not isinstance(self.path[0], str):
            raise ValueError(f"a field path starts with a name, got {self.path!r}")
        for segment in self.path:
            if isinstance(segment, bool) or not isinstance(segment, str | int):
                raise ValueError(f"a field path segment is a name or an index, got {segment!r}")
            if isinstance(segment, int) and segment < 0:
                raise ValueError(f"a list index is not negative, got {segment}")

    @staticmethod
    def of(*path: str | int) -> FieldRef:
        return FieldRef(tuple(path))

    @property
    def root(self) -> str:
        return str(self.path[0])

    def __str__(self) -> str:
        parts = []
        for i, segment in enumerate(self.path):
            if isinstance(segment, int):
                parts.append(f"[{segment}]")
            else:
                parts.append(("." if i else "") + quote_name(segment))
        return "".join(parts)


@dataclass(frozen=True)
class Call(Expr):
    """A call of a registry function; operators are calls too (``a < b`` is ``less_than``)."""

    name: str
    args: tuple[Expr, ...]
    position: Position | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))

    def children(self) -> tuple[Expr, ...]:
        return self.args


@dataclass(frozen=True)
class IfElse(Expr):
    """``if c then a elseif c2 then b else d end`` and ``case when ... end``: the first true branch.

    >>> IfElse(((FieldRef.of("c"), Literal.of(1)),), Literal.of(2)).otherwise.value
    2
    """

    branches: tuple[tuple[Expr, Expr], ...]
    otherwise: Expr
    position: Position | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "branches", tuple((c, v) for c, v in self.branches))
        if not self.branches:
            raise ValueError("an if/case needs at least one branch")

    def children(self) -> tuple[Expr, ...]:
        return (*(e for branch in self.branches for e in branch), self.otherwise)


@dataclass(frozen=True)
class Cast(Expr):
    """``cast(x as BIGINT)`` or ``castBIGINT(x)``."""

    expr: Expr
    type: MajorType
    position: Position | None = field(default=None, compare=False, repr=False)

    def children(self) -> tuple[Expr, ...]:
        return (self.expr,)


def walk(expr: Expr) -> Iterator[Expr]:
    """Every node, parents before children, left to right.

    >>> [type(e).__name__ for e in walk(Call("add", (FieldRef.of("a"), Literal.of(1))))]
    ['Call', 'FieldRef', 'Literal']
    """
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children()))


def common_path_prefix(paths: list[tuple[str | int, ...]]) -> tuple[str | int, ...]:
    """The longest path all of ``paths`` start with.

    >>> common_path_prefix([("a", 0, "x"), ("a", 0, "y")]), common_path_prefix([])
    (('a', 0), ())
    """
    common = paths[0] if paths else ()
    for path in paths[1:]:
        size = 0
        while size < min(len(common), len(path)) and common[size] == path[size]:
            size += 1
        common = common[:size]
    return common


def field_refs(expr: Expr) -> list[FieldRef]:
    """Every field reference, in order of appearance (repeats kept).

    >>> [str(f) for f in field_refs(Call("add", (FieldRef.of("a", "b"), FieldRef.of("c"))))]
    ['a.b', 'c']
    """
    return [node for node in walk(expr) if isinstance(node, FieldRef)]


def is_plain_name(name: str) -> bool:
    """Whether ``name`` can be written without backquotes."""
    return bool(_IDENTIFIER.match(name)) and name.lower() not in KEYWORDS


def quote_name(name: str) -> str:
    """``name`` as written in an expression: plain, or backquoted with ``\\`` escapes."""
    if is_plain_name(name):
        return name
    escaped = name.replace("\\", "\\\\").replace("`", "\\`")
    return f"`{escaped}`"


def cast_type(
    minor: MinorType, precision: int | None = None, scale: int | None = None
) -> MajorType:
    """The type a ``cast`` node carries: the mode comes from the input at inference time. A
    DECIMAL without a precision is Drill's DECIMAL(38, 0); without a scale, scale 0."""
    if minor == MinorType.DECIMAL:
        return MajorType.decimal(
            precision if precision is not None else DEFAULT_DECIMAL[0],
            scale if scale is not None else DEFAULT_DECIMAL[1],
        )
    return MajorType(minor, DataMode.OPTIONAL)


def decimal_type_of(value: Decimal) -> MajorType:
    """The DECIMAL type of an exact number as written: its digits and the digits after the point.

    >>> str(decimal_type_of(Decimal("0.06"))), str(decimal_type_of(Decimal("-123.4")))
    ('DECIMAL(2, 2)', 'DECIMAL(4, 1)')
    """
    _sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int), "not a finite number"
    scale = max(-exponent, 0)
    precision = max(len(digits) + max(exponent, 0), scale, 1)
    return MajorType.decimal(precision, scale)
