"""How a store sorts its records on Spark: small data in one task, the rest by key ranges.

A store that keeps its plan's order sorts its records before it writes them. Spark's global sort
(``orderBy``) range-partitions them, and to find the ranges it first runs the plan below the sort
in a job of its own that samples the keys: every operator since the last shuffle runs twice (a
sessionization's sort and windows, an aggregate's last phase), and the job's start and end cost
tens of milliseconds. The physical plan says what the store needs, a ``merge`` into one
fragment; where the data is small, one task does it: a shuffle into one partition, then a sort
within it (``repartition(1).sortWithinPartitions``), as Drill merges sorted streams into one.
Small means that the scans upstream of the store report their sizes (their files' bytes), which
add up to at most :data:`ONE_TASK_SORT_BYTES` (a Spark setting; by default 128 MB, the bytes Spark
gives one task to read). Anything bigger or of unknown size keeps Spark's range partitioning,
which sorts in parallel. Which stores sort in one task is the planner's property
``one_task_sort`` (:func:`~engine.planner.properties.decisions.one_task_sorts`), given the
session's bound (:func:`one_task_sort_limit`).

>>> parse_bytes("64m"), parse_bytes("1024"), parse_bytes("-1")
(67108864, 1024, -1)
"""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import Column, DataFrame

from engine.errors import PlanningError

ONE_TASK_SORT_BYTES = "spark.drill.oneTaskSortBytes"
"""The Spark setting bounding the data a store sorts in one task: the bytes its upstream scans
read (``128m``, ``1g``, a number of bytes; ``-1``: always Spark's range partitioning)."""

DEFAULT_ONE_TASK_SORT_BYTES = 128 * 1024 * 1024

_BYTES = re.compile(r"(-?\d+)\s*([kmgt]?)b?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_bytes(text: str) -> int:
    """A size in bytes from a number with an optional ``k``/``m``/``g``/``t`` suffix, as Spark
    writes them (``-1`` stays ``-1``)."""
    found = _BYTES.fullmatch(text.strip())
    if found is None:
        raise PlanningError(
            f"{ONE_TASK_SORT_BYTES} is '{text}', not a size",
            hint="give bytes as a number with an optional k, m, g or t suffix (128m), or -1",
        )
    return int(found.group(1)) * _UNITS[found.group(2).lower()]


def one_task_sort_limit(spark: Any) -> int:
    """The session's :data:`ONE_TASK_SORT_BYTES` (its default where unset).

    Example (with a SparkSession)::

        spark.conf.set("spark.drill.oneTaskSortBytes", "1g")
        one_task_sort_limit(spark)  # 1073741824
    """
    value = spark.conf.get(ONE_TASK_SORT_BYTES, None)
    return DEFAULT_ONE_TASK_SORT_BYTES if value is None else parse_bytes(str(value))


def sorted_records(df: DataFrame, by: list[Column], *, one_task: bool) -> DataFrame:
    """``df`` sorted by ``by``: in one task (see the module), or by Spark's global sort.

    Example (with a SparkSession)::

        sorted_records(df, [col("user"), col("ts")], one_task=True).write.parquet(path)
    """
    if one_task:
        return df.repartition(1).sortWithinPartitions(*by)
    return df.orderBy(*by)
