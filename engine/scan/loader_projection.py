"""Which columns a result set loader materialises: a tree of projected names, case-insensitive.

A path names a column (``a``) or a member inside maps (``m.a``, also reaching into arrays of maps:
``xs.a`` projects member ``a`` of the maps in array ``xs``). A projected map is materialised with only
its projected members; a path that names a map whole projects every member. ``None`` or ``"*"``
projects everything; an empty set projects nothing (the batch carries only a row count).

Any object with ``is_projected(path: tuple[str, ...]) -> bool`` (such as the scan's projection) may be
given instead of a set of paths.

>>> p = LoaderProjection.of({"a", "m.x"})
>>> p.member("A") is ALL, p.member("b"), p.member("m").member("x") is ALL, p.member("m").member("y")
(True, None, True, None)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

_SEGMENT = re.compile(r"`([^`]*)`|([^.\[\]`]+)")


@runtime_checkable
class ProjectionFilter(Protocol):
    """The interface of a projection that is not a set of paths (e.g. the scan's projection)."""

    def is_projected(self, path: tuple[str, ...]) -> bool: ...


class ProjectionNode:
    """The projected members of one tuple (the row or a map); ``member`` is None if not projected."""

    def member(self, name: str) -> ProjectionNode | None:
        raise NotImplementedError


class _All(ProjectionNode):
    def member(self, name: str) -> ProjectionNode:
        return self

    def __repr__(self) -> str:
        return "ALL"


ALL: ProjectionNode = _All()


class LoaderProjection(ProjectionNode):
    """An explicit projection: names with their projected members (``ALL`` for whole columns)."""

    def __init__(self) -> None:
        self._members: dict[str, ProjectionNode] = {}

    @staticmethod
    def of(paths: Iterable[str | Sequence[str]] | ProjectionFilter | None) -> ProjectionNode:
        """The projection tree of a set of paths, a projection filter, or None (everything)."""
        if paths is None:
            return ALL
        if isinstance(paths, ProjectionFilter):
            return _FilterNode(paths, ())
        if isinstance(paths, str):
            paths = [paths]
        root = LoaderProjection()
        for path in paths:
            parts = split_path(path) if isinstance(path, str) else tuple(path)
            if not parts or parts[0] in ("*", "**"):
                return ALL
            root._add(parts)
        return root

    def _add(self, parts: Sequence[str]) -> None:
        key = parts[0].lower()
        existing = self._members.get(key)
        if len(parts) == 1 or parts[1] in ("*", "**") or existing is ALL:
            self._members[key] = ALL
            return
        if not isinstance(existing, LoaderProjection):
            existing = self._members[key] = LoaderProjection()
        existing._add(parts[1:])

    def member(self, name: str) -> ProjectionNode | None:
        return self._members.get(name.lower())

    def __repr__(self) -> str:
        return repr(self._members)


class _FilterNode(ProjectionNode):
    def __init__(self, projection: ProjectionFilter, prefix: tuple[str, ...]) -> None:
        self._projection = projection
        self._prefix = prefix

    def member(self, name: str) -> ProjectionNode | None:
        path = (*self._prefix, name)
        return _FilterNode(self._projection, path) if self._projection.is_projected(path) else None


def split_path(text: str) -> tuple[str, ...]:
    """Split ``m.`a.b`.c`` into names; an index (``xs[0].a``) ends the path: the array is whole.

    >>> split_path("m.`a.b`.c"), split_path("xs[0].a")
    (('m', 'a.b', 'c'), ('xs',))
    """
    parts: list[str] = []
    pos = 0
    while pos < len(text):
        match = _SEGMENT.match(text, pos)
        if match is None:
            break
        parts.append(match[1] if match[1] is not None else match[2])
        pos = match.end()
        if pos < len(text) and text[pos] != ".":
            break
        pos += 1
    return tuple(parts)
