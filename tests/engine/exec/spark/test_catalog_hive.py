"""The catalog engine with the Hive metastore that pyspark ships (Derby), in processes of their own.

Hive support is chosen when a SparkSession starts; the suite's shared session is left as it is
(in-memory catalog, see test_catalog_tables.py). Here ``drill-dagster run`` starts its own
session for a plan with a catalog engine: Hive support, Derby under the engine's warehouse. One
process writes a partitioned table; a second process, with a new JVM, finds it by name in the
metastore and reads it; the local executor reads it from its files through the engine's record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.run import run_plan

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[4]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", "run", *args, "--master", "local[1]"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=900,
    )


def _storage() -> dict:
    return {
        "files": {"type": "fs", "root": "files"},
        "cat": {"type": "catalog", "warehouse": "warehouse", "database": "analytics"},
    }


def test_hive_metastore_keeps_tables_across_processes(tmp_path: Path) -> None:
    files = tmp_path / "files"
    files.mkdir()
    rows = [{"day": "d1", "user": "a"}, {"day": "d1", "user": "b"}, {"day": "d2", "user": "a"}]
    (files / "events.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write = {
        "head": {"type": "APACHE_DRILL_LOGICAL", "version": 1},
        "storage": _storage(),
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "files", "ref": "e",
             "selection": {"path": "events.json"}},
            {"@id": 2, "op": "project", "input": 1, "projections": [
                {"ref": "output.day", "expr": "e.day"}, {"ref": "output.user", "expr": "e.user"}]},
            {"@id": 3, "op": "store", "input": 2, "storageengine": "cat",
             "target": {"table": "daily_activity", "partitionBy": ["day"]}},
        ],
    }  # fmt: skip
    read = {
        "head": {"type": "APACHE_DRILL_LOGICAL", "version": 1},
        "storage": _storage(),
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "cat", "ref": "t",
             "selection": {"table": "analytics.daily_activity"}},
            {"@id": 2, "op": "project", "input": 1, "projections": [
                {"ref": "output.day", "expr": "t.day"}, {"ref": "output.user", "expr": "t.user"}]},
            {"@id": 3, "op": "store", "input": 2, "storageengine": "files",
             "target": {"path": "copy", "format": "json"}},
        ],
    }  # fmt: skip
    (tmp_path / "write.json").write_text(json.dumps(write))
    (tmp_path / "read.json").write_text(json.dumps(read))

    done = _cli("write.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    warehouse = tmp_path / "warehouse"
    assert (warehouse / "metastore_db").is_dir()  # Derby, under the warehouse
    table = warehouse / "analytics.db" / "daily_activity"
    assert sorted(p.name for p in table.iterdir() if not p.name.startswith((".", "_"))) == [
        "day=d1",
        "day=d2",
    ]
    assert not (tmp_path / "spark-warehouse").exists()
    assert not (tmp_path / "derby.log").exists()  # Derby's log is kept in the warehouse

    done = _cli("read.json", cwd=tmp_path)  # a new JVM: the table is found in the metastore
    assert done.returncode == 0, done.stderr[-3000:]
    copied = [
        json.loads(line)
        for path in sorted((files / "copy").glob("*.json"))
        for line in path.read_text().splitlines()
    ]
    assert sorted((r["day"], r["user"]) for r in copied) == sorted(
        (r["day"], r["user"]) for r in rows
    )

    local = dict(read)
    local["query"] = [*read["query"][:2], {**read["query"][2], "storageengine": "q"}]
    local["storage"] = {**_storage(), "q": {"type": "queue"}}
    local["storage"]["cat"] = {**local["storage"]["cat"], "warehouse": str(warehouse)}
    result = run_plan(local, executor="local")
    assert sorted((r["day"], r["user"]) for r in result.records()) == sorted(
        (r["day"], r["user"]) for r in rows
    )
