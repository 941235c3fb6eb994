"""Appendix A on Spark: the seed's examples, conformance case D01's data, and agreement with the local
executor's nested filter on the same Arrow data."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from engine.errors import NestedFilterError
from engine.exec.local.nested_filter import NestedFilter
from engine.exec.spark.nested_filter import array_levels, filter_records
from engine.expr import parse_expression

pytestmark = pytest.mark.spark


def strip_nulls(value: Any) -> Any:
    """Drop null members (R-NULL-ABSENT: a null member is the same as an absent one)."""
    if isinstance(value, dict):
        return {k: strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [strip_nulls(v) for v in value]
    return value


def both(spark, records: list[dict], expression: str, schema: pa.Schema | None = None):
    """(Spark records, local records) for ``expression`` over ``records``."""
    batch = pa.RecordBatch.from_pylist(records, schema=schema)
    expr = parse_expression(expression)
    local = NestedFilter.for_schema(expr, batch.schema).apply(batch).to_pylist()
    df = spark.createDataFrame(pa.Table.from_batches([batch]))
    remote = filter_records(df, expr).toArrow().to_pylist()
    return strip_nulls(remote), strip_nulls(local)


# Seed 000, Appendix A, filtered by a.x > 3. The records do not share one schema (a is a map, then
# an array), so each is its own DataFrame.
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
def test_appendix_a_four_records(spark, record: dict, expected: list[dict]) -> None:
    remote, local = both(spark, [record], "a.x > 3")
    assert remote == expected == local


def test_appendix_a_nested_arrays_keep_their_nesting(spark) -> None:
    records = [
        {"a": [[{"x": 1}, {"x": 4}], [{"x": 5}]]},
        {"a": [[{"x": 1}], [{"x": 5}]]},
        {"a": [[{"x": 0}], []]},
        {"a": []},
        {"a": None},
    ]
    remote, local = both(spark, records, "a.x > 3")
    assert remote == [{"a": [[{"x": 4}], [{"x": 5}]]}, {"a": [[{"x": 5}]]}] == local


def test_conformance_d01_data_is_a_plain_row_filter(spark) -> None:
    records = [
        {"a": {"b": 1, "x": 5}, "c": 1},
        {"a": {"b": 2, "x": 2}, "c": 2},
        {"a": {"b": 3, "x": 4}, "c": 3},
        {"a": {"b": 4, "x": 3}, "c": 4},
    ]
    remote, local = both(spark, records, "a.x > 3")
    assert remote == [{"a": {"b": 1, "x": 5}, "c": 1}, {"a": {"b": 3, "x": 4}, "c": 3}] == local


def test_a_map_holding_a_survivor_is_kept_whole_and_record_values_repeat(spark) -> None:
    records = [
        {"a": [{"x": 5, "tags": ["t"], "m": {"k": 1}}, {"x": 7, "tags": [], "m": None}], "c": 1},
        {"a": [{"x": 5, "tags": ["u"], "m": {"k": 2}}, {"x": 1, "tags": None, "m": None}], "c": 2},
    ]
    remote, local = both(spark, records, "a.x > 3 && (c == 1 || a.x > 6)")
    assert remote == local
    assert remote == [{"a": [{"x": 5, "tags": ["t"], "m": {"k": 1}}, {"x": 7, "tags": []}], "c": 1}]


def test_references_through_one_array_test_the_same_element(spark) -> None:
    records = [{"a": [{"x": 5, "y": 1}, {"x": 5, "y": 2}, {"x": 1, "y": 1}]}]
    remote, local = both(spark, records, "a.x > 3 && a.y == 1")
    assert remote == [{"a": [{"x": 5, "y": 1}]}] == local


def test_an_array_below_an_explicit_index_is_pruned_in_place(spark) -> None:
    records = [
        {"a": [{"x": [1, 9]}, {"x": [2, 8]}]},
        {"a": [{"x": [1]}, {"x": [7]}]},
    ]
    remote, local = both(spark, records, "a[1].x > 5")
    assert remote == local
    assert remote == [{"a": [{"x": [1, 9]}, {"x": [8]}]}, {"a": [{"x": [1]}, {"x": [7]}]}]


def test_a_leaf_array_of_scalars_keeps_the_matching_values(spark) -> None:
    records = [{"m": {"tags": ["a", None, "bb"], "k": 1}}, {"m": {"tags": ["c"], "k": 2}}]
    remote, local = both(spark, records, "length(m.tags) > 1 || m.k == 2")
    assert remote == [{"m": {"tags": ["bb"], "k": 1}}, {"m": {"tags": ["c"], "k": 2}}] == local


def test_unrelated_arrays_are_refused_with_a_hint(spark) -> None:
    df = spark.createDataFrame([([1], [2])], "a array<bigint>, b array<bigint>")
    with pytest.raises(NestedFilterError, match="unrelated arrays") as err:
        filter_records(df, parse_expression("a > 0 || b > 0"))
    assert "flatten" in str(err.value)


def test_array_levels_name_each_crossing() -> None:
    from pyspark.sql import types as T

    schema = T.StructType(
        [
            T.StructField(
                "a", T.ArrayType(T.ArrayType(T.StructType([T.StructField("x", T.LongType())])))
            )
        ]
    )
    assert [level.key for level in array_levels(schema, ("a", "x"))] == [
        ("a", None),
        ("a", None, None),
    ]
    assert [level.key for level in array_levels(schema, ("a", 0, "x"))] == [("a", 0, None)]
    assert array_levels(schema, ("missing", "x")) == []
