"""ScanSchemaTracker (seed 003): projection kinds, hints, missing columns, maps, strict and change modes."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from engine.errors import ExecutionError, PlanError, SchemaConflictError, StorageError
from engine.scan.projection import ProjectionKind
from engine.scan.tracker import ScanSchemaTracker
from engine.types import BIGINT, FLOAT8, INT, VARCHAR, DataMode, MajorType, MinorType


def batch(**columns: object) -> pa.RecordBatch:
    return pa.record_batch(columns)  # type: ignore[arg-type]


# ---------------------------------------------------------------- projection kinds


def test_wildcard_takes_columns_and_order_from_the_reader() -> None:
    tracker = ScanSchemaTracker(None)
    assert tracker.projection_type == ProjectionKind.WILDCARD
    assert not tracker.is_resolved and tracker.schema_version == 0
    assert tracker.reader_input_schema().is_wildcard
    out = tracker.project_batch(batch(b=["x"], a=[1]), file="f1.json")
    assert tracker.is_resolved and tracker.schema_version == 1
    assert out.schema == pa.schema([("b", pa.string()), ("a", pa.int64())])
    assert out.to_pylist() == [{"b": "x", "a": 1}]


def test_explicit_projection_orders_and_drops_columns() -> None:
    tracker = ScanSchemaTracker(["c", "A"])
    assert tracker.projection_type == ProjectionKind.EXPLICIT
    assert tracker.reader_input_schema().columns == (("c", None), ("A", None))
    out = tracker.project_batch(batch(a=[1, 2], b=[3, 4], c=["x", "y"]), file="f.json")
    # the projection's spelling, the reader's types, unprojected b dropped
    assert out.schema == pa.schema([("c", pa.string()), ("A", pa.int64())])
    assert out.to_pylist() == [{"c": "x", "A": 1}, {"c": "y", "A": 2}]


def test_empty_projection_keeps_only_the_row_count() -> None:
    tracker = ScanSchemaTracker([])
    assert tracker.projection_type == ProjectionKind.EMPTY
    assert tracker.is_resolved and tracker.schema_version == 1
    out = tracker.project_batch(batch(a=[1, 2, 3]), file="f.json")
    assert out.num_columns == 0 and out.num_rows == 3
    assert tracker.schema_version == 1


def test_output_schema_before_resolution_is_an_error_that_says_what_to_do() -> None:
    with pytest.raises(ExecutionError, match="not known before the first reader batch"):
        ScanSchemaTracker(["a"]).output_schema()


def test_unknown_mode_is_a_plan_error() -> None:
    with pytest.raises(PlanError, match="unknown schema mode 'lenient'"):
        ScanSchemaTracker(None, mode="lenient")


# ---------------------------------------------------------------- provided schema


def test_provided_schema_casts_typed_columns_and_leaves_the_rest_to_the_reader() -> None:
    provided = [{"name": "id", "type": "BIGINT"}, {"name": "price", "type": "double"}]
    tracker = ScanSchemaTracker(["id", "name", "price"], provided_schema=provided)
    assert tracker.reader_input_schema().columns == (
        ("id", BIGINT),
        ("name", None),
        ("price", FLOAT8),
    )
    assert not tracker.is_resolved  # `name` waits for the reader
    csv_like = batch(id=["1", "2"], name=["ann", "bob"], price=["1.5", " "])
    out = tracker.project_batch(csv_like, file="prices.csv")
    assert out.schema == pa.schema(
        [("id", pa.int64()), ("name", pa.string()), ("price", pa.float64())]
    )
    # a blank text value is a missing value once the column has a non-text type
    assert out.to_pylist() == [
        {"id": 1, "name": "ann", "price": 1.5},
        {"id": 2, "name": "bob", "price": None},
    ]


def test_provided_schema_that_types_every_projected_column_resolves_before_reading() -> None:
    tracker = ScanSchemaTracker(["a"], provided_schema=pa.schema([("a", pa.int32())]))
    assert tracker.is_resolved and tracker.schema_version == 1
    assert tracker.output_schema() == pa.schema([("a", pa.int32())])
    assert tracker.apply_reader_schema(pa.schema([("a", pa.int64())]), file="f") is False
    assert tracker.schema_version == 1


def test_provided_schema_with_a_wildcard_comes_first_then_reader_columns() -> None:
    tracker = ScanSchemaTracker(None, provided_schema={"z": FLOAT8, "q": "VARCHAR"})
    out = tracker.project_batch(batch(a=[1], z=[2]), file="f.json")
    assert out.schema.names == ["z", "q", "a"]
    assert out.to_pylist() == [{"z": 2.0, "q": None, "a": 1}]


def test_provided_required_column_fills_nulls_with_the_default() -> None:
    provided = [{"name": "n", "type": "INT", "mode": "REQUIRED"}, {"name": "s", "type": "VARCHAR"}]
    tracker = ScanSchemaTracker(["n", "s"], provided_schema=provided)
    out = tracker.project_batch(batch(n=[None, 4]), file="f.json")
    assert out.schema.field("n").nullable is False
    assert out.to_pylist() == [{"n": 0, "s": None}, {"n": 4, "s": None}]


def test_unknown_provided_type_is_a_plan_error_naming_it() -> None:
    with pytest.raises(PlanError, match=r"unknown type 'FOO' for column 'x'"):
        ScanSchemaTracker(["x"], provided_schema=[{"name": "x", "type": "FOO"}])


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ([{"name": "x", "type": "INT", "mode": "sometimes"}], "unknown mode 'sometimes'"),
        ([{"type": "INT"}], "needs a string `name`"),
        ([{"name": "x"}], "needs a `type`"),
        ([{"name": "x", "type": "INT"}, {"name": "X", "type": "INT"}], "appears twice"),
        ([{"name": "l", "type": "LIST"}], "needs an `element`"),
        ("x INT", "a schema is a list"),
    ],
)
def test_malformed_provided_schemas(schema: object, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        ScanSchemaTracker(["x"], provided_schema=schema)  # type: ignore[arg-type]


def test_value_that_does_not_convert_is_a_storage_error_naming_file_and_column() -> None:
    tracker = ScanSchemaTracker(["id"], provided_schema={"id": "INT"})
    with pytest.raises(StorageError, match=r"^bad\.csv: column 'id': a value does not convert"):
        tracker.project_batch(batch(id=["1", "one"]), file="bad.csv")


def test_reader_type_that_cannot_become_the_provided_type_is_a_conflict() -> None:
    tracker = ScanSchemaTracker(["m"], provided_schema={"m": "INT"})
    with pytest.raises(SchemaConflictError) as err:
        tracker.apply_reader_schema(
            pa.schema([("m", pa.struct([("a", pa.int64())]))]), file="f.json"
        )
    assert (err.value.file, err.value.column, err.value.old_type) == ("f.json", "m", "INT")
    assert err.value.new_type == "MAP<a: BIGINT>"


# ---------------------------------------------------------------- defined schema


def test_defined_schema_is_the_output_schema() -> None:
    defined = pa.schema([("b", pa.float64()), ("a", pa.string()), ("dir0", pa.string())])
    tracker = ScanSchemaTracker(None, defined_schema=defined, partition_depth=3)
    assert tracker.is_resolved and tracker.schema_version == 1
    assert tracker.output_schema() == defined
    assert not tracker.reader_input_schema().is_wildcard
    out = tracker.project_batch(
        batch(a=[1], b=[2], extra=[3]), file="/r/x/f.json", implicit_values={"dir0": "x"}
    )
    assert out.schema == defined
    assert out.to_pylist() == [{"b": 2.0, "a": "1", "dir0": "x"}]
    assert tracker.schema_version == 1
    assert tracker.warnings == []


def test_defined_schema_must_match_the_projection_names_in_order() -> None:
    defined = [{"name": "a", "type": "INT"}, {"name": "b", "type": "INT"}]
    assert ScanSchemaTracker(["A", "b"], defined_schema=defined).output_schema().names == ["a", "b"]
    with pytest.raises(PlanError, match="must be the projected columns"):
        ScanSchemaTracker(["b", "a"], defined_schema=defined)
    with pytest.raises(PlanError, match="must be the projected columns"):
        ScanSchemaTracker(["a"], defined_schema=defined)


# ---------------------------------------------------------------- missing columns


def test_missing_columns_are_typed_nulls() -> None:
    tracker = ScanSchemaTracker(["a", "b", "c"], provided_schema={"b": "DATE"})
    reader = pa.schema([("a", pa.int64())])
    # b's type is known from the provided schema; c gets seed 003's classic nullable INT
    assert tracker.missing_columns(reader) == [
        ("b", MajorType(MinorType.DATE)),
        ("c", INT),
    ]
    out = tracker.project_batch(batch(a=[1, 2]), file="f.json")
    assert out.schema == pa.schema([("a", pa.int64()), ("b", pa.date32()), ("c", pa.int32())])
    assert out.column("c").null_count == 2 and out.column("b").null_count == 2


def test_missing_column_type_is_configurable() -> None:
    tracker = ScanSchemaTracker(["a", "gone"], null_column_type=VARCHAR)
    out = tracker.project_batch(batch(a=[1]), file="f.json")
    assert out.schema.field("gone").type == pa.string()


def test_missing_column_takes_the_type_an_earlier_reader_resolved() -> None:
    tracker = ScanSchemaTracker(None)
    tracker.project_batch(batch(a=[1], s=["x"]), file="one.json")
    assert tracker.missing_columns(pa.schema([("a", pa.int64())])) == [("s", VARCHAR)]
    out = tracker.project_batch(batch(a=[2]), file="two.json")
    assert out.schema == pa.schema([("a", pa.int64()), ("s", pa.string())])
    assert out.to_pylist() == [{"a": 2, "s": None}]


def test_all_null_reader_column_is_typed_like_a_missing_column() -> None:
    tracker = ScanSchemaTracker(None)
    out = tracker.project_batch(batch(a=pa.nulls(2)), file="f.json")
    assert out.schema.field("a").type == pa.int32()
    assert out.column("a").null_count == 2


# ---------------------------------------------------------------- maps


def test_projection_inside_a_map_keeps_only_those_members() -> None:
    tracker = ScanSchemaTracker(["m.a", "m.c"])
    m = pa.array([{"a": 1, "b": "x"}, None, {"a": 3, "b": "z"}])
    out = tracker.project_batch(pa.record_batch({"m": m}), file="f.json")
    # c is missing inside the map: a typed-null member
    assert out.schema.field("m").type == pa.struct([("a", pa.int64()), ("c", pa.int32())])
    assert out.column("m").to_pylist() == [{"a": 1, "c": None}, None, {"a": 3, "c": None}]
    assert tracker.is_projected("m.a") and not tracker.is_projected("m.b")


def test_member_projection_in_an_array_of_maps() -> None:
    tracker = ScanSchemaTracker(["items.sku"])
    items = pa.array([[{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}], [], None])
    out = tracker.project_batch(pa.record_batch({"items": items}), file="f.json")
    assert out.column("items").to_pylist() == [[{"sku": "a"}, {"sku": "b"}], [], None]


def test_member_types_come_from_a_provided_map() -> None:
    provided = [
        {
            "name": "m",
            "type": "MAP",
            "fields": [{"name": "a", "type": "DOUBLE"}, {"name": "z", "type": "DATE"}],
        }
    ]
    tracker = ScanSchemaTracker(["m.a", "m.z", "m.b"], provided_schema=provided)
    out = tracker.project_batch(pa.record_batch({"m": pa.array([{"a": 1, "b": True}])}), file="f")
    assert out.schema.field("m").type == pa.struct(
        [("a", pa.float64()), ("z", pa.date32()), ("b", pa.bool_())]
    )
    assert out.column("m").to_pylist() == [{"a": 1.0, "z": None, "b": True}]


def test_missing_map_projected_by_members_is_a_map_of_typed_nulls() -> None:
    tracker = ScanSchemaTracker(["a", "m.x.y"])
    out = tracker.project_batch(batch(a=[1]), file="f.json")
    assert out.schema.field("m").type == pa.struct([("x", pa.struct([("y", pa.int32())]))])
    assert out.column("m").to_pylist() == [None]


def test_member_projection_of_a_scalar_is_a_conflict() -> None:
    tracker = ScanSchemaTracker(["m.a"])
    with pytest.raises(SchemaConflictError) as err:
        tracker.apply_reader_schema(pa.schema([("m", pa.string())]), file="f.json")
    assert err.value.old_type == "MAP (projected as m.a)" and err.value.new_type == "VARCHAR"


def test_whole_map_projection_and_case_insensitive_members() -> None:
    tracker = ScanSchemaTracker(["M"])
    out = tracker.project_batch(pa.record_batch({"m": pa.array([{"A": 1}])}), file="f.json")
    assert out.to_pylist() == [{"M": {"A": 1}}]
    out = tracker.project_batch(pa.record_batch({"m": pa.array([{"a": 2}])}), file="g.json")
    assert out.to_pylist() == [{"M": {"A": 2}}]


# ---------------------------------------------------------------- strict mode


def test_strict_commits_on_the_first_batch_and_ignores_new_columns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tracker = ScanSchemaTracker(None, mode="strict")
    assert tracker.apply_reader_schema(pa.schema([("a", pa.int64())]), file="one.json")
    assert tracker.is_committed and tracker.schema_version == 1
    assert not tracker.reader_input_schema().is_wildcard  # later readers get the committed list
    assert not tracker.is_projected("b") and tracker.is_projected("a")
    with caplog.at_level(logging.WARNING, logger="engine.scan.tracker"):
        out = tracker.project_batch(batch(a=[1], b=["new"]), file="two.json")
    assert out.schema.names == ["a"] and tracker.schema_version == 1
    assert tracker.warnings == [
        "two.json: column 'b' is not in the committed schema; ignored (strict schema mode)"
    ]
    assert tracker.warnings[0] in caplog.text


def test_strict_empty_first_file_resolves_but_does_not_commit_the_wildcard() -> None:
    tracker = ScanSchemaTracker(None, partition_depth=1)
    assert tracker.apply_reader_schema(pa.schema([]), file="empty.json")
    assert tracker.output_schema().names == ["dir0"] and not tracker.is_committed
    assert tracker.apply_reader_schema(pa.schema([("a", pa.int64())]), file="data.json")
    assert tracker.is_committed and tracker.output_schema().names == ["a", "dir0"]
    assert tracker.schema_version == 2
    assert not tracker.apply_reader_schema(pa.schema([("b", pa.int64())]), file="more.json")
    assert tracker.output_schema().names == ["a", "dir0"]


def test_strict_ignores_new_map_members_with_a_warning() -> None:
    tracker = ScanSchemaTracker(None)
    tracker.project_batch(pa.record_batch({"m": pa.array([{"a": 1}])}), file="one.json")
    out = tracker.project_batch(
        pa.record_batch({"m": pa.array([{"a": 2, "b": 3}])}), file="two.json"
    )
    assert out.to_pylist() == [{"m": {"a": 2}}]
    assert tracker.warnings == [
        "two.json: column 'm.b' is not in the committed schema; ignored (strict schema mode)"
    ]
    assert not tracker.is_projected("m.b") and tracker.is_projected("m.a")


def test_strict_conflicting_type_names_file_column_and_both_types() -> None:
    tracker = ScanSchemaTracker(None)
    tracker.project_batch(batch(id=[1]), file="one.json")
    with pytest.raises(SchemaConflictError) as err:
        tracker.apply_reader_schema(pa.schema([("id", pa.string())]), file="two.json")
    message = str(err.value)
    assert "two.json" in message and "'id'" in message
    assert "BIGINT" in message and "VARCHAR" in message
    assert tracker.schema_version == 1  # unchanged by the failed merge


def test_strict_conflict_inside_a_map_names_the_member() -> None:
    tracker = ScanSchemaTracker(None)
    tracker.project_batch(pa.record_batch({"m": pa.array([{"a": 1}])}), file="one.json")
    with pytest.raises(
        SchemaConflictError, match=r"two.json: column 'm.a' changed type from BIGINT to VARCHAR"
    ):
        tracker.project_batch(pa.record_batch({"m": pa.array([{"a": "x"}])}), file="two.json")


def test_strict_guessed_missing_column_conflicts_with_its_real_type() -> None:
    # seed 003: a column missing from the first reader gets a default type; a later reader that
    # finds it with another type meets a conflict
    tracker = ScanSchemaTracker(["a", "b"])
    tracker.project_batch(batch(a=[1]), file="one.json")
    with pytest.raises(SchemaConflictError, match="column 'b' changed type from INT to VARCHAR"):
        tracker.project_batch(batch(a=[2], b=["x"]), file="two.json")


def test_strict_accepts_narrower_numbers_and_all_null_columns() -> None:
    tracker = ScanSchemaTracker(None)
    tracker.project_batch(batch(x=[1.5], y=[1]), file="one.json")
    out = tracker.project_batch(batch(x=pa.array([2], pa.int32()), y=pa.nulls(1)), file="two.json")
    assert out.schema == pa.schema([("x", pa.float64()), ("y", pa.int64())])
    assert out.to_pylist() == [{"x": 2.0, "y": None}]
    with pytest.raises(SchemaConflictError, match="from BIGINT to FLOAT8"):
        tracker.project_batch(batch(x=[1.0], y=[2.5]), file="three.json")


# ---------------------------------------------------------------- change mode


def test_change_mode_new_column_widens_and_earlier_shapes_get_typed_nulls() -> None:
    tracker = ScanSchemaTracker(None, mode="change")
    first = tracker.project_batch(batch(a=[1]), file="one.json")
    assert first.schema.names == ["a"] and tracker.schema_version == 1
    assert tracker.apply_reader_schema(
        pa.schema([("a", pa.int64()), ("b", pa.string())]), file="two.json"
    )
    assert tracker.schema_version == 2
    assert tracker.reader_input_schema().is_wildcard  # readers may still add columns
    # a later batch shaped like the earlier one: b is now a VARCHAR null, not the default INT
    again = tracker.project_batch(batch(a=[3]), file="three.json")
    assert again.schema == pa.schema([("a", pa.int64()), ("b", pa.string())])
    assert again.to_pylist() == [{"a": 3, "b": None}]
    assert tracker.schema_version == 2
    assert tracker.warnings == []


def test_change_mode_guessed_column_takes_its_real_type() -> None:
    tracker = ScanSchemaTracker(["a", "b"], mode="change")
    tracker.project_batch(batch(a=[1]), file="one.json")
    assert tracker.output_types()["b"] == INT and tracker.schema_version == 1
    out = tracker.project_batch(batch(a=[2], b=["x"]), file="two.json")
    assert out.schema.field("b").type == pa.string() and tracker.schema_version == 2


def test_change_mode_widens_numbers_and_maps() -> None:
    tracker = ScanSchemaTracker(None, mode="change")
    tracker.project_batch(pa.record_batch({"n": [1], "m": pa.array([{"a": 1}])}), file="one.json")
    out = tracker.project_batch(
        pa.record_batch({"n": [0.5], "m": pa.array([{"b": "x"}])}), file="two.json"
    )
    assert out.schema == pa.schema(
        [("n", pa.float64()), ("m", pa.struct([("a", pa.int64()), ("b", pa.string())]))]
    )
    assert out.to_pylist() == [{"n": 0.5, "m": {"a": None, "b": "x"}}]
    assert tracker.schema_version == 2


def test_change_mode_incompatible_types_still_conflict() -> None:
    tracker = ScanSchemaTracker(None, mode="change")
    tracker.project_batch(batch(a=[1]), file="one.json")
    with pytest.raises(SchemaConflictError, match=r"^two\.json: column 'a' .* BIGINT to VARCHAR"):
        tracker.project_batch(batch(a=["x"]), file="two.json")


# ---------------------------------------------------------------- versions and nullability


def test_version_increases_on_every_change_and_never_otherwise() -> None:
    tracker = ScanSchemaTracker(None, mode="change")
    steps = [
        (pa.schema([("a", pa.int64())]), True),
        (pa.schema([("a", pa.int64())]), False),  # same schema again
        (pa.schema([("a", pa.int32())]), False),  # narrower: converts into BIGINT
        (pa.schema([]), False),  # a reader with no columns: a is missing
        (pa.schema([("a", pa.null())]), False),
        (pa.schema([("b", pa.null())]), True),  # a new column, guessed INT
        (pa.schema([("b", pa.string())]), True),  # the guess was wrong: b is VARCHAR
        (pa.schema([("c", pa.null())]), True),
        (pa.schema([("c", pa.int32())]), False),  # the guess was right
        (pa.schema([("a", pa.float64()), ("b", pa.string())]), True),  # a widens to FLOAT8
    ]
    for i, (schema, expected) in enumerate(steps):
        assert tracker.apply_reader_schema(schema, file=f"f{i}.json") is expected, i
    assert tracker.schema_version == 5
    assert tracker.output_types() == {"a": FLOAT8, "b": VARCHAR, "c": INT}


def test_reader_columns_become_nullable_and_repeated_becomes_a_list() -> None:
    repeated = pa.list_(pa.field("element", pa.int64(), nullable=False))
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("r", repeated)])
    tracker = ScanSchemaTracker(None)
    data = pa.record_batch([pa.array([1]), pa.array([[1, 2]], repeated)], schema=schema)
    out = tracker.project_batch(data, file="f.parquet")
    assert out.schema.field("a").nullable
    assert out.schema.field("r").type == pa.list_(pa.field("element", pa.int64()))
    assert tracker.output_types()["r"] == MajorType.list_of(BIGINT)
    assert out.column("r").to_pylist() == [[1, 2]]


def test_dictionary_and_large_types_are_decoded_to_the_drill_mapping() -> None:
    tracker = ScanSchemaTracker(None)
    data = pa.record_batch(
        {
            "d": pa.array(["x", "y", "x"]).dictionary_encode(),
            "s": pa.array(["a", "b", "c"], pa.large_string()),
        }
    )
    out = tracker.project_batch(data, file="f.parquet")
    assert out.schema == pa.schema([("d", pa.string()), ("s", pa.string())])
    assert out.column("d").to_pylist() == ["x", "y", "x"]


def test_required_provided_repeated_column_stays_repeated() -> None:
    provided = [{"name": "tags", "type": "VARCHAR", "mode": "REPEATED"}]
    tracker = ScanSchemaTracker(["tags"], provided_schema=provided)
    out = tracker.project_batch(pa.record_batch({"tags": pa.array([["a"], None])}), file="f")
    assert tracker.output_types()["tags"] == MajorType(MinorType.VARCHAR, DataMode.REPEATED)
    assert out.column("tags").to_pylist() == [["a"], None]
