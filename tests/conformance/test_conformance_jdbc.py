"""The conformance corpus against PostgreSQL: every case whose scans read JSON files of flat
records (scalar members, one type per member) runs with those files loaded into PostgreSQL
tables and its scans reading them through the ``jdbc`` engine, on both executors, against the
case's expected records. A member a file's record lacks is NULL in the table, which the corpus
compares equal to an absent member; each table holds its file's records in file order, which a
table of one insert returns them in."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conformance_compare import read_jsonl, records_match
from corpus import PARSE_ONLY, REJECTED_OPERATORS, load_cases

from engine import parse_plan, run_plan
from engine.plan import Scan

PASSWORD_ENV = "DRILL_TEST_PG_CORPUS"
SCHEMA = "corpus"
ENGINE = "pg_corpus"
_TYPES = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}


def json_records(path: Path) -> list[Any]:
    """The records of a Drill JSON file: objects one after another, pretty-printed or not."""
    text, decoder, records, at = path.read_text(), json.JSONDecoder(), [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return records
        record, at = decoder.raw_decode(text, at)
        records.append(record)


def flat_schema(records: list[Any]) -> pa.Schema | None:
    """The table schema of flat records (members in first appearance order), or None where a
    record is not a map, a member is nested, or a member's values have more than one type."""
    types: dict[str, type | None] = {}
    for record in records:
        if not isinstance(record, dict):
            return None
        for name, value in record.items():
            if isinstance(value, dict | list):
                return None
            kind = None if value is None else type(value)
            known = types.setdefault(name, kind)
            if kind is not None and known is not None and kind is not known:
                return None
            if known is None:
                types[name] = kind
    if not records or not types:
        return None
    return pa.schema([(n, _TYPES[t] if t is not None else pa.string()) for n, t in types.items()])


def scanned_file(case: dict[str, Any], plan: Any, scan: Scan) -> Path | None:
    """The JSON file a classpath scan reads (None for any other scan)."""
    config = plan.storage.get(scan.storage_engine)
    path = (scan.selection or {}).get("path")
    if config is None or config.type != "classpath" or not isinstance(path, str):
        return None
    file = case["classpath"] / path.lstrip("/")
    return file if file.is_file() and file.suffix == ".json" else None


def table_cases() -> list[Any]:
    """The corpus cases that run with tables: (case, {scanned file: table name, schema})."""
    found = []
    for case in load_cases():
        if case.get("expect_error") or case["id"] in PARSE_ONLY | set(REJECTED_OPERATORS):
            continue
        plan = parse_plan(case["root"] / case["plan"])
        scans = [op for op in plan.query if isinstance(op, Scan)]
        if not scans:
            continue
        tables = {}
        for scan in scans:
            file = scanned_file(case, plan, scan)
            schema = None if file is None else flat_schema(json_records(file))
            if schema is None:
                break
            name = "t_" + hashlib.sha256(str(file).encode()).hexdigest()[:12]
            tables[str(file)] = (name, schema)
        else:
            found.append(pytest.param(case, tables, id=case["id"]))
    return found


CASES = table_cases()


@pytest.fixture(scope="module")
def pg(postgres: Any) -> Any:
    """The server with a table per flat file the cases scan, loaded in file order."""
    os.environ[PASSWORD_ENV] = postgres.password
    loaded: dict[str, tuple[str, pa.Schema]] = {}
    for param in CASES:
        loaded.update(param.values[1])
    with postgres.connect() as conn, conn.cursor() as cur:
        cur.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        cur.execute(f"CREATE SCHEMA {SCHEMA}")
        for file, (name, schema) in loaded.items():
            rows = json_records(Path(file))
            table = pa.Table.from_pylist(rows, schema=schema)
            cur.adbc_ingest(name, table, mode="create", db_schema_name=SCHEMA)
    return postgres


def on_tables(case: dict[str, Any], tables: dict[str, tuple[str, pa.Schema]], pg: Any) -> Any:
    """The case's plan with each scan reading its file's table through the jdbc engine."""
    plan = parse_plan(case["root"] / case["plan"])
    query = []
    for op in plan.query:
        if isinstance(op, Scan):
            name, _ = tables[str(scanned_file(case, plan, op))]
            op = op.model_copy(
                update={"storage_engine": ENGINE, "selection": {"table": f"{SCHEMA}.{name}"}}
            )
        query.append(op)
    document = plan.with_query(query).to_dict()
    document["storage"][ENGINE] = {
        "type": "jdbc",
        "url": pg.url,
        "user": "drill",
        "password_env": PASSWORD_ENV,
        "writable": False,
    }
    return parse_plan(document)


def test_the_corpus_has_cases_whose_inputs_are_tables() -> None:
    assert len(CASES) >= 15, [p.id for p in CASES]


@pytest.mark.parametrize("executor", ["local", "spark"])
@pytest.mark.parametrize(("case", "tables"), CASES)
def test_case_on_tables(
    case: dict[str, Any], tables: dict[str, Any], executor: str, pg: Any, request: Any
) -> None:
    plan = on_tables(case, tables, pg)
    options = {"spark": request.getfixturevalue("spark")} if executor == "spark" else {}
    actual = run_plan(plan, executor=executor, **options).records()
    expected = read_jsonl(case["root"] / case["expected"])
    assert len(actual) == case["expected_count"]
    assert records_match(actual, expected, ordered=case["compare"] == "ordered"), (
        f"got {actual}\nexpected {expected}"
    )
