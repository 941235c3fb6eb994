"""Stores that stream: an unpartitioned ``fs`` store of parquet or JSON lines writes its input
batch by batch into one file, so a run holds about one row group, not the whole result.

The rows keep one schema as the local executor gives them (a later batch may add columns or
widen a type: the same rule as :func:`engine.exec.local.buffering.concat_batches`). When a batch
widens the schema after rows were written, the parquet file written so far is rewritten under the
wider schema, one row group at a time; JSON lines carry no schema. Partitioned and CSV stores
are not streamed (their caller buffers, bounded).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from engine.storage.formats.json import to_json_line

STREAMED_FORMATS = ("parquet", "json")
ROW_GROUP_BYTES = 32 * 2**20


class StreamWriter:
    """Writes batches of one store to ``path`` in ``format``; :meth:`close` returns the schema."""

    def __init__(self, format_type: str, path: Path, schema: pa.Schema) -> None:
        self.format = format_type
        self.path = path
        self.schema = schema
        self.rows = 0
        self._pending: list[pa.RecordBatch] = []
        self._pending_bytes = 0
        self._parquet: pq.ParquetWriter | None = None
        self._text = (
            open(path, "w", encoding="utf-8", newline="\n") if format_type == "json" else None  # noqa: SIM115 (closed by close())
        )

    def write_all(self, batches: Iterable[pa.RecordBatch]) -> None:
        for batch in batches:
            self.write(batch)

    def write(self, batch: pa.RecordBatch) -> None:
        from engine.types.batches import concat_batches, conform

        if not batch.schema.equals(self.schema):
            unified = concat_batches([_empty(self.schema), batch])
            if not unified.schema.equals(self.schema):
                self._widen(unified.schema)  # the unified schema: this one's columns first
            batch = conform(batch, self.schema)
        if batch.num_rows == 0:
            return
        self.rows += batch.num_rows
        if self._text is not None:
            rows = batch.to_pylist()
            self._text.write("\n".join(map(to_json_line, rows)))
            self._text.write("\n")
            return
        self._pending.append(batch)
        self._pending_bytes += batch.nbytes
        if self._pending_bytes >= ROW_GROUP_BYTES:
            self._flush()

    def close(self) -> pa.Schema:
        if self._text is not None:
            self._text.close()
        else:
            self._flush(final=True)
            assert self._parquet is not None
            self._parquet.close()
        return self.schema

    def _flush(self, *, final: bool = False) -> None:
        if self._parquet is None:
            self._parquet = pq.ParquetWriter(str(self.path), self.schema)
        if self._pending:
            self._parquet.write_table(pa.Table.from_batches(self._pending, schema=self.schema))
        elif final and self.rows == 0:
            self._parquet.write_table(self.schema.empty_table())
        self._pending, self._pending_bytes = [], 0

    def _widen(self, schema: pa.Schema) -> None:
        """Continue under ``schema``: what was written so far conforms to it."""
        from engine.types.batches import conform

        old = self.schema
        self.schema = schema
        self._pending = [conform(b, schema) for b in self._pending if b.num_rows]
        if self._parquet is None:
            return
        self._parquet.close()
        written = self.path.with_name(self.path.name + ".widened")
        self.path.rename(written)
        self._parquet = pq.ParquetWriter(str(self.path), schema)
        source = pq.ParquetFile(written)
        for group in range(source.num_row_groups):
            table = source.read_row_group(group).cast(old)
            batches = [conform(b, schema) for b in table.to_batches()]
            self._parquet.write_table(pa.Table.from_batches(batches, schema=schema))
        written.unlink()


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=schema)
