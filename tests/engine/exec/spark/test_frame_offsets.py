"""A windowframe of a few rows collapsed again per record aggregates on Spark from the values at
each offset of its frame (``lag``/``lead``, :func:`engine.exec.spark.compiler_aggregate.
_offset_aggregates`) instead of a sliding window that re-aggregates every frame; longer frames,
targets, carryovers from beyond the record and distinct counts keep the sliding window. Either
way the records are the local executor's."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.exec.spark.compiler_aggregate import OFFSET_ROWS, FrameSpec, Shifts
from engine.exec.spark.executor import SparkPlanRun
from engine.plan import parse_plan
from engine.run import build_engines, run_plan

ROWS = pa.table(
    {
        "user": pa.array([2, 1, 2, 1, None, 2, 1, 2, 2, 1], pa.int64()),
        "ts": pa.array([10, 5, 40, 7, 3, 41, 9, 50, 60, 11], pa.int64()),
        "small": pa.array([1, None, 3, -4, 5, None, 7, 8, 2**31 - 1, 2**31 - 1], pa.int32()),
        "v": pa.array([1.5, 2.0, None, float("nan"), 5.0, -0.0, 0.1, 0.2, None, 1e300]),
        "name": pa.array(["b", "a", None, "c", "z", "B", "", "ab", "b", None]),
        "flag": pa.array([True, None, False, True, False, None, True, False, True, True]),
    }
)

AGGREGATIONS = [
    {"ref": "rows", "expr": "count(1)"},
    {"ref": "values", "expr": "count(e.v)"},
    {"ref": "total", "expr": "sum(e.v)"},
    {"ref": "int_total", "expr": "sum(e.small)"},
    {"ref": "mean", "expr": "avg(e.v)"},
    {"ref": "int_mean", "expr": "avg(e.small)"},
    {"ref": "low", "expr": "min(e.name)"},
    {"ref": "high", "expr": "max(e.v)"},
    {"ref": "any", "expr": "max(e.flag)"},
    {"ref": "gap", "expr": "max(e.ts) - min(e.ts)"},
]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("frames")
    (root / "t").mkdir()
    pq.write_table(ROWS, root / "t" / "part-0.parquet")
    return root


def plan_of(
    root: Path,
    start: int | None,
    end: int | None,
    *,
    within: bool = True,
    aggregations: list[dict[str, str]] = AGGREGATIONS,
    collapse: dict[str, Any] | None = None,
) -> Any:
    frame: dict[str, Any] = {"@id": 4, "op": "windowframe", "input": 3,
                             "ref": {"segment": "w.target", "position": "w.pos"}}  # fmt: skip
    frame.update({k: v for k, v in {"start": start, "end": end}.items() if v is not None})
    if within:
        frame["within"] = "user_seg"
    query = [
        {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e",
         "selection": {"path": "t", "format": "parquet"}},
        {"@id": 2, "op": "order", "input": 1, "orderings": [
            {"order": "asc", "expr": "e.user"}, {"order": "asc", "expr": "e.ts"}]},
        {"@id": 3, "op": "segment", "input": 2, "ref": "user_seg", "exprs": ["e.user"]},
        frame,
        {"@id": 5, "op": "segment", "input": 4, "ref": "pair", "exprs": ["w.target"]},
        {"@id": 6, "op": "collapsingaggregate", "input": 5, "within": "pair",
         "carryovers": ["e.user", "e.ts"], "aggregations": aggregations, **(collapse or {})},
        {"@id": 7, "op": "store", "input": 6, "storageengine": "q", "target": {}},
    ]  # fmt: skip
    storage = {"q": {"type": "queue"}, "fs": {"type": "fs", "root": str(root)}}
    return parse_plan({"storage": storage, "query": query})


def spark_plan(plan: Any, spark: Any) -> str:
    engines = build_engines(plan, base_dir=None, classpath=[])
    (frame,) = SparkPlanRun(plan, spark, engines=engines, params={}).compile_frames().values()
    return frame._jdf.queryExecution().optimizedPlan().toString()


def window_calls(shown: str) -> list[str]:
    """The window expressions' functions and arguments in a plan's text, one per expression."""
    return re.findall(r"(\w+\((?:[^()]|\([^()]*\))*\)) windowspecdefinition", shown)


def window_functions(shown: str) -> set[str]:
    """The functions of the window expressions in a plan's text."""
    return {call.split("(")[0] for call in window_calls(shown)}


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def agrees_with_local(plan: Any, spark: Any) -> list[dict[str, Any]]:
    on_spark = run_plan(plan, executor="spark", spark=spark)
    local = run_plan(plan, executor="local")
    records, expected = on_spark.records(), local.records()
    assert len(records) == len(expected) > 0
    assert all(same(a, b) for a, b in zip(records, expected)), (records, expected)
    assert on_spark.metrics["4"]["rows"] == local.metrics["4"]["rows"]
    return records


@pytest.mark.parametrize(
    ("start", "end"),
    [(-1, 0), (-2, 0), (0, 0), (-3, -1), (1, 2), (0, 2), (-2, 2), (-4, 3)],
    ids=[
        "previous",
        "two-before",
        "itself",
        "before-only",
        "ahead-only",
        "ahead",
        "around",
        "eight",
    ],
)
def test_a_frame_of_a_few_rows_aggregates_the_values_at_its_offsets_as_local(
    start: int, end: int, root: Path, spark: Any
) -> None:
    """Counts of rows and of values, integer and float sums (nulls, NaN, -0.0, an int sum past
    2^31), averages, min/max of strings, floats and booleans: the local executor's records, and
    Spark's plan shifts values (``lag``/``lead``) instead of re-aggregating a sliding frame.
    Frames without their own record (``before-only``, ``ahead-only``) drop the records whose
    frame is empty; carryovers of a frame ending past the record are not its own, so those
    frames keep carryovers off (``ahead``, ``around``, ``eight``: a frame of
    :data:`OFFSET_ROWS` rows)."""
    collapse = {} if end == 0 else {"carryovers": []}
    plan = plan_of(root, start, end, collapse=collapse)
    shown = spark_plan(plan, spark)
    assert window_functions(shown) <= {"lag", "lead"}
    assert window_functions(shown) or (start, end) == (0, 0)
    records = agrees_with_local(plan, spark)
    if (start, end) == (-4, 3):
        assert end - start + 1 == OFFSET_ROWS
        assert max(r["rows"] for r in records) == 5  # user 2's whole run


@pytest.mark.parametrize(
    ("start", "end", "collapse", "aggregations", "frame"),
    [
        (-4, 4, {}, AGGREGATIONS, "RowFrame, -4, 4"),  # nine rows: longer than OFFSET_ROWS
        (None, 0, {}, AGGREGATIONS, "unboundedpreceding$()"),  # unbounded
        (-1, 1, {}, AGGREGATIONS, "RowFrame, -1, 1"),  # carryovers of the frame's last record
        (-1, 0, {"target": "e.flag"}, AGGREGATIONS, "RowFrame, -1, currentrow$()"),
        (-1, 0, {}, [{"ref": "names", "expr": "count_distinct(e.name)"}], "RowFrame, -1, "),
    ],
    ids=["nine-rows", "unbounded", "carried-from-ahead", "target", "distinct"],
)
def test_other_frames_keep_the_sliding_window_and_agree_with_local(
    start: int | None,
    end: int,
    collapse: dict[str, Any],
    aggregations: list[dict[str, str]],
    frame: str,
    root: Path,
    spark: Any,
) -> None:
    plan = plan_of(root, start, end, collapse=collapse, aggregations=aggregations)
    shown = spark_plan(plan, spark)
    assert frame in shown
    assert window_functions(shown) - {"lag", "lead"}
    assert not window_functions(shown) & {"lag", "lead"}  # no offsets beside the sliding window
    agrees_with_local(plan, spark)


def test_a_frame_over_the_whole_input_shifts_across_every_record(root: Path, spark: Any) -> None:
    """No ``within``: one run, so the first record of a user sees the last of the one before."""
    plan = plan_of(root, -1, 0, within=False)
    assert window_functions(spark_plan(plan, spark)) == {"lag"}
    records = agrees_with_local(plan, spark)
    assert [r["rows"] for r in records] == [1] + [2] * (len(records) - 1)


def test_frame_offsets_are_given_only_for_short_bounded_frames(spark: Any) -> None:
    from pyspark.sql import Window

    spec = Window.orderBy("x")
    assert FrameSpec(spec, -1, 0).offsets == range(-1, 1)
    assert FrameSpec(spec, 2, 2).offsets == range(2, 3)
    assert FrameSpec(spec, -OFFSET_ROWS, -1).offsets == range(-OFFSET_ROWS, 0)
    assert FrameSpec(spec, -OFFSET_ROWS, 0).offsets is None  # one row too many
    assert FrameSpec(spec, None, 0).offsets is None
    assert FrameSpec(spec, 0, None).offsets is None
    assert FrameSpec(spec, 1, -1).offsets is None  # always empty


def test_each_value_at_each_offset_is_shifted_once_however_many_aggregates_read_it(
    root: Path, spark: Any
) -> None:
    """``count(1)``, ``max(e.ts)``, ``min(e.ts)`` and the frame's own row count over the previous
    record read two shifts (``lag(1)``, ``lag(ts)``), and Spark computes each once: it computes
    every window expression it is given, equal ones too."""
    aggregations = [
        {"ref": "rows", "expr": "count(1)"},
        {"ref": "gap", "expr": "max(e.ts) - min(e.ts)"},
    ]
    plan = plan_of(root, -1, 0, aggregations=aggregations)
    calls = window_calls(spark_plan(plan, spark))
    assert len(calls) == len(set(calls)) == 2, calls
    assert {call.split("(")[0] for call in calls} == {"lag"}
    records = agrees_with_local(plan, spark)
    assert [(r["rows"], r["gap"]) for r in records][:2] == [(1, 0), (1, 0)]


def test_shifts_name_each_value_and_offset_once(spark: Any) -> None:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    shifts = Shifts(FrameSpec(Window.orderBy("s"), -1, 1))
    first, again = shifts.at(F.col("ts"), -1), shifts.at(F.col("ts"), -1)
    ahead, other = shifts.at(F.col("ts"), 1), shifts.at(F.col("v"), -1)
    assert str(first) == str(again) != str(ahead) != str(other) != str(first)
    assert str(shifts.at(F.col("ts"), 0)) == str(F.col("ts"))  # the record's own: no shift
    assert str(shifts.holds(-1)) == str(shifts.at(F.lit(1), -1).isNotNull())
    assert len(shifts.columns()) == 4  # ts -1, ts +1, v -1, 1 -1
