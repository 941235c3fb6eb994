"""File formats: one reader per format type, and the writers stores use.

Format types are ``json``, ``csv``, ``text`` and ``parquet`` (names compared case-insensitively;
the upstream plans write ``"JSON"``). Stores write ``parquet``, ``json`` (JSON lines) or ``csv``.

>>> reader_class("JSON").__name__
'JsonReader'
>>> sorted(WRITERS)
['csv', 'json', 'parquet']
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from engine.errors import StorageError
from engine.storage.formats.base import FormatReader
from engine.storage.formats.csv import CsvReader, TextReader, write_csv
from engine.storage.formats.json import JsonReader, write_json
from engine.storage.formats.options import ReaderOptions
from engine.storage.formats.parquet import ParquetReader, write_parquet
from engine.storage.paths import InputFile

READERS: dict[str, type[FormatReader]] = {
    "json": JsonReader,
    "csv": CsvReader,
    "text": TextReader,
    "parquet": ParquetReader,
}
FORMAT_TYPES = tuple(sorted(READERS))

WRITERS: dict[str, Callable[[pa.Table, Path], None]] = {
    "parquet": write_parquet,
    "json": write_json,
    "csv": write_csv,
}
EXTENSIONS = {"parquet": "parquet", "json": "json", "csv": "csv"}


def reader_class(format_type: str) -> type[FormatReader]:
    """The reader for a format type, or a StorageError listing the known ones."""
    try:
        return READERS[format_type.lower()]
    except KeyError:
        raise StorageError(
            f"unknown format '{format_type}'; known formats are {', '.join(FORMAT_TYPES)}"
        ) from None


def open_reader(
    format_type: str, file: InputFile | Path | str, options: ReaderOptions | None = None
) -> FormatReader:
    """A reader of ``file`` in ``format_type``."""
    return reader_class(format_type)(file, options)


__all__ = [
    "EXTENSIONS",
    "FORMAT_TYPES",
    "READERS",
    "WRITERS",
    "CsvReader",
    "FormatReader",
    "JsonReader",
    "ParquetReader",
    "ReaderOptions",
    "TextReader",
    "open_reader",
    "reader_class",
]
