"""Members only a filter reads are not carried past it; results are the same either way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine import run_plan
from engine.exec.local.executor import PRUNE_PARAM

ORDERS = [
    {"id": 1, "cust": 1, "note": "special requests", "price": 10},
    {"id": 2, "cust": 1, "note": "plain", "price": 20},
    {"id": 3, "cust": 2, "note": None, "price": 30},
    {"id": 4, "cust": 3, "note": "plain too", "price": 40},
]
CUSTOMERS = [{"key": 1, "name": "a"}, {"key": 2, "name": "b"}, {"key": 3, "name": "c"}]


def plan_of(root: Path, *tail: dict[str, Any]) -> dict[str, Any]:
    for name, rows in (("orders", ORDERS), ("customers", CUSTOMERS)):
        (root / f"{name}.json").write_text("\n".join(json.dumps(r) for r in rows))
    query = [
        {
            "@id": 1,
            "op": "scan",
            "storageengine": "fs",
            "selection": {"path": "orders.json"},
            "ref": "o",
        },
        {"@id": 2, "op": "filter", "input": 1, "expr": "o.note != 'special requests'"},
        {
            "@id": 3,
            "op": "scan",
            "storageengine": "fs",
            "selection": {"path": "customers.json"},
            "ref": "c",
        },
        {
            "@id": 4,
            "op": "join",
            "left": 3,
            "right": 2,
            "type": "left",
            "conditions": [{"relationship": "==", "left": "c.key", "right": "o.cust"}],
        },
        *tail,
    ]
    return {
        "storage": {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}},
        "query": query,
    }


def store(input_id: int) -> dict[str, Any]:
    return {"@id": 9, "op": "store", "input": input_id, "storageengine": "q", "target": {}}


@pytest.mark.parametrize("prune", [True, False])
def test_a_member_only_the_filter_reads_does_not_change_the_result(
    tmp_path: Path, prune: bool
) -> None:
    plan = plan_of(
        tmp_path,
        {
            "@id": 5,
            "op": "project",
            "input": 4,
            "projections": [
                {"ref": "output.name", "expr": "c.name"},
                {"ref": "output.price", "expr": "o.price"},
            ],
        },
        store(5),
    )
    records = run_plan(plan, executor="local", params={PRUNE_PARAM: prune}).records()
    assert records == [
        {"name": "a", "price": 20},
        {"name": "b", "price": None},  # a null note is not kept by the filter
        {"name": "c", "price": 40},
    ]


def test_a_record_stored_whole_keeps_the_member_the_filter_read(tmp_path: Path) -> None:
    records = run_plan(plan_of(tmp_path, store(4)), executor="local").records()
    assert [r["o"] and r["o"]["note"] for r in records] == ["plain", None, "plain too"]
