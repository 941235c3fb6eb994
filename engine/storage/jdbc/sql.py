"""The SQL the ``jdbc`` engine sends: identifiers quoted, values bound as parameters.

Nothing of a plan reaches the SQL text but identifiers, each quoted by :func:`quote` (a double
quote inside a name is doubled: the name stays one identifier whatever it holds). Values of
filters travel as parameters (``$1``, ``$2``, ...), never in the text. The one exception is a
selection's ``query``: SQL the plan's author wrote on purpose, run as a subquery in a read-only
session.

>>> quote('we"ird')
'"we""ird"'
>>> TableName.parse("public.customers", default_schema="public").sql
'"public"."customers"'
>>> sql, params = select_sql(TableName("s", "t"), ["id", "name"],
...     [Comparison("name", "greater_than", "m", text=True)])
>>> sql, params
('SELECT "id", "name" FROM "s"."t" WHERE "name"::text COLLATE "C" > $1', ['m'])
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from engine.errors import StorageError
from engine.expr import Call, Expr, FieldRef, Literal

MAX_NAME_BYTES = 63
"""PostgreSQL's identifier limit (NAMEDATALEN - 1): a longer name would be cut silently."""

OPERATORS = {
    "equal": "=",
    "not_equal": "<>",
    "less_than": "<",
    "less_than_or_equal": "<=",
    "greater_than": ">",
    "greater_than_or_equal": ">=",
}
_FLIPPED = {
    "less_than": "greater_than",
    "less_than_or_equal": "greater_than_or_equal",
    "greater_than": "less_than",
    "greater_than_or_equal": "less_than_or_equal",
}


def check_name(name: Any, *, what: str) -> str:
    """``name`` as an identifier: text, not empty, no NUL, at most 63 bytes."""
    if not isinstance(name, str) or not name:
        raise StorageError(f"{what} must be a non-empty name, not {name!r}")
    if "\x00" in name:
        raise StorageError(f"{what} {name!r} holds a NUL character")
    if len(name.encode()) > MAX_NAME_BYTES:
        raise StorageError(
            f"{what} '{name[:40]}...' is {len(name.encode())} bytes long; PostgreSQL's limit "
            f"is {MAX_NAME_BYTES}"
        )
    return name


def quote(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class TableName:
    """A table by schema and name (each taken literally: case and characters kept)."""

    schema: str
    table: str

    @staticmethod
    def parse(
        table: Any, *, default_schema: str, schema: Any = None, what: str = "table"
    ) -> TableName:
        """``schema.table`` (one dot), or ``table`` in ``schema`` / the default schema."""
        check_name(table, what=what)
        if schema is not None:
            return TableName(check_name(schema, what="schema"), table)
        parts = table.split(".")
        if len(parts) == 1:
            return TableName(default_schema, table)
        if len(parts) != 2:
            raise StorageError(
                f"{what} '{table}' has {len(parts) - 1} dots; give `schema.table`, or the "
                "schema under `schema` and the table's name (dots and all) under `table`"
            )
        return TableName(check_name(parts[0], what="schema"), check_name(parts[1], what=what))

    @property
    def sql(self) -> str:
        return f"{quote(self.schema)}.{quote(self.table)}"

    @property
    def dotted(self) -> str:
        """How messages and Dagster name it: ``schema.table``."""
        return f"{self.schema}.{self.table}"

    def with_table(self, table: str) -> TableName:
        return TableName(self.schema, table)


@dataclass(frozen=True)
class Comparison:
    """``column <op> value``: one pushed conjunct, the value bound as a parameter."""

    column: str
    op: str
    value: Any
    text: bool = False  # compared as text, byte-wise (COLLATE "C"), as the engine compares text

    def condition(self, parameter: int) -> str:
        """The comparison as PostgreSQL SQL, its value the ``parameter``-th bound one."""
        column = quote(self.column) + ('::text COLLATE "C"' if self.text else "")
        return f"{column} {OPERATORS[self.op]} ${parameter}"


def select_sql(
    source: TableName | str,
    columns: Sequence[str] | None,
    comparisons: Sequence[Comparison] = (),
    *,
    as_text: Collection[str] = (),
) -> tuple[str, list[Any]]:
    """``SELECT`` of ``columns`` (None: all) from a table or a query (text: a subquery), with
    ``comparisons`` and-ed, and the values they bind. Columns in ``as_text`` are read as text
    (types the reader has no Arrow type for: ``uuid``, ``json``, ...)."""
    listed = "*"
    if columns is not None:
        listed = (
            ", ".join(
                f"{quote(c)}::text AS {quote(c)}" if c in as_text else quote(c) for c in columns
            )
            or "NULL"
        )
    origin = source.sql if isinstance(source, TableName) else f"({source}) AS q"
    where = [c.condition(i) for i, c in enumerate(comparisons, start=1)]
    sql = f"SELECT {listed} FROM {origin}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    return sql, [c.value for c in comparisons]


def collated_source(source: TableName | str, columns: Sequence[str], text: set[str]) -> str:
    """A subquery of ``source`` exposing its text columns byte-wise collated (COLLATE "C"), so
    that comparisons Spark pushes into it order text as the engine does. Columns Spark reads as
    text without being text (``uuid``, ``json``) take no collation: they are cast to text first,
    as the local executor reads them."""
    listed = ", ".join(
        f'{quote(c)}::text COLLATE "C" AS {quote(c)}' if c in text else quote(c) for c in columns
    )
    origin = source.sql if isinstance(source, TableName) else f"({source}) AS q"
    return f'(SELECT {listed} FROM {origin}) AS "drill_scan"'


def comparisons_of(
    pushed: Expr | None, ref: str | None, columns: dict[str, tuple[str, str]]
) -> tuple[list[Comparison], bool]:
    """The conjuncts of a scan's pushed filter the database can apply, and whether that is all
    of them. ``columns``: the table's column names by lower-case name, to the type family
    (``text``, ``number``, ``bool``, ``date``) a comparison may take."""
    from engine.expr.rewrite import conjuncts, constant_date

    if pushed is None:
        return [], True
    found = []
    for test in conjuncts(pushed):
        comparison = _comparison(test, ref, columns, constant_date)
        if comparison is not None:
            found.append(comparison)
    return found, len(found) == len(conjuncts(pushed))


def _comparison(
    test: Expr, ref: str | None, columns: dict[str, tuple[str, str]], constant_date: Any
) -> Comparison | None:
    if not isinstance(test, Call) or test.name not in OPERATORS or len(test.args) != 2:
        return None
    left, right = test.args
    op = test.name
    if not isinstance(left, FieldRef):
        left, right = right, left
        op = _FLIPPED.get(op, op)
    if not isinstance(left, FieldRef):
        return None
    path = left.path
    prefix = (ref,) if ref else ()
    if len(path) != len(prefix) + 1 or not all(isinstance(p, str) for p in path):
        return None
    if prefix and str(path[0]).lower() != ref.lower():
        return None
    member = str(path[-1]).lower()
    if member not in columns:
        return None
    name, family = columns[member]
    date = constant_date(right)
    if date is not None:
        if family != "date":
            return None
        try:
            return Comparison(name, op, datetime.date.fromisoformat(date.value))
        except ValueError:
            return None
    if not isinstance(right, Literal) or right.value is None:
        return None
    value = right.value
    if family == "text" and isinstance(value, str):
        return Comparison(name, op, value, text=True)
    if family == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return Comparison(name, op, value)
    if family == "bool" and isinstance(value, bool):
        return Comparison(name, op, value)
    return None
