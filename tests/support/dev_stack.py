"""``make dev``'s stack for the browser test and the dev-loop benchmark: a copy of the example
project with its own data, ``scripts/dev.py`` (warm Spark Connect + ``dagster dev``) on free ports
with its own ``DAGSTER_HOME``, and the GraphQL calls that launch and follow a run.

The stack runs in its own process group and is stopped with SIGTERM to it: ``scripts/dev.py``
then stops ``dagster dev`` and Spark Connect (SIGKILL only as a fallback).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
LOCATION = "drill_examples"
WORKSPACE = f"""\
load_from:
  - python_file:
      relative_path: examples/definitions.py
      working_directory: .
      location_name: {LOCATION}
"""
DONE = ("SUCCESS", "FAILURE", "CANCELED")


@dataclass(frozen=True)
class ExampleProject:
    """A copy of ``examples/`` (plans, definitions, generator) with its data beside it."""

    root: Path

    @property
    def workspace(self) -> Path:
        return self.root / "workspace.yaml"

    @property
    def plans(self) -> Path:
        return self.root / "examples" / "plans"

    @property
    def raw(self) -> Path:
        return self.root / "examples" / "data" / "raw"


def example_project(root: Path) -> ExampleProject:
    """Copy the example code location to ``root`` and generate its data there (~1 s)."""
    target = root / "examples"
    target.mkdir(parents=True)
    for name in (
        "definitions.py",
        "demo.py",
        "demo_database.py",
        "generate.py",
        "postgres_server.py",
    ):
        shutil.copy(EXAMPLES / name, target / name)
    shutil.copytree(EXAMPLES / "plans", target / "plans")
    (root / "workspace.yaml").write_text(WORKSPACE)
    subprocess.run([sys.executable, str(target / "generate.py")], check=True, capture_output=True)
    return ExampleProject(root)


def materialize_examples(project: ExampleProject, home: Path) -> None:
    """Every example asset for the first day, with the local executor, into ``home`` (what
    ``examples/demo.py`` does): the lineage then shows materializations and row counts."""
    subprocess.run(
        [sys.executable, str(project.root / "examples" / "demo.py"), "--executor", "local"],
        env={**os.environ, "DAGSTER_HOME": str(home)},
        check=True,
        capture_output=True,
        timeout=600,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class DevStack:
    """``scripts/dev.py -w <workspace>`` on a free port."""

    def __init__(
        self,
        project: ExampleProject,
        home: Path,
        *,
        warm_spark: bool = True,
        dagster_home: bool = True,
    ) -> None:
        """``home`` holds the stack's logs and, with ``dagster_home``, its Dagster instance
        (``DAGSTER_HOME``); without, the instance is ``make dev``'s throwaway one."""
        self.project = project
        self.home = home
        self.warm_spark = warm_spark
        self.dagster_home = dagster_home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = home / "dev.log"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> DevStack:
        self.home.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, str(ROOT / "scripts" / "dev.py")]
        command += ["-w", str(self.project.workspace), "-p", str(self.port)]
        command += ["--log-dir", str(self.home)]
        if not self.warm_spark:
            command.append("--no-warm-spark")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("DAGSTER_HOME", None)
        if self.dagster_home:
            env["DAGSTER_HOME"] = str(self.home)
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                command,
                cwd=self.project.root,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_for_assets(timeout=420)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def spark_remote(self) -> str | None:
        """The Spark Connect URL the stack's runs use (None without a warm Spark)."""
        found = re.search(r"Spark Connect at (sc://\S+)", self.log.read_text(errors="replace"))
        return found.group(1) if found else None

    def stop(self) -> None:
        """SIGTERM to the stack's group (it stops dagster and Spark), SIGKILL as a fallback."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def _wait_for_assets(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                nodes = self.graphql("{ assetNodes { id } }")["assetNodes"]
                if nodes:
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError, KeyError, TypeError):
                pass
            assert self.process is not None
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"make dev's stack did not come up:\n{self.log_tail()}")
            time.sleep(1)

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> Any:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        if answer.get("errors"):
            raise RuntimeError(f"GraphQL errors: {answer['errors']}")
        return answer["data"]

    def launch(self, *asset_keys: str) -> str:
        """Launch a materialization of ``asset_keys`` (as the UI's Materialize button does)."""
        params = {
            "selector": {
                "repositoryLocationName": LOCATION,
                "repositoryName": "__repository__",
                "jobName": "__ASSET_JOB",
                "assetSelection": [{"path": key.split("/")} for key in asset_keys],
            },
            "mode": "default",
            "executionMetadata": {"tags": []},
        }
        data = self.graphql(LAUNCH, {"params": params})["launchRun"]
        if data["__typename"] != "LaunchRunSuccess":
            raise RuntimeError(f"launch failed: {data}")
        return data["run"]["runId"]

    def run(self, run_id: str) -> dict[str, Any]:
        return self.graphql(RUN, {"id": run_id})["runOrError"]

    def wait_run(self, run_id: str, timeout: float = 600) -> dict[str, Any]:
        """The run once it is done (its status, times and failed steps)."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.run(run_id)
            if run.get("status") in DONE:
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} still {run.get('status')} after {timeout} s")
            time.sleep(0.5)

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """The run's events in order: ``eventType``, ``timestamp`` (ms), ``stepKey``, ``message``."""
        events: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = self.graphql(EVENTS, {"id": run_id, "after": cursor})["logsForRun"]
            events += page["events"]
            if not page["hasMore"]:
                return events
            cursor = page["cursor"]

    def run_ids(self) -> list[str]:
        """Every run's id, newest first."""
        runs = self.graphql("{ runsOrError { ... on Runs { results { runId } } } }")
        return [r["runId"] for r in runs["runsOrError"]["results"]]

    def new_run(self, known: set[str], timeout: float = 120) -> str:
        """The id of a run not in ``known`` once one appears (launched from the browser)."""
        deadline = time.monotonic() + timeout
        while True:
            fresh = [r for r in self.run_ids() if r not in known]
            if fresh:
                return fresh[0]
            if time.monotonic() > deadline:
                raise TimeoutError("no new run was launched")
            time.sleep(0.5)


LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""
EVENTS = """
query Events($id: ID!, $after: String) {
  logsForRun(runId: $id, afterCursor: $after) {
    ... on EventConnection {
      cursor hasMore
      events { ... on MessageEvent { eventType timestamp stepKey message } }
    }
  }
}
"""
RUN = """
query Run($id: ID!) {
  runOrError(runId: $id) {
    ... on Run {
      runId status startTime endTime parentRunId rootRunId
      stepStats { stepKey status }
    }
  }
}
"""
