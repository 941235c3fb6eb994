"""Golden output of the logical explain for every example plan."""

from __future__ import annotations

from pathlib import Path

import pytest
from golden_files import assert_golden

from engine.explain import explain, explain_logical
from engine.plan import parse_plan
from engine.planner import Statistics

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
PLANS = sorted((REPO / "examples" / "plans").glob("*.json"))


@pytest.mark.parametrize("plan_file", PLANS, ids=lambda p: p.stem)
def test_explain_matches_golden(plan_file: Path) -> None:
    plan = parse_plan(plan_file, source_name=f"examples/plans/{plan_file.name}")
    text = explain_logical(plan) + "\n"
    assert_golden(GOLDEN / f"explain_{plan_file.stem}.txt", text)


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("plan_file", PLANS, ids=lambda p: p.stem)
def test_physical_explain_matches_golden(plan_file: Path, fmt: str) -> None:
    plan = parse_plan(plan_file, source_name=f"examples/plans/{plan_file.name}")
    # No statistics: the example data is generated elsewhere, and the golden must not depend on it.
    text = explain(plan, fmt=fmt, stats=Statistics()) + "\n"
    assert_golden(
        GOLDEN / f"explain_physical_{plan_file.stem}.{'txt' if fmt == 'text' else 'json'}", text
    )


def test_explain_shows_fragments_and_what_was_pushed_into_scans() -> None:
    plan = parse_plan(REPO / "examples" / "plans" / "orders_enriched.json")
    text = explain(plan, stats=Statistics())
    assert text.splitlines()[1] == "fragment 0 (parallel)"
    assert "fragment 1 (parallel) -> hash-partition #3 in fragment 0" in text
    assert (
        "scan-parquet #1 (scan 1): columns=[customer_id, items, order_id, total_cents, ts]" in text
    )
    markdown = explain(plan, fmt="markdown", stats=Statistics())
    assert markdown.startswith("**Physical plan** (3 fragments)\n```\n# ")


def test_shared_input_is_shown_once() -> None:
    plan = parse_plan(
        {
            "query": [
                {"@id": 1, "op": "constant", "content": [{"a": 1}]},
                {"@id": 2, "op": "union", "inputs": [1, 1]},
            ]
        }
    )
    assert explain_logical(plan).splitlines() == [
        "union 2",
        '├─ constant 1: content=[{"a": 1}]',
        "└─ constant 1 (see above)",
    ]
