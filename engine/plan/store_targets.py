"""One plan, one writer per dataset: stores whose ``fs`` targets are the same or nested.

Two stores of one plan that overwrite the same target would both report success and the last
would win; a target inside another store's target is written inside the outer one's version
directory and destroyed by its next write. Both are plan mistakes, reported at validation with the
JSON paths of the two stores. Stores that both append to one target are allowed (each adds its
files). Targets compare as written, after normalizing the path (``a/./b/`` is ``a/b``) and the
engine (engines with the same ``root`` are one place); ``${name}`` parameters compare as text.

>>> from engine.plan.operators import Store
>>> from engine.plan.paths import Location
>>> def placed(i, path):
...     op = Store(id=i, input="1", storage_engine="fs", target={"path": path})
...     return PlacedOperator(i, op, Location(f"$.query[{i}]"))
>>> storage = {"fs": StorageConfig(type="fs", root="/lake")}
>>> for issue in check_store_targets([placed("2", "out/a"), placed("3", "out/a/b")], storage):
...     print(issue.path, "|", issue.message[:60])
$.query[3].target.path | store target 'out/a/b' lies inside store target 'out/a' of $
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

from engine.errors import PlanIssue
from engine.plan.document import StorageConfig
from engine.plan.operators import Store
from engine.plan.validate import PlacedOperator

FS_TYPES = ("fs",)


@dataclass(frozen=True)
class _Target:
    entry: PlacedOperator
    place: str  # the engine's root (or its name when the root is not known)
    parts: tuple[str, ...]
    text: str
    append: bool


def check_store_targets(
    entries: list[PlacedOperator], storage: Mapping[str, StorageConfig]
) -> list[PlanIssue]:
    """An issue for each store whose target equals or lies inside an earlier store's target."""
    targets = [t for t in (_target(entry, storage) for entry in entries) if t is not None]
    issues: list[PlanIssue] = []
    for i, later in enumerate(targets):
        for earlier in targets[:i]:
            issue = _clash(earlier, later)
            if issue is not None:
                issues.append(issue)
                break
    return issues


def _target(entry: PlacedOperator, storage: Mapping[str, StorageConfig]) -> _Target | None:
    op = entry.model
    if not isinstance(op, Store) or not isinstance(op.target, Mapping):
        return None
    config = storage.get(op.storage_engine)
    if config is None or config.type.lower() not in FS_TYPES:
        return None
    path = op.target.get("path")
    if not isinstance(path, str) or not path.strip("/"):
        return None  # the store itself reports it
    settings = config.extra()
    root = settings.get("root", settings.get("connection"))
    place = _normal_root(root) if isinstance(root, str) and root else f"engine {op.storage_engine}"
    parts = tuple(p for p in posixpath.normpath("/" + path).split("/") if p)
    append = str(op.target.get("mode", "overwrite")).lower() == "append"
    return _Target(entry, place, parts, path, append)


def _normal_root(root: str) -> str:
    if root.startswith("file://"):
        root = root[len("file://") :]
    elif root.startswith("file:"):
        root = root[len("file:") :]
    return posixpath.normpath(root)


def _clash(earlier: _Target, later: _Target) -> PlanIssue | None:
    if earlier.place != later.place:
        return None
    where = earlier.entry.location.path
    path = later.entry.location.of("target", "path")
    if earlier.parts == later.parts:
        if earlier.append and later.append:
            return None
        return PlanIssue(
            f"store target '{later.text}' is also written by the store at {where} "
            f"(operator {earlier.entry.op_id}); the last to run would win. Give each store its "
            "own target (or make both mode: append)",
            path,
            later.entry.op_id,
        )
    inner, outer = (later, earlier) if _inside(later, earlier) else (earlier, later)
    if not _inside(inner, outer):
        return None
    return PlanIssue(
        f"store target '{later.text}' lies {'inside' if inner is later else 'around'} store target "
        f"'{earlier.text}' of {where} (operator {earlier.entry.op_id}); a store replaces its whole "
        "target, so one would destroy the other. Give the stores targets side by side",
        path,
        later.entry.op_id,
    )


def _inside(inner: _Target, outer: _Target) -> bool:
    return len(inner.parts) > len(outer.parts) and inner.parts[: len(outer.parts)] == outer.parts
