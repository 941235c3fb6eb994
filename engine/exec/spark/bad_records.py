"""The file a bad value was read from, found on the error path only.

A value an expression cannot take fails a Spark job with the value and the expression
(:mod:`~engine.exec.spark.data_errors`), not the record: the task that met it knows only its
stage. Carrying each row's file through the plan for that would cost every good run a column.
Instead, once a run has failed, :func:`file_of_value` asks Spark again, over the failing
operator's input: the first row whose argument to the raising expression reads as the value
Spark named, and that row's file (``input_file_name()``, which Spark knows where the rows
still come straight from a scan: in the scan's stage, before any shuffle). Where the query
fails or finds nothing, the error stays as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from urllib.parse import unquote, urlparse

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from engine.exec.spark.constant_columns import lit
from engine.exec.spark.data_errors import CAST_OVERFLOW, INVALID_INPUT, DataError
from engine.expr import Call, Cast, Expr

_log = logging.getLogger(__name__)


def file_of_value(
    error: DataError, frame: DataFrame, column: Callable[[Expr, DataFrame], Column]
) -> str | None:
    """The file of the first row of ``frame`` (the raising operator's input) whose argument
    to ``error``'s expression reads as its value, or None. ``column`` compiles an expression
    over ``frame``."""
    argument = _argument(error)
    if argument is None or error.value is None:
        return None
    try:
        read = column(argument, frame).cast("string")
        rows = (
            frame.where(read == lit(error.value))
            .select(F.input_file_name().alias("file"))
            .limit(1)
            .collect()
        )
    except Exception as err:  # the error as Spark said it is still right
        _log.debug("no file for %s: %s", error.message, type(err).__name__)
        return None
    return local_path(rows[0]["file"]) if rows and rows[0]["file"] else None


def _argument(error: DataError) -> Expr | None:
    """What the raising expression read the value from (a cast's operand, a date function's
    first argument), where the error names the value."""
    if error.kind not in (INVALID_INPUT, CAST_OVERFLOW):
        return None
    node = error.node
    if isinstance(node, Cast):
        return node.expr
    if isinstance(node, Call) and node.args:
        return node.args[0]
    return None


def local_path(uri: str) -> str:
    """A file Spark names by URI as the engine names it: a local file by its path.

    >>> local_path("file:///data/events/2024-01-06/part%201.json")
    '/data/events/2024-01-06/part 1.json'
    >>> local_path("s3a://bucket/a.json")
    's3a://bucket/a.json'
    """
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme in ("", "file") else uri
