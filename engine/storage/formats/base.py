"""What every format reader offers the scan framework: records, or Arrow directly.

A reader reads one :class:`~engine.storage.paths.InputFile`. Two ways out:

* :meth:`FormatReader.records` yields ``(value, line)`` pairs: the parsed value as plain Python
  (dicts, lists, str, int, float, bool, None) and the 1-based line where it starts (the row number
  for formats without lines). Types are as the file has them; the scan framework decides.
* :meth:`FormatReader.read_arrow` returns the whole file as a ``pyarrow.Table`` when the format's
  fast path applies, else ``None`` (then use :meth:`records`).

Bad input raises :class:`~engine.errors.StorageError` naming file, line and column; with
``onError: skip`` the bad record is dropped and counted in :attr:`FormatReader.skipped`.
An empty (zero-byte) file has no records in every format.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

import pyarrow as pa

from engine.errors import StorageError
from engine.storage.formats.options import ReaderOptions
from engine.storage.paths import InputFile

SKIP_HINT = "fix the file, or set `onError: skip` in the selection's options to skip bad records and count them"


class FormatReader(ABC):
    """The narrow reader interface; see the module docstring."""

    format: ClassVar[str]

    def __init__(self, file: InputFile | Path | str, options: ReaderOptions | None = None) -> None:
        self.file = file if isinstance(file, InputFile) else InputFile.of(file)
        self.options = options or ReaderOptions()
        self.skipped = 0

    @property
    def name(self) -> str:
        """The file as messages name it."""
        return str(self.file.path)

    @abstractmethod
    def records(self) -> Iterator[tuple[Any, int]]:
        """``(value, line)`` for each record, in file order."""

    @abstractmethod
    def read_arrow(
        self, *, columns: Sequence[str] | None = None, schema: pa.Schema | None = None
    ) -> pa.Table | None:
        """The file as one table (``columns`` kept, ``schema`` typing the columns it names), or
        None when this file cannot take the fast path."""

    def read_tables(
        self, *, columns: Sequence[str] | None = None, schema: pa.Schema | None = None
    ) -> Iterator[pa.Table] | None:
        """:meth:`read_arrow` in parts, one after the other, so that a scan holds one part at a
        time: here the whole file as one part (a reader that can read less at once says so)."""
        table = self.read_arrow(columns=columns, schema=schema)
        return None if table is None else iter([table])

    # ------------------------------------------------------------ helpers for subclasses

    def open_binary(self) -> BinaryIO:
        """The file opened for reading, with clear errors when it vanished or is unreadable."""
        try:
            return open(self.file.real_path, "rb")
        except FileNotFoundError as err:
            raise StorageError(
                "the file no longer exists (removed after the scan listed it?)", file=self.name
            ) from err
        except IsADirectoryError as err:
            raise StorageError("is a directory, not a file", file=self.name) from err
        except PermissionError as err:
            raise StorageError(
                "permission denied: the file cannot be read", file=self.name
            ) from err
        except OSError as err:
            raise StorageError(f"cannot open the file: {err.strerror}", file=self.name) from err

    def is_empty(self) -> bool:
        """Whether the file has no bytes (checked now, not from the listing)."""
        try:
            return self.file.real_path.stat().st_size == 0
        except FileNotFoundError as err:
            raise StorageError(
                "the file no longer exists (removed after the scan listed it?)", file=self.name
            ) from err

    def bad_record(
        self, message: str, *, line: int | None = None, column: int | None = None
    ) -> StorageError | None:
        """Count and return None under ``onError: skip``; else the error to raise."""
        if self.options.skip_errors:
            self.skipped += 1
            return None
        return StorageError(message, file=self.name, line=line, column=column, hint=SKIP_HINT)


def empty_table(
    schema: pa.Schema | None, columns: Sequence[str] | None = None, names: Sequence[str] = ()
) -> pa.Table:
    """A zero-row table: ``schema``'s fields where given, ``names`` as strings otherwise."""
    fields = list(schema) if schema is not None else []
    known = {f.name for f in fields}
    fields += [pa.field(n, pa.string()) for n in names if n not in known]
    table = pa.schema(fields).empty_table()
    if columns is not None:
        table = table.select([c for c in columns if c in table.column_names])
    return table
