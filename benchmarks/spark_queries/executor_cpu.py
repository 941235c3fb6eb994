"""The executor CPU time of the Spark stages a run started: steadier than wall time on a shared
machine (the other VMs' load moves a run's wall time by up to 30%; its tasks' CPU time by less).

Read from Spark's status store (classic sessions only), whose ``stageList`` is internal API:
where it is missing, :meth:`ExecutorCpu.take` returns None and the benchmark prints no CPU
column.
"""

from __future__ import annotations

from typing import Any


class ExecutorCpu:
    """``take()``: the milliseconds of executor CPU of the stages that ran since the last call."""

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self._seen: set[tuple[int, int]] = set()
        self.take()  # earlier stages are not this run's

    def take(self) -> float | None:
        try:
            stages = self._stages()
        except Exception:  # not a classic session, or another Spark's internals
            return None
        total = 0.0
        for i in range(stages.size()):
            stage = stages.apply(i)
            key = (stage.stageId(), stage.attemptId())
            if key not in self._seen:
                self._seen.add(key)
                total += stage.executorCpuTime() / 1e6
        return total

    def _stages(self) -> Any:
        spark = self._spark
        jvm, gateway = spark._jvm, spark.sparkContext._gateway
        store = spark.sparkContext._jsc.sc().statusStore()
        every = jvm.java.util.ArrayList()  # no status filter: every stage
        return store.stageList(every, False, False, gateway.new_array(jvm.double, 0), every)
