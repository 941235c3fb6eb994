"""The semi-join rule: a semi (anti) join over a join moves onto the side its key reads, only
where its filter tests nothing else and the join below has no other reader; the records are the
plan's as written on both executors."""

from __future__ import annotations

from typing import Any

import pytest

from engine.plan import LogicalPlan, parse_plan
from engine.planner.properties.semi_joins import semi_joins
from engine.planner.rules.semi_join_pushdown import push_semi_joins
from engine.run import run_plan

ORDERS = [{"o": {"k": k, "c": c}} for k, c in [(1, 7), (2, 7), (3, 8), (4, None), (None, 7)]]
CUSTOMERS = [{"c": {"k": k, "n": n}} for k, n in [(7, "a"), (8, "b"), (7, "c")]]


def semi_plan(
    test: str = "isnotnull($s.m)",
    key: str = "o.k",
    second_reader: bool = False,
    customers: str | None = None,
) -> LogicalPlan:
    """Orders joined with customers, then a semi (anti) join of the distinct keys 1, 3 and 4
    on ``key``, its filter testing ``test``, the result's ``o`` and ``c`` stored; ``customers``:
    a test the customers pass first."""
    query: list[dict[str, Any]] = [
        {"@id": 1, "op": "constant", "content": ORDERS},
        {"@id": 2, "op": "constant", "content": CUSTOMERS},
        {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "inner",
         "conditions": [{"relationship": "==", "left": "o.c", "right": "c.k"}]},
        {"@id": 4, "op": "constant", "content": [{"k": 1}, {"k": 3}, {"k": 4}, {"k": 3}]},
        {"@id": 5, "op": "segment", "input": 4, "ref": "$seg", "exprs": ["k"]},
        {"@id": 6, "op": "collapsingaggregate", "input": 5, "within": "$seg",
         "carryovers": ["k"], "aggregations": [{"ref": "$a", "expr": "count(1)"}]},
        {"@id": 7, "op": "project", "input": 6, "projections": [
            {"ref": "output.$s.k", "expr": "k"}, {"ref": "output.$s.m", "expr": "$a"}]},
        {"@id": 8, "op": "join", "left": 3, "right": 7, "type": "left",
         "conditions": [{"relationship": "==", "left": key, "right": "$s.k"}]},
        {"@id": 9, "op": "filter", "input": 8, "expr": test},
        {"@id": 10, "op": "project", "input": 9, "projections": [
            {"ref": "output.o", "expr": "o"}, {"ref": "output.c", "expr": "c"}]},
        {"@id": 11, "op": "store", "input": 10, "storageengine": "q", "target": {}},
    ]  # fmt: skip
    if customers is not None:
        query.append({"@id": 13, "op": "filter", "input": 2, "expr": customers})
        query[2]["right"] = 13
    if second_reader:
        query.append({"@id": 12, "op": "store", "input": 3, "storageengine": "q", "target": {}})
    return parse_plan({"storage": {"q": {"type": "queue"}}, "query": query})


def reads(plan: LogicalPlan) -> str:
    """The input of join 8 (the semi join) once the rule ran."""
    return push_semi_joins(plan).operator("8").input_ids()[0]


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        (semi_plan(), "1"),  # onto the orders
        (semi_plan("!isnotnull($s.m)"), "1"),  # an anti join too
        (semi_plan(key="c.k"), "2"),  # onto the customers, the join's right side
        (semi_plan("isnotnull($s.m) && c.n != 'b'"), "3"),  # its filter tests more
        (semi_plan(second_reader=True), "3"),  # the join below is read by a store as well
        (semi_plan(key="o.k + c.k"), "3"),  # its key reads both sides
        (semi_plan(customers="c.n != 'b'"), "3"),  # the join below drops orders itself
        (semi_plan(key="c.k", customers="c.n != 'b'"), "13"),  # onto the filtered side
    ],
)
def test_the_semi_join_moves_only_where_it_filters_one_side(
    plan: LogicalPlan, expected: str
) -> None:
    assert reads(plan) == expected


def test_moved_it_is_still_a_semi_join_and_the_join_below_reads_its_filter() -> None:
    pushed = push_semi_joins(semi_plan())
    assert semi_joins(pushed)["8"].kind == "semi"
    assert pushed.operator("3").input_ids() == ["9", "2"]
    assert pushed.operator("10").input_ids() == ["3"]


EXPECTED = {
    "isnotnull($s.m)": [
        {"o": {"k": 1, "c": 7}, "c": {"k": 7, "n": "a"}},
        {"o": {"k": 1, "c": 7}, "c": {"k": 7, "n": "c"}},
        {"o": {"k": 3, "c": 8}, "c": {"k": 8, "n": "b"}},
    ],
    "!isnotnull($s.m)": [
        {"o": {"k": 2, "c": 7}, "c": {"k": 7, "n": "a"}},
        {"o": {"k": 2, "c": 7}, "c": {"k": 7, "n": "c"}},
        {"o": {"k": None, "c": 7}, "c": {"k": 7, "n": "a"}},
        {"o": {"k": None, "c": 7}, "c": {"k": 7, "n": "c"}},
    ],
}


@pytest.mark.parametrize("test", sorted(EXPECTED))
def test_records_are_the_plans_as_written(test: str) -> None:
    plan = semi_plan(test)
    for optimize in (True, False):
        assert run_plan(plan, optimize=optimize).records() == EXPECTED[test]


@pytest.mark.spark
@pytest.mark.parametrize("test", sorted(EXPECTED))
def test_spark_records_are_the_plans_as_written(test: str, spark: Any) -> None:
    records = run_plan(semi_plan(test), executor="spark", spark=spark).records()
    assert sorted(map(str, records)) == sorted(map(str, EXPECTED[test]))
