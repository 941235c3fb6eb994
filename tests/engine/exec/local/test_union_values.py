"""UNION columns (values of several kinds) through the local operators."""

from __future__ import annotations

from typing import Any

import pytest

from engine import run_plan
from engine.errors import ExecutionError

RECORDS = [
    {"id": 1, "tags": ["x", "y"]},
    {"id": 2, "tags": "solo"},
    {"id": 3, "tags": {"b": 1, "a": 2}},
    {"id": 4, "tags": 7},
    {"id": 5, "tags": {"a": 2, "b": 1}},
]


def run(*ops: dict[str, Any]) -> list[dict[str, Any]]:
    query = [{"@id": 1, "op": "constant", "content": RECORDS}]
    for i, op in enumerate(ops, start=2):
        query.append({"@id": i, "input": i - 1, **op})
    query.append(
        {"@id": 99, "op": "store", "input": len(query), "storageengine": "q", "target": {}}
    )
    return run_plan({"storage": {"q": {"type": "queue"}}, "query": query}).records()


def test_comparisons_take_the_values_of_the_other_operands_kind() -> None:
    assert [r["id"] for r in run({"op": "filter", "expr": 'tags == "solo"'})] == [2]
    assert [r["id"] for r in run({"op": "filter", "expr": "tags > 5"})] == [4]


def test_segment_groups_equal_values_whatever_their_key_order() -> None:
    rows = run({"op": "segment", "ref": "seg", "exprs": ["tags"]})
    assert [(r["id"], r["seg"]) for r in rows] == [(1, 1), (2, 2), (3, 3), (5, 3), (4, 4)]


def test_order_needs_a_typed_expression_of_a_union() -> None:
    with pytest.raises(ExecutionError, match="cannot order by a UNION value") as raised:
        run({"op": "order", "orderings": [{"expr": "tags"}]})
    assert "cast(x as VARCHAR)" in (raised.value.hint or "")
    rows = run({"op": "order", "orderings": [{"expr": "cast(tags as VARCHAR)"}]})
    assert [r["id"] for r in rows] == [4, 1, 2, 3, 5]  # "7" < '["x"...' < "solo" < '{"a"...'
