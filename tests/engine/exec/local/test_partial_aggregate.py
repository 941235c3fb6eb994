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


def test_aggregates_that_do_not_combine_still_buffer_their_input() -> None:
    with pytest.raises(ExecutionError, match="needs to buffer more than"):
        global_(batches(), LIMIT, [{"ref": "k", "expr": "count_distinct(s)"}])


def test_float_group_keys_are_buffered_as_before() -> None:
    data = [pa.record_batch({"g": [float(i % 3) for i in range(1000)]}) for _ in range(40)]
    with pytest.raises(ExecutionError, match="needs to buffer more than"):
        grouped(data, LIMIT, [{"ref": "n", "expr": "count(1)"}])
    (row, *_) = grouped(data, ROOMY, [{"ref": "n", "expr": "count(1)"}])
    assert row == {"g": 0.0, "n": 13_360}


def test_partial_decimal_sums_keep_the_sums_type() -> None:
    partials = PartialAggregates("7", max_bytes=1 << 20, grouped=False)
    values = pa.array([Decimal("99999.99")] * 3, pa.decimal128(7, 2))
    for _ in range(4):
        partials.add([], [("sum", values), ("avg", values)], 3)
    _, (total, mean) = partials.result()
    assert total.type == pa.decimal128(17, 2) and total.to_pylist() == [Decimal("1199999.88")]
    assert mean.type == pa.decimal128(11, 6) and mean.to_pylist() == [Decimal("99999.990000")]


def test_a_segment_without_expressions_buffers_its_one_group() -> None:
    count = [{"ref": "n", "expr": "count(1)"}]
    assert grouped(batches(4), ROOMY, count, exprs=()) == [{"n": 4000}]
    with pytest.raises(ExecutionError, match="needs to buffer more than"):
        grouped(batches(), LIMIT, count, exprs=())
