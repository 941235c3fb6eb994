"""Members a filter alone reads: what an executor may drop from the records after it.

A scan's projection holds every member an expression of the plan reads, including those only a
filter tests (``o_comment`` of ``o_comment NOT LIKE '%special%requests%'``). Carried past the
filter, such a member is copied by every join above it for nothing. :func:`dropped_after_filters`
finds, per filter, the members of a scan's record that no other operator reads (besides the
scan's own pushed filter); the local executor drops them from the filter's output
(:mod:`engine.exec.local.pruning`).

Only where dropping cannot change a result: every path from the filter to an output passes a
``project`` or ``collapsingaggregate`` (which write only what they name) through operators that
read records by named members only (filter, join, transform, order, limit, segment); no
expression reads the scan's record whole; the scan's ``ref`` is the only one of that name.

>>> from engine.plan import parse_plan
>>> storage = {"fs": {"type": "file"}, "queue": {"type": "queue"}}
>>> plan = parse_plan({"head": {"version": 1}, "storage": storage, "query": [
...     {"@id": 1, "op": "scan", "storageengine": "fs", "selection": {"path": "t.json"},
...      "ref": "t"},
...     {"@id": 2, "op": "filter", "input": 1, "expr": "t.note != 'x'"},
...     {"@id": 3, "op": "project", "input": 2,
...      "projections": [{"ref": "output.a", "expr": "t.a"}]},
...     {"@id": 4, "op": "store", "input": 3, "storageengine": "queue", "target": {}}]})
>>> dropped_after_filters(plan)
{'2': ('t', ('note',))}
"""

from __future__ import annotations

from collections import defaultdict

from engine.expr import field_refs
from engine.plan import LogicalPlan
from engine.plan.operators import CollapsingAggregate, Filter, Operator, Project, Scan

_SEALING = ("project", "collapsingaggregate")
"""Operators whose output holds only what they name."""
_PASSING = ("filter", "join", "transform", "order", "limit", "segment")
"""Operators that pass records on and read them by named members only."""


def dropped_after_filters(plan: LogicalPlan) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Filter id -> (scan ref, members of it to drop from the filter's output)."""
    scans: dict[str, Scan] = {}
    duplicated: set[str] = set()
    for op in plan.query:
        if isinstance(op, Scan) and op.ref:
            if op.ref in scans:
                duplicated.add(op.ref)
            scans[op.ref] = op
    readers: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    whole: set[str] = set(duplicated)
    for op in plan.query:
        for site in op.expressions():
            for ref in field_refs(site.parsed):
                head = ref.path[0]
                if head not in scans:
                    continue
                if len(ref.path) < 2 or not isinstance(ref.path[1], str):
                    whole.add(head)
                else:
                    readers[head][ref.path[1]].add(op.id)
    consumers: dict[str, list[Operator]] = defaultdict(list)
    for op in plan.query:
        for input_id in op.input_ids():
            consumers[input_id].append(op)
    sealed = _Sealed(consumers)
    found: dict[str, tuple[str, tuple[str, ...]]] = {}
    for ref, members in readers.items():
        if ref in whole:
            continue
        scan = scans[ref]
        by_filter: dict[str, list[str]] = defaultdict(list)
        for member, ops in members.items():
            others = ops - {scan.id}
            if len(others) == 1 and isinstance(plan.operator(next(iter(others))), Filter):
                by_filter[next(iter(others))].append(member)
        for filter_id, dropped in by_filter.items():
            if sealed(filter_id):
                found[filter_id] = (ref, tuple(sorted(dropped)))
    return found


class _Sealed:
    """Whether every path from an operator to an output passes a sealing operator."""

    def __init__(self, consumers: dict[str, list[Operator]]) -> None:
        self.consumers = consumers
        self.known: dict[str, bool] = {}

    def __call__(self, op_id: str) -> bool:
        if op_id not in self.known:
            self.known[op_id] = False  # a cycle (none in a valid plan) seals nothing
            readers = self.consumers.get(op_id, [])
            self.known[op_id] = bool(readers) and all(
                isinstance(r, Project | CollapsingAggregate) or (r.op in _PASSING and self(r.id))
                for r in readers
            )
        return self.known[op_id]
