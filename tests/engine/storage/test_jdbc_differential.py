"""Differential: a ``jdbc`` scan, with the projection and filters the planner pushes into the SQL
it sends, gives the records a scan of the same rows from a parquet file gives, on both executors,
for generated filters (comparisons of every column type with values in and around the data,
combined with ``&&`` and ``||``) and projections."""

from __future__ import annotations

import datetime
import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.run import run_plan

PASSWORD_ENV = "DRILL_TEST_PG_DIFFERENTIAL"
TABLE = "public.differential"
WORDS = ["ann", "Bob", "bob", "", "Zoë", "a b", "o'hara", "zz", "Ärger", "10", "9"]
DAYS = [datetime.date(2020, 1, 1) + datetime.timedelta(days=d) for d in (-400, -1, 0, 3, 700)]
OPERATORS = ["==", "!=", "<", "<=", ">", ">="]
COLUMNS = ["i", "f", "s", "d", "b"]


def rows() -> pa.Table:
    """60 rows of every scalar type the engine pushes, nulls included (deterministic)."""
    pick = random.Random(7)

    def maybe(value: Any) -> Any:
        return None if pick.random() < 0.15 else value

    return pa.table(
        {
            "id": pa.array(range(60), pa.int64()),
            "i": pa.array([maybe(pick.randint(-5, 5)) for _ in range(60)], pa.int64()),
            "f": pa.array([maybe(pick.choice([-1.5, 0.0, 0.1, 2.25, 1e9])) for _ in range(60)]),
            "s": pa.array([maybe(pick.choice(WORDS)) for _ in range(60)], pa.string()),
            "d": pa.array([maybe(pick.choice(DAYS)) for _ in range(60)], pa.date32()),
            "b": pa.array([maybe(pick.random() < 0.5) for _ in range(60)], pa.bool_()),
        }
    )


@pytest.fixture(scope="module")
def sources(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The rows as a PostgreSQL table and as a parquet file: the two storage engines."""
    os.environ[PASSWORD_ENV] = postgres.password
    table = rows()
    with postgres.connect() as conn, conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
        cur.adbc_ingest("differential", table, mode="create", db_schema_name="public")
    root = tmp_path_factory.mktemp("differential")
    pq.write_table(table, root / "rows.parquet")
    return {
        "pg": {"type": "jdbc", "url": postgres.url, "user": "drill", "password_env": PASSWORD_ENV},
        "files": {"type": "fs", "root": str(root)},
    }


def literal(column: str, draw: Any) -> str:
    if column == "i":
        return str(draw(st.integers(-6, 6)))
    if column == "f":
        return repr(draw(st.sampled_from([-1.5, 0.0, 0.1, 2.25, 3.0, 1e9])))
    if column == "s":
        word = draw(st.sampled_from([*WORDS, "B", "a", "Z"]))
        return "'" + word.replace("'", "\\'") + "'"
    if column == "d":
        day = draw(st.sampled_from([*DAYS, datetime.date(2021, 6, 1)]))
        return f"to_date('{day.isoformat()}')"
    return draw(st.sampled_from(["true", "false"]))


@st.composite
def comparisons(draw: Any) -> str:
    column = draw(st.sampled_from(COLUMNS))
    operator = draw(st.sampled_from(OPERATORS[:2] if column == "b" else OPERATORS))
    return f"c.{column} {operator} {literal(column, draw)}"


@st.composite
def filters(draw: Any) -> str:
    parts = draw(st.lists(comparisons(), min_size=1, max_size=3))
    expr = parts[0]
    for part in parts[1:]:
        expr = f"({expr}) {draw(st.sampled_from(['&&', '||']))} {part}"
    return expr


def plan(sources: dict[str, Any], engine: str, expr: str, columns: list[str]) -> dict[str, Any]:
    selection = {"table": TABLE} if engine == "pg" else {"path": "rows.parquet"}
    projections = [{"ref": f"output.{c}", "expr": f"c.{c}"} for c in ["id", *columns]]
    return {
        "storage": {engine: sources[engine], "q": {"type": "queue"}},
        "query": [
            {"@id": 1, "op": "scan", "storageengine": engine, "ref": "c", "selection": selection},
            {"@id": 2, "op": "filter", "input": 1, "expr": expr},
            {"@id": 3, "op": "project", "input": 2, "projections": projections},
            {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}},
        ],
    }


def records(sources: dict[str, Any], engine: str, expr: str, columns: list[str], spark) -> list:
    run = plan(sources, engine, expr, columns)
    result = run_plan(run, executor="spark", spark=spark) if spark else run_plan(run)
    found = [{k: v for k, v in r.items() if v is not None} for r in result.records()]
    return sorted(found, key=lambda r: r["id"])


PROJECTIONS = st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=3, unique=True)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(expr=filters(), columns=PROJECTIONS)
def test_local_jdbc_scan_equals_the_file_scan(sources, expr: str, columns: list[str]) -> None:
    table = records(sources, "pg", expr, columns, None)
    assert table == records(sources, "files", expr, columns, None), expr


@pytest.mark.spark
@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(expr=filters(), columns=PROJECTIONS)
def test_spark_jdbc_scan_equals_the_file_scan(
    sources, spark, expr: str, columns: list[str]
) -> None:
    table = records(sources, "pg", expr, columns, spark)
    assert table == records(sources, "files", expr, columns, spark), expr


def test_the_filter_is_pushed_into_the_sql_sent(sources, postgres: Any) -> None:
    before = len(postgres.statements())
    records(sources, "pg", "c.i > 3", ["s"], None)
    sent = [s for s in postgres.statements()[before:] if "differential" in s]
    pushed = [s for s in sent if '"differential" WHERE "i" > $1' in s]
    assert pushed and all('"f"' not in s for s in pushed), sent


def test_the_data_is_varied(sources: dict[str, Any]) -> None:
    table = rows()
    assert all(table[c].null_count > 0 for c in COLUMNS)
    assert Path(sources["files"]["root"], "rows.parquet").is_file()
