"""A plans directory, read once: its plans, their stores and scans, and the lineage between them.

A scan on an ``fs`` engine whose selection lies at or under another plan's store target (the
engine roots resolved to the same directory) reads that store: it becomes a dependency on the
store's asset. Every other scan reads a *source*: one per distinct location, whichever plans read
it. ``${name}`` parameters, and anything after them in a path, are left out of locations, so
``events/${day}`` reads the source ``events``.

>>> import tempfile, json, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> plan = {"storage": {"fs": {"type": "fs", "root": "data"}}, "query": [
...     {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "r", "selection": {"path": "raw/${day}"}},
...     {"@id": 2, "op": "store", "input": 1, "storageengine": "fs", "target": {"path": "clean"}}]}
>>> _ = (d / "clean.json").write_text(json.dumps(plan))
>>> project = load_project(d)
>>> [p.name for p in project.plans], [s.target_path for s in project.plans[0].stores]
(['clean'], ['clean'])
>>> [s.parts for s in project.sources]
[('data', 'raw')]
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from drill_dagster.allowed_roots import allowed_root_dirs, is_allowed
from drill_dagster.allowed_roots import describe as describe_allowed
from drill_dagster.errors import DrillDefinitionsError
from drill_dagster.outline import OperatorOutline, PlanOutline
from drill_dagster.outline_cache import OutlineCache, file_digest
from drill_dagster.project import PROJECT_FILE, PlanConfig, ProjectConfig, StoreConfig
from drill_dagster.project import load_project_config as _load_config
from engine.errors import DrillError, PlanError, PlanIssue
from engine.lineage import StoreLineage, column_lineage
from engine.plan import LogicalPlan, Operator, Scan, Store, parse_plan
from engine.plan.source import read_text
from engine.storage.paths import parse_root

PLAN_SUFFIXES = (".json", ".hjson", ".sql")  # .sql: a step in SQL (engine.sql.sql_file)
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")
_PARAM = re.compile(r"\$\{")
_GLOB = re.compile(r"[*?\[{]")


@lru_cache(maxsize=4096)
def safe_name(text: str) -> str:
    """``text`` as a Dagster name: letters, digits and ``_`` (others become ``_``).

    >>> safe_name("customers.csv"), safe_name("2024-01")
    ('customers_csv', '_2024_01')
    """
    name = _NOT_NAME.sub("_", text)
    return f"_{name}" if not name or name[0].isdigit() else name


@lru_cache(maxsize=4096)  # asked several times per plan for the same paths as plans load
def location_parts(path: str) -> tuple[str, ...]:
    """The fixed leading components of a selection or target path: up to a parameter or glob.

    >>> location_parts("/events/${day}/x.json"), location_parts("a/b/*.csv"), location_parts("./a//b")
    (('events',), ('a', 'b'), ('a', 'b'))
    """
    parts: list[str] = []
    for part in path.replace("\\", "/").split("/"):
        if _PARAM.search(part) or _GLOB.search(part):
            break
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return tuple(parts)


@dataclass(frozen=True)
class TableRef:
    """A table a store writes or a scan reads: of a ``jdbc`` engine's database, or of the Spark
    session's catalog (a ``catalog`` engine)."""

    engine_type: str  # "jdbc" | "catalog"
    server: str  # a jdbc engine's host:port; the catalog's name for a catalog table
    parts: tuple[str, ...]  # database, schema, table (jdbc); database, table (catalog)

    @property
    def name(self) -> str:
        """Dagster's ``dagster/table_name``: ``database.schema.table`` of a jdbc table,
        ``spark_catalog.database.table`` of a catalog table."""
        if self.engine_type == "catalog":
            return ".".join((self.server, *self.parts))
        return ".".join(self.parts)

    @property
    def where(self) -> str:
        """Where the table lives, for descriptions."""
        if self.engine_type == "catalog":
            return "the Spark session's catalog"
        return self.server


SESSION_CATALOG = "spark_catalog"
"""The name Spark gives the session's catalog: the first part of a catalog table's name."""


def table_ref(plan: DrillPlan, engine_name: str, mapping: Any) -> TableRef | None:
    """The table a ``jdbc`` or ``catalog`` scan's selection or store's target names (None: not
    a table, or a name the run will report with where)."""
    config = plan.outline.storage.get(engine_name)
    if config is None or not isinstance(mapping, dict) or mapping.get("table") is None:
        return None
    if config["type"] == "catalog":
        from engine.storage.catalog import parse_table_name

        database = str(config.get("database", "default")).lower()
        try:
            name = str(parse_table_name(mapping["table"], database=database, where="catalog"))
        except DrillError:
            return None
        return TableRef("catalog", SESSION_CATALOG, tuple(name.split(".")))
    if config["type"] != "jdbc":
        return None
    from engine.storage.jdbc import JdbcEngine, TableName

    try:
        settings = {k: v for k, v in config.items() if k not in ("type", "name")}
        engine = JdbcEngine.from_config(engine_name, settings)
        name = TableName.parse(
            mapping["table"], default_schema=engine.default_schema, schema=mapping.get("schema")
        )
    except DrillError:
        return None  # the run reports it, with where
    return TableRef(
        "jdbc", f"{engine.host}:{engine.port}", (engine.database, name.schema, name.table)
    )


@dataclass(eq=False)
class DrillStore:
    """One Store operator of a plan: the asset it materializes."""

    plan: DrillPlan
    id: str
    engine_type: str
    location: Path | None
    target_path: str | None
    format: str
    partition_by: tuple[str, ...]
    config: StoreConfig
    table: TableRef | None = None

    @property
    def op(self) -> Store:
        """The Store operator (the plan is parsed for it, if it is not yet)."""
        return self.plan.logical.operator(self.id)  # type: ignore[return-value]

    @property
    def outline(self) -> OperatorOutline:
        """The Store operator's outline: its JSON and memo, without parsing the plan."""
        return self.plan.outline.operator(self.id)

    @property
    def node_name(self) -> str:
        return self.plan.node_name(self.id)

    @property
    def output_name(self) -> str:
        """The name of this store's output in the plan's graph: ``<plan>__<op>_<id>``."""
        return f"{self.plan.name}__{self.node_name}"

    @property
    def lineage(self) -> StoreLineage:
        return self.plan.lineage[self.id]

    @property
    def upstream_scans(self) -> list[DrillScan]:
        """The scans this store's records come from."""
        ancestors = self.plan.ancestors(self.id)
        return [scan for scan in self.plan.scans if scan.id in ancestors]


@dataclass(eq=False)
class DrillSource:
    """A location read by scans that no plan writes: an external source asset."""

    engine_type: str
    root: Path | None
    path: str
    parts: tuple[str, ...]
    format: str | None
    scans: list[DrillScan] = field(default_factory=list)
    table: TableRef | None = None

    @property
    def location(self) -> Path | None:
        return self.root.joinpath(*self.parts[1:]) if self.root is not None else None


@dataclass(eq=False)
class DrillScan:
    """One Scan operator and what it reads: another plan's store, or a source."""

    plan: DrillPlan
    id: str
    engine_type: str
    root: Path | None
    path: str
    format: str | None
    upstream: DrillStore | None = None
    source: DrillSource | None = None
    table: TableRef | None = None

    @property
    def op(self) -> Scan:
        """The Scan operator (the plan is parsed for it, if it is not yet)."""
        return self.plan.logical.operator(self.id)  # type: ignore[return-value]

    @property
    def location(self) -> Path | None:
        if self.root is None:
            return None
        return self.root.joinpath(*location_parts(self.path))


@dataclass(eq=False)
class DrillPlan:
    """A plan file with its settings from ``drill_project.yaml``: its outline (what its
    definitions need) and the parsed plan (``logical``). A load that parsed the file (or
    translated a SQL step) sets ``logical``; one that read a kept outline parses ``text``, the
    file's text as the load read it, when a step first needs the plan."""

    name: str
    path: Path
    outline: PlanOutline
    config: PlanConfig
    roots: dict[str, Path]
    text: str | None = field(default=None, repr=False)
    stores: list[DrillStore] = field(default_factory=list)
    scans: list[DrillScan] = field(default_factory=list)
    _ancestors: dict[str, frozenset[str]] = field(default_factory=dict, repr=False)

    @cached_property
    def logical(self) -> LogicalPlan:
        """The parsed plan, from the plan file's text as it was when the plan was loaded."""
        if self.text is None:  # load_plan sets logical for every plan it keeps no text of
            raise DrillDefinitionsError(f"{self.path}: the plan was loaded without its text")
        return parse_plan(self.text, source_name=str(self.path))

    def node_name(self, op: Operator | OperatorOutline | str) -> str:
        """The operator's node in the plan's graph, what the run's graph and step keys show:
        ``<op>_<id>`` (``scan_1``; the step key is ``<plan>.scan_1``)."""
        return self._node_names[op if isinstance(op, str) else op.id]

    @cached_property
    def _node_names(self) -> dict[str, str]:
        return {
            op.id: f"{op.op}_{safe_name(op.id).lstrip('_') or 'op'}"
            for op in self.outline.operators
        }

    @cached_property
    def lineage(self) -> dict[str, StoreLineage]:
        return column_lineage(self.logical)

    def ancestors(self, op_id: str) -> frozenset[str]:
        """``op_id`` and every operator it reads from, directly or not."""
        if op_id not in self._ancestors:
            self._ancestors[op_id] = self.outline.ancestors(op_id)
        return self._ancestors[op_id]

    def store(self, op_id: str) -> DrillStore:
        return next(s for s in self.stores if s.id == op_id)

    @property
    def memo(self) -> str | None:
        """The plan's own description (``description`` in ``drill_project.yaml``), else None."""
        return self.config.description or None

    @property
    def generator(self) -> str | None:
        """What generated the plan file (its head's ``generator.info``), else None."""
        return self.outline.generator


@dataclass(eq=False)
class DrillProject:
    """Every plan of a directory, the stores they write and the sources they read."""

    plans_dir: Path
    config: ProjectConfig
    plans: list[DrillPlan]
    sources: list[DrillSource]

    def plan(self, name: str) -> DrillPlan:
        for plan in self.plans:
            if plan.name == name:
                return plan
        raise KeyError(name)

    def stores(self) -> Iterator[DrillStore]:
        for plan in self.plans:
            yield from plan.stores


def plan_files(plans_dir: Path) -> list[Path]:
    """The plan files of a directory (``*.json``, ``*.hjson``), sorted by name."""
    return sorted(p for p in plans_dir.iterdir() if p.is_file() and p.suffix in PLAN_SUFFIXES)


def load_project(
    plans_dir: Path | str,
    *,
    config: ProjectConfig | None = None,
    config_path: Path | None = None,
    allowed_roots: Sequence[Path | str] | None = None,
    data_dirs: Sequence[Path | str] = (),
) -> DrillProject:
    """Parse every plan of ``plans_dir`` and link scans to stores and sources.

    Every ``fs`` root must lie under ``allowed_roots`` (else the project file's, else the project
    directory or ``data_dirs``: :mod:`drill_dagster.allowed_roots`). Every bad plan is reported
    at once, each with its file and JSON paths, as a
    :class:`~drill_dagster.errors.DrillDefinitionsError`.
    """
    plans_dir = Path(plans_dir).resolve()
    # memoised within one load: a root may be re-pointed between loads
    _resolved_root.cache_clear()
    _root_allowed.cache_clear()
    if not plans_dir.is_dir():
        raise DrillDefinitionsError(f"plans directory not found: {plans_dir}")
    if config is None:
        config_path = config_path or plans_dir / PROJECT_FILE
        config = _load_config(config_path)
    configured = allowed_roots if allowed_roots is not None else config.allowed_roots
    allowed = allowed_root_dirs(plans_dir, configured, data_dirs)
    problems: list[str] = []
    plans: list[DrillPlan] = []
    outlines = OutlineCache.for_plans(plans_dir)
    for path in plan_files(plans_dir):
        try:
            plan = load_plan(path, config, outlines)
            check_roots_allowed(plan, allowed)
            plans.append(plan)
        except DrillError as err:
            problems.append(str(err))
    outlines.save()
    names = [plan.name for plan in plans]
    for name in sorted({n for n in names if names.count(n) > 1}):
        files = ", ".join(p.path.name for p in plans if p.name == name)
        problems.append(f"{plans_dir}: plans {files} have the same name '{name}'; rename one")
    settings: list[str] = []
    stems = {plan.path.stem for plan in plans} | set(names)
    for name in sorted(set(config.plans) - stems):
        known = ", ".join(names) or "none"
        settings.append(f"plans.{name}: no plan file {name}.json in {plans_dir} (plans: {known})")
    for plan in plans:
        settings.extend(unknown_store_settings(plan))
        unused = unused_partition_param(plan)
        if unused:
            warnings.warn(f"{config_path or plans_dir / PROJECT_FILE}: {unused}", stacklevel=2)
    if settings and not problems:
        count = f"{len(settings)} problem" + ("s" if len(settings) != 1 else "")
        body = "\n".join(f"  {line}" for line in settings)
        problems.append(f"{config_path or plans_dir / PROJECT_FILE}: {count}\n{body}")
    if problems:
        raise DrillDefinitionsError("\n".join(problems))
    sources = _link(plans)
    return DrillProject(plans_dir, config, plans, sources)


def load_plan(path: Path, config: ProjectConfig, outlines: OutlineCache | None = None) -> DrillPlan:
    """One plan file, with its stores and scans (not yet linked): parsed and validated, or, when
    ``outlines`` holds the outline of these very bytes, only outlined (parsed when a step needs
    it). A SQL step is always translated again: its tables resolve through other files."""
    logical, text = None, None
    if path.suffix == ".sql":
        logical = _parse(_sql_plan(path), path)
        outline = PlanOutline.of(logical)
    else:
        text = read_text(path, str(path))
        digest = file_digest(text.encode())
        outline = outlines.get(path.name, digest) if outlines is not None else None
        if outline is None:
            logical = _parse(text, path)
            outline = PlanOutline.of(logical)
            if outlines is not None:
                outlines.put(path.name, digest, outline)
    name = safe_name(path.stem)
    plan_config = config.plan(path.stem) if path.stem in config.plans else config.plan(name)
    plan = DrillPlan(name, path, outline, plan_config, _roots(outline, path), text)
    if logical is not None:
        plan.logical = logical  # parsed already: the steps use it
    for op in outline.operators:
        if op.op == "store":
            plan.stores.append(_store(plan, op))
    for op in outline.operators:
        if op.op == "scan":
            plan.scans.append(_scan(plan, op))
    return plan


def _parse(source: str | dict[str, Any], path: Path) -> LogicalPlan:
    try:
        return parse_plan(source, source_name=str(path))
    except PlanError as err:
        raise err if err.source else err.with_source(str(path)) from None


def check_roots_allowed(plan: DrillPlan, allowed: Sequence[Path]) -> None:
    """A PlanError naming the plan file and each ``fs`` root outside ``allowed``."""
    issues = [
        PlanIssue(
            f"the root {root} of storage engine '{name}' is outside the directories this code "
            f"location allows ({describe_allowed(allowed)}); add it to allowed_roots in "
            f"{PROJECT_FILE} if it is meant",
            path=f"$.storage.{name}.root",
        )
        for name, root in plan.roots.items()
        if not _root_allowed(root, tuple(allowed))
    ]
    issues += [
        PlanIssue(
            f"the warehouse {warehouse} of storage engine '{name}' is outside the directories "
            f"this code location allows ({describe_allowed(allowed)}); add it to allowed_roots "
            f"in {PROJECT_FILE} if it is meant",
            path=f"$.storage.{name}.warehouse",
        )
        for name, warehouse in warehouses(plan).items()
        if not _root_allowed(warehouse, tuple(allowed))
    ]
    if issues:
        raise PlanError(issues, source=str(plan.path))


def _sql_plan(path: Path) -> dict[str, Any]:
    from engine.sql import sql_file_to_plan

    plan = sql_file_to_plan(path)
    if not any(op["op"] == "store" and op["storageengine"] != "queue" for op in plan["query"]):
        raise PlanError(f"{path}: a SQL step needs a store header, e.g. `-- store: lake.my_table`")
    return plan


def _roots(outline: PlanOutline, path: Path) -> dict[str, Path]:
    roots = {}
    for name, engine in outline.storage.items():
        root = engine.get("root")
        if engine["type"] != "fs" or not isinstance(root, str):
            continue
        try:
            roots[name] = _resolved_root(path.parent, root, name)
        except DrillError as err:
            raise PlanError(str(err), source=str(path)) from None
    return roots


def warehouses(plan: DrillPlan) -> dict[str, Path]:
    """The warehouse directories of the plan's catalog engines (where their tables are
    written), resolved like roots."""
    found = {}
    for name, engine in plan.outline.storage.items():
        warehouse = engine.get("warehouse")
        if engine["type"] != "catalog" or not isinstance(warehouse, str):
            continue
        try:
            found[name] = _resolved_root(plan.path.parent, warehouse, name)
        except DrillError as err:
            raise PlanError(str(err), source=str(plan.path)) from None
    return found


@lru_cache(maxsize=1024)
def _root_allowed(root: Path, allowed: tuple[Path, ...]) -> bool:
    # Memoised like _resolved_root: the plans of a directory share a few roots, and each check
    # resolves the root's links again.
    return is_allowed(root, allowed)


@lru_cache(maxsize=1024)
def _resolved_root(plan_dir: Path, root: str, engine_name: str) -> Path:
    """The directory an ``fs`` root names (relative roots: relative to the plan's directory).

    Memoised: the plans of a directory share a few roots, and resolving symlinks on every
    plan was a sixth of loading a thousand plans.
    """
    parsed = parse_root(root, engine_name=engine_name)
    if not Path(root).is_absolute() and not root.startswith("file:"):
        parsed = plan_dir / root
    return Path(os.path.normpath(parsed.resolve()))


def _store(plan: DrillPlan, op: OperatorOutline) -> DrillStore:
    engine = plan.outline.storage.get(op.engine) if op.engine is not None else None
    engine_type = engine["type"] if engine is not None else "unknown"
    target: dict[str, Any] = dict(op.mapping or {})
    path = target.get("path") if isinstance(target.get("path"), str) else None
    root = plan.roots.get(op.engine) if op.engine is not None else None
    location = root.joinpath(*location_parts(path)) if root is not None and path else None
    fmt = str(target.get("format", target.get("type", "parquet" if root else engine_type)))
    partition_by = target.get("partitionBy", target.get("partition_by", ()))
    partition_by = (partition_by,) if isinstance(partition_by, str) else tuple(partition_by or ())
    table = table_ref(plan, op.engine, target) if op.engine is not None else None
    if table is not None:
        fmt = "parquet" if table.engine_type == "catalog" else "table"
    store = DrillStore(
        plan, op.id, engine_type, location, path, fmt.lower(), partition_by, StoreConfig(), table
    )
    for name in store_setting_names(store):
        if name in plan.config.stores:
            store.config = plan.config.stores[name]
            break
    return store


def _scan(plan: DrillPlan, op: OperatorOutline) -> DrillScan:
    engine = plan.outline.storage.get(op.engine) if op.engine is not None else None
    engine_type = engine["type"] if engine is not None else "unknown"
    selection = op.mapping or {}
    path = selection.get("path") if isinstance(selection.get("path"), str) else ""
    fmt = selection.get("format", selection.get("type"))
    if engine_type == "jdbc" and isinstance(selection.get("query"), str):
        path = f"{plan.name}_query_{safe_name(op.id).lstrip('_')}"  # a query: its own source
    return DrillScan(
        plan,
        op.id,
        engine_type,
        plan.roots.get(op.engine) if op.engine is not None else None,
        path,
        str(fmt).lower() if fmt else None,
        table=table_ref(plan, op.engine, selection) if op.engine is not None else None,
    )


def store_setting_names(store: DrillStore) -> list[str]:
    """The names ``drill_project.yaml`` may give a store under ``stores``: ``@<id>``, its target
    path, and the path's fixed part (``clean`` for ``clean/day=${day}``)."""
    names = [f"@{store.id}"]
    if store.target_path:
        names += [store.target_path, store.target_path.strip("/")]
        names.append("/".join(location_parts(store.target_path)))
    return list(dict.fromkeys(n for n in names if n))


def unknown_store_settings(plan: DrillPlan) -> list[str]:
    """Keys of ``plans.<plan>.stores`` that name no store of the plan, as messages."""
    known = [name for store in plan.stores for name in store_setting_names(store)]
    problems = []
    for key in plan.config.stores:
        if key not in known:
            names = ", ".join(dict.fromkeys(k for k in known if not k.startswith("/"))) or "none"
            problems.append(
                f"plans.{plan.path.stem}.stores.{key}: {plan.path.name} has no store with that "
                f"target path or '@id' (stores: {names})"
            )
    return problems


def unused_partition_param(plan: DrillPlan) -> str | None:
    """A note when a partitioned plan never reads its partition parameter (every key would then
    run the same plan), else None."""
    config = plan.config.partitions
    if config is None:
        return None
    names = {config.param} | (
        {config.start_param, config.end_param} if config.range == "params" else set()
    )
    texts = [json.dumps(op.mapping) for op in plan.outline.operators if op.op in ("scan", "store")]
    if any(f"${{{name}}}" in text for text in texts for name in names):
        return None
    return (
        f"plans.{plan.path.stem}.partitions: {plan.path.name} uses no ${{{config.param}}} in a "
        "selection or store target, so every partition key runs the same plan"
    )


def _link(plans: list[DrillPlan]) -> list[DrillSource]:
    """Point each scan at the store it reads, or at a (shared) source."""
    # Keyed by the path's text: hashing Path objects (and each of their parents) was a
    # tenth of parsing a thousand plans.
    written: dict[str, list[DrillStore]] = {}
    for plan in plans:
        for store in plan.stores:
            if store.location is not None:
                written.setdefault(str(store.location), []).append(store)
    tables: dict[TableRef, list[DrillStore]] = {}
    for plan in plans:
        for store in plan.stores:
            if store.table is not None:
                tables.setdefault(store.table, []).append(store)
    sources: dict[tuple[str, ...], DrillSource] = {}
    for plan in plans:
        for scan in plan.scans:
            location = scan.location
            if location is not None:
                scan.upstream = _writer_of(location, written, plan)
            if scan.table is not None:
                writers = [s for s in tables.get(scan.table, ()) if s.plan is not plan]
                scan.upstream = writers[0] if writers else None
            if scan.upstream is not None:
                continue
            if scan.table is not None:
                parts = scan.table.parts
                identity = (scan.table.engine_type, scan.table.server, *parts)
            elif location is not None and scan.root is not None:
                parts = (scan.root.name or "root", *location_parts(scan.path))
                identity: tuple[str, ...] = (str(location),)
            else:
                parts = (scan.engine_type, *location_parts(scan.path))
                identity = (scan.engine_type, *parts)
            source = sources.get(identity)
            if source is None:
                source = DrillSource(
                    scan.engine_type, scan.root, scan.path, parts, scan.format, table=scan.table
                )
                sources[identity] = source
            source.scans.append(scan)
            scan.source = source
    return list(sources.values())


def _writer_of(
    location: Path, written: dict[str, list[DrillStore]], reader: DrillPlan
) -> DrillStore | None:
    """The store whose target is ``location`` or the nearest directory above it."""
    candidate, parent = str(location), ""
    while candidate != parent:
        stores = [s for s in written.get(candidate, ()) if s.plan is not reader]
        if stores:
            return stores[0]  # a plan reading its own output is no dependency on itself
        candidate, parent = os.path.dirname(candidate), candidate
    return None
