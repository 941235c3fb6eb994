"""Physical plans: golden files for the example plans and some corpus plans, and the choices
statistics drive (broadcast joins, two-phase aggregation, fragments at exchanges)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from golden_files import assert_golden

from engine.plan import LogicalPlan, parse_plan
from engine.planner import ScanStatistics, Statistics, optimize
from engine.planner.physical import EXCHANGES, PlannerOptions, to_physical
from engine.storage.engines import Capabilities

REPO = Path(__file__).resolve().parents[3]
GOLDEN = REPO / "tests" / "engine" / "golden"
CORPUS = (REPO / ".." / "shared" / "conformance").resolve()
EXAMPLES = sorted((REPO / "examples" / "plans").glob("*.json"))
CORPUS_PLANS = {
    "U01": "plans/ref/simple_plan.json",
    "U05": "plans/ref/join/simple_join.json",
    "U11": "plans/ref/union/distinct.json",
    "T17": "cases/T17/plan.json",
    "D09": "cases/D09/plan.json",
}


def check_golden(name: str, text: str) -> None:
    assert_golden(GOLDEN / name, text)


@pytest.mark.parametrize("plan_file", EXAMPLES, ids=lambda p: p.stem)
def test_example_physical_plans(plan_file: Path) -> None:
    # Without statistics (the example data is generated elsewhere), so the golden is stable.
    physical = to_physical(optimize(parse_plan(plan_file)))
    check_golden(f"physical_{plan_file.stem}.json", physical.to_json() + "\n")


@pytest.mark.parametrize("case", sorted(CORPUS_PLANS))
def test_corpus_physical_plans(case: str) -> None:
    plan = parse_plan(CORPUS / CORPUS_PLANS[case])
    stats = Statistics.collect(plan, classpath=[CORPUS / "data"])
    check_golden(
        f"physical_{case}.json", to_physical(optimize(plan, stats), stats).to_json() + "\n"
    )


def two_scans(join_type: str, condition: str = "==") -> LogicalPlan:
    return parse_plan(
        {
            "storage": {"fs": {"type": "fs", "root": "/d"}, "q": {"type": "queue"}},
            "query": [
                {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "l",
                 "selection": {"path": "l"}},
                {"@id": 2, "op": "scan", "storageengine": "fs", "ref": "r",
                 "selection": {"path": "r"}},
                {"@id": 3, "op": "join", "left": 1, "right": 2, "type": join_type,
                 "conditions": [{"relationship": condition, "left": "l.k", "right": "r.k"}]},
                {"@id": 4, "op": "store", "input": 3, "storageengine": "fs",
                 "target": {"path": "out"}},
            ],
        }
    )  # fmt: skip


def sizes(left: int, right: int) -> Statistics:
    caps = Capabilities(can_read=True)
    return Statistics(
        {
            "1": ScanStatistics("json", 4, left, None, caps),
            "2": ScanStatistics("json", 4, right, None, caps),
        }
    )


def pops(plan: LogicalPlan, stats: Statistics | None, **options: int) -> list[str]:
    return [op.pop for op in to_physical(plan, stats, PlannerOptions(**options)).graph]


MB = 1024 * 1024


@pytest.mark.parametrize(
    ("join_type", "left", "right", "expected"),
    [
        ("inner", 500 * MB, 1 * MB, ["broadcast", "broadcast-hash-join"]),
        ("inner", 1 * MB, 500 * MB, ["broadcast", "broadcast-hash-join"]),
        ("left", 500 * MB, 1 * MB, ["broadcast", "broadcast-hash-join"]),
        ("left", 1 * MB, 500 * MB, ["hash-partition", "hash-partition", "hash-join"]),
        ("outer", 1 * MB, 1 * MB, ["hash-partition", "hash-partition", "hash-join"]),
        ("inner", 500 * MB, 500 * MB, ["hash-partition", "hash-partition", "hash-join"]),
    ],
)
def test_join_strategy_from_sizes(join_type: str, left: int, right: int, expected: list) -> None:
    found = pops(two_scans(join_type), sizes(left, right))
    assert found[2:-1] == expected


def test_broadcast_builds_the_small_side_and_threshold_is_configurable() -> None:
    physical = to_physical(two_scans("inner"), sizes(1 * MB, 500 * MB))
    join = next(op for op in physical.graph if op.pop == "broadcast-hash-join")
    assert join.props["build"] == "left"
    assert pops(two_scans("inner"), sizes(1 * MB, 500 * MB), broadcast_threshold=MB // 2)[-2] == (
        "hash-join"
    )
    assert "broadcast-hash-join" not in pops(two_scans("inner"), None)  # sizes unknown


def test_non_equi_join_is_a_nested_loop_join() -> None:
    assert pops(two_scans("inner", "<"), sizes(MB, MB))[2:-1] == ["broadcast", "nested-loop-join"]


def aggregate(aggregation: str, *, target: str | None = None, within: bool = True) -> LogicalPlan:
    collapse = {"@id": 3, "op": "collapsingaggregate", "input": 2, "carryovers": ["e.g"],
                "aggregations": [{"ref": "n", "expr": aggregation}]}  # fmt: skip
    if within:
        collapse["within"] = "s"
    if target:
        collapse["target"] = target
    return parse_plan(
        {
            "storage": {"fs": {"type": "fs", "root": "/d"}},
            "query": [
                {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e",
                 "selection": {"path": "e"}},
                {"@id": 2, "op": "segment", "input": 1, "ref": "s", "exprs": ["e.g"]},
                collapse,
                {"@id": 4, "op": "store", "input": 3, "storageengine": "fs",
                 "target": {"path": "out"}},
            ],
        }
    )  # fmt: skip


def test_two_phase_aggregation_across_an_exchange() -> None:
    assert pops(aggregate("sum(e.v) + count(1)"), None) == [
        "scan-json",
        "hash-partition",
        "segment",
        "partial-aggregate",
        "hash-partition",
        "hash-aggregate",
        "store-parquet",
    ]
    no_within = pops(aggregate("max(e.v)", within=False), None)
    assert no_within[-4:] == ["partial-aggregate", "single", "streaming-aggregate", "store-parquet"]


@pytest.mark.parametrize(
    ("aggregation", "target"), [("count_distinct(e.v)", None), ("sum(e.v)", "e.t")]
)
def test_aggregates_that_do_not_combine_run_in_one_phase(aggregation: str, target: str) -> None:
    assert "partial-aggregate" not in pops(aggregate(aggregation, target=target), None)


def test_small_or_single_inputs_aggregate_in_one_phase() -> None:
    caps = Capabilities(can_read=True, exact_row_counts=True)
    small = Statistics({"1": ScanStatistics("parquet", 3, 1000, 50, caps, {})})
    assert "partial-aggregate" not in pops(aggregate("sum(e.v)"), small)
    single = Statistics({"1": ScanStatistics("json", 1, 1000, None, caps)})
    assert pops(aggregate("sum(e.v)"), single) == [
        "scan-json",
        "segment",
        "streaming-aggregate",
        "store-parquet",
    ]


def test_fragments_split_at_every_exchange_and_keep_logical_ids() -> None:
    physical = to_physical(optimize(parse_plan(EXAMPLES[0])))
    fragments = physical.fragments()
    owner = {op: f.id for f in fragments for op in f.operators}
    assert sorted(owner) == [op.id for op in physical.graph]  # each operator in one fragment
    for op in physical.graph:
        assert op.logical_id is not None
        if op.pop in EXCHANGES:
            (child,) = op.inputs
            sender = next(f for f in fragments if f.root == child)
            assert (sender.sends_to, sender.receiver_fragment) == (op.id, owner[op.id])
    assert json.loads(physical.to_json())["graph"][0]["@id"] == 1
