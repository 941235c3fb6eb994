"""Progress of a Spark run: live on a terminal, one summary line per fragment otherwise.

The Spark compiler runs each fragment's action (a store, or the collect of a plan's last
operator) inside :func:`fragment_jobs`, which names its Spark jobs with a job group
(``drill:<kind> <operator id>``) and records when the fragment started. :class:`SparkProgress`
follows those groups through Spark's status tracker: on a terminal a background thread redraws
one line (the running fragment, its jobs, the stage running and its tasks done) a few times a
second; at the end (terminal or not) it prints one line per fragment with its operator id, the
rows it wrote and its seconds.

Under Spark Connect there is no status tracker on the client: the summary lines remain.

>>> summary_line(FragmentTiming(0, "store", "7", 1.0, 3.5), rows=1234)
'fragment 0: store 7, 1234 rows, 2.50 s'
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, TextIO

GROUP_PREFIX = "drill:"
"""Job groups of fragments start with this."""


@dataclass
class FragmentTiming:
    """When one fragment (an action of the run) started and ended (``time.monotonic``)."""

    index: int
    kind: str
    operator_id: str
    started: float
    ended: float | None = None

    @property
    def group(self) -> str:
        return f"{GROUP_PREFIX}{self.kind} {self.operator_id}"


@dataclass(frozen=True)
class StageProgress:
    """A snapshot of a fragment's Spark work from the status tracker."""

    jobs: int
    stages: int
    tasks_total: int
    tasks_done: int
    tasks_active: int
    running_stage: int | None


_fragments: list[FragmentTiming] = []
_lock = threading.Lock()


def spark_context(spark: Any) -> Any:
    """The session's SparkContext, or None under Spark Connect (where it does not exist)."""
    try:
        return spark.sparkContext
    except Exception:  # Connect sessions raise on .sparkContext
        return None


@contextmanager
def fragment_jobs(spark: Any, kind: str, operator_id: str) -> Iterator[FragmentTiming]:
    """Run the block's Spark jobs as fragment ``kind operator_id`` (a job group; see the module
    docstring), restoring the caller's job group afterwards."""
    with _lock:
        fragment = FragmentTiming(len(_fragments), kind, operator_id, time.monotonic())
        _fragments.append(fragment)
    sc = spark_context(spark)
    previous = sc.getLocalProperty("spark.jobGroup.id") if sc is not None else None
    if sc is not None:
        sc.setJobGroup(fragment.group, f"drill-dagster {kind} {operator_id}")
    try:
        yield fragment
    finally:
        fragment.ended = time.monotonic()
        if sc is not None:
            sc.setLocalProperty("spark.jobGroup.id", previous)  # None removes it
            if previous is None:
                sc.setLocalProperty("spark.job.description", None)


def stage_progress(spark: Any, group: str) -> StageProgress | None:
    """What Spark's status tracker knows of the jobs of ``group`` (None under Connect)."""
    sc = spark_context(spark)
    if sc is None:
        return None
    tracker = sc.statusTracker()
    jobs = tracker.getJobIdsForGroup(group)
    stages = total = done = active = 0
    running = None
    seen: set[int] = set()
    for job_id in jobs:
        job = tracker.getJobInfo(job_id)
        if job is None:
            continue
        finished = job.status != "RUNNING"
        for stage_id in job.stageIds:
            stage = tracker.getStageInfo(stage_id) if stage_id not in seen else None
            seen.add(stage_id)
            if stage is None or (finished and stage.numCompletedTasks == 0):
                continue  # shared with another job, or skipped (its shuffle output was reused)
            stages += 1
            total += stage.numTasks
            done += stage.numCompletedTasks
            active += stage.numActiveTasks
            if stage.numActiveTasks and (running is None or stage_id > running):
                running = stage_id
    return StageProgress(len(jobs), stages, total, done, active, running)


def progress_line(fragment: FragmentTiming, progress: StageProgress | None, now: float) -> str:
    """The live line of a running fragment.

    >>> f = FragmentTiming(1, "store", "9", 0.0)
    >>> progress_line(f, StageProgress(2, 3, 12, 7, 2, 5), now=4.0)
    'fragment 1: store 9  2 jobs  stage 5  tasks 7/12 (2 running)  4.0 s'
    """
    parts = [f"fragment {fragment.index}: {fragment.kind} {fragment.operator_id}"]
    if progress is not None:
        parts.append(f"{progress.jobs} job{'s' if progress.jobs != 1 else ''}")
        if progress.running_stage is not None:
            parts.append(f"stage {progress.running_stage}")
        parts.append(
            f"tasks {progress.tasks_done}/{progress.tasks_total} ({progress.tasks_active} running)"
        )
    parts.append(f"{now - fragment.started:.1f} s")
    return "  ".join(parts)


def summary_line(fragment: FragmentTiming, rows: int | None) -> str:
    """The line printed for a finished fragment."""
    seconds = (fragment.ended or time.monotonic()) - fragment.started
    counted = f"{rows} rows" if rows is not None else "rows not counted"
    where = f"fragment {fragment.index}: {fragment.kind} {fragment.operator_id}"
    return f"{where}, {counted}, {seconds:.2f} s"


class SparkProgress:
    """Shows a run's fragments on ``stream`` (standard error by default).

    ``live`` (default: ``stream`` is a terminal) redraws the running fragment's line every
    ``interval`` seconds from a background thread; :meth:`summary` prints one line per fragment
    once the run has given its row counts.

    Example::

        with SparkProgress(spark) as progress:
            result = run_plan(plan, executor="spark", spark=spark)
        progress.summary(result.metrics)
    """

    def __init__(
        self,
        spark: Any,
        *,
        stream: TextIO | None = None,
        live: bool | None = None,
        interval: float = 0.25,
    ) -> None:
        self.spark = spark
        self.stream = stream or sys.stderr
        tty = getattr(self.stream, "isatty", lambda: False)()
        self.live = (tty if live is None else live) and spark_context(spark) is not None
        self.interval = interval
        self.lines: list[str] = []  # every live line drawn, for whoever wants to look back
        self._first = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._width = 0

    @property
    def fragments(self) -> list[FragmentTiming]:
        """This run's fragments so far, numbered from 0 (copies)."""
        with _lock:
            mine = _fragments[self._first :]
        return [replace(f, index=f.index - self._first) for f in mine]

    def __enter__(self) -> SparkProgress:
        with _lock:
            self._first = len(_fragments)
        if self.live:
            self._thread = threading.Thread(target=self._poll, name="drill-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self.draw()  # the final state of the last fragment
            self.stream.write("\n")
            self.stream.flush()

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self.draw()

    def draw(self) -> None:
        """Redraw the line of the latest fragment."""
        fragments = self.fragments
        if not fragments:
            return
        fragment = fragments[-1]
        line = progress_line(fragment, stage_progress(self.spark, fragment.group), time.monotonic())
        self.lines.append(line)
        padding = " " * max(0, self._width - len(line))
        self._width = len(line)
        self.stream.write(f"\r{line}{padding}")
        self.stream.flush()

    def summary(self, metrics: dict[str, dict[str, Any]]) -> None:
        """One line per fragment: operator id, rows (from the run's metrics) and seconds."""
        for fragment in self.fragments:
            rows = metrics.get(fragment.operator_id, {}).get("rows")
            print(summary_line(fragment, rows), file=self.stream)
        self.stream.flush()
