"""Resources: the Spark session of a run, and the Drill engine settings the ops run with.

:class:`DrillSparkResource` builds on dagster-pyspark's ``LazyPySparkResource``: the session is
created on first use (a run of the ``local`` executor never starts a JVM), from plain Spark
settings, ``local[*]`` by default (:class:`engine.exec.spark.session.SparkConfig`), a cluster with
``spark.master``, or Spark Connect with ``spark.remote``. A session it created is stopped when the
run ends; one it found running (a notebook's, a test's) is left alone.

With neither ``spark.remote`` nor ``spark.master`` in its settings, a ``DRILL_SPARK_REMOTE``
environment variable (``sc://127.0.0.1:15002``) makes it connect to that Spark Connect server:
``make dev`` (``scripts/dev.py``) starts one and sets it, so the UI's runs share a warm Spark
instead of each starting a JVM.

``catalog_config`` holds the settings of the plans' ``catalog`` engines
(:func:`engine.storage.catalog.session_settings`: Hive support, the Derby metastore under the
warehouse), which :func:`~drill_dagster.load_definitions` fills in. A local session the resource
starts itself gets them, under ``spark_config`` (which wins), so that catalog tables outlive the
run; a running session and a Spark Connect server keep their own catalog.

>>> resource = DrillSparkResource(spark_config={"spark.sql.shuffle.partitions": "4"})
>>> settings = resource.session_config().settings()
>>> settings["spark.master"], settings["spark.sql.shuffle.partitions"]
('local[*]', '4')
>>> DrillSparkResource(spark_config={"spark.remote": "sc://h:15002"}).session_config().remote
'sc://h:15002'
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from dagster import ConfigurableResource, InitResourceContext
from dagster_pyspark import LazyPySparkResource
from dagster_spark.utils import flatten_dict
from pydantic import Field, PrivateAttr

from engine.exec.spark.session import SparkConfig

EXECUTORS = ("spark", "local")
DEFAULT_EXECUTOR: Literal["spark", "local"] = "spark"
REMOTE_ENV = "DRILL_SPARK_REMOTE"
"""The environment variable naming a Spark Connect server for sessions configured with no
``spark.remote`` or ``spark.master`` of their own."""


class DrillSparkResource(LazyPySparkResource):
    """A lazily created SparkSession, configured by plain Spark settings, stopped at run end."""

    spark_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Spark settings, e.g. spark.master or spark.remote (Spark Connect)",
    )
    catalog_config: dict[str, str] = Field(
        default_factory=dict,
        description="the catalog engines' session settings, for a local session it starts",
    )
    _started: bool = PrivateAttr(default=False)

    def session_config(self) -> SparkConfig:
        """The :class:`SparkConfig` the session is built from."""
        conf = {key: str(value) for key, value in flatten_dict(self.spark_config)}
        options: dict[str, Any] = {}
        if "spark.remote" in conf:
            options["remote"] = conf.pop("spark.remote")
        elif "spark.master" not in conf and os.environ.get(REMOTE_ENV):
            options["remote"] = os.environ[REMOTE_ENV]
        if "remote" not in options:
            conf = {**self.catalog_config, **conf}
        if "spark.master" in conf:
            options["master"] = conf.pop("spark.master")
        if "spark.app.name" in conf:
            options["app_name"] = conf.pop("spark.app.name")
        return SparkConfig(conf=conf, **options)

    def _init_session(self) -> None:
        if self._spark_session is not None:
            return
        from pyspark.sql import SparkSession

        from engine.exec.spark.session import create_session

        running = _running_session()
        if isinstance(running, SparkSession):
            self._spark_session = running  # someone else's (a notebook's, a test's): used as is
            self._started = False
            return
        config = self.session_config()
        self._spark_session = create_session(config)
        self._started = running is None
        if self._started and config.remote is None:
            from engine.exec.spark.catalog_tables import keep_derby_log

            keep_derby_log(self._spark_session, config.settings())

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._spark_session is not None and self._started:
            self._spark_session.stop()
        self._spark_session = None
        self._started = False

    @property
    def started_session(self) -> bool:
        """Whether this resource created (and so will stop) its session."""
        return self._started


def _running_session() -> Any:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    return SparkContext._active_spark_context


class DrillResource(ConfigurableResource):
    """How plan operators run: the executor (``spark`` or ``local``), classpath roots, Spark.

    ``executor: local`` runs each store's part of the plan with the engine's local executor (Arrow,
    in this process): for small data and for tests without a JVM.
    """

    executor: Literal["spark", "local"] = DEFAULT_EXECUTOR
    classpath: list[str] = Field(
        default_factory=list, description="roots of classpath storage engines"
    )
    spark: DrillSparkResource = Field(default_factory=DrillSparkResource)
    _state: dict[Any, Any] = PrivateAttr(default_factory=dict)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        self._state = {}

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        for value in self._state.values():  # the engine's Spark runs (spark_ops.plan_runs)
            for run in value if isinstance(value, list) else ():
                run.metrics.close()  # their row-count markers' slot is free for the next run
        self._state = {}

    def run_state(self) -> dict[Any, Any]:
        """What the ops of one run share (the engine's per-plan Spark runs), cleared at run end."""
        return self._state

    def spark_session(self) -> Any:
        """The run's SparkSession (created on first use)."""
        return self.spark.spark_session

    def run(self, context: Any) -> Iterator[Any]:
        """Inside a ``@drill_assets`` function: run the selected stores of its plan and yield a
        ``MaterializeResult`` for each (see :mod:`drill_dagster.decorator`)."""
        from drill_dagster.decorator import run_in_context

        return run_in_context(self, context)


def default_resources(
    *,
    executor: str | None = None,
    spark_config: Mapping[str, Any] | None = None,
    classpath: list[str] | None = None,
    catalog_config: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The resources a Drill code location needs, by key: ``drill``, the IO managers."""
    from drill_dagster.handoff import drill_op_io_manager
    from drill_dagster.io_manager import DrillStoreIOManager

    spark = DrillSparkResource(
        spark_config=dict(spark_config or {}), catalog_config=dict(catalog_config or {})
    )
    drill = DrillResource(
        executor=executor or DEFAULT_EXECUTOR,  # type: ignore[arg-type]
        classpath=list(classpath or []),
        spark=spark,
    )
    return {
        "drill": drill,
        "drill_io_manager": DrillStoreIOManager(spark=spark),
        "drill_mem_io_manager": drill_op_io_manager,
    }
