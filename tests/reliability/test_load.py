"""Load: a backfill of 90 daily partitions of the example events, as one run and as 90 runs.

Both on a default instance in a temporary ``DAGSTER_HOME`` (``DagsterInstance.get()``), with the
local executor. Every run succeeds, the per-partition row counts add up to the generated data,
and the peak RSS of this process is printed (recorded in ``benchmarks/README.md``).
Marked ``slow``: ``make test-reliability``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import psutil
import pyarrow.dataset as ds
import pytest
from dagster import AssetKey, DagsterInstance, materialize
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)

from drill_dagster import load_definitions

REPO = Path(__file__).resolve().parents[2]
DAYS = 90
START = date(2024, 1, 1)
KEYS = [(START + timedelta(days=i)).isoformat() for i in range(DAYS)]
PROJECT = f"""\
plans:
  events_cleaned:
    partitions:
      daily: {{start: "{KEYS[0]}", end: "{(START + timedelta(days=DAYS)).isoformat()}"}}
      param: day
"""

pytestmark = pytest.mark.slow


class PeakRss:
    """The largest resident set size of this process, sampled every 50 ms."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        process = psutil.Process()
        while not self._stop.is_set():
            self.peak = max(self.peak, process.memory_info().rss)
            time.sleep(0.05)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sys.path.insert(0, str(REPO / "examples"))
    from generate import generate

    root = tmp_path_factory.mktemp("load")
    generate(root / "data", days=DAYS, scale=0.05, start=START)
    plan = json.loads((REPO / "examples" / "plans" / "events_cleaned.json").read_text())
    plan["query"][0]["selection"]["path"] = "events/${day}"
    plans = root / "plans"
    plans.mkdir()
    (plans / "events_cleaned.json").write_text(json.dumps(plan))
    (plans / "drill_project.yaml").write_text(PROJECT)
    return plans


def expected_rows(raw: Path) -> int:
    """Events the plan keeps: a known user, not a heartbeat (its filter, evaluated here)."""
    count = 0
    for path in sorted((raw / "events").rglob("*.json")):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            user = event.get("user") or {}
            count += user.get("id") is not None and event.get("kind") != "heartbeat"
    return count


def stored_rows(lake: Path) -> dict[str, int]:
    table = ds.dataset(lake / "events_cleaned", format="parquet", partitioning="hive").to_table()
    days = table.column("day").to_pylist()
    return {day: days.count(day) for day in set(days)}


def _defs(project: Path) -> Any:
    return load_definitions(project, executor="local")


def test_a_90_day_backfill_as_one_run(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    defs = _defs(project)
    tags = {ASSET_PARTITION_RANGE_START_TAG: KEYS[0], ASSET_PARTITION_RANGE_END_TAG: KEYS[-1]}
    with PeakRss() as rss, DagsterInstance.get() as instance:
        start = time.monotonic()
        result = materialize(
            list(defs.assets), resources=defs.resources, instance=instance, tags=tags
        )
        elapsed = time.monotonic() - start
    assert result.success
    rows = stored_rows(project.parent / "data" / "lake")
    assert len(rows) == DAYS
    assert sum(rows.values()) == expected_rows(project.parent / "data" / "raw")
    print(f"\none run of {DAYS} partitions: {elapsed:.1f} s, peak RSS {rss.peak / 2**20:.0f} MiB")


def test_a_90_day_backfill_as_90_runs(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    defs = _defs(project)
    with PeakRss() as rss, DagsterInstance.get() as instance:
        start = time.monotonic()
        for key in KEYS:
            result = materialize(
                list(defs.assets), resources=defs.resources, instance=instance, partition_key=key
            )
            assert result.success, key
        elapsed = time.monotonic() - start
        runs = instance.get_runs()
        latest = instance.get_latest_materialization_event(AssetKey("events_cleaned"))
    assert len(runs) == DAYS and all(r.is_success for r in runs)
    assert latest is not None
    rows = stored_rows(project.parent / "data" / "lake")
    assert len(rows) == DAYS
    assert sum(rows.values()) == expected_rows(project.parent / "data" / "raw")
    print(f"\n{DAYS} runs of one partition: {elapsed:.1f} s, peak RSS {rss.peak / 2**20:.0f} MiB")
