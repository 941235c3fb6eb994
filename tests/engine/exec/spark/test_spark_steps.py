"""Operators that change records path by path do it in one DataFrame step (each step is an
analysis on the driver): every transform of a ``transform``, a later one reading what an earlier
one wrote; a ``flatten``'s element, dropped source and new sequence. The records stay the local
executor's."""

from __future__ import annotations

from typing import Any

import pytest
from py4j_calls import counted

from engine.exec.spark.compiler import SparkCompiler, SparkRunContext
from engine.exec.spark.executor import SparkPlanRun
from engine.plan import parse_plan
from engine.planner.properties.decisions import top_n_orders
from engine.run import build_engines, run_plan

RECORDS = [
    {"id": 1, "m": {"a": 2, "tags": ["x", "y"]}},
    {"id": 2, "m": {"a": None, "tags": []}},
    {"id": 3, "m": None},
]


def plan_of(op: dict[str, Any]) -> Any:
    return parse_plan(
        {
            "storage": {"q": {"type": "queue"}},
            "query": [
                {"@id": 1, "op": "constant", "content": RECORDS},
                {"@id": 2, "input": 1, **op},
                {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
            ],
        }
    )


TRANSFORM = {
    "op": "transform",
    "transforms": [
        {"ref": "m.b", "expr": "m.a * 10"},
        {"ref": "c", "expr": "m.b + 1"},  # reads the member the first one wrote
        {"ref": "m.a", "expr": "c * 2"},
        {"ref": "id", "expr": "concat('x', cast(id as VARCHAR))"},
    ],
}
FLATTEN = {"op": "flatten", "ref": "tag", "expr": "m.tags", "drop": True}


@pytest.mark.parametrize(
    ("op", "steps"), [(TRANSFORM, 1), (FLATTEN, 2)], ids=["transform", "flatten"]
)
def test_one_operator_few_steps_the_local_records(
    op: dict[str, Any], steps: int, spark: Any
) -> None:
    plan = plan_of(op)
    engines = build_engines(plan, base_dir=None, classpath=[])
    source = SparkPlanRun(plan, spark, engines=engines, params={}).compiler.compile(
        plan.operator("1"), []
    )
    compiler = SparkCompiler(spark, SparkRunContext(engines=engines))
    with counted() as counts:
        compiler.compile(plan.operator("2"), [source])
    assert counts.frames == steps
    assert (
        run_plan(plan, executor="spark", spark=spark).records()
        == run_plan(plan, executor="local").records()
    )


def test_an_order_only_top_n_limits_read_builds_nothing(spark: Any) -> None:
    """An order read only by limits with an end runs as their top-N (one sort of its input):
    its own DataFrame is its input, untouched."""
    order = {"op": "order", "orderings": [{"order": "desc", "expr": "id"}]}
    limit = {"@id": 4, "op": "limit", "input": 2, "first": 1, "last": 3}
    plan = parse_plan(
        {
            "storage": {"q": {"type": "queue"}},
            "query": [
                {"@id": 1, "op": "constant", "content": RECORDS},
                {"@id": 2, "input": 1, **order},
                limit,
                {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {}},
            ],
        }
    )
    assert top_n_orders(plan) == {"2"}
    assert top_n_orders(plan_of(order)) == set()  # a store reads it
    run = SparkPlanRun(
        plan, spark, engines=build_engines(plan, base_dir=None, classpath=[]), params={}
    )
    source = run.compiler.compile(plan.operator("1"), [])
    assert run.compiler.compile(plan.operator("2"), [source]) is source
    on_spark = run_plan(plan, executor="spark", spark=spark).records()
    assert on_spark == run_plan(plan, executor="local").records()
    assert [r["id"] for r in on_spark] == [2, 1]


def join_plan(right: dict[str, Any]) -> Any:
    """Orders joined with ``right`` (operator 2, reading the lines or the orders), the pairs
    returned in join order."""
    lines = [{"okey": 1, "n": 1}, {"okey": 2, "n": 2}, {"okey": 1, "n": 3}]
    orders = [{"key": 2, "tag": "b"}, {"key": 1, "tag": "a"}, {"key": 3, "tag": "c"}]
    return parse_plan(
        {
            "storage": {"q": {"type": "queue"}},
            "query": [
                {"@id": 1, "op": "constant", "content": [{"o": o} for o in orders]},
                {"@id": 5, "op": "constant", "content": [{"l": line} for line in lines]},
                {"@id": 2, **right},
                {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "left",
                 "conditions": [{"relationship": "==", "left": "o.key", "right": "r.okey"}]},
                {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}},
            ],
        }
    )  # fmt: skip


LINES = {"op": "project", "input": 5, "projections": [{"ref": "output.r", "expr": "l"}]}
SAME_ORDERS = {
    "op": "project",
    "input": 1,
    "projections": [{"ref": "output.r.okey", "expr": "o.key"}],
}


@pytest.mark.parametrize(
    ("right", "related", "steps", "keys"),
    [(LINES, False, 4, [2, 1, 1, 3]), (SAME_ORDERS, True, 5, [2, 1, 3])],
    ids=["other input", "same input"],
)
def test_a_join_reads_each_sides_sequence_where_spark_tells_them_apart(
    right: dict[str, Any], related: bool, steps: int, keys: list[int], spark: Any
) -> None:
    """A join of inputs that share no operator upstream reads each side's sequence as that
    side's column: the broadcast hint on the small side (two DataFrame objects), the join and
    its select. Where both derive from one operator (an orders joined with a project of the
    same orders), the right sequence is renamed first: one step more."""
    plan = join_plan(right)
    run = SparkPlanRun(
        plan, spark, engines=build_engines(plan, base_dir=None, classpath=[]), params={}
    )
    assert (not run.properties["3"].unrelated_inputs) is related
    frames = {op.id: run.compiler.compile(op, []) for op in map(plan.operator, ("1", "5"))}
    frames["2"] = run.compiler.compile(plan.operator("2"), [frames[str(right["input"])]])
    with counted() as counts:
        joined = run.compiler.compile(plan.operator("3"), [frames["1"], frames["2"]])
        run.compiler.materialized("3", joined)  # its select, which it leaves to its one reader
    assert counts.frames == steps
    on_spark = run_plan(plan, executor="spark", spark=spark).records()
    assert on_spark == run_plan(plan, executor="local").records()
    assert [r["o"]["key"] for r in on_spark] == keys
