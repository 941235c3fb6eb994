"""Filtering data trees through UNION values: seed 000's Appendix A where a field changes kind.

A UNION (:mod:`engine.types`) holds a map in one record, an array or a scalar in another, so the
arrays a filter's references cross are known only value by value, not from the batch schema as
:mod:`engine.exec.local.nested_filter` knows them. When a reference reaches a UNION on its way, the
filter walks each record's tree instead:

- the references that reach a UNION or cross an array (the *walking* references) are followed
  together along their common path; an array met on that path (where the next step is a name, or
  where the path ends) is crossed: it keeps only the elements that satisfy the condition,
  recursively, so nested arrays keep their nesting and an inner array left empty is removed;
- a map on the path is kept whole when the member the path enters survives (its other members
  are not filtered); a list index enters one element;
- where the common path ends, or meets a scalar or a missing member, the condition is tested:
  each walking reference reads the rest of its path there (an index, a member; a name applied to
  an array there is an error, as references through unrelated arrays are), the other references
  read the record;
- the record is dropped when nothing is left.

``a.x > 3`` keeps ``{a: [{b: 1}, {q: 3, x: 5}]}`` as ``{a: [{q: 3, x: 5}]}`` and
``{a: {b: 2, x: [1, 2, 3, 4, 5]}}`` as ``{a: {b: 2, x: [4, 5]}}``, whichever kind ``a`` has in
the other records. Without a UNION on the way this is the same pruning as the typed nested filter.

The trees are walked in Python (a UNION's values are JSON texts, decoded to walk them); the
condition is evaluated once for all the places tested in a batch, vectorised.

>>> import pyarrow as pa
>>> from engine.expr import parse_expression
>>> from engine.types import union_array
>>> batch = pa.record_batch({"a": union_array([{"x": 5}, [{"x": 1}, {"x": 4}], {"x": [2, 7]}])})
>>> UnionFilter.for_schema(parse_expression("a.x > 3"), batch.schema).apply(batch).to_pylist()
[{'a': {'x': 5}}, {'a': [{'x': 4}]}, {'a': {'x': [7]}}]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from engine.errors import EvaluationError
from engine.exec.local.nested_filter import NestedFilter, array_levels
from engine.expr.arrow.evaluate import predicate_fields
from engine.expr.arrow.trees import get_path, is_list_type
from engine.expr.nodes import Expr, FieldRef, common_path_prefix, field_refs
from engine.types import is_union, union_array

Path = tuple[str | int, ...]
Build = Callable[[np.ndarray], tuple[bool, object]]


def filter_for_schema(expr: Expr, schema: pa.Schema) -> NestedFilter | UnionFilter:
    """The filter ``expr`` for batches of ``schema``: a :class:`UnionFilter` when a reference
    reaches a UNION, else the typed :class:`~engine.exec.local.nested_filter.NestedFilter`."""
    found = UnionFilter.for_schema(expr, schema)
    return found if found is not None else NestedFilter.for_schema(expr, schema)


def reaches_union(schema: pa.Schema, path: Path) -> bool:
    """Whether ``path`` meets a UNION in records of ``schema`` (on its way or where it ends).

    >>> import pyarrow as pa
    >>> from engine.types import UNION_ARROW
    >>> schema = pa.schema([("r", pa.struct([("a", UNION_ARROW), ("c", pa.int64())]))])
    >>> reaches_union(schema, ("r", "a", "x")), reaches_union(schema, ("r", "c"))
    (True, False)
    """
    dtype = _static_type(schema, path, stop_at_union=True)
    return dtype is not None and is_union(dtype)


def _static_type(schema: pa.Schema, path: Path, *, stop_at_union: bool) -> pa.DataType | None:
    """The type at the end of ``path`` read without crossing arrays (a UNION met on the way when
    ``stop_at_union``); None where the path crosses an array or leaves the schema."""
    head = path[0]
    if not isinstance(head, str) or schema.get_field_index(head) < 0:
        return None
    dtype = schema.field(head).type
    for step in path[1:]:
        if is_union(dtype) and stop_at_union:
            return dtype
        if is_list_type(dtype) and isinstance(step, int):
            dtype = dtype.value_type
        elif is_list_type(dtype) and stop_at_union:
            dtype = dtype.value_type  # a name applied to a list: through its elements
            while is_list_type(dtype):
                dtype = dtype.value_type
            if not pa.types.is_struct(dtype) or dtype.get_field_index(step) < 0:
                return None
            dtype = dtype.field(dtype.get_field_index(step)).type
        elif pa.types.is_struct(dtype) and isinstance(step, str):
            index = dtype.get_field_index(step)
            if index < 0:
                return None
            dtype = dtype.field(index).type
        else:
            return None
    if stop_at_union:
        while is_list_type(dtype):
            dtype = dtype.value_type
    return dtype


class UnionFilter:
    """A filter condition whose references reach a UNION, prepared for one batch schema. Build
    with :meth:`for_schema`; run with :meth:`apply` (the module says how records are pruned)."""

    def __init__(self, expr: Expr, schema: pa.Schema, walking: list[FieldRef]) -> None:
        self.expr = expr
        self.walking = walking
        self.common = common_path_prefix([ref.path for ref in walking])
        # The type each walking reference reads where it is tested: a UNION (its values may be
        # of any kind) or the schema's type of a typed path.
        self.types: dict[FieldRef, pa.DataType | None] = {}
        for ref in walking:
            union = reaches_union(schema, ref.path)
            typed = _static_type(schema, ref.path, stop_at_union=False)
            self.types[ref] = None if union else typed

    @staticmethod
    def for_schema(expr: Expr, schema: pa.Schema) -> UnionFilter | None:
        """The filter ``expr`` for batches of ``schema``, or None when no reference reaches a
        UNION (the typed nested filter then applies)."""
        refs = list(dict.fromkeys(field_refs(expr)))
        if not any(reaches_union(schema, ref.path) for ref in refs):
            return None
        walking = [
            ref for ref in refs if reaches_union(schema, ref.path) or array_levels(schema, ref.path)
        ]
        return UnionFilter(expr, schema, walking)

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The records of ``batch`` that satisfy the condition, pruned."""
        leaves: list[tuple[object, int, int]] = []  # (node, steps consumed, record)
        root = self.common[0] if self.common else None
        index = batch.schema.get_field_index(root) if isinstance(root, str) else -1
        if index < 0:
            # No common path to walk (or no such column): the condition per record.
            rows = batch.to_pylist()
            builds = [self._leaf(row, 0, record, leaves) for record, row in enumerate(rows)]
        else:
            values = batch.column(index).to_pylist()
            builds = [self._walk(v, 1, record, leaves) for record, v in enumerate(values)]
        keep = self._test(batch, leaves)
        results = [build(keep) for build in builds]
        kept = pa.array([ok for ok, _ in results], pa.bool_())
        if index >= 0:
            column = batch.column(index)
            rebuilt = arrow_values([value for _, value in results], column.type)
            batch = batch.set_column(index, batch.schema.field(index), rebuilt)
        return batch.filter(kept)

    def _walk(self, node: object, i: int, record: int, leaves: list) -> Build:
        step = self.common[i] if i < len(self.common) else None
        if isinstance(node, list) and not isinstance(step, int):
            parts = [self._walk(element, i, record, leaves) for element in node]

            def build_list(keep: np.ndarray) -> tuple[bool, object]:
                kept = [value for ok, value in (part(keep) for part in parts) if ok]
                return bool(kept), kept

            return build_list
        if isinstance(node, list) and isinstance(step, int):
            at = step if step >= 0 else len(node) + step
            if 0 <= at < len(node):
                part = self._walk(node[at], i + 1, record, leaves)

                def build_element(keep: np.ndarray) -> tuple[bool, object]:
                    ok, value = part(keep)
                    return ok, [*node[:at], value, *node[at + 1 :]]

                return build_element
        elif isinstance(node, dict) and isinstance(step, str) and step in node:
            member = self._walk(node[step], i + 1, record, leaves)

            def build_map(keep: np.ndarray) -> tuple[bool, object]:
                ok, value = member(keep)
                return ok, {**node, step: value}

            return build_map
        return self._leaf(node, i, record, leaves)

    @staticmethod
    def _leaf(node: object, i: int, record: int, leaves: list) -> Build:
        at = len(leaves)
        leaves.append((node, i, record))
        return lambda keep: (bool(keep[at]), node)

    def _test(self, batch: pa.RecordBatch, leaves: list[tuple[object, int, int]]) -> np.ndarray:
        """The condition at every tested place."""
        if not leaves:
            return np.zeros(0, dtype=bool)
        values: dict[FieldRef, pa.Array] = {}
        for ref in self.walking:
            read = [_read(node, ref.path[i:], ref) for node, i, _ in leaves]
            dtype = self.types[ref]
            values[ref] = union_array(read) if dtype is None else pa.array(read, type=dtype)
        take = pa.array([record for _, _, record in leaves], pa.int64())

        def resolve(ref: FieldRef) -> pa.Array:
            found = values.get(ref)
            return found if found is not None else get_path(batch, ref.path).take(take)

        result = predicate_fields(self.expr, len(leaves), resolve)
        return result.to_numpy(zero_copy_only=False).astype(bool)


def _read(node: object, rest: Sequence[str | int], ref: FieldRef) -> object:
    """The value at ``rest`` inside ``node``, without crossing arrays."""
    for step in rest:
        if isinstance(node, list) and isinstance(step, int):
            at = step if step >= 0 else len(node) + step
            node = node[at] if 0 <= at < len(node) else None
        elif isinstance(node, dict) and isinstance(step, str):
            node = node.get(step)
        elif isinstance(node, list):
            raise EvaluationError(
                f"`{ref}` reads inside an array that the filter's other references do not "
                "cross; nested filtering prunes one array path at a time",
                expression=str(ref),
                hint="flatten the array first, or split the condition into two filters",
            )
        else:
            return None
    return node


def arrow_values(values: list[object], dtype: pa.DataType) -> pa.Array:
    """Python values as an array of ``dtype``, UNION members included (as JSON texts).

    >>> import pyarrow as pa
    >>> from engine.types import UNION_ARROW
    >>> arrow_values([{"u": [1]}, None], pa.struct([("u", UNION_ARROW)])).to_pylist()
    [{'u': [1]}, None]
    """
    if is_union(dtype):
        return union_array(values)
    mask = pa.array([v is None for v in values], pa.bool_())
    if pa.types.is_struct(dtype):
        children = [
            arrow_values([None if v is None else v.get(f.name) for v in values], f.type)
            for f in dtype
        ]
        return pa.StructArray.from_arrays(children, fields=list(dtype), mask=mask)
    if is_list_type(dtype):
        lengths = [0 if v is None else len(v) for v in values]
        offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
        flat = [element for v in values if v is not None for element in v]
        large = pa.types.is_large_list(dtype)
        cls = pa.LargeListArray if large else pa.ListArray
        return cls.from_arrays(
            pa.array(offsets, pa.int64() if large else pa.int32()),
            arrow_values(flat, dtype.value_type),
            type=dtype,
            mask=mask,
        )
    return pa.array(values, type=dtype)
