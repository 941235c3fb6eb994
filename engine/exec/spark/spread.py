"""Records and an order's sequence taken apart into plain columns around windows.

An order's sequence (``compiler_order.lazy_order``) is a struct of the order's key values, and
those values are often members of a record the rows carry (``e.user_id``). Windows ordered by
the struct make Spark sort by struct values and shuffle every value up to three times: the
record's member, the sequence's member and the window's own copy. Spark never merges two
aliases of one value.

:func:`spread` gives each distinct value one plain column (a *leaf*): every member of the
records the sequence reads, and each other member of the sequence. Windows partitioned and
ordered by the leaves, with the window functions reading leaves (:meth:`Spread.resolve`), make
Spark shuffle each value once and sort plain values. The records, the sequence and the key
columns that equal a member are then rebuilt from the leaves (:attr:`Spread.rebuilt`,
:meth:`Spread.rebuild`) in a select *above* the windows' (in the same select, Spark's analyzer
computes them below the windows and shuffles them too). Spark reduces the rebuilt structs'
members to the leaves themselves, so a later spread of a rebuilt record adds no shuffle or
sort. For sessionize (``compiler.SparkCompiler`` does this)::

    taken = spread(df, "__drill_seq", [("e", "user_id"), ("e", "ts"), None])
    windowed = taken.frame.select("*", F.max("__drill_leaf1").over(by_leaves).alias("m"))
    back = taken.rebuild(windowed)  # e, __drill_seq as before, and m
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.exec.spark.compiler_order import temp
from engine.exec.spark.paths import PendingColumns, Typed, get_typed, read_in, top_column
from engine.expr import FieldRef
from engine.plan.field_paths import Member, member_of


@dataclass(frozen=True)
class Spread:
    """``df`` taken apart (see the module docstring): :attr:`frame` holds the leaves and the
    other columns; :meth:`column` rebuilds a column of ``df``; :meth:`rebuild` gives ``df``'s
    columns again over a DataFrame derived from :attr:`frame`."""

    frame: DataFrame
    leaves: Mapping[Member, str]  # a record's member -> its leaf
    order: Sequence[str]  # the sequence's members' leaves, most significant first
    rebuilt: Mapping[str, Column]  # a record, the sequence or a key column -> from the leaves
    columns: Sequence[str]  # the columns of the DataFrame spread, in order
    types: Mapping[str, T.DataType]  # the types of the rebuilt columns
    schema: T.StructType  # the schema of :attr:`frame`, known without asking Spark

    def leaf(self, expr: object) -> str | None:
        """The leaf holding ``expr``'s value, if it is a spread record's member."""
        member = member_of(expr)
        return None if member is None else self.leaves.get(member)

    def resolve(self, ref: FieldRef) -> Typed:
        """A field read over :attr:`frame` (a ``compile_typed`` resolver)."""
        return self.value(ref.path)

    def value(
        self,
        path: Sequence[str | int],
        *,
        keep_unread: bool = False,
        schema: T.StructType | None = None,
    ) -> Typed:
        """The value at ``path`` over :attr:`frame` (or a DataFrame derived from it, of
        ``schema``): a spread member from its leaf, anything else in a spread column from the
        column rebuilt."""
        leaf = self.leaf(FieldRef(tuple(path)))
        if leaf is not None:
            return Typed(top_column(leaf), self.schema[leaf].dataType)
        root = str(path[0])
        if root in self.types:
            top = Typed(self.rebuilt[root], self.types[root])
            return read_in(top, path[1:], keep_unread=keep_unread)
        return get_typed(schema or self.schema, path, keep_unread=keep_unread)

    def column(self, name: str) -> Column:
        """Column ``name`` of the DataFrame spread, over :attr:`frame` (its own name)."""
        return self.rebuilt.get(name, top_column(name))

    def rebuild(self, df: DataFrame, *, without: Collection[str] = ()) -> DataFrame:
        """``df`` (derived from :attr:`frame`) with the spread columns rebuilt, the leaves
        dropped and the columns it added kept; the columns named in ``without`` (spread or
        added) left out."""
        return self.pending(df, without=without).select()

    def pending(self, df: DataFrame, *, without: Collection[str] = ()) -> PendingColumns:
        """The columns :meth:`rebuild` selects, not selected yet."""
        types = {f.name: f.dataType for f in df.schema.fields}
        spread_out = {*self.leaves.values(), *self.order, *self.columns, *without}
        values = {
            c: Typed(self.column(c), self.types.get(c) or types[c])
            for c in self.columns
            if c not in without
        }
        values.update((c, Typed(top_column(c), t)) for c, t in types.items() if c not in spread_out)
        return PendingColumns(df, values)


def spread(
    df: DataFrame,
    seq: str,
    members: Sequence[Member | None],
    *,
    keys: Mapping[str, Member] | None = None,
    added: Mapping[str, Member | None] | None = None,
) -> Spread | None:
    """``df`` with the sequence column ``seq`` and the records it reads as leaves.

    ``members[i]`` is the record member the sequence's ``i``-th member equals (None: its own
    value). ``keys`` maps a key column to the member it equals; it is rebuilt from the leaf.
    ``added`` maps key columns ``df`` does not hold to the member each equals: rebuilt the same
    way, they follow ``df``'s columns. None where the sequence or a record may be null (a
    rebuilt struct never is), the members do not match the sequence's, or an added key's
    member is not a spread record's."""
    field = {f.name: f for f in df.schema.fields}
    sequence = field.get(seq)
    if sequence is None or sequence.nullable or not isinstance(sequence.dataType, T.StructType):
        return None
    parts = sequence.dataType.fields
    if len(parts) != len(members) or not any(members):
        return None
    records: dict[str, T.StructType] = {}
    for member in filter(None, members):
        record = field.get(member[0])
        if record is None or record.nullable or not isinstance(record.dataType, T.StructType):
            return None
        if member[1] not in record.dataType.fieldNames():
            return None
        records[member[0]] = record.dataType
    keys = {k: m for k, m in (keys or {}).items() if k in field and m[0] in records}
    added = dict(added or {})
    if any(
        m is None or m[1] not in records.get(m[0], _NO_MEMBERS).fieldNames() for m in added.values()
    ):
        return None
    names = (temp(f"leaf{i}") for i in itertools.count())
    leaves: dict[Member, str] = {}
    values: list[Column] = []
    leaf_fields: list[T.StructField] = []
    for record, dtype in records.items():
        for f in dtype.fields:
            leaves[(record, f.name)] = name = next(names)
            values.append(top_column(record).getField(f.name).alias(name))
            leaf_fields.append(T.StructField(name, f.dataType, f.nullable))
    order: list[str] = []
    for part, member in zip(parts, members, strict=True):
        if member is None:
            order.append(name := next(names))
            values.append(top_column(seq).getField(part.name).alias(name))
            leaf_fields.append(T.StructField(name, part.dataType, part.nullable))
        else:
            order.append(leaves[member])
    others = [c for c in df.columns if c not in records and c != seq and c not in keys]
    frame = df.select(*[top_column(c) for c in others], *values)
    schema = T.StructType([*[field[c] for c in others], *leaf_fields])
    rebuilt: dict[str, Column] = {}
    for record, dtype in records.items():
        members_of = [
            _alias(top_column(leaves[(record, f.name)]), f.name, f.metadata) for f in dtype.fields
        ]
        rebuilt[record] = _alias(F.struct(*members_of), record, field[record].metadata)
    ordered = [top_column(leaf).alias(p.name) for leaf, p in zip(order, parts, strict=True)]
    rebuilt[seq] = _alias(F.struct(*ordered), seq, sequence.metadata)
    for key, member in keys.items():
        rebuilt[key] = _alias(top_column(leaves[member]), key, field[key].metadata)
    types = {name: field[name].dataType for name in rebuilt if name in field}
    for key, member in added.items():
        assert member is not None
        rebuilt[key] = top_column(leaves[member]).alias(key)
        types[key] = schema[leaves[member]].dataType
    columns = [*df.columns, *added]
    return Spread(frame, leaves, order, rebuilt, columns, types, schema)


def _alias(value: Column, name: str, metadata: Mapping[str, object]) -> Column:
    """``value`` named ``name`` with ``metadata``: passed only when there is some (PySpark
    parses even an empty one in the JVM, a py4j call; sessionize made 13 of them)."""
    return value.alias(name, metadata=dict(metadata)) if metadata else value.alias(name)


_NO_MEMBERS = T.StructType([])
