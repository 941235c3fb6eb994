"""The outer-join rule: a filter above a ``left`` (or ``outer``) join that drops every record
where a name of one side only is null makes the join ``inner`` (or ``left``). The records are
those of the plan as written, on both executors, NULLs included; a test that a null passes
(``isnull``, an OR, a ``coalesce``) keeps the join as it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.explain import explain_logical
from engine.plan import Join, LogicalPlan, parse_plan
from engine.planner import optimize
from engine.planner.rules.outer_joins import simplify_outer_joins
from engine.run import run_plan

LEFT = pa.table({"k": [1, 1, 2, None, 3, 4], "x": [0, 1, 2, 1, None, 5]})
RIGHT = pa.table({"k": [1, 2, 2, None, 5], "y": [2, None, 0, 2, 7]})


def join_plan(root: Path | str, expr: str, how: str = "left", readers: int = 1) -> dict[str, Any]:
    """``l`` joined with ``r`` on ``k`` (``how``), under a filter on ``expr`` read by a queue
    (and, with ``readers=2``, the join read by a second queue too)."""

    def scan(op_id: int, ref: str) -> dict[str, Any]:
        return {"@id": op_id, "op": "scan", "storageengine": "fs", "ref": ref,
                "selection": {"path": f"{ref}.parquet", "format": "parquet"}}  # fmt: skip

    query = [
        scan(1, "l"),
        scan(2, "r"),
        {"@id": 3, "op": "join", "left": 1, "right": 2, "type": how,
         "conditions": [{"relationship": "==", "left": "l.k", "right": "r.k"}]},
        {"@id": 4, "op": "filter", "input": 3, "expr": expr},
        {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {}},
    ]  # fmt: skip
    if readers == 2:
        query.append({"@id": 6, "op": "store", "input": 3, "storageengine": "q", "target": {}})
    return {
        "storage": {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}},
        "query": query,
    }


def join_type(expr: str, how: str = "left", readers: int = 1) -> str:
    planned = simplify_outer_joins(parse_plan(join_plan("/d", expr, how, readers)))
    join = planned.operator("3")
    assert isinstance(join, Join)
    return join.type


@pytest.mark.parametrize(
    ("expr", "how", "became"),
    [
        ("r.y > 1", "left", "inner"),
        ("l.x > 0 && r.y != l.x", "left", "inner"),
        ("isnotnull(r.y)", "left", "inner"),
        ("r.y == 2 && isnull(l.x)", "left", "inner"),
        ("isnull(r.y)", "left", "left"),
        ("r.y > 1 || true", "left", "left"),
        ("coalesce(r.y, 0) > 1", "left", "left"),
        ("l.x > 0.5 * -r.y", "left", "inner"),  # arithmetic is null where r.y is
        ("cast(r.y as FLOAT8) + 1 < 3", "left", "inner"),
        ("coalesce(r.y, 0) + 1 > 1", "left", "left"),
        ("l.x > 0", "left", "left"),
        ("l.x > 0", "outer", "left"),
        ("l.x > 0 && r.y > 0", "outer", "inner"),
        ("r.y > 0", "outer", "outer"),  # would be a right join: left as it is
        ("isnull(l.x)", "outer", "outer"),
    ],
)
def test_a_filter_rejecting_the_null_side_makes_the_join_inner(
    expr: str, how: str, became: str
) -> None:
    assert join_type(expr, how) == became


def test_a_join_another_operator_reads_is_left_alone() -> None:
    assert join_type("r.y > 1", readers=2) == "left"


def test_unknown_names_are_left_alone() -> None:
    plan = join_plan("/d", "r.y > 1")
    # A project writing a whole map as the record: its names are unknown.
    plan["query"][1] = {
        "@id": 2,
        "op": "project",
        "input": 7,
        "projections": [{"ref": "output", "expr": "c"}],
    }
    plan["query"].append({"@id": 7, "op": "constant", "content": [{"c": {"r": {"k": 1}}}]})
    parsed = parse_plan(plan)  # fmt: skip
    assert simplify_outer_joins(parsed) == parsed


def test_a_constants_names_are_its_records_keys() -> None:
    plan = join_plan("/d", "r.y > 1")
    plan["query"][1] = {"@id": 2, "op": "constant", "content": [{"r": {"k": 1, "y": 2}}]}
    assert simplify_outer_joins(parse_plan(plan)).operator("3").type == "inner"


def test_explain_shows_the_inner_join() -> None:
    plan = parse_plan(join_plan("/d", "r.y > 1"))
    assert "join 3: type=left" in explain_logical(plan)
    shown = explain_logical(optimize(plan))
    assert "join 3: type=inner" in shown, shown
    assert "filter 4: expr=r.y > 1\n" in shown  # now below the join, on its right input


EXPRS = [
    "r.y > 1",
    "isnotnull(r.y)",
    "l.x > 0 && r.y != l.x",
    "isnull(r.y)",
    "r.y > 1 || true",
    "coalesce(r.y, 0) > 1",
    "l.x > 0.5 * -r.y",
    "coalesce(r.y, 0) + 1 > 1",
    "l.x > 0",
    "l.x > 0 && r.y > 0",
]


def write_inputs(root: Path) -> None:
    pq.write_table(LEFT, root / "l.parquet")
    pq.write_table(RIGHT, root / "r.parquet")


def records(plan: dict[str, Any], **how: Any) -> list[Any]:
    return run_plan(plan, **how).records()


@pytest.mark.parametrize("how", ["left", "outer"])
@pytest.mark.parametrize("expr", EXPRS)
def test_the_local_records_are_those_of_the_plan_as_written(
    tmp_path: Path, expr: str, how: str
) -> None:
    write_inputs(tmp_path)
    plan = join_plan(tmp_path, expr, how)
    assert records(plan) == records(plan, optimize=False)


@pytest.mark.spark
@pytest.mark.parametrize(
    ("expr", "how"),
    [
        ("r.y > 1", "left"),
        ("isnull(r.y)", "left"),
        ("r.y > 1 || true", "left"),
        ("coalesce(r.y, 0) > 1", "left"),
        ("l.x > 0", "outer"),
        ("l.x > 0 && r.y > 0", "outer"),
    ],
)
def test_spark_gives_the_records_of_the_plan_as_written(
    tmp_path: Path, spark: Any, expr: str, how: str
) -> None:
    write_inputs(tmp_path)
    plan = join_plan(tmp_path, expr, how)
    local = records(plan, optimize=False)
    assert records(plan, executor="spark", spark=spark) == local


def test_the_plan_is_unchanged_without_a_filter(tmp_path: Path) -> None:
    plan: LogicalPlan = parse_plan(join_plan(tmp_path, "true"))
    assert simplify_outer_joins(plan) == plan
