"""Scans and stores of the ``jdbc`` engine on Spark, through Spark's JDBC source.

PostgreSQL's JDBC driver must be on the session's classpath (``spark.jars``; the sessions
:func:`~engine.exec.spark.session.create_session` builds add Debian's
``/usr/share/java/postgresql.jar`` where it is installed).

**Scan**: Spark reads the table (or the selection's query) in a read-only session; the plan's
projection and pushed filter become a select and a filter over the read, which Spark's JDBC
source turns into the SQL it sends (its own dialect quotes the columns and writes the values).
Text columns are read through a subquery that collates them byte-wise (``COLLATE "C"``), so a
comparison Spark pushes orders text as the engine does. A selection's ``partitionColumn`` splits
the read into ``numPartitions`` ranges (bounds from the selection, else the column's minimum
and maximum). The records and their sequence are shaped as every scan's
(:mod:`engine.exec.spark.sources`).

**Store**: Spark's tasks write into a staging table; one transaction on the driver then swaps it
in (:func:`engine.storage.jdbc.write.swap_in`). A failed write drops the staging table: the
previous table stays as it was.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from engine.errors import DrillError, StorageError
from engine.exec.spark.columns import compile_condition
from engine.exec.spark.constant_columns import lit
from engine.exec.spark.names import column
from engine.exec.spark.sources import unwrapped_filter
from engine.exec.spark.unread_member import with_unread
from engine.expr import Expr
from engine.storage.jdbc.adbc import connect
from engine.storage.jdbc.engine import JdbcEngine, ScanSource
from engine.storage.jdbc.sql import collated_source, comparisons_of, quote
from engine.storage.jdbc.write import TableTarget, check_columns, result_of, swap_in
from engine.storage.store import StoreResult

READ_ONLY = "-c default_transaction_read_only=on"


def _refuse_quotes(names: Sequence[str], what: str) -> None:
    # Spark's JDBC dialect quotes a column name without doubling a quote inside it.
    odd = [n for n in names if '"' in n]
    if odd:
        raise StorageError(
            f"{what} {', '.join(repr(n) for n in odd)} holds a double quote, which Spark's JDBC "
            "source does not quote safely",
            hint="rename the column, or run with the local executor",
        )


def _bounds(engine: JdbcEngine, source: ScanSource) -> tuple[int, int]:
    if source.lower_bound is not None and source.upper_bound is not None:
        return source.lower_bound, source.upper_bound
    column = quote(str(source.partition_column))
    origin = source.table.sql if source.table is not None else f"({source.query}) AS q"
    doing = f"finding the bounds of {source.partition_column} in {source.label}"
    with connect(engine, read_only=True, doing=doing) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT min({column})::bigint, max({column})::bigint FROM {origin}")
        low, high = cur.fetchall()[0]
    return (low or 0), (high if high is not None else 0)


def _reader(spark: Any, engine: JdbcEngine, source: ScanSource) -> Any:
    return (
        spark.read.format("jdbc")
        .options(**engine.jdbc_options())
        .option("fetchsize", str(source.fetch_size))
        .option("options", READ_ONLY)  # the driver's: server settings for the session
    )


def _load(reader: Any, engine: JdbcEngine, what: str) -> DataFrame:
    try:
        return reader.load()
    except Exception as err:
        raise engine.failure(_Reason(err), what) from None


class _Reason(Exception):
    """A Spark failure's innermost reason (the driver's message), for :meth:`failure`."""

    def __init__(self, err: BaseException) -> None:
        from engine.exec.spark.spark_errors import error_text, spark_reason

        super().__init__(spark_reason(error_text(err)))


_OPERATORS = {
    "equal": operator.eq,
    "not_equal": operator.ne,
    "less_than": operator.lt,
    "less_than_or_equal": operator.le,
    "greater_than": operator.gt,
    "greater_than_or_equal": operator.ge,
}


def _family(dtype: T.DataType) -> str:
    if isinstance(dtype, T.StringType):
        return "text"
    if isinstance(dtype, T.NumericType):
        return "number"
    if isinstance(dtype, T.BooleanType):
        return "bool"
    if isinstance(dtype, T.DateType):
        return "date"
    return "other"


def jdbc_scan_dataframe(
    spark: Any,
    engine: JdbcEngine,
    selection: Mapping[str, Any],
    ref: str | None,
    *,
    seq_column: str,
    projection: Sequence[str] | None = None,
    pushed_filter: Expr | None = None,
    observe: Callable[[DataFrame], DataFrame] | None = None,
) -> DataFrame:
    """A scan of a table or query as a DataFrame: the record under ``ref`` (its columns at the
    root when None) and ``seq_column``. See the module docstring."""
    source = engine.scan_source(selection)
    origin = source.table.sql if source.table is not None else f"({source.query}) AS q"
    what = f"reading {source.label}"
    probe = _load(_reader(spark, engine, source).option("dbtable", origin), engine, what)
    names = probe.columns
    if projection is not None:
        wanted = {p.lower() for p in projection}
        names = [n for n in names if n.lower() in wanted]
    _refuse_quotes(names, f"the column of {source.label}")
    text = {f.name for f in probe.schema.fields if isinstance(f.dataType, T.StringType)}
    table = collated_source(source.source, probe.columns, text) if text else origin
    reader = _reader(spark, engine, source).option("dbtable", table)
    if source.partition_column is not None:
        low, high = _bounds(engine, source)
        reader = reader.options(
            partitionColumn=source.partition_column,
            lowerBound=str(low),
            upperBound=str(high),
            numPartitions=str(source.num_partitions or spark.sparkContext.defaultParallelism),
        )
    df = _load(reader, engine, what).select(*[column(n) for n in names])
    plain = None if pushed_filter is None else unwrapped_filter(pushed_filter, ref)
    if plain is not None:
        # The comparisons as plain Columns, which Spark pushes into the SQL it sends; then the
        # whole filter as the engine evaluates it (the same rows: its nulls are false).
        families = {f.name.lower(): (f.name, _family(f.dataType)) for f in df.schema.fields}
        tests, _ = comparisons_of(pushed_filter, ref, families)
        for test in tests:
            df = df.filter(_OPERATORS[test.op](column(test.column), lit(test.value)))
        df = df.filter(compile_condition(plain, df.schema))
    columns = [column(n) for n in names]
    record = [with_unread(columns).alias(ref)] if ref else columns
    # (the row ids are not deterministic: Spark pushes no filter below this select)
    df = df.select(*record, F.monotonically_increasing_id().alias(seq_column))
    if pushed_filter is not None and plain is None:
        df = df.filter(compile_condition(pushed_filter, df.schema))
    return observe(df) if observe is not None else df


def store_jdbc(df: DataFrame, engine: JdbcEngine, target: Mapping[str, Any] | None) -> StoreResult:
    """Write ``df`` into ``target``'s table: Spark's tasks into a staging table, then one
    transaction swaps it in."""
    spec = TableTarget.parse(target, engine=engine)
    schema = to_arrow_schema(df.schema, timezone="UTC")
    schema = pa.schema([f.remove_metadata() for f in schema])  # Spark's JDBC column notes
    check_columns(schema, spec)
    _refuse_quotes(df.columns, "the stored column")
    staging = spec.staging()
    observation = Observation(f"store {spec.table.dotted}")
    observed = df.observe(observation, F.count(lit(1)).alias("rows"))
    doing = f"storing into {spec.table.dotted}"
    try:
        try:
            (
                observed.write.format("jdbc")
                .options(**engine.jdbc_options())
                .option("dbtable", staging.sql)
                .mode("error")
                .save()
            )
        except Exception as err:
            from engine.exec.spark.spark_errors import translate_spark_error

            translated = translate_spark_error(err)
            if translated is not None:
                raise translated from None
            raise engine.failure(_Reason(err), doing) from None
        with connect(engine, doing=doing) as conn, conn.cursor() as cur:
            version = swap_in(cur, spec, staging, df.columns)
            conn.commit()
    except BaseException:
        _drop_quietly(engine, staging.sql)
        raise
    rows = int(observation.get.get("rows", 0))
    return result_of(engine, spec, rows, schema, version)


def _drop_quietly(engine: JdbcEngine, table_sql: str) -> None:
    with (
        contextlib.suppress(DrillError, Exception),
        connect(engine, doing="dropping a staging table") as conn,
        conn.cursor() as cur,
    ):
        cur.execute(f"DROP TABLE IF EXISTS {table_sql}")
        conn.commit()
