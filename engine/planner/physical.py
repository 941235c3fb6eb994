"""The physical plan in Drill's JSON form, split into fragments at its exchanges.

``to_physical(plan, stats)`` turns an (optimized) logical plan into physical operators ("pops",
named as in seed 000) in a ``{"head": ..., "graph": [{"@id", "pop", "child" | "left"/"right" |
"children", ..., "logical": <logical id>}]}`` document. Every physical operator keeps the id of
the logical operator it implements (one logical operator may become several: a partial and a
final aggregate, a sort and its merging exchange).

Choices come from what the storage engines report, or what the store that wrote a selection
recorded (:class:`~engine.planner.statistics.Statistics`; such a scan shows ``statistics=recorded``):

* a scan is *parallel* (several tasks) when it reads more than one file or more than
  ``PlannerOptions.parallel_bytes``, or when its size is unknown; constants are single;
* a join whose small side is known to hold at most ``broadcast_threshold`` bytes (Spark's
  default 10 MB) is a ``broadcast-hash-join`` with a ``broadcast`` exchange on that side (the
  right side of a left join, either side of an inner join; never for a full outer join);
  otherwise an equi-join is a ``merge-join`` when both inputs arrive sorted on its keys, else a
  ``hash-join`` over ``hash-partition`` exchanges; a join with no ``==`` condition is a
  ``nested-loop-join``;
* a collapsingaggregate over parallel input whose aggregates combine (sum, count, min, max,
  avg; no ``target``) runs in two phases: ``partial-aggregate`` -> exchange -> ``hash-aggregate``
  (by ``within``) or ``streaming-aggregate`` (no ``within``) unless its input is known to be small;
* order, limit, windowframe and runningaggregate see their whole input (or segment) through a
  ``merge``, ``single`` or ``hash-partition`` exchange when it is parallel.

Exchanges (``hash-partition``, ``broadcast``, ``single``, ``merge``) delimit the fragments: an
exchange belongs to the fragment that receives; its child starts the fragment that sends.

>>> from engine.plan import parse_plan
>>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/d"}, "q": {"type": "queue"}},
...   "query": [
...     {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e", "selection": {"path": "e.json"}},
...     {"@id": 2, "op": "order", "input": 1, "orderings": [{"expr": "e.a"}]},
...     {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}}]})
>>> physical = to_physical(plan)
>>> [(op.pop, op.logical_id) for op in physical.graph]
[('scan-json', '1'), ('sort', '2'), ('merge', '2'), ('store-queue', '3')]
>>> [(f.id, f.parallel, f.operators) for f in physical.fragments()]
[(0, False, (4, 3)), (1, True, (2, 1))]
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.expr import FunctionKind
from engine.expr.rewrite import split_calls
from engine.plan import (
    CollapsingAggregate,
    Constant,
    Filter,
    Flatten,
    Join,
    Limit,
    LogicalPlan,
    Operator,
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
from engine.plan.expressions import parse_cached
from engine.planner.properties.semi_joins import reading_rows, semi_joins, skipped_operators
from engine.planner.rules.join_conditions import BROADCAST_BYTES
from engine.planner.statistics import Statistics

EXCHANGES = frozenset({"hash-partition", "broadcast", "single", "merge"})
"""The pops that move records between fragments."""

COMBINABLE = frozenset({"sum", "count", "min", "max", "avg"})
"""Aggregates that combine from partial results (two-phase aggregation)."""

_SCAN_POPS = {
    "json": "scan-json",
    "parquet": "scan-parquet",
    "csv": "scan-text",
    "text": "scan-text",
}
_TABLE_ENGINES = frozenset({"jdbc", "catalog"})
"""Engines whose scans and stores address tables: their pops are named after the engine."""

_EXTENSIONS = {
    ".json": "json",
    ".parquet": "parquet",
    ".csv": "csv",
    ".tsv": "text",
    ".txt": "text",
}


@dataclass(frozen=True)
class PlannerOptions:
    """Thresholds of the physical planner (bytes as the storage engines report them)."""

    broadcast_threshold: int = BROADCAST_BYTES
    parallel_bytes: int = 128 * 1024 * 1024
    two_phase_min_rows: int = 10_000
    semi_joins: bool = True
    """Whether joins may run as semi or anti joins (:mod:`~engine.planner.properties.semi_joins`)."""


@dataclass(frozen=True)
class PhysicalOperator:
    """One physical operator: ``pop``, its inputs (physical ids), its logical operator, settings."""

    id: int
    pop: str
    inputs: tuple[int, ...]
    logical_id: str | None
    props: dict[str, Any] = field(default_factory=dict)

    @property
    def is_exchange(self) -> bool:
        return self.pop in EXCHANGES

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"@id": self.id, "pop": self.pop}
        if self.pop.endswith("join") and len(self.inputs) == 2:
            body["left"], body["right"] = self.inputs
        elif self.pop == "union":
            body["children"] = list(self.inputs)
        elif self.inputs:
            body["child"] = self.inputs[0]
        body.update(self.props)
        if self.logical_id is not None:
            body["logical"] = self.logical_id
        return body


@dataclass(frozen=True)
class Fragment:
    """Operators that run together; ``sends_to`` is the exchange (in another fragment) it feeds."""

    id: int
    root: int
    operators: tuple[int, ...]
    parallel: bool
    sends_to: int | None = None
    receiver_fragment: int | None = None


@dataclass
class PhysicalPlan:
    """A physical plan: operators in dependency order (inputs first) and the ids of its roots."""

    graph: list[PhysicalOperator]
    roots: list[int]
    parallel: dict[int, bool]
    source: str | None = None
    head: dict[str, Any] = field(
        default_factory=lambda: {
            "type": "APACHE_DRILL_PHYSICAL",
            "version": 1,
            "generator": {"type": "drill-dagster", "info": "engine.planner"},
        }
    )

    def operator(self, op_id: int) -> PhysicalOperator:
        return next(op for op in self.graph if op.id == op_id)

    def implementing(self, logical_id: str) -> list[PhysicalOperator]:
        """The physical operators that implement logical operator ``logical_id``."""
        return [op for op in self.graph if op.logical_id == logical_id]

    def to_dict(self) -> dict[str, Any]:
        return {"head": self.head, "graph": [op.to_dict() for op in self.graph]}

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    def fragments(self) -> list[Fragment]:
        """The fragments, the roots' first (in root order), each listing its operators root first."""
        by_id = {op.id: op for op in self.graph}
        owner: dict[int, int] = {}
        found: list[Fragment] = []
        pending: list[tuple[int, int | None, int | None]] = [(r, None, None) for r in self.roots]
        while pending:
            start, exchange, receiver = pending.pop(0)
            if start in owner:
                continue
            number = len(found)
            members: list[int] = []
            stack = [start]
            while stack:
                op_id = stack.pop()
                if op_id in owner:
                    continue
                owner[op_id] = number
                members.append(op_id)
                op = by_id[op_id]
                for child in reversed(op.inputs):
                    if op.is_exchange:
                        pending.append((child, op_id, number))
                    else:
                        stack.append(child)
            found.append(
                Fragment(number, start, tuple(members), self.parallel[start], exchange, receiver)
            )
        return found

    def fragment_of(self, logical_id: str) -> int | None:
        """The fragment where logical operator ``logical_id`` finishes (its last physical step)."""
        owners = {op_id: f.id for f in self.fragments() for op_id in f.operators}
        ops = self.implementing(logical_id)
        return owners.get(ops[-1].id) if ops else None


@dataclass(frozen=True)
class _Out:
    """What the planner knows about an operator's output."""

    op: int
    parallel: bool
    bytes: int | None = None
    rows: int | None = None
    sorted_on: tuple[str, ...] = ()


def to_physical(
    plan: LogicalPlan,
    stats: Statistics | None = None,
    options: PlannerOptions | None = None,
) -> PhysicalPlan:
    """The physical plan of ``plan`` (see the module docstring); run :func:`optimize` first."""
    return _Builder(plan, stats or Statistics(), options or PlannerOptions()).build()


class _Builder:
    def __init__(self, plan: LogicalPlan, stats: Statistics, options: PlannerOptions) -> None:
        self.plan = plan
        self.stats = stats
        self.options = options
        self.graph: list[PhysicalOperator] = []
        self.parallel: dict[int, bool] = {}
        self.outs: dict[str, _Out] = {}
        # join id -> how it runs as a semi or anti join
        self.semi = semi_joins(plan) if options.semi_joins else {}
        self.semi_tests = {semi.test_of: (join_id, semi) for join_id, semi in self.semi.items()}
        self.skipped = skipped_operators(self.semi)

    def build(self) -> PhysicalPlan:
        readers = {ref for op in self.plan.query for ref in op.input_ids()}
        roots = []
        for op in self.plan.topological_order():
            if op.id in self.skipped:  # its semi (anti) join reads the records below it
                continue
            if op.id in self.semi:
                op = reading_rows(op, self.semi[op.id])
            inputs = [self.outs[ref] for ref in op.input_ids()]
            self.outs[op.id] = getattr(self, f"_{op.op}")(op, inputs)
            if op.id not in readers:
                roots.append(self.outs[op.id].op)
        return PhysicalPlan(self.graph, roots, self.parallel, source=self.plan.source)

    # -- helpers -----------------------------------------------------------------------------

    def add(self, pop: str, inputs: list[_Out], op: Operator, parallel: bool, **props: Any) -> int:
        node = PhysicalOperator(
            len(self.graph) + 1,
            pop,
            tuple(i.op for i in inputs),
            op.id,
            {k: v for k, v in props.items() if v is not None},
        )
        self.graph.append(node)
        self.parallel[node.id] = parallel
        return node.id

    def out(self, pop: str, inputs: list[_Out], op: Operator, **props: Any) -> _Out:
        """A record-preserving operator: the size estimate and distribution carry over."""
        (source,) = inputs
        node = self.add(pop, inputs, op, source.parallel, **props)
        return _Out(node, source.parallel, source.bytes, source.rows)

    def gather(self, source: _Out, op: Operator, *, orderings: list[str] | None = None) -> _Out:
        """``source`` in one task: unchanged when it already is, else through an exchange."""
        if not source.parallel:
            return source
        pop = "merge" if orderings else "single"
        node = self.add(pop, [source], op, False, orderings=orderings)
        return _Out(node, False, source.bytes, source.rows, source.sorted_on)

    def partition(self, source: _Out, op: Operator, keys: list[str]) -> _Out:
        if not source.parallel:
            return source
        node = self.add("hash-partition", [source], op, True, keys=keys)
        return _Out(node, True, source.bytes, source.rows)

    # -- sources and sinks -------------------------------------------------------------------

    def _scan(self, op: Scan, inputs: list[_Out]) -> _Out:
        stats = self.stats.scan(op.id)
        fmt = stats.format if stats is not None else _format_of(op.selection or {})
        parallel = stats is None or (
            stats.file_count > 1 or stats.total_bytes > self.options.parallel_bytes
        )
        rows = stats.row_count if stats is not None else None
        if op.pushed_limit is not None:
            rows = op.pushed_limit if rows is None else min(rows, op.pushed_limit)
        engine = self.plan.storage.get(op.storage_engine)
        if engine is not None and engine.type in _TABLE_ENGINES:  # a table, not files
            pop = f"scan-{engine.type}"
        else:
            pop = _SCAN_POPS.get(fmt, f"scan-{fmt}")
        node = self.add(
            pop,
            [],
            op,
            parallel,
            storageengine=op.storage_engine,
            selection=op.selection,
            ref=op.ref,
            columns=op.projection if op.projection is not None else ["*"],
            filter=op.pushed_filter,
            limit=op.pushed_limit,
            files=stats.file_count if stats is not None else None,
            bytes=stats.total_bytes if stats is not None else None,
            rows=rows,
            statistics="recorded" if stats is not None and stats.recorded else None,
        )
        return _Out(node, parallel, stats.total_bytes if stats else None, rows)

    def _constant(self, op: Constant, inputs: list[_Out]) -> _Out:
        size = len(json.dumps(op.content))
        node = self.add("values", [], op, False, rows=len(op.content))
        return _Out(node, False, size, len(op.content))

    def _store(self, op: Store, inputs: list[_Out]) -> _Out:
        engine = self.plan.storage.get(op.storage_engine)
        kind = engine.type if engine is not None else "unknown"
        if kind in ("queue", "console"):
            source = self.gather(inputs[0], op)  # the records are handed over in order
            pop = f"store-{kind}"
        elif kind in _TABLE_ENGINES:
            source = inputs[0]
            pop = f"store-{kind}"
        else:
            source = inputs[0]
            pop = f"store-{(op.target or {}).get('format', 'parquet')}"
        node = self.add(
            pop, [source], op, source.parallel, storageengine=op.storage_engine, target=op.target
        )
        return _Out(node, source.parallel)

    # -- record at a time --------------------------------------------------------------------

    def _filter(self, op: Filter, inputs: list[_Out]) -> _Out:
        if op.id in self.semi_tests:  # its match test is the semi (anti) join's
            join_id, semi = self.semi_tests[op.id]
            tested = f"{semi.label} join {join_id}"
            return self.out("filter", inputs, op, expr=semi.rest or "true", match_by=tested)
        return self.out("filter", inputs, op, expr=op.expr)

    def _project(self, op: Project, inputs: list[_Out]) -> _Out:
        exprs = [{"ref": p.ref, "expr": p.expr} for p in op.projections]
        return self.out("project", inputs, op, exprs=exprs)

    def _transform(self, op: Transform, inputs: list[_Out]) -> _Out:
        exprs = [{"ref": t.ref, "expr": t.expr} for t in op.transforms]
        return self.out("project", inputs, op, exprs=exprs, keep="record")

    def _flatten(self, op: Flatten, inputs: list[_Out]) -> _Out:
        node = self.out("flatten", inputs, op, ref=op.ref, expr=op.expr, drop=op.drop)
        return _Out(node.op, node.parallel)  # one record may become many: size unknown

    # -- whole-stream operators --------------------------------------------------------------

    def _order(self, op: Order, inputs: list[_Out]) -> _Out:
        orderings = [_ordering_text(o) for o in op.orderings]
        (source,) = inputs
        if op.within:
            source = self.partition(source, op, [op.within])
            node = self.add("sort", [source], op, source.parallel, orderings=orderings)
            return _Out(node, source.parallel, source.bytes, source.rows)
        node = self.add(
            "sort", [source], op, source.parallel, orderings=orderings, within=op.within
        )
        keys = tuple(o.expr for o in op.orderings)
        sorted_out = _Out(node, source.parallel, source.bytes, source.rows, keys)
        return self.gather(sorted_out, op, orderings=orderings)

    def _limit(self, op: Limit, inputs: list[_Out]) -> _Out:
        (source,) = inputs
        if source.parallel and op.last is not None:
            partial = self.add("limit", [source], op, True, first=0, last=op.last)
            source = self.gather(_Out(partial, True, source.bytes, source.rows), op)
        else:
            source = self.gather(source, op)
        node = self.add("limit", [source], op, False, first=op.first, last=op.last)
        rows = None if op.last is None else op.last - op.first
        return _Out(node, False, source.bytes, rows, source.sorted_on)

    def _segment(self, op: Segment, inputs: list[_Out]) -> _Out:
        source = self.partition(inputs[0], op, list(op.exprs))
        node = self.add("segment", [source], op, source.parallel, ref=op.ref, exprs=op.exprs)
        return _Out(node, source.parallel, source.bytes, source.rows)

    def _windowframe(self, op: WindowFrame, inputs: list[_Out]) -> _Out:
        source = self._segmented(inputs[0], op, op.within)
        node = self.add(
            "window",
            [source],
            op,
            source.parallel,
            within=op.within,
            start=op.start,
            end=op.end,
            ref={"segment": op.segment_ref, "position": op.position_ref},
        )
        return _Out(node, source.parallel)

    def _runningaggregate(self, op: RunningAggregate, inputs: list[_Out]) -> _Out:
        source = self._segmented(inputs[0], op, op.within)
        aggregations = [{"ref": a.ref, "expr": a.expr} for a in op.aggregations]
        node = self.add(
            "window",
            [source],
            op,
            source.parallel,
            within=op.within,
            running=True,
            aggregations=aggregations,
        )
        return _Out(node, source.parallel, source.bytes, source.rows)

    def _segmented(self, source: _Out, op: Operator, within: str | None) -> _Out:
        return self.partition(source, op, [within]) if within else self.gather(source, op)

    def _collapsingaggregate(self, op: CollapsingAggregate, inputs: list[_Out]) -> _Out:
        (source,) = inputs
        aggregations = [{"ref": a.ref, "expr": a.expr} for a in op.aggregations]
        settings = {
            "within": op.within,
            "target": op.target,
            "carryovers": op.carryovers or None,
            "aggregations": aggregations,
        }
        small = source.rows is not None and source.rows < self.options.two_phase_min_rows
        if source.parallel and not small and _combinable(op):
            keys = [op.within] if op.within else []
            partial = self.add("partial-aggregate", [source], op, True, keys=keys, **settings)
            source = _Out(partial, True)
        if op.within:
            source = self.partition(source, op, [op.within])
            pop = "hash-aggregate" if source.parallel else "streaming-aggregate"
            node = self.add(pop, [source], op, source.parallel, **settings)
            return _Out(node, source.parallel)
        source = self.gather(source, op)
        node = self.add("streaming-aggregate", [source], op, False, **settings)
        return _Out(node, False, 64, 1)

    # -- several inputs ----------------------------------------------------------------------

    def _union(self, op: Union, inputs: list[_Out]) -> _Out:
        parallel = any(i.parallel for i in inputs)
        sizes = [i.bytes for i in inputs]
        total = None if None in sizes else sum(s for s in sizes if s is not None)
        node = self.add("union", inputs, op, parallel, distinct=op.distinct)
        result = _Out(node, parallel, total)
        if not op.distinct:
            return result
        source = self.partition(result, op, ["*"])
        node = self.add("hash-aggregate", [source], op, source.parallel, distinct=True)
        return _Out(node, source.parallel, total)

    def _join(self, op: Join, inputs: list[_Out]) -> _Out:
        left, right = inputs
        conditions = [
            {"relationship": c.relationship, "left": c.left, "right": c.right}
            for c in op.conditions
        ]
        semi = self.semi.get(op.id)
        settings = {"type": semi.label if semi else op.type, "conditions": conditions}
        parallel = left.parallel or right.parallel
        equi = [c for c in op.conditions if c.relationship == "=="]
        build = self._broadcast_side(op, left, right)
        if not equi:
            if op.type == "outer":
                left, right = self.gather(left, op), self.gather(right, op)
                parallel = False
            else:
                right = self._broadcast(right, op)
            node = self.add("nested-loop-join", [left, right], op, parallel, **settings)
            return _Out(node, parallel)
        if build is not None:
            if build == "left":
                left = self._broadcast(left, op)
                parallel = right.parallel
            else:
                right = self._broadcast(right, op)
                parallel = left.parallel
            node = self.add(
                "broadcast-hash-join", [left, right], op, parallel, build=build, **settings
            )
            return _Out(node, parallel)
        left_keys = [c.left for c in equi]
        right_keys = [c.right for c in equi]
        if left.sorted_on[: len(equi)] == tuple(left_keys) and right.sorted_on[
            : len(equi)
        ] == tuple(right_keys):
            node = self.add("merge-join", [left, right], op, parallel, **settings)
            return _Out(node, parallel)
        if parallel:
            left = self._exchange("hash-partition", left, op, keys=left_keys)
            right = self._exchange("hash-partition", right, op, keys=right_keys)
        node = self.add("hash-join", [left, right], op, parallel, **settings)
        return _Out(node, parallel)

    def _broadcast_side(self, op: Join, left: _Out, right: _Out) -> str | None:
        limit = self.options.broadcast_threshold
        small = {
            side: out.bytes
            for side, out in (("left", left), ("right", right))
            if out.bytes is not None and out.bytes <= limit
        }
        if op.type == "left" or op.id in self.semi:  # a semi join keeps left records
            small.pop("left", None)
        elif op.type == "outer":
            small = {}
        if not small:
            return None
        return min(small, key=lambda side: (small[side], side != "right"))

    def _broadcast(self, source: _Out, op: Operator) -> _Out:
        return self._exchange("broadcast", source, op)

    def _exchange(self, pop: str, source: _Out, op: Operator, **props: Any) -> _Out:
        node = self.add(pop, [source], op, pop != "broadcast" and source.parallel, **props)
        return _Out(node, self.parallel[node], source.bytes, source.rows)


def _combinable(op: CollapsingAggregate) -> bool:
    if op.target is not None:
        return False
    for aggregation in op.aggregations:
        _, calls = split_calls(parse_cached(aggregation.expr), FunctionKind.AGGREGATE, "_p")
        if any(call.name not in COMBINABLE for call in calls):
            return False
    return True


def _ordering_text(ordering: Any) -> str:
    return f"{ordering.expr} {ordering.order} nulls {ordering.null_collation}"


def _format_of(selection: dict[str, Any]) -> str:
    named = selection.get("format") or selection.get("type")
    if isinstance(named, str):
        return named.lower()
    path = str(selection.get("path", ""))
    suffix = path[path.rfind(".") :].lower() if "." in path.rsplit("/", 1)[-1] else ""
    return _EXTENSIONS.get(suffix, "json")
