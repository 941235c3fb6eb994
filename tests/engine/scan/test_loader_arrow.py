"""Result set loader: the fast path for whole Arrow data (append_batch / append_arrays)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import LoaderStateError, SchemaConflictError, StorageError
from engine.scan.loader import ResultSetLoader, batch_schema_version
from engine.scan.vector_cache import VectorCache


def drain(loader: ResultSetLoader) -> list[pa.RecordBatch]:
    batches = [loader.harvest()]
    while loader.pending_rows:
        loader.start_batch()
        batches.append(loader.harvest())
    return batches


def test_batch_is_aligned_to_the_loader_schema():
    schema = pa.schema([("a", pa.int64()), ("b", pa.string()), ("c", pa.float64())])
    loader = ResultSetLoader(schema=schema)
    version = loader.schema_version
    loader.start_batch()
    data = pa.record_batch(
        {"B": ["x", "y"], "a": pa.array([1, 2], pa.int32()), "new": [True, None], "c": [1, 2]}
    )
    loader.append_batch(data)
    assert loader.schema_version == version + 1  # 'new' added
    batch = loader.harvest()
    assert batch.schema.names == ["a", "b", "c", "new"]
    assert [f.type for f in batch.schema] == [pa.int64(), pa.string(), pa.float64(), pa.bool_()]
    assert batch.to_pylist() == [
        {"a": 1, "b": "x", "c": 1.0, "new": True},
        {"a": 2, "b": "y", "c": 2.0, "new": None},
    ]


def test_rows_and_arrow_data_keep_their_order_and_missing_columns_are_null():
    loader = ResultSetLoader()
    loader.start_batch()
    loader.write_record({"a": 1, "m": {"x": "r1"}})
    loader.append_batch(pa.table({"a": [2, 3], "z": ["t2", "t3"]}))
    loader.write_record({"a": 4, "m": {"y": 4}})
    batch = loader.harvest()
    assert batch.to_pylist() == [
        {"a": 1, "m": {"x": "r1", "y": None}, "z": None},
        {"a": 2, "m": None, "z": "t2"},
        {"a": 3, "m": None, "z": "t3"},
        {"a": 4, "m": {"x": None, "y": 4}, "z": None},
    ]
    assert batch.schema.field("m").type == pa.struct([("x", pa.string()), ("y", pa.int64())])


def test_data_beyond_the_row_limit_waits_for_the_following_batches():
    loader = ResultSetLoader(row_limit=4)
    loader.start_batch()
    loader.write_record({"i": -1})
    loader.append_arrays({"i": pa.chunked_array([[0, 1, 2], [3, 4, 5, 6, 7, 8]])})
    assert loader.is_full() and loader.pending_rows == 6
    with pytest.raises(LoaderStateError, match="full"):
        loader.write_record({"i": 100})
    batches = drain(loader)
    assert [b.num_rows for b in batches] == [4, 4, 2]
    assert [r["i"] for b in batches for r in b.to_pylist()] == list(range(-1, 9))
    loader.start_batch()
    loader.write_record({"i": 100})
    assert loader.harvest().column("i").to_pylist() == [100]


def test_data_is_sliced_by_the_byte_limit():
    loader = ResultSetLoader(byte_limit=8 * 10)  # ten int64 values a batch
    loader.start_batch()
    loader.append_batch(pa.record_batch({"i": pa.array(range(25), pa.int64())}))
    batches = drain(loader)
    assert [b.num_rows for b in batches] == [10, 10, 5]
    assert [v for b in batches for v in b.column("i").to_pylist()] == list(range(25))


def test_a_row_larger_than_the_byte_limit_comes_alone():
    loader = ResultSetLoader(byte_limit=10)
    loader.start_batch()
    loader.append_batch(pa.record_batch({"s": ["x" * 50, "y" * 50]}))
    assert [b.num_rows for b in drain(loader)] == [1, 1]


def test_projection_drops_columns_and_members_of_arrow_data():
    loader = ResultSetLoader(projection={"a", "m.x", "xs.p"})
    loader.start_batch()
    data = pa.array(
        [{"a": 1, "b": 2, "m": {"x": 1, "y": 2}, "xs": [{"p": 1, "q": 2}]}, {"a": 3, "xs": None}]
    )
    loader.append_batch(pa.RecordBatch.from_struct_array(data))
    batch = loader.harvest()
    assert batch.to_pylist() == [
        {"a": 1, "m": {"x": 1}, "xs": [{"p": 1}]},
        {"a": 3, "m": None, "xs": None},
    ]


def test_nested_arrow_data_widens_element_nullability_and_casts_members():
    loader = ResultSetLoader()
    loader.start_batch()
    loader.write_record({"xs": [1, 2], "m": {"f": 1.5}})
    data = pa.record_batch(
        {
            "xs": pa.array([[3, None], None], pa.list_(pa.int32())),
            "m": pa.array([{"f": 2}, None], pa.struct([("f", pa.int64())])),
        }
    )
    loader.append_batch(data.slice(0, 2))
    batch = loader.harvest()
    assert batch.schema.field("xs").type == pa.list_(pa.field("element", pa.int64()))
    assert batch.to_pylist() == [
        {"xs": [1, 2], "m": {"f": 1.5}},
        {"xs": [3, None], "m": {"f": 2.0}},
        {"xs": None, "m": None},
    ]


def test_sliced_and_dictionary_encoded_data():
    loader = ResultSetLoader()
    loader.start_batch()
    words = pa.array(["a", "b", "a", "c"]).dictionary_encode()
    lists = pa.array([[1], [2, 3], [], [4]])
    data = pa.record_batch({"w": words, "l": lists}).slice(1, 3)
    loader.append_batch(data)
    batch = loader.harvest()
    assert batch.schema.field("w").type == pa.string()
    assert batch.to_pylist() == [{"w": "b", "l": [2, 3]}, {"w": "a", "l": []}, {"w": "c", "l": [4]}]


def test_arrow_data_of_a_conflicting_type_is_rejected():
    loader = ResultSetLoader(source="part-0.parquet")
    loader.start_batch()
    loader.write_record({"a": 1})
    with pytest.raises(SchemaConflictError, match=r"part-0\.parquet: column 'a'"):
        loader.append_batch(pa.record_batch({"a": ["text"]}))
    with pytest.raises(StorageError, match="no Drill type"):
        loader.append_batch(pa.record_batch({"d": pa.array([1], pa.duration("s"))}))


def test_empty_data_still_brings_its_columns():
    loader = ResultSetLoader()
    loader.start_batch()
    loader.append_batch(pa.table({"a": pa.array([], pa.int64())}))
    batch = loader.harvest()
    assert batch.num_rows == 0 and batch.schema.field("a").type == pa.int64()
    assert batch_schema_version(batch) == 1


def test_fast_path_shares_the_vector_cache():
    cache = VectorCache()
    first = ResultSetLoader(vector_cache=cache)
    first.start_batch()
    first.append_batch(pa.record_batch({"b": [1.5], "a": [1]}))
    first.harvest()
    second = ResultSetLoader(vector_cache=cache)
    second.start_batch()
    second.append_batch(pa.record_batch({"a": [2], "b": pa.array([3], pa.int64())}))
    batch = second.harvest()
    assert batch.schema.names == ["b", "a"]
    assert batch.to_pylist() == [{"b": 3.0, "a": 2}]


def test_empty_projection_counts_arrow_rows():
    loader = ResultSetLoader(projection=[], row_limit=3)
    loader.start_batch()
    loader.append_batch(pa.record_batch({"a": range(5)}))
    assert loader.is_full() and loader.pending_rows == 2
    assert [(b.num_rows, b.num_columns) for b in drain(loader)] == [(3, 0), (2, 0)]
