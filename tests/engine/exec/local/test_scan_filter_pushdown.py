"""A scan's pushed filter runs in the parquet read where that is exact (row groups pruned by
their statistics, rows by the filter's mask), after it otherwise;
a filter whose every conjunct the scan applies is not run a second time, and one whose scan
applies some of its conjuncts tests only the others."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from engine import parse_plan, run_plan
from engine.exec.local.arrow_filter import ArrowFilter, arrow_filter
from engine.exec.local.executor import LocalExecutor
from engine.exec.local.registry import ExecContext
from engine.exec.local.sources import ScanOperator
from engine.expr import parse_expression, to_string
from engine.planner import Statistics, optimize
from engine.run import build_engines
from engine.scan.framework import FileScan
from engine.storage.engines import create_engine
from engine.storage.formats import parquet as parquet_format


def _plan(root: Path, expr: str, *, fmt: str | None = None) -> dict[str, Any]:
    selection: dict[str, Any] = {"path": "/t", **({"format": fmt} if fmt else {})}
    return {
        "storage": {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}},
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "f", "selection": selection},
            {"@id": 2, "op": "filter", "input": 1, "expr": expr},
            {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
        ],
    }


def _write(root: Path, tables: list[pa.Table]) -> None:
    (root / "t").mkdir(exist_ok=True)
    for i, table in enumerate(tables):
        pq.write_table(table, root / "t" / f"part-{i}.parquet", row_group_size=2)


@pytest.fixture
def filters(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The ``prune`` Expression every parquet read was given (None: every row group read)."""
    asked: list[Any] = []
    real = parquet_format.ParquetReader.read_tables

    def spy(reader: Any, **kwargs: Any) -> Any:
        asked.append(kwargs.get("prune"))
        return real(reader, **kwargs)

    monkeypatch.setattr(parquet_format.ParquetReader, "read_tables", spy)
    return asked


TABLES = [
    pa.table({"x": [1, 5, None, 7], "s": ["a", "b", "c", None], "d": [1.0, math.nan, 2.0, 3.0]}),
    pa.table({"x": [9, 0], "s": ["b", "b"], "d": [math.nan, 0.5]}),
]


@pytest.mark.parametrize(
    ("expr", "pushed_into_read"),
    [
        ("f.x > 1 && f.s != 'a'", True),
        ("f.x > 1 || f.s == 'c'", True),  # a disjunction of comparisons, tested in the read
        ("f.d != 1", False),  # a float !=: filtered after the read
        ("f.d > 0.7 && f.x < 9", True),
        ("f.x > 100", True),  # nothing left
    ],
)
def test_pushed_filters_give_the_records_of_the_unoptimized_plan(
    tmp_path: Path, filters: list[Any], expr: str, pushed_into_read: bool
) -> None:
    _write(tmp_path, TABLES)
    plain = run_plan(_plan(tmp_path, expr), optimize=False)
    filters.clear()
    pushed = run_plan(_plan(tmp_path, expr))
    assert repr(pushed.records()) == repr(plain.records())  # repr: NaN equals NaN
    assert pushed.stores[0].schema == plain.stores[0].schema
    assert all(isinstance(f, pc.Expression) for f in filters) == pushed_into_read
    assert len(filters) == 2


def test_a_column_the_tracker_converts_is_filtered_after_the_read(tmp_path: Path) -> None:
    # The first file makes `x` a DOUBLE: the second file's BIGINT values are converted, so the
    # filter must see the converted values, not the file's.
    _write(tmp_path, [pa.table({"x": [1.5, 2.5]}), pa.table({"x": [3, 1]})])
    seen: list[pa.Schema] = []

    def row_filter(schema: pa.Schema) -> ArrowFilter | None:
        seen.append(schema)
        return (
            arrow_filter(parse_expression("x > 2"), schema, None) if "x" in schema.names else None
        )

    scan = FileScan(_engine(tmp_path), {"path": "/t"}, row_filter=row_filter)
    batches = list(scan.filtered_batches())
    assert [s.names for s in seen] == [["x"], []]
    assert [(b.to_pylist(), done) for b, done in batches] == [
        ([{"x": 2.5}], True),
        ([{"x": 3.0}, {"x": 1.0}], False),
    ]


def test_an_implicit_column_hides_a_file_column_of_its_name(tmp_path: Path) -> None:
    (tmp_path / "t" / "p").mkdir(parents=True)
    pq.write_table(pa.table({"dir0": ["in-file"], "x": [1]}), tmp_path / "t" / "p" / "a.parquet")
    seen: list[pa.Schema] = []
    scan = FileScan(_engine(tmp_path), {"path": "/t"}, row_filter=lambda s: seen.append(s))
    assert [b.to_pylist() for b in scan.batches()] == [[{"x": 1, "dir0": "p"}]]
    assert seen[0].names == ["x"]


def test_other_formats_and_provided_schemas_are_filtered_after_the_read(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.json").write_text('{"x": 1}\n{"x": 5}\n')
    asked: list[pa.Schema] = []
    scan = FileScan(_engine(tmp_path), {"path": "/t"}, row_filter=lambda s: asked.append(s))
    assert [done for _, done in scan.filtered_batches()] == [False]
    (tmp_path / "p").mkdir()
    pq.write_table(pa.table({"y": [1, 2]}), tmp_path / "p" / "a.parquet")
    provided = {"path": "/p", "format": "parquet", "schema": [{"name": "y", "type": "VARCHAR"}]}
    scan = FileScan(_engine(tmp_path), provided, row_filter=lambda s: asked.append(s))
    assert [done for _, done in scan.filtered_batches()] == [False]
    assert asked == []


def _built(root: Path, expr: str) -> Any:
    logical = parse_plan(_plan(root, expr))
    engines = build_engines(logical, base_dir=None, classpath=[])
    planned = optimize(logical, Statistics.from_engines(logical, engines))
    executor = LocalExecutor(planned, ExecContext(engines=engines, params={}))
    return planned, executor._build(planned.operator("2"))


@pytest.mark.parametrize("expr", ["f.x > 1 && 'a' != f.s", "f.x > 1 || f.s == 'c'"])
def test_a_filter_the_scan_applies_whole_is_not_built(tmp_path: Path, expr: str) -> None:
    _write(tmp_path, TABLES)
    planned, built = _built(tmp_path, expr)
    assert planned.operator("1").pushed_filter == expr
    assert isinstance(built, ScanOperator)


@pytest.mark.parametrize(
    ("expr", "left_to_test"),
    [("f.x > 1 && f.x + 1 > 3", "f.x + 1 > 3"), ("f.x > 1 || f.x + 1 > 3", None)],
)
def test_a_filter_with_more_than_the_scan_applies_tests_the_rest(
    tmp_path: Path, expr: str, left_to_test: str | None
) -> None:
    _write(tmp_path, TABLES)
    _, built = _built(tmp_path, expr)
    assert built.kind == "filter"
    assert to_string(built.expr) == (left_to_test or expr)  # an OR is not pushed: tested whole
    pushed, plain = run_plan(_plan(tmp_path, expr)), run_plan(_plan(tmp_path, expr), optimize=False)
    assert repr(pushed.records()) == repr(plain.records())


def _engine(root: Path) -> Any:
    return create_engine("fs", {"type": "fs", "root": str(root)})
