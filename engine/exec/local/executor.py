"""The local executor: every logical operator run on Arrow batches in this process.

It is the reference the Spark executor is tested against, and the fast path for small inputs. Each
sink (store) is the root of a fragment driven by a :class:`~engine.exec.protocol.FragmentExecutor`;
an operator read by several others is run once and its batches replayed to each reader.

After the run, every operator that ran has its row count in the metrics (``{"rows": n}``, the
rows of the batches it passed on, as on Spark): a store counts the rows it wrote, a segment
fused into its collapsing aggregate counts its input's rows (it emits one record per record).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from engine.exec.local.join import SemiJoinOperator
from engine.exec.local.pruning import DropMembersOperator
from engine.exec.local.registry import ExecContext, create
from engine.exec.local.segment_aggregate import FUSE_PARAM, SegmentAggregateOperator, fusable
from engine.exec.local.sources import StoreOperator
from engine.exec.protocol import BatchOperator, BatchSource, FragmentExecutor
from engine.expr import field_refs, to_string
from engine.plan import LogicalPlan
from engine.plan.operators import (
    CollapsingAggregate,
    Join,
    Operator,
    Scan,
    Segment,
    Store,
)
from engine.planner.properties.filtered_members import dropped_after_filters
from engine.planner.properties.semi_joins import SEMI_JOIN_PARAM, semi_joins
from engine.planner.rules.filter_pushdown import remaining_conditions

PRUNE_PARAM = "_drop_filtered_members"
"""Context parameter: False keeps the members only a filter reads (see
:mod:`~engine.planner.properties.filtered_members`)."""
ROWS = "rows"
"""The metric name of an operator's row count (the Spark executor's too)."""


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


@dataclass
class LocalRun:
    """What one local run produced: the outputs of roots that are not stores, what each store
    wrote, the records queue and console stores received (in arrival order) and the metrics."""

    outputs: dict[str, pa.Table] = field(default_factory=dict)
    store_results: dict[str, Any] = field(default_factory=dict)
    sink_records: list[Any] = field(default_factory=list)
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)


class LocalExecutor:
    """Runs a validated plan and returns a :class:`LocalRun`."""

    def __init__(self, plan: LogicalPlan, ctx: ExecContext) -> None:
        self.plan = plan
        self.ctx = ctx
        self._built: dict[str, BatchOperator] = {}
        self._consumers: dict[str, int] = defaultdict(int)
        self._fused: dict[str, str] = {}  # fused segment id -> its input's id
        self._shared: dict[str, list[pa.RecordBatch]] = {}  # fan-out: an operator's batches
        for op in plan.topological_order():
            for ref in op.input_ids():
                self._consumers[ref] += 1
        ctx.params.setdefault("_referenced_members", referenced_members(plan))
        # What filters have left to test where the scans below apply some of their tests (the
        # local scan applies its whole pushedFilter): None where nothing is left.
        self._remaining = {
            filter_id: rest.condition for filter_id, rest in remaining_conditions(plan).items()
        }
        # Joins the planner runs as semi or anti joins, and the filters testing their matches.
        self._semi = semi_joins(plan) if ctx.params.get(SEMI_JOIN_PARAM, True) else {}
        self._semi_tests = {semi.test_of: semi for semi in self._semi.values()}
        # Members only a filter reads, not carried past it (copied by every join above).
        self._dropped = dropped_after_filters(plan) if ctx.params.get(PRUNE_PARAM, True) else {}

    def run(self) -> LocalRun:
        """Run every root (stores, or operators nobody reads)."""
        done = LocalRun()
        for fragment, root in enumerate(self._roots()):
            table = FragmentExecutor(self._build(root), fragment=fragment).run()
            if not isinstance(root, Store):
                done.outputs[root.id] = table
        for op_id, operator in self._built.items():
            done.metrics[op_id] = {**operator.counters(), ROWS: operator.rows_out}
            if isinstance(operator, StoreOperator) and operator.written is not None:
                done.store_results[op_id] = operator.written
                done.metrics[op_id][ROWS] = operator.written.row_count
                done.sink_records.extend(operator.received)
        for segment_id, input_id in self._fused.items():
            if ROWS in done.metrics.get(input_id, {}):
                done.metrics.setdefault(segment_id, {})[ROWS] = done.metrics[input_id][ROWS]
        return done

    def _roots(self) -> list[Operator]:
        return [op for op in self.plan.topological_order() if self._consumers[op.id] == 0]

    def _build(self, op: Operator) -> BatchOperator:
        if op.id in self._built:
            return self._built[op.id]
        if op.id in self._remaining and (
            self._remaining[op.id] is None or op.id not in self._semi_tests
        ):
            # The scan below already applies some of this filter's tests: the rest only, if any.
            operator: BatchOperator = self._input(self.plan.operator(op.input or ""))
            rest = self._remaining[op.id]
            if rest is not None:
                operator = create(
                    op.model_copy(update={"expr": to_string(rest)}), [operator], self.ctx
                )
        elif op.id in self._semi_tests:
            # The semi (anti) join below kept the records its match test keeps: the rest only.
            rest = self._semi_tests[op.id].rest
            operator = self._input(self.plan.operator(op.input or ""))
            if rest is not None:
                operator = create(op.model_copy(update={"expr": rest}), [operator], self.ctx)
        elif isinstance(op, Join) and op.id in self._semi:
            semi = self._semi[op.id]
            left = self._input(self.plan.operator(op.left))
            rows = self._input(self.plan.operator(semi.rows))
            operator = SemiJoinOperator(op, semi, left, rows, self.ctx)
        elif (segment := self._fused_segment(op)) is not None:
            # segment + collapsingaggregate over its groups: one hash aggregation, no reordering.
            upstream = self._input(self.plan.operator(segment.input or ""))
            self._fused[segment.id] = segment.input or ""
            operator = SegmentAggregateOperator(segment, op, upstream, self.ctx)
        else:
            inputs = [self._input(self.plan.operator(ref)) for ref in op.input_ids()]
            operator = create(op, inputs, self.ctx)
        if op.id in self._dropped:
            operator = DropMembersOperator(op.id, operator, *self._dropped[op.id])
        self._built[op.id] = operator
        return operator

    def _fused_segment(self, op: Operator) -> Segment | None:
        """The segment ``op`` collapses the groups of, when nothing else reads it (see
        :func:`~engine.exec.local.segment_aggregate.fusable`); None to run both operators."""
        if not isinstance(op, CollapsingAggregate) or not self.ctx.params.get(FUSE_PARAM, True):
            return None
        segment = self.plan.operator(op.input) if op.input else None
        if not isinstance(segment, Segment) or self._consumers[segment.id] != 1:
            return None
        return segment if fusable(segment, op) else None

    def _input(self, op: Operator) -> BatchOperator:
        if self._consumers[op.id] <= 1:
            return self._build(op)
        # Fan-out: run the shared operator once, replay its batches to each consumer.
        if op.id not in self._shared:
            self._shared[op.id] = FragmentExecutor(self._build(op)).run().to_batches()
        return BatchSource(op.id, list(self._shared[op.id]))
