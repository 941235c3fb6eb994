"""Stores report what happened: a failed store leaves the previous version current and says so,
and a failure after the swap says which version is live.

Everything that can fail about a new version (its files reading back, its metadata) happens
before the one atomic swap that makes it current.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.errors import StorageError
from engine.metadata.version_file import metadata_path, read_version_metadata
from engine.storage.commit import VersionedTarget
from engine.storage.engines import FsEngine
from engine.storage.store import write_store


def deep_record(levels: int) -> dict:
    value: dict = {"x": 1}
    for _ in range(levels):
        value = {"a": value}
    return value


def test_a_parquet_file_that_cannot_be_read_back_is_not_committed(tmp_path: Path) -> None:
    engine = FsEngine("fs", tmp_path)
    first = write_store(engine, {"path": "deep"}, pa.table({"id": [1, 2]}))
    with pytest.raises(StorageError) as caught:
        write_store(engine, {"path": "deep"}, pa.Table.from_pylist([{"v": deep_record(100)}]))
    message = str(caught.value)
    assert "cannot be read back" in message and "previous version is unchanged" in message
    assert "store them as json" in caught.value.hint
    # What the message says is true: the first version is current and reads back.
    assert VersionedTarget(tmp_path / "deep").current_version() == first.version
    assert pq.read_table(tmp_path / "deep").to_pylist() == [{"id": 1}, {"id": 2}]
    meta = read_version_metadata(tmp_path / "deep", metadata_path(tmp_path, tmp_path / "deep"))
    assert meta is not None and meta.version == first.version and meta.row_count == 2
    # The same records stored as JSON are written and readable.
    write_store(engine, {"path": "deep_json", "format": "json"}, pa.table({"id": [1]}))


def test_a_metadata_failure_leaves_the_previous_version_current(tmp_path: Path) -> None:
    engine = FsEngine("fs", tmp_path)
    first = write_store(engine, {"path": "sales"}, pa.table({"id": [1]}))
    # The metadata file's place taken by a directory: writing it fails (a real fault, as root too).
    record = metadata_path(tmp_path, tmp_path / "sales")
    record.unlink()
    record.mkdir()
    (record / "keep").write_text("x")
    with pytest.raises(StorageError) as caught:
        write_store(engine, {"path": "sales"}, pa.table({"id": [7, 8, 9]}))
    assert "the previous version is unchanged" in str(caught.value)
    assert VersionedTarget(tmp_path / "sales").current_version() == first.version
    assert pq.read_table(tmp_path / "sales").to_pylist() == [{"id": 1}]
    # Repaired, the next write commits and its metadata describes it.
    (record / "keep").unlink()
    record.rmdir()
    second = write_store(engine, {"path": "sales"}, pa.table({"id": [7, 8, 9]}))
    body = json.loads(record.read_text())
    assert body["version"] == second.version and body["row_count"] == 3
    assert VersionedTarget(tmp_path / "sales").current_version() == second.version
