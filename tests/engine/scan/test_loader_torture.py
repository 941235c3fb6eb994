"""Result set loader torture tests: nested records, tiny limits, overflow anywhere, late columns.

Whatever the limits, every value of every row must come out exactly once, in order, in batches that
respect the limits and whose schema versions identify their schemas.
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import SchemaConflictError
from engine.scan.loader import ResultSetLoader, batch_schema_version


def same(expected: Any, actual: Any) -> bool:
    """Loader output equals a record: missing members and unwritten columns read as null."""
    if expected is None:
        return actual is None
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return False
        keys = set(expected) | set(actual)
        return all(same(expected.get(k), actual.get(k)) for k in keys)
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(same(e, a) for e, a in zip(expected, actual))
        )
    return type(expected) is type(actual) and expected == actual


class Scan:
    """Drives a loader the way a reader does and checks every harvested batch."""

    def __init__(self, loader: ResultSetLoader) -> None:
        self.loader = loader
        self.batches: list[pa.RecordBatch] = []
        self.schemas: dict[int, pa.Schema] = {}
        loader.start_batch()

    def _harvest(self) -> None:
        loader = self.loader
        assert loader.row_count <= loader.row_limit
        assert loader.batch_bytes <= loader.byte_limit or loader.row_count <= 1
        batch = loader.harvest()
        version = batch_schema_version(batch)
        if self.batches:
            assert version >= batch_schema_version(self.batches[-1])
        schema = batch.schema.remove_metadata()
        assert self.schemas.setdefault(version, schema) == schema
        self.batches.append(batch)

    def make_room(self) -> None:
        while self.loader.is_full():
            self._harvest()
            self.loader.start_batch()

    def write(self, record: dict) -> None:
        self.make_room()
        self.loader.write_record(record)

    def append(self, records: list[dict]) -> None:
        self.make_room()
        self.loader.append_batch(pa.RecordBatch.from_struct_array(pa.array(records)))

    def finish(self) -> list[dict]:
        self._harvest()
        while self.loader.pending_rows:
            self.loader.start_batch()
            self._harvest()
        self.loader.close()
        return [row for batch in self.batches for row in batch.to_pylist()]


def assert_all_rows_survive(expected: list[dict], actual: list[dict]) -> None:
    assert len(actual) == len(expected)
    for i, (e, a) in enumerate(zip(expected, actual)):
        assert same(e, a), f"row {i}: wrote {e!r}, read {a!r}"


# ---------------------------------------------------------------- a fixed torture run


def nested_record(rng: random.Random, i: int) -> dict:
    """Maps of arrays of maps; later rows bring new columns and members."""
    record: dict[str, Any] = {"id": i, "name": "n" * rng.randrange(0, 30)}
    record["customer"] = {
        "orders": [
            {
                "no": j,
                "lines": [
                    {"sku": f"s{k}", "qty": [rng.randrange(5) for _ in range(rng.randrange(4))]}
                    for k in range(rng.randrange(3))
                ],
            }
            for j in range(rng.randrange(4))
        ]
    }
    if i > 20:
        record["late"] = rng.random()
        record["customer"]["vip"] = rng.random() < 0.5
    if i > 40 and rng.random() < 0.5:
        record["customer"]["orders"].append({"no": -1, "note": "x" * rng.randrange(50)})
    if i % 7 == 0:
        record["customer"] = None
    return record


def test_torture_maps_of_arrays_of_maps_with_overflow_and_late_columns():
    rng = random.Random(2)
    records = [nested_record(rng, i) for i in range(120)]
    scan = Scan(ResultSetLoader(row_limit=9, byte_limit=400))
    for record in records:
        scan.write(record)
    rows = scan.finish()
    assert_all_rows_survive(records, rows)
    assert len(scan.batches) > len(records) // 9  # the byte limit cut batches, i.e. overflowed
    assert len(scan.schemas) >= 3  # late columns and members made schema versions


def test_torture_mixing_rows_and_arrow_batches():
    rng = random.Random(7)
    records = [nested_record(rng, i) for i in range(90)]
    scan = Scan(ResultSetLoader(row_limit=7, byte_limit=300))
    position = 0
    while position < len(records):
        size = rng.randrange(1, 12)
        group = records[position : position + size]
        if rng.random() < 0.5:
            scan.append(group)
        else:
            for record in group:
                scan.write(record)
        position += size
    assert_all_rows_survive(records, scan.finish())


# ---------------------------------------------------------------- random records and limits

LEAVES = {
    "int": st.integers(-(2**40), 2**40),
    "str": st.text(max_size=12),
    "float": st.floats(allow_nan=False, allow_infinity=False),
    "bool": st.booleans(),
}
NAMES = st.sampled_from(["a", "b", "c", "d", "e"])
SHAPES = st.recursive(
    st.sampled_from(sorted(LEAVES)),
    lambda inner: st.one_of(
        st.dictionaries(NAMES, inner, min_size=1, max_size=3).map(lambda d: ("map", d)),
        inner.map(lambda element: ("list", element)),
    ),
    max_leaves=8,
)


def values(shape: Any) -> st.SearchStrategy[Any]:
    if isinstance(shape, str):
        base = LEAVES[shape]
    elif shape[0] == "map":
        base = st.fixed_dictionaries({}, optional={k: values(v) for k, v in shape[1].items()})
    else:
        base = st.lists(values(shape[1]), max_size=4)
    return st.none() | base


@st.composite
def scans(draw: st.DrawFn) -> tuple[list[dict], list[bool], int, int]:
    shape = draw(st.dictionaries(NAMES, SHAPES, min_size=1, max_size=4))
    record = st.fixed_dictionaries({}, optional={k: values(v) for k, v in shape.items()})
    records = draw(st.lists(record, max_size=25))
    fast = draw(st.lists(st.booleans(), min_size=len(records), max_size=len(records)))
    return records, fast, draw(st.integers(1, 6)), draw(st.integers(1, 120))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scans())
def test_every_value_survives_exactly_once(scan_spec):
    records, fast, row_limit, byte_limit = scan_spec
    scan = Scan(ResultSetLoader(row_limit=row_limit, byte_limit=byte_limit))
    position = 0
    while position < len(records):
        end = position + 1
        while end < len(records) and fast[end] == fast[position]:
            end += 1
        if fast[position]:
            scan.append(records[position:end])
        else:
            for record in records[position:end]:
                scan.write(record)
        position = end
    assert_all_rows_survive(records, scan.finish())


@st.composite
def conflicting_scans(draw: st.DrawFn) -> tuple[list[dict], int, int]:
    """Records of two shapes over the same names: some writes conflict with earlier types."""
    shapes = [draw(st.dictionaries(NAMES, SHAPES, min_size=1, max_size=3)) for _ in range(2)]
    records = st.one_of(
        *(st.fixed_dictionaries({}, optional={k: values(v) for k, v in s.items()}) for s in shapes)
    )
    return draw(st.lists(records, max_size=25)), draw(st.integers(1, 5)), draw(st.integers(1, 120))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conflicting_scans())
def test_a_record_that_fails_leaves_no_trace(scan_spec):
    records, row_limit, byte_limit = scan_spec
    scan = Scan(ResultSetLoader(row_limit=row_limit, byte_limit=byte_limit))
    written = []
    for record in records:
        try:
            scan.write(record)
        except SchemaConflictError:
            continue
        written.append(record)
    assert_all_rows_survive(written, scan.finish())
