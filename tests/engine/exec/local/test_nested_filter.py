"""Seed 000's Appendix A: filtering data trees through arrays, against the seed's own examples and a
record-at-a-time Python model of the rules."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import EvaluationError
from engine.exec.local.nested_filter import NestedFilter, array_levels
from engine.expr import parse_expression


def run(records: list[dict], expression: str, schema: pa.Schema | None = None) -> list[dict]:
    batch = pa.RecordBatch.from_pylist(records, schema=schema)
    nested = NestedFilter.for_schema(parse_expression(expression), batch.schema)
    return nested.apply(batch).to_pylist()


def strip_nulls(value: Any) -> Any:
    """Drop null members (R-NULL-ABSENT: a null member is the same as an absent one)."""
    if isinstance(value, dict):
        return {k: strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [strip_nulls(v) for v in value]
    return value


# Seed 000, Appendix A: [{a:{b:1, x:5}, c:1}, {a:[{b:1}, {z:{x:4}}, {q:3, x:5}], c:2},
# {a:{b:2, x:[1,2,3,4,5]}, c:3}, {a:{b:3, x:[1,2]}, c:4}] filtered by a.x > 3. The records do not
# share one Arrow schema (a is a map, then an array), so each is its own batch.
APPENDIX_A = [
    ({"a": {"b": 1, "x": 5}, "c": 1}, [{"a": {"b": 1, "x": 5}, "c": 1}]),
    (
        {"a": [{"b": 1}, {"z": {"x": 4}}, {"q": 3, "x": 5}], "c": 2},
        [{"a": [{"q": 3, "x": 5}], "c": 2}],
    ),
    ({"a": {"b": 2, "x": [1, 2, 3, 4, 5]}, "c": 3}, [{"a": {"b": 2, "x": [4, 5]}, "c": 3}]),
    ({"a": {"b": 3, "x": [1, 2]}, "c": 4}, []),
]


@pytest.mark.parametrize(("record", "expected"), APPENDIX_A, ids=["c1", "c2", "c3", "c4"])
def test_appendix_a_four_records(record: dict, expected: list[dict]) -> None:
    assert strip_nulls(run([record], "a.x > 3")) == expected


def test_appendix_a_nested_arrays_keep_their_nesting() -> None:
    assert run([{"a": [[{"x": 1}, {"x": 4}], [{"x": 5}]]}], "a.x > 3") == [
        {"a": [[{"x": 4}], [{"x": 5}]]}
    ]


def test_an_inner_array_left_empty_is_removed_and_an_empty_record_dropped() -> None:
    records = [
        {"a": [[{"x": 1}], [{"x": 5}]]},
        {"a": [[{"x": 0}], []]},
        {"a": []},
        {"a": None},
    ]
    assert run(records, "a.x > 3") == [{"a": [[{"x": 5}]]}]


def test_a_map_that_holds_a_surviving_element_is_kept_whole() -> None:
    records = [
        {"a": [{"x": 5, "tags": ["t"], "m": {"k": 1}}, {"x": 1, "tags": [], "m": None}], "c": 1}
    ]
    assert run(records, "a.x > 3") == [{"a": [{"x": 5, "tags": ["t"], "m": {"k": 1}}], "c": 1}]


def test_record_values_are_repeated_for_every_element() -> None:
    records = [
        {"a": [{"x": 5}, {"x": 7}], "c": 1},
        {"a": [{"x": 5}], "c": 2},
    ]
    assert run(records, "a.x > 3 && (c == 1 || a.x > 6)") == [{"a": [{"x": 5}, {"x": 7}], "c": 1}]


def test_several_references_through_the_same_array_test_the_same_element() -> None:
    records = [{"a": [{"x": 5, "y": 0}, {"x": 1, "y": 9}, {"x": 6, "y": 9}]}]
    assert run(records, "a.x > 3 && a.y > 3") == [{"a": [{"x": 6, "y": 9}]}]


def test_an_explicit_index_is_not_an_array_crossing() -> None:
    records = [{"a": [{"x": 5}, {"x": 1}]}, {"a": [{"x": 1}, {"x": 5}]}]
    assert run(records, "a[0].x > 3") == [{"a": [{"x": 5}, {"x": 1}]}]


def test_an_array_below_an_explicit_index_is_pruned_in_place() -> None:
    records = [{"a": [{"v": [1, 9]}, {"v": [1]}]}, {"a": [{"v": [1]}]}]
    assert run(records, "a[0].v > 3") == [{"a": [{"v": [9]}, {"v": [1]}]}]


def test_without_arrays_it_is_the_row_filter() -> None:
    nested = NestedFilter.for_schema(
        parse_expression("a.x > 3"), pa.schema([("a", pa.struct([("x", pa.int64())]))])
    )
    assert nested.is_row_filter


def test_unrelated_arrays_are_refused_with_a_hint() -> None:
    with pytest.raises(EvaluationError, match="unrelated arrays") as raised:
        run([{"a": [1, 5], "b": [2]}], "a > 3 || b > 3")
    assert raised.value.hint and "flatten" in raised.value.hint


def test_a_reference_through_more_arrays_than_the_others_is_explained() -> None:
    with pytest.raises(EvaluationError, match="crosses more arrays"):
        run([{"a": [{"x": 5, "y": [1, 9]}]}], "a.x > 3 && a.y > 3")


def test_array_levels_of_nested_lists() -> None:
    schema = pa.schema([("a", pa.list_(pa.list_(pa.struct([("x", pa.int64())]))))])
    assert [level.key for level in array_levels(schema, ("a", "x"))] == [
        ("a", None),
        ("a", None, None),
    ]
    assert [level.key for level in array_levels(schema, ("a", 1, "x"))] == [("a", 1, None)]
    assert array_levels(schema, ("zz",)) == []


# ---------------------------------------------------------------- a model of the rules


def prune(value: Any, path: tuple[str, ...], test) -> tuple[bool, Any]:
    """Appendix A, one record at a time: (kept, pruned value)."""
    if isinstance(value, list):
        survivors = [new for kept, new in (prune(v, path, test) for v in value) if kept]
        return bool(survivors), survivors
    if not path:
        return test(value), value
    if isinstance(value, dict):
        kept, new = prune(value.get(path[0]), path[1:], test)
        return (True, {**value, path[0]: new}) if kept else (False, value)
    return False, value


ELEMENT = pa.struct([("x", pa.int64()), ("y", pa.list_(pa.int64()))])
SCHEMA = pa.schema(
    [("a", pa.list_(ELEMENT)), ("n", pa.list_(pa.list_(ELEMENT))), ("c", pa.int64())]
)

small = st.one_of(st.none(), st.integers(0, 9))
element = st.one_of(
    st.none(),
    st.fixed_dictionaries({"x": small, "y": st.one_of(st.none(), st.lists(small, max_size=3))}),
)
records = st.lists(
    st.fixed_dictionaries(
        {
            "a": st.one_of(st.none(), st.lists(element, max_size=4)),
            "n": st.one_of(
                st.none(), st.lists(st.one_of(st.none(), st.lists(element, max_size=3)), max_size=3)
            ),
            "c": small,
        }
    ),
    min_size=0,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(records, st.sampled_from(["a.x", "a.y", "n.x", "n.y", "c"]), st.integers(0, 9))
def test_matches_the_record_at_a_time_model(rows: list[dict], path: str, bound: int) -> None:
    expected = []
    for row in rows:
        kept, new = prune(row, tuple(path.split(".")), lambda v: v is not None and v > bound)
        if kept:
            expected.append(new)
    assert run(rows, f"{path} > {bound}", SCHEMA) == expected
