"""Runs, aggregate functions and running functions on Arrow arrays, against plain Python."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.exec.local.aggregate_functions import (
    COUNT_ALL,
    AggregateError,
    RunSplitter,
    aggregate_empty,
    aggregate_groups,
    aggregate_runs,
    continue_running,
    run_first_index,
    run_last_index,
    run_starts,
    running,
    same_pairs,
)
from engine.exec.local.buffering import BatchBuffer
from engine.expr import FunctionKind, parse_expression
from engine.expr.rewrite import split_calls


def test_runs_start_where_the_value_changes_and_nulls_are_equal() -> None:
    starts = run_starts(pa.array([1, 1, None, None, 2, 1]))
    assert starts.tolist() == [True, False, True, False, True, True]
    assert run_first_index(starts).tolist() == [0, 0, 2, 2, 4, 5]
    assert run_last_index(starts).tolist() == [1, 1, 3, 3, 4, 5]


def test_runs_compare_maps_and_lists_deeply() -> None:
    values = pa.array(
        [{"a": 1, "b": [1, 2]}, {"a": 1, "b": [1, 2]}, {"a": 1, "b": [1, 3]}, {"a": 1, "b": [1]}]
    )
    assert run_starts(values).tolist() == [True, False, True, True]
    lists = pa.array([[1], [1], [], [], None, [None], [None]])
    assert run_starts(lists).tolist() == [True, False, True, False, True, True, False]


def test_same_pairs_of_different_types_never_match() -> None:
    assert same_pairs(pa.array(["1"]), pa.array([{"a": 1}])).tolist() == [False]


def test_aggregates_per_run() -> None:
    starts = run_starts(pa.array(["a", "a", "b", "b", "b"]))
    values = pa.array([1, None, 3, 3, None])
    names = ["count", "sum", "min", "max", "avg", "count_distinct"]
    results = aggregate_runs([(name, values) for name in names], starts)
    assert [r.to_pylist() for r in results] == [[1, 2], [1, 6], [1, 3], [1, 3], [1.0, 3.0], [1, 1]]
    assert results[1].type == pa.int64()  # sum of integers stays an integer


def test_sum_of_floats_is_a_float_and_strings_have_a_min() -> None:
    starts = run_starts(pa.array([0, 0]))
    total, smallest = aggregate_runs(
        [("sum", pa.array([0.5, 1])), ("min", pa.array(["b", "a"]))], starts
    )
    assert total.to_pylist() == [1.5] and smallest.to_pylist() == ["a"]


def test_a_run_of_nulls_sums_to_null_and_counts_zero() -> None:
    starts = run_starts(pa.array([0, 0]))
    values = pa.nulls(2)
    assert [
        r.to_pylist() for r in aggregate_runs([("count", values), ("sum", values)], starts)
    ] == [
        [0],
        [None],
    ]


def test_aggregates_of_nothing() -> None:
    results = aggregate_empty(
        [("count", pa.array([], pa.int64())), ("max", pa.array([], pa.string()))]
    )
    assert [r.to_pylist() for r in results] == [[0], [None]]
    assert results[1].type == pa.string()


def test_sum_of_text_is_a_clear_error() -> None:
    with pytest.raises(AggregateError, match="sum\\(\\) needs numbers"):
        aggregate_runs([("sum", pa.array(["x"]))], np.array([True]))
    with pytest.raises(AggregateError, match="sum\\(\\) needs numbers"):
        running("sum", pa.array(["x"]), np.array([True]))


def test_running_functions_restart_with_each_run() -> None:
    starts = run_starts(pa.array(["a", "a", "a", "b", "b"]))
    values = pa.array([2, None, 1, 5, 7])
    got = {
        name: running(name, values, starts).to_pylist()
        for name in ("row_number", "count", "sum", "min", "max")
    }
    assert got == {
        "row_number": [1, 2, 3, 1, 2],
        "count": [1, 1, 2, 1, 2],
        "sum": [2, 2, 3, 5, 12],
        "min": [2, 2, 1, 5, 5],
        "max": [2, 2, 2, 5, 7],
    }


def test_running_sum_is_null_until_the_first_value_and_min_orders_text() -> None:
    starts = run_starts(pa.array([0, 0, 0]))
    assert running("sum", pa.array([None, 1.5, 2.0]), starts).to_pylist() == [None, 1.5, 3.5]
    assert running("min", pa.array(["b", None, "a"]), starts).to_pylist() == ["b", "b", "a"]


def test_a_run_continuing_from_the_previous_batch_adds_the_carry() -> None:
    assert continue_running("sum", pa.array([None, 3]), pa.scalar(10)).to_pylist() == [10, 13]
    assert continue_running("max", pa.array([1, 20]), pa.scalar(10)).to_pylist() == [10, 20]
    assert continue_running("count", pa.array([1]), pa.scalar(4)).to_pylist() == [5]
    assert continue_running("sum", pa.array([1]), pa.scalar(None, pa.int64())).to_pylist() == [1]


def test_split_calls_replaces_aggregates_by_columns() -> None:
    scalar, calls = split_calls(
        parse_expression("if sum(a) > 0 then sum(a) / count(1) else 0 end"),
        FunctionKind.AGGREGATE,
        "c",
    )
    assert [str(c) for c in calls] == ["sum(a)", "count(1)"]
    assert str(scalar) == "if c0 > 0 then c0 / c1 else 0 end"


def test_the_run_splitter_returns_runs_only_once_they_are_complete() -> None:
    splitter = RunSplitter(("g",), BatchBuffer("1", "op", max_bytes=1 << 20))
    assert splitter.add(pa.record_batch({"g": [1, 1]})) is None
    assert splitter.add(pa.record_batch({"g": [1]})) is None
    done = splitter.add(pa.record_batch({"g": [2, 3, 3]}))
    assert done is not None and done.column("g").to_pylist() == [1, 1, 1, 2]
    done = splitter.add(pa.record_batch({"g": [4]}))
    assert done is not None and done.column("g").to_pylist() == [3, 3]
    rest = splitter.finish()
    assert rest is not None and rest.column("g").to_pylist() == [4]
    assert splitter.finish() is None


def python_runs(keys: list[Any]) -> list[list[int]]:
    runs: list[list[int]] = []
    for i, key in enumerate(keys):
        if runs and keys[runs[-1][-1]] == key:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


numbers = st.lists(
    st.tuples(st.sampled_from(["a", "b", None]), st.none() | st.integers(-50, 50)), max_size=30
)


@given(numbers, st.booleans())
@settings(max_examples=80, deadline=None)
def test_aggregates_match_python(rows: list[tuple[Any, Any]], floats: bool) -> None:
    keys = [k for k, _ in rows]
    values = [None if v is None else (v / 4 if floats else v) for _, v in rows]
    starts = run_starts(pa.array(keys, pa.string()))
    array = pa.array(values, pa.float64() if floats else pa.int64())
    names = ["count", "sum", "min", "max", "count_distinct"]
    got = (
        [r.to_pylist() for r in aggregate_runs([(n, array) for n in names], starts)] if rows else []
    )
    for i, run in enumerate(python_runs(keys)):
        present = [values[j] for j in run if values[j] is not None]
        expected = [
            len(present),
            sum(present) if present else None,
            min(present, default=None),
            max(present, default=None),
            len(set(present)),
        ]
        actual = [column[i] for column in got]
        assert actual[0] == expected[0] and actual[2:] == expected[2:]
        assert (actual[1] is None) == (expected[1] is None)
        if expected[1] is not None:
            assert math.isclose(actual[1], expected[1], abs_tol=1e-9)


@given(numbers, st.booleans())
@settings(max_examples=80, deadline=None)
def test_running_functions_match_python(rows: list[tuple[Any, Any]], floats: bool) -> None:
    keys = [k for k, _ in rows]
    values = [None if v is None else (v / 4 if floats else v) for _, v in rows]
    starts = run_starts(pa.array(keys, pa.string()))
    array = pa.array(values, pa.float64() if floats else pa.int64())
    got = {
        name: running(name, array, starts).to_pylist() for name in ("count", "sum", "min", "max")
    }
    for run in python_runs(keys):
        seen: list[Any] = []
        for j in run:
            if values[j] is not None:
                seen.append(values[j])
            assert got["count"][j] == len(seen)
            assert got["min"][j] == min(seen, default=None)
            assert got["max"][j] == max(seen, default=None)
            if seen:
                assert math.isclose(got["sum"][j], sum(seen), abs_tol=1e-9)
            else:
                assert got["sum"][j] is None


def test_counts_without_nulls_count_the_group_rows() -> None:
    keys = [pa.array(["b", "a", "b", "a", "b"])]
    ones = pa.array([1] * 5)
    with_nulls = pa.array([None, 2, 3, None, None])
    grouped, results = aggregate_groups(
        [("count", ones), ("count", with_nulls), ("sum", ones), ("count", ones)], keys
    )
    assert [g.to_pylist() for g in grouped] == [["b", "a"]]
    assert [r.to_pylist() for r in results] == [[3, 2], [1, 1], [3, 2], [3, 2]]


@settings(max_examples=150, deadline=None)
@given(
    keys=st.lists(st.integers(-3, 3), min_size=1, max_size=30),
    data=st.data(),
    key_type=st.sampled_from([pa.int64(), pa.int8(), pa.uint16()]),
)
def test_integer_keys_group_as_python_does(keys: list[int], data: Any, key_type: Any) -> None:
    # Keys spanning few values take the NumPy slots, not the hash aggregation: same results.
    if pa.types.is_unsigned_integer(key_type):
        keys = [k + 3 for k in keys]
    n = len(keys)
    values = data.draw(st.lists(st.integers(-(2**40), 2**40), min_size=n, max_size=n))
    small = pa.array([v % 100 for v in values], pa.int32())
    with_nulls = pa.array([None if v % 3 == 0 else v for v in values])
    calls = [
        (COUNT_ALL, None),
        ("count", with_nulls),
        ("sum", pa.array(values)),
        ("sum", small),
        ("min", small),
        ("max", pa.array(values)),
        ("sum", with_nulls),  # nulls: left to Arrow, with the rest
    ]
    for chosen in (calls[:-1], calls):
        grouped, results = aggregate_groups(chosen, [pa.array(keys, key_type)])
        order = list(dict.fromkeys(keys))
        assert grouped[0].type == key_type and grouped[0].to_pylist() == order
        for (name, array), result in zip(chosen, results, strict=True):
            column = [None] * n if array is None else array.to_pylist()
            expected = []
            for key in order:
                seen = [v for k, v in zip(keys, column, strict=True) if k == key]
                present = [v for v in seen if v is not None]
                expected.append(
                    {
                        COUNT_ALL: len(seen),
                        "count": len(present),
                        "sum": sum(present) if present else None,
                        "min": min(present, default=None),
                        "max": max(present, default=None),
                    }[name]
                )
            assert result.to_pylist() == expected, name
            want = {"sum": pa.int64(), "min": array.type if array else None}.get(name)
            assert want is None or result.type == want


def test_sums_that_could_overflow_are_left_to_arrow() -> None:
    big = 2**62
    grouped, (total,) = aggregate_groups([("sum", pa.array([big, 1, big]))], [pa.array([1, 2, 1])])
    # Arrow's int64 sum wraps around; the NumPy slots must not give another answer.
    assert grouped[0].to_pylist() == [1, 2]
    assert total.to_pylist() == [pa.array([big]).to_pylist()[0] * 2 - 2**64, 1]


@pytest.mark.parametrize(
    "keys",
    [
        [5] * 3000 + [7] + [5] * 10,  # a group first seen after the rows the prefix looks at
        [-128, 127] * 700,  # int8 keys whose slots do not fit an int8
        [10**12 + k % 5 for k in range(2000)],  # large keys, few values
    ],
)
def test_first_appearance_of_integer_keys_anywhere(keys: list[int]) -> None:
    dtype = pa.int8() if min(keys) < 0 else pa.int64()
    grouped, (counts, sums) = aggregate_groups(
        [(COUNT_ALL, None), ("sum", pa.array(range(len(keys))))], [pa.array(keys, dtype)]
    )
    order = list(dict.fromkeys(keys))
    assert grouped[0].to_pylist() == order
    assert counts.to_pylist() == [keys.count(k) for k in order]
    assert sums.to_pylist() == [sum(i for i, k in enumerate(keys) if k == g) for g in order]


def test_max_of_floats_is_nan_where_a_run_or_group_holds_one_as_on_spark() -> None:
    """NaN is the greatest float (as in ordering, and Spark's ``max``); Arrow's ``max`` skips
    it unless every value is NaN. ``min`` skips it the same in both."""
    values = pa.array([2.0, float("nan"), float("nan"), None, float("nan"), None, 1.0])
    keys = pa.array([1, 1, 2, 2, 3, 4, 5])
    _, (most, least, total) = aggregate_groups(
        [("max", values), ("min", values), ("sum", values)], [keys]
    )
    assert str(most.to_pylist()) == "[nan, nan, nan, None, 1.0]"
    assert str(least.to_pylist()) == "[2.0, nan, nan, None, 1.0]"
    assert str(total.to_pylist()) == "[nan, nan, nan, None, 1.0]"
    starts = np.array([1, 0, 1, 0, 1, 1, 1], dtype=bool)
    most, least = aggregate_runs([("max", values), ("min", values)], starts)
    assert str(most.to_pylist()) == "[nan, nan, nan, None, 1.0]"
    assert str(least.to_pylist()) == "[2.0, nan, nan, None, 1.0]"
    (plain,) = aggregate_runs([("max", pa.array([2.0, None, 3.0]))], starts[:3])
    assert plain.to_pylist() == [2.0, 3.0]


def test_a_decimal_sum_past_38_digits_is_an_error_not_a_wrapped_value() -> None:
    """Arrow sums decimal128 in 38 digits and wraps past them; Spark's ANSI mode fails there."""
    big = Decimal("9" * 38)
    values = pa.array([big, big, Decimal(1)], pa.decimal128(38, 0))
    with pytest.raises(AggregateError, match=r"does not fit its type DECIMAL\(38, 0\) \(in sum\)"):
        aggregate_groups([("sum", values)], [pa.array([1, 1, 2])])
    with pytest.raises(AggregateError, match=r"does not fit its type DECIMAL\(38, 0\)"):
        aggregate_runs([("sum", values)], np.array([True, False, True]))
    with pytest.raises(AggregateError, match=r"does not fit its type DECIMAL\(38, 0\)"):
        aggregate_runs([("avg", values)], np.array([True, False, True]))  # its sum overflows


def test_decimal_sums_close_to_38_digits_are_exact() -> None:
    big, less = Decimal("9" * 36 + ".5"), Decimal("-1" + "0" * 35)
    values = pa.array([big, less, less, big, None], pa.decimal128(38, 1))
    with localcontext(prec=40):
        total = big + 2 * less
    _, (sums,) = aggregate_groups([("sum", values)], [pa.array([1, 1, 1, 2, 2])])
    assert sums.type == pa.decimal128(38, 1)
    assert sums.to_pylist() == [total, big]
    (runs,) = aggregate_runs([("sum", values)], np.array([True, False, False, True, False]))
    assert runs.to_pylist() == [total, big]
