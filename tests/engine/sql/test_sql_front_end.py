"""SQL features beyond the JdbcTest, and errors that point at the SQL with line and column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import SqlError
from engine.metadata import MetadataRepository
from engine.run import run_plan
from engine.sql import sql_to_plan

ROWS = [
    {"id": 1, "dept": "a", "pay": 10, "tags": ["x", "y"], "addr": {"city": "Oslo"}},
    {"id": 2, "dept": "b", "pay": 30, "tags": [], "addr": {"city": "Rome"}},
    {"id": 3, "dept": "a", "pay": 20, "tags": ["z"], "addr": {"city": "Oslo"}},
]


@pytest.fixture
def repo(tmp_path: Path) -> MetadataRepository:
    (tmp_path / "emp.json").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (tmp_path / "dept.json").write_text('{"dept": "a", "name": "Alpha"}\n')
    repo = MetadataRepository({"fs": {"type": "fs", "root": str(tmp_path)}})
    repo.register_table("emp", "fs", {"path": "emp.json"})
    repo.register_table("dept", "fs", {"path": "dept.json"})
    return repo


def run(sql: str, repo: MetadataRepository) -> list:
    return run_plan(sql_to_plan(sql, repo)).records()


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("select e.addr.city as c, e.tags[0] t from emp e where id = 1", [{"c": "Oslo", "t": "x"}]),
        ("select id, flatten(tags) as tag from emp", [{"id": 1, "tag": "x"}, {"id": 1, "tag": "y"}, {"id": 3, "tag": "z"}]),
        ("select dept, sum(pay) s from emp group by dept having sum(pay) > 25 order by dept", [{"dept": "a", "s": 30}, {"dept": "b", "s": 30}]),
        ("select id from emp order by pay desc limit 1 offset 1", [{"id": 3}]),
        ("select id, name from emp left join dept on emp.dept = dept.dept order by id", [{"id": 1, "name": "Alpha"}, {"id": 2, "name": None}, {"id": 3, "name": "Alpha"}]),
        ("select dept from emp union select dept from dept order by dept", [{"dept": "a"}, {"dept": "b"}]),
        ("select x from (values (1), (2)) as t(x) where x > 1", [{"x": 2}]),
        ("select id, sum(pay) over (partition by dept order by id) as run from emp order by id", [{"id": 1, "run": 10}, {"id": 2, "run": 30}, {"id": 3, "run": 30}]),
        ("select distinct dept from emp order by dept", [{"dept": "a"}, {"dept": "b"}]),
        ("select upper(dept) || '!' as d from (select dept from emp where pay < 15) s", [{"d": "A!"}]),
    ],
)  # fmt: skip
def test_sql_features_run_on_the_local_executor(repo, sql, expected) -> None:
    assert run(sql, repo) == expected


@pytest.mark.parametrize(
    ("sql", "message", "line", "column"),
    [
        ("select id\nfrom emps", "unknown table 'emps'", 2, 6),
        ("select id,\n  payy from emp", "unknown column 'payy'", 2, 3),
        ("select e.nope from emp e", "unknown column 'nope' in e", 1, 10),
        ("select dept from emp join dept on emp.dept = dept.dept", "'dept' is ambiguous", 1, 8),
        ("select id, count(*) from emp", "'id' must appear in GROUP BY", 1, 8),
        ("select nosuch(id) from emp", "unknown function 'nosuch'", 1, 8),
        ("select id from\nwhere", "syntax error", 2, 1),
    ],
)
def test_errors_name_line_and_column(repo, sql, message, line, column) -> None:
    with pytest.raises(SqlError, match=message) as caught:
        sql_to_plan(sql, repo)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert "^" in str(caught.value)


def test_registrations_persist_for_a_new_process(repo: MetadataRepository, tmp_path: Path) -> None:
    repo.register_view("rich", "select id from emp where pay > 15")
    again = MetadataRepository({"fs": {"type": "fs", "root": str(tmp_path)}})
    assert sorted(t.name for t in again.tables()) == ["dept", "emp", "rich"]
    assert run("select id from rich order by id", again) == [{"id": 2}, {"id": 3}]
    stats = again.statistics(again.resolve(["emp"]))
    assert (stats.file_count, stats.row_count) == (1, None)  # JSON keeps no row count
    assert again.capabilities("fs", {"path": "emp.json"}).can_push_projection


def test_a_store_records_schema_rows_and_version(repo: MetadataRepository, tmp_path: Path) -> None:
    plan = sql_to_plan(
        "select dept, pay from emp", repo, store={"engine": "fs", "target": {"path": "out/pay"}}
    )
    result = run_plan(plan)
    fresh = MetadataRepository({"fs": {"type": "fs", "root": str(tmp_path)}})
    table = fresh.resolve(["fs", "out", "pay"])
    stored = fresh.stored(table)
    assert stored is not None and stored.version and stored.row_count == 3
    assert fresh.schema(table).names == ["dept", "pay"]
    assert fresh.statistics(table).row_count == result.stores[0].row_count
