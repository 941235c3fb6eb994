"""Filtering data trees: seed 000's Appendix A, on Arrow batches.

When a filter's field references pass through arrays (a name applied to a list without an index, or
a path that ends on a list), the condition is tested per element and the tree is pruned:

- an array keeps only the elements that satisfy the condition, recursively: nested arrays keep their
  nesting, and an inner array left with no element is itself removed from its parent;
- a map that holds a surviving element is kept whole (its other members are not filtered);
- the record is dropped when nothing is left.

``a.x > 3`` keeps ``{a: [{b: 1}, {q: 3, x: 5}], c: 2}`` as ``{a: [{q: 3, x: 5}], c: 2}`` and
``{a: [[{x: 1}, {x: 4}], [{x: 5}]]}`` as ``{a: [[{x: 4}], [{x: 5}]]}``.

Several references: the condition is evaluated once per element of the *deepest array that every
array-crossing reference passes through* (their common chain of arrays). References that cross no
array are the record's value, repeated for each element; a reference that goes through further
arrays below that level reads the whole list there (as :func:`~engine.expr.arrow.trees.get_path`
does), which comparisons reject. References through unrelated arrays (``a.x > 3 || b.y > 3`` with
``a`` and ``b`` both arrays) share no array: that condition is refused with an error, since it has
no single tree to prune; flatten one of the arrays first.

Which references cross arrays is decided from the batch schema, so a plan is made per schema
(:meth:`NestedFilter.for_schema`); without arrays on the way it is the plain row filter.

The work is vectorised over list offsets (``list_flatten``/``list_parent_indices``, numpy
``bincount``), never per record.

>>> import pyarrow as pa
>>> from engine.expr import parse_expression
>>> batch = pa.record_batch({"a": pa.array([[[{"x": 1}, {"x": 4}], [{"x": 5}]]])})
>>> NestedFilter.for_schema(parse_expression("a.x > 3"), batch.schema).apply(batch).to_pylist()
[{'a': [[{'x': 4}], [{'x': 5}]]}]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from engine.errors import EvaluationError
from engine.expr.arrow.evaluate import evaluate_predicate, predicate_fields
from engine.expr.arrow.trees import (
    get_in,
    get_path,
    is_list_type,
    keep_list_elements,
    list_parts,
    replace_in,
)
from engine.expr.nodes import Expr, FieldRef, field_refs

LevelKey = tuple[str | int | None, ...]


@dataclass(frozen=True)
class ArrayLevel:
    """One array crossed by a path: ``key`` identifies it (the path so far, ``None`` for each list
    crossed), ``steps`` lead to it from the previous level's element (or the record), and
    ``consumed`` is how much of the reference's path had been read when it was reached.
    """

    key: LevelKey
    steps: tuple[str | int, ...]
    consumed: int


def array_levels(schema: pa.Schema, path: tuple[str | int, ...]) -> list[ArrayLevel]:
    """The arrays ``path`` crosses in records of ``schema``, outermost first.

    >>> import pyarrow as pa
    >>> schema = pa.schema([("a", pa.list_(pa.struct([("x", pa.list_(pa.int64()))])))])
    >>> [level.key for level in array_levels(schema, ("a", "x"))]
    [('a', None), ('a', None, 'x', None)]
    >>> array_levels(schema, ("a", 0, "y"))
    []
    """
    head = path[0]
    if not isinstance(head, str) or schema.get_field_index(head) < 0:
        return []
    dtype = schema.field(head).type
    key: LevelKey = (head,)
    steps: tuple[str | int, ...] = (head,)
    levels: list[ArrayLevel] = []
    i = 1
    while True:
        if is_list_type(dtype):
            if i < len(path) and isinstance(path[i], int):
                key, steps, i = (*key, path[i]), (*steps, path[i]), i + 1
            else:
                key = (*key, None)
                levels.append(ArrayLevel(key, steps, i))
                steps = ()
            dtype = dtype.value_type
            continue
        if i >= len(path):
            return levels
        step = path[i]
        if not (pa.types.is_struct(dtype) and isinstance(step, str)):
            return levels
        index = dtype.get_field_index(step)
        if index < 0:
            return levels
        dtype = dtype.field(index).type
        key, steps, i = (*key, step), (*steps, step), i + 1


def _common_chain(chains: list[list[ArrayLevel]]) -> list[ArrayLevel]:
    common = chains[0]
    for chain in chains[1:]:
        size = 0
        while size < min(len(common), len(chain)) and common[size].key == chain[size].key:
            size += 1
        common = common[:size]
    return common


class NestedFilter:
    """A filter condition prepared for one batch schema: the plain row filter, or Appendix A
    pruning along a chain of arrays. Build with :meth:`for_schema`; run with :meth:`apply`.
    """

    def __init__(
        self,
        expr: Expr,
        chain: list[ArrayLevel],
        refs: dict[FieldRef, bool],
        deeper: list[str] | None = None,
    ) -> None:
        self.expr = expr
        self.chain = chain
        self.refs = refs  # reference -> whether it reads below the chain (else: a record value)
        self.deeper = deeper or []  # references that cross more arrays than the chain

    @property
    def is_row_filter(self) -> bool:
        return not self.chain

    @staticmethod
    def for_schema(expr: Expr, schema: pa.Schema) -> NestedFilter:
        """The filter ``expr`` for batches of ``schema``."""
        refs = list(dict.fromkeys(field_refs(expr)))
        chains = {ref: array_levels(schema, ref.path) for ref in refs}
        crossing = [chain for chain in chains.values() if chain]
        if not crossing:
            return NestedFilter(expr, [], {})
        chain = _common_chain(crossing)
        if not chain:
            roots = sorted({_level_text(c[0]) for c in crossing})
            raise EvaluationError(
                f"the filter `{expr}` reads values inside unrelated arrays ({', '.join(roots)}); "
                "nested filtering prunes one array path at a time",
                expression=str(expr),
                hint="flatten one of the arrays first, or split the condition into two filters",
            )
        deeper = [str(ref) for ref in refs if len(chains[ref]) > len(chain)]
        return NestedFilter(expr, chain, {ref: bool(chains[ref]) for ref in refs}, deeper)

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The records of ``batch`` that satisfy the condition, pruned as Appendix A says."""
        if self.is_row_filter:
            return batch.filter(evaluate_predicate(self.expr, batch))
        return self._prune(batch)

    def _prune(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        root = self.chain[0].steps[0]
        assert isinstance(root, str)
        column_index = batch.schema.get_field_index(root)
        # Descend: at each level, the lists and their elements (with the row each came from).
        containers: list[pa.Array] = [batch.column(column_index)]
        lists: list[pa.Array] = []
        owners: list[np.ndarray] = []
        for depth, level in enumerate(self.chain):
            steps = level.steps[1:] if depth == 0 else level.steps
            array = get_in(containers[-1], steps)
            elements, rows = list_parts(array)
            lists.append(array)
            owners.append(rows)
            containers.append(elements)
        record_of = owners[-1]
        for rows in reversed(owners[:-1]):
            record_of = rows[record_of]
        keep = self._test(batch, containers[-1], record_of)
        # Rebuild, innermost array first: keep elements, then keep what still holds an element.
        for depth in range(len(self.chain) - 1, -1, -1):
            kept, counts = keep_list_elements(lists[depth], keep, elements=containers[depth + 1])
            level = self.chain[depth]
            steps = level.steps[1:] if depth == 0 else level.steps
            containers[depth] = replace_in(containers[depth], steps, kept)
            keep = counts > 0
        pruned = batch.set_column(column_index, root, containers[0])
        return pruned.filter(pa.array(keep, pa.bool_()))

    def _test(self, batch: pa.RecordBatch, elements: pa.Array, record_of: np.ndarray) -> np.ndarray:
        """The condition for every element of the deepest array of the chain."""
        consumed = self.chain[-1].consumed
        values: dict[FieldRef, pa.Array] = {}
        take = pa.array(record_of, pa.int64())
        for ref, below in self.refs.items():
            if below:
                values[ref] = get_in(elements, ref.path[consumed:])
            else:
                values[ref] = get_path(batch, ref.path).take(take)
        try:
            result = predicate_fields(self.expr, len(elements), lambda ref: values[ref])
        except EvaluationError as err:
            if not self.deeper:
                raise
            where = _level_text(self.chain[-1]) + "[]"
            raise EvaluationError(
                f"{err.message}; {', '.join(self.deeper)} crosses more arrays than the other "
                f"references, so it reads a whole list for each element of {where}",
                expression=err.expression,
                hint="flatten the inner array first, or split the condition into two filters",
            ) from err
        return result.to_numpy(zero_copy_only=False).astype(bool)


def _level_text(level: ArrayLevel) -> str:
    parts = []
    for step in level.key[:-1]:
        if step is None:
            parts.append("[]")
        elif isinstance(step, int):
            parts.append(f"[{step}]")
        else:
            parts.append(("." if parts else "") + step)
    return "".join(parts)
