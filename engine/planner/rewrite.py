"""Helpers the rewrite rules share: rewiring the DAG and rewriting an operator's expressions.

Operators are frozen pydantic models, so every change is a copy; ids never change.

>>> from engine.plan import parse_plan
>>> plan = parse_plan({"query": [
...     {"@id": 1, "op": "constant", "content": [{"a": 1}]},
...     {"@id": 2, "op": "filter", "input": 1, "expr": "true"},
...     {"@id": 3, "op": "limit", "input": 2, "last": 1}]})
>>> [op.id for op in remove_operator(plan, "2").topological_order()]
['1', '3']
>>> field_paths("a.b[0].c + d")
[('a', 'b'), ('d',)]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from engine.expr import Expr, field_refs, parse_field_ref
from engine.plan import LogicalPlan, Operator
from engine.plan.expressions import parse_cached
from engine.plan.traits import traits

Path = tuple[str, ...]

_STEP = re.compile(r"([A-Za-z_]+)(?:\[(\d+)\])?")


def field_paths(expr: str | Expr) -> list[Path]:
    """The field paths an expression reads, each cut at its first array index."""
    tree = parse_cached(expr) if isinstance(expr, str) else expr
    paths = []
    for ref in field_refs(tree):
        path: list[str] = []
        for step in ref.path:
            if not isinstance(step, str):
                break
            path.append(step)
        paths.append(tuple(path))
    return paths


class IdSource:
    """Fresh operator ids for a rule's new operators: numbers above the plan's largest numeric
    id."""

    def __init__(self, plan: LogicalPlan) -> None:
        numbers = [int(op.id) for op in plan.query if op.id.isdigit()]
        self.next = max(numbers, default=0) + 1

    def take(self) -> str:
        self.next += 1
        return str(self.next - 1)


def consumers(plan: LogicalPlan) -> dict[str, list[Operator]]:
    """For every operator id, the operators reading it (document order)."""
    found: dict[str, list[Operator]] = {op.id: [] for op in plan.query}
    for op in plan.query:
        for ref in op.input_ids():
            found.setdefault(ref, []).append(op)
    return found


def with_inputs_renamed(op: Operator, old: str, new: str) -> Operator:
    """``op`` reading ``new`` wherever it read ``old``."""
    if old not in op.input_ids():
        return op
    # a missing attribute of a pydantic model is slow to miss: look only at the model's fields
    fields = op.__dict__
    update: dict[str, Any] = {
        key: new for key in ("input", "left", "right") if fields.get(key) == old
    }
    inputs = fields.get("inputs")
    if inputs is not None and old in inputs:
        update["inputs"] = [new if ref == old else ref for ref in inputs]
    return op.model_copy(update=update)


def replace_operators(plan: LogicalPlan, changed: dict[str, Operator]) -> LogicalPlan:
    """The plan with the operators of ``changed`` (by id) swapped in, document order kept."""
    if not changed:
        return plan
    return plan.with_query([changed.get(op.id, op) for op in plan.query])


def remove_operator(plan: LogicalPlan, op_id: str) -> LogicalPlan:
    """The plan without single-input operator ``op_id``; its readers read its input instead."""
    op = plan.operator(op_id)
    (source,) = op.input_ids()
    query = [with_inputs_renamed(other, op_id, source) for other in plan.query if other.id != op_id]
    return plan.with_query(query)


def map_expressions(op: Operator, rewrite: Callable[[str], str]) -> Operator:
    """``op`` with every expression text replaced by ``rewrite(text)`` (unchanged ones kept)."""
    result = op
    for site in op.expressions():
        new = rewrite(site.text)
        if new != site.text:
            result = _replace_at(result, site.path.split("."), new)
    return result


def _replace_at(model: Any, steps: list[str], value: Any) -> Any:
    match = _STEP.fullmatch(steps[0])
    assert match is not None, steps
    name = _field_name(model, match.group(1))
    current = getattr(model, name)
    if match.group(2) is not None:
        index = int(match.group(2))
        items = list(current)
        items[index] = value if len(steps) == 1 else _replace_at(items[index], steps[1:], value)
        return model.model_copy(update={name: items})
    new = value if len(steps) == 1 else _replace_at(current, steps[1:], value)
    return model.model_copy(update={name: new})


def _field_name(model: Any, key: str) -> str:
    for name, info in type(model).model_fields.items():
        if key in (name, info.serialization_alias):
            return name
    raise KeyError(key)


def top_names(op: Any, by_id: Mapping[str, Any]) -> frozenset[str] | None:
    """The lower-cased names of the top-level fields ``op``'s records may hold (a superset), or
    None where unknown (a scan without ``ref``, a project merging a map)."""
    if op is None:
        return None
    kind = op.op
    if kind == "scan":
        return frozenset({_name_steps(op.ref)[0].lower()}) if op.ref else None
    if kind == "constant":
        records = list(op.content or ())
        if not all(isinstance(record, dict) for record in records):
            return None
        return frozenset(name.lower() for record in records for name in record)
    if kind == "project":
        outputs = [_name_steps(p.ref)[1:] for p in op.projections]
        if not all(outputs):
            return None
        return frozenset(steps[0].lower() for steps in outputs)
    if kind == "collapsingaggregate":
        names = [*op.carryovers, *(a.ref for a in op.aggregations)]
        return frozenset(_name_steps(name)[0].lower() for name in names)
    if kind in ("join", "union"):
        inputs = [top_names(by_id.get(ref), by_id) for ref in op.input_ids()]
        if any(names is None for names in inputs):
            return None
        return frozenset().union(*inputs)
    if traits(kind).keeps_names:
        names = top_names(by_id.get(op.input or ""), by_id)
        if names is None:
            return None
        return names | {_name_steps(name)[0].lower() for _, name in op.names()}
    return None


def _name_steps(name: str) -> tuple[str, ...]:
    return tuple(str(step) for step in parse_field_ref(name).path)
