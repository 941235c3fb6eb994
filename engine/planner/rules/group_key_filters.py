"""Groups no join can match are never built: ``filter_group_keys(plan, stats)``.

A decorrelated subquery is an aggregate grouped by its correlation keys, joined back to the
enclosing query on those keys (TPC-H q17: the average quantity of *every* part's lines, joined
to the few parts of one brand). Where that join is ``inner`` and its other side holds far fewer
keys than the aggregate reads rows, this rule filters the aggregate's input to the keys the other
side can match, with a semi join, before any group is built: the aggregate's records that remain
are those the join keeps, the same records as before (a group is dropped whole, never changed;
an inner equality never matches a group whose key is missing from the other side, nor a null).
This is the "magic set" rewrite of the decorrelation literature, also applied by Spark to a semi
join across an equality (q20).

The keys come from the cheaper of:

* a semi join (:mod:`~engine.planner.properties.semi_joins`) the other side's records passed
  through filters only, on the same value the join compares (q20: parts named ``forest%``, whose
  ``partsupp`` records join the per-part-and-supplier sums of ``lineitem``): its subquery's rows;
* the other side's records themselves (q17: the parts of one brand and container), or, where
  they are an inner join's, those of the join input the compared values come from (q02: the
  parts of one size and type, which the outer query joins to ``partsupp`` before the
  aggregate): a superset of the keys the join's records hold.

Where the aggregate reads an inner join's records and its keys are fields of one of the join's
inputs (copied by transforms on the way), that input is filtered instead, below the joins (TPC-H
q02: the ``partsupp`` scan, before its joins to ``supplier``, ``nation`` and ``region``): the
joins read fewer records. Each operator on the way must be read by the next alone.

Only where the keys' estimated rows (:func:`~engine.planner.rules.join_conditions.estimate_input`)
are at most a tenth of the rows of the input filtered, both known: the filter then costs a scan
of a small input and saves joining and grouping the large one. A filter above a join (whose
records the planner does not estimate) is never added: there the join, not the grouping, is the
cost, and a filter above it saves little (TPC-H q02 ran 17% slower with it). Only for an
aggregate collapsing a segment's groups, carrying its keys, read (through a ``project`` copying
them) by the join alone, and for ``==`` conditions comparing such copies; the filtered records
must have known top-level names (the semi join must not merge fields).

The filter is written as the semi join the SQL front end writes for ``IN``: the input joined
``left`` to the distinct keys (``segment``, ``collapsingaggregate`` counting them, ``project``
nesting them under ``$keys<id>``) and a ``filter`` on ``isnotnull`` of the count, so that both
executors run it as a semi join and ``explain`` shows it.

>>> from engine.plan import parse_plan
>>> from engine.planner.statistics import ScanStatistics, Statistics
>>> def scan(i, ref):
...     return {"@id": i, "op": "scan", "storageengine": "fs", "ref": ref,
...             "selection": {"path": ref}}
>>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/d"}}, "query": [
...     scan(1, "line"), scan(2, "part"),
...     {"@id": 3, "op": "segment", "input": 1, "ref": "$seg", "exprs": ["line.pk"]},
...     {"@id": 4, "op": "collapsingaggregate", "input": 3, "within": "$seg",
...      "carryovers": ["line.pk"], "aggregations": [{"ref": "$a", "expr": "avg(line.q)"}]},
...     {"@id": 5, "op": "project", "input": 4, "projections": [
...         {"ref": "output.$s.k", "expr": "line.pk"}, {"ref": "output.$s.a", "expr": "$a"}]},
...     {"@id": 6, "op": "join", "left": 5, "right": 2, "type": "inner",
...      "conditions": [{"relationship": "==", "left": "$s.k", "right": "part.pk"}]}]})
>>> sizes = {"1": 6_000_000, "2": 2_000}
>>> stats = Statistics({i: ScanStatistics("parquet", 1, n * 10, n) for i, n in sizes.items()})
>>> planned = filter_group_keys(plan, stats)
>>> semi = planned.operator(planned.operator("3").input)
>>> semi.op, semi.expr, planned.operator(semi.input).conditions[0].left
('filter', 'isnotnull($keys10.m)', 'line.pk')
"""

from __future__ import annotations

from engine.expr import FieldRef
from engine.plan import (
    CollapsingAggregate,
    Filter,
    Join,
    LogicalPlan,
    Operator,
    Project,
    Segment,
    Transform,
)
from engine.plan.expressions import parse_cached
from engine.plan.field_paths import output_path
from engine.planner.properties.semi_joins import SemiJoin, semi_joins
from engine.planner.rewrite import IdSource, consumers, top_names, with_inputs_renamed
from engine.planner.rules.join_conditions import estimate_input
from engine.planner.statistics import Statistics

KEYS_PER_INPUT_ROWS = 0.1
"""The most estimated key rows per row the aggregate reads for the filter to be added."""


def filter_group_keys(plan: LogicalPlan, stats: Statistics | None = None) -> LogicalPlan:
    """``plan`` with the input of each aggregate an inner join matches on its group keys
    filtered to the keys the join's other side holds, as described in the module docstring."""
    ids = IdSource(plan)
    done: set[str] = set()
    while True:
        changed = _filter_one(plan, stats, ids, done)
        if changed is None:
            return plan
        plan = changed


def _filter_one(
    plan: LogicalPlan, stats: Statistics | None, ids: IdSource, done: set[str]
) -> LogicalPlan | None:
    """The plan with the first aggregate found (not in ``done``) filtered, or None."""
    readers = consumers(plan)
    semi: dict[str, SemiJoin] | None = None
    for join in plan.query:
        if not isinstance(join, Join) or join.type != "inner" or not join.conditions:
            continue
        if any(c.relationship != "==" for c in join.conditions):
            continue
        for side in ("left", "right"):
            grouped = _grouped(plan, readers, join, side)
            if grouped is None or grouped[0].id in done:
                continue
            segment, pairs = grouped
            done.add(segment.id)
            if semi is None:
                semi = semi_joins(plan)
            other = join.right if side == "left" else join.left
            source, keys = _key_source(plan, semi, other, pairs)
            target, keys, reader = _filtered_input(plan, readers, segment, keys)
            if not _worth_it(plan, stats, source, target):
                continue
            return _with_filter(plan, target, reader, source, keys, ids)
    return None


def _grouped(
    plan: LogicalPlan, readers: dict[str, list[Operator]], join: Join, side: str
) -> tuple[Segment, list[tuple[str, str]]] | None:
    """For a join ``side`` that is a project of an aggregate of a segment's groups: the segment
    and, per condition comparing a copy of a group key, ``(the other side's value, the key)``."""
    project = plan.operator(getattr(join, side))
    if not isinstance(project, Project) or [r.id for r in readers[project.id]] != [join.id]:
        return None
    aggregate = _input_of(plan, project)
    if not isinstance(aggregate, CollapsingAggregate) or aggregate.within is None:
        return None
    segment = _input_of(plan, aggregate)
    if (
        not isinstance(segment, Segment)
        or segment.ref != aggregate.within
        or segment.input is None
        or [r.id for r in readers[aggregate.id]] != [project.id]
        or [r.id for r in readers[segment.id]] != [aggregate.id]
        or list(aggregate.carryovers) != list(segment.exprs)
    ):
        return None
    group_keys = {str(parse_cached(k)) for k in segment.exprs}
    if not all(isinstance(parse_cached(k), FieldRef) for k in segment.exprs):
        return None
    copies = {
        tuple(map(str, output_path(p.ref))): str(parse_cached(p.expr)) for p in project.projections
    }
    pairs: dict[str, str] = {}
    for condition in join.conditions:
        mine, theirs = (
            (condition.left, condition.right)
            if side == "left"
            else (condition.right, condition.left)
        )
        ref = parse_cached(mine)
        key = copies.get(tuple(map(str, ref.path))) if isinstance(ref, FieldRef) else None
        if key in group_keys and key not in pairs:
            pairs[key] = str(parse_cached(theirs))
    if not pairs:
        return None
    names = top_names(plan.operator(segment.input), {op.id: op for op in plan.query})
    if names is None:
        return None
    return segment, [(theirs, key) for key, theirs in pairs.items()]


def _key_source(
    plan: LogicalPlan, semi: dict[str, SemiJoin], other: str, pairs: list[tuple[str, str]]
) -> tuple[str, list[tuple[str, str]]]:
    """The operator whose records give the keys, and ``(group key, its key there)`` pairs: a
    semi join's rows the ``other`` side's records passed on a value the join compares, else the
    other side's records themselves, or, where they are an inner join's, those of the join's
    input the compared values come from (below every such join: an inner join's records hold
    no value its input lacks, so these keys are a superset of the other side's)."""
    by_id = {op.id: op for op in plan.query}
    theirs_tops = {_top(parse_cached(theirs)) for theirs, _ in pairs}
    source, op = other, plan.operator(other)
    while True:
        if isinstance(op, Filter):
            below = _input_of(plan, op)
            found = semi.get(below.id) if isinstance(below, Join) else None
            if isinstance(below, Join) and found is not None and found.test_of == op.id:
                if found.kind == "semi":
                    tested = {
                        str(parse_cached(c.left)): k for c, k in zip(below.conditions, found.keys)
                    }
                    matched = [(key, tested[theirs]) for theirs, key in pairs if theirs in tested]
                    if matched:
                        return found.rows, matched
                op = plan.operator(below.left)
                continue
            op = below
            continue
        if isinstance(op, Join) and op.type == "inner" and op.conditions:
            side = _only_side_holding(op, theirs_tops, by_id)
            if side is not None:
                source, op = side, plan.operator(side)
                continue
        return source, [(key, theirs) for theirs, key in pairs]


def _filtered_input(
    plan: LogicalPlan,
    readers: dict[str, list[Operator]],
    segment: Segment,
    keys: list[tuple[str, str]],
) -> tuple[str, list[tuple[str, str]], str]:
    """The operator whose records the semi join filters, the keys as read there, and the
    operator reading it (to read the filter instead): the segment's input, or, where that input
    reaches inner joins through filters and transforms, the join input the group keys come
    from, below every such join. Filtering one input of an inner join on its own values drops
    the same joined records as filtering them after it, and the joins read fewer records. Each
    key must be a field of that input, copied unchanged by the transforms on the way, and every
    operator on the way read by the next alone; else the filter stays at the segment's input."""
    by_id = {op.id: op for op in plan.query}
    assert segment.input is not None
    start = (segment.input, keys, segment.id)
    at, current, reader, passed_join = segment.input, keys, segment.id, False
    while True:
        if [r.id for r in readers[at]] != [reader]:
            return start
        op = plan.operator(at)
        if isinstance(op, Filter) and op.input:
            below = op.input
        elif isinstance(op, Transform) and op.input:
            written = {str(parse_cached(t.ref)): parse_cached(t.expr) for t in op.transforms}
            tops = {_top(parse_cached(t.ref)) for t in op.transforms}
            renamed = []
            for mine, theirs in current:
                value = written.get(mine, parse_cached(mine))
                if not isinstance(value, FieldRef) or _top(value) in tops:
                    return start
                renamed.append((str(value), theirs))
            below, current = op.input, renamed
        elif isinstance(op, Join) and op.type == "inner" and op.conditions:
            side = _only_side_holding(op, {_top(parse_cached(mine)) for mine, _ in current}, by_id)
            if side is None:
                return start
            below, passed_join = side, True
        else:
            return (at, current, reader) if passed_join else start
        reader, at = at, below


def _only_side_holding(join: Join, tops: set[str], by_id: dict[str, Operator]) -> str | None:
    """The one input of ``join`` whose records hold every top-level name of ``tops``, or None
    (neither, both, or names unknown)."""
    sides = [
        side
        for side in (join.left, join.right)
        if (names := top_names(by_id.get(side), by_id)) is not None and tops <= names
    ]
    return sides[0] if len(sides) == 1 else None


def _top(ref: object) -> str:
    """The lower-cased top-level name a field reference reads (empty for anything else)."""
    return str(ref.path[0]).lower() if isinstance(ref, FieldRef) and ref.path else ""


def _input_of(plan: LogicalPlan, op: Operator) -> Operator | None:
    return plan.operator(op.input) if op.input else None


def _worth_it(plan: LogicalPlan, stats: Statistics | None, source: str, grouped: str) -> bool:
    keys = estimate_input(plan, source, stats)
    rows = estimate_input(plan, grouped, stats)
    return keys.known and rows.known and keys.rows <= rows.rows * KEYS_PER_INPUT_ROWS


def _with_filter(
    plan: LogicalPlan,
    target: str,
    reader: str,
    source: str,
    keys: list[tuple[str, str]],
    ids: IdSource,
) -> LogicalPlan:
    """``plan`` with the records of ``target`` semi joined to the distinct ``keys`` of
    ``source`` before ``reader`` reads them."""
    seg_id, agg_id, project_id, join_id, filter_id = (ids.take() for _ in range(5))
    name = f"$keys{join_id}"
    theirs = [k for _, k in keys]
    added = [
        Segment.model_validate(
            {"@id": seg_id, "op": "segment", "input": source, "ref": "$seg", "exprs": theirs}
        ),
        CollapsingAggregate.model_validate(
            {"@id": agg_id, "op": "collapsingaggregate", "input": seg_id, "within": "$seg",
             "carryovers": theirs, "aggregations": [{"ref": "$n", "expr": "count(1)"}]}
        ),
        Project.model_validate(
            {"@id": project_id, "op": "project", "input": agg_id, "projections": [
                *({"ref": f"output.{name}.v{i}", "expr": k} for i, k in enumerate(theirs)),
                {"ref": f"output.{name}.m", "expr": "$n"}]}
        ),
        Join.model_validate(
            {"@id": join_id, "op": "join", "left": target, "right": project_id,
             "type": "left", "conditions": [
                {"relationship": "==", "left": mine, "right": f"{name}.v{i}"}
                for i, (mine, _) in enumerate(keys)]}
        ),
        Filter.model_validate(
            {"@id": filter_id, "op": "filter", "input": join_id, "expr": f"isnotnull({name}.m)"}
        ),
    ]  # fmt: skip
    query: list[Operator] = []
    for op in plan.query:
        query.append(with_inputs_renamed(op, target, filter_id) if op.id == reader else op)
        if op.id == target:
            query += added
    return plan.with_query(query)
