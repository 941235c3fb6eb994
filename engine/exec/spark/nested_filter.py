"""Filtering data trees on Spark: seed 000's Appendix A with higher-order array functions.

The same semantics as :mod:`engine.exec.local.nested_filter`. When a filter's field references pass
through arrays (a name applied to an array without an index, or a path that ends on an array), the
condition is tested per element and the tree is pruned:

- an array keeps only the elements that satisfy the condition (``F.filter``), recursively: nested
  arrays keep their nesting, and an inner array left with no element is removed from its parent;
- a map that holds a surviving element is kept whole (its other members are not filtered);
- the record is dropped when nothing is left.

Several references: the condition is evaluated once per element of the deepest array that every
array-crossing reference passes through (their common chain of arrays); references that cross no
array read the record's value. References through unrelated arrays (``a.x > 3 || b.y > 3`` with
``a`` and ``b`` both arrays) are refused with a :class:`NestedFilterError`.

Example (with a SparkSession)::

    df = spark.createDataFrame([([[{"x": 1}, {"x": 4}], [{"x": 5}]],)], "a array<array<struct<x:bigint>>>")
    filter_records(df, parse_expression("a.x > 3"))   # a = [[{x: 4}], [{x: 5}]]

>>> from pyspark.sql import types as T
>>> schema = T.StructType([T.StructField("a", T.ArrayType(T.StructType([
...     T.StructField("x", T.ArrayType(T.LongType()))])))])
>>> [level.key for level in array_levels(schema, ("a", "x"))]
[('a', None), ('a', None, 'x', None)]
>>> array_levels(schema, ("a", 0, "y"))
[]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.errors import NestedFilterError
from engine.exec.spark.columns import compile_condition, compile_predicate
from engine.exec.spark.constant_columns import col, lit
from engine.exec.spark.paths import Typed, column_of, get_in, get_typed, replace_in
from engine.expr.nodes import Expr, FieldRef, field_refs

LevelKey = tuple[str | int | None, ...]

_PRUNED = "__drill_pruned"


@dataclass(frozen=True)
class ArrayLevel:
    """One array crossed by a path: ``key`` identifies it (the path so far, ``None`` for each
    array crossed), ``steps`` lead to it from the previous level's element (or the record), and
    ``consumed`` is how much of the reference's path had been read when it was reached.
    """

    key: LevelKey
    steps: tuple[str | int, ...]
    consumed: int


def array_levels(schema: T.StructType, path: Sequence[str | int]) -> list[ArrayLevel]:
    """The arrays ``path`` crosses in rows of ``schema``, outermost first (an index is no
    crossing)."""
    head = path[0]
    field = next((f for f in schema.fields if f.name == head), None)
    if not isinstance(head, str) or field is None:
        return []
    dtype = field.dataType
    key: LevelKey = (head,)
    steps: tuple[str | int, ...] = (head,)
    levels: list[ArrayLevel] = []
    i = 1
    while True:
        if isinstance(dtype, T.ArrayType):
            step = path[i] if i < len(path) else None
            if isinstance(step, int):
                key, steps, i = (*key, step), (*steps, step), i + 1
            else:
                key = (*key, None)
                levels.append(ArrayLevel(key, steps, i))
                steps = ()
            dtype = dtype.elementType
            continue
        if i >= len(path):
            return levels
        step = path[i]
        if not (isinstance(dtype, T.StructType) and isinstance(step, str)):
            return levels
        member = next((f for f in dtype.fields if f.name == step), None)
        if member is None:
            return levels
        dtype = member.dataType
        key, steps, i = (*key, step), (*steps, step), i + 1


def _common_chain(chains: list[list[ArrayLevel]]) -> list[ArrayLevel]:
    common = chains[0]
    for chain in chains[1:]:
        size = 0
        while size < min(len(common), len(chain)) and common[size].key == chain[size].key:
            size += 1
        common = common[:size]
    return common


def _level_text(level: ArrayLevel) -> str:
    parts: list[str] = []
    for step in level.key[:-1]:
        if step is None:
            parts.append("[]")
        elif isinstance(step, int):
            parts.append(f"[{step}]")
        else:
            parts.append(("." if parts else "") + step)
    return "".join(parts)


def filter_records(df: DataFrame, predicate: Expr) -> DataFrame:
    """The rows of ``df`` that satisfy ``predicate``, pruned as Appendix A says.

    Without arrays on the references' way this is the plain row filter.
    """
    schema = df.schema
    refs = list(dict.fromkeys(field_refs(predicate)))
    chains = {ref: array_levels(schema, ref.path) for ref in refs}
    crossing = [chain for chain in chains.values() if chain]
    if not crossing:
        return df.where(compile_condition(predicate, schema))
    chain = _common_chain(crossing)
    if not chain:
        roots = sorted({_level_text(c[0]) for c in crossing})
        raise NestedFilterError(
            f"the filter `{predicate}` reads values inside unrelated arrays ({', '.join(roots)}); "
            "nested filtering prunes one array path at a time",
            hint="flatten one of the arrays first, or split the condition into two filters",
        )
    return _Pruner(predicate, schema, chain, {ref: bool(c) for ref, c in chains.items()}).apply(df)


class _Pruner:
    """Appendix A along one chain of arrays, as nested ``F.transform`` / ``F.filter`` calls."""

    def __init__(
        self,
        predicate: Expr,
        schema: T.StructType,
        chain: list[ArrayLevel],
        crosses: dict[FieldRef, bool],
    ) -> None:
        self.predicate = predicate
        self.schema = schema
        self.chain = chain
        self.crosses = crosses  # reference -> whether it reads inside the chain's elements

    def apply(self, df: DataFrame) -> DataFrame:
        root = self.chain[0].steps[0]
        assert isinstance(root, str)
        record = column_of(self.schema, root)
        assert record is not None
        inside = self.chain[0].steps[1:]
        pruned = self._prune(record, 0)
        # The pruned array is computed once, into a temporary column, then written back.
        staged = df.withColumn(_PRUNED, pruned.column)
        kept = staged.where(F.ifnull(F.size(col(_PRUNED)) > 0, lit(False)))
        rebuilt = replace_in(record, inside, Typed(col(_PRUNED), pruned.dtype))
        return kept.withColumn(root, rebuilt.column).drop(_PRUNED)

    def _prune(self, container: Typed, depth: int) -> Typed:
        """The array of level ``depth`` inside ``container``, with only the surviving elements."""
        level = self.chain[depth]
        steps = level.steps[1:] if depth == 0 else level.steps
        array = get_in(container, steps)
        assert isinstance(array.dtype, T.ArrayType)
        element_type = array.dtype.elementType
        if depth == len(self.chain) - 1:
            return Typed(
                F.filter(array.column, lambda e: self._test(Typed(e, element_type))), array.dtype
            )
        below = self.chain[depth + 1].steps

        def rebuild(element: Column) -> Column:
            value = Typed(element, element_type)
            inner = self._prune(value, depth + 1)
            return replace_in(value, below, inner).column

        def holds_survivors(element: Column) -> Column:
            inner = get_in(Typed(element, element_type), below).column
            return F.ifnull(F.size(inner) > 0, lit(False))

        rebuilt = F.transform(array.column, rebuild)
        return Typed(F.filter(rebuilt, holds_survivors), array.dtype)

    def _test(self, element: Typed) -> Column:
        """The condition for one element of the deepest array of the chain."""
        consumed = self.chain[-1].consumed

        def resolve(ref: FieldRef) -> Typed:
            if self.crosses.get(ref):
                return get_in(element, ref.path[consumed:])
            return get_typed(self.schema, ref.path)

        return compile_predicate(self.predicate, self.schema, resolve=resolve)
