"""Load: a backfill of 90 daily partitions of the example events, as one run and as 90 runs.

The one-run backfill goes through ``materialize`` over the 90-key range in this process (what
``BackfillPolicy.single_run()`` launches). The 90-run backfill is a real asset backfill
(``max_partitions_per_run: 1``) added to a default instance in a temporary ``DAGSTER_HOME``: a
``dagster-daemon`` in its own process group turns it into 90 queued runs, and the instance's
default run coordinator (``QueuedRunCoordinator``, 10 runs at a time) and run launcher (one
process per run) run them. Every run succeeds, the per-partition row counts add up to the
generated data, and the wall time and peak RSS are printed (recorded in ``benchmarks/README.md``).
Marked ``slow``: ``make test-reliability``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import psutil
import pyarrow.dataset as ds
import pytest
from dagster import AssetKey, DagsterInstance, DagsterRunStatus, RunsFilter, materialize
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    BACKFILL_ID_TAG,
)
from dagster._core.utils import make_new_backfill_id
from processes import stop_process_group

from drill_dagster import load_definitions

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DAYS = 90
START = date(2024, 1, 1)
KEYS = [(START + timedelta(days=i)).isoformat() for i in range(DAYS)]
# A hang guard, not a performance bound: the daemon backfill takes minutes on a busy machine.
BACKFILL_LIMIT_S = 3600

pytestmark = pytest.mark.slow


class PeakRss:
    """The largest resident set size of a process and its descendants (summed), every 50 ms."""

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid or os.getpid()
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        root = psutil.Process(self.pid)
        while not self._stop.is_set():
            total = 0
            try:
                processes = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            for process in processes:
                # a run may end between listing and reading
                with contextlib.suppress(psutil.NoSuchProcess):
                    total += process.memory_info().rss
            self.peak = max(self.peak, total)
            time.sleep(0.05)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example events of 90 days (150 a day), generated once for the module."""
    sys.path.insert(0, str(REPO / "examples"))
    from generate import generate

    root = tmp_path_factory.mktemp("load")
    generate(root / "data", days=DAYS, scale=0.05, start=START)
    return root / "data" / "raw"


def make_project(directory: Path, raw: Path, *, max_partitions_per_run: int | None) -> Path:
    """The ``events_cleaned`` example plan, daily partitions over the 90 days, reading ``raw``
    and storing into ``directory/lake``; returns the plans directory."""
    plan = json.loads((REPO / "examples" / "plans" / "events_cleaned.json").read_text())
    plan["storage"]["raw"]["root"] = str(raw)
    plan["storage"]["lake"]["root"] = str(directory / "lake")
    plan["query"][0]["selection"]["path"] = "events/${day}"
    end = (START + timedelta(days=DAYS)).isoformat()
    per_run = (
        f"      max_partitions_per_run: {max_partitions_per_run}\n"
        if max_partitions_per_run
        else ""
    )
    plans = directory / "plans"
    plans.mkdir(parents=True)
    (plans / "events_cleaned.json").write_text(json.dumps(plan))
    (plans / "drill_project.yaml").write_text(
        f'plans:\n  events_cleaned:\n    partitions:\n      daily: {{start: "{KEYS[0]}", end: "{end}"}}\n'
        f"      param: day\n{per_run}"
    )
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


def test_a_90_day_backfill_as_one_run(
    raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    plans = make_project(tmp_path, raw, max_partitions_per_run=None)
    defs = load_definitions(plans, executor="local")
    tags = {ASSET_PARTITION_RANGE_START_TAG: KEYS[0], ASSET_PARTITION_RANGE_END_TAG: KEYS[-1]}
    with PeakRss() as rss, DagsterInstance.get() as instance:
        start = time.monotonic()
        result = materialize(
            list(defs.assets), resources=defs.resources, instance=instance, tags=tags
        )
        elapsed = time.monotonic() - start
    assert result.success
    rows = stored_rows(tmp_path / "lake")
    assert len(rows) == DAYS
    assert sum(rows.values()) == expected_rows(raw)
    print(f"\none run of {DAYS} partitions: {elapsed:.1f} s, peak RSS {rss.peak / 2**20:.0f} MiB")


def start_daemon(workdir: Path, home: Path) -> subprocess.Popen[bytes]:
    """``dagster-daemon run`` on ``workdir/workspace.yaml`` in its own process group."""
    log = (workdir / "daemon.log").open("wb")
    return subprocess.Popen(
        [str(BIN / "dagster-daemon"), "run", "-w", str(workdir / "workspace.yaml")],
        cwd=workdir,
        env={**os.environ, "DAGSTER_HOME": str(home), "PATH": f"{BIN}:{os.environ['PATH']}"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_for_backfill(
    instance: DagsterInstance, backfill_id: str, daemon: subprocess.Popen[bytes], log: Path
) -> list[Any]:
    """The backfill's runs once the backfill is done and none of its runs is in progress."""
    finished = {
        DagsterRunStatus.SUCCESS,
        DagsterRunStatus.FAILURE,
        DagsterRunStatus.CANCELED,
    }
    deadline = time.monotonic() + BACKFILL_LIMIT_S
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            pytest.fail(f"dagster-daemon exited ({daemon.returncode}):\n{log.read_text()[-3000:]}")
        backfill = instance.get_backfill(backfill_id)
        runs = instance.get_runs(filters=RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
        done = backfill is not None and backfill.status not in (
            BulkActionStatus.REQUESTED,
            BulkActionStatus.CANCELING,
            BulkActionStatus.FAILING,
        )
        if done and all(r.status in finished for r in runs):
            return list(runs)
        time.sleep(1)
    pytest.fail(f"the backfill did not finish in {BACKFILL_LIMIT_S} s:\n{log.read_text()[-3000:]}")


def test_a_90_day_backfill_as_90_queued_runs_launched_by_the_daemon(
    raw: Path, tmp_path: Path
) -> None:
    plans = make_project(tmp_path, raw, max_partitions_per_run=1)
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")  # defaults otherwise
    (tmp_path / "defs.py").write_text(
        "from drill_dagster import load_definitions\n\n"
        f"defs = load_definitions({str(plans)!r}, executor='local')\n"
    )
    (tmp_path / "workspace.yaml").write_text(
        "load_from:\n  - python_file:\n      relative_path: defs.py\n      location_name: load\n"
    )
    asset_graph = load_definitions(plans, executor="local").resolve_asset_graph()
    with DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        backfill_id = make_new_backfill_id()
        instance.add_backfill(
            PartitionBackfill.from_asset_partitions(
                backfill_id=backfill_id,
                asset_graph=asset_graph,
                partition_names=KEYS,
                asset_selection=[AssetKey("events_cleaned")],
                backfill_timestamp=time.time(),
                tags={},
                dynamic_partitions_store=instance,
                all_partitions=False,
                title="90 days",
                description=None,
                run_config=None,
            )
        )
        start = time.monotonic()
        daemon = start_daemon(tmp_path, home)
        try:
            with PeakRss(daemon.pid) as rss:
                runs = wait_for_backfill(instance, backfill_id, daemon, tmp_path / "daemon.log")
                elapsed = time.monotonic() - start
        finally:
            stop_process_group(daemon, timeout=60)
        backfill = instance.get_backfill(backfill_id)
    # Each run covers one key, as a range of one (BackfillPolicy.multi_run(1)).
    ranges = [
        (r.tags[ASSET_PARTITION_RANGE_START_TAG], r.tags[ASSET_PARTITION_RANGE_END_TAG])
        for r in runs
    ]
    failed = [key for (key, _), r in zip(ranges, runs) if r.status != DagsterRunStatus.SUCCESS]
    assert not failed, f"runs that did not succeed: {failed}"
    assert sorted(start for start, end in ranges if start == end) == KEYS
    assert backfill is not None and backfill.status == BulkActionStatus.COMPLETED_SUCCESS
    rows = stored_rows(tmp_path / "lake")
    assert sorted(rows) == KEYS
    assert sum(rows.values()) == expected_rows(raw)
    print(
        f"\n{DAYS} queued runs launched by dagster-daemon: {elapsed:.1f} s, "
        f"peak RSS of the daemon and its runs {rss.peak / 2**20:.0f} MiB"
    )
