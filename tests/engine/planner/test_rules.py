"""Each rewrite rule on small plans: what it changes, and what it must leave alone."""

from __future__ import annotations

import pyarrow as pa
import pytest

from engine.plan import LogicalPlan, parse_plan
from engine.planner import Statistics, optimize
from engine.planner.rules.constant_folding import fold_constants, fold_text
from engine.planner.rules.filter_pushdown import push_filters
from engine.planner.rules.limit_pushdown import push_limits
from engine.planner.rules.projection_pushdown import push_projections
from engine.planner.rules.remove_redundant import remove_redundant
from engine.planner.statistics import ScanStatistics
from engine.storage.engines import Capabilities

STORAGE = {"fs": {"type": "fs", "root": "/data"}, "q": {"type": "queue"}}


def chain(*ops: dict, store: bool = True) -> LogicalPlan:
    """scan 1 -> ops (ids 2, 3, ...) -> store, each reading the one before."""
    query = [
        {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e", "selection": {"path": "e"}}
    ]
    for i, op in enumerate(ops, start=2):
        query.append({"@id": i, "input": i - 1, **op})
    if store:
        query.append(
            {"@id": 99, "op": "store", "input": len(query), "storageengine": "q", "target": {}}
        )
    return parse_plan({"storage": STORAGE, "query": query})


def parquet_stats(**columns: pa.DataType) -> Statistics:
    caps = Capabilities(can_read=True, can_push_filters=True, can_push_projection=True)
    return Statistics({"1": ScanStatistics("parquet", 2, 1000, 100, caps, columns)})


# -- constant folding ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "folded"),
    [
        ("1 + 2 * 3", "7"),
        ("1.5 * 2", "3.0"),
        ("3 < 4", "true"),
        ("!(3 < 4)", "false"),
        ("e.a > 10 * 10", "e.a > 100"),
        ("true && e.a > 1", "e.a > 1"),
        ("e.a > 1 || false", "e.a > 1"),
        ("concat('a', 'b')", "'ab'"),
        # left alone: fields, non-boolean operands of identities, failures, nulls, non-finite
        ("e.a + 1", "e.a + 1"),
        ("e.a && true", "e.a && true"),
        ("'a' + 1", "'a' + 1"),
        ("1 + null", "1 + null"),
        ("1 / 0", "1 / 0"),
    ],
)
def test_fold_text(text: str, folded: str) -> None:
    assert fold_text(text) == folded


def test_folding_reaches_every_expression_of_the_plan() -> None:
    plan = chain(
        {"op": "transform", "transforms": [{"ref": "e.b", "expr": "2 + 2"}]},
        {"op": "order", "orderings": [{"expr": "e.a * (1 + 1)"}]},
        {"op": "project", "projections": [{"ref": "output.x", "expr": "e.b - 1 * 1"}]},
    )
    folded = fold_constants(plan)
    assert folded.operator("2").transforms[0].expr == "4"
    assert folded.operator("3").orderings[0].expr == "e.a * 2"
    assert folded.operator("4").projections[0].expr == "e.b - 1"
    assert fold_constants(folded) == folded


# -- redundant operators ------------------------------------------------------------------------


def test_redundant_operators_are_removed_and_readers_rewired() -> None:
    plan = chain(
        {"op": "filter", "expr": "1 < 2"},
        {"op": "limit", "first": 0},
        {"op": "transform", "transforms": [{"ref": "e.a", "expr": "e.a"}]},
        {"op": "filter", "expr": "e.a > 1"},
    )
    optimized = remove_redundant(fold_constants(plan))
    assert [op.id for op in optimized.topological_order()] == ["1", "5", "99"]
    assert optimized.operator("5").input == "1"


def test_a_redundant_result_is_kept() -> None:
    plan = chain({"op": "filter", "expr": "true"}, store=False)
    assert remove_redundant(plan) == plan


def test_false_filters_and_real_limits_stay() -> None:
    plan = chain({"op": "filter", "expr": "3 > 4"}, {"op": "limit", "first": 1})
    assert [op.op for op in optimize(plan).topological_order()] == [
        "scan",
        "filter",
        "limit",
        "store",
    ]


# -- limit pushdown -----------------------------------------------------------------------------


def test_limit_moves_below_projects_and_transforms_into_the_scan() -> None:
    plan = chain(
        {"op": "transform", "transforms": [{"ref": "e.b", "expr": "e.a + 1"}]},
        {"op": "project", "projections": [{"ref": "output.b", "expr": "e.b"}]},
        {"op": "limit", "first": 2, "last": 5},
    )
    pushed = push_limits(plan)
    assert [op.op for op in pushed.topological_order()] == [
        "scan",
        "limit",
        "transform",
        "project",
        "store",
    ]
    assert pushed.operator("1").pushed_limit == 5


def test_limit_does_not_cross_a_filter_or_a_shared_operator() -> None:
    plan = chain({"op": "filter", "expr": "e.a > 1"}, {"op": "limit", "last": 5})
    assert push_limits(plan) == plan
    shared = parse_plan(
        {
            "storage": STORAGE,
            "query": [
                {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e",
                 "selection": {"path": "e"}},
                {"@id": 2, "op": "limit", "input": 1, "last": 5},
                {"@id": 3, "op": "union", "inputs": [1, 2]},
                {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}},
            ],
        }
    )  # fmt: skip
    assert push_limits(shared).operator("1").pushed_limit is None


# -- projection pushdown ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ops", "projection"),
    [
        ([{"op": "filter", "expr": "e.a > 1"}], None),  # the store writes whole records
        (
            [
                {"op": "filter", "expr": "e.a > 1"},
                {"op": "project", "projections": [{"ref": "output.x", "expr": "e.b.c[0].d"}]},
            ],
            ["a", "b"],
        ),
        ([{"op": "project", "projections": [{"ref": "output", "expr": "e"}]}], None),
        (
            [
                {"op": "segment", "ref": "s", "exprs": ["e.g"]},
                {"op": "collapsingaggregate", "within": "s", "carryovers": ["e.G"],
                 "aggregations": [{"ref": "n", "expr": "count(1)"}, {"ref": "t",
                                                                      "expr": "sum(e.v)"}]},
            ],
            ["G", "v"],
        ),
        (  # a carried record: only what its readers read of it
            [
                {"op": "segment", "ref": "s", "exprs": ["e.g"]},
                {"op": "collapsingaggregate", "within": "s", "carryovers": ["e"],
                 "aggregations": [{"ref": "n", "expr": "count(1)"}]},
                {"op": "project", "projections": [{"ref": "output.x", "expr": "E.a.b"}]},
            ],
            ["a", "g"],
        ),
        (  # ... all of it when a reader reads it whole
            [
                {"op": "segment", "ref": "s", "exprs": ["e.g"]},
                {"op": "collapsingaggregate", "within": "s", "carryovers": ["e"],
                 "aggregations": [{"ref": "n", "expr": "count(1)"}]},
                {"op": "project", "projections": [{"ref": "output.x", "expr": "e.a"},
                                                  {"ref": "output.y", "expr": "e"}]},
            ],
            None,
        ),
        (
            [{"op": "collapsingaggregate", "aggregations": [{"ref": "n", "expr": "count(1)"}]}],
            None,  # no member named: the records are read as they are
        ),
        (
            [
                {"op": "transform", "transforms": [{"ref": "e.z", "expr": "e.x"}]},
                {"op": "order", "orderings": [{"expr": "e.y"}]},
                {"op": "project", "projections": [{"ref": "output.z", "expr": "e.z"}]},
            ],
            ["x", "y", "z"],
        ),
    ],
)  # fmt: skip
def test_projection_of_a_chain(ops: list[dict], projection: list[str] | None) -> None:
    assert push_projections(chain(*ops)).operator("1").projection == projection


def test_projection_through_joins_and_unions() -> None:
    plan = parse_plan(
        {
            "storage": STORAGE,
            "query": [
                {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "l",
                 "selection": {"path": "l"}},
                {"@id": 2, "op": "scan", "storageengine": "fs", "ref": "r",
                 "selection": {"path": "r"}},
                {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "left",
                 "conditions": [{"relationship": "==", "left": "l.k", "right": "r.k"}]},
                {"@id": 4, "op": "project", "input": 3,
                 "projections": [{"ref": "output.a", "expr": "l.a"}, {"ref": "output.b",
                                                                      "expr": "r.b"}]},
                {"@id": 5, "op": "scan", "storageengine": "fs", "ref": "l",
                 "selection": {"path": "m"}},
                {"@id": 6, "op": "union", "inputs": [1, 5], "distinct": True},
                {"@id": 7, "op": "store", "input": 4, "storageengine": "q", "target": {}},
                {"@id": 8, "op": "store", "input": 6, "storageengine": "q", "target": {}},
            ],
        }
    )  # fmt: skip
    pushed = push_projections(plan)
    assert pushed.operator("2").projection == ["b", "k"]
    assert pushed.operator("1").projection is None  # also read whole by the distinct union
    assert pushed.operator("5").projection is None


# -- filter pushdown ----------------------------------------------------------------------------


def test_simple_tests_on_scalar_parquet_columns_are_pushed() -> None:
    plan = chain(
        {"op": "filter", "expr": "e.kind == 'x' && e.tags > 1"},
        {"op": "order", "orderings": [{"expr": "e.n"}]},
        {"op": "filter", "expr": "10 <= e.n && e.n + 1 > 2 && e.flag == true"},
    )
    stats = parquet_stats(
        kind=pa.string(), n=pa.int32(), tags=pa.list_(pa.int64()), flag=pa.bool_()
    )
    pushed = push_filters(plan, stats)
    assert pushed.operator("1").pushed_filter == "e.kind == 'x' && 10 <= e.n && e.flag == true"
    assert [op.op for op in pushed.topological_order()].count("filter") == 2  # filters stay


@pytest.mark.parametrize(
    "expr",
    [
        "e.kind == 1",  # the literal's family differs from the column's
        "e.nested.x > 1",  # not a top-level member
        "e.tags == 1",  # an array: nested filtering
        "e.missing > 1",  # unknown column
        "e.kind == e.other",  # no literal
        "e.kind == 'a' || e.other > 1",  # a disjunction with an untestable part
        "e.n > cast('1' as VARCHAR)",  # a cast to another type than DECIMAL
    ],
)
def test_other_tests_are_not_pushed(expr: str) -> None:
    stats = parquet_stats(kind=pa.string(), n=pa.int64(), tags=pa.list_(pa.int64()))
    assert (
        push_filters(chain({"op": "filter", "expr": expr}), stats).operator("1").pushed_filter
        is None
    )


def test_decimal_comparisons_and_disjunctions_of_comparisons_are_pushed() -> None:
    """SQL's decimal constants are casts; numbers compare with a DECIMAL column; an ``||`` of
    pushable comparisons is one (each reader tests exactly what its own pushdown can)."""
    expr = (
        "e.price >= cast('0.05' as DECIMAL(2, 2)) && e.price < 24 && "
        "(e.kind == 'a' || e.kind == 'b' && e.n > 1) && e.n + 1 > 2"
    )
    stats = parquet_stats(kind=pa.string(), n=pa.int64(), price=pa.decimal128(15, 2))
    pushed = push_filters(chain({"op": "filter", "expr": expr}), stats).operator("1")
    assert pushed.pushed_filter == (
        "e.price >= cast('0.05' as DECIMAL(2, 2)) && e.price < 24 && "
        "(e.kind == 'a' || e.kind == 'b' && e.n > 1)"
    )


def test_filters_are_not_pushed_without_statistics_or_capability_or_past_a_write() -> None:
    plan = chain({"op": "filter", "expr": "e.n > 1"})
    assert push_filters(plan, None) == plan
    json_stats = Statistics({"1": ScanStatistics("json", 1, 10, None, Capabilities(), None)})
    assert push_filters(plan, json_stats) == plan
    written = chain(
        {"op": "transform", "transforms": [{"ref": "e.n", "expr": "e.n * 2"}]},
        {"op": "filter", "expr": "e.n > 1"},
    )
    assert push_filters(written, parquet_stats(n=pa.int64())) == written


def joined(join_type: str, expr: str, right: dict | None = None) -> LogicalPlan:
    """scan o (1) joined with scan c (2) (or ``right``), then a filter (4) on the joined records."""
    scan = {"op": "scan", "storageengine": "fs", "selection": {"path": "t"}}
    return parse_plan(
        {
            "storage": STORAGE,
            "query": [
                {"@id": 1, **scan, "ref": "o"},
                {"@id": 2, **scan, "ref": "c"},
                *([right] if right else []),
                {
                    "@id": 3,
                    "op": "join",
                    "left": 1,
                    "right": right["@id"] if right else 2,
                    "type": join_type,
                    "conditions": [{"relationship": "==", "left": "o.k", "right": "c.k"}],
                },
                {"@id": 4, "op": "filter", "input": 3, "expr": expr},
                {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {}},
            ],
        }
    )


def both_parquet() -> Statistics:
    caps = Capabilities(can_read=True, can_push_filters=True, can_push_projection=True)
    columns = {"k": pa.int64(), "d": pa.int64(), "n": pa.string()}
    scan = ScanStatistics("parquet", 1, 100, 10, caps, columns)
    return Statistics({"1": scan, "2": scan})


def test_one_sided_tests_cross_a_join_into_the_side_it_keeps_whole() -> None:
    expr = "o.d >= 5 && (isnull(c.n) || c.d < 3) && c.d > 1"
    left = push_filters(joined("left", expr), both_parquet())
    # A left join keeps every left record: the left test runs in the orders reader; the right
    # side's null-extended records must still reach the filter.
    assert left.operator("1").pushed_filter == "o.d >= 5"
    assert left.operator("2").pushed_filter is None
    inner = push_filters(joined("inner", expr), both_parquet())
    assert inner.operator("1").pushed_filter == "o.d >= 5"
    assert inner.operator("2").pushed_filter == "c.d > 1"
    outer = joined("outer", expr)
    assert push_filters(outer, both_parquet()) == outer


def test_tests_do_not_cross_a_join_where_the_other_side_may_hold_the_name() -> None:
    # The right side writes `o`: the joined `o.d` may be the right's (deep merge).
    writes_o = {
        "@id": 6,
        "op": "transform",
        "input": 2,
        "transforms": [{"ref": "o.d", "expr": "c.d"}],
    }
    plan = joined("inner", "o.d >= 5", right=writes_o)
    assert push_filters(plan, both_parquet()) == plan
    # A test reading both sides stays above the join.
    both = joined("inner", "o.d >= c.d")
    assert push_filters(both, both_parquet()) == both


# -- the whole optimizer ------------------------------------------------------------------------


def test_optimized_plans_dump_and_parse_back_equal() -> None:
    plan = chain(
        {"op": "filter", "expr": "e.n > 1 + 1"},
        {"op": "project", "projections": [{"ref": "output.n", "expr": "e.n"}]},
        {"op": "limit", "last": 3},
    )
    optimized = optimize(plan, parquet_stats(n=pa.int64()))
    scan = optimized.operator("1")
    assert (scan.projection, scan.pushed_filter, scan.pushed_limit) == (["n"], "e.n > 2", None)
    assert parse_plan(optimized.to_dict()) == optimized
    assert optimize(optimized, parquet_stats(n=pa.int64())) == optimized
