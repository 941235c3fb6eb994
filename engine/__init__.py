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

# Running pulls in pyarrow's dataset layer and the executors; a command that only parses or
# validates a plan should not pay for them, so they are imported on first use. (A lazy name must
# not be a submodule's name too: importing the submodule would shadow it.)
_LAZY = {"RunResult": "engine.run", "run_plan": "engine.run"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
