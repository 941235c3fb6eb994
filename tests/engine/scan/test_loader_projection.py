"""Result set loader: projection (dummy writers) and the vector cache shared by a scan's readers."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import SchemaConflictError
from engine.scan.loader import ResultSetLoader
from engine.scan.loader_projection import split_path
from engine.scan.vector_cache import VectorCache
from engine.types import BIGINT, FLOAT8, VARCHAR, DataMode, MajorType, MinorType

RECORD = {
    "a": 1,
    "b": "unprojected",
    "m": {"x": 1, "y": 2, "z": {"deep": 3}},
    "xs": [{"p": 1, "q": 2}, {"p": 3}],
    "n": {"keep": {"v": 1, "w": 2}},
}


def test_unprojected_columns_get_dummy_writers_that_store_nothing():
    loader = ResultSetLoader(projection={"a", "m.x"})
    writer = loader.writer()
    loader.start_batch()
    writer.start_row()
    b = writer.scalar("b")
    assert not b.is_projected and writer.scalar("a").is_projected
    b.set("ignored")
    b.set_int(3)
    dummy_map = writer.map("other")
    dummy_map.scalar("q").set(1)
    dummy_map.array("r").tuple().scalar("s").set(1)
    dummy_map.array("r").save()
    writer.array("zs").scalar().set(1)
    writer.array("zs").append_null()
    m = writer.map("m")
    m.scalar("x").set(10)
    m.scalar("y").set(20)  # member not projected
    assert not m.scalar("y").is_projected
    writer.scalar("a").set(1)
    writer.save_row()
    batch = loader.harvest()
    assert batch.to_pylist() == [{"m": {"x": 10}, "a": 1}]
    assert loader.schema_version == 5  # m, m.x, a added, m.x and a typed; dummies change nothing


def test_projection_reaches_into_maps_and_arrays_of_maps():
    projection = {"A", "m.x", "m.z.deep", "xs.p", "n.keep"}
    loader = ResultSetLoader(projection=projection)
    loader.start_batch()
    loader.write_record(RECORD)
    assert loader.harvest().to_pylist() == [
        {
            "a": 1,
            "m": {"x": 1, "z": {"deep": 3}},
            "xs": [{"p": 1}, {"p": 3}],
            "n": {"keep": {"v": 1, "w": 2}},
        }
    ]


def test_a_whole_map_path_projects_every_member():
    loader = ResultSetLoader(projection=["m", "m.x"])
    loader.start_batch()
    loader.write_record(RECORD)
    assert loader.harvest().to_pylist() == [{"m": RECORD["m"]}]


def test_empty_projection_counts_rows_only():
    loader = ResultSetLoader(projection=set(), row_limit=2)
    loader.start_batch()
    for _ in range(2):
        loader.write_record(RECORD)
    assert loader.is_full()
    batch = loader.harvest()
    assert (batch.num_rows, batch.num_columns) == (2, 0)


def test_wildcard_and_projection_filter_objects():
    class OnlyA:
        def is_projected(self, path: tuple[str, ...]) -> bool:
            return path[0] == "a" or path in {("m",), ("m", "y")}

    everything = {**RECORD, "xs": [{"p": 1, "q": 2}, {"p": 3, "q": None}]}
    for projection, expected in [
        (None, everything),
        ({"*"}, everything),
        (OnlyA(), {"a": 1, "m": {"y": 2}}),
    ]:
        loader = ResultSetLoader(projection=projection)
        loader.start_batch()
        loader.write_record(RECORD)
        assert loader.harvest().to_pylist() == [expected]


def test_split_path():
    assert split_path("m.`a.b`.c") == ("m", "a.b", "c")
    assert split_path("xs[2].p") == ("xs",)


def test_projection_applies_to_declared_schemas_too():
    schema = pa.schema(
        [("a", pa.int64()), ("b", pa.string()), ("m", pa.struct([("x", pa.int8())]))]
    )
    loader = ResultSetLoader(schema=schema, projection={"b", "m.q"})
    assert loader.schema.names == ["b", "m"]
    assert loader.schema.field("m").type == pa.struct([])


# ---------------------------------------------------------------- vector cache


def test_vector_cache_keeps_order_and_types_across_readers():
    cache = VectorCache()
    first = ResultSetLoader(vector_cache=cache, source="f1.json")
    first.start_batch()
    first.write_record({"b": 1, "a": 1.5, "m": {"x": "s", "y": None}})
    first_batch = first.harvest()
    first.close()
    assert [name for name, _ in cache.columns()] == ["b", "a", "m"]

    second = ResultSetLoader(vector_cache=cache, source="f2.json")
    second.start_batch()
    # another order; 'a' gets an integer, 'b' only a null, 'm.y' a value now
    second.write_record({"a": 2, "m": {"y": 7, "x": None}, "b": None})
    batch = second.harvest()
    assert batch.schema.names == ["b", "a", "m"]
    assert batch.schema.field("a").type == pa.float64()
    assert batch.schema.field("b").type == first_batch.schema.field("b").type == pa.int64()
    assert batch.schema.field("m").type == pa.struct([("x", pa.string()), ("y", pa.int64())])
    assert batch.to_pylist() == [{"b": None, "a": 2.0, "m": {"x": None, "y": 7}}]
    assert cache.lookup(("m", "y")) == BIGINT  # settled by the second reader


def test_later_reader_has_only_its_own_columns_in_cache_order():
    cache = VectorCache()
    for record in ({"a": 1, "b": 2, "c": 3}, {"c": 4, "new": "n", "a": 5}):
        loader = ResultSetLoader(vector_cache=cache)
        loader.start_batch()
        loader.write_record(record)
        batch = loader.harvest()
    assert batch.schema.names == ["a", "c", "new"]
    assert cache.schema().names == ["a", "b", "c", "new"]


def test_cached_type_yields_to_the_readers_first_value_but_not_later_ones():
    cache = VectorCache()
    first = ResultSetLoader(vector_cache=cache)
    first.start_batch()
    first.write_record({"v": 1})
    first.harvest()
    second = ResultSetLoader(vector_cache=cache, source="f2.json")
    second.start_batch()
    second.write_record({"v": "text"})  # nothing written yet: the reader's own type wins
    assert cache.lookup(("v",)) == VARCHAR
    with pytest.raises(
        SchemaConflictError, match=r"f2\.json: column 'v' changed type from VARCHAR"
    ):
        second.write_record({"v": 3})
    assert second.harvest().schema.field("v").type == pa.string()


def test_cache_types_arrays_and_maps_of_a_later_reader():
    cache = VectorCache()
    first = ResultSetLoader(vector_cache=cache)
    first.start_batch()
    first.write_record({"xs": [{"p": 1.5}], "tags": ["a"], "m": {"k": 1}})
    first.harvest()
    second = ResultSetLoader(vector_cache=cache)
    writer = second.writer()
    assert writer.array("tags").type == MajorType(MinorType.VARCHAR, DataMode.REPEATED)
    second.start_batch()
    second.write_record({"xs": [{"p": 2}], "tags": None, "m": None})
    batch = second.harvest()
    assert batch.schema == first.schema.remove_metadata().with_metadata(batch.schema.metadata)
    assert batch.to_pylist() == [{"xs": [{"p": 2.0}], "tags": None, "m": None}]


def test_cache_lookup_and_widening_updates():
    cache = VectorCache()
    loader = ResultSetLoader(vector_cache=cache)
    loader.start_batch()
    loader.write_record({"n": 1})
    loader.writer().scalar("n").widen(FLOAT8.minor)
    assert cache.lookup(("N",)) == FLOAT8 and len(cache) == 1
    assert cache.lookup(("missing",)) is None
