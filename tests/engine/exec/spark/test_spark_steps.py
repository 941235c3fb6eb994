"""Operators that change records path by path (a ``transform`` whose later transforms read what
earlier ones wrote, a ``flatten`` dropping its source), an order only top-N limits read, and
joins of related or unrelated inputs give the local executor's records on Spark."""

from __future__ import annotations

from typing import Any

import pytest

from engine.plan import parse_plan
from engine.planner.properties.decisions import top_n_orders
from engine.run import run_plan

RECORDS = [
    {"id": 1, "m": {"a": 2, "tags": ["x", "y"]}},
    {"id": 2, "m": {"a": None, "tags": []}},
    {"id": 3, "m": None},
]


def plan_of(op: dict[str, Any]) -> Any:
    return parse_plan(
        {
            "storage": {"q": {"type": "queue"}},
            "query": [
                {"@id": 1, "op": "constant", "content": RECORDS},
                {"@id": 2, "input": 1, **op},
                {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
            ],
        }
    )


TRANSFORM = {
    "op": "transform",
    "transforms": [
        {"ref": "m.b", "expr": "m.a * 10"},
        {"ref": "c", "expr": "m.b + 1"},  # reads the member the first one wrote
        {"ref": "m.a", "expr": "c * 2"},
        {"ref": "id", "expr": "concat('x', cast(id as VARCHAR))"},
    ],
}
FLATTEN = {"op": "flatten", "ref": "tag", "expr": "m.tags", "drop": True}


@pytest.mark.parametrize("op", [TRANSFORM, FLATTEN], ids=["transform", "flatten"])
def test_path_by_path_operators_give_the_local_records(op: dict[str, Any], spark: Any) -> None:
    plan = plan_of(op)
    assert (
        run_plan(plan, executor="spark", spark=spark).records()
        == run_plan(plan, executor="local").records()
    )


def test_an_order_only_top_n_limits_read_runs_as_their_top_n(spark: Any) -> None:
    """An order read only by limits with an end runs as their top-N (one sort of its input)."""
    order = {"op": "order", "orderings": [{"order": "desc", "expr": "id"}]}
    limit = {"@id": 4, "op": "limit", "input": 2, "first": 1, "last": 3}
    plan = parse_plan(
        {
            "storage": {"q": {"type": "queue"}},
            "query": [
                {"@id": 1, "op": "constant", "content": RECORDS},
                {"@id": 2, "input": 1, **order},
                limit,
                {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {}},
            ],
        }
    )
    assert top_n_orders(plan) == {"2"}
    assert top_n_orders(plan_of(order)) == set()  # a store reads it
    on_spark = run_plan(plan, executor="spark", spark=spark).records()
    assert on_spark == run_plan(plan, executor="local").records()
    assert [r["id"] for r in on_spark] == [2, 1]


def join_plan(right: dict[str, Any]) -> Any:
    """Orders joined with ``right`` (operator 2, reading the lines or the orders), the pairs
    returned in join order."""
    lines = [{"okey": 1, "n": 1}, {"okey": 2, "n": 2}, {"okey": 1, "n": 3}]
    orders = [{"key": 2, "tag": "b"}, {"key": 1, "tag": "a"}, {"key": 3, "tag": "c"}]
    return parse_plan(
        {
            "storage": {"q": {"type": "queue"}},
            "query": [
                {"@id": 1, "op": "constant", "content": [{"o": o} for o in orders]},
                {"@id": 5, "op": "constant", "content": [{"l": line} for line in lines]},
                {"@id": 2, **right},
                {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "left",
                 "conditions": [{"relationship": "==", "left": "o.key", "right": "r.okey"}]},
                {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}},
            ],
        }
    )  # fmt: skip


LINES = {"op": "project", "input": 5, "projections": [{"ref": "output.r", "expr": "l"}]}
SAME_ORDERS = {
    "op": "project",
    "input": 1,
    "projections": [{"ref": "output.r.okey", "expr": "o.key"}],
}


@pytest.mark.parametrize(
    ("right", "keys"),
    [(LINES, [2, 1, 1, 3]), (SAME_ORDERS, [2, 1, 3])],
    ids=["other input", "same input"],
)
def test_a_join_keeps_each_sides_order_whether_or_not_its_inputs_share_an_operator(
    right: dict[str, Any], keys: list[int], spark: Any
) -> None:
    """A join of inputs that share no operator upstream, and one whose sides both derive from
    one operator (orders joined with a project of the same orders), pair their records in the
    local executor's order."""
    plan = join_plan(right)
    on_spark = run_plan(plan, executor="spark", spark=spark).records()
    assert on_spark == run_plan(plan, executor="local").records()
    assert [r["o"]["key"] for r in on_spark] == keys
