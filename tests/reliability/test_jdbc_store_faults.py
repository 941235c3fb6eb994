"""A table store SIGKILLed at random points never damages the previous table: after each kill the
table holds exactly the previous rows or exactly the new ones, and no staging table is left."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time

import pyarrow as pa

from engine.storage.engines import create_engine
from engine.storage.store import write_store

ROWS = 100_000
PASSWORD_ENV = "DRILL_TEST_PG_FAULTS"

WRITER = """
import json, sys
import pyarrow as pa
from engine.storage.engines import create_engine
from engine.storage.store import write_store
config, target, version, rows = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
engine = create_engine("pg", config)
table = pa.table({"id": pa.array(range(rows), pa.int64()), "version": pa.array([version] * rows, pa.int64())})
import time
print("ready", flush=True)
start = time.monotonic()
write_store(engine, target, table)
print(f"took {time.monotonic() - start}", flush=True)
"""


def version_table(version: int, rows: int = ROWS) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "version": pa.array([version] * rows, pa.int64()),
        }
    )


def state(postgres, table: str) -> tuple:
    return tuple(postgres.query(f"SELECT version, count(*) FROM {table} GROUP BY version"))


def writer(config: dict, target: dict, version: int) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            WRITER,
            json.dumps(config),
            json.dumps(target),
            str(version),
            str(ROWS),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    return child


def test_a_killed_table_store_keeps_the_previous_table(postgres) -> None:
    os.environ[PASSWORD_ENV] = postgres.password
    config = {"type": "jdbc", "url": postgres.url, "user": "drill", "password_env": PASSWORD_ENV}
    engine = create_engine("pg", config)
    outcomes = []
    for target in ({"table": "killed"}, {"table": "killed_parts", "partitionBy": ["version"]}):
        table = target["table"]
        write_store(engine, target, version_table(1))
        before = state(postgres, table)
        timed = writer(config, target, 2)
        assert timed.stdout is not None
        full = float(timed.stdout.readline().split()[1])  # the write alone
        timed.wait()
        after = state(postgres, table)
        assert before != after
        rng = random.Random(7)
        for _ in range(3):
            postgres.execute(f"DROP TABLE {table}")
            write_store(engine, {"table": table}, version_table(1))
            child = writer(config, target, 2)
            time.sleep(rng.uniform(0, full))
            child.kill()
            child.wait()
            seen = state(postgres, table)
            assert seen in (before, after), seen
            outcomes.append("old" if seen == before else "new")
            stages = postgres.query(f"SELECT relname FROM pg_class WHERE relname LIKE '{table}__%'")
            assert stages == []
    assert "old" in outcomes  # the kills did land inside writes
