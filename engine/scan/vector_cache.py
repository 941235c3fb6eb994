"""The vector cache of seed 002: one per scan, so all its readers produce the same layout and types.

Drill's scan must hand downstream the same vectors for the same columns, whichever reader wrote them.
Here a batch is built fresh at every harvest, so what must persist is not the vectors but what they
are: the column *order* and *types*. Every :class:`~engine.scan.loader.ResultSetLoader` of one scan
shares one ``VectorCache``:

* when a loader adds a column (or a member of a map) it registers the path and its type; the first
  registration fixes the path's position, later changes of the type (a late type resolved, a widening)
  update the entry;
* when a later loader adds a column the cache knows, the column starts with the cached type instead of
  Drill's late NULL type: an all-null column in a later file keeps the type an earlier file found, an
  integer written into a column cached as FLOAT8 is stored as a float, and a map comes with the
  members the cache knows for it (null where this loader writes none);
* a loader emits its columns (and the members of its maps) in cache order; it emits only the columns
  it has itself (missing columns are the scan schema tracker's business);
* the cached type is only a default: while a loader has written no value into the column, a value
  of an incompatible type gives the column the value's type (and updates the cache), as Drill replaces
  a cached vector of another type. Once the loader has written values, its own type rules.

Paths are case-insensitive, as Drill's names are; members of maps inside arrays are registered
under the array's path (``xs.a`` for member ``a`` of the maps in ``xs``).

>>> from engine.types import BIGINT, FLOAT8
>>> cache = VectorCache()
>>> cache.register(("b",), BIGINT); cache.register(("a",), BIGINT); cache.register(("B",), FLOAT8)
>>> [(name, str(t)) for name, t in cache.columns()]
[('b', 'FLOAT8'), ('a', 'BIGINT')]
>>> cache.position(("a",)) > cache.position(("b",))
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from engine.types import MajorType, MinorType, to_arrow_field


@dataclass
class _Entry:
    name: str
    type: MajorType
    position: int


def _key(path: Sequence[str]) -> tuple[str, ...]:
    return tuple(name.lower() for name in path)


class VectorCache:
    """Column order and types shared by the loaders of one scan (see the module docstring)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, ...], _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def register(self, path: Sequence[str], major: MajorType) -> None:
        """Record the type of the column at ``path``; a new path goes after all known ones."""
        key = _key(path)
        entry = self._entries.get(key)
        if entry is None:
            self._entries[key] = _Entry(path[-1], major, len(self._entries))
        else:
            entry.type = major

    def lookup(self, path: Sequence[str]) -> MajorType | None:
        """The cached type of the column at ``path`` (maps with their cached members), or None."""
        key = _key(path)
        entry = self._entries.get(key)
        return None if entry is None else self._resolve(key, entry.type)

    def position(self, path: Sequence[str]) -> int:
        """The order of ``path`` among all cached paths; unknown paths sort last."""
        entry = self._entries.get(_key(path))
        return len(self._entries) if entry is None else entry.position

    def columns(self) -> list[tuple[str, MajorType]]:
        """The top-level columns in order, with their types."""
        return [
            (entry.name, self._resolve(key, entry.type))
            for key, entry in self._entries.items()
            if len(key) == 1
        ]

    def schema(self) -> pa.Schema:
        """The cached top-level columns as an Arrow schema."""
        return pa.schema([to_arrow_field(name, t) for name, t in self.columns()])

    def _members(self, key: tuple[str, ...]) -> dict[str, MajorType]:
        depth = len(key) + 1
        return {
            entry.name: self._resolve(k, entry.type)
            for k, entry in self._entries.items()
            if len(k) == depth and k[:-1] == key
        }

    def _resolve(self, key: tuple[str, ...], major: MajorType) -> MajorType:
        """The registered type with its map members taken from their own (newer) entries."""
        if major.minor == MinorType.MAP:
            return MajorType(MinorType.MAP, major.mode, tuple(self._members(key).items()))
        if major.minor == MinorType.LIST and major.element is not None:
            return MajorType.list_of(self._resolve(key, major.element), major.mode)
        return major
