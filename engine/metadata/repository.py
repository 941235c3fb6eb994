"""The metadata repository (seed 000): which tables exist, their schema, statistics and what each
storage engine can push down. The query parser asks it to resolve names; the planner can ask it
for statistics.

A table is one of

* a **registered** name: a location of a storage engine (``register_table``) or a view
  (``register_view``), persisted in ``<root>/_drill_metadata/catalog.json`` of the first ``fs``
  engine (or a ``catalog_file`` given), so a new process sees it;
* a **store target** of a plan (``from_plans``): named by its target path;
* any location written ``<engine>.<path>`` (Drill's ``dfs.`logs/2024```).

Schemas come from the last store's written schema (:mod:`engine.storage.version_file`), else from
the scan schema tracker on a sample of the files (a provided ``schema`` in the selection included);
a table whose data does not exist yet has an unknown schema (None).

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> _ = (root / "emp.json").write_text('{"name": "a", "dept": 1}\\n')
>>> repo = MetadataRepository({"lake": {"type": "fs", "root": str(root)}})
>>> repo.register_table("employees", "lake", {"path": "emp.json"})
>>> table = repo.resolve(["EMPLOYEES"])
>>> table.name, repo.schema(table).names, repo.statistics(table).file_count
('employees', ['name', 'dept'], 1)
>>> MetadataRepository({"lake": {"type": "fs", "root": str(root)}}).resolve(["employees"]).engine
'lake'
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from engine.errors import DrillError, StorageError
from engine.metadata.sampling import sample_schema
from engine.storage.catalog import CatalogEngine, CatalogTarget
from engine.storage.engines import Capabilities, FsEngine, StorageEngine, create_engine
from engine.storage.paths import resolve_under_root
from engine.storage.version_file import (
    METADATA_DIR,
    VersionMetadata,
    metadata_path,
    read_version_metadata,
)

CATALOG_FILE = "catalog.json"


@dataclass(frozen=True)
class TableInfo:
    """A table the repository knows: where it is read from, or the SQL of a view.

    ``record_column`` names a table whose rows are one map column holding the whole record (the
    ``_MAP`` of Drill's early SQL layer); otherwise the record's top-level fields are its columns.
    """

    name: str
    engine: str | None = None
    selection: Mapping[str, Any] | None = None
    view_sql: str | None = None
    record_column: str | None = None
    kind: str = "location"  # location | registered | store | view

    @property
    def is_view(self) -> bool:
        return self.view_sql is not None


@dataclass(frozen=True)
class TableStatistics:
    """Size of a table: rows (None when unknown), bytes, files, partitions, committed version."""

    row_count: int | None
    total_bytes: int
    file_count: int
    partitions: tuple[str, ...] = ()
    version: str | None = None


def recorded_metadata(
    engine: StorageEngine, selection: Mapping[str, Any]
) -> VersionMetadata | None:
    """What the last store to ``selection``'s location of ``engine`` recorded (persisted under
    ``<root>/_drill_metadata/``), if a store wrote exactly that location; else None.

    The planner's statistics and :meth:`MetadataRepository.statistics` read the same record.
    """
    if isinstance(engine, CatalogEngine):
        try:
            record = engine.read_record(engine.table_name(selection))
        except DrillError:
            return None
        return None if record is None else record.metadata
    if not isinstance(engine, FsEngine):
        return None
    try:
        location = resolve_under_root(
            engine.root, str(selection.get("path", "")), engine_name=engine.name
        )
    except DrillError:
        return None
    return read_version_metadata(location, metadata_path(engine.root, location))


@dataclass
class _Catalog:
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    views: dict[str, str] = field(default_factory=dict)


class MetadataRepository:
    """Answers which tables exist, their schema and statistics, and engine capabilities.

    ``storage`` is a plan's ``storage`` mapping (name -> engine config); a relative ``fs`` root is
    relative to ``base_dir``. ``classpath`` is the data roots of ``classpath`` engines.
    """

    def __init__(
        self,
        storage: Mapping[str, Mapping[str, Any]],
        *,
        classpath: Sequence[Path | str] = (),
        base_dir: Path | None = None,
        catalog_file: Path | None = None,
    ) -> None:
        self.storage = {name: dict(config) for name, config in storage.items()}
        self.classpath = [Path(p) for p in classpath]
        self.base_dir = base_dir
        self._engines: dict[str, StorageEngine] = {}
        self._stores: dict[str, TableInfo] = {}
        self._schemas: dict[tuple[str, str], pa.Schema | None] = {}
        self.catalog_file = catalog_file or self._default_catalog_file()
        self._catalog = self._load_catalog()

    @classmethod
    def from_plans(
        cls,
        plans: Sequence[Any],
        *,
        classpath: Sequence[Path | str] = (),
        base_dir: Path | None = None,
    ) -> MetadataRepository:
        """A repository over the engines of ``plans`` (LogicalPlans of one directory), with every
        ``fs`` store target as a table named by its path (``out/sales`` is ``out/sales``, and
        ``sales`` when that is unambiguous). The first plan defining an engine name wins."""
        from engine.plan import Store

        storage: dict[str, dict[str, Any]] = {}
        for plan in plans:
            for name, config in plan.storage.items():
                storage.setdefault(name, config.to_dict())
        repo = cls(storage, classpath=classpath, base_dir=base_dir)
        short: dict[str, list[TableInfo]] = {}
        for plan in plans:
            for op in plan.sinks():
                if not isinstance(op, Store) or not isinstance(op.target, Mapping):
                    continue
                if storage.get(op.storage_engine, {}).get("type") == "catalog":
                    repo._add_catalog_store(op.storage_engine, op.target)
                    continue
                if storage.get(op.storage_engine, {}).get("type") != "fs":
                    continue
                path = str(op.target.get("path", "")).strip("/")
                if not path or "${" in path:
                    continue
                selection = {"path": path}
                if "format" in op.target or "type" in op.target:
                    selection["format"] = op.target.get("format", op.target.get("type"))
                info = TableInfo(path, op.storage_engine, selection, kind="store")
                repo._stores[path.lower()] = info
                short.setdefault(path.rsplit("/", 1)[-1].lower(), []).append(info)
        for name, infos in short.items():
            if len(infos) == 1 and name not in repo._stores:
                repo._stores[name] = infos[0]
        return repo

    def _add_catalog_store(self, engine_name: str, target: Mapping[str, Any]) -> None:
        """A catalog store's table, named ``database.table`` (and ``table`` where no other
        table has that name)."""
        engine = self.engine(engine_name)
        try:
            name = str(CatalogTarget.parse(target, engine=engine).table)  # type: ignore[arg-type]
        except DrillError:
            return  # the store reports it
        info = TableInfo(name, engine_name, {"table": name}, kind="store")
        self._stores.setdefault(name, info)
        self._stores.setdefault(name.split(".")[1], info)

    def _catalog_table(self, parts: Sequence[str]) -> TableInfo | None:
        """``engine.database.table`` or ``engine.table`` of a catalog engine, or a
        ``database.table`` that a catalog engine has recorded writing."""
        if len(parts) >= 2 and self.storage.get(parts[0], {}).get("type") == "catalog":
            name = ".".join(parts[1:])
            return TableInfo(f"{parts[0]}.{name}", parts[0], {"table": name}, kind="location")
        if len(parts) != 2:
            return None
        stored = self._stores.get(".".join(parts).lower())
        if stored is not None and stored.selection is not None and "table" in stored.selection:
            return stored
        for engine_name, config in self.storage.items():
            if config.get("type") != "catalog":
                continue
            engine = self.engine(engine_name)
            try:
                name = engine.table_name({"table": ".".join(parts)})  # type: ignore[attr-defined]
            except DrillError:
                return None
            if engine.read_record(name) is not None:  # type: ignore[attr-defined]
                return TableInfo(str(name), engine_name, {"table": str(name)}, kind="location")
        return None

    def with_storage(self, storage: Mapping[str, Mapping[str, Any]]) -> MetadataRepository:
        """This repository's store tables over its engines plus ``storage`` (which wins on a name)."""
        repo = MetadataRepository(
            {**self.storage, **storage}, classpath=self.classpath, base_dir=self.base_dir
        )
        repo._stores = dict(self._stores)
        return repo

    # -- engines ------------------------------------------------------------------------------

    def engine(self, name: str) -> StorageEngine:
        """The storage engine ``name``, built once."""
        if name not in self._engines:
            if name not in self.storage:
                known = ", ".join(sorted(self.storage)) or "none"
                raise StorageError(f"unknown storage engine '{name}' (known: {known})")
            settings = dict(self.storage[name])
            key = {"fs": "root", "catalog": "warehouse"}.get(str(settings.get("type")), "")
            root = settings.get(key)
            relative = isinstance(root, str) and not (
                Path(root).is_absolute() or root.startswith("file:")
            )
            if relative and self.base_dir:
                settings[key] = str((self.base_dir / str(root)).resolve())
            self._engines[name] = create_engine(name, settings, classpath=self.classpath)
        return self._engines[name]

    def capabilities(self, engine: str, selection: Mapping[str, Any] | None = None) -> Capabilities:
        """What ``engine`` can do and push down (projection, filters, limit) for ``selection``."""
        return self.engine(engine).capabilities(selection)

    # -- registration -------------------------------------------------------------------------

    def register_table(
        self,
        name: str,
        engine: str,
        selection: Mapping[str, Any],
        *,
        record_column: str | None = None,
    ) -> None:
        """Name a location of ``engine`` (persisted with the catalog)."""
        self.engine(engine).check_selection(selection)
        body: dict[str, Any] = {"engine": engine, "selection": dict(selection)}
        if record_column:
            body["record_column"] = record_column
        self._catalog.tables[name] = body
        self._catalog.views.pop(name, None)
        self._save_catalog()

    def register_view(self, name: str, sql: str) -> None:
        """Name a SQL query; it is expanded where it is used (persisted with the catalog)."""
        self._catalog.views[name] = sql
        self._catalog.tables.pop(name, None)
        self._save_catalog()

    # -- lookup -------------------------------------------------------------------------------

    def resolve(self, parts: Sequence[str]) -> TableInfo | None:
        """The table a SQL name denotes: ``name`` (case-insensitive) or ``engine.path...``."""
        if not parts:
            return None
        if len(parts) == 1:
            found = self._registered(parts[0])
            if found is not None:
                return found
        catalog = self._catalog_table(parts)
        if catalog is not None:
            return self._stores.get(catalog.selection["table"].lower(), catalog)  # type: ignore[index]
        if len(parts) >= 2 and parts[0] in self.storage:
            path = "/".join(parts[1:])
            store = self._stores.get(path.strip("/").lower())
            if store is not None and store.engine == parts[0]:
                return store
            return TableInfo(f"{parts[0]}.{path}", parts[0], {"path": path})
        return None

    def tables(self) -> list[TableInfo]:
        """Every named table: registered locations, views and known store targets."""
        named = {t.name.lower(): t for t in self._stores.values()}
        for name in [*self._catalog.tables, *self._catalog.views]:
            found = self._registered(name)
            if found is not None:
                named[name.lower()] = found
        return sorted(named.values(), key=lambda t: t.name.lower())

    def _registered(self, name: str) -> TableInfo | None:
        lowered = name.lower()
        for key, body in self._catalog.tables.items():
            if key.lower() == lowered:
                return TableInfo(
                    key,
                    body["engine"],
                    body["selection"],
                    record_column=body.get("record_column"),
                    kind="registered",
                )
        for key, sql in self._catalog.views.items():
            if key.lower() == lowered:
                return TableInfo(key, view_sql=sql, kind="view")
        return self._stores.get(lowered)

    # -- schema and statistics ----------------------------------------------------------------

    def stored(self, table: TableInfo) -> VersionMetadata | None:
        """What the last store to this table's location recorded, if a store wrote it."""
        if table.engine is None or table.selection is None:
            return None
        return recorded_metadata(self.engine(table.engine), table.selection)

    def schema(self, table: TableInfo) -> pa.Schema | None:
        """The table's columns: the last store's written schema, else a sample read by the scan
        schema tracker; None when there is no data yet (or for a view: ask the SQL layer)."""
        if table.is_view or table.engine is None or table.selection is None:
            return None
        key = (table.engine, json.dumps(table.selection, sort_keys=True, default=str))
        if key in self._schemas:
            return self._schemas[key]
        stored = self.stored(table)
        schema = stored.schema if stored is not None else None
        if schema is None:
            try:
                engine = self.engine(table.engine)
                schema = (
                    sample_schema(engine, table.selection)
                    if engine.list_files(table.selection)
                    else None
                )
            except DrillError:
                schema = None  # not written yet, or unreadable: unknown, checked when it runs
        self._schemas[key] = schema
        return schema

    def statistics(self, table: TableInfo) -> TableStatistics | None:
        """Rows, bytes, files and partitions: recorded by the last store, else listed (rows
        only where the format keeps them)."""
        stored = self.stored(table)
        if stored is not None:
            return TableStatistics(
                stored.row_count,
                stored.total_bytes,
                stored.file_count,
                stored.partitions,
                stored.version,
            )
        if table.engine is None or table.selection is None:
            return None
        try:
            stats = self.engine(table.engine).statistics(table.selection)
        except DrillError:
            return None
        return TableStatistics(stats.row_count, stats.total_bytes, stats.file_count)

    # -- persistence --------------------------------------------------------------------------

    def _default_catalog_file(self) -> Path | None:
        for name, config in self.storage.items():
            if config.get("type") == "fs" and config.get("root"):
                try:
                    root = self.engine(name).root  # type: ignore[attr-defined]
                except DrillError:
                    continue
                return Path(root) / METADATA_DIR / CATALOG_FILE
        return None

    def _load_catalog(self) -> _Catalog:
        if self.catalog_file is None or not self.catalog_file.is_file():
            return _Catalog()
        try:
            body = json.loads(self.catalog_file.read_text())
        except ValueError as err:
            raise StorageError(
                f"the metadata catalog is not valid JSON: {err}",
                file=str(self.catalog_file),
                hint="fix or delete the file; registrations are kept there",
            ) from None
        return _Catalog(dict(body.get("tables", {})), dict(body.get("views", {})))

    def _save_catalog(self) -> None:
        if self.catalog_file is None:
            return
        self.catalog_file.parent.mkdir(parents=True, exist_ok=True)
        staged = self.catalog_file.with_name(f".{CATALOG_FILE}.{os.getpid()}.tmp")
        body = {"tables": self._catalog.tables, "views": self._catalog.views}
        staged.write_text(json.dumps(body, indent=1, sort_keys=True))
        os.replace(staged, self.catalog_file)
