"""The nested filter through UNION values on the local executor (engine.exec.local.union_filter)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import EvaluationError
from engine.exec.local.nested_filter import NestedFilter
from engine.exec.local.union_filter import UnionFilter, filter_for_schema
from engine.expr import parse_expression
from engine.types import union_array

_X = st.one_of(st.none(), st.integers(0, 6))
_SHAPES = [
    st.fixed_dictionaries({"x": _X, "b": _X}),
    st.lists(st.fixed_dictionaries({"x": _X, "b": _X}), max_size=3),
    st.lists(st.lists(st.fixed_dictionaries({"x": _X}), max_size=2), max_size=3),
    st.fixed_dictionaries({"x": st.lists(_X, max_size=4), "b": _X}),
]


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(_SHAPES).flatmap(lambda s: st.lists(s, min_size=1, max_size=6)),
    st.sampled_from(["a.x > 3", "a.x > 3 && c < 2", "a[0].x > 3", "isnull(a.x)"]),
)
def test_a_union_of_one_shape_filters_as_the_typed_column(values, condition) -> None:
    """Typed data encoded as a UNION is pruned exactly as the typed nested filter prunes it."""
    typed = pa.record_batch({"a": pa.array(values), "c": pa.array(range(len(values)))})
    as_union = pa.record_batch({"a": union_array(typed.column(0)), "c": typed.column(1)})
    expr = parse_expression(condition)
    assert isinstance(filter_for_schema(expr, as_union.schema), UnionFilter)
    try:
        expected = NestedFilter.for_schema(expr, typed.schema).apply(typed).to_pylist()
    except EvaluationError:
        return  # the typed filter refuses it (a deeper array read whole)
    assert filter_for_schema(expr, as_union.schema).apply(as_union).to_pylist() == expected


def test_the_seeds_example_inside_a_typed_record() -> None:
    seed = [
        {"b": 1, "x": 5},
        [{"b": 1}, {"z": {"x": 4}}, {"q": 3, "x": 5}],
        {"b": 2, "x": [1, 2, 3, 4, 5]},
        {"b": 3, "x": [1, 2]},
    ]
    r = pa.StructArray.from_arrays([union_array(seed), pa.array([1, 2, 3, 4])], names=["a", "c"])
    batch = pa.record_batch({"r": r})
    kept = filter_for_schema(parse_expression("r.a.x > 3"), batch.schema).apply(batch)
    assert kept.to_pylist() == [
        {"r": {"a": {"b": 1, "x": 5}, "c": 1}},
        {"r": {"a": [{"q": 3, "x": 5}], "c": 2}},
        {"r": {"a": {"b": 2, "x": [4, 5]}, "c": 3}},
    ]
    assert kept.schema == batch.schema


def test_references_through_unrelated_arrays_are_refused() -> None:
    batch = pa.record_batch(
        {"a": union_array([[{"x": 5}], {"x": 1}]), "b": union_array([[{"y": 5}], 1])}
    )
    with pytest.raises(EvaluationError, match="one array path at a time"):
        filter_for_schema(parse_expression("a.x > 3 || b.y > 3"), batch.schema).apply(batch)
