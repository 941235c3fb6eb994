"""The planner: logical plan -> rewrite rules -> physical plan in fragments -> explain.

>>> from engine.plan import parse_plan
>>> plan = parse_plan({"query": [{"@id": 1, "op": "constant", "content": [{"a": 1}]},
...     {"@id": 2, "op": "filter", "input": 1, "expr": "a > 1 + 1"}]})
>>> optimize(plan).operator("2").expr
'a > 2'
"""

from __future__ import annotations

from engine.planner.optimizer import RULES, optimize
from engine.planner.statistics import ScanStatistics, Statistics

__all__ = ["RULES", "ScanStatistics", "Statistics", "optimize"]
