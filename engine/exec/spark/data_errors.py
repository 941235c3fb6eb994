"""Spark's errors about the data a run meets, said as the local executor says them.

In ANSI mode (Spark's default) a job fails when an expression meets a value it cannot take: a
string that is no number cast to one, or no date read as one (``CAST_INVALID_INPUT``), a value
out of the target type's range (``CAST_OVERFLOW``), a long sum or product that overflows
(``ARITHMETIC_OVERFLOW``). The job that fails is a store's, so Spark names neither the operator
nor the expression, and it advises Spark SQL's ``try_cast``, which a plan cannot call.
:func:`data_error` reads the error's class and values from Spark's message;
:func:`locate` finds the expressions of a plan that can raise it and, where exactly one can,
names it and its operator as the local executor does::

    fragment 0, operator 2 (project): cannot read 'x' as INT in `cast(r.b as INT)`

>>> error = data_error('[CAST_OVERFLOW] The value 9999999999L of the type "BIGINT" cannot be '
...                    'cast to "INT" due to an overflow. Use `try_cast` ...')
>>> error.message
'cannot cast 9999999999 to INT: out of its range'
"""

from __future__ import annotations

import re

from engine.errors import ARITHMETIC_OVERFLOW, CAST_OVERFLOW, INVALID_INPUT, RAISED, DataError
from engine.exec.spark.spark_decimals import DECIMAL_BY_ZERO, DECIMAL_OVERFLOW
from engine.exec.spark.spark_functions import MODULO_BY_ZERO, no_unit
from engine.expr import Call, Cast, Expr, walk
from engine.plan import LogicalPlan
from engine.plan.operators import Operator
from engine.types import MajorType, to_spark

_MESSAGES = {
    INVALID_INPUT: re.compile(
        r"\[CAST_INVALID_INPUT\] The value '(?P<value>.*?)' of the type \"(?P<source>[^\"]+)\" "
        r"cannot be cast to \"(?P<target>[^\"]+)\" because it is malformed"
    ),
    CAST_OVERFLOW: re.compile(
        r"\[CAST_OVERFLOW\] The value (?P<value>\S+?)[LSY]? of the type \"(?P<source>[^\"]+)\" "
        r"cannot be cast to \"(?P<target>[^\"]+)\" due to an overflow"
    ),
    ARITHMETIC_OVERFLOW: re.compile(r"\[ARITHMETIC_OVERFLOW\] "),
    RAISED: re.compile(r"\[USER_RAISED_EXCEPTION\] (?P<value>.*?)(?: SQLSTATE: \w+)?$", re.M),
}
# The DataFrame function Spark says raised it (``"multiply" was called from``).
_CALLED = re.compile(r'== DataFrame ==\s*"(?P<name>\w+)" was called from')

# Spark's function names for the plan's arithmetic (a ``sum`` overflows in the aggregate).
_ARITHMETIC = {
    "plus": {"add"},
    "minus": {"subtract"},
    "multiply": {"multiply"},
    "negative": {"negate"},
    "sum": {"sum"},
}
_READS_DATES = {"to_date", "to_timestamp"}
_DATE_TYPES = {"DATE", "TIMESTAMP", "TIMESTAMP_NTZ"}
# The functions whose compiled form raises a message starting so.
_RAISED_BY = {
    MODULO_BY_ZERO: {"modulo"},
    DECIMAL_BY_ZERO: {"divide", "modulo"},
    DECIMAL_OVERFLOW: {"add", "subtract", "multiply", "divide", "modulo", "round", "ceil", "floor"},
    no_unit("date_trunc"): {"date_trunc"},
    no_unit("extract"): {"extract"},
}


def data_error(text: str) -> DataError | None:
    """The :class:`DataError` in the text of a Spark failure, if it is one.

    >>> data_error("[CAST_INVALID_INPUT] The value 'x' of the type \\"STRING\\" cannot be cast to "
    ...            "\\"INT\\" because it is malformed. Correct the value ...").message
    "cannot read 'x' as INT"
    >>> data_error("[DIVIDE_BY_ZERO] Division by zero.") is None
    True
    """
    for kind, pattern in _MESSAGES.items():
        found = pattern.search(text)
        if found is None:
            continue
        values = found.groupdict()
        if kind == RAISED and not _raised_by(values.get("value") or ""):
            continue  # not one of the engine's own messages (a test's, a user's)
        called = _CALLED.search(text[found.start() :])
        return DataError(
            kind,
            value=values.get("value"),
            target=values.get("target"),
            called=called.group("name") if called else None,
        )
    return None


def locate(error: DataError, plan: LogicalPlan, ran: str) -> tuple[DataError, Operator] | None:
    """``error`` at the one expression that can raise it among the operators whose records
    operator ``ran`` (a store, whose job failed) reads, and that expression's operator; None
    where none or several can (the operator that ran stays blamed)."""
    feeding = plan.ancestors(ran)
    found = {
        (str(node), op.id): (node, op)
        for op in plan.topological_order()
        if op.id in feeding
        for site in op.expressions()
        for node in walk(site.parsed)
        if _raises(error, node)
    }
    if len(found) != 1:
        return None
    ((expr, op),) = found.values()
    return error.at(expr, str(expr.type) if isinstance(expr, Cast) else None), op


def _raises(error: DataError, node: Expr) -> bool:
    if error.kind == ARITHMETIC_OVERFLOW:
        names = _ARITHMETIC.get(error.called or "", set().union(*_ARITHMETIC.values()))
        return isinstance(node, Call) and node.name in names
    if error.kind == RAISED:
        return isinstance(node, Call) and node.name in _raised_by(error.value or "")
    reads_date = error.kind == INVALID_INPUT and error.target in _DATE_TYPES
    if isinstance(node, Cast):  # a string read as a date goes through a timestamp
        name = _spark_name(node.type)
        return name == error.target or (reads_date and name in _DATE_TYPES)
    return reads_date and isinstance(node, Call) and node.name in _READS_DATES


def _raised_by(message: str) -> set[str]:
    """The functions whose compiled form raises ``message`` (none: not the engine's)."""
    return {
        name for start, names in _RAISED_BY.items() if message.startswith(start) for name in names
    }


def _spark_name(dtype: MajorType) -> str | None:
    """How Spark's messages name the type a cast to ``dtype`` gives (``"INT"``)."""
    try:
        return to_spark(dtype).simpleString().upper()
    except (TypeError, ValueError):
        return None
