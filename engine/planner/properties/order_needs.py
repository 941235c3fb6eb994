"""Which operators' record order is observed, and which orders tie no two records: plan-level
analyses of the order each operator's readers need (an executor builds no order nothing
observes, and breaks no tie that cannot happen). Operators are read in topological order.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from engine.expr import Expr, FieldRef, field_refs, parse_field_ref
from engine.plan.expressions import parse_cached
from engine.plan.field_paths import output_path
from engine.plan.traits import traits
from engine.planner.rewrite import top_names


def unordered_outputs(operators: Sequence[Any], sinks: Collection[str]) -> set[str]:
    """The ids of the operators whose record order nothing observes, from ``operators`` in
    topological order (``sinks``: the ids of the stores returning records in order, queues and
    consoles). Such an operator's sequence value may be anything (a scan's may be a constant:
    no file lookup, no row ids).

    Order is observed by ``order`` (ties keep the input order; not when no two records tie, see
    :func:`total_orders`), ``limit``, ``segment`` (when its order or its group numbers are read;
    a ``collapsingaggregate`` that collapses its groups reads neither), ``windowframe``,
    ``runningaggregate``, a ``collapsingaggregate`` with runs, a target or carryovers (but for
    one that collapses a segment's groups carrying only their keys: only its own order), a sink,
    a file store below an ``order`` or ``limit``, and an output no one reads (collected in
    order); filters, projects, transforms, flattens, unions and joins pass their readers' needs
    on to their inputs, but for a join's right input where only the first appearance of groups
    its left records determine is read (:func:`left_grouped_joins`). Anything else observes it.
    """
    by_id = {op.id: op for op in operators}
    readers: dict[str, list[Any]] = {op.id: [] for op in operators}
    below_order: set[str] = set()
    for op in operators:
        for ref in op.input_ids():
            readers.setdefault(ref, []).append(op)
        if traits(op.op).orders or any(i in below_order for i in op.input_ids()):
            below_order.add(op.id)
    total = total_orders(operators)
    left_grouped = left_grouped_joins(operators)
    observed: set[str] = set()

    def observes(reader: Any, op: Any) -> bool:
        """Whether ``reader`` observes the order of its input ``op``."""
        kind = reader.op
        if kind == "join" and reader.id in left_grouped and op.id != reader.left:
            return False
        if traits(kind).passes_order:
            return reader.id in observed
        if kind == "store":
            return reader.id in sinks or (reader.input or "") in below_order
        if kind == "order":
            return reader.within is not None or (reader.id in observed and reader.id not in total)
        if kind == "segment":
            return reader.id in observed or not all(
                r.op == "collapsingaggregate" and collapses_groups(reader, r)
                for r in readers[reader.id]
            )
        if kind == "collapsingaggregate":
            segment = by_id.get(reader.input or "")
            if (
                segment is not None
                and segment.op == "segment"
                and collapses_groups(segment, reader)
                and carries_only_keys(segment, reader)
            ):
                return reader.id in observed
            return bool(reader.within or reader.target or reader.carryovers)
        return True

    for op in reversed(operators):
        if (not readers.get(op.id) and op.op != "store") or any(
            observes(reader, op) for reader in readers[op.id]
        ):
            observed.add(op.id)
    return {op.id for op in operators} - observed


def left_grouped_joins(operators: Sequence[Any]) -> set[str]:
    """The ids of the ``inner`` and ``left`` joins whose order is read only by a segment whose
    readers all collapse its groups carrying only its keys (the groups' first appearance
    orders their records), where each key is determined by the left record: a member of a
    record the right input does not hold (:func:`top_names`), or the right side of an ``==``
    condition. Every left record then falls in one group, so the groups appear in the order of
    their first left records whatever the right records' order: the join's right input needs
    none (TPC-H Q3's lines, grouped by their order's key, date and priority).

    >>> from engine.plan import parse_plan
    >>> scan = lambda i, ref: {"@id": i, "op": "scan", "storageengine": "fs", "ref": ref,
    ...     "selection": {"path": ref}}
    >>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/d"}}, "query": [
    ...   scan(1, "o"), scan(2, "l"),
    ...   {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "inner",
    ...    "conditions": [{"relationship": "==", "left": "o.key", "right": "l.okey"}]},
    ...   {"@id": 4, "op": "segment", "input": 3, "ref": "g", "exprs": ["l.okey", "o.date"]},
    ...   {"@id": 5, "op": "collapsingaggregate", "input": 4, "within": "g",
    ...    "carryovers": ["l.okey", "o.date"], "aggregations": [{"ref": "n", "expr": "count(1)"}]},
    ...   {"@id": 6, "op": "order", "input": 5, "orderings": [{"expr": "n"}]},
    ...   {"@id": 7, "op": "store", "input": 6, "storageengine": "fs", "target": {"path": "x"}}]})
    >>> ops = plan.topological_order()
    >>> left_grouped_joins(ops), sorted(unordered_outputs(ops, set()))
    ({'3'}, ['2', '7'])
    """
    by_id = {op.id: op for op in operators}
    readers: dict[str, list[Any]] = {}
    for op in operators:
        for ref in op.input_ids():
            readers.setdefault(ref, []).append(op)
    found = set()
    for op in operators:
        if op.op != "join" or op.type not in ("inner", "left") or op.left == op.right:
            continue
        (segment, *others) = readers.get(op.id) or [None]
        if segment is None or others or segment.op != "segment":
            continue
        collapses = readers.get(segment.id) or []
        if not collapses or not all(
            r.op == "collapsingaggregate"
            and collapses_groups(segment, r)
            and carries_only_keys(segment, r)
            for r in collapses
        ):
            continue
        right_names = top_names(by_id.get(op.right), by_id)
        equated = {parse_cached(c.right) for c in op.conditions if c.relationship == "=="}
        if all(_left_determined(parse_cached(key), right_names, equated) for key in segment.exprs):
            found.add(op.id)
    return found


def _left_determined(key: Expr, right_names: frozenset[str] | None, equated: set[Expr]) -> bool:
    """Whether a joined record's value of ``key`` is its left record's: the right records hold
    no field where it reads, or a condition makes it equal to a value of the left record."""
    if key in equated:
        return True
    path = _member_path(key)
    return path is not None and right_names is not None and path[0] not in right_names


def total_orders(operators: Sequence[Any]) -> set[str]:
    """The ids of the ``order`` operators (without ``within``) that need no tie-break by input
    order: ties may come in any order (``stable: false``), no two records tie (their keys
    include every key of a collapse of a segment's groups, its input, which are unique), or
    records that tie are equal (:func:`tie_free_orders`).

    Keys are compared as expressions (``l.a`` is ``l.a``, not ``l.A``); null equals null, as in
    a segment's groups and in a sort."""
    by_id = {op.id: op for op in operators}
    total = set(tie_free_orders(operators))
    for op in operators:
        if op.op != "order" or op.within is not None:
            continue
        if not op.stable:
            total.add(op.id)
            continue
        keys = unique_keys(by_id.get(op.input or ""), by_id)
        if keys is not None and keys <= {parse_cached(o.expr) for o in op.orderings}:
            total.add(op.id)
    return total


def tie_free_orders(operators: Sequence[Any]) -> dict[str, str]:
    """``{order id: scan id}`` for each ``order`` (without ``within``) that reads a scan whose
    records hold nothing but the order's keys: the scan reads only the members of its
    ``projection`` (the planner's projection pushdown), each of them a key. Records that tie are
    then equal, and no reader can tell which of them comes first (a sessionization ordering
    events by user, time and id, reading nothing else of them).

    Equal keys are equal values for exact types only: a floating key ties -0.0 with 0.0, and
    a string of another collation ties different strings. The compiler, which sees the types,
    keeps the tie-break there (:func:`exact_type`).

    >>> from engine.plan import parse_plan
    >>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/d"}}, "query": [
    ...   {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e", "selection": {"path": "e"},
    ...    "projection": ["ts", "user"]},
    ...   {"@id": 2, "op": "order", "input": 1, "orderings": [{"expr": "e.user"}, {"expr": "e.ts"}]},
    ...   {"@id": 3, "op": "store", "input": 2, "storageengine": "fs", "target": {"path": "o"}}]})
    >>> tie_free_orders(plan.topological_order())
    {'2': '1'}
    """
    by_id = {op.id: op for op in operators}
    found = {}
    for op in operators:
        scan = by_id.get(op.input or "") if op.op == "order" and op.within is None else None
        if scan is None or scan.op != "scan" or not scan.projection or not scan.ref:
            continue
        if scan.pushed_limit is not None:
            continue
        if {member.lower() for member in scan.projection} <= _member_keys(op, scan.ref):
            found[op.id] = scan.id
    return found


def scans_ordered_by_keys(operators: Sequence[Any]) -> dict[str, frozenset[str]]:
    """``{scan id: members}`` for each scan (with ``ref``, no pushed limit) read by nothing but
    one ``order`` (without ``within``): its ``members`` (lower-cased) are the order's keys that
    are members of the scan's records. Only that order reads the scan's order, and only to
    break ties: its records need to be in input order only among records with equal keys
    (:mod:`~engine.exec.spark.file_ties`).

    >>> from engine.plan import parse_plan
    >>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/d"}}, "query": [
    ...   {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "l", "selection": {"path": "l"}},
    ...   {"@id": 2, "op": "order", "input": 1,
    ...    "orderings": [{"expr": "l.Price", "order": "desc"}, {"expr": "l.k + 1"}]},
    ...   {"@id": 3, "op": "store", "input": 2, "storageengine": "fs", "target": {"path": "o"}}]})
    >>> scans_ordered_by_keys(plan.topological_order())
    {'1': frozenset({'price'})}
    """
    readers: dict[str, list[Any]] = {}
    for op in operators:
        for ref in op.input_ids():
            readers.setdefault(ref, []).append(op)
    found = {}
    for scan in operators:
        if scan.op != "scan" or not scan.ref or scan.pushed_limit is not None:
            continue
        reading = readers.get(scan.id, [])
        if len(reading) != 1 or reading[0].op != "order" or reading[0].within is not None:
            continue
        members = _member_keys(reading[0], scan.ref)
        if members:
            found[scan.id] = members
    return found


def _member_keys(order: Any, ref: str) -> frozenset[str]:
    """The (lower-cased) names of the members of records under ``ref`` that ``order`` sorts
    by as they are (a key ``ref.name``)."""
    steps = tuple(step.lower() for step in _steps(ref))
    paths = [_member_path(parse_cached(o.expr)) for o in order.orderings]
    return frozenset(path[-1] for path in paths if path is not None and path[:-1] == steps)


def _member_path(expr: Expr) -> tuple[str, ...] | None:
    """The lower-cased names of a field reference by names only (None for anything else)."""
    if not isinstance(expr, FieldRef) or not all(isinstance(s, str) for s in expr.path):
        return None
    return tuple(str(step).lower() for step in expr.path)


def unique_keys(op: Any, by_id: dict[str, Any]) -> frozenset[Expr] | None:
    """Expressions whose values no two of ``op``'s records share, or None if none is known: the
    carried keys of a ``collapsingaggregate`` that collapses a segment's groups (one record
    per group; a segment without keys has one group), and the fields a ``project`` of such
    records writes every one of those keys to (SQL's select list over a ``GROUP BY``).

    >>> from engine.plan import parse_plan
    >>> plan = parse_plan({"storage": {"fs": {"type": "fs", "root": "/d"}}, "query": [
    ...   {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "l", "selection": {"path": "l"}},
    ...   {"@id": 2, "op": "segment", "input": 1, "ref": "g", "exprs": ["l.mode"]},
    ...   {"@id": 3, "op": "collapsingaggregate", "input": 2, "within": "g",
    ...    "carryovers": ["l.mode"], "aggregations": [{"ref": "n", "expr": "count(1)"}]},
    ...   {"@id": 4, "op": "project", "input": 3, "projections": [
    ...    {"ref": "output.mode", "expr": "l.mode"}, {"ref": "output.n", "expr": "n"}]},
    ...   {"@id": 5, "op": "order", "input": 4, "orderings": [{"expr": "mode"}]},
    ...   {"@id": 6, "op": "store", "input": 5, "storageengine": "fs", "target": {"path": "x"}}]})
    >>> ops = plan.topological_order()
    >>> sorted(str(k) for k in unique_keys(ops[3], {op.id: op for op in ops}))
    ['mode']
    >>> total_orders(ops)
    {'5'}
    """
    if op is not None and op.op == "project":
        return _projected_keys(op, unique_keys(by_id.get(op.input or ""), by_id))
    if op is None or op.op != "collapsingaggregate":
        return None
    segment = by_id.get(op.input or "")
    if segment is None or segment.op != "segment" or not collapses_groups(segment, op):
        return None
    keys = frozenset(parse_cached(e) for e in segment.exprs)
    carried = {parse_cached(name) for name in op.carryovers}
    written = [_steps(a.ref) for a in op.aggregations]
    if not keys <= carried or any(
        _overlap(_path_steps(k), w) for k in keys for w in written if isinstance(k, FieldRef)
    ):
        return None
    return keys


def _projected_keys(project: Any, keys: frozenset[Expr] | None) -> frozenset[Expr] | None:
    """The fields ``project`` writes ``keys`` (its input's unique keys) to, or None unless each
    key is written as it is to a field no other projection writes over or into."""
    if keys is None:
        return None
    paths = [output_path(p.ref) for p in project.projections]
    found: dict[Expr, Expr] = {}
    for i, projection in enumerate(project.projections):
        value = parse_cached(projection.expr)
        if value not in keys or value in found or not paths[i]:
            continue
        if any(_overlap(paths[i], other) for j, other in enumerate(paths) if j != i):
            continue
        found[value] = FieldRef(paths[i])
    return frozenset(found.values()) if set(found) == set(keys) else None


def collapses_groups(segment: Any, op: Any) -> bool:
    """Whether ``collapsingaggregate`` ``op`` collapses ``segment``'s groups (its runs of the
    group number) without reading the number (or anything it was written over): it groups the
    segment's input by the segment's keys instead."""
    if op.within is None or _steps(op.within) != _steps(segment.ref):
        return False
    paths = [_steps(name) for name in (*op.carryovers, op.target) if name]
    paths += [_path_steps(r) for a in op.aggregations for r in field_refs(parse_cached(a.expr))]
    return not any(_overlap(path, _steps(segment.ref)) for path in paths)


def carries_only_keys(segment: Any, op: Any) -> bool:
    """Whether every carryover of ``op`` is one of ``segment``'s keys (the same in every record
    of a group: no record chosen by order)."""
    keys = {parse_cached(e) for e in segment.exprs}
    return all(parse_cached(name) in keys for name in op.carryovers)


def _steps(name: str) -> tuple[str, ...]:
    return _path_steps(parse_field_ref(name))


def _path_steps(ref: FieldRef) -> tuple[str, ...]:
    return tuple(str(step) for step in ref.path)


def _overlap(path: tuple[str, ...], other: tuple[str, ...]) -> bool:
    shorter = min(len(path), len(other))
    return path[:shorter] == other[:shorter]
