"""The plan-level decisions an executor reads of each operator: what its output may leave out
because of who reads it (a segment its aggregates group by themselves, an order a store sorts, a
scan whose reader selects its columns, ...). :func:`~engine.planner.properties.plan_properties`
runs them in the order they build on each other; each is a function of the plan (and of
decisions before it), not of data.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.expr import Expr, FieldRef, field_refs, parse_field_ref
from engine.plan import LogicalPlan
from engine.plan.expressions import parse_cached
from engine.plan.field_paths import (
    Member,
    Path,
    member_of,
    output_path,
    overlaps,
    path_of,
    writable_path,
)
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
from engine.planner.statistics import Statistics


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
        if (
            isinstance(source, WindowFrame)
            and len(readers[source.id]) == 1
            and all(frame_fuses_with(source, segment, r) for r in aggregates)
        ):
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


def static_segment(op: Segment) -> SegmentShape:
    """Where a segment writes its group number and what it groups by."""
    return SegmentShape(
        writable_path(op.ref, "segment ref"), tuple(parse_cached(text) for text in op.exprs)
    )


def _within_keys(
    reader: Any, segment: SegmentShape, need: frozenset[tuple[str, ...]] | None, fused: set[str]
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
    no sequence column, the store sorts by their input's."""
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
    ``ctx`` holds the decisions it builds on (the ids of ``store_read_orders``,
    ``top_n_orders``, ``store_sorted``, ``unordered``, ``read_by_limit``, ``unrelated`` and
    ``fused`` operators)."""
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
    where records may tie, so the order builds no
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
class SegmentShape:
    """Where a segment writes its group number (``ref``) and the expressions it groups by."""

    ref: Path
    exprs: tuple[Expr, ...] = ()

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


def frame_fuses_with(frame: WindowFrame, segment: SegmentShape, op: CollapsingAggregate) -> bool:
    """Whether ``segment`` groups ``frame``'s windows by their target (``ref.segment``) and ``op``
    collapses each group without reading the windowframe's refs: then ``op``'s records are
    aggregates over each record's frame."""
    target = writable_path(frame.segment_ref, "windowframe ref")
    position = writable_path(frame.position_ref, "windowframe ref")
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


def related_joins(operators: Any) -> set[str]:
    """The ids of the joins among ``operators`` (topological order) whose inputs read a common
    operator, or are one: an executor may see their inputs share a relation.

    >>> from types import SimpleNamespace as Op
    >>> ops = [Op(id="1", op="scan", input_ids=lambda: []),
    ...     Op(id="2", op="scan", input_ids=lambda: []),
    ...     Op(id="3", op="filter", input_ids=lambda: ["1"]),
    ...     Op(id="4", op="join", left="1", right="2", input_ids=lambda: ["1", "2"]),
    ...     Op(id="5", op="join", left="3", right="1", input_ids=lambda: ["3", "1"])]
    >>> sorted(related_joins(ops))
    ['5']
    """
    upstream: dict[str, set[str]] = {}  # an operator and the operators it reads, through any
    related = set()
    for op in operators:
        upstream[op.id] = {op.id}.union(*(upstream[i] for i in op.input_ids()))
        if op.op == "join" and upstream[op.left] & upstream[op.right]:
            related.add(op.id)
    return related


def limit_inputs(operators: Any) -> set[str]:
    """The ids of the operators a ``limit`` reads (an executor may stop reading them early), but
    an ``order`` (without ``within``) a limit with an end reads: the two run as one top-N, which
    reads every record of the order's input, so the order counts its input's.

    >>> from types import SimpleNamespace as Op
    >>> limit_inputs([Op(id="1", op="scan", input=None),
    ...     Op(id="2", op="order", input="1", within=None), Op(id="3", op="limit", input="2", last=5),
    ...     Op(id="4", op="limit", input="1", last=None)])
    {'1'}
    """
    ops = list(operators)
    top_n = {op.input for op in ops if op.op == "limit" and op.last is not None}
    orders = {op.id for op in ops if op.op == "order" and op.within is None}
    read = {op.input for op in ops if op.op == "limit" and op.input}
    return read - (top_n & orders)


def one_task_sorts(
    stores: Iterable[str],
    scans_above: Mapping[str, Collection[str]],
    stats: Statistics,
    limit: int,
) -> set[str]:
    """The ``stores`` that sort their records in one task: every scan upstream of them
    (``scans_above``) reports its size, and together they read at most
    ``limit`` bytes.

    >>> from engine.planner.statistics import ScanStatistics
    >>> stats = Statistics({"1": ScanStatistics("json", 2, 4_000),
    ...                     "2": ScanStatistics("csv", 1, 9_000)})
    >>> scans_above = {"3": {"1"}, "4": {"1", "2"}, "5": {"6"}}  # scan 6: no size
    >>> sorted(one_task_sorts(["3", "4", "5"], scans_above, stats, 10_000))
    ['3']
    """
    if limit < 0:
        return set()
    found = set()
    for store in stores:
        scans = scans_above.get(store, ())
        sizes = [stats.scan(scan) for scan in scans]
        if all(s is not None for s in sizes) and sum(s.total_bytes for s in sizes) <= limit:
            found.add(store)
    return found
