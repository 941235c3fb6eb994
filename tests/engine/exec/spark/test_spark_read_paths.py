"""Spark's reader is given a directory instead of its files where they are all it would list
there (:func:`engine.exec.spark.read_paths.spark_read_paths`): one listing instead of a file status
per file. Anything else in the directory keeps the files named one by one. Files in several
directories are read from their common root, listed recursively, where they are all Spark lists
below it (:func:`engine.exec.spark.read_paths.spark_read_root`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from engine.exec.spark.executor import SparkPlanRun
from engine.plan import parse_plan
from engine.run import build_engines, run_plan
from engine.storage.paths import InputFile


def files_in(*paths: Path) -> list[InputFile]:
    return [InputFile.of(p) for p in paths]


def write(path: Path, text: str = "{}\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_directory_replaces_files_that_are_all_spark_lists_in_it(tmp_path: Path) -> None:
    from engine.exec.spark.read_paths import spark_read_paths

    a, b = write(tmp_path / "d" / "a.json"), write(tmp_path / "d" / "b.json")
    write(tmp_path / "d" / "_SUCCESS")  # Spark skips these, as it does hidden names
    write(tmp_path / "d" / ".b.json.crc")
    write(tmp_path / "d" / "c.json._COPYING_")
    c = write(tmp_path / "e" / "c.json")
    assert spark_read_paths(files_in(a, b, c)) == [str(tmp_path / "d"), str(c)]


@pytest.mark.parametrize(
    "extra",
    ["other.json", "_metadata", "sub/x.json", "link.json"],
    ids=["unselected-file", "parquet-summary", "subdirectory", "symbolic-link"],
)
def test_files_are_named_when_spark_would_list_more_in_their_directory(
    tmp_path: Path, extra: str
) -> None:
    from engine.exec.spark.read_paths import spark_read_paths

    a, b = write(tmp_path / "d" / "a.json"), write(tmp_path / "d" / "b.json")
    if extra == "link.json":
        os.symlink(a, tmp_path / "d" / extra)
    else:
        write(tmp_path / "d" / extra)
    assert spark_read_paths(files_in(a, b)) == [str(a), str(b)]


def test_files_in_several_directories_are_read_from_their_root(tmp_path: Path) -> None:
    from engine.exec.spark.read_paths import spark_read_root

    a, b = write(tmp_path / "t" / "d=1" / "a.json"), write(tmp_path / "t" / "d=2" / "b.json")
    c = write(tmp_path / "t" / "d=2" / "deeper" / "c.json")
    write(tmp_path / "t" / "_SUCCESS")  # Spark skips these, as it does hidden directories
    write(tmp_path / "t" / ".hidden" / "x.json")
    write(tmp_path / "t" / "d=1" / "_temporary" / "y.json")
    write(tmp_path / "other" / "z.json")  # beside the root, not below it
    assert spark_read_root(files_in(a, b, c)) == tmp_path / "t"
    assert spark_read_root(files_in(a, write(tmp_path / "t" / "d=1" / "e.json"))) is None


@pytest.mark.parametrize(
    "extra",
    ["d=1/other.json", "top.json", "d=3/x.json", "empty/", "link"],
    ids=["unselected-file", "file-at-the-root", "unselected-directory", "empty-directory", "link"],
)
def test_files_keep_their_paths_where_spark_would_list_more_below_their_root(
    tmp_path: Path, extra: str
) -> None:
    from engine.exec.spark.read_paths import spark_read_paths, spark_read_root

    a, b = write(tmp_path / "t" / "d=1" / "a.json"), write(tmp_path / "t" / "d=2" / "b.json")
    if extra == "link":
        os.symlink(tmp_path / "t" / "d=2", tmp_path / "t" / "d=9")
    elif extra.endswith("/"):
        (tmp_path / "t" / extra).mkdir()
    else:
        write(tmp_path / "t" / extra)
    assert spark_read_root(files_in(a, b)) is None
    assert str(tmp_path / "t") not in spark_read_paths(files_in(a, b))


def test_files_in_one_directory_have_no_root_to_list(tmp_path: Path) -> None:
    from engine.exec.spark.read_paths import spark_read_root

    a, b = write(tmp_path / "d" / "a.json"), write(tmp_path / "d" / "b.json")
    assert spark_read_root(files_in(a, b)) is None  # the directory itself is one path already


def test_partition_directories_under_the_root_add_no_columns(tmp_path: Path, spark: Any) -> None:
    """Read recursively, ``day=...`` directories give Spark no partition column: the scan's
    records are the local executor's, its implicit ``dir0`` from the path."""
    for day in ("day=1", "day=2"):
        write(tmp_path / "t" / day / "a.json", json.dumps({"k": day}) + "\n")
    plan = parse_plan(
        {
            "storage": {"fs": {"type": "fs", "root": str(tmp_path)}, "q": {"type": "queue"}},
            "query": [
                {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e",
                 "selection": {"path": "t", "format": "json"}},
                {"@id": 2, "op": "store", "input": 1, "storageengine": "q", "target": {}},
            ],
        }
    )  # fmt: skip
    (frame,) = run_of(spark, plan).compile_frames().values()
    assert f"InMemoryFileIndex(1 paths)[file:{tmp_path / 't'}]" in (
        frame._jdf.queryExecution().toString()
    )
    on_spark = run_plan(plan, executor="spark", spark=spark).records()
    assert on_spark == run_plan(plan, executor="local").records()
    assert [r["e"]["k"] for r in on_spark] == ["day=1", "day=2"]


def run_of(spark: Any, plan: Any) -> SparkPlanRun:
    return SparkPlanRun(
        plan, spark, engines=build_engines(plan, base_dir=None, classpath=[]), params={}
    )


@pytest.mark.parametrize(
    ("pattern", "roots"),
    [("*/*", 1), ("*/[ab].json", 3)],  # their root; d1's two files and d2
    ids=["directories", "some-files"],
)
def test_a_scan_of_directories_gives_the_local_records_in_order(
    tmp_path: Path, spark: Any, pattern: str, roots: int
) -> None:
    for day, names in (("d1", "abc"), ("d2", "ab")):
        for first, name in enumerate(names):
            rows = [{"k": 10 * first + i, "day": day} for i in range(3)]
            write(tmp_path / day / f"{name}.json", "".join(json.dumps(r) + "\n" for r in rows))
    write(tmp_path / "d1" / "_SUCCESS", "")
    plan = parse_plan(
        {
            "storage": {"fs": {"type": "fs", "root": str(tmp_path)}, "q": {"type": "queue"}},
            "query": [
                {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e",
                 "selection": {"path": pattern, "format": "json"}},
                {"@id": 2, "op": "store", "input": 1, "storageengine": "q", "target": {}},
            ],
        }
    )  # fmt: skip
    (frame,) = run_of(spark, plan).compile_frames().values()
    shown = frame._jdf.queryExecution().toString()
    assert f"InMemoryFileIndex({roots} paths)" in shown
    assert (f"[file:{tmp_path}]" in shown) == (roots == 1)
    on_spark = run_plan(plan, executor="spark", spark=spark).records()
    assert on_spark == run_plan(plan, executor="local").records()
    assert len(on_spark) == (15 if pattern == "*/*" else 12)
