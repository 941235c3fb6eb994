"""The Spark session the engine builds: defaults, pass-through config, a working local session."""

from __future__ import annotations

import sys

import pytest

from engine.exec.spark.session import SparkConfig


def test_defaults_are_local_quiet_and_use_this_interpreter() -> None:
    settings = SparkConfig().settings()
    assert settings["spark.master"] == "local[*]"
    assert settings["spark.ui.enabled"] == "false"
    assert settings["spark.pyspark.python"] == sys.executable
    assert "log4j2.configurationFile" in settings["spark.driver.extraJavaOptions"]
    # Spark's optimizer rules are Spark's own (spark.drill.keepEmptyRelations opts out of three)
    assert "spark.sql.optimizer.excludedRules" not in settings
    assert "spark.sql.adaptive.optimizer.excludedRules" not in settings


def test_any_setting_passes_through_and_wins() -> None:
    config = SparkConfig(
        master="spark://127.0.0.1:7077", conf={"spark.ui.enabled": "true", "x.y": "1"}
    )
    settings = config.settings()
    assert settings["spark.master"] == "spark://127.0.0.1:7077"
    assert settings["spark.ui.enabled"] == "true"
    assert settings["x.y"] == "1"


def test_remote_replaces_master() -> None:
    settings = SparkConfig(remote="sc://127.0.0.1:15002").settings()
    assert settings["spark.remote"] == "sc://127.0.0.1:15002"
    assert "spark.master" not in settings


def test_a_connect_client_sets_only_session_settings() -> None:
    """The server's JVM options, UI and Python workers cannot change from a Spark Connect client
    (PySpark warns for each): a remote config leaves them out, and keeps the SQL settings."""
    settings = SparkConfig(remote="sc://127.0.0.1:15002").settings()
    assert not {"spark.pyspark.python", "spark.ui.enabled", "spark.driver.extraJavaOptions"} & set(
        settings
    )
    assert settings["spark.sql.session.timeZone"] == "UTC"


def test_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValueError, match="masterr"):
        SparkConfig(masterr="local")  # type: ignore[call-arg]


def test_session_runs_a_query(spark) -> None:
    assert spark.range(5).selectExpr("sum(id) AS s").collect()[0]["s"] == 10
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert not spark.conf.get("spark.sql.optimizer.excludedRules", None)


def test_the_postgresql_driver_is_on_spark_jars_where_installed(tmp_path, monkeypatch) -> None:
    from engine.exec.spark import session

    jar = tmp_path / "postgresql.jar"
    jar.write_bytes(b"")
    monkeypatch.setattr(session, "JDBC_DRIVER_JARS", (str(jar), str(tmp_path / "absent.jar")))
    assert SparkConfig().settings()["spark.jars"] == str(jar)
    assert "spark.jars" not in SparkConfig(remote="sc://127.0.0.1:15002").settings()
    mine = SparkConfig(conf={"spark.jars": "/opt/mine.jar"}).settings()
    assert mine["spark.jars"] == "/opt/mine.jar"
