"""The local union operator: inputs in order, distinct by deep record equality, unified schemas."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from corpus import check_case, load_cases
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import ExecutionError
from engine.exec.local.registry import ExecContext
from engine.exec.local.union import create_union, first_occurrences
from engine.exec.protocol import BatchSource, FragmentExecutor, IterOutcome
from engine.plan.operators import Union


def run_union(
    inputs: list[list[pa.RecordBatch]], *, distinct: bool, ctx: ExecContext | None = None
) -> list[dict[str, Any]]:
    sources = [BatchSource(str(i + 1), batches) for i, batches in enumerate(inputs)]
    plan = Union(id="9", inputs=[s.operator_id for s in sources], distinct=distinct)
    return FragmentExecutor(create_union(plan, sources, ctx or ExecContext())).run().to_pylist()


def test_inputs_are_concatenated_in_order() -> None:
    a = [pa.record_batch({"x": [1, 2]}), pa.record_batch({"x": [3]})]
    b = [pa.record_batch({"x": [2, 1]})]
    c: list[pa.RecordBatch] = []
    d = [pa.record_batch({"x": [1]})]
    out = run_union([a, b, c, d], distinct=False)
    assert [r["x"] for r in out] == [1, 2, 3, 2, 1, 1]


def test_non_distinct_union_streams_and_reports_schema_changes() -> None:
    a = BatchSource("1", [pa.record_batch({"x": [1]})])
    b = BatchSource("2", [pa.record_batch({"y": ["q"]})])
    op = create_union(Union(id="3", inputs=["1", "2"]), [a, b], ExecContext())
    assert op.next() is IterOutcome.OK_NEW_SCHEMA
    assert op.batch is not None and op.batch.schema.names == ["x"]
    assert b.schema is None  # the second input has not been read yet
    assert op.next() is IterOutcome.OK_NEW_SCHEMA
    assert op.batch is not None and op.batch.schema.names == ["y"]
    assert op.next() is IterOutcome.NONE
    assert op.next() is IterOutcome.NONE


def test_distinct_keeps_the_first_occurrence_in_arrival_order() -> None:
    a = [pa.record_batch({"x": [3, 1]}), pa.record_batch({"x": [3, 2]})]
    b = [pa.record_batch({"x": [2, 4, 1]})]
    assert [r["x"] for r in run_union([a, b], distinct=True)] == [3, 1, 2, 4]


def test_distinct_treats_null_as_absent_across_schemas() -> None:
    a = [pa.record_batch({"deptId": [31, 33]})]
    b = [pa.record_batch({"name": ["n"], "deptId": pa.array([None], pa.int64())})]
    c = [pa.record_batch({"deptId": [33, 35]}), pa.record_batch({"other": pa.nulls(1)})]
    out = run_union([a, b, c], distinct=True)
    assert out == [
        {"deptId": 31, "name": None, "other": None},
        {"deptId": 33, "name": None, "other": None},
        {"deptId": None, "name": "n", "other": None},
        {"deptId": 35, "name": None, "other": None},
        {"deptId": None, "name": None, "other": None},
    ]


def test_distinct_compares_maps_and_arrays_deeply() -> None:
    a = [pa.record_batch({"u": pa.array([{"x": 1}, {"x": 3, "y": [1, 2]}])})]
    b = [pa.record_batch({"u": pa.array([{"x": 3, "y": [2, 1]}, {"x": 3, "y": [1, 2]}])})]
    c = [pa.record_batch({"u": pa.array([{"x": 1}])})]  # {x: 1} == {x: 1, y: null}
    out = run_union([a, b, c], distinct=True)
    assert out == [
        {"u": {"x": 1, "y": None}},
        {"u": {"x": 3, "y": [1, 2]}},
        {"u": {"x": 3, "y": [2, 1]}},
    ]


def test_distinct_output_respects_batch_rows() -> None:
    inputs = [[pa.record_batch({"x": list(range(10))})], [pa.record_batch({"x": [10, 11]})]]
    sources = [BatchSource(str(i), batches) for i, batches in enumerate(inputs)]
    op = create_union(
        Union(id="9", inputs=["0", "1"], distinct=True), sources, ExecContext(batch_rows=5)
    )
    assert [b.num_rows for b in FragmentExecutor(op).batches()] == [5, 5, 2]


def test_distinct_of_empty_inputs_is_empty() -> None:
    assert run_union([[], []], distinct=True) == []
    empty = pa.record_batch({"x": pa.array([], pa.int64())})
    assert run_union([[empty]], distinct=True) == []


def test_distinct_over_the_memory_limit_fails_naming_the_union() -> None:
    inputs = [[pa.record_batch({"x": list(range(100))})], [pa.record_batch({"x": [1]})]]
    with pytest.raises(ExecutionError) as raised:
        run_union(inputs, distinct=True, ctx=ExecContext(max_buffered_bytes=500))
    assert (raised.value.operator_id, raised.value.operator_kind) == ("9", "union")


def test_first_occurrences_of_whole_records() -> None:
    table = pa.table({"a": [1, 1, 1, None, None], "b": ["x", "y", "x", None, None]})
    assert first_occurrences(table).to_pylist() == [0, 1, 3]


@given(
    st.lists(
        st.lists(
            st.tuples(st.sampled_from([None, 0, 1]), st.sampled_from([None, "p"])), max_size=8
        ),
        min_size=1,
        max_size=4,
    )
)
def test_distinct_matches_ordered_deduplication(inputs: list[list[tuple]]) -> None:
    batches = [
        [
            pa.record_batch(
                {
                    "a": pa.array([r[0] for r in rows], pa.int64()),
                    "b": pa.array([r[1] for r in rows], pa.string()),
                }
            )
        ]
        for rows in inputs
    ]
    expected = list(dict.fromkeys(r for rows in inputs for r in rows))
    out = run_union(batches, distinct=True)
    assert [(r["a"], r["b"]) for r in out] == expected


CASES = {case["id"]: case for case in load_cases()}


@pytest.mark.parametrize("case_id", ["D14", "U11", "U12"])
def test_corpus_case(case_id: str) -> None:
    check_case(CASES[case_id], executor="local")
