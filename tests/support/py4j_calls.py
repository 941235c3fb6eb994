"""Counting what the driver asks the JVM (never timing it), for the tests that bound it."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import py4j.java_gateway
from pyspark.sql.classic import dataframe as classic

from engine.exec.spark import executor
from engine.exec.spark.executor import SCAN_THREAD_PREFIX, SparkPlanRun
from engine.run import build_engines


class Counts:
    calls = 0
    frames = 0


@contextmanager
def counted() -> Iterator[Counts]:
    """Counts the py4j calls of this thread and of the threads building a run's scans (not
    py4j's own garbage collection thread) and the DataFrames built inside the block."""
    counts = Counts()
    send = py4j.java_gateway.GatewayClient.send_command
    init = classic.DataFrame.__init__
    me = threading.current_thread()

    def counting_send(self: Any, command: str, *args: Any, **kwargs: Any) -> Any:
        thread = threading.current_thread()
        if thread is me or thread.name.startswith(SCAN_THREAD_PREFIX):
            counts.calls += 1
        return send(self, command, *args, **kwargs)

    def counting_init(self: Any, *args: Any, **kwargs: Any) -> None:
        counts.frames += 1
        init(self, *args, **kwargs)

    py4j.java_gateway.GatewayClient.send_command = counting_send  # type: ignore[method-assign]
    classic.DataFrame.__init__ = counting_init  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        py4j.java_gateway.GatewayClient.send_command = send  # type: ignore[method-assign]
        classic.DataFrame.__init__ = init  # type: ignore[method-assign]


def warm_run(plan: Any, spark: Any, *, emptied: str | None = None) -> tuple[int, Any]:
    """The DataFrames a warm run of ``plan`` on the Spark executor builds (one run before it
    warms the caches), and its result. ``emptied`` names a property of the planner
    (``one_reader``, ``read_through``) that no operator of the run gets: the compiler without
    what that property saves."""

    def once() -> Any:
        engines = build_engines(plan, base_dir=None, classpath=[])
        with without_property(emptied):
            run = SparkPlanRun(plan, spark, engines=engines, params={})
        return run.run()

    once()
    with counted() as counts:
        result = once()
    return counts.frames, result


@contextmanager
def without_property(name: str | None) -> Iterator[None]:
    """Runs planned inside the block get the planner's properties
    (:func:`~engine.planner.properties.plan_properties`) with ``name`` off for every operator
    (None: as they are): to compare what that decision saves."""
    if name is None:
        yield
        return
    planned = executor.plan_properties

    def without(*args: Any, **kwargs: Any) -> dict[str, Any]:
        found = planned(*args, **kwargs)
        return {op_id: dataclasses.replace(p, **{name: False}) for op_id, p in found.items()}

    executor.plan_properties = without  # type: ignore[assignment]
    try:
        yield
    finally:
        executor.plan_properties = planned  # type: ignore[assignment]
