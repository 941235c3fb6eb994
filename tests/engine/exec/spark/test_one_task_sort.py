"""A store sorting small data does it in one task; bigger data, or data of unknown size, through
Spark's range partitioning (engine.exec.spark.one_task_sort). Either way the records are the
local executor's, in the same order."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from spark_settings import spark_setting

from engine import run_plan
from engine.errors import DrillError, PlanningError
from engine.exec.spark.one_task_sort import (
    ONE_TASK_SORT_BYTES,
    one_task_sort_limit,
    parse_bytes,
)
from engine.plan import parse_plan
from engine.planner.properties.decisions import one_task_sorts
from engine.planner.statistics import ScanStatistics, Statistics

EVENTS = [
    {"id": 1, "user": "b", "ts": 30},
    {"id": 2, "user": "a", "ts": 10},
    {"id": 3, "user": "b", "ts": 20},
    {"id": 4, "user": "a", "ts": 10},
    {"id": 5, "user": "c", "ts": 5},
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "events.json").write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    return tmp_path


def ordered_store(root: Path) -> Any:
    """Events ordered by user then ts (two tie: input order decides), stored as parquet."""
    return parse_plan({
        "storage": {"fs": {"type": "fs", "root": str(root)}},
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e",
             "selection": {"path": "events.json"}},
            {"@id": 2, "op": "order", "input": 1, "orderings": [
                {"order": "asc", "expr": "e.user"}, {"order": "desc", "expr": "e.ts"}]},
            {"@id": 3, "op": "project", "input": 2, "projections": [
                {"ref": "output.id", "expr": "e.id"}, {"ref": "output.user", "expr": "e.user"}]},
            {"@id": 4, "op": "store", "input": 3, "storageengine": "fs",
             "target": {"path": "out", "format": "parquet"}},
        ],
    })  # fmt: skip


def stored(spark: Any, root: Path) -> tuple[list[dict[str, Any]], list[str], str]:
    """The stored records (file by file), the files and the store's Spark plan."""
    result = run_plan(ordered_store(root), executor="spark", spark=spark)
    (store,) = result.stores
    files = sorted(store.files)
    records = [row for f in files for row in pq.read_table(f).to_pylist()]
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    plan = executions.apply(executions.size() - 1).physicalPlanDescription()
    return records, files, plan


ORDERED = [(2, "a"), (4, "a"), (1, "b"), (3, "b"), (5, "c")]  # a tie: 2 was read first


def test_a_small_store_sorts_its_records_in_one_task(spark: Any, root: Path) -> None:
    records, files, plan = stored(spark, root)
    assert [(r["id"], r["user"]) for r in records] == ORDERED
    local = run_plan(ordered_store(root), executor="local")
    assert records == [row for f in local.stores[0].files for row in pq.read_table(f).to_pylist()]
    # One shuffle into one partition, then a sort within it: no range partitioning, so no job
    # sampling the keys, and one file.
    assert "Arguments: SinglePartition, REPARTITION_BY_NUM" in plan, plan
    assert "rangepartitioning" not in plan, plan
    (sort,) = re.findall(r"\(\d+\) Sort .*\nInput \[\d+\]: \[.*\]\nArguments: (.*)", plan)
    assert sort.endswith("], false, 0"), sort  # within the partition
    assert len(files) == 1


@pytest.mark.parametrize("limit", ["10", "-1"])
def test_over_the_limit_or_off_the_store_sorts_by_key_ranges(
    spark: Any, root: Path, limit: str
) -> None:
    # events.json holds about 150 bytes: over 10; -1 turns the one-task sort off.
    with spark_setting(spark, ONE_TASK_SORT_BYTES, limit):
        records, _, plan = stored(spark, root)
    assert [(r["id"], r["user"]) for r in records] == ORDERED
    assert re.search(r"Arguments: rangepartitioning\(user#\d+ ASC NULLS FIRST, ", plan), plan
    assert "SinglePartition" not in plan, plan


def test_a_limit_as_spark_writes_sizes_is_read_from_the_session(spark: Any) -> None:
    assert one_task_sort_limit(spark) == 128 * 1024 * 1024
    with spark_setting(spark, ONE_TASK_SORT_BYTES, "1g"):
        assert one_task_sort_limit(spark) == 1 << 30


def test_a_limit_that_is_not_a_size_is_a_clear_error(spark: Any, root: Path) -> None:
    with spark_setting(spark, ONE_TASK_SORT_BYTES, "lots"), pytest.raises(DrillError) as failure:
        run_plan(ordered_store(root), executor="spark", spark=spark)
    assert "spark.drill.oneTaskSortBytes is 'lots', not a size" in str(failure.value)
    assert "128m" in (failure.value.hint or "")


@pytest.mark.parametrize(
    ("text", "size"),
    [("0", 0), ("2048", 2048), ("64k", 64 << 10), ("128m", 128 << 20), ("128MB", 128 << 20),
     (" 2g ", 2 << 30), ("1t", 1 << 40), ("-1", -1)],
)  # fmt: skip
def test_sizes_read_as_spark_writes_them(text: str, size: int) -> None:
    assert parse_bytes(text) == size


@pytest.mark.parametrize("text", ["", "m", "1.5g", "12 parsecs", "1x"])
def test_what_is_not_a_size_fails(text: str) -> None:
    with pytest.raises(PlanningError, match="not a size"):
        parse_bytes(text)


def test_only_stores_over_scans_of_known_size_within_the_limit_sort_in_one_task() -> None:
    stats = Statistics(
        {"1": ScanStatistics("json", 2, 600), "2": ScanStatistics("parquet", 1, 500)}
    )
    scans_above = {
        "small": {"1"},
        "both": {"1", "2"},  # 1,100 bytes together
        "unknown": {"1", "3"},  # scan 3 reported no size
        "constant": set(),  # no scan: a constant's records, in the plan itself
    }
    stores = list(scans_above)
    assert one_task_sorts(stores, scans_above, stats, 1_000) == {"small", "constant"}
    assert one_task_sorts(stores, scans_above, stats, 1_100) == {"small", "both", "constant"}
    assert one_task_sorts(stores, scans_above, stats, 0) == {"constant"}
    assert one_task_sorts(stores, scans_above, stats, -1) == set()
