"""Parquet files, read with pyarrow: typed columns, projection and filter pushdown, row counts
from the footer.

Outcomes at the edges: a zero-byte file has no records (as in every format); a file that is not
parquet (or is truncated: the footer is at the end) is a ``StorageError`` naming it. A record's
"line" is its 1-based row number.

>>> import tempfile, pyarrow as pa
>>> tmp = tempfile.TemporaryDirectory()
>>> path = Path(tmp.name) / "t.parquet"
>>> write_parquet(pa.table({"a": [1, 2]}), path)
>>> list(ParquetReader(path).records()), parquet_row_count(path)
([({'a': 1}, 1), ({'a': 2}, 2)], 2)
>>> tmp.cleanup()
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as fs
import pyarrow.parquet as pq

from engine.errors import StorageError
from engine.storage.formats.base import FormatReader, empty_table
from engine.storage.formats.parquet_unions import arrow_schema_of, with_unions

DEFAULT_BATCH_ROWS = 65_536

READ_BYTES = 64 * 1024 * 1024
"""How much of a file's columns (uncompressed) a scan reads at once, in whole row groups."""

_LOCAL = fs.LocalFileSystem()


class ParquetReader(FormatReader):
    """Reads one parquet file; see the module docstring."""

    format: ClassVar[str] = "parquet"

    def records(self) -> Iterator[tuple[Any, int]]:
        row = 0
        for batch in self.iter_batches():
            for record in batch.to_pylist():
                row += 1
                yield record, row

    def read_arrow(
        self,
        *,
        columns: Sequence[str] | None = None,
        schema: pa.Schema | None = None,
        prune: pc.Expression | None = None,
        keep: Callable[[pa.Table], pa.ChunkedArray | pa.Array] | None = None,
    ) -> pa.Table:
        """The file as one table: :meth:`read_tables` put together."""
        return pa.concat_tables(
            self.read_tables(columns=columns, schema=schema, prune=prune, keep=keep)
        )

    def read_tables(
        self,
        *,
        columns: Sequence[str] | None = None,
        schema: pa.Schema | None = None,
        prune: pc.Expression | None = None,
        keep: Callable[[pa.Table], pa.ChunkedArray | pa.Array] | None = None,
    ) -> Iterator[pa.Table]:
        """The file as tables of consecutive row groups, each holding at most
        :data:`READ_BYTES` of the columns read (a bigger row group alone), so that a scan's
        memory does not grow with its files; without the row groups whose statistics show that
        no row of theirs satisfies ``prune``; with ``keep``, only the rows where ``keep`` of the
        columns read is true. At least one table, empty for a file with no row to give.

        Text columns stored with a dictionary in every row group are read as Arrow dictionaries
        (each distinct text decoded once) and decoded to plain text after ``keep`` (only the rows
        kept), several times cheaper than decoding each value: ``keep`` must accept dictionary
        columns (:class:`~engine.exec.local.arrow_filter.ArrowFilter`'s mask does)."""
        if self.is_empty():
            yield empty_table(schema, columns)
            return
        with self._parquet() as parquet:
            names = self._present(parquet, columns)
            try:
                groups = None if prune is None else self._row_groups(prune)
                if groups is not None and len(groups) == parquet.reader.num_row_groups:
                    groups = None
                reader = parquet.reader
                if encoded := _dictionary_texts(reader, names):
                    reader = pq.ParquetFile(
                        parquet.binary, metadata=reader.metadata, read_dictionary=encoded
                    )
                parts = _parts(reader.metadata, names, groups)
            except (pa.ArrowInvalid, OSError) as err:
                raise StorageError(f"cannot read parquet: {err}", file=self.name) from err
            for part in parts:
                try:
                    if part is None:
                        table = reader.read(columns=names)
                    else:
                        table = reader.read_row_groups(part, columns=names)
                except (pa.ArrowInvalid, OSError) as err:
                    raise StorageError(f"cannot read parquet: {err}", file=self.name) from err
                if keep is not None:
                    table = table.filter(keep(table))
                if encoded:
                    table = _decoded(table)
                yield self._typed(with_unions(table, parquet.schema), schema)

    def _row_groups(self, prune: pc.Expression) -> list[int] | None:
        """The row groups whose statistics do not exclude ``prune`` (None: all, unknown)."""
        import pyarrow.dataset as ds  # imports pandas: only when row groups are pruned

        fragment = ds.ParquetFileFormat().make_fragment(str(self.file.real_path), filesystem=_LOCAL)
        try:
            return [group.id for group in fragment.subset(prune).row_groups]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OSError):
            return None  # the statistics cannot tell: read every row group

    def arrow_schema(self, columns: Sequence[str] | None = None) -> pa.Schema:
        """The schema :meth:`read_arrow` gives for ``columns`` (from the footer; nothing read)."""
        if self.is_empty():
            return empty_table(None, columns).schema
        with self._parquet() as parquet:
            schema = parquet.schema
            names = self._present(parquet, columns)
        return schema if names is None else pa.schema([schema.field(n) for n in names])

    def iter_batches(
        self, *, columns: Sequence[str] | None = None, batch_rows: int = DEFAULT_BATCH_ROWS
    ) -> Iterator[pa.RecordBatch]:
        """The file in record batches of at most ``batch_rows`` rows."""
        if self.is_empty():
            return
        with self._parquet() as parquet:
            names = self._present(parquet, columns)
            try:
                for batch in parquet.reader.iter_batches(batch_size=batch_rows, columns=names):
                    yield with_unions(batch, parquet.schema)
            except (pa.ArrowInvalid, OSError) as err:
                raise StorageError(f"cannot read parquet: {err}", file=self.name) from err

    def row_count(self) -> int:
        """Rows in the file, from its footer (no data read)."""
        if self.is_empty():
            return 0
        with self._parquet() as parquet:
            return parquet.reader.metadata.num_rows

    def _parquet(self) -> _OpenParquet:
        return _OpenParquet(self)

    _metadata: pq.FileMetaData | None = None  # the footer, once read (a scan asks more than once)
    footers: Footers | None = None
    """Footers other readers of this run read (the planner's row counts, then the scan)."""

    @staticmethod
    def _present(parquet: _OpenParquet, columns: Sequence[str] | None) -> list[str] | None:
        if columns is None:
            return None
        names = {name.lower(): name for name in parquet.reader.schema_arrow.names}
        return list(dict.fromkeys(names[c.lower()] for c in columns if c.lower() in names))

    def _typed(self, table: pa.Table, schema: pa.Schema | None) -> pa.Table:
        if schema is None:
            return table
        for field in schema:
            if (
                field.name in table.column_names
                and table.schema.field(field.name).type != field.type
            ):
                index = table.column_names.index(field.name)
                try:
                    column = table.column(index).cast(field.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
                    raise StorageError(
                        f"column '{field.name}' cannot be read as {field.type}: {err}",
                        file=self.name,
                    ) from err
                table = table.set_column(index, field.name, column)
        return table


def _parts(
    metadata: pq.FileMetaData, names: Sequence[str] | None, groups: list[int] | None
) -> list[list[int] | None]:
    """The row groups of a file (``groups``: those left; None: all) in consecutive parts of at
    most :data:`READ_BYTES` of the columns ``names`` (None: all) each, uncompressed as the
    footer gives it, a bigger group alone. ``[None]``: the whole file at once, which fits;
    ``[[]]``: no row group left (an empty part, which keeps the schema)."""
    indices = list(range(metadata.num_row_groups)) if groups is None else groups
    leaves = [
        i
        for i in range(metadata.num_columns)
        if names is None or any(_within(metadata.schema.column(i).path, n) for n in names)
    ]
    parts: list[list[int]] = []
    size = 0
    for group in indices:
        chunk = metadata.row_group(group)
        group_bytes = sum(chunk.column(i).total_uncompressed_size for i in leaves)
        if not parts or size + group_bytes > READ_BYTES:
            parts.append([])
            size = 0
        parts[-1].append(group)
        size += group_bytes
    if groups is None and len(parts) <= 1:
        return [None]
    return parts or [[]]


def _within(path: str, name: str) -> bool:
    """Whether the leaf column ``path`` (dotted) belongs to the top-level column ``name``."""
    return path == name or path.startswith(name + ".")


def _dictionary_texts(reader: pq.ParquetFile, names: Sequence[str] | None) -> list[str]:
    """The top-level text columns among ``names`` (None: all) whose every row group holds a
    dictionary and only dictionary-encoded pages (no plain fallback, which reading as a
    dictionary would hash value by value)."""
    metadata = reader.metadata
    schema = reader.schema_arrow
    wanted = set(schema.names if names is None else names)
    found = []
    for index, column in enumerate(metadata.schema):
        name = column.path
        if (
            name not in wanted
            or "." in name
            or schema.get_all_field_indices(name) != [schema.get_field_index(name)]
        ):
            continue
        if not pa.types.is_string(schema.field(name).type) or not metadata.num_row_groups:
            continue
        chunks = [metadata.row_group(g).column(index) for g in range(metadata.num_row_groups)]
        if all(c.has_dictionary_page and "PLAIN" not in c.encodings for c in chunks):
            found.append(name)
    return found


def _decoded(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary columns as plain values."""
    for index, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            column = table.column(index).cast(field.type.value_type)
            table = table.set_column(
                index, pa.field(field.name, column.type, field.nullable, field.metadata), column
            )
    return table


class _OpenParquet:
    """A ``ParquetFile`` over the reader's file, closed on exit, with clear errors on open."""

    def __init__(self, reader: ParquetReader) -> None:
        self.binary = reader.open_binary()
        try:
            known = reader._metadata
            if known is None and reader.footers is not None:
                known = reader.footers.get(reader.file.real_path)
            self.reader = pq.ParquetFile(self.binary, metadata=known)
            reader._metadata = self.reader.metadata
            self.schema = arrow_schema_of(self.reader.metadata)  # unions Spark wrote, typed
            if known is None and reader.footers is not None:
                reader.footers.put(reader.file.real_path, reader._metadata)
        except (pa.ArrowInvalid, OSError) as err:
            self.binary.close()
            raise unreadable_parquet(reader.name, err) from err

    def __enter__(self) -> _OpenParquet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.binary.close()


def unreadable_parquet(file: str, err: Exception) -> StorageError:
    """The error for a file whose parquet footer cannot be read (not parquet, or cut short)."""
    return StorageError(
        f"not a readable parquet file ({err})",
        file=file,
        hint="a truncated or partly written file has no footer; rewrite it",
    )


class Footers:
    """The parquet footers read during one run, by file, size and modification time (a file
    written since is read again). A storage engine holds one; engines are built per run.
    """

    def __init__(self) -> None:
        self._known: dict[tuple[str, int, int], pq.FileMetaData] = {}

    def get(self, path: Path) -> pq.FileMetaData | None:
        key = self._key(path)
        return None if key is None else self._known.get(key)

    def read(self, path: Path) -> pq.FileMetaData:
        """The footer of the file at ``path``: known, or read now (and then known); a file with
        none (not parquet, or cut short) is a StorageError naming it."""
        metadata = self.get(path)
        if metadata is None:
            try:
                metadata = pq.read_metadata(path)
            except (pa.ArrowInvalid, OSError) as err:
                raise unreadable_parquet(str(path), err) from err
            self.put(path, metadata)
        return metadata

    def put(self, path: Path, metadata: pq.FileMetaData) -> None:
        key = self._key(path)
        if key is not None:
            self._known[key] = metadata

    @staticmethod
    def _key(path: Path) -> tuple[str, int, int] | None:
        try:
            stat = os.stat(path)
        except OSError:
            return None
        return str(path), stat.st_size, stat.st_mtime_ns


def parquet_row_count(path: Path) -> int:
    """Rows in a parquet file, from its footer."""
    return ParquetReader(path).row_count()


def write_parquet(table: pa.Table, path: Path) -> None:
    """``table`` as one parquet file."""
    pq.write_table(table, str(path))
