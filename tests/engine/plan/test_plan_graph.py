"""The LogicalPlan API: looking operators up, walking the DAG, equality and dumps."""

from __future__ import annotations

import pytest

from engine.errors import PlanError
from engine.plan import Filter, Join, LogicalPlan, Scan, Store, Union, parse_plan
from engine.plan.graph import find_cycles, topological_ids

HEAD = {"type": "APACHE_DRILL_LOGICAL", "version": 1, "generator": {"type": "manual", "info": "t"}}
DIAMOND = {
    "head": HEAD,
    "storage": {"cp": {"type": "classpath"}, "queue": {"type": "queue", "encoding": "RECORD"}},
    "query": [
        {"@id": 6, "op": "store", "input": 5, "storageengine": "queue", "target": {"number": 0}},
        {
            "@id": 1,
            "op": "scan",
            "storageengine": "cp",
            "ref": "a",
            "selection": {"path": "/a.json"},
        },
        {
            "@id": 2,
            "op": "scan",
            "storageengine": "cp",
            "ref": "b",
            "selection": {"path": "/b.json"},
        },
        {"@id": 3, "op": "filter", "input": 1, "expr": "a.x > 1"},
        {
            "@id": 4,
            "op": "join",
            "left": 3,
            "right": 2,
            "type": "left",
            "conditions": [{"relationship": "==", "left": "a.k", "right": "b.k"}],
        },
        {"@id": 5, "op": "union", "inputs": [4, 3]},
    ],
}


@pytest.fixture
def plan() -> LogicalPlan:
    return parse_plan(DIAMOND, source_name="diamond.json")


def test_topological_order_puts_inputs_first_and_keeps_document_order(plan: LogicalPlan) -> None:
    assert [op.id for op in plan.topological_order()] == ["1", "2", "3", "4", "5", "6"]


def test_inputs_and_consumers(plan: LogicalPlan) -> None:
    join = plan.operator(4)
    assert isinstance(join, Join)
    assert [op.id for op in plan.inputs_of(join)] == ["3", "2"]
    assert [op.id for op in plan.inputs_of("5")] == ["4", "3"]
    assert [op.id for op in plan.consumers_of(3)] == ["4", "5"]
    assert plan.consumers_of(6) == []


def test_ancestors_are_the_operator_and_all_it_reads_from(plan: LogicalPlan) -> None:
    assert plan.ancestors(6) == {"1", "2", "3", "4", "5", "6"}
    assert plan.ancestors("3") == {"1", "3"}
    assert plan.ancestors(plan.operator(2)) == {"2"}


def test_sinks_and_sources(plan: LogicalPlan) -> None:
    assert [op.id for op in plan.sinks()] == ["6"]
    assert all(isinstance(op, Store) for op in plan.sinks())
    assert [op.id for op in plan.sources()] == ["1", "2"]
    assert all(isinstance(op, Scan) for op in plan.sources())
    assert plan.warnings == []


def test_unknown_operator_id_is_a_plan_error(plan: LogicalPlan) -> None:
    with pytest.raises(
        PlanError, match=r"diamond.json: the plan has no operator '9' \(ids: 6, 1, 2, 3, 4, 5\)"
    ):
        plan.operator(9)


def test_locations_point_into_the_source(plan: LogicalPlan) -> None:
    assert plan.path_of(4) == "$.query[4]"
    assert plan.location_of(4).of("conditions", 0, "left") == "$.query[4].conditions[0].left"


def test_storage_keeps_unknown_settings(plan: LogicalPlan) -> None:
    assert plan.storage["queue"].extra() == {"encoding": "RECORD"}
    assert plan.to_dict()["storage"]["queue"] == {"type": "queue", "encoding": "RECORD"}


def test_equality_ignores_the_source_but_not_the_operators(plan: LogicalPlan) -> None:
    assert parse_plan(DIAMOND) == plan
    changed = {
        **DIAMOND,
        "query": [
            *DIAMOND["query"][:3],
            {**DIAMOND["query"][3], "expr": "a.x > 2"},
            *DIAMOND["query"][4:],
        ],
    }
    assert parse_plan(changed) != plan


def test_expression_sites_are_listed_with_their_context(plan: LogicalPlan) -> None:
    join = plan.operator(4)
    sites = join.expressions()
    assert [(s.path, s.text, s.context) for s in sites] == [
        ("conditions[0].left", "a.k", "scalar"),
        ("conditions[0].right", "b.k", "scalar"),
    ]
    assert str(sites[0].parsed) == "a.k"
    assert plan.location_of(join).below(sites[1].path) == "$.query[4].conditions[0].right"


def test_operators_are_immutable(plan: LogicalPlan) -> None:
    with pytest.raises(ValueError, match="frozen"):
        plan.operator(3).expr = "x"  # type: ignore[misc]


def test_models_can_be_built_directly() -> None:
    built = LogicalPlan(
        storage={},
        query=[
            Scan(id="1", storage_engine="cp", ref="a"),
            Filter(id="2", input="1", expr="a.x > 0"),
            Union(id="3", inputs=["2", "1"]),
        ],
    )
    assert [op.id for op in built.topological_order()] == ["1", "2", "3"]
    assert built.query[0].to_dict() == {"@id": "1", "op": "scan", "storageengine": "cp", "ref": "a"}


def test_a_cycle_in_a_hand_built_plan_is_a_plan_error() -> None:
    built = LogicalPlan(
        query=[Filter(id="1", input="2", expr="a"), Filter(id="2", input="1", expr="b")]
    )
    with pytest.raises(PlanError, match="do not form a DAG"):
        built.topological_order()


def test_graph_helpers() -> None:
    assert topological_ids({"b": ["a"], "a": [], "c": ["a", "b"]}) == ["a", "b", "c"]
    assert find_cycles({"1": [], "2": ["3"], "3": ["4"], "4": ["2"], "5": ["5"]}) == [
        ["2", "3", "4"],
        ["5"],
    ]
    assert find_cycles({str(i): [str(i - 1)] if i else [] for i in range(3000)}) == []
