"""Data trees on Spark: read, write and remove values at field paths of a DataFrame, natively.

The Spark twin of :mod:`engine.expr.arrow.trees`, with the same semantics: a record is a row, maps
are structs, arrays are arrays, and a missing value reads as null. Paths are tuples of names and
array indexes (``a.b[0].c`` is ``("a", "b", 0, "c")``); a name applied to an array without an index
projects it over the elements (``F.transform``); an index out of range reads null and a negative
index counts from the end (``F.try_element_at``). Writes rebuild structs with ``F.struct`` so that a
null parent map becomes a map holding the new member exactly where the written value is not null.

Values travel as :class:`Typed` (a Column with its Spark type), so every step knows the shape it
works on without asking Spark to analyse a plan.

The module is a little over 600 lines because reading, writing and removing at a path, and the
columns left pending for a reader (:class:`PendingColumns`), are one walk over the same trees.

Example (with a SparkSession)::

    df = spark.createDataFrame([({"id": 1, "tags": ["x"]},), (None,)], "e struct<id:bigint,tags:array<string>>")
    df.select(get_path(df, ("e", "id")))         # 1, None
    with_path(df, ("e", "day"), lit("mon"))    # e = {id: 1, tags: [x], day: mon}, {id: null, tags: null, day: mon}

>>> from engine.exec.spark.names import quote_name
>>> quote_name("odd.name")
'`odd.name`'
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.errors import TreePathError
from engine.exec.spark.constant_columns import lit, lit_as
from engine.exec.spark.names import column
from engine.exec.spark.unread_member import drop_unread

Path = tuple[str | int, ...]

_NO_CONSTANT: Any = object()


@dataclass(frozen=True)
class Typed:
    """A Spark Column and its data type; ``constant`` is the Python value of a literal.

    ``Typed(F.lit(5), LongType(), 5).is_constant`` is true; a column read from data has no constant.
    """

    column: Column
    dtype: T.DataType
    constant: Any = _NO_CONSTANT

    @property
    def is_constant(self) -> bool:
        return self.constant is not _NO_CONSTANT


def null_typed(dtype: T.DataType | None = None) -> Typed:
    """A null of ``dtype`` (Spark's NullType when not given: a value not seen yet)."""
    if dtype is None or isinstance(dtype, T.NullType):
        return Typed(lit(None), T.NullType(), None)
    return Typed(lit_as(None, dtype), dtype, None)


def cast_column(column: Column, dtype: T.DataType) -> Column:
    """``column.cast(dtype)``; a simple type by its SQL name, which is one py4j call where a
    ``DataType`` is three (the active session found, the type's JSON parsed on the JVM)."""
    if isinstance(dtype, _NAMED_TYPES):
        return column.cast(dtype.simpleString())
    return column.cast(dtype)


def try_cast_column(column: Column, dtype: T.DataType) -> Column:
    """``column.try_cast(dtype)`` (null where a value does not fit), by name as
    :func:`cast_column`."""
    if isinstance(dtype, _NAMED_TYPES):
        return column.try_cast(dtype.simpleString())
    return column.try_cast(dtype)


# Types whose simpleString parses back to them whatever the session's settings (not TIMESTAMP:
# its name follows spark.sql.timestampType).
_NAMED_TYPES = (
    T.BooleanType,
    T.ByteType,
    T.ShortType,
    T.IntegerType,
    T.LongType,
    T.FloatType,
    T.DoubleType,
    T.DecimalType,
    T.DateType,
    T.BinaryType,
)


def column_of(schema: T.StructType, name: str) -> Typed | None:
    """The top-level column ``name`` of ``schema`` (exact name), or None when there is none."""
    for field in schema.fields:
        if field.name == name:
            return Typed(top_column(name), field.dataType)
    return None


def top_column(name: str) -> Column:
    """``F.col`` of the top-level column ``name`` (quoted), the same Column each time
    (:func:`engine.exec.spark.names.column`)."""
    return column(name)


def _schema_of(df_or_schema: DataFrame | T.StructType) -> T.StructType:
    return df_or_schema if isinstance(df_or_schema, T.StructType) else df_or_schema.schema


def _member(dtype: T.StructType, name: str) -> T.StructField | None:
    for field in dtype.fields:
        if field.name == name:
            return field
    return None


# ---------------------------------------------------------------- reading


def get_path(df_or_schema: DataFrame | T.StructType, path: Sequence[str | int]) -> Column:
    """The value at ``path`` in every row, as a Column (null where any step is missing)."""
    return get_typed(_schema_of(df_or_schema), path).column


def get_typed(
    schema: T.StructType, path: Sequence[str | int], *, keep_unread: bool = False
) -> Typed:
    """The value at ``path`` with its type; a missing column or member is a NullType null. A
    record read whole loses its unread member (:mod:`~engine.exec.spark.unread_member`) unless
    ``keep_unread``: a value carried along as it is keeps it."""
    head = path[0]
    top = column_of(schema, head) if isinstance(head, str) else None
    if top is None:
        return null_typed()
    return read_in(top, path[1:], keep_unread=keep_unread)


def read_in(top: Typed, rest: Sequence[str | int], *, keep_unread: bool = False) -> Typed:
    """The value at ``rest`` inside top-level column ``top``; ``top`` itself, read whole, without
    its unread member unless ``keep_unread``."""
    if rest or keep_unread:
        return get_in(top, rest)
    return Typed(*drop_unread(top.column, top.dtype))


def get_in(value: Typed, path: Sequence[str | int]) -> Typed:
    """The value at ``path`` inside ``value`` (arrays without an index are projected)."""
    for i, step in enumerate(path):
        dtype = value.dtype
        if isinstance(step, int):
            if not isinstance(dtype, T.ArrayType):
                return null_typed()
            index = step + 1 if step >= 0 else step  # element_at is 1-based, negative from the end
            value = Typed(F.try_element_at(value.column, lit(index)), dtype.elementType)
        elif isinstance(dtype, T.StructType):
            field = _member(dtype, step)
            if field is None:
                return null_typed()
            if isinstance(value, _Written):  # the member as written (see _Written)
                value = dict(value.members)[step]
            else:
                value = Typed(value.column.getField(step), field.dataType)
        elif isinstance(dtype, T.ArrayType):
            rest = tuple(path[i:])
            return transform_typed(value, lambda element, rest=rest: get_in(element, rest))
        else:
            return null_typed()
    return value


def transform_typed(array: Typed, function: Callable[[Typed], Typed]) -> Typed:
    """``F.transform`` over a typed array; the result type is what ``function`` builds."""
    assert isinstance(array.dtype, T.ArrayType)
    element_type = array.dtype.elementType
    built: list[T.DataType] = []

    def body(element: Column) -> Column:
        result = function(Typed(element, element_type))
        built.append(result.dtype)
        return result.column

    # PySpark calls ``body`` while building the lambda, so the element type is known right after.
    column = F.transform(array.column, body)
    return Typed(column, T.ArrayType(built[0], containsNull=True))


# ---------------------------------------------------------------- writing


def make_struct(members: Sequence[tuple[str, Typed]]) -> Typed:
    """A struct of ``members`` in order (an empty list gives the empty map ``{}``)."""
    fields = [T.StructField(name, value.dtype, True) for name, value in members]
    column = F.struct(*[value.column.alias(name) for name, value in members])
    return Typed(column, T.StructType(fields))


def _null_where(condition: Column, value: Typed) -> Typed:
    return Typed(F.when(condition, lit(None)).otherwise(value.column), value.dtype)


@dataclass(frozen=True)
class _Written(Typed):
    """A map built here from ``members``, null exactly where every one of ``nulls`` is null.

    A later write or read uses the members and ``nulls`` themselves, not the built column: each
    write would otherwise nest the whole expression before it, twice (in a member read and in
    the null test), and ``k`` writes into one map would give Spark an expression of ``k!``
    copies to analyse (seven members written one by one took 12 s).
    """

    members: tuple[tuple[str, Typed], ...] = ()
    nulls: tuple[Column, ...] = ()


def record_value(
    build: Callable[[], Column],
    dtype: T.StructType,
    members: Callable[[], Sequence[tuple[str, Typed]]],
) -> Typed:
    """A record (never null) of type ``dtype`` that ``build`` builds as a struct of ``members``
    (both called on first use): a read or a write of a member uses the member's own value, so a
    plan that reads members never builds the struct, nor asks the JVM for its Column (a scan's
    records left to their reader: :class:`PendingColumns`)."""
    return _Record({"column": build, "members": members}, dtype, None)


class _Record(_Written):
    """:func:`record_value`'s record: its Column, members and null test made when first read."""

    def __init__(
        self, makers: dict[str, Callable[[], Any]], dtype: T.StructType, present: Column | None
    ) -> None:
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "_makers", makers)
        object.__setattr__(self, "present", present)

    def _made(self, name: str, make: Callable[[], Any]) -> Any:
        made = self.__dict__.get(f"_{name}")
        if made is None:
            made = make()
            object.__setattr__(self, f"_{name}", made)
        return made

    @property  # type: ignore[override]
    def column(self) -> Column:
        def build() -> Column:
            struct = self._makers["column"]()
            present = self.present
            return struct if present is None else F.when(present.isNotNull(), struct)

        return self._made("column", build)

    @property  # type: ignore[override]
    def members(self) -> tuple[tuple[str, Typed], ...]:
        return self._made("members", lambda: tuple(self._makers["members"]()))

    @property  # type: ignore[override]
    def nulls(self) -> tuple[Column, ...]:
        present = self.present  # else never null
        return self._made("nulls", lambda: (lit(True) if present is None else present,))

    def absent_where_null(self, present: Column) -> _Record:
        """This record, null where ``present`` is null (a record missing from an outer join's
        side)."""
        return _Record(self._makers, self.dtype, present)


def _written(members: Sequence[tuple[str, Typed]], nulls: Sequence[Column]) -> _Written:
    struct = make_struct(members)
    column = F.when(_all_null(nulls), lit(None)).otherwise(struct.column)
    return _Written(column, struct.dtype, members=tuple(members), nulls=tuple(nulls))


def _all_null(values: Sequence[Column]) -> Column:
    return functools.reduce(operator.and_, [v.isNull() for v in values])


def _nulls(value: Typed) -> tuple[Column, ...]:
    """Values that are all null exactly where ``value`` is null."""
    return value.nulls if isinstance(value, _Written) else (value.column,)


def _fields(value: Typed) -> list[tuple[str, Typed]]:
    """The members of a map value (of a ``StructType``), by name."""
    if isinstance(value, _Written):
        return list(value.members)
    assert isinstance(value.dtype, T.StructType)
    return [(f.name, Typed(value.column.getField(f.name), f.dataType)) for f in value.dtype.fields]


def same_type(left: T.DataType, right: T.DataType) -> bool:
    """Whether two Spark types are equal when nullability is ignored."""
    return _shape(left) == _shape(right)


def _shape(dtype: T.DataType) -> Any:
    if isinstance(dtype, T.StructType):
        return ("struct", tuple((f.name, _shape(f.dataType)) for f in dtype.fields))
    if isinstance(dtype, T.ArrayType):
        return ("array", _shape(dtype.elementType))
    if isinstance(dtype, T.MapType):
        return ("map", _shape(dtype.keyType), _shape(dtype.valueType))
    return dtype.simpleString()


def check_writable(path: Sequence[str | int]) -> tuple[str, ...]:
    """``path`` as member names; raises TreePathError for an empty path or a list index."""
    if not path:
        raise TreePathError("cannot write a value at an empty path")
    for step in path:
        if not isinstance(step, str):
            shown = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in path).lstrip(".")
            raise TreePathError(
                f"cannot write at '{shown}': a written path names map members, not list elements",
                hint="write the whole list, or flatten it first",
            )
    return tuple(str(step) for step in path)


def write_in(target: Typed | None, path: Sequence[str], value: Typed, *, merge: bool) -> Typed:
    """``target`` with ``value`` written at ``path``; maps on the way are created or extended.

    A map exists where it existed before or where the written value is not null; something that
    is not a map in the way is replaced by one. With ``merge``, a map written over a map merges.
    """
    if not path:
        return merge_values(target, value) if merge and target is not None else value
    if target is not None and not isinstance(target.dtype, T.StructType):
        target = None
    head, rest = path[0], path[1:]
    members = _fields(target) if target is not None else []
    names = [name for name, _ in members]
    index = names.index(head) if head in names else None
    child = write_in(members[index][1] if index is not None else None, rest, value, merge=merge)
    if index is not None:
        members[index] = (head, child)
    else:
        members.append((head, child))
    earlier = _nulls(target) if target is not None else ()
    return _written(members, [*earlier, *_nulls(child)])


def merge_values(earlier: Typed, later: Typed) -> Typed:
    """``later`` written over ``earlier``: two maps merge member by member (recursively), any
    other value is replaced; where the later map is null the earlier value is kept."""
    if not (isinstance(earlier.dtype, T.StructType) and isinstance(later.dtype, T.StructType)):
        return later
    later_valid = ~_all_null(_nulls(later))
    later_fields = dict(_fields(later))
    members: list[tuple[str, Typed]] = []
    for name, old in _fields(earlier):
        if name in later_fields:
            old = merge_member(old, later_fields[name], later_valid)
        members.append((name, old))
    known = {name for name, _ in members}
    members += [(name, new) for name, new in later_fields.items() if name not in known]
    return _written(members, [*_nulls(earlier), *_nulls(later)])


def merge_member(earlier: Typed, later: Typed, later_valid: Column) -> Typed:
    """A member present in both maps: the later map's member wins in the rows where it exists."""
    if isinstance(earlier.dtype, T.StructType) and isinstance(later.dtype, T.StructType):
        return merge_values(earlier, later)
    if isinstance(later.dtype, T.NullType):
        later = null_typed(earlier.dtype)
    if not same_type(earlier.dtype, later.dtype):
        return later
    column = F.when(later_valid, later.column).otherwise(earlier.column)
    return Typed(column, earlier.dtype)


def replace_in(value: Typed, path: Sequence[str | int], new: Typed) -> Typed:
    """``value`` with what is at ``path`` (members and indexes) replaced by ``new``; null maps and
    arrays stay null. Used to write filtered arrays back into records."""
    if not path:
        return new
    step, rest = path[0], path[1:]
    dtype = value.dtype
    if isinstance(step, str):
        assert isinstance(dtype, T.StructType)
        members = [(f.name, Typed(value.column.getField(f.name), f.dataType)) for f in dtype.fields]
        members = [
            (name, replace_in(member, rest, new) if name == step else member)
            for name, member in members
        ]
        return _null_where(value.column.isNull(), make_struct(members))
    assert isinstance(dtype, T.ArrayType)
    element_type = dtype.elementType
    position = lit(step) if step >= 0 else F.size(value.column) + lit(step)

    def rebuild(element: Column, i: Column) -> Column:
        replaced = replace_in(Typed(element, element_type), rest, new)
        return F.when(i == position, replaced.column).otherwise(element)

    return Typed(F.transform(value.column, rebuild), dtype)


def with_path(
    df: DataFrame, path: Sequence[str | int], column: Column | Typed, *, merge_maps: bool = False
) -> DataFrame:
    """``df`` with ``column`` written at ``path`` (maps on the way created or extended).

    With ``merge_maps``, a map written over a map merges into it, member by member. A plain
    Column is typed by Spark's analysis, a :class:`Typed` needs none.
    """
    names = check_writable(path)
    if not isinstance(column, Typed):
        (field,) = df.select(column.alias("value")).schema.fields
        column = Typed(column, field.dataType)
    existing = column_of(df.schema, names[0])
    new = write_in(existing, names[1:], column, merge=merge_maps)
    return df.withColumn(names[0], new.column)


def remove_in(target: Typed, path: Sequence[str | int]) -> Typed:
    """``target`` without the member at ``path``; removing the last member leaves ``{}``."""
    head, rest = path[0], path[1:]
    dtype = target.dtype
    if not isinstance(dtype, T.StructType) or not isinstance(head, str):
        return target
    if _member(dtype, head) is None:
        return target
    members: list[tuple[str, Typed]] = []
    for f in dtype.fields:
        member = Typed(target.column.getField(f.name), f.dataType)
        if f.name != head:
            members.append((f.name, member))
        elif rest:
            members.append((f.name, remove_in(member, rest)))
    return _null_where(target.column.isNull(), make_struct(members))


def _read_top(
    values: Mapping[str, Typed], path: Sequence[str | int], *, keep_unread: bool = False
) -> Typed:
    """The value at ``path`` among top-level columns ``values`` (a missing column or member is a
    NullType null)."""
    head = path[0]
    if not isinstance(head, str) or head not in values:
        return null_typed()
    return read_in(values[head], path[1:], keep_unread=keep_unread)


class TopColumns:
    """A DataFrame's top-level columns as values, changed path by path without a DataFrame step
    each (:meth:`write`, :meth:`drop`) and selected once (:meth:`select`); :meth:`read` sees what
    was written, so later values may read earlier ones.
    """

    def __init__(self, schema: T.StructType) -> None:
        self.values = {f.name: Typed(top_column(f.name), f.dataType) for f in schema.fields}

    @classmethod
    def of(cls, pending: PendingColumns) -> TopColumns:
        """The columns ``pending`` would select, to change before selecting them over its base."""
        top = cls(T.StructType([]))
        top.values = dict(pending.values)
        return top

    def read(self, path: Sequence[str | int]) -> Typed:
        """The value at ``path`` (a missing column or member is a NullType null)."""
        return _read_top(self.values, path)

    def write(self, path: Sequence[str | int], value: Typed) -> None:
        """``value`` written at ``path``, as :func:`with_path` writes it."""
        names = check_writable(path)
        self.values[names[0]] = write_in(self.values.get(names[0]), names[1:], value, merge=False)

    def drop(self, path: Sequence[str | int]) -> None:
        """The value at ``path`` removed (unchanged if there is none); removing a map's last
        member leaves ``{}``."""
        head, rest = path[0], path[1:]
        if not isinstance(head, str) or head not in self.values:
            return
        if rest:
            self.values[head] = remove_in(self.values[head], rest)
        else:
            del self.values[head]

    def pending(self, df: DataFrame) -> PendingColumns:
        """These columns over ``df``, not selected yet (for the one reader that selects its own
        columns through them)."""
        return PendingColumns(df, dict(self.values))

    def select(self, df: DataFrame, *extra: Column) -> DataFrame:
        """``df`` with these columns (Columns over ``df``), then ``extra``, in one step."""
        return self.pending(df).select(*extra)


@dataclass(frozen=True)
class PendingColumns:
    """The top-level columns ``values`` (Columns over ``base``), not selected yet: what
    :func:`build_columns` selects, kept for the one reader that selects its own columns over
    ``base`` reading through them (:meth:`read`): one DataFrame step, one analysis, for both.

    >>> pending = PendingColumns(None, {"n": Typed(None, T.LongType()), "e": Typed(None, T.StructType())})
    >>> pending.schema.simpleString(), pending.without(["e"]).schema.simpleString()
    ('struct<n:bigint,e:struct<>>', 'struct<n:bigint>')
    """

    base: DataFrame
    values: dict[str, Typed]
    seq_bits: int | None = None  # the width of a long sequence among ``values``, when known
    # A column of ``base`` null on no row, where the values are records of
    # :func:`record_value`: an outer join's side missing from a joined row has it null.
    present: Column | None = None
    # Whether the values read only columns of ``base`` named as no other DataFrame's are (a
    # scan's): they stay what they are when ``base`` is joined with another.
    apart: bool = False

    @property
    def schema(self) -> T.StructType:
        """The schema of :meth:`select`, known without asking Spark."""
        return T.StructType([T.StructField(n, v.dtype) for n, v in self.values.items()])

    def read(self, path: Sequence[str | int], *, keep_unread: bool = False) -> Typed:
        """The value at ``path``, as :func:`get_typed` reads it from :meth:`select`."""
        return _read_top(self.values, path, keep_unread=keep_unread)

    def over(self, base: DataFrame) -> PendingColumns:
        """The same columns over ``base``, a DataFrame of the same columns and rows (the base
        observed)."""
        return dataclasses.replace(self, base=base)

    def without(self, names: Sequence[str]) -> PendingColumns:
        """These columns but ``names``."""
        kept = {n: v for n, v in self.values.items() if n not in names}
        return dataclasses.replace(self, values=kept)

    def absent_where_null(self) -> PendingColumns:
        """These columns as an outer join's side gives them: a joined row missing this side
        has its records null (:attr:`present` null), not maps of nulls."""
        assert self.present is not None
        values = {
            n: v.absent_where_null(self.present) if isinstance(v, _Record) else v
            for n, v in self.values.items()
        }
        return dataclasses.replace(self, values=values)

    def select(self, *extra: Column) -> DataFrame:
        """The columns, then ``extra`` (Columns over :attr:`base`), as a DataFrame (one step)."""
        return self.base.select(
            *[
                value.column if value.column is top_column(name) else value.column.alias(name)
                for name, value in self.values.items()
            ],
            *extra,
        )


def build_columns(
    df: DataFrame, columns: Sequence[tuple[Sequence[str | int], Column | Typed]]
) -> DataFrame:
    """A new DataFrame of ``df``'s rows built from values at paths, written in order.

    A later map merges into an earlier one and any other later value replaces it (seed 000's
    project). An empty path merges a map value into the root: its members become top-level
    columns (``ref: "output"``); a null there adds nothing. Values given as :class:`Typed` need
    no analysis; Spark types the plain Columns (one analysis for all of them).
    """
    return pending_columns(df, columns).select()


def pending_columns(
    df: DataFrame, columns: Sequence[tuple[Sequence[str | int], Column | Typed]]
) -> PendingColumns:
    """What :func:`build_columns` selects, not selected yet."""
    untyped = [(i, v) for i, (_, v) in enumerate(columns) if not isinstance(v, Typed)]
    types: dict[int, T.DataType] = {}
    if untyped:
        aliases = [column.alias(f"v{i}") for i, column in untyped]
        analysed = df.select(*aliases).schema.fields
        types = {i: f.dataType for (i, _), f in zip(untyped, analysed, strict=True)}
    record: dict[str, Typed] = {}
    for i, (path, given) in enumerate(columns):
        value = given if isinstance(given, Typed) else Typed(given, types[i])
        column, dtype = value.column, value.dtype
        if path:
            names = check_writable(path)
            record[names[0]] = write_in(record.get(names[0]), names[1:], value, merge=True)
        elif isinstance(dtype, T.StructType):
            valid = column.isNotNull()
            for f in dtype.fields:
                member = Typed(column.getField(f.name), f.dataType)
                if f.name in record:
                    member = merge_member(record[f.name], member, valid)
                record[f.name] = member
        elif not isinstance(dtype, T.NullType):
            raise TreePathError(
                f"cannot merge a value of type {dtype.simpleString()} into the record: "
                "only a map can be"
            )
    return PendingColumns(df, record)
