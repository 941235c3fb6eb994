"""``make dev``: the Dagster UI, its runs connected to a warm Spark Connect server.

1. starts a Spark Connect server from the installed pyspark (``sbin/start-connect-server.sh
   --wait``, in the foreground of its own process group) bound to 127.0.0.1 on a free port
   (``--spark-port``), with the engine's session settings and the catalog settings of the plans
   in ``--plans`` (:func:`catalog_conf`), and waits until it listens;
2. runs ``dagster dev`` in its own process group with ``DRILL_SPARK_REMOTE=sc://127.0.0.1:PORT``
   in its environment: every run's ``DrillSparkResource`` connects to that server instead of
   starting a JVM of its own (see ``drill_dagster/README.md``);
3. on exit, Ctrl-C, SIGTERM or SIGHUP, and when either process ends, stops both: SIGTERM to each
   process group, SIGKILL only if it has not exited after 30 s. No JVM is left behind.

The Dagster instance is the repository's ``dagster.yaml`` (queued runs are taken off the queue
every second). It is copied into a ``DAGSTER_HOME`` that has no ``dagster.yaml`` of its own (one
that has is used as it is). Without ``DAGSTER_HOME``, the instance is a throwaway one, as
``dagster dev``'s own is, but in memory (:func:`throwaway_home`: under ``/dev/shm``), with the
working directory's ``dagster.yaml``, else the repository's: a run writes ~85 events, each a
SQLite commit that can wait for the disk (~25 ms on this project's 2-core test machine), and
nothing of it outlives the stack anyway.

``--no-warm-spark`` runs ``dagster dev`` alone (each run starts its own Spark, as without this
script). Run from the repository root::

    .venv/bin/python scripts/dev.py [-w workspace.yaml] [-h 127.0.0.1] [-p 3000]
        [--spark-port 0] [--spark-master 'local[*]'] [--plans examples/plans] [--no-warm-spark]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
REMOTE_ENV = "DRILL_SPARK_REMOTE"  # drill_dagster.resource reads it
STOP_TIMEOUT = 30.0
START_TIMEOUT = 240.0  # a JVM starts in 15-40 s on a loaded 2-core machine


class Stopped(Exception):
    """A signal asked the stack to stop."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def connect_command(port: int, master: str, extra: Mapping[str, str] | None = None) -> list[str]:
    """``start-connect-server.sh --wait`` with the settings the engine's own sessions get, and
    ``extra`` (the plans' catalog settings: :func:`catalog_conf`)."""
    sys.path.insert(0, str(ROOT))
    from engine.exec.spark.session import SparkConfig

    settings = {**SparkConfig(master=master).settings(), **(extra or {})}
    settings.pop("spark.app.name", None)
    settings["spark.connect.grpc.binding.address"] = "127.0.0.1"
    settings["spark.connect.grpc.binding.port"] = str(port)
    command = [str(spark_home() / "sbin" / "start-connect-server.sh"), "--wait"]
    command += ["--master", settings.pop("spark.master")]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    return command


def catalog_conf(plans_dir: Path) -> dict[str, str]:
    """The session settings of the plans' ``catalog`` engines (Hive support, the Derby metastore
    under their warehouse), as a local session the Dagster resource starts gets them: catalog
    tables then outlive the server, and a restarted server finds the tables it wrote."""
    sys.path.insert(0, str(ROOT))
    from drill_dagster.definitions import catalog_settings
    from drill_dagster.plans import load_project
    from engine.errors import DrillError

    try:
        return catalog_settings(load_project(plans_dir).plans)
    except DrillError as exc:  # dagster dev reports the plans' mistakes in full
        print(
            f"the plans in {plans_dir} do not load ({exc}); Spark Connect gets no catalog settings"
        )
        return {}


def start(command: Sequence[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``command`` in its own process group (a signal to the group reaches all its children)."""
    with log.open("ab") as out:
        return subprocess.Popen(
            list(command),
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def stop(process: subprocess.Popen[bytes] | None, name: str) -> None:
    """SIGTERM to ``process``'s group, then SIGKILL if it has not exited in time."""
    if process is None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return  # the group is gone
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            print(f"{name} did not stop after SIGTERM: SIGKILL", file=sys.stderr)
            continue
        # the leader has exited; its children may still be going down
        deadline = time.monotonic() + STOP_TIMEOUT
        while _group_alive(process.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not _group_alive(process.pid):
            return


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_for_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not listening(port):
        if process.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise SystemExit(f"Spark Connect did not come up on 127.0.0.1:{port}:\n{tail}")
        time.sleep(0.5)


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signal.Signals(signum).name)


def instance_settings(env: dict[str, str]) -> None:
    """Copy the repository's ``dagster.yaml`` into ``DAGSTER_HOME`` when it has none."""
    home = env.get("DAGSTER_HOME")
    if not home:
        return  # dagster dev reads dagster.yaml from the directory it starts in
    target = Path(home) / "dagster.yaml"
    if target.exists() or (Path(home) / "dagster.yml").exists():
        return
    Path(home).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / "dagster.yaml", target)
    print(f"Dagster instance settings: {target} (from {ROOT / 'dagster.yaml'})", flush=True)


def throwaway_home(env: dict[str, str]) -> Path | None:
    """Without ``DAGSTER_HOME`` in ``env``: a new empty one in memory (``/dev/shm``), with the
    ``dagster.yaml`` of the working directory (the one ``dagster dev`` would read), set in ``env``;
    the caller removes it. None where ``DAGSTER_HOME`` is set or there is no ``/dev/shm`` (then
    ``dagster dev`` makes its own throwaway home in the working directory)."""
    memory = Path("/dev/shm")
    if env.get("DAGSTER_HOME") or not (memory.is_dir() and os.access(memory, os.W_OK)):
        return None
    home = Path(tempfile.mkdtemp(prefix="drill-dev-dagster-home-", dir=memory))
    settings = Path.cwd() / "dagster.yaml"
    if settings.is_file():
        shutil.copyfile(settings, home / "dagster.yaml")
    env["DAGSTER_HOME"] = str(home)
    print(f"Dagster instance: {home} (in memory; removed when this stops)", flush=True)
    return home


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], add_help=False)
    parser.add_argument("--help", action="help")
    parser.add_argument("-w", "--workspace", default="workspace.yaml")
    parser.add_argument("-h", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=3000)
    parser.add_argument("--spark-port", type=int, default=0, help="0: a free port")
    parser.add_argument("--spark-master", default="local[*]")
    parser.add_argument("--no-warm-spark", action="store_true")
    parser.add_argument(
        "--plans",
        type=Path,
        default=ROOT / "examples" / "plans",
        help="the plans whose catalog engines the Spark Connect server serves",
    )
    parser.add_argument("--log-dir", type=Path, help="the Spark Connect log (default: a temp dir)")
    args = parser.parse_args(argv)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_stopped)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    home = throwaway_home(env)
    instance_settings(env)
    connect: subprocess.Popen[bytes] | None = None
    dagster: subprocess.Popen[bytes] | None = None
    with tempfile.TemporaryDirectory(prefix="drill-dev-") as tmp:
        log_dir = args.log_dir or Path(tmp)
        try:
            if not args.no_warm_spark:
                port = args.spark_port or free_port()
                spark_log = log_dir / "spark-connect.log"
                connect_env = {
                    **env,
                    "SPARK_HOME": str(spark_home()),
                    "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_PID_DIR": tmp,
                    "SPARK_LOG_DIR": str(log_dir),
                    "PYSPARK_PYTHON": sys.executable,
                    "PYSPARK_DRIVER_PYTHON": sys.executable,
                }
                began = time.monotonic()
                command = connect_command(port, args.spark_master, catalog_conf(args.plans))
                connect = start(command, connect_env, spark_log)
                wait_for_port(port, connect, spark_log)
                env[REMOTE_ENV] = f"sc://127.0.0.1:{port}"
                print(
                    f"Spark Connect at {env[REMOTE_ENV]} (up in {time.monotonic() - began:.0f} s;"
                    f" log {spark_log}): runs connect to it",
                    flush=True,
                )
            command = [str(BIN / "dagster"), "dev", "-w", args.workspace]
            command += ["-h", args.host, "-p", str(args.port)]
            dagster = subprocess.Popen(command, cwd=Path.cwd(), env=env, start_new_session=True)
            while True:
                if dagster.poll() is not None:
                    return dagster.returncode
                if connect is not None and connect.poll() is not None:
                    print("Spark Connect exited: stopping dagster dev", file=sys.stderr)
                    return 1
                time.sleep(0.5)
        except (Stopped, KeyboardInterrupt):
            return 0
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C does not cut the cleanup
            stop(dagster, "dagster dev")
            stop(connect, "Spark Connect")
            if home is not None:
                shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
