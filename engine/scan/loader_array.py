"""Array column states of the result set loader.

An array state keeps, per slot of its parent, the start of the slot's elements in its own element
domain and whether the slot is null (an array never written in a row is null, ``[]`` is empty). Its
element state (scalar, map or array) is decided by the first element written; elements written
earlier in a row move with the row when it overflows, because the split happens at the slot's start.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from engine.scan.loader_build import (
    DEFAULT_TYPES,
    KIND_NAMES,
    array_type,
    build_state,
    element_of_type,
    kind_of,
    kind_of_value,
)
from engine.scan.loader_projection import ProjectionNode
from engine.scan.loader_state import (
    ColumnState,
    Kind,
    LoaderContext,
    ParentState,
    ScalarState,
    null_mask,
    put,
    split,
)
from engine.scan.loader_values import NULL_BYTES, OFFSET_BYTES, describe_value
from engine.types import MajorType, to_arrow


class ArrayState(ColumnState):
    """An array column (or array element of an array): slot starts, validity and the element."""

    kind = Kind.ARRAY

    def __init__(
        self,
        ctx: LoaderContext,
        parent: ParentState,
        name: str | None,
        path: tuple[str, ...],
        projection: ProjectionNode,
        *,
        nullable: bool = False,
    ) -> None:
        super().__init__(ctx, parent, name, path)
        self.projection = projection
        self.element: ColumnState | None = None
        self.nullable = nullable
        self.starts: list[int] = []
        self.valid: list[bool] = []
        self.count = 0
        self._last = -1
        self._open = False
        self._pad = parent.kind is Kind.ARRAY  # an element array of an array is empty, not null
        self._main_nullable: bool | None = None
        self._element_frozen = False
        self._main_element: MajorType | None = None

    # ------------------------------------------------------------ slots

    def _begin(self) -> None:
        slot = self.parent.child_slot()
        if slot != self._last:
            starts = self.starts
            n = len(starts)
            if n > slot:
                self.valid[slot] = True
            else:
                if n < slot:
                    starts.extend([self.count] * (slot - n))
                    self.valid.extend([self._pad] * (slot - n))
                starts.append(self.count)
                self.valid.append(True)
            self._last = slot
            self._open = False
            self.has_data = True
            self.ctx.add_bytes(OFFSET_BYTES)

    def scalar_slot(self) -> int:
        self._begin()
        self.count += 1
        return self.count - 1

    def child_slot(self) -> int:
        self._begin()
        if not self._open:
            self.count += 1
            self._open = True
        return self.count - 1

    def save(self) -> None:
        """End the current map or array element (an element with nothing written is empty)."""
        if self.element is None:
            raise self.conflict("an element of unknown kind (write it through tuple() or array())")
        self._begin()
        if not self._open:
            self.count += 1
        self._open = False

    def set_empty(self) -> None:
        """Make the array non-null (empty unless elements follow) in the current slot."""
        self._begin()

    def append_null(self) -> None:
        """Append a null element; the array's type becomes a LIST with nullable elements."""
        if not self.nullable:
            before = self.major_type()
            if self.ctx.freezing(self) and self._main_nullable is None:
                self._main_nullable = self.nullable
            self.nullable = True
            if self.major_type() != before:
                self._changed()
        if self.element is None:
            self.element = ScalarState(self.ctx, self, None, self.path)
            self.element.added_version = self.added_version
        self._begin()
        self._open = False
        self.count += 1
        self.element.put_null(self.count - 1)
        self.ctx.add_bytes(NULL_BYTES)

    def set_null(self) -> None:
        slot = self.parent.child_slot()
        n = len(self.starts)
        if n > slot:
            self.valid[slot] = False
        else:
            put(self.starts, slot, self.count, self.count)
            put(self.valid, slot, False, self._pad)
        self._last = -1
        self._open = False
        self.ctx.add_bytes(NULL_BYTES)

    write_none = set_null

    def put_null(self, slot: int) -> None:
        n = len(self.starts)
        if n > slot:
            self.valid[slot] = False
            return
        put(self.starts, slot, self.count, self.count)
        put(self.valid, slot, False, self._pad)

    # ------------------------------------------------------------ element

    def element_of(self, kind: Kind, describe: str | None = None) -> ColumnState:
        """The element state, of kind ``kind``; decided by the first element, replaced if late."""
        old = self.element
        if old is not None and old.kind is kind:
            return old
        if old is not None and not old.replaceable:
            raise self.conflict(f"LIST<{describe or KIND_NAMES[kind]}>")
        before = self.major_type()
        if self.ctx.freezing(self) and not self._element_frozen:
            self._element_frozen = True
            self._main_element = None if old is None else old.major_type(main=True)
        new = build_state(
            self.ctx, self, None, self.path, DEFAULT_TYPES[kind], self.projection, members=False
        )
        new.added_version = self.added_version
        new.prefill_nulls(self.count)
        if old is not None:
            old.detach()
        self.element = new
        if self.major_type() != before:
            self._changed()
        return new

    def write_value(self, values: list[Any] | tuple[Any, ...]) -> None:
        self._begin()
        for value in values:
            if value is None:
                self.append_null()
                continue
            kind = kind_of_value(value)
            element = self.element
            if kind is Kind.MAP:
                if element is None or element.kind is not Kind.MAP:
                    element = self.element_of(Kind.MAP)
                element.write_value(value)
                self._open = False
            elif kind is Kind.ARRAY:
                if element is None or element.kind is not Kind.ARRAY:
                    element = self.element_of(Kind.ARRAY)
                element.write_value(value)
                self._open = False
            else:
                if element is None or element.kind is not Kind.SCALAR:
                    element = self.element_of(Kind.SCALAR, describe_value(value))
                element.write_value(value)

    def absorb(self, major: MajorType, *, widen: bool = False) -> None:
        """Make room for data of type ``major``: settle the element kind, type and nullability."""
        kind = kind_of(major)
        if kind is None:
            return
        if kind is not Kind.ARRAY:
            raise self.conflict(str(major))
        self.has_data = True
        element, nullable = element_of_type(major)
        if nullable and not self.nullable:
            before = self.major_type()
            if self.ctx.freezing(self) and self._main_nullable is None:
                self._main_nullable = self.nullable
            self.nullable = True
            if self.major_type() != before:
                self._changed()
        if element is not None and (element_kind := kind_of(element)) is not None:
            self.element_of(element_kind, str(element)).absorb(element, widen=widen)

    def major_type(self, main: bool = False) -> MajorType:
        if main and self.main_type is not None:
            return self.main_type
        if main and self._element_frozen:
            element = self._main_element
        else:
            element = None if self.element is None else self.element.major_type(main)
        nullable = self.nullable
        if main and self._main_nullable is not None:
            nullable = self._main_nullable
        return array_type(element, nullable)

    def unfreeze(self) -> None:
        super().unfreeze()
        self._main_nullable = None
        self._element_frozen = False
        self._main_element = None

    # ------------------------------------------------------------ storage

    def storage_size(self) -> int:
        return len(self.starts)

    def prefill_nulls(self, count: int) -> None:
        self.starts = [0] * count
        self.valid = [False] * count
        self.count = 0

    def take(self, n: int, build: bool) -> pa.Array | None:
        starts = self.starts
        end = starts[n] if len(starts) > n else self.count
        main_starts, rest = split(starts, n)
        self.starts = [start - end for start in rest]
        main_valid, self.valid = split(self.valid, n)
        self.count -= end
        if self._last >= n:
            self._last -= n
        else:
            self._last = -1
            self._open = False
        whole = build and self.main_type is None
        element_build = whole and not self._element_frozen
        values = None if self.element is None else self.element.take(end, element_build)
        if not build:
            return None
        major = self.major_type(main=True)
        dtype = to_arrow(major)
        if not whole:
            return pa.nulls(n, dtype)
        if values is None:
            values = pa.nulls(end, dtype.value_type)
        offsets = main_starts + [end] * (n + 1 - len(main_starts))
        if len(main_valid) < n:
            main_valid = main_valid + [self._pad] * (n - len(main_valid))
        return pa.ListArray.from_arrays(
            pa.array(offsets, type=pa.int32()), values, type=dtype, mask=null_mask(main_valid)
        )

    def truncate(self, n: int) -> None:
        end = self.starts[n] if len(self.starts) > n else self.count
        del self.starts[n:]
        del self.valid[n:]
        self.count = end
        if self._last >= n:
            self._last = -1
            self._open = False
        if self.element is not None:
            self.element.truncate(end)

    def detach(self) -> None:
        super().detach()
        if self.element is not None:
            self.element.detach()
