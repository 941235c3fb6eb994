"""A Spark setting for the length of a block, on the tests' shared session."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def spark_setting(spark: Any, key: str, value: str) -> Iterator[None]:
    """``key`` set to ``value`` inside the block, unset after it (the session's default again)."""
    spark.conf.set(key, value)
    try:
        yield
    finally:
        spark.conf.unset(key)
