"""The rules never change a result: every conformance case gives its expected records on the
local executor with and without them, and every optimized corpus plan dumps and parses back."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "conformance"))

from corpus import CORPUS, PARSE_ONLY, case_params, check_case, load_cases

from engine.plan import parse_plan
from engine.planner import Statistics, optimize


@pytest.mark.parametrize("optimized", [True, False], ids=["rules", "no-rules"])
@pytest.mark.parametrize("case", case_params("local"))
def test_case_with_and_without_rules(case: dict[str, Any], optimized: bool) -> None:
    check_case(case, executor="local", optimize=optimized)


@pytest.mark.parametrize("case", load_cases(), ids=lambda case: case["id"])
def test_optimized_plan_round_trips(case: dict[str, Any]) -> None:
    if case.get("expect_error") or case["id"] in PARSE_ONLY or case["id"] == "U20":
        return  # nothing to optimize: the plan is rejected, or only parsed
    plan = parse_plan(case["root"] / case["plan"])
    optimized = optimize(plan, Statistics.collect(plan, classpath=[case["classpath"]]))
    assert parse_plan(optimized.to_dict()) == optimized
    assert {op.id for op in optimized.sinks()} == {op.id for op in plan.sinks()}


def test_the_rules_do_push_into_corpus_scans() -> None:
    plan = parse_plan(CORPUS / "plans/ref/simple_plan.json")
    optimized = optimize(plan, Statistics.collect(plan, classpath=[CORPUS / "data"]))
    (scan,) = [op for op in optimized.sources()]
    assert scan.projection == ["ppu", "sales"]
