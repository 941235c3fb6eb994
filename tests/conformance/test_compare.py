"""The comparator behind the conformance runner follows the corpus README's rules."""

from __future__ import annotations

from conformance_compare import records_match


def test_map_key_order_is_ignored_and_null_equals_absent() -> None:
    assert records_match([{"a": 1, "b": None}], [{"a": 1}], ordered=True)
    assert records_match([{"b": 2, "a": 1}], [{"a": 1, "b": 2}], ordered=True)
    assert not records_match([{"a": 1, "b": 0}], [{"a": 1}], ordered=True)


def test_numbers_by_value_with_relative_tolerance() -> None:
    assert records_match([{"a": 3}], [{"a": 3.0}], ordered=True)
    assert records_match([{"a": 0.1 + 0.2}], [{"a": 0.3}], ordered=True)
    assert not records_match([{"a": 3.001}], [{"a": 3}], ordered=True)
    assert not records_match([{"a": True}], [{"a": 1}], ordered=True)


def test_arrays_are_ordered_and_modes_differ() -> None:
    assert not records_match([{"a": [1, 2]}], [{"a": [2, 1]}], ordered=False)
    assert records_match([{"a": 1}, {"a": 2}], [{"a": 2}, {"a": 1}], ordered=False)
    assert not records_match([{"a": 1}, {"a": 2}], [{"a": 2}, {"a": 1}], ordered=True)
    assert not records_match([{"a": 1}, {"a": 1}], [{"a": 1}], ordered=False)
