"""The JdbcTest statements (corpus T12-T23) as SQL: their plans give the corpus results.

The SQL is that of Drill's early JdbcTest (sqlparser, apache/drill c25260ee84); its model had
DONUTS, EMPLOYEES and DEPARTMENTS as JSON tables whose rows are one ``_MAP`` column, and EMP and
DEPT as views."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conformance_compare import read_jsonl, records_match
from golden_files import assert_golden

from engine.metadata import MetadataRepository
from engine.plan import parse_plan
from engine.run import run_plan
from engine.sql import sql_to_plan

JDBC_SQL = {
    "T12": "select _MAP['ppu'] as ppu from donuts",
    "T13": "select 1 + 3 as c from donuts",
    "T14": "select d['name'] as name, d['xx'] as xx from (\n"
    " select _MAP as d from donuts)\n"
    "where cast(d['ppu'] as double) > 0.6",
    "T15": "select * from donuts where 3 > 4",
    "T16": "select count(deptId) as cd, count(*) as c from emp",
    "T17": "select deptId, count(*) as c from emp group by deptId",
    "T18": "select * from emp order by deptId desc nulls first",
    "T19": "select * from emp order by deptId desc nulls last",
    "T20": "select * from emp order by deptId asc nulls last",
    "T21": "select * from emp join dept on emp.deptId = dept.deptId",
    "T22": "select * from emp left join dept on emp.deptId = dept.deptId",
    "T23": "select * from emp full join dept on emp.deptId = dept.deptId",
}

VIEWS = {
    "EMP": "select _MAP['deptId'] as deptid, cast(_MAP['lastName'] as varchar) as lastName "
    "from employees",
    "DEPT": "select _MAP['deptId'] as deptid, _MAP['name'] as name from departments",
}


def jdbc_repository(data_dir: Path) -> MetadataRepository:
    """The JdbcTest model over the corpus data (nothing is persisted: no fs engine)."""
    repo = MetadataRepository({"donuts-json": {"type": "classpath"}}, classpath=[data_dir])
    for name, path in (
        ("DONUTS", "/donuts.json"),
        ("EMPLOYEES", "/employees.json"),
        ("DEPARTMENTS", "/departments.json"),
    ):
        repo.register_table(name, "donuts-json", {"path": path}, record_column="_MAP")
    for name, sql in VIEWS.items():
        repo.register_view(name, sql)
    return repo


CASES = sorted(JDBC_SQL)


def _case(conformance_dir: Path, case_id: str) -> dict:
    cases = json.loads((conformance_dir / "cases.json").read_text())["cases"]
    return next(c for c in cases if c["id"] == case_id)


def check(conformance_dir: Path, case_id: str, executor: str, **options) -> None:
    data = conformance_dir / "data"
    plan = sql_to_plan(JDBC_SQL[case_id], jdbc_repository(data), case="upper")
    parse_plan(plan)  # an ordinary plan: validates like a hand-written one
    case = _case(conformance_dir, case_id)
    records = run_plan(plan, executor=executor, classpath=[data], **options).records()
    expected = read_jsonl(conformance_dir / case["expected"])
    assert records_match(records, expected, ordered=case["compare"] == "ordered"), (
        f"{case_id}: {records} != {expected}"
    )


@pytest.mark.parametrize("case_id", CASES)
def test_jdbc_sql_on_the_local_executor(conformance_dir: Path, case_id: str) -> None:
    check(conformance_dir, case_id, "local")


@pytest.mark.spark
@pytest.mark.parametrize("case_id", CASES)
def test_jdbc_sql_on_spark(conformance_dir: Path, case_id: str, spark) -> None:
    check(conformance_dir, case_id, "spark", spark=spark)


GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "sql"


@pytest.mark.parametrize("case_id", CASES)
def test_jdbc_sql_plan_matches_its_golden_file(conformance_dir: Path, case_id: str) -> None:
    """SQL -> plan JSON is stable; regenerate with DRILL_UPDATE_GOLDEN=1 after a deliberate change."""

    plan = sql_to_plan(JDBC_SQL[case_id], jdbc_repository(conformance_dir / "data"), case="upper")
    text = f"-- {JDBC_SQL[case_id]}\n" + json.dumps(plan, indent=1) + "\n"
    assert_golden(GOLDEN / f"{case_id}.plan", text)
