"""Outer joins that a filter above makes inner: ``simplify_outer_joins(plan)``.

A ``left`` join emits, besides the pairs that match, each left record without a match alone:
every name only the right input provides is null in it. A filter reading the join that keeps no
record where such a name is null (:func:`null_rejected`: a conjunct compares it, or tests it with
``isnotnull``) drops all of those records, so the join becomes ``inner``: the same records in
the same order, and the join rule (:mod:`~engine.planner.rules.join_conditions`) may then move
the filter's conjuncts below it. Likewise an ``outer`` join whose filter rejects null in a name
only the left input provides keeps none of the right records without a match: it becomes
``left`` (``inner`` when the filter also rejects a name of the right input only). This is the
outer-join simplification of Calcite and Drill.

Only where the filter is the join's one reader, and the top-level names of both inputs are known
(scans with a ``ref``, projects: :func:`~engine.planner.rewrite.top_names`). A left join the
executors run as a semi join (:mod:`~engine.planner.properties.semi_joins`: a decorrelated ``IN``
or ``EXISTS``) stays as it is: made inner, its match test would move below it, and the semi join,
which reads the subquery's rows without grouping them, would be lost.

>>> from engine.plan import parse_plan
>>> scan = lambda i, ref: {"@id": i, "op": "scan", "storageengine": "fs", "ref": ref,
...     "selection": {"path": ref}}
>>> def joined(expr):
...     plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/d"}}, "query": [
...         scan(1, "l"), scan(2, "r"),
...         {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "left",
...          "conditions": [{"relationship": "==", "left": "l.k", "right": "r.k"}]},
...         {"@id": 4, "op": "filter", "input": 3, "expr": expr}]})
...     return simplify_outer_joins(plan).operator("3").type
>>> joined("r.x > 1"), joined("isnull(r.x)"), joined("r.x > 1 || true"), joined("l.x > 1")
('inner', 'left', 'left', 'left')
"""

from __future__ import annotations

from engine.expr import Call, Cast, Expr, FieldRef
from engine.expr.rewrite import COMPARISONS, conjuncts
from engine.plan import Filter, Join, LogicalPlan
from engine.plan.expressions import parse_cached
from engine.planner.properties.semi_joins import SemiJoin, semi_joins
from engine.planner.rewrite import consumers, top_names

_NULL_REJECTING = COMPARISONS | {"isnotnull"}
_NULL_PROPAGATING = frozenset({"add", "subtract", "multiply", "divide", "modulo", "negate", "abs"})
"""Calls that are null where an operand is: a reference under them is still null-rejected."""


def simplify_outer_joins(plan: LogicalPlan) -> LogicalPlan:
    """``plan`` with each outer join whose filter drops what it adds made inner (or ``left``),
    as described in the module docstring."""
    readers = consumers(plan)
    by_id = {op.id: op for op in plan.query}
    changed: dict[str, str] = {}
    semi: dict[str, SemiJoin] | None = None
    for op in plan.query:
        join = by_id.get(op.input or "") if isinstance(op, Filter) else None
        if not isinstance(join, Join) or join.type == "inner" or len(readers[join.id]) != 1:
            continue
        left = top_names(by_id.get(join.left), by_id)
        right = top_names(by_id.get(join.right), by_id)
        if left is None or right is None:
            continue
        rejected = null_rejected(parse_cached(op.expr))
        drops_lone_left = bool(rejected & (right - left))  # its right names are null
        drops_lone_right = join.type == "outer" and bool(rejected & (left - right))
        if join.type == "left" and drops_lone_left:
            if semi is None:
                semi = semi_joins(plan)
            if join.id not in semi:
                changed[join.id] = "inner"
        elif join.type == "outer" and drops_lone_right:
            changed[join.id] = "inner" if drops_lone_left else "left"
    if not changed:
        return plan
    return plan.with_query(
        [
            op.model_copy(update={"type": changed[op.id]}) if op.id in changed else op
            for op in plan.query
        ]
    )


def null_rejected(condition: Expr) -> frozenset[str]:
    """Top-level names (lower case) a record must hold non-null for ``condition`` to keep it:
    those of the field references a conjunct tests with ``isnotnull`` or compares (a null
    operand makes the comparison null, which a filter drops), directly or under arithmetic and
    casts, which are null where an operand is (``0.5 * r.x > l.y``). A reference inside another
    call (``coalesce(r.x, 0) > 1``) or under an OR does not count.

    >>> from engine.expr import parse_expression
    >>> sorted(null_rejected(parse_expression("isnotnull(r.m) && l.a > r.b || true")))
    []
    >>> sorted(null_rejected(parse_expression("isnotnull($e.m) && l.a > R.b")))
    ['$e', 'l', 'r']
    >>> sorted(null_rejected(parse_expression("cast(l.a as INT) > 0.5 * -r.b")))
    ['l', 'r']
    >>> sorted(null_rejected(parse_expression("coalesce(r.x, 0) > 1 && isnull(r.y)")))
    []
    """
    names: set[str] = set()
    for part in conjuncts(condition):
        if isinstance(part, Call) and part.name in _NULL_REJECTING:
            for arg in part.args:
                names.update(_strict_references(arg))
    return frozenset(names)


def _strict_references(expr: Expr) -> set[str]:
    """Top-level names of the references that make ``expr`` null when they are."""
    if isinstance(expr, FieldRef):
        return {expr.path[0].lower()} if isinstance(expr.path[0], str) else set()
    if isinstance(expr, Cast):
        return _strict_references(expr.expr)
    if isinstance(expr, Call) and expr.name in _NULL_PROPAGATING:
        return set().union(*(_strict_references(arg) for arg in expr.args))
    return set()
