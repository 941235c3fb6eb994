"""The SparkSession a run uses, built from a :class:`SparkConfig`.

Defaults suit one machine: ``local[*]``, the UI off, quiet logs, and Python workers that run this
interpreter (else they may lack pyarrow); PySpark's call-site capture (DataFrame debugging) is off.
Spark's optimizer rules are Spark's own, unless ``conf`` sets ``spark.drill.keepEmptyRelations``
to ``true`` (:mod:`engine.exec.spark.settings`): the optimizer then keeps the operators over an
input it proves empty, and they count their rows. Any Spark setting passes through ``conf``: a cluster master (``spark://host:7077``) or Spark Connect
(``remote="sc://host:15002"``).

>>> SparkConfig().settings()["spark.master"]
'local[*]'
>>> SparkConfig(remote="sc://127.0.0.1:15002").settings().get("spark.master") is None
True
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from engine.exec.spark.settings import KEEP_EMPTY_RELATIONS, enabled_in

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.codegen.name = org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator
logger.codegen.level = off
logger.task.name = org.apache.spark.executor.Executor
logger.task.level = off
logger.taskset.name = org.apache.spark.scheduler.TaskSetManager
logger.taskset.level = off
"""
"""Spark's logs at ERROR, but for its code generator: a method too long to compile makes it log
an error with a Java stack trace (hundreds of lines) and then run the stage interpreted, as it
should; the run is not failing and the user has nothing to fix. Nor a failed task's error (its
Java stack trace) and the job it aborts: the job's failure reaches the engine, which says what
went wrong and where (a bad value met at an expression is the user's to fix, not a crash)."""

_QUIET_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")
"""PySpark's loggers that print each failure Spark raises again, as JSON on stderr."""


def _log4j_file() -> Path:
    path = Path(tempfile.gettempdir()) / "drill-dagster-log4j2.properties"
    if not path.exists() or path.read_text() != _LOG4J:
        path.write_text(_LOG4J)
    return path


EXCLUDED_AQE_RULES = "org.apache.spark.sql.execution.adaptive.AQEPropagateEmptyRelation"
"""The adaptive rules a session keeping empty relations leaves out
(``spark.sql.adaptive.optimizer.excludedRules``)."""

EXCLUDED_RULES = ",".join(
    f"org.apache.spark.sql.catalyst.optimizer.{rule}"
    for rule in ("PruneFilters", "PropagateEmptyRelation")
)
"""The optimizer rules a session keeping empty relations leaves out
(``spark.sql.optimizer.excludedRules``)."""

KEEP_EMPTY_RELATIONS_RULES = {
    # Adaptive execution replaces a stage whose input turned out empty, and the observations in
    # the stages below it are dropped with it: the row counts of the operators under an empty
    # result would never arrive.
    "spark.sql.adaptive.optimizer.excludedRules": EXCLUDED_AQE_RULES,
    # Likewise, a filter the optimizer finds always false (a column no file holds, compared)
    # replaces its input with an empty relation: the scans below it unread and uncounted, where
    # the local executor reads and counts them. And an input found empty while planning takes
    # the operators over it away, their row counters with them.
    "spark.sql.optimizer.excludedRules": EXCLUDED_RULES,
}
"""What ``spark.drill.keepEmptyRelations`` sets (a user's own ``conf`` for them still wins)."""


SERVER_SETTINGS = frozenset(
    {
        "spark.pyspark.python",
        "spark.pyspark.driver.python",
        "spark.python.sql.dataFrameDebugging.enabled",
        "spark.ui.enabled",
        "spark.ui.showConsoleProgress",
        "spark.driver.extraJavaOptions",
    }
)
"""The defaults that belong to the process running Spark: a Spark Connect server is started with
them (``scripts/dev.py``); its clients leave them out."""


JDBC_DRIVER_JARS = ("/usr/share/java/postgresql.jar",)
"""JDBC drivers the sessions this module builds put on ``spark.jars`` where they are installed
(Debian's ``libpostgresql-jdbc-java``), for the ``jdbc`` storage engine. A ``spark.jars`` in
``conf`` replaces the list."""


class SparkConfig(BaseModel):
    """How to reach Spark. ``conf`` wins over every default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    master: str = Field("local[*]", description="Spark master URL; ignored with `remote`")
    remote: str | None = Field(None, description="Spark Connect URL, e.g. sc://127.0.0.1:15002")
    app_name: str = "drill-dagster"
    shuffle_partitions: int = Field(8, ge=1)
    quiet: bool = Field(True, description="UI off, JVM logs at ERROR")
    conf: dict[str, str] = Field(default_factory=dict)

    def settings(self) -> dict[str, str]:
        """Every Spark setting the session gets."""
        settings: dict[str, str] = {
            "spark.app.name": self.app_name,
            "spark.sql.shuffle.partitions": str(self.shuffle_partitions),
            "spark.sql.session.timeZone": "UTC",
            # Parquet timestamps as the local executor writes them (microseconds, UTC), not
            # Spark's legacy INT96 (read back as nanoseconds): both executors share stores.
            "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
            "spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable,
            # PySpark 4 records the Python call site of every Column function in the JVM (a
            # dozen py4j calls each, so thousands per plan compiled); the engine names the
            # operator and expression of a failure itself.
            "spark.python.sql.dataFrameDebugging.enabled": "false",
        }
        if enabled_in(self.conf, KEEP_EMPTY_RELATIONS):
            settings.update(KEEP_EMPTY_RELATIONS_RULES)
        if self.quiet:
            settings["spark.ui.enabled"] = "false"
            settings["spark.ui.showConsoleProgress"] = "false"
            settings["spark.driver.extraJavaOptions"] = (
                f"-Dlog4j2.configurationFile=file:{_log4j_file()}"
            )
        if self.remote:
            # A Spark Connect client sets session settings only: the server's JVM, UI and
            # Python workers are the server's own (each one here would warn "cannot modify").
            settings = {k: v for k, v in settings.items() if k not in SERVER_SETTINGS}
            settings["spark.remote"] = self.remote
        else:
            settings["spark.master"] = self.master
            jars = [jar for jar in JDBC_DRIVER_JARS if os.path.exists(jar)]
            if jars:
                settings["spark.jars"] = ",".join(jars)
        settings.update({k: str(v) for k, v in self.conf.items()})
        return settings


def create_session(config: SparkConfig | None = None) -> Any:
    """A SparkSession for ``config`` (an existing one with the same master is reused by Spark)."""
    from pyspark.sql import SparkSession

    config = config or SparkConfig()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder
    for key, value in config.settings().items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if config.quiet:
        for name in _QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)
    if config.quiet and not config.remote:
        session.sparkContext.setLogLevel("ERROR")
    return session


def running_session() -> Any:
    """The session already running in this process (a notebook's, a script's), or None."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession()


def session_for_run(conf: Mapping[str, str] | None = None) -> tuple[Any, bool]:
    """The session a run given none uses, and whether the run started it (and stops it): the
    session already running in this process, used as it is (building one would set the
    engine's defaults on it), else a new one from :class:`SparkConfig`'s defaults and ``conf``."""
    running = running_session()
    if running is not None:
        return running, False
    return create_session(SparkConfig(conf=dict(conf or {}))), True
