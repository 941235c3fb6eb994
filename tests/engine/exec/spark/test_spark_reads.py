"""Spark's reads kept per session (``spark_reads``): reused while the files are as they were,
never once a file changed, was added or removed; a plan that reads one file twice (a self join)
gives what the local executor gives."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.exec.spark import spark_reads
from engine.exec.spark.spark_reads import KEPT_READS, file_identity, reused_read
from engine.run import run_plan


def scan_plan(path: Path) -> dict[str, Any]:
    return {
        "head": {"type": "APACHE_DRILL_LOGICAL", "version": "1"},
        "storage": {"files": {"type": "fs", "root": str(path.parent)}, "queue": {"type": "queue"}},
        "query": [
            {
                "@id": "1",
                "op": "scan",
                "storageengine": "files",
                "selection": {"path": path.name, "format": "parquet"},
                "ref": "t",
            },
            {"@id": "2", "op": "order", "input": "1", "orderings": [{"expr": "t.id"}]},
            {"@id": "3", "op": "store", "input": "2", "storageengine": "queue", "target": {}},
        ],
    }


def ids(spark: Any, plan: dict[str, Any]) -> list[int]:
    result = run_plan(plan, executor="spark", spark=spark)
    return [record["t"]["id"] for record in result.records()]


def write(path: Path, values: list[int]) -> None:
    pq.write_table(pa.table({"id": pa.array(values, pa.int64())}), path)


def test_a_file_rewritten_between_runs_is_read_again(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    write(path, [1, 2, 3])
    plan = scan_plan(path)
    assert ids(spark, plan) == [1, 2, 3]
    assert ids(spark, plan) == [1, 2, 3]  # the read kept from the first run
    before = os.stat(path).st_mtime_ns
    write(path, [7, 8, 9])  # the same size, in place
    os.utime(path, ns=(before + 1_000_000, before + 1_000_000))
    assert ids(spark, plan) == [7, 8, 9]


def test_files_added_to_or_removed_from_a_directory_are_read_as_listed(
    spark: Any, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    table.mkdir()
    write(table / "a.parquet", [1])
    plan = scan_plan(table)
    assert ids(spark, plan) == [1]
    write(table / "b.parquet", [2])
    assert ids(spark, plan) == [1, 2]
    (table / "a.parquet").unlink()
    assert ids(spark, plan) == [2]


def test_a_self_join_over_one_read_matches_the_local_executor(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "parent": [None, 1, 1]}), path)
    root = str(tmp_path)
    plan = {
        "head": {"type": "APACHE_DRILL_LOGICAL", "version": "1"},
        "storage": {"files": {"type": "fs", "root": root}, "queue": {"type": "queue"}},
        "query": [
            {"@id": "1", "op": "scan", "storageengine": "files",
             "selection": {"path": path.name}, "ref": "child"},
            {"@id": "2", "op": "scan", "storageengine": "files",
             "selection": {"path": path.name}, "ref": "parent"},
            {"@id": "3", "op": "join", "left": "1", "right": "2", "type": "inner",
             "conditions": [{"relationship": "==", "left": "child.parent", "right": "parent.id"}]},
            {"@id": "4", "op": "project", "input": "3", "projections": [
                {"ref": "output.child", "expr": "child.id"},
                {"ref": "output.parent", "expr": "parent.id"}]},
            {"@id": "5", "op": "order", "input": "4", "orderings": [{"expr": "output.child"}]},
            {"@id": "6", "op": "store", "input": "5", "storageengine": "queue", "target": {}},
        ],
    }  # fmt: skip
    on_spark = run_plan(plan, executor="spark", spark=spark).records()
    expected = [{"child": 2, "parent": 1}, {"child": 3, "parent": 1}]
    assert on_spark == run_plan(plan).records() == expected
    assert run_plan(plan, executor="spark", spark=spark).records() == on_spark


def test_a_read_is_reused_only_under_the_same_key_and_files(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    write(path, [1])

    def read() -> Any:
        return spark.read.parquet(str(path))

    first = reused_read(spark, [path], ("parquet", "a"), read)
    assert reused_read(spark, [path], ("parquet", "a"), read) is first
    assert reused_read(spark, [path], ("parquet", "b"), read) is not first
    assert reused_read(spark, [tmp_path / "gone.parquet"], ("parquet", "a"), read) is not first


def test_a_session_keeps_its_most_recent_reads_only(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    write(path, [1])

    def read() -> Any:
        return spark.range(1)

    first = reused_read(spark, [path], "oldest", read)
    for i in range(KEPT_READS):
        reused_read(spark, [path], ("newer", i), read)
    newest = reused_read(spark, [path], ("newer", KEPT_READS - 1), read)
    assert reused_read(spark, [path], ("newer", KEPT_READS - 1), read) is newest
    assert reused_read(spark, [path], "oldest", read) is not first  # it was let go


def test_a_files_identity_changes_when_it_is_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_text("one")
    before = file_identity(path)
    path.write_text("two")
    os.utime(path, ns=(1, 1))
    assert file_identity(path) != before
    assert file_identity(path)[:2] == before[:2]  # same path and size


def test_a_session_keeps_reads_of_so_many_files_in_all(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spark_reads, "KEPT_FILES", 3)
    files = []
    for name in "abcd":
        write(tmp_path / f"{name}.parquet", [1])
        files.append(tmp_path / f"{name}.parquet")

    def read() -> Any:
        return spark.range(1)

    whole = reused_read(spark, files, "four files", read)  # more than a session keeps
    assert reused_read(spark, files, "four files", read) is not whole
    two = reused_read(spark, files[:2], "two files", read)
    one = reused_read(spark, files[:1], "one file", read)
    assert reused_read(spark, files[:1], "one file", read) is one
    reused_read(spark, files[2:3], "another file", read)  # four files kept: the oldest goes
    assert reused_read(spark, files[:2], "two files", read) is not two
