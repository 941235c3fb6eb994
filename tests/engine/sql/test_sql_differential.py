"""Generated SQL over small random tables gives what DuckDB gives, on both executors.

Queries come from a grammar of the constructs the SQL front end supports: NOT, NULL tests,
LIKE, IN lists, BETWEEN, IS [NOT] DISTINCT FROM, AND/OR, IN/NOT IN and [NOT] EXISTS subqueries
(correlated by equalities, EXISTS with another test), scalar subqueries (plain and correlated),
outer joins, GROUP BY with decimal sums and averages, DECIMAL arithmetic with decimal literals
and integers. Tables hold NULLs, duplicates and decimals; a table may be read as an empty input.
Results are compared as multisets; decimals exactly (DuckDB's doubles at 6 digits).
"""

from __future__ import annotations

import decimal
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sql_oracle import check, examples, tables

_SMALL = st.one_of(st.none(), st.integers(-1, 3))
_TEXT = st.sampled_from([None, "a", "ab", "b", "ba"])
_MONEY = st.one_of(st.none(), st.sampled_from(["0.10", "1.25", "2.50", "-1.05"]))
A_ROWS = st.lists(st.tuples(_SMALL, _TEXT, _MONEY), min_size=1, max_size=8)
B_ROWS = st.lists(st.tuples(_SMALL, _SMALL), min_size=1, max_size=6)
A_SCHEMA = pa.schema(
    [("id", pa.int64()), ("x", pa.int64()), ("s", pa.string()), ("d", pa.decimal128(15, 2))]
)
B_SCHEMA = pa.schema([("k", pa.int64()), ("y", pa.int64())])

NUMBER = st.sampled_from(["-1", "0", "1", "2", "3"])
# The second table, or an empty input read from it.
B_SOURCE = st.sampled_from(["b", "(select * from b where k > 100)"])


@st.composite
def simple(draw: st.DrawFn) -> str:
    """A test of one column of ``a``."""
    form = draw(st.integers(0, 8))
    n = draw(NUMBER)
    maybe_not = draw(st.sampled_from(["", "not "]))
    if form == 0:
        return f"a.x {draw(st.sampled_from(['=', '<>', '<', '>=']))} {n}"
    if form == 1:
        return f"a.{draw(st.sampled_from(['x', 's', 'd']))} is {maybe_not}null"
    if form == 2:
        return f"a.s {maybe_not}like '{draw(st.sampled_from(['a%', '%b', '_', '%']))}'"
    if form == 3:
        items = draw(st.lists(st.sampled_from(["0", "1", "2", "null"]), min_size=1, max_size=3))
        return f"a.x {maybe_not}in ({', '.join(items)})"
    if form == 4:
        return f"a.x {maybe_not}between 0 and {n}"
    if form == 5:
        return f"a.x is {maybe_not}distinct from {draw(st.sampled_from([n, 'null']))}"
    if form == 6:
        return f"a.d {draw(st.sampled_from(['<', '>']))} {draw(st.sampled_from(['0', '1.25']))}"
    if form == 7:
        arithmetic = draw(st.sampled_from(["a.d * 2", "a.d + 0.05", "a.d - a.x", "a.d / 3"]))
        return f"{arithmetic} {draw(st.sampled_from(['<', '>=']))} {draw(st.sampled_from(['0.4', '1']))}"
    return f"(a.x > {n}) is {maybe_not}{draw(st.sampled_from(['true', 'false']))}"


@st.composite
def subquery(draw: st.DrawFn) -> str:
    """A test of ``a`` with a subquery over the second table."""
    source = draw(B_SOURCE)
    maybe_not = draw(st.sampled_from(["", "not "]))
    n = draw(NUMBER)
    form = draw(st.integers(0, 4))
    if form == 0:
        where = draw(st.sampled_from(["", f" where bb.y > {n}", " where bb.y is not null"]))
        return f"a.x {maybe_not}in (select bb.k from {source} bb{where})"
    if form == 1:
        extra = draw(st.sampled_from(["", " and bb.y <> a.id", f" and bb.y > {n}"]))
        return f"{maybe_not}exists (select * from {source} bb where bb.k = a.x{extra})"
    if form == 2:
        function = draw(st.sampled_from(["avg", "max", "min", "sum"]))
        return f"a.x > (select {function}(bb.y) from {source} bb)"
    if form == 3:
        function = draw(st.sampled_from(["count(*)", "count(bb.y)", "max(bb.y)", "sum(bb.y)"]))
        return f"a.id >= (select {function} from {source} bb where bb.k = a.x)"
    return f"{maybe_not}exists (select * from {source} bb)"


@st.composite
def predicate(draw: st.DrawFn, depth: int = 2) -> str:
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(st.one_of(simple(), subquery()))
    left = draw(predicate(depth - 1))
    form = draw(st.integers(0, 2))
    if form == 0:
        return f"not ({left})"
    right = draw(predicate(depth - 1))
    return f"({left}) {'and' if form == 1 else 'or'} ({right})"


@st.composite
def queries(draw: st.DrawFn) -> str:
    where = draw(predicate())
    form = draw(st.integers(0, 4))
    if form == 0:
        return f"select a.id, a.x, a.s, a.d from a where {where}"
    if form == 1:
        return f"select a.x, count(*) n, sum(a.d) total from a where {where} group by a.x"
    if form == 2:
        return (
            "select a.id, a.d * 2 + 0.05 p, a.d * a.d q, a.d - a.x r, -a.d * 1.5 t "
            f"from a where {where}"
        )
    if form == 3:
        return (
            "select a.s, avg(a.d) m, sum(a.d * 0.5) h, max(a.d) hi, min(a.d - 1) lo "
            f"from a where {where} group by a.s"
        )
    side = draw(st.sampled_from(["", " and bb.y > 0", " and bb.y is null"]))
    return (
        f"select a.id, bb.y from a left join {draw(B_SOURCE)} bb on a.x = bb.k{side} where {where}"
    )


def _money(text: str | None) -> decimal.Decimal | None:
    return None if text is None else decimal.Decimal(text)


def run(a_rows, b_rows, sql, **executor) -> None:
    with tempfile.TemporaryDirectory(prefix="sqldiff") as root:
        a = [(i % 4, x, s, _money(d)) for i, (x, s, d) in enumerate(a_rows)]  # ids repeat
        repo, con = tables(Path(root), {"a": (A_SCHEMA, a), "b": (B_SCHEMA, b_rows)})
        check(sql, repo, con, **executor)


QUICK = examples(25)
SPARK = examples(3, spark=True)


@QUICK
@given(a_rows=A_ROWS, b_rows=B_ROWS, sql=queries())
def test_generated_sql_equals_duckdb(a_rows, b_rows, sql) -> None:
    run(a_rows, b_rows, sql)


@pytest.mark.spark
@SPARK
@given(a_rows=A_ROWS, b_rows=B_ROWS, sql=queries())
def test_generated_sql_on_spark_equals_duckdb(spark, a_rows, b_rows, sql) -> None:
    run(a_rows, b_rows, sql, executor="spark", spark=spark)


@pytest.mark.slow
@examples(500)
@given(a_rows=A_ROWS, b_rows=B_ROWS, sql=queries())
def test_many_generated_queries_equal_duckdb(a_rows, b_rows, sql) -> None:
    run(a_rows, b_rows, sql)


@pytest.mark.slow
@pytest.mark.spark
@examples(40, spark=True)
@given(a_rows=A_ROWS, b_rows=B_ROWS, sql=queries())
def test_many_generated_queries_on_spark_equal_duckdb(spark, a_rows, b_rows, sql) -> None:
    run(a_rows, b_rows, sql, executor="spark", spark=spark)
