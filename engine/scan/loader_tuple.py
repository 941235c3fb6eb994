"""Map (tuple) column states of the result set loader, and the row.

A tuple state is the row or a map: it holds its members by case-insensitive name (keeping the first
spelling), consults the projection when a member is added (an unprojected member gets no state, so
its writer is a dummy) and the vector cache for the member's starting type. A map in a row is null
unless something was written into it (or it was marked not null); a map that is an array element
exists unless it was written as null.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from engine.errors import SchemaConflictError
from engine.scan.loader_build import (
    DEFAULT_TYPES,
    KIND_NAMES,
    build_state,
    kind_of,
    kind_of_value,
)
from engine.scan.loader_projection import ProjectionNode
from engine.scan.loader_state import (
    ColumnState,
    Kind,
    LoaderContext,
    ParentState,
    UnionState,
    encode_union,
    null_mask,
    put,
    split,
)
from engine.scan.loader_values import NULL_BYTES, minor_of_value
from engine.types import DataMode, MajorType, MinorType, to_arrow, to_arrow_field


class TupleState(ColumnState):
    """A map column (or, as :class:`RootState`, the row): its members and, per slot, whether set."""

    kind = Kind.MAP

    def __init__(
        self,
        ctx: LoaderContext,
        parent: ParentState,
        name: str | None,
        path: tuple[str, ...],
        projection: ProjectionNode,
        mode: DataMode = DataMode.OPTIONAL,
    ) -> None:
        super().__init__(ctx, parent, name, path)
        self.projection = projection
        self.mode = mode
        self.children: dict[str, ColumnState] = {}
        self._by_name: dict[str, ColumnState] = {}  # exact spellings seen, a fast path
        self._unprojected: set[str] = set()
        self.present: list[bool] = []
        self._last = -1
        self._pad = parent.kind is Kind.ARRAY  # elements exist unless written as null

    # ------------------------------------------------------------ slots

    def child_slot(self) -> int:
        slot = self.parent.child_slot()
        if slot != self._last:
            put(self.present, slot, True, self._pad)
            self._last = slot
            self.has_data = True
            self.ctx.add_bytes(NULL_BYTES)
        return slot

    def scalar_slot(self) -> int:
        return self.child_slot()

    def append_null(self) -> None:
        raise AssertionError("a map member never appends elements")

    def set_null(self) -> None:
        if self.parent.kind is Kind.ARRAY:
            self.parent.append_null()
            return
        slot = self.parent.child_slot()
        put(self.present, slot, False, self._pad)
        self._last = -1
        self.ctx.add_bytes(NULL_BYTES)

    write_none = set_null

    def put_null(self, slot: int) -> None:
        put(self.present, slot, False, self._pad)
        if self._last == slot:
            self._last = -1

    # ------------------------------------------------------------ members

    def member(
        self,
        name: str,
        kind: Kind | None,
        declared: MajorType | None = None,
        *,
        widen: bool = False,
        hint: MajorType | None = None,
    ) -> ColumnState | None:
        """The state of member ``name`` (created if new), None if it is not projected.

        ``kind`` None accepts any existing kind. With ``declared``, the member takes (or must be
        compatible with) that type; ``widen`` lets it widen an existing numeric type. A new member
        without a declared or cached type starts with ``hint`` (the type of its first value).
        """
        state = self._by_name.get(name)
        if state is None:
            state = self.children.get(name.lower())
            if state is not None:
                self._by_name[name] = state
        if state is not None:
            if kind is not None and state.kind is not kind and state.kind is not Kind.UNION:
                return self._replace(state, kind, declared)
            if declared is not None:
                state.absorb(declared, widen=widen)
            return state
        if name in self._unprojected:
            return None
        node = self.projection.member(name)
        if node is None:
            self._unprojected.add(name)
            return None
        return self._create(name, kind, declared, node, hint)

    def _create(
        self,
        name: str,
        kind: Kind | None,
        declared: MajorType | None,
        node: ProjectionNode,
        hint: MajorType | None,
    ) -> ColumnState:
        path = (*self.path, name)
        major, from_cache = declared, False
        if major is None:
            cached = self.ctx.cache.lookup(path) if self.ctx.cache is not None else None
            if cached is not None and (kind is None or kind_of(cached) in (kind, None, Kind.UNION)):
                major, from_cache = cached, True
            else:
                major = hint if hint is not None else DEFAULT_TYPES[kind or Kind.SCALAR]
        state = build_state(
            self.ctx,
            self,
            name,
            path,
            major,
            node,
            members=declared is not None or from_cache,
            from_cache=from_cache,
        )
        self.children[name.lower()] = state
        self._by_name[name] = state
        state.added_version = self.ctx.schema_changed(state)
        return state

    def _replace(self, old: ColumnState, kind: Kind, declared: MajorType | None) -> ColumnState:
        if not old.replaceable:
            if self.makes_unions and (declared is None or kind is Kind.UNION):
                return self.to_union(old)
            raise old.conflict(str(declared) if declared is not None else KIND_NAMES[kind])
        assert old.name is not None
        major = declared if declared is not None else DEFAULT_TYPES[kind]
        node = self.projection.member(old.name) or self.projection
        new = build_state(self.ctx, self, old.name, old.path, major, node, members=True)
        new.added_version = old.added_version
        new.prefill_nulls(old.storage_size())
        if self.ctx.freezing(new):
            new.main_type = old.major_type(main=True)
        old.detach()
        self.children[old.name.lower()] = new
        self._by_name.clear()
        self.ctx.schema_changed(new)
        return new

    @property
    def makes_unions(self) -> bool:
        """Whether a member meeting a value of another kind becomes a UNION (not a conflict).

        Only members outside arrays do: a conflict inside an array makes the enclosing member a
        union, so a union is always a named column (which Spark's schemas can mark).
        """
        return self.ctx.allow_union and not self._pad

    def to_union(self, old: ColumnState) -> ColumnState:
        """Replace member ``old`` by a UNION column holding its values so far (the current slot's
        partly written value is dropped: the caller writes it again)."""
        assert old.name is not None
        slot = self.child_slot()
        prior = old.take(slot, True)
        new = UnionState(self.ctx, self, old.name, old.path)
        new.values = encode_union(prior) if prior is not None else [None] * slot
        new.added_version = old.added_version
        new.has_data = True
        old.detach()
        self.children[old.name.lower()] = new
        self._by_name.clear()
        self.ctx.schema_changed(new)
        return new

    def ordered(self) -> list[ColumnState]:
        """The members in output order: the vector cache's order when there is one."""
        children = list(self.children.values())
        cache = self.ctx.cache
        if cache is not None and len(children) > 1:
            children.sort(key=lambda state: cache.position(state.path))
        return children

    # ------------------------------------------------------------ values

    def write_value(self, value: Mapping[str, Any]) -> None:
        self.child_slot()
        for name, member_value in value.items():
            self.write_member(name, member_value)

    def write_member(self, name: str, value: Any) -> None:
        """Write a Python value (None, scalar, dict or list) into member ``name``."""
        if value is None:
            state = self.member(name, None)
            if state is not None:
                state.write_none()
            return
        kind = kind_of_value(value)
        state = self._by_name.get(name)
        if state is None or (state.kind is not kind and state.kind is not Kind.UNION):
            hint = None
            if kind is Kind.SCALAR and (minor := minor_of_value(value)) is not None:
                hint = MajorType(minor)
            state = self.member(name, kind, hint=hint)
        if state is None:
            return
        try:
            state.write_value(value)
        except SchemaConflictError:
            if not self.makes_unions or state.kind is Kind.UNION:
                raise
            self.to_union(state).write_value(value)

    def absorb(self, major: MajorType, *, widen: bool = False) -> None:
        """Make room for data of type ``major``: add its members, check and settle their types."""
        kind = kind_of(major)
        if kind is None:
            return
        if kind is not Kind.MAP:
            raise self.conflict(str(major))
        self.has_data = True
        for name, member_type in major.fields:
            self.member(name, kind_of(member_type), member_type, widen=widen)

    def major_type(self, main: bool = False) -> MajorType:
        if main and self.main_type is not None:
            return self.main_type
        version = self.ctx.harvest_version
        fields = tuple(
            (state.name or "", state.major_type(main))
            for state in self.ordered()
            if not main or state.added_version <= version
        )
        return MajorType(MinorType.MAP, self.mode, fields)

    # ------------------------------------------------------------ storage

    def storage_size(self) -> int:
        return len(self.present)

    def prefill_nulls(self, count: int) -> None:
        self.present = [False] * count

    def take(self, n: int, build: bool) -> pa.Array | None:
        main_present, self.present = split(self.present, n)
        self._last = self._last - n if self._last >= n else -1
        whole = build and self.main_type is None
        version = self.ctx.harvest_version
        fields: list[pa.Field] = []
        arrays: list[pa.Array] = []
        for state in self.ordered():
            included = whole and state.added_version <= version
            array = state.take(n, included)
            if included:
                assert array is not None and state.name is not None
                fields.append(to_arrow_field(state.name, state.major_type(main=True)))
                arrays.append(array)
        if not build:
            return None
        if self.main_type is not None:
            return pa.nulls(n, to_arrow(self.main_type))
        if len(main_present) < n:
            main_present = main_present + [self._pad] * (n - len(main_present))
        if not fields:
            return pa.array([{} if p else None for p in main_present], type=pa.struct([]))
        return pa.StructArray.from_arrays(arrays, fields=fields, mask=null_mask(main_present))

    def truncate(self, n: int) -> None:
        del self.present[n:]
        if self._last >= n:
            self._last = -1
        for state in self.children.values():
            state.truncate(n)

    def detach(self) -> None:
        super().detach()
        for state in self.children.values():
            state.detach()


class _NoParent:
    kind = Kind.MAP

    def child_slot(self) -> int:
        raise AssertionError("the row has no parent")

    scalar_slot = child_slot
    append_null = child_slot


class RootState(TupleState):
    """The row: its slots are the loader's rows."""

    def __init__(self, ctx: LoaderContext, projection: ProjectionNode) -> None:
        super().__init__(ctx, _NoParent(), None, (), projection, DataMode.REQUIRED)
        # the row's slots are the loader's: no call in between
        self.child_slot = self.scalar_slot = ctx.row_slot  # type: ignore[method-assign]

    def take_columns(self, n: int) -> tuple[list[pa.Field], list[pa.Array]]:
        """Split every column at row ``n``: the harvested columns (fields, arrays) and the rest."""
        version = self.ctx.harvest_version
        fields: list[pa.Field] = []
        arrays: list[pa.Array] = []
        for state in self.ordered():
            included = state.added_version <= version
            array = state.take(n, included)
            if included:
                assert array is not None and state.name is not None
                fields.append(to_arrow_field(state.name, state.major_type(main=True)))
                arrays.append(array)
        return fields, arrays
