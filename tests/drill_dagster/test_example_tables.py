"""The example plan that reads PostgreSQL and writes a Spark catalog table
(``examples/plans/business_customers.json``), end to end through Dagster on Spark against a real
server seeded as ``make demo`` seeds it (``examples/demo_database.py``); and how the demo skips
it where it cannot start its database."""

from __future__ import annotations

import csv
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from dagster import AssetKey, AssetsDefinition, DagsterInstance
from dagster_runs import materialize_ok

from drill_dagster import load_definitions

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PLAN = "business_customers"
TABLE = AssetKey(["analytics", "business_customers"])


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``examples/demo_database.py`` (and the generator beside it), imported from examples/."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        import demo_database
        import generate
    finally:
        sys.path.remove(str(EXAMPLES))
    raw = tmp_path_factory.mktemp("example_tables") / "data"
    generate.generate(raw, days=1, scale=0.2)
    demo_database.RAW = raw / "raw"
    return demo_database


def _plans(root: Path, url: str | None = None) -> Path:
    """The example plan in ``root/plans``, reaching the database at ``url`` when given."""
    plans = root / "plans"
    plans.mkdir(parents=True)
    plan = json.loads((EXAMPLES / "plans" / f"{PLAN}.json").read_text())
    if url is not None:
        plan["storage"]["crm"]["url"] = url
    (plans / f"{PLAN}.json").write_text(json.dumps(plan))
    return plans


def _expected(raw: Path) -> list[tuple[Any, ...]]:
    """The CRM's business customers, read from its CSV export with the standard library."""
    with (raw / "customers.csv").open(newline="") as f:
        return sorted(
            (int(r["customer_id"]), r["name"], r["country"].upper(), r["signup_date"], r["segment"])
            for r in csv.DictReader(f)
            if r["segment"] != "consumer"
        )


@pytest.mark.spark
def test_the_example_reads_postgres_into_a_catalog_table(
    demo: Any, postgres: Any, tmp_path: Path, spark: Any
) -> None:
    loaded = demo.seed(postgres, demo.RAW)
    plans = _plans(tmp_path, postgres.url)
    password_env = json.loads((plans / f"{PLAN}.json").read_text())["storage"]["crm"][
        "password_env"
    ]
    os.environ[password_env] = postgres.password
    (tmp_path / "data").mkdir()
    defs = load_definitions(plans, executor="spark")
    specs = {
        s.key: s for a in defs.assets or () if isinstance(a, AssetsDefinition) for s in a.specs
    }
    source = AssetKey([postgres.database, "crm", "customers"])  # the database and its table
    assert source in {d.asset_key for d in specs[TABLE].deps}

    with DagsterInstance.ephemeral() as instance:
        result = materialize_ok(defs, instance)
    (event,) = [
        e.materialization for e in result.get_asset_materialization_events() if e.asset_key == TABLE
    ]
    expected = _expected(demo.RAW)
    assert 0 < len(expected) < loaded
    assert event.metadata["dagster/row_count"].value == len(expected)
    rows = spark.table("analytics.business_customers").collect()
    got = sorted(
        (r.customer_id, r.name, r.country, r.signup_date.isoformat(), r.segment) for r in rows
    )
    assert got == expected
    assert {r.segment for r in rows} <= {"smb", "enterprise"}
    # The filter went into the SQL PostgreSQL ran, not after reading every customer.
    assert any("consumer" in s and "customers" in s for s in postgres.statements())


def test_the_demo_names_the_database_the_plan_reads(demo: Any) -> None:
    wanted = demo.demo_database(EXAMPLES / "plans")
    assert (wanted.port, wanted.database) == (55432, "shop")
    assert demo.plans_using(EXAMPLES / "plans", "jdbc") == [PLAN]
    assert PLAN in demo.plans_using(EXAMPLES / "plans", "catalog")


def test_the_demo_skips_the_plan_in_one_line_when_its_port_is_taken(
    demo: Any, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        plans = _plans(tmp_path, f"postgresql://127.0.0.1:{port}/shop")
        server, why = demo.start_database(plans, demo.RAW)
    assert server is None
    if demo.binaries_missing() is None:
        assert why == f"127.0.0.1:{port}, where the plans' database listens, is taken"
    else:
        assert why == demo.binaries_missing()
    assert "\n" not in why


def test_no_jdbc_plan_no_database(demo: Any, tmp_path: Path) -> None:
    (tmp_path / "plans").mkdir()
    assert demo.start_database(tmp_path / "plans", demo.RAW) == (None, None)
