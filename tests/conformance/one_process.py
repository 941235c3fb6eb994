"""The conformance corpus run again and again in one process, as a notebook, a script or a Dagster
code server runs plans: twice on one SparkSession, once on the local executor, once more on a
session created after the first one stopped, and once on a session made with ``newSession``
beside it. ``test_one_process.py`` starts it and reads what it prints.

    python tests/conformance/one_process.py

Prints one JSON line per pass on stdout: the pass, the cases that failed (with their first line),
and the threads, open files and row-marker slots held after it, in this process and in the JVM.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil
from corpus import check_case, load_cases

from engine.exec.spark.row_markers import row_markers, slots_in_use
from engine.exec.spark.session import SparkConfig, create_session

CONFIG = SparkConfig(master="local[2]", shuffle_partitions=2)


def run_corpus(executor: str, **options: Any) -> dict[str, str]:
    """The failing cases of one pass over the corpus, with the first line of their error."""
    failed = {}
    for case in load_cases():
        try:
            check_case(case, executor=executor, **options)
        except BaseException as error:  # pytest.fail raises a BaseException
            failed[case["id"]] = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return failed


def held() -> dict[str, int]:
    """Threads and open files of this process and of the JVM it started, row-marker slots."""
    me = psutil.Process()
    jvms = [p for p in me.children(recursive=True) if p.name().startswith("java")]
    return {
        "threads": me.num_threads(),
        "open_files": len(me.open_files()),
        "jvm_threads": sum(p.num_threads() for p in jvms),
        "jvm_open_files": sum(len(p.open_files()) for p in jvms),
        "marker_slots": slots_in_use(),
    }


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
    spark = create_session(CONFIG)
    started = time.monotonic()
    markers = row_markers(spark)
    report("spark after restart", run_corpus("spark", spark=spark), started, markers=bool(markers))
    if markers is not None:
        markers.close()
    started = time.monotonic()
    report("spark new session", run_corpus("spark", spark=spark.newSession()), started)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
