"""`make dev`'s Dagster instance: the repository's dagster.yaml, in the DAGSTER_HOME that
scripts/dev.py gives `dagster dev`."""

from __future__ import annotations

import importlib.util
import shutil
from itertools import pairwise
from pathlib import Path
from types import ModuleType

import pytest
from dagster import DagsterInstance

ROOT = Path(__file__).resolve().parents[2]


def _dev_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("drill_dev_script", ROOT / "scripts" / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_home_without_settings_gets_the_repository_dagster_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    _dev_script().instance_settings({"DAGSTER_HOME": str(home)})
    assert (home / "dagster.yaml").read_text() == (ROOT / "dagster.yaml").read_text()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with DagsterInstance.get() as instance:
        # queued runs leave the queue every second, not every five
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert instance.run_coordinator.dequeue_interval_seconds == 1


def test_a_home_with_its_own_settings_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    _dev_script().instance_settings({"DAGSTER_HOME": str(tmp_path)})
    assert (tmp_path / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"


def test_without_a_home_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _dev_script().instance_settings({})
    assert list(tmp_path.iterdir()) == []


def test_the_warm_spark_server_keeps_the_plans_catalog_tables(tmp_path: Path) -> None:
    # Hive support and the Derby metastore under the plans' warehouse, as a session the Dagster
    # resource starts gets them: a restarted server finds the catalog tables it wrote.
    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "t.json").write_text(
        '{"storage": {"cat": {"type": "catalog", "warehouse": "../wh", "database": "a"}},'
        ' "query": [{"@id": 1, "op": "constant", "content": [{"x": 1}]},'
        ' {"@id": 2, "op": "store", "input": 1, "storageengine": "cat", "target": {"table": "t"}}]}'
    )
    dev = _dev_script()
    command = dev.connect_command(15002, "local[1]", dev.catalog_conf(plans))
    pairs = [value for flag, value in pairwise(command) if flag == "--conf"]
    confs = dict(pair.split("=", 1) for pair in pairs)
    assert confs["spark.sql.catalogImplementation"] == "hive"
    assert confs["spark.sql.warehouse.dir"] == str((tmp_path / "wh").resolve())
    assert (
        str((tmp_path / "wh").resolve() / "metastore_db")
        in confs["spark.hadoop.javax.jdo.option.ConnectionURL"]
    )


def test_plans_without_a_catalog_engine_add_no_catalog_settings(tmp_path: Path) -> None:
    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "c.json").write_text(
        '{"query": [{"@id": 1, "op": "constant", "content": [{"x": 1}]}]}'
    )
    command = _dev_script().connect_command(15002, "local[1]", _dev_script().catalog_conf(plans))
    assert not any("catalogImplementation" in part for part in command)


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm")
def test_without_a_home_the_instance_is_a_throwaway_one_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every event of a run is a SQLite commit: in memory it does not wait for the disk
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env: dict[str, str] = {}
    home = _dev_script().throwaway_home(env)
    assert home is not None
    try:
        assert home.parent == Path("/dev/shm")
        assert env["DAGSTER_HOME"] == str(home)
        assert (home / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"
    finally:
        shutil.rmtree(home)


def test_a_home_that_is_set_is_not_replaced(tmp_path: Path) -> None:
    env = {"DAGSTER_HOME": str(tmp_path)}
    assert _dev_script().throwaway_home(env) is None
    assert env == {"DAGSTER_HOME": str(tmp_path)}
