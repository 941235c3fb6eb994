"""The local collapsingaggregate and runningaggregate operators."""

from __future__ import annotations

import itertools
from typing import Any

import pyarrow as pa
import pytest
from corpus import check_case, load_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import ExecutionError
from engine.exec.local.aggregate import create_collapsing, create_running
from engine.exec.local.registry import ExecContext
from engine.exec.protocol import BatchSource, FragmentExecutor
from engine.plan.operators import CollapsingAggregate, RunningAggregate


def collapse(
    plan: dict[str, Any], batches: list[pa.RecordBatch], **context: Any
) -> list[dict[str, Any]]:
    op = CollapsingAggregate.model_validate({"@id": 2, "op": "collapsingaggregate", **plan})
    runtime = create_collapsing(op, [BatchSource("1", batches)], ExecContext(**context))
    return [r for b in FragmentExecutor(runtime).batches() for r in b.to_pylist()]


def run_running(
    plan: dict[str, Any], batches: list[pa.RecordBatch], **context: Any
) -> list[pa.RecordBatch]:
    op = RunningAggregate.model_validate({"@id": 2, "op": "runningaggregate", **plan})
    runtime = create_running(op, [BatchSource("1", batches)], ExecContext(**context))
    return list(FragmentExecutor(runtime).batches())


def count(ref: str, expr: str = "count(1)") -> dict[str, str]:
    return {"ref": ref, "expr": expr}


EMPLOYEES = pa.record_batch(
    {
        "dept": [31, 33, 33, None, 34, 34],
        "name": ["Rafferty", "Jones", "Steinberg", "John", "Robinson", "Smith"],
        "pay": [10, 20, 30, 5, 1, 2],
    }
)

# -- collapsingaggregate ---------------------------------------------------------------------


def test_one_record_per_run_with_carryovers_and_aggregations_only() -> None:
    plan = {"within": "dept", "carryovers": ["dept"], "aggregations": [count("n")]}
    assert collapse(plan, [EMPLOYEES]) == [
        {"dept": 31, "n": 1},
        {"dept": 33, "n": 2},
        {"dept": None, "n": 1},
        {"dept": 34, "n": 2},
    ]


def test_segments_are_runs_not_global_groups() -> None:
    batch = pa.record_batch({"g": ["a", "a", "b", "a"]})
    plan = {"within": "g", "carryovers": ["g"], "aggregations": [count("n")]}
    assert collapse(plan, [batch]) == [{"g": "a", "n": 2}, {"g": "b", "n": 1}, {"g": "a", "n": 1}]


def test_count_of_a_field_skips_nulls_and_count_of_a_constant_counts_rows() -> None:
    plan = {"aggregations": [count("CD", "count(dept)"), count("C")]}
    assert collapse(plan, [EMPLOYEES]) == [{"CD": 5, "C": 6}]


def test_every_aggregate_function() -> None:
    plan = {
        "aggregations": [
            count("total", "sum(pay)"),
            count("low", "min(name)"),
            count("high", "max(pay)"),
            count("mean", "avg(pay)"),
            count("depts", "countDistinct(dept)"),
        ]
    }
    assert collapse(plan, [EMPLOYEES]) == [
        {"total": 68, "low": "John", "high": 30, "mean": 68 / 6, "depts": 3}
    ]


def test_scalar_functions_over_aggregates() -> None:
    plan = {"within": "dept", "aggregations": [count("avg", "sum(pay) / count(pay) + 1")]}
    assert [r["avg"] for r in collapse(plan, [EMPLOYEES])] == [11.0, 26.0, 6.0, 2.5]


def test_aggregating_an_expression_and_writing_into_a_map() -> None:
    batch = pa.record_batch({"d": [{"ppu": 0.5, "n": 2}, {"ppu": 0.5, "n": 4}], "seg": [1, 1]})
    plan = {
        "within": "seg",
        "carryovers": ["d.ppu"],
        "aggregations": [count("d.sales", "sum(d.ppu * d.n)"), count("d.count")],
    }
    assert collapse(plan, [batch]) == [{"d": {"ppu": 0.5, "sales": 3.0, "count": 2}}]


def test_without_target_carryovers_come_from_the_last_record_of_the_run() -> None:
    batch = pa.record_batch({"g": [1, 1, 2], "v": ["a", "b", "c"]})
    plan = {"within": "g", "carryovers": ["v"], "aggregations": [count("n")]}
    assert collapse(plan, [batch]) == [{"v": "b", "n": 2}, {"v": "c", "n": 1}]


def test_target_picks_the_carryover_record_and_skips_runs_without_a_true_target() -> None:
    batch = pa.record_batch(
        {
            "g": [1, 1, 1, 2, 2, 3, 3],
            "best": [False, True, None, False, None, True, True],
            "name": ["a", "b", "c", "d", "e", "f", "g"],
            "v": [10, 20, 30, 5, 7, 1, 2],
        }
    )
    plan = {
        "within": "g",
        "target": "best",
        "carryovers": ["g", "name"],
        "aggregations": [count("total", "sum(v)"), count("cnt")],
    }
    assert collapse(plan, [batch]) == [
        {"g": 1, "name": "b", "total": 60, "cnt": 3},
        {"g": 3, "name": "g", "total": 3, "cnt": 2},
    ]


def test_a_target_that_is_not_boolean_is_never_true() -> None:
    batch = pa.record_batch({"best": ["true", "yes"]})
    assert collapse({"target": "best", "aggregations": [count("n")]}, [batch]) == []


def test_empty_input_without_within_gives_one_record_like_sql() -> None:
    empty = pa.record_batch({"v": pa.array([], pa.int64())})
    plan = {"carryovers": ["v"], "aggregations": [count("n"), count("s", "sum(v)")]}
    assert collapse(plan, [empty]) == [{"v": None, "n": 0, "s": None}]
    assert collapse(plan, []) == [{"v": None, "n": 0, "s": None}]


def test_empty_input_with_within_or_target_gives_nothing() -> None:
    empty = pa.record_batch({"v": pa.array([], pa.int64())})
    assert collapse({"within": "v", "aggregations": [count("n")]}, [empty]) == []
    assert collapse({"target": "v", "aggregations": [count("n")]}, [empty]) == []


def test_runs_spanning_batches_with_a_schema_change() -> None:
    batches = [
        pa.record_batch({"g": [1, 1], "v": [1, 2]}),
        pa.record_batch({"g": [1, 2], "v": [3, 4], "w": ["x", "y"]}),
        pa.record_batch({"g": [2], "v": [5.5]}),
        pa.record_batch({"g": [3], "v": [6]}),
    ]
    plan = {
        "within": "g",
        "carryovers": ["g", "w"],
        "aggregations": [count("s", "sum(v)"), count("n")],
    }
    assert collapse(plan, batches) == [
        {"g": 1, "w": "x", "s": 6, "n": 3},
        {"g": 2, "w": None, "s": 9.5, "n": 2},
        {"g": 3, "w": None, "s": 6, "n": 1},
    ]


def test_the_whole_input_beyond_the_buffer_limit_is_an_error() -> None:
    """Where the aggregates do not combine chunk by chunk (test_partial_aggregate: those that do)."""
    batches = [pa.record_batch({"v": list(range(100))}) for _ in range(3)]
    with pytest.raises(ExecutionError) as raised:
        collapse(
            {"aggregations": [count("n", "count_distinct(v)")]}, batches, max_buffered_bytes=1000
        )
    assert raised.value.operator_kind == "collapsingaggregate"
    assert "max_buffered_bytes" in (raised.value.hint or "")


def test_with_within_only_the_open_run_is_buffered() -> None:
    batches = [pa.record_batch({"g": [i // 10 + 10 * b for i in range(100)]}) for b in range(5)]
    out = collapse({"within": "g", "aggregations": [count("n")]}, batches, max_buffered_bytes=2000)
    assert [r["n"] for r in out] == [10] * 50


def test_summing_text_names_the_operator() -> None:
    with pytest.raises(ExecutionError, match="sum\\(\\) needs numbers") as raised:
        collapse({"aggregations": [count("s", "sum(name)")]}, [EMPLOYEES])
    assert raised.value.operator_id == "2"


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(-9, 9)), max_size=30),
    st.lists(st.integers(0, 30), max_size=4),
)
@settings(max_examples=60, deadline=None)
def test_batching_never_changes_the_result(rows: list[tuple[int, int]], cuts: list[int]) -> None:
    plan = {
        "within": "g",
        "carryovers": ["g"],
        "aggregations": [count("s", "sum(v)"), count("n"), count("m", "max(v)")],
    }
    whole = pa.record_batch({"g": [g for g, _ in rows], "v": [v for _, v in rows]}, schema=_GV)
    bounds = sorted({0, len(rows), *(c for c in cuts if c <= len(rows))})
    parts = [whole.slice(a, b - a) for a, b in itertools.pairwise(bounds)]
    assert collapse(plan, parts) == collapse(plan, [whole])


_GV = pa.schema([("g", pa.int64()), ("v", pa.int64())])

# -- runningaggregate ------------------------------------------------------------------------


def test_running_aggregates_restart_with_within() -> None:
    batch = pa.record_batch({"g": ["a", "a", "b", "b", "b", "c"], "v": [1, 2, 10, 20, 30, 5]})
    plan = {"within": "g", "aggregations": [count("rsum", "sum(v)"), count("rcnt")]}
    out = [r for b in run_running(plan, [batch]) for r in b.to_pylist()]
    assert [(r["rsum"], r["rcnt"]) for r in out] == [
        (1, 1),
        (3, 2),
        (10, 1),
        (30, 2),
        (60, 3),
        (5, 1),
    ]
    assert [r["v"] for r in out] == [1, 2, 10, 20, 30, 5]  # every record is kept


def test_running_row_number_min_max_and_avg() -> None:
    batch = pa.record_batch({"v": [3, None, 1, 4]})
    plan = {
        "aggregations": [
            count("r.n", "row_number()"),
            count("r.lo", "min(v)"),
            count("r.hi", "max(v)"),
            count("r.avg", "avg(v)"),
        ]
    }
    out = [r["r"] for b in run_running(plan, [batch]) for r in b.to_pylist()]
    assert out == [
        {"n": 1, "lo": 3, "hi": 3, "avg": 3.0},
        {"n": 2, "lo": 3, "hi": 3, "avg": 3.0},
        {"n": 3, "lo": 1, "hi": 3, "avg": 2.0},
        {"n": 4, "lo": 1, "hi": 4, "avg": 8 / 3},
    ]


def test_later_aggregations_see_earlier_refs() -> None:
    batch = pa.record_batch({"v": [1, 2, 3]})
    plan = {"aggregations": [count("s", "sum(v)"), count("twice", "max(s) * 2")]}
    out = [r for b in run_running(plan, [batch]) for r in b.to_pylist()]
    assert [r["twice"] for r in out] == [2, 6, 12]


def test_running_values_carry_across_batches_and_schema_changes() -> None:
    batches = [
        pa.record_batch({"g": [1, 1], "v": [1, 2]}),
        pa.record_batch({"g": [1, 2], "v": [3.5, 4.0], "x": ["a", "b"]}),
        pa.record_batch({"g": pa.array([], pa.int64()), "v": pa.array([], pa.int64())}),
        pa.record_batch({"g": [2, 3], "v": [None, 7]}),
    ]
    plan = {"within": "g", "aggregations": [count("s", "sum(v)"), count("n", "row_number()")]}
    out = [r for b in run_running(plan, batches) for r in b.to_pylist()]
    assert [(r["s"], r["n"]) for r in out] == [(1, 1), (3, 2), (6.5, 3), (4.0, 1), (4.0, 2), (7, 1)]


def test_running_output_batches_hold_at_most_batch_rows() -> None:
    batch = pa.record_batch({"v": list(range(10))})
    out = run_running({"aggregations": [count("n")]}, [batch], batch_rows=3)
    assert [b.num_rows for b in out] == [3, 3, 3, 1]


@given(
    st.lists(st.tuples(st.sampled_from(["a", "b"]), st.none() | st.integers(-9, 9)), max_size=25),
    st.lists(st.integers(0, 25), max_size=4),
)
@settings(max_examples=60, deadline=None)
def test_running_batching_never_changes_the_result(
    rows: list[tuple[str, int | None]], cuts: list[int]
) -> None:
    plan = {
        "within": "g",
        "aggregations": [
            count("s", "sum(v)"),
            count("c", "count(v)"),
            count("lo", "min(v)"),
            count("hi", "max(v)"),
            count("n", "row_number()"),
        ],
    }
    schema = pa.schema([("g", pa.string()), ("v", pa.int64())])
    whole = pa.record_batch({"g": [g for g, _ in rows], "v": [v for _, v in rows]}, schema=schema)
    bounds = sorted({0, len(rows), *(c for c in cuts if c <= len(rows))})
    parts = [whole.slice(a, b - a) for a, b in itertools.pairwise(bounds)]

    def flat(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
        return [r for b in batches for r in b.to_pylist()]

    assert flat(run_running(plan, parts)) == flat(run_running(plan, [whole]))


CASES = {case["id"]: case for case in load_cases()}


@pytest.mark.parametrize(
    "case_id", ["U01", "U02", "U08", "U09", "U10", "T16", "T17", "D03", "D27", "U21"]
)
def test_corpus_case(case_id: str) -> None:
    check_case(CASES[case_id], executor="local")
