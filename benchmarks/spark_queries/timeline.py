"""Where one run's wall time goes, on Spark's own clock: the driver building DataFrames, the
jobs a reader starts before the write, Spark planning the write, the write's jobs and the gaps
between them, and what follows the write. Classic sessions only (Spark's status store).

>>> Timeline(total=1.0, driver=0.2, steps=5, schema_jobs=0.0, to_first_job=0.1, jobs=0.6,
...          between=0.05, after=0.05).other
0.0
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any

from pyspark.sql.classic import dataframe as classic


@dataclass(frozen=True)
class Timeline:
    """One run's phases, in seconds (``steps``: the DataFrames it built, each an analysis)."""

    total: float
    driver: float  # from the call to the write: building DataFrames, reading schemas
    steps: int
    schema_jobs: float  # jobs before the write (Spark's parquet reader inferring a schema)
    to_first_job: float  # Spark optimizing and planning the write
    jobs: float  # the write's jobs, end to end, summed
    between: float  # between the write's jobs: adaptive re-planning
    after: float  # from the write's end: a store's commit, collecting metrics

    @property
    def other(self) -> float:
        """The write's time outside its jobs and the gaps between them (the last job's end to
        the write's return)."""
        inside = self.to_first_job + self.jobs + self.between
        return round(self.total - self.driver - inside - self.after, 9)

    @staticmethod
    def names() -> list[str]:
        return [f.name for f in fields(Timeline)]


class Clock:
    """Times the runs of ``spark``: :meth:`run` calls a function that writes once through
    ``writer`` (a module and the name of its write function, wrapped while it runs)."""

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self._store = spark.sparkContext._jsc.sc().statusStore()
        self._seen = {job for job, _, _ in self._jobs()}

    def run(self, call: Callable[[], object], writer: tuple[Any, str]) -> Timeline:
        marks: dict[str, float] = {}
        with _wrapped(*writer, marks), _counting_dataframes() as steps:
            start = time.time()
            call()
            end = time.time()
        listed = self._jobs()
        jobs = [(s, e) for job, s, e in listed if job not in self._seen]
        self._seen.update(job for job, _, _ in listed)
        before = [(s, e) for s, e in jobs if s < marks["write"]]
        during = sorted((s, e) for s, e in jobs if s >= marks["write"])
        busy = sum(e - s for s, e in during)
        return Timeline(
            total=end - start,
            driver=marks["write"] - start,
            steps=steps[0],
            schema_jobs=sum(e - s for s, e in before),
            to_first_job=during[0][0] - marks["write"] if during else 0.0,
            jobs=busy,
            between=(during[-1][1] - during[0][0] - busy) if during else 0.0,
            after=end - marks["written"],
        )

    def _jobs(self) -> list[tuple[int, float, float]]:
        jvm = self._spark._jvm
        listed = self._store.jobsList(jvm.java.util.ArrayList())
        found = []
        for i in range(listed.size()):
            job = listed.apply(i)
            if job.submissionTime().isDefined() and job.completionTime().isDefined():
                submitted = job.submissionTime().get().getTime() / 1000
                found.append((job.jobId(), submitted, job.completionTime().get().getTime() / 1000))
        return found


@contextmanager
def _wrapped(owner: Any, name: str, marks: dict[str, float]) -> Iterator[None]:
    original = getattr(owner, name)

    def write(*args: Any, **kwargs: Any) -> Any:
        marks["write"] = time.time()
        try:
            return original(*args, **kwargs)
        finally:
            marks["written"] = time.time()

    setattr(owner, name, write)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextmanager
def _counting_dataframes() -> Iterator[list[int]]:
    count = [0]
    original = classic.DataFrame.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        count[0] += 1

    classic.DataFrame.__init__ = init  # type: ignore[method-assign]
    try:
        yield count
    finally:
        classic.DataFrame.__init__ = original  # type: ignore[method-assign]


def planning_phases(df: Any, repeat: int = 7) -> dict[str, float]:
    """Spark's analysis, optimization and planning of ``df`` (a fresh plan each time, so nothing
    is reused), in seconds: the medians of ``repeat`` plannings after one to warm up."""
    seen: dict[str, list[float]] = {}
    for i in range(repeat + 1):
        execution = df.select("*")._jdf.queryExecution()
        execution.executedPlan()
        phases = execution.tracker().phases()
        names = phases.keys().iterator()
        while names.hasNext():
            phase = names.next()
            summary = phases.apply(phase)
            if i:
                seen.setdefault(phase, []).append(summary.endTimeMs() - summary.startTimeMs())
    return {phase: statistics.median(ms) / 1000 for phase, ms in seen.items()}
