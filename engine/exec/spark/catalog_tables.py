"""Catalog tables on Spark: scans by name and stores as managed parquet tables
(:mod:`engine.storage.catalog`).

**Scan** (:func:`scan_table`): ``spark.table(name)``, the columns the plan reads selected (Spark
prunes the others from the parquet read), wrapped into the scan's record like a file scan's
(:func:`engine.exec.spark.sources.scan_plan_dataframe`), with :data:`SEQ_COLUMN`.

**Store** (:func:`store_table`), by the target's ``mode``:

* a table that does not exist is created (``CREATE TABLE ... AS SELECT``, its database created
  under the engine's warehouse when missing); Spark drops a table whose write failed;
* ``append`` appends (Spark commits the files of a job at its end: a failed append adds nothing);
* ``overwrite`` of a table partitioned by the target's ``partitionBy`` replaces exactly the
  partitions the rows fall in (a dynamic partition overwrite asked for by this write's option,
  not by the session's setting); Spark stages the partitions and swaps them at the job's commit;
* any other ``overwrite`` replaces the table: the rows are written to a staging table, then the
  staging table takes the table's name (the old one is renamed aside, then dropped). A failed
  write leaves the old table as it was; between the two renames, a moment, the name is absent
  (a reader fails, never reads a part of either version). A session catalog that replaces
  atomically itself (a staging catalog such as Delta's or Iceberg's) would do better; the
  session catalog of parquet tables does not.
* ``error`` fails if the table exists.

After a store, the engine records the table's location, partitioning, schema and row count
(:meth:`~engine.storage.catalog.CatalogEngine.write_record`). The store's version
(:func:`table_snapshot`) is a hash of the table's data files afterwards: Spark names every file
it writes anew, so each store that changes the table gives a new version.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from engine.errors import DrillError, StorageError
from engine.exec.spark.constant_columns import col, lit
from engine.storage.catalog import CatalogEngine, CatalogTarget, TableName, quote
from engine.storage.store import StoreResult
from engine.storage.version_file import describe_dataset

STAGING_PREFIX = "__drill_staging_"
REPLACED_PREFIX = "__drill_replaced_"


# ---------------------------------------------------------------- session


def keep_derby_log(spark: Any, settings: dict[str, str]) -> None:
    """Derby's log in the warehouse, not the working directory, for a session started with
    :func:`~engine.storage.catalog.session_settings` (Derby reads the property when the metastore
    first starts, after the session)."""
    warehouse = settings.get("spark.sql.warehouse.dir")
    jvm = getattr(spark, "_jvm", None)
    if warehouse and jvm is not None:
        jvm.java.lang.System.setProperty("derby.stream.error.file", f"{warehouse}/derby.log")


# ---------------------------------------------------------------- scan


def table_frame(spark: Any, engine: CatalogEngine, selection: Any) -> DataFrame:
    """The table a scan selects, as Spark reads it, or a StorageError naming it when the
    session's catalog has no such table."""
    name = engine.table_name(selection)
    if not table_exists(spark, name):
        raise StorageError(
            f"{engine.label}: table {name} does not exist in the session's catalog",
            hint="store to it first, or check the name and the session's metastore",
        )
    return spark.table(name.quoted)


def scan_table(
    spark: Any,
    engine: CatalogEngine,
    selection: Any,
    ref: str | None,
    *,
    projection: Sequence[str] | None = None,
) -> DataFrame:
    """A scan of a catalog table as a DataFrame shaped like a file scan's: ``ref`` holding each
    record (the columns at the root without a ref) and :data:`SEQ_COLUMN`. Only the columns of
    ``projection`` (the record paths the plan reads; None: every column) are selected, so Spark
    reads no other column of the table's files."""
    from pyspark.sql.types import StructType

    from engine.exec.spark.names import SEQ_COLUMN
    from engine.exec.spark.spark_types import nullable_type, spark_schema_of
    from engine.exec.spark.unread_member import with_unread, with_unread_type
    from engine.scan.projection import ProjectionKind, ScanProjection
    from engine.types import from_arrow_field

    frame = table_frame(spark, engine, selection)
    fields = list(frame.schema.fields)
    if projection is not None:
        parsed = ScanProjection.parse(list(projection))
        if parsed.kind != ProjectionKind.WILDCARD:
            wanted = {n.lower() for n in parsed.names}
            fields = [f for f in fields if f.name.lower() in wanted]
    try:
        arrow = to_arrow_schema(StructType(fields), timezone="UTC")
        types = {f.name: nullable_type(from_arrow_field(f)) for f in arrow}
    except Exception as err:  # a Spark type the engine has no type for
        raise StorageError(
            f"{engine.label}: table {engine.table_name(selection)} has a column the engine "
            f"cannot type: {err}"
        ) from err
    target = spark_schema_of(types)
    members = [col(quote(f.name)).cast(target[f.name].dataType).alias(f.name) for f in fields]
    sequence = _sequence(frame).alias(SEQ_COLUMN)
    if not ref:
        return frame.select(*members, sequence)
    record = with_unread(members).cast(with_unread_type(target))
    return frame.select(record.alias(ref), sequence)


def _sequence(frame: DataFrame) -> Column:
    """A row's place in a table's scan: its file's hash, then its index in the file. A table has
    no order; what matters is that the value is deterministic, so that Spark pushes the plan's
    filters through the scan's select into the read (partition pruning, parquet statistics),
    which it does not do over ``monotonically_increasing_id``. A table without files (another
    kind of catalog table) falls back to that."""
    try:
        frame.select("_metadata.file_path", "_metadata.row_index")
    except Exception:  # no file metadata: not a file source table
        return F.monotonically_increasing_id()
    file_key = F.pmod(F.xxhash64(col("_metadata.file_path")), lit(2**31))
    return F.shiftleft(file_key, 32).bitwiseOR(col("_metadata.row_index"))


def table_exists(spark: Any, name: TableName) -> bool:
    return bool(spark.catalog.tableExists(name.quoted))


# ---------------------------------------------------------------- store


def store_table(df: DataFrame, engine: CatalogEngine, target: Any) -> StoreResult:
    """Write ``df`` to the table ``target`` names (see the module docstring)."""
    spec = CatalogTarget.parse(target, engine=engine)
    spark = df.sparkSession
    name = spec.table
    _check_partition_columns(df, spec)
    observation = Observation(f"store {name}")
    counted = df.observe(observation, F.count(lit(1)).alias("rows"))
    exists = table_exists(spark, name)
    if exists and spec.mode == "error":
        raise StorageError(
            f"store target table {name} already exists and mode is error",
            hint="use mode: overwrite or append, or drop the table first",
        )
    try:
        if not exists:
            _ensure_database(spark, engine, name.database)
            _create(counted, name, spec.partition_by)
        elif spec.mode == "append":
            _check_same_columns(spark, df, name)
            _in_table_order(spark, counted, name).write.insertInto(name.quoted)
        elif spec.partition_by and _partition_columns(spark, name) == [
            c.lower() for c in spec.partition_by
        ]:
            _check_same_columns(spark, df, name)
            _overwrite_partitions(spark, counted, name)
        else:
            _replace(spark, counted, name, spec.partition_by)
    except DrillError:
        raise
    except Exception as err:
        from engine.exec.spark.spark_errors import translate_spark_error

        translated = translate_spark_error(err)
        if translated is not None:
            raise translated from err
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise StorageError(
            f"writing table {name} of {engine.label} failed: {reason}; "
            "the table is as it was before the store"
        ) from err
    spark.catalog.refreshTable(name.quoted)
    location = table_location(spark, name)
    partition_by = _partition_columns(spark, name)
    schema = to_arrow_schema(spark.table(name.quoted).schema, timezone="UTC")
    metadata = describe_dataset(location, schema=schema) if location is not None else None
    if location is not None and metadata is not None:
        engine.write_record(name, location, partition_by, metadata)
    else:
        engine.forget(name)
    rows = int(observation.get.get("rows", 0))
    # The partitions written are not listed: the table's files say only which it holds.
    return StoreResult(
        location=str(name),
        format="parquet",
        row_count=rows,
        files=(),
        schema=to_arrow_schema(df.schema, timezone="UTC"),
        mode=spec.mode,
        version=table_snapshot(location),
    )


def table_snapshot(location: Path | None) -> str:
    """The version of a table's data: a hash of its data files' paths (relative to the table's
    directory) and sizes; a random id where the files are not on a local file system."""
    if location is None:
        return uuid.uuid4().hex[:16]
    lines = []
    for folder, directories, names in os.walk(location):
        directories[:] = [d for d in directories if not d.startswith(("_", "."))]
        for file in names:
            if not file.startswith(("_", ".")):
                path = os.path.join(folder, file)
                lines.append(f"{os.path.relpath(path, location)} {os.path.getsize(path)}\n")
    return hashlib.sha256("".join(sorted(lines)).encode()).hexdigest()[:16]


def table_uri(spark: Any, name: TableName) -> str | None:
    """The location of a table's files, as the catalog records it (a URI)."""
    rows = _ddl(spark, f"DESCRIBE TABLE EXTENDED {name.quoted}").collect()
    return next((str(row[1]) for row in rows if row[0] == "Location"), None)


def table_location(spark: Any, name: TableName) -> Path | None:
    """The local directory of a table's files (None where they are not on a local file system)."""
    uri = table_uri(spark, name)
    parts = urlsplit(uri or "")
    if uri is None or parts.scheme not in ("", "file"):
        return None
    return Path(unquote(parts.path))


def _partition_columns(spark: Any, name: TableName) -> list[str]:
    columns = spark.catalog.listColumns(name.quoted)
    return [c.name.lower() for c in columns if c.isPartition]


def _check_partition_columns(df: DataFrame, spec: CatalogTarget) -> None:
    from pyspark.sql.types import ArrayType, MapType, StructType

    fields = {f.name.lower(): f for f in df.schema.fields}
    for column in spec.partition_by:
        field = fields.get(column.lower())
        if field is None:
            raise StorageError(
                f"partitionBy names '{column}', not among the columns stored "
                f"({', '.join(f.name for f in df.schema.fields)})"
            )
        if isinstance(field.dataType, StructType | ArrayType | MapType):
            raise StorageError(
                f"cannot partition by '{column}': it is {field.dataType.simpleString()}, "
                "not a scalar"
            )
    if spec.partition_by and len(spec.partition_by) == len(fields):
        raise StorageError("a partitioned table needs a column that is not a partition column")


def _check_same_columns(spark: Any, df: DataFrame, name: TableName) -> None:
    """An append or a partition overwrite keeps the table's columns: the rows must have them,
    with the same types (by name; Spark would otherwise cast or fail deep in the write)."""
    table = {f.name.lower(): f.dataType for f in spark.table(name.quoted).schema.fields}
    rows = {f.name.lower(): f.dataType for f in df.schema.fields}
    if table != rows:

        def text(columns: dict[str, Any]) -> str:
            return ", ".join(f"{n}: {t.simpleString()}" for n, t in columns.items())

        raise StorageError(
            f"table {name} has the columns ({text(table)}) and the rows written have "
            f"({text(rows)})",
            hint="overwrite the whole table (mode: overwrite, without partitionBy, or with "
            "another one) to change its columns",
        )


def _ensure_database(spark: Any, engine: CatalogEngine, database: str) -> None:
    if spark.catalog.databaseExists(database):
        return
    location = ""
    if engine.warehouse is not None:
        path = engine.warehouse / f"{database}.db"
        location = " LOCATION " + _string_literal(path.as_uri())
    _ddl(spark, f"CREATE DATABASE IF NOT EXISTS {quote(database)}{location}")


def _string_literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _create(df: DataFrame, name: TableName, partition_by: Sequence[str]) -> None:
    writer = df.writeTo(name.quoted).using("parquet")
    if partition_by:
        writer = writer.partitionedBy(*[col(quote(c)) for c in partition_by])
    writer.create()


def _in_table_order(spark: Any, df: DataFrame, name: TableName) -> DataFrame:
    """``df``'s columns in the table's order (an insert matches columns by position)."""
    by_name = {f.name.lower(): f.name for f in df.schema.fields}
    columns = [by_name[f.name.lower()] for f in spark.table(name.quoted).schema.fields]
    return df.select(*[col(quote(c)) for c in columns])


def _overwrite_partitions(spark: Any, df: DataFrame, name: TableName) -> None:
    """Replace the partitions of ``name`` that ``df``'s rows fall in, and only those.

    Spark's session catalog takes no dynamic overwrite of this write alone through the table
    (``insertInto`` ignores the write's options; ``overwritePartitions`` needs a table of the
    newer API), so the rows are written to the table's location with the write option
    ``partitionOverwriteMode=dynamic`` (Spark stages each partition and swaps it in at the job's
    commit), then the catalog learns the new partitions (``RECOVER PARTITIONS``)."""
    location = table_uri(spark, name)
    if location is None:
        raise StorageError(f"table {name} has no location to write its partitions to")
    partitions = _partition_columns(spark, name)
    by_name = {f.name.lower(): f.name for f in df.schema.fields}
    (
        _in_table_order(spark, df, name)
        .write.mode("overwrite")
        .option("partitionOverwriteMode", "dynamic")
        .partitionBy(*[by_name[c] for c in partitions])
        .parquet(location)
    )
    _ddl(spark, f"ALTER TABLE {name.quoted} RECOVER PARTITIONS")


def _replace(spark: Any, df: DataFrame, name: TableName, partition_by: Sequence[str]) -> None:
    """Replace table ``name`` with ``df``'s rows: written to a staging table first, then
    renamed in (see the module docstring)."""
    token = uuid.uuid4().hex[:12]
    staging = TableName(name.database, f"{STAGING_PREFIX}{token}")
    replaced = TableName(name.database, f"{REPLACED_PREFIX}{token}")
    try:
        _create(df, staging, partition_by)
    except BaseException:
        _ddl(spark, f"DROP TABLE IF EXISTS {staging.quoted}")
        raise
    _ddl(spark, f"ALTER TABLE {name.quoted} RENAME TO {replaced.quoted}")
    try:
        _ddl(spark, f"ALTER TABLE {staging.quoted} RENAME TO {name.quoted}")
    except BaseException:
        _ddl(spark, f"ALTER TABLE {replaced.quoted} RENAME TO {name.quoted}")
        _ddl(spark, f"DROP TABLE IF EXISTS {staging.quoted}")
        raise
    _ddl(spark, f"DROP TABLE IF EXISTS {replaced.quoted}")


def _ddl(spark: Any, statement: str) -> Any:
    """Run a catalog statement (describe a table, create a database, rename or drop a table,
    recover partitions), which PySpark's Catalog API cannot do. Every name in it is a validated plain
    identifier (:func:`~engine.storage.catalog.parse_table_name`) quoted by
    :func:`~engine.storage.catalog.quote`, and a location a quoted string literal: no text of a
    plan reaches Spark's parser unquoted. The one place the engine hands SQL text to Spark
    (``tests/reliability/test_security.py`` allows exactly this function)."""
    return spark.sql(statement)
