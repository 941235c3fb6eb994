"""Data trees on Arrow: reading, writing, merging and removing values at paths."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.expr.arrow.trees import (
    TreePathError,
    build_batch,
    empty_maps,
    get_path,
    keep_list_elements,
    list_parts,
    merge_values,
    remove_path,
    replace_in,
    set_path,
)

RECORDS = [
    {"a": {"b": 1, "l": [{"x": 1}, {"x": 2}]}, "c": "p"},
    {"a": None, "c": None},
    {"a": {"b": 3, "l": None}, "c": "q"},
]
BATCH = pa.RecordBatch.from_pylist(RECORDS)


def test_get_path_reads_members_indexes_and_projects_lists() -> None:
    assert get_path(BATCH, ("a", "b")).to_pylist() == [1, None, 3]
    assert get_path(BATCH, ("a", "l", 1, "x")).to_pylist() == [2, None, None]
    assert get_path(BATCH, ("a", "l", "x")).to_pylist() == [[1, 2], None, None]
    assert get_path(BATCH, ("a", "zz")).to_pylist() == [None] * 3
    assert get_path(BATCH, ("c", "b")).to_pylist() == [None] * 3
    assert get_path(BATCH, ("a", "b", 0)).to_pylist() == [None] * 3


def test_get_path_reads_dictionary_columns_as_their_values() -> None:
    batch = pa.record_batch({"d": pa.array(["x", "y", "x"]).dictionary_encode()})
    assert get_path(batch, ("d",)).type == pa.string()


def test_set_path_creates_maps_on_the_way_and_overwrites() -> None:
    out = set_path(BATCH, ("a", "new", "deep"), pa.array([1, 2, 3]))
    assert get_path(out, ("a", "new", "deep")).to_pylist() == [1, 2, 3]
    assert get_path(out, ("a", "b")).to_pylist() == [1, None, 3]
    # a null map becomes a map where something is written into it
    assert out.to_pylist()[1]["a"]["new"] == {"deep": 2}
    replaced = set_path(BATCH, ("c",), pa.array([1, 2, 3]))
    assert get_path(replaced, ("c",)).to_pylist() == [1, 2, 3]
    # writing below a scalar replaces it with a map
    below = set_path(BATCH, ("c", "x"), pa.array([1, None, 3]))
    assert below.to_pylist()[0]["c"] == {"x": 1}


def test_set_path_refuses_list_indexes() -> None:
    with pytest.raises(TreePathError, match=r"a\.l\[0\]"):
        set_path(BATCH, ("a", "l", 0), pa.array([1, 2, 3]))


def test_merge_values_merges_maps_and_keeps_the_earlier_value_where_the_later_map_is_null() -> None:
    earlier = pa.array([{"x": 1, "m": {"p": 1, "q": 2}}, {"x": 2, "m": None}, None])
    later = pa.array([{"x": 9, "m": {"q": 7}, "y": 1}, None, {"x": 5, "m": None, "y": 2}])
    assert merge_values(earlier, later).to_pylist() == [
        {"x": 9, "m": {"p": 1, "q": 7}, "y": 1},
        {"x": 2, "m": None, "y": None},
        {"x": 5, "m": None, "y": 2},
    ]


def test_remove_path() -> None:
    assert remove_path(BATCH, ("a", "b")).to_pylist()[0] == {
        "a": {"l": [{"x": 1}, {"x": 2}]},
        "c": "p",
    }
    assert remove_path(BATCH, ("c",)).schema.names == ["a"]
    assert remove_path(BATCH, ("zz", "y")) is BATCH
    assert remove_path(BATCH, ("c", "y")).to_pylist() == BATCH.to_pylist()


def test_remove_the_last_member_leaves_an_empty_map() -> None:
    batch = pa.RecordBatch.from_pylist([{"a": {"x": 1}}, {"a": None}])
    assert remove_path(batch, ("a", "x")).to_pylist() == [{"a": {}}, {"a": None}]
    assert empty_maps(2).to_pylist() == [{}, {}]


def test_build_batch_merges_a_map_into_the_root_and_later_writes_override() -> None:
    out = build_batch(
        2,
        [
            ((), pa.array([{"b": 1, "c": 2}, None])),
            (("b",), pa.array([10, 20])),
            (("m",), pa.array([{"x": 1, "y": 2}, {"x": 3, "y": 4}])),
            (("m",), pa.array([{"x": 9}, None])),
            (("z",), pa.nulls(2)),
        ],
    )
    assert out.to_pylist() == [
        {"b": 10, "c": 2, "m": {"x": 9, "y": 2}, "z": None},
        {"b": 20, "c": None, "m": {"x": 3, "y": 4}, "z": None},
    ]


def test_build_batch_keeps_the_row_count_without_columns() -> None:
    out = build_batch(3, [((), pa.nulls(3))])
    assert out.num_rows == 3 and out.num_columns == 0


def test_build_batch_rejects_a_scalar_at_the_root() -> None:
    with pytest.raises(TreePathError, match="only a map"):
        build_batch(1, [((), pa.array([1]))])


def test_list_parts_and_keep_list_elements() -> None:
    lists = pa.array([[1, 2, 3], None, [], [4]]).slice(0)
    values, rows = list_parts(lists)
    assert values.to_pylist() == [1, 2, 3, 4] and rows.tolist() == [0, 0, 0, 3]
    kept, counts = keep_list_elements(lists, np.array([True, False, True, False]))
    assert kept.to_pylist() == [[1, 3], None, [], []]
    assert counts.tolist() == [2, 0, 0, 0]
    assert kept.type == lists.type


def test_keep_list_elements_on_a_sliced_array() -> None:
    lists = pa.array([[0], [1, 2], [3]]).slice(1)
    kept, counts = keep_list_elements(lists, np.array([False, True, True]))
    assert kept.to_pylist() == [[2], [3]] and counts.tolist() == [1, 1]


def test_replace_in_through_members_and_list_indexes() -> None:
    array = pa.array([{"l": [{"v": [1, 2]}, {"v": [3]}]}, {"l": None}, None])
    element_v = pa.array([[9], None, None], pa.list_(pa.int64()))
    out = replace_in(array, ("l", 0, "v"), element_v)
    assert out.to_pylist() == [{"l": [{"v": [9]}, {"v": [3]}]}, {"l": None}, None]
    assert out.type == array.type


leaf = st.one_of(st.none(), st.integers(-5, 5))
record = st.fixed_dictionaries(
    {"a": st.one_of(st.none(), st.fixed_dictionaries({"b": leaf, "c": leaf})), "d": leaf}
)


@given(st.lists(record, min_size=1, max_size=8), st.lists(leaf, min_size=8, max_size=8))
def test_set_then_get_returns_what_was_written(
    records: list[dict], written: list[int | None]
) -> None:
    batch = pa.RecordBatch.from_pylist(
        records,
        schema=pa.schema(
            [("a", pa.struct([("b", pa.int64()), ("c", pa.int64())])), ("d", pa.int64())]
        ),
    )
    values = pa.array(written[: len(records)], pa.int64())
    for path in (("a", "b"), ("a", "e", "f"), ("d",), ("g",)):
        out = set_path(batch, path, values)
        assert get_path(out, path).to_pylist() == values.to_pylist()
        # everything else is untouched
        others = [("a", "c"), ("d",)] if path != ("d",) else [("a", "b"), ("a", "c")]
        for other in others:
            if other[: len(path)] != path:
                assert get_path(out, other).to_pylist() == get_path(batch, other).to_pylist()
        assert get_path(remove_path(out, path), path).to_pylist() == [None] * len(records)
