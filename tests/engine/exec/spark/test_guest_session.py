"""The engine is a guest in the user's process and SparkSession: by default a run patches no
library and changes no setting of the session, and counts rows by means Spark supports; each
shortcut beyond that is an opt-in setting (engine.exec.spark.settings)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from py4j.java_collections import ListConverter
from py4j.java_gateway import JavaClass, JavaPackage, JVMView
from spark_settings import spark_setting

from engine.errors import DrillError
from engine.exec.spark.py4j_round_trips import restore_py4j
from engine.exec.spark.row_markers import row_markers
from engine.exec.spark.session import SparkConfig
from engine.exec.spark.settings import KEEP_EMPTY_RELATIONS, PY4J_SHORTCUTS, ROW_MARKERS
from engine.plan import parse_plan
from engine.run import run_plan

PATCHED = ((JVMView, "__getattr__"), (JavaPackage, "__getattr__"), (JavaClass, "__getattr__"))


def py4j_functions() -> list[tuple[str, str]]:
    """Where py4j's lookups and list conversion are defined: py4j's own module, or another."""
    found = [getattr(cls, name) for cls, name in PATCHED] + [ListConverter.convert]
    return [(f.__module__, f.__qualname__) for f in found]


ORIGINAL = [
    ("py4j.java_gateway", "JVMView.__getattr__"),
    ("py4j.java_gateway", "JavaPackage.__getattr__"),
    ("py4j.java_gateway", "JavaClass.__getattr__"),
    ("py4j.java_collections", "ListConverter.convert"),
]


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    (tmp_path / "orders").mkdir()
    orders = pa.table(
        {"o_key": pa.array(range(30), pa.int64()), "cust": [i % 4 for i in range(30)]}
    )
    pq.write_table(orders.slice(0, 20), tmp_path / "orders" / "a.parquet")
    pq.write_table(orders.slice(20), tmp_path / "orders" / "b.parquet")
    (tmp_path / "customers").mkdir()
    (tmp_path / "customers" / "c.json").write_text(
        "".join(f'{{"c_key": {i}, "name": "n{i}"}}\n' for i in range(3))
    )
    return tmp_path


def join_plan(root: Path) -> Any:
    """Orders joined to customers (one customer has none), filtered, grouped, stored."""
    return parse_plan(
        {
            "storage": {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}},
            "query": [
                {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "o",
                 "selection": {"path": "orders", "format": "parquet"}},
                {"@id": 2, "op": "scan", "storageengine": "fs", "ref": "c",
                 "selection": {"path": "customers", "format": "json"}},
                {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "inner",
                 "conditions": [{"relationship": "==", "left": "o.cust", "right": "c.c_key"}]},
                {"@id": 4, "op": "filter", "input": 3, "expr": "o.o_key > 3"},
                {"@id": 5, "op": "segment", "input": 4, "ref": "seg", "exprs": ["c.name"]},
                {"@id": 6, "op": "collapsingaggregate", "input": 5, "within": "seg",
                 "carryovers": ["c.name"], "aggregations": [{"ref": "n", "expr": "count(1)"}]},
                {"@id": 7, "op": "store", "input": 6, "storageengine": "q", "target": {}},
            ],
        }
    )  # fmt: skip


def rows_of(result: Any) -> dict[str, int]:
    return {op: m["rows"] for op, m in result.metrics.items() if "rows" in m}


def test_a_default_run_leaves_py4j_as_py4j_wrote_it(spark: Any, lake: Path) -> None:
    restore_py4j()  # whatever an opt-in test before this one installed
    assert py4j_functions() == ORIGINAL
    result = run_plan(join_plan(lake), executor="spark", spark=spark)
    assert result.records()
    assert py4j_functions() == ORIGINAL


def test_py4j_shortcuts_are_an_opt_in(spark: Any, lake: Path) -> None:
    try:
        with spark_setting(spark, PY4J_SHORTCUTS, "true"):
            shortcut = run_plan(join_plan(lake), executor="spark", spark=spark)
        assert py4j_functions() != ORIGINAL  # for the process, as the setting says
    finally:
        restore_py4j()
    assert py4j_functions() == ORIGINAL
    default = run_plan(join_plan(lake), executor="spark", spark=spark)
    assert shortcut.records() == default.records()
    assert rows_of(shortcut) == rows_of(default)


def test_a_run_changes_no_setting_of_the_session(spark: Any, lake: Path) -> None:
    """A user's session (here one made by ``newSession()``, as a notebook's) keeps every
    setting it had: the engine registers its data source, and sets nothing."""
    session = spark.newSession()
    before = dict(session.conf.getAll)
    run_plan(join_plan(lake), executor="spark", spark=session)
    events = lake / "events"
    events.mkdir()
    (events / "e.json").write_text('{"a": {"b": 1}}\n{"a": {"b": 2}}\n')
    plan = {
        "storage": {"fs": {"type": "fs", "root": str(lake)}, "q": {"type": "queue"}},
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e",
             "selection": {"path": "events", "format": "json"}},
            {"@id": 2, "op": "store", "input": 1, "storageengine": "q", "target": {}},
        ],
    }  # fmt: skip
    assert len(run_plan(parse_plan(plan), executor="spark", spark=session).records()) == 2
    assert dict(session.conf.getAll) == before


def test_row_counts_by_default_are_the_local_executors(spark: Any, lake: Path) -> None:
    """Without markers, an operator's rows are counted by ``DataFrame.observe``, footers and the
    stores: the same counts as the local executor's."""
    assert row_markers(spark) is None  # no Java compiled, no status store read
    plan = join_plan(lake)
    spark_rows = rows_of(run_plan(plan, executor="spark", spark=spark))
    local_rows = rows_of(run_plan(plan, executor="local"))
    assert spark_rows == local_rows
    # the filter (4) reads one input only: the planner moves it below the join, under a new id
    assert {"1", "2", "3", "6"} <= set(spark_rows)


def test_markers_count_as_the_default_when_opted_in(spark: Any, lake: Path) -> None:
    plan = join_plan(lake)
    default = run_plan(plan, executor="spark", spark=spark)
    with spark_setting(spark, ROW_MARKERS, "true"):
        assert row_markers(spark) is not None
        marked = run_plan(plan, executor="spark", spark=spark)
    assert rows_of(marked) == rows_of(default)


def test_an_opt_in_other_than_true_or_false_is_refused(spark: Any, lake: Path) -> None:
    with spark_setting(spark, ROW_MARKERS, "yes"), pytest.raises(DrillError) as failure:
        run_plan(join_plan(lake), executor="spark", spark=spark)
    assert "spark.drill.rowMarkers is 'yes', not true or false" in str(failure.value)


def test_sessions_keep_spark_optimizer_rules_unless_asked() -> None:
    default = SparkConfig().settings()
    assert "spark.sql.optimizer.excludedRules" not in default
    assert "spark.sql.adaptive.optimizer.excludedRules" not in default
    kept = SparkConfig(conf={KEEP_EMPTY_RELATIONS: "true"}).settings()
    assert "PruneFilters" in kept["spark.sql.optimizer.excludedRules"]
    assert "AQEPropagateEmptyRelation" in kept["spark.sql.adaptive.optimizer.excludedRules"]
    mine = SparkConfig(
        conf={KEEP_EMPTY_RELATIONS: "true", "spark.sql.optimizer.excludedRules": ""}
    ).settings()
    assert mine["spark.sql.optimizer.excludedRules"] == ""  # the user's own setting wins
