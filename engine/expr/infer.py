"""Type inference over Drill types with data modes.

Unknown things are not errors here: an unknown field, a member missing from a map or a call of an
unknown function has the late type (NULL minor, OPTIONAL), resolved when data is read; the checker
reports unknown functions. Definite mismatches (``'a' + 1``, ``not 5``) raise ExpressionTypeError.

>>> from engine.expr.parser import parse_expression
>>> from engine.types import BIGINT, FLOAT8, DataMode
>>> schema = {("a",): BIGINT.with_mode(DataMode.REQUIRED), ("b",): FLOAT8}
>>> str(infer_type(parse_expression("a * 2"), schema.get))
'BIGINT'
>>> infer_type(parse_expression("a * 2"), schema.get).mode
<DataMode.REQUIRED: 'REQUIRED'>
>>> str(infer_type(parse_expression("a + b"), schema.get))
'FLOAT8'
"""

from __future__ import annotations

from collections.abc import Callable

from engine.errors import ExpressionTypeError
from engine.expr.functions import ArgumentTypeMismatch, common_type, lookup_function
from engine.expr.nodes import Call, Cast, Expr, FieldRef, IfElse, Literal
from engine.types import NULL, DataMode, MajorType, MinorType

FieldLookup = Callable[[tuple[str | int, ...]], MajorType | None]
"""The type of a field path, or None when the schema does not know it."""

LATE = NULL
"""The type of a value not known until data is read."""

_COMPLEX = frozenset({MinorType.MAP, MinorType.LIST})


def infer_type(expr: Expr, lookup: FieldLookup) -> MajorType:
    """The Drill type of ``expr``, with ``lookup`` giving the types of field paths.

    ``lookup`` is asked for the full path first, then for shorter prefixes whose MAP and list types
    are descended: ``a.b[0]`` with ``a`` a MAP whose ``b`` is REPEATED BIGINT is BIGINT OPTIONAL.
    """
    if isinstance(expr, Literal):
        return expr.type
    if isinstance(expr, FieldRef):
        return _field_type(expr, lookup)
    if isinstance(expr, Cast):
        return _cast_type(expr, infer_type(expr.expr, lookup))
    if isinstance(expr, IfElse):
        return _if_type(expr, lookup)
    if isinstance(expr, Call):
        return _call_type(expr, lookup)
    raise TypeError(f"not an expression: {expr!r}")


def _call_type(call: Call, lookup: FieldLookup) -> MajorType:
    args = [infer_type(arg, lookup) for arg in call.args]
    spec = lookup_function(call.name)
    if spec is None or not spec.accepts(len(args)):
        return LATE  # check_expression reports these
    try:
        return spec.return_type(args)
    except ArgumentTypeMismatch as mismatch:
        label = f"'{spec.symbol}' ({spec.name})" if spec.symbol else f"'{spec.name}'"
        types = ", ".join(str(a) for a in args) or "no arguments"
        raise ExpressionTypeError(
            f"cannot apply {label} to ({types}): {mismatch}", position=call.position
        ) from None


def _if_type(expr: IfElse, lookup: FieldLookup) -> MajorType:
    for condition, _ in expr.branches:
        t = infer_type(condition, lookup)
        if t.minor not in (MinorType.BIT, MinorType.NULL) or t.mode == DataMode.REPEATED:
            raise ExpressionTypeError(
                f"the condition of an if/case must be a boolean (BIT), got {t}",
                position=condition.position,
            )
    values = [infer_type(value, lookup) for _, value in expr.branches]
    values.append(infer_type(expr.otherwise, lookup))
    try:
        common = common_type(values)
    except ArgumentTypeMismatch as mismatch:
        raise ExpressionTypeError(
            f"the branches of an if/case have {mismatch}", position=expr.position
        ) from None
    if common is None:
        return LATE
    required = all(v.mode == DataMode.REQUIRED for v in values)
    return common.with_mode(DataMode.REQUIRED if required else DataMode.OPTIONAL)


def _cast_type(cast: Cast, source: MajorType) -> MajorType:
    target = cast.type
    if (
        source.minor in _COMPLEX or source.mode == DataMode.REPEATED
    ) and target.minor != source.minor:
        raise ExpressionTypeError(f"cannot cast {source} to {target.minor}", position=cast.position)
    if source.minor == MinorType.NULL:
        return target.with_mode(DataMode.OPTIONAL)
    return target.with_mode(source.mode)


def _field_type(ref: FieldRef, lookup: FieldLookup) -> MajorType:
    path = ref.path
    for cut in range(len(path), 0, -1):
        known = lookup(path[:cut])
        if known is not None:
            return _descend(ref, known, cut)
    return LATE


def _descend(ref: FieldRef, t: MajorType, start: int) -> MajorType:
    for i in range(start, len(ref.path)):
        segment = ref.path[i]
        if t.minor == MinorType.NULL:
            return LATE
        where = str(FieldRef(ref.path[:i]))
        if isinstance(segment, int):
            t = _element(t, where, segment, ref)
        else:
            t = _member(t, where, segment, ref)
    return t


def _element(t: MajorType, where: str, index: int, ref: FieldRef) -> MajorType:
    """Element ``index`` of a list: OPTIONAL, since the index may be past the end."""
    if t.mode == DataMode.REPEATED:
        return t.with_mode(DataMode.OPTIONAL)
    if t.minor == MinorType.LIST and t.element is not None:
        element = t.element
        return (
            element if element.mode == DataMode.REPEATED else element.with_mode(DataMode.OPTIONAL)
        )
    raise ExpressionTypeError(
        f"'{where}' is {t}, not a list, so '{where}[{index}]' cannot be read", position=ref.position
    )


def _member(t: MajorType, where: str, name: str, ref: FieldRef) -> MajorType:
    """Member ``name`` of a map; a missing member reads as null, so it is late, not an error."""
    if t.minor != MinorType.MAP:
        hint = f"index it first: {where}[0].{name}" if t.minor == MinorType.LIST else None
        raise ExpressionTypeError(
            f"'{where}' is {t}, not a map, so it has no member '{name}'",
            position=ref.position,
            hint=hint,
        )
    child = t.field(name)
    if child is None:
        return LATE
    if t.mode == DataMode.REPEATED:
        # each element of a repeated map has the member: the result is a list of them
        if child.mode == DataMode.REPEATED:
            return MajorType.list_of(child)
        return child.with_mode(DataMode.REPEATED)
    if t.mode == DataMode.OPTIONAL and child.mode == DataMode.REQUIRED:
        return child.with_mode(DataMode.OPTIONAL)
    return child
