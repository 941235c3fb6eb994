"""The Spark benchmark's queries stay honest: every plan validates, and on a tiny data set our run
and the hand-written PySpark store the same records (in order where the plan orders them).
No timing here: benchmarks/spark_queries.py measures."""

from __future__ import annotations

import doctest
import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.plan import parse_plan

BENCHMARKS = Path(__file__).resolve().parents[4] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import spark_queries.check as check  # noqa: E402
from spark_queries.check import (  # noqa: E402
    PLANS,
    load_plan,
    median_interval,
    median_ratio,
    pooled_runs,
    ratio_interval,
    round_spread,
    run_ours,
    same_records,
    stored_rows,
    verdict,
    written_rows,
)
from spark_queries.data import generate  # noqa: E402
from spark_queries.executor_cpu import ExecutorCpu  # noqa: E402
from spark_queries.handwritten import ORDERED, QUERIES  # noqa: E402


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate(tmp_path_factory.mktemp("bench"), scale=0.005)


def test_every_plan_has_a_hand_written_query() -> None:
    assert sorted(p.stem for p in PLANS.glob("*.json")) == sorted(QUERIES)
    assert len(QUERIES) >= 8


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_ours_and_hand_written_store_the_same_records(
    name: str, data: Path, tmp_path: Path, spark: Any
) -> None:
    parse_plan(load_plan(name, data, tmp_path / "ours"))
    ours = stored_rows(run_ours(spark, name, data, tmp_path / "ours"))
    QUERIES[name](spark, data, tmp_path / "handwritten")
    theirs = written_rows(tmp_path / "handwritten")
    assert ours, f"{name} stored no records: the data set is too small to check it"
    assert same_records(ours, theirs, ordered=name in ORDERED), (ours[:5], theirs[:5])


def physical_plans(spark: Any, name: str, data: Path, out: Path) -> str:
    """The physical plan of what the plan's store writes, as Spark would run it."""
    from engine.exec.spark.executor import SparkPlanRun
    from engine.run import build_engines

    plan = parse_plan(load_plan(name, data, out))
    engines = build_engines(plan, base_dir=None, classpath=[])
    run = SparkPlanRun(plan, spark, engines=engines, params={})
    frames = run.compile_frames().values()
    return "\n".join(str(f._jdf.queryExecution().executedPlan().toString()) for f in frames)


def test_sessionize_shuffles_once_by_user_and_reads_only_what_it_uses(
    data: Path, tmp_path: Path, spark: Any
) -> None:
    # order by user, segment, windowframe within the segment, collapse, segment by user again,
    # runningaggregate within it: the windows partition by one column (the same attribute), so
    # Spark shuffles by user once, as the hand-written query does; the second segment finds its
    # input still grouped by user and keeps the sequence.
    text = physical_plans(spark, "sessionize_windowframe", data, tmp_path)
    assert text.count("hashpartitioning(") == 1
    # The carried record `e` is read only as e.user_id, e.event_id, e.ts.
    assert "ReadSchema: struct<event_id:bigint,ts:bigint,user_id:bigint>" in text


def test_union_distinct_groups_the_records_by_their_values_alone(
    data: Path, tmp_path: Path, spark: Any
) -> None:
    # Nothing observes the union's order: its records share one sequence value, which is no
    # grouping key of the distinct (Spark hashes and shuffles the two names only).
    text = physical_plans(spark, "union_distinct", data, tmp_path)
    keys = re.findall(r"HashAggregate\(keys=\[([^\]]*)\]", text)
    assert len(keys) == 2
    assert all(re.fullmatch(r"name#\d+, segment#\d+", k) for k in keys), keys


def test_topn_compares_the_columns_it_reads_without_copies_of_its_keys(
    data: Path, tmp_path: Path, spark: Any
) -> None:
    # Keys that read members are sorted by in place: the scan leaves its records to the order
    # (they are never built), and each row the top-N copies carries the four columns written
    # and the sequence, as read, under the scan's own names for them.
    text = physical_plans(spark, "topn_order_limit", data, tmp_path)
    top_n = next(line for line in text.splitlines() if "TakeOrderedAndProject" in line)
    assert re.search(r"orderBy=\[__drill_s\d+_\d+#\d+ DESC", top_n)
    assert "__drill_top" not in text
    assert " struct(" not in text  # no record built (``_metadata`` is Spark's named_struct)


def test_the_median_ratio_pairs_the_runs_of_each_round() -> None:
    # Each round's own ratio counts once; the ratio of the medians (2.0 / 1.5) would take its
    # two runs from different rounds.
    ours, theirs = [1.0, 2.0, 4.0], [1.0, 2.0, 1.5]
    assert median_ratio(ours, theirs) == 1.0
    assert median_ratio([2.0], [1.0]) == 2.0


def test_the_rounds_spread_is_the_quartiles_of_their_ratios() -> None:
    assert round_spread([1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0]) == (1.25, 3.75)
    assert round_spread([3.0], [2.0]) == (1.5, 1.5)


def test_the_ratio_interval_holds_the_median_and_narrows_with_more_rounds() -> None:
    ours = [1.0, 1.3, 0.9, 1.2, 1.1, 1.05, 1.15, 0.95, 1.25]
    theirs = [1.0] * len(ours)
    low, high = ratio_interval(ours, theirs)
    assert low <= median_ratio(ours, theirs) <= high
    more_low, more_high = ratio_interval(ours * 5, theirs * 5)
    assert more_high - more_low < high - low
    assert ratio_interval(ours, theirs) == (low, high)  # a fixed seed: the same rounds, the same


def test_the_median_interval_is_over_the_queries_medians() -> None:
    fast, slow, even = [0.8] * 6, [1.3] * 6, [1.0] * 6
    assert median_interval([(fast, even), (slow, even), (even, even)]) == (1.0, 1.0)
    assert median_interval([(slow, even), (slow, even), (fast, even)]) == (1.3, 1.3)


def test_the_verdict_says_met_or_not_met_only_where_the_intervals_do() -> None:
    assert verdict((0.95, 0.99), {"a": (1.0, 1.1), "b": (0.7, 0.8)}) == "met"
    assert verdict((1.01, 1.05), {"a": (1.0, 1.1)}) == "not met: the median above 1.0"
    assert verdict((0.9, 0.95), {"a": (1.11, 1.2)}) == "not met: a above 1.10"
    both = verdict((1.01, 1.05), {"a": (1.11, 1.2), "b": (1.2, 1.3)})
    assert both == "not met: the median above 1.0; a, b above 1.10"
    assert verdict((0.98, 1.02), {"a": (1.05, 1.12), "b": (0.9, 1.0)}) == (
        "undecided at this noise: the median, a"
    )


def test_pooled_runs_join_each_querys_rounds_across_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def record(ours: list[float], theirs: list[float]) -> dict[str, Any]:
        runs = {"q1": {"runs": {"ours": ours, "handwritten": theirs}}}
        return {"scale": 1.0, "median": 1.0, "queries": runs}

    first, second = record([1.2, 1.1], [1.0, 1.0]), record([0.9], [1.0])
    assert pooled_runs([first, second]) == {
        "q1": {"ours": [1.2, 1.1, 0.9], "handwritten": [1.0] * 3}
    }
    # The benchmark's --pool prints the pooled figures without running Spark.
    paths = []
    for i, rec in enumerate([first, second]):
        paths.append(tmp_path / f"r{i}.json")
        paths[-1].write_text(json.dumps(rec))
    script = importlib.util.spec_from_file_location("bench_main", BENCHMARKS / "spark_queries.py")
    assert script is not None and script.loader is not None
    benchmark = importlib.util.module_from_spec(script)
    script.loader.exec_module(benchmark)
    assert benchmark.main(["--pool", *map(str, paths)]) == 0
    printed = capsys.readouterr().out
    assert "2 records pooled" in printed
    assert re.search(r"q1 +ours +1\.10 s +hand-written +1\.00 s +ratio +1\.10", printed)
    assert "target: undecided at this noise: the median, q1" in printed


def test_the_benchmark_helpers_docstring_examples_hold() -> None:
    result = doctest.testmod(check)
    assert result.attempted > 0 and result.failed == 0


def test_executor_cpu_counts_each_stage_once(spark: Any) -> None:
    cpu = ExecutorCpu(spark)
    spark.range(200_000).selectExpr("sum(id * id)").collect()
    first = cpu.take()
    assert first is not None and first > 0
    assert cpu.take() == 0  # nothing ran since
    assert ExecutorCpu(object()).take() is None  # no status store: no figure


def test_the_timeline_splits_each_run_at_its_write(data: Path, tmp_path: Path, spark: Any) -> None:
    """``spark_timeline.py``'s figures: each contender's run split at its write, on Spark's
    clock, and the planning phases of what each writes."""
    import spark_timeline
    from spark_queries.timeline import Timeline

    found = spark_timeline.measure(spark, "q6_forecast_revenue", data, tmp_path, repeat=1)
    for (timeline,) in found.values():
        assert isinstance(timeline, Timeline)
        assert timeline.steps > 0 and timeline.jobs > 0 and timeline.driver > 0
        assert 0 <= timeline.to_first_job < timeline.total
        assert timeline.other >= -0.01  # the phases add up (to Spark's millisecond clock)
    # Spark's parquet reader infers a schema with a job of its own; ours reads the footers.
    assert found["hand"][0].schema_jobs > 0 and found["ours"][0].schema_jobs == 0
    frames = spark_timeline.written_dataframes(spark, "q6_forecast_revenue", data, tmp_path)
    assert set(frames) == {"ours", "hand"}
    phases = spark_timeline.planning_phases(frames["ours"], repeat=1)
    assert {"analysis", "optimization", "planning"} <= set(phases)
    assert not list(tmp_path.glob("*-0"))  # each run's output removed


def test_the_verdict_takes_each_benchmarks_own_targets() -> None:
    assert verdict((1.1, 1.2), {"q02": (1.2, 1.3)}, median_target=1.0, max_target=1.25) == (
        "not met: the median above 1.0"
    )
    assert verdict((0.9, 0.95), {"q02": (1.3, 1.4)}, max_target=1.25) == "not met: q02 above 1.25"
    assert verdict((3.5, 3.9), {"q19": (7.0, 8.0)}, median_target=4.0, max_target=None) == "met"


def test_tpch_pool_reports_the_pooled_rounds_of_each_comparison(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = importlib.util.spec_from_file_location("tpch_main", BENCHMARKS / "tpch.py")
    assert script is not None and script.loader is not None
    tpch = importlib.util.module_from_spec(script)
    script.loader.exec_module(tpch)

    def record(spark: list[float], local: list[float]) -> dict[str, Any]:
        return {
            "sf": 1.0,
            "results": {
                tpch.SPARK: {"q01": {"ours": spark, "peer": [1.0] * len(spark)}},
                tpch.LOCAL: {"q01": {"ours": local, "peer": [1.0] * len(local)}},
            },
        }

    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    paths[0].write_text(json.dumps(record([1.5, 1.4], [3.0, 3.2])))
    paths[1].write_text(json.dumps(record([1.6], [3.1])))
    assert tpch.main(["--pool", *map(str, paths)]) == 0
    printed = capsys.readouterr().out
    assert "| q01 | 1.50 | 1.00 | 1.50 | 1.40-1.60 |" in printed  # three Spark rounds
    assert "target: not met: the median above 1.0; q01 above 1.25" in printed
    assert "| q01 | 3.10 | 1.00 | 3.10 | 3.00-3.20 |" in printed  # three local rounds
    assert printed.rstrip().endswith("target: met")  # local: median <= 4


def test_tpch_pair_warms_each_contender_up_before_its_timed_rounds() -> None:
    script = importlib.util.spec_from_file_location("tpch_pair", BENCHMARKS / "tpch.py")
    assert script is not None and script.loader is not None
    tpch = importlib.util.module_from_spec(script)
    script.loader.exec_module(tpch)
    calls: list[str] = []

    def ours() -> list[int]:
        calls.append("ours")
        return [len(calls)]

    def peer() -> None:
        calls.append("peer")

    our_times, peer_times, rows = tpch.pair(ours, peer, repeat=2, warmup=3)
    assert len(our_times) == len(peer_times) == 2
    assert rows == [1]  # ours' first result, the one checked against the answer
    # three untimed runs each, then the rounds, the first to run alternating
    assert calls == ["ours", "peer"] * 3 + ["ours", "peer", "peer", "ours"]
