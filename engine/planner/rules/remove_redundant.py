"""Remove operators that do nothing: a filter on ``true``, a limit from 0 with no end, a
transform that writes every field onto itself, a non-distinct union of one input.

An operator nothing reads is the plan's result and is always kept.

>>> from engine.plan import parse_plan
>>> plan = parse_plan({"query": [
...     {"@id": 1, "op": "constant", "content": [{"a": 1}]},
...     {"@id": 2, "op": "filter", "input": 1, "expr": "true"},
...     {"@id": 3, "op": "transform", "input": 2, "transforms": [{"ref": "a", "expr": "a"}]},
...     {"@id": 4, "op": "limit", "input": 3, "first": 0, "last": 5}]})
>>> [op.id for op in remove_redundant(plan).query]
['1', '4']
"""

from __future__ import annotations

from engine.expr import FieldRef, Literal
from engine.plan import Filter, Limit, LogicalPlan, Operator, Transform, Union
from engine.plan.expressions import parse_cached
from engine.planner.rewrite import consumers, remove_operator


def remove_redundant(plan: LogicalPlan) -> LogicalPlan:
    """The plan without the operators that pass their input through unchanged."""
    readers = None  # worked out only for a redundant operator: most plans have none
    for op in plan.query:
        if not is_redundant(op):
            continue
        readers = readers if readers is not None else consumers(plan)
        if readers.get(op.id):
            return remove_redundant(remove_operator(plan, op.id))
    return plan


def is_redundant(op: Operator) -> bool:
    """Whether ``op`` outputs exactly its (single) input."""
    if isinstance(op, Filter):
        tree = parse_cached(op.expr)
        return isinstance(tree, Literal) and tree.value is True
    if isinstance(op, Limit):
        return op.first == 0 and op.last is None
    if isinstance(op, Transform):
        return all(_writes_itself(t.ref, t.expr) for t in op.transforms)
    if isinstance(op, Union):
        return len(op.inputs) == 1 and not op.distinct
    return False


def _writes_itself(ref: str, expr: str) -> bool:
    tree = parse_cached(expr)
    target = parse_cached(ref)
    return isinstance(tree, FieldRef) and isinstance(target, FieldRef) and tree == target
