"""A ``collapsingaggregate`` read by one operator leaves its records' select to it (so does a
join of sides with no field in common), a ``runningaggregate`` over a spread its rebuild
(:class:`~engine.exec.spark.paths.PendingColumns`): a project or a transform selects its own
columns through them; a filter keeps the rows of their base that hold and passes them on, so
does an order its store sorts, and an order run as the top-N of a limit a store's project reads
(and that limit); any other reader makes the select first. One DataFrame step (one analysis on
the driver) less, or none more, and the records stay the local executor's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from py4j_calls import warm_run
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.exec.spark.executor import SparkPlanRun
from engine.exec.spark.paths import Typed, build_columns, pending_columns
from engine.explain import spark_explain
from engine.plan import parse_plan
from engine.run import build_engines, run_plan

RECORDS = [
    {"r": {"k": "a", "v": 1}, "m": {"x": 10, "tags": [1, 2]}},
    {"r": {"k": "b", "v": 2}, "m": {"x": 20, "tags": []}},
    {"r": {"k": "a", "v": 3}, "m": None},
    {"r": {"k": "c", "v": None}, "m": {"x": 20, "tags": [3]}},
    {"r": {"k": "b", "v": 5}, "m": {"x": 40, "tags": [0, 5]}},
    {"r": {"k": "d", "v": 6}, "m": {"x": 40, "tags": None}},
]

AGGREGATE = [
    {"@id": 2, "op": "segment", "input": 1, "ref": "g", "exprs": ["r.k"]},
    {
        "@id": 3,
        "op": "collapsingaggregate",
        "input": 2,
        "within": "g",
        "carryovers": ["r.k", "m"],
        "aggregations": [
            {"ref": "total", "expr": "sum(r.v)"},
            {"ref": "n", "expr": "count(1)"},
            {"ref": "s.top", "expr": "max(r.v)"},
        ],
    },
]

PROJECT = {
    "op": "project",
    "projections": [
        {"ref": "output.key", "expr": "r.k"},
        {"ref": "output.twice", "expr": "total * 2"},
        {"ref": "output.x", "expr": "m.x"},
        {"ref": "output.top", "expr": "s.top"},
    ],
}
TRANSFORM = {
    "op": "transform",
    "transforms": [{"ref": "s.mean", "expr": "total / n"}, {"ref": "m.y", "expr": "s.mean + 1"}],
}
FILTER = {"op": "filter", "expr": "n > 1"}
FILTER_TAGS = {"op": "filter", "expr": "m.tags > 1"}  # Appendix A: prunes the arrays
ORDER_BY_KEY = {"op": "order", "orderings": [{"order": "desc", "expr": "r.k"}]}
ORDER_BY_X = {"op": "order", "orderings": [{"order": "asc", "expr": "m.x"}]}  # ties
TOP_3 = {"op": "limit", "first": 0, "last": 3}
ORDER_BY_COUNT = {"op": "order", "orderings": [{"order": "asc", "expr": "n"}]}
COPIES = {
    "op": "project",
    "projections": [
        {"ref": "output.k", "expr": "r.k"},
        {"ref": "output.x", "expr": "m.x"},
        {"ref": "output.n", "expr": "n"},
    ],
}


def plan_of(*readers: dict[str, Any]) -> Any:
    """The constant records, grouped by ``k`` and aggregated, then ``readers`` in a chain, then a
    queue store."""
    query: list[dict[str, Any]] = [{"@id": 1, "op": "constant", "content": RECORDS}, *AGGREGATE]
    for reader in readers:
        query.append({"@id": len(query) + 1, "input": len(query), **reader})
    query.append(
        {
            "@id": len(query) + 1,
            "op": "store",
            "input": len(query),
            "storageengine": "q",
            "target": {},
        }
    )
    return parse_plan({"storage": {"q": {"type": "queue"}}, "query": query})


def frames_and_records(plan: Any, spark: Any, *, pending: bool) -> tuple[int, list[Any]]:
    """The DataFrames a warm run builds and the records it stores; ``pending=False`` makes
    every operator select its own records (what the compiler did before)."""
    frames, result = warm_run(plan, spark, emptied=None if pending else "one_reader")
    return frames, result.records()


@pytest.mark.parametrize(
    ("readers", "saved"),
    [
        ([PROJECT], 1),
        ([TRANSFORM], 1),
        ([ORDER_BY_KEY, COPIES], 1),  # the store sorts by the project's copy of `r.k`
        ([ORDER_BY_X, COPIES], 1),  # ... then by the aggregate's sequence (`m.x` ties)
        ([ORDER_BY_COUNT, COPIES], 1),  # the order builds its sequence over them, one select
        ([FILTER], 0),  # the filter passes them on, the store makes the select
        ([FILTER, PROJECT], 1),  # ... a project reads through them
        ([FILTER_TAGS, PROJECT], 0),  # a filter pruning arrays makes the select first
        ([], 0),  # the store makes the select
        ([TRANSFORM, PROJECT], 1),
        ([ORDER_BY_KEY, TOP_3, COPIES], 1),  # the top-N sorts the aggregate's rows
        ([ORDER_BY_X, TOP_3, COPIES], 1),  # ... by the aggregate's sequence too (`m.x` ties)
        ([ORDER_BY_X, TOP_3, FILTER], 0),  # the top-N is numbered again: the order selects
    ],
    ids=[
        "project",
        "transform",
        "store-sorted-order",
        "store-sorted-order-ties",
        "order",
        "filter",
        "filter-then-project",
        "filter-in-arrays",
        "store",
        "transform-then-project",
        "top-n",
        "top-n-ties",
        "top-n-numbered",
    ],
)
def test_the_aggregates_select_is_its_readers(
    readers: list[dict[str, Any]], saved: int, spark: Any
) -> None:
    plan = plan_of(*readers)
    local = run_plan(plan, executor="local").records()
    frames, records = frames_and_records(plan, spark, pending=True)
    before, before_records = frames_and_records(plan, spark, pending=False)
    assert records == local == before_records
    assert frames == before - saved


def test_a_running_aggregates_rebuilt_records_are_its_readers_select(
    spark: Any, tmp_path: Path
) -> None:
    """A running aggregate over records its windows take apart (:mod:`~engine.exec.spark.spread`)
    leaves their rebuild to its one reader, here the project a store reads."""
    events = [{"user": u, "ts": t, "v": v} for u, t, v in [("a", 3, 1), ("b", 1, 2), ("a", 1, 4)]]
    (tmp_path / "events.json").write_text("".join(json.dumps(e) + "\n" for e in events))
    query = [
        {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e",
         "selection": {"path": "events.json"}},
        {"@id": 2, "op": "order", "input": 1, "orderings": [
            {"order": "asc", "expr": "e.user"}, {"order": "asc", "expr": "e.ts"}]},
        {"@id": 3, "op": "segment", "input": 2, "ref": "g", "exprs": ["e.user"]},
        {"@id": 4, "op": "runningaggregate", "input": 3, "within": "g",
         "aggregations": [{"ref": "so_far", "expr": "sum(e.v)"}]},
        {"@id": 5, "op": "project", "input": 4, "projections": [
            {"ref": "output.user", "expr": "e.user"}, {"ref": "output.so_far", "expr": "so_far"}]},
        {"@id": 6, "op": "store", "input": 5, "storageengine": "q", "target": {}},
    ]  # fmt: skip
    storage = {"q": {"type": "queue"}, "fs": {"type": "fs", "root": str(tmp_path)}}
    plan = parse_plan({"storage": storage, "query": query})
    frames, records = frames_and_records(plan, spark, pending=True)
    before, before_records = frames_and_records(plan, spark, pending=False)
    assert records == before_records == run_plan(plan, executor="local").records()
    assert frames == before - 1


def test_an_aggregate_two_operators_read_selects_its_records_itself(spark: Any) -> None:
    """Each reader would make the select: the aggregate makes it once."""
    query = [
        {"@id": 1, "op": "constant", "content": RECORDS},
        *AGGREGATE,
        {"@id": 4, "input": 3, **PROJECT},
        {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {}},
        {"@id": 6, "input": 3, **TRANSFORM},
        {"@id": 7, "op": "store", "input": 6, "storageengine": "q", "target": {}},
    ]
    plan = parse_plan({"storage": {"q": {"type": "queue"}}, "query": query})
    run = SparkPlanRun(
        plan, spark, engines=build_engines(plan, base_dir=None, classpath=[]), params={}
    )
    assert not run.properties["3"].one_reader
    assert (
        run_plan(plan, executor="spark", spark=spark).records()
        == run_plan(plan, executor="local").records()
    )


def test_explain_shows_the_select_a_store_makes(spark: Any) -> None:
    """``explain --spark`` shows a store's input as the store writes it: the aggregate's records
    selected (the store makes that select when it runs)."""
    (text,) = spark_explain(plan_of(), spark).values()
    assert "total" in text and "__drill_agg" in text
    assert text.index("total") < text.index("Aggregate")


def test_pending_columns_read_what_the_select_gives(spark: Any) -> None:
    """Reading a path through pending columns gives what reading it from their select gives;
    ``over`` moves them to a DataFrame of the same columns, ``without`` leaves some out."""
    df = spark.createDataFrame([(1, "a"), (2, None)], "n long, s string")
    long, text = T.LongType(), T.StringType()
    columns = [
        (("r", "n"), Typed(F.col("n"), long)),
        (("r", "s"), Typed(F.col("s"), text)),
        (("t",), Typed(F.col("n") * 10, long)),
    ]
    pending = pending_columns(df, columns)
    built = build_columns(df, columns)
    assert pending.schema == built.schema
    reads = [("r", "n"), ("r", "s"), ("t",), ("r", "missing"), ("nope",)]
    through = df.select(  # the pending columns are Columns over their base
        *[pending.read(path).column.alias(f"c{i}") for i, path in enumerate(reads)]
    )
    direct = built.select(
        *[F.col(".".join(path)).alias(f"c{i}") for i, path in enumerate(reads[:3])]
    )
    assert [tuple(r)[:3] for r in through.collect()] == [tuple(r) for r in direct.collect()]
    assert [tuple(r)[3:] for r in through.collect()] == [(None, None), (None, None)]
    observed = df.where(F.col("n") > 1)
    assert pending.over(observed).select().collect() == built.where(F.col("t") > 10).collect()
    assert pending.without(["t"]).select().columns == ["r"]


def test_a_reader_compiled_again_reads_the_same_records(spark: Any) -> None:
    """The aggregate's columns stay known after its reader took them: a reader compiled again
    (a Dagster op retried in the same run) selects the same records."""
    plan = plan_of(PROJECT)
    engines = build_engines(plan, base_dir=None, classpath=[])
    run = SparkPlanRun(plan, spark, engines=engines, params={}, optimize=False)
    frames: dict[str, Any] = {}
    for op in plan.topological_order()[:-1]:  # all but the store
        frames[op.id] = run.compiler.compile(op, [frames[i] for i in op.input_ids()])
    again = run.compiler.compile(plan.operator("4"), [frames["3"]])
    assert run.properties["3"].one_reader
    assert sorted(map(str, again.collect())) == sorted(map(str, frames["4"].collect()))
    assert again.columns == frames["4"].columns == ["key", "twice", "x", "top"]


def join_plan(root: Path, *readers: dict[str, Any]) -> Any:
    """Two parquet inputs (numbered densely: their sequences pair into a long) joined (left) on
    ``a.k == b.k``, then ``readers``, then a queue store."""
    pq.write_table(pa.table({"k": ["x", "y", "z", "x"], "v": [1, 2, 3, 4]}), root / "a.parquet")
    pq.write_table(pa.table({"k": ["x", "x", "y"], "w": [10, 20, 30]}), root / "b.parquet")
    query: list[dict[str, Any]] = [
        {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "a",
         "selection": {"path": "a.parquet", "format": "parquet"}},
        {"@id": 2, "op": "scan", "storageengine": "fs", "ref": "b",
         "selection": {"path": "b.parquet", "format": "parquet"}},
        {"@id": 3, "op": "join", "left": 1, "right": 2, "type": "left",
         "conditions": [{"relationship": "==", "left": "a.k", "right": "b.k"}]},
    ]  # fmt: skip
    for reader in readers:
        query.append({"@id": len(query) + 1, "input": len(query), **reader})
    store = {"@id": len(query) + 1, "op": "store", "input": len(query), "storageengine": "q"}
    query.append({**store, "target": {}})
    storage = {"q": {"type": "queue"}, "fs": {"type": "fs", "root": str(root)}}
    return parse_plan({"storage": storage, "query": query})


JOINED = {
    "op": "project",
    "projections": [
        {"ref": "output.k", "expr": "a.k"},
        {"ref": "output.sum", "expr": "a.v + b.w"},
    ],
}


@pytest.mark.parametrize(
    ("readers", "saved"),
    [
        ([JOINED], 1),
        ([{"op": "filter", "expr": "isnull(b.w) || b.w > 10"}, JOINED], 1),
        ([], 0),  # the store makes the select
    ],
    ids=["project", "filter-then-project", "store"],
)
def test_a_joins_select_is_its_readers(
    readers: list[dict[str, Any]], saved: int, spark: Any, tmp_path: Path
) -> None:
    """A join of sides with no field in common (their sequences pairing into a long) leaves its
    records' select to its one reader the same way."""
    plan = join_plan(tmp_path, *readers)
    frames, records = frames_and_records(plan, spark, pending=True)
    before, before_records = frames_and_records(plan, spark, pending=False)
    assert records == before_records == run_plan(plan, executor="local").records()
    assert frames == before - saved
