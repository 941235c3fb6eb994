"""Explain a logical plan: its operator DAG as a readable tree, or as JSON.

Each sink (or each operator nobody reads, for plans without a store) is a root; its inputs hang below
it. An operator read by two others appears under both, marked ``(see above)`` the second time.

>>> from engine.plan import parse_plan
>>> plan = parse_plan({"query": [
...     {"@id": 1, "op": "constant", "content": [{"a": 1}]},
...     {"@id": 2, "op": "filter", "input": 1, "expr": "a > 0"}]})
>>> print(explain_logical(plan))
filter 2: expr=a > 0
└─ constant 1: content=[{"a": 1}]
"""

from __future__ import annotations

import json
from typing import Any

from engine.plan import LogicalPlan

_HIDDEN_KEYS = {"@id", "op", "input", "left", "right", "inputs", "memo"}
_DETAIL_WIDTH = 100


def explain_logical(plan: LogicalPlan, *, fmt: str = "text") -> str:
    """The plan's DAG as text (a tree per root) or as JSON (``{"source", "roots", "operators"}``)."""
    roots = _roots(plan)
    if fmt == "json":
        return json.dumps(
            {
                "source": plan.source,
                "roots": [op.id for op in roots],
                "operators": [op.to_dict() for op in plan.topological_order()],
            },
            indent=2,
        )
    lines: list[str] = [f"# {plan.source}"] if plan.source else []
    shown: set[str] = set()
    for root in roots:
        _render(plan, root.id, "", "", shown, lines)
    return "\n".join(lines)


def _roots(plan: LogicalPlan) -> list[Any]:
    read = {ref for op in plan.query for ref in op.input_ids()}
    return [op for op in plan.query if op.id not in read]


def _render(
    plan: LogicalPlan, op_id: str, first: str, rest: str, shown: set[str], lines: list[str]
) -> None:
    # An explicit stack, not recursion: a chain of thousands of operators is a valid plan.
    stack = [(op_id, first, rest)]
    while stack:
        op_id, first, rest = stack.pop()
        op = plan.operator(op_id)
        label = op.op if op.has_generated_id else f"{op.op} {op.id}"
        if op_id in shown:
            lines.append(f"{first}{label} (see above)")
            continue
        shown.add(op_id)
        detail = _detail(op.to_dict())
        lines.append(f"{first}{label}" + (f": {detail}" if detail else ""))
        inputs = op.input_ids()
        children = []
        for i, child in enumerate(inputs):
            last = i == len(inputs) - 1
            children.append(
                (child, rest + ("└─ " if last else "├─ "), rest + ("   " if last else "│  "))
            )
        stack.extend(reversed(children))


def _detail(body: dict[str, Any]) -> str:
    parts = []
    for key, value in body.items():
        if key in _HIDDEN_KEYS:
            continue
        text = value if isinstance(value, str) else _summarise(value)
        parts.append(f"{key}={text}")
    detail = ", ".join(parts)
    return detail if len(detail) <= _DETAIL_WIDTH else detail[: _DETAIL_WIDTH - 1] + "…"


def _summarise(value: Any) -> str:
    if isinstance(value, list) and value and all(isinstance(v, dict) and "ref" in v for v in value):
        return (
            "[" + ", ".join(f"{v['ref']} = {v.get('expr', '')}".rstrip(" =") for v in value) + "]"
        )
    return json.dumps(value, separators=(", ", ": "))
