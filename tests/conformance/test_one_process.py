"""Many runs in one process, as a notebook, a script or a Dagster code server makes them: the
whole corpus twice on one SparkSession, once on the local executor, and once more on a
session created after the first stopped (``one_process.py``, in a
process of its own: a classic SparkContext is one per process, and the test session's must
outlive this test). Every case passes on every pass, nothing the runs hold grows from the first
pass to the second, and stderr holds no stack trace."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "one_process.py"
REPO = Path(__file__).resolve().parents[2]

# What a stack trace looks like on stderr: Python's, Java's frames, a py4j error.
TRACE = re.compile(r"Traceback \(most recent call last\)|^\s+at [\w$.]+\(|Py4JJavaError", re.M)

# How many threads or open files the JVM may hold beyond the first pass's (see below).
SLACK = 8

# The JVM's own start-up lines (a JDK module notice, Spark's log level hint).
START_UP = ("WARNING: Using incubator modules", "Setting default log level", "To adjust logging")


def test_the_corpus_runs_again_and_again_in_one_process() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(SCRIPT)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    passes = {p["pass"]: p for p in map(json.loads, done.stdout.splitlines())}
    assert list(passes) == [
        "spark 1",
        "spark 2",
        "local",
        "spark after restart",
    ]
    assert {name: p["failed"] for name, p in passes.items() if p["failed"]} == {}
    assert passes["spark after restart"]["markers"], "row-count markers after a restart"
    first, second = passes["spark 1"], passes["spark 2"]
    for held in ("threads", "open_files"):
        assert second[held] <= first[held], (held, first[held], second[held])
    # The JVM's pools start and retire threads as tasks come (a handful either way at any
    # moment); a leak per run would hold one or more for each of the corpus's 60-odd runs.
    for held in ("jvm_threads", "jvm_open_files"):
        assert second[held] <= first[held] + SLACK, (held, first[held], second[held])
    assert all(p["marker_slots"] == 0 for p in passes.values())
    assert not TRACE.search(done.stderr), done.stderr[-4000:]
    noise = [line for line in done.stderr.splitlines() if line and not line.startswith(START_UP)]
    assert noise == []
