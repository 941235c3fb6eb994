"""The local segment operator and group_numbers (value equality for any Arrow type)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from corpus import check_case, load_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import ExecutionError
from engine.exec.local.registry import ExecContext
from engine.exec.local.segment import create_segment, group_numbers
from engine.exec.protocol import BatchSource, FragmentExecutor
from engine.plan.operators import Segment


def run_segment(
    ref: str, exprs: list[str], batches: list[pa.RecordBatch], ctx: ExecContext | None = None
) -> list[pa.RecordBatch]:
    op = create_segment(
        Segment(id="2", ref=ref, exprs=exprs), [BatchSource("1", batches)], ctx or ExecContext()
    )
    return list(FragmentExecutor(op).batches())


def rows(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    if not batches:
        return []
    tables = [pa.Table.from_batches([b]) for b in batches]
    return pa.concat_tables(tables, promote_options="permissive").to_pylist()


def test_groups_are_contiguous_in_first_appearance_order_and_stable() -> None:  # D23
    batch = pa.record_batch({"r": pa.array([{"g": g, "n": n} for n, g in enumerate("babcab", 1)])})
    out = rows(run_segment("seg", ["r.g"], [batch]))
    assert [(r["r"]["g"], r["r"]["n"], r["seg"]) for r in out] == [
        ("b", 1, 1),
        ("b", 3, 1),
        ("b", 6, 1),
        ("a", 2, 2),
        ("a", 5, 2),
        ("c", 4, 3),
    ]


def test_null_and_missing_values_form_one_group() -> None:  # U08 groups a null deptId
    batches = [
        pa.record_batch({"d": pa.array([31, None], pa.int64()), "i": [0, 1]}),
        pa.record_batch({"i": [2]}),  # no d at all
        pa.record_batch({"d": pa.array([31], pa.int64()), "i": [3]}),
    ]
    out = rows(run_segment("s", ["d"], batches))
    assert [(r["i"], r["s"]) for r in out] == [(0, 1), (3, 1), (1, 2), (2, 2)]


def test_groups_by_the_tuple_of_exprs_which_may_be_expressions() -> None:
    batch = pa.record_batch({"a": [1, 2, 1, 2, 1], "b": ["x", "x", "y", "x", "x"]})
    out = rows(run_segment("k", ["a * 10", "b"], [batch]))
    assert [(r["a"], r["b"], r["k"]) for r in out] == [
        (1, "x", 1),
        (1, "x", 1),
        (2, "x", 2),
        (2, "x", 2),
        (1, "y", 3),
    ]


def test_without_exprs_everything_is_one_segment() -> None:
    out = rows(run_segment("k", [], [pa.record_batch({"a": [3, 1]})]))
    assert out == [{"a": 3, "k": 1}, {"a": 1, "k": 1}]


def test_ref_may_be_a_nested_path() -> None:
    out = rows(
        run_segment("r.seg", ["r.g"], [pa.record_batch({"r": pa.array([{"g": 1}, {"g": 2}])})])
    )
    assert out == [{"r": {"g": 1, "seg": 1}}, {"r": {"g": 2, "seg": 2}}]


def test_many_batches_with_schema_changes_are_grouped_globally() -> None:
    batches = [
        pa.record_batch({"g": ["a", "b"]}),
        pa.record_batch({"g": ["a"], "extra": [True]}),
        pa.record_batch({"g": ["b", "c"]}),
    ]
    out = rows(run_segment("s", ["g"], batches, ExecContext(batch_rows=2)))
    assert [(r["g"], r["extra"], r["s"]) for r in out] == [
        ("a", None, 1),
        ("a", True, 1),
        ("b", None, 2),
        ("b", None, 2),
        ("c", None, 3),
    ]


def test_output_is_cut_into_batches_of_batch_rows() -> None:
    batches = [pa.record_batch({"g": [i % 3 for i in range(10)]})]
    assert [b.num_rows for b in run_segment("s", ["g"], batches, ExecContext(batch_rows=4))] == [
        4,
        4,
        2,
    ]


def test_empty_input_gives_no_records() -> None:
    assert run_segment("s", ["g"], []) == []
    assert rows(run_segment("s", ["g"], [pa.record_batch({"g": pa.array([], pa.string())})])) == []


def test_over_the_memory_limit_fails_naming_the_segment() -> None:
    batches = [pa.record_batch({"g": list(range(50))}) for _ in range(4)]
    with pytest.raises(ExecutionError) as raised:
        run_segment("s", ["g"], batches, ExecContext(max_buffered_bytes=1000))
    assert (raised.value.operator_id, raised.value.operator_kind) == ("2", "segment")
    assert raised.value.hint is not None


def test_group_numbers_compare_nested_values_deeply() -> None:
    maps = pa.array(
        [
            {"x": 1, "y": [1, 2]},
            {"x": 1, "y": [2, 1]},
            None,
            {"x": 1, "y": [1, 2]},
            {"x": None, "y": None},
        ]
    )
    assert group_numbers([maps], 5).tolist() == [0, 1, 2, 0, 3]
    nested = pa.array([[[1], []], [[1]], [[1], []], None, []])
    assert group_numbers([nested], 5).tolist() == [0, 1, 0, 2, 3]
    keyed = pa.array([[("a", 1)], [("a", 1)], [("a", 2)]], pa.map_(pa.string(), pa.int64()))
    assert group_numbers([keyed], 3).tolist() == [0, 0, 1]


def test_group_numbers_of_dictionary_and_null_columns() -> None:
    words = pa.array(["q", "p", "q"]).dictionary_encode()
    assert group_numbers([words, pa.nulls(3)], 3).tolist() == [0, 1, 0]
    assert group_numbers([], 2).tolist() == [0, 0]


scalars = st.one_of(st.none(), st.integers(0, 2))


@settings(deadline=None)  # a loaded 2-core machine can take seconds for one example
@given(
    st.lists(st.tuples(st.one_of(st.none(), st.lists(scalars, max_size=3)), scalars), max_size=15)
)
def test_group_numbers_follow_python_equality(records: list[tuple[Any, Any]]) -> None:
    lists = pa.array([r[0] for r in records], pa.list_(pa.int64()))
    ints = pa.array([r[1] for r in records], pa.int64())
    numbers = group_numbers([lists, ints], len(records)).tolist()
    keys = [(None if a is None else tuple(a), b) for a, b in records]
    first_seen = list(dict.fromkeys(keys))
    assert numbers == [first_seen.index(k) for k in keys]


CASES = {case["id"]: case for case in load_cases()}


@pytest.mark.parametrize("case_id", ["D23", "U08", "U09", "U10"])
def test_corpus_case(case_id: str) -> None:
    check_case(CASES[case_id], executor="local")
