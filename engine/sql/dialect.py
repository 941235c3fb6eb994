"""Parsing SQL with sqlglot's Drill dialect, and positions for messages.

The one change to the dialect: an ``ORDER BY`` item remembers whether it said ``NULLS FIRST`` or
``NULLS LAST`` (``nulls_explicit``), so an item that did not leaves the plan's ``nullCollation``
out and gets Drill's default, as the JdbcTest expects.

>>> tree = parse_sql("select a from t order by a desc")
>>> tree.args["order"].expressions[0].meta["nulls_explicit"]
False
"""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.dialects.drill import Drill
from sqlglot.errors import ParseError, TokenError

from engine.errors import SqlError

_TOKEN = re.compile(r"<Token token_type: [^,]*, text: (.*?), line: .*?>")


class DrillSql(Drill):
    """sqlglot's Drill dialect, keeping whether each ordering names its null order."""

    class Parser(Drill.Parser):
        def _parse_ordered(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            start = self._index
            node = super()._parse_ordered(*args, **kwargs)
            if isinstance(node, exp.Ordered):
                words = [t.text.upper() for t in self._tokens[start : self._index]]
                node.meta["nulls_explicit"] = len(words) >= 2 and words[-2] == "NULLS"
            return node


def parse_sql(sql: str) -> exp.Expression:
    """One SQL statement as a sqlglot tree; a syntax error is a :class:`SqlError` with its place."""
    try:
        trees = [t for t in DrillSql().parse(sql) if t is not None]
    except ParseError as err:
        first = err.errors[0] if err.errors else {}
        line, column = first.get("line"), first.get("col")
        highlight = str(first.get("highlight") or "")
        if isinstance(column, int) and highlight:
            column = max(1, column - len(highlight) + 1)
        reason = str(first.get("description") or err).split(". Line")[0]
        reason = _TOKEN.sub(lambda m: repr(m.group(1)), reason)
        raise SqlError(f"syntax error: {reason}", sql=sql, line=line, column=column) from None
    except TokenError as err:
        raise SqlError(f"syntax error: {err}", sql=sql) from None
    if len(trees) != 1:
        raise SqlError(f"expected one SQL statement, found {len(trees)}", sql=sql)
    return trees[0]


def position(sql: str, node: exp.Expression | None) -> tuple[int | None, int | None]:
    """1-based (line, column) where ``node`` starts in ``sql``; (None, None) if unknown."""
    if node is None:
        return None, None
    starts = [n.meta["start"] for n in node.walk() if isinstance(n.meta.get("start"), int)]
    if not starts:
        return None, None
    start = min(starts)
    line = sql.count("\n", 0, start) + 1
    column = start - (sql.rfind("\n", 0, start) + 1) + 1
    return line, column


def sql_error(
    message: str, sql: str, node: exp.Expression | None, *, hint: str | None = None
) -> SqlError:
    """A :class:`SqlError` pointing at ``node``."""
    line, column = position(sql, node)
    return SqlError(message, sql=sql, line=line, column=column, hint=hint)
