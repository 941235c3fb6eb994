"""Filtering data trees through VARIANT values: seed 000's Appendix A where a field changes kind.

The same semantics as :mod:`engine.exec.local.union_filter`. A UNION is a VARIANT here, so whether a
reference crosses an array is known only value by value: the filter walks each record's tree with
native Column expressions. The walking references (those that reach a VARIANT or cross an array)
are followed together along their common path; a variant on it is an array (``try_variant_get``
as ``array<variant>``: crossed, its elements filtered with ``F.filter``, rebuilt with
``to_variant_object``), a map (``map<string,variant>``: the member the path enters is replaced,
the others kept) or a value where the condition is tested. Typed maps and arrays on the way are
walked as their schema says. The record is dropped when nothing is left.

Every node's result is a ``struct<k: boolean, v: value>`` (kept, pruned value). A value used more
than once is bound once with :func:`_let` (a one-element ``transform``), so the expression grows
with the number of places walked, not exponentially.

A variant's arrays nest as deep as its data: the walk is unrolled for :data:`MAX_VARIANT_ARRAYS`
arrays nested inside one path (``[[[...]]]``), and a record nested deeper fails the run with a
message saying so (the local executor has no such limit).

Example (with a SparkSession)::

    df = spark.sql("select parse_json(t) as a from values ('{\\"x\\":5}'), ('[{\\"x\\":1},{\\"x\\":4}]') as v(t)")
    union_filter(df, parse_expression("a.x > 3"))   # a = {"x":5}, then [{"x":4}]

>>> from pyspark.sql import types as T
>>> schema = T.StructType([T.StructField("r", T.StructType([T.StructField("a", T.VariantType())]))])
>>> reaches_variant(schema, ("r", "a", "x")), reaches_variant(schema, ("r", "c"))
(True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.utils import is_remote

from engine.errors import NestedFilterError
from engine.exec.spark.columns import compile_condition, compile_predicate
from engine.exec.spark.constant_columns import col, lit
from engine.exec.spark.nested_filter import array_levels
from engine.exec.spark.paths import Typed, column_of, get_typed, make_struct, null_typed
from engine.expr.nodes import Expr, FieldRef, common_path_prefix, field_refs

MAX_VARIANT_ARRAYS = 2
"""How many arrays may nest inside one another in a VARIANT on a filter's path (see the module)."""

_WALKED = "__drill_walked"
_VARIANT = T.VariantType()


def reaches_variant(schema: T.StructType, path: Sequence[str | int]) -> bool:
    """Whether ``path`` meets a VARIANT in rows of ``schema`` (on its way or where it ends)."""
    head = path[0]
    field = next((f for f in schema.fields if f.name == head), None)
    if not isinstance(head, str) or field is None:
        return False
    dtype = field.dataType
    for step in path[1:]:
        while isinstance(dtype, T.ArrayType) and not isinstance(step, int):
            dtype = dtype.elementType  # a name applied to an array: through its elements
        if isinstance(dtype, T.VariantType):
            return True
        if isinstance(dtype, T.ArrayType):
            dtype = dtype.elementType
        elif isinstance(dtype, T.StructType) and isinstance(step, str):
            member = next((f for f in dtype.fields if f.name == step), None)
            if member is None:
                return False
            dtype = member.dataType
        else:
            return False
    while isinstance(dtype, T.ArrayType):
        dtype = dtype.elementType
    return isinstance(dtype, T.VariantType)


def reaches_any_variant(schema: T.StructType, predicate: Expr) -> bool:
    """Whether a field reference of ``predicate`` meets a VARIANT in rows of ``schema``."""
    return any(reaches_variant(schema, ref.path) for ref in field_refs(predicate))


def union_filter(df: DataFrame, predicate: Expr) -> DataFrame | None:
    """The rows of ``df`` that satisfy ``predicate``, pruned through variants as the module says;
    None when no reference reaches a VARIANT (the typed nested filter then applies)."""
    schema = df.schema
    refs = list(dict.fromkeys(field_refs(predicate)))
    if not any(reaches_variant(schema, ref.path) for ref in refs):
        return None
    if is_remote():
        # The unrolled walk nests deeper than Spark Connect's client parses its expressions.
        raise NestedFilterError(
            f"the filter `{predicate}` reads inside UNION values, which the Spark executor "
            "walks only in a classic session, not through Spark Connect",
            hint="run the plan with a local Spark session or executor='local', or give the "
            "field one type in the scan's schema",
        )
    walking = [r for r in refs if reaches_variant(schema, r.path) or array_levels(schema, r.path)]
    walker = _Walker(predicate, schema, walking)
    root = walker.common[0] if walker.common else None
    top = column_of(schema, root) if isinstance(root, str) else None
    if top is None:
        # No common path to walk: the condition per record, each reference read where it is.
        condition = compile_condition(predicate, schema, resolve=walker.read_record)
        return df.where(condition)
    walked, _ = walker.walk(top, 1, 0)
    staged = df.withColumn(_WALKED, walked)
    kept = staged.where(col(_WALKED)["k"])
    return kept.withColumn(root, col(_WALKED)["v"]).drop(_WALKED)


def _let(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body(value)`` with ``value`` computed once (bound as a lambda variable)."""
    return F.transform(F.array(value), body)[0]


def _result(keep: Column, value: Column) -> Column:
    return F.struct(keep.alias("k"), value.alias("v"))


class _Walker:
    """The walk of one filter's common path, node by node (see the module)."""

    def __init__(self, predicate: Expr, schema: T.StructType, walking: list[FieldRef]) -> None:
        self.predicate = predicate
        self.schema = schema
        self.walking = set(walking)
        self.common = common_path_prefix([ref.path for ref in walking])

    def walk(self, node: Typed, i: int, depth: int) -> tuple[Column, T.DataType]:
        """The ``struct<k, v>`` of ``node``, reached by the first ``i`` steps of the common
        path through ``depth`` variant arrays, and the type of its pruned value."""
        step = self.common[i] if i < len(self.common) else None
        dtype = node.dtype
        if isinstance(dtype, T.VariantType):
            return self._variant(node.column, i, depth), _VARIANT
        if isinstance(dtype, T.ArrayType) and not isinstance(step, int):
            return self._cross(node.column, dtype.elementType, i, depth)
        if isinstance(dtype, T.ArrayType) and isinstance(step, int):
            return self._element(node, step, i, depth)
        if (
            isinstance(dtype, T.StructType)
            and isinstance(step, str)
            and any(f.name == step for f in dtype.fields)
        ):
            return self._member(node, step, i, depth)
        return self._leaf(node, i), dtype

    def _cross(
        self, array: Column, element_type: T.DataType, i: int, depth: int, *, variant: bool = False
    ) -> tuple[Column, T.DataType]:
        """An array crossed: its surviving elements, pruned; ``variant`` when the array is a
        variant's (it is rebuilt as one)."""
        built: list[T.DataType] = []

        def each(element: Column) -> Column:
            result, value_type = self.walk(Typed(element, element_type), i, depth)
            built.append(value_type)
            return result

        results = F.transform(array, each)
        values = F.transform(F.filter(results, lambda r: r["k"]), lambda r: r["v"])
        array_type = T.ArrayType(built[0], True)
        walked = _let(
            values,
            lambda kept: _result(
                F.ifnull(F.size(kept) > 0, lit(False)),
                F.to_variant_object(kept) if variant else kept,
            ),
        )
        return walked, (_VARIANT if variant else array_type)

    def _element(self, node: Typed, step: int, i: int, depth: int) -> tuple[Column, T.DataType]:
        assert isinstance(node.dtype, T.ArrayType)
        element_type = node.dtype.elementType
        index = step + 1 if step >= 0 else step
        element = Typed(F.try_element_at(node.column, lit(index)), element_type)
        walked, _ = self.walk(element, i + 1, depth)
        position = lit(step) if step >= 0 else F.size(node.column) + lit(step)

        def rebuild(result: Column) -> Column:
            replaced = F.transform(
                node.column, lambda e, j: F.when(j == position, result["v"]).otherwise(e)
            )
            return _result(result["k"], replaced)

        return _let(walked, rebuild), node.dtype

    def _member(self, node: Typed, step: str, i: int, depth: int) -> tuple[Column, T.DataType]:
        assert isinstance(node.dtype, T.StructType)
        fields = node.dtype.fields
        member = next(f for f in fields if f.name == step)
        walked, value_type = self.walk(
            Typed(node.column.getField(step), member.dataType), i + 1, depth
        )
        built: list[T.DataType] = []

        def rebuild(result: Column) -> Column:
            members = [
                (
                    f.name,
                    Typed(result["v"], value_type)
                    if f.name == step
                    else Typed(node.column.getField(f.name), f.dataType),
                )
                for f in fields
            ]
            struct = make_struct(members)
            built.append(struct.dtype)
            value = F.when(node.column.isNull(), lit(None)).otherwise(struct.column)
            return _result(result["k"], value)

        column = _let(walked, rebuild)
        return column, built[0]

    def _variant(self, variant: Column, i: int, depth: int) -> Column:
        step = self.common[i] if i < len(self.common) else None

        def at(node: Column) -> Column:
            leaf = self._leaf(Typed(node, _VARIANT), i)
            if isinstance(step, str):
                entered = _let(
                    F.try_variant_get(node, "$", "map<string,variant>"),
                    lambda members: F.when(
                        members.isNotNull(), self._enter(members, step, i, depth)
                    ).otherwise(leaf),
                )
            else:
                entered = leaf
            if depth >= MAX_VARIANT_ARRAYS:
                crossed = F.raise_error(
                    lit(
                        f"the filter `{self.predicate}` meets arrays nested more than "
                        f"{MAX_VARIANT_ARRAYS} deep in a UNION value; the Spark executor "
                        "walks at most that many"
                    )
                ).cast("struct<k:boolean,v:variant>")
            elif isinstance(step, int):
                crossed = self._variant_element(node, step, i, depth)
            else:
                crossed = self._cross(node_array(node), _VARIANT, i, depth + 1, variant=True)[0]
            return F.when(node_array(node).isNotNull(), crossed).otherwise(entered)

        return _let(variant, at)

    def _variant_element(self, node: Column, step: int, i: int, depth: int) -> Column:
        def inside(elements: Column) -> Column:
            array = Typed(elements, T.ArrayType(_VARIANT, True))
            walked, _ = self._element(array, step, i, depth)
            return _let(walked, lambda r: _result(r["k"], F.to_variant_object(r["v"])))

        return _let(node_array(node), inside)

    def _enter(self, members: Column, step: str, i: int, depth: int) -> Column:
        child = F.try_element_at(members, lit(step))
        walked = self._variant(child, i + 1, depth)

        def rebuild(result: Column) -> Column:
            replaced = F.transform_values(
                members, lambda key, value: F.when(key == lit(step), result["v"]).otherwise(value)
            )
            return _result(result["k"], F.to_variant_object(replaced))

        return _let(walked, rebuild)

    def _leaf(self, node: Typed, i: int) -> Column:
        def resolve(ref: FieldRef) -> Typed:
            if ref in self.walking:
                return self._read(node, ref.path[i:], ref)
            return get_typed(self.schema, ref.path)

        condition = compile_predicate(self.predicate, self.schema, resolve=resolve)
        return _result(condition, node.column)

    def read_record(self, ref: FieldRef) -> Typed:
        """A walking reference read from the record without crossing arrays."""
        if ref not in self.walking:
            return get_typed(self.schema, ref.path)
        top = column_of(self.schema, ref.path[0]) if isinstance(ref.path[0], str) else None
        return null_typed() if top is None else self._read(top, ref.path[1:], ref)

    def _read(self, node: Typed, rest: Sequence[str | int], ref: FieldRef) -> Typed:
        """The value at ``rest`` inside ``node``, without crossing arrays (a name applied to an
        array fails the run, as on the local executor)."""
        for step in rest:
            dtype = node.dtype
            if isinstance(dtype, T.VariantType):
                array = node_array(node.column)
                if isinstance(step, int):
                    index = step + 1 if step >= 0 else step
                    node = Typed(F.try_element_at(array, lit(index)), _VARIANT)
                    continue
                members = F.try_variant_get(node.column, "$", "map<string,variant>")
                value = F.try_element_at(members, lit(step))
                failure = F.raise_error(lit(_crossing_message(ref))).cast("variant")
                node = Typed(F.when(array.isNotNull(), failure).otherwise(value), _VARIANT)
            elif isinstance(dtype, T.ArrayType) and isinstance(step, int):
                index = step + 1 if step >= 0 else step
                node = Typed(F.try_element_at(node.column, lit(index)), dtype.elementType)
            elif isinstance(dtype, T.ArrayType):
                failure = F.raise_error(lit(_crossing_message(ref)))
                return Typed(F.when(node.column.isNotNull(), failure), T.NullType())
            elif isinstance(dtype, T.StructType) and isinstance(step, str):
                member = next((f for f in dtype.fields if f.name == step), None)
                if member is None:
                    return null_typed()
                node = Typed(node.column.getField(step), member.dataType)
            else:
                return null_typed()
        return node


def node_array(variant: Column) -> Column:
    """A variant's elements when it is an array (null otherwise)."""
    return F.try_variant_get(variant, "$", "array<variant>")


def _crossing_message(ref: FieldRef) -> str:
    return (
        f"`{ref}` reads inside an array that the filter's other references do not cross; "
        "nested filtering prunes one array path at a time (flatten the array first, or split "
        "the condition into two filters)"
    )
