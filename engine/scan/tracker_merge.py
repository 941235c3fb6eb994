"""How the tracker combines what it knows of a column with the type a reader produced.

The rules, one column at a time (a *hint* is the provided or defined schema's type):

* A hinted column has the hint's type; the reader's values are converted to it. If no conversion
  exists at all (a map into an INT) that is a :class:`SchemaConflictError`.
* A column seen for the first time takes the reader's type, made nullable (a later file may lack
  it). A column the reader produced as all-null (Arrow ``null``), or did not produce at all, is
  *missing*: it gets the tracker's null type (Drill's classic nullable INT) and is marked guessed.
* A known column meets a reader type:
  - the reader's NULL type never changes anything;
  - a guessed column takes the reader's type if the schema may change (schema-change mode, or the
    first batch in strict mode); after the strict commit a different type is a conflict;
  - maps merge member by member; new members widen the map, or after the strict commit are
    ignored with a warning;
  - lists merge their elements;
  - a narrower number converts into the known wider one; a wider one widens the column in
    schema-change mode and is a conflict after the strict commit;
  - a UNION column takes every type as it is;
  - any other difference is a conflict in strict mode and without ``unions``; in schema-change
    mode with ``unions`` the column (the nearest named column: a conflict inside a list makes the
    list's column the union) becomes a UNION.
* A map projected by members (``m.a``) keeps exactly those members; missing ones are guessed.

>>> from engine.types import BIGINT, INT, MajorType
>>> ctx = MergeContext(file="f.json", frozen=False, null_type=INT)
>>> str(resolve(("m",), None, None, MajorType.map({"a": INT}),
...             MajorType.map({"a": BIGINT, "b": INT}), ctx))
'MAP<a: BIGINT, b: INT>'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from engine.errors import SchemaConflictError
from engine.expr.coercion import numeric_common
from engine.scan.projection import ProjectedColumn, name_key
from engine.scan.tracker_align import check_conversion
from engine.types import NUMERIC, UNION, DataMode, MajorType, MinorType

Path = tuple[str, ...]
ELEMENT = "[]"  # the path segment of a list's elements, in messages and guessed paths


def _path_key(path: Path) -> tuple[str, ...]:
    return tuple(name_key(p) for p in path)


def dotted(path: Path) -> str:
    return ".".join(path).replace("." + ELEMENT, ELEMENT)


@dataclass
class MergeContext:
    """What one merge needs: the file (for messages), whether the schema is committed, the guesses."""

    file: str | None
    frozen: bool
    null_type: MajorType
    guessed: set[tuple[str, ...]] = field(default_factory=set)
    warn: Callable[[str], None] = lambda message: None
    unions: bool = False

    def conflict(self, path: Path, old: MajorType | str, new: MajorType) -> SchemaConflictError:
        hint = (
            "give the column a type in the selection's `schema`, or use schemaMode: change"
            if self.frozen
            else "give the column one type in the selection's `schema` (e.g. VARCHAR)"
        )
        return SchemaConflictError(
            column=dotted(path), old_type=str(old), new_type=str(new), file=self.file, hint=hint
        )


def relax(t: MajorType) -> MajorType:
    """A reader's type as the scan outputs it: nullable everywhere; REPEATED X as LIST<X>.

    >>> from engine.types import BIGINT
    >>> str(relax(BIGINT.with_mode(DataMode.REPEATED)))
    'LIST<BIGINT>'
    """
    if t.mode == DataMode.REPEATED:
        return MajorType.list_of(relax(t.with_mode(DataMode.OPTIONAL)))
    if t.minor == MinorType.MAP:
        return MajorType.map({name: relax(child) for name, child in t.fields})
    if t.minor == MinorType.LIST:
        assert t.element is not None
        return MajorType.list_of(relax(t.element))
    return t.with_mode(DataMode.OPTIONAL)


def member(t: MajorType | None, name: str) -> tuple[str, MajorType] | None:
    """The member ``name`` of map type ``t`` (case-insensitive) with its spelling, or None."""
    if t is None:
        return None
    key = name_key(name)
    return next(((n, c) for n, c in t.fields if name_key(n) == key), None)


def map_depth(t: MajorType) -> int | None:
    """How many lists wrap the map in ``t`` (MAP 0, LIST<MAP> 1, ...); None if ``t`` holds no map."""
    if t.minor == MinorType.MAP:
        return 0 if t.mode != DataMode.REPEATED else 1
    if t.minor == MinorType.LIST and t.element is not None:
        inner = map_depth(t.element)
        return None if inner is None else inner + 1
    return None


def inner_map(t: MajorType | None) -> MajorType | None:
    """The map inside ``t`` (through lists), or None."""
    if t is None or map_depth(t) is None:
        return None
    return t if t.minor == MinorType.MAP else inner_map(t.element)


def rewrap(template: MajorType, fields: tuple[tuple[str, MajorType], ...]) -> MajorType:
    """``template`` with the fields of its inner map replaced."""
    if template.minor == MinorType.MAP:
        return MajorType(MinorType.MAP, template.mode, fields)
    assert template.element is not None
    return MajorType.list_of(rewrap(template.element, fields), template.mode)


def settle(path: Path, t: MajorType, ctx: MergeContext) -> MajorType:
    """A newly seen (relaxed) type with its NULL parts replaced by guesses."""
    if t.minor == MinorType.NULL:
        ctx.guessed.add(_path_key(path))
        return ctx.null_type
    if t.minor == MinorType.MAP:
        return MajorType(
            t.minor, t.mode, tuple((n, settle((*path, n), c, ctx)) for n, c in t.fields)
        )
    if t.minor == MinorType.LIST:
        assert t.element is not None
        return MajorType.list_of(settle((*path, ELEMENT), t.element, ctx), t.mode)
    return t


def merge(path: Path, current: MajorType, incoming: MajorType, ctx: MergeContext) -> MajorType:
    """The type of a known column after a reader produced ``incoming`` (relaxed) for it."""
    if current.minor == MinorType.UNION:
        return current
    try:
        return _merge(path, current, incoming, ctx)
    except SchemaConflictError:
        if ctx.unions and not ctx.frozen and path[-1] != ELEMENT:
            return UNION
        raise


def _merge(path: Path, current: MajorType, incoming: MajorType, ctx: MergeContext) -> MajorType:
    key = _path_key(path)
    if incoming.minor == MinorType.NULL:
        return current
    if key in ctx.guessed:
        if incoming != current and ctx.frozen:
            raise ctx.conflict(path, current, incoming)
        ctx.guessed.discard(key)
        return settle(path, incoming, ctx)
    if current == incoming:
        return current
    if current.minor == incoming.minor == MinorType.MAP:
        return _merge_members(path, current, incoming, ctx)
    if current.minor == incoming.minor == MinorType.LIST:
        assert current.element is not None and incoming.element is not None
        element = merge((*path, ELEMENT), current.element, incoming.element, ctx)
        return MajorType.list_of(element, current.mode)
    if current.minor in NUMERIC and incoming.minor in NUMERIC:
        wider = numeric_common(current, incoming)
        if wider == current.with_mode(DataMode.OPTIONAL):
            return current
        if not ctx.frozen:
            return wider.with_mode(current.mode)
    raise ctx.conflict(path, current, incoming)


def _merge_members(
    path: Path, current: MajorType, incoming: MajorType, ctx: MergeContext
) -> MajorType:
    fields = []
    for name, child in current.fields:
        found = member(incoming, name)
        fields.append((name, merge((*path, name), child, found[1], ctx) if found else child))
    for name, child in incoming.fields:
        if member(current, name) is not None:
            continue
        if ctx.frozen:
            ctx.warn(f"column '{dotted((*path, name))}' is not in the committed schema; ignored")
            continue
        fields.append((name, settle((*path, name), child, ctx)))
    return MajorType(current.minor, current.mode, tuple(fields))


def resolve(
    path: Path,
    projection: ProjectedColumn | None,
    hint: MajorType | None,
    current: MajorType | None,
    incoming: MajorType | None,
    ctx: MergeContext,
    *,
    settle_missing: bool = True,
) -> MajorType | None:
    """The type of one projected column after a reader produced ``incoming`` (None: not at all).

    ``projection`` None means the whole column. ``settle_missing`` False leaves a column with no
    type yet unresolved (None) instead of guessing it, as before the first batch.
    """
    partial = projection is not None and projection.members is not None
    if hint is not None and not (partial and map_depth(hint) is not None):
        if incoming is not None:
            check_conversion(incoming, hint, column=dotted(path), file=ctx.file)
        return hint
    if partial:
        assert projection is not None
        return _resolve_members(path, projection, hint, current, incoming, ctx, settle_missing)
    if incoming is None:
        if current is not None or not settle_missing:
            return current
        return settle(path, MajorType(MinorType.NULL), ctx)
    incoming = relax(incoming)
    if current is None:
        return settle(path, incoming, ctx)
    return merge(path, current, incoming, ctx)


def _resolve_members(
    path: Path,
    projection: ProjectedColumn,
    hint: MajorType | None,
    current: MajorType | None,
    incoming: MajorType | None,
    ctx: MergeContext,
    settle_missing: bool,
) -> MajorType | None:
    """A map projected by members: the container comes from the hint, what is known, or the reader."""
    members = projection.members
    assert members is not None
    if incoming is not None and incoming.minor == MinorType.NULL:
        incoming = None
    incoming = relax(incoming) if incoming is not None else None
    template = hint or current or incoming or MajorType.map({})
    if map_depth(template) is None:  # the reader's first sight of the column is not a map
        prefix = "".join(f"{p}." for p in path[:-1])
        wanted = ", ".join(projection.path_strings(prefix))
        raise ctx.conflict(path, f"MAP (projected as {wanted})", template)
    if incoming is not None and map_depth(incoming) != map_depth(template):
        raise ctx.conflict(path, template, incoming)
    fields = []
    for projected in members:
        hint_member = member(inner_map(hint), projected.name)
        current_member = member(inner_map(current), projected.name)
        incoming_member = member(inner_map(incoming), projected.name)
        resolved = resolve(
            (*path, projected.name),
            projected,
            hint_member[1] if hint_member else None,
            current_member[1] if current_member else None,
            incoming_member[1] if incoming_member else None,
            ctx,
            settle_missing=settle_missing,
        )
        if resolved is None:
            return None
        fields.append((projected.name, resolved))
    return rewrap(template, tuple(fields))
