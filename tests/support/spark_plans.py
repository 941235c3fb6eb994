"""The physical plan Spark runs a DataFrame with, for tests of a plan's shape."""

from __future__ import annotations

from typing import Any


def physical_plan(df: Any) -> str:
    """The physical plan Spark runs ``df`` with, as text."""
    return str(df._jdf.queryExecution().executedPlan().toString())
