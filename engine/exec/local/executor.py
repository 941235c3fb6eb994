"""The local executor: every logical operator run on Arrow batches in this process.

It is the reference the Spark executor is tested against, and the fast path for small inputs. Each
sink (store) is the root of a fragment driven by a :class:`~engine.exec.protocol.FragmentExecutor`;
an operator read by several others is run once and its batches replayed to each reader.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa

from engine.errors import DrillError
from engine.exec.local.registry import ExecContext, create
from engine.exec.protocol import BatchOperator, BatchSource, FragmentExecutor
from engine.expr import field_refs, parse_field_ref
from engine.plan import LogicalPlan
from engine.plan.operators import Operator, Scan, Store


def referenced_members(plan: LogicalPlan) -> dict[str, set[str]]:
    """For each scan, the members of its ``ref`` that expressions anywhere in the plan use."""
    scans = {op.ref: op.id for op in plan.query if isinstance(op, Scan) and op.ref}
    found: dict[str, set[str]] = defaultdict(set)
    for op in plan.query:
        for site in op.expressions():
            for ref in field_refs(site.parsed):
                head = ref.path[0]
                if head in scans and len(ref.path) > 1 and isinstance(ref.path[1], str):
                    found[scans[head]].add(ref.path[1])
    return found


# Operators whose output holds only what their expressions name: a scan's record does not flow on.
_NARROWING_OPS = frozenset({"project", "collapsingaggregate"})


def scan_projections(plan: LogicalPlan) -> dict[str, list[str]]:
    """The columns each scan needs to read, for the scans that need only some of theirs.

    A scan's record is narrowed when every path from it to a sink passes a ``project`` or a
    ``collapsingaggregate`` (their output holds only what they name), no expression or field
    name uses the record whole, no operator writes into it, and no other scan shares its
    ``ref``. Then only the members the plan reads (expressions, ``within``, ``target``,
    carryovers) are read: parquet reads those columns only (projection pushdown).
    """
    scans = [op for op in plan.query if isinstance(op, Scan) and op.ref]
    refs = [op.ref for op in scans]
    read: dict[str, set[str]] = defaultdict(set)
    blocked: set[str] = set()
    for op in plan.query:
        paths = [(False, ref.path) for site in op.expressions() for ref in field_refs(site.parsed)]
        for key, name in [] if isinstance(op, Scan) else op.names():
            try:
                path = parse_field_ref(name).path
            except DrillError:
                continue
            paths.append((key.endswith("ref"), path))
        for written, path in paths:
            head = path[0]
            if written or len(path) == 1 or not isinstance(path[1], str):
                blocked.add(str(head))
            else:
                read[str(head)].add(path[1])
    consumers: dict[str, list[Operator]] = defaultdict(list)
    for op in plan.query:
        for ref in op.input_ids():
            consumers[ref].append(op)
    projections: dict[str, list[str]] = {}
    for scan in scans:
        if refs.count(scan.ref) > 1 or scan.ref in blocked or not read.get(scan.ref):
            continue
        frontier, narrowed = [scan.id], True
        while frontier and narrowed:
            for op in consumers[frontier.pop()]:
                if op.op in _NARROWING_OPS:
                    continue
                if isinstance(op, Store) or op.op in ("join", "union"):
                    narrowed = False
                    break
                frontier.append(op.id)
        if narrowed:
            projections[scan.id] = sorted(read[scan.ref])
    return projections


class LocalExecutor:
    """Runs a validated plan; results (sinks, stores, metrics) are collected in the context."""

    def __init__(self, plan: LogicalPlan, ctx: ExecContext) -> None:
        self.plan = plan
        self.ctx = ctx
        self._built: dict[str, BatchOperator] = {}
        self._consumers: dict[str, int] = defaultdict(int)
        for op in plan.topological_order():
            for ref in op.input_ids():
                self._consumers[ref] += 1
        ctx.params.setdefault("_referenced_members", referenced_members(plan))
        ctx.params.setdefault("_scan_projections", scan_projections(plan))

    def run(self) -> dict[str, pa.Table]:
        """Run every root (stores, or operators nobody reads); returns non-store roots' output."""
        outputs: dict[str, pa.Table] = {}
        for fragment, root in enumerate(self._roots()):
            table = FragmentExecutor(self._build(root), fragment=fragment).run()
            if not isinstance(root, Store):
                outputs[root.id] = table
        return outputs

    def _roots(self) -> list[Operator]:
        return [op for op in self.plan.topological_order() if self._consumers[op.id] == 0]

    def _build(self, op: Operator) -> BatchOperator:
        if op.id in self._built:
            return self._built[op.id]
        inputs = [self._input(self.plan.operator(ref)) for ref in op.input_ids()]
        operator = create(op, inputs, self.ctx)
        self._built[op.id] = operator
        return operator

    def _input(self, op: Operator) -> BatchOperator:
        if self._consumers[op.id] <= 1:
            return self._build(op)
        # Fan-out: run the shared operator once, replay its batches to each consumer.
        key = f"__shared_{op.id}"
        if key not in self.ctx.params:
            self.ctx.params[key] = FragmentExecutor(self._build(op)).run().to_batches()
        shared: list[pa.RecordBatch] = self.ctx.params[key]
        return BatchSource(op.id, list(shared))


def run_local(plan: LogicalPlan, ctx: ExecContext) -> dict[str, Any]:
    return LocalExecutor(plan, ctx).run()
