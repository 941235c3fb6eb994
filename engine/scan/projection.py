"""The scan's projection list: wildcard, explicit columns (with members inside maps), or empty.

Seed 003 names three kinds of projection: ``SELECT *`` (the data source decides the columns),
``SELECT a, m.x, ...`` (the plan names the columns it uses, found by projection pushdown) and the
empty projection of a ``COUNT(*)`` (the plan needs only a row count). Names are case-insensitive, as
in Drill; the output keeps the spelling of the first reference.

Overlapping paths merge: ``m`` and ``m.x`` project ``m`` whole; ``m.x`` and ``m.y`` project the two
members of ``m``. An index segment (``arr[0]``, ``columns[1]``) projects the whole array column.

>>> p = ScanProjection.parse(["a", "m.x", "m.y.z", "arr[0].b"])
>>> p.kind, p.names
(<ProjectionKind.EXPLICIT: 'explicit'>, ('a', 'm', 'arr'))
>>> p.is_projected("m.x.anything"), p.is_projected("m.q"), p.projected_members("m")
(True, False, ('x', 'y'))
>>> ScanProjection.parse(["m.x", "m"]).projected_members("m") is None
True
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

from engine.errors import PlanError

WILDCARD_NAMES = frozenset({"*", "**"})

Path = tuple[str, ...]
ProjectionSpec = str | Sequence[str | Sequence[str]] | None

# A segment is a backquoted name (which may hold dots) or a plain name; `[...]` is an array index.
_SEGMENT = re.compile(r"`(?P<quoted>[^`]*)`|(?P<plain>[^.\[\]`]+)")


class ProjectionKind(enum.StrEnum):
    """Seed 003's ``ProjectionType``: ALL, SOME and NONE in Drill's code."""

    WILDCARD = "wildcard"
    EXPLICIT = "explicit"
    EMPTY = "empty"


def parse_path(text: str) -> Path:
    """Split a column reference into names; an index ends the path (the whole array is needed).

    >>> parse_path("m.`a.b`.c"), parse_path("arr[0].x"), parse_path("m.*")
    (('m', 'a.b', 'c'), ('arr',), ('m', '*'))
    """
    parts: list[str] = []
    pos = 0
    while True:
        match = _SEGMENT.match(text, pos)
        name = None if match is None else match["quoted"] or match["plain"]
        if not name:
            raise PlanError(
                f"bad column reference {text!r} in the scan's projection (at offset {pos})"
            )
        assert match is not None
        parts.append(name)
        pos = match.end()
        if pos == len(text):
            return tuple(parts)
        if text[pos] == "[":
            if "]" not in text[pos:]:
                raise PlanError(
                    f"unclosed '[' in column reference {text!r} in the scan's projection"
                )
            return tuple(parts)
        if text[pos] != "." or pos + 1 == len(text):
            raise PlanError(
                f"bad column reference {text!r} in the scan's projection (at offset {pos})"
            )
        pos += 1


def name_key(name: str) -> str:
    """The key two names share when Drill considers them the same column (case-insensitive)."""
    return name.lower()


@dataclass(frozen=True)
class ProjectedColumn:
    """One projected column; ``members`` lists the projected members of a map, None means whole.

    >>> ProjectedColumn("m", (ProjectedColumn("x"),)).member("X")
    ProjectedColumn(name='x', members=None)
    """

    name: str
    members: tuple[ProjectedColumn, ...] | None = None

    @property
    def is_whole(self) -> bool:
        return self.members is None

    def member(self, name: str) -> ProjectedColumn | None:
        """The projected member ``name``; a whole column projects every member."""
        if self.members is None:
            return ProjectedColumn(name)
        key = name_key(name)
        return next((m for m in self.members if name_key(m.name) == key), None)

    def path_strings(self, prefix: str = "") -> list[str]:
        """The leaf paths this column projects, dotted: ``["m.x", "m.y"]``."""
        here = f"{prefix}{self.name}"
        if self.members is None:
            return [here]
        return [leaf for m in self.members for leaf in m.path_strings(here + ".")]


class _Node:
    """A mutable projection tree node, frozen into a :class:`ProjectedColumn` once parsing ends."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.members: dict[str, _Node] | None = {}

    def add(self, rest: Path) -> None:
        if self.members is None:
            return  # already whole: it covers every member
        if not rest or rest[0] in WILDCARD_NAMES:
            self.members = None
            return
        child = self.members.setdefault(name_key(rest[0]), _Node(rest[0]))
        child.add(rest[1:])

    def freeze(self) -> ProjectedColumn:
        if self.members is None:
            return ProjectedColumn(self.name)
        return ProjectedColumn(self.name, tuple(m.freeze() for m in self.members.values()))


@dataclass(frozen=True)
class ScanProjection:
    """A parsed projection list.

    ``columns`` are the explicitly named columns in order; with a wildcard they are whole (the
    wildcard covers their members) and ``wildcard_index`` says how many of them come before the
    place where the wildcard expands.

    >>> ScanProjection.parse(None).kind, ScanProjection.parse([]).kind
    (<ProjectionKind.WILDCARD: 'wildcard'>, <ProjectionKind.EMPTY: 'empty'>)
    >>> p = ScanProjection.parse(["filename", "*"])
    >>> p.names, p.wildcard_index
    (('filename',), 1)
    """

    kind: ProjectionKind
    columns: tuple[ProjectedColumn, ...] = ()
    wildcard_index: int | None = None

    @classmethod
    def parse(cls, projection: ProjectionSpec) -> ScanProjection:
        """Parse ``None`` / ``"*"`` / ``["**"]`` (wildcard), ``[]`` (empty) or a list of paths.

        Items are dotted strings (``"m.x"``, ``"arr[0]"``, ``"`a.b`"``) or already-split tuples.
        """
        if projection is None:
            return cls(ProjectionKind.WILDCARD, (), 0)
        if isinstance(projection, str):
            if projection in WILDCARD_NAMES:
                return cls(ProjectionKind.WILDCARD, (), 0)
            raise PlanError(f"the scan's projection must be a list of columns, not {projection!r}")
        roots: dict[str, _Node] = {}
        wildcard_index: int | None = None
        for item in projection:
            path = parse_path(item) if isinstance(item, str) else tuple(item)
            if not path or not all(isinstance(p, str) and p for p in path):
                raise PlanError(f"bad column reference {item!r} in the scan's projection")
            if path[0] in WILDCARD_NAMES:
                if wildcard_index is None:
                    wildcard_index = len(roots)
                continue
            node = roots.setdefault(name_key(path[0]), _Node(path[0]))
            node.add(path[1:])
        if wildcard_index is not None:
            whole = tuple(ProjectedColumn(node.name) for node in roots.values())
            return cls(ProjectionKind.WILDCARD, whole, wildcard_index)
        if not roots:
            return cls(ProjectionKind.EMPTY)
        return cls(ProjectionKind.EXPLICIT, tuple(node.freeze() for node in roots.values()))

    @property
    def is_wildcard(self) -> bool:
        return self.kind == ProjectionKind.WILDCARD

    @property
    def names(self) -> tuple[str, ...]:
        """The explicitly named top-level columns, in order."""
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> ProjectedColumn | None:
        """The explicitly projected column ``name`` (case-insensitive), or None."""
        key = name_key(name)
        return next((c for c in self.columns if name_key(c.name) == key), None)

    def is_projected(self, path: str | Sequence[str]) -> bool:
        """Whether the column or member at ``path`` is needed (a map is needed if any member is).

        >>> ScanProjection.parse(["m.x"]).is_projected(("m",))
        True
        """
        parts = parse_path(path) if isinstance(path, str) else tuple(path)
        if self.is_wildcard:
            return True
        node = self.column(parts[0]) if parts else None
        for name in parts[1:]:
            if node is None or node.members is None:
                break
            node = node.member(name)
        return node is not None

    def projected_members(self, map_path: str | Sequence[str]) -> tuple[str, ...] | None:
        """The projected members of the map at ``map_path``: None for all, ``()`` if not projected.

        >>> ScanProjection.parse(["m.a.b", "m.c"]).projected_members("m")
        ('a', 'c')
        """
        parts = parse_path(map_path) if isinstance(map_path, str) else tuple(map_path)
        if self.is_wildcard:
            return None
        node = self.column(parts[0]) if parts else None
        for name in parts[1:]:
            if node is None or node.members is None:
                break
            node = node.member(name)
        if node is None:
            return ()
        return None if node.members is None else tuple(m.name for m in node.members)
