"""The Spark Connect server ``make dev`` starts (``scripts/dev.py``) reaches PostgreSQL: its
command passes the engine's session settings, Debian's JDBC driver on ``spark.jars`` among them,
so a ``jdbc`` scan and store run through it (slow: it starts the server, as ``make dev`` does,
and stops it)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.exec.spark.session import JDBC_DRIVER_JARS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DEV = ROOT / "scripts" / "dev.py"
PASSWORD_ENV = "DRILL_TEST_PG_CONNECT"


def _dev() -> Any:
    spec = importlib.util.spec_from_file_location("drill_scripts_dev", DEV)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def connect_url(tmp_path: Path) -> Iterator[str]:
    """A Spark Connect server started with ``scripts/dev.py``'s command, stopped afterwards."""
    if not all(os.path.exists(jar) for jar in JDBC_DRIVER_JARS):
        pytest.skip("no PostgreSQL JDBC driver (apt-get install libpostgresql-jdbc-java)")
    dev = _dev()
    port = dev.free_port()
    command = dev.connect_command(port, "local[1]")
    assert f"spark.jars={','.join(JDBC_DRIVER_JARS)}" in command
    env = {
        **os.environ,
        "SPARK_HOME": str(dev.spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_PID_DIR": str(tmp_path),
        "SPARK_LOG_DIR": str(tmp_path),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    log = tmp_path / "connect.log"
    process = dev.start(command, env, log)
    try:
        dev.wait_for_port(port, process, log)
        yield f"sc://127.0.0.1:{port}"
    finally:
        dev.stop(process, "Spark Connect")


# A Spark Connect client marks its process (pyspark's functions then build Connect columns):
# the plan runs in a process of its own, not beside the tests' classic session.
CLIENT = """
import json, sys
from engine.exec.spark.session import SparkConfig, create_session
from engine.run import run_plan
spark = create_session(SparkConfig(remote=sys.argv[1]))
result = run_plan(json.loads(sys.argv[2]), executor="spark", spark=spark)
print(result.stores[0].row_count)
"""


def test_a_jdbc_scan_and_store_run_through_make_devs_connect_server(
    connect_url: str, postgres: Any
) -> None:
    postgres.execute(
        "DROP TABLE IF EXISTS connect_src",
        "DROP TABLE IF EXISTS connect_copy",
        "CREATE TABLE connect_src (id int, name text)",
        "INSERT INTO connect_src VALUES (1, 'ann'), (2, 'bob'), (3, NULL)",
    )
    pg = {"type": "jdbc", "url": postgres.url, "user": "drill", "password_env": PASSWORD_ENV}
    plan = {
        "storage": {"pg": pg},
        "query": [
            {"@id": 1, "op": "scan", "storageengine": "pg", "ref": "c",
             "selection": {"table": "public.connect_src"}},
            {"@id": 2, "op": "filter", "input": 1, "expr": "c.id > 1"},
            {"@id": 3, "op": "project", "input": 2, "projections": [
                {"ref": "output.id", "expr": "c.id"}, {"ref": "output.name", "expr": "c.name"}]},
            {"@id": 4, "op": "store", "input": 3, "storageengine": "pg",
             "target": {"table": "public.connect_copy"}},
        ],
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, connect_url, json.dumps(plan)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), PASSWORD_ENV: postgres.password},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "2"
    assert postgres.query("SELECT id, name FROM connect_copy ORDER BY id") == [
        (2, "bob"),
        (3, None),
    ]
