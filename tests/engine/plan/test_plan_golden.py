"""Golden files: dumped plans and rendered errors, beside this test in golden/.

Regenerate after an intended change with ``UPDATE_GOLDEN=1 .venv/bin/pytest tests/engine/plan`` and
review the diff.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from golden_files import assert_golden

from engine.errors import PlanError
from engine.plan import parse_plan

GOLDEN = Path(__file__).parent / "golden"

DUMPED = {
    "U02": "plans/ref-sandbox/simple_plan.json",  # one sequence, expanded
    "U03": "plans/ref/simple_plan_flattened.json",  # flatten's name/drop: 1
    "U14": "plans/ref/constant2.json",  # list-form storage
    "U19": "plans/ref-branch/and/AndTest.plan",  # ids generated for operators without @id
    "D34": "cases/D34/plan.json",  # a sequence with input and @id
}

REJECTED = {
    "U17": "plans/common/simple_plan.json",
    "U18": "plans/common/dsort-logical.json",
    "U20": "plans/ref-branch/distinct/DistinctTest.plan",
    "D32": "cases/D32/plan.json",
}


def _check_golden(name: str, actual: str) -> None:
    assert_golden(GOLDEN / name, actual)


@pytest.mark.parametrize("case_id", sorted(DUMPED))
def test_dumped_plan_matches_golden(conformance_dir: Path, case_id: str) -> None:
    plan = parse_plan(conformance_dir / DUMPED[case_id])
    _check_golden(f"{case_id}.dump.json", plan.to_json() + "\n")


def test_rejected_plans_render_the_golden_messages(conformance_dir: Path) -> None:
    rendered = []
    for case_id, relative in sorted(REJECTED.items()):
        with pytest.raises(PlanError) as raised:
            parse_plan(conformance_dir / relative, source_name=relative)
        rendered.append(f"## {case_id}\n{raised.value}\n")
    _check_golden("rejected.txt", "\n".join(rendered))
