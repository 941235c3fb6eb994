"""The local flatten operator: arrays, scalars, maps, empty and null values, drop."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from corpus import check_case, load_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.exec.local.flatten import create_flatten, flatten_values
from engine.exec.local.registry import ExecContext
from engine.exec.protocol import BatchSource, FragmentExecutor
from engine.plan.operators import Flatten


def run_flatten(plan: dict[str, Any], batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    op = Flatten.model_validate({"@id": 2, "op": "flatten", **plan})
    runtime = create_flatten(op, [BatchSource("1", batches)], ExecContext())
    return FragmentExecutor(runtime).run().to_pylist()


def test_an_array_gives_one_record_per_element() -> None:
    batch = pa.record_batch(
        {"r": pa.array([{"id": 1, "tags": ["x", "y"]}, {"id": 2, "tags": ["z"]}])}
    )
    out = run_flatten({"ref": "r.tag", "expr": "r.tags"}, [batch])
    assert out == [
        {"r": {"id": 1, "tags": ["x", "y"], "tag": "x"}},
        {"r": {"id": 1, "tags": ["x", "y"], "tag": "y"}},
        {"r": {"id": 2, "tags": ["z"], "tag": "z"}},
    ]


def test_array_of_maps_writes_each_map() -> None:
    batch = pa.record_batch({"id": [3], "tags": pa.array([[{"t": "p"}, {"t": "q"}]])})
    out = run_flatten({"ref": "tag", "expr": "tags", "drop": True}, [batch])
    assert out == [{"id": 3, "tag": {"t": "p"}}, {"id": 3, "tag": {"t": "q"}}]


def test_empty_array_gives_no_record_and_null_or_missing_gives_one() -> None:
    batch = pa.record_batch(
        {"id": [1, 2, 3], "tags": pa.array([[], None, ["a"]], pa.list_(pa.string()))}
    )
    out = run_flatten({"ref": "tag", "expr": "tags"}, [batch])
    assert out == [{"id": 2, "tags": None, "tag": None}, {"id": 3, "tags": ["a"], "tag": "a"}]
    missing = run_flatten({"ref": "tag", "expr": "nope"}, [pa.record_batch({"id": [1]})])
    assert missing == [{"id": 1, "tag": None}]


def test_a_scalar_gives_one_record() -> None:
    batch = pa.record_batch({"id": [1, 2], "tags": ["solo", None]})
    out = run_flatten({"ref": "tag", "expr": "tags"}, [batch])
    assert out == [{"id": 1, "tags": "solo", "tag": "solo"}, {"id": 2, "tags": None, "tag": None}]


def test_a_map_is_not_split_and_drop_removes_the_expr_field() -> None:  # D07's shape
    batch = pa.record_batch({"r": pa.array([{"id": 1, "m": {"k": 1}}, {"id": 2, "m": {"k": 2}}])})
    out = run_flatten({"ref": "mm", "expr": "r.m", "drop": True}, [batch])
    assert out == [{"r": {"id": 1}, "mm": {"k": 1}}, {"r": {"id": 2}, "mm": {"k": 2}}]


def test_drop_accepts_a_number_and_removes_before_writing_ref() -> None:  # U03's spelling
    batch = pa.record_batch({"d": pa.array([{"topping": [1, 2], "n": "a"}])})
    out = run_flatten({"name": "d.t1", "expr": "d.topping", "drop": 1}, [batch])
    assert out == [{"d": {"n": "a", "t1": 1}}, {"d": {"n": "a", "t1": 2}}]


def test_ref_equal_to_expr_replaces_the_array_by_its_elements() -> None:
    batch = pa.record_batch({"tags": pa.array([["a", "b"]])})
    assert run_flatten({"ref": "tags", "expr": "tags", "drop": True}, [batch]) == [
        {"tags": "a"},
        {"tags": "b"},
    ]


def test_batches_with_different_schemas_are_flattened_one_by_one() -> None:
    batches = [
        pa.record_batch({"v": pa.array([[1, 2]])}),
        pa.record_batch({"v": pa.array([[3]]), "w": ["x"]}),
        pa.record_batch({"v": pa.array([7])}),
        pa.record_batch({"v": pa.array([[]], pa.list_(pa.int64()))}),
    ]
    out = run_flatten({"ref": "e", "expr": "v", "drop": True}, batches)
    assert out == [
        {"e": 1, "w": None},
        {"e": 2, "w": None},
        {"e": 3, "w": "x"},
        {"e": 7, "w": None},
    ]


def test_flatten_of_a_sliced_array() -> None:
    values = pa.array([[9], [1, 2], None, [3]]).slice(1)
    parents, elements = flatten_values(values)
    assert parents.to_pylist() == [0, 0, 1, 2]
    assert elements.to_pylist() == [1, 2, None, 3]


@settings(deadline=None)  # a loaded 2-core machine can take seconds for one example
@given(st.lists(st.one_of(st.none(), st.lists(st.integers(0, 9), max_size=4)), max_size=12))
def test_flatten_matches_the_record_by_record_rule(values: list[list[int] | None]) -> None:
    batch = pa.record_batch(
        {"i": pa.array(range(len(values)), pa.int64()), "v": pa.array(values, pa.list_(pa.int64()))}
    )
    expected = []
    for i, value in enumerate(values):
        for element in [None] if value is None else value:
            expected.append({"i": i, "e": element})
    assert run_flatten({"ref": "e", "expr": "v", "drop": True}, [batch]) == expected


CASES = {case["id"]: case for case in load_cases()}


@pytest.mark.parametrize("case_id", ["U03"])
def test_corpus_case(case_id: str) -> None:
    check_case(CASES[case_id], executor="local")
