"""The ``jdbc`` engine against a real PostgreSQL server (``postgres`` fixture), on both executors:
the same records (differential), pushdown into the SQL sent, injection attempts through table
names, column names and literals, stores (replace, append, partition overwrite, failure keeps
the previous table), and the password kept out of every message and result."""

from __future__ import annotations

import datetime
import decimal
import os
from typing import Any

import pytest

from engine.errors import DrillError, StorageError
from engine.run import run_plan
from engine.storage.engines import create_engine

PASSWORD_ENV = "DRILL_TEST_PG_PASSWORD"
EXECUTORS = ["local", "spark"]


@pytest.fixture(scope="module")
def pg(postgres):
    os.environ[PASSWORD_ENV] = postgres.password
    postgres.execute(
        "DROP TABLE IF EXISTS customers",
        "CREATE TABLE customers (id int, big bigint, amount numeric(10,2), name text, "
        "joined date, seen timestamp, active bool)",
        "INSERT INTO customers VALUES "
        "(1, 10000000000, 12.34, 'ann', '2020-01-02', '2020-01-02 03:04:05.123456', true),"
        "(2, NULL, NULL, 'Bob', NULL, NULL, false),"
        "(3, 3, 0.50, NULL, '2021-05-05', '2021-05-05 00:00:00', NULL),"
        "(4, -7, -1.00, 'o''hara', '2019-12-31', '2019-12-31 23:59:59', true),"
        "(5, 5, 99.99, 'Zoë', '2022-02-02', '2022-02-02 12:00:00', false)",
    )
    return postgres


def storage(pg, **extra: Any) -> dict[str, Any]:
    config = {"type": "jdbc", "url": pg.url, "user": "drill", "password_env": PASSWORD_ENV}
    return {"pg": {**config, **extra}, "q": {"type": "queue"}}


def scan_plan(pg, selection: dict, expr: str | None = None, columns=None) -> dict:
    query: list[dict] = [
        {"@id": 1, "op": "scan", "storageengine": "pg", "ref": "c", "selection": selection}
    ]
    last = 1
    if expr is not None:
        query.append({"@id": 2, "op": "filter", "input": 1, "expr": expr})
        last = 2
    if columns is not None:
        projections = [{"ref": f"output.{c}", "expr": f"c.{c}"} for c in columns]
        query.append({"@id": 3, "op": "project", "input": last, "projections": projections})
        last = 3
    query.append({"@id": 9, "op": "store", "input": last, "storageengine": "q", "target": {}})
    return {"storage": storage(pg), "query": query}


def run(plan: dict, executor: str, spark) -> Any:
    if executor == "spark":
        return run_plan(plan, executor="spark", spark=spark)
    return run_plan(plan, executor="local")


def by_id(records: list[dict]) -> list[dict]:
    return sorted(records, key=lambda r: r.get("id") or 0)


@pytest.fixture(params=EXECUTORS)
def executor(request) -> str:
    return request.param


@pytest.fixture
def spark_or_none(executor, request):
    return request.getfixturevalue("spark") if executor == "spark" else None


# ---------------------------------------------------------------- scans


def test_both_executors_read_the_same_typed_records(pg, spark) -> None:
    plan = scan_plan(pg, {"table": "public.customers"}, columns=None)
    plan["query"].insert(
        1,
        {
            "@id": 3,
            "op": "project",
            "input": 1,
            "projections": [
                {"ref": f"output.{c}", "expr": f"c.{c}"}
                for c in ("id", "big", "amount", "name", "joined", "seen", "active")
            ],
        },
    )
    plan["query"][-1]["input"] = 3
    local = by_id(run(plan, "local", None).records())
    on_spark = by_id(run(plan, "spark", spark).records())
    assert local == on_spark
    first = local[0]
    assert first["amount"] == decimal.Decimal("12.34")
    assert first["joined"] == datetime.date(2020, 1, 2)
    assert first["seen"].replace(tzinfo=None) == datetime.datetime(2020, 1, 2, 3, 4, 5, 123456)
    assert first["big"] == 10_000_000_000 and first["active"] is True
    assert local[1]["amount"] is None and local[1]["joined"] is None and local[1]["big"] is None
    assert [r["name"] for r in local] == ["ann", "Bob", None, "o'hara", "Zoë"]


@pytest.mark.parametrize(
    ("expr", "ids"),
    [
        ("c.id > 2 && c.id <= 4", [3, 4]),
        ("c.name == 'o\\'hara'", [4]),
        ("c.name < 'a'", [2, 5]),  # byte-wise: 'Bob' < 'Zoë' < 'a' < 'ann'
        ("c.amount >= 12.34", [1, 5]),
        ("c.joined < to_date('2020-01-01')", [4]),
        ("c.active == false", [2, 5]),
        ("c.id > 1 && lower(c.name) == 'bob'", [2]),
    ],
)
def test_filters_give_the_same_rows_on_both(pg, executor, spark_or_none, expr, ids) -> None:
    records = run(scan_plan(pg, {"table": "customers"}, expr, ["id"]), executor, spark_or_none)
    assert sorted(r["id"] for r in records.records()) == ids


def test_a_query_selection_reads_in_a_read_only_session(pg, executor, spark_or_none) -> None:
    selection = {"query": "SELECT id, name FROM customers WHERE id < 3"}
    records = run(scan_plan(pg, selection, None, ["id", "name"]), executor, spark_or_none)
    assert by_id(records.records()) == [{"id": 1, "name": "ann"}, {"id": 2, "name": "Bob"}]
    pg.execute("DROP SEQUENCE IF EXISTS victim", "CREATE SEQUENCE victim")
    writing = {"query": "SELECT nextval('victim') AS a"}
    with pytest.raises(DrillError, match="read-only"):
        run(scan_plan(pg, writing, None, ["a"]), executor, spark_or_none)


def test_the_sql_sent_holds_projection_and_filter_with_bound_values(pg) -> None:
    """The local executor's SQL: pushed columns and comparisons, the value as a parameter."""
    engine = create_engine("pg", storage(pg)["pg"])
    from engine.plan.expressions import parse_cached
    from engine.storage.jdbc.adbc import column_families
    from engine.storage.jdbc.sql import comparisons_of, select_sql

    schema = engine.scan_columns({"table": "customers"})
    tests, exact = comparisons_of(
        parse_cached("c.name == 'x\\' OR 1=1 --' && c.id > 1"), "c", column_families(schema)
    )
    sql, params = select_sql(engine.scan_source({"table": "customers"}).source, ["id"], tests)
    assert exact
    assert sql == (
        'SELECT "id" FROM "public"."customers" WHERE "name"::text COLLATE "C" = $1 AND "id" > $2'
    )
    assert params == ["x' OR 1=1 --", 1]


def test_the_sql_sent_on_each_executor_reads_only_what_the_plan_needs(
    pg, executor, spark_or_none
) -> None:
    marker = "needle_" + executor
    plan = scan_plan(pg, {"table": "customers"}, f"c.name == '{marker}' && c.id > 0", ["id"])
    assert run(plan, executor, spark_or_none).records() == []
    sent = [s for s in pg.statements() if "customers" in s and "WHERE" in s and "name" in s]
    sent = [s for s in sent if "$1" in s or marker in s]
    assert sent, pg.statements()[-10:]
    last = sent[-1]
    assert '"amount"' not in last.split("FROM")[0]  # the projection: id (and name, filtered)
    if executor == "local":
        assert marker not in last  # a bound parameter, not text
    else:  # Spark's JDBC source writes the filter it pushes itself
        assert f"'{marker}'" in last


def test_partitioned_spark_read_equals_the_whole_read(pg, spark) -> None:
    selection = {"table": "customers", "partitionColumn": "id", "numPartitions": 3}
    records = run(scan_plan(pg, selection, None, ["id"]), "spark", spark).records()
    assert sorted(r["id"] for r in records) == [1, 2, 3, 4, 5]


# ---------------------------------------------------------------- injection


INJECTED_TABLES = [
    'customers"; DROP TABLE customers; --',
    "customers; DROP TABLE customers",
    'public"."customers',
]


@pytest.mark.parametrize("table", INJECTED_TABLES)
def test_table_names_cannot_inject(pg, executor, spark_or_none, table) -> None:
    with pytest.raises(DrillError) as caught:
        run(
            scan_plan(pg, {"schema": "public", "table": table}, None, ["id"]),
            executor,
            spark_or_none,
        )
    assert "does not exist" in str(caught.value)
    assert pg.query("SELECT count(*) FROM customers") == [(5,)]


def test_column_names_and_literals_cannot_inject(pg, executor, spark_or_none) -> None:
    column = 'id" FROM customers; DROP TABLE customers; --'
    plan = scan_plan(pg, {"table": "customers"}, f"c.`{column}` == 1", ["id"])
    assert run(plan, executor, spark_or_none).records() == []  # no such column: nothing kept
    literal = "c.name == 'x\\'; DROP TABLE customers; --'"
    assert (
        run(
            scan_plan(pg, {"table": "customers"}, literal, ["id"]), executor, spark_or_none
        ).records()
        == []
    )
    assert pg.query("SELECT count(*) FROM customers") == [(5,)]


def test_stored_names_cannot_inject(pg) -> None:
    engine = create_engine("pg", storage(pg)["pg"])
    import pyarrow as pa

    from engine.storage.store import write_store

    odd = 'x"; DROP TABLE customers; --'
    result = write_store(engine, {"schema": "public", "table": odd}, pa.table({odd: [1]}))
    assert result.row_count == 1
    assert pg.query(
        f'SELECT "{odd.replace(chr(34), chr(34) * 2)}" FROM "{odd.replace(chr(34), chr(34) * 2)}"'
    ) == [(1,)]
    assert pg.query("SELECT count(*) FROM customers") == [(5,)]


# ---------------------------------------------------------------- stores


def store_plan(pg, target: dict, rows: list[dict]) -> dict:
    return {
        "storage": storage(pg),
        "query": [
            {"@id": 1, "op": "constant", "content": rows},
            {"@id": 2, "op": "store", "input": 1, "storageengine": "pg", "target": target},
        ],
    }


def table_rows(pg, table: str) -> list[tuple]:
    return sorted(pg.query(f"SELECT day, n FROM {table}"))


def test_replace_append_and_partition_overwrite(pg, executor, spark_or_none) -> None:
    table = f"store_{executor}"
    pg.execute(f"DROP TABLE IF EXISTS {table}")
    first = [{"day": d, "n": 1} for d in (1, 1, 2, 3)]
    result = run(store_plan(pg, {"table": table}, first), executor, spark_or_none)
    assert result.stores[0].row_count == 4
    assert result.stores[0].location == f"drill.public.{table}"
    assert table_rows(pg, table) == [(1, 1), (1, 1), (2, 1), (3, 1)]
    run(store_plan(pg, {"table": table}, [{"day": 9, "n": 9}]), executor, spark_or_none)
    assert table_rows(pg, table) == [(9, 9)]  # replaced whole
    run(store_plan(pg, {"table": table, "mode": "append"}, first), executor, spark_or_none)
    assert len(table_rows(pg, table)) == 5
    again = {"table": table, "partitionBy": ["day"]}
    run(store_plan(pg, again, [{"day": 1, "n": 2}, {"day": 4, "n": 2}]), executor, spark_or_none)
    assert table_rows(pg, table) == [(1, 2), (2, 1), (3, 1), (4, 2), (9, 9)]
    with pytest.raises(DrillError, match="exists"):
        run(store_plan(pg, {"table": table, "mode": "error"}, first), executor, spark_or_none)
    leftovers = pg.query(f"SELECT relname FROM pg_class WHERE relname LIKE '{table}__drill%'")
    assert leftovers == []


def test_a_failing_store_leaves_the_previous_table(pg, executor, spark_or_none) -> None:
    table = f"kept_{executor}"
    pg.execute(f"DROP TABLE IF EXISTS {table}")
    run(store_plan(pg, {"table": table}, [{"day": 1, "n": 1}]), executor, spark_or_none)
    pg.execute(f"CREATE VIEW {table}_view AS SELECT * FROM {table}")  # a replace must drop it
    with pytest.raises(DrillError, match="depend"):
        run(store_plan(pg, {"table": table}, [{"day": 2, "n": 2}]), executor, spark_or_none)
    assert table_rows(pg, table) == [(1, 1)]
    pg.execute(f"DROP VIEW {table}_view")
    leftovers = pg.query(f"SELECT relname FROM pg_class WHERE relname LIKE '{table}__drill%'")
    assert leftovers == []


# ---------------------------------------------------------------- the password


def test_the_password_is_never_shown(pg, executor, spark_or_none, capfd) -> None:
    good = run(scan_plan(pg, {"table": "customers"}, None, ["id"]), executor, spark_or_none)
    texts = [repr(good.stores), repr(good.metrics) if hasattr(good, "metrics") else ""]
    os.environ["DRILL_TEST_PG_WRONG"] = pg.password + "x"
    plan = scan_plan(pg, {"table": "customers"}, None, ["id"])
    plan["storage"]["pg"]["password_env"] = "DRILL_TEST_PG_WRONG"
    with pytest.raises(DrillError) as caught:
        run(plan, executor, spark_or_none)
    texts.append(str(caught.value))
    assert "password authentication failed" in str(caught.value)
    missing = scan_plan(pg, {"table": "customers"}, None, ["id"])
    missing["storage"]["pg"]["password_env"] = "DRILL_TEST_PG_UNSET"
    with pytest.raises(DrillError, match="DRILL_TEST_PG_UNSET"):
        run(missing, executor, spark_or_none)
    out, err = capfd.readouterr()
    for text in [*texts, out, err]:
        assert pg.password not in text


def test_a_password_in_the_plan_is_refused(pg) -> None:
    with pytest.raises(StorageError, match="does not take password"):
        create_engine("pg", {**storage(pg)["pg"], "password": "secret"})
    with pytest.raises(StorageError, match="credentials") as caught:
        create_engine("pg", {"type": "jdbc", "url": "postgresql://u:hunter2@h/db"})
    assert "hunter2" not in str(caught.value)


def test_uuid_and_json_columns_read_as_text_on_both(pg, spark) -> None:
    pg.execute(
        "DROP TABLE IF EXISTS odd_types",
        "CREATE TABLE odd_types (id int, u uuid, j jsonb, v varchar(5))",
        "INSERT INTO odd_types VALUES (1, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', "
        """'{"a": [1, 2]}', 'x'), (2, NULL, NULL, NULL)""",
    )
    plan = scan_plan(pg, {"table": "odd_types"}, None, ["id", "u", "j", "v"])
    local = by_id(run(plan, "local", None).records())
    assert local == by_id(run(plan, "spark", spark).records())
    assert local[0] == {
        "id": 1,
        "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        "j": '{"a": [1, 2]}',
        "v": "x",
    }
    compared = scan_plan(pg, {"table": "odd_types"}, "c.u > 'a'", ["id"])
    for executor, session in (("local", None), ("spark", spark)):
        assert [r["id"] for r in run(compared, executor, session).records()] == [1]
