"""The local executor's per-operator row counts in ``RunResult.metrics`` (as Spark's observe)."""

from __future__ import annotations

from typing import Any

from engine import run_plan

RECORDS = [{"g": 1, "x": 5}, {"g": 2, "x": 1}, {"g": 1, "x": 7}, {"g": None, "x": 3}]


def plan_of(*ops: dict[str, Any]) -> dict[str, Any]:
    return {"storage": {"q": {"type": "queue"}}, "query": list(ops)}


def rows(metrics: dict[str, dict[str, Any]]) -> dict[str, int]:
    return {op_id: counters["rows"] for op_id, counters in metrics.items()}


def test_every_operator_counts_the_rows_it_passed_on_and_a_fan_out_counts_once() -> None:
    plan = plan_of(
        {"@id": 1, "op": "constant", "content": RECORDS},
        {"@id": 2, "op": "filter", "input": 1, "expr": "x > 2"},
        {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {"number": 0}},
        {"@id": 4, "op": "order", "input": 2, "orderings": [{"order": "desc", "expr": "x"}]},
        {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {"number": 1}},
    )
    result = run_plan(plan, executor="local")
    assert rows(result.metrics) == {"1": 4, "2": 3, "3": 3, "4": 3, "5": 3}


def test_a_limit_and_the_operators_below_it_count_what_flowed() -> None:
    plan = plan_of(
        {"@id": 1, "op": "constant", "content": RECORDS},
        {"@id": 2, "op": "filter", "input": 1, "expr": "x > 2"},
        {"@id": 3, "op": "transform", "input": 2, "transforms": [{"ref": "y", "expr": "x * 2"}]},
        {"@id": 4, "op": "limit", "input": 3, "first": 0, "last": 2},
        {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {"number": 0}},
    )
    result = run_plan(plan, executor="local")
    assert result.records() == [{"g": 1, "x": 5, "y": 10}, {"g": 1, "x": 7, "y": 14}]
    # The planner moves the limit below the transform, which then sees only the limit's rows.
    assert rows(result.metrics) == {"1": 4, "2": 3, "4": 2, "3": 2, "5": 2}


def test_a_segment_fused_into_its_aggregate_counts_its_input() -> None:
    plan = plan_of(
        {"@id": 1, "op": "constant", "content": RECORDS},
        {"@id": 2, "op": "segment", "input": 1, "ref": "seg", "exprs": ["g"]},
        {
            "@id": 3,
            "op": "collapsingaggregate",
            "input": 2,
            "within": "seg",
            "carryovers": ["g"],
            "aggregations": [{"ref": "n", "expr": "count(x)"}],
        },
        {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {"number": 0}},
    )
    result = run_plan(plan, executor="local")
    assert len(result.records()) == 3
    assert rows(result.metrics) == {"1": 4, "2": 4, "3": 3, "4": 3}
