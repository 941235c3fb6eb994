"""run_spark end to end: stores as actions, fan-out, per-operator metrics from observe, outputs of
plans without a store, errors naming the operator, the session's ownership, and a run's scans
built side by side."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from engine import run_plan
from engine.errors import ExecutionError
from engine.exec.spark import executor
from engine.exec.spark.compiler import SparkCompiler
from engine.plan import parse_plan
from engine.run import build_engines

RECORDS = [{"g": 1, "x": 5}, {"g": 2, "x": 1}, {"g": 1, "x": 7}, {"g": None, "x": 3}]


def plan_of(*ops: dict[str, Any]) -> dict[str, Any]:
    return {"storage": {"q": {"type": "queue"}}, "query": list(ops)}


def test_fan_out_to_two_stores_with_metrics(spark: Any) -> None:
    plan = plan_of(
        {"@id": 1, "op": "constant", "content": RECORDS},
        {"@id": 2, "op": "filter", "input": 1, "expr": "x > 2"},
        {"@id": 3, "op": "store", "input": 2, "storageengine": "q", "target": {"number": 0}},
        {"@id": 4, "op": "order", "input": 2, "orderings": [{"order": "desc", "expr": "x"}]},
        {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {"number": 1}},
    )
    result = run_plan(plan, executor="spark", spark=spark)
    assert result.records() == [
        {"g": 1, "x": 5},
        {"g": 1, "x": 7},
        {"g": None, "x": 3},
        {"g": 1, "x": 7},
        {"g": 1, "x": 5},
        {"g": None, "x": 3},
    ]
    assert [(s.operator_id, s.row_count) for s in result.stores] == [("3", 3), ("5", 3)]
    assert result.metrics["1"]["rows"] == 4
    assert result.metrics["2"]["rows"] == 3
    assert result.metrics["5"]["rows"] == 3


def test_one_to_one_operators_count_their_inputs_rows(spark: Any) -> None:
    plan = plan_of(
        {"@id": 1, "op": "constant", "content": RECORDS},
        {"@id": 2, "op": "filter", "input": 1, "expr": "x > 2"},
        {"@id": 3, "op": "transform", "input": 2, "transforms": [{"ref": "y", "expr": "x * 2"}]},
        {"@id": 4, "op": "segment", "input": 3, "ref": "seg", "exprs": ["g"]},
        {"@id": 5, "op": "order", "input": 4, "orderings": [{"order": "desc", "expr": "x"}]},
        {"@id": 6, "op": "project", "input": 5, "projections": [{"ref": "output.y", "expr": "y"}]},
        {"@id": 7, "op": "limit", "input": 6, "first": 0, "last": 2},
        {"@id": 8, "op": "store", "input": 7, "storageengine": "q", "target": {"number": 0}},
    )
    result = run_plan(plan, executor="spark", spark=spark)
    assert result.records() == [{"y": 14}, {"y": 10}]
    rows = {op: m["rows"] for op, m in result.metrics.items()}
    # transform and segment count their input's rows, not observed. The planner moves the limit
    # below the project, whose count is then the limit's; the order feeding the limit runs as
    # Spark's top-N, which reads every record of its input: the order counts its input's.
    assert rows == {"1": 4, "2": 3, "3": 3, "4": 3, "5": 3, "7": 2, "6": 2, "8": 2}


def test_a_plan_without_store_returns_its_last_operator(spark: Any) -> None:
    plan = plan_of(
        {"@id": 1, "op": "constant", "content": RECORDS},
        {"@id": 2, "op": "segment", "input": 1, "ref": "seg", "exprs": ["g"]},
    )
    result = run_plan(plan, executor="spark", spark=spark)
    assert [(r["x"], r["seg"]) for r in result.records()] == [(5, 1), (7, 1), (1, 2), (3, 3)]
    assert list(result.outputs) == ["2"]


def test_a_failing_operator_is_named(spark: Any) -> None:
    plan = plan_of(
        {"@id": 1, "op": "constant", "content": [{"s": "a"}]},
        {
            "@id": 7,
            "op": "collapsingaggregate",
            "input": 1,
            "aggregations": [{"ref": "t", "expr": "sum(s)"}],
        },
        {"@id": 8, "op": "store", "input": 7, "storageengine": "q", "target": {}},
    )
    with pytest.raises(ExecutionError) as raised:
        run_plan(plan, executor="spark", spark=spark)
    assert raised.value.operator_id == "7"
    assert raised.value.operator_kind == "collapsingaggregate"
    assert "sum() needs numbers" in str(raised.value)


class _RecordingSession:
    """The test session, with ``stop`` recorded instead of done."""

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self.stopped = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spark, name)

    def stop(self) -> None:
        self.stopped += 1


def test_a_session_the_run_started_is_stopped_and_a_given_one_is_not(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = _RecordingSession(spark)
    monkeypatch.setattr("engine.exec.spark.session.create_session", lambda *a, **k: started)
    monkeypatch.setattr("engine.exec.spark.session.running_session", lambda: None)
    plan = parse_plan(
        plan_of(
            {"@id": 1, "op": "constant", "content": RECORDS[:1]},
            {"@id": 2, "op": "store", "input": 1, "storageengine": "q", "target": {}},
        )
    )
    result = executor.run_spark(
        plan, engines=build_engines(plan, base_dir=None, classpath=[]), params={}
    )
    assert result.records() == RECORDS[:1] and started.stopped == 1
    given = _RecordingSession(spark)
    executor.run_spark(
        plan, engines=build_engines(plan, base_dir=None, classpath=[]), params={}, spark=given
    )
    assert given.stopped == 0


def _two_scans_of(root: Path, left: str, right: str) -> dict[str, Any]:
    """Two scans under ``root``, their union (all records, in plan order) into a queue."""
    return {
        "storage": {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}},
        "query": [
            {
                "@id": 1,
                "op": "scan",
                "storageengine": "fs",
                "ref": "r",
                "selection": {"path": left},
            },
            {
                "@id": 2,
                "op": "scan",
                "storageengine": "fs",
                "ref": "r",
                "selection": {"path": right},
            },
            {"@id": 3, "op": "union", "inputs": [1, 2]},
            {"@id": 4, "op": "filter", "input": 3, "expr": "r.a > 0"},
            {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {"number": 0}},
        ],
    }


def test_a_runs_scans_are_built_side_by_side(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each scan waits in its build until the other one is building too: run one after the
    other, the barrier would break."""
    (tmp_path / "a.json").write_text('{"a": 1}\n{"a": 2}\n')
    (tmp_path / "b.json").write_text('{"a": 3}\n')
    both = threading.Barrier(2, timeout=60)
    threads: list[str] = []
    visit_scan = SparkCompiler.visit_scan

    def meeting(self: SparkCompiler, op: Any, inputs: Any) -> Any:
        threads.append(threading.current_thread().name)
        both.wait()
        return visit_scan(self, op, inputs)

    monkeypatch.setattr(SparkCompiler, "visit_scan", meeting)
    result = run_plan(_two_scans_of(tmp_path, "a.json", "b.json"), executor="spark", spark=spark)
    assert result.records() == [{"r": {"a": 1}}, {"r": {"a": 2}}, {"r": {"a": 3}}]
    assert {op: m["rows"] for op, m in result.metrics.items() if op in ("1", "2")} == {
        "1": 2,
        "2": 1,
    }
    assert len(threads) == 2 and all(t.startswith(executor.SCAN_THREAD_PREFIX) for t in threads)


def test_one_scan_is_built_in_the_runs_thread() -> None:
    assert executor.build_apart([], SparkCompiler.compile) == {}
    one = parse_plan(_two_scans_of(Path("/data"), "a.json", "b.json")).query[:1]
    assert executor.build_apart(one, SparkCompiler.compile) == {}


def test_a_file_two_scans_read_that_vanishes_names_the_first_scan(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both scans list the file and are built side by side; Spark's read of the file fails in
    the store's job, and the failure names the scan that comes first in the plan, every time."""
    data = tmp_path / "d"
    data.mkdir()
    visit_store = SparkCompiler.visit_store

    def remove_then_store(self: SparkCompiler, op: Any, inputs: Any) -> Any:
        (data / "b.json").unlink()
        return visit_store(self, op, inputs)

    monkeypatch.setattr(SparkCompiler, "visit_store", remove_then_store)
    for _ in range(3):
        (data / "a.json").write_text('{"a": 1}\n')
        (data / "b.json").write_text('{"a": 2}\n')
        with pytest.raises(ExecutionError) as raised:
            run_plan(_two_scans_of(tmp_path, "d", "d"), executor="spark", spark=spark)
        assert raised.value.operator_id == "1", str(raised.value)
        assert f"{data}/b.json: the file no longer exists" in str(raised.value)
