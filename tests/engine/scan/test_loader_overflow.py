"""Result set loader: row and byte limits, and overflow of the row in progress (seed 002).

Byte estimates used below (engine.scan.loader_values): BIGINT 8, a string len + 4, a null or a
map 1, an array 4 plus its elements.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import LoaderStateError, SchemaConflictError
from engine.scan.loader import ResultSetLoader, batch_schema_version
from engine.types import MinorType


def write_all(loader: ResultSetLoader, records: list[dict]) -> list[pa.RecordBatch]:
    """The reader loop of seed 002: write while not full, harvest, go on; then drain."""
    batches = []
    loader.start_batch()
    for record in records:
        if loader.is_full():
            batches.append(loader.harvest())
            loader.start_batch()
        loader.write_record(record)
    batches.append(loader.harvest())
    while loader.pending_rows:
        loader.start_batch()
        batches.append(loader.harvest())
    return batches


def test_row_limit_splits_batches():
    loader = ResultSetLoader(row_limit=3)
    batches = write_all(loader, [{"i": i} for i in range(7)])
    assert [b.num_rows for b in batches] == [3, 3, 1]
    assert [r["i"] for b in batches for r in b.to_pylist()] == list(range(7))


def test_starting_a_row_in_a_full_batch_overflows_it_into_the_next():
    loader = ResultSetLoader(row_limit=2)
    writer = loader.writer()
    loader.start_batch()
    for i in range(3):  # the third row ignores is_full()
        writer.start_row()
        writer.scalar("i").set(i)
        writer.save_row()
    assert loader.is_full() and loader.row_count == 2 and loader.pending_rows == 1
    with pytest.raises(LoaderStateError, match="full"):
        writer.start_row()
    assert loader.harvest().column("i").to_pylist() == [0, 1]
    assert loader.pending_rows == 1
    loader.start_batch()
    assert loader.row_count == 1
    assert loader.harvest().column("i").to_pylist() == [2]


def test_byte_limit_overflow_of_a_scalar_moves_the_whole_row():
    loader = ResultSetLoader(byte_limit=100)
    writer = loader.writer()
    loader.start_batch()
    for i in range(4):  # 8 + 14 bytes a row: 88
        loader.write_record({"i": i, "s": "x" * 10})
    assert loader.batch_bytes == 88 and not loader.is_full()
    writer.start_row()
    writer.scalar("i").set(4)  # 96: fits
    assert not loader.is_full()
    writer.scalar("s").set("y" * 10)  # 110: overflow; i = 4 moves with it
    assert loader.is_full() and loader.row_count == 4
    writer.save_row()
    first = loader.harvest()
    assert first.column("i").to_pylist() == [0, 1, 2, 3]
    loader.start_batch()
    assert loader.row_count == 1 and loader.batch_bytes == 22
    loader.write_record({"i": 5, "s": "z"})
    second = loader.harvest()
    assert second.to_pylist() == [{"i": 4, "s": "y" * 10}, {"i": 5, "s": "z"}]


def test_overflow_in_the_middle_of_an_array_moves_its_earlier_elements():
    loader = ResultSetLoader(byte_limit=230)
    writer = loader.writer()
    loader.start_batch()
    for i in range(2):  # 8 + 4 + 10 * 8 = 92 bytes a row
        loader.write_record({"id": i, "xs": list(range(10))})
    writer.start_row()
    writer.scalar("id").set(2)
    xs = writer.array("xs")
    for k in range(10):  # 184 + 8 + 4 = 196; the fifth element crosses 230
        xs.scalar().set(100 + k)
        assert loader.is_full() == (k >= 4)
    writer.save_row()
    first = loader.harvest()
    assert first.to_pylist() == [{"id": i, "xs": list(range(10))} for i in range(2)]
    loader.start_batch()
    second = loader.harvest()
    assert second.to_pylist() == [{"id": 2, "xs": [100 + k for k in range(10)]}]


def test_overflow_deep_inside_arrays_of_maps_moves_all_nested_elements():
    record = {
        "orders": [
            {"id": 1, "lines": [{"sku": "a", "qty": [1, 2, 3]}, {"sku": "b", "qty": []}]},
            {"id": 2, "lines": [{"sku": "c", "qty": [4]}]},
        ],
        "m": {"tags": ["p", "q"]},
    }
    loader = ResultSetLoader(byte_limit=150)
    batches = write_all(loader, [record] * 5)
    assert sum(b.num_rows for b in batches) == 5 and len(batches) > 2
    for batch in batches:
        assert batch.to_pylist() == [record] * batch.num_rows


def test_column_added_during_the_overflow_row_appears_only_in_the_next_batch():
    loader = ResultSetLoader(byte_limit=50)
    writer = loader.writer()
    loader.start_batch()
    loader.write_record({"s": "x" * 20})
    version_before = loader.schema_version
    writer.start_row()
    writer.scalar("s").set("y" * 20)  # overflow
    writer.scalar("late").set(1)
    writer.map("m").scalar("k").set("v")
    writer.save_row()
    assert loader.schema_version > version_before
    first = loader.harvest()
    assert first.schema.names == ["s"]
    assert batch_schema_version(first) == version_before
    assert loader.output_schema_version == version_before
    loader.start_batch()
    second = loader.harvest()
    assert second.schema.names == ["s", "late", "m"]
    assert batch_schema_version(second) == loader.schema_version
    assert second.to_pylist() == [{"s": "y" * 20, "late": 1, "m": {"k": "v"}}]


def test_map_member_added_during_the_overflow_row_waits_for_the_next_batch():
    loader = ResultSetLoader(byte_limit=40)
    loader.start_batch()
    loader.write_record({"m": {"x": "a" * 20}})
    loader.write_record({"m": {"x": "b" * 20, "y": 1}})
    first = loader.harvest()
    assert first.schema.field("m").type == pa.struct([("x", pa.string())])
    assert first.to_pylist() == [{"m": {"x": "a" * 20}}]
    loader.start_batch()
    second = loader.harvest()
    assert second.schema.field("m").type == pa.struct([("x", pa.string()), ("y", pa.int64())])
    assert second.to_pylist() == [{"m": {"x": "b" * 20, "y": 1}}]


def test_types_changed_during_the_overflow_row_keep_the_harvested_batch_schema():
    loader = ResultSetLoader(byte_limit=60)
    writer = loader.writer()
    loader.start_batch()
    loader.write_record({"s": "x" * 20, "late": None, "n": 1, "xs": [], "ys": [1]})
    version = loader.schema_version
    writer.start_row()
    writer.scalar("s").set("y" * 40)  # overflow first, then the changes
    writer.scalar("late").set("typed now")
    writer.scalar("n").widen(MinorType.FLOAT8)
    writer.scalar("n").set(2.5)
    writer.array("xs").set([{"a": 1}])
    writer.array("ys").set([None])
    writer.save_row()
    first = loader.harvest()
    assert batch_schema_version(first) == version
    assert [f.type for f in first.schema] == [
        pa.string(),
        pa.null(),
        pa.int64(),
        pa.list_(pa.field("element", pa.null())),
        pa.list_(pa.field("element", pa.int64(), nullable=False)),
    ]
    assert first.to_pylist() == [{"s": "x" * 20, "late": None, "n": 1, "xs": [], "ys": [1]}]
    loader.start_batch()
    second = loader.harvest()
    assert batch_schema_version(second) == loader.schema_version > version
    assert [f.type for f in second.schema] == [
        pa.string(),
        pa.string(),
        pa.float64(),
        pa.list_(pa.field("element", pa.struct([("a", pa.int64())]), nullable=False)),
        pa.list_(pa.field("element", pa.int64())),
    ]
    assert second.to_pylist() == [
        {"s": "y" * 40, "late": "typed now", "n": 2.5, "xs": [{"a": 1}], "ys": [None]}
    ]


def test_type_changed_in_a_row_before_it_overflows_is_also_held_back():
    loader = ResultSetLoader(byte_limit=40)
    loader.start_batch()
    loader.write_record({"n": None, "s": "x" * 20})
    loader.write_record({"n": 7, "s": "y" * 20})  # n typed, then s overflows
    first = loader.harvest()
    assert first.schema.field("n").type == pa.null()
    loader.start_batch()
    second = loader.harvest()
    assert second.schema.field("n").type == pa.int64()
    assert second.to_pylist() == [{"n": 7, "s": "y" * 20}]


def test_a_row_larger_than_the_byte_limit_is_written_alone():
    loader = ResultSetLoader(byte_limit=10)
    records = [{"s": "x" * 100}, {"s": "y" * 100}, {"s": "z"}]
    batches = write_all(loader, records)
    assert [b.num_rows for b in batches] == [1, 1, 1]
    assert [r for b in batches for r in b.to_pylist()] == records


def test_harvest_while_the_overflow_row_is_open_continues_it_in_the_next_batch():
    loader = ResultSetLoader(byte_limit=30)
    writer = loader.writer()
    loader.start_batch()
    loader.write_record({"s": "x" * 20})
    writer.start_row()
    writer.scalar("s").set("y" * 20)
    assert loader.is_full()
    assert loader.harvest().to_pylist() == [{"s": "x" * 20}]
    loader.start_batch()
    writer.array("xs").scalar().set(1)
    writer.save_row()
    assert loader.harvest().to_pylist() == [{"s": "y" * 20, "xs": [1]}]


def test_discarding_the_overflow_row_undoes_the_overflow():
    loader = ResultSetLoader(byte_limit=30)
    writer = loader.writer()
    loader.start_batch()
    loader.write_record({"s": "x" * 20})
    writer.start_row()
    writer.scalar("s").set("y" * 20)
    writer.scalar("extra").set(1)
    assert loader.is_full()
    writer.discard_row()
    assert not loader.is_full()
    loader.write_record({"s": "z"})
    batch = loader.harvest()
    assert batch.to_pylist() == [{"s": "x" * 20, "extra": None}, {"s": "z", "extra": None}]
    assert batch_schema_version(batch) == loader.schema_version


def test_a_failed_record_in_the_overflow_row_is_discarded_with_its_overflow():
    loader = ResultSetLoader(byte_limit=40)
    loader.start_batch()
    loader.write_record({"s": "x" * 20, "n": 1})
    with pytest.raises(SchemaConflictError, match="BIGINT to VARCHAR"):
        loader.write_record({"s": "y" * 20, "n": "bad"})
    assert not loader.is_full() and loader.pending_rows == 0
    assert loader.harvest().to_pylist() == [{"s": "x" * 20, "n": 1}]
