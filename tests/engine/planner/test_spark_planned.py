"""The Spark executor runs the planned plan: the scan gets the projection and the pushed filter
(seen in Spark's own plan), the small side of a join is broadcast, and results equal the local
executor's."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_settings import spark_setting

from engine import explain, parse_plan, run_plan
from engine.exec.spark import stores
from engine.exec.spark.executor import SparkPlanRun
from engine.exec.spark.settings import ROW_MARKERS
from engine.run import build_engines


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "orders").mkdir(parents=True)
    pq.write_table(
        pa.table({"id": [1, 2, 3, 4], "amount": [5.0, 50.0, 500.0, 7.5], "note": list("abcd")}),
        root / "orders" / "part-0.parquet",
    )
    lines = [
        {"id": i, "amount": i * 1.5, "user": {"name": f"u{i}", "tags": ["x"]}, "pad": "z" * 50}
        for i in range(20)
    ]
    (root / "events.json").write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    (root / "kinds.json").write_text('{"id": 1, "kind": "a"}\n{"id": 3, "kind": "b"}\n')
    return root


def plan_of(root: Path, query: list[dict]) -> object:
    storage = {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}}
    return parse_plan({"storage": storage, "query": query})


def test_parquet_scan_gets_projection_and_pushed_filter(spark, data: Path) -> None:
    plan = plan_of(
        data,
        [
            {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "o",
             "selection": {"path": "orders", "format": "parquet"}},
            {"@id": 2, "op": "filter", "input": 1, "expr": "o.amount > 10 * 2"},
            {"@id": 3, "op": "project", "input": 2,
             "projections": [{"ref": "output.id", "expr": "o.id"}]},
            {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}},
        ],
    )  # fmt: skip
    text = explain(plan, spark=spark)
    assert "scan-parquet #1 (scan 1): columns=[amount, id], filter=o.amount > 20" in text
    assert "PushedFilters: [IsNotNull(amount), GreaterThan(amount,20.0)]" in text
    # The plan's two columns only: nothing here reads the scan's sequence, so Spark prunes the
    # row index (read through `_metadata`, Spark built that whole struct for every row anyway).
    assert re.search(r"FileScan parquet \[amount#\d+,id#\d+L\]", text)
    assert "ReadSchema: struct<amount:double,id:bigint>" in text
    assert "_metadata" not in text
    spark_records = run_plan(plan, executor="spark", spark=spark).records()
    assert spark_records == run_plan(plan, executor="local").records() == [{"id": 2}, {"id": 3}]


def test_nested_json_scan_using_one_field_reads_only_it(spark, data: Path) -> None:
    plan = plan_of(
        data,
        [
            {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e",
             "selection": {"path": "events.json"}},
            {"@id": 2, "op": "collapsingaggregate", "input": 1,
             "aggregations": [{"ref": "total", "expr": "sum(e.amount)"}]},
            {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
        ],
    )  # fmt: skip
    engines = build_engines(plan, base_dir=None, classpath=[])
    run = SparkPlanRun(plan, spark, engines=engines, params={})
    assert run.planned.operator("1").projection == ["amount"]
    (frame,) = run.compile_frames().values()
    scan_line = next(
        line for line in frame._jdf.queryExecution().toString().splitlines() if "ReadSchema" in line
    )
    assert "ReadSchema: struct<amount:double>" in scan_line
    assert run_plan(plan, executor="spark", spark=spark).records() == [{"total": 285.0}]


def test_small_join_side_is_broadcast(spark, data: Path) -> None:
    plan = plan_of(
        data,
        [
            {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "o",
             "selection": {"path": "orders", "format": "parquet"}},
            {"@id": 2, "op": "scan", "storageengine": "fs", "ref": "k",
             "selection": {"path": "kinds.json"}},
            {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "left",
             "conditions": [{"relationship": "==", "left": "o.id", "right": "k.id"}]},
            {"@id": 4, "op": "project", "input": 3, "projections": [
                {"ref": "output.id", "expr": "o.id"}, {"ref": "output.kind", "expr": "k.kind"}]},
            {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {}},
        ],
    )  # fmt: skip
    text = explain(plan, spark=spark)
    assert "broadcast-hash-join #4 (join 3): build=right" in text
    assert "BroadcastHashJoin" in text
    expected = [{"id": 1, "kind": "a"}, {"id": 2}, {"id": 3, "kind": "b"}, {"id": 4}]
    records = run_plan(plan, executor="spark", spark=spark).records()
    assert [{k: v for k, v in r.items() if v is not None} for r in records] == expected


def test_exact_reader_tests_are_not_tested_again_and_floats_keep_drills_test(
    spark, tmp_path: Path
) -> None:
    """Integer, string and date tests the reader applies are Drill's own: no second, exact copy
    in the filter. A float test keeps it (Spark's NaN is above every number, Drill's compares
    false), and a string column against a number is left to Drill's test too."""
    import datetime

    (tmp_path / "t").mkdir()
    table = pa.table(
        {
            "n": [1, 5, None, 9],
            "s": ["a", "b", "b", None],
            "d": [datetime.date(2024, 1, d) for d in (1, 2, 3, 4)],
            "x": [1.0, float("nan"), 3.0, None],
        }
    )
    pq.write_table(table, tmp_path / "t" / "part-0.parquet")

    def run(expr: str) -> tuple[str, list[dict]]:
        plan = plan_of(
            tmp_path,
            [
                {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "t",
                 "selection": {"path": "t", "format": "parquet"}},
                {"@id": 2, "op": "filter", "input": 1, "expr": expr},
                {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
            ],
        )  # fmt: skip
        engines = build_engines(plan, base_dir=None, classpath=[])
        (frame,) = SparkPlanRun(plan, spark, engines=engines, params={}).compile_frames().values()
        filters = [
            line.strip()
            for line in frame._jdf.queryExecution().optimizedPlan().toString().splitlines()
            if "Filter" in line
        ]
        kept = [r["t"]["n"] for r in run_plan(plan, executor="spark", spark=spark).records()]
        assert kept == [r["t"]["n"] for r in run_plan(plan, executor="local").records()]
        return " ".join(filters), kept

    filters, kept = run("t.n > 2 && t.s == 'b' && t.d >= to_date('2024-01-02')")
    assert "coalesce" not in filters and kept == [5]
    filters, kept = run("t.x > 2.0")
    assert "isnan" in filters and kept == [None]  # NaN compares false, as in Drill
    filters, kept = run("t.s == 'b' && t.x < 2.0")
    assert "isnan" not in filters and kept == []  # NaN < 2.0 is false in both
    for expr, expected in [
        ("t.x < 5.0", [1, None]),
        ("t.x <= 3", [1, None]),
        ("t.x == 3.0", [None]),
        ("t.x != 1.0", [5, None]),  # NaN differs from every number in both
    ]:
        filters, kept = run(expr)
        assert "isnan" not in filters and kept == expected, (expr, filters)
    filters, kept = run("t.x >= 1.0")
    assert "isnan" in filters and kept == [1, None]


@pytest.mark.parametrize(
    ("expr", "tests", "left_to_drill"),
    [
        ("n > 2 && s == 'b' && d >= to_date('2024-01-02') && b == true", 4, []),
        ("x > 2.0", 1, ["x > 2.0"]),  # NaN: above every number in Spark, false in Drill
        ("2.0 < x", 1, ["2.0 < x"]),
        ("x >= 2", 1, ["x >= 2"]),
        ("x < 2.0 && x <= 3 && x == 1.5 && x != 4", 4, []),  # NaN: false (!=: true) in both
        ("2.0 > x", 1, []),
        ("x < 'a'", 1, ["x < 'a'"]),  # a double against a string
        ("s == 5", 1, ["s == 5"]),  # a string against a number: Spark would cast
        ("n > 2.5", 1, ["n > 2.5"]),  # an integer against a float
        ("s == 'b' && n + 1 > 2", 1, ["n + 1 > 2"]),  # not column <op> literal
    ],
)
def test_reader_tests_and_what_is_left_to_drills_test(
    spark, expr: str, tests: int, left_to_drill: list[str]
) -> None:
    from pyspark.sql import types as T

    from engine.exec.spark.native_scan import _reader_tests
    from engine.expr import parse_expression

    schema = T.StructType(
        [
            T.StructField("n", T.LongType()),
            T.StructField("s", T.StringType()),
            T.StructField("d", T.DateType()),
            T.StructField("b", T.BooleanType()),
            T.StructField("x", T.DoubleType()),
        ]
    )
    found, rest = _reader_tests(parse_expression(expr), schema)
    assert len(found) == tests
    assert [str(e) for e in rest] == left_to_drill


def test_the_spark_plan_shows_records_as_stores_write_them(spark, data: Path) -> None:
    """A record stored whole carries no trace of the compiler's unread member in ``explain``."""
    plan = plan_of(
        data,
        [
            {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "o",
             "selection": {"path": "orders", "format": "parquet"}},
            {"@id": 2, "op": "store", "input": 1, "storageengine": "q", "target": {}},
        ],
    )  # fmt: skip
    text = explain(plan, spark=spark)
    assert "named_struct(id, id#" in text and "__drill_unread" not in text
    records = run_plan(plan, executor="spark", spark=spark).records()
    assert records == run_plan(plan, executor="local").records()
    assert set(records[0]["o"]) == {"id", "amount", "note"}


def test_an_observed_side_feeds_its_broadcast_with_no_inferred_filter(
    spark, data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both scans are counted as their rows flow (their filters make footers useless; with the
    ``spark.drill.rowMarkers`` opt-in, a marker filter each), and a join on ``==`` lets Spark infer no ``isnotnull`` filter
    above them: the build side's count feeds the broadcast with no filter of its own between.
    Null keys still match nothing."""
    pq.write_table(
        pa.table({"id": [1, None, 3, None], "rate": [0.5, 0.6, 0.7, 0.8]}), data / "rates.parquet"
    )
    pq.write_table(
        pa.table({"id": [1, 2, 3, None], "amount": [5.0, 50.0, 500.0, 7.5]}),
        data / "orders" / "part-0.parquet",
    )
    storage = {
        "fs": {"type": "fs", "root": str(data)},
        "out": {"type": "fs", "root": str(tmp_path)},
    }
    plan = parse_plan({"storage": storage, "query": [
        {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "o",
         "selection": {"path": "orders", "format": "parquet"}},
        {"@id": 2, "op": "filter", "input": 1, "expr": "o.amount > 1"},
        {"@id": 3, "op": "scan", "storageengine": "fs", "ref": "r",
         "selection": {"path": "rates.parquet", "format": "parquet"}},
        {"@id": 4, "op": "filter", "input": 3, "expr": "r.rate > 0.55"},
        {"@id": 5, "op": "join", "left": 2, "right": 4, "type": "inner",
         "conditions": [{"relationship": "==", "left": "o.id", "right": "r.id"}]},
        {"@id": 6, "op": "project", "input": 5, "projections": [
            {"ref": "output.id", "expr": "o.id"}, {"ref": "output.rate", "expr": "r.rate"}]},
        {"@id": 7, "op": "store", "input": 6, "storageengine": "out",
         "target": {"path": "joined", "format": "parquet"}},
    ]})  # fmt: skip
    written = []
    write = stores._spark_write
    monkeypatch.setattr(
        stores, "_spark_write", lambda df, *args: (written.append(df), write(df, *args))
    )
    with spark_setting(spark, ROW_MARKERS, "true"):
        result = run_plan(plan, executor="spark", spark=spark)
    physical = written[0]._jdf.queryExecution().executedPlan().toString()
    assert physical.count("SPARK_PARTITION_ID() >= -") == 2, physical  # row_markers
    assert "isnotnull(id" not in physical
    assert re.search(
        r"BroadcastExchange .*\n\s*\+- (Project .*\n\s*\+- )?Filter .*SPARK_PARTITION_ID", physical
    )
    assert pq.read_table(tmp_path / "joined").to_pylist() == [{"id": 3, "rate": 0.7}]
    local = run_plan(plan, executor="local")
    assert pq.read_table(tmp_path / "joined").to_pylist() == [{"id": 3, "rate": 0.7}]
    assert result.metrics["1"]["rows"] == local.metrics["1"]["rows"] == 4
    assert result.metrics["3"]["rows"] == local.metrics["3"]["rows"] == 3
    assert result.metrics["5"]["rows"] == local.metrics["5"]["rows"] == 1
