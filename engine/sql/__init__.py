"""SQL in, logical plans out: the query parser of seed 000.

:func:`sql_to_plan` parses one statement with sqlglot (Drill dialect), resolves its tables and
columns through a :class:`~engine.metadata.MetadataRepository`, and returns an ordinary plan dict:
``parse_plan`` validates it, ``explain`` shows it and ``run_plan`` runs it like a hand-written one.
Unknown tables and columns are :class:`~engine.errors.SqlError`\\ s with line and column.

>>> import tempfile, pathlib
>>> from engine.metadata import MetadataRepository
>>> from engine.run import run_plan
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> _ = (root / "emp.json").write_text('{"name": "a", "dept": 1}\\n{"name": "b", "dept": 2}\\n')
>>> repo = MetadataRepository({"lake": {"type": "fs", "root": str(root)}})
>>> plan = sql_to_plan("select name from lake.`emp.json` where dept > 1", repo)
>>> [op["op"] for op in plan["query"]]
['scan', 'filter', 'project', 'store']
>>> run_plan(plan).records()
[{'name': 'b'}]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.metadata import MetadataRepository
from engine.sql.sql_file import SqlFile, read_sql_file, sql_file_to_plan
from engine.sql.translate import CASES, plan_statement


def sql_to_plan(
    sql: str,
    repository: MetadataRepository,
    *,
    store: Mapping[str, Any] | None = None,
    case: str = "preserve",
) -> dict[str, Any]:
    """The logical plan (a dict) of one SQL statement.

    ``store`` is ``{"engine": name, "target": {...}}`` (default: the ``queue`` engine, target
    ``{"number": 0}``: results return to the caller). ``case="upper"`` folds unquoted output names
    to upper case, as Drill's early Calcite-based SQL layer did (the JdbcTest's ``C``, ``DEPTID``);
    ``preserve`` (default) keeps them as written. Column names always resolve case-insensitively.
    """
    return plan_statement(sql, repository, case=case, store=store)


__all__ = ["CASES", "SqlFile", "read_sql_file", "sql_file_to_plan", "sql_to_plan"]
