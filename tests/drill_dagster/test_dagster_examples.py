"""The example project through Dagster: every asset for one partition, then a 3-day range run.

The example plans and their ``drill_project.yaml`` are copied beside freshly generated data (4
days, a quarter of the default volume). Every expected number is computed here from the raw files
with the standard library and pyarrow, independently of the engine. The one-partition run uses the
local executor (the whole lineage, six plans); the range run uses Spark (the session-scoped
``spark`` fixture, which the ``drill`` resource finds running).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from dagster import (
    AssetKey,
    AssetSelection,
    DagsterInstance,
    DailyPartitionsDefinition,
    Definitions,
    ExecuteInProcessResult,
    TableColumnDep,
)
from dagster._core.definitions.backfill_policy import BackfillPolicyType
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)
from dagster_runs import materialize_ok

from drill_dagster import load_definitions
from drill_dagster.metadata import column_type

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TABLES = ("business_customers.json",)
DAYS = ("2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04")
FIRST = DAYS[0]
STORES = {
    "events_cleaned": "events_cleaned",
    "sessions": "user_sessions",
    "daily_activity": "daily_activity",
    "orders_enriched": "orders_enriched",
    "order_items": "top_order_items",
    "customer_summary": "customer_summary",
}
EVENTS, ORDERS, CUSTOMERS = (
    AssetKey(["raw", "events"]),
    AssetKey(["raw", "orders"]),
    AssetKey(["raw", "customers_csv"]),
)


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("examples_generate_d", EXAMPLES / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being created
    spec.loader.exec_module(module)
    return module


@dataclass
class Example:
    root: Path
    instance: DagsterInstance

    @property
    def lake(self) -> Path:
        return self.root / "data" / "lake"

    @property
    def raw(self) -> Path:
        return self.root / "data" / "raw"

    def defs(self, executor: str) -> Definitions:
        return load_definitions(self.root / "plans", executor=executor)


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Example]:
    root = tmp_path_factory.mktemp("example_dagster")
    # The plan reading PostgreSQL into a catalog table has its own test (test_example_tables).
    shutil.copytree(EXAMPLES / "plans", root / "plans", ignore=shutil.ignore_patterns(*TABLES))
    _generator().generate(root / "data", days=len(DAYS), scale=0.25)
    with DagsterInstance.ephemeral() as instance:
        yield Example(root, instance)


def _cleaned_per_day(raw: Path) -> Counter[str]:
    """events_cleaned's rows per day: events of known users that are not heartbeats."""
    counts: Counter[str] = Counter()
    for path in sorted((raw / "events").glob("*/*.json")):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if (event.get("user") or {}).get("id") is not None and event["kind"] != "heartbeat":
                counts[path.parent.name] += 1
    return counts


def _by_key(result: ExecuteInProcessResult) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for event in result.get_asset_materialization_events():
        found.setdefault(event.asset_key.to_user_string(), []).append(event.materialization)
    return found


def _files(directory: Path) -> set[tuple[str, int, int]]:
    """What a partition directory holds, by name, inode and modification time."""
    return {(p.name, p.stat().st_ino, p.stat().st_mtime_ns) for p in directory.iterdir()}


@pytest.fixture(scope="module")
def one_partition(example: Example) -> dict[str, Any]:
    """Every example asset, for the first day, in one run on the local executor."""
    defs = example.defs("local")
    result = materialize_ok(defs, example.instance, partition_key=FIRST)
    checks = {
        (e.asset_key.to_user_string(), e.check_name): e
        for e in result.get_asset_check_evaluations()
    }
    return {"defs": defs, "events": _by_key(result), "checks": checks}


def test_the_project_file_declares_partitions_schedules_and_checks(example: Example) -> None:
    defs = example.defs("local")
    graph = defs.resolve_asset_graph()
    partitions = graph.get(AssetKey("events_cleaned")).partitions_def
    assert isinstance(partitions, DailyPartitionsDefinition)
    assert partitions.get_partition_keys() == [f"2024-01-0{d}" for d in range(1, 8)]
    assert all(
        graph.get(AssetKey(store)).partitions_def is None
        for store in STORES.values()
        if store != "events_cleaned"
    )
    events_cleaned = next(
        a for a in defs.assets if getattr(a, "keys", None) == {AssetKey("events_cleaned")}
    )
    assert events_cleaned.backfill_policy.policy_type is BackfillPolicyType.SINGLE_RUN  # type: ignore[union-attr]
    schedules = {s.name: s for s in defs.get_repository_def().schedule_defs}
    assert schedules["events_cleaned_schedule"].cron_schedule == "0 0 * * *"
    assert schedules["customer_summary_schedule"].cron_schedule == "0 6 * * *"
    checked = {
        (k.asset_key.to_user_string(), k.name) for k in defs.resolve_asset_graph().asset_check_keys
    }
    assert checked == {
        (store, check)
        for store in ("events_cleaned", "orders_enriched", "customer_summary")
        for check in ("schema_contract", "row_count_bounds")
    }
    references = graph.get(AssetKey("user_sessions")).metadata["dagster/code_references"]
    assert references.code_references[0].file_path == str(example.root / "plans" / "sessions.json")
    Definitions.validate_loadable(defs)


def test_one_partition_materializes_every_asset_with_its_rows_and_files(
    example: Example, one_partition: dict[str, Any]
) -> None:
    events = one_partition["events"]
    assert sorted(events) == sorted(STORES.values())
    per_day = _cleaned_per_day(example.raw)
    expected_rows = {
        "events_cleaned": per_day[FIRST],
        "user_sessions": per_day[FIRST],  # one row per cleaned event of the partition
        "orders_enriched": pq.read_table(example.raw / "orders").num_rows,
    }
    for key, (materialization,) in events.items():
        metadata = materialization.metadata
        location = example.lake / key
        assert metadata["dagster/uri"].value == location.as_uri()
        on_disk = ds.dataset(location, format="parquet").count_rows()
        assert metadata["dagster/row_count"].value == on_disk, key
        if key in expected_rows:
            assert on_disk == expected_rows[key], key
    assert sorted(p.name for p in (example.lake / "events_cleaned").iterdir()) == [f"day={FIRST}"]
    (cleaned,) = events["events_cleaned"]
    assert cleaned.partition == FIRST
    assert cleaned.metadata["dagster/partition_row_count"].value == per_day[FIRST]
    assert all(c.passed for c in one_partition["checks"].values()), one_partition["checks"]
    assert len(one_partition["checks"]) == 6


def test_every_metadata_key_on_a_real_materialization(
    example: Example, one_partition: dict[str, Any]
) -> None:
    (cleaned,) = one_partition["events"]["events_cleaned"]
    metadata = cleaned.metadata
    columns = {c.name: c for c in metadata["dagster/column_schema"].value.columns}
    assert list(columns)[:3] == ["event_id", "user_id", "ts"]
    assert columns["items"].type == "LIST<MAP<sku: VARCHAR, qty: BIGINT, price_cents: BIGINT>>"
    assert column_type(columns["items.sku"]) == ("VARCHAR", "OPTIONAL")
    assert column_type(columns["ts"]) == ("TIMESTAMP", "OPTIONAL")
    lineage = metadata["dagster/column_lineage"].value.deps_by_column
    assert lineage["user_id"] == [TableColumnDep(asset_key=EVENTS, column_name="user.id")]
    assert lineage["items"] == [TableColumnDep(asset_key=EVENTS, column_name="cart.items")]
    plan = metadata["drill/plan"].value
    assert "filter" in plan and "events/${day}" in plan
    counters = metadata["drill/operator_counters"].value
    assert counters["1"]["files"] == len(list((example.raw / "events" / FIRST).glob("*.json")))
    scanned = sum(1 for p in (example.raw / "events" / FIRST).glob("*.json") for _ in p.open())
    assert counters["1"]["rows"] == scanned  # the local executor counts rows as Spark does
    assert counters["3"]["rows"] == metadata["dagster/row_count"].value  # the store
    assert "| scan 1 |" in metadata["drill/operator_metrics"].value
    assert metadata["drill/plan_file"].value == str(example.root / "plans" / "events_cleaned.json")
    assert metadata["drill/schema_version"].value == 1

    (summary,) = one_partition["events"]["customer_summary"]
    lineage = summary.metadata["dagster/column_lineage"].value.deps_by_column
    assert lineage["revenue_usd"] == [
        TableColumnDep(asset_key=AssetKey("orders_enriched"), column_name="total_usd")
    ]
    assert (
        TableColumnDep(asset_key=AssetKey("user_sessions"), column_name="user_id")
        in lineage["user_id"]
    )
    (enriched,) = one_partition["events"]["orders_enriched"]
    lineage = enriched.metadata["dagster/column_lineage"].value.deps_by_column
    assert lineage["segment"] == [TableColumnDep(asset_key=CUSTOMERS, column_name="segment")]
    assert lineage["order_id"] == [TableColumnDep(asset_key=ORDERS, column_name="order_id")]
    for key, (materialization,) in one_partition["events"].items():
        assert {
            "dagster/column_schema",
            "dagster/row_count",
            "dagster/uri",
            "dagster/column_lineage",
            "drill/plan",
            "drill/operator_metrics",
            "drill/operator_counters",
            "drill/plan_file",
            "drill/schema_version",
        } <= set(materialization.metadata), key


@pytest.mark.spark
def test_a_three_day_range_on_spark_is_one_run_overwriting_exactly_its_partitions(
    example: Example, tmp_path: Path, spark: Any
) -> None:
    # Its own lake: the executors write timestamps with different Arrow types (see the report),
    # and a partitioned store refuses rows whose schema differs from the partitions it keeps.
    shutil.copytree(example.root / "plans", tmp_path / "plans")
    # A copy, not a link: the code location only reads roots under its project directory.
    shutil.copytree(example.raw, tmp_path / "data" / "raw")
    example = Example(tmp_path, DagsterInstance.ephemeral())
    lake = example.lake / "events_cleaned"
    defs = example.defs("spark")
    selection = AssetSelection.assets("events_cleaned")
    materialize_ok(defs, example.instance, selection=selection, partition_key=FIRST)
    first_day = _files(lake / f"day={FIRST}")
    tags = {ASSET_PARTITION_RANGE_START_TAG: DAYS[1], ASSET_PARTITION_RANGE_END_TAG: DAYS[3]}
    result = materialize_ok(defs, example.instance, selection=selection, tags=tags)
    materializations = _by_key(result)["events_cleaned"]
    per_day = _cleaned_per_day(example.raw)
    counts = {
        m.partition: m.metadata["dagster/partition_row_count"].value for m in materializations
    }
    assert counts == {day: per_day[day] for day in DAYS[1:]}
    # Each partition's own rows, not the run's total.
    assert {m.partition: m.metadata["dagster/row_count"].value for m in materializations} == counts
    assert len(materializations) == 3  # the range: one run, one materialization per key
    counters = materializations[0].metadata["drill/operator_counters"].value
    scanned = sum(
        1
        for day in DAYS[1:]
        for p in (example.raw / "events" / day).glob("*.json")
        for _ in p.open()
    )
    assert counters["1"]["rows"] == scanned  # the scans read exactly the range's directories
    listed = [p for day in DAYS[1:] for p in (example.raw / "events" / day).glob("*.json")]
    assert counters["1"]["files"] == len(listed)  # as the local executor counts them
    assert counters["3"]["rows"] == sum(per_day[day] for day in DAYS[1:])  # the store
    assert (
        f"| store 3 | rows={counters['3']['rows']}"
        in materializations[0].metadata["drill/operator_metrics"].value
    )
    for day in DAYS[1:]:
        assert ds.dataset(lake / f"day={day}", format="parquet").count_rows() == per_day[day]
    assert _files(lake / f"day={FIRST}") == first_day  # outside the range: untouched
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {"schema_contract": True, "row_count_bounds": True}

    # One partition again: its directory is replaced, its neighbours are not.
    before = {day: _files(lake / f"day={day}") for day in DAYS}
    rerun = materialize_ok(
        defs,
        example.instance,
        selection=AssetSelection.assets("events_cleaned"),
        partition_key=DAYS[2],
    )
    (event,) = _by_key(rerun)["events_cleaned"]
    assert event.metadata["dagster/partition_row_count"].value == per_day[DAYS[2]]
    after = {day: _files(lake / f"day={day}") for day in DAYS}
    assert after[DAYS[2]] != before[DAYS[2]]
    assert {d: f for d, f in after.items() if d != DAYS[2]} == {
        d: f for d, f in before.items() if d != DAYS[2]
    }
    assert ds.dataset(lake / f"day={DAYS[2]}", format="parquet").count_rows() == per_day[DAYS[2]]
    assert event.metadata["drill/schema_version"].value == 1  # the same schema every run


@pytest.mark.spark
def test_sessions_on_spark_count_the_windows_they_never_build_as_the_local_executor(
    example: Example, one_partition: dict[str, Any], tmp_path: Path, spark: Any
) -> None:
    """The sessions plan's windowframe (5) and the segment grouping its windows (6) are fused
    into the aggregate over each event's frame on Spark: their rows are still every member of
    every window (each event with the user's previous one), as the local executor counts them."""
    shutil.copytree(example.root / "plans", tmp_path / "plans")
    # A copy, not a link: the code location only reads roots under its project directory.
    shutil.copytree(example.raw, tmp_path / "data" / "raw")
    on_spark = Example(tmp_path, DagsterInstance.ephemeral())
    defs = on_spark.defs("spark")
    selection = AssetSelection.assets("events_cleaned", "user_sessions")
    result = materialize_ok(defs, on_spark.instance, selection=selection, partition_key=FIRST)
    (sessions,) = _by_key(result)["user_sessions"]
    counters = sessions.metadata["drill/operator_counters"].value
    (local,) = one_partition["events"]["user_sessions"]
    expected = local.metadata["drill/operator_counters"].value
    users = pq.read_table(on_spark.lake / "events_cleaned", columns=["user_id"])["user_id"]
    members = 2 * len(users) - len(users.unique())  # a user's first event has no previous one
    assert counters["5"]["rows"] == counters["6"]["rows"] == members
    assert {k: v["rows"] for k, v in counters.items()} == {
        k: v["rows"] for k, v in expected.items()
    }
