"""`dagster dev` serves the plans: asset nodes, their deps and the latest column schema, by GraphQL.

The server runs in its own process group on 127.0.0.1 (a free port) with a temporary DAGSTER_HOME;
it is stopped with SIGTERM to the group, and SIGKILL only if it does not exit.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dagster import AssetSelection, DagsterInstance, materialize
from processes import stop_process_group

from drill_dagster import load_definitions

Kit = Any
BIN = Path(sys.executable).parent
QUERY = """
{
  assetNodes {
    assetKey { path }
    dependencyKeys { path }
    assetMaterializations(limit: 1) {
      partition
      metadataEntries {
        label
        ... on TableSchemaMetadataEntry { schema { columns { name type } } }
        ... on IntMetadataEntry { intValue }
      }
    }
  }
}
"""
DEFINITIONS = """\
from pathlib import Path
from drill_dagster import load_definitions
defs = load_definitions(Path(__file__).parent / "plans")
"""
WORKSPACE = """\
load_from:
  - python_file: {relative_path: definitions.py, working_directory: ., location_name: tiny}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str, body: bytes | None = None) -> Any:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture
def dagster_dev(tmp_path: Path, kit: Kit, dagster_home: Path) -> Iterator[str]:
    yaml_text = "executor: local\n" + kit.PROJECT_YAML
    plans_dir = kit.write(tmp_path, project_yaml=yaml_text)
    (tmp_path / "definitions.py").write_text(DEFINITIONS)
    (tmp_path / "workspace.yaml").write_text(WORKSPACE)
    defs = load_definitions(plans_dir)
    with DagsterInstance.get() as instance:  # the DAGSTER_HOME the server reads
        result = materialize(
            list(defs.assets),  # type: ignore[arg-type]
            selection=AssetSelection.assets("clean"),
            resources=defs.resources,
            instance=instance,
            partition_key="2024-01-01",
        )
        assert result.success
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home), "PYTHONUNBUFFERED": "1"}
    log = (tmp_path / "dagster-dev.log").open("w")
    server = subprocess.Popen(
        [str(BIN / "dagster"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: SIGTERM reaches every child
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                _get(f"{url}/server_info")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"dagster dev did not start:\n{(tmp_path / 'dagster-dev.log').read_text()}"
                    )
                time.sleep(0.5)
        yield url
    finally:
        stop_process_group(server)
        log.close()


def _nodes(url: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        answer = _get(f"{url}/graphql", json.dumps({"query": QUERY}).encode())
        nodes = (answer.get("data") or {}).get("assetNodes") or []
        if nodes or time.monotonic() > deadline:
            assert "errors" not in answer, answer
            return {"/".join(n["assetKey"]["path"]): n for n in nodes}
        time.sleep(0.5)  # the code location is still loading


@pytest.mark.slow  # about 25 s: the server's start-up and a code location load
def test_dagster_dev_serves_assets_lineage_and_column_schema(dagster_dev: str) -> None:
    nodes = _nodes(dagster_dev)
    assert set(nodes) == {"clean", "enriched", "totals", "raw/events", "raw/customers_csv"}
    deps = {
        key: sorted("/".join(d["path"]) for d in n["dependencyKeys"]) for key, n in nodes.items()
    }
    assert deps["clean"] == ["raw/events"]
    assert deps["enriched"] == ["clean", "raw/customers_csv"]
    assert deps["totals"] == ["clean"]
    (latest,) = nodes["clean"]["assetMaterializations"]
    assert latest["partition"] == "2024-01-01"
    entries = {e["label"]: e for e in latest["metadataEntries"]}
    columns = [
        (c["name"], c["type"]) for c in entries["dagster/column_schema"]["schema"]["columns"]
    ]
    assert columns == [
        ("id", "BIGINT"),
        ("user", "MAP"),
        ("user.id", "BIGINT"),
        ("user.name", "VARCHAR"),
        ("amount", "BIGINT"),
    ]
    assert entries["dagster/row_count"]["intValue"] == 2
