"""A scan's pushed filter as a pyarrow Expression and a mask, when the translation is exact.

The parquet reader skips the row groups whose statistics exclude the Expression, and the scan
keeps the rows of the rest where the mask (the Expression's Arrow comparison kernels, called
directly: no Acero plan per file) is true, so the records need no filtering after the read. Only
what keeps exactly the records :func:`~engine.expr.arrow.evaluate.evaluate_predicate` keeps is
translated: comparisons of a top-level column of the record (bool, integer, float or string)
with a non-null literal of the same family or of a date column with a date constant, joined by
``&&``, ``||`` and ``!`` (Kleene logic; a null outcome drops the record, as in the filter).
Anything else gives None, and the scan filters after the read as before.

Floats are left out where NaN would tell: parquet statistics leave NaN out of min/max, and
pyarrow then skips a row group whose only other value is 5 for ``x != 5`` although NaN != 5 is
true. So a float comparison is translated only when it is not ``!=`` and not under a ``!``.

>>> import pyarrow as pa
>>> from engine.expr import parse_expression
>>> schema = pa.schema({"x": pa.int64(), "s": pa.string()})
>>> to_arrow_filter(parse_expression("f.x > 100 && 'a' == f.s"), schema, "f")
<pyarrow.compute.Expression ((x > 100) and (s == "a"))>
>>> to_arrow_filter(parse_expression("f.x + 1 > 100"), schema, "f") is None
True
>>> found = arrow_filter(parse_expression("f.x > 1 || !(f.s == 'a')"), schema, "f")
>>> found.mask(pa.table({"x": [0, 2, None], "s": ["a", "a", "b"]})).to_pylist()
[False, True, True]
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from engine.expr.functions import lookup_function
from engine.expr.nodes import Call, Expr, FieldRef, Literal
from engine.expr.rewrite import constant_date
from engine.types import MinorType

_COMPARISONS = {
    "equal": "equal",
    "not_equal": "not_equal",
    "less_than": "less",
    "less_than_or_equal": "less_equal",
    "greater_than": "greater",
    "greater_than_or_equal": "greater_equal",
}
_MIRRORED = {
    "less": "greater",
    "less_equal": "greater_equal",
    "greater": "less",
    "greater_equal": "less_equal",
}


Columns = pa.Table | pa.RecordBatch
_Mask = Callable[[Columns], pa.Array | pa.ChunkedArray]


@dataclass(frozen=True)
class ArrowFilter:
    """A pushed filter over a file's columns: ``expression`` for the row-group statistics, and
    :meth:`mask`, true for exactly the rows the filter keeps."""

    expression: pc.Expression
    _mask: _Mask

    def mask(self, columns: Columns) -> pa.Array | pa.ChunkedArray:
        """Whether each row of ``columns`` is kept (a null outcome is not)."""
        return pc.fill_null(self._mask(columns), False)


def arrow_filter(expr: Expr, schema: pa.Schema, ref: str | None) -> ArrowFilter | None:
    """``expr`` (over records held under ``ref``, or at the root when None) as an
    :class:`ArrowFilter` over the columns of ``schema``; None when the translation would not be
    exact."""
    part = _translate(expr, schema, ref, negated=False)
    return None if part is None else ArrowFilter(*part)


def to_arrow_filter(expr: Expr, schema: pa.Schema, ref: str | None) -> pc.Expression | None:
    """:func:`arrow_filter`'s Expression."""
    found = arrow_filter(expr, schema, ref)
    return None if found is None else found.expression


def _translate(
    expr: Expr, schema: pa.Schema, ref: str | None, *, negated: bool
) -> tuple[pc.Expression, _Mask] | None:
    if not isinstance(expr, Call):
        return None
    spec = lookup_function(expr.name)
    name = spec.name if spec is not None else expr.name
    if name in ("and", "or") and len(expr.args) == 2:
        parts = [_translate(a, schema, ref, negated=negated) for a in expr.args]
        if parts[0] is None or parts[1] is None:
            return None
        (left, left_mask), (right, right_mask) = parts
        if name == "and":  # Expression's & and | are Arrow's Kleene kernels
            return left & right, lambda t: pc.and_kleene(left_mask(t), right_mask(t))
        return left | right, lambda t: pc.or_kleene(left_mask(t), right_mask(t))
    if name == "not" and len(expr.args) == 1:
        inner = _translate(expr.args[0], schema, ref, negated=not negated)
        if inner is None:
            return None
        expression, mask = inner
        return ~expression, lambda t: pc.invert(mask(t))
    if name in _COMPARISONS and len(expr.args) == 2:
        return _comparison(_COMPARISONS[name], expr.args, schema, ref, negated)
    return None


def _comparison(
    kernel: str, args: tuple[Expr, ...], schema: pa.Schema, ref: str | None, negated: bool
) -> tuple[pc.Expression, _Mask] | None:
    left, right = args
    if isinstance(right, FieldRef) and not isinstance(left, FieldRef):
        left, right = right, left
        kernel = _MIRRORED.get(kernel, kernel)
    if not isinstance(left, FieldRef):
        return None
    column = _column(left, schema, ref)
    if column is None:
        return None
    date = _date(right)
    if date is not None:
        if not pa.types.is_date32(column.type):
            return None
        literal = pa.scalar(date, pa.date32())
    elif isinstance(right, Literal) and _same_family(column.type, right):
        if pa.types.is_floating(column.type) and (negated or kernel == "not_equal"):
            return None  # NaN is outside the statistics (see the module docstring)
        literal = pa.scalar(right.value, type=_literal_type(right))
    else:
        return None
    name = column.name
    compare = getattr(pc, kernel)
    expression = getattr(pc.field(name), _OPERATORS[kernel])(literal)
    return expression, lambda t: _compared(t.column(name), compare, literal)


def _compared(
    column: pa.ChunkedArray | pa.Array, compare: Callable, literal: pa.Scalar
) -> pa.ChunkedArray | pa.Array:
    """``compare(column, literal)``; a dictionary column's dictionary is compared (each
    distinct value once) and the outcomes taken by its indices (a null index gives null)."""
    if not pa.types.is_dictionary(column.type):
        return compare(column, literal)
    if isinstance(column, pa.Array):
        return compare(column.dictionary, literal).take(column.indices)
    return pa.chunked_array(
        [compare(c.dictionary, literal).take(c.indices) for c in column.chunks], pa.bool_()
    )


_OPERATORS = {
    "equal": "__eq__",
    "not_equal": "__ne__",
    "less": "__lt__",
    "less_equal": "__le__",
    "greater": "__gt__",
    "greater_equal": "__ge__",
}


def _column(field: FieldRef, schema: pa.Schema, ref: str | None) -> pa.Field | None:
    """The top-level column ``field`` reads, found as the evaluator finds it (exact name)."""
    path = field.path
    if ref:
        if len(path) != 2 or path[0] != ref:
            return None
        path = path[1:]
    if len(path) != 1 or not isinstance(path[0], str):
        return None
    if schema.get_all_field_indices(path[0]) != [schema.get_field_index(path[0])]:
        return None  # missing or ambiguous
    return schema.field(path[0])


def _date(expr: Expr) -> datetime.date | None:
    """The day of a date constant (``to_date('1994-01-01')``, ``cast('1994-01-01' as DATE)``)
    written as ``yyyy-mm-dd``; None for anything else (other texts are left to the evaluator)."""
    text = constant_date(expr)
    if text is None or not _ISO_DATE.fullmatch(text.value):
        return None
    try:
        return datetime.date.fromisoformat(text.value)
    except ValueError:
        return None


_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _same_family(dtype: pa.DataType, literal: Literal) -> bool:
    minor = literal.type.minor
    if literal.value is None:
        return False
    if minor in (MinorType.BIGINT, MinorType.FLOAT8):
        # uint64 against int64 has no common Arrow type both sides would pick the same way
        integer = pa.types.is_integer(dtype) and not pa.types.is_uint64(dtype)
        return integer or pa.types.is_float32(dtype) or pa.types.is_float64(dtype)
    if minor == MinorType.VARCHAR:
        return pa.types.is_string(dtype) or pa.types.is_large_string(dtype)
    if minor == MinorType.BIT:
        return pa.types.is_boolean(dtype)
    return False


def _literal_type(literal: Literal) -> pa.DataType:
    return {
        MinorType.BIGINT: pa.int64(),
        MinorType.FLOAT8: pa.float64(),
        MinorType.VARCHAR: pa.string(),
        MinorType.BIT: pa.bool_(),
    }[literal.type.minor]
