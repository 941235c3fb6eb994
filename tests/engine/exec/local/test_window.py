"""The local windowframe operator: window members, segment/position refs, within runs, batching."""

from __future__ import annotations

import itertools
from typing import Any

import pyarrow as pa
import pytest
from corpus import check_case, load_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import ExecutionError
from engine.exec.local.registry import ExecContext
from engine.exec.local.window import create_windowframe
from engine.exec.protocol import BatchSource, FragmentExecutor
from engine.plan.operators import WindowFrame


def run_window(
    plan: dict[str, Any], batches: list[pa.RecordBatch], **context: Any
) -> list[pa.RecordBatch]:
    op = WindowFrame.model_validate({"@id": 2, "op": "windowframe", **plan})
    runtime = create_windowframe(op, [BatchSource("1", batches)], ExecContext(**context))
    return list(FragmentExecutor(runtime).batches())


def records(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    return [r for b in batches for r in b.to_pylist()]


def windows(rows: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
    """(id, segment, position) of every output record."""
    return [(r["id"], r["ref"]["segment"], r["ref"]["position"]) for r in rows]


def ids(n: int, **columns: list[Any]) -> pa.RecordBatch:
    return pa.record_batch({"id": list(range(n)), **columns})


def test_the_spec_example_minus_two_to_zero() -> None:
    out = records(run_window({"start": -2, "end": 0}, [ids(5)]))
    assert [r["ref"]["segment"] for r in out] == [0, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    assert [r["ref"]["position"] for r in out] == [0, -1, 0, -2, -1, 0, -2, -1, 0, -2, -1, 0]
    assert [r["id"] for r in out] == [0, 0, 1, 0, 1, 2, 1, 2, 3, 2, 3, 4]


def test_windows_stay_inside_their_within_run_and_numbers_stay_global() -> None:
    batch = ids(5, v=[0, 0, 1, 1, 2])
    out = windows(records(run_window({"within": "v", "start": -1, "end": 2}, [batch])))
    assert out == [
        (0, 0, 0), (1, 0, 1), (0, 1, -1), (1, 1, 0),
        (2, 2, 0), (3, 2, 1), (2, 3, -1), (3, 3, 0), (4, 4, 0),
    ]  # fmt: skip


def test_within_is_a_run_not_a_group() -> None:
    batch = ids(3, v=["a", "b", "a"])
    out = windows(records(run_window({"within": "v", "start": -1, "end": 1}, [batch])))
    assert out == [(0, 0, 0), (1, 1, 0), (2, 2, 0)]


def test_a_missing_start_is_unbounded_before() -> None:
    out = windows(records(run_window({"end": 0}, [ids(3)])))
    assert out == [(0, 0, 0), (0, 1, -1), (1, 1, 0), (0, 2, -2), (1, 2, -1), (2, 2, 0)]


def test_a_missing_end_is_unbounded_after() -> None:
    out = windows(records(run_window({"start": 1}, [ids(3)])))
    assert out == [(1, 0, 1), (2, 0, 2), (2, 1, 1)]  # the last record's window is empty


def test_custom_ref_names_write_nested_fields() -> None:
    plan = {"start": 0, "end": 0, "ref": {"segment": "w.seg", "position": "w.pos"}}
    out = records(run_window(plan, [ids(2)]))
    assert out == [{"id": 0, "w": {"seg": 0, "pos": 0}}, {"id": 1, "w": {"seg": 1, "pos": 0}}]


def test_runs_spanning_batches_with_a_schema_change_match_one_batch() -> None:
    whole = records(
        run_window({"within": "g", "start": -1, "end": 1}, [ids(6, g=[1, 1, 1, 2, 2, 3])])
    )
    split = [
        pa.record_batch({"id": [0, 1], "g": [1, 1]}),
        pa.record_batch({"id": [2], "g": [1], "extra": ["x"]}),
        pa.record_batch({"id": pa.array([], pa.int64()), "g": pa.array([], pa.int64())}),
        pa.record_batch({"id": [3, 4, 5], "g": [2, 2, 3]}),
    ]
    out = records(run_window({"within": "g", "start": -1, "end": 1}, split))
    assert windows(out) == windows(whole)
    assert [r.get("extra") for r in out if r["id"] == 2] == ["x", "x"]


def test_output_batches_hold_at_most_batch_rows() -> None:
    out = run_window({"start": -3, "end": 3}, [ids(10)], batch_rows=4)
    assert all(b.num_rows <= 4 for b in out)
    assert sum(b.num_rows for b in out) == sum(min(9, k + 3) - max(0, k - 3) + 1 for k in range(10))


def test_an_empty_input_gives_an_empty_typed_batch() -> None:
    out = run_window({"start": -1, "end": 0}, [pa.record_batch({"id": pa.array([], pa.int64())})])
    assert sum(b.num_rows for b in out) == 0
    assert out[0].schema.names == ["id", "ref"]


def test_more_input_than_the_buffer_allows_is_an_error_not_lost_rows() -> None:
    batches = [ids(100), ids(100)]
    with pytest.raises(ExecutionError) as raised:
        run_window({"start": -1, "end": 0}, batches, max_buffered_bytes=1000)
    assert raised.value.operator_id == "2" and raised.value.operator_kind == "windowframe"
    assert "max_buffered_bytes" in (raised.value.hint or "")


def test_with_within_only_the_open_run_is_buffered() -> None:
    batches = [ids(100, g=[i // 10 for i in range(100)]) for _ in range(5)]
    out = run_window({"within": "g", "start": 0, "end": 0}, batches, max_buffered_bytes=2000)
    assert sum(b.num_rows for b in out) == 500


def reference(values: list[Any], start: int | None, end: int | None) -> list[tuple[int, int, int]]:
    """Windows by the definition: members k+start <= j <= k+end inside k's run."""
    n = len(values)
    out = []
    for k in range(n):
        first = k
        while first > 0 and values[first - 1] == values[k]:
            first -= 1
        last = k
        while last < n - 1 and values[last + 1] == values[k]:
            last += 1
        low = first if start is None else max(first, k + start)
        high = last if end is None else min(last, k + end)
        out += [(j, k, j - k) for j in range(low, high + 1)]
    return out


@st.composite
def window_cases(draw: st.DrawFn) -> tuple[list[Any], int | None, int | None, list[int]]:
    values = draw(st.lists(st.sampled_from([None, 1, 2, "x"]), max_size=25))
    start = draw(st.none() | st.integers(-4, 3))
    end = draw(st.none() | st.integers(-1, 4))
    if start is None and end is None:
        end = 0
    if start is not None and end is not None and start > end:
        start, end = end, start
    cuts = sorted(draw(st.lists(st.integers(0, len(values)), max_size=4)))
    return values, start, end, cuts


@given(window_cases(), st.integers(1, 7))
@settings(max_examples=80, deadline=None)
def test_windows_match_the_definition_for_any_batching(
    case: tuple[list[Any], int | None, int | None, list[int]], batch_rows: int
) -> None:
    values, start, end, cuts = case
    keys = [str(v) if v is not None else None for v in values]
    bounds = [0, *cuts, len(values)]
    batches = [
        pa.record_batch({"id": list(range(a, b)), "v": pa.array(keys[a:b], pa.string())})
        for a, b in itertools.pairwise(bounds)
    ]
    plan = {"within": "v", "start": start, "end": end}
    plan = {k: v for k, v in plan.items() if v is not None}
    out = run_window(plan, batches, batch_rows=batch_rows)
    assert all(b.num_rows <= batch_rows for b in out)
    assert windows(records(out)) == reference(keys, start, end)


CASES = {case["id"]: case for case in load_cases()}


@pytest.mark.parametrize("case_id", ["T01", "T02", "T03", "T04", "T05", "T06", "D29"])
def test_corpus_case(case_id: str) -> None:
    check_case(CASES[case_id], executor="local")
