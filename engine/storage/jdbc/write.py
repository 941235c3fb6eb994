"""Stores into PostgreSQL tables, atomically.

A target is ``{"table": "schema.table", "mode": ..., "partitionBy": [...]}``:

* ``mode: overwrite`` (the default) replaces the table: the rows go to a staging table beside
  it, and one transaction drops the old table and renames the staging table in its place.
  With ``partitionBy``, only the rows whose partition columns hold the values written are
  replaced (deleted, then inserted from staging, in one transaction); the others stay.
* ``append`` adds the rows (creating the table if it is missing);
* ``error`` fails when the table exists.

A store writes in one transaction with the local executor (a killed or failed store is rolled
back by the database: nothing changes, no staging table is left). Spark's tasks commit the rows
into the staging table themselves; the swap is then one transaction on the driver, and a failed
write drops its staging table (a killed driver can leave one, named ``<table>__drill_stage_*``,
which the next store of that table drops). A store of one table waits for another store of it
(an advisory lock). The table's columns take the types of the stored columns; nested columns
cannot be stored.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from engine.errors import StorageError
from engine.storage.jdbc.adbc import connect
from engine.storage.jdbc.sql import TableName, check_name, quote
from engine.storage.store import StoreResult
from engine.storage.target_options import store_mode, target_partition_by

if TYPE_CHECKING:
    from engine.storage.jdbc.engine import JdbcEngine

STAGE_MARK = "__drill_stage_"


@dataclass(frozen=True)
class TableTarget:
    """A store's target for a ``jdbc`` engine, checked."""

    table: TableName
    mode: str = "overwrite"
    partition_by: tuple[str, ...] = ()

    @staticmethod
    def parse(target: Mapping[str, Any] | None, *, engine: JdbcEngine) -> TableTarget:
        where = f"store target of {engine.label}"
        if not engine.writable:
            raise StorageError(f"{engine.label} is configured read-only (writable: false)")
        if not isinstance(target, Mapping):
            raise StorageError(f"{where} must be a mapping with a `table`, not {target!r}")
        known = ("table", "schema", "mode", "partitionBy", "partition_by")
        unknown = [k for k in target if k not in known]
        if unknown:
            raise StorageError(
                f"{where}: unknown key {', '.join(repr(k) for k in unknown)}; known keys are "
                "table, schema, mode, partitionBy"
            )
        table = TableName.parse(
            target.get("table"), default_schema=engine.default_schema, schema=target.get("schema")
        )
        if STAGE_MARK in table.table:
            raise StorageError(f"{where}: '{table.table}' looks like a staging table's name")
        mode = store_mode(target, where)
        partition_by = target_partition_by(target, where)
        if not isinstance(partition_by, Sequence):
            raise StorageError(f"{where}: partitionBy must be a list of column names")
        for column in partition_by:
            check_name(column, what=f"{where}: partitionBy column")
        if len({c.lower() for c in partition_by}) != len(partition_by):
            raise StorageError(f"{where}: partitionBy names a column twice")
        return TableTarget(table, mode, tuple(partition_by))

    def staging(self) -> TableName:
        """A fresh staging table's name beside the target (within PostgreSQL's 63 bytes)."""
        suffix = STAGE_MARK + uuid.uuid4().hex[:12]
        head = self.table.table.encode()[: 63 - len(suffix)].decode(errors="ignore")
        return self.table.with_table(head + suffix)


def check_columns(schema: pa.Schema, spec: TableTarget) -> None:
    """Scalar columns only, the partition columns among them."""
    nested = [
        f.name for f in schema if pa.types.is_nested(f.type) or pa.types.is_dictionary(f.type)
    ]
    if nested:
        raise StorageError(
            f"a table stores only scalar columns, and {', '.join(repr(n) for n in nested)} "
            f"{'is' if len(nested) == 1 else 'are'} nested",
            hint="flatten the records first, or store them as parquet or json in an fs engine",
        )
    names = {f.name.lower() for f in schema}
    missing = [c for c in spec.partition_by if c.lower() not in names]
    if missing:
        raise StorageError(
            f"partitionBy names {', '.join(repr(c) for c in missing)}, not among the columns "
            f"stored ({', '.join(schema.names)})"
        )
    for field in schema:
        check_name(field.name, what="column")


def table_exists(cur: Any, table: TableName) -> bool:
    cur.execute(
        "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2",
        parameters=(table.schema, table.table),
    )
    return bool(cur.fetchall())


def lock_target(cur: Any, table: TableName) -> None:
    """Wait for other stores of ``table`` (a transaction-scoped advisory lock)."""
    cur.execute("SELECT pg_advisory_xact_lock(hashtext($1))", parameters=(table.sql,))
    cur.fetchall()


def drop_leftovers(cur: Any, spec: TableTarget, staging: TableName) -> None:
    """Drop staging tables of ``spec``'s table that a killed store left (not ``staging``)."""
    head = spec.table.table.encode()[: 63 - len(STAGE_MARK) - 12].decode(errors="ignore")
    cur.execute(
        "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
        "ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r' "
        "AND left(c.relname::text, $2::int) = $3",
        parameters=(spec.table.schema, len(head + STAGE_MARK), head + STAGE_MARK),
    )
    for (name,) in cur.fetchall():
        if len(name) == len(head + STAGE_MARK) + 12 and name != staging.table:
            cur.execute(f"DROP TABLE IF EXISTS {spec.table.with_table(name).sql}")


def swap_in(cur: Any, spec: TableTarget, staging: TableName, columns: Sequence[str]) -> str:
    """Make the rows of ``staging`` the target's, as ``spec.mode`` says (in the caller's
    transaction; ``staging`` is gone afterwards). Returns the version of the table this
    store makes: ``<transaction id>.<staging token>`` (:func:`store_version`)."""
    target = spec.table
    lock_target(cur, target)
    version = store_version(cur, staging)
    drop_leftovers(cur, spec, staging)
    exists = table_exists(cur, target)
    if exists and spec.mode == "error":
        raise StorageError(f"table {target.dotted} exists (mode: error)")
    if not exists or (spec.mode == "overwrite" and not spec.partition_by):
        if exists:
            cur.execute(f"DROP TABLE {target.sql}")
        cur.execute(f"ALTER TABLE {staging.sql} RENAME TO {quote(target.table)}")
        return version
    if spec.mode == "overwrite":
        keys = _actual(columns, spec)
        match = " AND ".join(f"t.{quote(c)} IS NOT DISTINCT FROM s.{quote(c)}" for c in keys)
        distinct = ", ".join(quote(c) for c in keys)
        # The written keys once each (a few partitions), each row of the table tested against them.
        cur.execute(
            f"DELETE FROM {target.sql} AS t WHERE EXISTS (SELECT 1 FROM "
            f"(SELECT DISTINCT {distinct} FROM {staging.sql}) AS s WHERE {match})"
        )
    listed = ", ".join(quote(c) for c in columns)
    cur.execute(f"INSERT INTO {target.sql} ({listed}) SELECT {listed} FROM {staging.sql}")
    cur.execute(f"DROP TABLE {staging.sql}")
    return version


def store_version(cur: Any, staging: TableName) -> str:
    """The id of the transaction that swaps the rows in, and the random token of the store's
    staging table: the transaction id says which commit made the table's rows (the server's
    logs name it), the token keeps the version new on a server whose ids started over."""
    cur.execute("SELECT pg_current_xact_id()::text")
    (xid,) = cur.fetchall()[0]
    return f"{xid}.{staging.table.rsplit(STAGE_MARK, 1)[-1]}"


def _actual(columns: Sequence[str], spec: TableTarget) -> list[str]:
    by_lower = {c.lower(): c for c in columns}
    return [by_lower[c.lower()] for c in spec.partition_by]


def result_of(
    engine: JdbcEngine, spec: TableTarget, rows: int, schema: pa.Schema, version: str
) -> StoreResult:
    """The :class:`StoreResult` of a table store (``location``: ``database.schema.table``)."""
    return StoreResult(
        location=engine.table_label(spec.table),
        format="table",
        row_count=rows,
        files=(),
        schema=schema,
        mode=spec.mode,
        version=version,
    )


def write_batches(
    engine: JdbcEngine,
    spec: TableTarget,
    batches: Iterable[pa.RecordBatch],
    schema: Callable[[], pa.Schema],
) -> StoreResult:
    """Stream ``batches`` into the target in one transaction (see the module docstring)."""
    iterator = iter(batches)
    first = next(iterator, None)
    written_schema = schema() if first is None else first.schema
    written_schema = pa.schema([f.remove_metadata() for f in written_schema])
    check_columns(written_schema, spec)
    counted = [0]

    def stream() -> Iterator[pa.RecordBatch]:
        for batch in itertools.chain([first] if first is not None else [], iterator):
            counted[0] += batch.num_rows
            yield batch.cast(written_schema) if batch.schema != written_schema else batch

    reader = pa.RecordBatchReader.from_batches(written_schema, stream())
    staging = spec.staging()
    with connect(engine, doing=f"storing into {spec.table.dotted}") as conn:
        with conn.cursor() as cur:
            cur.adbc_ingest(staging.table, reader, mode="create", db_schema_name=staging.schema)
            version = swap_in(cur, spec, staging, written_schema.names)
        conn.commit()
    return result_of(engine, spec, counted[0], written_schema, version)
