"""Local source and sink operators: scan, constant, store.

A scan holds every record under its ``ref`` (``{ref: record}``): the scan framework's batch columns
become the members of one map column named ``ref``. Its ``pushedFilter`` runs inside the parquet
read where :func:`~engine.exec.local.arrow_filter.arrow_filter` translates it exactly, on the
wrapped records after the read otherwise. A constant emits ``content`` as records, typed
the way a JSON scan would type them. A store drains its input into its storage engine and emits
nothing; the run collects its :class:`~engine.storage.store.StoreResult` (``written``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa

from engine.errors import StorageError
from engine.exec.local.arrow_filter import ArrowFilter, arrow_filter
from engine.exec.local.buffering import BatchBuffer, concat_batches
from engine.exec.local.registry import ExecContext, creator
from engine.exec.protocol import BatchOperator, BatchSource
from engine.expr import Expr
from engine.expr.arrow.evaluate import evaluate_predicate
from engine.plan.expressions import parse_cached
from engine.plan.operators import Constant, Scan, Store
from engine.scan.framework import FILE_COLUMNS, FileScan
from engine.scan.loader import ResultSetLoader
from engine.scan.projection import ProjectionKind, ScanProjection
from engine.storage.catalog import CatalogEngine, read_table_batches
from engine.storage.engines import ConsoleEngine, QueueEngine
from engine.storage.jdbc.adbc import column_families, projected
from engine.storage.jdbc.engine import JdbcEngine
from engine.storage.jdbc.sql import comparisons_of
from engine.storage.store import StoreResult, write_store_batches


def wrap_under(ref: str | None, batch: pa.RecordBatch) -> pa.RecordBatch:
    """``{ref: record}`` for every record of ``batch`` (unchanged when there is no ref)."""
    if not ref:
        return batch
    struct = pa.StructArray.from_arrays(batch.columns, fields=list(batch.schema))
    return pa.record_batch([struct], names=[ref])


class ScanOperator(BatchSource):
    kind = "scan"

    def __init__(self, op: Scan, ctx: ExecContext) -> None:
        self.op = op
        self.ctx = ctx
        self.scan: FileScan | None = None
        self.read: dict[str, int] = {}
        super().__init__(op.id, self._batches)

    def counters(self) -> dict[str, Any]:
        return dict(self.read)

    def _batches(self) -> Iterator[pa.RecordBatch]:
        engine = self.ctx.engine(self.op.storage_engine)
        if isinstance(engine, CatalogEngine):
            yield from self._catalog_batches(engine)
            return
        if isinstance(engine, JdbcEngine):
            yield from self._table_batches(engine)
            return
        if not hasattr(engine, "list_files"):
            raise StorageError(f"storage engine '{self.op.storage_engine}' cannot be scanned")
        referenced = self.ctx.params.get("_referenced_members", {}).get(self.op.id, ())
        pushed = parse_cached(self.op.pushed_filter) if self.op.pushed_filter else None
        self.scan = FileScan(
            engine,
            self.op.selection or {},
            projection=None
            if self.op.projection is None
            else [c for c in self.op.projection if c not in FILE_COLUMNS],
            file_columns=[c for c in referenced if c in FILE_COLUMNS],
            batch_rows=self.ctx.batch_rows,
            batch_bytes=self.ctx.batch_bytes,
            row_filter=None if pushed is None else self._row_filter(pushed),
        )
        remaining = self.op.pushed_limit
        for batch, filtered in self.scan.filtered_batches():
            if remaining is not None and remaining <= 0:
                break  # the rest of the files need not be read
            batch = wrap_under(self.op.ref, batch)
            if pushed is not None and not filtered:
                batch = batch.filter(evaluate_predicate(pushed, batch))
            if remaining is not None:
                batch = batch.slice(0, remaining)
                remaining -= batch.num_rows
            yield batch
        self.read = {"files": self.scan.files_read, "skipped_records": self.scan.skipped}

    def _catalog_batches(self, engine: CatalogEngine) -> Iterator[pa.RecordBatch]:
        """A catalog table's rows, read from its files (:func:`read_table_batches`)."""
        columns = None
        if self.op.projection is not None:
            parsed = ScanProjection.parse(list(self.op.projection))
            columns = None if parsed.kind == ProjectionKind.WILDCARD else list(parsed.names)
        pushed = parse_cached(self.op.pushed_filter) if self.op.pushed_filter else None
        remaining = self.op.pushed_limit
        batches = read_table_batches(
            engine, self.op.selection or {}, columns=columns, batch_rows=self.ctx.batch_rows
        )
        for batch in batches:
            if remaining is not None and remaining <= 0:
                break
            batch = wrap_under(self.op.ref, batch)
            if pushed is not None:
                batch = batch.filter(evaluate_predicate(pushed, batch))
            if remaining is not None:
                batch = batch.slice(0, remaining)
                remaining -= batch.num_rows
            yield batch

    def _table_batches(self, engine: JdbcEngine) -> Iterator[pa.RecordBatch]:
        """A database table's rows: the projection and the pushed comparisons go into the SQL
        (values bound); what of the pushed filter the database cannot apply runs here."""
        selection = self.op.selection or {}
        pushed = parse_cached(self.op.pushed_filter) if self.op.pushed_filter else None
        schema = engine.scan_columns(selection)
        comparisons, exact = comparisons_of(pushed, self.op.ref, column_families(schema))
        columns = projected(schema, self.op.projection)
        remaining = self.op.pushed_limit
        empty = schema if columns is None else pa.schema([schema.field(c) for c in columns])
        empty = pa.schema([f.remove_metadata() for f in empty])
        batches = engine.read_batches(
            selection, projection=self.op.projection, comparisons=comparisons, schema=schema
        )
        yielded = False
        for batch in batches:
            if remaining is not None and remaining <= 0:
                break  # closing the read closes its cursor
            batch = wrap_under(self.op.ref, batch)
            if pushed is not None and not exact:
                batch = batch.filter(evaluate_predicate(pushed, batch))
            if remaining is not None:
                batch = batch.slice(0, remaining)
                remaining -= batch.num_rows
            yielded = True
            yield batch
        if not yielded:  # no rows: the columns still
            yield wrap_under(self.op.ref, pa.RecordBatch.from_pylist([], schema=empty))
        self.read = {"files": 0, "skipped_records": 0}

    def _row_filter(self, pushed: Expr) -> Callable[[pa.Schema], ArrowFilter | None]:
        """The pushed filter over a file's columns, where it is exact."""
        ref = self.op.ref
        return lambda schema: arrow_filter(pushed, schema, ref)


@creator("scan")
def create_scan(op: Scan, inputs: list[BatchOperator], ctx: ExecContext) -> BatchOperator:
    return ScanOperator(op, ctx)


def records_to_batch(records: list[dict], *, source: str = "constant") -> pa.RecordBatch:
    """Python records as one batch, typed as a JSON reader would type them (numbers widen, a
    field whose values change kind is a UNION).

    >>> records_to_batch([{"a": 1}, {"a": 1.5, "b": [1]}, {"b": "x"}]).to_pylist()
    [{'a': 1.0, 'b': None}, {'a': 1.5, 'b': [1]}, {'a': None, 'b': 'x'}]
    """
    loader = ResultSetLoader(row_limit=max(len(records), 1), source=source, allow_union=True)
    loader.start_batch()
    for record in records:
        loader.write_record(record)
    batch = loader.harvest()
    loader.close()
    return batch


@creator("constant")
def create_constant(op: Constant, inputs: list[BatchOperator], ctx: ExecContext) -> BatchOperator:
    def batches() -> Iterator[pa.RecordBatch]:
        if op.content:
            yield records_to_batch(list(op.content), source=f"constant {op.id}")

    source = BatchSource(op.id, batches)
    source.kind = "constant"
    return source


class StoreOperator(BatchOperator):
    kind = "store"

    def __init__(self, op: Store, upstream: BatchOperator, ctx: ExecContext) -> None:
        super().__init__(op.id, [upstream])
        self.op = op
        self.ctx = ctx
        self.written: StoreResult | None = None
        self.received: list[Any] = []  # the records a queue or console store received

    def produce(self) -> pa.RecordBatch | None:
        engine = self.ctx.engine(self.op.storage_engine)

        def buffered(batches: Iterable[pa.RecordBatch]) -> pa.Table:
            # A store that cannot stream holds its input, bounded like any blocking operator.
            buffer = BatchBuffer(self.op.id, self.kind, max_bytes=self.ctx.max_buffered_bytes)
            table = concat_batches(buffer.extend(batches).batches, schema=self.inputs[0].schema)
            if isinstance(engine, QueueEngine | ConsoleEngine):
                self.received.extend(table.to_pylist())
            return table

        self.written = write_store_batches(
            engine,
            self.op.target,
            self.drain(),
            schema=lambda: self.inputs[0].schema or pa.schema([]),
            buffered=buffered,
        )
        return None


@creator("store")
def create_store(op: Store, inputs: list[BatchOperator], ctx: ExecContext) -> BatchOperator:
    engine = ctx.engines.get(op.storage_engine)
    if isinstance(engine, CatalogEngine):
        raise engine.local_write_error()
    return StoreOperator(op, inputs[0], ctx)
