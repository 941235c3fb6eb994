"""Semi and anti joins moved below the joins they filter: ``push_semi_joins(plan)``.

A decorrelated ``IN`` or ``EXISTS`` (``NOT IN``, ``NOT EXISTS``) is a join the executors run as a
semi (anti) join (:mod:`~engine.planner.properties.semi_joins`): it keeps the records of its left
input whose key some subquery record matches (matches none). Where that left input is itself a
join and every key reads one side of it, the test holds or fails for a joined record exactly as
it does for that side's record: filtering the side first gives the same records in the same
order, and the join below pairs fewer of them. TPC-H's q18 keeps the 57 orders of large
quantity before it joins them with their six million line items, not after; this is the semi
join transposition of Calcite's ``SemiJoinJoinTransposeRule`` and Spark's
``PushLeftSemiLeftAntiThroughJoin``.

The join below may be ``inner`` (either side) or ``left`` (its left side: the records a left
join keeps without a match are the left side's too). The semi join moves only where

* its filter tests the match and nothing else (no ``rest``: the rest may read either side), and
  the join below has no reader but the semi join;
* the top-level names of both sides of the join below are known
  (:func:`~engine.planner.rewrite.top_names`) and the names the keys read are the chosen side's
  only (a name both sides hold is merged by the join: either may give it);
* nothing filters the other side of an inner join below (no ``filter`` nor ``limit`` there):
  such a join drops records of the chosen side itself, so that where it stands the semi join
  tests fewer records and the subquery's aggregate reads fewer keys
  (:mod:`~engine.planner.rules.group_key_filters`; TPC-H's q20, whose suppliers of one nation
  are 400 of 10,000);
* moved, it is still a semi (anti) join, else the plan stays as it was.

It moves again while it can (q18: below the join with ``lineitem``, then below the one with
``customer``, onto the ``orders`` scan). Operator ids never change: the join reads the side, the
side's join reads the filter, and the filter's readers read the join below.

>>> from engine.plan import parse_plan
>>> from engine.planner.properties.semi_joins import semi_joins
>>> plan = parse_plan({"query": [
...     {"@id": 1, "op": "constant", "content": [{"o": {"k": 1, "c": 7}}]},
...     {"@id": 2, "op": "constant", "content": [{"c": {"k": 7}}]},
...     {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "inner",
...      "conditions": [{"relationship": "==", "left": "o.c", "right": "c.k"}]},
...     {"@id": 4, "op": "constant", "content": [{"k": 1}]},
...     {"@id": 5, "op": "segment", "input": 4, "ref": "$seg", "exprs": ["k"]},
...     {"@id": 6, "op": "collapsingaggregate", "input": 5, "within": "$seg",
...      "carryovers": ["k"], "aggregations": [{"ref": "$a", "expr": "count(1)"}]},
...     {"@id": 7, "op": "project", "input": 6, "projections": [
...         {"ref": "output.$s.k", "expr": "k"}, {"ref": "output.$s.m", "expr": "$a"}]},
...     {"@id": 8, "op": "join", "left": 3, "right": 7, "type": "left",
...      "conditions": [{"relationship": "==", "left": "o.k", "right": "$s.k"}]},
...     {"@id": 9, "op": "filter", "input": 8, "expr": "isnotnull($s.m)"},
...     {"@id": 10, "op": "project", "input": 9, "projections": [{"ref": "output.c", "expr": "c"}]}]})
>>> pushed = push_semi_joins(plan)
>>> [pushed.operator(i).input_ids() for i in ("8", "3", "10")]
[['1', '7'], ['9', '2'], ['3']]
>>> list(semi_joins(pushed))
['8']
"""

from __future__ import annotations

from engine.expr import field_refs
from engine.plan import Filter, Join, LogicalPlan, Operator
from engine.plan.expressions import parse_cached
from engine.planner.properties.semi_joins import SemiJoin, semi_joins
from engine.planner.rewrite import consumers, top_names, with_inputs_renamed


def push_semi_joins(plan: LogicalPlan) -> LogicalPlan:
    """``plan`` with each semi (anti) join moved below the joins it filters, as far as it goes
    (see the module docstring)."""
    blocked: set[str] = set()
    while True:
        semi = semi_joins(plan)
        move = next(
            (
                (join_id, side)
                for join_id, found in semi.items()
                if join_id not in blocked
                and (side := _side_below(plan, plan.operator(join_id), found)) is not None
            ),
            None,
        )
        if move is None:
            return plan
        join_id, side = move
        moved = _moved(plan, join_id, side, semi[join_id])
        if join_id in semi_joins(moved):
            plan = moved
        else:
            blocked.add(join_id)


def _side_below(plan: LogicalPlan, join: Operator, semi: SemiJoin) -> str | None:
    """``"left"`` or ``"right"``: the side of the join below semi join ``join`` (its left
    input) that holds every name its keys read, where it may move there; else None."""
    assert isinstance(join, Join)
    below = plan.operator(join.left)
    if semi.rest is not None or not isinstance(below, Join) or below.type not in ("inner", "left"):
        return None
    if [op.id for op in consumers(plan)[below.id]] != [join.id]:
        return None
    read = {
        str(ref.path[0]).lower()
        for condition in join.conditions
        for ref in field_refs(parse_cached(condition.left))
    }
    by_id = {op.id: op for op in plan.query}
    left = top_names(by_id.get(below.left), by_id)
    right = top_names(by_id.get(below.right), by_id)
    if not read or left is None or right is None:
        return None
    inner = below.type == "inner"
    if read <= left and not read & right and not (inner and _filtered(plan, below.right)):
        return "left"
    if inner and read <= right and not read & left and not _filtered(plan, below.left):
        return "right"
    return None


def _filtered(plan: LogicalPlan, op_id: str) -> bool:
    """Whether some operator at or below ``op_id`` drops records by a test or a bound."""
    todo, seen = [op_id], set()
    while todo:
        op = plan.operator(todo.pop())
        if op.id in seen:
            continue
        seen.add(op.id)
        if op.op in ("filter", "limit"):
            return True
        if getattr(op, "pushed_filter", None) is not None or getattr(op, "pushed_limit", None):
            return True
        todo.extend(op.input_ids())
    return False


def _moved(plan: LogicalPlan, join_id: str, side: str, semi: SemiJoin) -> LogicalPlan:
    """``plan`` with semi join ``join_id`` (and its filter) between the join below it and that
    join's ``side`` input."""
    join = plan.operator(join_id)
    below = plan.operator(join.left)
    test = plan.operator(semi.test_of)
    assert isinstance(join, Join) and isinstance(below, Join) and isinstance(test, Filter)
    changed: dict[str, Operator] = {
        join_id: join.model_copy(update={"left": getattr(below, side)}),
        below.id: below.model_copy(update={side: test.id}),
    }
    query = []
    for op in plan.query:
        op = changed.get(op.id, op)
        query.append(op if op.id in changed else with_inputs_renamed(op, test.id, below.id))
    return plan.with_query(query)
