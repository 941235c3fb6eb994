"""The ``jdbc`` engine's reads on the local executor, through ADBC (Arrow-native, no rows
through Python).

Columns arrive typed as Spark's JDBC source types them, so both executors give the same records:
``numeric(p, s)`` as ``decimal(p, s)`` (an unconstrained ``numeric`` as ``decimal(38, 18)``),
``timestamp`` and ``timestamptz`` as UTC timestamps (the engine's TIMESTAMP), and types Arrow has
no equal for (``uuid``, ``json``, ...) as text.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.storage.jdbc.sql import Comparison, TableName, select_sql

if TYPE_CHECKING:
    from engine.storage.jdbc.engine import JdbcEngine, ScanSource

UNCONSTRAINED_NUMERIC = pa.decimal128(38, 18)
"""What an unconstrained ``numeric`` reads as (Spark's JDBC source's choice)."""


@contextlib.contextmanager
def connect(engine: JdbcEngine, *, read_only: bool = False, doing: str = "connecting") -> Any:
    """An ADBC connection; errors name the engine and what was being done, never the password.
    A write's is not autocommit (the caller commits); a read's runs each statement in a
    read-only transaction of its own."""
    import adbc_driver_postgresql.dbapi as pg

    try:
        conn = pg.connect(engine.libpq_uri(), autocommit=read_only)
    except Exception as err:
        raise engine.failure(err, "connecting") from None
    try:
        if read_only:
            with conn.cursor() as cur:
                cur.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        yield conn
    except Exception as err:
        from engine.errors import DrillError

        if isinstance(err, DrillError):
            raise
        raise engine.failure(err, doing) from None
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def engine_type(field: pa.Field) -> pa.DataType:
    """The engine's Arrow type of a column ADBC read (see the module docstring)."""
    dtype = field.type
    meta = field.metadata or {}
    pg_type = meta.get(b"POSTGRESQL:type", b"").decode()
    if pg_type == "numeric":
        typmod = int(meta.get(b"POSTGRESQL:typmod", b"-1"))
        if typmod < 4:
            return UNCONSTRAINED_NUMERIC
        precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
        return pa.decimal128(precision, scale)
    if isinstance(dtype, pa.BaseExtensionType):
        return pa.string()
    if pa.types.is_timestamp(dtype):
        return pa.timestamp("us", tz="UTC")
    if pa.types.is_large_string(dtype):
        return pa.string()
    return dtype


def conform(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` in the engine's types (field metadata dropped)."""
    columns, fields = [], []
    for field, column in zip(batch.schema, batch.columns, strict=True):
        target = engine_type(field)
        if isinstance(column.type, pa.BaseExtensionType):
            column = column.storage
        if pa.types.is_timestamp(column.type) and column.type.tz is None:
            column = column.view(pa.timestamp(column.type.unit, tz="UTC"))
        if column.type != target:
            column = pc.cast(column, target)
        columns.append(column)
        fields.append(pa.field(field.name, target, field.nullable))
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields))


def _family(dtype: pa.DataType) -> str | None:
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return "text"
    if pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype):
        return "number"
    if pa.types.is_boolean(dtype):
        return "bool"
    if pa.types.is_date32(dtype):
        return "date"
    return None


def column_families(schema: pa.Schema) -> dict[str, tuple[str, str]]:
    """Columns a pushed comparison may test, by lower-case name: (name, type family). A name two
    columns share case-insensitively is left out (the engine's names ignore case)."""
    found: dict[str, tuple[str, str]] = {}
    clashing = set()
    for field in schema:
        key = field.name.lower()
        family = _family(field.type)
        if key in found or key in clashing:
            clashing.add(key)
            found.pop(key, None)
        elif family is not None:
            found[key] = (field.name, family)
    return found


def source_schema(engine: JdbcEngine, source: ScanSource) -> pa.Schema:
    """The columns ``source`` reads (engine types), from a read of no rows."""
    sql, _ = select_sql(source.source, None)
    doing = f"reading the columns of {source.label}"
    with connect(engine, read_only=True, doing=doing) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT * FROM ({sql}) AS s LIMIT 0")
        schema = cur.fetch_arrow_table().schema
    return pa.schema(
        [
            pa.field(f.name, engine_type(f), metadata={TEXT_MARK: b"1"} if _as_text(f) else None)
            for f in schema
        ]
    )


TEXT_MARK = b"drill:read_as_text"
"""Marks, in :func:`source_schema`'s schema, a column read as text (its type has no Arrow
equal, and ADBC would hand over the server's binary form)."""


def _as_text(field: pa.Field) -> bool:
    meta = field.metadata or {}
    numeric = meta.get(b"POSTGRESQL:type", b"") == b"numeric"
    return isinstance(field.type, pa.BaseExtensionType) and not numeric


def estimated_rows(engine: JdbcEngine, table: TableName) -> int | None:
    """PostgreSQL's estimate of ``table``'s rows (``pg_class.reltuples``; None before the table
    was first analyzed)."""
    doing = f"reading the statistics of {table.dotted}"
    with connect(engine, read_only=True, doing=doing) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT c.reltuples FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2",
            parameters=(table.schema, table.table),
        )
        found = cur.fetchall()
    return int(found[0][0]) if found and found[0][0] is not None and found[0][0] >= 0 else None


def projected(schema: pa.Schema, projection: Sequence[str] | None) -> list[str] | None:
    """The table's columns a projection names (case-insensitively; None: all of them)."""
    if projection is None:
        return None
    wanted = {p.lower() for p in projection}
    return [f.name for f in schema if f.name.lower() in wanted]


def read_batches(
    engine: JdbcEngine,
    source: ScanSource,
    *,
    projection: Sequence[str] | None = None,
    comparisons: Sequence[Comparison] = (),
    schema: pa.Schema | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of ``source``: the projected columns, where ``comparisons`` hold (the database
    applies them; their values are bound as parameters)."""
    columns = projected(schema, projection) if schema is not None else None
    as_text = set()
    if schema is not None:
        as_text = {f.name for f in schema if (f.metadata or {}).get(TEXT_MARK)}
        if as_text and columns is None:
            columns = schema.names
    sql, params = select_sql(source.source, columns, comparisons, as_text=as_text)
    doing = f"reading {source.label}"
    with connect(engine, read_only=True, doing=doing) as conn, conn.cursor() as cur:
        cur.execute(sql, parameters=params or None)
        for batch in cur.fetch_record_batch():
            yield conform(batch)
