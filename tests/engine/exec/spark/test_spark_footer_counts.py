"""Row counts from parquet footers on Spark: a parquet store counts the rows of the files Spark
wrote, a parquet scan that reads every row of its files counts them from its footers; neither is
observed (no ``CollectMetrics`` node). What the footers cannot count exactly is still counted as
its rows flow (observed, or marked: ``row_markers``): json and csv stores, a scan with a pushed
filter, a scan a ``limit`` reads, a JSON scan."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.classic import dataframe as classic
from spark_settings import spark_setting

from engine.errors import ExecutionError
from engine.exec.spark.executor import SparkPlanRun
from engine.exec.spark.settings import ROW_MARKERS
from engine.exec.spark.sources import constant_dataframe, plan_scan, scan_plan_dataframe
from engine.exec.spark.stores import store_dataframe
from engine.plan import parse_plan
from engine.run import build_engines, run_plan
from engine.storage.engines import create_engine

ROWS = [{"id": i, "day": f"d{i % 3}", "v": i * 1.5} for i in range(10)]


@pytest.fixture
def observations(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every ``DataFrame.observe`` made inside the test."""
    made: list[Any] = []
    observe = classic.DataFrame.observe

    def counting(self: Any, observation: Any, *exprs: Any) -> Any:
        made.append(observation)
        return observe(self, observation, *exprs)

    monkeypatch.setattr(classic.DataFrame, "observe", counting)
    yield made


def fs(root: Path) -> Any:
    return create_engine("out", {"type": "fs", "root": str(root)})


def footer_rows(files: Any) -> int:
    return sum(pq.read_metadata(f).num_rows for f in files)


@pytest.mark.parametrize(
    ("target", "keep", "expected"),
    [
        ({"path": "t"}, 10, 10),
        ({"path": "p", "partitionBy": ["day"]}, 10, 10),  # one file (at least) per partition
        ({"path": "e"}, 0, 0),  # Spark writes no file: the store writes an empty one
        ({"path": "ep", "partitionBy": ["day"]}, 0, 0),  # no partition, no file
    ],
)
def test_a_parquet_store_counts_the_rows_of_its_files_footers(
    spark: Any, tmp_path: Path, observations: list[Any], target: dict, keep: int, expected: int
) -> None:
    rows = constant_dataframe(spark, ROWS).limit(keep)
    observations.clear()  # the constant's own DataFrames are not the store's
    result = store_dataframe(rows, fs(tmp_path), {**target, "format": "parquet"})
    assert observations == []
    assert result.row_count == expected == footer_rows(result.files)
    if target.get("partitionBy") and expected:
        assert len(result.partitions) == 3 and len(result.files) >= 3
    if result.files:  # an empty partitioned store writes no file Spark could read
        assert spark.read.parquet(str(tmp_path / target["path"])).count() == expected


def test_a_parquet_store_appending_counts_only_what_it_wrote(
    spark: Any, tmp_path: Path, observations: list[Any]
) -> None:
    rows = constant_dataframe(spark, ROWS)
    target = {"path": "a", "format": "parquet", "mode": "append"}
    store_dataframe(rows, fs(tmp_path), target)
    second = store_dataframe(rows.limit(4), fs(tmp_path), target)
    assert second.row_count == 4
    assert observations == []


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_json_and_csv_stores_still_observe_what_they_write(
    spark: Any, tmp_path: Path, observations: list[Any], fmt: str
) -> None:
    rows = constant_dataframe(spark, ROWS)
    observations.clear()
    result = store_dataframe(rows, fs(tmp_path), {"path": "t", "format": fmt})
    assert result.row_count == 10
    assert len(observations) == 1


# ---------------------------------------------------------------- scans


@pytest.fixture
def data(tmp_path: Path) -> Path:
    table = pa.table({"x": pa.array([1, 5, 3, 7, None], pa.int64()), "s": list("abcde")})
    (tmp_path / "t").mkdir()
    pq.write_table(table, tmp_path / "t" / "part-0.parquet")
    pq.write_table(table.slice(0, 3), tmp_path / "t" / "part-1.parquet")
    pq.write_table(table.slice(0, 0), tmp_path / "t" / "part-2.parquet")  # no rows
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "a.json").write_text('{"x": 1}\n{"x": 2}\n{"x": 3}\n')
    return tmp_path


SCAN = {
    "@id": 1,
    "op": "scan",
    "storageengine": "fs",
    "ref": "t",
    "selection": {"path": "t", "format": "parquet"},
}
PROJECT = {
    "@id": 2,
    "op": "project",
    "input": 1,
    "projections": [{"ref": "output.x", "expr": "t.x"}],
}
COUNT = {
    "@id": 3,
    "op": "collapsingaggregate",
    "input": 2,
    "aggregations": [{"ref": "n", "expr": "count(1)"}],
}
STORE = {"@id": 4, "op": "store", "input": 3, "storageengine": "q", "target": {}}


def run_of(spark: Any, root: Path, *ops: dict[str, Any]) -> tuple[SparkPlanRun, Any]:
    storage = {"q": {"type": "queue"}, "fs": {"type": "fs", "root": str(root)}}
    plan = parse_plan({"storage": storage, "query": list(ops)})
    engines = build_engines(plan, base_dir=None, classpath=[])
    run = SparkPlanRun(plan, spark, engines=engines, params={})
    return run, run.run()


def observed_in(run: SparkPlanRun, op_id: str) -> bool:
    """Whether operator ``op_id``'s DataFrame carries an observation (a CollectMetrics node)."""
    return "CollectMetrics" in str(run.frames[op_id]._jdf.queryExecution().optimizedPlan())


def test_a_parquet_scan_that_reads_every_row_counts_them_from_its_footers(
    spark: Any, data: Path
) -> None:
    run, result = run_of(spark, data, SCAN, PROJECT, COUNT, STORE)
    assert result.records() == [{"n": 8}]
    assert result.metrics["1"]["rows"] == result.metrics["2"]["rows"] == 8
    # Nothing counts rows as they flow, the aggregate's input neither: the footers' 8 rows.
    assert not counted_in(run, "1") and not counted_in(run, "3")


def test_a_parquet_scan_with_a_pushed_filter_still_counts_its_rows_as_they_flow(
    spark: Any, data: Path
) -> None:
    filtered = {"@id": 2, "op": "filter", "input": 1, "expr": "t.x > 2"}
    with spark_setting(spark, ROW_MARKERS, "true"):
        run, result = run_of(spark, data, SCAN, filtered, COUNT, STORE)
    assert run.planned.operator("1").pushed_filter is not None
    assert result.records() == [{"n": 5}]
    assert result.metrics["1"]["rows"] == result.metrics["2"]["rows"] == 5
    # Every record reaches the aggregate: a marker on its input counts them (the opt-in).
    assert marked_in(run, "3") and not observed_in(run, "3")
    # With a second reader the scan counts its rows as read.
    again, result = run_of(
        spark, data, SCAN, filtered, COUNT, STORE, {**STORE, "@id": 5, "input": 2}
    )
    assert result.metrics["1"]["rows"] == 5 and counted_in(again, "1")


def observation_input(run: SparkPlanRun, op_id: str) -> str:
    """The name of the node right below the (one) ``CollectMetrics`` or marker filter
    (``row_markers``) of operator ``op_id``'s DataFrame, in its analyzed plan."""
    node = run.frames[op_id]._jdf.queryExecution().analyzed()
    while node.nodeName() != "CollectMetrics" and "SPARK_PARTITION_ID" not in str(
        node.expressions()
    ):
        node = node.children().apply(0)
    return node.children().apply(0).nodeName()


def marked_in(run: SparkPlanRun, op_id: str) -> bool:
    """Whether a marker filter (``row_markers``) counts rows in operator ``op_id``'s
    DataFrame or below it."""
    plan = str(run.frames[op_id]._jdf.queryExecution().optimizedPlan())
    return "SPARK_PARTITION_ID() >= -" in plan


def counted_in(run: SparkPlanRun, op_id: str) -> bool:
    """Whether operator ``op_id``'s DataFrame counts its rows as they flow: an observation, or a
    marker filter where every row flows and no global sort reads the stage (``row_markers``)."""
    plan = str(run.frames[op_id]._jdf.queryExecution().optimizedPlan())
    return "CollectMetrics" in plan or "SPARK_PARTITION_ID() >= -" in plan


@pytest.mark.parametrize(
    ("files", "ordered", "below"),
    [
        ("part-0.parquet", True, "Filter"),  # row index alone: observed on the filtered read
        ("*.parquet", False, "Filter"),  # unordered: no sequence to compute
        ("*.parquet", True, "Project"),  # file bases from _metadata: the sequence first
    ],
    ids=["one-file", "unordered", "files-metadata"],
)
def test_an_observed_scan_counts_right_above_its_read_unless_it_reads_file_metadata(
    files: str, ordered: bool, below: str, spark: Any, data: Path
) -> None:
    """Spark reads the ``_metadata`` struct whole above an observation (and refuses its row
    index beside the row index column), so only a scan whose sequence reads none observes its
    filtered read directly, one select less; either way the count is the local executor's."""
    scan = {**SCAN, "selection": {"path": f"t/{files}", "format": "parquet"}}
    filtered = {"@id": 2, "op": "filter", "input": 1, "expr": "t.x > 2"}
    readers: list[dict[str, Any]] = [{**STORE, "input": 2}, {**STORE, "@id": 5, "input": 2}]
    if not ordered:  # read only by aggregates that ignore order: the scan numbers no rows
        counts = [{**COUNT, "@id": i, "input": 2} for i in (3, 6)]
        readers = [counts[0], STORE, counts[1], {**STORE, "@id": 5, "input": 6}]
    run, result = run_of(spark, data, scan, filtered, *readers)
    assert counted_in(run, "1") and observation_input(run, "1") == below
    local = run_plan(run.plan, executor="local")
    assert (
        result.metrics["1"]["rows"]
        == local.metrics["1"]["rows"]
        == (3 if files != "*.parquet" else 5)
    )


def test_a_parquet_scan_a_limit_reads_still_observes(spark: Any, data: Path) -> None:
    limit = {"@id": 2, "op": "limit", "input": 1, "first": 0, "last": 2}
    run, result = run_of(spark, data, SCAN, limit, COUNT, STORE)
    assert result.records() == [{"n": 2}]
    assert result.metrics["2"]["rows"] == 2
    assert observed_in(run, "1")  # not from its footers: what Spark read for the limit
    assert result.metrics["1"]["rows"] <= 8


def test_a_json_scan_still_counts_its_rows_as_they_flow(spark: Any, data: Path) -> None:
    scan = {**SCAN, "selection": {"path": "j", "format": "json"}}
    with spark_setting(spark, ROW_MARKERS, "true"):
        run, result = run_of(spark, data, scan, PROJECT, COUNT, STORE)
    assert result.metrics["1"]["rows"] == 3
    assert marked_in(run, "3") and not observed_in(run, "3")  # at the aggregate's input
    # Read by two stores, it counts its rows as read.
    again, result = run_of(
        spark, data, scan, PROJECT, {**STORE, "input": 2}, {**STORE, "@id": 5, "input": 1}
    )
    assert result.metrics["1"]["rows"] == 3 and counted_in(again, "1")


@pytest.mark.parametrize(
    ("scan", "reader", "files"),
    [
        (SCAN, PROJECT, 3),  # every parquet file, the one without rows too
        ({**SCAN, "selection": {"path": "j", "format": "json"}}, PROJECT, 1),
        (SCAN, {"@id": 2, "op": "filter", "input": 1, "expr": "t.x > 2"}, 3),  # pushed filter
        (SCAN, {"@id": 2, "op": "limit", "input": 1, "first": 0, "last": 2}, None),
    ],
    ids=["parquet", "json", "filtered", "limited"],
)
def test_a_scan_counts_the_files_it_reads_as_the_local_executor(
    scan: dict[str, Any], reader: dict[str, Any], files: int | None, spark: Any, data: Path
) -> None:
    """A scan Spark reads whole counts the files it lists, as the local executor counts the
    files it reads, and the records it skipped (none: Spark's readers fail on a bad one);
    under a limit Spark may stop early, so it gives neither count."""
    run, result = run_of(spark, data, scan, reader, COUNT, STORE)
    local = run_plan(run.plan, executor="local")
    assert result.metrics["1"].get("files") == files
    if files is None:
        assert "skipped_records" not in result.metrics["1"]
    else:
        assert result.metrics["1"] == local.metrics["1"]
        assert result.metrics["1"]["skipped_records"] == 0


def test_scan_plan_dataframe_gives_the_footers_rows_only_for_a_whole_parquet_read(
    spark: Any, data: Path
) -> None:
    from engine.expr import parse_expression

    engine = create_engine("fs", {"type": "fs", "root": str(data)})
    plan = plan_scan(engine, {"path": "t", "format": "parquet"})
    assert plan.reader == "spark-parquet"
    told: list[int] = []
    observed: list[Any] = []

    def observe(df: Any) -> Any:
        observed.append(df)
        return df

    frame = scan_plan_dataframe(spark, plan, "t", observe=observe, counted=told.append)
    assert told == [8] and observed == [] and frame.count() == 8
    pushed = parse_expression("t.x > 2")
    scan_plan_dataframe(
        spark, plan, "t", pushed_filter=pushed, observe=observe, counted=told.append
    )
    assert told == [8] and len(observed) == 1
    empty = plan_scan(engine, {"path": "t/part-2.parquet", "format": "parquet"})
    assert scan_plan_dataframe(spark, empty, "t", counted=told.append).count() == 0
    assert told == [8, 0]


def test_each_scanned_footer_is_read_once_per_run(
    spark: Any, data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planner's statistics, the scan's schema and the scan's row numbering share one read
    of each footer (the storage engine's ``Footers`` of the run)."""
    reads: list[str] = []
    read_metadata = pq.read_metadata

    def counting(path: Any, *args: Any, **kwargs: Any) -> Any:
        reads.append(str(path))
        return read_metadata(path, *args, **kwargs)

    monkeypatch.setattr(pq, "read_metadata", counting)
    filtered = {"@id": 2, "op": "filter", "input": 1, "expr": "t.x > 2"}
    _, result = run_of(spark, data, SCAN, filtered, COUNT, STORE)
    assert result.records() == [{"n": 5}]
    scanned = [r for r in reads if "/t/" in r]
    assert sorted(scanned) == sorted(set(scanned))
    assert len(scanned) == 3  # part-0, part-1 and the row-less part-2, once each


@pytest.mark.parametrize("executor", ["spark", "local"])
def test_a_file_with_no_parquet_footer_is_an_error_naming_it_and_its_scan(
    spark: Any, data: Path, executor: str
) -> None:
    """The footers are read before the run (statistics, row counts): a file that is no parquet
    fails the scan with the file named, not with pyarrow's exception."""
    foreign = data / "t" / "part-3.parquet"
    foreign.write_text("not parquet\n")
    storage = {"q": {"type": "queue"}, "fs": {"type": "fs", "root": str(data)}}
    plan = parse_plan({"storage": storage, "query": [SCAN, PROJECT, COUNT, STORE]})
    with pytest.raises(ExecutionError) as caught:
        run_plan(plan, executor=executor, **({"spark": spark} if executor == "spark" else {}))
    assert (caught.value.operator_id, caught.value.operator_kind) == ("1", "scan")
    assert f"{foreign}: not a readable parquet file" in caught.value.message
    assert caught.value.hint == "a truncated or partly written file has no footer; rewrite it"
