"""Scans and constants on Spark: Spark's own readers and the Drill data source give identical rows
(implicit dirN/filename columns and input order included), and bad input is an engine error."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from engine.errors import PlanningError, StorageError
from engine.exec.local.sources import records_to_batch
from engine.exec.spark import native_scan
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.scan_request import SchemaSampling
from engine.exec.spark.scan_resolution import _unread_schema
from engine.exec.spark.sources import (
    constant_dataframe,
    plan_scan,
    scan_dataframe,
    scan_plan_dataframe,
)
from engine.exec.spark.spark_errors import translate_spark_error
from engine.exec.spark.unread_member import without_unread
from engine.scan.framework import FileScan
from engine.storage.engines import create_engine
from engine.types import BIGINT

SMALL_SAMPLE = SchemaSampling(full_read_bytes=0, records_per_file=2)

RECORDS = [
    {"id": 1, "name": "Cake, plain", "m": {"k": 1.5, "tags": ["a", None]}, "ok": True},
    {"id": 2, "name": 'say "hi"', "m": None, "ok": False},
    {"id": 3, "name": "", "m": {"k": 2.0, "tags": []}},
    {"id": 4, "name": "ünï code\nline", "m": {"k": None, "tags": ["z"]}, "ok": None},
]
# Directory names Spark writes as %XX in its file URIs, and a file at the root (no dir0).
LAYOUT = {"day=2024-01-01/a b+c": RECORDS[:1], "day=2024-01-02/ü%": RECORDS[1:], "": RECORDS[:2]}


def csv_text(records: list[dict]) -> str:
    def quote(value: object) -> str:
        return '"' + str(value).replace('"', '""') + '"' if value is not None else ""

    rows = [
        f"{r['id']},{quote(r['name'])},{'' if r.get('ok') is None else r['ok']}" for r in records
    ]
    return "id,name,ok\n" + "".join(row + "\n" for row in rows)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("scans")
    for fmt in ("json", "csv", "parquet"):
        for directory, records in LAYOUT.items():
            # The first file is the largest: Spark packs files by size, the scan keeps file order.
            records = records * (30 if directory.endswith("a b+c") else 1)
            folder = base / fmt / directory
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"part.{fmt}"
            if fmt == "json":
                path.write_text("".join(json.dumps(r) + "\n" for r in records))
            elif fmt == "csv":
                path.write_text(csv_text(records))
            else:
                pq.write_table(pa.Table.from_pylist(records), path)
    return base


def engine_at(root: Path):
    return create_engine("fs", {"type": "fs", "root": str(root)})


def local_records(engine, selection: dict, **kwargs) -> list[dict]:
    return [r for b in FileScan(engine, selection, **kwargs).batches() for r in b.to_pylist()]


def ordered(rows: list, key: str = SEQ_COLUMN) -> list[dict]:
    rows = sorted(rows, key=lambda r: r[key])
    return [{k: v for k, v in r.asDict(recursive=True).items() if k != key} for r in rows]


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
def test_spark_reader_and_data_source_give_identical_rows(spark, root: Path, fmt: str) -> None:
    engine = engine_at(root)
    selection = {"path": fmt}
    native = plan_scan(engine, selection, file_columns=["filename"])
    drill = plan_scan(engine, selection, file_columns=["filename"], reader="drill")
    assert native.reader == f"spark-{fmt}", native.reason
    frames = {
        label: without_unread(scan_plan_dataframe(spark, plan, "r")).withColumn("via", F.lit(label))
        for label, plan in (("spark", native), ("drill", drill))
    }
    # The same columns and types; only the Spark reader's parquet sequence knows its width
    # (column metadata).
    columns = {k: [(f.name, f.dataType, f.nullable) for f in v.schema] for k, v in frames.items()}
    assert columns["spark"] == columns["drill"]
    rows = frames["spark"].unionByName(frames["drill"]).collect()  # one action for both
    by_reader = {label: ordered([r for r in rows if r["via"] == label]) for label in frames}
    expected = local_records(engine, selection, file_columns=["filename"])
    for label, records in by_reader.items():
        assert [r["r"] for r in records] == expected, label
    # hive-style `day=...` directories are a `day` column; the plain one below them is dir1
    assert (expected[0]["day"], expected[0]["dir1"]) == ("2024-01-01", "a b+c")
    assert (
        expected[-1]["day"] is None and expected[-1]["dir1"] is None and expected[0]["dir0"] is None
    )


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_records_are_built_in_the_readers_select_unless_an_observation_counts_first(
    spark, root: Path, fmt: str
) -> None:
    """One select (one analysis on the driver) gives the records; an observation of the rows
    as read sits below the records' structs, in a select of its own."""
    plan = plan_scan(engine_at(root), {"path": fmt}, file_columns=["filename"])

    def projects(df) -> int:
        return df._jdf.queryExecution().analyzed().toString().count("Project [")

    wrapped = scan_plan_dataframe(spark, plan, "r")
    observed = scan_plan_dataframe(spark, plan, "r", observe=lambda df: df)
    assert projects(wrapped) == projects(observed) - 1
    assert ordered(wrapped.collect()) == ordered(observed.collect())
    assert len(wrapped.collect()) == 35  # 30 + 3 + 2 records


def test_beyond_the_map_lookup_limit_files_are_joined_with_their_values(
    spark, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(native_scan, "LITERAL_LOOKUP_FILES", 1)
    engine = engine_at(root)
    selection = {"path": "json"}
    df = scan_dataframe(spark, engine, selection, None, file_columns=["fqn"], reader="spark")
    assert ordered(df.collect()) == local_records(engine, selection, file_columns=["fqn"])


@pytest.mark.parametrize("lookup", ["compares", "array"])
@pytest.mark.parametrize("file_columns", [[], ["filename"]])
@pytest.mark.parametrize("sizes", ["distinct", "equal"])
@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_a_rows_file_is_found_by_its_position_in_a_list_of_the_files(
    spark,
    tmp_path: Path,
    fmt: str,
    sizes: str,
    file_columns: list[str],
    lookup: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A row's file is known by its size (distinct sizes) or path (equal sizes): compares of it
    (up to ``CASE_LOOKUP_FILES`` files) give its sequence base and implicit values, else its
    position in an array literal, the values at that position: records in file order, for
    three files as for twelve, and a file the scan did not list fails the read by name, in each
    column it gives."""
    monkeypatch.setattr(native_scan, "CASE_LOOKUP_FILES", 12 if lookup == "compares" else 0)

    def write(path: Path, n: int) -> None:
        records = [{"id": i, "name": "x" * (n if sizes == "distinct" else 1)} for i in range(3)]
        if fmt == "json":
            path.write_text("".join(json.dumps(r) + "\n" for r in records))
        else:
            pq.write_table(pa.Table.from_pylist(records), path)

    def scanned(count: int) -> Any:
        folder = tmp_path / f"{count}"
        folder.mkdir()
        for n in range(count):
            write(folder / f"{n:02d}.{fmt}", n)
        engine = engine_at(tmp_path)
        selection = {"path": str(count), "format": fmt}
        plan = plan_scan(engine, selection, file_columns=file_columns, reader="spark")
        df = scan_plan_dataframe(spark, plan, None)
        expected = local_records(engine, selection, file_columns=file_columns)
        assert ordered(df.collect()) == expected
        return plan

    scanned(3)
    plan = scanned(12)
    # Spark reads a file the scan did not list (the listing changed under a directory read).
    unlisted = replace(plan, resolved=replace(plan.resolved, files=plan.resolved.files[:-1]))
    monkeypatch.setattr(native_scan, "spark_read_paths", lambda files: [str(tmp_path / "12")])
    df = scan_plan_dataframe(spark, unlisted, None)
    for columns in [df.columns, file_columns]:  # the implicit values alone raise too
        if columns:
            with pytest.raises(Exception, match="the scan did not list the file Spark read"):
                df.select(*columns).collect()


def test_the_reader_is_spark_only_where_its_semantics_are_drills(tmp_path: Path) -> None:
    (tmp_path / "pretty.json").write_text('{\n  "a": 1\n}\n')
    (tmp_path / "lines.json").write_text('{"a": 1}\n')
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    pq.write_table(pa.table({"u": pa.array([1], pa.uint32())}), tmp_path / "u.parquet")
    engine = engine_at(tmp_path)
    reasons = {
        name: plan_scan(engine, selection).reason
        for name, selection in {
            "pretty": {"path": "pretty.json"},
            "skip": {"path": "lines.json", "onError": "skip"},
            "schema": {"path": "lines.json", "schema": [{"name": "a", "type": "DOUBLE"}]},
            "columns": {"path": "t.csv", "format": "text"},
            "unsigned": {"path": "u.parquet"},
        }.items()
    }
    assert "types uint32 otherwise" in reasons["unsigned"]
    assert "not JSON lines" in reasons["pretty"]
    assert "onError: skip" in reasons["skip"]
    assert "provided schema" in reasons["schema"]
    assert "columns mode" in reasons["columns"]
    assert plan_scan(engine, {"path": "lines.json"}).reader == "spark-json"
    with pytest.raises(PlanningError, match="not JSON lines"):
        plan_scan(engine, {"path": "pretty.json"}, reader="spark")


def test_an_empty_directory_scans_to_no_rows(spark, tmp_path: Path) -> None:
    (tmp_path / "none").mkdir()
    df = scan_dataframe(spark, engine_at(tmp_path), {"path": "none"}, "e")
    assert df.columns == ["e", SEQ_COLUMN] and df.collect() == []


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("l.json", '{"a": 1}\n{"a": 2}\n{"a": 3}\n{"a": 4,}\n', ":4:"),
        ("w.csv", "a,b\n1,2\n3,4\n5,6\n7\n", ":5:"),
    ],
)
def test_spark_reader_failures_are_storage_errors_naming_file_and_line(
    spark, tmp_path: Path, name: str, text: str, where: str
) -> None:
    (tmp_path / name).write_text(text)
    engine = engine_at(tmp_path)
    plan = plan_scan(engine, {"path": name}, sampling=SMALL_SAMPLE)
    assert plan.is_native  # the bad line is past the sample: Spark's task meets it
    with pytest.raises(Exception) as caught:
        scan_plan_dataframe(spark, plan, "r").collect()
    translated = translate_spark_error(caught.value)
    assert isinstance(translated, StorageError)
    assert str(translated).startswith(f"{tmp_path / name}{where}")


def test_a_spark_reader_failure_the_drill_reader_cannot_explain_is_sparks_reason(
    spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "l.json").write_text('{"a": 1}\n{"a": 2}\n{"a": 3}\n{"a": 4,}\n')
    plan = plan_scan(engine_at(tmp_path), {"path": "l.json"}, sampling=SMALL_SAMPLE)
    with pytest.raises(Exception) as caught:
        scan_plan_dataframe(spark, plan, "r").collect()

    def fails(*args: object, **kwargs: object) -> None:
        raise TypeError("the Drill reader failed too")

    monkeypatch.setattr("engine.exec.spark.spark_errors.read_file", fails)
    translated = translate_spark_error(caught.value)
    assert isinstance(translated, StorageError) and translated.file == str(tmp_path / "l.json")
    assert str(translated).startswith(f"{tmp_path / 'l.json'}: Spark could not read the file: ")


def test_constant_is_typed_like_the_local_constant(spark) -> None:
    content = [{"a": 1, "m": {"b": "x"}, "l": [1, 2]}, {"a": 2, "n": None}, {"c": 1.5}]
    df = constant_dataframe(spark, content)
    local = records_to_batch(content)
    assert [f.name for f in df.schema.fields] == [*local.schema.names, SEQ_COLUMN]
    assert df.schema["a"].dataType.simpleString() == "bigint"
    assert df.schema["m"].dataType.simpleString() == "struct<b:string>"
    assert ordered(df.collect()) == local.to_pylist()
    assert constant_dataframe(spark, []).collect() == []


@pytest.mark.parametrize("path", ["/employees.json", "/join"])
def test_conformance_data_reads_as_the_local_scan_reads_it(
    spark, conformance_dir: Path, path: str
) -> None:
    engine = create_engine("cp", {"type": "classpath"}, classpath=[conformance_dir / "data"])
    selection = {"path": path, "type": "JSON"}
    df = scan_dataframe(spark, engine, selection, "e", file_columns=["filename"])
    expected = local_records(engine, selection, file_columns=["filename"])
    # The local scan widens its schema file by file; missing and null are the same value.
    assert [without_nulls(r["e"]) for r in ordered(df.collect())] == [
        without_nulls(r) for r in expected
    ]


def without_nulls(value: object) -> object:
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


def test_a_parquet_read_is_sized_by_spark_as_a_read_of_every_column(spark, tmp_path: Path) -> None:
    """The files' other columns are in the reader's schema: Spark prunes them from the read,
    and sizes the scan at its share of the files' bytes, as it sizes ``spark.read.parquet`` (its
    choice of a broadcast join then is the same)."""
    (tmp_path / "t").mkdir()
    wide = {f"c{i}": pa.array([float(i)] * 1000) for i in range(8)}
    for name in ("a", "b"):
        table = pa.table({"k": pa.array(range(1000), pa.int64()), **wide})
        pq.write_table(table, tmp_path / "t" / f"{name}.parquet")
    plan = plan_scan(engine_at(tmp_path), {"path": "t"}, projection=["k"])
    assert plan.reader == "spark-parquet", plan.reason
    unread = plan.resolved.unread_schema
    assert [(f.name, f.dataType.simpleString()) for f in unread.fields] == [
        (f"c{i}", "double") for i in range(8)
    ]
    df = without_unread(scan_plan_dataframe(spark, plan, "r"))
    physical = df._jdf.queryExecution().executedPlan().toString()
    assert "ReadSchema: struct<k:bigint,_tmp_metadata_row_index:bigint>" in physical
    # A read of k alone would be sized at every byte of the files.
    size = int(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
    assert size < sum(f.stat().st_size for f in (tmp_path / "t").iterdir()) / 2
    assert sorted(r["r"]["k"] for r in df.collect()) == sorted([*range(1000)] * 2)


def test_the_unread_columns_are_those_spark_reads_as_drill_does_with_one_type() -> None:
    columns = {
        "K": pa.int64(),
        "a": pa.float64(),
        "mixed": None,  # a double in one file, a string in another
        "u": pa.uint8(),  # Spark's reader types it otherwise
        "d": pa.decimal128(15, 2),  # so it does a decimal, but a pruned column has any type
        "t": pa.timestamp("ns"),
        "s": pa.struct([("x", pa.string())]),
    }
    unread = _unread_schema(columns, {"k": BIGINT})
    assert [(f.name, f.dataType.simpleString()) for f in unread.fields] == [
        ("a", "double"),
        ("d", "decimal(15,2)"),
        ("s", "struct<x:string>"),
    ]


def test_a_column_spark_types_otherwise_keeps_spark_s_reader_only_where_it_is_read(
    spark, tmp_path: Path
) -> None:
    """An unsigned column (Spark's reader types it otherwise than Drill) that the scan does not
    read leaves the other columns to Spark's reader; read, it takes the Drill reader. Both give
    the same rows."""
    (tmp_path / "t").mkdir()
    table = pa.table(
        {
            "k": pa.array([3, 1, 2], pa.int64()),
            "qty": pa.array([7, None, 4_000_000_000], pa.uint32()),
            "s": ["c", "a", None],
        }
    )
    pq.write_table(table, tmp_path / "t" / "a.parquet")
    engine = engine_at(tmp_path)
    pruned = plan_scan(engine, {"path": "t"}, projection=["k", "s"])
    assert pruned.reader == "spark-parquet", pruned.reason
    whole = plan_scan(engine, {"path": "t"}, projection=["k", "qty"])
    assert whole.reader == "drill" and "uint32" in whole.reason, whole.reason

    def rows(plan: Any) -> list[Any]:
        frame = without_unread(scan_plan_dataframe(spark, plan, "r"))
        return [r["r"].asDict() for r in frame.collect()]

    assert rows(pruned) == [{"k": 3, "s": "c"}, {"k": 1, "s": "a"}, {"k": 2, "s": None}]
    assert rows(whole) == [
        {"k": 3, "qty": 7},
        {"k": 1, "qty": None},
        {"k": 2, "qty": 4_000_000_000},
    ]


def test_a_csv_file_rewritten_to_the_same_size_is_read_with_its_new_header(
    spark, tmp_path: Path
) -> None:
    """A process runs many plans: a header read for a file is kept only while the file is
    unchanged (a rewrite of the same size included)."""
    import os

    engine = create_engine("fs", {"type": "fs", "root": str(tmp_path)})
    path = tmp_path / "t.csv"
    path.write_text("a,b\n1,2\n")
    selection = {"path": "t.csv", "format": "csv"}
    assert scan_dataframe(spark, engine, selection, None).columns[:2] == ["a", "b"]
    path.write_text("c,d\n1,2\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert scan_dataframe(spark, engine, selection, None).columns[:2] == ["c", "d"]
