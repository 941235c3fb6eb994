"""The ``catalog`` storage engine: tables of the Spark session's catalog, by name.

A plan names a table, never a path: ``{"table": "analytics.daily_activity"}`` in a scan's
selection or a store's target (``database.table``, or ``table`` in the engine's ``database``).
The engine's configuration::

    {"type": "catalog", "warehouse": "warehouse", "database": "analytics"}

* ``warehouse`` (optional): the directory of the engine's managed tables. A database the engine
  creates is created there (``<warehouse>/<database>.db``); a session the engine starts itself
  keeps its Hive metastore (Derby) in ``<warehouse>/metastore_db`` (:func:`session_settings`). The
  engine also records each table it writes under ``<warehouse>/_drill_metadata/catalog/`` (its
  location, partition columns, schema and row count): the metadata repository and the local
  executor read those records, since a Derby metastore is reachable only from Spark's JVM.
* ``database`` (default ``default``): the database of a table named without one.
* ``writable`` (default true): false refuses stores.

Whose catalog: the session's. Given a session (``run_plan(spark=...)``, a Dagster resource), the
engine uses that session's catalog as configured (Hive metastore, Spark's in-memory catalog, a
remote metastore) and changes none of its settings; a session the engine starts for a plan with a
catalog engine gets Hive support with the Derby metastore under the warehouse.

Names are untrusted input: each part of a table name must be a plain identifier (letters, digits,
``_``, starting with a letter or ``_``, at most 128 characters), and names are lowercased, as the
Hive metastore keeps them. Spark SQL receives them quoted with backticks all the same.

>>> engine = create_catalog_engine("lake", {"warehouse": "/srv/wh", "database": "analytics"})
>>> engine.table_name({"table": "Daily_Activity"}).quoted
'`analytics`.`daily_activity`'
>>> engine.table_name({"table": "a.b`; DROP TABLE x"})
Traceback (most recent call last):
...
engine.errors.StorageError: selection of storage engine 'lake' (catalog): 'a.b`; DROP TABLE x' is not a table name: 'b`; DROP TABLE x' is not a plain identifier (letters, digits and _, not starting with a digit)
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa

from engine.errors import StorageError
from engine.storage.engines import Capabilities, StorageEngine
from engine.storage.paths import parse_root
from engine.storage.target_options import store_mode, target_partition_by
from engine.storage.version_file import METADATA_DIR, VersionMetadata

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
RECORD_VERSION = 1


@dataclass(frozen=True)
class TableName:
    """A table of the catalog: ``database.table``, lowercased and checked."""

    database: str
    table: str

    def __str__(self) -> str:
        return f"{self.database}.{self.table}"

    @property
    def quoted(self) -> str:
        """The name as Spark SQL takes it, each part quoted."""
        return f"{quote(self.database)}.{quote(self.table)}"


def quote(identifier: str) -> str:
    """``identifier`` quoted for Spark SQL (a backtick inside doubled).

    >>> quote("a`b")
    '`a``b`'
    """
    return "`" + identifier.replace("`", "``") + "`"


def parse_table_name(text: Any, *, database: str, where: str) -> TableName:
    """``text`` (``table`` or ``database.table``) as a :class:`TableName`, or a StorageError
    saying what is wrong with it."""
    if not isinstance(text, str) or not text:
        raise StorageError(f"{where} needs a `table`: a name like analytics.daily_activity")
    parts = text.split(".")
    if len(parts) > 2:
        raise StorageError(
            f"{where}: {text!r} is not a table name: give database.table or table",
        )
    for part in parts:
        if not IDENTIFIER.fullmatch(part):
            raise StorageError(
                f"{where}: {text!r} is not a table name: {part!r} is not a plain identifier "
                "(letters, digits and _, not starting with a digit)"
            )
    if len(parts) == 1:
        parts = [database, parts[0]]
    return TableName(parts[0].lower(), parts[1].lower())


@dataclass(frozen=True)
class CatalogTarget:
    """A store's target on a ``catalog`` engine, checked: the table, its partition columns and
    the mode (``overwrite``: create or replace the table, or, partitioned, replace exactly the
    partitions written; ``append``; ``error``: fail if the table exists)."""

    table: TableName
    partition_by: tuple[str, ...] = ()
    mode: str = "overwrite"

    _KEYS: ClassVar[tuple[str, ...]] = ("table", "partitionBy", "partition_by", "mode", "format")

    @staticmethod
    def parse(target: Mapping[str, Any] | None, *, engine: CatalogEngine) -> CatalogTarget:
        where = f"store target of {engine.label}"
        if not isinstance(target, Mapping):
            raise StorageError(f"{where} must be a mapping with a `table`, not {target!r}")
        unknown = [k for k in target if k not in CatalogTarget._KEYS]
        if unknown:
            raise StorageError(
                f"{where}: unknown key {', '.join(repr(k) for k in unknown)}; "
                "known keys are table, partitionBy, mode, format"
            )
        if not engine.writable:
            raise StorageError(f"{engine.label} is configured read-only (writable: false)")
        fmt = str(target.get("format", "parquet")).lower()
        if fmt != "parquet":
            raise StorageError(f"{where}: catalog tables are stored as parquet, not {fmt!r}")
        mode = store_mode(target, where)
        partition_by = target_partition_by(target, where)
        if not isinstance(partition_by, Sequence) or not all(
            isinstance(c, str) and IDENTIFIER.fullmatch(c) for c in partition_by
        ):
            raise StorageError(
                f"{where}: partitionBy must be a list of column names "
                "(letters, digits and _, not starting with a digit)"
            )
        lowered = [c.lower() for c in partition_by]
        if len(set(lowered)) != len(lowered):
            raise StorageError(f"{where}: partitionBy names a column twice")
        table = parse_table_name(target.get("table"), database=engine.database, where=where)
        return CatalogTarget(table, tuple(partition_by), mode)


@dataclass(frozen=True)
class TableRecord:
    """What the engine recorded of a table it wrote: where its files are, how they are
    partitioned, and the version's metadata (schema, rows, files)."""

    table: str
    location: Path
    partition_by: tuple[str, ...]
    metadata: VersionMetadata


class CatalogEngine(StorageEngine):
    """Tables of the Spark session's catalog (see the module docstring)."""

    type_name: ClassVar[str] = "catalog"
    capabilities_base: ClassVar[Capabilities] = Capabilities(
        can_read=True, can_write=True, can_push_projection=True
    )
    config_keys: ClassVar[tuple[str, ...]] = ("warehouse", "database", "writable")

    def __init__(
        self,
        name: str,
        *,
        warehouse: Path | None = None,
        database: str = "default",
        writable: bool = True,
    ) -> None:
        super().__init__(name)
        self.warehouse = warehouse
        self.database = database
        self.writable = writable

    @classmethod
    def from_config(cls, name: str, settings: Mapping[str, Any]) -> CatalogEngine:
        """The engine of a plan's ``storage`` entry (see :func:`create_catalog_engine`)."""
        return create_catalog_engine(name, settings)

    def capabilities(self, selection: Mapping[str, Any] | None = None) -> Capabilities:
        return Capabilities(can_read=True, can_write=self.writable, can_push_projection=True)

    def table_name(self, selection: Mapping[str, Any] | None) -> TableName:
        """The table a scan's selection names."""
        where = f"selection of {self.label}"
        if not isinstance(selection, Mapping):
            raise StorageError(f"{where} must be a mapping with a `table`, not {selection!r}")
        unknown = [k for k in selection if k != "table"]
        if unknown:
            raise StorageError(
                f"{where}: unknown key {', '.join(repr(k) for k in unknown)}; "
                "a catalog table is selected by `table` alone"
            )
        return parse_table_name(selection.get("table"), database=self.database, where=where)

    def check_selection(self, selection: Mapping[str, Any]) -> None:
        self.table_name(selection)

    def check_target(self, target: Mapping[str, Any] | None) -> None:
        CatalogTarget.parse(target, engine=self)

    def local_write_error(self) -> StorageError:
        """Why the local executor does not write catalog tables."""
        return StorageError(
            f"{self.label}: the local executor cannot write catalog tables (a table and its "
            "partitions live in the session's metastore, which only Spark reaches)",
            hint="run the plan with the Spark executor (--executor spark)",
        )

    def list_files(self, selection: Mapping[str, Any]) -> list[Any]:
        raise StorageError(
            f"{self.label} holds tables, not files: a scan reads table "
            f"{self.table_name(selection)} by name"
        )

    # -- the engine's records of the tables it wrote -------------------------------------------

    def record_path(self, table: TableName) -> Path | None:
        """Where the record of ``table`` is kept (None without a warehouse)."""
        if self.warehouse is None:
            return None
        return self.warehouse / METADATA_DIR / "catalog" / table.database / f"{table.table}.json"

    def write_record(
        self,
        table: TableName,
        location: Path,
        partition_by: Sequence[str],
        metadata: VersionMetadata,
    ) -> None:
        """Record what a store of ``table`` committed (nothing without a warehouse)."""
        path = self.record_path(table)
        if path is None:
            return
        body = {
            "drill_catalog_table": RECORD_VERSION,
            "table": str(table),
            "location": str(location),
            "partition_by": list(partition_by),
            "metadata": metadata.to_json(),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        staged = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        staged.write_text(json.dumps(body, indent=1))
        os.replace(staged, path)

    def read_record(self, table: TableName) -> TableRecord | None:
        """The record of ``table``, if this engine wrote it and its location still exists."""
        path = self.record_path(table)
        if path is None:
            return None
        try:
            body = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(body, dict) or body.get("drill_catalog_table") != RECORD_VERSION:
            return None
        meta = body.get("metadata") or {}
        location = Path(str(body.get("location", "")))
        if not location.is_dir():
            return None
        metadata = VersionMetadata(
            version=meta.get("version"),
            format=meta.get("format"),
            row_count=meta.get("row_count"),
            file_count=int(meta.get("file_count", 0)),
            total_bytes=int(meta.get("total_bytes", 0)),
            partitions=tuple(meta.get("partitions", ())),
            columns=tuple(meta.get("columns", ())),
            arrow_schema=meta.get("arrow_schema"),
            written_at=float(meta.get("written_at", 0.0)),
        )
        return TableRecord(str(table), location, tuple(body.get("partition_by", ())), metadata)

    def forget(self, table: TableName) -> None:
        """Drop the record of ``table`` (before a store changes it: a store that fails after
        touching the table leaves no record describing the previous version)."""
        path = self.record_path(table)
        if path is not None:
            path.unlink(missing_ok=True)


def read_table_batches(
    engine: CatalogEngine,
    selection: Mapping[str, Any],
    *,
    columns: Sequence[str] | None = None,
    batch_rows: int = 65536,
) -> Iterator[pa.RecordBatch]:
    """The rows of a catalog table read from its files, for the local executor: the table's
    location, partitioning and schema as the engine recorded them when it last wrote the table
    (the metastore itself is reachable only from Spark). ``columns``: the top-level columns
    to read (case-insensitive; None: all).

    A table this engine has no record of (written by another tool, or no ``warehouse``
    configured) is a StorageError saying to run the plan on Spark; never a guess."""
    import pyarrow.dataset as ds

    name = engine.table_name(selection)
    record = engine.read_record(name)
    schema = None if record is None else record.metadata.schema
    if record is None or schema is None:
        why = (
            "the engine has no warehouse configured to keep its table records in"
            if engine.warehouse is None
            else "the engine has no record of writing it (its metastore is reachable only "
            "from Spark)"
        )
        raise StorageError(
            f"{engine.label}: the local executor cannot read table {name}: {why}",
            hint="run the plan with the Spark executor (--executor spark)",
        )
    partitioning = ds.partitioning(
        pa.schema([schema.field(c) for c in record.partition_by]), flavor="hive"
    )
    dataset = ds.dataset(
        str(record.location),
        format="parquet",
        schema=schema,
        partitioning=partitioning if record.partition_by else None,
        ignore_prefixes=[".", "_"],
    )
    _check_files_match(engine, name, record, schema, dataset.files)
    wanted = None
    if columns is not None:
        lowered = {c.lower() for c in columns}
        wanted = [f.name for f in schema if f.name.lower() in lowered]
    yield from dataset.to_batches(columns=wanted, batch_size=batch_rows)


def _check_files_match(
    engine: CatalogEngine,
    name: TableName,
    record: TableRecord,
    schema: pa.Schema,
    files: Sequence[str],
) -> None:
    """The table's files must hold the columns the record says (another tool may have
    replaced the table since): else a StorageError, never rows read under the wrong schema."""
    import pyarrow.parquet as pq

    from engine.storage.store import loose_columns

    if not files:
        return
    recorded = pa.schema([f for f in schema if f.name not in record.partition_by])
    found = pq.read_schema(files[0])
    found = pa.schema([f for f in found if not f.name.startswith("__")])
    if loose_columns(recorded) != loose_columns(found):
        raise StorageError(
            f"{engine.label}: the files of table {name} ({files[0]}) do not hold the columns "
            "the engine recorded when it wrote the table; another writer changed it",
            hint="run the plan with the Spark executor (--executor spark), or store the table "
            "again with this engine",
        )


def create_catalog_engine(
    name: str, settings: Mapping[str, Any], *, base_dir: Path | None = None
) -> CatalogEngine:
    """The engine a plan's ``catalog`` storage entry configures (a relative ``warehouse`` is
    relative to ``base_dir``, the plan's directory, when given)."""
    where = f"storage engine '{name}' (catalog)"
    warehouse = settings.get("warehouse")
    path = None
    if warehouse is not None:
        if not isinstance(warehouse, str) or not warehouse:
            raise StorageError(f"{where}: warehouse must be a directory or a file:/// URL")
        path = parse_root(warehouse, engine_name=name)
        if base_dir is not None and not Path(warehouse).is_absolute() and ":" not in warehouse:
            path = (base_dir / warehouse).resolve()
    database = settings.get("database", "default")
    if not isinstance(database, str) or not IDENTIFIER.fullmatch(database):
        raise StorageError(
            f"{where}: database {database!r} is not a plain identifier "
            "(letters, digits and _, not starting with a digit)"
        )
    writable = settings.get("writable", True)
    if not isinstance(writable, bool):
        raise StorageError(f"{where}: writable must be true or false")
    return CatalogEngine(name, warehouse=path, database=database.lower(), writable=writable)


def session_settings(engines: Mapping[str, Any]) -> dict[str, str]:
    """The Spark settings of a session the engine starts itself for a plan with these
    ``engines``: Hive support, with the warehouse and the Derby metastore of the first catalog
    engine that names a warehouse (none without one). Never applied to a session the caller
    passes: a guest changes no setting of its host.

    >>> session_settings({"c": CatalogEngine("c", warehouse=Path("/wh"))})["spark.sql.warehouse.dir"]
    '/wh'
    """
    for engine in engines.values():
        if isinstance(engine, CatalogEngine) and engine.warehouse is not None:
            derby = f"jdbc:derby:;databaseName={engine.warehouse / 'metastore_db'};create=true"
            return {
                "spark.sql.catalogImplementation": "hive",
                "spark.sql.warehouse.dir": str(engine.warehouse),
                "spark.hadoop.javax.jdo.option.ConnectionURL": derby,
            }
    return {}
