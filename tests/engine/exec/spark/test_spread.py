"""Records and an order's sequence taken apart around windows (engine.exec.spark.spread): the
windows shuffle and sort each value once, as plain columns, and the records stay the local
executor's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F
from spark_settings import spark_setting

from engine import run_plan
from engine.exec.spark.one_task_sort import ONE_TASK_SORT_BYTES
from engine.exec.spark.spread import spread
from engine.plan import parse_plan

EVENTS = [
    {"id": 1, "user": "a", "ts": 30},
    {"id": 2, "user": "b", "ts": 10},
    {"id": 3, "user": "a", "ts": 20},
    {"id": 4, "user": "a", "ts": 20},
    {"id": 5, "user": "b", "ts": 2000},
]
# Sessionize's shape: each event with its user's previous one, carried whole, a flag per event,
# then a running sum per user, stored in the order's order.
SESSIONS = [
    {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e",
     "selection": {"path": "events.json"}},
    {"@id": 2, "op": "order", "input": 1, "orderings": [
        {"order": "asc", "expr": "e.user"}, {"order": "asc", "expr": "e.ts"}]},
    {"@id": 3, "op": "segment", "input": 2, "ref": "u", "exprs": ["e.user"]},
    {"@id": 4, "op": "windowframe", "input": 3, "within": "u", "start": -1, "end": 0,
     "ref": {"segment": "w.target", "position": "w.pos"}},
    {"@id": 5, "op": "segment", "input": 4, "ref": "pair", "exprs": ["w.target"]},
    {"@id": 6, "op": "collapsingaggregate", "input": 5, "within": "pair", "carryovers": ["e"],
     "aggregations": [{"ref": "rows", "expr": "count(1)"},
                      {"ref": "gap", "expr": "max(e.ts) - min(e.ts)"}]},
    {"@id": 7, "op": "transform", "input": 6, "transforms": [
        {"ref": "starts", "expr": "if rows == 1 || gap > 100 then 1 else 0 end"}]},
    {"@id": 8, "op": "segment", "input": 7, "ref": "run", "exprs": ["e.user"]},
    {"@id": 9, "op": "runningaggregate", "input": 8, "within": "run",
     "aggregations": [{"ref": "session", "expr": "sum(starts)"}]},
    {"@id": 10, "op": "project", "input": 9, "projections": [
        {"ref": "output.id", "expr": "e.id"}, {"ref": "output.ts", "expr": "e.ts"},
        {"ref": "output.session", "expr": "session"}]},
]  # fmt: skip


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "events.json").write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    return tmp_path


def sessions(root: Path, *changes: dict[str, Any]) -> Any:
    by_id = {op["@id"]: op for op in SESSIONS}
    by_id.update({op["@id"]: op for op in changes})
    storage = {"q": {"type": "queue"}, "fs": {"type": "fs", "root": str(root)}}
    store = {"@id": 99, "op": "store", "input": 10, "storageengine": "q", "target": {}}
    return parse_plan({"storage": storage, "query": [*by_id.values(), store]})


def agreeing(plan: Any, spark: Any) -> Any:
    """The plan's run on Spark, once its records are checked equal to the local executor's."""
    on_spark = run_plan(plan, executor="spark", spark=spark)
    assert on_spark.records() == run_plan(plan, executor="local").records()
    return on_spark


def last_physical_plan(spark: Any) -> str:
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    return executions.apply(executions.size() - 1).physicalPlanDescription()


def exchanges(physical: str) -> list[tuple[str, str]]:
    """``(columns, partitioning)`` of each exchange in a physical plan's details."""
    found = re.findall(r"\(\d+\) Exchange\s*\nInput \[\d+\]: \[(.*)\]\nArguments: (\w+)", physical)
    return [(columns, how) for columns, how in found]


def test_sessionizing_shuffles_the_members_once_and_sorts_plain_values(
    spark: Any, root: Path
) -> None:
    plan = sessions(root)
    on_spark = agreeing(plan, spark)
    assert [r["session"] for r in on_spark.records()] == [1, 1, 1, 1, 2]
    shuffles = exchanges(last_physical_plan(spark))  # the final plan's, then the initial's
    by_key = sorted({columns for columns, how in shuffles if how == "hashpartitioning"})
    # Both windows share one shuffle: the record's members read and the scan's sequence, each
    # once, as plain columns (no record, no sequence struct, no copies of the key).
    assert len(by_key) == 1, shuffles
    assert len(by_key[0].split(", ")) == 4, by_key
    assert all(name.startswith("__drill_leaf") for name in by_key[0].split(", ")), by_key
    # The record is carried whole by the aggregate and read member by member after it: no
    # shuffle carries it whole (nor does an observation keep Spark from pruning it: the
    # windowframe's rows are observed over the project's plain columns).
    assert not any(re.search(r"\be#\d", columns) for columns, _ in shuffles), shuffles


def store_sorts(physical: str) -> list[str]:
    """The keys of each store's sort in a physical plan's details: of a range-partitioning
    exchange, or of the sort after an exchange into one partition (a sort in one task)."""
    ranges = re.findall(r"Arguments: rangepartitioning\((.*), \d+\), ENSURE_REQUIREMENTS", physical)
    in_one_task = re.findall(
        r"Arguments: SinglePartition, REPARTITION_BY_NUM.*?\n\(\d+\) Sort .*?\n"
        r"Input \[\d+\]: \[.*?\]\nArguments: \[(.*?)\], false, 0",
        physical,
        flags=re.DOTALL,
    )
    return ranges + in_one_task


@pytest.mark.parametrize("one_task_sort_bytes", ["128m", "-1"])
def test_a_stored_order_sorts_by_the_columns_the_project_copies_its_keys_to(
    spark: Any, root: Path, one_task_sort_bytes: str
) -> None:
    copied = {**SESSIONS[9], "projections": [
        {"ref": "output.user", "expr": "e.user"}, *SESSIONS[9]["projections"]]}  # fmt: skip
    plan = sessions(root, copied)
    with spark_setting(spark, ONE_TASK_SORT_BYTES, one_task_sort_bytes):  # one task, or ranges
        on_spark = agreeing(plan, spark)
    assert [(r["user"], r["id"]) for r in on_spark.records()] == [
        ("a", 3), ("a", 4), ("a", 1), ("b", 2), ("b", 5)]  # fmt: skip
    # The sort reads the copies of e.user and e.ts and the sequence's own member only: Spark
    # shuffles and sorts plain values, not the sequence struct.
    sorts = store_sorts(last_physical_plan(spark))
    assert sorts, sorts
    for keys in sorts:
        assert re.fullmatch(
            r"user#\d+ ASC NULLS FIRST, ts#\d+L ASC NULLS FIRST, [\w#]+ ASC NULLS FIRST", keys
        ), keys
        assert "__drill_seq" not in keys, keys


def test_a_copy_the_project_overwrites_is_not_sorted_by(spark: Any, root: Path) -> None:
    # output.user holds e.ts in the end: the store's sort must read the sequence's e.user.
    overwritten = {**SESSIONS[9], "projections": [
        {"ref": "output.user", "expr": "e.user"}, {"ref": "output.user", "expr": "e.ts"},
        *SESSIONS[9]["projections"]]}  # fmt: skip
    plan = sessions(root, overwritten)
    on_spark = agreeing(plan, spark)
    assert [r["id"] for r in on_spark.records()] == [3, 4, 1, 2, 5]


def test_a_write_into_a_sequence_member_stops_the_spread_and_the_records_stay_right(
    spark: Any, root: Path
) -> None:
    # The transform writes e.ts, a member of the order's sequence: the running aggregate's
    # windows must not read the new e.ts as the order's.
    rewrite = {**SESSIONS[6], "transforms": [
        {"ref": "starts", "expr": "if rows == 1 || gap > 100 then 1 else 0 end"},
        {"ref": "e.ts", "expr": "0 - e.ts"}]}  # fmt: skip
    plan = sessions(root, rewrite)
    on_spark = agreeing(plan, spark)
    assert [r["ts"] for r in on_spark.records()] == [-20, -20, -30, -10, -2000]


def test_a_running_aggregation_reads_the_one_before_it_over_a_spread(
    spark: Any, root: Path
) -> None:
    running = {**SESSIONS[8], "aggregations": [
        {"ref": "session", "expr": "sum(starts)"},
        {"ref": "later", "expr": "sum(session * 10) + e.ts"}]}  # fmt: skip
    project = {**SESSIONS[9], "projections": [
        *SESSIONS[9]["projections"], {"ref": "output.later", "expr": "later"}]}  # fmt: skip
    plan = sessions(root, running, project)
    on_spark = agreeing(plan, spark)
    assert [r["later"] for r in on_spark.records()] == [30, 40, 60, 20, 2030]


def test_descending_keys_are_not_members_and_the_records_stay_right(spark: Any, root: Path) -> None:
    descending = {**SESSIONS[1], "orderings": [
        {"order": "asc", "expr": "e.user"}, {"order": "desc", "expr": "e.ts"}]}  # fmt: skip
    plan = sessions(root, descending)
    agreeing(plan, spark)


def test_spread_takes_a_record_and_its_sequence_apart_and_rebuilds_them(spark: Any) -> None:
    df = spark.createDataFrame([(1, 10, "x"), (2, 5, "y")], "id long, ts long, v string").select(
        F.struct("id", "ts", "v").alias("e"),
        F.struct(F.col("ts").alias("k0"), F.col("id").alias("k1")).alias("seq"),
        F.col("ts").alias("key"),
        F.lit(7).alias("other"),
    )
    taken = spread(df, "seq", [("e", "ts"), None], keys={"key": ("e", "ts")})
    assert taken is not None
    ts_leaf = taken.leaves[("e", "ts")]
    assert taken.order[0] == ts_leaf and taken.order[1] not in taken.leaves.values()
    assert "e" not in taken.frame.columns and "key" not in taken.frame.columns
    back = taken.rebuild(taken.frame)
    assert back.schema == df.schema
    assert back.collect() == df.collect()
    added = taken.frame.withColumn("count", F.lit(1))
    assert taken.rebuild(added).columns == ["e", "seq", "key", "other", "count"]
    assert taken.rebuild(added, without=["other", "count"]).columns == ["e", "seq", "key"]


def test_spread_declines_what_it_cannot_rebuild(spark: Any) -> None:
    df = spark.createDataFrame([(1, 10)], "id long, ts long").select(
        F.when(F.col("id") > 0, F.struct("id", "ts")).alias("maybe"),  # may be null
        F.struct("id", "ts").alias("e"),
        F.struct(F.col("ts").alias("k0")).alias("seq"),
        F.col("id").alias("long_seq"),
    )
    assert spread(df, "long_seq", [("e", "ts")]) is None  # a long sequence has no members
    assert spread(df, "seq", [("maybe", "ts")]) is None  # a rebuilt record is never null
    assert spread(df, "seq", [("e", "nope")]) is None
    assert spread(df, "seq", [("e", "ts"), None]) is None  # not the sequence's members
    assert spread(df, "seq", [None]) is None  # nothing to share


def test_spread_adds_a_key_column_the_frame_does_not_hold_from_its_member(spark: Any) -> None:
    """A segment's key column that equals a spread member costs no step before the spread: the
    spread rebuilds it from the member's leaf, after the frame's own columns."""
    df = spark.createDataFrame([(1, 10), (2, 5)], "id long, ts long").select(
        F.struct("id", "ts").alias("e"), F.struct(F.col("ts").alias("k0")).alias("seq")
    )
    taken = spread(df, "seq", [("e", "ts")], added={"key": ("e", "id")})
    assert taken is not None
    assert "key" not in taken.frame.columns and taken.columns == ["e", "seq", "key"]
    back = taken.rebuild(taken.frame)
    assert back.columns == ["e", "seq", "key"]
    assert [r.key for r in back.collect()] == [1, 2]
    assert spread(df, "seq", [("e", "ts")], added={"key": ("e", "nope")}) is None
    assert spread(df, "seq", [("e", "ts")], added={"key": None}) is None


def test_a_sessionization_with_spread_windows_gives_the_local_records_and_counts(
    spark: Any, root: Path
) -> None:
    """Sessionize's segments group by a record member the windows' spread takes apart, its
    windowframe's rows are counted per record over the running sum's leaves, and its pair
    aggregate and running sum leave their records to their readers: the records and the row
    counts are the local executor's."""
    plan = sessions(root)
    on_spark = run_plan(plan, executor="spark", spark=spark)
    local = run_plan(plan, executor="local")
    assert on_spark.records() == local.records()
    assert rows_of(on_spark) == rows_of(local)


def rows_of(result: Any) -> dict[str, int]:
    return {op: m["rows"] for op, m in result.metrics.items() if "rows" in m}
