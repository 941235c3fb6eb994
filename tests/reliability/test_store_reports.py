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

from engine import run_plan
from engine.errors import PlanError, StorageError
from engine.storage.commit import VersionedTarget
from engine.storage.engines import FsEngine
from engine.storage.store import write_store
from engine.storage.version_file import metadata_path, read_version_metadata


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


def two_stores(root: Path, first: dict, second: dict) -> dict:
    scan = {"path": "in.json", "format": "json"}
    return {
        "storage": {"fs": {"type": "fs", "root": str(root)}},
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "r", "selection": scan},
            {"@id": 2, "op": "store", "input": 1, "storageengine": "fs", "target": first},
            {"@id": 3, "op": "store", "input": 1, "storageengine": "fs", "target": second},
        ],
    }


@pytest.mark.parametrize(
    ("first", "second", "words"),
    [
        ({"path": "out/a"}, {"path": "out/a"}, "is also written by the store at $.query[1]"),
        ({"path": "out/a"}, {"path": "./out//a/", "mode": "append"}, "is also written by"),
        ({"path": "out"}, {"path": "out/a/b"}, "lies inside store target 'out' of $.query[1]"),
        ({"path": "out/a/b"}, {"path": "out"}, "lies around store target 'out/a/b'"),
    ],
)
def test_stores_of_one_plan_with_the_same_or_nested_targets_are_refused(
    tmp_path: Path, first: dict, second: dict, words: str
) -> None:
    (tmp_path / "in.json").write_text('{"a": 1}\n')
    with pytest.raises(PlanError) as caught:
        run_plan(two_stores(tmp_path, first, second))
    [issue] = caught.value.issues
    assert issue.path == "$.query[2].target.path" and issue.op_id == "3"
    assert words in issue.message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json"]  # nothing ran


def test_stores_side_by_side_or_both_appending_run(tmp_path: Path) -> None:
    (tmp_path / "in.json").write_text('{"a": 1}\n')
    run_plan(two_stores(tmp_path, {"path": "out/a"}, {"path": "out/ab"}))
    run_plan(
        two_stores(tmp_path, {"path": "log", "mode": "append"}, {"path": "log", "mode": "append"})
    )
    assert pq.read_table(tmp_path / "log").num_rows == 2
