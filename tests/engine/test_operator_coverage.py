"""Every logical operator is implemented everywhere it must be: a new operator that misses one of
its places fails here, naming the place (see the checklist in ``engine/README.md``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.exec.local.registry import local_operators
from engine.exec.spark.compiler import SparkCompiler
from engine.lineage import column_lineage
from engine.plan import parse_plan
from engine.plan.operators import OPERATORS
from engine.plan.traits import described_operators
from engine.planner.physical import to_physical

REPO = Path(__file__).resolve().parents[2]
CORPUS_PLANS = (REPO / ".." / "shared" / "conformance" / "plans").resolve()
OPS = sorted(OPERATORS)


def _plans_using_every_operator() -> dict[str, Path]:
    """One plan file per operator, from the examples and the conformance corpus."""
    found: dict[str, Path] = {}
    for path in [
        *sorted((REPO / "examples" / "plans").glob("*.json")),
        *sorted(CORPUS_PLANS.glob("*.json")),
    ]:
        try:
            plan = parse_plan(path)
        except Exception:  # the corpus's deliberately broken plans
            continue
        for op in plan.query:
            found.setdefault(op.op, path)
    return found


def test_every_operator_has_a_local_operator() -> None:
    assert [op for op in OPS if op not in local_operators()] == []


def test_every_operator_has_a_row_of_traits() -> None:
    """What it preserves of its input (engine/plan/traits.py), read by every analysis."""
    assert sorted(described_operators()) == OPS


def test_every_operator_has_a_spark_visitor() -> None:
    assert [op for op in OPS if not callable(getattr(SparkCompiler, f"visit_{op}", None))] == []


@pytest.mark.parametrize("op", OPS)
def test_every_operator_has_a_physical_mapping_and_column_lineage(op: str) -> None:
    plans = _plans_using_every_operator()
    assert op in plans, f"no example or corpus plan uses {op!r}: add one to examples/plans"
    plan = parse_plan(plans[op])
    assert to_physical(plan).fragments  # the physical planner raises for an operator it lacks
    column_lineage(plan)  # as does column lineage
