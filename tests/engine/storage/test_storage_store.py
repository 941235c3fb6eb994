"""Stores: atomic overwrite (a failed write keeps the previous version whole), partitioned
overwrite, append, mode error, formats, path safety, leftovers of killed writers, the lock."""

from __future__ import annotations

import io
import os
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import engine.storage.store as store_module
from engine.errors import StorageError
from engine.storage import FsEngine, create_engine, write_store
from engine.storage.commit import VersionedTarget, target_lock
from engine.storage.formats import open_reader


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def fs(root: Path) -> FsEngine:
    engine = create_engine("fs1", {"type": "fs", "root": str(root)})
    assert isinstance(engine, FsEngine)
    return engine


def read_back(fs: FsEngine, path: str, fmt: str = "parquet") -> list[dict[str, Any]]:
    """Every row of a target as a scan sees it, with its partition dirs as dir0, dir1, ..."""
    selection = {"path": path, "format": fmt}
    rows = []
    for file in fs.list_files(selection):
        for record, _ in fs.open_reader(file, selection).records():
            rows.append({**record, **{f"dir{i}": d for i, d in enumerate(file.dirs)}})
    return sorted(rows, key=repr)


def hidden_entries(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.startswith(".") and not n.endswith(".lock"))


V1 = pa.table({"day": ["d1", "d1", "d2"], "v": [1, 2, 3]})
V2 = pa.table({"day": ["d2", "d3"], "v": [20, 30]})


# ---------------------------------------------------------------- overwrite and atomicity


def test_overwrite_replaces_the_dataset_and_drops_the_old_version(fs: FsEngine, root: Path) -> None:
    first = write_store(fs, {"path": "/out/t"}, V1)
    assert first.row_count == 3 and first.format == "parquet" and first.mode == "overwrite"
    assert first.location == str(root / "out" / "t") and first.schema == V1.schema
    assert [Path(f).parent for f in first.files] == [root / "out" / "t"]
    second = write_store(fs, {"path": "/out/t"}, V2)
    assert read_back(fs, "/out/t") == sorted(V2.to_pylist(), key=repr)
    assert (root / "out" / "t").is_symlink()
    assert hidden_entries(root / "out") == [f".t.v-{second.version}"]


def test_failed_write_keeps_the_previous_version_readable(
    fs: FsEngine, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_store(fs, {"path": "/out/t", "partitionBy": ["day"]}, V1)
    before = read_back(fs, "/out/t")
    real_write = store_module._write_part
    calls = []

    def failing_write(format_type: str, table: pa.Table, path: Path) -> None:
        calls.append(path)
        if len(calls) == 2:  # the first new file is written, the second fails midway
            path.write_bytes(b"PAR1 half a file")
            assert read_back(fs, "/out/t") == before  # a reader during the write sees v1 whole
            raise OSError(28, "No space left on device")
        real_write(format_type, table, path)

    monkeypatch.setattr(store_module, "_write_part", failing_write)
    with pytest.raises(StorageError) as caught:
        write_store(fs, {"path": "/out/t", "partitionBy": ["day"]}, V2)
    assert "No space left on device" in str(caught.value)
    assert "the previous version is unchanged" in str(caught.value)
    assert read_back(fs, "/out/t") == before
    assert len(hidden_entries(root / "out")) == 1  # only the current version: staging cleaned


def test_interrupted_write_cleans_up_and_keeps_the_old_version(
    fs: FsEngine, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_store(fs, {"path": "/out/t"}, V1)

    def interrupted(format_type: str, table: pa.Table, path: Path) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(store_module, "_write_part", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_store(fs, {"path": "/out/t"}, V2)
    assert read_back(fs, "/out/t") == sorted(V1.to_pylist(), key=repr)
    assert len(hidden_entries(root / "out")) == 1


def test_leftovers_of_a_killed_writer_are_invisible_and_cleaned(fs: FsEngine, root: Path) -> None:
    write_store(fs, {"path": "/out/t"}, V1)
    staging = root / "out" / f".t.staging-{uuid.uuid4().hex}"
    orphan = root / "out" / f".t.v-{uuid.uuid4().hex}"
    for junk in (staging, orphan):
        junk.mkdir()
        (junk / "part-0.parquet").write_bytes(b"half")
    neighbour = root / "out" / ".tt.staging-keep"  # another target's name: not ours to delete
    neighbour.mkdir()
    assert read_back(fs, "/out/t") == sorted(V1.to_pylist(), key=repr)
    assert read_back(fs, "/out", "parquet") == [
        {**r, "dir0": "t"} for r in sorted(V1.to_pylist(), key=repr)
    ]
    result = write_store(fs, {"path": "/out/t", "mode": "append"}, V2)
    assert hidden_entries(root / "out") == sorted([f".t.v-{result.version}", ".tt.staging-keep"])


def test_a_crash_inside_the_first_swap_of_a_plain_directory_is_rolled_back(
    fs: FsEngine, root: Path
) -> None:
    # A killed first overwrite of a directory written by something else can leave it renamed to
    # its legacy name with no target in place: the next write puts it back before going on.
    legacy = root / "out" / f".t.legacy-{uuid.uuid4().hex}"
    legacy.mkdir(parents=True)
    (legacy / "old.json").write_text('{"v": 0}\n')
    write_store(fs, {"path": "/out/t", "format": "json", "mode": "append"}, V2.select(["v"]))
    assert read_back(fs, "/out/t", "json") == [{"v": 0}, {"v": 20}, {"v": 30}]


def test_overwriting_a_plain_directory_makes_it_versioned(fs: FsEngine, root: Path) -> None:
    plain = root / "out" / "t"
    plain.mkdir(parents=True)
    (plain / "old.parquet").write_bytes(b"x")
    write_store(fs, {"path": "/out/t"}, V2)
    assert plain.is_symlink() and read_back(fs, "/out/t") == sorted(V2.to_pylist(), key=repr)
    assert len(hidden_entries(root / "out")) == 1


def test_a_second_writer_waits_then_fails_clearly(fs: FsEngine, root: Path) -> None:
    write_store(fs, {"path": "/out/t"}, V1)
    with (
        target_lock(VersionedTarget(root / "out" / "t"), timeout=1),
        pytest.raises(StorageError, match="being written by another run"),
    ):
        write_store(fs, {"path": "/out/t"}, V2, lock_timeout=0.2)
    assert read_back(fs, "/out/t") == sorted(V1.to_pylist(), key=repr)


# ---------------------------------------------------------------- partitions


def test_partitioned_overwrite_replaces_only_the_partitions_written(fs: FsEngine) -> None:
    target = {"path": "/sales", "partitionBy": ["day"]}
    first = write_store(fs, target, V1)
    assert first.partitions == ("day=d1", "day=d2")
    second = write_store(fs, target, V2)
    assert second.partitions == ("day=d2", "day=d3")
    assert read_back(fs, "/sales") == sorted(
        [
            {"v": 1, "dir0": "day=d1"},
            {"v": 2, "dir0": "day=d1"},
            {"v": 20, "dir0": "day=d2"},
            {"v": 30, "dir0": "day=d3"},
        ],
        key=repr,
    )


def test_static_partition_values_replace_that_partition_whole(fs: FsEngine) -> None:
    target = {"path": "/events", "partitionBy": ["day", "kind"]}
    rows = pa.table({"kind": ["a", "b"], "v": [1, 2]})
    write_store(fs, target, rows, partition_values={"day": "2024-01-01"})
    write_store(fs, target, rows, partition_values={"day": "2024-01-02"})
    write_store(
        fs, target, pa.table({"kind": ["c"], "v": [9]}), partition_values={"day": "2024-01-01"}
    )
    assert read_back(fs, "/events") == sorted(
        [
            {"v": 9, "dir0": "day=2024-01-01", "dir1": "kind=c"},
            {"v": 1, "dir0": "day=2024-01-02", "dir1": "kind=a"},
            {"v": 2, "dir0": "day=2024-01-02", "dir1": "kind=b"},
        ],
        key=repr,
    )
    with pytest.raises(StorageError, match="the rows hold that column too"):
        write_store(
            fs, target, pa.table({"day": ["x"], "kind": ["a"]}), partition_values={"day": "x"}
        )
    with pytest.raises(StorageError, match="must name the leading partitionBy columns"):
        write_store(fs, target, rows, partition_values={"kind": "a"})


def test_partition_values_are_escaped_and_nulls_get_the_default(fs: FsEngine, root: Path) -> None:
    table = pa.table({"k": ["a/b", None, ""], "v": [1, 2, 3]})
    result = write_store(fs, {"path": "/p", "partitionBy": ["k"]}, table)
    assert result.partitions == ("k=__HIVE_DEFAULT_PARTITION__", "k=a%2Fb")
    assert sorted(os.listdir(root / "p")) == ["k=__HIVE_DEFAULT_PARTITION__", "k=a%2Fb"]
    with pytest.raises(StorageError, match="partitionBy names 'nope'"):
        write_store(fs, {"path": "/p", "partitionBy": ["nope"]}, table)


def test_partitioned_overwrite_must_keep_the_format(fs: FsEngine) -> None:
    write_store(fs, {"path": "/f", "partitionBy": ["day"]}, V1)
    with pytest.raises(StorageError, match="must keep the target's format"):
        write_store(fs, {"path": "/f", "partitionBy": ["day"], "format": "json"}, V2)


# ---------------------------------------------------------------- modes and formats


def test_append_adds_files(fs: FsEngine) -> None:
    write_store(fs, {"path": "/a"}, V1)
    result = write_store(fs, {"path": "/a", "mode": "append"}, V2)
    assert result.mode == "append" and len(result.files) == 1
    assert read_back(fs, "/a") == sorted(V1.to_pylist() + V2.to_pylist(), key=repr)


def test_append_with_another_schema_is_refused(fs: FsEngine) -> None:
    write_store(fs, {"path": "/a"}, V1)
    with pytest.raises(StorageError, match=r"has the schema \(day: string, v: int64\)"):
        write_store(fs, {"path": "/a", "mode": "append"}, pa.table({"v": ["x"]}))
    assert read_back(fs, "/a") == sorted(V1.to_pylist(), key=repr)


def test_append_of_the_same_types_with_other_nullability_is_accepted(fs: FsEngine) -> None:
    required = pa.schema(
        [pa.field("day", pa.string(), nullable=False), pa.field("v", pa.int64(), nullable=False)]
    )
    write_store(fs, {"path": "/n"}, V1.cast(required))
    write_store(fs, {"path": "/n", "mode": "append"}, V2)  # OPTIONAL columns this time
    assert read_back(fs, "/n") == sorted(V1.to_pylist() + V2.to_pylist(), key=repr)


def test_check_compatible_is_public_and_ignores_only_nullability() -> None:
    from engine.storage.store import check_compatible, loose_columns

    assert callable(check_compatible)
    optional = pa.schema([("a", pa.list_(pa.int64()))])
    required = pa.schema([pa.field("a", pa.list_(pa.field("e", pa.int64(), False)), False)])
    assert loose_columns(optional) == loose_columns(required)
    assert loose_columns(optional) != loose_columns(pa.schema([("a", pa.list_(pa.int32()))]))


def test_mode_error_fails_when_the_target_exists(fs: FsEngine) -> None:
    write_store(fs, {"path": "/e", "mode": "error"}, V1)
    with pytest.raises(StorageError, match=r"already exists .* and mode is error"):
        write_store(fs, {"path": "/e", "mode": "error"}, V2)
    assert read_back(fs, "/e") == sorted(V1.to_pylist(), key=repr)


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_each_format_reads_back(fs: FsEngine, fmt: str) -> None:
    result = write_store(fs, {"path": f"/{fmt}", "type": fmt.upper()}, V1)
    assert result.files[0].endswith(f".{fmt}")
    expected = V1.to_pylist()
    if fmt == "csv":
        expected = [{k: str(v) for k, v in row.items()} for row in expected]
    assert read_back(fs, f"/{fmt}", fmt) == sorted(expected, key=repr)


def test_empty_result_keeps_its_schema(fs: FsEngine) -> None:
    empty = V1.slice(0, 0)
    result = write_store(fs, {"path": "/empty"}, empty)
    assert result.row_count == 0 and len(result.files) == 1
    [file] = fs.list_files({"path": "/empty", "format": "parquet"})
    assert open_reader("parquet", file).read_arrow().schema == V1.schema


def test_bad_targets_are_rejected_before_anything_is_written(fs: FsEngine, root: Path) -> None:
    cases = {
        "escapes the root of storage engine 'fs1'": {"path": "../outside"},
        "needs a `path` below the engine root": {"path": "/"},
        "names a hidden entry": {"path": "/_tmp"},
        "cannot store format 'text'": {"path": "/x", "format": "text"},
        "mode must be one of overwrite, append, error": {"path": "/x", "mode": "upsert"},
        "unknown key 'partition'": {"path": "/x", "partition": {"type": "ORDERED"}},
        "URL scheme 's3'": {"path": "s3://bucket/x"},
    }
    for message, target in cases.items():
        with pytest.raises(StorageError, match=message):
            fs.check_target(target)
        with pytest.raises(StorageError, match=message):
            write_store(fs, target, V1)
    assert os.listdir(root) == []


def test_target_through_a_symlink_out_of_the_root_is_rejected(
    fs: FsEngine, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "link").symlink_to(outside)
    with pytest.raises(StorageError, match="through a symbolic link"):
        write_store(fs, {"path": "/link/t"}, V1)
    assert os.listdir(outside) == []


def test_read_only_engines(conformance_dir: Path, root: Path) -> None:
    cp = create_engine("cp", {"type": "classpath"}, classpath=[conformance_dir / "data"])
    with pytest.raises(StorageError, match="is read-only"):
        write_store(cp, {"path": "/x"}, V1)
    frozen = create_engine("fs2", {"type": "fs", "root": str(root), "writable": False})
    with pytest.raises(StorageError, match="configured read-only"):
        write_store(frozen, {"path": "/x"}, V1)


# ---------------------------------------------------------------- sinks


def test_store_to_the_queue_and_the_console() -> None:
    queue = create_engine("queue", {"type": "queue"})
    result = write_store(queue, {"number": 0}, V1)
    assert result.row_count == 3 and result.location == "queue:queue#0"
    assert queue.records() == V1.to_pylist()  # type: ignore[attr-defined]
    out = io.StringIO()
    console = create_engine("console", {"type": "console"})
    console.stream = out  # type: ignore[attr-defined]
    write_store(console, {"pipe": "STD_OUT"}, V2)
    assert out.getvalue() == '{"day": "d2", "v": 20}\n{"day": "d3", "v": 30}\n'


# ---------------------------------------------------------------- a writer killed for real

_WRITER = """
import sys
import pyarrow as pa
from engine.storage import create_engine, write_store
fs = create_engine("fs1", {"type": "fs", "root": sys.argv[1]})
n = 0
print("ready", flush=True)
while True:
    n += 1
    days = ["d1", "d2"] if n % 2 else ["d2", "d3"]
    table = pa.table({"day": days * 500, "v": [n] * 1000})
    write_store(fs, {"path": "/k", "partitionBy": ["day"]}, table)
"""


def test_sigkill_at_random_points_never_leaves_a_half_version(fs: FsEngine, root: Path) -> None:
    import random
    import signal
    import subprocess
    import sys
    import time

    write_store(fs, {"path": "/k", "partitionBy": ["day"]}, pa.table({"day": ["d1"], "v": [0]}))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    rng = random.Random(7)
    for _ in range(3):
        writer = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(root)], env=env, stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.05, 0.4))
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        rows = read_back(fs, "/k")
        by_partition: dict[str, set[int]] = {}
        for row in rows:
            by_partition.setdefault(row["dir0"], set()).add(row["v"])
        # Every partition holds the rows of exactly one write, complete (500 rows per write).
        for partition, values in by_partition.items():
            assert len(values) == 1, partition
            count = sum(1 for r in rows if r["dir0"] == partition)
            assert count in (1, 500), (partition, count)
    write_store(fs, {"path": "/k", "partitionBy": ["day"]}, pa.table({"day": ["d9"], "v": [9]}))
    assert len(hidden_entries(root)) == 1  # the next write cleaned what the kills left
