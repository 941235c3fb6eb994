"""Drill's UNION type in the loader and the tracker: a field whose values change kind."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import SchemaConflictError
from engine.scan.loader import ResultSetLoader
from engine.scan.tracker import ScanSchemaTracker
from engine.types import UNION, UNION_ARROW, from_arrow_field


def _load(records: list[dict], **options) -> pa.RecordBatch:
    loader = ResultSetLoader(allow_union=True, **options)
    loader.start_batch()
    for record in records:
        loader.write_record(record)
    return loader.harvest()


def test_a_member_that_changes_kind_becomes_a_union_keeping_earlier_values() -> None:
    records = [
        {"r": {"id": 1, "tags": ["x", "y"]}},
        {"r": {"id": 2, "tags": "solo"}},
        {"r": {"id": 3, "tags": [{"t": "p"}]}},
        {"r": {"id": 4}},
    ]
    batch = _load(records)
    assert batch.schema.field("r").type.field("tags").type == UNION_ARROW
    assert batch.schema.field("r").type.field("id").type == pa.int64()
    assert [r["r"].get("tags") for r in batch.to_pylist()] == [
        ["x", "y"],
        "solo",
        [{"t": "p"}],
        None,
    ]


def test_a_conflict_inside_an_array_makes_the_array_column_the_union() -> None:
    batch = _load([{"a": [1, 2]}, {"a": [1, "x"]}, {"a": [[3]]}, {"a": None}])
    assert from_arrow_field(batch.schema.field("a")) == UNION
    assert batch.column("a").to_pylist() == [[1, 2], [1, "x"], [[3]], None]


def test_scalars_of_other_types_make_a_union_but_numbers_still_widen() -> None:
    batch = _load([{"a": 1, "n": 1}, {"a": True, "n": 1.5}, {"a": "s", "n": 2}])
    assert batch.column("a").to_pylist() == [1, True, "s"]
    assert batch.schema.field("n").type == pa.float64()


def test_a_union_survives_into_the_next_batch_through_the_vector_cache() -> None:
    from engine.scan.vector_cache import VectorCache

    cache = VectorCache()
    first = _load([{"a": 1}, {"a": "x"}], vector_cache=cache)
    second = _load([{"a": [5]}], vector_cache=cache)
    assert first.column("a").type == second.column("a").type == UNION_ARROW
    assert second.column("a").to_pylist() == [[5]]


def test_without_unions_a_kind_change_is_still_a_conflict() -> None:
    loader = ResultSetLoader()
    loader.start_batch()
    loader.write_record({"a": [1]})
    with pytest.raises(SchemaConflictError, match="column 'a'"):
        loader.write_record({"a": "s"})


def test_the_tracker_merges_incompatible_readers_into_a_union_in_change_mode() -> None:
    tracker = ScanSchemaTracker(None, mode="change", union=True)
    first = tracker.project_batch(pa.record_batch({"a": [[1]], "b": [1]}), file="one.json")
    assert first.schema.field("a").type == pa.list_(pa.int64())
    second = tracker.project_batch(pa.record_batch({"a": ["s"], "b": [2]}), file="two.json")
    assert second.schema.field("a").type == UNION_ARROW
    third = tracker.project_batch(pa.record_batch({"a": [[7]], "b": [3]}), file="three.json")
    assert third.column("a").to_pylist() == [[7]] and third.schema == second.schema


def test_strict_mode_keeps_the_conflict_even_with_unions() -> None:
    tracker = ScanSchemaTracker(None, mode="strict", union=True)
    tracker.project_batch(pa.record_batch({"a": [1]}), file="one.json")
    with pytest.raises(SchemaConflictError, match=r"two\.json: column 'a'"):
        tracker.project_batch(pa.record_batch({"a": ["s"]}), file="two.json")
