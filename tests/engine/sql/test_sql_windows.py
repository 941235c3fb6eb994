"""Window functions in SQL give what a SQL engine (DuckDB) gives, on both executors.

Small tables are generated (hypothesis); every query runs as our plan and in DuckDB, and the
results are compared as multisets (the queries have no ORDER BY of their own). The window ORDER BY
is ``id`` (unique) for ROWS frames, so every frame is deterministic; peers frames and ranks order
by ``o``, which repeats, with an explicit null order (Drill and DuckDB default differently).
"""

from __future__ import annotations

import json
import math
import tempfile
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from golden_files import assert_golden
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import SqlError
from engine.metadata import MetadataRepository
from engine.plan import parse_plan
from engine.run import run_plan
from engine.sql import sql_to_plan

ROW = st.tuples(
    st.one_of(st.none(), st.integers(0, 2)),  # p
    st.one_of(st.none(), st.integers(0, 3)),  # o
    st.one_of(st.none(), st.integers(-5, 5)),  # x
)
TABLES = st.lists(ROW, min_size=1, max_size=9)
FUNCTIONS = st.sampled_from(["sum(x)", "count(x)", "count(*)", "min(x)", "max(x)", "avg(x)"])
# Frame bounds in their SQL order: a frame may not start after the kind its end has.
BOUNDS = st.sampled_from(
    [(0, "UNBOUNDED PRECEDING")]
    + [(1, f"{n} PRECEDING") for n in (1, 2, 3)]
    + [(2, "CURRENT ROW")]
    + [(3, f"{n} FOLLOWING") for n in (1, 2)]
    + [(4, "UNBOUNDED FOLLOWING")]
)


@st.composite
def frames(draw: st.DrawFn) -> str:
    start, end = sorted([draw(BOUNDS), draw(BOUNDS)])
    if start[0] == 4 or end[0] == 0:  # UNBOUNDED FOLLOWING cannot start, nor PRECEDING end
        return "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"
    return f"ROWS BETWEEN {start[1]} AND {end[1]}"


@st.composite
def row_queries(draw: st.DrawFn) -> str:
    """Up to three ROWS windows (each maybe partitioned) in one SELECT."""
    items = []
    for i in range(draw(st.integers(1, 3))):
        partition = draw(st.sampled_from(["", "partition by p "]))
        items.append(f"{draw(FUNCTIONS)} over ({partition}order by id {draw(frames())}) as w{i}")
    return f"select id, {', '.join(items)} from t"


@st.composite
def peer_queries(draw: st.DrawFn) -> str:
    """Default frames (peers share a value; no ORDER BY: the whole partition), ranks."""
    items = []
    for i in range(draw(st.integers(1, 3))):
        partition = draw(st.sampled_from(["", "partition by p "]))
        order = draw(st.sampled_from(["", "order by o nulls last", "order by o desc nulls first"]))
        function = draw(FUNCTIONS)
        if order and draw(st.booleans()):
            function = draw(st.sampled_from(["rank()", "dense_rank()"]))
        items.append(f"{function} over ({partition}{order}) as w{i}")
    return f"select id, {', '.join(items)} from t"


@st.composite
def grouped_queries(draw: st.DrawFn) -> str:
    """A window over the grouped result: its aggregates and keys."""
    window = draw(
        st.sampled_from(
            [
                "sum(sum(x)) over (order by p nulls first)",
                "rank() over (order by count(*) desc nulls last)",
                "avg(max(x)) over ()",
                "count(p) over (order by p nulls last rows between 1 preceding and 1 following)",
                "min(sum(x)) over (partition by p > 0 order by p nulls last rows 1 preceding)",
            ]
        )
    )
    return f"select p, count(*) as n, {window} as w from t group by p"


def _table(rows: list[tuple], root: Path) -> tuple[MetadataRepository, duckdb.DuckDBPyConnection]:
    """Table ``t`` of ``rows`` as JSON lines under ``root``, registered, and in DuckDB."""
    records = [{"id": i, "p": p, "o": o, "x": x} for i, (p, o, x) in enumerate(rows)]
    (root / "t.json").write_text("".join(json.dumps(r) + "\n" for r in records))
    repo = MetadataRepository({"fs": {"type": "fs", "root": str(root)}})
    repo.register_table("t", "fs", {"path": "t.json"})
    con = duckdb.connect()
    con.execute("create table t (id integer, p integer, o integer, x integer)")
    con.executemany("insert into t values (?, ?, ?, ?)", [list(r.values()) for r in records])
    return repo, con


def _normal(records: list[dict]) -> list[str]:
    def value(v: object) -> object:
        if isinstance(v, float) and math.isfinite(v):
            return round(v, 9) + 0.0 if v != int(v) else int(v)
        return v

    return sorted(json.dumps({k: value(v) for k, v in r.items()}, sort_keys=True) for r in records)


def check(sql: str, rows: list[tuple], **run: object) -> None:
    with tempfile.TemporaryDirectory(prefix="sqlwindows") as root:  # one per example
        repo, con = _table(rows, Path(root))
        plan = sql_to_plan(sql, repo)
        parse_plan(plan)
        ours = run_plan(plan, **run).records()
    cursor = con.execute(sql)
    names = [c[0] for c in cursor.description]
    theirs = [dict(zip(names, r)) for r in cursor.fetchall()]
    assert _normal(ours) == _normal(theirs), f"{sql}\nrows {rows}"


QUICK = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ON_SPARK = settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@QUICK
@given(rows=TABLES, sql=row_queries())
def test_rows_frames_equal_duckdb(rows, sql) -> None:
    check(sql, rows)


@QUICK
@given(rows=TABLES, sql=peer_queries())
def test_default_frames_and_ranks_equal_duckdb(rows, sql) -> None:
    check(sql, rows)


@QUICK
@given(rows=TABLES, sql=grouped_queries())
def test_windows_over_group_by_equal_duckdb(rows, sql) -> None:
    check(sql, rows)


@pytest.mark.spark
@ON_SPARK
@given(rows=TABLES, sql=st.one_of(row_queries(), peer_queries(), grouped_queries()))
def test_windows_on_spark_equal_duckdb(spark, rows, sql) -> None:
    check(sql, rows, executor="spark", spark=spark)


@pytest.mark.spark
@pytest.mark.parametrize(
    "sql",
    [
        "select id, sum(x) over (partition by p order by id rows between 2 preceding and 1 following) "
        "as a, avg(x) over (order by id rows 1 preceding) as b, count(*) over (partition by p) as c, "
        "sum(x) over (partition by p order by o nulls last) as d from t",
        "select p, count(*) as n, rank() over (order by count(*) desc nulls last) as r, "
        "max(sum(x)) over (order by p nulls first rows between current row and 1 following) "
        "as m from t group by p",
    ],
)
def test_fixed_windows_on_spark(spark, sql) -> None:
    rows = [(1, 1, 5), (1, 1, None), (2, 3, 7), (1, 2, -1), (None, 2, 4), (2, 1, 2), (1, 3, 3)]
    check(sql, rows, executor="spark", spark=spark)


FIXED_ROWS = [(1, 1, 5), (1, 1, None), (2, 3, 7), (1, None, -1), (None, 2, 4), (2, 1, 2), (1, 3, 3)]
FIXED_SQL = [
    "select id, sum(x) over (partition by p order by o nulls last, id rows between current row "
    "and 2 following) as s, max(x) over (order by o desc nulls first, id rows between current "
    "row and unbounded following) as m from t",
    "select id, count(x) over (order by o nulls first, id rows between unbounded preceding and 1 following) "
    "as c, count(distinct p) over (order by id rows between unbounded preceding and current row) "
    "as d from t",
]


@pytest.mark.parametrize("sql", FIXED_SQL)
def test_frames_over_nulls_in_the_order_equal_duckdb(sql) -> None:
    check(sql, FIXED_ROWS)


@pytest.mark.spark
@pytest.mark.parametrize("sql", FIXED_SQL)
def test_frames_over_nulls_in_the_order_on_spark(spark, sql) -> None:
    check(sql, FIXED_ROWS, executor="spark", spark=spark)


def test_frames_from_the_current_row_forward_run_over_the_reversed_order(tmp_path: Path) -> None:
    repo, _ = _table([(1, 1, 1)], tmp_path)
    sql = (
        "select sum(x) over (order by id rows between current row and unbounded following) as a,"
        " sum(x) over (order by id rows between current row and 2 following) as b from t"
    )
    ops = sql_to_plan(sql, repo)["query"]
    assert [op["op"] for op in ops][1:5] == ["order", "runningaggregate", "order", "windowframe"]
    assert ops[1]["orderings"] == [{"order": "desc", "expr": "t.id", "nullCollation": "last"}]
    frame = next(op for op in ops if op["op"] == "windowframe")
    collapse = next(op for op in ops if op["op"] == "collapsingaggregate")
    assert (frame["start"], frame["end"], "target" in collapse) == (-2, 0, False)


def test_plan_of_a_frame_around_the_row(tmp_path: Path) -> None:
    repo, _ = _table([(1, 1, 1)], tmp_path)
    sql = (
        "select id, sum(x) over (partition by p order by id rows between 1 preceding and "
        "2 following) as s from t"
    )
    ops = sql_to_plan(sql, repo)["query"]
    numbered = next(op for op in ops if op["op"] == "runningaggregate")
    assert numbered["aggregations"] == [{"ref": "$wrn0", "expr": "row_number()"}]
    orders = [op["orderings"] for op in ops if op["op"] == "order"][1:]
    assert [o[-1]["order"] for o in orders] == ["asc", "desc"]  # by $wrn0, then reversed
    frames = [(op["start"], op["end"]) for op in ops if op["op"] == "windowframe"]
    assert frames == [(-1, 0), (-2, 0)]
    collapses = [op for op in ops if op["op"] == "collapsingaggregate"]
    assert all("target" not in op for op in collapses)
    assert collapses[1]["carryovers"] == ["t", "$wrn0", "$w0_back"]
    assert ops[-3]["op"] == "transform" and ops[-3]["transforms"][0]["ref"] == "$w0"


def test_plan_of_a_frame_without_the_row(tmp_path: Path) -> None:
    repo, _ = _table([(1, 1, 1)], tmp_path)
    sql = "select id, sum(x) over (order by id rows between 2 following and 3 following) s from t"
    ops = sql_to_plan(sql, repo)["query"]
    frame = next(op for op in ops if op["op"] == "windowframe")
    assert (frame["start"], frame["end"]) == (0, 3)
    collapse = next(op for op in ops if op["op"] == "collapsingaggregate")
    assert collapse["target"] == "$wc0" and collapse["carryovers"] == ["t"]
    assert "$wp0 >= 2" in collapse["aggregations"][0]["expr"]


@pytest.mark.parametrize(
    ("sql", "message", "column"),
    [
        ("select sum(x) over (order by o range between 1 preceding and current row) from t", "RANGE frames", 46),
        ("select sum(x) over (order by o groups 1 preceding) from t", "GROUPS frames", 39),
        ("select lag(x) over (order by o) from t", "window function is not supported", 8),
        ("select rank() over (partition by p) from t", "rank\\(\\) needs ORDER BY", 8),
        ("select sum(x) over w from t window w as (order by o)", "named windows", 8),
        ("select count(distinct x) over (order by o) from t", "needs a ROWS frame", 8),
        ("select p, sum(x) over () from t group by p", "'x' must appear in GROUP BY", 15),
        ("select p from t group by p having sum(sum(x)) over () > 1", "not allowed in HAVING", 35),
    ],
)  # fmt: skip
def test_unsupported_windows_are_sql_errors(sql, message, column, tmp_path: Path) -> None:
    repo, _ = _table([(1, 1, 1)], tmp_path)
    with pytest.raises(SqlError, match=message) as caught:
        sql_to_plan(sql, repo)
    assert (caught.value.line, caught.value.column) == (1, column)


GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "sql"
GOLDEN_SQL = {
    "window_rows": "select lastName, sum(deptid) over (partition by deptid order by lastName "
    "rows between 1 preceding and 2 following) as s, avg(deptid) over (order by lastName "
    "rows 2 preceding) as a from emp",
    "window_default": "select lastName, count(*) over (partition by deptid) as c, "
    "rank() over (order by deptid nulls last) as r, row_number() over (order by lastName) as n "
    "from emp",
    "window_grouped": "select deptid, count(*) as c, sum(count(*)) over (order by deptid "
    "nulls first) as running from emp group by deptid",
}


@pytest.mark.parametrize("name", sorted(GOLDEN_SQL))
def test_window_plans_match_their_golden_files(conformance_dir: Path, name: str) -> None:
    """SQL -> plan JSON is stable; regenerate with DRILL_UPDATE_GOLDEN=1 after a deliberate change."""

    from tests.engine.sql.test_sql_jdbc import jdbc_repository

    plan = sql_to_plan(GOLDEN_SQL[name], jdbc_repository(conformance_dir / "data"))
    text = f"-- {GOLDEN_SQL[name]}\n" + json.dumps(plan, indent=1) + "\n"
    assert_golden(GOLDEN / f"{name}.plan", text)


def test_a_frame_over_flattened_rows_of_a_table_with_an_odd_name(tmp_path: Path) -> None:
    rows = [{"id": 1, "tags": [1, 2], "x": 2}, {"id": 2, "tags": [3], "x": 5}]
    (tmp_path / "my-t.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    repo = MetadataRepository({"fs": {"type": "fs", "root": str(tmp_path)}})
    sql = (
        "select id, flatten(tags) as tag, sum(x) over (order by id rows between 1 preceding "
        "and 1 following) as s from fs.`my-t.json` order by tag"
    )
    assert run_plan(sql_to_plan(sql, repo)).records() == [
        {"id": 1, "tag": 1, "s": 4},
        {"id": 1, "tag": 2, "s": 9},
        {"id": 2, "tag": 3, "s": 7},
    ]


# Every way a window computes avg: split around the row, over peers, running, whole partition,
# a bounded frame up to the row.
DECIMAL_AVERAGES = (
    "select id, avg(x) over (order by id rows between 1 preceding and 1 following) as a1, "
    "avg(x) over (partition by p order by o nulls last) as a2, "
    "avg(x) over (order by id rows between unbounded preceding and current row) as a3, "
    "avg(x) over (partition by p) as a4, avg(x) over (order by id rows 1 preceding) as a5 from t"
)


def check_decimal_averages(root: Path, **run: object) -> None:
    """A window's avg of a DECIMAL(7, 2) is avg's DECIMAL(11, 6), as the aggregate's is; the
    values are DuckDB's (which averages decimals as doubles) to 6 places."""
    x = [Decimal("1.25"), Decimal("2.50"), None, Decimal("-4.01"), Decimal("0.07"), Decimal("9")]
    table = pa.table(
        {
            "id": list(range(len(x))),
            "p": [1, 1, 2, 2, 1, None],
            "o": [1, 2, 1, None, 2, 3],
            "x": pa.array(x, pa.decimal128(7, 2)),
        }
    )
    pq.write_table(table, root / "t.parquet")
    repo = MetadataRepository({"fs": {"type": "fs", "root": str(root)}})
    repo.register_table("t", "fs", {"path": "t.parquet"})
    result = run_plan(sql_to_plan(DECIMAL_AVERAGES, repo), **run)
    ours = sorted(result.records(), key=lambda r: r["id"])
    con = duckdb.connect()
    con.register("t", table)
    cursor = con.execute(DECIMAL_AVERAGES + " order by id")
    names = [c[0] for c in cursor.description]
    for mine, theirs in zip(ours, cursor.fetchall(), strict=True):
        for name, value in zip(names[1:], theirs[1:], strict=True):
            got = mine[name]
            if value is None:
                assert got is None, (name, mine)
                continue
            assert isinstance(got, Decimal) and got.as_tuple().exponent == -6, (name, got)
            assert got == Decimal(value).quantize(Decimal("0.000001")), (name, mine, value)


def test_a_window_average_of_decimals_is_a_decimal(tmp_path: Path) -> None:
    check_decimal_averages(tmp_path)


@pytest.mark.spark
def test_a_window_average_of_decimals_is_a_decimal_on_spark(spark, tmp_path: Path) -> None:
    check_decimal_averages(tmp_path, executor="spark", spark=spark)
