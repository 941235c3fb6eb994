"""A tiny plans project built in a temporary directory, and a temporary DAGSTER_HOME."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
EVENTS = {
    "2024-01-01": [
        {"id": 1, "user": {"id": 10, "name": "ann"}, "kind": "view", "amount": 5},
        {"id": 2, "user": {"id": 11, "name": "bob"}, "kind": "buy", "amount": 7},
        {"id": 3, "user": {"id": 12, "name": "cy"}, "kind": "view", "amount": 0},
    ],
    "2024-01-02": [{"id": 4, "user": {"id": 10, "name": "ann"}, "kind": "buy", "amount": 9}],
    "2024-01-03": [
        {"id": 5, "user": {"id": 11, "name": "bob"}, "kind": "buy", "amount": 1},
        {"id": 6, "user": {"id": 13, "name": "di"}, "kind": "view", "amount": 2},
    ],
}
"""Raw events by day; rows with amount 0 are filtered out by the `clean` plan."""

CUSTOMERS = "customer_id,segment\n10,gold\n11,silver\n"

CLEAN = {
    "head": {"type": "APACHE_DRILL_LOGICAL", "version": 1, "generator": {"info": "cleaned"}},
    "storage": {
        "raw": {"type": "fs", "root": "../data/raw"},
        "lake": {"type": "fs", "root": "../data/lake"},
    },
    "query": [
        {
            "@id": 1,
            "op": "scan",
            "storageengine": "raw",
            "ref": "e",
            "selection": {"path": "events/${day}", "format": "json"},
        },
        {"@id": 2, "op": "filter", "input": 1, "expr": "e.amount > 0"},
        {
            "@id": 3,
            "op": "project",
            "input": 2,
            "projections": [
                {"ref": "output.id", "expr": "e.id"},
                {"ref": "output.user", "expr": "e.user"},
                {"ref": "output.amount", "expr": "e.amount * 2"},
            ],
        },
        {
            "@id": 4,
            "op": "store",
            "input": 3,
            "storageengine": "lake",
            "memo": "events with a positive amount",
            "target": {"path": "clean/day=${day}", "format": "parquet"},
        },
    ],
}

SPLIT = {
    "storage": {
        "raw": {"type": "fs", "root": "../data/raw"},
        "lake": {"type": "fs", "root": "../data/lake"},
    },
    "query": [
        {
            "@id": 1,
            "op": "scan",
            "storageengine": "lake",
            "ref": "c",
            "selection": {"path": "clean", "format": "parquet"},
        },
        {
            "@id": 2,
            "op": "scan",
            "storageengine": "raw",
            "ref": "cu",
            "selection": {"path": "customers.csv", "format": "csv"},
        },
        {
            "@id": 3,
            "op": "join",
            "left": 1,
            "right": 2,
            "type": "left",
            "conditions": [
                {
                    "relationship": "==",
                    "left": "c.user.id",
                    "right": "cast(cu.customer_id as BIGINT)",
                }
            ],
        },
        {
            "@id": 4,
            "op": "project",
            "input": 3,
            "projections": [
                {"ref": "output.id", "expr": "c.id"},
                {"ref": "output.segment", "expr": "cu.segment"},
            ],
        },
        {
            "@id": 5,
            "op": "store",
            "input": 4,
            "storageengine": "lake",
            "target": {"path": "enriched", "format": "parquet"},
        },
        {
            "@id": 6,
            "op": "collapsingaggregate",
            "input": 1,
            "aggregations": [
                {"ref": "n", "expr": "count(1)"},
                {"ref": "total", "expr": "sum(c.amount)"},
            ],
        },
        {
            "@id": 7,
            "op": "store",
            "input": 6,
            "storageengine": "lake",
            "target": {"path": "totals", "format": "json"},
        },
    ],
}

PROJECT_YAML = """\
defaults:
  owners: ["team:data"]
plans:
  clean:
    group: ingest
    tags: {tier: bronze}
    partitions:
      daily: {start: "2024-01-01", end: "2024-01-04"}
      param: day
    schedule: {from_partitions: true}
    stores:
      clean:
        checks:
          columns: {id: BIGINT, user: MAP, user.name: VARCHAR, amount: BIGINT}
          row_count: {min: 1, max: 100}
  split:
    schedule: {cron: "0 4 * * *"}
    automation: eager
"""


def write_project(
    root: Path,
    *,
    plans: dict[str, Any] | None = None,
    project_yaml: str | None = PROJECT_YAML,
) -> Path:
    """Write raw data and plans under ``root``; returns the plans directory."""
    for day, rows in EVENTS.items():
        folder = root / "data" / "raw" / "events" / day
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "data" / "raw" / "customers.csv").write_text(CUSTOMERS)
    plans_dir = root / "plans"
    plans_dir.mkdir(parents=True, exist_ok=True)
    for name, plan in (plans if plans is not None else {"clean": CLEAN, "split": SPLIT}).items():
        (plans_dir / f"{name}.json").write_text(json.dumps(plan, indent=1))
    if project_yaml is not None:
        (plans_dir / "drill_project.yaml").write_text(project_yaml)
    return plans_dir


class ProjectKit:
    """What tests need to build projects (conftest modules cannot be imported by name)."""

    CLEAN = CLEAN
    SPLIT = SPLIT
    EVENTS = EVENTS
    DAYS = DAYS
    PROJECT_YAML = PROJECT_YAML

    @staticmethod
    def copy(plan: dict[str, Any]) -> dict[str, Any]:
        return json.loads(json.dumps(plan))

    write = staticmethod(write_project)


@pytest.fixture(scope="session")
def kit() -> type[ProjectKit]:
    return ProjectKit


@pytest.fixture
def plans_dir(tmp_path: Path) -> Path:
    return write_project(tmp_path)


@pytest.fixture(autouse=True)
def dagster_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("dagster_home")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home
