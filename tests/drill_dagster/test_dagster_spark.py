"""dagster.materialize on Spark: one op per operator, DataFrames in memory, stores written by Spark.

Uses the session-scoped ``spark`` fixture: the resource finds it running and leaves it running.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from dagster import (
    AssetIn,
    AssetKey,
    AssetSelection,
    DagsterInstance,
    Definitions,
    ExecuteInProcessResult,
    asset,
    materialize,
)
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)
from dagster_runs import materialize_ok
from spark_settings import spark_setting

from drill_dagster import load_definitions
from engine.exec.spark import row_markers
from engine.exec.spark.settings import ROW_COUNTS

pytestmark = pytest.mark.spark
Kit = Any
CLEAN, TOTALS = AssetKey("clean"), AssetKey("totals")
RANGE = {ASSET_PARTITION_RANGE_START_TAG: "2024-01-01", ASSET_PARTITION_RANGE_END_TAG: "2024-01-03"}


@dataclass
class RangeRun:
    plans_dir: Path
    defs: Definitions
    instance: DagsterInstance
    result: ExecuteInProcessResult


@pytest.fixture(scope="module")
def range_run(tmp_path_factory: pytest.TempPathFactory, spark: Any, kit: Kit) -> Iterator[RangeRun]:
    """The three days of `clean` materialized once on Spark, shared by the tests below."""
    plans_dir = kit.write(tmp_path_factory.mktemp("spark_project"))
    defs = load_definitions(plans_dir, executor="spark")
    with DagsterInstance.ephemeral() as instance:
        yield RangeRun(
            plans_dir, defs, instance, materialize_ok(defs, instance, "clean", tags=RANGE)
        )


def test_a_range_on_spark_writes_each_partition_with_operator_row_counts(
    range_run: RangeRun, spark: Any
) -> None:
    plans_dir = range_run.plans_dir
    events = [e.materialization for e in range_run.result.get_asset_materialization_events()]
    counts = {e.partition: e.metadata["dagster/partition_row_count"].value for e in events}
    assert counts == {"2024-01-01": 2, "2024-01-02": 1, "2024-01-03": 2}
    metadata = events[0].metadata
    assert {e.partition: e.metadata["dagster/row_count"].value for e in events} == counts
    # The data version is the commit version the store wrote (one per partition's write).
    versions = [e.metadata["drill/commit_version"].value for e in events]
    assert events[0].tags["dagster/data_version"] == "-".join(versions)
    counters = metadata["drill/operator_counters"].value
    assert counters["1"]["rows"] == 6  # the scan saw every raw event of the three days
    assert counters["2"]["rows"] == 5 and counters["4"]["rows"] == 5  # filter, store
    assert "| filter 2 | rows=5 |" in metadata["drill/operator_metrics"].value
    columns = [(c.name, c.type) for c in metadata["dagster/column_schema"].value.columns]
    assert columns == [
        ("id", "BIGINT"),
        ("user", "MAP"),
        ("user.id", "BIGINT"),
        ("user.name", "VARCHAR"),
        ("amount", "BIGINT"),
    ]
    for day, rows in counts.items():
        assert pq.read_table(plans_dir.parent / "data/lake/clean" / f"day={day}").num_rows == rows
    assert spark.range(1).count() == 1  # the test session is still running


def test_a_session_counting_stores_only_gives_the_asset_its_rows_and_no_flowing_count(
    tmp_path: Path, spark: Any, kit: Kit
) -> None:
    """``spark.drill.rowCounts=stores`` on the session: the same store, its row count in the
    materialization, and the filter's, which the store counts; the JSON scan's rows, which only
    an observation counts, are not counted."""
    plans_dir = kit.write(tmp_path)
    defs = load_definitions(plans_dir, executor="spark")
    with spark_setting(spark, ROW_COUNTS, "stores"), DagsterInstance.ephemeral() as instance:
        result = materialize_ok(defs, instance, "clean", tags=RANGE)
    events = [e.materialization for e in result.get_asset_materialization_events()]
    counts = {e.partition: e.metadata["dagster/partition_row_count"].value for e in events}
    assert counts == {"2024-01-01": 2, "2024-01-02": 1, "2024-01-03": 2}
    assert {e.partition: e.metadata["dagster/row_count"].value for e in events} == counts
    counters = events[0].metadata["drill/operator_counters"].value
    assert counters["2"]["rows"] == counters["4"]["rows"] == 5  # the filter, the store
    assert "rows" not in counters.get("1", {})  # the JSON scan


def test_a_store_loads_as_a_dataframe_in_a_downstream_python_asset(range_run: RangeRun) -> None:
    defs, instance, plans_dir = range_run.defs, range_run.instance, range_run.plans_dir
    result = materialize_ok(defs, instance, "totals")
    lake = plans_dir.parent / "data" / "lake"
    (line,) = (lake / "totals").glob("*.json")
    assert json.loads(line.read_text()) == {"n": 5, "total": 48}
    (event,) = result.get_asset_materialization_events()
    assert event.materialization.metadata["dagster/row_count"].value == 1

    seen = {}

    @asset(ins={"clean": AssetIn(key=CLEAN)})
    def big_spenders(clean: Any) -> None:
        seen["columns"] = sorted(clean.columns)
        seen["rows"] = clean.filter("amount >= 10").count()

    materialize(
        [*defs.assets, big_spenders],  # type: ignore[list-item]
        selection=AssetSelection.assets("big_spenders"),
        resources=defs.resources,
        instance=instance,
    )
    assert seen == {"columns": ["amount", "day", "id", "user"], "rows": 3}


def test_a_flatten_over_a_json_scan_counts_as_the_local_executor(
    tmp_path: Path, spark: Any, kit: Kit
) -> None:
    """An unordered flatten explodes its JSON scan's own columns on Spark (the scan counted as
    read, by a marker filter; no record built below the explode): the op graph stores the
    records and counts each operator's rows as the local executor does, and the run's marker
    slot is free again when the Dagster run ends."""
    plan = {
        "storage": kit.CLEAN["storage"],  # raw and lake beside the plans
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "raw", "ref": "e",
             "selection": {"path": "tagged", "format": "json"}},
            {"@id": 2, "op": "flatten", "input": 1, "ref": "tag", "expr": "e.tags", "drop": True},
            {"@id": 3, "op": "project", "input": 2, "projections": [
                {"ref": "output.k", "expr": "e.k"}, {"ref": "output.tag", "expr": "tag"}]},
            {"@id": 4, "op": "store", "input": 3, "storageengine": "lake",
             "target": {"path": "tags", "format": "parquet"}},
        ],
    }  # fmt: skip
    lines = ['{"k": "x", "tags": [1, 2]}', '{"k": "y", "tags": []}', '{"k": "z", "tags": null}']
    counters = {}
    slots = set(row_markers._slots)
    for executor in ("local", "spark"):
        root = tmp_path / executor
        plans_dir = kit.write(root, plans={"tags": plan}, project_yaml=None)
        (root / "data" / "raw" / "tagged").mkdir(parents=True)
        (root / "data" / "raw" / "tagged" / "a.json").write_text("\n".join(lines) + "\n")
        defs = load_definitions(plans_dir, executor=executor)
        with DagsterInstance.ephemeral() as instance:
            result = materialize_ok(defs, instance, "tags")
        (event,) = result.get_asset_materialization_events()
        counters[executor] = event.materialization.metadata["drill/operator_counters"].value
        records = pq.read_table(root / "data" / "lake" / "tags").to_pylist()
        assert sorted(records, key=str) == [
            {"k": "x", "tag": 1},
            {"k": "x", "tag": 2},
            {"k": "z", "tag": None},  # a null array keeps its record; y's empty one has none
        ]
    assert counters["spark"] == counters["local"]
    assert {k: v["rows"] for k, v in counters["spark"].items()} == {"1": 3, "2": 3, "3": 3, "4": 3}
    assert row_markers._slots == slots


def test_a_value_an_expression_cannot_take_fails_the_op_naming_it(
    tmp_path: Path, spark: Any, kit: Kit
) -> None:
    """Spark meets the bad value in the store's job; the failure names the operator and the
    expression that raised it, and the file the value was read from, as ``run_plan`` does, with
    no Spark advice nor trace."""
    plan = {
        "storage": kit.CLEAN["storage"],
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "raw", "ref": "c",
             "selection": {"path": "customers.csv", "format": "csv"}},
            {"@id": 2, "op": "project", "input": 1, "projections": [
                {"ref": "output.id", "expr": "cast(c.customer_id as BIGINT)"},
                {"ref": "output.rank", "expr": "cast(c.segment as INT)"}]},
            {"@id": 3, "op": "store", "input": 2, "storageengine": "lake",
             "target": {"path": "ranked", "format": "parquet"}},
        ],
    }  # fmt: skip
    plans_dir = kit.write(tmp_path, plans={"ranked": plan}, project_yaml=None)
    defs = load_definitions(plans_dir, executor="spark")
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            list(defs.assets),  # type: ignore[arg-type]
            selection=["ranked"],
            resources=defs.resources,
            instance=instance,
            raise_on_error=False,
        )
    (failure,) = result.get_step_failure_events()
    description = failure.event_specific_data.user_failure_data.description
    assert description == (
        f"{plans_dir / 'ranked.json'}: fragment 0, operator 2 (project): cannot read 'gold' as "
        f"INT in `cast(c.segment as INT)`, read from {plans_dir.parent / 'data/raw/customers.csv'}"
    )
