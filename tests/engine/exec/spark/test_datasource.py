"""The Drill scan framework as a Spark Python data source: driver-side schema resolution, what
travels to the tasks, the tasks' batches, and errors crossing the process boundary."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import SchemaConflictError, StorageError
from engine.exec.spark.datasource import decode_error, encode_error, read_file, register_data_source
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.scan_request import DATA_SOURCE_NAME, EngineSpec, ScanRequest, SchemaSampling
from engine.exec.spark.scan_resolution import resolve_scan
from engine.exec.spark.sources import scan_dataframe
from engine.exec.spark.spark_errors import translate_spark_error
from engine.exec.spark.spark_types import conform_batch
from engine.scan.framework import FileScan, PartitionLayout
from engine.storage.engines import create_engine

SMALL_SAMPLE = SchemaSampling(full_read_bytes=0, records_per_file=2, max_files=8)


def fs(root: Path):
    return create_engine("fs", {"type": "fs", "root": str(root)})


def lines(*records: dict) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def local_records(engine, selection: dict, **kwargs) -> list[dict]:
    scan = FileScan(engine, selection, **kwargs)
    return [r for batch in scan.batches() for r in batch.to_pylist()]


def spark_records(df) -> list[dict]:
    rows = df.orderBy(SEQ_COLUMN).collect()
    return [{k: v for k, v in r.asDict(recursive=True).items() if k != SEQ_COLUMN} for r in rows]


# ---------------------------------------------------------------- driver side (no Spark)


def test_small_selection_is_read_whole_in_the_selections_schema_mode(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "1.json").write_text(lines({"x": 1}))
    (tmp_path / "b.json").write_text(lines({"x": 2.5, "y": {"z": "t"}}))
    scan = resolve_scan(fs(tmp_path), {"path": "/"})
    assert scan.complete
    assert scan.spark_schema.simpleString() == "struct<x:double,y:struct<z:string>,dir0:string>"
    assert scan.implicit == ("dir0",)
    assert scan.table_columns == ["x", "y"]


def test_large_selection_commits_a_sample_of_each_file(tmp_path: Path) -> None:
    late = [{"a": 1}, {"a": 2}, {"a": 3, "late": "never seen"}]
    (tmp_path / "f1.json").write_text(lines(*late))
    (tmp_path / "f2.json").write_text(lines({"a": 4, "b": True}))
    scan = resolve_scan(fs(tmp_path), {"path": "/"}, sampling=SMALL_SAMPLE)
    assert not scan.complete
    assert scan.table_columns == ["a", "b"]  # "late" is past the sample of f1


@pytest.mark.parametrize(
    ("text", "first_two"),
    [
        # one record per line: the first lines are the sample
        (lines({"a": 1}, {"a": 2}, {"a": 3, "late": 1}), lines({"a": 1}, {"a": 2})),
        # records spanning lines: the sample ends where record 3 starts, not inside record 2
        (
            '{\n "a": 1\n}\n{\n "a": 2\n}\n{\n "a": 3, "late": 1\n}\n',
            '{\n "a": 1\n}\n{\n "a": 2\n}\n',
        ),
        # two records on a line: the line-count shortcut does not apply
        ('{"a": 1} {"a": 2}\n{"a": 3, "late": 1}\n{"a": 4}\n', '{"a": 1} {"a": 2}\n'),
    ],
    ids=["json-lines", "pretty", "two-per-line"],
)
def test_a_sample_holds_the_first_records_whole(tmp_path: Path, text: str, first_two: str) -> None:
    from engine.exec.spark.scan_resolution import _record_prefix

    (tmp_path / "s.json").write_text(text)
    engine = fs(tmp_path)
    selection = {"path": "s.json"}
    (file,) = engine.list_files(selection)
    open_reader = engine.reader_factory(selection)
    prefix = _record_prefix(open_reader, file, 2, tmp_path / "copy.json")
    assert not prefix.whole and prefix.file.path == file.path
    assert prefix.file.real_path.read_bytes() == first_two.encode()
    # Arrow's parse of JSON lines is the sample's (once); other layouts the scan reads itself.
    one_per_line = text.count("\n") == text.count("{")
    assert (prefix.table is not None) == one_per_line
    if one_per_line:
        assert prefix.table.to_pylist() == [{"a": 1}, {"a": 2}]
    whole = _record_prefix(open_reader, file, text.count("\n"), tmp_path / "copy2.json")
    assert whole.whole and whole.file == file  # at most that many lines: read it whole
    scan = resolve_scan(engine, selection, sampling=SMALL_SAMPLE)
    assert scan.table_columns == ["a"]  # "late" is past the sample


def test_a_sample_parses_each_json_lines_file_once(tmp_path: Path, monkeypatch) -> None:
    """The parse that shows a prefix is one record per line is the one the tracker reads."""
    import pyarrow.json as pa_json

    for day in range(4):
        (tmp_path / f"{day}.json").write_text(lines(*[{"a": i, "day": day} for i in range(5)]))
    parses = []
    real = pa_json.read_json
    monkeypatch.setattr(pa_json, "read_json", lambda *a, **k: parses.append(1) or real(*a, **k))
    scan = resolve_scan(fs(tmp_path), {"path": "/"}, sampling=SMALL_SAMPLE)
    assert not scan.complete and scan.table_columns == ["a", "day"]
    assert len(parses) == 4


def test_a_sample_reports_the_first_bad_file_in_order(tmp_path: Path) -> None:
    """Files are parsed ahead in threads, yet the error is the one a read in file order meets."""
    (tmp_path / "1.json").write_text(lines({"a": 1}, {"a": 2}) + "{oops\n" + lines({"a": 3}))
    (tmp_path / "2.json").write_text("{bad\n" + lines({"a": 1}, {"a": 2}, {"a": 3}))
    with pytest.raises(StorageError, match=r"1\.json:3"):
        resolve_scan(fs(tmp_path), {"path": "/"}, sampling=SchemaSampling(records_per_file=3))
    with pytest.raises(StorageError, match=r"1\.json:3"):  # the whole files read on the driver
        resolve_scan(fs(tmp_path), {"path": "/"})


def test_small_selections_are_read_whole_with_arrow_ahead(tmp_path: Path) -> None:
    """Read whole on the driver, the files parsed ahead agree with one read after the other."""
    (tmp_path / "1.json").write_text(lines({"a": 1}, {"a": 2.5}))
    (tmp_path / "2.json").write_text('{\n "b": "x"\n}\n')  # not JSON lines: scan reads it
    (tmp_path / "3.json").write_text("")
    (tmp_path / "4.json").write_text(lines({"c": [1, 2]}))
    scan = resolve_scan(fs(tmp_path), {"path": "/"})
    assert scan.complete
    assert scan.spark_schema.simpleString() == "struct<a:double,b:string,c:array<bigint>>"


def test_parquet_schema_comes_from_every_footer(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": [1]}), tmp_path / "1.parquet")
    pq.write_table(pa.table({"b": ["x"]}), tmp_path / "2.parquet")
    scan = resolve_scan(fs(tmp_path), {"path": "/"}, sampling=SMALL_SAMPLE)
    assert scan.complete and scan.table_columns == ["a", "b"]


def test_a_provided_schema_typing_every_projected_column_reads_no_file(tmp_path: Path) -> None:
    """Nothing to learn from the records: the driver does not read them (this file is not even
    JSON; the tasks would say so, naming file and line)."""
    (tmp_path / "e.json").write_text("not json\n")
    schema = [
        {"name": "id", "type": "BIGINT"},
        {"name": "items", "type": "MAP", "mode": "REPEATED",
         "fields": [{"name": "sku", "type": "VARCHAR"}]},
    ]  # fmt: skip
    selection = {"path": "e.json", "schema": schema}
    scan = resolve_scan(fs(tmp_path), selection, projection=["items", "id"])
    assert scan.spark_schema.simpleString() == "struct<items:array<struct<sku:string>>,id:bigint>"
    with pytest.raises(StorageError, match=r"e\.json:1"):  # a column the schema leaves open
        resolve_scan(fs(tmp_path), selection, projection=["id", "other"])
    with pytest.raises(StorageError, match=r"e\.json:1"):  # the wildcard may find more columns
        resolve_scan(fs(tmp_path), selection)


def test_an_empty_directory_has_only_its_implicit_columns(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    scan = resolve_scan(fs(tmp_path), {"path": "empty"}, file_columns=["filename"])
    assert scan.files == () and list(scan.output_types) == ["filename"]


def test_a_sampled_conflict_fails_on_the_driver_naming_file_and_column(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(lines({"a": 1}, {"a": "x"}))
    with pytest.raises(SchemaConflictError, match=r"c\.json:2: column 'a' changed type"):
        resolve_scan(fs(tmp_path), {"path": "c.json", "unionType": False}, sampling=SMALL_SAMPLE)


def test_a_task_conflict_after_the_sample_names_file_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(lines({"a": 1}, {"a": 2}, {"a": 3}, {"a": "x"}))
    scan = resolve_scan(fs(tmp_path), {"path": "c.json", "unionType": False}, sampling=SMALL_SAMPLE)
    with pytest.raises(SchemaConflictError) as caught:
        list(read_file(scan.request, scan.files[0], scan.spark_schema, layout=PartitionLayout()))
    assert str(caught.value).startswith(f"{tmp_path / 'c.json'}:4: column 'a' changed type")
    assert decode_error(caught.value.__notes__[0].split(": ", 1)[1]) is not None


def test_task_batches_match_the_local_scan_and_the_declared_arrow_schema(
    conformance_dir: Path,
) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    engine = create_engine("cp", {"type": "classpath"}, classpath=[conformance_dir / "data"])
    selection = {"path": "/donuts.json", "type": "JSON"}  # concatenated pretty-printed JSON
    scan = resolve_scan(engine, selection)
    batches = list(
        read_file(scan.request, scan.files[0], scan.spark_schema, layout=PartitionLayout())
    )
    target = to_arrow_schema(scan.spark_schema, timezone="UTC")
    assert all(b.schema.equals(target) for b in batches)
    assert [r for b in batches for r in b.to_pylist()] == local_records(engine, selection)


def test_json_lines_with_a_projection_read_only_the_projected_columns(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text(lines({"a": 1, "m": {"x": 1, "y": "u"}, "z": 0}))
    scan = resolve_scan(fs(tmp_path), {"path": "p.json"}, projection=["m.y", "a", "gone"])
    batches = list(
        read_file(scan.request, scan.files[0], scan.spark_schema, layout=PartitionLayout())
    )
    assert batches[0].to_pylist() == [{"m": {"y": "u"}, "a": 1, "gone": None}]


def test_conform_batch_fills_missing_and_casts_to_the_target() -> None:
    target = pa.schema(
        [("a", pa.float64()), ("t", pa.timestamp("us")), ("b", pa.list_(pa.int64()))]
    )
    batch = pa.record_batch({"A": pa.array([1], pa.int64()), "t": pa.array([5], pa.time64("us"))})
    out = conform_batch(batch, target)
    assert out.schema.equals(target)
    assert out.column("t").cast(pa.int64()).to_pylist() == [5]
    assert out.to_pylist()[0]["a"] == 1.0 and out.to_pylist()[0]["b"] is None


selections = st.fixed_dictionaries(
    {"path": st.text(min_size=1, max_size=20)},
    optional={
        "type": st.sampled_from(["json", "CSV", "parquet"]),
        "schema": st.lists(
            st.fixed_dictionaries(
                {"name": st.text(max_size=5), "type": st.sampled_from(["INT", "VARCHAR"])}
            ),
            max_size=3,
        ),
    },
)


@given(
    selection=selections,
    file_columns=st.lists(st.sampled_from(["fqn", "filename", "filepath", "suffix"]), unique=True),
    projection=st.none() | st.lists(st.text(min_size=1, max_size=8), max_size=3),
    batch_rows=st.integers(1, 1 << 20),
)
def test_scan_requests_round_trip_through_the_options(
    selection: dict, file_columns: list[str], projection: list[str] | None, batch_rows: int
) -> None:
    spec = EngineSpec("fs", {"type": "fs", "root": "/data"})
    request = ScanRequest(
        spec,
        selection,
        tuple(file_columns),
        batch_rows,
        projection=None if projection is None else tuple(projection),
    )
    options = {k.lower(): v for k, v in request.to_options().items()}  # Spark lower-cases keys
    assert all(isinstance(v, str) for v in options.values())
    assert ScanRequest.from_options(options) == request


@given(
    message=st.text(min_size=1, max_size=30),
    file=st.none() | st.text(min_size=1, max_size=10),
    line=st.none() | st.integers(1, 10_000),
    column=st.none() | st.integers(1, 500),
    hint=st.none() | st.text(max_size=10),
)
def test_storage_errors_survive_the_trip_from_a_task(
    message: str, file: str | None, line: int | None, column: int | None, hint: str | None
) -> None:
    err = StorageError(message, file=file, line=line, column=column if line else None, hint=hint)
    back = decode_error(encode_error(err))
    assert isinstance(back, StorageError)
    assert str(back) == str(err)
    assert (back.file, back.line) == (err.file, err.line)
    assert "\n" not in encode_error(err)


def test_engine_spec_rebuilds_an_fs_engine_with_its_formats(tmp_path: Path) -> None:
    engine = create_engine(
        "f",
        {
            "type": "fs",
            "root": str(tmp_path),
            "formats": {"pipes": {"type": "text", "delimiter": "|"}},
        },
    )
    again = EngineSpec.from_json(json.loads(json.dumps(EngineSpec.of(engine).to_json()))).create()
    assert again.root == engine.root
    assert again.reader_options({"path": "x", "format": "pipes"}).delimiter == "|"
    with pytest.raises(StorageError, match="cannot be scanned"):
        EngineSpec.of(create_engine("q", {"type": "queue"}))


# ---------------------------------------------------------------- on Spark


def test_the_data_source_reads_concatenated_pretty_json_like_the_local_scan(
    spark, conformance_dir: Path
) -> None:
    engine = create_engine("cp", {"type": "classpath"}, classpath=[conformance_dir / "data"])
    selection = {"path": "/donuts.json", "type": "JSON"}
    df = scan_dataframe(spark, engine, selection, None)  # auto: pretty JSON needs the data source
    assert spark_records(df) == local_records(engine, selection)


def test_the_data_source_resolves_its_own_schema_when_loaded_directly(
    spark, tmp_path: Path
) -> None:
    (tmp_path / "2024").mkdir()
    (tmp_path / "2024" / "a.json").write_text('{"x": 1,\n "y": [1, 2]}\n{"x": 2}')
    register_data_source(spark)
    register_data_source(spark)  # once per session: the second call is a no-op
    request = ScanRequest(EngineSpec.of(fs(tmp_path)), {"path": "/"}, ("filename",))
    df = spark.read.format(DATA_SOURCE_NAME).options(**request.to_options()).load()
    assert (
        df.schema.simpleString() == "struct<x:bigint,y:array<bigint>,dir0:string,filename:string>"
    )
    assert [r.asDict() for r in df.collect()] == [
        {"x": 1, "y": [1, 2], "dir0": "2024", "filename": "a.json"},
        {"x": 2, "y": None, "dir0": "2024", "filename": "a.json"},
    ]


def test_malformed_json_in_a_task_is_a_storage_error_naming_file_and_line(
    spark, tmp_path: Path
) -> None:
    (tmp_path / "bad.json").write_text('{"a": 1}\n{"a": 2}\n{"a": 3}\n{\n  "a": 4,,\n}\n')
    df = scan_dataframe(
        spark, fs(tmp_path), {"path": "bad.json"}, "t", sampling=SMALL_SAMPLE, reader="drill"
    )
    with pytest.raises(Exception) as caught:
        df.collect()
    translated = translate_spark_error(caught.value)
    assert isinstance(translated, StorageError)
    assert str(translated).startswith(f"{tmp_path / 'bad.json'}:5:")
    assert "malformed JSON" in str(translated)


def test_a_conflict_while_spark_asks_for_the_schema_is_the_engine_error(
    spark, tmp_path: Path
) -> None:
    (tmp_path / "c.json").write_text(lines({"a": [1]}, {"a": {"b": 2}}))
    register_data_source(spark)
    request = ScanRequest(EngineSpec.of(fs(tmp_path)), {"path": "c.json", "unionType": False})
    with pytest.raises(Exception) as caught:
        spark.read.format(DATA_SOURCE_NAME).options(**request.to_options()).load()
    translated = translate_spark_error(caught.value)
    assert isinstance(translated, SchemaConflictError)
    assert (translated.column, translated.file) == ("a", f"{tmp_path / 'c.json'}:2")


def test_a_session_made_beside_one_that_read_through_the_data_source_reads_through_it_too(
    spark, conformance_dir: Path
) -> None:
    """``newSession()`` inherits the data sources registered so far, and Spark refuses to
    register one of them again (``DATA_SOURCE_ALREADY_EXISTS``): the engine reads through it."""
    engine = create_engine("cp", {"type": "classpath"}, classpath=[conformance_dir / "data"])
    selection = {"path": "/donuts.json", "type": "JSON"}
    expected = local_records(engine, selection)
    assert spark_records(scan_dataframe(spark, engine, selection, None)) == expected
    for session in (spark.newSession(), spark.newSession()):
        assert spark_records(scan_dataframe(session, engine, selection, None)) == expected
