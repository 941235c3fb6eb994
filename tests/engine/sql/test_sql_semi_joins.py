"""IN, NOT IN, EXISTS and NOT EXISTS run as semi and anti joins: the planner's decision
(:mod:`engine.planner.properties.semi_joins`), shown by ``explain``, gives what DuckDB gives on
both executors, NULLs on either side and empty subqueries included; where a condition of the
decision fails the plan runs as it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from sql_oracle import check, tables

from engine.explain import explain
from engine.plan import parse_plan
from engine.planner import Statistics, optimize
from engine.planner.properties.semi_joins import semi_joins
from engine.run import run_plan
from engine.sql import sql_to_plan

OUTER = pa.schema([("id", pa.int64()), ("x", pa.int64()), ("s", pa.string())])
INNER = pa.schema([("k", pa.int64()), ("y", pa.int64())])
OUTER_ROWS = [(1, 1, "a"), (2, 2, "b"), (3, None, "c"), (4, 3, None), (5, 1, "a")]
INNER_ROWS = [(1, 10), (1, 11), (3, None), (None, 12), (7, 13)]
JOINED = pa.schema([("oid", pa.int64()), ("z", pa.int64())])
JOINED_ROWS = [(1, 1), (1, 3), (2, 7), (5, None), (None, 1), (6, 1)]

CASES = {
    "in": "select id from o where x in (select k from i where y > 10)",
    "in_duplicates": "select id, s from o where x in (select k from i)",
    "in_empty": "select id from o where x in (select k from i where y > 100)",
    "not_in_with_null": "select id from o where x not in (select k from i)",
    "not_in_without_null": "select id from o where x not in (select k from i where k is not null)",
    "not_in_empty": "select id from o where x not in (select k from i where y > 100)",
    "not_in_parenthesised": "select id from o where not (x in (select k from i where y < 12))",
    "not_in_and_other_tests": (
        "select id from o where s is not null and x not in (select k from i where y <> 12)"
    ),
    "exists": "select id from o where exists (select * from i where i.k = o.x)",
    "exists_filtered": (
        "select id from o where exists (select * from i where i.k = o.x and i.y > 10)"
    ),
    "not_exists": "select id, x from o where not exists (select * from i where i.k = o.x)",
    "not_exists_empty": (
        "select id from o where not exists (select * from i where i.k = o.x and i.y > 100)"
    ),
    "in_and_scalar": (
        "select id from o where x in (select k from i) and id > (select count(*) from i where y > 10)"
    ),
    "not_exists_and_scalar": (
        "select id from o where not exists (select * from i where i.k = o.x) "
        "and id >= (select min(y) from i) - 10"
    ),
    "in_under_or": "select id from o where x in (select k from i) or s = 'c'",
    "not_in_grouped": (
        "select s, count(*) n from o where x not in (select k from i where k is not null) "
        "group by s"
    ),
    # below a join (semi_join_pushdown): onto the side its key reads, or not at all
    "in_below_join": "select id, z from o, j where o.id = j.oid and x in (select k from i)",
    "in_below_join_right_side": (
        "select id, z from o, j where o.id = j.oid and z in (select k from i where y > 10)"
    ),
    "not_exists_below_join": (
        "select id, z from o join j on o.id = j.oid where not exists (select * from i where i.k = o.x)"
    ),
    "in_below_filtered_join": (
        "select id, z from o, j where o.id = j.oid and z > 1 and x in (select k from i)"
    ),
    "in_below_left_join": (
        "select id, z from o left join j on o.id = j.oid where x in (select k from i)"
    ),
    "in_on_left_join_null_side": (
        "select id, z from o left join j on o.id = j.oid where z in (select k from i)"
    ),
    "not_in_below_join": (
        "select id, z from o, j where o.id = j.oid and x not in (select k from i where k is not null)"
    ),
    "in_over_both_sides": (
        "select id, z from o, j where o.id = j.oid and x + z in (select k from i)"
    ),
}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root: Path = tmp_path_factory.mktemp("semi")
    return tables(
        root, {"o": (OUTER, OUTER_ROWS), "i": (INNER, INNER_ROWS), "j": (JOINED, JOINED_ROWS)}
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_local_equals_duckdb(data: Any, name: str) -> None:
    repo, con = data
    check(CASES[name], repo, con)


@pytest.mark.spark
@pytest.mark.parametrize("name", sorted(CASES))
def test_spark_equals_duckdb(data: Any, name: str, spark: Any) -> None:
    repo, con = data
    check(CASES[name], repo, con, executor="spark", spark=spark)


def _explained(data: Any, sql: str) -> str:
    repo, _ = data
    return explain(parse_plan(sql_to_plan(sql, repo)), stats=Statistics())


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("in", "left semi"),
        ("exists", "left semi"),
        ("not_exists", "left anti"),
        ("not_in_with_null", "left anti"),
    ],
)
def test_explain_shows_the_semi_join(data: Any, name: str, kind: str) -> None:
    text = _explained(data, CASES[name])
    assert f"type={kind}," in text
    assert f"match_by={kind} join" in text


def test_a_subquery_under_or_keeps_its_left_join(data: Any) -> None:
    text = _explained(data, CASES["in_under_or"])
    assert "type=left," in text and "semi" not in text and "anti" not in text


def test_semi_joins_can_be_turned_off(data: Any) -> None:
    repo, con = data
    for sql in CASES.values():
        check(sql, repo, con, params={"semi_joins": False})


def _plan(root: str, test: str = "isnull({root}.m)") -> Any:
    """A left join of distinct keys nested under ``root`` and a filter testing the match."""
    return parse_plan(
        {
            "storage": {"q": {"type": "queue"}},
            "query": [
                {"@id": 1, "op": "constant", "content": [{"x": 1}, {"x": 2}, {"x": 3}, {}]},
                {"@id": 2, "op": "constant", "content": [{"k": 1}, {"k": 1}]},
                {"@id": 3, "op": "segment", "input": 2, "ref": "$seg", "exprs": ["k"]},
                {
                    "@id": 4,
                    "op": "collapsingaggregate",
                    "input": 3,
                    "within": "$seg",
                    "carryovers": ["k"],
                    "aggregations": [{"ref": "$a", "expr": "count(1)"}],
                },
                {
                    "@id": 5,
                    "op": "project",
                    "input": 4,
                    "projections": [
                        {"ref": f"output.{root}.k", "expr": "k"},
                        {"ref": f"output.{root}.m", "expr": "$a"},
                    ],
                },
                {
                    "@id": 6,
                    "op": "join",
                    "left": 1,
                    "right": 5,
                    "type": "left",
                    "conditions": [{"relationship": "==", "left": "x", "right": f"{root}.k"}],
                },
                {"@id": 7, "op": "filter", "input": 6, "expr": test.format(root=root)},
                {
                    "@id": 8,
                    "op": "project",
                    "input": 7,
                    "projections": [{"ref": "output.x", "expr": "x"}],
                },
                {"@id": 9, "op": "store", "input": 8, "storageengine": "q", "target": {}},
            ],
        }
    )


def test_only_fields_no_left_record_may_hold_make_a_semi_join() -> None:
    """A left record may hold a field named as the right side's (the join merges the two): the
    left input's top-level names must be known and apart from the right side's."""
    assert semi_joins(_plan("$r"))["6"].kind == "anti"
    assert semi_joins(_plan("r"))["6"].kind == "anti"
    assert semi_joins(_plan("x")) == {}  # the left records' own x
    assert semi_joins(_plan("X")) == {}  # names compare case-insensitively
    records = run_plan(_plan("$r")).records()
    assert records == run_plan(_plan("$r"), params={"semi_joins": False}).records()
    assert records == [{"x": 2}, {"x": 3}, {"x": None}]


@pytest.mark.parametrize(
    ("test", "kind", "expected"),
    [
        ("isnotnull({root}.k) && x < 3", "semi", [{"x": 1}]),
        ("x > 1 && !isnotnull({root}.m)", "anti", [{"x": 2}, {"x": 3}]),
    ],
)
def test_the_filter_tests_the_rest_of_its_condition(test: str, kind: str, expected: Any) -> None:
    plan = _plan("$r", test)
    semi = semi_joins(plan)["6"]
    assert (semi.kind, semi.rest) == (kind, "x < 3" if kind == "semi" else "x > 1")
    for on in (True, False):  # not optimized: the rest stays in the filter
        records = run_plan(plan, optimize=False, params={"semi_joins": on}).records()
        assert records == expected


@pytest.mark.spark
def test_spark_filter_tests_the_rest_of_its_condition(spark: Any) -> None:
    for test, expected in [
        ("isnotnull({root}.k) && x < 3", [{"x": 1}]),
        ("x > 1 && !isnotnull({root}.m)", [{"x": 2}, {"x": 3}]),
    ]:
        plan = _plan("$r", test)
        records = run_plan(plan, executor="spark", spark=spark, optimize=False).records()
        assert records == expected


@pytest.mark.parametrize(
    ("name", "reads"),
    [
        ("in_below_join", "scan o"),
        ("in_below_join_right_side", "scan j"),
        ("not_exists_below_join", "scan o"),
        ("in_below_filtered_join", "join"),  # the join drops records of o itself
        ("in_below_left_join", "scan o"),  # the side a left join keeps whole
        ("in_on_left_join_null_side", "join"),  # the side it adds nulls to: stays above
        ("in_over_both_sides", "join"),  # its key reads both sides
    ],
)
def test_semi_joins_move_below_the_join_their_key_reads_one_side_of(
    data: Any, name: str, reads: str
) -> None:
    """The planner runs the semi (anti) join on the side its key reads (semi_join_pushdown), and
    the results are DuckDB's either way (the cases above)."""
    repo, _ = data
    plan = optimize(parse_plan(sql_to_plan(CASES[name], repo)))
    (join_id,) = semi_joins(plan)
    below = plan.operator(plan.operator(join_id).input_ids()[0])
    assert " ".join(filter(None, [below.op, getattr(below, "ref", None)])) == reads
