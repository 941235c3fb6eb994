"""TPC-H for the tests and the benchmark: the generated data, the queries as tables of a metadata
repository, and the comparison of a result with the official answer.

The data, the 22 query texts and the answers come from DuckDB's tpch extension
(``scripts/tpch_data.py``, run by ``make tpch-data`` in its own virtualenv, cached in ``.tpch/``).
Only the tables' names are rewritten: each is a table of the repository, so the query text runs
as TPC-H gives it.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from datetime import date
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from engine.metadata import MetadataRepository

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE = REPO_ROOT / ".tpch"
TABLES = ("customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier")
QUERIES = tuple(range(1, 23))
RELATIVE = 1e-9
"""How close a floating-point result must be to the answer (relative): DuckDB's answers are
exact decimal sums and double averages, printed to 17 digits."""


def tpch_dir(sf: float = 0.01) -> Path:
    """The generated data at scale factor ``sf`` (``make tpch-data`` when it is not there yet)."""
    target = CACHE / f"sf{sf:g}"
    if not (target / "done").exists():
        subprocess.run(
            ["make", "--no-print-directory", "tpch-data", f"TPCH_SF={sf:g}"],
            cwd=REPO_ROOT,
            check=True,
            env={**os.environ, "MAKEFLAGS": ""},
        )
    return target


def repository(data: Path, catalog: Path) -> MetadataRepository:
    """A repository naming the 8 tables (``lineitem`` is ``<data>/lineitem.parquet``)."""
    repo = MetadataRepository({"tpch": {"type": "fs", "root": str(data)}}, catalog_file=catalog)
    for table in TABLES:
        repo.register_table(table, "tpch", {"path": f"{table}.parquet"})
    return repo


def query_text(data: Path, number: int) -> str:
    """Query ``number`` as TPC-H gives it (the one statement, without its final ``;``)."""
    return (data / "queries" / f"q{number:02d}.sql").read_text().strip().rstrip(";")


def answer(data: Path, number: int) -> tuple[list[str], list[list[str]]]:
    """The official answer: its column names and rows of texts."""
    header, *rows = (data / "answers" / f"q{number:02d}.csv").read_text().splitlines()
    return header.split("|"), [row.split("|") for row in rows]


def ordered(sql: str) -> bool:
    return "ORDER BY" in " ".join(sql.upper().split())


def mismatches(
    records: Sequence[Mapping[str, Any]],
    columns: list[str],
    rows: list[list[str]],
    *,
    in_order: bool,
) -> list[str]:
    """What differs between ``records`` and the answer (empty: they match).

    Texts, dates, integers and DECIMAL results must be equal at the answer's scale (a DECIMAL
    within half a unit of its last digit where the answer has more digits, a double average);
    floating-point results within :data:`RELATIVE`."""
    problems = []
    if records and not all(map(_same_name, records[0], columns)):
        problems.append(f"columns {list(records[0])}, expected {columns}")
        return problems
    if len(records) != len(rows):
        problems.append(f"{len(records)} rows, expected {len(rows)}")
    got = [list(record.values()) for record in records]
    if not in_order:
        got = _align(got, rows)
    for i, (ours, theirs) in enumerate(zip(got, rows)):
        for column, value, text in zip(columns, ours, theirs):
            if not value_matches(value, text):
                problems.append(f"row {i + 1}, {column}: {value!r}, expected {text}")
    return problems[:20]


def _same_name(ours: str, theirs: str) -> bool:
    """Column names match, but for an expression the query did not name: SQL leaves its name to
    the engine (ours is Drill's ``EXPR$<n>``, the answers' DuckDB's, e.g. ``sum``)."""
    return ours.lower() == theirs.lower() or re.fullmatch(r"EXPR\$\d+", ours) is not None


def value_matches(value: Any, text: str) -> bool:
    """Whether one of our values is the answer's ``text``."""
    if value is None:
        return text in ("", "NULL")
    if isinstance(value, bool):
        return str(value).lower() == text.lower()
    if isinstance(value, str):
        return value == text
    if isinstance(value, date):
        return value.isoformat() == text
    try:
        expected = Decimal(text)
    except InvalidOperation:
        return False
    if isinstance(value, int):
        return Decimal(value) == expected
    if isinstance(value, Decimal):
        ours, theirs = value.as_tuple().exponent, expected.as_tuple().exponent
        assert isinstance(ours, int) and isinstance(theirs, int)
        if theirs >= ours:  # the answer's digits are all ours: exactly equal
            return value == expected
        # the answer has more digits (DuckDB's double averages): ours is it rounded
        return abs(value - expected) <= Decimal(1).scaleb(ours) / 2
    return math.isclose(float(value), float(expected), rel_tol=RELATIVE, abs_tol=1e-12)


def _align(got: list[list[Any]], rows: list[list[str]]) -> list[list[Any]]:
    """``got`` reordered to follow ``rows`` where a row of it matches (numbers print differently
    from the texts, so sorting both alone is not enough)."""
    left = list(got)
    result = []
    for row in rows:
        match = next(
            (r for r in left if all(value_matches(v, t) for v, t in zip(r, row))),
            None,
        )
        if match is not None:
            left.remove(match)
            result.append(match)
    return result + left
