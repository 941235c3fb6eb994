"""Properties of the schema-change mode over random sequences of reader schemas, against a model."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import SchemaConflictError
from engine.scan.tracker import ScanSchemaTracker
from engine.types import BIGINT, FLOAT8, INT, VARCHAR, MajorType

# Each column name has a fixed kind, so no two readers disagree beyond what the mode allows
# (nulls, wider numbers, new map members).
NUMBERS = {"n1": None, "n2": None}
TEXTS = {"s1": None}
MAPS = {"m1": None, "m2": None}
NUMERIC_TYPES = [pa.null(), pa.int32(), pa.int64(), pa.float64()]
RANK = {pa.int32(): INT, pa.int64(): BIGINT, pa.float64(): FLOAT8}
ORDER = [INT, BIGINT, FLOAT8]


def member_types() -> st.SearchStrategy[pa.DataType]:
    return st.sampled_from([pa.null(), pa.int64()])


@st.composite
def reader_schema(draw: st.DrawFn) -> pa.Schema:
    names = draw(st.lists(st.sampled_from([*NUMBERS, *TEXTS, *MAPS]), unique=True, max_size=5))
    fields = []
    for name in names:
        if name in NUMBERS:
            dtype = draw(st.sampled_from(NUMERIC_TYPES))
        elif name in TEXTS:
            dtype = draw(st.sampled_from([pa.null(), pa.string()]))
        elif draw(st.booleans()):
            members = draw(st.lists(st.sampled_from(["x", "y", "z"]), unique=True, max_size=3))
            dtype = pa.struct([(m, draw(member_types())) for m in members])
        else:
            dtype = pa.null()
        fields.append(pa.field(name, dtype))
    return pa.schema(fields)


def _model_type(name: str, seen: list[pa.DataType]) -> MajorType:
    """What the output type should be after the reader types ``seen`` for one column."""
    concrete = [t for t in seen if not pa.types.is_null(t)]
    if not concrete:
        return INT  # seed 003's classic nullable INT for a column never seen with a value
    if name in NUMBERS:
        return max((RANK[t] for t in concrete), key=ORDER.index)
    if name in TEXTS:
        return VARCHAR
    members: dict[str, list[pa.DataType]] = {}
    for struct in concrete:
        for field in struct:
            members.setdefault(field.name, []).append(field.type)
    return MajorType.map(
        {
            m: BIGINT if any(not pa.types.is_null(t) for t in ts) else INT
            for m, ts in members.items()
        }
    )


def _model(schemas: list[pa.Schema]) -> tuple[dict[str, MajorType], int]:
    """The expected output types and the number of changes, computed without the tracker."""
    seen: dict[str, list[pa.DataType]] = {}
    previous: list[tuple[str, MajorType]] | None = None
    changes = 0
    for schema in schemas:
        for field in schema:
            seen.setdefault(field.name, []).append(field.type)
        current = [(name, _model_type(name, types)) for name, types in seen.items()]
        if current != previous:
            changes += 1
        previous = current
    return {name: _model_type(name, types) for name, types in seen.items()}, changes


@settings(max_examples=150, deadline=None)
@given(st.lists(reader_schema(), min_size=1, max_size=8))
def test_change_mode_output_holds_every_column_seen_and_counts_changes(
    schemas: list[pa.Schema],
) -> None:
    tracker = ScanSchemaTracker(None, mode="change")
    reported = 0
    for i, schema in enumerate(schemas):
        changed = tracker.apply_reader_schema(schema, file=f"f{i}.json")
        reported += changed
        # every batch the reader could send comes out exactly in the current output schema
        nulls = pa.record_batch([pa.nulls(2, f.type) for f in schema], schema=schema)
        assert tracker.project_batch(nulls, file=f"f{i}.json").schema == tracker.output_schema()
    expected_types, expected_changes = _model(schemas)
    assert set(tracker.output_schema().names) == {f.name for s in schemas for f in s}
    assert tracker.output_types() == expected_types
    assert tracker.schema_version == reported == expected_changes
    assert tracker.warnings == []


@settings(max_examples=60, deadline=None)
@given(st.lists(reader_schema(), min_size=1, max_size=6))
def test_strict_mode_never_changes_after_the_first_batch(schemas: list[pa.Schema]) -> None:
    schemas = [s for s in schemas if len(s)]  # an empty file does not commit a wildcard
    if not schemas:
        return
    tracker = ScanSchemaTracker(None, mode="strict")
    tracker.apply_reader_schema(schemas[0], file="first.json")
    committed = tracker.output_schema()
    for i, schema in enumerate(schemas[1:]):
        try:
            changed = tracker.apply_reader_schema(schema, file=f"f{i}.json")
        except SchemaConflictError:  # a conflict is allowed; a change is not
            continue
        assert not changed
    assert tracker.output_schema() == committed
    assert tracker.schema_version == 1
