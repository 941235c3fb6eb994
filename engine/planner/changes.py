"""What the planner did to each operator of a plan, said in words, and who stands in for it.

A presentation of a plan that keeps the operators as written (the Dagster graph: one op per
operator) runs the planner's plan instead (:func:`engine.planner.optimize`): ids never change,
but a rule may remove an operator that passes its input through unchanged
(:mod:`~engine.planner.rules.remove_redundant`), or move one (a limit below a project:
:mod:`~engine.planner.rules.limit_pushdown`), or push part of one into a scan.
:func:`planner_notes` says so per written operator; :func:`stand_in` names the planned operator
whose records a removed one passes on.

>>> from engine.plan import parse_plan
>>> from engine.planner import optimize
>>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/data"}, "q": {"type": "queue"}},
...   "query": [
...     {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e", "selection": {"path": "e"}},
...     {"@id": 2, "op": "filter", "input": 1, "expr": "1 < 2"},
...     {"@id": 3, "op": "project", "input": 2, "projections": [{"ref": "output.a", "expr": "e.a"}]},
...     {"@id": 4, "op": "limit", "input": 3, "last": 10},
...     {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {}}]})
>>> planned = optimize(plan)
>>> notes = planner_notes(plan, planned)
>>> notes["2"]
'removed by the planner: it passes every record through unchanged; its readers read scan 1'
>>> notes["4"]
'moved by the planner: it reads scan 1 (as written: project 3)'
>>> stand_in(plan, planned, "2")
'1'
"""

from __future__ import annotations

from typing import Any

from engine.plan import Filter, Join, LogicalPlan, Operator, Scan
from engine.planner.rules.constant_folding import fold_text
from engine.planner.rules.remove_redundant import is_redundant


def stand_in(plan: LogicalPlan, planned: LogicalPlan, op_id: str) -> str:
    """The id of the planned operator whose records written operator ``op_id`` outputs: itself
    when the planner kept it, else (removed: it passed its input through) its input's stand-in."""
    return _stand_in(plan, {op.id for op in planned.query}, op_id)


def _stand_in(plan: LogicalPlan, kept: set[str], op_id: str) -> str:
    current = op_id
    while current not in kept:
        refs = plan.operator(current).input_ids()
        if len(refs) != 1:
            raise ValueError(f"operator {current} is not in the planned plan and has no one input")
        current = refs[0]
    return current


def planner_notes(plan: LogicalPlan, planned: LogicalPlan) -> dict[str, str]:
    """``{operator id: what the planner did to it}`` for every written operator it changed."""
    notes: dict[str, str] = {}
    kept = {op.id for op in planned.query}
    for op in plan.query:
        if op.id not in kept:
            source = _label(planned.operator(_stand_in(plan, kept, op.id)))
            notes[op.id] = f"removed by the planner: {_why_removed(op)}; its readers read {source}"
            continue
        new = planned.operator(op.id)
        if new is op:
            continue  # a rule that changes nothing keeps the operator itself
        written_inputs = [_stand_in(plan, kept, ref) for ref in op.input_ids()]
        said = []
        if new.input_ids() != written_inputs:
            reads = ", ".join(_label(planned.operator(ref)) for ref in new.input_ids())
            was = ", ".join(_label(plan.operator(ref)) for ref in op.input_ids())
            said.append(f"moved by the planner: it reads {reads} (as written: {was})")
        if isinstance(new, Scan) and isinstance(op, Scan):
            said.extend(_scan_notes(op, new))
        if isinstance(new, Join) and isinstance(op, Join) and new.type != op.type:
            said.append(
                f"runs as an {new.type} join: the filter reading it drops the records "
                f"the {op.type} join adds for those without a match"
            )
        elif not said and _without_inputs(new) != _without_inputs(op):
            said.append("rewritten by the planner (constants folded)")
        if said:
            notes[op.id] = "; ".join(said)
    return notes


def _why_removed(op: Operator) -> str:
    """Why the planner could drop ``op``: it does nothing, or its test moved below it."""
    if isinstance(op, Filter) and not is_redundant(
        op.model_copy(update={"expr": fold_text(op.expr)})
    ):
        return "its condition is tested below it (the planner moved it toward the scans)"
    return "it passes every record through unchanged"


def _scan_notes(op: Scan, new: Scan) -> list[str]:
    said = []
    if new.projection != op.projection and new.projection is not None:
        said.append(f"reads only the members {', '.join(new.projection)}")
    if new.pushed_filter != op.pushed_filter and new.pushed_filter is not None:
        said.append(f"applies the pushed filter {new.pushed_filter} as it reads")
    if new.pushed_limit != op.pushed_limit and new.pushed_limit is not None:
        said.append(f"reads at most {new.pushed_limit} records")
    return said


_INPUTS = frozenset({"input", "left", "right", "inputs"})


def _without_inputs(op: Operator) -> dict[str, Any]:
    return {k: v for k, v in op.__dict__.items() if k not in _INPUTS}


def _label(op: Operator) -> str:
    return op.op if op.has_generated_id else f"{op.op} {op.id}"


def written_counts(
    plan: LogicalPlan, planned: LogicalPlan, metrics: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """``metrics`` (``{operator id: {"rows": n, ...}}`` of a run of ``planned``) with the rows of
    every operator of ``plan`` the planner removed: its stand-in's, whose records it passed on."""
    kept = {op.id for op in planned.query}
    found = dict(metrics)
    for op in plan.query:
        if op.id not in kept and op.id not in found:
            counted = _stand_in(plan, kept, op.id)
            if counted in metrics and "rows" in metrics[counted]:
                found[op.id] = {"rows": metrics[counted]["rows"]}
    return found


def structural_notes(plan: LogicalPlan) -> dict[str, str]:
    """:func:`planner_notes` of the rules that remove or move operators (what holds whatever the
    data), run only where the plan has an operator they may touch: cheap enough to describe
    every operator of a thousand plans as they load. A scan's members and pushed filter are not
    among them (see :func:`planner_notes` of a run's plan)."""
    from engine.planner.optimizer import optimize
    from engine.planner.rules.constant_folding import fold_constants
    from engine.planner.rules.limit_pushdown import push_limits
    from engine.planner.rules.remove_redundant import remove_redundant

    kinds = {op.op for op in plan.query}
    rules: list[Any] = []
    if kinds & {"filter", "limit", "transform", "union"}:
        rules += [fold_constants, remove_redundant]
    if "limit" in kinds:
        rules.append(push_limits)  # it may move a limit, or bound the scan it reads
    return planner_notes(plan, optimize(plan, rules=rules)) if rules else {}
