"""Building column states from Drill types, and the kinds of columns values and types make.

A column is a scalar, a map or an array (:class:`~engine.scan.loader_state.Kind`); a Drill type
says which (the NULL type fits any kind: it is Drill's "not known yet").

>>> from engine.types import BIGINT
>>> kind_of(MajorType.list_of(BIGINT)), kind_of(MajorType.map({})), kind_of(BIGINT)
(<Kind.ARRAY: 'array'>, <Kind.MAP: 'map'>, <Kind.SCALAR: 'scalar'>)
>>> str(array_type(BIGINT, nullable=False)), str(array_type(BIGINT, nullable=True))
('REPEATED BIGINT', 'LIST<BIGINT>')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.scan.loader_projection import ProjectionNode
from engine.scan.loader_state import (
    ColumnState,
    Kind,
    LoaderContext,
    ParentState,
    ScalarState,
    UnionState,
)
from engine.types import NULL, DataMode, MajorType, MinorType

KIND_NAMES = {Kind.SCALAR: "a scalar", Kind.MAP: "MAP", Kind.ARRAY: "LIST", Kind.UNION: "UNION"}


def kind_of(major: MajorType) -> Kind | None:
    """The kind of column a Drill type makes; None for the NULL type (it fits any kind)."""
    if major.mode == DataMode.REPEATED or major.minor == MinorType.LIST:
        return Kind.ARRAY
    if major.minor == MinorType.MAP:
        return Kind.MAP
    if major.minor == MinorType.UNION:
        return Kind.UNION
    return None if major.minor == MinorType.NULL else Kind.SCALAR


def element_of_type(major: MajorType) -> tuple[MajorType | None, bool]:
    """The element type of an array type and whether its elements may be null."""
    if major.mode == DataMode.REPEATED:
        return major.with_mode(DataMode.OPTIONAL), False
    element = major.element
    if element is None or (element.minor == MinorType.NULL and element.mode != DataMode.REPEATED):
        # Not known yet: the first element decides. Data of type LIST<NULL> may hold null elements,
        # the loader's own "unknown" marker (a REQUIRED NULL element) holds none.
        return None, element is not None and element.mode != DataMode.REQUIRED
    return element, element.mode != DataMode.REQUIRED


_VALUE_KINDS: dict[type, Kind] = {
    **{t: Kind.SCALAR for t in (int, float, str, bool, bytes)},
    dict: Kind.MAP,
    list: Kind.ARRAY,
    tuple: Kind.ARRAY,
}


def kind_of_value(value: Any) -> Kind:
    """The kind of column a Python value goes to: dicts to maps, lists to arrays."""
    kind = _VALUE_KINDS.get(type(value))
    if kind is not None:
        return kind
    return Kind.MAP if isinstance(value, Mapping) else Kind.SCALAR


DEFAULT_TYPES = {
    Kind.SCALAR: NULL,
    Kind.MAP: MajorType.map({}),
    Kind.ARRAY: MajorType.list_of(NULL.with_mode(DataMode.REQUIRED)),
}


def build_state(
    ctx: LoaderContext,
    parent: ParentState,
    name: str | None,
    path: tuple[str, ...],
    major: MajorType,
    projection: ProjectionNode,
    *,
    members: bool,
    from_cache: bool = False,
) -> ColumnState:
    """A new state tree for a column of type ``major``; map members only when ``members``."""
    # the state classes build their members with this function: import them when it first runs
    from engine.scan.loader_array import ArrayState
    from engine.scan.loader_tuple import TupleState

    kind = kind_of(major) or Kind.SCALAR
    state: ColumnState
    if kind is Kind.ARRAY:
        element, nullable = element_of_type(major)
        array = ArrayState(ctx, parent, name, path, projection, nullable=nullable)
        if element is not None:
            array.element = build_state(
                ctx, array, None, path, element, projection, members=members, from_cache=from_cache
            )
        state = array
    elif kind is Kind.MAP:
        mode = DataMode.OPTIONAL if name is None else major.mode
        tuple_state = TupleState(ctx, parent, name, path, projection, mode=mode)
        if members:
            for member_name, member_type in major.fields:
                child = tuple_state.member(member_name, kind_of(member_type), member_type)
                if child is not None and from_cache:
                    mark_from_cache(child)
        state = tuple_state
    elif kind is Kind.UNION:
        state = UnionState(ctx, parent, name, path)
    else:
        state = ScalarState(ctx, parent, name, path, major.minor, major.mode)
    state.from_cache = from_cache
    return state


def array_type(element: MajorType | None, nullable: bool) -> MajorType:
    """The Drill type of an array whose elements have type ``element`` (None: not known yet).

    Non-null scalars and maps make a REPEATED type; nullable elements, arrays and unknown elements a
    LIST (the Arrow list's element is then nullable, as :func:`engine.types.to_arrow` maps it).
    """
    if element is None or (element.minor == MinorType.NULL and element.mode != DataMode.REPEATED):
        return MajorType.list_of(NULL)
    if element.mode == DataMode.REPEATED or element.minor == MinorType.LIST:
        return MajorType.list_of(element)
    if nullable:
        return MajorType.list_of(element.with_mode(DataMode.OPTIONAL))
    return element.with_mode(DataMode.REPEATED)


def mark_from_cache(state: Any) -> None:
    """Flag a state tree as typed by the vector cache (so the reader's first value may retype it)."""
    state.from_cache = True
    if state.kind is Kind.MAP:
        for child in state.children.values():
            mark_from_cache(child)
    elif state.kind is Kind.ARRAY and state.element is not None:
        mark_from_cache(state.element)
