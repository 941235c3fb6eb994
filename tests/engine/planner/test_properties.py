"""The planner's per-operator properties (engine.planner.properties): public planner output an
executor reads, one frozen record per operator of the planned plan."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from engine.plan import parse_plan
from engine.planner import optimize
from engine.planner.properties import OperatorProperties, ids_where, plan_properties

STORAGE = {"fs": {"type": "fs", "root": "/data"}, "q": {"type": "queue"}}


def plan_of(*ops: dict[str, Any]) -> Any:
    return parse_plan({"storage": STORAGE, "query": list(ops)})


def scan(op_id: int, ref: str) -> dict[str, Any]:
    return {"@id": op_id, "op": "scan", "storageengine": "fs", "ref": ref,
            "selection": {"path": ref}}  # fmt: skip


def queue(op_id: int, input_id: int) -> dict[str, Any]:
    return {"@id": op_id, "op": "store", "input": input_id, "storageengine": "q", "target": {}}


def test_every_operator_has_frozen_properties() -> None:
    plan = plan_of(scan(1, "t"), {"@id": 2, "op": "filter", "input": 1, "expr": "t.x > 1"},
                   queue(3, 2))  # fmt: skip
    props = plan_properties(plan, sinks={"3"})
    assert set(props) == {"1", "2", "3"}
    assert all(isinstance(p, OperatorProperties) for p in props.values())
    with pytest.raises(dataclasses.FrozenInstanceError):
        props["1"].fused = True  # type: ignore[misc]


def test_a_file_store_without_an_order_observes_no_order() -> None:
    plan = plan_of(
        scan(1, "t"),
        {"@id": 2, "op": "filter", "input": 1, "expr": "t.x > 1"},
        {"@id": 3, "op": "store", "input": 2, "storageengine": "fs", "target": {"path": "o"}},
    )
    assert ids_where(plan_properties(plan, sinks=()), lambda p: p.unordered) == {"1", "2", "3"}
    # A queue returns its records in order: everything below it is ordered (nothing reads it).
    ordered = plan_of(scan(1, "t"), {"@id": 2, "op": "filter", "input": 1, "expr": "t.x > 1"},
                      queue(3, 2))  # fmt: skip
    assert ids_where(plan_properties(ordered, sinks={"3"}), lambda p: p.unordered) == {"3"}


def test_an_order_a_limit_reads_is_a_top_n_and_a_project_a_store_reads_is_its_input() -> None:
    plan = plan_of(
        scan(1, "t"),
        {"@id": 2, "op": "order", "input": 1, "orderings": [{"expr": "t.x"}]},
        {"@id": 3, "op": "limit", "input": 2, "first": 0, "last": 5},
        {"@id": 4, "op": "project", "input": 3, "projections": [{"ref": "output.x", "expr": "t.x"}]},
        queue(5, 4),
    )  # fmt: skip
    props = plan_properties(plan, sinks={"5"})
    assert props["2"].top_n and props["3"].store_read_limit and props["4"].store_input
    assert props["2"].store_read_order and props["2"].one_reader
    assert not props["1"].cut_by_limit  # the top-N reads every record of the order's input
    assert props["2"].read_by_limit and props["1"].read_through


def test_a_segment_its_aggregate_groups_by_itself_is_fused() -> None:
    plan = plan_of(
        scan(1, "t"),
        {"@id": 2, "op": "segment", "input": 1, "ref": "g", "exprs": ["t.k"]},
        {"@id": 3, "op": "collapsingaggregate", "input": 2, "within": "g", "carryovers": ["t.k"],
         "aggregations": [{"ref": "n", "expr": "count(1)"}]},
        queue(4, 3),
    )  # fmt: skip
    props = plan_properties(plan, sinks={"4"})
    assert props["2"].fused and not props["3"].fused


def test_a_join_of_two_scans_has_unrelated_inputs_and_paired_scans() -> None:
    plan = optimize(
        plan_of(
            scan(1, "a"),
            scan(2, "b"),
            {
                "@id": 3,
                "op": "join",
                "left": 1,
                "right": 2,
                "type": "inner",
                "conditions": [{"relationship": "==", "left": "a.k", "right": "b.k"}],
            },
            queue(4, 3),
        )
    )
    props = plan_properties(plan, sinks={"4"})
    assert props["3"].unrelated_inputs
    assert props["1"].paired and props["2"].paired


def _scalar_plan(right: list[dict[str, Any]], join: dict[str, Any]) -> Any:
    return plan_of(scan(1, "t"), scan(2, "u"), *right,
                   {"@id": 9, "op": "join", "left": 1, "right": 8, **join}, queue(10, 9))  # fmt: skip


AVG = {"@id": 7, "op": "collapsingaggregate", "input": 2,
       "aggregations": [{"ref": "a", "expr": "avg(u.y)"}]}  # fmt: skip
AS_S = {"@id": 8, "op": "project", "input": 7, "projections": [{"ref": "output.s", "expr": "a"}]}


@pytest.mark.parametrize(
    ("right", "join", "side"),
    [
        ([AVG, AS_S], {"type": "inner"}, "right"),  # a global aggregate under a project
        ([AVG, AS_S], {"type": "left"}, "right"),  # its one record always matches
        ([AVG, AS_S], {"type": "outer"}, None),  # no left record: the right one alone
        ([{"@id": 8, "op": "constant", "content": [{"s": 1}]}], {}, "right"),
        ([{"@id": 8, "op": "constant", "content": [{"s": 1}, {"s": 2}]}], {}, None),
        ([{**AVG, "within": "u.g"}, AS_S], {}, None),  # one record per segment
        ([{**AVG, "target": "u.ok"}, AS_S], {}, None),  # no record where no target holds
        ([AVG, {"@id": 8, "op": "filter", "input": 7, "expr": "a > 1"}], {}, None),  # 0 or 1
        ([AVG, AS_S], {"conditions": [{"relationship": "==", "left": "t.x", "right": "s"}]}, None),
    ],
)
def test_a_join_to_one_record_with_no_conditions_is_a_scalar_join(
    right: list[dict[str, Any]], join: dict[str, Any], side: str | None
) -> None:
    props = plan_properties(_scalar_plan(right, join), sinks={"10"})
    assert props["9"].scalar_side == side


@pytest.mark.parametrize(("join_type", "side"), [("inner", "left"), ("left", None)])
def test_one_record_on_the_left_is_scalar_only_in_an_inner_join(
    join_type: str, side: str | None
) -> None:
    """A left join keeps its one left record where the right side gives none."""
    plan = plan_of(scan(1, "t"), scan(2, "u"), AVG, AS_S,
                   {"@id": 9, "op": "join", "left": 8, "right": 1, "type": join_type},
                   queue(10, 9))  # fmt: skip
    assert plan_properties(plan, sinks={"10"})["9"].scalar_side == side
