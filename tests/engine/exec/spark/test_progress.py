"""Progress of Spark runs: fragments named as job groups, read back from Spark's real status
tracker; the CLI's `run` printing one summary line per fragment when stderr is not a terminal."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from engine.cli import EXIT_OK, run
from engine.exec.spark.progress import SparkProgress, fragment_jobs, stage_progress


def test_a_fragments_jobs_are_read_from_the_status_tracker(spark: Any) -> None:
    with fragment_jobs(spark, "store", "test-7") as fragment:
        spark.range(0, 20_000, numPartitions=4).agg(F.sum("id")).collect()
    progress = stage_progress(spark, fragment.group)
    assert progress is not None
    assert progress.jobs >= 1
    assert progress.tasks_total >= 4  # the 4 scan tasks at least
    assert progress.tasks_done == progress.tasks_total
    assert progress.tasks_active == 0
    # the caller's job group is back (none): later jobs are not counted as the fragment's
    spark.range(3).collect()
    assert stage_progress(spark, fragment.group) == progress


def test_the_live_renderer_draws_the_running_fragment(spark: Any) -> None:
    stream = io.StringIO()
    live = SparkProgress(spark, stream=stream, live=True, interval=0.05)
    with live as progress, fragment_jobs(spark, "store", "test-9"):
        spark.range(0, 200_000, numPartitions=3).agg(F.max("id")).collect()
    text = stream.getvalue()
    assert text.endswith("\n") and "\r" in text
    final = progress.lines[-1]
    assert re.fullmatch(
        r"fragment \d+: store test-9  \d+ jobs?  tasks (\d+)/\1 \(0 running\)  [\d.]+ s", final
    ), final
    progress.summary({"test-9": {"rows": 1}})
    assert re.search(r"fragment \d+: store test-9, 1 rows, [\d.]+ s\n$", stream.getvalue())


def test_run_prints_one_summary_line_per_fragment(spark: Any, tmp_path: Path, capsys: Any) -> None:
    plan = {
        "storage": {"q": {"type": "queue"}, "out": {"type": "fs", "root": str(tmp_path)}},
        "query": [
            {"@id": 1, "op": "constant", "content": [{"a": i} for i in range(5)]},
            {"@id": 2, "op": "filter", "input": 1, "expr": "a > 1"},
            {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
            {"@id": 4, "op": "store", "input": 1, "storageengine": "out",
             "target": {"path": "all", "format": "json"}},
        ],
    }  # fmt: skip
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert run(["run", str(path)]) == EXIT_OK  # spark is the default executor
    out, err = capsys.readouterr()
    assert [json.loads(line) for line in out.splitlines()] == [{"a": 2}, {"a": 3}, {"a": 4}]
    summaries = [line for line in err.splitlines() if line.startswith("fragment ")]
    assert len(summaries) == 2, err
    found = sorted(re.sub(r"[\d.]+ s$", "N s", line) for line in summaries)
    assert found in (
        ["fragment 0: store 3, 3 rows, N s", "fragment 1: store 4, 5 rows, N s"],
        ["fragment 0: store 4, 5 rows, N s", "fragment 1: store 3, 3 rows, N s"],
    ), summaries
    assert "\r" not in err  # not a terminal: no live line
    assert not spark.sparkContext._jsc.sc().isStopped()  # the active session is left running
