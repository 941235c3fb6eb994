"""The Spark executor's whole-plan decisions: what each operator's DataFrame may leave out
because of who reads it (a segment its aggregates group by themselves, an order a store sorts, a
scan whose reader selects its columns, ...), computed once per run on the planned plan, in order,
into one frozen :class:`PlanDecisions` that the run's compiler reads.

Each decision is a function of the plan (and of decisions before it), not of data or DataFrames.
:func:`decide` runs them in the order they depend on each other.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from engine.exec.spark.field_paths import Path, output_path, overlaps, path_of, writable_path
from engine.exec.spark.spread import Member, member_of
from engine.expr import Expr, FieldRef, field_refs, parse_field_ref
from engine.plan import LogicalPlan
from engine.plan.expressions import parse_cached
from engine.plan.operators import (
    CollapsingAggregate,
    Filter,
    Flatten,
    Join,
    Limit,
    Order,
    Project,
    RunningAggregate,
    Scan,
    Segment,
    Store,
    Transform,
    Union,
    WindowFrame,
)
from engine.planner.rewrite import consumers
from engine.planner.rules.projection_pushdown import required_paths

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from engine.exec.spark.paths import PendingColumns


@dataclass(frozen=True)
class PlanDecisions:
    """The whole-plan decisions of one run (see each function for what a set means)."""

    unordered: frozenset[str]  # operators whose order nothing observes
    total: frozenset[str]  # orders under which no two records tie
    unrelated: frozenset[str]  # joins whose inputs share no operator upstream
    tie_free: Mapping[str, str]  # scan id -> the order reading it whose ties are equal records
    ordered_by_keys: Mapping[str, frozenset[str]]  # scan id -> the keys of its one order
    fused: frozenset[str]  # :func:`fused_operators`
    unnumbered: frozenset[str]  # :func:`unnumbered_segments`
    frame_passes: Mapping[str, str]  # :func:`frame_collapses`
    store_inputs: frozenset[str]  # :func:`store_inputs`
    top_n_orders: frozenset[str]  # :func:`top_n_orders`
    store_sorted: frozenset[str]  # :func:`store_sorted_orders`
    store_read: frozenset[str]  # :func:`store_read_limits`
    one_reader: frozenset[str]  # :func:`one_reader`
    store_read_orders: frozenset[str]  # :func:`store_read_orders`
    cut_by_limit: frozenset[str]  # operators a limit cuts short (metrics.limit_inputs)
    read_by_limit: frozenset[str]  # operators any limit reads
    read_through: frozenset[str]  # :func:`read_through`
    paired: frozenset[str]  # :func:`paired_scans`


def decide(plan: LogicalPlan, sinks: Collection[str]) -> PlanDecisions:
    """Every decision for ``plan`` (the planned plan of a run), in the order they build on each
    other; ``sinks``: the stores whose records are kept in memory (a queue, the console)."""
    from engine.exec.spark.compiler_join import related_joins
    from engine.exec.spark.compiler_order import (
        scans_ordered_by_keys,
        tie_free_orders,
        total_orders,
        unordered_outputs,
    )
    from engine.exec.spark.metrics import limit_inputs

    order = plan.topological_order()
    fused = frozenset(fused_operators(plan))
    partial: dict[str, Any] = {
        "unordered": frozenset(unordered_outputs(order, set(sinks))),
        "total": frozenset(total_orders(order)),
        "unrelated": frozenset({op.id for op in order if op.op == "join"} - related_joins(order)),
        "tie_free": {scan: order_id for order_id, scan in tie_free_orders(order).items()},
        "ordered_by_keys": scans_ordered_by_keys(order),
        "fused": fused,
        "unnumbered": frozenset(unnumbered_segments(plan, set(fused))),
        "frame_passes": frame_collapses(plan, set(fused)),
        "store_inputs": frozenset(store_inputs(plan)),
        "top_n_orders": frozenset(top_n_orders(plan)),
        "store_sorted": frozenset(store_sorted_orders(plan)),
        "store_read": frozenset(store_read_limits(plan)),
        "one_reader": frozenset(one_reader(plan)),
        "store_read_orders": frozenset(store_read_orders(plan)),
        "cut_by_limit": frozenset(limit_inputs(order)),
        "read_by_limit": frozenset(op.input for op in order if op.op == "limit" and op.input),
        "paired": frozenset(paired_scans(plan)),
    }
    through = read_through(plan, SimpleNamespace(**partial))
    return PlanDecisions(**partial, read_through=frozenset(through))


def fused_operators(plan: LogicalPlan) -> set[str]:
    """The ids of the segments and windowframes of ``plan`` whose own DataFrame no reader uses,
    so the compiler does not build it (each DataFrame step costs Spark an analysis on the driver).

    A segment is fused when every reader is a ``collapsingaggregate`` over its groups that reads
    neither its group number nor what the number is written over: the aggregate groups the
    segment's input by its keys. A windowframe is fused when its one reader is such a segment
    grouping its windows by target, and every aggregate over them aggregates each record's frame
    (:class:`FrameInput`). See also :func:`unnumbered_segments`.
    """
    ops = plan.topological_order()
    by_id = {op.id: op for op in ops}
    readers = consumers(plan)
    fused: set[str] = set()
    for op in ops:
        if not isinstance(op, Segment) or not readers.get(op.id):
            continue
        segment = static_segment(op)
        aggregates = readers[op.id]
        if not all(
            isinstance(r, CollapsingAggregate) and segment.fuses_with(r) for r in aggregates
        ):
            continue
        fused.add(op.id)
        source = by_id.get(op.input or "")
        if isinstance(source, WindowFrame) and len(readers[source.id]) == 1:
            frames = FrameInput(source, None, source.input)  # type: ignore[arg-type]
            if all(frames.fuses_with(segment, r) for r in aggregates):
                fused.add(source.id)
    return fused


def unnumbered_segments(plan: LogicalPlan, fused: set[str]) -> set[str]:
    """The ids of the segments of ``plan`` whose group numbers nothing reads: every reader runs
    within its groups by the segment's keys (a ``runningaggregate``, or a windowframe in
    ``fused``, see :func:`fused_operators`), and neither it nor anything after it reads the
    number (:func:`~engine.planner.rules.projection_pushdown.required_paths`). The compiler
    builds no number for them; it still regroups the records of an input not already in key
    order (the segment's record order is then its own)."""
    ops = plan.topological_order()
    readers = consumers(plan)
    needs = required_paths(plan)
    found: set[str] = set()
    for op in ops:
        if not isinstance(op, Segment) or op.id in fused or not readers.get(op.id):
            continue
        segment = static_segment(op)
        if not segment.writes_over_keys() and all(
            _within_keys(r, segment, needs.get(r.id), fused) for r in readers[op.id]
        ):
            found.add(op.id)
    return found


def static_segment(op: Segment) -> SegmentInput:
    """A segment's refs without DataFrames, for the static rules (:func:`fused_operators`,
    :func:`unnumbered_segments`)."""
    return SegmentInput(
        None,  # type: ignore[arg-type]  # only the refs matter here
        [],
        writable_path(op.ref, "segment ref"),
        tuple(parse_cached(text) for text in op.exprs),
        op.input or "",
    )


def _within_keys(
    reader: Any, segment: SegmentInput, need: frozenset[tuple[str, ...]] | None, fused: set[str]
) -> bool:
    """Whether ``reader`` runs within ``segment``'s groups by its keys (a ``runningaggregate``,
    or a windowframe whose members are never built) and neither it nor anything after it
    reads the group number (``need``: what the rest of the plan reads of its output)."""
    if isinstance(reader, RunningAggregate):
        read = [path_of(ref) for a in reader.aggregations for ref in field_refs(a.parsed)]
    elif isinstance(reader, WindowFrame) and reader.id in fused:
        read = []
    else:
        return False
    if reader.within is None or writable_path(reader.within, "within") != segment.ref:
        return False
    if need is None:
        return False  # a store or a result: the whole record, number included
    number = tuple(step.lower() for step in segment.ref)
    read += [tuple(str(step) for step in path) for path in need]
    return not any(overlaps(tuple(step.lower() for step in path), number) for path in read)


def frame_collapses(plan: LogicalPlan, fused: set[str]) -> dict[str, str]:
    """``{windowframe id: collapsingaggregate id}`` for each fused windowframe of ``plan`` (see
    :func:`fused_operators`) whose aggregate gives one record per record of the windowframe's
    input: no ``target``, and every frame holds its own record (``start <= 0 <= end``)."""
    readers = consumers(plan)
    found: dict[str, str] = {}
    for frame in plan.query:
        if not isinstance(frame, WindowFrame) or frame.id not in fused:
            continue
        holds_own = (frame.start is None or frame.start <= 0) and (
            frame.end is None or frame.end >= 0
        )
        (segment,) = readers[frame.id]  # fused: one segment reads it
        aggregates = readers.get(segment.id, [])
        if holds_own and len(aggregates) == 1 and aggregates[0].target is None:
            found[frame.id] = aggregates[0].id
    return found


def store_inputs(plan: LogicalPlan) -> set[str]:
    """The ids of the projects of ``plan`` whose one reader is a store: their DataFrames carry
    no sequence column, the store sorts by their input's (:meth:`~engine.exec.spark.compiler.SparkCompiler.visit_project`)."""
    reader = _one_reader(plan)
    return {
        op.id
        for op in plan.query
        if isinstance(op, Project) and isinstance(reader.get(op.id), Store)
    }


def one_reader(plan: LogicalPlan) -> set[str]:
    """The ids of the operators of ``plan`` that exactly one operator reads: a
    ``collapsingaggregate`` or a ``join`` among them leaves its records' select to that reader,
    a ``runningaggregate`` over a spread its rebuild (:class:`~engine.exec.spark.paths.
    PendingColumns`); the reader selects its own columns through them or, if it cannot, makes
    that select first: never a step more."""
    return set(_one_reader(plan))


def _one_reader(plan: LogicalPlan) -> dict[str, Any]:
    """``{operator id: its reader}`` for the operators of ``plan`` that one operator reads."""
    return {ref: ops[0] for ref, ops in consumers(plan).items() if len(ops) == 1}


def read_through(plan: LogicalPlan, ctx: Any) -> set[str]:
    """The ids of the scans of ``plan`` that leave their records to their reader, as columns of
    their own (:func:`~engine.exec.spark.sources.scan_plan_dataframe`): one reader reads them,
    through readers that pass them on (a filter one operator reads, an order its store sorts or
    a top-N limit runs, that limit), selecting its own columns of them (a project, a transform,
    an order no limit reads, with its sequence, an unordered flatten), joining them (a join of
    unrelated inputs) or aggregating them (a segment its aggregates fuse with, an aggregate of
    every record). Then no record struct is built below that reader, a join joins and its
    observation counts plain columns, and the scan's select of its records is the reader's.
    ``ctx`` holds the decisions it builds on (:class:`PlanDecisions`' ``store_read_orders``,
    ``top_n_orders``, ``store_sorted``, ``unordered``, ``read_by_limit``, ``unrelated`` and
    ``fused``)."""
    readers = _one_reader(plan)
    top_n = ctx.store_read_orders & ctx.top_n_orders

    def passes_on(op: Any) -> bool:
        if isinstance(op, Filter):
            return op.id in readers
        if isinstance(op, Order):
            sorted_by_store = op.id in ctx.store_sorted or op.id in top_n
            return not op.within and op.id in readers and sorted_by_store
        return isinstance(op, Limit) and op.input in top_n

    found = set()
    for op in plan.query:
        if not isinstance(op, Scan):
            continue
        reader = readers.get(op.id)
        while reader is not None and passes_on(reader):
            reader = readers.get(reader.id)
        if (
            isinstance(reader, Project | Transform)
            or (isinstance(reader, Flatten) and reader.id in ctx.unordered)
            or (
                isinstance(reader, Order)
                and not reader.within
                and reader.id not in ctx.read_by_limit
            )
            or (isinstance(reader, Join) and reader.id in ctx.unrelated)
            or (isinstance(reader, Segment) and reader.id in ctx.fused)
            or (isinstance(reader, CollapsingAggregate) and reader.within is None)
        ):
            found.add(op.id)
    return found


def paired_scans(plan: LogicalPlan) -> set[str]:
    """The ids of the scans of ``plan`` that a join or a union reads, through any operators:
    their sequence may be paired with another's into one long, where its width counts (a
    parquet scan numbers its rows densely for it, see
    :func:`~engine.exec.spark.sources.scan_plan_dataframe`).

    >>> from engine.plan import parse_plan
    >>> plan = parse_plan({"storage": {"s": {"type": "queue"}}, "query": [
    ...     {"@id": 1, "op": "constant", "content": []},
    ...     {"@id": 2, "op": "scan", "storageengine": "s", "ref": "a", "selection": {}},
    ...     {"@id": 3, "op": "scan", "storageengine": "s", "ref": "b", "selection": {}},
    ...     {"@id": 4, "op": "filter", "input": 3, "expr": "b.x > 1"},
    ...     {"@id": 5, "op": "union", "inputs": [1, 4]},
    ...     {"@id": 6, "op": "store", "input": 5, "storageengine": "s", "target": {}},
    ...     {"@id": 7, "op": "store", "input": 2, "storageengine": "s", "target": {}}]})
    >>> sorted(paired_scans(plan))
    ['3']
    """
    readers = consumers(plan)
    pairs: dict[str, bool] = {}  # op id -> whether a join or a union reads it, through any
    for op in reversed(plan.topological_order()):
        pairs[op.id] = any(
            isinstance(r, Join | Union) or pairs[r.id] for r in readers.get(op.id, ())
        )
    return {op.id for op in plan.query if isinstance(op, Scan) and pairs[op.id]}


def top_n_orders(plan: LogicalPlan) -> set[str]:
    """The ids of the orders (without ``within``) of ``plan`` that only limits with an end read:
    each such limit runs with its order as one top-N over the order's input
    (:meth:`~engine.exec.spark.compiler.SparkCompiler.visit_limit`), so the order's own DataFrame is never used."""
    readers = consumers(plan)
    return {
        op.id
        for op in plan.query
        if isinstance(op, Order)
        and not op.within
        and readers.get(op.id)
        and all(isinstance(r, Limit) and r.last is not None for r in readers[op.id])
    }


def store_read_limits(plan: LogicalPlan) -> set[str]:
    """The ids of the limits of ``plan`` whose one reader is a project a store reads
    (:func:`store_inputs`): the store writes the limit's records in the order they come, sorting
    nothing, and the project carries no sequence, so a top-N limit numbers its records again for
    no one (:meth:`~engine.exec.spark.compiler.SparkCompiler.visit_limit` leaves that select out)."""
    reader, inputs = _one_reader(plan), store_inputs(plan)
    return {
        op.id
        for op in plan.query
        if isinstance(op, Limit) and op.id in reader and reader[op.id].id in inputs
    }


def store_read_orders(plan: LogicalPlan) -> set[str]:
    """The ids of the orders of ``plan`` whose one reader is a limit of :func:`store_read_limits`
    (a top-N whose records only a store's project reads): an aggregate's columns pending before
    the order reach that project through both (:meth:`~engine.exec.spark.compiler.SparkCompiler._reads_pending`)."""
    reader, limits = _one_reader(plan), store_read_limits(plan)
    return {
        op.id
        for op in plan.query
        if isinstance(op, Order) and op.id in reader and reader[op.id].id in limits
    }


def store_sorted_orders(plan: LogicalPlan) -> set[str]:
    """The ids of the orders (without ``within``) of ``plan`` whose one reader is a project a
    store reads (:func:`store_inputs`) that copies each of the order's keys, a record's member,
    to a column of its own: the store sorts by those copies, then by the order's input sequence
    where records may tie (:meth:`~engine.exec.spark.compiler.SparkCompiler.visit_project`), so the order builds no
    sequence of its own (a DataFrame step less)."""
    reader, inputs = _one_reader(plan), store_inputs(plan)
    found = set()
    for op in plan.query:
        project = reader.get(op.id)
        if not isinstance(op, Order) or op.within or project is None or project.id not in inputs:
            continue
        copied = copied_paths(project)
        if all(member_of(parse_cached(o.expr)) in copied for o in op.orderings):
            found.add(op.id)
    return found


def copied_paths(op: Project) -> dict[Member, Path]:
    """The record members ``op`` copies as they are, each to the path of its copy (a path no
    other projection writes over)."""
    paths = [output_path(p.ref) for p in op.projections]
    copied: dict[Member, Path] = {}
    for i, (projection, path) in enumerate(zip(op.projections, paths, strict=True)):
        member = member_of(parse_cached(projection.expr))
        overwritten = any(overlaps(path, o) for j, o in enumerate(paths) if j != i)
        if member is not None and path and not overwritten:
            copied[member] = path
    return copied


@dataclass(frozen=True)
class SegmentInput:
    """A segment's input DataFrame, its key Columns and where it writes the group number."""

    input: DataFrame
    keys: list[Column]
    ref: Path
    exprs: tuple[Expr, ...] = ()
    input_id: str = ""
    pending: PendingColumns | None = None  # the input's records, left to the segment's reader

    def writes_over_keys(self) -> bool:
        """Whether the group number is written over (a part of) a key it groups by."""
        return any(overlaps(path_of(r), self.ref) for e in self.exprs for r in field_refs(e))

    def fuses_with(self, op: CollapsingAggregate) -> bool:
        """Whether ``op`` collapses this segment's groups without reading its group number (nor
        anything the number was written over)."""
        if op.within is None or writable_path(op.within, "within") != self.ref:
            return False
        paths = [parse_field_ref(name).path for name in (*op.carryovers, op.target) if name]
        paths += [ref.path for a in op.aggregations for ref in field_refs(a.parsed)]
        return not any(overlaps(tuple(str(p) for p in path), self.ref) for path in paths)


@dataclass(frozen=True)
class FrameInput:
    """A windowframe, its input DataFrame and input operator id."""

    op: WindowFrame
    input: DataFrame
    input_id: str | None

    def fuses_with(self, segment: SegmentInput, op: CollapsingAggregate) -> bool:
        """Whether ``segment`` groups these windows by their target (``ref.segment``) and ``op``
        collapses each group without reading the windowframe's refs: then ``op``'s records are
        aggregates over each record's frame."""
        target = writable_path(self.op.segment_ref, "windowframe ref")
        position = writable_path(self.op.position_ref, "windowframe ref")
        if len(segment.exprs) != 1 or not isinstance(segment.exprs[0], FieldRef):
            return False
        if path_of(segment.exprs[0]) != target or not segment.fuses_with(op):
            return False
        paths = [parse_field_ref(name).path for name in (*op.carryovers, op.target) if name]
        paths += [ref.path for a in op.aggregations for ref in field_refs(a.parsed)]
        return not any(
            overlaps(tuple(str(p) for p in path), written)
            for path in paths
            for written in (target, position)
        )
