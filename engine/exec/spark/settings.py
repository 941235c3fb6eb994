"""The engine's Spark settings, read from the session's configuration (``spark.conf``, a
``--conf`` of the command line, ``spark_config`` of the Dagster resource).

By default the engine is a guest in the user's process and SparkSession: it patches no library
and changes none of the session's settings. Each of the first three settings trades that for
speed or for row counts, and is off unless set to ``true``:

``spark.drill.py4jShortcuts``
    Patches py4j for the whole process, the user's own PySpark code included, to ask the JVM
    less while DataFrames are built (:mod:`engine.exec.spark.py4j_round_trips`).
``spark.drill.rowMarkers``
    Counts the rows flowing through scans and joins with a filter keeping every row, read from
    Spark's internal SQL status store by a few lines of Java compiled at run time
    (:mod:`engine.exec.spark.row_markers`); classic sessions only. Without it an operator's rows
    are counted by ``DataFrame.observe``.
``spark.drill.keepEmptyRelations``
    Read by :class:`~engine.exec.spark.session.SparkConfig` only, for the sessions the engine
    creates: Spark's optimizer then keeps the operators over an input it proves empty
    (``PruneFilters``, ``PropagateEmptyRelation``, ``AQEPropagateEmptyRelation`` left out), so
    they run and count their rows as the local executor does. Without it such an operator has
    no row count.

The fourth chooses what a run counts, for the price of counting it:

``spark.drill.rowCounts``
    ``operators`` (the default): every operator's rows (``RunResult.metrics``, the
    ``drill/operator_metrics`` of a materialization), read where they cost nothing (parquet
    footers, a store's files, one-to-one operators) and otherwise observed as they flow
    (:mod:`engine.exec.spark.metrics`), which costs a run up to a third of its time (TPC-H
    at scale 1). ``stores``: only the counts that cost nothing; what each store wrote is
    always counted, and so are the records a scan skips (``onError: skip``).

>>> enabled_in({"spark.drill.rowMarkers": "TRUE"}, ROW_MARKERS), enabled_in({}, ROW_MARKERS)
(True, False)
>>> choice_in({}, ROW_COUNTS), choice_in({"spark.drill.rowCounts": " Stores"}, ROW_COUNTS)
('operators', 'stores')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.errors import PlanningError

PY4J_SHORTCUTS = "spark.drill.py4jShortcuts"
ROW_MARKERS = "spark.drill.rowMarkers"
KEEP_EMPTY_RELATIONS = "spark.drill.keepEmptyRelations"
ROW_COUNTS = "spark.drill.rowCounts"

CHOICES: dict[str, tuple[str, ...]] = {ROW_COUNTS: ("operators", "stores")}
"""The values a setting with choices takes, its default first."""


def enabled(spark: Any, setting: str) -> bool:
    """Whether the session ``spark`` turns ``setting`` on (``true``; unset or ``false``: off).

    Example (with a SparkSession)::

        spark.conf.set("spark.drill.rowMarkers", "true")
        enabled(spark, ROW_MARKERS)  # True
    """
    value = spark.conf.get(setting, None)
    return enabled_in({} if value is None else {setting: value}, setting)


def enabled_in(settings: Mapping[str, Any], setting: str) -> bool:
    """Whether ``settings`` turn ``setting`` on; any value but ``true`` or ``false`` is refused."""
    value = str(settings.get(setting, "false")).strip().lower()
    if value not in ("true", "false"):
        raise PlanningError(
            f"{setting} is '{settings[setting]}', not true or false",
            hint=f"set {setting} to true to turn it on, or leave it unset",
        )
    return value == "true"


def choice(spark: Any, setting: str) -> str:
    """The value the session ``spark`` gives ``setting``, one of its :data:`CHOICES` (unset: the
    first).

    Example (with a SparkSession)::

        spark.conf.set("spark.drill.rowCounts", "stores")
        choice(spark, ROW_COUNTS)  # 'stores'
    """
    value = spark.conf.get(setting, None)
    return choice_in({} if value is None else {setting: value}, setting)


def choice_in(settings: Mapping[str, Any], setting: str) -> str:
    """The value ``settings`` give ``setting``, one of its :data:`CHOICES`; any other is
    refused."""
    choices = CHOICES[setting]
    value = str(settings.get(setting, choices[0])).strip().lower()
    if value not in choices:
        raise PlanningError(
            f"{setting} is '{settings[setting]}', not one of {', '.join(choices)}",
            hint=f"set {setting} to one of {', '.join(choices)}, or leave it unset ({choices[0]})",
        )
    return value
