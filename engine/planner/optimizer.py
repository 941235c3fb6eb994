"""``optimize(plan, stats=None)``: the logical plan rewritten by the ordered :data:`RULES`.

Each rule is a pure function ``LogicalPlan -> LogicalPlan`` (those that need statistics take them as
a second argument) that never changes what the plan computes; operator ids never change, and
what a rule pushes into a scan is written on the scan (``projection``, ``pushedFilter``,
``pushedLimit``), so an optimized plan dumps and parses back like any plan.

>>> from engine.plan import parse_plan
>>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/data"}, "q": {"type": "queue"}},
...   "query": [
...     {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e", "selection": {"path": "e"}},
...     {"@id": 2, "op": "filter", "input": 1, "expr": "1 < 2"},
...     {"@id": 3, "op": "project", "input": 2, "projections": [{"ref": "output.a", "expr": "e.a"}]},
...     {"@id": 4, "op": "limit", "input": 3, "last": 10},
...     {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {}}]})
>>> optimized = optimize(plan)
>>> [op.op for op in optimized.topological_order()]
['scan', 'limit', 'project', 'store']
>>> scan = optimized.operator("1")
>>> scan.projection, scan.pushed_limit
(['a'], 10)
>>> parse_plan(optimized.to_dict()) == optimized
True
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from functools import cache

from engine.errors import DrillError, PlanningError
from engine.plan import LogicalPlan
from engine.planner.rules.constant_folding import fold_constants
from engine.planner.rules.filter_pushdown import push_filters
from engine.planner.rules.group_key_filters import filter_group_keys
from engine.planner.rules.join_conditions import plan_joins
from engine.planner.rules.limit_pushdown import push_limits
from engine.planner.rules.outer_joins import simplify_outer_joins
from engine.planner.rules.projection_pushdown import push_projections
from engine.planner.rules.remove_redundant import remove_redundant
from engine.planner.rules.semi_join_pushdown import push_semi_joins
from engine.planner.statistics import Statistics

Rule = Callable[..., LogicalPlan]

RULES: tuple[Rule, ...] = (
    fold_constants,
    remove_redundant,
    simplify_outer_joins,
    plan_joins,
    push_semi_joins,
    filter_group_keys,
    push_filters,
    push_limits,
    push_projections,
)
"""The rules in the order they run: folding first (it makes filters redundant), then the outer
joins a filter makes inner, then the joins' conditions (they move filters down to the scans,
where filter pushdown looks; an inner join's the most), then the semi joins below the joins they
filter (both placed by then), then the group keys a join can match
(its conditions known, its filters not yet pushed into scans, where the estimates read them),
projection pushdown last (it reads the final shape of the plan)."""


def optimize(
    plan: LogicalPlan, stats: Statistics | None = None, *, rules: Sequence[Rule] = RULES
) -> LogicalPlan:
    """``plan`` rewritten by ``rules`` in order (see the module docstring)."""
    for rule in rules:
        try:
            plan = rule(plan, stats) if _wants_stats(rule) else rule(plan)
        except DrillError:
            raise
        except Exception as error:  # a rule bug must not look like the user's mistake
            raise PlanningError(
                f"planner rule {rule.__name__} failed: {type(error).__name__}: {error}",
                hint="this is a bug in drill-dagster's planner; run_plan(..., optimize=False) "
                "bypasses the rules; please file an issue with the plan",
            ) from error
    return plan


@cache
def _wants_stats(rule: Rule) -> bool:
    # inspect.signature is slow beside a rule on a small plan, and plans load by the thousand
    return len(inspect.signature(rule).parameters) > 1
