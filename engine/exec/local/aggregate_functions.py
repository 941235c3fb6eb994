"""Runs of consecutive equal values, and the Arrow aggregate and running functions over them.

A *run* (Drill's segment for ``within``) is a maximal stretch of consecutive records whose ``within``
value is the same; two nulls are the same value. Aggregates (collapsingaggregate) reduce each run to
one value; running functions (runningaggregate) give every record the aggregate of its run so far.
Everything is vectorised: hash aggregation for aggregates, numpy scans for running functions.

>>> import pyarrow as pa
>>> starts = run_starts(pa.array(["a", "a", "b", None, None]))
>>> starts.tolist()
[True, False, True, True, False]
>>> aggregate_runs([("sum", pa.array([1, 2, 3, 4, 5]))], starts)[0].to_pylist()
[3, 3, 9]
>>> running("sum", pa.array([1, 2, 3, 4, 5]), starts).to_pylist()
[1, 3, 3, 4, 9]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import AggregateError
from engine.exec.local.buffering import BatchBuffer, concat_batches, to_batch
from engine.expr import coercion
from engine.expr.arrow import decimals
from engine.expr.arrow.trees import get_path
from engine.types import MAX_DECIMAL_PRECISION, from_arrow, to_arrow

# ---------------------------------------------------------------------------------------- runs


def run_starts(values: pa.Array) -> np.ndarray:
    """A boolean per record: True where a new run begins (always at record 0).

    Values compare deeply (maps member by member, lists element by element); null equals null.
    """
    n = len(values)
    starts = np.ones(n, dtype=bool)
    if n > 1:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if not values.null_count and (
            pa.types.is_integer(values.type) or pa.types.is_boolean(values.type)
        ):
            numbers = values.to_numpy(zero_copy_only=False)  # the common case: segment numbers
            starts[1:] = numbers[1:] != numbers[:-1]
        else:
            starts[1:] = ~same_pairs(values[1:], values[:-1])
    return starts


def run_first_index(starts: np.ndarray) -> np.ndarray:
    """For every record, the index of the first record of its run."""
    positions = np.arange(len(starts))
    return np.maximum.accumulate(np.where(starts, positions, 0)) if len(starts) else positions


def run_last_index(starts: np.ndarray) -> np.ndarray:
    """For every record, the index of the last record of its run."""
    firsts = np.flatnonzero(starts)
    lasts = np.append(firsts[1:] - 1, len(starts) - 1)
    return lasts[np.cumsum(starts) - 1] if len(starts) else firsts


def same_pairs(a: pa.Array, b: pa.Array) -> np.ndarray:
    """``a[i]`` deeply equals ``b[i]`` for every i (null equals null, types must match)."""
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks()
    if isinstance(b, pa.ChunkedArray):
        b = b.combine_chunks()
    if pa.types.is_dictionary(a.type):
        a = a.dictionary_decode()
    if pa.types.is_dictionary(b.type):
        b = b.dictionary_decode()
    a_null = _null_mask(a)
    b_null = _null_mask(b)
    both_valid = ~a_null & ~b_null
    result = a_null & b_null
    if not both_valid.any() or pa.types.is_null(a.type) or pa.types.is_null(b.type):
        return result
    if not a.type.equals(b.type):
        try:
            b = b.cast(a.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return result
    if pa.types.is_struct(a.type):
        equal = np.ones(len(a), dtype=bool)
        for child_a, child_b in zip(a.flatten(), b.flatten()):
            equal &= same_pairs(child_a, child_b)
    elif _is_list(a.type):
        equal = _same_lists(a, b)
    else:
        equal = pc.fill_null(pc.equal(a, b), False).to_numpy(zero_copy_only=False)
    return result | (both_valid & equal)


def same_value(a: pa.Array, b: pa.Array) -> bool:
    """Whether the single value of ``a`` equals the single value of ``b`` (any types)."""
    return bool(a.to_pylist() == b.to_pylist())


def _null_mask(array: pa.Array) -> np.ndarray:
    if pa.types.is_null(array.type):
        return np.ones(len(array), dtype=bool)
    return array.is_null().to_numpy(zero_copy_only=False)


def _is_list(dtype: pa.DataType) -> bool:
    return (
        pa.types.is_list(dtype)
        or pa.types.is_large_list(dtype)
        or pa.types.is_fixed_size_list(dtype)
        or pa.types.is_map(dtype)
    )


def _same_lists(a: pa.Array, b: pa.Array) -> np.ndarray:
    """Element-wise list equality: same lengths and equal elements in order."""
    a_len = pc.fill_null(pc.list_value_length(a), 0).to_numpy(zero_copy_only=False)
    b_len = pc.fill_null(pc.list_value_length(b), 0).to_numpy(zero_copy_only=False)
    equal = a_len == b_len
    rows = np.flatnonzero(equal & (a_len > 0))
    if not len(rows):
        return equal
    lengths = a_len[rows].astype(np.int64)
    within = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    a_first = np.asarray(a.offsets)[:-1].astype(np.int64)[rows]
    b_first = np.asarray(b.offsets)[:-1].astype(np.int64)[rows]
    a_items = a.values.take(pa.array(np.repeat(a_first, lengths) + within))
    b_items = b.values.take(pa.array(np.repeat(b_first, lengths) + within))
    mismatches = np.add.reduceat(
        (~same_pairs(a_items, b_items)).astype(np.int64), np.cumsum(lengths) - lengths
    )
    equal[rows] = mismatches == 0
    return equal


class RunSplitter:
    """Cuts a stream of batches into batches of complete runs of the value at ``within``.

    :meth:`add` returns the runs a batch completes (or None); the run still open stays in
    ``buffer``, which bounds memory. Without ``within`` the whole input is one run, returned by
    :meth:`finish`.

    >>> import pyarrow as pa
    >>> from engine.exec.local.buffering import BatchBuffer
    >>> splitter = RunSplitter(("g",), BatchBuffer("1", "op", max_bytes=1 << 20))
    >>> splitter.add(pa.record_batch({"g": [1, 1]})) is None
    True
    >>> splitter.add(pa.record_batch({"g": [1, 2, 2]})).to_pydict()
    {'g': [1, 1, 1]}
    >>> splitter.finish().to_pydict()
    {'g': [2, 2]}
    """

    def __init__(self, within: Sequence[str | int] | None, buffer: BatchBuffer) -> None:
        self.within = tuple(within) if within is not None else None
        self.buffer = buffer
        self._open_key: pa.Array | None = None  # the within value of the open run

    @property
    def schema(self) -> pa.Schema | None:
        """The schema of the last batch seen."""
        return self.buffer.last_schema

    def add(self, batch: pa.RecordBatch) -> pa.RecordBatch | None:
        if self.within is None or batch.num_rows == 0:
            self.buffer.add(batch)
            return None
        keys = get_path(batch, self.within)
        last_start = int(np.flatnonzero(run_starts(keys))[-1])
        open_run = self.buffer.num_rows > 0
        continues = open_run and same_value(self._open_key, keys.slice(0, 1))
        self._open_key = keys.slice(last_start, 1)
        if last_start == 0 and (continues or not open_run):
            self.buffer.add(batch)
            return None
        complete = [*self.buffer.batches, batch.slice(0, last_start)]
        result = to_batch(concat_batches([b for b in complete if b.num_rows]))
        self.buffer.clear()
        self.buffer.add(batch.slice(last_start))
        return result

    def finish(self) -> pa.RecordBatch | None:
        """The rows still buffered as one batch, or None if there are none."""
        if self.buffer.num_rows == 0:
            return None
        result = self.buffer.batch()
        self.buffer.clear()
        return result


# ------------------------------------------------------------------------------ aggregates

# name -> Arrow hash aggregate; count and count_distinct skip nulls (Arrow's default mode).
_HASH_AGGREGATES = {
    "count": "count",
    "count_distinct": "count_distinct",
    "sum": "sum",
    "min": "min",
    "max": "max",
    "avg": "mean",
}
AGGREGATE_FUNCTIONS = tuple(_HASH_AGGREGATES)
"""The aggregate functions collapsingaggregate computes."""


def aggregate_runs(calls: Sequence[tuple[str, pa.Array]], starts: np.ndarray) -> list[pa.Array]:
    """For every ``(function, values)``, one value per run: ``count`` counts non-null values,
    ``sum`` stays BIGINT for integers, ``avg`` is FLOAT8, nulls are skipped; a run without a
    non-null value gives null (0 for the counts). A DECIMAL's ``sum`` and ``avg`` are DECIMALs
    (:func:`engine.expr.coercion.sum_type`, :func:`~engine.expr.coercion.avg_type`).
    """
    calls, nan_flags = _nan_checks(calls)
    expanded, combine = _decimal_means(calls)
    results = _nan_greatest(combine(_aggregate_runs(expanded, starts)), nan_flags)
    return _decimal_results(calls, results)


def _decimal_means(
    calls: Sequence[tuple[str, pa.Array | None]],
) -> tuple[list[tuple[str, pa.Array | None]], Callable[[list[pa.Array]], list[pa.Array]]]:
    """``calls`` with each ``avg`` of decimals as a ``sum`` and a ``count``, and the function that
    turns their results back into one per call: the exact quotient rounded half away from zero to
    avg's DECIMAL, what Acero's mean of the values widened to that type gives, without widening
    every value first."""
    expanded: list[tuple[str, pa.Array | None]] = []
    means: dict[int, pa.DataType] = {}  # position in expanded -> the averaged values' type
    for name, values in calls:
        if name == "avg" and values is not None and pa.types.is_decimal(values.type):
            means[len(expanded)] = values.type
            expanded += [("sum", values), ("count", values)]
        else:
            expanded.append((name, values))
    if not means:
        return expanded, lambda results: results

    def combine(results: list[pa.Array]) -> list[pa.Array]:
        out, at = [], 0
        while at < len(results):
            if at not in means:
                out.append(results[at])
                at += 1
                continue
            out.append(decimal_mean(results[at], results[at + 1], means[at]))
            at += 2
        return out

    return expanded, combine


def decimal_mean(total: pa.Array, count: pa.Array, averaged: pa.DataType) -> pa.Array:
    """``avg`` of DECIMAL values of type ``averaged`` from their sums and counts: the exact
    quotient rounded half away from zero to avg's DECIMAL; null where nothing was counted."""
    counted = pc.if_else(pc.equal(count, 0), pa.scalar(None, count.type), count)
    values = from_arrow(averaged)
    try:
        if pa.types.is_decimal256(total.type):  # summed wide: its sum's DECIMAL first
            total = decimals.fit(total, coercion.sum_type(values), "avg")
        return decimals.quotient(total, counted, coercion.avg_type(values))
    except decimals.DecimalError as err:
        raise AggregateError(f"avg(): {err}") from err


def _decimal_results(
    calls: Sequence[tuple[str, pa.Array | None]], results: list[pa.Array]
) -> list[pa.Array]:
    """Each DECIMAL ``sum`` and ``avg`` as the DECIMAL type it has (Acero sums at 38 digits)."""
    out = []
    for (name, values), result in zip(calls, results, strict=False):
        target = _decimal_target(name, values)
        if target is not None and not result.type.equals(to_arrow(target)):
            try:
                result = decimals.fit(result, target, name)
            except decimals.DecimalError as err:
                raise AggregateError(f"{name}(): {err}") from err
        out.append(result)
    return out + results[len(out) :]


def _decimal_target(name: str, values: pa.Array | None):  # type: ignore[no-untyped-def]
    if values is None or not pa.types.is_decimal(values.type) or name not in ("sum", "avg"):
        return None
    drill = from_arrow(values.type)
    return coercion.sum_type(drill) if name == "sum" else coercion.avg_type(drill)


def _aggregate_runs(calls: Sequence[tuple[str, pa.Array]], starts: np.ndarray) -> list[pa.Array]:
    fast = [_reduce_runs(name, values, starts) for name, values in calls]
    if all(result is not None for result in fast):
        return fast  # type: ignore[return-value]
    run_ids = np.cumsum(starts) - 1
    columns: dict[str, pa.Array] = {"run": pa.array(run_ids, pa.int64())}
    aggregations = []
    for i, (name, values) in enumerate(calls):
        column = f"v{i}"
        columns[column] = _aggregatable(name, values)
        aggregations.append((column, _hash_function(name)))
    table = pa.table(columns)
    try:
        grouped = table.group_by("run", use_threads=_any_order(calls)).aggregate(aggregations)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise _aggregate_error(calls, err) from err
    grouped = grouped.take(pc.sort_indices(grouped["run"]))
    return [
        grouped[f"v{i}_{_hash_function(name)}"].combine_chunks()
        for i, (name, _) in enumerate(calls)
    ]


def aggregate_groups(
    calls: Sequence[tuple[str, pa.Array | None]], keys: Sequence[pa.Array]
) -> tuple[list[pa.Array], list[pa.Array]]:
    """:func:`aggregate_runs` over groups of equal ``keys`` (Arrow's equality; null is a value)
    instead of runs: each group's keys and one value per call, groups in order of first appearance.

    >>> import pyarrow as pa
    >>> keys, sums = aggregate_groups([("sum", pa.array([1, 2, None]))], [pa.array(["b", "a", "b"])])
    >>> [k.to_pylist() for k in keys], [s.to_pylist() for s in sums]
    ([['b', 'a']], [[1, 2]])

    ``(COUNT_ALL, None)`` counts each group's rows with no values to pass.
    """
    calls, nan_flags = _nan_checks(calls)
    expanded, combine = _decimal_means(calls)
    grouped_keys, results = _aggregate_groups(expanded, keys)
    return grouped_keys, _decimal_results(calls, _nan_greatest(combine(results), nan_flags))


def _aggregate_groups(
    calls: Sequence[tuple[str, pa.Array | None]], keys: Sequence[pa.Array]
) -> tuple[list[pa.Array], list[pa.Array]]:
    dense = _dense_groups(calls, keys)
    if dense is not None:
        return dense
    columns: dict[str, pa.Array] = {f"k{i}": key for i, key in enumerate(keys)}
    length = len(keys[0]) if keys else 0
    columns["first"] = pa.array(np.arange(length, dtype=np.int64))
    aggregations: list[tuple[Any, str]] = [("first", "min")]
    names = []
    for i, (name, values) in enumerate(calls):
        if name == COUNT_ALL or (name == "count" and values.null_count == 0):  # no column to hash
            if "count_all" not in names:
                aggregations.append(([], "count_all"))
            names.append("count_all")
            continue
        column = f"v{i}"
        columns[column] = _aggregatable(name, values)
        aggregations.append((column, _hash_function(name)))
        names.append(f"{column}_{_hash_function(name)}")
    try:
        grouped = pa.table(columns).group_by(
            list(columns)[: len(keys)], use_threads=_any_order(calls)
        )
        grouped = grouped.aggregate(aggregations)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise _aggregate_error(calls, err) from err
    # Acero's group order is not always first appearance (several keys with nulls): sort by it.
    grouped = grouped.take(pc.sort_indices(grouped["first_min"]))
    results = [grouped[name].combine_chunks() for name in names]
    return [grouped[f"k{i}"].combine_chunks() for i in range(len(keys))], results


def _any_order(calls: Sequence[tuple[str, pa.Array | None]]) -> bool:
    """Whether the aggregates of ``calls`` are the same whatever order the values come in, so
    that Acero may aggregate on several threads (the groups are put in order afterwards): not
    a sum or average of floats, whose rounding depends on the order."""
    return not any(
        name in ("sum", "avg") and values is not None and pa.types.is_floating(values.type)
        for name, values in calls
    )


def _nan_checks(
    calls: Sequence[tuple[str, pa.Array | None]],
) -> tuple[list[tuple[str, pa.Array | None]], dict[int, int]]:
    """``calls`` and, for each ``max`` of floats holding a NaN, a ``max`` of where they are NaN
    (appended; by the index of the call it checks): NaN is the greatest float, as in ordering and
    on Spark, where Arrow's ``max`` skips NaN unless every value is NaN (its ``min`` agrees)."""
    checked = list(calls)
    flags: dict[int, int] = {}
    for i, (name, values) in enumerate(calls):
        if name == "max" and values is not None and pa.types.is_floating(values.type):
            is_nan = pc.is_nan(values)
            if pc.any(is_nan).as_py():
                flags[i] = len(checked)
                checked.append(("max", is_nan.cast(pa.int8())))
    return checked, flags


def _nan_greatest(results: list[pa.Array], flags: dict[int, int]) -> list[pa.Array]:
    """The results of the calls :func:`_nan_checks` checked, NaN where a group held one."""
    if not flags:
        return results
    fixed = list(results)
    for call, flag in flags.items():
        nan = pa.scalar(float("nan"), results[call].type)
        fixed[call] = pc.if_else(pc.equal(results[flag], 1), nan, results[call])
    return fixed[: len(results) - len(flags)]


COUNT_ALL = "count_all"
"""The call :func:`aggregate_groups` takes for ``count`` of a value never null (``count(1)``)."""

_INTEGER_NUMPY = (
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
)
_DENSE_REDUCERS = {"sum": np.add, "min": np.minimum, "max": np.maximum}


def _dense_groups(
    calls: Sequence[tuple[str, pa.Array | None]], keys: Sequence[pa.Array]
) -> tuple[list[pa.Array], list[pa.Array]] | None:
    """:func:`aggregate_groups` for one integer key spanning few values (at most four per row) and
    counts, sums, mins and maxes of integers without nulls: each key (less the smallest, unless
    that is small) is its group's slot, so NumPy adds into the slots with no hashing. None where
    that does not apply.
    The results are Acero's: sums cannot overflow here (checked), groups in first-appearance order.
    """
    if (
        len(keys) != 1
        or not len(keys[0])
        or keys[0].null_count
        or keys[0].type not in _INTEGER_NUMPY
    ):
        return None
    key, n = keys[0], len(keys[0])
    bounds = pc.min_max(key)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    span = high - low + 1
    if span > max(4 * n, 1024) or not all(_dense_fits(name, values, n) for name, values in calls):
        return None
    offset = 0 if 0 <= low <= span else low  # small keys are slots already (a few unused)
    slots = key.to_numpy().astype(np.intp, copy=False)
    if offset:
        slots = slots - offset
    span = high - offset + 1
    rows = np.bincount(slots, minlength=span)
    order = _first_appearance(slots)
    results = []
    for name, values in calls:
        if name in (COUNT_ALL, "count"):
            if values is None or not values.null_count:
                results.append(pa.array(rows[order], pa.int64()))
                continue
            counted = np.bincount(slots[values.is_valid()], minlength=span)
            results.append(pa.array(counted[order], pa.int64()))
            continue
        assert values is not None
        if pa.types.is_decimal(values.type):  # a sum of their unscaled integers (_dense_fits)
            out = np.zeros(span, dtype=np.int64)
            np.add.at(out, slots, _unscaled(values))
            whole = pa.array(out[order]).cast(pa.decimal128(38, 0))
            results.append(whole.view(pa.decimal128(38, values.type.scale)))  # Acero's sum type
            continue
        numbers = values.to_numpy()
        if name == "sum":
            out = np.zeros(span, dtype=np.int64)
            numbers, dtype = numbers.astype(np.int64, copy=False), pa.int64()
        else:
            start = np.iinfo(numbers.dtype).max if name == "min" else np.iinfo(numbers.dtype).min
            out, dtype = np.full(span, start, dtype=numbers.dtype), values.type
        _DENSE_REDUCERS[name].at(out, slots, numbers)
        results.append(pa.array(out[order], dtype))
    return [pa.array(order + offset, key.type)], results


def _first_appearance(slots: np.ndarray) -> np.ndarray:
    """The distinct ``slots`` in order of first appearance: the first row of
    every slot (``np.minimum.at``, one pass, no sort of the rows), the slots sorted by it.

    >>> _first_appearance(np.array([3, 1, 3, 0, 1])).tolist()
    [3, 1, 0]
    """
    rows = len(slots)
    first = np.full(int(slots.max()) + 1, rows, dtype=np.int64)
    np.minimum.at(first, slots, np.arange(rows, dtype=np.int64))
    found = np.flatnonzero(first < rows)
    return found[np.argsort(first[found])]


def _unscaled(values: pa.Array) -> np.ndarray:
    """The unscaled integers of ``decimal128`` values of at most 18 digits, each of which fits
    an int64: the low 8 bytes of each 16-byte (little-endian) value, read in place.

    >>> from decimal import Decimal
    >>> _unscaled(pa.array([Decimal("1.25"), Decimal("-0.50")], pa.decimal128(5, 2))).tolist()
    [125, -50]
    """
    words = np.frombuffer(values.buffers()[1], dtype="<i8")
    return words[2 * values.offset : 2 * (values.offset + len(values)) : 2]


def _dense_fits(name: str, values: pa.Array | None, n: int) -> bool:
    """Whether :func:`_dense_groups` computes ``name`` over ``values`` exactly as Acero would."""
    if name == COUNT_ALL or (name == "count" and isinstance(values, pa.Array)):
        return True
    if name not in _DENSE_REDUCERS or not isinstance(values, pa.Array) or values.null_count:
        return False
    if name == "sum" and pa.types.is_decimal128(values.type) and values.type.precision <= 18:
        numbers = _unscaled(values)
        largest = int(np.abs(numbers).max()) if len(numbers) else 0
        return largest * n < 2**63
    if values.type not in _INTEGER_NUMPY or not pa.types.is_signed_integer(values.type):
        return False
    if name != "sum" or not len(values):
        return True
    bounds = pc.min_max(values)
    largest = max(abs(bounds["min"].as_py()), abs(bounds["max"].as_py()))
    return largest * n < 2**63  # no partial sum can overflow: Acero's sums, not wrapped ones


def _reduce_runs(name: str, values: pa.Array, starts: np.ndarray) -> pa.Array | None:
    """``count`` and ``sum`` of numbers per run by NumPy reductions over the contiguous runs
    (what the hash aggregation would give, without hashing); None for anything else."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if name not in ("count", "sum") or not len(values):
        return None
    dtype = values.type
    integral = pa.types.is_integer(dtype)
    if not (integral or pa.types.is_floating(dtype)) and name != "count":
        return None
    firsts = np.flatnonzero(starts)
    valid = ~values.is_null().to_numpy(zero_copy_only=False)
    counts = np.add.reduceat(valid.astype(np.int64), firsts)
    if name == "count":
        return pa.array(counts, pa.int64())
    target = pa.int64() if integral else pa.float64()
    numbers = pc.fill_null(values.cast(target), 0).to_numpy(zero_copy_only=False)
    sums = np.add.reduceat(numbers, firsts)
    return pa.array(sums, target, mask=counts == 0)


def aggregate_empty(calls: Sequence[tuple[str, pa.Array]]) -> list[pa.Array]:
    """The aggregates of no records at all: 0 for the counts, null for the others."""
    out = []
    for name, values in calls:
        target = _decimal_target(name, values)
        if name in ("count", "count_distinct"):
            out.append(pa.array([0], pa.int64()))
        elif target is not None:
            out.append(pa.nulls(1, to_arrow(target)))
        else:
            out.append(pa.nulls(1, _aggregatable(name, values).type))
    return out


def _hash_function(name: str) -> str:
    try:
        return _HASH_AGGREGATES[name]
    except KeyError:
        raise AggregateError(
            f"'{name}' is not an aggregate function; use one of {', '.join(AGGREGATE_FUNCTIONS)}"
        ) from None


def _aggregatable(name: str, values: pa.Array) -> pa.Array:
    if pa.types.is_null(values.type):
        return values.cast(pa.float64() if name == "avg" else pa.int64())
    if pa.types.is_dictionary(values.type):
        return values.dictionary_decode()
    if name in ("sum", "avg") and not _is_number(values.type):
        raise AggregateError(f"{name}() needs numbers, got values of type {values.type}")
    if name == "avg" and pa.types.is_decimal(values.type):
        # Acero's mean keeps the input's scale: widened first, it has the scale avg gives.
        target = coercion.avg_type(from_arrow(values.type))
        return values.cast(pa.decimal128(target.precision or 38, target.scale or 0))
    if name == "sum" and pa.types.is_decimal128(values.type) and not _sums_fit_38(values):
        # Acero sums decimal128 values in 38 digits and wraps past them, silently: summed in
        # decimal256, a total of more digits than sum's DECIMAL is an error (_decimal_results).
        return values.cast(pa.decimal256(76, values.type.scale))
    return values


def _sums_fit_38(values: pa.Array) -> bool:
    """Whether every sum of ``values`` (decimal128) surely fits 38 digits: the digits the largest
    value uses plus those of the number of values are at most 38.

    >>> from decimal import Decimal
    >>> _sums_fit_38(pa.array([Decimal("9" * 37)] * 9, pa.decimal128(38, 0)))
    True
    >>> _sums_fit_38(pa.array([Decimal("9" * 37)] * 10, pa.decimal128(38, 0)))
    False
    """
    count_digits = len(str(len(values)))
    if values.type.precision + count_digits <= MAX_DECIMAL_PRECISION:
        return True
    used = decimals.used_digits(values)
    return used + count_digits <= MAX_DECIMAL_PRECISION


def _is_number(dtype: pa.DataType) -> bool:
    return pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype)


def _aggregate_error(
    calls: Sequence[tuple[str, pa.Array | None]], err: Exception
) -> AggregateError:
    names = ", ".join(f"{name}() of {values.type}" for name, values in calls if values is not None)
    return AggregateError(f"cannot aggregate {names}: {err}")


# ------------------------------------------------------------------------- running functions

RunningFunction = Callable[[pa.Array, np.ndarray], pa.Array]


def running(name: str, values: pa.Array, starts: np.ndarray) -> pa.Array:
    """The running ``name`` of ``values``: for every record, the aggregate of its run up to it.

    ``row_number`` ignores ``values``; ``sum``, ``min`` and ``max`` skip nulls and are null until
    the run's first non-null value; ``avg`` is rewritten to ``sum / count`` by the operator.
    """
    try:
        function = RUNNING_FUNCTIONS[name]
    except KeyError:
        raise AggregateError(
            f"'{name}' is not a running function; use one of {', '.join(RUNNING_FUNCTIONS)}, avg"
        ) from None
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    return function(values, starts)


def continue_running(name: str, result: pa.Array, carry: pa.Scalar) -> pa.Array:
    """``result`` (the running values of a run's continuation in a new batch) combined with
    ``carry``, the running value at the end of the previous batch."""
    if not carry.is_valid:
        return result
    if name in ("row_number", "count"):
        return pc.add(result, carry)
    if name == "sum":
        return pc.coalesce(pc.add(result, carry), carry)
    if name in ("min", "max"):
        combine = pc.min_element_wise if name == "min" else pc.max_element_wise
        try:
            return combine(result, carry, skip_nulls=True)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as err:
            raise AggregateError(
                f"running {name}() cannot compare {carry.type} with {result.type}"
            ) from err
    raise AggregateError(f"'{name}' is not a running function")


def _row_number(values: pa.Array, starts: np.ndarray) -> pa.Array:
    positions = np.arange(len(starts), dtype=np.int64)
    return pa.array(positions - run_first_index(starts) + 1)


def _count(values: pa.Array, starts: np.ndarray) -> pa.Array:
    valid = (~_null_mask(values)).astype(np.int64)
    return pa.array(_cumulative_sum(valid, starts))


def _sum(values: pa.Array, starts: np.ndarray) -> pa.Array:
    if pa.types.is_null(values.type):
        return pa.nulls(len(values), pa.int64())
    if not _is_number(values.type):
        raise AggregateError(f"sum() needs numbers, got values of type {values.type}")
    valid = ~_null_mask(values)
    seen = _cumulative_sum(valid.astype(np.int64), starts) > 0
    if pa.types.is_decimal(values.type):
        return _decimal_running_sum(values, starts, seen)
    if pa.types.is_integer(values.type):
        numbers = pc.fill_null(values.cast(pa.int64()), 0).to_numpy()
        sums = _cumulative_sum(numbers, starts)
    else:
        numbers = pc.fill_null(values.cast(pa.float64()), 0.0).to_numpy()
        sums = _segmented_scan(numbers, starts, np.add)
    return pa.array(sums, mask=~seen)


def _decimal_running_sum(values: pa.Array, starts: np.ndarray, seen: np.ndarray) -> pa.Array:
    """Running sums of decimals, exact: Python decimals (there is no Arrow scan for them)."""
    target = coercion.sum_type(from_arrow(values.type))
    sums: list[object] = []
    total = 0
    for start, value in zip(starts.tolist(), values.to_pylist(), strict=True):
        total = (0 if start else total) + (value or 0)
        sums.append(total)
    wide = pa.array(sums, pa.decimal256(76, target.scale or 0), mask=~seen)
    try:
        return decimals.fit(wide, target, "sum")
    except decimals.DecimalError as err:
        raise AggregateError(f"sum(): {err}") from err


def _min(values: pa.Array, starts: np.ndarray) -> pa.Array:
    return _extreme(values, starts, largest=False)


def _max(values: pa.Array, starts: np.ndarray) -> pa.Array:
    return _extreme(values, starts, largest=True)


def _extreme(values: pa.Array, starts: np.ndarray, *, largest: bool) -> pa.Array:
    """Running min or max of any sortable type, through the values' dense ranks: the running max
    of ``run * K + rank`` over the whole input stays inside each run because later runs are larger.
    """
    n = len(values)
    if pa.types.is_null(values.type) or n == 0:
        return values
    try:
        ranks = pc.rank(values, sort_keys="ascending", tiebreaker="dense").to_numpy()
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise AggregateError(
            f"running {'max' if largest else 'min'}() cannot order {values.type}"
        ) from err
    ranks = ranks.astype(np.int64)
    null = _null_mask(values)
    top = int(ranks.max()) + 1
    # Rank 0 marks "no value yet"; for min the ranks are mirrored so a larger key is a smaller value.
    keys = np.where(null, 0, ranks if largest else top - ranks)
    base = (np.cumsum(starts) - 1) * (top + 1)
    best = np.maximum.accumulate(keys + base) - base
    chosen = best if largest else top - best
    index_of_rank = np.zeros(top + 1, dtype=np.int64)
    index_of_rank[ranks[~null]] = np.flatnonzero(~null)
    indices = index_of_rank[chosen]
    return values.take(pa.array(indices, mask=best == 0))


def _cumulative_sum(numbers: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Exact per-run cumulative sums of integers: a global cumsum minus the sum before each run."""
    total = np.cumsum(numbers)
    first = run_first_index(starts)
    return total - (total[first] - numbers[first])


def _segmented_scan(values: np.ndarray, starts: np.ndarray, ufunc: np.ufunc) -> np.ndarray:
    """An inclusive per-run scan (Hillis-Steele): log2(longest run) vectorised passes. Used for
    floating-point sums, where subtracting a global prefix would lose precision."""
    out = values.copy()
    n = len(out)
    if n == 0:
        return out
    first = run_first_index(starts)
    offset = np.arange(n) - first
    longest = int(offset.max()) + 1
    step = 1
    while step < longest:
        inside = offset[step:] >= step
        out[step:] = np.where(inside, ufunc(out[step:], out[:-step]), out[step:])
        step *= 2
    return out


RUNNING_FUNCTIONS: dict[str, RunningFunction] = {
    "row_number": _row_number,
    "count": _count,
    "sum": _sum,
    "min": _min,
    "max": _max,
}
"""The running functions runningaggregate computes directly (``avg`` is ``sum / count``)."""
