"""What a store wrote, persisted under its engine root: ``<root>/_drill_metadata/<target>.json``.

The storage layer calls :func:`write_version_metadata` right after it commits a version
(:meth:`engine.storage.commit.Commit.commit`), for both executors. The file records the version id,
the written schema (exact, as Arrow IPC, and as readable column types), row count, files, bytes and
partition directories. ``_`` keeps it out of every listing (Spark's rule). A new process reads it
with :func:`read_version_metadata`, which ignores a file whose version is not the target's current
one (a writer killed between the commit and this file, or a foreign writer): the metadata is then
unknown, never wrong.

>>> import tempfile, pathlib, pyarrow as pa, pyarrow.parquet as pq
>>> root = pathlib.Path(tempfile.mkdtemp()); d = root / "sales"
>>> d.mkdir(); pq.write_table(pa.table({"a": [1, 2, 3]}), d / "part-0.parquet")
>>> meta = write_version_metadata(d, metadata_path(root, d), version=None)
>>> meta.row_count, meta.file_count, [c["name"] for c in meta.columns]
(3, 1, ['a'])
>>> read_version_metadata(d, metadata_path(root, d)).row_count
3
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine.storage.formats.parquet_unions import arrow_schema_of

FORMAT_VERSION = 1
_FORMATS = {"parquet": "parquet", "json": "json", "jsonl": "json", "csv": "csv"}


@dataclass(frozen=True)
class VersionMetadata:
    """The content of one ``_drill_metadata.json``."""

    version: str | None
    format: str | None
    row_count: int | None
    file_count: int
    total_bytes: int
    partitions: tuple[str, ...] = ()
    columns: tuple[dict[str, str], ...] = ()
    arrow_schema: str | None = None  # base64 Arrow IPC
    written_at: float = field(default_factory=time.time)

    @property
    def schema(self) -> pa.Schema | None:
        """The written schema, exactly (None when the writer did not know it)."""
        if self.arrow_schema is None:
            return None
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(self.arrow_schema)))

    def to_json(self) -> dict[str, Any]:
        body = asdict(self)
        body["partitions"] = list(self.partitions)
        body["columns"] = list(self.columns)
        return {"drill_metadata": FORMAT_VERSION, **body}


METADATA_DIR = "_drill_metadata"


def metadata_path(root: Path, target: Path) -> Path:
    """Where the metadata of the dataset ``target`` under the engine ``root`` lives.

    >>> metadata_path(Path("/lake"), Path("/lake/out/sales")).as_posix()
    '/lake/_drill_metadata/out/sales.json'
    """
    rel = os.path.relpath(target, root)
    return root / METADATA_DIR / f"{rel}.json"


def write_version_metadata(
    directory: Path,
    destination: Path,
    *,
    version: str | None,
    schema: pa.Schema | None = None,
    root: Path | None = None,
) -> VersionMetadata:
    """Describe the data files under the dataset ``directory``; write :func:`metadata_path`.

    Given the engine ``root`` that ``destination`` lies under, the file is written without
    following a symbolic link below the root (:func:`engine.storage.confined.write_file_below`):
    a ``_drill_metadata`` planted as a link out of the root is refused, not written through.

    ``schema`` is the schema the store wrote when the writer knows it; otherwise the first parquet
    footer gives it. Parquet row counts come from footers, JSON lines are counted; CSV is left
    unknown rather than guessed.
    """
    metadata = describe_dataset(directory, version=version, schema=schema)
    text = json.dumps(metadata.to_json(), indent=1).encode()
    if root is not None:
        from engine.storage.confined import write_file_below

        rel = os.path.relpath(destination, root)
        write_file_below(root, rel, text, what=f"the metadata file {destination}")
        return metadata
    destination.parent.mkdir(parents=True, exist_ok=True)
    staged = destination.with_name(f".{destination.name}.{os.getpid()}.tmp")
    staged.write_bytes(text)
    os.replace(staged, destination)
    return metadata


def describe_dataset(
    directory: Path, *, version: str | None = None, schema: pa.Schema | None = None
) -> VersionMetadata:
    """The metadata of the data files under the dataset ``directory`` (see
    :func:`write_version_metadata`, which persists it)."""
    files = sorted(_data_files(directory))
    formats = {_FORMATS.get(p.suffix.lstrip(".").lower()) for p in files}
    fmt = formats.pop() if len(formats) == 1 else None
    if schema is None and fmt == "parquet" and files:
        schema = arrow_schema_of(pq.read_metadata(files[0]))  # unions Spark wrote, typed
    return VersionMetadata(
        version=version,
        format=fmt,
        row_count=_row_count(files, fmt),
        file_count=len(files),
        total_bytes=sum(p.stat().st_size for p in files),
        partitions=tuple(sorted({_partition_of(directory, p) for p in files} - {""})),
        columns=tuple({"name": f.name, "type": str(f.type)} for f in (schema or pa.schema([]))),
        arrow_schema=None if schema is None else _schema_text(schema),
    )


def read_version_metadata(directory: Path, path: Path) -> VersionMetadata | None:
    """The metadata at ``path`` if it describes the current version of the dataset ``directory``."""
    try:
        body = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict) or body.get("drill_metadata") != FORMAT_VERSION:
        return None
    current = _current_version(directory)
    if current is not None and body.get("version") not in (None, current):
        return None  # carried over, or written beside data it does not describe
    return VersionMetadata(
        version=body.get("version"),
        format=body.get("format"),
        row_count=body.get("row_count"),
        file_count=int(body.get("file_count", 0)),
        total_bytes=int(body.get("total_bytes", 0)),
        partitions=tuple(body.get("partitions", ())),
        columns=tuple(body.get("columns", ())),
        arrow_schema=body.get("arrow_schema"),
        written_at=float(body.get("written_at", 0.0)),
    )


def _current_version(directory: Path) -> str | None:
    from engine.storage.commit import VersionedTarget

    return VersionedTarget(directory).current_version()


def _data_files(directory: Path) -> list[Path]:
    found = []
    for folder, subdirs, names in os.walk(directory):
        subdirs[:] = [d for d in subdirs if not _hidden(d)]
        found.extend(Path(folder, n) for n in names if not _hidden(n))
    return found


def _hidden(name: str) -> bool:
    return name.startswith((".", "_")) and "=" not in name


def _partition_of(directory: Path, file: Path) -> str:
    rel = os.path.relpath(file.parent, directory)
    return "" if rel == "." else rel.replace(os.sep, "/")


def _row_count(files: list[Path], fmt: str | None) -> int | None:
    if fmt == "parquet":
        return sum(pq.ParquetFile(p).metadata.num_rows for p in files)
    if fmt == "json":
        count = 0
        for p in files:
            with open(p, "rb") as handle:
                count += sum(1 for line in handle if line.strip())
        return count
    return None


def _schema_text(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")
