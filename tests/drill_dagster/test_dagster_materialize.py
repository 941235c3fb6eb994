"""dagster.materialize of a tiny plans project with the local executor: data, metadata, checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from dagster import (
    AssetKey,
    AssetSelection,
    DagsterInstance,
    Definitions,
    ExecuteInProcessResult,
    TableColumnDep,
    materialize,
)
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)
from dagster_runs import materialize_ok

from drill_dagster import DrillResource, drill_assets, load_definitions
from drill_dagster.resource import default_resources

Kit = Any
CLEAN, ENRICHED, TOTALS = AssetKey("clean"), AssetKey("enriched"), AssetKey("totals")
EVERY_KEY = (
    "dagster/column_schema",
    "dagster/row_count",
    "dagster/uri",
    "dagster/column_lineage",
    "dagster/partition_row_count",
    "drill/plan",
    "drill/operator_metrics",
    "drill/operator_counters",
    "drill/plan_file",
    "drill/schema_version",
)


@pytest.fixture
def defs(plans_dir: Path) -> Definitions:
    return load_definitions(plans_dir, executor="local")


def _materializations(result: ExecuteInProcessResult, key: AssetKey) -> list[Any]:
    return [
        e.materialization for e in result.get_asset_materialization_events() if e.asset_key == key
    ]


def _keys(definition: Any) -> set[AssetKey]:
    keys = getattr(definition, "keys", None) or set()
    return set(keys) | {k.asset_key for k in getattr(definition, "check_keys", ())}


def _steps(result: ExecuteInProcessResult) -> list[str]:
    return [e.step_key for e in result.all_events if e.event_type_value == "STEP_SUCCESS"]


def test_one_partition_writes_its_rows_and_every_metadata_key(
    defs: Definitions, plans_dir: Path
) -> None:
    instance = DagsterInstance.ephemeral()
    result = materialize_ok(defs, instance, "clean", partition_key="2024-01-01")
    (event,) = _materializations(result, CLEAN)
    metadata = event.metadata
    assert event.partition == "2024-01-01"
    assert set(EVERY_KEY) <= set(metadata)
    assert metadata["dagster/row_count"].value == 2  # the amount-0 row is filtered out
    assert metadata["dagster/partition_row_count"].value == 2
    location = plans_dir.parent / "data" / "lake" / "clean" / "day=2024-01-01"
    assert metadata["dagster/uri"].value == location.as_uri()
    table = pq.read_table(location)
    assert sorted(table.column("id").to_pylist()) == [1, 2]
    assert sorted(table.column("amount").to_pylist()) == [10, 14]
    columns = {c.name: c for c in metadata["dagster/column_schema"].value.columns}
    assert list(columns) == ["id", "user", "user.id", "user.name", "amount"]
    assert columns["user"].type == "MAP" and columns["user.name"].type == "VARCHAR"
    assert columns["user.name"].constraints.nullable  # OPTIONAL; the type is stated once
    assert columns["user.name"].description is None and not columns["user.name"].tags
    lineage = metadata["dagster/column_lineage"].value.deps_by_column
    events = AssetKey(["raw", "events"])
    assert lineage["amount"] == [TableColumnDep(asset_key=events, column_name="amount")]
    assert lineage["user"] == [TableColumnDep(asset_key=events, column_name="user")]
    assert "(filter 2): expr=e.amount > 0" in metadata["drill/plan"].value
    assert "| scan 1 |" in metadata["drill/operator_metrics"].value
    assert metadata["drill/plan_file"].value == str(plans_dir / "clean.json")
    assert metadata["drill/schema_version"].value == 1
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {"schema_contract": True, "row_count_bounds": True}


def test_a_three_day_range_is_one_run_with_row_counts_per_partition(
    defs: Definitions, plans_dir: Path, kit: Kit
) -> None:
    instance = DagsterInstance.ephemeral()
    tags = {
        ASSET_PARTITION_RANGE_START_TAG: "2024-01-01",
        ASSET_PARTITION_RANGE_END_TAG: "2024-01-03",
    }
    result = materialize_ok(defs, instance, "clean", tags=tags)
    events = _materializations(result, CLEAN)
    counts = {e.partition: e.metadata["dagster/partition_row_count"].value for e in events}
    assert counts == {"2024-01-01": 2, "2024-01-02": 1, "2024-01-03": 2}
    # Each partition's materialization carries its own rows, and the check judged each.
    assert {e.partition: e.metadata["dagster/row_count"].value for e in events} == counts
    (check,) = [
        c for c in result.get_asset_check_evaluations() if c.check_name == "row_count_bounds"
    ]
    assert check.passed
    assert check.description == "2024-01-01: 2 rows, 2024-01-02: 1 rows, 2024-01-03: 2 rows"
    # Per-operator row counts summed over the three days, as the Spark run reports them.
    counters = events[0].metadata["drill/operator_counters"].value
    assert counters["1"]["rows"] == 6  # the scan saw every raw event of the three days
    assert counters["2"]["rows"] == 5 and counters["3"]["rows"] == 5  # filter, project
    assert counters["4"]["rows"] == 5  # the store
    assert "| filter 2 | rows=5 |" in events[0].metadata["drill/operator_metrics"].value
    ops = [f"clean.{n}" for n in ("filter_2", "project_3", "scan_1", "store_4")]
    assert sorted(_steps(result)) == ops  # the checks ran in the store's step
    for day in kit.DAYS:
        written = pq.read_table(plans_dir.parent / "data" / "lake" / "clean" / f"day={day}")
        assert written.num_rows == counts[day]

    # A re-run of one partition replaces exactly that partition's files.
    before = sorted((plans_dir.parent / "data" / "lake" / "clean").glob(".day=2024-01-03.v-*"))
    rerun = materialize_ok(defs, instance, "clean", partition_key="2024-01-02")
    (event,) = _materializations(rerun, CLEAN)
    assert event.metadata["drill/schema_version"].value == 1  # same schema, same version
    after = sorted((plans_dir.parent / "data" / "lake" / "clean").glob(".day=2024-01-03.v-*"))
    assert before == after


def test_selecting_one_store_runs_only_the_ops_it_needs(defs: Definitions, plans_dir: Path) -> None:
    instance = DagsterInstance.ephemeral()
    tags = {
        ASSET_PARTITION_RANGE_START_TAG: "2024-01-01",
        ASSET_PARTITION_RANGE_END_TAG: "2024-01-03",
    }
    materialize_ok(defs, instance, "clean", tags=tags)
    result = materialize_ok(defs, instance, "totals")
    assert sorted(_steps(result)) == [
        "split.collapsingaggregate_6",
        "split.scan_1",
        "split.store_7",
    ]
    (event,) = _materializations(result, TOTALS)
    assert event.metadata["dagster/row_count"].value == 1
    lake = plans_dir.parent / "data" / "lake"
    (line,) = (lake / "totals").glob("*.json")
    assert json.loads(line.read_text()) == {"n": 5, "total": 48}
    assert not (lake / "enriched").exists()
    lineage = event.metadata["dagster/column_lineage"].value.deps_by_column
    assert lineage == {"total": [TableColumnDep(asset_key=CLEAN, column_name="amount")]}


def test_a_join_across_a_store_and_a_source_traces_both(defs: Definitions) -> None:
    instance = DagsterInstance.ephemeral()
    materialize_ok(defs, instance, "clean", partition_key="2024-01-02")
    result = materialize_ok(defs, instance, "enriched")
    (event,) = _materializations(result, ENRICHED)
    assert event.metadata["dagster/row_count"].value == 1
    lineage = event.metadata["dagster/column_lineage"].value.deps_by_column
    assert lineage["segment"] == [
        TableColumnDep(asset_key=AssetKey(["raw", "customers_csv"]), column_name="segment")
    ]


def test_a_failing_check_and_bad_data_are_reported_with_their_reason(
    tmp_path: Path, kit: Kit
) -> None:
    yaml_text = kit.PROJECT_YAML.replace("row_count: {min: 1, max: 100}", "row_count: {max: 1}")
    plans_dir = kit.write(tmp_path, project_yaml=yaml_text)
    defs = load_definitions(plans_dir, executor="local")
    instance = DagsterInstance.ephemeral()
    result = materialize_ok(defs, instance, "clean", partition_key="2024-01-01")
    (check,) = [
        e for e in result.get_asset_check_evaluations() if e.check_name == "row_count_bounds"
    ]
    assert not check.passed and check.description == "2 rows, not at most 1"
    # The checks alone (the UI's "Execute checks"; not partitioned): the store's step judges the
    # latest materialization and writes nothing.
    lake = plans_dir.parent / "data" / "lake" / "clean"
    files = sorted(lake.rglob("*"))
    alone = materialize(
        [a for a in defs.assets if CLEAN in _keys(a)],  # type: ignore[arg-type]
        selection=AssetSelection.checks_for_assets(CLEAN),
        resources=defs.resources,
        instance=instance,
        raise_on_error=False,
    )
    assert alone.success
    assert not alone.get_asset_materialization_events()
    assert sorted(lake.rglob("*")) == files
    evaluations = {e.check_name: e for e in alone.get_asset_check_evaluations()}
    assert evaluations["row_count_bounds"].description == "2 rows, not at most 1"
    assert evaluations["schema_contract"].passed

    bad = plans_dir.parent / "data" / "raw" / "events" / "2024-01-02" / "part-0.json"
    bad.write_text('{"id": 4, "amount": 1}\n{"id": 5, "amount": \n')
    result = materialize(
        list(defs.assets),  # type: ignore[arg-type]
        selection=["clean"],
        resources=defs.resources,
        instance=instance,
        partition_key="2024-01-02",
        raise_on_error=False,
    )
    (failure,) = result.get_step_failure_events()
    description = failure.event_specific_data.user_failure_data.description
    assert description.startswith(f"{plans_dir / 'clean.json'} (partition 2024-01-02): ")
    assert "part-0.json:2" in description


def test_drill_assets_decorator_runs_the_plan_around_user_code(plans_dir: Path) -> None:
    calls = []

    @drill_assets(plan=plans_dir / "split.json")
    def split(context, drill: DrillResource):  # type: ignore[no-untyped-def]
        calls.append("before")
        yield from drill.run(context)
        calls.append("after")

    defs = load_definitions(plans_dir, executor="local")
    instance = DagsterInstance.ephemeral()
    materialize_ok(defs, instance, "clean", partition_key="2024-01-01")
    specs = [a for a in defs.assets if not hasattr(a, "node_def")]  # the sources
    result = materialize(
        [split, *specs],  # type: ignore[list-item]
        selection=["totals"],
        resources=default_resources(executor="local"),
        instance=instance,
    )
    assert calls == ["before", "after"]
    (event,) = _materializations(result, TOTALS)
    assert event.metadata["dagster/row_count"].value == 1
    assert "dagster/column_lineage" in event.metadata
    assert event.tags["dagster/data_version"]  # the store's new data version
    assert event.tags["dagster/code_version"] == split.specs_by_key[TOTALS].code_version
    assert split.keys == {ENRICHED, TOTALS}
    assert split.specs_by_key[ENRICHED].deps[0].asset_key in {
        CLEAN,
        AssetKey(["raw", "customers_csv"]),
    }


def test_in_one_run_a_plan_reads_another_plans_store_after_it_is_written(
    tmp_path: Path, kit: Kit
) -> None:
    plans_dir = kit.write(tmp_path, project_yaml="plans: {clean: {params: {day: '2024-01-03'}}}")
    defs = load_definitions(plans_dir, executor="local")
    result = materialize_ok(defs, DagsterInstance.ephemeral(), "clean", "totals")
    steps = _steps(result)
    assert steps.index("clean.store_4") < steps.index("split.scan_1")
    (totals,) = _materializations(result, TOTALS)
    assert totals.metadata["dagster/row_count"].value == 1
    (line,) = (plans_dir.parent / "data" / "lake" / "totals").glob("*.json")
    assert json.loads(line.read_text()) == {"n": 2, "total": 6}


def test_a_range_run_checks_each_partition_s_own_rows(tmp_path: Path, kit: Kit) -> None:
    """Five rows over three days: within `max: 2` day by day (the total would not be)."""
    for bound, passed in (("max: 2", True), ("max: 1", False)):
        yaml_text = kit.PROJECT_YAML.replace(
            "row_count: {min: 1, max: 100}", f"row_count: {{{bound}}}"
        )
        defs = load_definitions(
            kit.write(tmp_path / bound[-1], project_yaml=yaml_text), executor="local"
        )
        tags = {
            ASSET_PARTITION_RANGE_START_TAG: "2024-01-01",
            ASSET_PARTITION_RANGE_END_TAG: "2024-01-03",
        }
        result = materialize_ok(defs, DagsterInstance.ephemeral(), "clean", tags=tags)
        (check,) = [
            e for e in result.get_asset_check_evaluations() if e.check_name == "row_count_bounds"
        ]
        assert check.passed is passed
    assert check.description == (
        "partition 2024-01-01: 2 rows, partition 2024-01-03: 2 rows, not at most 1 "
        "(3 partitions, 5 rows)"
    )


@pytest.mark.parametrize("blocking", [True, False])
def test_checks_run_in_the_store_s_step_and_a_blocking_failure_stops_downstream(
    tmp_path: Path, kit: Kit, blocking: bool
) -> None:
    """`clean` writes 2 rows against `max: 1`: blocking, `split` (which reads it) does not run."""
    yaml_text = f"""\
plans:
  clean:
    params: {{day: "2024-01-03"}}
    stores:
      clean:
        checks: {{columns: {{id: BIGINT}}, row_count: {{max: 1}}, blocking: {str(blocking).lower()}}}
"""
    defs = load_definitions(kit.write(tmp_path, project_yaml=yaml_text), executor="local")
    assert not defs.asset_checks  # no check op: the specs are the multi-asset's
    (clean_def,) = [a for a in defs.assets if CLEAN in _keys(a)]
    assert {(s.name, s.blocking) for s in clean_def.check_specs} == {
        ("schema_contract", blocking),
        ("row_count_bounds", blocking),
    }
    result = materialize(
        list(defs.assets),  # type: ignore[arg-type]
        selection=AssetSelection.assets(CLEAN, TOTALS),
        resources=defs.resources,
        instance=DagsterInstance.ephemeral(),
        raise_on_error=False,
    )
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert evaluations["row_count_bounds"].description == "2 rows, not at most 1"
    assert not evaluations["row_count_bounds"].passed and evaluations["schema_contract"].passed
    texts = [s.description for s in clean_def.check_specs] + [
        e.description for e in evaluations.values()
    ]
    assert "Rows written: at most 1." in texts and not any("None" in str(t) for t in texts)
    checked_in = {
        e.step_key for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }
    assert checked_in == {"clean.store_4"}
    assert _materializations(result, CLEAN)  # written and recorded before it was judged
    if blocking:
        assert not result.success
        (failure,) = result.get_step_failure_events()
        assert failure.step_key == "clean.store_4"
        assert "blocking asset check failed" in failure.event_specific_data.error.message
        assert "clean: row_count_bounds" in failure.event_specific_data.error.message
        assert not _materializations(result, TOTALS)
        assert "split.scan_1" not in _steps(result)
    else:
        assert result.success
        assert _materializations(result, TOTALS)


def test_drill_assets_carries_the_stores_checks(tmp_path: Path, kit: Kit) -> None:
    yaml_text = """\
plans:
  clean:
    params: {day: "2024-01-02"}
    stores: {clean: {checks: {row_count: {min: 1}}}}
"""
    plans_dir = kit.write(tmp_path, plans={"clean": kit.CLEAN}, project_yaml=yaml_text)

    @drill_assets(plan=plans_dir / "clean.json")
    def clean(context, drill: DrillResource):  # type: ignore[no-untyped-def]
        yield from drill.run(context)

    assert [s.name for s in clean.check_specs] == ["row_count_bounds"]
    instance = DagsterInstance.ephemeral()
    result = materialize([clean], resources=default_resources(executor="local"), instance=instance)
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.passed and evaluation.description == "1 rows"
    alone = materialize(
        [clean],
        selection=AssetSelection.checks_for_assets(CLEAN),
        resources=default_resources(executor="local"),
        instance=instance,
    )
    assert not alone.get_asset_materialization_events()
    (evaluation,) = alone.get_asset_check_evaluations()
    assert evaluation.passed and evaluation.description == "1 rows"
