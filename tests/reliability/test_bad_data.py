"""Bad data on both executors: each case has the outcome the README's errors table documents.

A malformed record fails the run with the file and line (and a hint), or, with ``onError: skip``,
is dropped and counted; a column that changes type fails with the file and line; a file that
vanishes after the scan listed it fails naming the file; empty inputs give no rows; 100-level
nesting and a 50 MB value are read.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from dagster import DagsterInstance, materialize

from drill_dagster import load_definitions
from engine import run_plan
from engine.errors import DrillError
from engine.exec.spark.compiler import SparkCompiler
from engine.storage.engines import FsEngine

EXECUTORS = ["local", pytest.param("spark", marks=pytest.mark.spark)]


def scan_plan(
    root: Path, path: str, fmt: str, *, on_error: str | None = None, **options: Any
) -> dict[str, Any]:
    selection: dict[str, Any] = {"path": path, "format": fmt, **options}
    if on_error:
        selection["onError"] = on_error
    return {
        "storage": {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}},
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "r", "selection": selection},
            {"@id": 2, "op": "store", "input": 1, "storageengine": "q", "target": {"number": 0}},
        ],
    }


def run(executor: str, request: pytest.FixtureRequest, plan: dict[str, Any]) -> Any:
    spark = request.getfixturevalue("spark") if executor == "spark" else None
    return run_plan(plan, executor=executor, spark=spark)


def failure(executor: str, request: pytest.FixtureRequest, plan: dict[str, Any]) -> str:
    with pytest.raises(DrillError) as caught:
        run(executor, request, plan)
    message = str(caught.value)
    assert "Traceback" not in message
    # On Spark too, where files are read in the store's job: the scan that reads the file.
    assert "operator 1 (scan)" in message, message
    return message


BAD_RECORDS = [
    # name, format, content, where the error points, the message, rows left under skip, skipped
    ("bad.json", "json", '{"a": 1}\n{"a": 2\n{"a": 3}\n', "bad.json:3:1", "malformed JSON", 2, 1),
    ("cut.json", "json", '{"a": 1}\n{"a": 2, "b": {"c": ', "cut.json:2:1", "truncated", 1, 1),
    ("quote.csv", "csv", 'a,b\n1,2\n3,"x\n', "quote.csv:3:3", "quoted value is not closed", 1, 1),
    ("width.csv", "csv", "a,b\n1,2\n3\n4,5,6\n", "width.csv:3:2", "1 field where the header", 1, 2),
]


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(
    ("name", "fmt", "content", "where", "what", "rows", "skipped"), BAD_RECORDS
)
def test_a_bad_record_fails_naming_file_and_line_or_is_skipped_and_counted(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    executor: str,
    name: str,
    fmt: str,
    content: str,
    where: str,
    what: str,
    rows: int,
    skipped: int,
) -> None:
    (tmp_path / name).write_text(content)
    message = failure(executor, request, scan_plan(tmp_path, name, fmt))
    assert f"{tmp_path}/{where}" in message and what in message, message
    assert "onError: skip" in message  # the hint says what to do
    result = run(executor, request, scan_plan(tmp_path, name, fmt, on_error="skip"))
    assert len(result.records()) == rows
    assert result.metrics["1"]["skipped_records"] == skipped
    if executor == "spark":  # the rows that carry the count are not records
        assert result.metrics["1"]["rows"] == rows


@pytest.mark.parametrize("executor", EXECUTORS)
def test_skipped_records_are_counted_per_scan_across_files_and_a_pushed_filter(
    tmp_path: Path, request: pytest.FixtureRequest, executor: str
) -> None:
    """The count is the scan's, whatever the plan does after it: two files with bad records, a
    filter the planner pushes into the scan, an operator reading the scan."""
    data = tmp_path / "d"
    data.mkdir()
    (data / "a.json").write_text('{"a": 1}\n{"a": 2\n{"a": 5}\n')
    (data / "b.json").write_text('{"a": 7}\n{"a": 8\n{"a": 9}\n')
    plan = scan_plan(tmp_path, "d", "json", on_error="skip")
    plan["query"][1:] = [
        {"@id": 2, "op": "filter", "input": 1, "expr": "r.a > 4"},
        {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {"number": 0}},
    ]
    result = run(executor, request, plan)
    assert sorted(r["r"]["a"] for r in result.records()) == [5, 7, 9]
    assert result.metrics["1"]["skipped_records"] == 2
    if executor == "spark":
        assert result.metrics["1"]["rows"] in (3, 4)  # 4 without the pushed filter
        assert result.stores[0].row_count == 3


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("on_error", [None, "skip"])
def test_a_column_that_changes_type_fails_naming_file_and_line(
    tmp_path: Path, request: pytest.FixtureRequest, executor: str, on_error: str | None
) -> None:
    """Without UNION columns (``unionType: false``) a type change is a schema error naming the
    file and line; skipping is for malformed records, so ``onError: skip`` does not hide it."""
    (tmp_path / "t.json").write_text('{"a": 1}\n{"a": "x"}\n')
    plan = scan_plan(tmp_path, "t.json", "json", on_error=on_error, unionType=False)
    message = failure(executor, request, plan)
    assert f"{tmp_path}/t.json:2" in message
    assert "column 'a' changed type from BIGINT to VARCHAR" in message
    assert "schema" in message  # the hint: give the column a type


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_column_that_changes_type_is_a_union_by_default(
    tmp_path: Path, request: pytest.FixtureRequest, executor: str
) -> None:
    (tmp_path / "t.json").write_text('{"a": 1}\n{"a": "x"}\n')
    records = run(executor, request, scan_plan(tmp_path, "t.json", "json")).records()
    assert records == [{"r": {"a": 1}}, {"r": {"a": "x"}}]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_file_that_vanishes_after_listing_fails_naming_it(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    executor: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = tmp_path / "d"
    data.mkdir()
    (data / "a.json").write_text('{"a": 1}\n')
    (data / "b.json").write_text('{"a": 2}\n')
    listed = FsEngine.list_files
    readers = (
        "engine.scan.framework",
        "engine.exec.spark.datasource",
        "engine.exec.spark.scan_resolution",
    )

    def list_then_remove(self: FsEngine, selection: Any) -> Any:
        files = listed(self, selection)
        # Path checks and the planner's statistics list too; the scan's own listing is the last
        # moment before reading.
        if sys._getframe(1).f_globals.get("__name__") in readers:
            (data / "b.json").unlink(missing_ok=True)
        return files

    monkeypatch.setattr(FsEngine, "list_files", list_then_remove)
    message = failure(executor, request, scan_plan(tmp_path, "d", "json"))
    assert "b.json" in message, message


@pytest.mark.spark
@pytest.mark.parametrize("on_error", [None, "skip"])  # Spark's JSON reader, the Drill reader
@pytest.mark.parametrize("store", ["queue", "parquet"])
def test_a_file_that_vanishes_before_spark_reads_it_fails_naming_the_scan_and_file(
    tmp_path: Path,
    spark: Any,
    monkeypatch: pytest.MonkeyPatch,
    on_error: str | None,
    store: str,
) -> None:
    """Planned (listed, schema read) and then removed before the store's Spark job reads it."""
    data = tmp_path / "d"
    data.mkdir()
    (data / "a.json").write_text('{"a": 1}\n')
    (data / "b.json").write_text('{"a": 2}\n')
    plan = scan_plan(tmp_path, "d", "json", on_error=on_error)
    plan["query"][1:] = [
        {"@id": 2, "op": "filter", "input": 1, "expr": "r.a > 0"},
        {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {"number": 0}},
    ]
    if store == "parquet":
        plan["query"][2].update(storageengine="fs", target={"path": "out", "format": "parquet"})
    visit_store = SparkCompiler.visit_store

    def remove_then_store(self: SparkCompiler, op: Any, inputs: Any) -> Any:
        (data / "b.json").unlink(missing_ok=True)
        return visit_store(self, op, inputs)

    monkeypatch.setattr(SparkCompiler, "visit_store", remove_then_store)
    with pytest.raises(DrillError) as caught:
        run_plan(plan, executor="spark", spark=spark)
    message = str(caught.value)
    assert "operator 1 (scan): " in message and "operator 3" not in message, message
    assert f"{data}/b.json: the file no longer exists" in message, message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("executor", EXECUTORS)
def test_an_unreadable_file(tmp_path: Path, request: pytest.FixtureRequest, executor: str) -> None:
    """chmod 000: a clear 'permission denied' naming the file; root reads it anyway (the
    permission bits do not bind root), and then the rows come through."""
    path = tmp_path / "secret.json"
    path.write_text('{"a": 1}\n')
    path.chmod(0)
    try:
        if os.geteuid() == 0:
            assert (
                len(run(executor, request, scan_plan(tmp_path, "secret.json", "json")).records())
                == 1
            )
        else:
            message = failure(executor, request, scan_plan(tmp_path, "secret.json", "json"))
            assert "secret.json" in message and "ermission denied" in message, message
    finally:
        path.chmod(0o644)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize(("name", "fmt"), [("e.json", "json"), ("e.csv", "csv"), ("dir", "json")])
def test_empty_inputs_give_no_rows(
    tmp_path: Path, request: pytest.FixtureRequest, executor: str, name: str, fmt: str
) -> None:
    if name == "dir":
        (tmp_path / name).mkdir()
    else:
        (tmp_path / name).write_text("")
    assert run(executor, request, scan_plan(tmp_path, name, fmt)).records() == []


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"n": value}
    return value


def store_plan(root: Path, path: str) -> dict[str, Any]:
    plan = scan_plan(root, path, "json")
    plan["query"][1] = {
        "@id": 2,
        "op": "store",
        "input": 1,
        "storageengine": "fs",
        # JSON: Arrow's parquet reader stops at 100 schema levels, so 100-level records stored as
        # parquet could not be read back (by this engine either).
        "target": {"path": "out", "format": "json"},
    }
    return plan


@pytest.mark.parametrize("executor", EXECUTORS)
def test_100_levels_of_nesting_are_read_and_stored(
    tmp_path: Path, request: pytest.FixtureRequest, executor: str
) -> None:
    (tmp_path / "deep.json").write_text(json.dumps({"a": nested(100), "b": 7}) + "\n")
    result = run(executor, request, store_plan(tmp_path, "deep.json"))
    assert result.stores[0].row_count == 1
    (written,) = [p for p in (tmp_path / "out").rglob("*.json")]
    record = json.loads(written.read_text().splitlines()[0])
    value = record.get("r", record)["a"]
    for _ in range(100):
        value = value["n"]
    assert value == 1


@pytest.mark.parametrize("executor", EXECUTORS)
def test_100_levels_of_nesting_reach_a_queue(
    tmp_path: Path, request: pytest.FixtureRequest, executor: str
) -> None:
    """Spark collects sink records through Arrow IPC, which stops at 64 levels: records that
    deep are collected as rows (engine.exec.spark.collect)."""
    record = {"a": nested(100), "b": 7, "t": "x"}
    (tmp_path / "deep.json").write_text(json.dumps(record) + "\n")
    result = run(executor, request, scan_plan(tmp_path, "deep.json", "json"))
    assert result.records() == [{"r": record}]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_50_mb_value_is_read(
    tmp_path: Path, request: pytest.FixtureRequest, executor: str
) -> None:
    big = "x" * 50_000_000
    (tmp_path / "big.json").write_text(json.dumps({"a": big, "b": 1}) + "\n")
    plan = scan_plan(tmp_path, "big.json", "json")
    if executor == "spark":
        # Spark's JSON reader (Jackson) refuses strings over 20 MB: the run fails naming the
        # file with a hint; `onError: skip` has the Drill reader read it.
        message = failure(executor, request, plan)
        assert f"{tmp_path}/big.json" in message and "onError: skip" in message, message
        plan = scan_plan(tmp_path, "big.json", "json", on_error="skip")
    records = run(executor, request, plan).records()
    assert len(records) == 1 and len(
        records[0]["r"]["a"] if "r" in records[0] else records[0]["a"]
    ) == len(big)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_dagster_store_metadata_counts_the_skipped_records(
    tmp_path: Path, request: pytest.FixtureRequest, executor: str
) -> None:
    """The store asset's ``drill/operator_counters`` show the scan's skipped records on both
    executors (drill_dagster.metadata writes the run's metrics)."""
    if executor == "spark":
        request.getfixturevalue("spark")  # the resource finds this session running
    (tmp_path / "width.csv").write_text("a,b\n1,2\n3\n4,5,6\n7,8\n")
    plans = tmp_path / "plans"
    plans.mkdir()
    plan = scan_plan(tmp_path, "width.csv", "csv", on_error="skip")
    plan["query"][1] = {
        "@id": 2,
        "op": "store",
        "input": 1,
        "storageengine": "fs",
        "target": {"path": "out", "format": "parquet"},
    }
    (plans / "width.json").write_text(json.dumps(plan))
    defs = load_definitions(plans, executor=executor)
    with DagsterInstance.ephemeral() as instance:
        result = materialize(list(defs.assets), resources=defs.resources, instance=instance)
    assert result.success
    (event,) = result.get_asset_materialization_events()
    metadata = event.materialization.metadata
    assert metadata["drill/operator_counters"].value["1"]["skipped_records"] == 2
    assert "skipped_records=2" in metadata["drill/operator_metrics"].value
    assert metadata["dagster/row_count"].value == 2


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_csv_header_wider_than_the_readers_block_is_read(
    tmp_path: Path, request: pytest.FixtureRequest, executor: str
) -> None:
    """A 1.2 MB header (wider than the CSV reader's 1 MB block) is not a malformed file: the block
    grows to hold it. Long names, few columns: Spark plans thousands of columns slowly."""
    width = 600
    names = [f"{'a_column_with_a_long_name_' * 76}{i:05d}" for i in range(width)]
    (tmp_path / "wide.csv").write_text(",".join(names) + "\n" + ",".join("1" * width) + "\n")
    [record] = run(executor, request, scan_plan(tmp_path, "wide.csv", "csv")).records()
    assert len(record["r"]) == width and record["r"][names[-1]] == "1"
