"""Generated query shapes over small random tables give what DuckDB gives, on both executors.

Where ``test_sql_differential`` varies the tests of a WHERE clause, this grammar varies the
query's shape around them: comma joins of two and three tables (written in orders that do not
join neighbours first) whose WHERE mixes equalities across the tables with one-sided tests and
ORs across them; inner, left, right and full joins with ON tests of either side; derived tables
with column lists; WITH queries read once and twice; GROUP BY with HAVING, DISTINCT and
``count(distinct)``; CASE; ORDER BY with NULLS FIRST/LAST, LIMIT and OFFSET (on every output
column, so that the order is determined); UNION and UNION ALL; window functions; EXTRACT and
dates with INTERVAL arithmetic; scalar subqueries in the SELECT list; subqueries inside joins
(the shapes the planner's join and semi join rules rewrite); a few string functions and casts. Tables hold NULLs,
duplicates, decimals and dates; a table may be read as an empty input. Results are compared as
multisets, or in order where the query orders them.
"""

from __future__ import annotations

import datetime as dt
import decimal
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
import sqlglot
from hypothesis import given
from hypothesis import strategies as st
from sql_oracle import check, examples, tables

_SMALL = st.one_of(st.none(), st.integers(-1, 3))
_TEXT = st.sampled_from([None, "a", "ab", "b"])
_MONEY = st.one_of(st.none(), st.sampled_from(["0.10", "1.25", "2.50", "-1.05"]))
_DAY = st.one_of(
    st.none(), st.sampled_from([dt.date(1994, 12, 31), dt.date(1995, 1, 31), dt.date(1995, 3, 1)])
)
A_ROWS = st.lists(st.tuples(_SMALL, _TEXT, _MONEY, _DAY), min_size=1, max_size=8)
B_ROWS = st.lists(st.tuples(_SMALL, _SMALL), min_size=1, max_size=6)
A_SCHEMA = pa.schema(
    [
        ("n", pa.int64()),  # unique: a window's order that leaves no tie
        ("id", pa.int64()),
        ("x", pa.int64()),
        ("s", pa.string()),
        ("d", pa.decimal128(15, 2)),
        ("t", pa.date32()),
    ]
)
B_SCHEMA = pa.schema([("k", pa.int64()), ("y", pa.int64())])

NUMBER = st.sampled_from(["-1", "0", "1", "2"])
# The second table, or an empty input read from it.
B_SOURCE = st.sampled_from(["b", "(select * from b where k > 100)"])


@st.composite
def a_test(draw: st.DrawFn, alias: str = "a") -> str:
    """A test of one column of ``a`` (read as ``alias``)."""
    n = draw(NUMBER)
    maybe_not = draw(st.sampled_from(["", "not "]))
    return draw(
        st.sampled_from(
            [
                f"{alias}.x > {n}",
                f"{alias}.x <> {n}",
                f"{alias}.s {maybe_not}like 'a%'",
                f"{alias}.d is {maybe_not}null",
                f"{alias}.d >= 1.25",
                f"{alias}.x {maybe_not}in (0, 2, null)",
                f"extract(month from {alias}.t) {'=' if maybe_not else '<>'} 1",
                f"{alias}.t < date '1995-01-01' + interval '1' month",
                f"{alias}.t >= date '1995-03-01' - interval '1' year",
                f"{maybe_not}({alias}.x = 1 or {alias}.s = 'b')",
            ]
        )
    )


@st.composite
def b_test(draw: st.DrawFn, alias: str) -> str:
    n = draw(NUMBER)
    maybe_not = draw(st.sampled_from(["", "not "]))
    return draw(
        st.sampled_from(
            [
                f"{alias}.y > {n}",
                f"{alias}.y is {maybe_not}null",
                f"{maybe_not}({alias}.y = {n} or {alias}.k = 0)",
            ]
        )
    )


def _where(*tests: str) -> str:
    kept = [t for t in tests if t]
    return f" where {' and '.join(kept)}" if kept else ""


@st.composite
def comma_join(draw: st.DrawFn) -> str:
    """Two or three tables in FROM, joined by WHERE equalities, with one-sided tests and ORs
    across the tables."""
    maybe = st.sampled_from([True, False])
    one_sided = [draw(a_test()) if draw(maybe) else "", draw(b_test("b1")) if draw(maybe) else ""]
    across = draw(st.sampled_from(["", "(a.x = b1.y or b1.y is null)", "not (a.id = b1.y)"]))
    if draw(maybe):
        tables = f"a, {draw(B_SOURCE)} b1"
        join = draw(st.sampled_from(["a.x = b1.k", "b1.k = a.x and a.id = b1.y"]))
        return f"select a.n, a.x, b1.y from {tables}" + _where(join, *one_sided, across)
    # Three tables, written so that the first two are not joined to each other.
    order = draw(st.sampled_from(["a, b b2, b b1", "b b2, a, b b1", "b b1, b b2, a"]))
    joins = "a.x = b1.k and b1.y = b2.k"
    shape = draw(st.integers(0, 1))
    if shape == 0:
        return f"select a.n, b1.y, b2.y from {order}" + _where(joins, *one_sided, across)
    return (
        f"select b2.y, count(*) c, sum(a.d) total from {order}"
        + _where(joins, *one_sided, across)
        + " group by b2.y"
    )


@st.composite
def explicit_join(draw: st.DrawFn) -> str:
    """Inner, left, right and full joins, their ON testing either side or neither."""
    kind = draw(st.sampled_from(["join", "left join", "right join", "full join"]))
    on_test = draw(st.sampled_from(["", " and bb.y > 0", " and a.s = 'a'", " and bb.y is null"]))
    where = draw(st.sampled_from(["", " where a.x is null", " where bb.y is not null"]))
    return (
        f"select a.n, a.x, bb.k, bb.y from a {kind} {draw(B_SOURCE)} bb on a.x = bb.k{on_test}"
        + where
    )


@st.composite
def derived(draw: st.DrawFn) -> str:
    """Derived tables with column lists, and WITH queries read once or twice."""
    test = draw(a_test())
    form = draw(st.integers(0, 3))
    if form == 0:
        return (
            f"select t.p, t.q from (select a.x, a.d from a where {test}) as t (p, q) where t.p >= 0"
        )
    if form == 1:
        return (
            "select t.g, t.total, bb.y from (select a.x, sum(a.d) from a group by a.x) t (g, total)"
            f", {draw(B_SOURCE)} bb where t.g = bb.k"
        )
    if form == 2:
        return (
            f"with t as (select a.x, a.d from a where {test}) "
            "select t1.x, t1.d d1, t2.d d2 from t t1, t t2 where t1.x = t2.x"
        )
    return (
        f"with t as (select a.s, count(*) c from a where {test} group by a.s) "
        "select t.s, t.c from t where t.c > 1"
    )


@st.composite
def grouped(draw: st.DrawFn) -> str:
    """GROUP BY with HAVING, DISTINCT, count(distinct) and CASE."""
    test = draw(a_test())
    form = draw(st.integers(0, 4))
    if form == 0:
        having = draw(st.sampled_from(["count(*) > 1", "sum(a.d) > 1", "max(a.x) is null"]))
        return f"select a.x, count(*) c, sum(a.d) total from a where {test} group by a.x having {having}"
    if form == 1:
        return f"select distinct a.x, a.s from a where {test}"
    if form == 2:
        return f"select a.s, count(distinct a.x) c, count(a.x) n from a where {test} group by a.s"
    if form == 3:
        return (
            "select a.id, case when a.x > 0 then a.d when a.s like 'a%' then 0 else null end v, "
            f"case a.s when 'a' then 1 when 'b' then 2 end w from a where {test}"
        )
    return (
        "select a.s, sum(case when a.x > 0 then a.d else 0 end) pos, "
        f"count(case when {test} then 1 end) c from a group by a.s"
    )


@st.composite
def ordered(draw: st.DrawFn) -> str:
    """ORDER BY every output column, with NULLS FIRST/LAST, LIMIT and OFFSET."""
    direction = draw(st.sampled_from(["asc", "desc"]))
    nulls = draw(st.sampled_from(["first", "last"]))
    tail = draw(st.sampled_from(["", " limit 3", " limit 2 offset 1", " limit 0"]))
    return (
        f"select a.x, a.s, a.d, a.n from a where {draw(a_test())} order by a.x {direction} "
        f"nulls {nulls}, a.s nulls first, a.d desc nulls last, a.n{tail}"
    )


@st.composite
def unioned(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["union", "union all"]))
    return (
        f"select a.{draw(st.sampled_from(['x', 'd']))} v from a where {draw(a_test())} {kind} "
        f"select bb.y from {draw(B_SOURCE)} bb where {draw(b_test('bb'))}"
    )


@st.composite
def windowed(draw: st.DrawFn) -> str:
    """Window functions whose results the rows determine (an order that leaves no tie where
    ties would matter)."""
    window = draw(
        st.sampled_from(
            [
                "sum(a.d) over (partition by a.x)",
                "count(*) over (partition by a.s)",
                "rank() over (partition by a.s order by a.x nulls first)",
                "dense_rank() over (order by a.d desc nulls last)",
                "row_number() over (partition by a.x order by a.n)",
                "sum(a.x) over (partition by a.s order by a.n rows between 1 preceding and 1 following)",
                "max(a.d) over (order by a.n rows between unbounded preceding and current row)",
            ]
        )
    )
    return f"select a.n, {window} w from a where {draw(a_test())}"


@st.composite
def scalar_in_select(draw: st.DrawFn) -> str:
    function = draw(st.sampled_from(["max(bb.y)", "count(*)", "sum(bb.y)"]))
    return (
        f"select a.n, (select {function} from {draw(B_SOURCE)} bb where bb.k = a.x) m, "
        f"(select min(bb.k) from b bb) lo from a where {draw(a_test())}"
    )


@st.composite
def nested(draw: st.DrawFn) -> str:
    """Subqueries inside joins, the shapes the planner's rules rewrite: an aggregate joined as a
    table, IN and [NOT] EXISTS beside a comma join, a correlated scalar subquery over a join's
    input, HAVING against a scalar subquery, ORDER BY an aggregate with LIMIT."""
    test = draw(a_test())
    n = draw(NUMBER)
    form = draw(st.integers(0, 6))
    if form == 0:
        return (
            "select a.n, t.total from a, (select bb.k, sum(bb.y) total from b bb group by bb.k) t "
            f"where a.x = t.k and {test}"
        )
    if form == 1:
        maybe_not = draw(st.sampled_from(["", "not "]))
        return (
            f"select a.n, b1.y from a, {draw(B_SOURCE)} b1 where a.x = b1.k and a.id "
            f"{maybe_not}in (select bb.y from b bb where bb.k > {n}) and {test}"
        )
    if form == 2:
        maybe_not = draw(st.sampled_from(["", "not "]))
        return (
            "select a.n, b1.y from a, b b1 where a.x = b1.k and "
            f"{maybe_not}exists (select * from b b2 where b2.k = b1.k and b2.y <> b1.y)"
        )
    if form == 3:
        function = draw(st.sampled_from(["avg(a2.d)", "max(a2.d)", "sum(a2.d) * 0.5"]))
        return (
            f"select a.n, b1.y from a, {draw(B_SOURCE)} b1 where a.x = b1.k and a.d >= "
            f"(select {function} from a a2 where a2.x = a.x)"
        )
    if form == 4:
        return (
            "select a.x, sum(a.d) total from a group by a.x "
            "having sum(a.d) > (select sum(a2.d) * 0.25 from a a2)"
        )
    if form == 5:
        return (
            f"select a.x, sum(a.d) total, count(*) c from a where {test} group by a.x "
            "order by total desc nulls last, a.x nulls first limit 2"
        )
    return (
        "select a.x, coalesce(a.x, -9) cx, substring(a.s, 1, 1) s1, upper(a.s) u, "
        f"a.s || '!' e, cast(a.d as int) i, cast(-a.d * 3 as bigint) j, concat(a.s, a.x) c, "
        f"nullif(a.x, 1) z, greatest(a.x, a.id, 0) hi, least(a.d, a.x) lo from a where {test}"
    )


def queries() -> st.SearchStrategy[str]:
    return st.one_of(
        nested(),
        comma_join(),
        explicit_join(),
        derived(),
        grouped(),
        ordered(),
        unioned(),
        windowed(),
        scalar_in_select(),
    )


def _money(text: str | None) -> decimal.Decimal | None:
    return None if text is None else decimal.Decimal(text)


def run(a_rows, b_rows, sql, **executor) -> None:
    with tempfile.TemporaryDirectory(prefix="sqlshape") as root:
        a = [(i, i % 3, x, s, _money(d), t) for i, (x, s, d, t) in enumerate(a_rows)]
        repo, con = tables(Path(root), {"a": (A_SCHEMA, a), "b": (B_SCHEMA, b_rows)})
        # The query's ORDER BY, not a window's.
        ordered = sqlglot.parse_one(sql).args.get("order") is not None
        check(sql, repo, con, ordered=ordered, **executor)


QUICK = examples(40)
SPARK = examples(4, spark=True)
MANY = examples(600)
MANY_SPARK = examples(60, spark=True)


@QUICK
@given(a_rows=A_ROWS, b_rows=B_ROWS, sql=queries())
def test_generated_shapes_equal_duckdb(a_rows, b_rows, sql) -> None:
    run(a_rows, b_rows, sql)


@pytest.mark.spark
@SPARK
@given(a_rows=A_ROWS, b_rows=B_ROWS, sql=queries())
def test_generated_shapes_on_spark_equal_duckdb(spark, a_rows, b_rows, sql) -> None:
    run(a_rows, b_rows, sql, executor="spark", spark=spark)


@pytest.mark.slow
@MANY
@given(a_rows=A_ROWS, b_rows=B_ROWS, sql=queries())
def test_many_generated_shapes_equal_duckdb(a_rows, b_rows, sql) -> None:
    run(a_rows, b_rows, sql)


@pytest.mark.slow
@pytest.mark.spark
@MANY_SPARK
@given(a_rows=A_ROWS, b_rows=B_ROWS, sql=queries())
def test_many_generated_shapes_on_spark_equal_duckdb(spark, a_rows, b_rows, sql) -> None:
    run(a_rows, b_rows, sql, executor="spark", spark=spark)
