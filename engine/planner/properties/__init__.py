"""What the planner knows of each operator of a planned plan, for an executor to read: one frozen
:class:`OperatorProperties` per operator id, computed by ordered rules over the whole plan
(:mod:`~engine.planner.properties.order_needs`, :mod:`~engine.planner.properties.decisions`).

Each property is a function of the plan, not of data: an executor may find, reading the data,
that it cannot use one (a scan whose files' values tie after all), never that one is wrong.

>>> from engine.plan import parse_plan
>>> plan = parse_plan({"storage": {"q": {"type": "queue"}}, "query": [
...     {"@id": 1, "op": "constant", "content": [{"x": 2}, {"x": 1}]},
...     {"@id": 2, "op": "order", "input": 1, "orderings": [{"expr": "x"}]},
...     {"@id": 3, "op": "limit", "input": 2, "first": 0, "last": 1},
...     {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}}]})
>>> props = plan_properties(plan, sinks={"4"})
>>> props["2"].top_n, props["1"].cut_by_limit, props["3"].unordered
(True, False, False)
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from types import SimpleNamespace

from engine.plan import LogicalPlan
from engine.planner.properties.decisions import (
    frame_collapses,
    fused_operators,
    limit_inputs,
    one_reader,
    one_task_sorts,
    paired_scans,
    read_through,
    related_joins,
    store_inputs,
    store_read_limits,
    store_read_orders,
    store_sorted_orders,
    top_n_orders,
    unnumbered_segments,
)
from engine.planner.properties.order_needs import (
    scans_ordered_by_keys,
    tie_free_orders,
    total_orders,
    unordered_outputs,
)
from engine.planner.properties.scalar_joins import scalar_joins
from engine.planner.properties.semi_joins import SemiJoin, semi_joins, skipped_operators
from engine.planner.statistics import Statistics


@dataclass(frozen=True)
class OperatorProperties:
    """What the planner decided of one operator (all False or None: nothing special)."""

    unordered: bool = False
    """Nothing observes the order of its records (:func:`~.order_needs.unordered_outputs`):
    its sequence may be anything."""

    total_order: bool = False
    """An order under which no two records tie (:func:`~.order_needs.total_orders`): it needs
    no tie-breaker."""

    unrelated_inputs: bool = False
    """A join whose inputs read no common operator (:func:`~.decisions.related_joins`)."""

    tie_free_order: str | None = None
    """A scan: the order reading it whose ties are equal records, so its own order breaks none
    (:func:`~.order_needs.tie_free_orders`)."""

    ordered_by_keys: frozenset[str] | None = None
    """A scan: the keys of the one order reading it (:func:`~.order_needs.scans_ordered_by_keys`)."""

    fused: bool = False
    """A segment or windowframe whose readers group or frame its input themselves: its own
    output is never built (:func:`~.decisions.fused_operators`)."""

    unnumbered: bool = False
    """A segment whose group numbers nothing reads (:func:`~.decisions.unnumbered_segments`)."""

    frame_collapsed_by: str | None = None
    """A fused windowframe: the aggregate giving one record per record of its input
    (:func:`~.decisions.frame_collapses`), which counts for it."""

    store_input: bool = False
    """A project whose one reader is a store (:func:`~.decisions.store_inputs`)."""

    top_n: bool = False
    """An order only limits with an end read: each runs with it as one top-N
    (:func:`~.decisions.top_n_orders`)."""

    store_sorted: bool = False
    """An order whose store sorts by its project's copies of the keys
    (:func:`~.decisions.store_sorted_orders`)."""

    store_read_limit: bool = False
    """A limit whose one reader is a project a store reads (:func:`~.decisions.store_read_limits`)."""

    store_read_order: bool = False
    """An order whose one reader is such a limit (:func:`~.decisions.store_read_orders`)."""

    one_reader: bool = False
    """Exactly one operator reads it (:func:`~.decisions.one_reader`)."""

    cut_by_limit: bool = False
    """A limit reads it and may stop it early (:func:`~.decisions.limit_inputs`)."""

    read_by_limit: bool = False
    """A limit reads it."""

    read_through: bool = False
    """A scan leaving its records to its reader as columns of its own
    (:func:`~.decisions.read_through`)."""

    paired: bool = False
    """A scan a join or a union reads, through any operators (:func:`~.decisions.paired_scans`)."""

    one_task_sort: bool = False
    """A store that sorts its records in one task: the scans above it report sizes within the
    run's bound (:func:`~.decisions.one_task_sorts`)."""

    scalar_side: str | None = None
    """A join's input (``"left"`` or ``"right"``) whose one record is a value for each record of
    the other (:func:`~.scalar_joins.scalar_joins`: a scalar subquery)."""

    semi_join: SemiJoin | None = None
    """A join run as a semi or anti join (:func:`~.semi_joins.semi_joins`): its output is its
    left input's records that have (have no) match."""

    match_tested: bool = False
    """A filter whose test of a match its input, a semi or anti join, applies."""

    rest_test: str | None = None
    """Such a filter's other tests, all it tests (None: none, it keeps every record)."""

    skipped_by: str | None = None
    """The semi or anti join that reads the records below this operator (a project, aggregate
    or segment making a subquery's distinct keys): the operator is never run."""


PlanProperties = Mapping[str, OperatorProperties]
"""Each operator id of a plan to its properties."""


def plan_properties(
    plan: LogicalPlan,
    sinks: Collection[str],
    stats: Statistics | None = None,
    one_task_sort_bytes: int = -1,
    *,
    semi: bool = True,
) -> dict[str, OperatorProperties]:
    """The properties of each operator of ``plan`` (a planned plan), the rules run in the order
    they build on each other; ``sinks``: the stores whose records are kept in order in memory
    (a queue, the console); ``stats`` and ``one_task_sort_bytes``: the scans' sizes and the
    bytes a store may sort in one task (-1: none does); ``semi``: whether joins may run as semi
    or anti joins (:data:`~.semi_joins.SEMI_JOIN_PARAM`)."""
    order = plan.topological_order()
    fused = fused_operators(plan)
    sets = {
        "unordered": unordered_outputs(order, set(sinks)),
        "total_order": total_orders(order),
        "unrelated_inputs": {op.id for op in order if op.op == "join"} - related_joins(order),
        "fused": fused,
        "unnumbered": unnumbered_segments(plan, set(fused)),
        "store_input": store_inputs(plan),
        "top_n": top_n_orders(plan),
        "store_sorted": store_sorted_orders(plan),
        "store_read_limit": store_read_limits(plan),
        "one_reader": one_reader(plan),
        "store_read_order": store_read_orders(plan),
        "cut_by_limit": limit_inputs(order),
        "read_by_limit": {op.input for op in order if op.op == "limit" and op.input},
        "paired": paired_scans(plan),
        "one_task_sort": one_task_sorts(
            [op.id for op in order if op.op == "store"],
            {op.id: _scans_above(plan, op.id) for op in order if op.op == "store"},
            stats or Statistics(),
            one_task_sort_bytes,
        ),
    }
    decided = SimpleNamespace(
        store_read_orders=sets["store_read_order"],
        top_n_orders=sets["top_n"],
        store_sorted=sets["store_sorted"],
        unordered=sets["unordered"],
        read_by_limit=sets["read_by_limit"],
        unrelated=sets["unrelated_inputs"],
        fused=sets["fused"],
    )
    sets["read_through"] = read_through(plan, decided)
    values: dict[str, dict[str, object]] = {
        "tie_free_order": {scan: order_id for order_id, scan in tie_free_orders(order).items()},
        "ordered_by_keys": dict(scans_ordered_by_keys(order)),
        "frame_collapsed_by": frame_collapses(plan, set(fused)),
    }
    values["scalar_side"] = scalar_joins(plan)
    joins = semi_joins(plan) if semi else {}
    values["semi_join"] = dict(joins)
    values["match_tested"] = {s.test_of: True for s in joins.values()}
    values["rest_test"] = {s.test_of: s.rest for s in joins.values() if s.rest is not None}
    values["skipped_by"] = skipped_operators(joins)
    return {
        op.id: OperatorProperties(
            **{name: op.id in ids for name, ids in sets.items()},
            **{name: found[op.id] for name, found in values.items() if op.id in found},
        )
        for op in order
    }


def _scans_above(plan: LogicalPlan, op_id: str) -> set[str]:
    """The ids of the scans ``op_id`` reads from, through any operators."""
    return {a for a in plan.ancestors(op_id) if plan.operator(a).op == "scan"}


def ids_where(
    properties: PlanProperties, test: Callable[[OperatorProperties], bool]
) -> frozenset[str]:
    """The ids of the operators whose properties pass ``test``."""
    return frozenset(op_id for op_id, props in properties.items() if test(props))
