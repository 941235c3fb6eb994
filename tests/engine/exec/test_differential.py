"""Differential testing: random small plans over random nested data must give the same records on
the local executor (the reference) and on Spark.

Plans are chains of operators drawn from templates that are valid for the generated records
(``{g, x, s, a: [..], m: {k, t}}``), optionally joined with or unioned to a second constant. Each
chain ends in a queue store; the records are compared in order with the corpus's comparison rules.
Failing examples found are kept below as explicit regression cases.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from conformance_compare import records_match
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from engine import run_plan

# ---------------------------------------------------------------------------------- data

_INT = st.one_of(st.none(), st.integers(-3, 3))
_RECORD = st.fixed_dictionaries(
    {
        "g": st.one_of(st.none(), st.integers(0, 2)),
        "x": _INT,
        "s": st.sampled_from(["p", "q", "r"]),
        "a": st.one_of(st.none(), st.lists(st.integers(0, 9), max_size=3)),
        "m": st.fixed_dictionaries({"k": _INT, "t": st.booleans()}),
    }
)
# The first record holds a non-empty array, so `a` is typed (arrays of only nulls and empties are
# a list<null>: see test_flatten_of_untyped_arrays).
_TYPED_FIRST = _RECORD.filter(lambda r: bool(r["a"]))
RECORDS = st.tuples(_TYPED_FIRST, st.lists(_RECORD, max_size=6)).map(lambda t: [t[0], *t[1]])
DIMENSION = st.lists(
    st.fixed_dictionaries({"k": st.integers(0, 2), "name": st.sampled_from(["u", "v"])}),
    min_size=1,
    max_size=4,
)

# ----------------------------------------------------------------------------- operators

_ORDER_KEY = st.sampled_from(["x", "g", "s", "m.k"])
_DIRECTION = st.sampled_from(["asc", "desc"])
_NULLS = st.sampled_from(["first", "last"])


@st.composite
def _order(draw: Any) -> dict[str, Any]:
    keys = draw(st.lists(_ORDER_KEY, min_size=1, max_size=2, unique=True))
    op: dict[str, Any] = {
        "op": "order",
        "orderings": [
            {"order": draw(_DIRECTION), "expr": key, "nullCollation": draw(_NULLS)} for key in keys
        ],
    }
    if draw(st.booleans()):
        op["within"] = "g"
    return op


@st.composite
def _limit(draw: Any) -> dict[str, Any]:
    first = draw(st.integers(0, 3))
    last = draw(st.one_of(st.none(), st.integers(0, 6)))
    return {"op": "limit", "first": first, **({"last": last} if last is not None else {})}


@st.composite
def _windowframe(draw: Any) -> dict[str, Any]:
    start = draw(st.one_of(st.none(), st.integers(-2, 0)))
    end = (
        draw(st.integers(0, 2)) if start is None else draw(st.one_of(st.none(), st.integers(0, 2)))
    )
    op: dict[str, Any] = {"op": "windowframe"}
    if start is not None:
        op["start"] = start
    if end is not None:
        op["end"] = end
    if draw(st.booleans()):
        op["within"] = "g"
    return op


# DECIMAL aggregates: sum widens the precision, avg adds 4 digits of scale.
_DEC = [
    "sum(cast(x as DECIMAL(6, 2)))",
    "avg(cast(x as DECIMAL(4, 1)))",
    "max(cast(x as DECIMAL(3, 1)))",
]


@st.composite
def _collapse(draw: Any) -> dict[str, Any]:
    op: dict[str, Any] = {
        "op": "collapsingaggregate",
        "carryovers": ["g"],
        "aggregations": [
            {"ref": "n", "expr": draw(st.sampled_from(["count(1)", "count(x)"]))},
            {"ref": "total", "expr": draw(st.sampled_from(["sum(x)", "max(x)", "min(s)", *_DEC]))},
        ],
    }
    within = draw(st.sampled_from([None, "g", "seg"]))  # "seg": a segment's groups, if any
    if within is not None:
        op["within"] = within
    if draw(st.booleans()):
        op["target"] = "m.t"
    return op


@st.composite
def _running(draw: Any) -> dict[str, Any]:
    expr = draw(
        st.sampled_from(
            [
                "sum(x)",
                "count(x)",
                "row_number()",
                "max(x)",
                "min(s)",
                "sum(cast(x as DECIMAL(6, 2)))",
                "avg(cast(x as DECIMAL(4, 1)))",
            ]
        )
    )
    op: dict[str, Any] = {"op": "runningaggregate", "aggregations": [{"ref": "r", "expr": expr}]}
    if draw(st.booleans()):
        op["within"] = "g"
    return op


SINGLE_INPUT = st.one_of(
    st.sampled_from(
        [
            {"op": "filter", "expr": "x > 0"},
            {"op": "filter", "expr": "g == 1 || isnull(x)"},
            {"op": "transform", "transforms": [{"ref": "y", "expr": "x * 2"}]},
            {
                "op": "transform",
                "transforms": [
                    {
                        "ref": "y",
                        "expr": "cast(x as DECIMAL(5, 2)) * cast('1.25' as DECIMAL(3, 2)) + g",
                    },
                    {
                        "ref": "q",
                        "expr": "cast(x as DECIMAL(4, 1)) / 3 - cast('0.5' as DECIMAL(2, 1))",
                    },
                ],
            },
            {"op": "filter", "expr": "cast(x as DECIMAL(4, 1)) / 3 > cast('0.5' as DECIMAL(2, 1))"},
            {"op": "transform", "transforms": [{"ref": "m.z", "expr": "g + 1"}]},
            {
                "op": "project",
                "projections": [
                    {"ref": "output.g", "expr": "g"},
                    {"ref": "output.v.x", "expr": "x"},
                ],
            },
            {"op": "segment", "ref": "seg", "exprs": ["g"]},
            {"op": "segment", "ref": "seg", "exprs": ["s", "m.t"]},
            {"op": "segment", "ref": "seg", "exprs": []},
            {"op": "flatten", "ref": "e", "expr": "a", "drop": False},
            {"op": "flatten", "ref": "e", "expr": "a", "drop": True},
            {"op": "flatten", "ref": "e", "expr": "m", "drop": False},
        ]
    ),
    _order(),
    _limit(),
    _windowframe(),
    _collapse(),
    _running(),
)

COMBINE = st.sampled_from(
    [
        None,
        {"op": "union", "distinct": False},
        {"op": "union", "distinct": True},
        {
            "op": "join",
            "type": "inner",
            "conditions": [{"relationship": "==", "left": "g", "right": "d.k"}],
        },
        {
            "op": "join",
            "type": "left",
            "conditions": [{"relationship": "==", "left": "g", "right": "d.k"}],
        },
        {
            "op": "join",
            "type": "outer",
            "conditions": [{"relationship": "==", "left": "g", "right": "d.k"}],
        },
    ]
)


def build_plan(
    records: list[dict[str, Any]],
    chain: list[dict[str, Any]],
    combine: dict[str, Any] | None,
    dimension: list[dict[str, Any]],
) -> dict[str, Any]:
    """A plan: constant -> chain -> [union with the constant | join with the dimension] -> store."""
    query: list[dict[str, Any]] = [{"@id": 1, "op": "constant", "content": records}]
    last = 1
    for i, op in enumerate(chain, start=2):
        query.append({"@id": i, "input": last, **op})
        last = i
    if combine is not None:
        if combine["op"] == "union":
            query.append(
                {"@id": 100, "op": "union", "distinct": combine["distinct"], "inputs": [last, 1]}
            )
        else:
            content = [{"d": row} for row in dimension]
            query.append({"@id": 99, "op": "constant", "content": content})
            query.append({"@id": 100, "left": last, "right": 99, **combine})
        last = 100
    query.append(
        {"@id": 200, "op": "store", "input": last, "storageengine": "q", "target": {"number": 0}}
    )
    return {
        "head": {"type": "APACHE_DRILL_LOGICAL", "version": 1},
        "storage": {"q": {"type": "queue"}},
        "query": query,
    }


def assert_same_records(plan: dict[str, Any], spark: Any) -> None:
    local = run_plan(plan, executor="local").records()
    on_spark = run_plan(plan, executor="spark", spark=spark).records()
    assert records_match(on_spark, local, ordered=True), (
        f"plan {plan['query']}\n  local: {local}\n  spark: {on_spark}"
    )


# -------------------------------------------------------------------------------- tests

_REGRESSION_RECORDS = [
    {"g": 1, "x": 2, "s": "p", "a": [1, 2], "m": {"k": 1, "t": True}},
    {"g": None, "x": None, "s": "q", "a": [], "m": {"k": None, "t": False}},
    {"g": 1, "x": -1, "s": "r", "a": None, "m": {"k": 0, "t": True}},
]


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
    # Every example is a Spark run; shrinking would take minutes. Failures are kept as examples.
    phases=[Phase.explicit, Phase.generate],
)
@given(
    records=RECORDS,
    chain=st.lists(SINGLE_INPUT, min_size=1, max_size=3),
    combine=COMBINE,
    dimension=DIMENSION,
)
@example(
    records=_REGRESSION_RECORDS,
    chain=[{"op": "segment", "ref": "seg", "exprs": ["g"]}, {"op": "limit", "first": 1}],
    combine={"op": "union", "distinct": True},
    dimension=[{"k": 1, "name": "u"}],
)
@example(
    records=[{"g": None, "x": None, "s": "p", "a": None, "m": {"k": None, "t": False}}],
    chain=[{"op": "windowframe", "end": 0}],
    combine={"op": "union", "distinct": False},
    dimension=[{"k": 0, "name": "u"}],
)
@example(  # a running decimal average over nulls only: NULL / 0 is NULL, not an error
    records=[{"g": None, "x": None, "s": "p", "a": [0], "m": {"k": None, "t": False}}],
    chain=[
        {
            "op": "runningaggregate",
            "aggregations": [{"ref": "r", "expr": "avg(cast(x as DECIMAL(4, 1)))"}],
        }
    ],
    combine=None,
    dimension=[{"k": 0, "name": "u"}],
)
@example(  # an aggregate's columns left to a join: `__drill_seq` on both sides of it
    records=[{"a": [5, 1, 8], "s": "p", "m": {"t": True, "k": 2}, "g": 2, "x": None}],
    chain=[
        {"op": "runningaggregate", "aggregations": [{"ref": "r", "expr": "min(s)"}]},
        {"op": "limit", "first": 0, "last": 0},
        {
            "op": "collapsingaggregate",
            "carryovers": ["g"],
            "aggregations": [
                {"ref": "n", "expr": "count(1)"},
                {"ref": "total", "expr": "min(s)"},
            ],
            "within": "g",
            "target": "m.t",
        },
    ],
    combine={
        "op": "join",
        "type": "inner",
        "conditions": [{"relationship": "==", "left": "g", "right": "d.k"}],
    },
    dimension=[{"name": "u", "k": 1}, {"name": "v", "k": 1}, {"name": "v", "k": 0}],
)
def test_local_and_spark_agree(
    spark: Any,
    records: list[dict[str, Any]],
    chain: list[dict[str, Any]],
    combine: dict[str, Any] | None,
    dimension: list[dict[str, Any]],
) -> None:
    assert_same_records(build_plan(records, chain, combine, dimension), spark)


def test_a_null_decimal_divided_by_zero_is_null_on_both_executors(spark: Any) -> None:
    records = [{"x": None, "z": 0}, {"x": 3, "z": 1}]
    chain = [
        {"op": "transform", "transforms": [{"ref": "q", "expr": "cast(x as DECIMAL(4, 1)) / z"}]}
    ]
    plan = build_plan(records, chain, None, [])
    assert [r["q"] for r in run_plan(plan, executor="local").records()] == [
        None,
        Decimal("3.000000"),
    ]
    assert_same_records(plan, spark)


@pytest.mark.parametrize(
    "chain",
    [
        [{"op": "windowframe", "start": -1, "end": 1, "within": "g"}],
        [
            {
                "op": "collapsingaggregate",
                "within": "g",
                "target": "m.t",
                "carryovers": ["g"],
                "aggregations": [{"ref": "n", "expr": "count(1)"}, {"ref": "t", "expr": "sum(x)"}],
            }
        ],
        [
            {
                "op": "runningaggregate",
                "within": "g",
                "aggregations": [
                    {"ref": "r", "expr": "sum(x)"},
                    {"ref": "q", "expr": "r + count(x)"},
                ],
            }
        ],
        [
            {"op": "segment", "ref": "seg", "exprs": []},
            {
                "op": "collapsingaggregate",
                "within": "seg",
                "carryovers": [],
                "aggregations": [{"ref": "n", "expr": "count(x)"}],
            },
        ],
        [
            {"op": "segment", "ref": "seg", "exprs": ["g"]},
            {
                "op": "collapsingaggregate",
                "within": "seg",
                "carryovers": ["g", "seg"],
                "aggregations": [{"ref": "n", "expr": "count(1)"}],
            },
        ],
        [
            {"op": "order", "orderings": [{"order": "desc", "expr": "x", "nullCollation": "last"}]},
            {"op": "limit", "first": 1, "last": 3},
        ],
    ],
    ids=[
        "windowframe",
        "collapse-target",
        "running-chained",
        "segment-all-collapsed",
        "segment-number-carried",
        "top-n",
    ],
)
def test_regressions(spark: Any, chain: list[dict[str, Any]]) -> None:
    assert_same_records(build_plan(_REGRESSION_RECORDS, chain, None, []), spark)


def test_flatten_of_untyped_arrays(spark: Any) -> None:
    records = [{"g": 0, "a": None}, {"g": 0, "a": []}, {"g": 1, "a": None}]
    chain = [{"op": "flatten", "ref": "e", "expr": "a", "drop": True}]
    assert_same_records(build_plan(records, chain, None, []), spark)


def test_temporal_casts_to_integers(spark: Any) -> None:
    # a date counts days since 1970-01-01, a timestamp microseconds, on both executors
    records = [{"d": "1970-01-03", "t": "1970-01-01 00:00:01"}, {"d": "2024-02-29", "t": None}]
    chain = [
        {
            "op": "project",
            "projections": [
                {"ref": "output.days", "expr": "cast(cast(d as DATE) as BIGINT)"},
                {"ref": "output.days4", "expr": "cast(cast(d as DATE) as INT)"},
                {"ref": "output.micros", "expr": "cast(cast(t as TIMESTAMP) as BIGINT)"},
            ],
        }
    ]
    plan = build_plan(records, chain, None, [])
    assert run_plan(plan, executor="local").records() == [
        {"days": 2, "days4": 2, "micros": 1_000_000},
        {"days": 19782, "days4": 19782, "micros": None},
    ]
    assert_same_records(plan, spark)


def test_union_columns_flatten_and_compare_alike(spark: Any) -> None:
    records = [
        {"id": 1, "tags": ["x", "y"]},
        {"id": 2, "tags": "solo"},
        {"id": 3, "tags": [{"t": "p"}, {"t": "q"}]},
        {"id": 4, "tags": None},
        {"id": 5, "tags": []},
    ]
    flatten = [{"op": "flatten", "ref": "tag", "expr": "tags", "drop": True}]
    plan = build_plan(records, flatten, None, [])
    assert [r.get("tag") for r in run_plan(plan, executor="local").records()] == [
        "x",
        "y",
        "solo",
        {"t": "p"},
        {"t": "q"},
        None,
    ]
    assert_same_records(plan, spark)
    assert_same_records(
        build_plan(records, [{"op": "filter", "expr": 'tags == "solo"'}], None, []), spark
    )
    by_text = [{"op": "order", "orderings": [{"expr": "cast(tags as VARCHAR)"}]}]
    assert_same_records(build_plan(records, by_text, None, []), spark)


@pytest.mark.parametrize("target", [None, "parquet", "json"], ids=["queue", "parquet", "json"])
def test_a_member_whose_type_changes_between_files_is_stored_alike(
    spark: Any, tmp_path: Any, target: str | None
) -> None:
    """The local scan sends a later file's batch with the member as a UNION (it met a number,
    then a string): the store takes the earlier batch as a UNION too, as Spark reads them."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"r": {"v": 1, "w": [1]}}\n{"r": {"v": 2, "w": []}}\n')
    (tmp_path / "in" / "b.json").write_text('{"r": {"v": "one", "w": ["x"]}}\n')
    storage = {"fs": {"type": "fs", "root": str(tmp_path)}, "q": {"type": "queue"}}
    results = {}
    for executor in ("local", "spark"):
        store = (
            {"storageengine": "q", "target": {}}
            if target is None
            else {"storageengine": "fs", "target": {"path": f"out-{executor}", "format": target}}
        )
        plan = {
            "storage": storage,
            "query": [
                {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e",
                 "selection": {"path": "in", "format": "json"}},
                {"@id": 2, "op": "store", "input": 1, **store},
            ],
        }  # fmt: skip
        result = run_plan(
            plan, executor=executor, **({"spark": spark} if executor == "spark" else {})
        )
        if target is None:
            results[executor] = result.records()
        else:
            back = {**plan["query"][0], "selection": {"path": f"out-{executor}", "format": target}}
            queue = {"@id": 2, "op": "store", "input": 1, "storageengine": "q", "target": {}}
            read = {**plan, "query": [back, queue]}
            results[executor] = run_plan(read, executor="local").records()
    expected = [
        {"e": {"r": {"v": 1, "w": [1]}}},
        {"e": {"r": {"v": 2, "w": []}}},
        {"e": {"r": {"v": "one", "w": ["x"]}}},
    ]
    assert sorted(results["local"], key=str) == sorted(results["spark"], key=str)
    if target is None:
        assert results["local"] == expected


@pytest.mark.parametrize("writer", ["local", "spark"])
def test_a_parquet_store_with_union_members_reads_back_alike(
    spark: Any, tmp_path: Any, writer: str
) -> None:
    """Both executors store a UNION in parquet as JSON text, marked ``drill.union`` (in the
    Arrow schema pyarrow writes, in the schema Spark writes): both read such files back as the
    values, whichever wrote them (Spark's own reader would read a plain string there, so the
    Spark executor reads them with the Drill reader)."""
    lines = ['{"r": {"v": 1, "w": [1]}}', '{"r": {"v": "one", "w": ["x"]}}', '{"r": null}']
    (tmp_path / "in.json").write_text("\n".join(lines) + "\n")
    storage = {"fs": {"type": "fs", "root": str(tmp_path)}, "q": {"type": "queue"}}

    def plan(path: str, fmt: str, store: dict[str, Any]) -> dict[str, Any]:
        scan = {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e",
                "selection": {"path": path, "format": fmt}}  # fmt: skip
        return {"storage": storage, "query": [scan, {"@id": 2, "op": "store", "input": 1, **store}]}

    written = {"storageengine": "fs", "target": {"path": "out", "format": "parquet"}}
    on = {"spark": spark} if writer == "spark" else {}
    run_plan(plan("in.json", "json", written), executor=writer, **on)
    read = plan("out", "parquet", {"storageengine": "q", "target": {}})
    expected = [
        {"e": {"e": {"r": {"v": 1, "w": [1]}}}},
        {"e": {"e": {"r": {"v": "one", "w": ["x"]}}}},
        {"e": {"e": {"r": None}}},
    ]
    assert run_plan(read, executor="local").records() == expected
    assert run_plan(read, executor="spark", spark=spark).records() == expected


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_a_partitioned_store_reads_back_alike_on_both_executors(
    spark: Any, tmp_path: Any, fmt: str
) -> None:
    records = [
        {"day": "2024-01-01", "v": 1},
        {"day": "2024-01-02", "v": 2},
        {"day": "2024-01-01", "v": 3},
        {"day": None, "v": 4},
    ]
    storage = {"fs": {"type": "fs", "root": str(tmp_path)}, "q": {"type": "queue"}}
    write = {
        "storage": storage,
        "query": [
            {"@id": 1, "op": "constant", "content": records},
            {
                "@id": 2,
                "op": "store",
                "input": 1,
                "storageengine": "fs",
                "target": {"path": "/events", "partitionBy": ["day"], "format": fmt},
            },
        ],
    }
    run_plan(write, executor="spark", spark=spark)
    read = {
        "storage": storage,
        "query": [
            {
                "@id": 1,
                "op": "scan",
                "storageengine": "fs",
                "ref": "e",
                "selection": {"path": "/events"},
            },
            {"@id": 2, "op": "order", "input": 1, "orderings": [{"expr": "e.v"}]},
            {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {}},
        ],
    }
    local = run_plan(read, executor="local").records()
    assert local == [
        {"e": {"v": 1, "day": "2024-01-01"}},
        {"e": {"v": 2, "day": "2024-01-02"}},
        {"e": {"v": 3, "day": "2024-01-01"}},
        {"e": {"v": 4, "day": None}},
    ]
    assert run_plan(read, executor="spark", spark=spark).records() == local


NAMES = st.text(
    alphabet=st.sampled_from(["a", "b", "x", "`", ".", '"', "'", " ", "é", "名", "-", "$"]),
    min_size=1,
    max_size=6,
).filter(lambda n: not n.startswith("_") and n.strip() == n)


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
    phases=[Phase.explicit, Phase.generate],
)
@given(names=st.lists(NAMES, min_size=1, max_size=4, unique=True))
@example(names=["a`b", "x`.`y", "x.y", "x"])
def test_column_names_round_trip_through_both_executors(spark: Any, names: list[str]) -> None:
    """Names with backquotes, dots, quotes, spaces and unicode are names, not paths, on Spark
    too: the first holds a UNION (an int, then a string); a distinct union (of plain values:
    Spark cannot group a VARIANT) compares records by every column."""
    records = [
        {name: (i if j else [i, "s"][i % 2]) for j, name in enumerate(names)} for i in range(3)
    ]
    plan = build_plan(records, [{"op": "limit", "first": 0, "last": 3}], None, [])
    assert_same_records(plan, spark)
    local = run_plan(plan, executor="local").records()
    assert [sorted(r) for r in local] == [sorted(names)] * 3
    plain = [{name: i for name in names} for i in range(3)]
    distinct = build_plan(plain, [{"op": "limit", "first": 0, "last": 3}], UNION_DISTINCT, [])
    assert_same_records(distinct, spark)


UNION_DISTINCT = {"op": "union", "distinct": True}
