"""JSON files as Drill reads them: a stream of concatenated JSON values, or JSON lines.

Values may be pretty-printed over many lines and separated by any whitespace (not wrapped in an
array; see the corpus's ``donuts.json``). Each top-level value is one record; its line is the line
where it starts. Numbers keep their JSON kind: integral ones are ``int``, others ``float``.

Outcomes at the edges (each tested):

* empty or whitespace-only file: no records;
* malformed value: ``StorageError`` at the *line and column* where parsing failed; under
  ``onError: skip`` the value is dropped, counted in ``skipped``, and reading resumes at the next
  line where a complete object or array starts and is not followed by ``,`` ``:`` ``]`` ``}``
  (so lines *inside* the broken value, such as ``"key": 1,`` or ``{...},``, are not records);
* truncated file (ends inside a value): ``StorageError`` naming the line and column where the
  unfinished value starts;
* deep nesting: 100 levels read normally; nesting beyond what the parser can recurse is a
  ``StorageError`` (or a skip), never a crash;
* very large values (a 50 MB string) are read whole; the reader's window grows to fit them;
* mixed types in one field across records are yielded as they are: the scan framework decides;
* invalid UTF-8: ``StorageError`` with the byte offset.

:meth:`JsonReader.read_arrow` is the fast path for newline-delimited objects (pyarrow's reader,
strings never turned into timestamps, as in Drill); it declines (``None``) for pretty-printed or
scalar streams and for fields whose type changes, and reports syntax errors with their position.
A JSON-lines file larger than :data:`WHOLE_BYTES` is read in parts (:meth:`JsonReader.read_tables`:
one pass to infer and unify the parts' types, one to read them), so a scan's memory does not grow
with the file.

>>> import tempfile
>>> tmp = tempfile.TemporaryDirectory()
>>> path = Path(tmp.name) / "d.json"
>>> _ = path.write_text('{"a": 1}\\n{\\n  "a": [2, 3]\\n}  4')
>>> list(JsonReader(path).records())
[({'a': 1}, 1), ({'a': [2, 3]}, 2), (4, 4)]
>>> tmp.cleanup()
"""

from __future__ import annotations

import codecs
import decimal
import json
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

import pyarrow as pa
import pyarrow.json as pa_json

from engine.errors import StorageError
from engine.storage.formats.base import FormatReader, empty_table
from engine.types import json_default

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_CHUNK_CHARS = 1 << 20
# How near the end of the window a parse error may be caused by the window ending, not the data:
# the longest token the parser inspects before failing ("-Infinity", "\\uXXXX") is shorter.
_LOOKAHEAD = 64
_INSIDE_VALUE = frozenset(",:]}")
_FIRST_LINE_LIMIT = 16 << 20
_ARROW_BLOCK = 16 << 20

WHOLE_BYTES = 256 << 20
"""A JSON-lines file up to this size is read whole by Arrow; a larger one in parts."""

PART_BYTES = 64 << 20
"""The size of the parts a larger JSON-lines file is read in (each ends where a line ends)."""


class JsonReader(FormatReader):
    """Reads one JSON file; see the module docstring."""

    format: ClassVar[str] = "json"

    def records(self) -> Iterator[tuple[Any, int]]:
        if self.is_empty():
            return
        with self.open_binary() as binary:
            yield from self._parse(_Window(binary, self.name))

    def read_arrow(
        self, *, columns: Sequence[str] | None = None, schema: pa.Schema | None = None
    ) -> pa.Table | None:
        if self.is_empty():
            return empty_table(schema, columns)
        if not self._starts_with_json_line():
            return None
        try:
            table = self._read_with_pyarrow(schema)
        except pa.ArrowInvalid:
            if not self.options.skip_errors:
                # A syntax error gets its exact position from the Python parser (it raises);
                # otherwise pyarrow only failed to give a field one type: not ours to decide.
                for _ in self.records():
                    pass
            self.skipped = 0
            return None
        if columns is not None:
            table = table.select([c for c in columns if c in table.column_names])
        return table

    def read_tables(
        self, *, columns: Sequence[str] | None = None, schema: pa.Schema | None = None
    ) -> Iterator[pa.Table] | None:
        """:meth:`read_arrow` in parts of about :data:`PART_BYTES` for a JSON-lines file larger
        than :data:`WHOLE_BYTES`, so that a scan holds one part at a time: a first pass infers
        each part's types and unifies them as Arrow's reader unifies its blocks (a number that is
        an integer in one part and a float in another is a float; objects gain the members of
        every part), a second reads every part with that one schema. A file whose parts Arrow
        cannot read, or whose types do not unify, is declined (None) as :meth:`read_arrow`
        declines it."""
        if self.is_empty() or self.file.size <= WHOLE_BYTES:
            return super().read_tables(columns=columns, schema=schema)
        if not self._starts_with_json_line():
            return None
        try:
            unified = self._parts_schema(schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            unified = None
        if unified is None:
            if not self.options.skip_errors:
                for _ in self.records():  # a syntax error: raised with its line and column
                    pass
            self.skipped = 0
            return None
        return self._parts(unified, columns)

    def _parts_schema(self, schema: pa.Schema | None) -> pa.Schema | None:
        found: pa.Schema | None = None
        for part in self._byte_parts():
            inferred = _read_part(part, schema).schema
            inferred = pa.schema(
                [
                    pa.field(f.name, _strings_for_timestamps(f.type), f.nullable)
                    if schema is None or f.name not in schema.names
                    else f
                    for f in inferred
                ]
            )
            found = inferred if found is None else _unified(found, inferred)
            if found is None:
                return None
        return found

    def _parts(self, schema: pa.Schema, columns: Sequence[str] | None) -> Iterator[pa.Table]:
        for part in self._byte_parts():
            try:
                table = _read_part(part, schema)
            except pa.ArrowInvalid as err:  # the first pass read every part: not expected
                raise StorageError(
                    f"a part of the file does not read with the types of the others: {err}",
                    file=self.name,
                    hint="give the selection a `schema`",
                ) from err
            if columns is not None:
                table = table.select([c for c in columns if c in table.column_names])
            yield table

    def _byte_parts(self) -> Iterator[bytes]:
        """The file in pieces of about :data:`PART_BYTES` that end where a line ends."""
        with self.open_binary() as binary:
            while part := binary.read(PART_BYTES):
                if not part.endswith(b"\n"):
                    part += binary.readline()  # the rest of the line
                yield part

    def arrow_lines(self) -> pa.Table | None:
        """The whole file as :meth:`read_arrow` reads it through Arrow (JSON lines), or None where
        Arrow does not read it; never raises for the file's content (the caller reads it
        another way, and reports its errors there)."""
        if self.is_empty() or not self._starts_with_json_line():
            return None
        try:
            return self._read_with_pyarrow(None)
        except pa.ArrowInvalid:
            return None

    # ------------------------------------------------------------ the value stream

    def _parse(self, window: _Window) -> Iterator[tuple[Any, int]]:
        decode = json.JSONDecoder().raw_decode
        resyncing = False  # after a bad value: looking for the next line that starts a record
        while True:
            window.skip_whitespace()
            if window.pos >= len(window.buf):
                if window.eof:
                    return
                window.more()
                continue
            start = window.pos
            try:
                value, end = decode(window.buf, start)
            except json.JSONDecodeError as err:
                if window.may_be_incomplete(err):
                    window.more(grow=True)
                    continue
                if not resyncing:
                    self._bad_value(window, start, err.pos, f"malformed JSON: {err.msg}", err)
                    resyncing = True
                window.skip_line()
                continue
            except RecursionError:
                if not resyncing:
                    limit = "nested too deeply for the JSON parser (the limit is several hundred levels)"
                    self._bad_value(window, start, start, limit, None)
                    resyncing = True
                window.skip_line()
                continue
            if end >= len(window.buf) and not window.eof:
                window.more()  # a number may go on in the next chunk
                continue
            if resyncing:
                if window.buf[start] not in "{[":  # a scalar here is likely inside the bad value
                    window.skip_line()
                    continue
                after = window.next_non_whitespace(end)
                if after is None:
                    window.more()
                    continue
                if after < len(window.buf) and window.buf[after] in _INSIDE_VALUE:
                    window.skip_line()
                    continue
                resyncing = False
            line = window.line_of(start)
            window.pos = end
            yield value, line

    def _bad_value(
        self,
        window: _Window,
        start: int,
        at: int,
        message: str,
        err: json.JSONDecodeError | None,
    ) -> None:
        """Raise for a bad value, or count it under ``onError: skip``."""
        truncated = (
            err is not None
            and window.eof
            and (err.msg.startswith("Unterminated string") or not window.buf[err.pos :].strip())
        )
        if truncated:
            message = "the file ends inside this JSON value (truncated file?)"
            at = start
        error = self.bad_record(message, line=window.line_of(at), column=window.column_of(at))
        if error is not None:
            raise error from err

    # ------------------------------------------------------------ the Arrow fast path

    def _starts_with_json_line(self) -> bool:
        """Whether the first non-blank line is one complete JSON object (JSON lines, likely)."""
        with self.open_binary() as binary:
            while True:
                line = binary.readline(_FIRST_LINE_LIMIT)
                if not line:
                    return True  # only blank lines
                if line.strip():
                    break
        if not line.endswith(b"\n") and len(line) >= _FIRST_LINE_LIMIT:
            return False
        try:
            return isinstance(json.loads(line), dict)
        except (ValueError, RecursionError):
            return False

    def _read_with_pyarrow(self, schema: pa.Schema | None) -> pa.Table:
        table = self._pyarrow_json(schema)
        inferred = [
            pa.field(f.name, _strings_for_timestamps(f.type), f.nullable)
            if schema is None or f.name not in schema.names
            else f
            for f in table.schema
        ]
        if any(f.type != g.type for f, g in zip(inferred, table.schema)):
            table = self._pyarrow_json(pa.schema(inferred))
        return table

    def _pyarrow_json(self, schema: pa.Schema | None) -> pa.Table:
        with self.open_binary() as binary:
            size = binary.seek(0, 2)
        return _arrow_json(self.open_binary, size, schema)


def _read_part(part: bytes, schema: pa.Schema | None) -> pa.Table:
    """Lines of JSON objects read by Arrow, with ``schema`` (its fields; others inferred)."""
    return _arrow_json(lambda: pa.BufferReader(part), len(part), schema)


def _arrow_json(open_input: Callable[[], Any], size: int, schema: pa.Schema | None) -> pa.Table:
    """``size`` bytes of JSON lines, from ``open_input()``, read by Arrow in blocks, or as one
    block where a record is longer than a block."""
    parse = pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer")
    block = pa_json.ReadOptions(block_size=min(size + 1, _ARROW_BLOCK))
    with open_input() as source:
        try:
            return pa_json.read_json(source, read_options=block, parse_options=parse)
        except pa.ArrowInvalid as err:
            if "straddl" not in str(err):
                raise
    whole = pa_json.ReadOptions(block_size=size + 1, use_threads=False)
    with open_input() as source:
        return pa_json.read_json(source, read_options=whole, parse_options=parse)


def _unified(a: pa.Schema, b: pa.Schema) -> pa.Schema | None:
    """The schema of records of both ``a`` and ``b`` (numbers widen, objects merge their
    members, a null column takes the other's type), or None where a field has two kinds."""
    try:
        return pa.unify_schemas([a, b], promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None


def _strings_for_timestamps(dtype: pa.DataType) -> pa.DataType:
    """``dtype`` with every timestamp pyarrow inferred from a string put back to a string."""
    if pa.types.is_timestamp(dtype):
        return pa.string()
    if pa.types.is_struct(dtype):
        return pa.struct(
            [pa.field(f.name, _strings_for_timestamps(f.type), f.nullable) for f in dtype]
        )
    if pa.types.is_list(dtype):
        value = dtype.value_field
        return pa.list_(pa.field(value.name, _strings_for_timestamps(value.type), value.nullable))
    return dtype


class _Window:
    """The unread part of a text file, decoded chunk by chunk, with absolute line positions.

    ``buf[pos:]`` is not consumed yet; :meth:`more` drops ``buf[:pos]`` and reads on, so indexes
    into ``buf`` are only valid until the next call to it.
    """

    def __init__(self, binary: BinaryIO, name: str) -> None:
        self._binary = binary
        self._name = name
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")("strict")
        self._bytes_read = 0
        self.buf = ""
        self.pos = 0
        self.eof = False
        self._col0 = 0  # 0-based column of buf[0] in its line
        self._counted_at = 0  # line_of() counts forward from here...
        self._counted_line = 1  # ...where the line is this

    def more(self, *, grow: bool = False) -> None:
        """Drop the consumed text and read at least one more chunk (as much again when ``grow``)."""
        self._compact()
        want = max(_CHUNK_CHARS, len(self.buf) if grow else 0)
        target = len(self.buf) + want
        while len(self.buf) < target and not self.eof:
            data = self._binary.read(max(want, 1 << 16))
            try:
                self.buf += self._decoder.decode(data, final=not data)
            except UnicodeDecodeError as err:
                offset = self._bytes_read + err.start
                line = self.line_of(len(self.buf)) + data[: err.start].count(b"\n")
                raise StorageError(
                    f"invalid UTF-8 at byte offset {offset}", file=self._name, line=line
                ) from err
            self._bytes_read += len(data)
            self.eof = not data

    def may_be_incomplete(self, err: json.JSONDecodeError) -> bool:
        """Whether a parse error could go away with more of the file."""
        if self.eof:
            return False
        return err.msg.startswith("Unterminated string") or err.pos >= len(self.buf) - _LOOKAHEAD

    def skip_whitespace(self) -> None:
        match = _WHITESPACE.match(self.buf, self.pos)
        self.pos = match.end() if match else self.pos

    def next_non_whitespace(self, index: int) -> int | None:
        """Index of the first non-blank character from ``index``; ``len(buf)`` at the end of the
        file; None when the window ends first (read more)."""
        match = _WHITESPACE.match(self.buf, index)
        found = match.end() if match else index
        if found < len(self.buf) or self.eof:
            return found
        return None

    def skip_line(self) -> None:
        """Move ``pos`` to the start of the next line (or the end of the file)."""
        while True:
            newline = self.buf.find("\n", self.pos)
            if newline >= 0:
                self.pos = newline + 1
                return
            if self.eof:
                self.pos = len(self.buf)
                return
            self.more()

    def line_of(self, index: int) -> int:
        """The 1-based line of ``buf[index]``."""
        if index >= self._counted_at:
            self._counted_line += self.buf.count("\n", self._counted_at, index)
        else:
            self._counted_line -= self.buf.count("\n", index, self._counted_at)
        self._counted_at = index
        return self._counted_line

    def column_of(self, index: int) -> int:
        """The 1-based column of ``buf[index]``."""
        newline = self.buf.rfind("\n", 0, index)
        return index - newline if newline >= 0 else self._col0 + index + 1

    def _compact(self) -> None:
        drop = self.pos
        if not drop:
            return
        self.line_of(drop)
        newline = self.buf.rfind("\n", 0, drop)
        self._col0 = drop - newline - 1 if newline >= 0 else self._col0 + drop
        self.buf = self.buf[drop:]
        self._counted_at -= drop
        self.pos = 0


# ---------------------------------------------------------------- writing


def to_json_line(record: Any) -> str:
    """One record as one line of JSON.

    >>> to_json_line({"a": 1, "b": [None, "x"]})
    '{"a": 1, "b": [null, "x"]}'
    """
    return json.dumps(record, default=json_default, ensure_ascii=False)


def write_json(table: pa.Table, path: Path) -> None:
    """``table`` as JSON lines, one object per row (nulls written as ``null``); a DECIMAL as the
    number with its digits (``7.90``, not a double's ``7.9``)."""
    line = _decimal_json_lines() if _has_decimal(table.schema) else to_json_line
    with open(path, "w", encoding="utf-8", newline="\n") as out:
        for batch in table.to_batches(max_chunksize=8192):
            rows = batch.to_pylist()
            if rows:
                out.write("\n".join(map(line, rows)))
                out.write("\n")


def _has_decimal(schema: pa.Schema) -> bool:
    return any(pa.types.is_decimal(t) for f in schema for t in _types(f.type))


def _types(dtype: pa.DataType) -> list[pa.DataType]:
    if pa.types.is_struct(dtype):
        return [dtype, *(t for f in dtype for t in _types(f.type))]
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return [dtype, *_types(dtype.value_type)]
    return [dtype]


def _decimal_json_lines() -> Callable[[Any], str]:
    """:func:`to_json_line` with each Decimal written as its digits: marked as a string first
    (with a mark no value of this store holds: NUL and a random token), then unquoted."""
    token = uuid.uuid4().hex
    marked = re.compile(r'"\\u0000' + token + r':(-?[0-9.E+-]+)\\u0000"')

    def default(value: object) -> object:
        if isinstance(value, decimal.Decimal):
            return f"\x00{token}:{value}\x00"
        return json_default(value)

    def line(record: Any) -> str:
        return marked.sub(r"\1", json.dumps(record, default=default, ensure_ascii=False))

    return line
