"""Aggregates a chunk of input at a time, so that a grouping or global ``collapsingaggregate``
holds its groups' partial results instead of its whole input.

A blocking aggregate buffers up to half its ``max_buffered_bytes`` of input; a larger input is
aggregated chunk by chunk into partial results (a ``count``, ``sum``, ``min`` or ``max`` per
group, an ``avg`` as a sum and a count), which are merged as they pile up and once at the end:
memory then grows with the groups, not the rows, and the partial results have the other half of
the limit. An input of less than one chunk is aggregated in one piece, as any blocking operator
does (one aggregate of many rows is faster than several). Only aggregates whose partial results
combine exactly qualify (:func:`combinable`).

A ``count_distinct`` keeps the values it counts: they group the partial results as one more key
(a group's partial sums are then kept per distinct value, and added up at the end), and each
group's count is that of its distinct non-null values, as one ``count_distinct`` of the whole
input. Memory then grows with the distinct values of each group; every ``count_distinct`` of
the aggregate must count the same argument.

Merged results are those of the whole input: counts and integer sums exactly; a DECIMAL's sum
and average keep their DECIMAL types (:func:`~engine.expr.coercion.sum_type`,
:func:`~engine.expr.coercion.avg_type`); a float's sum and average add the chunks' sums, so
their last digits may differ from one sum of every value (as on Spark, whose tasks do the same).
Groups keep the order of their first appearance.

>>> import pyarrow as pa
>>> from engine.exec.local.aggregate_functions import COUNT_ALL
>>> partials = PartialAggregates("4", max_bytes=1 << 20)
>>> partials.add([pa.array(["a", "b", "a"])], [("sum", pa.array([1, 2, 3])), (COUNT_ALL, None)], 3)
>>> partials.add([pa.array(["c", "a"])], [("sum", pa.array([4, 5])), (COUNT_ALL, None)], 2)
>>> keys, (sums, counts) = partials.result()
>>> keys[0].to_pylist(), sums.to_pylist(), counts.to_pylist()
(['a', 'b', 'c'], [9, 2, 4], [3, 1, 1])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import AggregateError, BufferLimitError
from engine.exec.local.aggregate_functions import (
    COUNT_ALL,
    aggregate_groups,
    aggregate_runs,
    decimal_mean,
)
from engine.exec.local.buffering import BUFFER_LIMIT_HINT
from engine.expr import Call as AggregateCall
from engine.expr import coercion
from engine.expr.arrow import decimals
from engine.types import MajorType, from_arrow, to_arrow
from engine.types.batches import concat_batches

Call = tuple[str, pa.Array | None]

_MERGED_BY = {"count": "sum", COUNT_ALL: "sum", "sum": "sum", "min": "min", "max": "max"}


def combinable(calls: Iterable[AggregateCall]) -> bool:
    """Whether aggregate ``calls`` can be computed chunk by chunk (see the module docstring).

    >>> from engine.expr import parse_expression
    >>> combinable([parse_expression("sum(a)"), parse_expression("count_distinct(b)")])
    True
    >>> combinable([parse_expression("count_distinct(a)"), parse_expression("count_distinct(b)")])
    False
    """
    calls = list(calls)
    counted = {call.args for call in calls if call.name == "count_distinct"}
    return len(counted) <= 1 and all(
        call.name in _MERGED_BY or call.name in ("avg", "count_distinct") for call in calls
    )


def grouped_exactly(keys: Sequence[pa.Array], calls: Sequence[Call]) -> bool:
    """Whether Arrow's hash grouping on ``keys`` (and on the values a ``count_distinct``
    counts, which group the partial results too) is the segment's equality: not for floats,
    whose NaN and -0.0 are where hash equality may differ (those are left to a buffered
    aggregate)."""
    distinct = [values for name, values in calls if name == "count_distinct"]
    return all(hashed_exactly(array.type) for array in [*keys, *distinct])


def hashed_exactly(dtype: pa.DataType) -> bool:
    """Whether Arrow's hash grouping on ``dtype`` is the segment's equality (see
    :func:`grouped_exactly`)."""
    return (
        pa.types.is_integer(dtype)
        or pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_boolean(dtype)
        or pa.types.is_date(dtype)
    )


class PartialAggregates:
    """The partial results of one aggregate's chunks, merged by :meth:`result`.

    Each chunk comes with its group keys (none: the whole input is one group). ``max_bytes``
    (the operator's ``max_buffered_bytes``) bounds a chunk of input, :attr:`chunk_bytes`, and
    the partial results, the rest (:class:`BufferLimitError`, naming operator ``operator_id``).
    """

    def __init__(self, operator_id: str, *, max_bytes: int) -> None:
        self.operator_id = operator_id
        self.chunk_bytes = max_bytes // 2
        """How much input to hold before aggregating it."""
        self.max_bytes = max_bytes - self.chunk_bytes
        self._partials: list[pa.RecordBatch] = []
        self._nbytes = 0
        self._names: list[str] = []  # each call's function
        self._types: list[pa.DataType | None] = []  # each call's values' type, from its first chunk
        self._keys = 0  # the partial results' keys: the groups' and any counted values
        self._groups = 0  # the groups' keys
        self._merge_at = self.max_bytes // 4

    @property
    def empty(self) -> bool:
        """Whether no chunk was added yet."""
        return not self._partials

    def takes(self, keys: Sequence[pa.Array], calls: Sequence[Call]) -> bool:
        """Whether a chunk of these group ``keys`` and ``calls`` can be added: not where they are
        not grouped exactly (:func:`grouped_exactly`), before the first chunk (its operator then
        buffers its input instead); after it, they fail with an :class:`AggregateError`."""
        if grouped_exactly(keys, calls):
            return True
        if self.empty:
            return False
        types = [str(key.type) for key in keys]
        types += [str(values.type) for name, values in calls if name == "count_distinct"]
        raise AggregateError(
            f"collapsingaggregate {self.operator_id}: a group key or the values a count_distinct "
            f"counts changed type to {', '.join(types)} after more than one chunk of input",
            hint="cast the group keys and the counted values to one type, or run the plan on the "
            "spark executor",
        )

    def add(self, keys: Sequence[pa.Array], calls: Sequence[Call], rows: int) -> None:
        """Aggregate one chunk of ``rows`` records: its group ``keys`` (one array per key) and
        ``calls``."""
        if not self._names:
            self._names = [name for name, _ in calls]
            self._types = [None if values is None else values.type for _, values in calls]
            self._groups = len(keys)
        distinct = next((values for name, values in calls if name == "count_distinct"), None)
        if distinct is not None:  # the counted values group the partial results too
            keys = [*keys, distinct]
        self._keys = len(keys)
        expanded: list[Call] = []
        for name, values in calls:
            if name == "count_distinct":
                continue
            if name == "avg":  # a sum and a count (DECIMALs stay exact, others add as floats)
                floats = values is not None and not pa.types.is_decimal(values.type)
                expanded += [("sum", values.cast(pa.float64()) if floats else values)]
                expanded += [("count", values)]
            else:
                expanded.append((name, values))
        grouped_keys, results = self._aggregate(list(keys), expanded, rows)
        columns = [*grouped_keys, *(_narrowed(r) for r in results)]
        names = [f"k{i}" for i in range(len(grouped_keys))]
        names += [f"p{i}" for i in range(len(results))]
        self._keep(pa.RecordBatch.from_arrays(columns, names=names))

    def _keep(self, partial: pa.RecordBatch) -> None:
        self._partials.append(partial)
        self._nbytes += partial.nbytes
        if self._nbytes > self._merge_at and len(self._partials) > 1:
            merged = self._merged()  # many groups: fold what is kept so far into one piece
            self._partials, self._nbytes = [merged], merged.nbytes
            # twice what is left before the next fold: each group is folded a few times only
            self._merge_at = max(self._merge_at, 2 * merged.nbytes)
        if self._nbytes > self.max_bytes:
            raise BufferLimitError(
                f"collapsingaggregate {self.operator_id} needs more than {self.max_bytes} bytes "
                "for the partial results of its groups and stopped rather than drop rows",
                hint=BUFFER_LIMIT_HINT,
            )

    def result(self) -> tuple[list[pa.Array], list[pa.Array]]:
        """Each group's keys and one value per call, as one aggregate of the whole input."""
        merged = self._merged()
        keys = [merged.column(i) for i in range(self._keys)]
        partial = [merged.column(i) for i in range(self._keys, merged.num_columns)]
        if self._keys > self._groups:  # partial results per group and counted value
            keys, partial = self._by_group(keys, partial)
        results: list[pa.Array] = []
        for name, dtype in zip(self._names, self._types, strict=True):
            if name == "count_distinct":
                results.append(partial.pop(0))
                continue
            if name == "avg":
                total, count = partial.pop(0), partial.pop(0)
                results.append(_average(total, count, dtype))
                continue
            value = partial.pop(0)
            target = _sum_type(name, dtype)
            if target is not None and not value.type.equals(to_arrow(target)):
                value = _fit(value, target, name)
            results.append(value)
        return keys, results

    def _by_group(
        self, keys: list[pa.Array], partial: list[pa.Array]
    ) -> tuple[list[pa.Array], list[pa.Array]]:
        """Partial results kept per group and counted value, merged per group: the
        ``count_distinct`` is the count of each group's non-null values (in the calls' order)."""
        *group_keys, counted = keys
        return self._aggregate(group_keys, self._merge_calls(partial, counted), len(counted))

    def _merge_calls(self, partial: list[pa.Array], counted: pa.Array | None = None) -> list[Call]:
        """How each partial result column merges with itself; with the ``counted`` values, each
        ``count_distinct`` counts them (else it has no column yet)."""
        partial = list(partial)
        merge: list[Call] = []
        for name in self._names:
            if name == "avg":
                merge += [("sum", partial.pop(0)), ("sum", partial.pop(0))]
            elif name != "count_distinct":
                merge.append((_MERGED_BY[name], partial.pop(0)))
            elif counted is not None:
                merge.append(("count", counted))
        return merge

    def _merged(self) -> pa.RecordBatch:
        table = concat_batches(self._partials)
        batch = table.combine_chunks().to_batches()[0] if table.num_rows else None
        if batch is None:
            return self._partials[0]
        keys = [batch.column(i) for i in range(self._keys)]
        partial = [batch.column(i) for i in range(self._keys, batch.num_columns)]
        grouped_keys, results = self._aggregate(keys, self._merge_calls(partial), batch.num_rows)
        return pa.RecordBatch.from_arrays([*grouped_keys, *results], names=table.schema.names)

    def _aggregate(
        self, keys: list[pa.Array], calls: list[Call], rows: int
    ) -> tuple[list[pa.Array], list[pa.Array]]:
        if keys:
            return aggregate_groups(calls, keys)
        starts = np.zeros(rows, dtype=bool)
        starts[:1] = True  # the whole chunk is one run
        return [], aggregate_runs(calls, starts)


def _narrowed(values: pa.Array) -> pa.Array:
    """Partial DECIMAL sums in 18 digits where they fit, which the merge adds as integers
    (``aggregate_functions._dense_groups``) rather than by hashing."""
    dtype = values.type
    if not pa.types.is_decimal(dtype) or dtype.precision <= 18 or dtype.scale > 18:
        return values
    try:
        return values.cast(pa.decimal128(18, dtype.scale))  # a safe cast: fails past 18 digits
    except pa.ArrowInvalid:
        return values


def _sum_type(name: str, dtype: pa.DataType | None) -> MajorType | None:
    """A DECIMAL ``sum``'s own type (a merge of partial sums would widen it again)."""
    if name != "sum" or dtype is None or not pa.types.is_decimal(dtype):
        return None
    return coercion.sum_type(from_arrow(dtype))


def _fit(values: pa.Array, target: MajorType, name: str) -> pa.Array:
    try:
        return decimals.fit(values, target, name)
    except decimals.DecimalError as err:
        raise AggregateError(f"{name}(): {err}") from err


def _average(total: pa.Array, count: pa.Array, dtype: pa.DataType | None) -> pa.Array:
    """``avg`` from the merged sum and count: null for a group of nulls only."""
    if dtype is not None and pa.types.is_decimal(dtype):
        return decimal_mean(total, count, dtype)
    counted = pc.if_else(pc.equal(count, 0), pa.scalar(None, count.type), count)
    return pc.divide(total.cast(pa.float64()), counted.cast(pa.float64()))
