"""The CSV and text readers: header and columns modes, quoting, error positions, skip-and-count,
typed columns through a provided schema, and the record and Arrow paths agreeing."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import StorageError
from engine.storage.formats import CsvReader, ReaderOptions, TextReader
from engine.storage.formats.csv import write_csv

SKIP = ReaderOptions(on_error="skip")


def write(tmp_path: Path, text: str | bytes, name: str = "d.csv") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def records(path: Path, options: ReaderOptions | None = None) -> list[tuple[Any, int]]:
    return list(CsvReader(path, options).records())


def arrow(path: Path, options: ReaderOptions | None = None, **kwargs: Any) -> pa.Table:
    table = CsvReader(path, options).read_arrow(**kwargs)
    assert table is not None
    return table


# ---------------------------------------------------------------- modes


def test_header_mode_gives_named_string_columns(tmp_path: Path) -> None:
    path = write(tmp_path, "id,name,ppu\n1,Cake,0.55\n2,Raised,0.69\n")
    assert records(path) == [
        ({"id": "1", "name": "Cake", "ppu": "0.55"}, 2),
        ({"id": "2", "name": "Raised", "ppu": "0.69"}, 3),
    ]
    table = arrow(path)
    assert table.schema == pa.schema(
        [("id", pa.string()), ("name", pa.string()), ("ppu", pa.string())]
    )
    assert table.to_pylist() == [r for r, _ in records(path)]


def test_columns_mode_with_header_false(tmp_path: Path) -> None:
    path = write(tmp_path, "1,Cake\n2,Raised,extra\n\n3\n")
    reader = CsvReader(path, ReaderOptions(header=False))
    assert list(reader.records()) == [
        ({"columns": ["1", "Cake"]}, 1),
        ({"columns": ["2", "Raised", "extra"]}, 2),
        ({"columns": ["3"]}, 4),
    ]
    table = CsvReader(path, ReaderOptions(header=False)).read_arrow()
    assert table is not None
    assert table.schema == pa.schema([("columns", pa.list_(pa.string()))])
    assert table.column("columns").to_pylist() == [["1", "Cake"], ["2", "Raised", "extra"], ["3"]]


def test_text_format_is_columns_mode(tmp_path: Path) -> None:
    path = write(tmp_path, "a|b\nc|d\n", "d.tbl")
    reader = TextReader(path, ReaderOptions(delimiter="|"))
    assert [r for r, _ in reader.records()] == [{"columns": ["a", "b"]}, {"columns": ["c", "d"]}]


def test_quoting_and_values_over_several_lines(tmp_path: Path) -> None:
    path = write(tmp_path, 'a,b\n"x, y","say ""hi"""\n"multi\nline",2\n3,4\n')
    assert records(path) == [
        ({"a": "x, y", "b": 'say "hi"'}, 2),
        ({"a": "multi\nline", "b": "2"}, 3),
        ({"a": "3", "b": "4"}, 5),
    ]
    assert arrow(path).to_pylist() == [r for r, _ in records(path)]


def test_blank_and_repeated_header_names(tmp_path: Path) -> None:
    path = write(tmp_path, "a,,a\n1,2,3\n")
    assert records(path) == [({"a": "1", "column_1": "2", "a_2": "3"}, 2)]
    assert arrow(path).column_names == ["a", "column_1", "a_2"]


def test_leading_blank_lines_and_crlf(tmp_path: Path) -> None:
    path = write(tmp_path, b"\r\n\r\na,b\r\n1,2\r\n\r\n3,4\r\n")
    assert records(path) == [({"a": "1", "b": "2"}, 4), ({"a": "3", "b": "4"}, 6)]
    assert arrow(path).to_pylist() == [{"a": "1", "b": "2"}, {"a": "3", "b": "4"}]


def test_empty_values_stay_empty_strings(tmp_path: Path) -> None:
    path = write(tmp_path, 'a,b\n,""\n')
    assert records(path) == [({"a": "", "b": ""}, 2)]
    assert arrow(path).to_pylist() == [{"a": "", "b": ""}]


# ---------------------------------------------------------------- typed columns, projection


def test_provided_schema_types_the_named_columns_only(tmp_path: Path) -> None:
    path = write(tmp_path, "id,ppu,name\n1,0.5,Cake\n2,,Raised\n")
    schema = pa.schema([("id", pa.int64()), ("ppu", pa.float64())])
    table = arrow(path, schema=schema)
    assert table.schema == pa.schema(
        [("id", pa.int64()), ("ppu", pa.float64()), ("name", pa.string())]
    )
    assert table.column("ppu").to_pylist() == [0.5, None]
    assert arrow(path, columns=["name"]).column_names == ["name"]


def test_value_that_does_not_convert_is_located(tmp_path: Path) -> None:
    path = write(tmp_path, "name,id\nCake,1\n" + "Raised,2\n" * 50 + 'Old,"x7"\n')
    with pytest.raises(StorageError) as caught:
        CsvReader(path).read_arrow(schema=pa.schema([("id", pa.int64())]))
    error = caught.value
    assert (error.line, error.column) == (53, 5)
    assert "column 'id': 'x7' is not a valid int64" in str(error)


def test_value_that_does_not_convert_under_skip_goes_to_the_record_path(tmp_path: Path) -> None:
    path = write(tmp_path, "id\n1\nx\n")
    reader = CsvReader(path, SKIP)
    assert reader.read_arrow(schema=pa.schema([("id", pa.int64())])) is None
    assert [r for r, _ in reader.records()] == [{"id": "1"}, {"id": "x"}]


# ---------------------------------------------------------------- errors and skipping


def test_too_many_fields_points_at_the_first_extra_one(tmp_path: Path) -> None:
    path = write(tmp_path, 'a,b\n1,2\n3,"x,y",5\n')
    for read in (lambda: records(path), lambda: arrow(path)):
        with pytest.raises(StorageError) as caught:
            read()
        assert (caught.value.line, caught.value.column) == (3, 9)
        assert "3 fields where the header names 2" in str(caught.value)


def test_too_few_fields_points_past_the_row_end(tmp_path: Path) -> None:
    path = write(tmp_path, "a,b,c\n1,2,3\n4,5\n")
    for read in (lambda: records(path), lambda: arrow(path)):
        with pytest.raises(StorageError) as caught:
            read()
        assert (caught.value.file, caught.value.line, caught.value.column) == (str(path), 3, 4)
        assert str(caught.value).startswith(f"{path}:3:4: malformed CSV row: 2 fields")


def test_skip_counts_bad_rows_in_both_paths(tmp_path: Path) -> None:
    path = write(tmp_path, "a,b\n1,2\n3\n4,5,6\n7,8\n")
    reader = CsvReader(path, SKIP)
    assert list(reader.records()) == [({"a": "1", "b": "2"}, 2), ({"a": "7", "b": "8"}, 5)]
    assert reader.skipped == 2
    fast = CsvReader(path, SKIP)
    table = fast.read_arrow()
    assert table is not None and table.to_pylist() == [{"a": "1", "b": "2"}, {"a": "7", "b": "8"}]
    assert fast.skipped == 2


def test_unclosed_quote_at_the_end_is_a_truncated_file(tmp_path: Path) -> None:
    path = write(tmp_path, 'a,b\n1,2\n3,"four\n5,6\n')
    for read in (lambda: records(path), lambda: arrow(path)):
        with pytest.raises(StorageError) as caught:
            read()
        assert (caught.value.line, caught.value.column) == (3, 3)
        assert "not closed before the end of the file (truncated file?)" in str(caught.value)
    reader = CsvReader(path, SKIP)
    assert [r for r, _ in reader.records()] == [{"a": "1", "b": "2"}] and reader.skipped == 1


def test_a_quote_inside_an_unquoted_value_is_not_an_open_quote(tmp_path: Path) -> None:
    path = write(tmp_path, "name,height\nAl,5'11\"\n")
    assert records(path) == [({"name": "Al", "height": "5'11\""}, 2)]
    assert arrow(path).to_pylist() == [{"name": "Al", "height": "5'11\""}]


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, b"a,b\n1,2\n\xff,3\n")
    with pytest.raises(StorageError) as caught:
        records(path)
    assert "invalid UTF-8" in str(caught.value) and caught.value.line == 3
    with pytest.raises(StorageError) as caught:
        arrow(path)
    assert "invalid UTF8" in str(caught.value) or "invalid UTF-8" in str(caught.value)


# ---------------------------------------------------------------- edge cases


def test_empty_file_and_header_only(tmp_path: Path) -> None:
    empty = write(tmp_path, "", "empty.csv")
    assert records(empty) == [] and arrow(empty).num_rows == 0
    header_only = write(tmp_path, "a,b\n", "header.csv")
    assert records(header_only) == []
    table = arrow(header_only)
    assert table.num_rows == 0 and table.column_names == ["a", "b"]
    assert list(TextReader(empty).records()) == []


def test_fifty_megabyte_value(tmp_path: Path) -> None:
    big = "y" * (50 * 1024 * 1024)
    path = write(tmp_path, f"a,b\n1,{big}\n2,z\n")
    rows = records(path)
    assert [line for _, line in rows] == [2, 3] and len(rows[0][0]["b"]) == len(big)
    assert arrow(path, columns=["a"]).column("a").to_pylist() == ["1", "2"]


def test_write_csv_refuses_nested_columns(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="csv stores only scalar columns, and 'm' is nested"):
        write_csv(pa.table({"a": [1], "m": [{"x": 1}]}), tmp_path / "x.csv")


# ---------------------------------------------------------------- properties

cell = st.text(alphabet=st.sampled_from(list("ab ,\"\n'xé")), max_size=6)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    width=st.integers(1, 4),
    data=st.data(),
)
def test_csv_written_by_python_reads_back_in_both_paths(
    tmp_path: Path, width: int, data: st.DataObject
) -> None:
    header = [f"c{i}" for i in range(width)]
    rows = data.draw(st.lists(st.lists(cell, min_size=width, max_size=width), max_size=6))
    rows = [r for r in rows if r != [""] * width or width > 1]  # a lone empty cell is a blank line
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([header, *rows])
    path = write(tmp_path, buffer.getvalue(), "prop.csv")
    expected = [dict(zip(header, r)) for r in rows]
    assert [r for r, _ in records(path)] == expected
    assert arrow(path).to_pylist() == expected
