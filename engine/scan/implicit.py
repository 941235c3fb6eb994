"""Implicit columns: what Drill knows about the file being scanned, not what is inside it.

*File columns* name parts of the file: ``fqn`` (the full path), ``filepath`` (its directory),
``filename`` and ``suffix`` (the extension, without the dot). *Partition columns* ``dir0``, ``dir1``,
... hold the directories between the selection root and the file. Both are VARCHAR. Partition columns
are part of the wildcard; file columns appear only when the plan references them. Drill lets a user
rename them (its ``drill.exec.storage.implicit.*.column.label`` options); so does this class.

>>> cols = ImplicitColumns()
>>> cols.for_file("/data", "/data/1995/Q1/orders.csv")
{'fqn': '/data/1995/Q1/orders.csv', 'filepath': '/data/1995/Q1', 'filename': 'orders.csv', \
'suffix': 'csv', 'dir0': '1995', 'dir1': 'Q1'}
>>> cols.partition_depth("/data", ["/data/a.csv", "/data/1995/Q1/b.csv"])
2
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass

from engine.errors import PlanError, StorageError
from engine.scan.projection import name_key
from engine.types import VARCHAR, MajorType

IMPLICIT_TYPE: MajorType = VARCHAR
"""The type of every implicit column: nullable VARCHAR (a shallow file has no ``dir3``)."""

PathLike = str | os.PathLike[str]


def _normalize(path: PathLike) -> str:
    text = os.fspath(path)
    if text.startswith("file://"):
        text = text[len("file://") :]
    return posixpath.normpath(text) if text else "."


def _resolve(root: PathLike, file: PathLike) -> tuple[str, str]:
    base, path = _normalize(root), _normalize(file)
    if not posixpath.isabs(path) and posixpath.isabs(base):
        path = posixpath.normpath(posixpath.join(base, path))
    return base, path


@dataclass(frozen=True)
class ImplicitColumns:
    """The names of the implicit columns, and their values for one file.

    >>> ImplicitColumns(filename="source_file", partition_prefix="level").for_file("r", "r/x/f.json")
    {'fqn': 'r/x/f.json', 'filepath': 'r/x', 'source_file': 'f.json', 'suffix': 'json', 'level0': 'x'}
    """

    fqn: str = "fqn"
    filepath: str = "filepath"
    filename: str = "filename"
    suffix: str = "suffix"
    partition_prefix: str = "dir"

    def __post_init__(self) -> None:
        names = [name_key(n) for n in self.file_column_names]
        if len(set(names)) != len(names) or not all(names) or not self.partition_prefix:
            raise PlanError(f"implicit column names must be distinct and non-empty: {self}")
        clash = [n for n in self.file_column_names if self.partition_index(n) is not None]
        if clash:
            raise PlanError(f"implicit column {clash[0]!r} looks like a partition column")

    @property
    def file_column_names(self) -> tuple[str, str, str, str]:
        return (self.fqn, self.filepath, self.filename, self.suffix)

    def is_file_column(self, name: str) -> bool:
        return name_key(name) in {name_key(n) for n in self.file_column_names}

    def partition_index(self, name: str) -> int | None:
        """``3`` for ``dir3`` (any case), None for a name that is not a partition column."""
        match = re.fullmatch(re.escape(name_key(self.partition_prefix)) + r"(\d+)", name_key(name))
        return int(match[1]) if match else None

    def is_implicit(self, name: str) -> bool:
        return self.is_file_column(name) or self.partition_index(name) is not None

    def partition_name(self, index: int) -> str:
        return f"{self.partition_prefix}{index}"

    def partition_names(self, depth: int) -> list[str]:
        """``["dir0", ..., "dir{depth-1}"]``."""
        return [self.partition_name(i) for i in range(depth)]

    def directories(self, root: PathLike, file: PathLike) -> list[str]:
        """The directories between ``root`` and ``file``; a relative ``file`` is under ``root``."""
        base, path = _resolve(root, file)
        if path == base:
            return []  # the selection is the file itself
        relative = posixpath.relpath(path, base)
        if relative.startswith(".."):
            raise StorageError(
                f"file is not under the selection root {os.fspath(root)!r}", file=path
            )
        return relative.split("/")[:-1]

    def partition_depth(self, root: PathLike, files: Iterable[PathLike]) -> int:
        """The number of partition columns a wildcard scan of ``files`` has: the deepest file's."""
        return max((len(self.directories(root, f)) for f in files), default=0)

    def for_file(self, root: PathLike, file: PathLike) -> dict[str, str | None]:
        """The implicit column values of ``file``, keyed by column name (file columns, then dirN)."""
        dirs = self.directories(root, file)
        path = _resolve(root, file)[1]
        filepath, filename = posixpath.split(path)
        suffix = filename.rpartition(".")[2] if "." in filename.lstrip(".") else ""
        values: dict[str, str | None] = {
            self.fqn: path,
            self.filepath: filepath,
            self.filename: filename,
            self.suffix: suffix,
        }
        values.update(zip(self.partition_names(len(dirs)), dirs))
        return values
