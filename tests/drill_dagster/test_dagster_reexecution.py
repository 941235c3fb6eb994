"""Re-execution through ``dagster.execute_job``: from failure, of selected steps, of everything.

A run whose store fails (a value in an input file the plan cannot cast) is re-executed once the
file is repaired; the ops that succeeded are not run again, their DataFrames are compiled again
from the plan, and the store writes the same rows a clean run writes, each once.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from dagster import (
    DagsterInstance,
    ReexecutionOptions,
    execute_job,
    instance_for_test,
)
from drill_jobs import reconstructable_job

Kit = Any
GOOD = "customer_id,segment\n10,1\n11,2\n12,3\n"
BROKEN = "customer_id,segment\n10,1\n11,gold\n12,3\n"
RANKED = {
    "storage": {
        "raw": {"type": "fs", "root": "../data/raw"},
        "lake": {"type": "fs", "root": "../data/lake"},
    },
    "query": [
        {"@id": 1, "op": "scan", "storageengine": "raw", "ref": "c",
         "selection": {"path": "customers.csv", "format": "csv"}},
        {"@id": 2, "op": "filter", "input": 1, "expr": "cast(c.customer_id as BIGINT) > 10"},
        {"@id": 3, "op": "project", "input": 2, "projections": [
            {"ref": "output.id", "expr": "cast(c.customer_id as BIGINT)"},
            {"ref": "output.rank", "expr": "cast(c.segment as INT)"}]},
        {"@id": 4, "op": "store", "input": 3, "storageengine": "lake",
         "target": {"path": "ranked", "format": "parquet"}},
    ],
}  # fmt: skip
EXPECTED = [(11, 2), (12, 3)]


@pytest.fixture
def instance() -> Iterator[DagsterInstance]:
    with instance_for_test() as instance:  # a persistent instance: re-execution reads its runs
        yield instance


CHECKS = """\
plans:
  ranked:
    stores:
      ranked: {checks: {columns: {id: BIGINT, rank: INT}, row_count: {min: 1}, blocking: true}}
"""


def _project(root: Path, kit: Kit) -> Path:
    plans_dir = kit.write(root, plans={"ranked": RANKED}, project_yaml=CHECKS)
    (plans_dir.parent / "data" / "raw" / "customers.csv").write_text(GOOD)
    return plans_dir


def _rows(plans_dir: Path) -> list[tuple[Any, ...]]:
    table = pq.read_table(plans_dir.parent / "data" / "lake" / "ranked")
    return sorted(zip(table.column("id").to_pylist(), table.column("rank").to_pylist()))


def _steps(result: Any, kind: str = "STEP_SUCCESS") -> list[str]:
    return sorted(e.step_key for e in result.all_events if e.event_type_value == kind)


def _failed_then_repaired(plans_dir: Path, job: Any, instance: DagsterInstance) -> str:
    """A run whose store fails on a broken input file; the file is repaired after."""
    raw = plans_dir.parent / "data" / "raw" / "customers.csv"
    raw.write_text(BROKEN)
    with execute_job(job, instance=instance, raise_on_error=False) as failed:
        assert not failed.success
        assert _steps(failed, "STEP_FAILURE") == ["ranked.store_4"]
        run_id = failed.run_id
    raw.write_text(GOOD)
    return run_id


@pytest.mark.spark
@pytest.mark.parametrize("executor", ["spark", "local"])
def test_from_failure_writes_what_a_clean_run_writes(
    executor: str,
    tmp_path: Path,
    kit: Kit,
    instance: DagsterInstance,
    spark: Any,
) -> None:
    clean_dir = _project(tmp_path / "clean_run", kit)
    with execute_job(reconstructable_job(clean_dir, executor), instance=instance) as clean:
        assert clean.success
    assert _rows(clean_dir) == EXPECTED

    plans_dir = _project(tmp_path / "reexecuted", kit)
    job = reconstructable_job(plans_dir, executor)
    run_id = _failed_then_repaired(plans_dir, job, instance)
    options = ReexecutionOptions.from_failure(run_id, instance)
    with execute_job(job, instance=instance, reexecution_options=options) as again:
        assert again.success, _steps(again, "STEP_FAILURE")
        # Only the failed store ran; its input was compiled again from the plan.
        assert _steps(again) == ["ranked.store_4"]
        (event,) = again.get_asset_materialization_events()
        metadata = event.materialization.metadata
        assert metadata["dagster/row_count"].value == 2
        assert metadata["drill/operator_counters"].value["2"]["rows"] == 2  # the filter's
        # The store's blocking checks ran in its step, on what it wrote.
        checks = {e.check_name: e.passed for e in again.get_asset_check_evaluations()}
        assert checks == {"schema_contract": True, "row_count_bounds": True}
    assert _rows(plans_dir) == _rows(clean_dir)


@pytest.mark.spark
def test_selected_steps_and_everything_re_execute(
    tmp_path: Path,
    kit: Kit,
    instance: DagsterInstance,
    spark: Any,
) -> None:
    plans_dir = _project(tmp_path, kit)
    job = reconstructable_job(plans_dir, "spark")
    run_id = _failed_then_repaired(plans_dir, job, instance)
    selected = ReexecutionOptions(parent_run_id=run_id, step_selection=["ranked.project_3*"])
    with execute_job(job, instance=instance, reexecution_options=selected) as again:
        assert again.success, _steps(again, "STEP_FAILURE")
        assert _steps(again) == ["ranked.project_3", "ranked.store_4"]
    assert _rows(plans_dir) == EXPECTED
    everything = ReexecutionOptions(parent_run_id=again.run_id)
    with execute_job(job, instance=instance, reexecution_options=everything) as all_again:
        assert all_again.success
        assert len(_steps(all_again)) == 4
    assert _rows(plans_dir) == EXPECTED


@pytest.mark.slow  # a process per step: minutes on a small shared machine
@pytest.mark.parametrize(
    "executor",
    ["local", pytest.param("spark", marks=pytest.mark.spark)],
)
def test_dagster_s_default_executor_runs_each_op_in_its_own_process(
    executor: str,
    tmp_path: Path,
    kit: Kit,
    instance: DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No executor set anywhere (neither the Definitions nor the job): Dagster's default runs
    every step in a process of its own; the inputs are rebuilt there from the plan, and the
    data, the row counts and the checks are a clean in-process run's."""
    support = Path(__file__).resolve().parents[1] / "support"  # step processes import drill_jobs
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(support), os.environ.get("PYTHONPATH", "")])
    )
    plans_dir = _project(tmp_path, kit)
    job = reconstructable_job(plans_dir, executor, "default")
    with execute_job(job, instance=instance) as result:
        assert result.success, _steps(result, "STEP_FAILURE")
        assert len(_steps(result)) == 4
        step_pids = {e.pid for e in result.all_events if e.event_type_value == "STEP_SUCCESS"}
        assert len(step_pids) == 4  # the multiprocess executor: one process per step
        (event,) = result.get_asset_materialization_events()
        assert event.materialization.metadata["dagster/row_count"].value == 2
        checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
        assert checks == {"schema_contract": True, "row_count_bounds": True}
    assert _rows(plans_dir) == EXPECTED
