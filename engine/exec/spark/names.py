"""Column names on Spark: every name from a plan or a file reaches Spark through :func:`column`
(or :func:`quote_name`), backquoted, so dots, spaces, quotes and backquotes in it are literal.

Spark reads ``F.col("a.b")`` as the field ``b`` of ``a`` and fails on a lone backquote
(``INVALID_ATTRIBUTE_NAME_SYNTAX``); the local executor takes names as they are.

>>> quote_name("x`.`y")
'`x``.``y`'
"""

from __future__ import annotations

from pyspark.sql import Column

from engine.exec.spark.constant_columns import col

SEQ_COLUMN = "__drill_seq"
"""The column that carries a row's input order through a Spark plan (a long; smaller is earlier)."""


def quote_name(name: str) -> str:
    """``name`` as a Spark identifier for ``F.col``: backquoted, backquotes doubled.

    >>> quote_name("odd.name`x")
    '`odd.name``x`'
    """
    return "`" + name.replace("`", "``") + "`"


def column(name: str) -> Column:
    """The top-level column called exactly ``name``."""
    return col(quote_name(name))
