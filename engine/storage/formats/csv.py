"""Delimited text as Drill reads it: ``csv`` (a header line names the columns) and ``text``
(Drill's ``columns`` array mode).

* Header mode: each row is ``{name: value}`` with every value a string (VARCHAR, as in Drill),
  unless a provided schema types a column (Arrow path). A blank header name becomes ``column_<i>``
  (0-based), a repeated one gets ``_2``, ``_3``, ...
* Columns mode (``text``, or ``header: false``): each row is ``{"columns": [str, ...]}``; rows may
  have different lengths.
* Quoting follows RFC 4180 leniently (as Python's and pyarrow's readers both do): ``"a""b"`` is
  ``a"b``, a quoted value may span lines, and text after a closing quote is kept.

Outcomes at the edges (each tested): an empty file, or a header with no rows, has no records;
blank lines are skipped; a header-mode row with the wrong number of fields is a ``StorageError``
at its line and at the column of the first extra field (or just past the row's end when fields
are missing), or is skipped and counted under ``onError: skip``; a quote left open at the end of
the file (a truncated file) is a ``StorageError`` at the line where the row starts; invalid UTF-8
is a ``StorageError`` at its line.

>>> import tempfile
>>> tmp = tempfile.TemporaryDirectory()
>>> path = Path(tmp.name) / "d.csv"
>>> _ = path.write_text('id,name\\n1,"Cake, plain"\\n')
>>> list(CsvReader(path).records())
[({'id': '1', 'name': 'Cake, plain'}, 2)]
>>> list(TextReader(path).records())[1]
({'columns': ['1', 'Cake, plain']}, 2)
>>> tmp.cleanup()
"""

from __future__ import annotations

import contextlib
import csv
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.csv as pa_csv

from engine.errors import StorageError
from engine.storage.formats.base import SKIP_HINT, FormatReader, empty_table

COLUMNS = "columns"

# Python's csv module refuses fields over 128 KiB by default; Drill reads large values.
csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))


class CsvReader(FormatReader):
    """Reads delimited text; see the module docstring. ``csv`` reads a header by default."""

    format: ClassVar[str] = "csv"
    default_header: ClassVar[bool] = True

    @property
    def header(self) -> bool:
        """Whether the first row names the columns (else columns mode)."""
        return self.default_header if self.options.header is None else self.options.header

    def records(self) -> Iterator[tuple[Any, int]]:
        names: list[str] | None = None
        for fields, line, raw in self._rows():
            if not self.header:
                yield {COLUMNS: fields}, line
            elif names is None:
                names = header_names(fields)
            elif len(fields) != len(names):
                self._wrong_width(fields, raw, line, len(names))
            else:
                yield dict(zip(names, fields)), line

    def read_arrow(
        self, *, columns: Sequence[str] | None = None, schema: pa.Schema | None = None
    ) -> pa.Table | None:
        if self.is_empty():
            return empty_table(schema, columns)
        if not self.header:
            return self._columns_table(columns)
        if self._has_odd_quotes():
            # Maybe a quote left open (pyarrow would read the rest of the file as one value):
            # the record path raises at it, or counts it under skip; then it is the only way.
            for _ in self.records():
                pass
            if self.skipped:
                self.skipped = 0
                return None
        names, skip = self._header()
        if names is None:
            return empty_table(schema, columns)
        return self._read_with_pyarrow(names, skip, columns, schema)

    # ------------------------------------------------------------ the Python path

    def _rows(self) -> Iterator[tuple[list[str], int, str]]:
        """``(fields, first line, raw text)`` per non-blank row; checks the last row's quotes."""
        if self.is_empty():
            return
        raw: list[str] = []
        held: tuple[list[str], int, str] | None = None
        with self.open_binary() as binary:

            def lines() -> Iterator[str]:
                offset = 0
                for number, data in enumerate(binary, start=1):
                    try:
                        line = data.decode("utf-8")
                    except UnicodeDecodeError as err:
                        raise StorageError(
                            f"invalid UTF-8 at byte offset {offset + err.start}",
                            file=self.name,
                            line=number,
                        ) from err
                    offset += len(data)
                    raw.append(line.removeprefix("\ufeff") if number == 1 else line)
                    yield raw[-1]

            reader = csv.reader(
                lines(),
                delimiter=self.options.delimiter,
                quotechar=self.options.quote,
                strict=False,
            )
            ended_at = 0
            while True:
                try:
                    fields = next(reader)
                except StopIteration:
                    break
                except csv.Error as err:
                    raise StorageError(
                        f"malformed CSV: {err}", file=self.name, line=ended_at + 1
                    ) from err
                row_text = "".join(raw)
                raw.clear()
                start, ended_at = ended_at + 1, reader.line_num
                if not fields:
                    continue
                if held is not None:
                    yield held
                held = (fields, start, row_text)
        if held is not None:
            fields, start, row_text = held
            if _ends_inside_quotes(row_text, self.options.delimiter, self.options.quote):
                error = self.bad_record(
                    "a quoted value is not closed before the end of the file (truncated file?)",
                    line=start,
                    column=_quote_column(row_text, self.options.delimiter, self.options.quote),
                )
                if error is not None:
                    raise error
                return
            yield held

    def _wrong_width(self, fields: list[str], raw: str, line: int, expected: int) -> None:
        starts = _field_starts(raw, self.options.delimiter, self.options.quote)
        if len(fields) > expected and len(starts) > expected:
            offset = starts[expected]
            what = f"{len(fields)} fields where the header names {expected}"
        else:
            offset = len(raw.rstrip("\r\n"))
            what = f"{len(fields)} field{'s' if len(fields) != 1 else ''} where the header names {expected}"
        extra_lines = raw.count("\n", 0, offset)
        newline = raw.rfind("\n", 0, offset)
        column = offset - newline if newline >= 0 else offset + 1
        error = self.bad_record(
            f"malformed CSV row: {what}", line=line + extra_lines, column=column
        )
        if error is not None:
            raise error

    def _header(self) -> tuple[list[str] | None, int]:
        """The column names, and how many physical lines (blank ones too) precede the data:
        pyarrow's ``skip_rows`` counts lines."""
        with contextlib.closing(self._rows()) as rows:
            first = next(rows, None)
        if first is None:
            return None, 0
        fields, line, raw = first
        lines = raw.count("\n") + (0 if raw.endswith("\n") else 1)
        return header_names(fields), line - 1 + lines

    def _columns_table(self, columns: Sequence[str] | None) -> pa.Table:
        rows = [record[COLUMNS] for record, _ in self.records()]
        table = pa.table({COLUMNS: pa.array(rows, pa.list_(pa.string()))})
        return table if columns is None or COLUMNS in columns else table.select([])

    def _has_odd_quotes(self) -> bool:
        """Cheap check for an open quote: an odd count of quote characters in the file."""
        quote = self.options.quote.encode()
        count = 0
        with self.open_binary() as binary:
            while chunk := binary.read(1 << 22):
                count += chunk.count(quote)
        return count % 2 == 1

    # ------------------------------------------------------------ the Arrow path

    def _read_with_pyarrow(
        self,
        names: list[str],
        skip: int,
        columns: Sequence[str] | None,
        schema: pa.Schema | None,
    ) -> pa.Table | None:
        types = {
            name: schema.field(name).type
            if schema is not None and name in schema.names
            else pa.string()
            for name in names
        }
        try:
            return self._pyarrow_csv(names, skip, types, columns)
        except pa.ArrowInvalid as err:
            skipped, self.skipped = self.skipped, 0
            if self.options.skip_errors and not skipped:
                return None  # a value that does not convert: the record path decides
            for _ in self.records():  # a row of the wrong width raises here, at its position
                pass
            self._locate_conversion(names, skip, types, err)
            raise StorageError(f"malformed CSV: {err}", file=self.name, hint=SKIP_HINT) from err

    def _pyarrow_csv(
        self,
        names: list[str],
        skip: int,
        types: dict[str, pa.DataType],
        columns: Sequence[str] | None,
    ) -> pa.Table:
        def on_invalid_row(_: Any) -> str:
            if self.options.skip_errors:
                self.skipped += 1
                return "skip"
            return "error"

        def read(block_size: int | None) -> pa.Table:
            with self.open_binary() as binary:
                return pa_csv.read_csv(
                    binary,
                    read_options=pa_csv.ReadOptions(
                        column_names=names,
                        skip_rows=skip,
                        **({"block_size": block_size} if block_size else {}),
                    ),
                    parse_options=pa_csv.ParseOptions(
                        delimiter=self.options.delimiter,
                        quote_char=self.options.quote,
                        newlines_in_values=True,
                        invalid_row_handler=on_invalid_row,
                    ),
                    convert_options=pa_csv.ConvertOptions(
                        column_types=types,
                        include_columns=[n for n in names if columns is None or n in columns],
                        strings_can_be_null=False,
                        quoted_strings_can_be_null=False,
                    ),
                )

        block = None
        for _ in range(2):
            try:
                return read(block)
            except pa.ArrowInvalid as err:
                if "header is larger than block size" in str(err) and block is None:
                    # The lines before the data must fit one block: give it room for them.
                    block = max(2 * self._data_offset(skip), 1 << 20)
                elif "straddl" in str(err):
                    # One row is longer than a block: read the file as one block.
                    block = self.file.real_path.stat().st_size + 1
                else:
                    raise
                self.skipped = 0
        return read(block)

    def _data_offset(self, skip: int) -> int:
        """The byte offset where the data starts, after ``skip`` lines (the header)."""
        with self.open_binary() as binary:
            for _ in range(skip):
                if not binary.readline():
                    break
            return binary.tell()

    def _locate_conversion(
        self, names: list[str], skip: int, types: dict[str, pa.DataType], err: pa.ArrowInvalid
    ) -> None:
        """Raise a positioned error for the first value that does not convert to its type."""
        typed = {n: t for n, t in types.items() if t != pa.string()}
        if not typed:
            return
        strings = self._pyarrow_csv(names, skip, dict.fromkeys(names, pa.string()), list(typed))
        for name, dtype in typed.items():
            values = strings.column(name).combine_chunks()
            index = _first_bad_cast(values, dtype)
            if index is None:
                continue
            field = names.index(name)
            # Row 1 is the header, so data row ``index`` is non-blank row ``index + 2``.
            for number, (_, line, raw) in enumerate(self._rows(), start=1):
                if number == index + 2:
                    starts = _field_starts(raw, self.options.delimiter, self.options.quote)
                    offset = starts[field] if field < len(starts) else 0
                    raise StorageError(
                        f"column '{name}': {values[index].as_py()!r} is not a valid {dtype}",
                        file=self.name,
                        line=line + raw.count("\n", 0, offset),
                        column=offset - raw.rfind("\n", 0, offset),
                        hint="fix the value, or change the column's type in the selection's schema",
                    ) from err


class TextReader(CsvReader):
    """Drill's ``text`` format: delimited rows as a ``columns`` array (no header by default)."""

    format: ClassVar[str] = "text"
    default_header: ClassVar[bool] = False


def header_names(fields: list[str]) -> list[str]:
    """Column names from a header row: blanks named by position, repeats numbered.

    >>> header_names(["a", "", "a", "b", "a"])
    ['a', 'column_1', 'a_2', 'b', 'a_3']
    """
    names: list[str] = []
    seen: dict[str, int] = {}
    for index, field in enumerate(fields):
        name = field.strip() or f"column_{index}"
        count = seen.get(name, 0) + 1
        seen[name] = count
        names.append(name if count == 1 else f"{name}_{count}")
    return names


def _first_bad_cast(values: pa.Array, dtype: pa.DataType) -> int | None:
    """The index of the first value that does not cast to ``dtype`` (a bisection of casts)."""

    def casts(array: pa.Array) -> bool:
        try:
            array.cast(dtype)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return False
        return True

    if casts(values):
        return None
    low, high = 0, len(values)  # the bad value is in values[low:high]
    while high - low > 1:
        middle = (low + high) // 2
        if casts(values.slice(low, middle - low)):
            low = middle
        else:
            high = middle
    return low


def write_csv(table: pa.Table, path: Path) -> None:
    """``table`` as CSV with a header line; only scalar columns can be written."""
    nested = [f.name for f in table.schema if pa.types.is_nested(f.type)]
    if nested:
        raise StorageError(
            f"csv stores only scalar columns, and {', '.join(repr(n) for n in nested)} "
            f"{'is' if len(nested) == 1 else 'are'} nested",
            hint="store nested data as parquet or json, or flatten it first",
        )
    pa_csv.write_csv(table, str(path))


def _field_starts(text: str, delimiter: str, quote: str) -> list[int]:
    """Offsets in one raw row where each field starts (delimiters inside quotes ignored)."""
    starts, _ = _scan(text, delimiter, quote)
    return starts


def _ends_inside_quotes(text: str, delimiter: str, quote: str) -> bool:
    _, open_quote = _scan(text, delimiter, quote)
    return open_quote is not None


def _quote_column(text: str, delimiter: str, quote: str) -> int:
    _, open_quote = _scan(text, delimiter, quote)
    offset = open_quote or 0
    return offset - text.rfind("\n", 0, offset)


def _scan(text: str, delimiter: str, quote: str) -> tuple[list[int], int | None]:
    """Field starts, and the offset of a quote still open at the end (None if all closed)."""
    starts = [0]
    open_at: int | None = None
    at_field_start = True
    i = 0
    while i < len(text):
        ch = text[i]
        if open_at is not None:
            if ch == quote:
                if text.startswith(quote, i + 1):
                    i += 2
                    continue
                open_at = None
        elif ch == quote and at_field_start:
            open_at = i
        elif ch == delimiter:
            starts.append(i + 1)
            at_field_start = True
            i += 1
            continue
        at_field_start = False
        i += 1
    return starts, open_at
