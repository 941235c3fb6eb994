"""`drill-dagster run --pipes` launched by Dagster's PipesSubprocessClient: the real command in a
subprocess reports each store's materialization, metadata and checks to the asset that ran it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    PipesSubprocessClient,
    asset,
    materialize,
)
from dagster_runs import materialize_ok

from drill_dagster import drill_assets, load_definitions, pipes_extras

Kit = Any
CLEAN = AssetKey("clean")
# What the in-process ops record that Pipes must carry too (drill/schema_version needs the
# instance: pipes_extras passes the last one).
SAME = (
    "dagster/column_schema",
    "dagster/row_count",
    "dagster/uri",
    "dagster/column_lineage",
    "dagster/partition_row_count",
    "drill/plan",
    "drill/operator_metrics",
    "drill/operator_counters",
    "drill/plan_file",
    "drill/format",
    "drill/files",
    "drill/code_version",
    "drill/schema_version",
    "drill/schema_fingerprint",
)


def _command(plan: Path, *args: str) -> list[str]:
    # The console script's module, run by this interpreter (the checkout's code, as PYTHONPATH gives it).
    return [sys.executable, "-m", "drill_dagster.cli", "run", "--pipes", *args, str(plan)]


def _materialization(result: Any) -> Any:
    (event,) = result.get_asset_materialization_events()
    return event.materialization


def test_drill_assets_body_launches_the_plan_and_gets_the_in_process_metadata(
    plans_dir: Path,
) -> None:
    instance = DagsterInstance.ephemeral()
    defs = load_definitions(plans_dir, executor="local")
    reference = _materialization(
        materialize_ok(defs, instance, "clean", partition_key="2024-01-01")
    )

    @drill_assets(plan=plans_dir / "clean.json")
    def clean(context, pipes_subprocess_client: PipesSubprocessClient):  # type: ignore[no-untyped-def]
        return pipes_subprocess_client.run(
            command=_command(plans_dir / "clean.json", "--executor", "local"),
            context=context,
            extras=pipes_extras(context),
        ).get_results()

    result = materialize(
        [clean],
        resources={"pipes_subprocess_client": PipesSubprocessClient()},
        instance=instance,
        partition_key="2024-01-03",
    )
    event = _materialization(result)
    assert event.partition == "2024-01-03"
    metadata = event.metadata
    assert set(SAME) <= set(metadata), sorted(set(SAME) - set(metadata))
    assert metadata["dagster/row_count"].value == 2  # 2024-01-03's own rows
    assert (
        metadata["dagster/column_schema"].value == reference.metadata["dagster/column_schema"].value
    )
    assert (
        metadata["dagster/column_lineage"].value
        == reference.metadata["dagster/column_lineage"].value
    )
    for key in ("drill/code_version", "drill/plan_file", "drill/schema_fingerprint"):
        assert metadata[key].value == reference.metadata[key].value, key
    assert metadata["drill/schema_version"].value == 1  # the same schema as before
    assert "(filter 2): expr=e.amount > 0" in metadata["drill/plan"].value
    assert metadata["drill/operator_counters"].value["1"]["rows"] == 2
    assert event.tags["dagster/code_version"] == reference.tags["dagster/code_version"]
    assert event.tags["dagster/data_version"]  # the commit version the store wrote
    day = plans_dir.parent / "data" / "lake" / "clean" / "day=2024-01-03"
    assert metadata["dagster/uri"].value == day.as_uri()
    assert sorted(pq.read_table(day).column("id").to_pylist()) == [5, 6]
    # The store's checks, judged in the subprocess from what it wrote.
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert {name: e.passed for name, e in checks.items()} == {
        "schema_contract": True,
        "row_count_bounds": True,
    }
    assert checks["row_count_bounds"].metadata["description"].value == "2 rows"


def test_a_plain_asset_around_a_one_store_plan_needs_no_extras(tmp_path: Path, kit: Kit) -> None:
    plans_dir = kit.write(
        tmp_path,
        plans={"clean": kit.CLEAN},
        project_yaml="plans: {clean: {params: {day: '2024-01-01'}}}",
    )

    @asset(name="cleaned_events")
    def cleaned_events(context, pipes_subprocess_client: PipesSubprocessClient):  # type: ignore[no-untyped-def]
        return pipes_subprocess_client.run(
            command=_command(plans_dir / "clean.json", "--executor", "local"),
            context=context,
        ).get_results()

    result = materialize(
        [cleaned_events],
        resources={"pipes_subprocess_client": PipesSubprocessClient()},
        instance=DagsterInstance.ephemeral(),
    )
    event = _materialization(result)
    assert event.asset_key == AssetKey("cleaned_events")
    assert event.metadata["dagster/row_count"].value == 2
    assert "drill/schema_version" not in event.metadata  # unknown without the instance
    assert [c.name for c in event.metadata["dagster/column_schema"].value.columns][:2] == [
        "id",
        "user",
    ]


def test_a_failing_plan_fails_the_asset_with_the_engine_s_message(tmp_path: Path, kit: Kit) -> None:
    plans_dir = kit.write(
        tmp_path,
        plans={"clean": kit.CLEAN},
        project_yaml="plans: {clean: {params: {day: '2024-01-02'}}}",
    )
    bad = plans_dir.parent / "data" / "raw" / "events" / "2024-01-02" / "part-0.json"
    bad.write_text('{"id": 4, "amount": 1}\n{"id": 5, "amount": \n')

    @asset(name="clean")
    def clean(context, pipes_subprocess_client: PipesSubprocessClient):  # type: ignore[no-untyped-def]
        return pipes_subprocess_client.run(
            command=_command(plans_dir / "clean.json", "--executor", "local"),
            context=context,
        ).get_results()

    instance = DagsterInstance.ephemeral()
    result = materialize(
        [clean],
        resources={"pipes_subprocess_client": PipesSubprocessClient()},
        instance=instance,
        raise_on_error=False,
    )
    assert not result.success
    # The engine's message (data file and line) is the external process's exception.
    (closed,) = [
        e.dagster_event
        for e in instance.all_logs(result.run_id)
        if e.dagster_event is not None and "closed with exception" in (e.message or "")
    ]
    error = closed.event_specific_data.error
    assert "clean.json" in error.message and "part-0.json:2" in error.message
    assert error.cause is None and error.context is None  # no chain of our frames


@pytest.mark.spark
def test_pipes_on_spark(plans_dir: Path) -> None:
    """The same command on the Spark executor (a session of its own, in the subprocess)."""

    @drill_assets(plan=plans_dir / "clean.json")
    def clean(context, pipes_subprocess_client: PipesSubprocessClient):  # type: ignore[no-untyped-def]
        return pipes_subprocess_client.run(
            command=_command(
                plans_dir / "clean.json",
                "--executor",
                "spark",
                "--master",
                "local[1]",
                "--conf",
                "spark.ui.enabled=false",
            ),
            context=context,
            extras=pipes_extras(context),
        ).get_results()

    result = materialize(
        [clean],
        resources={"pipes_subprocess_client": PipesSubprocessClient()},
        instance=DagsterInstance.ephemeral(),
        partition_key="2024-01-01",
    )
    event = _materialization(result)
    assert event.metadata["dagster/row_count"].value == 2
    assert event.metadata["drill/operator_counters"].value["2"]["rows"] == 2  # the filter's
    assert all(e.passed for e in result.get_asset_check_evaluations())
