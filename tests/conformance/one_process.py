"""The conformance corpus run again and again in one process, as a notebook, a script or a Dagster
code server runs plans: twice on one SparkSession, once on the local executor, and once more on
a session created after the first one stopped. ``test_one_process.py`` starts it and reads what it prints.

    python tests/conformance/one_process.py [CASE_ID ...]

Prints one JSON line per pass on stdout: the pass, the cases that failed (with their first line),
and the threads, open files and row-marker slots held after it, in this process and in the JVM.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil
from corpus import check_case, load_cases

from engine.exec.spark.row_markers import row_markers, slots_in_use
from engine.exec.spark.session import SparkConfig, create_session
from engine.exec.spark.settings import ROW_MARKERS

CONFIG = SparkConfig(master="local[2]", shuffle_partitions=2)
MARKED = SparkConfig(master="local[2]", shuffle_partitions=2, conf={ROW_MARKERS: "true"})
"""After the restart the session opts in to row-count markers (their slots must not grow)."""


def run_corpus(executor: str, **options: Any) -> dict[str, str]:
    """The failing cases of one pass over the corpus (or the cases named on the command line),
    with the first line of their error."""
    failed = {}
    for case in load_cases():
        if sys.argv[1:] and case["id"] not in sys.argv[1:]:
            continue
        try:
            check_case(case, executor=executor, **options)
        except BaseException as error:  # pytest.fail raises a BaseException
            failed[case["id"]] = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return failed


POOLED = (
    "Executor task l",
    "QueryStageCreat",
    "ResultQueryStag",
    "shuffle-exchang",
    "broadcast-excha",
    "subquery",
    "task-result-get",
    "process reaper",
    "block-manager-a",
    "block-manager-s",
)
"""Spark's cached thread pools (as Linux names the threads: 15 characters): they start a thread
for each task, stage or block removal run at once and retire it after a minute idle, so how many
are alive says how busy the last minute was, not what the runs kept."""


def held() -> dict[str, Any]:
    """Threads and open files of this process and of the JVM it started, row-marker slots."""
    me = psutil.Process()
    jvms = [p for p in me.children(recursive=True) if p.name().startswith("java")]
    names = Counter(name for p in jvms for name in _thread_names(p.pid))
    kept = {n: c for n, c in names.items() if not n.startswith(POOLED)}
    return {
        "threads": me.num_threads(),
        "open_files": len(me.open_files()),
        "jvm_threads": sum(kept.values()),
        "jvm_pooled_threads": sum(names.values()) - sum(kept.values()),
        "jvm_open_files": sum(len(p.open_files()) for p in jvms),
        "marker_slots": slots_in_use(),
        "jvm_thread_names": kept,
    }


def _thread_names(pid: int) -> list[str]:
    """The names of a process's threads, numbers left out (``shuffle-boss-N-N``)."""
    names = []
    for comm in Path(f"/proc/{pid}/task").glob("*/comm"):
        try:
            names.append(re.sub(r"\d+", "N", comm.read_text().strip()))
        except OSError:  # a thread that ended meanwhile
            continue
    return names


def report(name: str, failed: dict[str, str], started: float, **extra: Any) -> None:
    line = {"pass": name, "failed": failed, "seconds": round(time.monotonic() - started, 1)}
    print(json.dumps({**line, **held(), **extra}), flush=True)


def main() -> int:
    spark = create_session(CONFIG)
    for name in ("spark 1", "spark 2"):
        started = time.monotonic()
        report(name, run_corpus("spark", spark=spark), started)
    started = time.monotonic()
    report("local", run_corpus("local"), started)
    spark.stop()
    spark = create_session(MARKED)
    started = time.monotonic()
    markers = row_markers(spark)  # the new session's rows are counted by markers
    if markers is not None:
        markers.close()
    failed = run_corpus("spark", spark=spark)
    report("spark after restart", failed, started, markers=markers is not None)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
