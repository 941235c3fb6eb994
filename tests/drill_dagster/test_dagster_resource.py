"""The Spark resource: plain Spark settings, lazy session, stops only the session it started."""

from __future__ import annotations

from typing import Any

import pytest
from dagster import build_init_resource_context

from drill_dagster import DrillResource, DrillSparkResource
from drill_dagster.resource import default_resources


class FakeSession:
    def __init__(self) -> None:
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


def test_spark_settings_map_to_the_session_config() -> None:
    resource = DrillSparkResource(
        spark_config={
            "spark.master": "spark://127.0.0.1:7077",
            "spark.app.name": "nightly",
            "spark": {"executor": {"memory": "2g"}},  # nested, as dagster-pyspark accepts
        }
    )
    config = resource.session_config()
    settings = config.settings()
    assert settings["spark.master"] == "spark://127.0.0.1:7077"
    assert settings["spark.app.name"] == "nightly"
    assert settings["spark.executor.memory"] == "2g"
    assert settings["spark.ui.enabled"] == "false"  # the engine's quiet defaults stay
    connect = DrillSparkResource(spark_config={"spark.remote": "sc://127.0.0.1:15002"})
    assert connect.session_config().remote == "sc://127.0.0.1:15002"
    assert "spark.master" not in connect.session_config().settings()


def test_drill_spark_remote_points_unconfigured_sessions_at_a_connect_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`make dev` sets DRILL_SPARK_REMOTE: runs connect to its warm server, unless their own
    settings name a master or a server."""
    monkeypatch.setenv("DRILL_SPARK_REMOTE", "sc://127.0.0.1:15002")
    assert DrillSparkResource().session_config().remote == "sc://127.0.0.1:15002"
    own = DrillSparkResource(spark_config={"spark.master": "local[2]"}).session_config()
    assert own.remote is None
    assert own.master == "local[2]"
    other = DrillSparkResource(spark_config={"spark.remote": "sc://h:1"}).session_config()
    assert other.remote == "sc://h:1"
    monkeypatch.delenv("DRILL_SPARK_REMOTE")
    assert DrillSparkResource().session_config().remote is None


def test_a_session_the_resource_started_is_stopped_at_run_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    created: list[FakeSession] = []

    def create_session(config: Any) -> FakeSession:
        created.append(FakeSession())
        return created[-1]

    monkeypatch.setattr("engine.exec.spark.session.create_session", create_session)
    monkeypatch.setattr("drill_dagster.resource._running_session", lambda: None)
    resource = DrillSparkResource()
    with build_init_resource_context() as context:
        resource.setup_for_execution(context)
        assert created == []  # lazy: nothing until an op asks
        assert resource.spark_session is created[0]
        assert resource.spark_session is created[0]  # one session per run
        assert resource.started_session
        resource.teardown_after_execution(context)
    assert created[0].stopped


@pytest.mark.spark
def test_a_running_session_is_reused_and_left_running(spark: Any) -> None:
    resource = DrillSparkResource(spark_config={"spark.master": "local[2]"})
    with build_init_resource_context() as context:
        assert resource.spark_session is spark
        assert not resource.started_session
        resource.teardown_after_execution(context)
    assert spark.range(3).count() == 3  # still alive


def test_default_resources_share_one_spark_resource() -> None:
    resources = default_resources(executor="local", spark_config={"spark.master": "local[1]"})
    drill = resources["drill"]
    assert isinstance(drill, DrillResource) and drill.executor == "local"
    assert resources["drill_io_manager"].spark is drill.spark
    assert set(resources) == {"drill", "drill_io_manager", "drill_mem_io_manager"}


def test_a_dagster_run_gets_one_session_and_stops_it_at_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dagster import asset, materialize

    created: list[FakeSession] = []
    monkeypatch.setattr(
        "engine.exec.spark.session.create_session",
        lambda config: created.append(FakeSession()) or created[-1],
    )
    monkeypatch.setattr("drill_dagster.resource._running_session", lambda: None)

    @asset
    def uses_spark(drill: DrillResource) -> None:
        assert drill.spark_session() is drill.spark_session()
        assert not drill.spark_session().stopped

    assert materialize([uses_spark], resources=default_resources(executor="spark")).success
    assert len(created) == 1 and created[0].stopped
