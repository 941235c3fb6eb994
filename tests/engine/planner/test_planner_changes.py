"""What the planner did to each written operator, said in words, and who stands in for a removed
one: what a presentation that keeps the plan as written (the Dagster graph) shows and counts."""

from __future__ import annotations

from typing import Any

from engine.plan import parse_plan
from engine.planner import optimize
from engine.planner.changes import planner_notes, stand_in, structural_notes, written_counts

SCAN = {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e", "selection": {"path": "e"}}
STORE = {"op": "store", "storageengine": "q", "target": {}}


def plan_of(*ops: dict[str, Any]) -> Any:
    storage = {"fs": {"type": "fs", "root": "/data"}, "q": {"type": "queue"}}
    return parse_plan({"storage": storage, "query": list(ops)})


def test_removed_operators_stand_in_for_their_input_and_count_its_rows() -> None:
    plan = plan_of(
        SCAN,
        {"@id": 2, "op": "filter", "input": 1, "expr": "true"},
        {"@id": 3, "op": "limit", "input": 2, "first": 0},  # no bound: removed too
        {"@id": 4, "op": "filter", "input": 3, "expr": "e.a > 1"},
        {"@id": 5, "input": 4, **STORE},
    )
    planned = optimize(plan)
    assert [op.id for op in planned.topological_order()] == ["1", "4", "5"]
    assert stand_in(plan, planned, "3") == "1" and stand_in(plan, planned, "4") == "4"
    notes = planner_notes(plan, planned)
    assert notes["2"].startswith("removed by the planner") and notes["2"].endswith("scan 1")
    assert "4" not in notes  # it reads what its input passed on: not a move
    counts = written_counts(plan, planned, {"1": {"rows": 9}, "4": {"rows": 3}})
    assert {k: v["rows"] for k, v in counts.items()} == {"1": 9, "2": 9, "3": 9, "4": 3}


def test_a_moved_limit_and_the_scan_it_bounds_say_so() -> None:
    plan = plan_of(
        SCAN,
        {
            "@id": 2,
            "op": "project",
            "input": 1,
            "projections": [{"ref": "output.a", "expr": "e.a"}],
        },
        {"@id": 3, "op": "limit", "input": 2, "last": 5},
        {"@id": 4, "input": 3, **STORE},
    )
    notes = structural_notes(plan)
    assert notes["3"] == "moved by the planner: it reads scan 1 (as written: project 2)"
    assert notes["2"] == "moved by the planner: it reads limit 3 (as written: scan 1)"
    assert notes["1"] == "reads at most 5 records"
    # With every rule, the scan also reads only the member the plan uses.
    assert (
        planner_notes(plan, optimize(plan))["1"]
        == "reads only the members a; reads at most 5 records"
    )


def test_a_plan_no_structural_rule_touches_has_no_notes_as_it_loads() -> None:
    plan = plan_of(SCAN, {"@id": 2, "input": 1, **STORE})
    assert structural_notes(plan) == {}


def filtered_join(join_type: str) -> Any:
    """Scans 1 and 2 joined (3) on ``k``, a filter (4) testing both sides, a store (5)."""
    return plan_of(
        SCAN,
        {**SCAN, "@id": 2, "ref": "r", "selection": {"path": "r"}},
        {"@id": 3, "op": "join", "left": 1, "right": 2, "type": join_type,
         "conditions": [{"relationship": "==", "left": "e.k", "right": "r.k"}]},
        {"@id": 4, "op": "filter", "input": 3, "expr": "r.y > 1 && e.x > 2"},
        {"@id": 5, "input": 4, **STORE},
    )  # fmt: skip


def test_a_left_join_its_filter_makes_inner_says_so() -> None:
    plan = filtered_join("left")
    note = planner_notes(plan, optimize(plan))["3"]
    assert note.endswith(
        "runs as an inner join: the filter reading it drops the records the left join adds "
        "for those without a match"
    ), note


def test_a_filter_split_across_a_joins_inputs_says_its_condition_moved() -> None:
    plan = filtered_join("inner")
    planned = optimize(plan)
    assert "4" not in {op.id for op in planned.query}
    assert planner_notes(plan, planned)["4"] == (
        "removed by the planner: its condition is tested below it (the planner moved it toward "
        "the scans); its readers read join 3"
    )


def test_a_filter_on_a_constant_truth_passes_every_record_through() -> None:
    plan = plan_of(
        SCAN,
        {"@id": 2, "op": "filter", "input": 1, "expr": "1 < 2"},
        {"@id": 3, "input": 2, **STORE},
    )
    assert planner_notes(plan, optimize(plan))["2"] == (
        "removed by the planner: it passes every record through unchanged; its readers read scan 1"
    )
