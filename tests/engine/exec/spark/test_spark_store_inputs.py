"""A project whose one reader is a store builds no sequence column
(:func:`engine.exec.spark.compiler.store_inputs`): the store sorts, where it keeps an order, by
the sequence of the project's input (Spark carries it through the project for the sort), and
nothing drops the column afterwards; an order whose keys that project copies builds no sequence
either, the store sorting by the copies (:func:`~engine.exec.spark.compiler.store_sorted_orders`),
and a top-N limit that project reads numbers its records no more
(:func:`~engine.exec.spark.compiler.store_read_limits`). The records and their order stay the
local executor's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from py4j_calls import warm_run, without_property
from spark_settings import spark_setting

from engine.exec.spark.executor import SparkPlanRun
from engine.exec.spark.names import SEQ_COLUMN
from engine.exec.spark.one_task_sort import ONE_TASK_SORT_BYTES
from engine.plan import parse_plan
from engine.planner.properties.decisions import (
    store_inputs,
    store_read_limits,
    store_sorted_orders,
)
from engine.run import build_engines, run_plan

SCAN = {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "e", "selection": {"path": "t"}}
ORDER = {
    "@id": 2,
    "op": "order",
    "input": 1,
    "orderings": [{"order": "desc", "expr": "e.v"}, {"order": "asc", "expr": "e.k"}],
}
PROJECT = {
    "@id": 3,
    "op": "project",
    "input": 2,
    "projections": [{"ref": "output.k", "expr": "e.k"}, {"ref": "output.twice", "expr": "e.v * 2"}],
}
ROWS = pa.table({"k": ["a", "b", "c", "d", "e"], "v": [3, 1, 3, None, 2]})


def plan_of(*ops: dict[str, Any], root: Path, store: str = "q", readers: int = 1) -> Any:
    storage = {
        "q": {"type": "queue"},
        "fs": {"type": "fs", "root": str(root), "writable": True},
    }
    last = ops[-1]["@id"]
    target = {} if store == "q" else {"path": "out", "format": "parquet"}
    stores = [
        {"@id": 90 + i, "op": "store", "input": last, "storageengine": store, "target": target}
        for i in range(readers)
    ]
    return parse_plan({"storage": storage, "query": [*ops, *stores]})


def stored_records(result: Any, store: str) -> list[dict[str, Any]]:
    """The records a run's one store kept: the queue's, or those of its parquet files in order."""
    if store == "q":
        return result.records()
    (written,) = result.stores
    files = sorted(written.files) if written.files else [written.location]
    return [r for f in files for r in pq.read_table(f).to_pylist()]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "t").mkdir()
    pq.write_table(ROWS, tmp_path / "t" / "part-0.parquet")
    return tmp_path


def test_only_a_project_read_by_one_store_alone_is_a_store_input(root: Path) -> None:
    assert store_inputs(plan_of(SCAN, ORDER, PROJECT, root=root)) == {"3"}
    assert store_inputs(plan_of(SCAN, ORDER, PROJECT, root=root, readers=2)) == set()
    transform = {"@id": 3, "op": "transform", "input": 2, "transforms": [{"ref": "x", "expr": "1"}]}
    assert store_inputs(plan_of(SCAN, ORDER, transform, root=root)) == set()


@pytest.mark.parametrize("store", ["q", "fs"])
def test_the_store_keeps_the_order_of_a_project_without_a_sequence(
    store: str, root: Path, spark: Any
) -> None:
    plan = plan_of(SCAN, ORDER, PROJECT, root=root, store=store)
    engines = build_engines(plan, base_dir=None, classpath=[])
    (frame,) = SparkPlanRun(plan, spark, engines=engines, params={}).compile_frames().values()
    assert SEQ_COLUMN not in frame.columns
    result = run_plan(plan, executor="spark", spark=spark)
    # Drill's default null collation puts nulls first, in either direction.
    expected = [
        {"k": "d", "twice": None},
        {"k": "a", "twice": 6},
        {"k": "c", "twice": 6},
        {"k": "e", "twice": 4},
        {"k": "b", "twice": 2},
    ]
    assert (
        run_plan(plan_of(SCAN, ORDER, PROJECT, root=root), executor="local").records() == expected
    )
    assert stored_records(result, store) == expected


def test_a_project_read_by_two_stores_keeps_its_sequence(root: Path, spark: Any) -> None:
    plan = plan_of(SCAN, ORDER, PROJECT, root=root, readers=2)
    result = run_plan(plan, executor="spark", spark=spark)
    assert result.records() == run_plan(plan, executor="local").records()


COPIES = {
    "@id": 3,
    "op": "project",
    "input": 2,
    "projections": [
        {"ref": "output.k", "expr": "e.k"},
        {"ref": "output.v", "expr": "e.v"},
        {"ref": "output.twice", "expr": "e.v * 2"},
    ],
}


def test_an_order_whose_keys_its_store_input_copies_is_store_sorted(root: Path) -> None:
    assert store_sorted_orders(plan_of(SCAN, ORDER, COPIES, root=root)) == {"2"}
    # e.v only doubled: the order builds its sequence, the store sorts by it.
    assert store_sorted_orders(plan_of(SCAN, ORDER, PROJECT, root=root)) == set()
    assert store_sorted_orders(plan_of(SCAN, ORDER, COPIES, root=root, readers=2)) == set()
    within = {**ORDER, "within": "e.k"}
    assert store_sorted_orders(plan_of(SCAN, within, COPIES, root=root)) == set()


@pytest.mark.parametrize("store", ["q", "fs"])
@pytest.mark.parametrize(
    "orderings",
    [
        # Ties (a and c) keep their input order; nulls first in either direction by default.
        [{"order": "desc", "expr": "e.v"}],
        [
            {"order": "asc", "expr": "e.v", "nullCollation": "last"},
            {"order": "desc", "expr": "e.k"},
        ],
    ],
)
def test_a_store_sorts_by_the_copies_of_an_orders_keys(
    store: str, orderings: list[dict[str, str]], root: Path, spark: Any
) -> None:
    order = {**ORDER, "orderings": orderings}
    plan = plan_of(SCAN, order, COPIES, root=root, store=store)
    expected = run_plan(plan_of(SCAN, order, COPIES, root=root), executor="local").records()
    assert [r["k"] for r in expected] in (["d", "a", "c", "e", "b"], ["b", "e", "c", "a", "d"])
    result = run_plan(plan, executor="spark", spark=spark)
    assert stored_records(result, store) == expected
    assert result.metrics["2"]["rows"] == 5
    # With Spark's global sort for the store, and sorted by the order's own sequence instead
    # of the copies of its keys: the same records.
    with spark_setting(spark, ONE_TASK_SORT_BYTES, "-1"):
        globally = stored_records(run_plan(plan, executor="spark", spark=spark), store)
        with without_property("store_sorted"):
            by_sequence = stored_records(run_plan(plan, executor="spark", spark=spark), store)
    assert globally == by_sequence == expected


LIMIT = {"@id": 3, "op": "limit", "input": 2, "first": 1, "last": 4}
LIMITED = {**COPIES, "@id": 4, "input": 3}


def test_only_a_limit_a_stores_project_alone_reads_is_read_by_the_store(root: Path) -> None:
    assert store_read_limits(plan_of(SCAN, ORDER, LIMIT, LIMITED, root=root)) == {"3"}
    assert store_read_limits(plan_of(SCAN, ORDER, LIMIT, LIMITED, root=root, readers=2)) == set()
    assert store_read_limits(plan_of(SCAN, ORDER, LIMIT, root=root)) == set()


@pytest.mark.parametrize("store", ["q", "fs"])
def test_a_top_n_a_stores_project_reads_keeps_its_order_unnumbered(
    store: str, root: Path, spark: Any
) -> None:
    plan = plan_of(SCAN, ORDER, LIMIT, LIMITED, root=root, store=store)
    expected = run_plan(plan_of(SCAN, ORDER, LIMIT, LIMITED, root=root), executor="local")
    assert [r["k"] for r in expected.records()] == ["a", "c", "e"]
    result = run_plan(plan, executor="spark", spark=spark)
    assert stored_records(result, store) == expected.records()
    assert result.metrics["3"]["rows"] == 3
    # The top rows numbered again: the same records.
    with without_property("store_read_limit"):
        again = run_plan(plan, executor="spark", spark=spark)
    assert stored_records(again, store) == expected.records()


def test_an_unordered_flattens_records_are_selected_by_its_one_reader(
    tmp_path: Path, spark: Any
) -> None:
    # Nothing observes the order (a parquet store): the flatten explodes, and the project that
    # reads it selects its own columns through the flattened records (one select for both).
    lines = ['{"k": "x", "tags": [1, 2]}', '{"k": "y", "tags": []}', '{"k": "z", "tags": null}',
             '{"k": "w", "tags": [3]}']  # fmt: skip
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.json").write_text("\n".join(lines) + "\n")
    flatten = {"@id": 2, "op": "flatten", "input": 1, "ref": "tag", "expr": "e.tags"}
    project = {"@id": 3, "op": "project", "input": 2, "projections": [
        {"ref": "output.k", "expr": "e.k"}, {"ref": "output.ten", "expr": "tag * 10"}]}  # fmt: skip
    plan = plan_of(SCAN, flatten, project, root=tmp_path, store="fs")

    def frames(one_reader: bool) -> tuple[int, list[dict[str, Any]]]:
        frames, result = warm_run(plan, spark, emptied=None if one_reader else "one_reader")
        return frames, sorted(stored_records(result, "fs"), key=str)

    through, records = frames(True)
    apart, before = frames(False)
    local = run_plan(plan_of(SCAN, flatten, project, root=tmp_path), executor="local").records()
    assert records == before == sorted(local, key=str)
    assert [r["ten"] for r in sorted(records, key=lambda r: (r["k"], r["ten"] or 0))] == [
        30,
        10,
        20,
        None,  # w, x (twice), z: the null array keeps its record; y's empty one none
    ]
    assert through == apart - 1


@pytest.mark.parametrize(
    "flatten",
    [
        {"ref": "tag", "expr": "e.tags"},
        {"ref": "tag", "expr": "e.tags", "drop": True},
        {"ref": "e.tag", "expr": "e.tags", "drop": True},
        {"ref": "tag", "expr": "e.k"},  # not an array: one record each, carrying the value
    ],
    ids=["beside", "dropped", "into-the-record", "scalar"],
)
def test_an_unordered_flatten_explodes_its_scans_own_columns(
    tmp_path: Path, spark: Any, flatten: dict[str, Any]
) -> None:
    # The scan leaves its columns to the flatten (observed as read, a JSON scan's rows having no
    # footers to count them): no select builds the record below the explode.
    lines = ['{"k": "x", "tags": [1, 2]}', '{"k": "y", "tags": []}', '{"k": "z", "tags": null}',
             '{"k": "w", "tags": [3]}']  # fmt: skip
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.json").write_text("\n".join(lines) + "\n")
    flatten = {"@id": 2, "op": "flatten", "input": 1, **flatten}
    project = {"@id": 3, "op": "project", "input": 2, "projections": [
        {"ref": "output.e", "expr": "e"}, {"ref": "output.tag", "expr": "tag"}]}  # fmt: skip
    plan = plan_of(SCAN, flatten, project, root=tmp_path, store="fs")

    def run(through: bool) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
        frames, result = warm_run(plan, spark, emptied=None if through else "read_through")
        return frames, sorted(stored_records(result, "fs"), key=str), result.metrics

    engines = build_engines(plan, base_dir=None, classpath=[])
    assert SparkPlanRun(plan, spark, engines=engines, params={}).properties["1"].read_through
    frames, records, metrics = run(True)
    frames_apart, records_apart, metrics_apart = run(False)
    local = run_plan(plan, executor="local")
    expected = sorted(stored_records(local, "fs"), key=str)
    assert records == records_apart == expected
    assert metrics == metrics_apart == local.metrics
    assert frames == frames_apart - 1
