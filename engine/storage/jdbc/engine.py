"""The ``jdbc`` storage engine: tables of a PostgreSQL database.

Configuration (a plan's ``storage`` entry)::

    {"type": "jdbc", "url": "postgresql://127.0.0.1:5432/shop", "user": "etl",
     "password_env": "SHOP_PASSWORD", "schema": "public"}

``url`` names the server and database (``jdbc:postgresql://...`` is taken too; connection
parameters such as ``?sslmode=require`` pass through) and holds no credentials; ``password_env``
names the environment variable holding the password, read when a connection opens: a password
is never in a plan, nor in a message, a log or Dagster's metadata. ``schema`` is where a table
named without one lives (``public``); ``writable: false`` refuses stores.

A scan's selection is ``{"table": "schema.table"}`` (or ``{"schema": ..., "table": ...}``, the
table's name then taken whole) or ``{"query": "SELECT ..."}``; every read runs in a read-only
session. Spark's reads may be split (``partitionColumn``, ``numPartitions``, and optionally
``lowerBound``/``upperBound``, else the column's minimum and maximum), and ``fetchSize`` rows
travel per round trip. A store's target is ``{"table": ..., "mode": ..., "partitionBy": [...]}``
(see :mod:`engine.storage.jdbc.write`).

The local executor reads and writes through ADBC (:mod:`engine.storage.jdbc.adbc`), Spark through
its JDBC source with PostgreSQL's driver (:mod:`engine.exec.spark.jdbc`).

>>> e = JdbcEngine.from_config("pg", {"url": "postgresql://db.local/shop", "user": "etl"})
>>> e.jdbc_url, e.database_label
('jdbc:postgresql://db.local:5432/shop', 'db.local:5432/shop')
>>> JdbcEngine.from_config("pg", {"url": "postgresql://etl:secret@db.local/shop"})
Traceback (most recent call last):
...
engine.errors.StorageError: storage engine 'pg' (jdbc): the url holds credentials; give `user` and `password_env` instead
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from engine.errors import StorageError
from engine.storage.engines import Capabilities, StorageEngine
from engine.storage.jdbc.sql import TableName, check_name

DEFAULT_PORT = 5432
DRIVER_CLASS = "org.postgresql.Driver"
_SELECTION_KEYS = (
    "table",
    "schema",
    "query",
    "partitionColumn",
    "numPartitions",
    "lowerBound",
    "upperBound",
    "fetchSize",
)
_SECRET_PARAMS = frozenset({"password", "user", "passfile"})


@dataclass(frozen=True)
class ScanSource:
    """What a selection reads: a table or a query, and how Spark may split the read."""

    table: TableName | None
    query: str | None
    partition_column: str | None = None
    num_partitions: int | None = None
    lower_bound: int | None = None
    upper_bound: int | None = None
    fetch_size: int = 10_000

    @property
    def source(self) -> TableName | str:
        return self.table if self.table is not None else str(self.query)

    @property
    def label(self) -> str:
        return self.table.dotted if self.table is not None else "query"


class JdbcEngine(StorageEngine):
    """A PostgreSQL database; see the module docstring."""

    type_name: ClassVar[str] = "jdbc"
    capabilities_base: ClassVar[Capabilities] = Capabilities(
        can_read=True, can_write=True, can_push_projection=True, can_push_filters=True
    )
    config_keys: ClassVar[tuple[str, ...]] = (
        "url",
        "user",
        "password_env",
        "schema",
        "writable",
        "enabled",
    )

    def __init__(
        self,
        name: str,
        *,
        host: str,
        port: int,
        database: str,
        params: tuple[tuple[str, str], ...] = (),
        user: str | None = None,
        password_env: str | None = None,
        schema: str = "public",
        writable: bool = True,
    ) -> None:
        super().__init__(name)
        self.host = host
        self.port = port
        self.database = database
        self.params = params
        self.user = user
        self.password_env = password_env
        self.default_schema = schema
        self.writable = writable

    @classmethod
    def from_config(cls, name: str, settings: Mapping[str, Any]) -> JdbcEngine:
        """The engine a plan's ``storage`` entry (without its ``type``) describes."""
        where = f"storage engine '{name}' (jdbc)"
        url = settings.get("url")
        if not isinstance(url, str) or not url:
            raise StorageError(f"{where} needs a `url`: postgresql://host:port/database")
        text = url[len("jdbc:") :] if url.lower().startswith("jdbc:") else url
        try:
            parts = urlsplit(text)
            port = parts.port or DEFAULT_PORT
        except ValueError:
            raise StorageError(f"{where}: the url is not postgresql://host:port/database") from None
        if parts.username is not None or parts.password is not None:
            raise StorageError(
                f"{where}: the url holds credentials; give `user` and `password_env` instead"
            )
        if parts.scheme.lower() not in ("postgresql", "postgres") or not parts.hostname:
            raise StorageError(
                f"{where}: the url must be postgresql://host:port/database (PostgreSQL is the "
                f"database this engine reaches), not a '{parts.scheme}' url"
            )
        database = parts.path.lstrip("/")
        if not database or "/" in database:
            raise StorageError(f"{where}: the url names no database (postgresql://host/db)")
        params = tuple(parse_qsl(parts.query, keep_blank_values=True))
        secret = sorted({k for k, _ in params if k.lower() in _SECRET_PARAMS})
        if secret:
            raise StorageError(
                f"{where}: the url's parameters may not hold {', '.join(secret)}; give `user` "
                "and `password_env` instead"
            )
        user = settings.get("user")
        if user is not None and (not isinstance(user, str) or not user):
            raise StorageError(f"{where}: user must be a name")
        password_env = settings.get("password_env")
        if password_env is not None and (not isinstance(password_env, str) or not password_env):
            raise StorageError(f"{where}: password_env must name an environment variable")
        schema = check_name(settings.get("schema", "public"), what=f"{where}: schema")
        writable = settings.get("writable", True)
        if not isinstance(writable, bool):
            raise StorageError(f"{where}: writable must be true or false")
        return cls(
            name,
            host=parts.hostname,
            port=port,
            database=database,
            params=params,
            user=user,
            password_env=password_env,
            schema=schema,
            writable=writable,
        )

    # -- connection ------------------------------------------------------------------------

    @property
    def database_label(self) -> str:
        """``host:port/database``: how asset keys and messages name the database."""
        return f"{self.host}:{self.port}/{self.database}"

    @property
    def jdbc_url(self) -> str:
        """The JDBC URL (no credentials)."""
        query = f"?{urlencode(self.params)}" if self.params else ""
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}{query}"

    def password(self) -> str | None:
        """The password from the environment (None when no ``password_env`` is configured)."""
        if self.password_env is None:
            return None
        value = os.environ.get(self.password_env)
        if value is None:
            raise StorageError(
                f"{self.label}: the environment variable {self.password_env} (its "
                "password_env) is not set",
                hint=f"export {self.password_env}=... where the run starts",
            )
        return value

    def libpq_uri(self) -> str:
        """The URI ADBC connects with, credentials included: never shown (see :meth:`scrub`)."""
        auth = ""
        if self.user is not None:
            auth = quote(self.user, safe="")
            password = self.password()
            if password is not None:
                auth += ":" + quote(password, safe="")
            auth += "@"
        query = f"?{urlencode(self.params)}" if self.params else ""
        return f"postgresql://{auth}{self.host}:{self.port}/{quote(self.database)}{query}"

    def jdbc_options(self) -> dict[str, str]:
        """Spark's JDBC options that reach the database (url, driver, user, password)."""
        options = {"url": self.jdbc_url, "driver": DRIVER_CLASS}
        if self.user is not None:
            options["user"] = self.user
        password = self.password()
        if password is not None:
            options["password"] = password
        return options

    def scrub(self, text: str) -> str:
        """``text`` with the password (raw and URL-quoted) replaced by ``***``."""
        if self.password_env is None:
            return text
        password = os.environ.get(self.password_env)
        if not password:
            return text
        for secret in {password, quote(password, safe="")}:
            text = text.replace(secret, "***")
        return text

    def failure(self, err: BaseException, doing: str) -> StorageError:
        """A database error as the engine reports it: what was done, the reason, no password."""
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return StorageError(f"{self.label} {self.database_label}: {doing}: {self.scrub(reason)}")

    # -- selections and targets -------------------------------------------------------------

    def scan_source(self, selection: Mapping[str, Any] | None) -> ScanSource:
        """A scan's selection, checked (reads nothing)."""
        where = f"selection of {self.label}"
        if not isinstance(selection, Mapping):
            raise StorageError(f"{where} must be a mapping with a `table` or a `query`")
        unknown = [k for k in selection if k not in _SELECTION_KEYS]
        if unknown:
            raise StorageError(
                f"{where}: unknown key {', '.join(repr(k) for k in unknown)}; known keys are "
                f"{', '.join(_SELECTION_KEYS)}"
            )
        table, query = selection.get("table"), selection.get("query")
        if (table is None) == (query is None):
            raise StorageError(f"{where} needs a `table` or a `query` (one of them)")
        name = None
        if table is not None:
            name = TableName.parse(
                table, default_schema=self.default_schema, schema=selection.get("schema")
            )
        elif not isinstance(query, str) or not query.strip():
            raise StorageError(f"{where}: query must be SQL text")
        elif "schema" in selection:
            raise StorageError(f"{where}: `schema` goes with `table`, not with `query`")
        column = selection.get("partitionColumn")
        if column is not None:
            check_name(column, what=f"{where}: partitionColumn")
        numbers = {}
        for key in ("numPartitions", "lowerBound", "upperBound", "fetchSize"):
            value = selection.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise StorageError(f"{where}: {key} must be a whole number, not {value!r}")
            numbers[key] = value
        if column is None and any(numbers[k] is not None for k in numbers if k != "fetchSize"):
            raise StorageError(f"{where}: numPartitions and bounds go with a partitionColumn")
        if (numbers["lowerBound"] is None) != (numbers["upperBound"] is None):
            raise StorageError(f"{where}: give both lowerBound and upperBound, or neither")
        if numbers["numPartitions"] is not None and numbers["numPartitions"] < 1:
            raise StorageError(f"{where}: numPartitions must be at least 1")
        if numbers["fetchSize"] is not None and numbers["fetchSize"] < 1:
            raise StorageError(f"{where}: fetchSize must be at least 1")
        return ScanSource(
            name,
            query if name is None else None,
            column,
            numbers["numPartitions"],
            numbers["lowerBound"],
            numbers["upperBound"],
            numbers["fetchSize"] or 10_000,
        )

    def capabilities(self, selection: Mapping[str, Any] | None = None) -> Capabilities:
        return Capabilities(**{**self.capabilities_base.__dict__, "can_write": self.writable})

    def list_files(self, selection: Mapping[str, Any]) -> list[Any]:
        raise StorageError(f"{self.label} holds tables, not files")

    def format_of(self, selection: Mapping[str, Any]) -> str:
        return "jdbc"

    def check_selection(self, selection: Mapping[str, Any]) -> None:
        self.scan_source(selection)

    def check_target(self, target: Mapping[str, Any] | None) -> None:
        from engine.storage.jdbc.write import TableTarget

        TableTarget.parse(target, engine=self)

    def table_label(self, table: TableName) -> str:
        """``database.schema.table``: Dagster's ``dagster/table_name``."""
        return f"{self.database}.{table.dotted}"

    # -- the local executor (ADBC) -----------------------------------------------------------

    def read_batches(self, selection: Mapping[str, Any], **kwargs: Any) -> Any:
        """See :func:`engine.storage.jdbc.adbc.read_batches`."""
        from engine.storage.jdbc.adbc import read_batches

        return read_batches(self, self.scan_source(selection), **kwargs)

    def write_batches(self, target: Mapping[str, Any] | None, batches: Any, schema: Any) -> Any:
        """See :func:`engine.storage.jdbc.write.write_batches`."""
        from engine.storage.jdbc.write import TableTarget, write_batches

        return write_batches(self, TableTarget.parse(target, engine=self), batches, schema)

    def scan_statistics(self, selection: Mapping[str, Any]) -> Any:
        """What the planner asks of a scan: its columns (the ones filters may be pushed on)
        and the table's estimated rows (PostgreSQL's statistics; None for a query)."""
        from engine.storage.jdbc.adbc import estimated_rows
        from engine.storage.statistics import ScanStatistics

        source = self.scan_source(selection)
        schema = self.scan_columns(selection)
        rows = estimated_rows(self, source.table) if source.table is not None else None
        return ScanStatistics(
            format="jdbc",
            file_count=1,
            total_bytes=0 if rows is None else rows * 8 * max(len(schema), 1),
            row_count=rows,
            capabilities=self.capabilities(selection),
            columns={f.name: f.type for f in schema},
        )

    def scan_columns(self, selection: Mapping[str, Any]) -> Any:
        """The columns a selection reads, as an Arrow schema (engine types)."""
        from engine.storage.jdbc.adbc import source_schema

        return source_schema(self, self.scan_source(selection))
