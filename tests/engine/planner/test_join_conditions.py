"""The join rule: a filter's equalities become join conditions, one-input conjuncts go below the
joins, comma-join chains are reordered without cross products; outer joins keep their meaning.
Results are the same with and without the rule, on random small tables (against DuckDB too)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from golden_files import assert_golden
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.explain import explain, explain_logical
from engine.metadata import MetadataRepository
from engine.plan import Filter, Join, LogicalPlan, parse_plan
from engine.planner import Statistics, optimize
from engine.planner.rules.join_conditions import estimate_input, plan_joins
from engine.planner.statistics import ScanStatistics
from engine.run import run_plan
from engine.sql import sql_to_plan

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
STORAGE = {"fs": {"type": "fs", "root": "/data"}, "q": {"type": "queue"}}


def scan(op_id: int, ref: str) -> dict[str, Any]:
    return {
        "@id": op_id,
        "op": "scan",
        "storageengine": "fs",
        "ref": ref,
        "selection": {"path": ref},
    }


def plan_of(*ops: dict[str, Any]) -> LogicalPlan:
    top = ops[-1]["@id"]
    store = {"@id": 99, "op": "store", "input": top, "storageengine": "q", "target": {}}
    return parse_plan({"storage": STORAGE, "query": [*ops, store]})


def comma_chain(refs: str, expr: str) -> LogicalPlan:
    """``FROM a, b, c, d WHERE expr`` (``refs`` "a b c d"): scans 1, 2, 4 and 6 joined as
    written by joins 3, 5 and 7 without conditions, under filter 8."""
    a, b, c, d = refs.split()
    return plan_of(
        scan(1, a),
        scan(2, b),
        {"@id": 3, "op": "join", "left": 1, "right": 2},
        scan(4, c),
        {"@id": 5, "op": "join", "left": 3, "right": 4},
        scan(6, d),
        {"@id": 7, "op": "join", "left": 5, "right": 6},
        {"@id": 8, "op": "filter", "input": 7, "expr": expr},
    )


def rows(**counts: int) -> Statistics:
    """Statistics giving scan ``<id>`` the row count of keyword ``s<id>``."""
    return Statistics(
        {name[1:]: ScanStatistics("parquet", 1, n * 10, n) for name, n in counts.items()}
    )


def ranged(scans: dict[str, tuple[int, dict[str, tuple[int, int]]]]) -> Statistics:
    """Statistics giving each scan id its row count and its columns' integer ranges."""
    return Statistics(
        {i: ScanStatistics("parquet", 1, n, n, ranges=r) for i, (n, r) in scans.items()}
    )


def joins(plan: LogicalPlan) -> list[Join]:
    return [op for op in plan.topological_order() if isinstance(op, Join)]


def test_equalities_become_conditions_and_one_side_tests_go_below() -> None:
    plan = plan_of(
        scan(1, "a"),
        scan(2, "b"),
        {"@id": 3, "op": "join", "left": 1, "right": 2},
        {"@id": 4, "op": "filter", "input": 3, "expr": "b.k == a.k && b.x > 1 && a.y < b.y"},
    )
    planned = plan_joins(plan, rows(s1=100, s2=10))
    (join,) = joins(planned)
    assert [(c.left, c.relationship, c.right) for c in join.conditions] == [("a.k", "==", "b.k")]
    assert planned.operator(join.right).expr == "b.x > 1"
    assert planned.operator("4").expr == "a.y < b.y"
    assert planned.operator("99").input == "4"


def test_a_filter_left_with_nothing_is_removed() -> None:
    plan = plan_of(
        scan(1, "a"),
        scan(2, "b"),
        {"@id": 3, "op": "join", "left": 1, "right": 2},
        {"@id": 4, "op": "filter", "input": 3, "expr": "a.k == b.k"},
    )
    planned = plan_joins(plan)
    assert [op.id for op in planned.topological_order()] == ["1", "2", "3", "99"]


def test_a_filter_between_joins_keeps_its_conjuncts() -> None:
    # (a x b) filtered on a.k == b.k, then joined with c and filtered again: both filters count.
    plan = plan_of(
        scan(1, "a"),
        scan(2, "b"),
        {"@id": 3, "op": "join", "left": 1, "right": 2},
        {"@id": 4, "op": "filter", "input": 3, "expr": "a.k == b.k"},
        scan(5, "c"),
        {"@id": 6, "op": "join", "left": 4, "right": 5},
        {"@id": 7, "op": "filter", "input": 6, "expr": "b.y == c.v"},
    )
    planned = plan_joins(plan, rows(s1=100, s2=10, s5=1))
    pairs = {frozenset((c.left, c.right)) for join in joins(planned) for c in join.conditions}
    assert pairs == {frozenset(("a.k", "b.k")), frozenset(("b.y", "c.v"))}


def test_a_repeated_or_branch_is_factored_into_a_condition() -> None:
    plan = plan_of(
        scan(1, "p"),
        scan(2, "l"),
        {"@id": 3, "op": "join", "left": 1, "right": 2},
        {
            "@id": 4,
            "op": "filter",
            "input": 3,
            "expr": "(p.k == l.k && p.s < 5 && l.q > 1) || (p.k == l.k && p.s > 9)",
        },
    )
    planned = plan_joins(plan)
    (join,) = joins(planned)
    assert [{c.left, c.right} for c in join.conditions] == [{"p.k", "l.k"}]
    assert planned.operator("4").expr == "p.s < 5 && l.q > 1 || p.s > 9"
    # ... and what the OR implies of p alone is tested below the join
    p_side = planned.operator(
        join.left if planned.operator(join.left).op == "filter" else join.right
    )
    assert p_side.expr == "p.s < 5 || p.s > 9"


def test_a_comma_chain_never_starts_with_a_cross_product() -> None:
    # FROM l, o, c, n WHERE ...: as written the first join (l, o) has no condition of its own.
    plan = comma_chain(
        "l n o c",
        "l.ok == o.ok && o.ck == c.ck && c.nk == n.nk && n.name == 'X'",
    )
    planned = plan_joins(plan, rows(s1=6000, s2=25, s4=1500, s6=150))
    assert all(join.conditions for join in joins(planned))
    # smallest first: nation (filtered), then customer, orders, lineitem; the larger side left
    first = joins(planned)[0]
    assert planned.operator(first.right).op == "filter"  # nation, filtered before the join
    assert planned.operator(first.left).id == "6"
    assert [j.left for j in joins(planned)[1:]] == ["4", "1"]
    assert "8" not in {op.id for op in planned.query}


def test_an_equality_on_few_distinct_values_is_joined_last() -> None:
    # TPC-H Q5's trap: customer and supplier share only the nation key (25 values), so they
    # are never joined on it alone: the chain follows the keys and the nation key is tested in
    # the last join, beside a key.
    plan = comma_chain(
        "c o l s",
        "c.ck == o.ck && l.ok == o.ok && l.sk == s.sk && c.nk == s.nk",
    )
    keys = {
        "1": (150_000, {"ck": (1, 150_000), "nk": (0, 24)}),
        "2": (1_500_000, {"ok": (1, 6_000_000), "ck": (1, 150_000)}),
        "4": (6_000_000, {"ok": (1, 6_000_000), "sk": (1, 10_000)}),
        "6": (10_000, {"sk": (1, 10_000), "nk": (0, 24)}),
    }
    planned = plan_joins(plan, ranged(keys))
    order = [sorted({j.left, j.right} & set(keys)) for j in joins(planned)]
    assert order == [["1", "2"], ["4"], ["6"]]
    last = {(c.left, c.right) for c in joins(planned)[-1].conditions}
    assert last in ({("l.sk", "s.sk"), ("c.nk", "s.nk")}, {("s.sk", "l.sk"), ("s.nk", "c.nk")})


def test_a_selective_input_is_joined_before_a_small_one_that_leads_to_a_large_join() -> None:
    # TPC-H Q9's shape: nation is the smallest input but leads only to all of lineitem through
    # supplier; part, filtered by a LIKE, cuts lineitem to a twentieth, so the chain starts there.
    plan = comma_chain(
        "p s l n",
        "s.sk == l.sk && p.pk == l.pk && s.nk == n.nk && like(p.name, '%green%')",
    )
    keys = {
        "1": (200_000, {"pk": (1, 200_000)}),
        "2": (10_000, {"sk": (1, 10_000), "nk": (0, 24)}),
        "4": (6_000_000, {"sk": (1, 10_000), "pk": (1, 200_000)}),
        "6": (25, {"nk": (0, 24)}),
    }
    planned = plan_joins(plan, ranged(keys))
    first = joins(planned)[0]
    sides = {first.left, first.right}
    assert "4" in sides and planned.operator((sides - {"4"}).pop()).op == "filter"  # part's


def test_a_large_input_meets_a_broadcast_one_before_a_join_that_shuffles_it() -> None:
    # TPC-H Q8's shape: orders (filtered) and customer are too large to broadcast, part is not;
    # joining lineitem with orders first shuffles all of lineitem, joining it with the filtered
    # part first (a broadcast join) shuffles what is left of it.
    plan = comma_chain(
        "p l o c",
        "p.pk == l.pk && l.ok == o.ok && o.ck == c.ck && p.type == 'X' && o.d >= 1 && o.d <= 2"
        " && c.nk == 3",
    )
    mb = 1024 * 1024
    sizes = {
        "1": (6 * mb, 200_000, {"pk": (1, 200_000)}),
        "2": (200 * mb, 6_000_000, {"pk": (1, 200_000), "ok": (1, 6_000_000)}),
        "4": (56 * mb, 1_500_000, {"ok": (1, 6_000_000), "ck": (1, 150_000)}),
        "6": (12 * mb, 150_000, {"ck": (1, 150_000)}),
    }
    stats = Statistics(
        {i: ScanStatistics("parquet", 1, b, n, ranges=r) for i, (b, n, r) in sizes.items()}
    )
    planned = plan_joins(plan, stats)
    first = joins(planned)[0]
    assert first.left == "2"  # lineitem, with the filtered part
    assert [(c.left, c.right) for c in first.conditions] == [("l.pk", "p.pk")]


def test_small_inputs_are_broadcast_into_a_large_one_rather_than_joined_first() -> None:
    # TPC-H Q2's subquery: partsupp joined to supplier, nation and region (one region of five).
    # Joining the three small inputs first gives a small result, but one Spark cannot broadcast
    # (its size is not known): partsupp would be shuffled to meet it. Starting from partsupp,
    # each small input is broadcast in turn and nothing is shuffled.
    plan = comma_chain(
        "ps s n r", "ps.sk == s.sk && s.nk == n.nk && n.rk == r.rk && r.name == 'EUROPE'"
    )
    mb = 1024 * 1024
    sizes = {
        "1": (42 * mb, 800_000, {"sk": (1, 10_000)}),
        "2": (mb, 10_000, {"sk": (1, 10_000), "nk": (0, 24)}),
        "4": (2_000, 25, {"nk": (0, 24), "rk": (0, 4)}),
        "6": (1_000, 5, {"rk": (0, 4)}),
    }
    stats = Statistics(
        {i: ScanStatistics("parquet", 1, b, n, ranges=r) for i, (b, n, r) in sizes.items()}
    )
    first = joins(plan_joins(plan, stats))[0]
    assert first.left == "1"  # partsupp
    assert [(c.left, c.right) for c in first.conditions] == [("ps.sk", "s.sk")]


def aggregated(*, grouped: bool) -> LogicalPlan:
    """``FROM c, (SELECT avg(o.v) FROM o [GROUP BY o.k]) s WHERE c.x > s.a``: the aggregate
    (a project over it, 14) joined to ``c`` without conditions, under a filter."""
    segment = [{"@id": 11, "op": "segment", "input": 10, "ref": "$seg", "exprs": ["o.k"]}]
    return plan_of(
        scan(1, "c"),
        scan(10, "o"),
        *(segment if grouped else []),
        {"@id": 12, "op": "collapsingaggregate", "input": 11 if grouped else 10,
         "within": "$seg" if grouped else None, "carryovers": ["o.k"] if grouped else [],
         "aggregations": [{"ref": "$a", "expr": "avg(o.v)"}]},
        {"@id": 14, "op": "project", "input": 12,
         "projections": [{"ref": "output.s.a", "expr": "$a"}]},
        {"@id": 15, "op": "join", "left": 14, "right": 1},
        {"@id": 16, "op": "filter", "input": 15, "expr": "c.x > s.a"},
    )  # fmt: skip


@pytest.mark.parametrize(("grouped", "groups"), [(False, 1), (True, 1_000)])
def test_an_aggregate_is_estimated_by_its_groups(grouped: bool, groups: int) -> None:
    # One record without groups, else at most the key's range: 1,000 keys in 1,000,000 rows.
    stats = ranged({"1": (50_000, {}), "10": (1_000_000, {"k": (1, 1_000)})})
    estimate = estimate_input(aggregated(grouped=grouped), "14", stats)
    assert (estimate.rows, estimate.known) == (groups, True)


def test_the_one_record_of_an_aggregate_is_the_broadcast_side_of_a_cross_join() -> None:
    # A join without conditions reads the larger input on the left: the nested-loop join
    # broadcasts the right one, the aggregate's one record, not the 50,000 records of c.
    stats = ranged({"1": (50_000, {}), "10": (1_000_000, {"k": (1, 1_000)})})
    join = joins(plan_joins(aggregated(grouped=False), stats))[0]
    assert (join.left, join.right) == ("1", "14")


def test_an_or_across_inputs_tests_what_it_implies_of_each_below_the_joins() -> None:
    # TPC-H Q7: (n1 = a && n2 = b) || (n1 = b && n2 = a) implies n1 in (a, b) and n2 in (a, b)
    plan = plan_of(
        scan(1, "n1"),
        scan(2, "n2"),
        {"@id": 3, "op": "join", "left": 1, "right": 2},
        {
            "@id": 4,
            "op": "filter",
            "input": 3,
            "expr": "n1.k == n2.k && (n1.name == 'a' && n2.name == 'b' || n1.name == 'b' && n2.name == 'a')",
        },
    )
    planned = plan_joins(plan)
    below = {
        planned.operator(op.input).id: op.expr
        for op in planned.query
        if isinstance(op, Filter) and planned.operator(op.input).op == "scan"
    }
    assert below == {
        "1": "n1.name == 'a' || n1.name == 'b'",
        "2": "n2.name == 'b' || n2.name == 'a'",
    }
    assert "||" in planned.operator("4").expr  # the OR itself still decides, above the join


def test_statistics_keep_the_integer_ranges_of_parquet_columns(tmp_path: Path) -> None:
    pq.write_table(pa.table({"k": [3, 9, 5], "s": ["a", "b", "c"]}), tmp_path / "t.parquet")
    plan = parse_plan({"storage": {"fs": {"type": "fs", "root": str(tmp_path)}}, "query": [
        {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "t",
         "selection": {"path": "t.parquet"}}]})  # fmt: skip
    assert Statistics.collect(plan).scan("1").ranges == {"k": (3, 9)}


def test_a_tree_with_conditions_keeps_its_shape() -> None:
    plan = plan_of(
        scan(1, "a"),
        scan(2, "b"),
        {"@id": 3, "op": "join", "left": 1, "right": 2, "conditions": [
            {"relationship": "==", "left": "a.k", "right": "b.k"}]},
        scan(4, "c"),
        {"@id": 5, "op": "join", "left": 3, "right": 4, "conditions": [
            {"relationship": "<", "left": "a.t", "right": "c.t"}]},
        {"@id": 6, "op": "filter", "input": 5, "expr": "b.j == c.j && c.z == 1"},
    )  # fmt: skip
    planned = plan_joins(plan, rows(s1=1, s2=1000, s4=10))
    assert [(j.id, j.left, j.right) for j in joins(planned)] == [("3", "1", "2"), ("5", "3", "100")]
    assert [(c.left, c.relationship, c.right) for c in planned.operator("5").conditions] == [
        ("a.t", "<", "c.t"),
        ("b.j", "==", "c.j"),
    ]


def test_left_join_right_side_tests_stay_above() -> None:
    plan = plan_of(
        scan(1, "a"),
        scan(2, "b"),
        {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "left", "conditions": [
            {"relationship": "==", "left": "a.k", "right": "b.k"}]},
        {"@id": 4, "op": "filter", "input": 3, "expr": "a.x > 1 && b.y == a.y && b.z > 2"},
    )  # fmt: skip
    planned = plan_joins(plan)
    (join,) = joins(planned)
    assert join.type == "left"
    assert [(c.left, c.right) for c in join.conditions] == [("a.k", "b.k")]
    assert planned.operator(join.left).expr == "a.x > 1"
    assert join.right == "2"
    assert planned.operator("4").expr == "b.y == a.y && b.z > 2"


def test_a_filter_moving_whole_to_one_input_keeps_its_id() -> None:
    """Its row count and what is known of it follow its records below the join."""
    inner = plan_of(
        scan(1, "a"),
        scan(2, "b"),
        {"@id": 3, "op": "join", "left": 1, "right": 2, "conditions": [
            {"relationship": "==", "left": "a.k", "right": "b.k"}]},
        {"@id": 4, "op": "filter", "input": 3, "expr": "b.x > 1 && b.y < 2"},
    )  # fmt: skip
    planned = plan_joins(inner)
    (join,) = joins(planned)
    assert join.right == "4" and planned.operator("4").input == "2"
    assert planned.operator("99").input == "3"
    left = plan_of(
        scan(1, "a"),
        scan(2, "b"),
        {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "left", "conditions": [
            {"relationship": "==", "left": "a.k", "right": "b.k"}]},
        {"@id": 4, "op": "filter", "input": 3, "expr": "a.x > 1"},
    )  # fmt: skip
    planned = plan_joins(left)
    (join,) = joins(planned)
    assert join.left == "4" and planned.operator("4").expr == "a.x > 1"
    assert planned.operator("99").input == "3"


def test_outer_joins_and_unknown_names_are_left_alone() -> None:
    outer = plan_of(
        scan(1, "a"),
        scan(2, "b"),
        {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "outer"},
        {"@id": 4, "op": "filter", "input": 3, "expr": "a.k == b.k && a.x > 1"},
    )
    assert plan_joins(outer) == outer
    same_names = plan_of(
        scan(1, "a"),
        scan(2, "a"),
        {"@id": 3, "op": "join", "left": 1, "right": 2},
        {"@id": 4, "op": "filter", "input": 3, "expr": "a.k == a.j"},
    )
    assert plan_joins(same_names) == same_names


# -- SQL, explain and results -------------------------------------------------------------------

TABLES = {
    "fact": pa.table(
        {
            "id": list(range(60)),
            "d1": [i % 7 for i in range(60)],
            "d2": [i % 11 for i in range(60)],
            "amount": [float(i) for i in range(60)],
        }
    ),
    "dim1": pa.table({"id": list(range(7)), "name": [f"n{i % 3}" for i in range(7)]}),
    "dim2": pa.table({"id": list(range(11)), "r": [i % 2 for i in range(11)]}),
    "reg": pa.table({"id": [0, 1], "name": ["east", "west"]}),
}
STAR = """select dim1.name, sum(fact.amount) as total
from fact, dim1, dim2, reg
where fact.d1 = dim1.id and fact.d2 = dim2.id and dim2.r = reg.id and reg.name = 'west'
group by dim1.name order by dim1.name"""


def write_tables(root: Path, tables: dict[str, pa.Table]) -> MetadataRepository:
    repo = MetadataRepository(
        {"t": {"type": "fs", "root": str(root)}}, catalog_file=root / "c.json"
    )
    for name, table in tables.items():
        pq.write_table(table, root / f"{name}.parquet")
        repo.register_table(name, "t", {"path": f"{name}.parquet"})
    return repo


def test_explain_shows_the_comma_joins_as_hash_joins(tmp_path: Path) -> None:
    repo = write_tables(tmp_path, TABLES)
    plan = parse_plan(sql_to_plan(STAR, repo))
    stats = Statistics.collect(plan)
    logical = explain_logical(optimize(plan, stats))
    physical = explain(plan, stats=stats)
    assert "nested-loop-join" not in physical
    physical = re.sub(r"bytes=\d+", "bytes=_", physical)  # the parquet writer's version decides
    assert_golden(GOLDEN / "explain_comma_joins.txt", f"{logical}\n\n{physical}\n")
    expected = duckdb_rows(tmp_path, STAR)
    assert [tuple(r.values()) for r in run_plan(plan).records()] == expected


def duckdb_rows(root: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect()
    for name in TABLES:
        con.execute(f"create view {name} as select * from '{root / name}.parquet'")
    return [tuple(row) for row in con.execute(sql).fetchall()]


values = st.one_of(st.none(), st.integers(0, 3))


def table(columns: tuple[str, ...]) -> st.SearchStrategy[pa.Table]:
    row = st.tuples(*[values for _ in columns])
    return st.lists(row, max_size=6).map(
        lambda rs: pa.table(
            {c: pa.array([r[i] for r in rs], pa.int64()) for i, c in enumerate(columns)}
        )
    )


QUERIES = [
    "select a.x, b.y, c.z from a, b, c where a.k = b.k and b.j = c.j",
    "select a.x, c.z from a, b, c where a.k = b.k and c.j = b.j and a.x > 0 and c.z <> 1",
    "select a.x, b.y from a, b where (a.k = b.k and a.x = 1) or (a.k = b.k and b.y = 2)",
    "select a.x, b.y from a left join b on a.k = b.k where b.y is null or a.x = 1",
    "select a.x, b.y from a left join b on a.k = b.k where a.x = 1 and b.y > 0",
    "select a.x, b.y, c.z from a, b, c where a.k = b.k and a.x < c.z",
    "select a.x, c.z from a join b on a.k = b.k, c where b.j = c.j and not (c.z = 2)",
    "select a.x, b.y from a, b where a.k = b.k and b.y = (select max(z) from c)",
]


@settings(max_examples=40)
@given(
    a=table(("k", "x")),
    b=table(("k", "j", "y")),
    c=table(("j", "z")),
    sql=st.sampled_from(QUERIES),
)
def test_same_results_with_and_without_the_rule(
    tmp_path_factory: pytest.TempPathFactory, a: pa.Table, b: pa.Table, c: pa.Table, sql: str
) -> None:
    root = tmp_path_factory.mktemp("joins")
    repo = write_tables(root, {"a": a, "b": b, "c": c})
    plan = parse_plan(sql_to_plan(sql, repo))
    planned = sorted_rows(run_plan(plan).records())
    assert planned == sorted_rows(run_plan(plan, optimize=False).records())
    con = duckdb.connect()
    for name in "abc":
        con.execute(f"create view {name} as select * from '{root / name}.parquet'")
    assert planned == sorted(con.execute(sql).fetchall(), key=repr)


def sorted_rows(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((tuple(r.values()) for r in records), key=repr)


@pytest.mark.spark
@pytest.mark.parametrize("sql", QUERIES)
def test_spark_gives_the_local_results(tmp_path: Path, spark: Any, sql: str) -> None:
    tables = {
        "a": pa.table({"k": [1, 1, 2, None, 3], "x": [0, 1, 2, 1, None]}),
        "b": pa.table({"k": [1, 2, 2, None], "j": [1, 1, 3, 3], "y": [2, None, 0, 2]}),
        "c": pa.table({"j": [1, 3, 3, None], "z": [1, 2, 3, 0]}),
    }
    repo = write_tables(tmp_path, tables)
    plan = parse_plan(sql_to_plan(sql, repo))
    local = sorted_rows(run_plan(plan, optimize=False).records())
    assert sorted_rows(run_plan(plan, executor="spark", spark=spark).records()) == local
