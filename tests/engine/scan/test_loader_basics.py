"""Result set loader, basics first (seed 002's advice): lifecycle, each writer kind, nulls, types."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from engine.errors import LoaderStateError, SchemaConflictError, StorageError
from engine.scan.loader import ResultSetLoader, batch_schema_version
from engine.types import BIGINT, FLOAT8, VARCHAR, DataMode, MajorType, MinorType


def rows(loader: ResultSetLoader) -> list[dict]:
    return loader.harvest().to_pylist()


# ---------------------------------------------------------------- lifecycle


def test_initial_schema_write_harvest_close():
    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    loader = ResultSetLoader(schema=schema)
    writer = loader.writer()
    loader.start_batch()
    writer.start_row()
    writer.scalar("a").set_int(1)
    writer.scalar("b").set_string("x")
    writer.save_row()
    writer.start_row()
    writer.scalar("a").set_int(2)
    writer.save_row()
    batch = loader.harvest()
    assert batch.schema.remove_metadata() == schema
    assert batch.to_pylist() == [{"a": 1, "b": "x"}, {"a": 2, "b": None}]
    assert batch_schema_version(batch) == loader.schema_version == 2
    assert loader.batch_count == 1 and loader.total_rows == 2
    loader.close()
    with pytest.raises(LoaderStateError, match="closed"):
        loader.start_batch()
    with pytest.raises(LoaderStateError, match="closed"):
        loader.writer()


def test_empty_batch_has_the_schema_and_no_rows():
    loader = ResultSetLoader(schema=pa.schema([("a", pa.float64())]))
    loader.start_batch()
    batch = loader.harvest()
    assert batch.num_rows == 0
    assert batch.schema.names == ["a"] and batch.schema.field("a").type == pa.float64()


def test_empty_loader_gives_a_batch_without_columns():
    loader = ResultSetLoader()
    loader.start_batch()
    batch = loader.harvest()
    assert (batch.num_rows, batch.num_columns) == (0, 0)
    assert batch_schema_version(batch) == 0


def test_harvest_twice_needs_a_new_batch_and_batches_do_not_share_rows():
    loader = ResultSetLoader()
    loader.start_batch()
    loader.write_record({"a": 1})
    assert rows(loader) == [{"a": 1}]
    with pytest.raises(LoaderStateError, match="start_batch"):
        loader.harvest()
    with pytest.raises(LoaderStateError, match="start_batch"):
        loader.writer().start_row()
    loader.start_batch()
    loader.write_record({"a": 2})
    loader.write_record({"a": 3})
    assert rows(loader) == [{"a": 2}, {"a": 3}]
    assert loader.total_rows == 3 and loader.batch_count == 2


def test_lifecycle_misuse_is_reported():
    loader = ResultSetLoader()
    writer = loader.writer()
    loader.start_batch()
    with pytest.raises(LoaderStateError, match="while a batch is active"):
        loader.start_batch()
    with pytest.raises(LoaderStateError, match="outside a row"):
        writer.scalar("a").set(1)
    with pytest.raises(LoaderStateError, match="without start_row"):
        writer.save_row()
    writer.start_row()
    with pytest.raises(LoaderStateError, match="in progress"):
        writer.start_row()
    with pytest.raises(LoaderStateError, match="in progress"):
        loader.harvest()
    writer.discard_row()
    assert rows(loader) == []


def test_context_manager_closes():
    with ResultSetLoader() as loader:
        loader.start_batch()
    with pytest.raises(LoaderStateError):
        loader.harvest()


def test_limits_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        ResultSetLoader(row_limit=0)


def test_writers_stay_valid_across_batches():
    loader = ResultSetLoader()
    writer = loader.writer()
    a = writer.scalar("a")
    for batch_values in ([1, 2], [3]):
        loader.start_batch()
        for value in batch_values:
            writer.start_row()
            a.set(value)
            writer.save_row()
        assert [r["a"] for r in rows(loader)] == batch_values


# ---------------------------------------------------------------- scalars and types


def test_scalar_setters_and_arrow_types():
    loader = ResultSetLoader()
    writer = loader.writer()
    loader.start_batch()
    writer.start_row()
    writer.scalar("i").set_int(7)
    writer.scalar("f").set_float(1.5)
    writer.scalar("t").set_bool(True)
    writer.scalar("s").set_string("héllo")
    writer.scalar("y").set_bytes(b"\x00\x01")
    writer.scalar("d").set_date(datetime.date(2024, 2, 29))
    writer.scalar("tm").set_time(datetime.time(12, 30, 1))
    stamp = datetime.datetime(2024, 1, 1, 8, tzinfo=datetime.UTC)
    writer.scalar("ts").set_timestamp(stamp)
    writer.save_row()
    batch = loader.harvest()
    assert [f.type for f in batch.schema] == [
        pa.int64(),
        pa.float64(),
        pa.bool_(),
        pa.string(),
        pa.binary(),
        pa.date32(),
        pa.time64("us"),
        pa.timestamp("us", tz="UTC"),
    ]
    assert batch.to_pylist()[0] == {
        "i": 7,
        "f": 1.5,
        "t": True,
        "s": "héllo",
        "y": b"\x00\x01",
        "d": datetime.date(2024, 2, 29),
        "tm": datetime.time(12, 30, 1),
        "ts": stamp,
    }


def test_integer_into_float_column_is_widened_value():
    loader = ResultSetLoader(schema=pa.schema([("x", pa.float64())]))
    loader.start_batch()
    loader.write_record({"x": 3})
    loader.write_record({"x": 2.5})
    batch = loader.harvest()
    assert batch.column("x").to_pylist() == [3.0, 2.5]
    assert batch.schema.field("x").type == pa.float64()


def test_incompatible_value_raises_schema_conflict_naming_file_and_column():
    loader = ResultSetLoader(source="data/f1.json")
    loader.start_batch()
    loader.write_record({"a": 1})
    loader.write_record({"a": 2, "b": "ok", "c": 1})
    # fails at "a" after "c" was written: the failed record leaves nothing behind
    with pytest.raises(SchemaConflictError) as info:
        loader.write_record({"c": 5, "a": "text"})
    error = info.value
    assert (error.column, error.old_type, error.new_type, error.file) == (
        "a",
        "BIGINT",
        "VARCHAR",
        "data/f1.json",
    )
    assert "data/f1.json" in str(error) and "'a'" in str(error)
    assert rows(loader) == [{"a": 1, "b": None, "c": None}, {"a": 2, "b": "ok", "c": 1}]


def test_a_float_after_integers_widens_the_column_within_the_batch():
    loader = ResultSetLoader()
    writer = loader.writer()
    loader.start_batch()
    loader.write_record({"n": 1})
    version = loader.schema_version
    loader.write_record({"n": 1.5})
    assert loader.schema_version == version + 1
    batch = loader.harvest()
    assert batch.schema.field("n").type == pa.float64()
    assert batch.column("n").to_pylist() == [1.0, 1.5]
    with pytest.raises(SchemaConflictError):
        writer.scalar("n").widen(MinorType.VARCHAR)


def test_a_declared_integer_column_does_not_widen_on_a_float():
    loader = ResultSetLoader(schema=pa.schema([("n", pa.int64())]))
    writer = loader.writer()
    loader.start_batch()
    loader.write_record({"n": 1})
    with pytest.raises(SchemaConflictError, match="BIGINT to FLOAT8"):
        loader.write_record({"n": 1.5})
    writer.scalar("n").widen(MinorType.FLOAT8)
    loader.write_record({"n": 1.5})
    assert loader.harvest().column("n").to_pylist() == [1.0, 1.5]


def test_records_to_batch_widens_bigint_to_float8():
    from engine.exec.local.sources import records_to_batch

    batch = records_to_batch([{"a": 1}, {"a": 1.5}])
    assert batch.schema.field("a").type == pa.float64()
    assert batch.to_pylist() == [{"a": 1.0}, {"a": 1.5}]


def test_bool_is_not_an_integer_and_huge_integers_are_reported():
    loader = ResultSetLoader(source="f.json")
    loader.start_batch()
    loader.write_record({"n": 1})
    with pytest.raises(SchemaConflictError, match="BIGINT to BIT"):
        loader.write_record({"n": True})
    with pytest.raises(StorageError, match="does not fit BIGINT"):
        loader.write_record({"n": 2**70})
    assert rows(loader) == [{"n": 1}]


def test_int_column_takes_ints_that_fit_and_conflicts_on_bigger_ones():
    loader = ResultSetLoader(schema=pa.schema([("i", pa.int32())]))
    writer = loader.writer()
    loader.start_batch()
    loader.write_record({"i": 5})
    with pytest.raises(SchemaConflictError, match="INT to BIGINT"):
        loader.write_record({"i": 2**40})
    writer.scalar("i").widen(MinorType.BIGINT)
    loader.write_record({"i": 2**40})
    assert rows(loader) == [{"i": 5}, {"i": 2**40}]


def test_null_only_column_has_the_null_type_until_a_value_arrives():
    loader = ResultSetLoader(row_limit=2)
    loader.start_batch()
    loader.write_record({"a": 1, "b": None})
    loader.write_record({"a": 2, "b": None})
    first = loader.harvest()
    assert first.schema.field("b").type == pa.null()
    loader.start_batch()
    loader.write_record({"a": 3, "b": "now"})
    second = loader.harvest()
    assert second.schema.field("b").type == pa.string()
    assert second.column("b").to_pylist() == ["now"]
    assert batch_schema_version(second) == batch_schema_version(first) + 1


def test_required_column_fills_defaults_and_rejects_null():
    schema = pa.schema([pa.field("r", pa.int64(), nullable=False), ("o", pa.int64())])
    loader = ResultSetLoader(schema=schema)
    loader.start_batch()
    loader.write_record({"o": 1})
    with pytest.raises(SchemaConflictError, match="to NULL"):
        loader.write_record({"r": None})
    batch = loader.harvest()
    assert batch.schema.field("r").nullable is False
    assert batch.to_pylist() == [{"r": 0, "o": 1}]


def test_add_column_declares_types_including_map_members():
    loader = ResultSetLoader()
    writer = loader.writer()
    m_type = MajorType.map({"x": BIGINT, "tags": MajorType(MinorType.VARCHAR, DataMode.REPEATED)})
    m = writer.add_column("m", m_type)
    n = writer.add_column("n", FLOAT8)
    assert writer.add_column("n", FLOAT8) is n
    assert loader.schema.field("m").type == pa.struct(
        [("x", pa.int64()), ("tags", pa.list_(pa.field("element", pa.string(), nullable=False)))]
    )
    loader.start_batch()
    writer.start_row()
    m.scalar("x").set(1)
    m.array("tags").scalar().set("t")
    n.set(2)
    writer.save_row()
    assert rows(loader) == [{"m": {"x": 1, "tags": ["t"]}, "n": 2.0}]
    with pytest.raises(SchemaConflictError):
        writer.add_column("n", VARCHAR)


def test_column_lookup_is_case_insensitive_keeping_the_first_spelling():
    loader = ResultSetLoader()
    loader.start_batch()
    loader.write_record({"Name": "a"})
    loader.write_record({"NAME": "b"})
    assert loader.writer().column("name").type == VARCHAR
    with pytest.raises(KeyError):
        loader.writer().column("other")
    assert rows(loader) == [{"Name": "a"}, {"Name": "b"}]


# ---------------------------------------------------------------- maps, arrays, nesting


def test_map_writer_members_nulls_and_presence():
    loader = ResultSetLoader()
    writer = loader.writer()
    loader.start_batch()
    m = writer.map("m")
    writer.start_row()
    m.scalar("x").set(1)
    m.scalar("y").set("a")
    writer.save_row()
    writer.start_row()  # m untouched: null
    writer.save_row()
    writer.start_row()
    m.set_not_null()  # {}: present, members null
    writer.save_row()
    writer.start_row()
    m.scalar("x").set(4)
    writer.save_row()
    writer.start_row()
    m.set_null()
    writer.save_row()
    batch = loader.harvest()
    assert batch.schema.field("m").type == pa.struct([("x", pa.int64()), ("y", pa.string())])
    assert batch.column("m").to_pylist() == [
        {"x": 1, "y": "a"},
        None,
        {"x": None, "y": None},
        {"x": 4, "y": None},
        None,
    ]


def test_array_of_scalars_null_empty_and_null_elements():
    loader = ResultSetLoader()
    writer = loader.writer()
    loader.start_batch()
    xs = writer.array("xs")
    writer.start_row()
    xs.scalar().set(1)
    xs.scalar().set(2)
    writer.save_row()
    writer.start_row()
    writer.save_row()
    writer.start_row()
    xs.set_empty()
    writer.save_row()
    assert loader.schema.field("xs").type == pa.list_(pa.field("element", pa.int64(), False))
    version = loader.schema_version
    writer.start_row()
    xs.scalar().set(3)
    xs.append_null()
    writer.save_row()
    assert loader.schema_version == version + 1  # REPEATED BIGINT -> LIST<BIGINT>
    batch = loader.harvest()
    assert batch.schema.field("xs").type == pa.list_(pa.field("element", pa.int64()))
    assert batch.column("xs").to_pylist() == [[1, 2], None, [], [3, None]]


def test_array_of_maps_with_tuple_and_save():
    loader = ResultSetLoader()
    writer = loader.writer()
    loader.start_batch()
    points = writer.array("points")
    writer.start_row()
    for x in (1, 2):
        point = points.tuple()
        point.scalar("x").set(x)
        point.scalar("y").set(x * 10)
        points.save()
    points.save()  # an element with nothing written: a map with null members
    writer.save_row()
    writer.start_row()
    points.set([{"x": 3}])
    writer.save_row()
    batch = loader.harvest()
    element = pa.struct([("x", pa.int64()), ("y", pa.int64())])
    assert batch.schema.field("points").type == pa.list_(pa.field("element", element, False))
    assert batch.column("points").to_pylist() == [
        [{"x": 1, "y": 10}, {"x": 2, "y": 20}, {"x": None, "y": None}],
        [{"x": 3, "y": None}],
    ]


def test_array_of_arrays():
    loader = ResultSetLoader()
    writer = loader.writer()
    loader.start_batch()
    grid = writer.array("grid")
    writer.start_row()
    inner = grid.array()
    inner.scalar().set(1)
    inner.scalar().set(2)
    grid.save()
    grid.save()  # an empty inner array
    inner.scalar().set(3)
    grid.save()
    writer.save_row()
    loader.write_record({"grid": [[4], None, []]})
    batch = loader.harvest()
    assert batch.column("grid").to_pylist() == [[[1, 2], [], [3]], [[4], None, []]]
    assert batch.schema.field("grid").type == pa.list_(
        pa.field("element", pa.list_(pa.field("element", pa.int64(), False)))
    )


def test_nested_four_deep_through_writers_and_records():
    loader = ResultSetLoader()
    writer = loader.writer()
    loader.start_batch()
    writer.start_row()
    orders = writer.map("customer").array("orders")
    order = orders.tuple()
    order.scalar("id").set(1)
    lines = order.array("lines")
    line = lines.tuple()
    line.scalar("sku").set("a")
    line.array("qty").scalar().set(1)
    line.array("qty").scalar().set(2)
    lines.save()
    orders.save()
    writer.save_row()
    record = {
        "customer": {
            "orders": [
                {"id": 2, "lines": [{"sku": "b", "qty": [3]}, {"sku": "c", "qty": []}]},
                {"id": 3, "lines": None},
            ]
        }
    }
    loader.write_record(record)
    loader.write_record({"customer": {"orders": []}})
    assert rows(loader) == [
        {"customer": {"orders": [{"id": 1, "lines": [{"sku": "a", "qty": [1, 2]}]}]}},
        record,
        {"customer": {"orders": []}},
    ]


def test_records_with_missing_members_and_nulls():
    loader = ResultSetLoader()
    loader.start_batch()
    loader.write_record({"a": 1, "m": {"x": 1, "n": {"deep": True}}})
    loader.write_record({"m": {"n": None}})
    loader.write_record({"m": None, "a": None})
    loader.write_record({})
    assert rows(loader) == [
        {"a": 1, "m": {"x": 1, "n": {"deep": True}}},
        {"a": None, "m": {"x": None, "n": None}},
        {"a": None, "m": None},
        {"a": None, "m": None},
    ]


def test_null_column_may_turn_into_a_map_or_array_but_a_typed_one_may_not():
    loader = ResultSetLoader()
    loader.start_batch()
    loader.write_record({"m": None, "xs": None, "s": "x"})
    loader.write_record({"m": {"a": 1}, "xs": [1]})
    with pytest.raises(SchemaConflictError, match="VARCHAR to MAP"):
        loader.write_record({"s": {"a": 1}})
    with pytest.raises(SchemaConflictError, match="MAP<a: BIGINT> to LIST"):
        loader.write_record({"m": [1]})
    assert rows(loader) == [
        {"m": None, "xs": None, "s": "x"},
        {"m": {"a": 1}, "xs": [1], "s": None},
    ]


def test_stale_writer_of_a_replaced_column_raises():
    loader = ResultSetLoader()
    writer = loader.writer()
    loader.start_batch()
    stale = writer.scalar("m")
    loader.write_record({"m": {"a": 1}})
    writer.start_row()
    with pytest.raises(LoaderStateError, match="changed kind"):
        stale.set(1)
    writer.map("m").scalar("a").set(2)
    writer.save_row()
    assert rows(loader) == [{"m": {"a": 1}}, {"m": {"a": 2}}]


def test_array_element_kinds_must_agree():
    loader = ResultSetLoader()
    loader.start_batch()
    loader.write_record({"xs": [None, 1]})
    with pytest.raises(SchemaConflictError, match="LIST<MAP>"):
        loader.write_record({"xs": [{"a": 1}]})
    loader.write_record({"ys": [None]})
    loader.write_record({"ys": [{"a": 1}, None]})
    assert rows(loader) == [
        {"xs": [None, 1], "ys": None},
        {"xs": None, "ys": [None]},
        {"xs": None, "ys": [{"a": 1}, None]},
    ]


# ---------------------------------------------------------------- schema versions


def test_schema_version_bumps_on_every_change():
    loader = ResultSetLoader()
    writer = loader.writer()
    assert loader.schema_version == 0
    writer.scalar("a")  # added with the late NULL type
    assert loader.schema_version == 1
    loader.start_batch()
    loader.write_record({"a": 1})  # late type settled
    assert loader.schema_version == 2
    loader.write_record({"a": 2, "b": "x"})  # b added with its value's type
    assert loader.schema_version == 3
    loader.write_record({"a": 3, "b": "y"})  # no change
    assert loader.schema_version == 3
    first = loader.harvest()
    assert batch_schema_version(first) == loader.output_schema_version == 3
    loader.start_batch()
    loader.write_record({"a": 4})
    second = loader.harvest()
    assert batch_schema_version(second) == 3 and second.schema == first.schema
    loader.start_batch()
    writer.scalar("a").widen(MinorType.FLOAT8)
    loader.write_record({"a": 5})
    third = loader.harvest()
    assert batch_schema_version(third) == 4


def test_tuple_and_array_writers_take_whole_python_values():
    loader = ResultSetLoader()
    writer = loader.writer()
    loader.start_batch()
    writer.start_row()
    writer.map("m").set({"a": 1, "b": [1, 2], "c": {"d": "x"}})
    writer.array("xs").set(({"k": 1}, None))
    writer.save_row()
    writer.start_row()
    writer.map("m").set(None)
    writer.array("xs").set(None)
    writer.save_row()
    assert writer.names == ["m", "xs"] and writer.map("m").names == ["a", "b", "c"]
    assert writer.array("xs").map().names == ["k"]
    assert rows(loader) == [
        {"m": {"a": 1, "b": [1, 2], "c": {"d": "x"}}, "xs": [{"k": 1}, None]},
        {"m": None, "xs": None},
    ]
