"""Storage engines, by the ``type`` a plan's ``storage`` map gives them.

======== ============================================================================
type     what it is
======== ============================================================================
fs       a root directory (``root``: a path or ``file:///...``); reads json, csv, text,
         parquet; stores parquet, json, csv (see :mod:`engine.storage.store`)
classpath read-only sample data; its roots are given at run time (``--classpath DIR``,
         ``run_plan(classpath=[...])``) and a path is looked up in each root in turn
console  a sink printing each record as a line of JSON (target ``{pipe: STD_OUT}``)
queue    a sink keeping records for the caller (target ``{number: 0}``)
jdbc     tables of a PostgreSQL database (see :mod:`engine.storage.jdbc`)
======== ============================================================================

A selection is ``{path, type|format, schema?, options?}``. The format is found under ``type`` or
``format`` (case-insensitive: ``json``, ``csv``, ``text``, ``parquet``, or a name from the
engine's ``formats`` config such as ``tsv``), else from the path's extension. Reader options go
under ``options`` (or at the top level); ``schema`` is passed through for the scan framework.

>>> fs = create_engine("fs1", {"type": "fs", "root": "file:///data"})
>>> fs.format_of({"path": "/donuts.json", "type": "JSON"}), fs.format_of({"path": "/t/*.tsv"})
('json', 'text')
>>> create_engine("m", {"type": "mock"})
Traceback (most recent call last):
...
engine.errors.StorageError: storage engine 'm' has the unknown type 'mock'; known types are catalog, classpath, console, fs, jdbc, queue
"""

from __future__ import annotations

import os
from abc import ABC
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, ClassVar

from engine.errors import StorageError
from engine.storage.formats import FORMAT_TYPES, reader_class
from engine.storage.formats.base import FormatReader
from engine.storage.formats.options import ReaderOptions, is_option_key
from engine.storage.formats.parquet import Footers, ParquetReader
from engine.storage.paths import (
    InputFile,
    has_glob,
    list_selection,
    literal_prefix,
    parse_root,
    resolve_under_root,
)
from engine.storage.sinks import PIPES, ConsoleSink, QueueSink

if TYPE_CHECKING:
    from engine.plan import LogicalPlan


@dataclass(frozen=True)
class FormatConfig:
    """A named format of an engine: its reader ``type``, file ``extensions``, default options."""

    type: str
    extensions: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)


MAX_TARGET_NAME_BYTES = 200

DEFAULT_FORMATS: dict[str, FormatConfig] = {
    "json": FormatConfig("json", ("json", "jsonl", "ndjson")),
    "csv": FormatConfig("csv", ("csv",)),
    "tsv": FormatConfig("text", ("tsv",), {"delimiter": "\t"}),
    "psv": FormatConfig("text", ("psv", "tbl"), {"delimiter": "|"}),
    "text": FormatConfig("text", ("txt",)),
    "parquet": FormatConfig("parquet", ("parquet",)),
}


@dataclass(frozen=True)
class Capabilities:
    """What an engine (and, given a selection, its format) can do; the planner reads this."""

    can_read: bool = False
    can_write: bool = False
    is_sink: bool = False
    can_push_projection: bool = False
    can_push_filters: bool = False
    can_push_limit: bool = False
    exact_row_counts: bool = False


@dataclass(frozen=True)
class Statistics:
    """Size of a selection: files, bytes, and rows where the format records them (parquet)."""

    file_count: int
    total_bytes: int
    row_count: int | None = None


@dataclass(frozen=True)
class Selection:
    """A scan's ``selection``, checked: path, format name (None: from the extension), schema
    (kept as written, for the scan framework) and reader option overrides."""

    path: str
    format: str | None = None
    schema: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)

    _KEYS: ClassVar[tuple[str, ...]] = (
        "path",
        "type",
        "format",
        "schema",
        "schemaMode",
        "unionType",
        "options",
    )

    @staticmethod
    def parse(selection: Mapping[str, Any] | None, *, engine: str) -> Selection:
        """Check a plan's selection mapping; unknown keys are errors naming the known ones."""
        where = f"selection of {engine}"
        if not isinstance(selection, Mapping):
            raise StorageError(f"{engine} needs a selection with a `path`, not {selection!r}")
        path = selection.get("path")
        if not isinstance(path, str) or not path:
            raise StorageError(f"{where} needs a `path` (a file, directory or glob)")
        fmt = selection.get("format", selection.get("type"))
        if (
            "format" in selection
            and "type" in selection
            and selection["format"] != selection["type"]
        ):
            raise StorageError(f"{where} gives both type and format, and they differ")
        if fmt is not None and not isinstance(fmt, str):
            raise StorageError(f"{where}: the format must be a name, not {fmt!r}")
        options = dict(selection.get("options") or {})
        for key, value in selection.items():
            if key in Selection._KEYS:
                continue
            if not is_option_key(key):
                known = ", ".join((*Selection._KEYS, "<reader options>"))
                raise StorageError(f"{where}: unknown key '{key}'; known keys are {known}")
            options[key] = value
        ReaderOptions.from_mapping(options, where=where)  # reject bad options now
        return Selection(path, fmt, selection.get("schema"), options)


class StorageEngine(ABC):
    """One configured storage engine. Scans use the reading half, stores the writing half."""

    type_name: ClassVar[str]
    capabilities_base: ClassVar[Capabilities] = Capabilities()
    config_keys: ClassVar[tuple[str, ...]] = ()

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    @property
    def label(self) -> str:
        """How messages name this engine."""
        return f"storage engine '{self.name}' ({self.type_name})"

    def capabilities(self, selection: Mapping[str, Any] | None = None) -> Capabilities:
        """What this engine can do (for a selection: with its format's pushdowns)."""
        return self.capabilities_base

    def list_files(self, selection: Mapping[str, Any]) -> list[InputFile]:
        """The files a selection names, sorted; see :func:`engine.storage.paths.list_selection`."""
        raise StorageError(f"{self.label} is a sink; it cannot be scanned")

    def format_of(self, selection: Mapping[str, Any]) -> str:
        """The format type of a selection: ``json``, ``csv``, ``text`` or ``parquet``."""
        raise StorageError(f"{self.label} is a sink; it cannot be scanned")

    def reader_options(self, selection: Mapping[str, Any]) -> ReaderOptions:
        """The options a reader of this selection gets (format defaults, then the selection's)."""
        raise StorageError(f"{self.label} is a sink; it cannot be scanned")

    def open_reader(self, file: InputFile, selection: Mapping[str, Any]) -> FormatReader:
        """A reader of one listed file of ``selection``."""
        return self.reader_factory(selection)(file)

    def reader_factory(self, selection: Mapping[str, Any]) -> Callable[[InputFile], FormatReader]:
        """What :meth:`open_reader` does for each file of ``selection``, with the format and its
        options found once (finding them can list the selection's directory)."""
        cls = reader_class(self.format_of(selection))
        options = self.reader_options(selection)
        return lambda file: cls(file, options)

    def statistics(self, selection: Mapping[str, Any]) -> Statistics:
        """File count, bytes and (parquet) row count of a selection."""
        raise StorageError(f"{self.label} is a sink; it has no statistics")

    def check_selection(self, selection: Mapping[str, Any]) -> None:
        """Reject a bad selection before anything runs (path, format, options); reads nothing."""
        raise StorageError(f"{self.label} is a sink; it cannot be scanned")

    def check_target(self, target: Mapping[str, Any] | None) -> None:
        """Reject a bad store target before anything runs; writes nothing."""
        raise StorageError(f"{self.label} cannot be written to")


# ---------------------------------------------------------------- file engines


class FileEngine(StorageEngine):
    """An engine over directories: ``fs`` (one root) and ``classpath`` (a search list)."""

    def __init__(
        self, name: str, roots: Sequence[Path], formats: Mapping[str, FormatConfig]
    ) -> None:
        super().__init__(name)
        self.roots = tuple(roots)
        self.formats = dict(formats)
        # A directory's format, found from its first file, once per engine: engines are built
        # per run, and checking, sizing and reading a scan each ask.
        self._first_extensions: dict[str, str | None] = {}
        self.footers = Footers()  # read by the planner's row counts, again by the scan

    def capabilities(self, selection: Mapping[str, Any] | None = None) -> Capabilities:
        base = self.capabilities_base
        if selection is None:
            return base
        parquet = self.format_of(selection) == "parquet"
        return Capabilities(
            can_read=True,
            can_write=base.can_write,
            can_push_projection=True,
            can_push_filters=parquet,
            can_push_limit=True,
            exact_row_counts=parquet,
        )

    def root_for(self, path: str) -> Path:
        """The root a selection path is read from."""
        return self.roots[0]

    def list_files(self, selection: Mapping[str, Any]) -> list[InputFile]:
        parsed = self._selection(selection)
        return list_selection(self.root_for(parsed.path), parsed.path, engine_name=self.name)

    def format_of(self, selection: Mapping[str, Any]) -> str:
        return self._format_config(self._selection(selection)).type

    def reader_options(self, selection: Mapping[str, Any]) -> ReaderOptions:
        parsed = self._selection(selection)
        config = self._format_config(parsed)
        where = f"selection of {self.label}"
        return ReaderOptions.from_mapping(config.options, where=where).updated(
            parsed.options, where=where
        )

    def statistics(self, selection: Mapping[str, Any]) -> Statistics:
        files = self.list_files(selection)
        rows = None
        if self.format_of(selection) == "parquet":
            rows = sum(self._parquet_reader(f).row_count() for f in files)
        return Statistics(len(files), sum(f.size for f in files), rows)

    def reader_factory(self, selection: Mapping[str, Any]) -> Callable[[InputFile], FormatReader]:
        make = super().reader_factory(selection)
        if self.format_of(selection) != "parquet":
            return make
        return lambda file: self._with_footers(make(file))

    def _parquet_reader(self, file: InputFile) -> ParquetReader:
        return self._with_footers(ParquetReader(file))

    def _with_footers(self, reader: Any) -> Any:
        reader.footers = self.footers
        return reader

    def check_selection(self, selection: Mapping[str, Any]) -> None:
        parsed = self._selection(selection)
        resolve_under_root(
            self.root_for(parsed.path), parsed.path, engine_name=self.name, role="selection path"
        )
        if parsed.format is not None:
            self._format_config(parsed)
        self.reader_options(selection)

    def _selection(self, selection: Mapping[str, Any]) -> Selection:
        return Selection.parse(selection, engine=self.label)

    def _format_config(self, selection: Selection) -> FormatConfig:
        if selection.format is not None:
            name = selection.format.lower()
            for known, config in self.formats.items():
                if known.lower() == name:
                    return config
            if name in FORMAT_TYPES:
                return FormatConfig(name)
            raise StorageError(
                f"unknown format '{selection.format}' in the selection of {self.label}; known "
                f"formats are {', '.join(sorted({*FORMAT_TYPES, *self.formats}))}"
            )
        extension = _extension(selection.path)
        if extension is None:
            extension = self._extension_of_first_file(selection)
        for config in self.formats.values():
            if extension is not None and extension in config.extensions:
                return config
        raise StorageError(
            f"the selection '{selection.path}' of {self.label} names no format and its "
            f"extension {'.' + extension if extension else '(none)'} is not a known one",
            hint=f"add `format`: one of {', '.join(FORMAT_TYPES)}",
        )

    def _extension_of_first_file(self, selection: Selection) -> str | None:
        if selection.path not in self._first_extensions:
            self._first_extensions[selection.path] = self._find_first_extension(selection)
        return self._first_extensions[selection.path]

    def _find_first_extension(self, selection: Selection) -> str | None:
        try:
            root = self.root_for(selection.path)
            target = resolve_under_root(root, selection.path, engine_name=self.name)
        except StorageError:
            return None
        if not (has_glob(selection.path) or os.path.isdir(target)):  # False on any OSError
            return None
        files = list_selection(root, selection.path, engine_name=self.name)
        return _extension(files[0].path.name) if files else None


class FsEngine(FileEngine):
    """A directory tree on the local filesystem (or mounted), readable and writable."""

    type_name: ClassVar[str] = "fs"
    capabilities_base: ClassVar[Capabilities] = Capabilities(can_read=True, can_write=True)
    config_keys: ClassVar[tuple[str, ...]] = (
        "root",
        "connection",
        "formats",
        "writable",
        "enabled",
    )

    def __init__(
        self,
        name: str,
        root: Path,
        formats: Mapping[str, FormatConfig] = DEFAULT_FORMATS,
        *,
        writable: bool = True,
    ) -> None:
        super().__init__(name, [root], formats)
        self.writable = writable

    @property
    def root(self) -> Path:
        return self.roots[0]

    def capabilities(self, selection: Mapping[str, Any] | None = None) -> Capabilities:
        caps = super().capabilities(selection)
        return Capabilities(**{**caps.__dict__, "can_write": self.writable})

    def resolve_target(self, path: str) -> Path:
        """Where a store target path points, checked to stay inside the root."""
        if not self.writable:
            raise StorageError(f"{self.label} is configured read-only (writable: false)")
        target = resolve_under_root(
            self.root, path, engine_name=self.name, role="target path", literal=True
        )
        if target == self.root or os.path.realpath(target) == os.path.realpath(self.root):
            raise StorageError(
                f"target path '{path}' would replace the root of {self.label}; "
                "give a directory below it"
            )
        name = target.name
        longest = max(target.relative_to(self.root).parts, key=lambda p: len(p.encode()))
        if len(longest.encode()) > MAX_TARGET_NAME_BYTES:
            raise StorageError(
                f"target path '{path[:40]}...' holds a name of {len(longest.encode())} bytes; "
                f"the limit is {MAX_TARGET_NAME_BYTES} (the file system's 255, less room for "
                "the store's hidden version and staging names)"
            )
        if name.startswith(".") or name.startswith("_"):
            raise StorageError(
                f"target path '{path}' names a hidden entry ('{name}'); scans skip those",
                hint="give the target a name that does not start with '.' or '_'",
            )
        return target

    def check_target(self, target: Mapping[str, Any] | None) -> None:
        from engine.storage.store import StoreTarget  # the store module builds on this one

        StoreTarget.parse(target, engine=self)


class ClasspathEngine(FileEngine):
    """Read-only sample data: a path is looked up in each classpath root, first match wins."""

    type_name: ClassVar[str] = "classpath"
    capabilities_base: ClassVar[Capabilities] = Capabilities(can_read=True)

    def root_for(self, path: str) -> Path:
        if not self.roots:
            raise StorageError(
                f"{self.label} has no data roots",
                hint="pass --classpath DIR to drill-dagster run, or classpath=[...] to run_plan",
            )
        for root in self.roots:
            target = resolve_under_root(root, path, engine_name=self.name, role="selection path")
            if os.path.lexists(root / literal_prefix(target.relative_to(root))):
                return root
        looked = ", ".join(str(r) for r in self.roots)
        raise StorageError(
            f"selection path '{path}' is not in the classpath of {self.label} (looked in {looked})"
        )

    def check_selection(self, selection: Mapping[str, Any]) -> None:
        parsed = self._selection(selection)
        for root in self.roots:  # an escape is an escape whichever root would serve the path
            resolve_under_root(root, parsed.path, engine_name=self.name, role="selection path")
        if parsed.format is not None:
            self._format_config(parsed)
        self.reader_options(selection)


# ---------------------------------------------------------------- sinks


class ConsoleEngine(StorageEngine):
    """A sink that prints records as JSON lines (``pipe``: ``STD_OUT`` or ``STD_ERR``)."""

    type_name: ClassVar[str] = "console"
    capabilities_base: ClassVar[Capabilities] = Capabilities(is_sink=True)

    def __init__(self, name: str, stream: Any = None) -> None:
        super().__init__(name)
        self.stream = stream

    def sink(self, target: Mapping[str, Any] | None) -> ConsoleSink:
        """The sink a store target names."""
        return ConsoleSink(self.stream, pipe=self._pipe(target))

    def check_target(self, target: Mapping[str, Any] | None) -> None:
        self._pipe(target)

    def _pipe(self, target: Mapping[str, Any] | None) -> str:
        target = target or {}
        pipe = str(target.get("pipe", "STD_OUT")).upper()
        file = target.get("file")
        if file is not None:
            pipe = {"console:///stdout": "STD_OUT", "console:///stderr": "STD_ERR"}.get(
                str(file).lower(), ""
            )
        if pipe not in PIPES:
            raise StorageError(
                f"{self.label}: target {dict(target)!r} names no console pipe; "
                f"use pipe: {' or '.join(PIPES)}"
            )
        return pipe


class QueueEngine(StorageEngine):
    """A sink that keeps records for the caller, one queue per target ``number``."""

    type_name: ClassVar[str] = "queue"
    capabilities_base: ClassVar[Capabilities] = Capabilities(is_sink=True)
    config_keys: ClassVar[tuple[str, ...]] = ("encoding",)

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._queues: dict[int, QueueSink] = {}

    def sink(self, target: Mapping[str, Any] | None) -> QueueSink:
        """The queue a store target names (``number``, 0 by default); the same one each time."""
        number = self._number(target)
        if number not in self._queues:
            self._queues[number] = QueueSink(number, engine_name=self.name)
        return self._queues[number]

    def records(self, number: int = 0) -> list[Any]:
        """The records queue ``number`` received."""
        queue = self._queues.get(number)
        return queue.records() if queue is not None else []

    def check_target(self, target: Mapping[str, Any] | None) -> None:
        self._number(target)

    def _number(self, target: Mapping[str, Any] | None) -> int:
        number = (target or {}).get("number", 0)
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise StorageError(
                f"{self.label}: target number must be a whole number >= 0, not {number!r}"
            )
        return number


SinkEngine = ConsoleEngine | QueueEngine


# ---------------------------------------------------------------- the registry

ENGINE_TYPES: dict[str, type[StorageEngine]] = {
    "classpath": ClasspathEngine,
    "console": ConsoleEngine,
    "fs": FsEngine,
    "queue": QueueEngine,
}

from engine.storage.catalog import CatalogEngine  # noqa: E402 (it builds on this module)

ENGINE_TYPES["catalog"] = CatalogEngine


def create_engine(
    name: str, config: Mapping[str, Any], *, classpath: Sequence[Path | str] = ()
) -> StorageEngine:
    """The engine a plan's ``storage`` entry describes (``config`` holds its ``type``).

    >>> create_engine("cp", {"type": "classpath"}, classpath=["/srv/data"]).roots
    (PosixPath('/srv/data'),)
    """
    if hasattr(config, "to_dict"):
        config = config.to_dict()
    settings = {k: v for k, v in dict(config).items() if k not in ("type", "name")}
    kind = str(config.get("type", "")).lower()
    engine_type = ENGINE_TYPES.get(kind)
    if engine_type is None:
        raise StorageError(
            f"storage engine '{name}' has the unknown type '{config.get('type')}'; "
            f"known types are {', '.join(sorted(ENGINE_TYPES))}"
        )
    unknown = sorted(set(settings) - set(engine_type.config_keys))
    if unknown:
        accepted = ", ".join(engine_type.config_keys) or "no settings"
        raise StorageError(
            f"storage engine '{name}' ({kind}) does not take {', '.join(unknown)}; "
            f"it accepts {accepted}"
        )
    if hasattr(engine_type, "from_config"):  # an engine in a module of its own
        return engine_type.from_config(name, settings)  # type: ignore[attr-defined]
    if engine_type is FsEngine:
        return _fs_engine(name, settings)
    if engine_type is ClasspathEngine:
        roots = [parse_root(r, engine_name=name) for r in classpath]
        return ClasspathEngine(name, roots, DEFAULT_FORMATS)
    if engine_type is ConsoleEngine:
        return ConsoleEngine(name)
    return QueueEngine(name)


from engine.storage.jdbc.engine import JdbcEngine  # noqa: E402  (it builds on this module)

ENGINE_TYPES["jdbc"] = JdbcEngine


def _fs_engine(name: str, settings: Mapping[str, Any]) -> FsEngine:
    root = settings.get("root", settings.get("connection"))
    if not isinstance(root, str) or not root:
        raise StorageError(
            f"storage engine '{name}' (fs) needs a `root`: a directory or a file:/// URL"
        )
    writable = settings.get("writable", True)
    if not isinstance(writable, bool):
        raise StorageError(f"storage engine '{name}' (fs): writable must be true or false")
    formats = dict(DEFAULT_FORMATS)
    for format_name, spec in (settings.get("formats") or {}).items():
        formats[format_name] = _format_config(name, format_name, spec)
    return FsEngine(name, parse_root(root, engine_name=name), formats, writable=writable)


def _format_config(engine: str, name: str, spec: Any) -> FormatConfig:
    where = f"storage engine '{engine}' (fs) format '{name}'"
    if not isinstance(spec, Mapping) or str(spec.get("type", "")).lower() not in FORMAT_TYPES:
        raise StorageError(f"{where} needs a `type`: one of {', '.join(FORMAT_TYPES)}")
    extensions = spec.get("extensions", [])
    if not isinstance(extensions, list) or not all(isinstance(e, str) for e in extensions):
        raise StorageError(f"{where}: extensions must be a list of strings")
    options = {k: v for k, v in spec.items() if k not in ("type", "extensions")}
    ReaderOptions.from_mapping(options, where=where)
    return FormatConfig(
        str(spec["type"]).lower(), tuple(e.lower().lstrip(".") for e in extensions), options
    )


def _extension(path: str) -> str | None:
    suffix = PurePosixPath(path.rstrip("/")).suffix
    return suffix[1:].lower() if len(suffix) > 1 and not has_glob(suffix) else None


def plan_engines(
    plan: LogicalPlan,
    *,
    base_dir: Path | None,
    classpath: Sequence[Path | str],
    console_stream: Any = None,
) -> dict[str, Any]:
    """The plan's storage engines; a relative ``fs`` root is relative to the plan file;
    ``console_stream`` is where console stores print (standard output when None)."""
    engines = {}
    for name, config in plan.storage.items():
        settings = config.to_dict()
        key = {"fs": "root", "catalog": "warehouse"}.get(config.type, "")
        root = settings.get(key)
        if isinstance(root, str) and base_dir is not None:
            parsed = parse_root(root, engine_name=name)
            if not Path(root).is_absolute() and not root.startswith("file:"):
                parsed = (base_dir / root).resolve()
            settings[key] = str(parsed)
        engine = create_engine(name, settings, classpath=classpath)
        if isinstance(engine, ConsoleEngine) and console_stream is not None:
            engine.stream = console_stream
        engines[name] = engine
    return engines
