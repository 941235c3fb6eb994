"""A Spark task that fails fails the step with the operator id; a RetryPolicy reruns it; the
output then holds every row once and no partial files.

The failure is real: before the store step's first attempt the input file is overwritten with a
truncated record, so a Spark task fails reading it; before the retry the file is put back (a
test-only hook around the store step, in the driver).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from dagster import DagsterEventType, DagsterInstance, Definitions, RetryPolicy, define_asset_job

import drill_dagster.spark_ops as spark_ops
from drill_dagster import load_definitions

pytestmark = pytest.mark.spark

PLAN = {
    "storage": {
        "raw": {"type": "fs", "root": "../data/raw"},
        "lake": {"type": "fs", "root": "../data/lake"},
    },
    "query": [
        {
            "@id": 1,
            "op": "scan",
            "storageengine": "raw",
            "ref": "e",
            "selection": {"path": "events.json", "format": "json"},
        },
        {"@id": 2, "op": "filter", "input": 1, "expr": "e.n >= 0"},
        {
            "@id": 3,
            "op": "store",
            "input": 2,
            "storageengine": "lake",
            "target": {"path": "copied", "format": "parquet"},
        },
    ],
}
ROWS = 500


def test_a_failed_spark_task_names_the_operator_and_a_retry_completes_the_store(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans = tmp_path / "plans"
    raw = tmp_path / "data" / "raw"
    plans.mkdir()
    raw.mkdir(parents=True)
    (plans / "copy.json").write_text(json.dumps(PLAN))
    good = "".join(json.dumps({"n": i, "s": f"row {i}"}) + "\n" for i in range(ROWS))
    events = raw / "events.json"
    events.write_text(good)

    attempts: list[int] = []
    real_store_step = spark_ops.store_step

    def flaky_store_step(*args: Any, **kwargs: Any) -> Any:
        attempts.append(1)
        events.write_text(
            good[: len(good) // 2] + '{"n": 1, "s": "cut' if len(attempts) == 1 else good
        )
        return real_store_step(*args, **kwargs)

    monkeypatch.setattr(spark_ops, "store_step", flaky_store_step)

    defs = load_definitions(plans, executor="spark")
    job = define_asset_job(
        "copy_with_retry", selection="*", op_retry_policy=RetryPolicy(max_retries=2)
    )
    defs = Definitions.merge(defs, Definitions(jobs=[job]))
    with DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def("copy_with_retry").execute_in_process(
            instance=instance, raise_on_error=False
        )
        events_seen = [
            e
            for e in result.all_events
            if e.event_type in (DagsterEventType.STEP_UP_FOR_RETRY, DagsterEventType.STEP_FAILURE)
        ]

    assert len(attempts) == 2, attempts
    assert result.success
    retry = [e for e in events_seen if e.event_type == DagsterEventType.STEP_UP_FOR_RETRY]
    assert retry, events_seen
    message = str(retry[0].event_specific_data)
    assert "operator 3" in message or "operator 1" in message, message
    assert "events.json" in message, message

    lake = tmp_path / "data" / "lake"
    table = pq.read_table(lake / "copied")
    ids = [record["n"] for record in table.column("e").to_pylist()]
    assert sorted(ids) == list(range(ROWS))  # every row once: no duplicates from the failed try
    leftovers = [
        p.name for p in lake.iterdir() if ".staging-" in p.name or p.name.startswith(".copied.v-")
    ]
    assert len(leftovers) <= 1  # the current version only; no staging of the failed attempt
    assert not any(".staging-" in name for name in leftovers)
