"""Scalar joins: a join with no conditions one of whose inputs always gives exactly one record.

The SQL front end translates a scalar subquery (``WHERE x > (SELECT avg(y) FROM t)``) into such a
join: the subquery's global aggregate (a ``collapsingaggregate`` without ``within`` or
``target``, which gives one record even over no input), under any one-to-one operators, joined
to every record of the outer query (the planner may put it on either side of an inner join). An
executor may read that one record as a value (Spark: a scalar subquery, computed once) instead of
joining it by nested loops. The joined records are the same, in the same order: the other
input's, each extended with the one record's members.

>>> from engine.plan import parse_plan
>>> plan = parse_plan({"storage": {"q": {"type": "queue"}}, "query": [
...     {"@id": 1, "op": "constant", "content": [{"x": 1}, {"x": 5}]},
...     {"@id": 2, "op": "collapsingaggregate", "input": 1,
...      "aggregations": [{"ref": "avg_x", "expr": "avg(x)"}]},
...     {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "inner"},
...     {"@id": 4, "op": "filter", "input": 3, "expr": "x > avg_x"},
...     {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {}}]})
>>> scalar_joins(plan)
{'3': 'right'}
"""

from __future__ import annotations

from engine.plan import LogicalPlan
from engine.plan.operators import CollapsingAggregate, Constant, Join
from engine.plan.traits import traits


def scalar_joins(plan: LogicalPlan) -> dict[str, str]:
    """The joins of ``plan`` with no conditions, by id, to the side (``"left"`` or ``"right"``)
    that always gives exactly one record: the right of an ``inner`` or ``left`` join, the left of
    an ``inner`` one (a ``left`` join keeps its left record where the right gives none)."""
    sides: dict[str, str] = {}
    for op in plan.query:
        if not isinstance(op, Join) or op.conditions or op.type == "outer":
            continue
        if one_record(plan, op.right):
            sides[op.id] = "right"
        elif op.type == "inner" and one_record(plan, op.left):
            sides[op.id] = "left"
    return sides


def one_record(plan: LogicalPlan, op_id: str) -> bool:
    """Whether operator ``op_id`` gives exactly one record whatever its input: a global
    aggregate, a constant of one record, or a one-to-one operator over one of them."""
    op = plan.operator(op_id)
    if isinstance(op, CollapsingAggregate):
        return op.within is None and op.target is None
    if isinstance(op, Constant):
        return len(op.content) == 1
    inputs = op.input_ids()
    return traits(op.op).one_to_one and len(inputs) == 1 and one_record(plan, inputs[0])
