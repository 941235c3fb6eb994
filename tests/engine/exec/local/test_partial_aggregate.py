"""Aggregates of an input larger than ``max_buffered_bytes``: a grouping or global
collapsingaggregate keeps its groups' partial results, not its input, and gives what one
aggregate of the whole input gives."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from engine.errors import ExecutionError
from engine.exec.local.aggregate import create_collapsing
from engine.exec.local.partial_aggregate import PartialAggregates
from engine.exec.local.registry import ExecContext
from engine.exec.local.segment_aggregate import SegmentAggregateOperator
from engine.exec.protocol import BatchSource, FragmentExecutor
from engine.plan.operators import CollapsingAggregate, Segment

LIMIT = 64 * 1024  # far below the input: only partial results fit
# partial results per group and distinct value: more of them, still a few times below the input
DISTINCT_LIMIT = 256 * 1024
ROOMY = 1 << 30  # the whole input fits: one aggregate of all of it


def batches(count: int = 40, rows: int = 1000) -> list[pa.RecordBatch]:
    """``count`` batches of ``rows`` records (about 40 KB each) over groups "a" to "e", in an
    order where "e" first appears late."""
    out = []
    for b in range(count):
        n = [b * rows + i for i in range(rows)]
        out.append(
            pa.record_batch(
                {
                    "g": ["abcd"[i % 4] if b < count // 2 else "abcde"[i % 5] for i in n],
                    "i": [i % 97 if i % 11 else None for i in n],
                    "d": pa.array([Decimal(i % 1000) / 100 for i in n], pa.decimal128(7, 2)),
                    "f": [(i % 13) / 7 for i in n],
                    "s": [f"name{i % 389:04d}" for i in n],
                }
            )
        )
    return out


AGGREGATIONS = [
    {"ref": "n", "expr": "count(1)"},
    {"ref": "ni", "expr": "count(i)"},
    {"ref": "si", "expr": "sum(i)"},
    {"ref": "sd", "expr": "sum(d)"},
    {"ref": "ad", "expr": "avg(d)"},
    {"ref": "af", "expr": "avg(f)"},
    {"ref": "lo", "expr": "min(s)"},
    {"ref": "hi", "expr": "max(f)"},
    {"ref": "ratio", "expr": "sum(i) / count(1)"},
]


def grouped(
    data: list[pa.RecordBatch],
    limit: int,
    aggregations: list[dict[str, str]],
    exprs: tuple[str, ...] = ("g",),
) -> list:
    segment = Segment(id="2", ref="seg", exprs=list(exprs))
    collapse = CollapsingAggregate.model_validate(
        {
            "@id": 3,
            "op": "collapsingaggregate",
            "within": "seg",
            "carryovers": list(exprs),
            "aggregations": aggregations,
        }
    )
    context = ExecContext(max_buffered_bytes=limit)
    fused = SegmentAggregateOperator(segment, collapse, BatchSource("1", data), context)
    return FragmentExecutor(fused).run().to_pylist()


def global_(data: list[pa.RecordBatch], limit: int, aggregations: list[dict[str, str]]) -> list:
    op = CollapsingAggregate.model_validate(
        {"@id": 2, "op": "collapsingaggregate", "aggregations": aggregations}
    )
    context = ExecContext(max_buffered_bytes=limit)
    runtime = create_collapsing(op, [BatchSource("1", data)], context)
    return [r for b in FragmentExecutor(runtime).batches() for r in b.to_pylist()]


def assert_same(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """Equal records; floats (a sum of chunk sums) to the last few digits."""
    assert [list(r) for r in got] == [list(r) for r in expected]
    for mine, theirs in zip(got, expected, strict=True):
        for name, value in theirs.items():
            if isinstance(value, float):
                assert math.isclose(mine[name], value, rel_tol=1e-12), name
            else:
                assert mine[name] == value, name


def test_a_grouping_aggregate_of_more_than_the_limit_gives_the_whole_inputs_results() -> None:
    data = batches()
    assert sum(b.nbytes for b in data) > 20 * LIMIT
    expected = grouped(data, ROOMY, AGGREGATIONS)
    got = grouped(data, LIMIT, AGGREGATIONS)
    assert [r["g"] for r in got] == ["a", "b", "c", "d", "e"]  # first appearance
    assert sum(r["n"] for r in got) == 40_000
    assert_same(got, expected)
    assert isinstance(got[0]["sd"], Decimal) and isinstance(got[0]["ad"], Decimal)


def test_a_global_aggregate_of_more_than_the_limit_gives_the_whole_inputs_results() -> None:
    data = batches()
    expected = global_(data, ROOMY, AGGREGATIONS)
    got = global_(data, LIMIT, AGGREGATIONS)
    assert got[0]["n"] == 40_000
    assert_same(got, expected)


def test_nan_stays_the_greatest_float_across_chunks() -> None:
    data = batches()
    data[3] = data[3].set_column(3, "f", pa.array([float("nan")] * data[3].num_rows))
    (row,) = global_(data, LIMIT, [{"ref": "hi", "expr": "max(f)"}])
    assert math.isnan(row["hi"])
    by_group = grouped(data, LIMIT, [{"ref": "hi", "expr": "max(f)"}])
    assert all(math.isnan(r["hi"]) for r in by_group if r["g"] != "e")
    assert not math.isnan(by_group[-1]["hi"])  # "e" first appears after the NaN batch


def test_groups_whose_results_outgrow_the_limit_stop_with_a_clear_error() -> None:
    data = [pa.record_batch({"g": [f"key{b}-{i}" for i in range(1000)]}) for b in range(40)]
    with pytest.raises(ExecutionError, match="partial results of its groups") as raised:
        grouped(data, LIMIT, [{"ref": "n", "expr": "count(1)"}])
    assert "max_buffered_bytes" in (raised.value.hint or "")


def test_count_distincts_of_two_arguments_still_buffer_their_input() -> None:
    counts = [
        {"ref": "k", "expr": "count_distinct(s)"},
        {"ref": "j", "expr": "count_distinct(i)"},
    ]
    with pytest.raises(ExecutionError, match="needs to buffer more than"):
        global_(batches(), LIMIT, counts)


DISTINCT = [
    {"ref": "ki", "expr": "count_distinct(i)"},
    {"ref": "n", "expr": "count(1)"},
    {"ref": "si", "expr": "sum(i)"},
    {"ref": "ad", "expr": "avg(d)"},
    {"ref": "per", "expr": "count(1) / count_distinct(i)"},
    {"ref": "hi", "expr": "max(f)"},
]


def test_a_grouping_count_distinct_past_the_limit_counts_each_groups_distinct_values() -> None:
    assert sum(b.nbytes for b in batches()) > 5 * DISTINCT_LIMIT
    expected = grouped(batches(), ROOMY, DISTINCT)
    got = grouped(batches(), DISTINCT_LIMIT, DISTINCT)
    assert [r["g"] for r in got] == ["a", "b", "c", "d", "e"]
    # i is i % 97 (null where i % 11 == 0): each group holds all 97 values, nulls not counted
    assert [r["ki"] for r in got] == [97] * 5
    assert sum(r["n"] for r in got) == 40_000
    assert_same(got, expected)


def test_a_global_count_distinct_past_the_limit_counts_the_distinct_values() -> None:
    counts = [{"ref": "ks", "expr": "count_distinct(s)"}, {"ref": "n", "expr": "count(1)"}]
    expected = global_(batches(), ROOMY, counts)
    got = global_(batches(), LIMIT, counts)
    assert got == expected == [{"ks": 389, "n": 40_000}]
    assert global_(batches(), DISTINCT_LIMIT, DISTINCT)[0]["ki"] == 97


def test_a_count_distinct_of_null_values_only_is_zero() -> None:
    data = [pa.record_batch({"g": ["a", "b"] * 500, "v": pa.nulls(1000, pa.int64())})] * 40
    counts = [{"ref": "k", "expr": "count_distinct(v)"}]
    assert grouped(data, LIMIT, counts, exprs=("g",)) == [{"g": "a", "k": 0}, {"g": "b", "k": 0}]
    assert global_(data, LIMIT, counts) == [{"k": 0}]


def test_count_distinct_of_floats_is_buffered_as_before() -> None:
    counts = [{"ref": "k", "expr": "count_distinct(f)"}]
    with pytest.raises(ExecutionError, match="needs to buffer more than"):
        global_(batches(), LIMIT, counts)
    assert global_(batches(4), ROOMY, counts) == [{"k": 13}]


def test_distinct_values_that_outgrow_the_limit_stop_with_a_clear_error() -> None:
    data = [pa.record_batch({"v": [f"value{b}-{i}" for i in range(1000)]}) for b in range(40)]
    with pytest.raises(ExecutionError, match="partial results of its groups"):
        global_(data, LIMIT, [{"ref": "k", "expr": "count_distinct(v)"}])


def test_float_group_keys_are_buffered_as_before() -> None:
    data = [pa.record_batch({"g": [float(i % 3) for i in range(1000)]}) for _ in range(40)]
    with pytest.raises(ExecutionError, match="needs to buffer more than"):
        grouped(data, LIMIT, [{"ref": "n", "expr": "count(1)"}])
    (row, *_) = grouped(data, ROOMY, [{"ref": "n", "expr": "count(1)"}])
    assert row == {"g": 0.0, "n": 13_360}


def test_partial_decimal_sums_keep_the_sums_type() -> None:
    partials = PartialAggregates("7", max_bytes=1 << 20)
    values = pa.array([Decimal("99999.99")] * 3, pa.decimal128(7, 2))
    for _ in range(4):
        partials.add([], [("sum", values), ("avg", values)], 3)
    _, (total, mean) = partials.result()
    assert total.type == pa.decimal128(17, 2) and total.to_pylist() == [Decimal("1199999.88")]
    assert mean.type == pa.decimal128(11, 6) and mean.to_pylist() == [Decimal("99999.990000")]


def test_a_segment_without_expressions_aggregates_its_one_group_past_the_limit() -> None:
    count = [{"ref": "n", "expr": "count(1)"}, {"ref": "ks", "expr": "count_distinct(s)"}]
    assert grouped(batches(4), ROOMY, count, exprs=()) == [{"n": 4000, "ks": 389}]
    assert grouped(batches(), LIMIT, count, exprs=()) == [{"n": 40_000, "ks": 389}]
