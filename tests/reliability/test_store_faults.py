"""Store faults: a writer SIGKILLed at random points never damages the previous version, and
two writers of one target never mix their data.

A child process writes a new version of a target (a whole dataset, or some partitions of a
partitioned one) and is killed after a random delay drawn over the length of a full write. After
each kill the target reads back as exactly the previous version or exactly the new one (the kill
came after the commit), never a mix and never unreadable; a rerun then gives the new version.
The 20-kill runs are ``slow`` (``make test-reliability``); two kills run in the normal suite.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from engine.errors import StorageError
from engine.storage.engines import FsEngine
from engine.storage.store import write_store

ROWS = 150_000
DAYS = 12

WRITER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import pyarrow as pa
    from engine.storage.engines import FsEngine
    from engine.storage.store import write_store

    root, target, version, partitioned = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
    rows = {rows}
    days = list(range(3, 6)) if partitioned else list(range({days}))
    table = pa.table({{
        "day": pa.array([days[i % len(days)] for i in range(rows)], pa.int64()),
        "id": pa.array(range(rows), pa.int64()),
        "version": pa.array([version] * rows, pa.int64()),
    }})
    print("ready", flush=True)
    write_store(FsEngine("fs", Path(root)), target, table)
    print("done", flush=True)
    """
).format(rows=ROWS, days=DAYS)


def table_for(version: int, days: list[int], rows: int = ROWS) -> pa.Table:
    return pa.table(
        {
            "day": pa.array([days[i % len(days)] for i in range(rows)], pa.int64()),
            "id": pa.array(range(rows), pa.int64()),
            "version": pa.array([version] * rows, pa.int64()),
        }
    )


def state(location: Path, partitioned: bool) -> dict[int, tuple[int, int]]:
    """Per day: (rows, version) as a reader sees the target now; fails if it cannot be read."""
    dataset = ds.dataset(location, format="parquet", partitioning="hive" if partitioned else None)
    table = dataset.to_table()
    out: dict[int, tuple[int, int]] = {}
    for day in sorted(set(table.column("day").to_pylist())):
        rows = table.filter(ds.field("day") == day)
        versions = set(rows.column("version").to_pylist())
        assert len(versions) == 1, f"day {day} mixes versions {versions}"
        out[day] = (rows.num_rows, versions.pop())
    return out


def expected_states(
    partitioned: bool,
) -> tuple[dict[int, tuple[int, int]], dict[int, tuple[int, int]]]:
    """(before, after) a write of version 2."""
    before = state_of(table_for(1, list(range(DAYS))))
    if partitioned:
        written = state_of(table_for(2, list(range(3, 6))))
        return before, {**before, **written}
    return before, state_of(table_for(2, list(range(DAYS))))


def state_of(table: pa.Table) -> dict[int, tuple[int, int]]:
    days = table.column("day").to_pylist()
    version = table.column("version")[0].as_py()
    return {day: (days.count(day), version) for day in sorted(set(days))}


def kill_runs(root: Path, count: int, *, partitioned: bool, seed: int) -> list[str]:
    """``count`` writers of version 2 SIGKILLed at random points; the outcome of each."""
    target: dict[str, Any] = {"path": "t", "format": "parquet"}
    if partitioned:
        target["partitionBy"] = ["day"]
    engine = FsEngine("fs", root)
    write_store(engine, target, table_for(1, list(range(DAYS))))
    before, after = expected_states(partitioned)
    location = root / "t"
    rng = random.Random(seed)
    full = _timed_write(root, target, partitioned)
    outcomes = []
    for _ in range(count):
        write_store(engine, target, table_for(1, list(range(DAYS))))  # back to version 1
        child = _writer(root, target, partitioned)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0, full))
        child.kill()
        child.wait()
        seen = state(location, partitioned)
        assert seen in (before, after), seen
        outcomes.append("old" if seen == before else "new")
        write_store(
            engine, target, table_for(2, list(range(3, 6)) if partitioned else list(range(DAYS)))
        )
        assert state(location, partitioned) == after  # the rerun, after whatever was left
        leftovers = [
            p.name for p in root.iterdir() if ".staging-" in p.name or ".legacy-" in p.name
        ]
        assert leftovers == []
    return outcomes


def _writer(root: Path, target: dict[str, Any], partitioned: bool) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            WRITER,
            str(root),
            json.dumps(target),
            "2",
            "1" if partitioned else "0",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


def _timed_write(root: Path, target: dict[str, Any], partitioned: bool) -> float:
    """How long a whole write of version 2 takes in a child, from 'ready' to its exit."""
    child = _writer(root, target, partitioned)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    start = time.monotonic()
    child.wait()
    assert child.returncode == 0
    return time.monotonic() - start


@pytest.mark.parametrize("partitioned", [False, True], ids=["dataset", "partitions"])
def test_a_killed_store_keeps_the_previous_version_quick(tmp_path: Path, partitioned: bool) -> None:
    outcomes = kill_runs(tmp_path, 2, partitioned=partitioned, seed=7)
    assert len(outcomes) == 2


@pytest.mark.slow
@pytest.mark.parametrize("partitioned", [False, True], ids=["dataset", "partitions"])
def test_a_store_killed_20_times_keeps_the_previous_version(
    tmp_path: Path, partitioned: bool
) -> None:
    outcomes = kill_runs(tmp_path, 20, partitioned=partitioned, seed=20)
    assert len(outcomes) == 20
    assert "old" in outcomes  # the kills did land inside writes


def test_two_writers_of_one_target_never_mix(tmp_path: Path) -> None:
    """Concurrent writers serialize on the target's lock: the result is one writer's data, whole;
    a writer that waits longer than its lock timeout fails clearly and writes nothing."""
    engine = FsEngine("fs", tmp_path)
    target = {"path": "t", "format": "parquet"}
    errors: list[Exception] = []

    def write(version: int, timeout: float) -> None:
        try:
            write_store(engine, target, table_for(version, list(range(DAYS))), lock_timeout=timeout)
        except StorageError as err:
            errors.append(err)

    threads = [threading.Thread(target=write, args=(v, 120.0)) for v in (1, 2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    seen = state(tmp_path / "t", partitioned=False)
    assert seen in [state_of(table_for(v, list(range(DAYS)))) for v in (1, 2, 3)]

    from engine.storage.commit import VersionedTarget, target_lock

    with (
        target_lock(VersionedTarget(tmp_path / "t"), timeout=1.0),
        pytest.raises(StorageError, match="being written by another run"),
    ):
        write_store(engine, target, table_for(9, [0]), lock_timeout=0.2)
    assert state(tmp_path / "t", partitioned=False) == seen


def test_two_dagster_runs_of_one_asset_at_once(tmp_path: Path) -> None:
    """Two runs materialize the same asset at the same time: the second waits for the first's
    lock; both succeed and the asset holds one version of the rows, once."""
    from dagster import DagsterInstance, materialize

    from drill_dagster import load_definitions

    plans, raw = tmp_path / "plans", tmp_path / "data" / "raw"
    plans.mkdir()
    raw.mkdir(parents=True)
    rows = 100_000
    (raw / "events.json").write_text("".join(f'{{"n": {i}}}\n' for i in range(rows)))
    plan = {
        "storage": {
            "raw": {"type": "fs", "root": "../data/raw"},
            "lake": {"type": "fs", "root": "../data/lake"},
        },
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "raw", "ref": "e",
             "selection": {"path": "events.json", "format": "json"}},
            {"@id": 2, "op": "project", "input": 1,
             "projections": [{"ref": "output.n", "expr": "e.n"}]},
            {"@id": 3, "op": "store", "input": 2, "storageengine": "lake",
             "target": {"path": "copied", "format": "parquet"}},
        ],
    }  # fmt: skip
    (plans / "copy.json").write_text(json.dumps(plan))
    defs = load_definitions(plans, executor="local")
    outcomes: list[bool] = []

    def one_run() -> None:
        with DagsterInstance.ephemeral() as instance:
            result = materialize(list(defs.assets), resources=defs.resources, instance=instance)
            outcomes.append(result.success)

    threads = [threading.Thread(target=one_run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == [True, True]
    lake = tmp_path / "data" / "lake"
    assert sorted(ds.dataset(lake / "copied").to_table().column("n").to_pylist()) == list(
        range(rows)
    )
    versions = [p.name for p in lake.iterdir() if p.name.startswith(".copied.v-")]
    assert len(versions) == 1 and not [p for p in lake.iterdir() if ".staging-" in p.name]
