"""The parquet reader: records, Arrow with projection, filters and a provided schema, footers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from engine import run_plan
from engine.errors import StorageError
from engine.storage.engines import create_engine
from engine.storage.formats import ParquetReader
from engine.storage.formats import parquet as parquet_format

TABLE = pa.table(
    {
        "id": pa.array([1, 2, 3], pa.int32()),
        "name": ["a", None, "c"],
        "tags": [["x"], [], None],
        "m": [{"k": 1}, {"k": 2}, None],
    }
)


@pytest.fixture
def parquet_file(tmp_path: Path) -> Path:
    path = tmp_path / "t.parquet"
    pq.write_table(TABLE, path, row_group_size=1)
    return path


def test_records_are_rows_with_row_numbers(parquet_file: Path) -> None:
    assert list(ParquetReader(parquet_file).records()) == [
        ({"id": 1, "name": "a", "tags": ["x"], "m": {"k": 1}}, 1),
        ({"id": 2, "name": None, "tags": [], "m": {"k": 2}}, 2),
        ({"id": 3, "name": "c", "tags": None, "m": None}, 3),
    ]


def test_arrow_with_projection_pruning_and_schema(tmp_path: Path) -> None:
    path = tmp_path / "groups.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3, 4], "s": list("abcd")}), path, row_group_size=2)
    reader = ParquetReader(path)
    table = reader.read_arrow(
        columns=["id", "missing"],
        prune=pc.field("id") >= 4,
        schema=pa.schema([("id", pa.int32())]),
    )
    assert table.schema == pa.schema([("id", pa.int32())])
    assert table.column("id").to_pylist() == [3, 4]  # the second row group, not filtered
    assert reader.read_arrow(prune=pc.field("id") > 9).to_pylist() == []
    assert reader.read_arrow(prune=pc.field("id") > 0).num_rows == 4


def test_batches_and_footer_row_count(parquet_file: Path) -> None:
    reader = ParquetReader(parquet_file)
    batches = list(reader.iter_batches(columns=["name"], batch_rows=2))
    assert [b.num_rows for b in batches] == [1, 1, 1] or sum(b.num_rows for b in batches) == 3
    assert reader.row_count() == 3


def test_provided_schema_that_does_not_fit_is_a_clear_error(parquet_file: Path) -> None:
    with pytest.raises(StorageError, match="column 'name' cannot be read as int64"):
        ParquetReader(parquet_file).read_arrow(schema=pa.schema([("name", pa.int64())]))


def test_empty_file_has_no_records(tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    path.write_bytes(b"")
    reader = ParquetReader(path)
    assert list(reader.records()) == [] and reader.row_count() == 0
    assert reader.read_arrow(schema=pa.schema([("a", pa.int64())])).num_rows == 0


def test_truncated_or_foreign_file_is_a_clear_error(parquet_file: Path, tmp_path: Path) -> None:
    truncated = tmp_path / "cut.parquet"
    truncated.write_bytes(parquet_file.read_bytes()[:-20])
    with pytest.raises(StorageError) as caught:
        list(ParquetReader(truncated).records())
    assert caught.value.file == str(truncated)
    assert "not a readable parquet file" in str(caught.value)
    notes = tmp_path / "notes.parquet"
    notes.write_text("hello")
    with pytest.raises(StorageError, match="not a readable parquet file"):
        ParquetReader(notes).read_arrow()


def test_mixed_types_across_files_are_left_to_the_scan(tmp_path: Path) -> None:
    pq.write_table(pa.table({"v": [1]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"v": ["one"]}), tmp_path / "b.parquet")
    types = [
        ParquetReader(tmp_path / n).read_arrow().schema.field("v").type
        for n in ("a.parquet", "b.parquet")
    ]
    assert types == [pa.int64(), pa.string()]


@pytest.fixture
def footers(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The ``metadata`` (a footer already read, or None) of every ``pq.ParquetFile`` opened."""
    opened: list[Any] = []
    real = parquet_format.pq.ParquetFile

    def spy(source: Any, *, metadata: Any = None, **kwargs: Any) -> Any:
        opened.append(metadata)
        return real(source, metadata=metadata, **kwargs)

    monkeypatch.setattr(parquet_format.pq, "ParquetFile", spy)
    return opened


def test_a_reader_reads_the_footer_once(parquet_file: Path, footers: list[Any]) -> None:
    reader = ParquetReader(parquet_file)
    assert reader.arrow_schema(["id"]).names == ["id"]
    assert reader.read_arrow(columns=["id"]).column("id").to_pylist() == [1, 2, 3]
    assert reader.row_count() == 3
    assert footers[0] is None and len(footers) == 3
    assert all(footer is not None and footer.num_rows == 3 for footer in footers[1:])


def test_a_run_reads_each_footer_once_and_a_rewritten_file_again(
    tmp_path: Path, footers: list[Any]
) -> None:
    (tmp_path / "t").mkdir()
    path = tmp_path / "t" / "a.parquet"
    pq.write_table(pa.table({"id": [1, 2]}), path)
    engine = create_engine("fs", {"type": "fs", "root": str(tmp_path)})
    assert engine.statistics({"path": "/t"}).row_count == 2  # the planner reads the footer
    read = engine.reader_factory({"path": "/t"})
    [file] = engine.list_files({"path": "/t"})
    assert read(file).read_arrow().num_rows == 2  # the scan reuses it
    assert [footer is None for footer in footers] == [True, False]
    pq.write_table(pa.table({"id": [1, 2, 3]}), path)  # written since: read again
    [file] = engine.list_files({"path": "/t"})
    assert read(file).read_arrow().num_rows == 3
    assert [footer is None for footer in footers] == [True, False, True]


def test_a_run_reads_each_footer_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "t").mkdir()
    for name in ("a", "b"):
        pq.write_table(pa.table({"x": [1, 5]}), tmp_path / "t" / f"{name}.parquet")
    reads: list[str] = []
    real_read, real_file = parquet_format.pq.read_metadata, parquet_format.pq.ParquetFile

    def read_metadata(path: Any, **kwargs: Any) -> Any:
        reads.append(Path(path).name)
        return real_read(path, **kwargs)

    def parquet_file(source: Any, *, metadata: Any = None, **kwargs: Any) -> Any:
        if metadata is None:
            reads.append(Path(source.name).name)
        return real_file(source, metadata=metadata, **kwargs)

    monkeypatch.setattr(parquet_format.pq, "read_metadata", read_metadata)
    monkeypatch.setattr(parquet_format.pq, "ParquetFile", parquet_file)
    plan = {
        "storage": {"fs": {"type": "fs", "root": str(tmp_path)}, "q": {"type": "queue"}},
        "query": [
            {
                "@id": 1,
                "op": "scan",
                "storageengine": "fs",
                "ref": "f",
                "selection": {"path": "/t"},
            },
            {"@id": 2, "op": "filter", "input": 1, "expr": "f.x > 2"},
            {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
        ],
    }
    assert run_plan(plan).records() == [{"f": {"x": 5}}, {"f": {"x": 5}}]
    assert sorted(reads) == ["a.parquet", "b.parquet"]  # by the planner; the scan reuses them


def test_a_file_is_read_a_few_row_groups_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parts of at most ``READ_BYTES`` of the columns read (uncompressed), whole row groups each;
    a pruned read reads only the groups left, in parts too."""
    path = tmp_path / "t.parquet"
    table = pa.table({"x": pa.array(range(10_000), pa.int64()), "s": ["v"] * 10_000})
    pq.write_table(table, path, row_group_size=1_000)  # ten groups of 8,000 bytes of x
    group_bytes = pq.read_metadata(path).row_group(0).column(0).total_uncompressed_size
    monkeypatch.setattr(parquet_format, "READ_BYTES", 3 * group_bytes)
    parts = list(ParquetReader(path).read_tables(columns=["x"]))
    assert [p.num_rows for p in parts] == [3_000, 3_000, 3_000, 1_000]
    assert pa.concat_tables(parts).equals(table.select(["x"]))
    assert ParquetReader(path).read_arrow().equals(table)
    pruned = ParquetReader(path).read_tables(columns=["x"], prune=pc.field("x") >= 5_500)
    assert [p.column("x")[0].as_py() for p in pruned] == [5_000, 8_000]


def test_a_scan_holds_one_part_of_a_file_at_a_time(tmp_path: Path) -> None:
    """A run filtering a 48 MB column (record by record: nothing downstream holds the rows), in
    a process of its own (Arrow's peak allocation is the process's): read 4 MB at a time, its
    peak stays far below the column; read whole, it does not (the control)."""
    path = tmp_path / "big.parquet"
    pq.write_table(pa.table({"x": pa.array(range(6_000_000), pa.int64())}), path,
                   row_group_size=250_000)  # fmt: skip
    column_bytes = 6_000_000 * 8
    script = f"""
import pyarrow as pa
from engine import run_plan
from engine.storage.formats import parquet
parquet.READ_BYTES = int(__import__("sys").argv[1])
plan = {{"storage": {{"fs": {{"type": "fs", "root": {str(tmp_path)!r}}}, "q": {{"type": "queue"}}}},
    "query": [
        {{"@id": 1, "op": "scan", "storageengine": "fs", "ref": "t",
          "selection": {{"path": "big.parquet"}}}},
        {{"@id": 2, "op": "filter", "input": 1, "expr": "t.x % 7 == 100"}},
        {{"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {{}}}}]}}
assert run_plan(plan).records() == []
print(pa.default_memory_pool().max_memory())
"""
    peaks = {}
    for read_bytes in (4 * 1024 * 1024, 1024**3):
        done = subprocess.run(
            [sys.executable, "-c", script, str(read_bytes)],
            capture_output=True, text=True, check=True, cwd=Path(__file__).parents[3],
        )  # fmt: skip
        peaks[read_bytes] = int(done.stdout.split()[-1])
    assert peaks[4 * 1024 * 1024] < column_bytes / 3
    assert peaks[1024**3] >= column_bytes
