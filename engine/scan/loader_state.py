"""Column states of the result set loader (seed 002): the stateful layer under the writers.

A column state holds a column's values for the batch being written, as plain Python lists indexed by
*slot*: a top-level column has one slot per row, a member of a map shares its map's slots, the
elements of an array have their own slot domain (the array keeps the start of each of its slots in
that domain, like an offset vector). Lists are padded lazily: a slot never written is null.

Overflow does not copy data between two sets of vectors: the loader remembers where the overflow row
begins, and at harvest each state splits its lists there (:meth:`ColumnState.take`), builds the Arrow
array of the first part and keeps the rest, rebased to slot 0, as the look-ahead batch. An array
splits its element domain at the start of the split slot, so elements written earlier in the
overflow row move with it, at any depth.

A type change made during a row (a late type resolved, a widening) records the type the column had
before it (its *frozen* type); if that row overflows, the harvested batch is built with the frozen
types, so it has exactly the schema of its schema version.

>>> values = [1]
>>> put(values, 3, 4, None); values
[1, None, None, 4]
>>> split(values, 1)
([1], [None, None, 4])
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import DrillError, LoaderStateError, SchemaConflictError, StorageError
from engine.scan.loader_values import (
    FIXED_WIDTH,
    NULL_BYTES,
    WIDENINGS,
    Converter,
    ValueOutOfRange,
    arrow_castable,
    converter,
    describe_value,
    minor_of_value,
    required_default,
)
from engine.types import UNION, DataMode, MajorType, MinorType, json_text, to_arrow, union_array

if TYPE_CHECKING:
    from engine.scan.vector_cache import VectorCache


# Python types a column of the Drill type stores without conversion.
_STORED_AS_IS: dict[type, MinorType] = {
    str: MinorType.VARCHAR,
    float: MinorType.FLOAT8,
    bool: MinorType.BIT,
    bytes: MinorType.VARBINARY,
}


class Kind(enum.Enum):
    SCALAR = "scalar"
    MAP = "map"
    ARRAY = "array"
    UNION = "union"


class LoaderContext(Protocol):
    """What column states need from their loader."""

    source: str | None
    cache: VectorCache | None
    allow_union: bool

    @property
    def schema_version(self) -> int: ...

    @property
    def harvest_version(self) -> int: ...

    def row_slot(self) -> int: ...

    def add_bytes(self, size: int) -> None: ...

    def schema_changed(self, state: ColumnState) -> int: ...

    def freezing(self, state: ColumnState) -> bool: ...


class ParentState(Protocol):
    kind: Kind

    def child_slot(self) -> int: ...

    def scalar_slot(self) -> int: ...

    def append_null(self) -> None: ...


def put(values: list[Any], slot: int, value: Any, pad: Any) -> None:
    """Set ``values[slot]``, padding the slots skipped since the last write with ``pad``."""
    n = len(values)
    if n == slot:
        values.append(value)
    elif n > slot:
        values[slot] = value
    else:
        values.extend([pad] * (slot - n))
        values.append(value)


def split(values: list[Any], n: int) -> tuple[list[Any], list[Any]]:
    """The first ``n`` slots and the rest of a lazily padded list (no copy when nothing remains)."""
    if len(values) <= n:
        return values, []
    return values[:n], values[n:]


def null_mask(valid: list[bool]) -> pa.Array | None:
    """The Arrow null mask (True = null) of a validity list, or None when every slot is valid."""
    if all(valid):
        return None
    return pc.invert(pa.array(valid, type=pa.bool_()))


class ColumnState:
    """Common part of scalar, map and array states. ``path`` names the column for messages."""

    kind: Kind

    def __init__(
        self, ctx: LoaderContext, parent: ParentState, name: str | None, path: tuple[str, ...]
    ):
        self.ctx = ctx
        self.parent = parent
        self.name = name  # None for the element of an array
        self.path = path
        self.added_version = ctx.schema_version
        self.from_cache = False
        self.has_data = False
        self.main_type: MajorType | None = None  # frozen: the type this column replaced in a row
        self.declared = False  # typed by the loader's schema: values never change its type

    @property
    def label(self) -> str:
        return ".".join(self.path)

    @property
    def replaceable(self) -> bool:
        """Whether a value of another kind may replace this column (nothing written, late typed)."""
        return not self.has_data and self.from_cache

    def major_type(self, main: bool = False) -> MajorType:
        raise NotImplementedError

    def take(self, n: int, build: bool) -> pa.Array | None:
        """Split off slots ``[0, n)`` (as an Arrow array when ``build``); keep the rest, rebased."""
        raise NotImplementedError

    def truncate(self, n: int) -> None:
        """Drop every slot from ``n`` on (a discarded row)."""
        raise NotImplementedError

    def storage_size(self) -> int:
        raise NotImplementedError

    def prefill_nulls(self, count: int) -> None:
        """Start with ``count`` explicit null slots (this state replaces one that held only nulls)."""
        raise NotImplementedError

    def put_null(self, slot: int) -> None:
        """Make slot ``slot`` null (an array appended a null element)."""
        raise NotImplementedError

    def write_value(self, value: Any) -> None:
        """Write a Python value (scalar, dict or list) into this column for the current slot."""
        raise NotImplementedError

    def write_none(self) -> None:
        raise NotImplementedError

    def unfreeze(self) -> None:
        self.main_type = None

    def detach(self) -> None:
        """This state was replaced: writers still holding it must not write into the void."""

        def stale() -> int:
            raise LoaderStateError(f"column '{self.label}' changed kind; get its writer again")

        self.child_slot = self.scalar_slot = self._slot = stale  # type: ignore[method-assign]

    def conflict(self, new_type: str) -> SchemaConflictError:
        return SchemaConflictError(
            column=self.label,
            old_type=str(self.major_type()),
            new_type=new_type,
            file=self.ctx.source,
        )

    def _changed(self) -> None:
        self.ctx.schema_changed(self)


class ScalarState(ColumnState):
    """A scalar column, or the scalar elements of an array (then ``name`` is None)."""

    kind = Kind.SCALAR

    def __init__(
        self,
        ctx: LoaderContext,
        parent: ParentState,
        name: str | None,
        path: tuple[str, ...],
        minor: MinorType = MinorType.NULL,
        mode: DataMode = DataMode.OPTIONAL,
    ) -> None:
        super().__init__(ctx, parent, name, path)
        self.minor = minor
        self.mode = DataMode.OPTIONAL if name is None else mode
        self.values: list[Any] = []
        self._main_minor: MinorType | None = None
        self._accept: dict[type, tuple[Converter | None, int | None]] = {}
        self._is_element = parent.kind is Kind.ARRAY
        self._slot: Callable[[], int] = parent.scalar_slot

    @property
    def replaceable(self) -> bool:
        return not self.has_data and (self.minor == MinorType.NULL or self.from_cache)

    def major_type(self, main: bool = False) -> MajorType:
        if main:
            if self.main_type is not None:
                return self.main_type
            if self._main_minor is not None:
                return MajorType(self._main_minor, self.mode)
        return MajorType(self.minor, self.mode)

    def write(self, value: Any) -> None:
        if value is None:
            self.write_null()
            return
        entry = self._accept.get(type(value))
        if entry is None:
            entry = self._resolve(value)
        convert, width = entry
        if convert is None:
            stored = value
        else:
            try:
                stored = convert(value)
            except ValueOutOfRange:
                raise self._out_of_range(value) from None
        slot = self._slot()
        self.ctx.add_bytes(width if width is not None else len(stored) + 4)
        values = self.values
        n = len(values)
        if n == slot:
            values.append(stored)
        elif n > slot:
            values[slot] = stored
        else:
            values.extend([None] * (slot - n))
            values.append(stored)
        self.has_data = True

    write_value = write

    def write_null(self) -> None:
        if self._is_element:
            self.parent.append_null()
            return
        if self.mode == DataMode.REQUIRED:
            raise self.conflict("NULL")
        slot = self._slot()
        self.ctx.add_bytes(NULL_BYTES)
        if len(self.values) > slot:
            self.values[slot] = None

    write_none = write_null

    def put_null(self, slot: int) -> None:
        put(self.values, slot, None, None)

    def _resolve(self, value: Any) -> tuple[Converter | None, int | None]:
        value_minor = minor_of_value(value)
        if value_minor is None:
            raise self.conflict(describe_value(value))
        convert = converter(self.minor, value_minor)
        widens = not self.declared and (self.minor, value_minor) in WIDENINGS
        if convert is None and (self.replaceable or widens):
            # A late type settles; a number column widens (1 then 1.5 is FLOAT8, as Drill's JSON
            # reader and the tracker's change mode widen).
            self._set_minor(value_minor)
            convert = converter(self.minor, value_minor)
        if convert is None:
            raise self.conflict(value_minor.value)
        if type(value) in _STORED_AS_IS and _STORED_AS_IS[type(value)] == self.minor:
            convert = None
        entry = (convert, FIXED_WIDTH.get(self.minor))
        self._accept[type(value)] = entry
        return entry

    def _out_of_range(self, value: Any) -> DrillError:
        if self.minor == MinorType.INT:
            return self.conflict(MinorType.BIGINT.value)
        return StorageError(
            f"integer {value} in column '{self.label}' does not fit {self.minor.value}",
            file=self.ctx.source,
        )

    def _set_minor(self, minor: MinorType) -> None:
        if self.ctx.freezing(self) and self._main_minor is None:
            self._main_minor = self.minor
        self.minor = minor
        self._accept.clear()
        self._changed()

    def accept_type(self, minor: MinorType, *, widen: bool = False) -> None:
        """Take type ``minor`` (a late type resolved, a requested or Arrow-data widening)."""
        if minor == self.minor or minor == MinorType.NULL:
            return
        if self.replaceable or (widen and (self.minor, minor) in WIDENINGS):
            self._set_minor(minor)
        else:
            raise self.conflict(minor.value)

    def absorb(self, major: MajorType, *, widen: bool = False) -> None:
        """Make room for data (or a declaration) of type ``major``; a castable type fits as is."""
        if major.mode == DataMode.REPEATED or major.minor in (MinorType.MAP, MinorType.LIST):
            raise self.conflict(str(major))
        if major.minor == MinorType.NULL:
            return
        if not arrow_castable(major.minor, self.minor) or (widen and major.minor != self.minor):
            self.accept_type(major.minor, widen=widen)
        self.has_data = True

    def unfreeze(self) -> None:
        super().unfreeze()
        self._main_minor = None

    def storage_size(self) -> int:
        return len(self.values)

    def prefill_nulls(self, count: int) -> None:
        self.values = [None] * count

    def take(self, n: int, build: bool) -> pa.Array | None:
        main, self.values = split(self.values, n)
        if not build:
            return None
        major = self.major_type(main=True)
        dtype = to_arrow(major)
        if major.minor == MinorType.NULL or self.main_type is not None:
            return pa.nulls(n, dtype)
        if len(main) < n:
            main.extend([None] * (n - len(main)))
        array = pa.array(main, type=dtype)
        if major.mode == DataMode.REQUIRED and array.null_count:
            array = pc.fill_null(array, required_default(major.minor, dtype))
        return array

    def truncate(self, n: int) -> None:
        del self.values[n:]


class UnionState(ColumnState):
    """A column whose values have several kinds (Drill's UNION): each value kept as JSON text.

    A map member becomes a union when a value of another kind meets it and the loader allows
    unions (:meth:`~engine.scan.loader_tuple.TupleState.to_union`); its earlier values are
    re-encoded. It accepts any value from then on.
    """

    kind = Kind.UNION

    def __init__(
        self, ctx: LoaderContext, parent: ParentState, name: str | None, path: tuple[str, ...]
    ) -> None:
        super().__init__(ctx, parent, name, path)
        self.values: list[str | None] = []
        self._slot: Callable[[], int] = parent.scalar_slot

    @property
    def replaceable(self) -> bool:
        return False

    def major_type(self, main: bool = False) -> MajorType:
        if main and self.main_type is not None:
            return self.main_type
        return UNION

    def write_value(self, value: Any) -> None:
        if value is None:
            self.write_none()
            return
        text = json_text(value)
        assert text is not None
        slot = self._slot()
        self.ctx.add_bytes(len(text) + 4)
        put(self.values, slot, text, None)
        self.has_data = True

    def write_none(self) -> None:
        slot = self._slot()
        self.ctx.add_bytes(NULL_BYTES)
        if len(self.values) > slot:
            self.values[slot] = None

    def put_null(self, slot: int) -> None:
        put(self.values, slot, None, None)

    def absorb(self, major: MajorType, *, widen: bool = False) -> None:
        self.has_data = True  # a union takes values of every type

    def storage_size(self) -> int:
        return len(self.values)

    def prefill_nulls(self, count: int) -> None:
        self.values = [None] * count

    def take(self, n: int, build: bool) -> pa.Array | None:
        main, self.values = split(self.values, n)
        if not build:
            return None
        if self.main_type is not None:
            return pa.nulls(n, to_arrow(self.main_type))
        if len(main) < n:
            main = main + [None] * (n - len(main))
        return union_array_of_text(main)

    def truncate(self, n: int) -> None:
        del self.values[n:]


def union_array_of_text(texts: list[str | None]) -> pa.Array:
    """A ``drill.union`` array from JSON texts."""
    from engine.types import UNION_ARROW

    return pa.ExtensionArray.from_storage(UNION_ARROW, pa.array(texts, pa.string()))


def encode_union(values: pa.Array) -> list[str | None]:
    """The JSON texts of an Arrow array's values (what a new union column starts from)."""
    return union_array(values).storage.to_pylist()
