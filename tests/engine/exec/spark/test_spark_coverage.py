"""Every scalar function of the registry has a native Spark builder or an explicit unsupported entry.

Aggregate and running functions are compiled by the aggregate operators; their own coverage test
lives with the compiler (tests/engine/exec/spark/test_compiler_coverage.py).
"""

from __future__ import annotations

from engine.exec.spark.spark_functions import (
    AGGREGATE_NAMES,
    PARTIAL,
    SPARK_FUNCTIONS,
    UNSUPPORTED,
)
from engine.expr import FUNCTIONS


def test_every_scalar_function_has_a_builder_or_a_reason() -> None:
    scalar = {name for name, spec in FUNCTIONS.items() if spec.is_scalar}
    missing = sorted(scalar - set(SPARK_FUNCTIONS) - set(UNSUPPORTED))
    assert not missing, f"scalar functions with neither a Spark builder nor a reason: {missing}"


def test_the_table_names_only_registry_functions_once() -> None:
    assert set(SPARK_FUNCTIONS) <= set(FUNCTIONS)
    assert set(UNSUPPORTED) <= set(FUNCTIONS)
    assert not set(SPARK_FUNCTIONS) & set(UNSUPPORTED)
    assert all(reason.strip() for reason in UNSUPPORTED.values())


def test_partial_forms_belong_to_translated_functions() -> None:
    assert set(PARTIAL) <= set(SPARK_FUNCTIONS)
    assert all(reason.strip() for reason in PARTIAL.values())


def test_aggregate_names_are_exactly_the_non_scalar_functions() -> None:
    non_scalar = {name for name, spec in FUNCTIONS.items() if not spec.is_scalar}
    assert non_scalar == AGGREGATE_NAMES
    assert not AGGREGATE_NAMES & set(SPARK_FUNCTIONS)
