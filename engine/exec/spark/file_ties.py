"""Which rows of a parquet scan may tie with rows of another of its files on an order's key.

An ``order`` breaks ties by its input's order; over a scan, that is file order, then row order
within a file. Spark's row ids (``monotonically_increasing_id``) follow row order within a file
but not file order (Spark packs files into partitions by size), so each row's file is looked up
and its position among the files put above its row id. That lookup reads ``_metadata``, which
Spark builds as a struct for every row (topn at scale 1: about 10% of its wall time).

Rows of two files can tie only on a key value both files hold. The files' footers bound each
file's values of an integer column (its least and greatest value, and whether it holds nulls),
so only the values two files' bounds share can be held by rows of two files. An order with such
a column among its keys needs the file lookup only for the rows holding a shared value; the
others are ordered by row id alone: rows of one file keep their order, and rows of different
files that hold no shared value never tie. Where no two files share a value, no row needs it.

>>> shared_values("k", [KeyRange(1, 10, False), KeyRange(10, 20, True), KeyRange(30, 40, True)])
SharedValues(column='k', intervals=((10, 10),), nulls=True)
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import pyarrow.parquet as pq
from pyspark.sql import Column
from pyspark.sql import types as T

MAX_INTERVALS = 8
"""At most this many intervals of shared values are tested per row; more become one interval
from the least to the greatest (more rows looked up, never fewer)."""

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


@dataclass(frozen=True)
class KeyRange:
    """The values of one column in one file: ``low`` to ``high`` (None if it holds only nulls)
    and whether it holds nulls."""

    low: int | None
    high: int | None
    nulls: bool


@dataclass(frozen=True)
class SharedValues:
    """The values of ``column`` that rows of two or more files may hold: integers in
    ``intervals`` (inclusive, ascending, disjoint), and null where ``nulls``."""

    column: str
    intervals: tuple[tuple[int, int], ...]
    nulls: bool

    def condition(self, value: Column) -> Column | None:
        """Whether a row whose key is ``value`` may tie with a row of another file (a test of
        each interval, and of null where ``nulls``); None where no row may."""
        tests = [
            value == low if low == high else value.between(low, high)
            for low, high in self.intervals
        ]
        if self.nulls:
            tests.append(value.isNull())
        return functools.reduce(operator.or_, tests) if tests else None


def key_range(footer: pq.FileMetaData, column: str) -> KeyRange | None:
    """``column``'s values in the file of ``footer``, from its row groups' statistics; None
    where they do not bound them: not a top-level signed integer column (dates, decimals,
    timestamps and unsigned integers are left out), or a row group without statistics."""
    schema = footer.schema
    found = [i for i in range(len(schema)) if schema.column(i).path.lower() == column.lower()]
    if len(found) != 1:
        return None
    index = found[0]
    described = schema.column(index)
    kind = json.loads(described.logical_type.to_json())  # e.g. {"Type": "Int", "isSigned": true}
    signed = kind["Type"] == "None" or (kind["Type"] == "Int" and kind.get("isSigned"))
    if described.physical_type not in ("INT32", "INT64") or not signed:
        return None
    low = high = None
    nulls = False
    for group in range(footer.num_row_groups):
        stats = footer.row_group(group).column(index).statistics
        if stats is None or not stats.has_null_count:
            return None
        nulls = nulls or stats.null_count > 0
        if stats.has_min_max:
            low = stats.min if low is None else min(low, stats.min)
            high = stats.max if high is None else max(high, stats.max)
        elif stats.null_count != footer.row_group(group).num_rows:
            return None  # values the statistics do not bound
    return KeyRange(low, high, nulls)


def shared_values(column: str, ranges: Sequence[KeyRange]) -> SharedValues:
    """The values of ``column`` that two or more of the files of ``ranges`` may hold (as the
    module docstring's example)."""
    bounded = sorted((r.low, r.high) for r in ranges if r.low is not None and r.high is not None)
    shared: list[tuple[int, int]] = []
    reach: int | None = None  # the greatest value of the intervals before
    for low, high in bounded:
        if reach is not None and reach >= low:
            top = min(high, reach)
            if shared and shared[-1][1] >= low - 1:
                shared[-1] = (shared[-1][0], max(shared[-1][1], top))
            else:
                shared.append((low, top))
        reach = high if reach is None else max(reach, high)
    if len(shared) > MAX_INTERVALS:
        shared = [(shared[0][0], max(high for _, high in shared))]
    return SharedValues(column, tuple(shared), sum(r.nulls for r in ranges) > 1)


def cross_file_ties(
    columns: Collection[str],
    schema: T.StructType,
    footers: Sequence[pq.FileMetaData],
) -> SharedValues | None:
    """Of the scan's ``columns`` (an order's keys, as the scan's table columns of ``schema``),
    the integer one whose values the files of ``footers`` share least (the fewest values, then
    the first): None where no column's footers bound its values."""
    best: tuple[int, SharedValues] | None = None
    for name in columns:
        if name not in schema.names or not isinstance(schema[name].dataType, _INTEGRAL):
            continue
        ranges = [key_range(footer, name) for footer in footers]
        if any(r is None for r in ranges):
            continue
        shared = shared_values(name, [r for r in ranges if r is not None])
        width = sum(high - low + 1 for low, high in shared.intervals) + shared.nulls
        if best is None or width < best[0]:
            best = (width, shared)
    return None if best is None else best[1]
