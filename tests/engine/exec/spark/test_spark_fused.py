"""Segments and windowframes whose DataFrame no reader uses are not built on Spark
(:func:`engine.exec.spark.compiler.fused_operators`): their collapsing aggregates group (or
aggregate the frames of) the input themselves, and each DataFrame step not built is one analysis
less on the driver; so are the group numbers of segments nothing reads
(:func:`~engine.exec.spark.compiler.unnumbered_segments`). The records stay the local executor's."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_settings import spark_setting

from engine.exec.spark.executor import SparkPlanRun
from engine.exec.spark.session import KEEP_EMPTY_RELATIONS_RULES
from engine.plan import parse_plan
from engine.planner.properties import ids_where
from engine.planner.properties.decisions import fused_operators, unnumbered_segments
from engine.run import build_engines, run_plan

SCAN = {
    "@id": 1,
    "op": "scan",
    "storageengine": "fs",
    "ref": "e",
    "selection": {"path": "t", "format": "parquet"},
}
SEGMENT = {"@id": 2, "op": "segment", "input": 1, "ref": "grp", "exprs": ["e.user"]}
COLLAPSE = {
    "@id": 3,
    "op": "collapsingaggregate",
    "input": 2,
    "within": "grp",
    "carryovers": ["e.user"],
    "aggregations": [{"ref": "n", "expr": "count(1)"}, {"ref": "total", "expr": "sum(e.v)"}],
}
# Each record with the one before it in its user's run, collapsed again per record.
ORDER = {
    "@id": 2,
    "op": "order",
    "input": 1,
    "orderings": [{"order": "asc", "expr": "e.user"}, {"order": "asc", "expr": "e.ts"}],
}
USER = {"@id": 3, "op": "segment", "input": 2, "ref": "user_seg", "exprs": ["e.user"]}
FRAME = {
    "@id": 4,
    "op": "windowframe",
    "input": 3,
    "within": "user_seg",
    "start": -1,
    "end": 0,
    "ref": {"segment": "w.target", "position": "w.pos"},
}
PAIR = {"@id": 5, "op": "segment", "input": 4, "ref": "pair", "exprs": ["w.target"]}
PAIRS = {
    "@id": 6,
    "op": "collapsingaggregate",
    "input": 5,
    "within": "pair",
    "carryovers": ["e"],
    "aggregations": [{"ref": "rows", "expr": "count(1)"}, {"ref": "gap", "expr": "max(e.ts) - min(e.ts)"}],
}  # fmt: skip


def plan_of(*ops: dict[str, Any], root: Path = Path("/nonexistent")) -> Any:
    storage = {"q": {"type": "queue"}, "fs": {"type": "fs", "root": str(root)}}
    last = ops[-1]["@id"]
    store = {"@id": 99, "op": "store", "input": last, "storageengine": "q", "target": {}}
    return parse_plan({"storage": storage, "query": [*ops, store]})


def fused(*ops: dict[str, Any]) -> set[str]:
    return fused_operators(plan_of(*ops))


def test_a_segment_only_its_groups_aggregate_reads_is_fused() -> None:
    assert fused(SCAN, SEGMENT, COLLAPSE) == {"2"}


def test_a_windowframe_collapsed_again_per_record_is_fused_with_its_segment() -> None:
    assert fused(SCAN, ORDER, USER, FRAME, PAIR, PAIRS) == {"5", "4"}


def test_a_segment_read_by_anything_else_is_built() -> None:
    project = {
        "@id": 3,
        "op": "project",
        "input": 2,
        "projections": [{"ref": "output.g", "expr": "grp"}],
    }
    assert fused(SCAN, SEGMENT, project) == set()
    reads_number = {**COLLAPSE, "aggregations": [{"ref": "g", "expr": "max(grp)"}]}
    assert fused(SCAN, SEGMENT, reads_number) == set()
    other_within = {**COLLAPSE, "within": None}
    assert fused(SCAN, SEGMENT, other_within) == set()


def test_a_windowframe_whose_members_are_read_is_built() -> None:
    by_position = {**PAIRS, "aggregations": [{"ref": "p", "expr": "max(w.pos)"}]}
    assert fused(SCAN, ORDER, USER, FRAME, PAIR, by_position) == {"5"}
    not_by_target = {**PAIR, "exprs": ["e.user"]}
    assert fused(SCAN, ORDER, USER, FRAME, not_by_target, PAIRS) == {"5"}


ROWS = pa.table(
    {
        "user": pa.array([2, 1, 2, 1, None, 2], pa.int64()),
        "ts": pa.array([10, 5, 40, 7, 3, 41], pa.int64()),
        "v": pa.array([1.0, 2.0, None, 4.0, 5.0, 6.0]),
    }
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "t").mkdir()
    pq.write_table(ROWS, tmp_path / "t" / "part-0.parquet")
    return tmp_path


@pytest.mark.parametrize(
    ("ops", "absent"),
    [
        ((SCAN, SEGMENT, COLLAPSE), "dense_rank"),  # the segment's group numbers
        ((SCAN, ORDER, USER, FRAME, PAIR, PAIRS), "collect_list"),  # the windowframe's members
    ],
    ids=["segment", "windowframe"],
)
def test_fused_operators_give_the_local_records_without_their_dataframes(
    ops: tuple[dict[str, Any], ...], absent: str, root: Path, spark: Any
) -> None:
    plan = plan_of(*ops, root=root)
    engines = build_engines(plan, base_dir=None, classpath=[])
    (frame,) = SparkPlanRun(plan, spark, engines=engines, params={}).compile_frames().values()
    assert absent not in frame._jdf.queryExecution().analyzed().toString()
    on_spark = run_plan(plan, executor="spark", spark=spark)
    local = run_plan(plan, executor="local")
    assert on_spark.records() == local.records()
    assert len(on_spark.records()) > 0


def test_a_segment_whose_reader_the_planner_removes_is_fused_with_the_aggregate(
    root: Path, spark: Any
) -> None:
    """Every run compiles the planned plan: with the filter on true between them removed, the
    aggregate reads the segment and groups its input itself (no group numbers are built)."""
    keeps_all = {"@id": 5, "op": "filter", "input": 2, "expr": "true"}
    plan = plan_of(SCAN, SEGMENT, keeps_all, {**COLLAPSE, "input": 5}, root=root)
    engines = build_engines(plan, base_dir=None, classpath=[])
    (frame,) = SparkPlanRun(plan, spark, engines=engines, params={}).compile_frames().values()
    assert "dense_rank" not in frame._jdf.queryExecution().analyzed().toString()
    assert (
        run_plan(plan, executor="spark", spark=spark).records()
        == run_plan(plan, executor="local").records()
    )


def test_a_windowframe_collapsed_per_record_passes_its_inputs_count_to_the_store(
    root: Path, spark: Any
) -> None:
    """Its aggregate gives one record per record of the windowframe's input, so the scan, the
    order and the segment below count what the store wrote. The windowframe's members and their
    segment are never built: the aggregate sums each record's frame rows into their count, the
    run's one observation."""
    from engine.exec.spark.metrics import store_counted
    from engine.planner.properties.decisions import frame_collapses

    running = {"@id": 7, "op": "runningaggregate", "input": 6, "aggregations": [
        {"ref": "so_far", "expr": "sum(rows)"}]}  # fmt: skip
    plan = plan_of(SCAN, ORDER, USER, FRAME, PAIR, PAIRS, running, root=root)
    ops = plan.topological_order()
    assert frame_collapses(plan, fused_operators(plan)) == {"4": "6"}
    assert set(store_counted(ops, frames={"4": "6"})) == {"1", "2", "3", "6", "7"}
    run = SparkPlanRun(
        plan, spark, engines=build_engines(plan, base_dir=None, classpath=[]), params={}
    )
    result = run.run()
    local = run_plan(plan, executor="local")
    assert result.records() == local.records()
    assert run.metrics.counting() == {"4"}
    rows = {k: v["rows"] for k, v in result.metrics.items() if "rows" in v}
    expected = {k: v["rows"] for k, v in local.metrics.items() if "rows" in v}
    # 6 records in 3 user runs (1, 2 and null): each record's frame holds it and the one before.
    assert rows == expected == {**{k: 6 for k in ("1", "2", "3", "6", "7", "99")}, "4": 9, "5": 9}


@pytest.mark.parametrize(
    ("frame", "collapse"),
    [
        ({"start": 1, "end": 2}, {}),  # frames without their own record: some are empty
        ({"start": None, "end": 0}, {}),  # each record's run up to it
        ({"start": -2, "end": 0}, {"target": "e.v"}),  # only frames holding a true target stay
        ({"start": 0, "end": 1, "within": None}, {}),  # one run: all the records
    ],
    ids=["ahead", "run-so-far", "target", "no-within"],
)
def test_a_fused_windowframe_counts_its_members_as_the_local_executor(
    frame: dict[str, Any], collapse: dict[str, Any], root: Path, spark: Any
) -> None:
    """The rows of a windowframe whose members are never built, and of the segment that
    groups them, are the local executor's: every member of every frame, empty frames and
    frames without a target included. Where the aggregate keeps no record ("target"), Spark's
    optimizer drops the observation summing them with the empty result: they have no count
    on a session keeping Spark's rules, and the local executor's where the session leaves the
    empty-relation rules out (``spark.drill.keepEmptyRelations``)."""
    windows = {k: v for k, v in {**FRAME, **frame}.items() if v is not None}  # None: absent
    plan = plan_of(SCAN, ORDER, USER, windows, PAIR, {**PAIRS, **collapse}, root=root)
    assert fused_operators(plan) == {"4", "5"}
    on_spark = run_plan(plan, executor="spark", spark=spark)
    local = run_plan(plan, executor="local")
    assert on_spark.records() == local.records()
    kept_nothing = local.metrics["6"]["rows"] == 0
    for op_id in ("4", "5", "6"):
        if op_id in on_spark.metrics or not kept_nothing:
            assert on_spark.metrics[op_id]["rows"] == local.metrics[op_id]["rows"], op_id
    if kept_nothing:
        with contextlib.ExitStack() as kept:
            for key, rules in KEEP_EMPTY_RELATIONS_RULES.items():
                kept.enter_context(spark_setting(spark, key, rules))
            on_spark = run_plan(plan, executor="spark", spark=spark)
        for op_id in ("4", "5", "6"):
            assert on_spark.metrics[op_id]["rows"] == local.metrics[op_id]["rows"], op_id
    assert on_spark.metrics["4"]["rows"] > 0


@pytest.mark.parametrize(
    "after",
    [
        (),  # the store reads the aggregate: observed over its input
        ({"@id": 7, "op": "filter", "input": 6, "expr": "rows > 1"},),  # before the filter
        (
            {"@id": 7, "op": "transform", "input": 6, "transforms": [{"ref": "x", "expr": "gap * 2"}]},
            {"@id": 8, "op": "project", "input": 7, "projections": [
                {"ref": "output.user", "expr": "e.user"}, {"ref": "output.x", "expr": "x"}]},
        ),  # carried through the transform, observed over the project's own columns
        (
            {"@id": 7, "op": "segment", "input": 6, "ref": "u", "exprs": ["e.user"]},
            {"@id": 8, "op": "collapsingaggregate", "input": 7, "within": "u",
             "carryovers": ["e.user"], "aggregations": [{"ref": "n", "expr": "sum(rows)"}]},
        ),  # carried through the segment, observed before the grouping aggregate
    ],
    ids=["store", "filter", "transform-project", "segment-collapse"],
)  # fmt: skip
def test_the_count_of_a_windowframe_collapsed_per_record_is_observed_further_on(
    after: tuple[dict[str, Any], ...], root: Path, spark: Any
) -> None:
    """The frame rows of an aggregate giving one record per record ride on in a column until
    an operator that does not pass every record on as it is, or the project a store reads:
    the windowframe's count is the local executor's wherever that is, and no record shows
    the column."""
    plan = plan_of(SCAN, ORDER, USER, FRAME, PAIR, PAIRS, *after, root=root)
    on_spark = run_plan(plan, executor="spark", spark=spark)
    local = run_plan(plan, executor="local")
    assert on_spark.records() == local.records()
    assert len(on_spark.records()) > 0
    rows = {k: v["rows"] for k, v in on_spark.metrics.items() if "rows" in v}
    assert rows == {k: v["rows"] for k, v in local.metrics.items() if "rows" in v}
    assert rows["4"] == rows["5"] == 9


@pytest.mark.parametrize("store_first", [True, False], ids=["store-first", "transform-first"])
def test_the_count_of_a_windowframe_read_by_two_readers_is_observed_once(
    store_first: bool, root: Path, spark: Any
) -> None:
    """The aggregate's DataFrame feeds a store and a transform: one branch observes the count
    (an observation is attached once), and neither shows the column carrying it."""
    stored = {"@id": 98, "op": "store", "input": 6, "storageengine": "q", "target": {}}
    doubled = {"@id": 7, "op": "transform", "input": 6, "transforms": [
        {"ref": "x", "expr": "gap * 2"}]}  # fmt: skip
    last = {**stored, "@id": 99, "input": 7}
    readers = [stored, doubled, last] if store_first else [doubled, last, stored]
    storage = {"q": {"type": "queue"}, "fs": {"type": "fs", "root": str(root)}}
    plan = parse_plan(
        {"storage": storage, "query": [SCAN, ORDER, USER, FRAME, PAIR, PAIRS, *readers]}
    )
    on_spark = run_plan(plan, executor="spark", spark=spark)
    local = run_plan(plan, executor="local")
    assert on_spark.records() == local.records()
    assert all("__drill_frame_rows" not in record for record in on_spark.records())
    assert on_spark.metrics["4"] == on_spark.metrics["5"] == {"rows": 9}


def test_the_count_of_a_windowframe_reaching_an_output_with_no_store_is_observed(
    root: Path, spark: Any
) -> None:
    storage = {"fs": {"type": "fs", "root": str(root)}}
    plan = parse_plan({"storage": storage, "query": [SCAN, ORDER, USER, FRAME, PAIR, PAIRS]})
    on_spark = run_plan(plan, executor="spark", spark=spark)
    local = run_plan(plan, executor="local")
    assert on_spark.outputs["6"].to_pylist() == local.outputs["6"].to_pylist()
    assert on_spark.metrics["4"] == on_spark.metrics["5"] == {"rows": 9}


def test_a_windowframe_whose_frames_skip_their_own_record_is_not_passed() -> None:
    from engine.planner.properties.decisions import frame_collapses

    ahead = {**FRAME, "start": 1, "end": 2}
    plan = plan_of(SCAN, ORDER, USER, ahead, PAIR, PAIRS)
    assert fused_operators(plan) == {"4", "5"}
    assert frame_collapses(plan, fused_operators(plan)) == {}


# A running sum within each user's group, and only named values stored (not the group number).
RUNNING = {
    "@id": 4,
    "op": "runningaggregate",
    "input": 3,
    "within": "user_seg",
    "aggregations": [{"ref": "so_far", "expr": "sum(e.v)"}],
}
NAMED = {"@id": 8, "op": "project", "input": 4, "projections": [
    {"ref": "output.user", "expr": "e.user"}, {"ref": "output.ts", "expr": "e.ts"},
    {"ref": "output.so_far", "expr": "so_far"}]}  # fmt: skip


def unnumbered(*ops: dict[str, Any]) -> set[str]:
    plan = plan_of(*ops)
    return unnumbered_segments(plan, fused_operators(plan))


def test_a_segment_whose_number_nothing_reads_is_unnumbered() -> None:
    assert unnumbered(SCAN, ORDER, USER, RUNNING, NAMED) == {"3"}
    # the windowframe's frames run within the user's group: by its keys, never its number
    assert unnumbered(SCAN, ORDER, USER, FRAME, PAIR, PAIRS) == {"3"}


def test_a_segment_whose_number_is_read_is_numbered() -> None:
    assert unnumbered(SCAN, ORDER, USER, RUNNING) == set()  # stored whole, number included
    reads = {**NAMED, "projections": [{"ref": "output.g", "expr": "user_seg"}]}
    assert unnumbered(SCAN, ORDER, USER, RUNNING, reads) == set()
    sums = {**RUNNING, "aggregations": [{"ref": "so_far", "expr": "sum(user_seg)"}]}
    assert unnumbered(SCAN, ORDER, USER, sums, NAMED) == set()
    other_within = {**RUNNING, "within": None}
    assert unnumbered(SCAN, ORDER, USER, other_within, NAMED) == set()
    by_position = {**PAIRS, "aggregations": [{"ref": "p", "expr": "max(w.pos)"}]}
    assert unnumbered(SCAN, ORDER, USER, FRAME, PAIR, by_position) == set()  # members built
    over_key = {**USER, "ref": "e"}
    assert unnumbered(SCAN, ORDER, over_key, {**RUNNING, "within": "e"}, NAMED) == set()


@pytest.mark.parametrize(
    ("ops", "numbered"),
    [
        ((SCAN, ORDER, USER, RUNNING, NAMED), False),  # in user order: nothing to build
        ((SCAN, {**USER, "input": 1}, RUNNING, NAMED), True),  # regrouped: its records' order
    ],
    ids=["in-key-order", "regrouped"],
)
def test_unnumbered_segments_give_the_local_records(
    ops: tuple[dict[str, Any], ...], numbered: bool, root: Path, spark: Any
) -> None:
    plan = plan_of(*ops, root=root)
    run = SparkPlanRun(
        plan, spark, engines=build_engines(plan, base_dir=None, classpath=[]), params={}
    )
    assert ids_where(run.properties, lambda p: p.unnumbered) == {"3"}
    (frame,) = run.compile_frames().values()
    assert ("dense_rank" in frame._jdf.queryExecution().analyzed().toString()) is numbered
    on_spark = run_plan(plan, executor="spark", spark=spark)
    local = run_plan(plan, executor="local")
    assert on_spark.records() == local.records()
    assert len(on_spark.records()) == ROWS.num_rows
    assert on_spark.metrics["3"]["rows"] == local.metrics["3"]["rows"] == ROWS.num_rows
