"""A plan shape the order tests share: two parquet scans joined, segmented, collapsed, ordered."""

from __future__ import annotations

from typing import Any


def grouped_join_query(
    left: str,
    right: str,
    condition: tuple[str, str],
    *,
    how: str,
    keys: tuple[str, ...],
    aggregations: list[dict[str, str]],
    order_by: str,
) -> list[dict[str, Any]]:
    """Scans ``left`` (1) and ``right`` (2) of storage engine ``fs`` (parquet, each under its
    ref's name) -> join on ``condition`` (left == right) -> segment by ``keys`` -> collapse
    carrying the keys -> order by ``order_by`` descending (ties: the groups' first appearance)
    -> store ``out``."""
    scans = [
        {
            "@id": i,
            "op": "scan",
            "storageengine": "fs",
            "ref": ref,
            "selection": {"path": ref, "format": "parquet"},
        }
        for i, ref in ((1, left), (2, right))
    ]
    return [
        *scans,
        {
            "@id": 3,
            "op": "join",
            "left": 1,
            "right": 2,
            "type": how,
            "conditions": [{"relationship": "==", "left": condition[0], "right": condition[1]}],
        },
        {"@id": 4, "op": "segment", "input": 3, "ref": "grp", "exprs": list(keys)},
        {
            "@id": 5,
            "op": "collapsingaggregate",
            "input": 4,
            "within": "grp",
            "carryovers": list(keys),
            "aggregations": aggregations,
        },
        {"@id": 6, "op": "order", "input": 5, "orderings": [{"order": "desc", "expr": order_by}]},
        {"@id": 7, "op": "store", "input": 6, "storageengine": "fs", "target": {"path": "out"}},
    ]
