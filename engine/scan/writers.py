"""Column writers of the result set loader: the application-facing side of seed 002.

A reader gets a :class:`RowSetWriter` from its loader and, for each row, writes columns by name::

    writer = loader.writer()
    writer.start_row()
    writer.scalar("a").set_int(1)                # a scalar column
    writer.map("m").scalar("x").set("hello")     # a member of a map (struct)
    xs = writer.array("xs")                      # an array (list) column
    xs.scalar().set(1); xs.scalar().set(2)       # each set() appends an element
    points = writer.array("points")              # an array of maps: write members, then save()
    points.tuple().scalar("x").set(1.5); points.save()
    writer.save_row()

Columns are added on first use (``scalar``, ``map``, ``array``) with Drill's late NULL type, which the
first non-null value settles; ``add_column(name, MajorType)`` declares a type up front. A column that
is not projected gets a *dummy* writer: it accepts values and stores nothing. Writers stay valid
across batches; a writer for a column whose kind later changed (an all-null column that turned out
to be a map) raises on use, get it again by name.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine.scan.loader_array import ArrayState
from engine.scan.loader_build import kind_of
from engine.scan.loader_state import ColumnState, Kind, ScalarState
from engine.scan.loader_tuple import TupleState
from engine.types import MajorType, MinorType

if TYPE_CHECKING:
    from engine.scan.loader import ResultSetLoader


class ScalarWriter:
    """Writes a scalar column, or appends the scalar elements of an array (one per ``set``).

    >>> from engine.scan.loader import ResultSetLoader
    >>> loader = ResultSetLoader(); loader.start_batch(); w = loader.writer()
    >>> w.start_row(); w.scalar("n").set_int(7); w.save_row()
    >>> loader.harvest().column("n").to_pylist()
    [7]
    """

    __slots__ = ("_state",)
    is_projected = True

    def __init__(self, state: ScalarState) -> None:
        self._state = state

    @property
    def type(self) -> MajorType:
        return self._state.major_type()

    def set(self, value: Any) -> None:
        """Write any Python scalar (None writes a null)."""
        self._state.write(value)

    def set_null(self) -> None:
        self._state.write_null()

    def set_int(self, value: int | None) -> None:
        self._state.write(None if value is None else int(value))

    def set_float(self, value: float | None) -> None:
        self._state.write(None if value is None else float(value))

    def set_bool(self, value: bool | None) -> None:
        self._state.write(None if value is None else bool(value))

    def set_string(self, value: str | None) -> None:
        self._state.write(None if value is None else str(value))

    def set_bytes(self, value: bytes | None) -> None:
        self._state.write(None if value is None else bytes(value))

    def set_date(self, value: datetime.date | None) -> None:
        self._state.write(value)

    def set_time(self, value: datetime.time | None) -> None:
        self._state.write(value)

    def set_timestamp(self, value: datetime.datetime | None) -> None:
        self._state.write(value)

    def widen(self, minor: MinorType) -> None:
        """Widen the column's type (INT -> BIGINT, INT/BIGINT/FLOAT4 -> FLOAT8): a schema change."""
        self._state.accept_type(minor, widen=True)


class TupleWriter:
    """Writes the members of a map (and, as :class:`RowSetWriter`, the columns of a row)."""

    __slots__ = ("_state", "_writers")
    is_projected = True

    def __init__(self, state: TupleState) -> None:
        self._state = state
        self._writers: dict[str, tuple[ColumnState | None, Any]] = {}

    @property
    def type(self) -> MajorType:
        return self._state.major_type()

    @property
    def names(self) -> list[str]:
        """The names of the (projected) members, in output order."""
        return [state.name or "" for state in self._state.ordered()]

    def _writer(self, name: str, kind: Kind | None, declared: MajorType | None = None) -> Any:
        cached = self._writers.get(name)
        if cached is not None and declared is None:
            state, writer = cached
            if state is None:
                return writer if kind is None else _dummy_for(kind)
            if state is self._state.children.get(name.lower()) and kind in (None, state.kind):
                return writer
        state = self._state.member(name, kind, declared, widen=declared is not None)
        if cached is not None and cached[0] is state and state is not None:
            return cached[1]
        writer = _writer_for(state, kind)
        self._writers[name] = (state, writer)
        return writer

    def scalar(self, name: str) -> ScalarWriter:
        """The writer of scalar member ``name``, added (with the late NULL type) if new."""
        return self._writer(name, Kind.SCALAR)

    def map(self, name: str) -> TupleWriter:
        """The writer of map member ``name``, added if new."""
        return self._writer(name, Kind.MAP)

    def array(self, name: str) -> ArrayWriter:
        """The writer of array member ``name``, added if new (its element kind comes later)."""
        return self._writer(name, Kind.ARRAY)

    def add_column(self, name: str, major: MajorType) -> ScalarWriter | TupleWriter | ArrayWriter:
        """Declare member ``name`` with a type (a map's members included); the writer for it.

        An existing member must be compatible: a NULL-typed one takes the type, a numeric one may
        widen to it; otherwise :class:`~engine.errors.SchemaConflictError`.
        """
        return self._writer(name, kind_of(major), major)

    def column(self, name: str) -> ScalarWriter | TupleWriter | ArrayWriter:
        """The writer of an existing member (KeyError if there is none)."""
        if name.lower() not in self._state.children:
            raise KeyError(name)
        return self._writer(name, None)

    def set(self, value: Mapping[str, Any] | None) -> None:
        """Write a dict into the map (nested dicts and lists go to maps and arrays); None: null."""
        if value is None:
            self._state.write_none()
        else:
            self._state.write_value(value)

    def set_null(self) -> None:
        """Make the map null in this row (an element of an array of maps: append a null element)."""
        self._state.set_null()

    def set_not_null(self) -> None:
        """Make the map non-null in this row even if no member is written (``{}``)."""
        self._state.child_slot()


class ArrayWriter:
    """Writes an array: ``scalar()`` appends scalars; ``tuple()``/``array()`` then ``save()``.

    >>> from engine.scan.loader import ResultSetLoader
    >>> loader = ResultSetLoader(); loader.start_batch(); w = loader.writer()
    >>> w.start_row(); pts = w.array("pts")
    >>> pts.tuple().scalar("x").set(1); pts.save(); pts.tuple().scalar("x").set(2); pts.save()
    >>> w.save_row(); loader.harvest().column("pts").to_pylist()
    [[{'x': 1}, {'x': 2}]]
    """

    __slots__ = ("_element", "_state")
    is_projected = True

    def __init__(self, state: ArrayState) -> None:
        self._state = state
        self._element: tuple[ColumnState, Any] | None = None

    @property
    def type(self) -> MajorType:
        return self._state.major_type()

    def _element_writer(self, kind: Kind) -> Any:
        cached = self._element
        if cached is not None and cached[0] is self._state.element and cached[0].kind is kind:
            return cached[1]
        state = self._state.element_of(kind)
        writer = _writer_for(state, kind)
        self._element = (state, writer)
        return writer

    def scalar(self) -> ScalarWriter:
        """The element writer for an array of scalars: every ``set`` appends an element."""
        return self._element_writer(Kind.SCALAR)

    def tuple(self) -> TupleWriter:
        """The element writer for an array of maps: writes the current element; ``save()`` ends it."""
        return self._element_writer(Kind.MAP)

    map = tuple

    def array(self) -> ArrayWriter:
        """The element writer for an array of arrays; ``save()`` ends the current inner array."""
        return self._element_writer(Kind.ARRAY)

    def save(self) -> None:
        """End the current map or array element (nothing written: an empty element)."""
        self._state.save()

    def append_null(self) -> None:
        """Append a null element (the array becomes a LIST with nullable elements)."""
        self._state.append_null()

    def set(self, values: Sequence[Any] | None) -> None:
        """Append the Python values of a list (dicts, lists, scalars, None); None: a null array."""
        if values is None:
            self._state.set_null()
        else:
            self._state.write_value(list(values))

    def set_null(self) -> None:
        """Make the array null in this row."""
        self._state.set_null()

    def set_empty(self) -> None:
        """Make the array non-null (``[]``) in this row, even if no element follows."""
        self._state.set_empty()


class RowSetWriter(TupleWriter):
    """The row writer: a tuple writer plus the row lifecycle of its loader."""

    __slots__ = ("_loader",)

    def __init__(self, state: TupleState, loader: ResultSetLoader) -> None:
        super().__init__(state)
        self._loader = loader

    def start_row(self) -> None:
        """Begin a row; see :meth:`ResultSetLoader.is_full` for when to stop."""
        self._loader._start_row()

    def save_row(self) -> None:
        """Complete the row: it is part of the batch (or of the look-ahead batch after overflow)."""
        self._loader._save_row()

    def discard_row(self) -> None:
        """Drop the row in progress, as if it was never started (schema changes stay)."""
        self._loader._discard_row()

    def is_full(self) -> bool:
        return self._loader.is_full()

    @property
    def row_count(self) -> int:
        return self._loader.row_count


# ---------------------------------------------------------------- dummies (unprojected columns)


class DummyScalarWriter(ScalarWriter):
    """Accepts values of an unprojected column and stores nothing."""

    __slots__ = ()
    is_projected = False

    def __init__(self) -> None:
        pass

    @property
    def type(self) -> MajorType:
        return MajorType(MinorType.NULL)

    def set(self, value: Any) -> None:
        pass

    def set_null(self) -> None:
        pass

    def set_int(self, value: int | None) -> None:
        pass

    def set_float(self, value: float | None) -> None:
        pass

    def set_bool(self, value: bool | None) -> None:
        pass

    def set_string(self, value: str | None) -> None:
        pass

    def set_bytes(self, value: bytes | None) -> None:
        pass

    def set_date(self, value: datetime.date | None) -> None:
        pass

    def set_time(self, value: datetime.time | None) -> None:
        pass

    def set_timestamp(self, value: datetime.datetime | None) -> None:
        pass

    def widen(self, minor: MinorType) -> None:
        pass


class DummyTupleWriter(TupleWriter):
    """The writer of an unprojected map: every member is a dummy too."""

    __slots__ = ()
    is_projected = False

    def __init__(self) -> None:
        pass

    @property
    def type(self) -> MajorType:
        return MajorType.map({})

    @property
    def names(self) -> list[str]:
        return []

    def scalar(self, name: str) -> ScalarWriter:
        return DUMMY_SCALAR

    def map(self, name: str) -> TupleWriter:
        return DUMMY_TUPLE

    def array(self, name: str) -> ArrayWriter:
        return DUMMY_ARRAY

    def add_column(self, name: str, major: MajorType) -> ScalarWriter | TupleWriter | ArrayWriter:
        return _dummy_for(kind_of(major))

    def column(self, name: str) -> ScalarWriter | TupleWriter | ArrayWriter:
        raise KeyError(name)

    def set(self, value: Mapping[str, Any] | None) -> None:
        pass

    def set_null(self) -> None:
        pass

    def set_not_null(self) -> None:
        pass


class DummyArrayWriter(ArrayWriter):
    """The writer of an unprojected array: its element writers are dummies."""

    __slots__ = ()
    is_projected = False

    def __init__(self) -> None:
        pass

    @property
    def type(self) -> MajorType:
        return MajorType.list_of(MajorType(MinorType.NULL))

    def scalar(self) -> ScalarWriter:
        return DUMMY_SCALAR

    def tuple(self) -> TupleWriter:
        return DUMMY_TUPLE

    map = tuple

    def array(self) -> ArrayWriter:
        return DUMMY_ARRAY

    def save(self) -> None:
        pass

    def append_null(self) -> None:
        pass

    def set(self, values: Sequence[Any] | None) -> None:
        pass

    def set_null(self) -> None:
        pass

    def set_empty(self) -> None:
        pass


DUMMY_SCALAR = DummyScalarWriter()
DUMMY_TUPLE = DummyTupleWriter()
DUMMY_ARRAY = DummyArrayWriter()


def _dummy_for(kind: Kind | None) -> Any:
    if kind is Kind.MAP:
        return DUMMY_TUPLE
    if kind is Kind.ARRAY:
        return DUMMY_ARRAY
    return DUMMY_SCALAR


def _writer_for(state: ColumnState | None, kind: Kind | None) -> Any:
    if state is None:
        return _dummy_for(kind)
    if isinstance(state, ScalarState):
        return ScalarWriter(state)
    if isinstance(state, TupleState):
        return TupleWriter(state)
    assert isinstance(state, ArrayState)
    return ArrayWriter(state)
