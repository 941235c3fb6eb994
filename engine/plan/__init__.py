"""The logical plan: one pydantic model per operator, sequences expanded, everything validated.

>>> plan = parse_plan({"head": {"type": "APACHE_DRILL_LOGICAL", "version": 1},
...                    "storage": {"queue": {"type": "queue"}},
...                    "query": [{"@id": 1, "op": "constant", "content": [{"a": 1}]},
...                              {"@id": 2, "op": "store", "input": 1, "storageengine": "queue",
...                               "target": {"number": 0}}]})
>>> [op.op for op in plan.topological_order()]
['constant', 'store']
"""

from __future__ import annotations

from engine.errors import PlanSyntaxError
from engine.plan.document import Generator, Head, StorageConfig
from engine.plan.expressions import ExpressionContext, ExpressionSite
from engine.plan.ids import OpId, is_generated_id
from engine.plan.logical_plan import LogicalPlan
from engine.plan.operators import (
    OPERATORS,
    AnyOperator,
    CollapsingAggregate,
    Constant,
    Filter,
    Flatten,
    Join,
    Limit,
    Operator,
    OperatorKind,
    Order,
    Project,
    RunningAggregate,
    Scan,
    Segment,
    Sequence,
    SingleInputOperator,
    Store,
    Transform,
    Union,
    WindowFrame,
)
from engine.plan.parse import parse_plan
from engine.plan.parts import JoinCondition, NamedExpression, Ordering, Projection, WindowRef
from engine.plan.paths import Location
from engine.plan.source import PlanSource


def plan_json_schema() -> dict:
    """The JSON Schema (draft 2020-12) of a plan document, discriminated on ``op``.

    Its models are built on first call, so parsing a plan does not pay for them.

    >>> sorted(plan_json_schema()["properties"])
    ['engines', 'head', 'query', 'storage']
    """
    from engine.plan.json_schema import plan_json_schema as build

    return build()


__all__ = [
    "OPERATORS",
    "AnyOperator",
    "CollapsingAggregate",
    "Constant",
    "ExpressionContext",
    "ExpressionSite",
    "Filter",
    "Flatten",
    "Generator",
    "Head",
    "Join",
    "JoinCondition",
    "Limit",
    "Location",
    "LogicalPlan",
    "NamedExpression",
    "OpId",
    "Operator",
    "OperatorKind",
    "Order",
    "Ordering",
    "PlanSource",
    "PlanSyntaxError",
    "Project",
    "Projection",
    "RunningAggregate",
    "Scan",
    "Segment",
    "Sequence",
    "SingleInputOperator",
    "StorageConfig",
    "Store",
    "Transform",
    "Union",
    "WindowFrame",
    "WindowRef",
    "is_generated_id",
    "parse_plan",
    "plan_json_schema",
]
