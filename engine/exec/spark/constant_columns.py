"""Columns the compiler makes again and again, made once: literals (typed or not), columns named
by a string and other expressions of constants.

In classic PySpark each ``F.lit(0)`` or ``F.col("x")`` is four py4j round trips: two lookups of
the JVM's ``functions.lit``, the call, and, when the Column is dropped, the message that frees its
Java object (a cast to a type: one to three more). The compiler asks for the same few (a
sequence's ``0``, a mark's ``True``, a typed null, the columns it names) hundreds of times per
plan. A Column is an immutable expression that Spark resolves anew in each DataFrame using it,
so :func:`lit`, :func:`lit_as`, :func:`col` and :func:`constant` hand out the one Column made for
a value, name or key, per SparkContext: the most recent 4,096 of each, and texts of up to 256
characters only (a scan's array literal of its files is neither shared nor kept). Compiling the
22 TPC-H queries asks the JVM a third less (``benchmarks/README.md``). Under Spark Connect a
Column is a Python object, made anew each time.

Example (with a classic session active)::

    lit(0) is lit(0)        # True
    lit(0) is lit(False)    # False: the type is part of the key
    lit_as(None, "boolean") is lit_as(None, BooleanType())   # False: another key, same value
    spark.range(2).select(lit(0).alias("z"), col("id"))
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from pyspark import SparkContext
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType
from pyspark.sql.utils import is_remote

# Not float: -0.0 == 0.0 and NaN != NaN would share or miss a Column; nor lists, dates, ...
_SHARED_TYPES = (bool, int, str, type(None))
_LONGEST_TEXT = 256  # kept texts (values and names): 4,096 of them stay about a megabyte


def _shared(value: Any) -> bool:
    return type(value) in _SHARED_TYPES and not (
        isinstance(value, str) and len(value) > _LONGEST_TEXT
    )


def _classic_context() -> SparkContext | None:
    """The active SparkContext, or None without one or under Spark Connect (nothing is kept)."""
    context = SparkContext._active_spark_context
    return None if context is None or is_remote() else context


def lit(value: Any) -> Column:
    """``F.lit(value)``; for a bool, int, short str or None the same Column each time."""
    context = _classic_context()
    if context is None or not _shared(value):
        return F.lit(value)
    # The type is part of the key: True == 1, and both hash alike.
    return _lit(context, type(value), value)


def lit_as(value: Any, dtype: DataType | str) -> Column:
    """``F.lit(value).cast(dtype)``; for a bool, int, short str or None the same Column each
    time."""
    context = _classic_context()
    if context is None or not _shared(value):
        return F.lit(value).cast(dtype)
    return _lit_as(context, type(value), value, dtype)


def col(name: str) -> Column:
    """``F.col(name)``, the same Column each time for a name (of up to 256 characters)."""
    context = _classic_context()
    if context is None or len(name) > _LONGEST_TEXT:
        return F.col(name)
    return _col(context, name)


def constant(key: str, make: Callable[[], Column]) -> Column:
    """``make()``, an expression of constants only (``key`` names it), the same Column each time:
    ``constant("zero sequence", lambda: lit(0).alias("seq", metadata={...}))``."""
    context = _classic_context()
    if context is None:
        return make()
    found = _CONSTANTS.get((context, key))
    if found is None:
        if len(_CONSTANTS) >= 4096:
            _CONSTANTS.clear()
        found = _CONSTANTS[(context, key)] = make()
    return found


_CONSTANTS: dict[tuple[SparkContext, str], Column] = {}


@lru_cache(maxsize=4096)
def _lit(_context: SparkContext, _kind: type, value: Any) -> Column:
    return F.lit(value)


@lru_cache(maxsize=4096)
def _lit_as(_context: SparkContext, _kind: type, value: Any, dtype: DataType | str) -> Column:
    return F.lit(value).cast(dtype)


@lru_cache(maxsize=4096)
def _col(_context: SparkContext, name: str) -> Column:
    return F.col(name)
