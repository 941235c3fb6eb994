"""Appendix A's nested filter through a UNION, local executor against Spark.

A field whose kind changes between records (a map, an array of maps, an array of arrays, a scalar)
is a UNION: a ``drill.union`` column locally, a VARIANT on Spark. Random records of such shapes,
filtered by conditions that cross its arrays, must give the same pruned records on both executors;
the seed's own examples give the seed's result.
"""

from __future__ import annotations

from typing import Any

import pytest
from conformance_compare import records_match
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from engine import run_plan
from engine.errors import DrillError

_SCALAR = st.one_of(st.none(), st.integers(0, 6), st.sampled_from(["s", "t"]))
_X = st.one_of(_SCALAR, st.lists(_SCALAR, max_size=3))
_MAP = st.fixed_dictionaries({"x": _X}, optional={"b": st.integers(0, 3), "z": st.just({"x": 5})})
_ARRAY = st.lists(st.one_of(_MAP, _SCALAR), max_size=3)
# Arrays of arrays hold maps with a scalar `x`: the Spark executor walks at most two nested arrays
# (MAX_VARIANT_ARRAYS) and refuses deeper data, naming the limit.
_FLAT_MAP = st.fixed_dictionaries({"x": _SCALAR}, optional={"b": st.integers(0, 3)})
_ARRAYS = st.lists(st.lists(_FLAT_MAP, max_size=2), max_size=2)
_VALUE = st.one_of(_MAP, _ARRAY, _ARRAYS, _SCALAR)
# The first two records give `a` a map and an array, so it is a UNION whatever else is drawn.
_RECORDS = st.lists(
    st.fixed_dictionaries({"a": _VALUE, "c": st.integers(0, 9)}), min_size=1, max_size=5
).map(lambda rest: [{"a": {"x": 4}, "c": 0}, {"a": [{"x": 1}], "c": 1}, *rest])
_CONDITIONS = st.sampled_from(
    ["a.x > 3", "a > 3", "a.x > 3 && c < 5", "a.x > 3 || c == 7", "a[0].x > 3", "a.x == 's'"]
)


def _plan(records: list[dict[str, Any]], condition: str) -> dict[str, Any]:
    return {
        "head": {"type": "APACHE_DRILL_LOGICAL", "version": 1},
        "storage": {"queue": {"type": "queue"}},
        "query": [
            {"@id": 1, "op": "constant", "content": records},
            {"@id": 2, "op": "filter", "input": 1, "expr": condition},
            {
                "@id": 3,
                "op": "store",
                "input": 2,
                "storageengine": "queue",
                "target": {"number": 0},
            },
        ],
    }


def _both(plan: dict[str, Any], spark: Any) -> list[dict[str, Any]]:
    local = run_plan(plan, executor="local").records()
    on_spark = run_plan(plan, executor="spark", spark=spark).records()
    assert records_match(on_spark, local, ordered=True), (
        f"{plan['query'][1]['expr']} over {plan['query'][0]['content']}\n"
        f"  local: {local}\n  spark: {on_spark}"
    )
    return local


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
    phases=[Phase.explicit, Phase.generate],  # every example is a Spark run: no shrinking
)
@given(records=_RECORDS, condition=_CONDITIONS)
def test_union_shapes_filter_alike(
    spark: Any, records: list[dict[str, Any]], condition: str
) -> None:
    _both(_plan(records, condition), spark)


def test_the_seeds_examples_on_both_executors(spark: Any) -> None:
    seed = [
        {"a": {"b": 1, "x": 5}, "c": 1},
        {"a": [{"b": 1}, {"z": {"x": 4}}, {"q": 3, "x": 5}], "c": 2},
        {"a": {"b": 2, "x": [1, 2, 3, 4, 5]}, "c": 3},
        {"a": {"b": 3, "x": [1, 2]}, "c": 4},
    ]
    expected = [
        {"a": {"b": 1, "x": 5}, "c": 1},
        {"a": [{"q": 3, "x": 5}], "c": 2},
        {"a": {"b": 2, "x": [4, 5]}, "c": 3},
    ]
    assert records_match(_both(_plan(seed, "a.x > 3"), spark), expected, ordered=True)
    # Arrays of arrays inside a UNION keep their nesting; an inner array left empty goes.
    nested = [{"a": [[{"x": 1}, {"x": 4}], [{"x": 5}], [{"x": 0}]]}, {"a": {"x": 2}}]
    assert _both(_plan(nested, "a.x > 3"), spark) == [{"a": [[{"x": 4}], [{"x": 5}]]}]


def test_deeper_arrays_than_spark_walks_are_refused_naming_the_limit(spark: Any) -> None:
    records = [{"a": {"x": 4}, "c": 0}, {"a": [[{"x": [1, "s"]}]], "c": 1}]
    plan = _plan(records, "a.x == 's'")
    assert run_plan(plan, executor="local").records() == [{"a": [[{"x": ["s"]}]], "c": 1}]
    with pytest.raises(DrillError, match=r"nested more than 2 deep in a UNION value"):
        run_plan(plan, executor="spark", spark=spark)
