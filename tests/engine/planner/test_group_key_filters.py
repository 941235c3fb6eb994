"""The group-key rule: an aggregate an inner join matches on its group keys reads only the keys
the join's other side holds (a semi join below it), where those are few. The records are those
of the plan as written, on both executors; where the rule must not apply, the plan is unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.explain import explain_logical
from engine.plan import parse_plan
from engine.planner import Statistics, optimize
from engine.planner.rules.group_key_filters import filter_group_keys
from engine.run import run_plan

# 300 lines over parts 0..29 (and null), 10 parts of which 3 have the brand.
LINES = pa.table(
    {
        "pk": pa.array([None if i % 37 == 0 else i % 30 for i in range(300)], pa.int64()),
        "q": pa.array([i % 7 for i in range(300)], pa.int64()),
    }
)
PARTS = pa.table(
    {
        "pk": pa.array([1, 2, 3, 4, 5, 40, 41, None, 2, 6], pa.int64()),
        "brand": ["a", "a", "b", "b", "b", "a", "b", "a", "a", "b"],
    }
)


def scan(op_id: int, ref: str) -> dict[str, Any]:
    return {"@id": op_id, "op": "scan", "storageengine": "fs", "ref": ref,
            "selection": {"path": f"{ref}.parquet", "format": "parquet"}}  # fmt: skip


def grouped_join(root: Path | str, *, how: str = "inner", extra_reader: bool = False) -> dict:
    """q17's shape: the average quantity per part (every line), joined ``how`` to the parts of
    brand 'a', each line compared with its part's average."""
    query = [
        scan(1, "line"),
        scan(2, "part"),
        {"@id": 3, "op": "filter", "input": 2, "expr": "part.brand == 'a'"},
        {"@id": 4, "op": "transform", "input": 1, "transforms": [{"ref": "$k0", "expr": "line.pk"}]},
        {"@id": 5, "op": "segment", "input": 4, "ref": "$seg", "exprs": ["$k0"]},
        {"@id": 6, "op": "collapsingaggregate", "input": 5, "within": "$seg", "carryovers": ["$k0"],
         "aggregations": [{"ref": "$a0", "expr": "avg(line.q)"}, {"ref": "$n", "expr": "count(1)"}]},
        {"@id": 7, "op": "project", "input": 6, "projections": [
            {"ref": "output.$s.k", "expr": "$k0"}, {"ref": "output.$s.avg", "expr": "$a0"},
            {"ref": "output.$s.n", "expr": "$n"}]},
        {"@id": 8, "op": "join", "left": 3, "right": 7, "type": how,
         "conditions": [{"relationship": "==", "left": "part.pk", "right": "$s.k"}]},
        {"@id": 18, "op": "project", "input": 8, "projections": [
            {"ref": "output.part", "expr": "part"}, {"ref": "output.$s", "expr": "$s"}]},
        {"@id": 9, "op": "store", "input": 18, "storageengine": "q", "target": {}},
    ]  # fmt: skip
    if extra_reader:
        query.append({"@id": 10, "op": "store", "input": 6, "storageengine": "q", "target": {}})
    return {
        "storage": {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}},
        "query": query,
    }


@pytest.fixture
def data(tmp_path: Path) -> Path:
    pq.write_table(LINES, tmp_path / "line.parquet")
    pq.write_table(PARTS, tmp_path / "part.parquet")
    return tmp_path


def planned(plan: dict[str, Any], root: Path) -> Any:
    parsed = parse_plan(plan)
    return filter_group_keys(parsed, Statistics.collect(parsed, base_dir=root))


def sorted_records(records: list[dict[str, Any]]) -> list[str]:
    return sorted(map(str, records))


def same_records_as_written(plan: dict[str, Any], executor: str, request: Any) -> Any:
    """``plan`` run (planned) on ``executor``, after checking it gives the records of the plan
    as written (the local executor, unplanned)."""
    run: dict[str, Any] = {"executor": executor}
    if executor == "spark":
        run["spark"] = request.getfixturevalue("spark")
    optimized = run_plan(plan, **run)
    as_written = run_plan(plan, optimize=False, executor="local")
    assert sorted_records(optimized.records()) == sorted_records(as_written.records())
    return optimized


def test_the_aggregate_reads_only_the_keys_the_join_can_match(data: Path) -> None:
    plan = planned(grouped_join(data), data)
    segment_input = plan.operator(plan.operator("5").input)
    assert segment_input.op == "filter"
    semi = plan.operator(segment_input.input)
    assert (semi.op, semi.type, semi.left) == ("join", "left", "4")
    keys = plan.operator(plan.operator(plan.operator(semi.right).input).input)
    assert (keys.op, keys.input, keys.exprs) == ("segment", "3", ["part.pk"])


def test_explain_shows_the_semi_join(data: Path) -> None:
    shown = explain_logical(optimize(parse_plan(grouped_join(data)),
                                     Statistics.collect(parse_plan(grouped_join(data)), base_dir=data)))  # fmt: skip
    assert "segment 5: ref=$seg" in shown
    assert "isnotnull($keys" in shown, shown


@pytest.mark.parametrize("executor", ["local", "spark"])
def test_the_records_are_those_of_the_plan_as_written(
    data: Path, executor: str, request: pytest.FixtureRequest
) -> None:
    optimized = same_records_as_written(grouped_join(data), executor, request)
    # parts 1 and 2 (twice), 40 has no lines, the null part matches nothing
    assert sorted(r["part"]["pk"] for r in optimized.records()) == [1, 2, 2]
    # The aggregate counted only the lines of the parts of brand 'a'.
    assert optimized.metrics["5"]["rows"] == sum(1 for v in LINES["pk"].to_pylist() if v in (1, 2))


def test_keys_come_from_a_semi_join_the_other_side_passed(data: Path) -> None:
    # q20's shape: the other side's records (all parts) passed a semi join on the part key
    # against the parts of brand 'a': the aggregate reads only those keys.
    plan = grouped_join(data)
    query = plan["query"]
    query[2] = {"@id": 3, "op": "filter", "input": 14, "expr": "isnotnull($i.m)"}
    query += [
        scan(11, "brand"),
        {"@id": 12, "op": "filter", "input": 11, "expr": "brand.brand == 'a'"},
        {"@id": 13, "op": "transform", "input": 12, "transforms": [{"ref": "$k0", "expr": "brand.pk"}]},
        {"@id": 15, "op": "segment", "input": 13, "ref": "$seg", "exprs": ["$k0"]},
        {"@id": 16, "op": "collapsingaggregate", "input": 15, "within": "$seg", "carryovers": ["$k0"],
         "aggregations": [{"ref": "$a0", "expr": "count(1)"}]},
        {"@id": 17, "op": "project", "input": 16, "projections": [
            {"ref": "output.$i.v", "expr": "$k0"}, {"ref": "output.$i.m", "expr": "$a0"}]},
        {"@id": 14, "op": "join", "left": 2, "right": 17, "type": "left",
         "conditions": [{"relationship": "==", "left": "part.pk", "right": "$i.v"}]},
    ]  # fmt: skip
    pq.write_table(PARTS, data / "brand.parquet")
    filtered = planned(plan, data)
    semi = filtered.operator(filtered.operator(filtered.operator("5").input).input)
    keys = filtered.operator(filtered.operator(filtered.operator(semi.right).input).input)
    assert (keys.input, keys.exprs) == ("13", ["$k0"])  # the semi join's rows
    expected = sorted_records(run_plan(plan, optimize=False).records())
    assert sorted_records(run_plan(plan).records()) == expected
    assert sorted(r["part"]["pk"] for r in run_plan(plan).records()) == [1, 2, 2]


@pytest.mark.parametrize(
    "why",
    ["left join", "aggregate read elsewhere", "keys not few", "no statistics"],
)
def test_the_plan_is_unchanged(data: Path, why: str) -> None:
    plan = grouped_join(
        data, how="left" if why == "left join" else "inner",
        extra_reader=why == "aggregate read elsewhere",
    )  # fmt: skip
    if why == "keys not few":
        # 400 parts, 40 estimated of brand a: more than a tenth of the 300 lines
        pq.write_table(pa.concat_tables([PARTS] * 40), data / "part.parquet")
    parsed = parse_plan(plan)
    if why == "no statistics":
        assert filter_group_keys(parsed) == parsed
    else:
        assert planned(plan, data) == parsed


def joined_lines(data: Path, *, transform: dict[str, Any] | None = None) -> dict[str, Any]:
    """q02's shape: the aggregate reads the lines joined to the suppliers of even parts (the key
    is a field of the lines), through ``transform`` (default: the key's copy)."""
    plan = grouped_join(data)
    plan["query"][3]["input"] = 21
    if transform is not None:
        plan["query"][3]["transforms"] = [transform]
    plan["query"] += [
        scan(20, "supp"),
        {"@id": 21, "op": "join", "left": 1, "right": 20, "type": "inner",
         "conditions": [{"relationship": "==", "left": "line.pk", "right": "supp.pk"}]},
    ]  # fmt: skip
    pq.write_table(pa.table({"pk": pa.array(range(0, 30, 2), pa.int64())}), data / "supp.parquet")
    return plan


@pytest.mark.parametrize("executor", ["local", "spark"])
def test_an_aggregate_of_a_join_filters_the_input_its_keys_come_from(
    data: Path, executor: str, request: pytest.FixtureRequest
) -> None:
    # The lines, not the joined records, pass the semi join: the join reads fewer of them.
    plan = joined_lines(data)
    filtered = planned(plan, data)
    join = filtered.operator("21")
    semi = filtered.operator(filtered.operator(join.left).input)
    assert (semi.op, semi.type, semi.left) == ("join", "left", "1")
    assert semi.conditions[0].left == "line.pk"
    assert filtered.operator("4").input == "21"  # nothing between the aggregate and the join
    optimized = same_records_as_written(plan, executor, request)
    assert sorted(r["part"]["pk"] for r in optimized.records()) == [2, 2]  # 1 is odd
    # The join read only the lines of the parts of brand 'a'.
    assert optimized.metrics["1"]["rows"] == len(LINES)
    assert optimized.metrics["21"]["rows"] == sum(1 for v in LINES["pk"].to_pylist() if v == 2)


@pytest.mark.parametrize(
    "transform",
    [
        {"ref": "$k0", "expr": "line.pk + 0"},  # the key is no field of an input
        {"ref": "line", "expr": "supp"},  # the key's record is overwritten on the way
    ],
)
def test_an_aggregate_of_a_join_is_left_alone_where_its_keys_source_is_unclear(
    data: Path, transform: dict[str, Any]
) -> None:
    # The filter would stay above the join, whose records the planner does not count: there
    # the join, not the grouping, is the cost, and a filter above it saves little.
    plan = joined_lines(data, transform=transform)
    if transform["ref"] == "line":
        plan["query"][3]["transforms"] = [{"ref": "$k0", "expr": "line.pk"}, transform]
    assert planned(plan, data) == parse_plan(plan)


def test_an_input_another_operator_reads_is_not_filtered(data: Path) -> None:
    plan = joined_lines(data)
    plan["query"].append({"@id": 30, "op": "store", "input": 1, "storageengine": "q", "target": {}})
    assert planned(plan, data) == parse_plan(plan)


@pytest.mark.parametrize("executor", ["local", "spark"])
def test_keys_come_from_the_input_of_an_inner_join_on_the_other_side(
    data: Path, executor: str, request: pytest.FixtureRequest
) -> None:
    # q02's outer query: the parts of brand 'a' joined to their lines first, then to the
    # aggregate. The part keys of that join are among those of the filtered parts: the
    # aggregate reads only those.
    plan = grouped_join(data)
    query = plan["query"]
    query += [
        scan(31, "other"),
        {"@id": 32, "op": "join", "left": 31, "right": 3, "type": "inner",
         "conditions": [{"relationship": "==", "left": "other.pk", "right": "part.pk"}]},
    ]  # fmt: skip
    query[7]["left"] = 32  # the aggregate's join reads the parts' join
    query[8]["projections"].append({"ref": "output.other", "expr": "other"})
    pq.write_table(LINES.select(["pk"]), data / "other.parquet")
    filtered = planned(plan, data)
    semi = filtered.operator(filtered.operator(filtered.operator("5").input).input)
    assert (semi.op, semi.type, semi.left) == ("join", "left", "4")
    keys = filtered.operator(filtered.operator(filtered.operator(semi.right).input).input)
    assert (keys.op, keys.input, keys.exprs) == ("segment", "3", ["part.pk"])  # the parts
    optimized = same_records_as_written(plan, executor, request)
    assert optimized.metrics["5"]["rows"] == sum(1 for v in LINES["pk"].to_pylist() if v in (1, 2))
