"""Beyond local mode (slow; `make test-reliability`): the conformance corpus through a Spark
Connect server, and on a standalone master with one worker, all started here from the installed
pyspark on 127.0.0.1 and stopped afterwards (exactly the processes these tests started)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from processes import stop_process_group

pytestmark = pytest.mark.slow

SPARK_HOME = Path(pyspark.__file__).resolve().parent
RUNNER = Path(__file__).resolve().parent / "corpus_on_spark.py"
START_TIMEOUT = 240  # seconds; a JVM starts in 15-40 s on a loaded 2-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, process_alive: object, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if not process_alive():  # type: ignore[operator]
            break
        time.sleep(1)
    text = log.read_text() if log.exists() else "(no log)"
    pytest.fail(f"nothing listens on 127.0.0.1:{port}; log {log}:\n{text[-3000:]}")


def spark_env(tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_PID_DIR": str(tmp),
        "SPARK_LOG_DIR": str(tmp),
        "SPARK_IDENT_STRING": f"drill-test-{os.getpid()}",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


def run_corpus(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, str(RUNNER), *args],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert " 0 failed" in done.stdout


@pytest.fixture
def connect_server(tmp_path: Path) -> Iterator[str]:
    """A Spark Connect server (sbin/start-connect-server.sh), its pid file in ``tmp_path``."""
    port = free_port()
    env = spark_env(tmp_path)
    subprocess.run(
        [
            str(SPARK_HOME / "sbin" / "start-connect-server.sh"),
            "--master",
            "local[2]",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            f"spark.pyspark.python={sys.executable}",
        ],
        env=env,
        check=True,
        timeout=120,
    )
    pid_files = list(tmp_path.glob("*.pid"))
    assert len(pid_files) == 1, f"no pid file from start-connect-server.sh in {tmp_path}"
    pid = int(pid_files[0].read_text().strip())
    logs = list(tmp_path.glob("*.out"))
    try:
        wait_for_port(port, lambda: _alive(pid), logs[0] if logs else tmp_path / "none")
        yield f"sc://127.0.0.1:{port}"
    finally:
        subprocess.run([str(SPARK_HOME / "sbin" / "stop-connect-server.sh")], env=env, timeout=120)
        _wait_gone(pid)


@pytest.fixture
def standalone_master(tmp_path: Path) -> Iterator[str]:
    """A standalone master and one worker (bin/spark-class), each in its own process group."""
    env = spark_env(tmp_path)
    port, worker_port = free_port(), free_port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    started: list[subprocess.Popen[bytes]] = []
    try:
        master_log = tmp_path / "master.log"
        started.append(
            _start(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(free_port())],
                env, master_log,
            )
        )  # fmt: skip
        wait_for_port(port, lambda: started[0].poll() is None, master_log)
        url = f"spark://127.0.0.1:{port}"
        worker_log = tmp_path / "worker.log"
        started.append(
            _start(
                [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                 "--port", str(worker_port), "--webui-port", str(free_port()), "--cores", "2",
                 "--memory", "2g", "--work-dir", str(tmp_path / "work")],
                env, worker_log,
            )
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT
        while "Registering worker" not in master_log.read_text():
            if time.monotonic() > deadline or started[1].poll() is not None:
                pytest.fail(f"the worker did not register:\n{worker_log.read_text()[-3000:]}")
            time.sleep(1)
        yield url
    finally:
        for process in reversed(started):
            stop_process_group(process)


def _start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 60
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)


def test_the_corpus_runs_through_spark_connect(connect_server: str) -> None:
    run_corpus("--remote", connect_server)


def test_the_corpus_runs_on_a_standalone_cluster(standalone_master: str) -> None:
    run_corpus("--master", standalone_master)
