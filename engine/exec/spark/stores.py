"""Stores on Spark (:func:`store_dataframe`): queue and console sinks collect the (small)
result; ``fs`` stores write with Spark into the staging directory of :mod:`engine.storage.commit`
and commit with its atomic protocol, so a failed write leaves the previous version. The row count
of a parquet store is the sum of the row counts in the footers of the files Spark wrote; json and
csv stores count with ``DataFrame.observe`` during the write; neither takes a second pass.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    MapType,
    StructType,
)
from pyspark.sql.utils import is_remote

from engine.errors import DrillError, StorageError
from engine.exec.spark.constant_columns import lit
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.spark_errors import error_text, spark_reason, translate_spark_error
from engine.exec.spark.unions import (
    collect_arrow,
    has_variant,
    marked_texts,
)
from engine.exec.spark.unread_member import without_unread
from engine.storage.catalog import CatalogEngine
from engine.storage.commit import remove
from engine.storage.engines import ClasspathEngine, ConsoleEngine, FsEngine, QueueEngine
from engine.storage.formats import WRITERS
from engine.storage.formats.parquet_unions import arrow_schema_of
from engine.storage.jdbc.engine import JdbcEngine
from engine.storage.partitions import static_prefix
from engine.storage.paths import is_hidden
from engine.storage.store import (
    DEFAULT_LOCK_TIMEOUT,
    StoreResult,
    StoreTarget,
    check_compatible,
    check_readable,
    open_commit,
    partition_columns,
    under_any,
)

# ---------------------------------------------------------------- store


def store_dataframe(
    df: DataFrame,
    engine: Any,
    target: Mapping[str, Any] | None,
    *,
    partition_values: Mapping[str, Any] | None = None,
    sink_records: list[Any] | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> StoreResult:
    """Write ``df`` to ``target`` of ``engine`` (see the module docstring and
    :func:`engine.storage.store.write_store`, whose target format and outcomes this follows).

    Records reaching a queue or console sink are also appended to ``sink_records`` when given
    (what ``RunResult.records()`` returns). A :data:`SEQ_COLUMN` still present is dropped.
    """
    if SEQ_COLUMN in df.columns:
        df = df.drop(SEQ_COLUMN)
    df = without_unread(df)
    if isinstance(engine, ConsoleEngine | QueueEngine):
        from engine.storage.store import write_store

        table = _collect(df)
        if sink_records is not None:
            sink_records.extend(table.to_pylist())
        return write_store(engine, target, table)
    if isinstance(engine, ClasspathEngine):
        raise StorageError(f"{engine.label} is read-only; store to an fs engine")
    if isinstance(engine, CatalogEngine):
        from engine.exec.spark.catalog_tables import store_table

        return store_table(df, engine, target)
    if isinstance(engine, JdbcEngine):
        from engine.exec.spark.jdbc import store_jdbc

        return store_jdbc(df, engine, target)
    if not isinstance(engine, FsEngine):
        raise StorageError(f"{getattr(engine, 'label', engine)} cannot be written to")
    spec = StoreTarget.parse(target, engine=engine)
    return _store_fs(df, spec, dict(partition_values or {}), lock_timeout)


def _collect(df: DataFrame) -> pa.Table:
    try:
        return collect_arrow(df)
    except Exception as err:
        translated = translate_spark_error(err)
        if translated is not None:
            raise translated from err
        raise


def _store_fs(
    df: DataFrame, spec: StoreTarget, static: dict[str, Any], lock_timeout: float
) -> StoreResult:
    columns = partition_columns(spec, static, df.columns)
    dynamic = columns[len(static) :]
    _check_columns(df, spec, dynamic)
    prefix = static_prefix(static) if static else ""
    partitioned = bool(columns)
    # Parquet files say how many rows they hold: their footers count the store, no observation.
    observation = None if spec.format == "parquet" else Observation(f"store {spec.path}")
    written_df = df
    if spec.format == "parquet" and has_variant(df.schema):
        written_df = marked_texts(df)  # UNION columns as the local executor's files hold them
    observed = (
        written_df
        if observation is None
        else written_df.observe(observation, F.count(lit(1)).alias("rows"))
    )
    directory = spec.mode == "append" or partitioned  # else the whole target is replaced
    with open_commit(
        spec, lock_timeout, needs_directory=directory, explain=_store_failure
    ) as commit:
        spark_dir = commit.staging / f".spark-{uuid.uuid4().hex}"
        spark_sees = _path_for_writers(df, spark_dir)
        _spark_write(observed, spec, spark_sees / prefix if prefix else spark_sees, dynamic)
        written = _data_files(spark_dir)
        if not written and not partitioned:
            written = [_write_empty(df, spec, spark_dir)]
        footers = _footers(spark_dir, written)
        paths = sorted({os.path.dirname(rel) for rel in written if os.path.dirname(rel)})
        if directory:
            replaced = [] if spec.mode == "append" else [prefix] if prefix else paths
            kept = commit.carry_over(lambda rel: not under_any(rel, replaced))
            check_compatible(spec, commit.staging, kept, _written_schema(footers))
        for rel in written:
            destination = commit.staging / rel
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.replace(spark_dir / rel, destination)
        remove(spark_dir)
        check_readable(spec, commit.staging, written)
        commit.metadata_file = spec.metadata_file  # the metadata repository's record
        commit.metadata_root = spec.root
        commit.commit()
    if observation is None:
        rows = sum(footer.num_rows for footer in footers)
    else:
        rows = observation.get.get("rows", 0) if written else 0
    return StoreResult(
        location=str(spec.location),
        format=spec.format,
        row_count=int(rows),
        files=tuple(str(spec.location / rel) for rel in written),
        schema=to_arrow_schema(df.schema, timezone="UTC"),
        mode=spec.mode,
        partitions=tuple(sorted(set(paths) | ({prefix} if prefix else set()))),
        version=commit.version,
    )


def _path_for_writers(df: DataFrame, path: Path) -> Path:
    """``path`` as Spark's writers should be given it. Staging is reached through this process's
    open directory (``/proc/<pid>/fd/<fd>``: a directory swapped for a link meanwhile is not
    followed), which the JVM of a ``local`` master can use; executors elsewhere (a cluster,
    Spark Connect) get the directory's current location instead, and the commit checks staging
    was not swapped before renaming it."""
    session = df.sparkSession
    local = not is_remote() and session.sparkContext.master.startswith("local")
    return path if local else Path(os.path.realpath(path))


def _check_columns(df: DataFrame, spec: StoreTarget, dynamic: Sequence[str]) -> None:
    fields = {f.name: f.dataType for f in df.schema.fields}
    missing = [c for c in dynamic if c not in fields]
    if missing:
        raise StorageError(
            f"partitionBy names {', '.join(repr(c) for c in missing)}, not among the columns "
            f"stored ({', '.join(fields)})"
        )
    nested_types = (StructType, ArrayType, MapType)
    for name in dynamic:
        if isinstance(fields[name], nested_types):
            raise StorageError(
                f"cannot partition by '{name}': it is {fields[name].simpleString()}, not a scalar"
            )
    if spec.format == "csv":
        nested = [n for n, t in fields.items() if n not in dynamic and isinstance(t, nested_types)]
        if nested:
            raise StorageError(
                f"csv stores only scalar columns, and {', '.join(repr(n) for n in nested)} "
                f"{'is' if len(nested) == 1 else 'are'} nested",
                hint="store nested data as parquet or json, or flatten it first",
            )


def _spark_write(df: DataFrame, spec: StoreTarget, path: Path, dynamic: Sequence[str]) -> None:
    # "error" and not its alias "errorifexists", which PySpark's Spark Connect client refuses
    writer = df.write.mode("error")
    if dynamic:
        writer = writer.partitionBy(*dynamic)
    if spec.format == "json":
        writer.option("ignoreNullFields", "false").json(str(path))
    elif spec.format == "csv":
        writer.options(header=True, quote='"', escape='"').csv(str(path))
    else:
        writer.parquet(str(path))


def _write_empty(df: DataFrame, spec: StoreTarget, spark_dir: Path) -> str:
    """An unpartitioned store of no rows still writes one file, so the schema survives."""
    rel = f"part-00000-{uuid.uuid4().hex[:8]}.{spec.format}"
    spark_dir.mkdir(parents=True, exist_ok=True)
    schema = to_arrow_schema(df.schema, timezone="UTC")
    WRITERS[spec.format](schema.empty_table(), spark_dir / rel)
    return rel


def _data_files(directory: Path) -> list[str]:
    """The data files Spark wrote below ``directory`` (markers and checksums left out)."""
    found = []
    for root, subdirs, files in os.walk(directory):
        subdirs[:] = sorted(d for d in subdirs if not is_hidden(d))
        rel_dir = os.path.relpath(root, directory)
        for name in sorted(files):
            if not is_hidden(name):
                found.append(name if rel_dir == "." else f"{rel_dir}/{name}")
    return found


def _footers(spark_dir: Path, written: Sequence[str]) -> list[pq.FileMetaData]:
    """The footers of the parquet files Spark wrote (each read once: the store's row count and
    the schema compared with the files kept)."""
    return [pq.read_metadata(spark_dir / rel) for rel in written if rel.endswith(".parquet")]


def _written_schema(footers: Sequence[pq.FileMetaData]) -> pa.Schema | None:
    """The schema of the first parquet file Spark wrote, to compare with the files kept."""
    return arrow_schema_of(footers[0]) if footers else None


def _store_failure(err: Exception) -> DrillError | str:
    return translate_spark_error(err) or spark_reason(error_text(err))
