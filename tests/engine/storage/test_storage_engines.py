"""Storage engines by type: the registry, formats, selections, classpath lookup, capabilities,
statistics, and the sinks."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.errors import StorageError
from engine.storage import (
    ClasspathEngine,
    ConsoleEngine,
    ConsoleSink,
    FsEngine,
    QueueEngine,
    QueueSink,
    create_engine,
)
from engine.storage.formats import CsvReader, JsonReader, TextReader


@pytest.fixture
def fs(tmp_path: Path) -> FsEngine:
    engine = create_engine("fs1", {"type": "fs", "root": f"file://{tmp_path}"})
    assert isinstance(engine, FsEngine)
    return engine


# ---------------------------------------------------------------- the registry


def test_each_type_builds_its_engine(tmp_path: Path) -> None:
    assert isinstance(create_engine("a", {"type": "FS", "root": str(tmp_path)}), FsEngine)
    assert isinstance(
        create_engine("b", {"type": "classpath"}, classpath=[tmp_path]), ClasspathEngine
    )
    assert isinstance(create_engine("c", {"type": "console", "name": "c"}), ConsoleEngine)
    assert isinstance(create_engine("d", {"type": "queue", "encoding": "RECORD"}), QueueEngine)


def test_unknown_type_lists_the_known_ones() -> None:
    with pytest.raises(StorageError) as caught:
        create_engine("mock-engine", {"type": "mock", "url": "http://www.apache.org/"})
    assert str(caught.value) == (
        "storage engine 'mock-engine' has the unknown type 'mock'; "
        "known types are catalog, classpath, console, fs, jdbc, queue"
    )


def test_unknown_settings_and_a_missing_root_are_errors() -> None:
    with pytest.raises(StorageError, match=r"does not take rooot; it accepts root, connection"):
        create_engine("fs1", {"type": "fs", "rooot": "/data"})
    with pytest.raises(StorageError, match="needs a `root`"):
        create_engine("fs1", {"type": "fs"})
    with pytest.raises(StorageError, match="uses the URL scheme 's3'"):
        create_engine("fs1", {"type": "fs", "root": "s3://bucket/data"})


def test_file_root_means_the_filesystem_root() -> None:
    engine = create_engine("fs1", {"type": "fs", "root": "file:///"})
    assert isinstance(engine, FsEngine) and engine.root == Path("/")


# ---------------------------------------------------------------- selections and formats


def test_format_from_type_or_format_key_any_case(fs: FsEngine) -> None:
    assert fs.format_of({"path": "/x", "type": "JSON"}) == "json"
    assert fs.format_of({"path": "/x", "format": "Parquet"}) == "parquet"
    assert fs.format_of({"path": "/x.csv"}) == "csv"
    assert fs.format_of({"path": "/x/*.tsv"}) == "text"
    assert fs.reader_options({"path": "/x.tsv"}).delimiter == "\t"


def test_format_from_the_first_file_of_a_directory(fs: FsEngine, tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.jsonl").write_text("{}")
    assert fs.format_of({"path": "/d"}) == "json"


def test_unknown_or_missing_format_is_an_error(fs: FsEngine) -> None:
    with pytest.raises(
        StorageError, match=r"unknown format 'JAVA_SEQUENCE'.*known formats are csv"
    ):
        fs.format_of({"path": "/x.seq", "type": "JAVA_SEQUENCE"})
    with pytest.raises(StorageError, match=r"names no format and its extension \.seq"):
        fs.format_of({"path": "/x.seq"})


def test_selection_options_and_bad_keys(fs: FsEngine) -> None:
    options = fs.reader_options({"path": "/x.csv", "options": {"onError": "skip"}, "header": False})
    assert options.on_error == "skip" and options.header is False
    with pytest.raises(StorageError, match="unknown key 'pth'"):
        fs.format_of({"pth": "/x.csv", "path": "/y.csv"})
    with pytest.raises(StorageError, match="onError must be 'fail' or 'skip'"):
        fs.check_selection({"path": "/x.csv", "options": {"onError": "ignore"}})
    with pytest.raises(StorageError, match="needs a selection with a `path`"):
        fs.list_files(None)  # type: ignore[arg-type]


def test_configured_formats(tmp_path: Path) -> None:
    engine = create_engine(
        "fs1",
        {
            "type": "fs",
            "root": str(tmp_path),
            "formats": {"csvh": {"type": "csv", "extensions": ["csvh"], "delimiter": ";"}},
        },
    )
    (tmp_path / "a.csvh").write_text("a;b\n1;2\n")
    selection = {"path": "/a.csvh"}
    [file] = engine.list_files(selection)
    reader = engine.open_reader(file, selection)
    assert isinstance(reader, CsvReader) and list(reader.records()) == [({"a": "1", "b": "2"}, 2)]
    with pytest.raises(StorageError, match="format 'bad' needs a `type`"):
        create_engine("x", {"type": "fs", "root": "/", "formats": {"bad": {"type": "xml"}}})


def test_open_reader_by_format(fs: FsEngine, tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text("a,b\n")
    selection = {"path": "/t.txt"}
    [file] = fs.list_files(selection)
    assert isinstance(fs.open_reader(file, selection), TextReader)
    assert isinstance(fs.open_reader(file, {"path": "/t.txt", "type": "json"}), JsonReader)


def test_check_selection_rejects_escapes_before_reading(fs: FsEngine) -> None:
    with pytest.raises(StorageError, match="escapes the root of storage engine 'fs1'"):
        fs.check_selection({"path": "../../etc/passwd", "type": "json"})
    with pytest.raises(StorageError, match="URL scheme 'http'"):
        fs.check_selection({"path": "http://evil/x.json"})


# ---------------------------------------------------------------- classpath


def test_classpath_tries_each_root(tmp_path: Path, conformance_dir: Path) -> None:
    extra = tmp_path / "extra"
    (extra / "only").mkdir(parents=True)
    (extra / "only" / "here.json").write_text('{"a": 1}')
    engine = create_engine("cp", {"type": "classpath"}, classpath=[conformance_dir / "data", extra])
    [donuts] = engine.list_files({"path": "/donuts.json", "type": "JSON"})
    assert donuts.path == conformance_dir / "data" / "donuts.json"
    [here] = engine.list_files({"path": "/only/here.json"})
    assert here.path == extra / "only" / "here.json"
    with pytest.raises(StorageError, match=r"'/nope.json' is not in the classpath .*looked in"):
        engine.list_files({"path": "/nope.json"})
    with pytest.raises(StorageError, match="escapes the root"):
        engine.check_selection({"path": "/../secrets.json"})


def test_classpath_without_roots_says_what_to_do() -> None:
    engine = create_engine("cp", {"type": "classpath"})
    with pytest.raises(StorageError) as caught:
        engine.list_files({"path": "/donuts.json"})
    assert "has no data roots" in str(caught.value) and "--classpath DIR" in str(caught.value)


def test_classpath_is_read_only(conformance_dir: Path) -> None:
    engine = create_engine("cp", {"type": "classpath"}, classpath=[conformance_dir / "data"])
    assert not engine.capabilities().can_write
    with pytest.raises(StorageError, match="cannot be written to"):
        engine.check_target({"path": "/out"})


# ---------------------------------------------------------------- capabilities and statistics


def test_capabilities_by_engine_and_format(fs: FsEngine) -> None:
    assert fs.capabilities().can_read and fs.capabilities().can_write
    parquet = fs.capabilities({"path": "/t", "format": "parquet"})
    json = fs.capabilities({"path": "/t", "format": "json"})
    assert parquet.can_push_filters and parquet.exact_row_counts
    assert not json.can_push_filters and json.can_push_projection
    assert create_engine("q", {"type": "queue"}).capabilities().is_sink


def test_statistics_count_files_bytes_and_parquet_rows(fs: FsEngine, tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    pq.write_table(pa.table({"a": [1, 2, 3]}), tmp_path / "t" / "a.parquet")
    pq.write_table(pa.table({"a": [4]}), tmp_path / "t" / "b.parquet")
    stats = fs.statistics({"path": "/t", "format": "parquet"})
    sizes = sum(p.stat().st_size for p in (tmp_path / "t").iterdir())
    assert (stats.file_count, stats.total_bytes, stats.row_count) == (2, sizes, 4)
    (tmp_path / "j.json").write_text('{"a": 1}\n')
    assert fs.statistics({"path": "/j.json"}).row_count is None


def test_sinks_cannot_be_scanned() -> None:
    with pytest.raises(StorageError, match="is a sink; it cannot be scanned"):
        create_engine("q", {"type": "queue"}).list_files({"path": "/x"})


# ---------------------------------------------------------------- sinks


def test_queue_engine_keeps_records_per_number() -> None:
    engine = create_engine("queue", {"type": "queue"})
    assert isinstance(engine, QueueEngine)
    sink = engine.sink({"number": 0})
    assert sink is engine.sink({"number": 0}) and isinstance(sink, QueueSink)
    sink.write([{"a": 1}])
    sink.write_table(pa.table({"a": [2, 3]}))
    engine.sink({"number": 1}).write(["other"])
    assert engine.records() == [{"a": 1}, {"a": 2}, {"a": 3}]
    assert engine.records(1) == ["other"] and engine.records(7) == []
    with pytest.raises(StorageError, match="target number must be a whole number"):
        engine.sink({"number": "zero"})


def test_console_engine_prints_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    engine = create_engine("console", {"type": "console"})
    assert isinstance(engine, ConsoleEngine)
    engine.sink({"pipe": "STD_OUT"}).write([{"a": 1, "b": [None, "é"]}])
    engine.sink({"file": "console:///stderr"}).write(["to stderr"])
    captured = capsys.readouterr()
    assert captured.out == '{"a": 1, "b": [null, "é"]}\n'
    assert captured.err == '"to stderr"\n'
    with pytest.raises(StorageError, match="names no console pipe"):
        engine.sink({"pipe": "PRINTER"})


def test_console_sink_on_a_given_stream() -> None:
    import datetime as dt

    out = io.StringIO()
    count = ConsoleSink(out).write_table(pa.table({"d": [dt.date(2024, 1, 2)], "n": [None]}))
    assert count == 1 and out.getvalue() == '{"d": "2024-01-02", "n": null}\n'


def test_selection_accepts_schema_mode_for_the_scan_framework() -> None:
    from engine.storage.engines import Selection

    selection = Selection.parse({"path": "/a.json", "schemaMode": "strict"}, engine="cp")
    assert selection.path == "/a.json"


def test_a_directory_format_is_found_once_per_engine(tmp_path: Path) -> None:
    """Engines live for one run; checking, sizing and reading a scan ask for its format, and the
    directory is listed for it once. A new engine (the next run) looks again."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.json").write_text('{"a": 1}\n')
    engine = FsEngine("fs", tmp_path)
    assert engine.format_of({"path": "d"}) == "json"
    (tmp_path / "d" / "a.json").rename(tmp_path / "d" / "a.csv")
    assert engine.format_of({"path": "d"}) == "json"  # this run's answer
    assert FsEngine("fs", tmp_path).format_of({"path": "d"}) == "csv"
