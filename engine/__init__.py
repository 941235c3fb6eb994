"""drill-dagster's engine: Apache Drill logical plans, parsed, validated, planned and executed.

The public API is small; everything else is an implementation detail.

>>> plan = parse_plan('{query: [{"@id": 1, op: "constant", content: [{a: 1}]}]}')
>>> [op.op for op in plan.query]
['constant']
"""

from __future__ import annotations

from engine.errors import (
    DrillError,
    ExecutionError,
    ExpressionSyntaxError,
    PlanError,
    PlanIssue,
    PlanningError,
    SchemaConflictError,
    StorageError,
)
from engine.explain import explain, explain_logical
from engine.expr import parse_expression
from engine.plan import LogicalPlan, parse_plan, plan_json_schema
from engine.run import RunResult, run_plan

__all__ = [
    "DrillError",
    "ExecutionError",
    "ExpressionSyntaxError",
    "LogicalPlan",
    "PlanError",
    "PlanIssue",
    "PlanningError",
    "RunResult",
    "SchemaConflictError",
    "StorageError",
    "explain",
    "explain_logical",
    "parse_expression",
    "parse_plan",
    "plan_json_schema",
    "run_plan",
]
