"""segment + collapsingaggregate fused into one hash aggregation gives what the two operators give."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import parse_plan, run_plan
from engine.errors import ExecutionError
from engine.exec.local.aggregate import create_collapsing
from engine.exec.local.executor import LocalExecutor
from engine.exec.local.registry import ExecContext
from engine.exec.local.segment import create_segment
from engine.exec.local.segment_aggregate import SegmentAggregateOperator
from engine.exec.protocol import BatchSource, FragmentExecutor
from engine.plan.operators import CollapsingAggregate, Segment

SCHEMA = pa.schema(
    [
        ("g", pa.int64()),
        ("h", pa.string()),
        ("k", pa.list_(pa.int64())),
        ("x", pa.int64()),
        ("y", pa.float64()),
        ("t", pa.bool_()),
    ]
)


def _ops(
    exprs: list[str], collapse: dict[str, Any], ref: str = "seg"
) -> tuple[Segment, CollapsingAggregate]:
    segment = Segment(id="2", ref=ref, exprs=exprs)
    op = CollapsingAggregate.model_validate(
        {"@id": 3, "op": "collapsingaggregate", "input": 2, "within": ref, **collapse}
    )
    return segment, op


def unfused(
    segment: Segment, op: CollapsingAggregate, batches: list[pa.RecordBatch], ctx: ExecContext
):
    grouped = create_segment(segment, [BatchSource("1", batches)], ctx)
    return FragmentExecutor(create_collapsing(op, [grouped], ctx)).run().to_pylist()


def fused(
    segment: Segment, op: CollapsingAggregate, batches: list[pa.RecordBatch], ctx: ExecContext
):
    operator = SegmentAggregateOperator(segment, op, BatchSource("1", batches), ctx)
    return FragmentExecutor(operator).run().to_pylist()


record = st.fixed_dictionaries(
    {
        "g": st.one_of(st.none(), st.integers(-2, 3)),
        "h": st.one_of(st.none(), st.sampled_from(["a", "b", ""])),
        "k": st.one_of(st.none(), st.lists(st.integers(0, 1), max_size=2)),
        "x": st.one_of(st.none(), st.integers(-(2**40), 2**40)),
        "y": st.one_of(st.none(), st.integers(-64, 64).map(lambda i: i / 4)),  # sums are exact
        "t": st.one_of(st.none(), st.booleans()),
    }
)
AGGREGATES = [
    "count(1)",
    "count(x)",
    "sum(x)",
    "sum(y)",
    "min(h)",
    "max(y)",
    "avg(x)",
    "count_distinct(h)",
    "sum(x) / count(1)",
    "min(x) + max(x)",
    "count(1) + g",  # a field outside the aggregates: read from the carried record
]


@settings(max_examples=300, deadline=None)
@given(
    records=st.lists(record, max_size=40),
    cuts=st.lists(st.integers(0, 40), max_size=3),
    keys=st.lists(st.sampled_from(["g", "h", "k", "g + 1"]), max_size=3, unique=True),
    aggregates=st.lists(st.sampled_from(AGGREGATES), min_size=0, max_size=4),
    carryovers=st.lists(st.sampled_from(["g", "h", "k", "x", "t"]), max_size=3, unique=True),
    target=st.booleans(),
    batch_rows=st.sampled_from([1, 3, 65_536]),
)
def test_fused_equals_segment_then_collapse(
    records: list[dict[str, Any]],
    cuts: list[int],
    keys: list[str],
    aggregates: list[str],
    carryovers: list[str],
    target: bool,
    batch_rows: int,
) -> None:
    bounds = sorted({0, len(records), *(c for c in cuts if c < len(records))})
    batches = [
        pa.RecordBatch.from_pylist(records[start:end], schema=SCHEMA)
        for start, end in itertools.pairwise(bounds)
    ] or [pa.RecordBatch.from_pylist([], schema=SCHEMA)]
    collapse = {
        "carryovers": carryovers,
        "aggregations": [{"ref": f"a{i}", "expr": e} for i, e in enumerate(aggregates)],
    }
    if target:
        collapse["target"] = "t"
    segment, op = _ops(keys, collapse)
    assert fused(segment, op, batches, ExecContext(batch_rows=batch_rows)) == unfused(
        segment, op, batches, ExecContext(batch_rows=batch_rows)
    )


def test_groups_in_first_appearance_order_with_last_records_carried() -> None:
    batch = pa.record_batch({"g": ["b", "a", None, "b", "a"], "v": [1, 2, 3, 4, 5]})
    segment, op = _ops(
        ["g"], {"carryovers": ["g", "v"], "aggregations": [{"ref": "s", "expr": "sum(v)"}]}
    )
    expected = [
        {"g": "b", "v": 4, "s": 5},
        {"g": "a", "v": 5, "s": 7},
        {"g": None, "v": 3, "s": 3},
    ]
    assert fused(segment, op, [batch], ExecContext()) == expected
    assert unfused(segment, op, [batch], ExecContext()) == expected


def test_a_group_without_a_true_target_gives_nothing() -> None:
    batch = pa.record_batch({"g": [1, 2, 1, 2], "t": [True, None, False, False], "v": [1, 2, 3, 4]})
    segment, op = _ops(
        ["g"],
        {"target": "t", "carryovers": ["v"], "aggregations": [{"ref": "n", "expr": "count(1)"}]},
    )
    assert fused(segment, op, [batch], ExecContext()) == [{"v": 1, "n": 2}]


def test_no_input_gives_nothing() -> None:
    segment, op = _ops(["g"], {"aggregations": [{"ref": "n", "expr": "count(1)"}]})
    empty = pa.RecordBatch.from_pylist([], schema=SCHEMA)
    assert fused(segment, op, [empty], ExecContext()) == []
    assert fused(segment, op, [], ExecContext()) == []


def test_an_aggregate_of_the_wrong_type_is_the_same_error() -> None:
    segment, op = _ops(["g"], {"aggregations": [{"ref": "s", "expr": "sum(h)"}]})
    batch = pa.record_batch({"g": [1], "h": ["a"]})
    errors = []
    for run in (fused, unfused):
        with pytest.raises(ExecutionError, match="sum\\(\\) needs numbers") as raised:
            run(segment, op, [batch], ExecContext())
        errors.append(str(raised.value))
    assert errors[0] == errors[1]
    assert "operator 3 (collapsingaggregate)" in errors[0]


def _plan(root: Path, collapse: dict[str, Any], *, extra_reader: bool = False) -> dict[str, Any]:
    query = [
        {"@id": 1, "op": "scan", "storageengine": "fs", "ref": "f", "selection": {"path": "/t"}},
        {"@id": 2, "op": "segment", "input": 1, "ref": "seg", "exprs": ["f.g"]},
        {"@id": 3, "op": "collapsingaggregate", "input": 2, "within": "seg", **collapse},
        {"@id": 4, "op": "order", "input": 3, "orderings": [{"expr": "f.g", "order": "ASC"}]},
        {"@id": 5, "op": "store", "input": 4, "storageengine": "q", "target": {}},
    ]
    if extra_reader:
        query.append({"@id": 6, "op": "store", "input": 2, "storageengine": "q", "target": {}})
    return {"storage": {"fs": {"type": "fs", "root": str(root)}, "q": {"type": "queue"}},
            "query": query}  # fmt: skip


SUM = {"carryovers": ["f.g"], "aggregations": [{"ref": "s", "expr": "sum(f.x)"}]}


@pytest.mark.parametrize(
    ("collapse", "extra_reader", "fuses"),
    [
        (SUM, False, True),
        ({**SUM, "target": "f.t"}, False, True),
        (SUM, True, False),  # the segment's output is read elsewhere too
        ({**SUM, "carryovers": ["seg"]}, False, False),  # reads the group number
        ({**SUM, "within": "f.g"}, False, False),  # runs of another field
    ],
)
def test_which_plans_fuse(collapse: dict[str, Any], extra_reader: bool, fuses: bool) -> None:
    plan = parse_plan(_plan(Path("/data"), collapse, extra_reader=extra_reader))
    executor = LocalExecutor(plan, ExecContext())
    assert (executor._fused_segment(plan.operator("3")) is not None) is fuses
    off = LocalExecutor(plan, ExecContext(params={"fuse_segments": False}))
    assert off._fused_segment(plan.operator("3")) is None


def test_a_plan_gives_the_same_records_fused_or_not(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    table = pa.table({"g": [2, 1, 2, None, 1], "x": [1, 2, 3, 4, None], "t": [True] * 5})
    pq.write_table(table, tmp_path / "t" / "part.parquet")
    plan = _plan(tmp_path, SUM)
    records = run_plan(plan).records()
    assert sorted(records, key=str) == sorted(
        [{"f": None, "s": 4}, {"f": {"g": 1}, "s": 2}, {"f": {"g": 2}, "s": 4}], key=str
    )
    assert run_plan(plan, params={"fuse_segments": False}).records() == records
