"""What a Drill scan on Spark sends to its tasks: the engine, the selection and the files, as JSON
in the reader's options (:class:`ScanRequest`), so that nothing of the driver's Python process is
captured; and how the driver samples a selection's schema (:class:`SchemaSampling`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.errors import StorageError
from engine.scan.framework import (
    DEFAULT_BATCH_ROWS,
)
from engine.storage.engines import ClasspathEngine, FileEngine, FsEngine, create_engine
from engine.storage.paths import InputFile

DATA_SOURCE_NAME = "drill"
"""The name the Drill data source is registered under (``spark.read.format("drill")``)."""


# ---------------------------------------------------------------- what travels to the tasks


@dataclass(frozen=True)
class SchemaSampling:
    """How much the driver reads to resolve a scan's schema; see the module docstring."""

    full_read_bytes: int = 8 << 20
    records_per_file: int = 1_000
    max_files: int = 64

    def to_json(self) -> dict[str, int]:
        return {
            "full_read_bytes": self.full_read_bytes,
            "records_per_file": self.records_per_file,
            "max_files": self.max_files,
        }


@dataclass(frozen=True)
class EngineSpec:
    """A file storage engine as plain JSON data, so a Spark task can build it again.

    >>> spec = EngineSpec.of(create_engine("cp", {"type": "classpath"}, classpath=["/srv/d"]))
    >>> spec.to_json()
    {'name': 'cp', 'config': {'type': 'classpath'}, 'classpath': ['/srv/d']}
    >>> type(spec.create()).__name__
    'ClasspathEngine'
    """

    name: str
    config: Mapping[str, Any]
    classpath: tuple[str, ...] = ()

    @staticmethod
    def of(engine: Any) -> EngineSpec:
        if isinstance(engine, ClasspathEngine):
            return EngineSpec(
                engine.name, {"type": "classpath"}, tuple(str(r) for r in engine.roots)
            )
        if isinstance(engine, FsEngine):
            formats = {
                name: {"type": fmt.type, "extensions": list(fmt.extensions), **fmt.options}
                for name, fmt in engine.formats.items()
            }
            config = {
                "type": "fs",
                "root": str(engine.root),
                "writable": engine.writable,
                "formats": formats,
            }
            return EngineSpec(engine.name, config)
        label = getattr(engine, "label", repr(engine))
        raise StorageError(f"{label} cannot be scanned: it is not a file storage engine")

    def create(self) -> FileEngine:
        engine = create_engine(self.name, dict(self.config), classpath=list(self.classpath))
        assert isinstance(engine, FileEngine)
        return engine

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "config": dict(self.config), "classpath": list(self.classpath)}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> EngineSpec:
        return EngineSpec(data["name"], data["config"], tuple(data.get("classpath", ())))


@dataclass(frozen=True)
class ScanRequest:
    """One scan, as the data source's options carry it (:meth:`to_options`)."""

    engine: EngineSpec
    selection: Mapping[str, Any]
    file_columns: tuple[str, ...] = ()
    batch_rows: int = DEFAULT_BATCH_ROWS
    sampling: SchemaSampling = field(default_factory=SchemaSampling)
    files: tuple[InputFile, ...] | None = None  # None: list the selection again
    projection: tuple[str, ...] | None = None  # None: the whole record (wildcard)

    def with_files(self, files: Sequence[InputFile]) -> ScanRequest:
        return replace(self, files=tuple(files))

    def to_options(self) -> dict[str, str]:
        """The data source options (strings) of this request.

        >>> spec = EngineSpec("cp", {"type": "classpath"}, ("/d",))
        >>> options = ScanRequest(spec, {"path": "/a.json"}, ("filename",)).to_options()
        >>> ScanRequest.from_options(options).file_columns
        ('filename',)
        """
        options = {
            "engine": json.dumps(self.engine.to_json()),
            "selection": json.dumps(dict(self.selection)),
            "fileColumns": json.dumps(list(self.file_columns)),
            "batchRows": str(self.batch_rows),
            "sampling": json.dumps(self.sampling.to_json()),
        }
        if self.projection is not None:
            options["projection"] = json.dumps(list(self.projection))
        if self.files is not None:
            options["files"] = json.dumps([_file_to_json(f) for f in self.files])
        return options

    @staticmethod
    def from_options(options: Mapping[str, str]) -> ScanRequest:
        def get(key: str) -> str | None:
            for name, value in options.items():  # Spark hands the options over lower-cased
                if name.lower() == key.lower():
                    return value
            return None

        engine = get("engine")
        selection = get("selection")
        if engine is None or selection is None:
            raise StorageError(
                f"the {DATA_SOURCE_NAME!r} data source needs the options 'engine' and 'selection'",
                hint="build the read with engine.exec.spark.sources.scan_dataframe",
            )
        files = get("files")
        projection = get("projection")
        return ScanRequest(
            engine=EngineSpec.from_json(json.loads(engine)),
            selection=json.loads(selection),
            file_columns=tuple(json.loads(get("fileColumns") or "[]")),
            batch_rows=int(get("batchRows") or DEFAULT_BATCH_ROWS),
            sampling=SchemaSampling(**json.loads(get("sampling") or "{}")),
            files=None if files is None else tuple(_file_from_json(f) for f in json.loads(files)),
            projection=None if projection is None else tuple(json.loads(projection)),
        )


def _file_to_json(file: InputFile) -> list[Any]:
    return [file.path.as_posix(), file.real_path.as_posix(), list(file.dirs), file.size]


def _file_from_json(data: Sequence[Any]) -> InputFile:
    return InputFile(Path(data[0]), Path(data[1]), tuple(data[2]), int(data[3]))
