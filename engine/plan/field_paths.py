"""The paths of the fields operators write and read, as tuples of names (``a.b`` -> ``("a",
"b")``), and the record members they read: what the planner's analyses and the executors share.

>>> writable_path("a.b", "transform ref"), output_path("output.a.b"), output_path("output")
(('a', 'b'), ('a', 'b'), ())
>>> overlaps(("a",), ("a", "b")), overlaps(("a", "c"), ("a", "b")), under(("a", "b"), ("a",))
(True, False, True)
"""

from __future__ import annotations

from engine.errors import DrillError
from engine.expr import FieldRef, parse_field_ref

OUTPUT = "output"

Path = tuple[str, ...]


def writable_path(name: str, what: str) -> Path:
    """The path of a field an operator writes (``a.b`` -> ``("a", "b")``); no array index."""
    path = parse_field_ref(name).path
    if any(isinstance(step, int) for step in path):
        raise DrillError(f"{what} '{name}' cannot be written: it indexes into an array")
    return tuple(str(step) for step in path)


def output_path(ref: str) -> Path:
    """The path a project ``ref`` writes: ``output.a.b`` -> ``("a", "b")``, ``output`` -> ``()``."""
    path = writable_path(ref, "project ref")
    return path[1:] if path[0] == OUTPUT else path


def under(path: Path, prefix: Path) -> bool:
    """Whether ``path`` is ``prefix`` or a path inside it."""
    return path[: len(prefix)] == prefix


def path_of(ref: FieldRef) -> Path:
    """A field reference's path, its steps as text."""
    return tuple(str(step) for step in ref.path)


Member = tuple[str, str]
"""A record's member: the record's top-level column and the member's name."""


def member_of(expr: object) -> Member | None:
    """The record member ``expr`` reads, if it reads one directly (``e.ts``)."""
    if isinstance(expr, FieldRef) and len(expr.path) == 2:
        record, name = expr.path
        if isinstance(record, str) and isinstance(name, str):
            return record, name
    return None


def overlaps(path: Path, other: Path) -> bool:
    """Whether one of the paths is the other or inside it."""
    shorter = min(len(path), len(other))
    return path[:shorter] == other[:shorter]
