"""Stores: writing a table to a storage engine, atomically.

For ``fs`` the target is ``{path, format?, partitionBy?, mode?}``:

* ``path`` is a dataset directory under the engine root (checked like every path: no escapes),
  taken literally (``*``, ``?`` and ``[`` are characters of its names, not patterns) and written
  through its directory opened below the root (:mod:`engine.storage.confined`);
* ``format`` (or ``type``): ``parquet`` (default), ``json`` (JSON lines) or ``csv`` (scalar
  columns only);
* ``partitionBy``: columns written as ``col=value`` directories (dropped from the files); the
  caller's ``partition_values`` fix the leading ones for the whole table (a static partition);
* ``mode``: ``overwrite`` (default) replaces the dataset, or only the partitions written when
  partitioned (a static partition is replaced whole); ``append`` adds files; ``error`` fails
  if the target exists.

Every write stages, then commits with one atomic rename (:mod:`engine.storage.commit`): a failed,
interrupted or killed store leaves the previous version complete and readable. An unpartitioned
store always writes at least one file, so an empty result keeps its schema.

The ``console`` and ``queue`` engines take the rows as records; ``classpath`` is read-only.

>>> import io, pyarrow as pa
>>> from engine.storage.engines import ConsoleEngine
>>> engine = ConsoleEngine("console", stream=io.StringIO())
>>> write_store(engine, {"pipe": "STD_OUT"}, pa.table({"a": [1]})).row_count
1
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine.errors import DrillError, StorageError
from engine.storage.commit import Commit, VersionedTarget, recover, target_lock
from engine.storage.confined import open_below
from engine.storage.engines import (
    ClasspathEngine,
    ConsoleEngine,
    FsEngine,
    QueueEngine,
    StorageEngine,
)
from engine.storage.formats import EXTENSIONS, WRITERS
from engine.storage.partitions import Partition, split_partitions, static_prefix
from engine.storage.paths import is_hidden, resolve_under_root
from engine.storage.stream import STREAMED_FORMATS, StreamWriter
from engine.storage.target_options import store_mode, target_partition_by

STORE_FORMATS = tuple(WRITERS)
DEFAULT_LOCK_TIMEOUT = 60.0


@dataclass(frozen=True)
class StoreTarget:
    """A store's ``target`` for an ``fs`` engine, checked."""

    path: str
    location: Path
    format: str = "parquet"
    partition_by: tuple[str, ...] = ()
    mode: str = "overwrite"
    root: Path | None = None

    @property
    def metadata_file(self) -> Path | None:
        """Where the metadata repository keeps what this target holds (:mod:`engine.metadata`)."""
        from engine.storage.version_file import metadata_path

        return None if self.root is None else metadata_path(self.root, self.location)

    @staticmethod
    def parse(target: Mapping[str, Any] | None, *, engine: FsEngine) -> StoreTarget:
        """Check a plan's target mapping against ``engine`` (the path may not leave its root)."""
        where = f"store target of {engine.label}"
        if not isinstance(target, Mapping):
            raise StorageError(f"{where} must be a mapping with a `path`, not {target!r}")
        known = ("path", "format", "type", "partitionBy", "partition_by", "mode")
        unknown = [k for k in target if k not in known]
        if unknown:
            raise StorageError(
                f"{where}: unknown key {', '.join(repr(k) for k in unknown)}; "
                f"known keys are path, format, partitionBy, mode"
            )
        path = target.get("path")
        if not isinstance(path, str) or not path.strip("/"):
            raise StorageError(f"{where} needs a `path` below the engine root")
        fmt = str(target.get("format", target.get("type", "parquet"))).lower()
        if fmt not in STORE_FORMATS:
            raise StorageError(
                f"{where}: cannot store format '{fmt}'; use one of {', '.join(STORE_FORMATS)}"
            )
        mode = store_mode(target, where)
        partition_by = target_partition_by(target, where)
        if not isinstance(partition_by, Sequence) or not all(
            isinstance(c, str) and c for c in partition_by
        ):
            raise StorageError(f"{where}: partitionBy must be a list of column names")
        if len(set(partition_by)) != len(partition_by):
            raise StorageError(f"{where}: partitionBy names a column twice")
        location = engine.resolve_target(path)
        spec = StoreTarget(path, location, fmt, tuple(partition_by), mode, engine.root)
        spec.check_own_files(engine)
        return spec

    def check_own_files(self, engine: FsEngine) -> None:
        """The files a store keeps beside its data (lock, metadata) must not lead out of the
        root either; the write opens them without following links, this says so up front."""
        own = [
            ("lock file", self.location.parent / f".{self.location.name}.lock"),
            ("metadata file", self.metadata_file),
        ]
        for role, file in own:
            if file is not None:
                rel = os.path.relpath(file, engine.root)
                resolve_under_root(
                    engine.root, rel, engine_name=engine.name, role=role, literal=True
                )


@dataclass(frozen=True)
class StoreResult:
    """What a store wrote: where, in which format, how many rows, which files, which schema.

    ``files`` are the files this store wrote (absolute paths through the target, for ``fs``);
    ``partitions`` the partition directories it wrote or replaced; ``version`` the committed
    version's id: an ``fs`` commit's, a ``jdbc`` store's transaction and token, a ``catalog``
    table's files after the store (None for queues and consoles).
    """

    location: str
    format: str
    row_count: int
    files: tuple[str, ...]
    schema: pa.Schema
    mode: str = "overwrite"
    partitions: tuple[str, ...] = ()
    version: str | None = None


def write_store(
    engine: StorageEngine,
    target: Mapping[str, Any] | None,
    table: pa.Table,
    *,
    partition_values: Mapping[str, Any] | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> StoreResult:
    """Write ``table`` to ``target`` of ``engine``; see the module docstring."""
    if isinstance(engine, ConsoleEngine | QueueEngine):
        sink = engine.sink(target)
        count = sink.write_table(table)
        return StoreResult(sink.location, "records", count, (), table.schema, mode="append")
    if isinstance(engine, ClasspathEngine):
        raise StorageError(f"{engine.label} is read-only; store to an fs engine")
    if hasattr(engine, "write_batches"):  # an engine that writes its own way (jdbc)
        return engine.write_batches(target, table.to_batches(), lambda: table.schema)
    if not isinstance(engine, FsEngine):
        raise StorageError(f"{engine.label} cannot be written to")
    spec = StoreTarget.parse(target, engine=engine)
    return _write_fs(spec, table, dict(partition_values or {}), lock_timeout)


def write_store_batches(
    engine: StorageEngine,
    target: Mapping[str, Any] | None,
    batches: Iterable[pa.RecordBatch],
    *,
    schema: Callable[[], pa.Schema],
    buffered: Callable[[Iterable[pa.RecordBatch]], pa.Table],
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> StoreResult:
    """Write the stream ``batches`` to ``target`` of ``engine``, like :func:`write_store`.

    An unpartitioned ``fs`` store of parquet or JSON lines streams the batches into its file
    (:mod:`engine.storage.stream`); any other store takes the table ``buffered`` makes of them
    (the caller bounds what it holds). ``schema`` gives the rows' schema once the stream ended
    (an empty stream is stored with it).
    """
    if hasattr(engine, "write_batches"):  # streams into its database (jdbc)
        return engine.write_batches(target, batches, schema)
    if isinstance(engine, FsEngine):
        spec = StoreTarget.parse(target, engine=engine)
        if not spec.partition_by and spec.format in STREAMED_FORMATS:
            return _stream_fs(spec, batches, schema, lock_timeout)
    return write_store(engine, target, buffered(batches), lock_timeout=lock_timeout)


def _stream_fs(
    spec: StoreTarget,
    batches: Iterable[pa.RecordBatch],
    schema: Callable[[], pa.Schema],
    lock_timeout: float,
) -> StoreResult:
    appending = spec.mode == "append"
    with open_commit(spec, lock_timeout, needs_directory=appending) as commit:
        kept = commit.carry_over(lambda rel: True) if appending else []
        rel = f"part-00000-{commit.version[:8]}.{EXTENSIONS[spec.format]}"
        iterator = iter(batches)
        first = next(iterator, None)
        writer = StreamWriter(
            spec.format, commit.staging / rel, schema() if first is None else first.schema
        )
        try:
            if first is not None:
                writer.write(first)
            writer.write_all(iterator)
        finally:
            written_schema = writer.close()
        check_compatible(spec, commit.staging, kept, written_schema)
        check_readable(spec, commit.staging, [rel])
        commit.schema, commit.metadata_file = written_schema, spec.metadata_file
        commit.commit()
    return StoreResult(
        location=str(spec.location),
        format=spec.format,
        row_count=writer.rows,
        files=(str(spec.location / rel),),
        schema=written_schema,
        mode=spec.mode,
        version=commit.version,
    )


def partition_columns(
    spec: StoreTarget, static: dict[str, Any], row_columns: Sequence[str]
) -> list[str]:
    """The store's partition columns, after checking the ``static`` values given for a run: they
    must name the leading ``partitionBy`` columns and not be columns of the rows too."""
    columns = list(spec.partition_by) or list(static)
    if list(static) != columns[: len(static)]:
        raise StorageError(
            f"partition values {list(static)} must name the leading partitionBy columns {columns}"
        )
    clashing = [c for c in static if c in row_columns]
    if clashing:
        raise StorageError(
            f"partition value for {', '.join(repr(c) for c in clashing)} given, but the rows "
            "hold that column too",
            hint="drop the column before the store, or leave it out of partition_values",
        )
    return columns


def _write_fs(
    spec: StoreTarget, table: pa.Table, static: dict[str, Any], lock_timeout: float
) -> StoreResult:
    columns = partition_columns(spec, static, table.column_names)
    prefix = static_prefix(static) if static else ""
    parts = split_partitions(table, columns[len(static) :], prefix)
    partitioned = bool(columns)
    if spec.mode == "append":
        replaced: list[str] | None = []
    elif partitioned:
        replaced = [prefix] if prefix else [p.path for p in parts]
    else:
        replaced = None  # everything
    with open_commit(spec, lock_timeout, needs_directory=replaced is not None) as commit:
        kept = []
        if replaced is not None:
            kept = commit.carry_over(lambda rel: not under_any(rel, replaced))
            check_compatible(spec, commit.staging, kept, parts[0].table.schema if parts else None)
        written = _write_parts(spec, commit, parts, partitioned)
        check_readable(spec, commit.staging, written)
        commit.schema, commit.metadata_file = table.schema, spec.metadata_file
        commit.metadata_root = spec.root
        commit.commit()
    return StoreResult(
        location=str(spec.location),
        format=spec.format,
        row_count=table.num_rows,
        files=tuple(str(spec.location / rel) for rel in written),
        schema=table.schema,
        mode=spec.mode,
        partitions=tuple(
            sorted({p.path for p in parts if p.path} | ({prefix} if prefix else set()))
        ),
        version=commit.version,
    )


@contextmanager
def open_commit(
    spec: StoreTarget,
    lock_timeout: float,
    *,
    needs_directory: bool,
    explain: Callable[[Exception], DrillError | str] = str,
) -> Iterator[Commit]:
    """A commit of a new version of ``spec``'s target, for both executors' fs stores: the target
    locked, an interrupted commit recovered, ``mode: error`` checked, and a target that must be a
    dataset directory (an append, a partitioned overwrite) checked to be one.

    A failure inside is a StorageError saying the previous version is unchanged (or, after the
    swap, which version is live); ``explain`` turns the exception into that message's reason, or
    into the DrillError to raise instead. Call :func:`check_readable` on the files written before
    :meth:`Commit.commit`.
    """
    with _target_parent(spec) as parent, _locked(spec, parent, lock_timeout) as target:
        recover(target)
        if spec.mode == "error" and target.exists():
            raise StorageError(
                f"store target '{spec.path}' already exists ({spec.location}) and mode is error",
                hint="use mode: overwrite or append, or remove the target first",
            )
        if needs_directory and target.exists() and target.current_data() is None:
            raise StorageError(
                f"store target '{spec.path}' is a file, not a dataset directory; "
                f"mode {spec.mode}{' with partitions' if spec.partition_by else ''} needs one"
            )
        commit = Commit(target)
        try:
            with commit:
                yield commit
        except DrillError:
            raise
        except Exception as err:
            reason = explain(err)
            if isinstance(reason, DrillError):
                raise reason from err
            outcome = (
                f"version {commit.version} is committed and live"
                if commit.committed
                else "the previous version is unchanged"
            )
            raise StorageError(
                f"writing {spec.format} to store target '{spec.path}' failed: {reason}; {outcome}",
            ) from err


@contextmanager
def _target_parent(spec: StoreTarget) -> Iterator[Path]:
    """The directory holding ``spec``'s target, opened below the engine root without following
    a link out of it (:mod:`engine.storage.confined`), as a path reaching that very directory."""
    if spec.root is None:
        yield spec.location.parent
        return
    parts = spec.location.relative_to(spec.root).parts[:-1]
    with open_below(spec.root, parts, create=True, what=f"store target '{spec.path}'") as parent:
        yield parent.path


@contextmanager
def _locked(spec: StoreTarget, parent: Path, lock_timeout: float) -> Iterator[VersionedTarget]:
    target = VersionedTarget(parent / spec.location.name, shown=spec.location)
    with target_lock(target, timeout=lock_timeout):
        yield target


def _write_parts(
    spec: StoreTarget, commit: Commit, parts: list[Partition], partitioned: bool
) -> list[str]:
    extension = EXTENSIONS[spec.format]
    written = []
    for index, part in enumerate(parts):
        if partitioned and part.table.num_rows == 0:
            continue
        rel = f"part-{index:05d}-{commit.version[:8]}.{extension}"
        if part.path:
            rel = f"{part.path}/{rel}"
        destination = commit.staging / rel
        destination.parent.mkdir(parents=True, exist_ok=True)
        _write_part(spec.format, part.table, destination)
        written.append(rel)
    return written


def _write_part(format_type: str, table: pa.Table, path: Path) -> None:
    """Write one data file (a seam: tests replace it to fail a write midway)."""
    WRITERS[format_type](table, path)


def check_readable(spec: StoreTarget, staging: Path, written: Sequence[str]) -> None:
    """Each file a store wrote must open again before it is committed: a StorageError says which
    cannot (a parquet schema deeper than readers accept is written, then cannot be read back)."""
    if spec.format != "parquet":
        return  # text formats: every written line reads back
    for rel in written:
        try:
            pq.read_schema(staging / rel)
        except (OSError, pa.ArrowException) as err:
            raise StorageError(
                f"store target '{spec.path}': the parquet file written cannot be read back "
                f"({err}); nothing was committed, the previous version is unchanged",
                hint="nest records less deeply (flatten or project them) or store them as json",
            ) from err


def check_compatible(
    spec: StoreTarget, staging: Path, kept: Sequence[str], new: pa.Schema | None
) -> None:
    """Files kept beside new ones (an append, or the partitions an overwrite leaves) must share
    the target's format and, for parquet, its columns and types: a StorageError says which.

    Nullability is not compared: OPTIONAL and REQUIRED of one type are the same column (writers
    derive it from the rows at hand), and neither are the names Arrow gives list elements.
    """
    extension = "." + EXTENSIONS[spec.format]
    data = [rel for rel in kept if not _hidden(rel)]
    other = [rel for rel in data if not rel.endswith(extension)]
    if other:
        raise StorageError(
            f"store target '{spec.path}' holds {os.path.basename(other[0])}, not {spec.format}; "
            f"a {spec.mode} must keep the target's format",
            hint="overwrite the whole target to change its format",
        )
    if spec.format != "parquet" or not data or new is None:
        return
    existing = pq.read_schema(staging / data[0])
    if loose_columns(existing) != loose_columns(new):
        raise StorageError(
            f"store target '{spec.path}' has the schema ({_schema_text(existing)}) and the rows "
            f"written have ({_schema_text(new)})",
            hint="overwrite the whole target to change its schema",
        )


def loose_columns(schema: pa.Schema) -> list[tuple[str, pa.DataType]]:
    """The columns of ``schema`` as (name, type) with nullability and list item names dropped.

    >>> a = pa.schema([pa.field("x", pa.list_(pa.field("item", pa.int64())), nullable=False)])
    >>> b = pa.schema([pa.field("x", pa.list_(pa.field("element", pa.int64(), nullable=False)))])
    >>> loose_columns(a) == loose_columns(b)
    True
    """
    return [(f.name, _loose(f.type)) for f in schema]


def _loose(dtype: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(dtype):
        return pa.struct([pa.field(f.name, _loose(f.type)) for f in dtype])
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return pa.list_(_loose(dtype.value_type))
    return dtype


def under_any(rel: str, prefixes: Sequence[str]) -> bool:
    """Whether the relative path ``rel`` is one of ``prefixes`` or below one."""
    return any(rel == p or rel.startswith(p + "/") for p in prefixes)


def _hidden(rel: str) -> bool:
    return any(is_hidden(part) for part in rel.split("/"))


def _schema_text(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name}: {f.type}" for f in schema)
