"""Projection pushdown on the local executor: the planner narrows a scan, the scan reads only those columns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import parse_plan, run_plan
from engine.planner.rules.projection_pushdown import push_projections
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
        ([{"op": "filter", "expr": "f.x > 1"}, PROJECT], ["a", "x"]),
        ([AGGREGATE], ["best", "g", "name"]),
        ([{"op": "filter", "expr": "f.x > 1"}], None),  # the whole record reaches the store
        ([{"op": "transform", "transforms": [{"ref": "f.y", "expr": "1"}]}, PROJECT], ["a", "y"]),
        ([{"op": "project", "projections": [{"ref": "output", "expr": "f"}]}], None),
    ],
)
def test_which_scans_are_narrowed(tail: list[dict[str, Any]], expected: list[str] | None) -> None:
    assert push_projections(parse_plan(_plan(tail))).operator("1").projection == expected


def test_a_narrowed_parquet_scan_reads_only_its_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "t").mkdir()
    table = pa.table({"a": [1, 2, 3], "x": [0, 2, 5], "wide": ["w" * 100] * 3})
    pq.write_table(table, tmp_path / "t" / "part.parquet")
    asked: list[Any] = []
    real = parquet_format.ParquetReader.read_tables

    def spy(reader: Any, *, columns: Any = None, **kwargs: Any) -> Any:
        asked.append(columns)
        return real(reader, columns=columns, **kwargs)

    monkeypatch.setattr(parquet_format.ParquetReader, "read_tables", spy)
    plan = _plan([{"op": "filter", "expr": "f.x > 1"}, PROJECT], root=str(tmp_path))
    assert run_plan(plan).records() == [{"a": 2}, {"a": 3}]
    assert asked == [["a", "x"]]
