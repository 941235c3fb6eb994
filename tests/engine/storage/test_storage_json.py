"""The JSON reader: concatenated and pretty-printed values, JSON lines, positions of errors,
skip-and-count, the Arrow fast path, and the documented edge cases."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.storage.formats.json as json_format
from engine.errors import StorageError
from engine.storage.formats import JsonReader, ReaderOptions
from engine.storage.formats.json import write_json
from engine.storage.sinks import ConsoleSink

GOLDEN = Path(__file__).parent / "golden"
SKIP = ReaderOptions(on_error="skip")


def write(tmp_path: Path, text: str | bytes, name: str = "d.json") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def read(path: Path, options: ReaderOptions | None = None) -> list[tuple[Any, int]]:
    return list(JsonReader(path, options).records())


def error_of(path: Path) -> StorageError:
    with pytest.raises(StorageError) as caught:
        read(path)
    return caught.value


# ---------------------------------------------------------------- reading


def test_donuts_concatenated_pretty_json(conformance_dir: Path) -> None:
    records = read(conformance_dir / "data" / "donuts.json")
    assert [(r["id"], line) for r, line in records] == [
        ("0001", 1),
        ("0002", 30),
        ("0003", 52),
        ("0004", 76),
        ("0005", 113),
    ]
    first = records[0][0]
    assert first["ppu"] == 0.55 and isinstance(first["sales"], int)
    assert first["batters"]["batter"][3] == {"id": "1004", "type": "Devil's Food"}


def test_donuts_through_the_console_sink_matches_golden(conformance_dir: Path) -> None:
    out = io.StringIO()
    ConsoleSink(out).write(r for r, _ in read(conformance_dir / "data" / "donuts.json"))
    assert out.getvalue() == (GOLDEN / "donuts_console.jsonl").read_text()


def test_json_lines(tmp_path: Path) -> None:
    path = write(tmp_path, '{"a": 1}\n{"a": 2.5, "b": [true, null]}\n\n{"a": "x"}\n')
    assert read(path) == [({"a": 1}, 1), ({"a": 2.5, "b": [True, None]}, 2), ({"a": "x"}, 4)]


def test_values_on_one_line_and_scalars(tmp_path: Path) -> None:
    path = write(tmp_path, '{"a": 1} {"a": 2}[1,2] "s" 3 true null')
    assert [v for v, _ in read(path)] == [{"a": 1}, {"a": 2}, [1, 2], "s", 3, True, None]


def test_byte_order_mark_is_ignored(tmp_path: Path) -> None:
    path = write(tmp_path, b'\xef\xbb\xbf{"a": 1}\n')
    assert read(path) == [({"a": 1}, 1)]


# ---------------------------------------------------------------- errors and skipping


def test_malformed_value_reports_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, '{"a": 1}\n{"a": 2,, "b": 3}\n{"a": 4}\n')
    error = error_of(path)
    assert (error.file, error.line, error.column) == (str(path), 2, 9)
    assert str(error).startswith(f"{path}:2:9: malformed JSON: Expecting property name")
    assert "onError: skip" in str(error)


def test_malformed_value_deep_in_a_pretty_record(tmp_path: Path) -> None:
    path = write(tmp_path, '{\n  "a": 1,\n  "b": tru\n}\n')
    error = error_of(path)
    assert (error.line, error.column) == (3, 8)


def test_skip_counts_and_resyncs_at_the_next_line(tmp_path: Path) -> None:
    path = write(tmp_path, '{"a": 1}\n{"a": oops}\n{"a": 3}\n{"a": \n{"a": 5}\n')
    reader = JsonReader(path, SKIP)
    assert list(reader.records()) == [({"a": 1}, 1), ({"a": 3}, 3), ({"a": 5}, 5)]
    assert reader.skipped == 2


def test_skip_in_pretty_json_does_not_take_inner_lines_as_records(tmp_path: Path) -> None:
    text = '{\n  "a": 1,\n  "b": x,\n  "c": {"d": 1},\n  "e": [1]\n}\n{\n  "a": 2\n}\n'
    reader = JsonReader(write(tmp_path, text), SKIP)
    assert list(reader.records()) == [({"a": 2}, 7)]
    assert reader.skipped == 1


def test_truncated_file_names_where_the_value_starts(tmp_path: Path) -> None:
    path = write(tmp_path, '{"a": 1}\n{"a": [1, 2,\n 3')
    error = error_of(path)
    assert (error.line, error.column) == (2, 1)
    assert "ends inside this JSON value (truncated file?)" in str(error)


def test_truncated_inside_a_string(tmp_path: Path) -> None:
    error = error_of(write(tmp_path, '{"a": 1}\n  {"a": "abc'))
    assert (error.line, error.column) == (2, 3)
    assert "truncated" in str(error)


def test_truncated_under_skip_keeps_what_came_before(tmp_path: Path) -> None:
    reader = JsonReader(write(tmp_path, '{"a": 1}\n{"a": [1, 2,\n 3'), SKIP)
    assert list(reader.records()) == [({"a": 1}, 1)]
    assert reader.skipped == 1


def test_invalid_utf8_reports_the_byte_offset(tmp_path: Path) -> None:
    error = error_of(write(tmp_path, b'{"a": 1}\n{"a": "\xff"}\n'))
    assert "invalid UTF-8 at byte offset 16" in str(error)
    assert error.line == 2


def test_errors_after_a_chunk_boundary_keep_absolute_positions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(json_format, "_CHUNK_CHARS", 16)
    monkeypatch.setattr(json_format, "_LOOKAHEAD", 4)
    lines = [f'{{"n": {i}, "pad": "{"x" * (i % 7)}"}}' for i in range(40)]
    lines[33] = '{"n": 33, "pad": @}'
    error = error_of(write(tmp_path, "\n".join(lines)))
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(lines[33])
    assert (error.line, error.column) == (34, expected.value.colno) == (34, 18)


# ---------------------------------------------------------------- edge cases (documented outcomes)


def test_empty_and_blank_files_have_no_records(tmp_path: Path) -> None:
    assert read(write(tmp_path, "", "empty.json")) == []
    assert read(write(tmp_path, " \n\t\n", "blank.json")) == []
    assert JsonReader(tmp_path / "empty.json").read_arrow() == pa.table({})
    assert JsonReader(tmp_path / "blank.json").read_arrow().num_rows == 0


def test_hundred_levels_of_nesting(tmp_path: Path) -> None:
    value: Any = {"leaf": 1}
    for level in range(100):
        value = {"m": value} if level % 2 else [value]
    path = write(tmp_path, json.dumps({"deep": value}) + "\n")
    assert read(path) == [({"deep": value}, 1)]
    table = JsonReader(path).read_arrow()
    assert table is not None and table.to_pylist() == [{"deep": value}]


def test_nesting_beyond_the_parser_limit_is_a_clear_error(tmp_path: Path) -> None:
    path = write(tmp_path, "[" * 100_000 + "]" * 100_000 + '\n{"a": 1}\n')
    error = error_of(path)
    assert "nested too deeply" in str(error) and error.line == 1
    reader = JsonReader(path, SKIP)
    assert list(reader.records()) == [({"a": 1}, 2)]
    assert reader.skipped == 1


def test_fifty_megabyte_string_value(tmp_path: Path) -> None:
    big = "x" * (50 * 1024 * 1024)
    path = write(tmp_path, '{"a": 1}\n{"big": "' + big + '", "n": 2}\n{"a": 3}\n')
    records = read(path)
    assert [line for _, line in records] == [1, 2, 3]
    assert len(records[1][0]["big"]) == len(big) and records[1][0]["n"] == 2
    table = JsonReader(path).read_arrow(columns=["a", "n"])
    assert table is not None and table.column("a").to_pylist() == [1, None, 3]


def test_mixed_types_in_one_field_are_yielded_as_they_are(tmp_path: Path) -> None:
    path = write(tmp_path, '{"v": 1}\n{"v": "one"}\n{"v": [1]}\n{"v": {"x": 1}}\n{"v": 1.5}\n')
    assert [r["v"] for r, _ in read(path)] == [1, "one", [1], {"x": 1}, 1.5]
    assert JsonReader(path).read_arrow() is None  # the scan framework decides


# ---------------------------------------------------------------- the Arrow fast path


def test_arrow_fast_path_for_json_lines(tmp_path: Path) -> None:
    path = write(tmp_path, '{"a": 1, "s": {"t": "x"}}\n{"a": 2, "s": {"t": "y"}}\n')
    table = JsonReader(path).read_arrow()
    assert table is not None
    assert table.to_pylist() == [r for r, _ in read(path)]
    assert table.schema.field("a").type == pa.int64()


def test_arrow_keeps_date_like_strings_as_strings(tmp_path: Path) -> None:
    path = write(tmp_path, '{"d": "2024-01-02", "m": {"t": "2024-01-02T03:04:05"}}\n')
    table = JsonReader(path).read_arrow()
    assert table is not None
    assert table.schema.field("d").type == pa.string()
    assert table.to_pylist() == [{"d": "2024-01-02", "m": {"t": "2024-01-02T03:04:05"}}]


def test_arrow_with_a_provided_schema_and_projection(tmp_path: Path) -> None:
    path = write(tmp_path, '{"a": 1, "b": "x", "c": true}\n{"a": 2, "b": "y", "c": false}\n')
    schema = pa.schema([("a", pa.float64())])
    table = JsonReader(path).read_arrow(schema=schema, columns=["a", "c", "missing"])
    assert table is not None
    assert table.schema == pa.schema([("a", pa.float64()), ("c", pa.bool_())])


def test_arrow_declines_pretty_printed_files(conformance_dir: Path) -> None:
    assert JsonReader(conformance_dir / "data" / "donuts.json").read_arrow() is None


def test_arrow_path_reports_syntax_errors_with_position(tmp_path: Path) -> None:
    path = write(tmp_path, '{"a": 1}\n{"a": 2}\n{"a": }\n')
    with pytest.raises(StorageError) as caught:
        JsonReader(path).read_arrow()
    assert (caught.value.line, caught.value.column) == (3, 7)


def test_arrow_path_under_skip_leaves_bad_files_to_the_record_path(tmp_path: Path) -> None:
    path = write(tmp_path, '{"a": 1}\n{"a": }\n{"a": 3}\n')
    reader = JsonReader(path, SKIP)
    assert reader.read_arrow() is None and reader.skipped == 0
    assert [r for r, _ in reader.records()] == [{"a": 1}, {"a": 3}] and reader.skipped == 1


def test_file_removed_after_listing_is_a_clear_error(tmp_path: Path) -> None:
    path = write(tmp_path, '{"a": 1}\n')
    reader = JsonReader(path)
    path.unlink()
    with pytest.raises(StorageError, match="no longer exists"):
        list(reader.records())


# ---------------------------------------------------------------- properties

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(st.dictionaries(st.text(max_size=5), json_values, max_size=4), max_size=8),
    indents=st.lists(st.sampled_from([None, 1, 2]), min_size=8, max_size=8),
    separators=st.lists(st.sampled_from([" ", "\n", "\n\n", "\t", ""]), min_size=8, max_size=8),
    chunk=st.sampled_from([5, 64, 1 << 20]),
)
def test_any_stream_of_values_round_trips_with_start_lines(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    values: list[dict[str, Any]],
    indents: list[int | None],
    separators: list[str],
    chunk: int,
) -> None:
    monkeypatch.setattr(json_format, "_CHUNK_CHARS", chunk)
    text, lines = "", []
    for value, indent, sep in zip(values, indents, separators):
        lines.append(text.count("\n") + 1)
        text += json.dumps(value, indent=indent) + (sep or " ")
    path = write(tmp_path, text, "prop.json")
    assert read(path) == list(zip(values, lines))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(
        st.fixed_dictionaries(
            {
                "i": st.integers(-(2**62), 2**62),
                "s": st.text(max_size=6),
                "l": st.lists(st.booleans()),
            }
        ),
        min_size=1,
        max_size=20,
    )
)
def test_write_json_then_read_gives_the_rows_back(
    tmp_path: Path, rows: list[dict[str, Any]]
) -> None:
    path = tmp_path / "w.json"
    table = pa.Table.from_pylist(
        rows, schema=pa.schema([("i", pa.int64()), ("s", pa.string()), ("l", pa.list_(pa.bool_()))])
    )
    write_json(table, path)
    assert [r for r, _ in read(path)] == rows
    fast = JsonReader(path).read_arrow(schema=table.schema)
    assert fast is not None and fast.to_pylist() == rows


# -- a large JSON-lines file, read in parts ----------------------------------------------------


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files of more than 1 KB read in parts of about 200 bytes."""
    monkeypatch.setattr(json_format, "WHOLE_BYTES", 1024)
    monkeypatch.setattr(json_format, "PART_BYTES", 200)


def lines(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def whole_and_parts(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[pa.Table, list]:
    whole = JsonReader(path).read_arrow()
    monkeypatch.setattr(json_format, "WHOLE_BYTES", 1024)
    monkeypatch.setattr(json_format, "PART_BYTES", 200)
    tables = JsonReader(path).read_tables()
    return whole, (None if tables is None else list(tables))


def test_a_large_file_is_read_in_parts_with_the_whole_files_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = [{"id": i, "amount": i, "tags": {"a": i}, "gone": None} for i in range(40)]
    records += [{"id": i, "amount": i + 0.5, "tags": {"b": "x"}, "late": True} for i in range(40)]
    path = write(tmp_path, lines(records))
    whole, parts = whole_and_parts(path, monkeypatch)
    assert parts is not None and len(parts) > 10
    assert all(part.schema == whole.schema for part in parts)
    assert pa.concat_tables(parts).equals(whole)
    assert whole.schema.field("amount").type == pa.float64()  # an integer, then a float


def test_timestamp_like_text_stays_text_in_every_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = [{"at": "2024-01-02 03:04:05" if i < 40 else "not a time"} for i in range(80)]
    whole, parts = whole_and_parts(write(tmp_path, lines(records)), monkeypatch)
    assert parts is not None and pa.concat_tables(parts).equals(whole)
    assert whole.schema.field("at").type == pa.string()


def test_a_field_of_two_kinds_is_declined_as_when_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = [{"v": i} for i in range(40)] + [{"v": f"text {i}"} for i in range(40)]
    path = write(tmp_path, lines(records))
    whole, parts = whole_and_parts(path, monkeypatch)
    assert whole is None and parts is None  # the scan reads its records one by one instead


def test_a_syntax_error_in_a_later_part_names_its_line(tmp_path: Path, small_parts: None) -> None:
    text = lines([{"id": i} for i in range(60)]) + '{"id": 60,, }\n' + lines([{"id": 61}])
    path = write(tmp_path, text)
    with pytest.raises(StorageError) as caught:
        JsonReader(path).read_tables()
    assert caught.value.line == 61


def test_a_scan_of_a_file_in_parts_gives_the_records_of_a_whole_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine import run_plan

    records = [{"k": i % 3, "v": i, "m": {"x": i}} for i in range(200)]
    records += [{"k": 9, "v": 0.25, "m": {"y": "z"}, "extra": [1, 2]}]
    write(tmp_path, lines(records))
    plan = {
        "storage": {"fs": {"type": "fs", "root": str(tmp_path)}, "q": {"type": "queue"}},
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "r",
             "selection": {"path": "d.json"}},
            {"@id": 2, "op": "store", "input": 1, "storageengine": "q", "target": {}},
        ],
    }  # fmt: skip
    whole = run_plan(plan).records()
    monkeypatch.setattr(json_format, "WHOLE_BYTES", 1024)
    monkeypatch.setattr(json_format, "PART_BYTES", 200)
    assert run_plan(plan).records() == whole


def test_a_scan_holds_one_part_of_a_large_json_file_at_a_time(tmp_path: Path) -> None:
    """A run filtering every record of a 40 MB JSON-lines file in a process of its own (Arrow's
    peak allocation is the process's): read in 1 MB parts, its peak stays far below the file's
    table; read whole, it does not (the control)."""
    import subprocess
    import sys

    row = json.dumps({"id": 123456789, "name": "x" * 40, "score": 0.5}) + "\n"
    count = 40_000_000 // len(row)
    (tmp_path / "big.json").write_text(row * count)
    script = f"""
import sys
import pyarrow as pa
from engine import run_plan
from engine.storage.formats import json as json_format
json_format.WHOLE_BYTES = int(sys.argv[1])
json_format.PART_BYTES = 1 << 20
plan = {{"storage": {{"fs": {{"type": "fs", "root": {str(tmp_path)!r}}}, "q": {{"type": "queue"}}}},
    "query": [
        {{"@id": 1, "op": "scan", "storageengine": "fs", "ref": "t",
          "selection": {{"path": "big.json"}}}},
        {{"@id": 2, "op": "filter", "input": 1, "expr": "t.id == 7"}},
        {{"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {{}}}}]}}
assert run_plan(plan, optimize=False).records() == []
print(pa.default_memory_pool().max_memory())
"""
    peaks = {}
    for whole_bytes in (1 << 20, 1 << 30):
        done = subprocess.run(
            [sys.executable, "-c", script, str(whole_bytes)],
            capture_output=True, text=True, check=True, cwd=Path(__file__).parents[3],
        )  # fmt: skip
        peaks[whole_bytes] = int(done.stdout.split()[-1])
    assert peaks[1 << 20] < 10_000_000
    assert peaks[1 << 30] >= 30_000_000
