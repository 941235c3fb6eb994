"""Projection pushdown of the local executor: a scan reads only the columns the plan needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import parse_plan, run_plan
from engine.exec.local.executor import scan_projections
from engine.storage.formats import parquet as parquet_format


def _plan(tail: list[dict[str, Any]], root: str = "/data") -> dict[str, Any]:
    query = [
        {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "f", "selection": {"path": "/t"}}
    ]
    for i, op in enumerate(tail, start=2):
        query.append({"@id": i, "input": i - 1, **op})
    query.append({"@id": len(query) + 1, "op": "store", "input": len(query),
                  "storageengine": "q", "target": {}})  # fmt: skip
    return {"storage": {"fs": {"type": "fs", "root": root}, "q": {"type": "queue"}}, "query": query}


PROJECT = {"op": "project", "projections": [{"ref": "output.a", "expr": "f.a"}]}
AGGREGATE = {
    "op": "collapsingaggregate",
    "within": "f.g",
    "target": "f.best",
    "carryovers": ["f.name"],
    "aggregations": [{"ref": "n", "expr": "count(1)"}],
}


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        ([{"op": "filter", "expr": "f.x > 1"}, PROJECT], {"1": ["a", "x"]}),
        ([AGGREGATE], {"1": ["best", "g", "name"]}),
        ([{"op": "filter", "expr": "f.x > 1"}], {}),  # the whole record reaches the store
        ([{"op": "transform", "transforms": [{"ref": "f.y", "expr": "1"}]}, PROJECT], {}),
        ([{"op": "project", "projections": [{"ref": "output", "expr": "f"}]}], {}),
    ],
)
def test_which_scans_are_narrowed(tail: list[dict[str, Any]], expected: dict) -> None:
    assert scan_projections(parse_plan(_plan(tail))) == expected


def test_a_narrowed_parquet_scan_reads_only_its_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "t").mkdir()
    table = pa.table({"a": [1, 2, 3], "x": [0, 2, 5], "wide": ["w" * 100] * 3})
    pq.write_table(table, tmp_path / "t" / "part.parquet")
    asked: list[Any] = []
    real = parquet_format.pq.read_table

    def spy(source: Any, *, columns: Any = None, **kwargs: Any) -> pa.Table:
        asked.append(columns)
        return real(source, columns=columns, **kwargs)

    monkeypatch.setattr(parquet_format.pq, "read_table", spy)
    plan = _plan([{"op": "filter", "expr": "f.x > 1"}, PROJECT], root=str(tmp_path))
    assert run_plan(plan).records() == [{"a": 2}, {"a": 3}]
    assert asked == [["a", "x"]]
