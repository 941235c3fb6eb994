"""Push limits toward the scans: below projects and transforms (one record out per record in,
order kept), and into a scan read by nothing else as ``pushedLimit`` (read at most ``last``
records). The limit itself stays where it lands, so the result is exact; a limit below an order
lets the Spark executor fuse them into one top-N.

>>> from engine.plan import parse_plan
>>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/data"}, "q": {"type": "queue"}},
...   "query": [
...     {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e", "selection": {"path": "e"}},
...     {"@id": 2, "op": "project", "input": 1, "projections": [{"ref": "output.a", "expr": "e.a"}]},
...     {"@id": 3, "op": "limit", "input": 2, "first": 1, "last": 3},
...     {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}}]})
>>> pushed = push_limits(plan)
>>> [(op.id, op.input_ids()) for op in pushed.topological_order()]
[('1', []), ('3', ['1']), ('2', ['3']), ('4', ['2'])]
>>> pushed.operator("1").pushed_limit
3
"""

from __future__ import annotations

from engine.plan import Limit, LogicalPlan, Project, Scan, Transform
from engine.planner.rewrite import consumers, with_inputs_renamed


def push_limits(plan: LogicalPlan) -> LogicalPlan:
    """The plan with every limit as close to its scan as it can go (see the module docstring)."""
    while True:
        moved = _swap_one(plan)
        if moved is None:
            break
        plan = moved
    return _into_scans(plan)


_MOVABLE = Project | Transform  # built once, not at every call


def _swap_one(plan: LogicalPlan) -> LogicalPlan | None:
    """Swap one ``limit`` with the project or transform below it, if any can move."""
    # Worked out only once a limit reads a project or transform: plans load by the thousand.
    readers = None
    for limit in plan.query:
        if not isinstance(limit, Limit) or limit.input is None:
            continue
        below = plan.operator(limit.input)
        if not isinstance(below, _MOVABLE):
            continue
        readers = readers if readers is not None else consumers(plan)
        if len(readers[below.id]) != 1:
            continue
        if not readers.get(limit.id):
            continue  # the limit is the plan's result: its id must stay the root
        query = []
        for op in plan.query:
            if op.id == limit.id:
                query.append(op.model_copy(update={"input": below.input}))
            elif op.id == below.id:
                query.append(op.model_copy(update={"input": limit.id}))
            else:
                query.append(with_inputs_renamed(op, limit.id, below.id))
        return plan.with_query(query)
    return None


def _into_scans(plan: LogicalPlan) -> LogicalPlan:
    readers = None
    changed = {}
    for limit in plan.query:
        if not isinstance(limit, Limit) or limit.input is None or limit.last is None:
            continue
        scan = plan.operator(limit.input)
        if not isinstance(scan, Scan):
            continue
        readers = readers if readers is not None else consumers(plan)
        if len(readers[scan.id]) == 1:
            bound = min(
                limit.last, scan.pushed_limit if scan.pushed_limit is not None else limit.last
            )
            if bound != scan.pushed_limit:
                changed[scan.id] = scan.model_copy(update={"pushed_limit": bound})
    return plan.with_query([changed.get(op.id, op) for op in plan.query]) if changed else plan
