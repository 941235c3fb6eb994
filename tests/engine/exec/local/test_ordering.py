"""The local order and limit operators on hand-built batches, and their corpus cases."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from corpus import check_case, load_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import ExecutionError
from engine.exec.local.ordering import create_limit, create_order, runs_of, sort_indices
from engine.exec.local.registry import ExecContext
from engine.exec.protocol import BatchSource, FragmentExecutor
from engine.plan.operators import Limit, Order


def order_plan(*orderings: dict[str, Any], within: str | None = None) -> Order:
    body: dict[str, Any] = {"@id": 2, "op": "order", "orderings": list(orderings)}
    if within is not None:
        body["within"] = within
    return Order.model_validate(body)


def run_order(
    plan: Order, batches: list[pa.RecordBatch], ctx: ExecContext | None = None
) -> list[pa.RecordBatch]:
    op = create_order(plan, [BatchSource("1", batches)], ctx or ExecContext())
    return list(FragmentExecutor(op).batches())


def rows(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    if not batches:
        return []
    return pa.concat_tables(
        [pa.Table.from_batches([b]) for b in batches], promote_options="permissive"
    ).to_pylist()


KEYS = [2, None, 1, None, 2, 1]  # i = 0..5; ties show stability


def keyed() -> list[pa.RecordBatch]:
    return [pa.record_batch({"k": pa.array(KEYS, pa.int64()), "i": list(range(6))})]


@pytest.mark.parametrize(
    ("order", "nulls", "expected"),
    [
        ("asc", None, [1, 3, 2, 5, 0, 4]),  # nulls first by default (D19)
        ("desc", None, [1, 3, 0, 4, 2, 5]),  # still first for desc (D21)
        ("asc", "last", [2, 5, 0, 4, 1, 3]),  # T20
        ("desc", "last", [0, 4, 2, 5, 1, 3]),  # T19
        ("desc", "first", [1, 3, 0, 4, 2, 5]),  # T18
        ("DESC", "LAST", [0, 4, 2, 5, 1, 3]),  # any case
    ],
)
def test_direction_and_null_collation(order: str, nulls: str | None, expected: list[int]) -> None:
    ordering = {"order": order, "expr": "k"}
    if nulls is not None:
        ordering["nullCollation"] = nulls
    out = rows(run_order(order_plan(ordering), keyed()))
    assert [r["i"] for r in out] == expected


def test_several_keys_each_with_its_own_direction_and_nulls() -> None:
    batch = pa.record_batch(
        {
            "a": pa.array([1, 1, 2, 1, 2, None], pa.int64()),
            "b": pa.array(["x", None, "y", "z", None, "w"]),
            "i": list(range(6)),
        }
    )
    plan = order_plan(
        {"order": "asc", "expr": "a", "nullCollation": "last"},
        {"order": "desc", "expr": "b", "nullCollation": "first"},
    )
    assert [r["i"] for r in rows(run_order(plan, [batch]))] == [1, 3, 0, 4, 2, 5]


def test_sort_key_is_an_expression_over_nested_fields() -> None:
    batch = pa.record_batch({"r": pa.array([{"p": 3, "q": 1}, {"p": 1, "q": 1}, {"p": 1, "q": 5}])})
    plan = order_plan({"order": "desc", "expr": "r.p + r.q"})
    assert [r["r"] for r in rows(run_order(plan, [batch]))] == [
        {"p": 1, "q": 5},
        {"p": 3, "q": 1},
        {"p": 1, "q": 1},
    ]


def test_missing_sort_field_sorts_as_null() -> None:
    batch = pa.record_batch({"i": [1, 2]})
    plan = order_plan({"order": "desc", "expr": "nothing.here"})
    assert [r["i"] for r in rows(run_order(plan, [batch]))] == [1, 2]


def test_within_sorts_inside_each_run_and_keeps_runs_in_place() -> None:
    batch = pa.record_batch(
        {
            "seg": pa.array([5, 5, 5, 1, 1, 5, None, None], pa.int64()),
            "k": [3, 1, 2, 9, 8, 0, 7, 6],
        }
    )
    plan = order_plan({"order": "asc", "expr": "k"}, within="seg")
    out = rows(run_order(plan, [batch]))
    assert [(r["seg"], r["k"]) for r in out] == [
        (5, 1),
        (5, 2),
        (5, 3),
        (1, 8),
        (1, 9),
        (5, 0),  # a later run of the same value is a segment of its own
        (None, 6),
        (None, 7),
    ]


def test_runs_of_compare_maps_deeply() -> None:
    values = pa.array([{"a": 1}, {"a": 1}, {"a": 2}, None, None, {"a": 1}])
    assert runs_of(values).tolist() == [0, 0, 1, 2, 2, 3]


def test_many_batches_with_a_schema_change_are_sorted_together() -> None:
    batches = [
        pa.record_batch({"k": [5, 3]}),
        pa.record_batch({"k": [4], "extra": ["e"]}),
        pa.record_batch({"k": pa.array([None, 1], pa.int64())}),
    ]
    out = rows(run_order(order_plan({"expr": "k"}), batches))
    assert out == [
        {"k": None, "extra": None},
        {"k": 1, "extra": None},
        {"k": 3, "extra": None},
        {"k": 4, "extra": "e"},
        {"k": 5, "extra": None},
    ]


def test_output_is_cut_into_batches_of_batch_rows() -> None:
    batches = [pa.record_batch({"k": list(range(i * 10, i * 10 + 10))[::-1]}) for i in range(3)]
    out = run_order(order_plan({"expr": "k"}), batches, ExecContext(batch_rows=7))
    assert [b.num_rows for b in out] == [7, 7, 7, 7, 2]
    assert [k for b in out for k in b.column("k").to_pylist()] == list(range(30))


def test_empty_input_gives_no_records() -> None:
    empty = pa.record_batch({"k": pa.array([], pa.int64())})
    assert rows(run_order(order_plan({"expr": "k"}), [empty])) == []
    assert run_order(order_plan({"expr": "k"}), []) == []


def test_ordering_by_a_map_is_an_error_naming_the_operator() -> None:
    batch = pa.record_batch({"m": pa.array([{"a": 1}])})
    with pytest.raises(ExecutionError) as raised:
        run_order(order_plan({"expr": "m"}), [batch])
    assert raised.value.operator_kind == "order"
    assert "cannot order by" in str(raised.value)


def test_sort_indices_without_keys_is_the_identity_within_runs() -> None:
    assert sort_indices([(pa.nulls(3), "asc", "first")]).to_pylist() == [0, 1, 2]


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.one_of(st.none(), st.integers(-3, 3)), max_size=40),
    cut=st.integers(min_value=1, max_value=9),
    order=st.sampled_from(["asc", "desc"]),
    nulls=st.sampled_from(["first", "last"]),
)
def test_order_is_a_stable_sort(keys: list[int | None], cut: int, order: str, nulls: str) -> None:
    values = pa.array(keys, pa.int64())
    table = pa.table({"k": values, "i": pa.array(range(len(keys)), pa.int64())})
    batches = table.to_batches(max_chunksize=cut)

    def key(i: int) -> tuple[int, int]:
        value = keys[i]
        null_rank = (
            (0 if nulls == "first" else 1) if value is None else (1 if nulls == "first" else 0)
        )
        return null_rank, 0 if value is None else (value if order == "asc" else -value)

    expected = sorted(range(len(keys)), key=key)
    plan = order_plan({"order": order, "expr": "k", "nullCollation": nulls})
    out = rows(run_order(plan, batches))
    assert [r["i"] for r in out] == expected


# -- limit ------------------------------------------------------------------------------------


def counting_source(batches: list[pa.RecordBatch], pulled: list[int]) -> BatchSource:
    def generate() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            pulled.append(batch.num_rows)
            yield batch

    return BatchSource("1", generate)


def run_limit(first: int, last: int | None, batches: list[pa.RecordBatch]) -> list[int]:
    plan = Limit(id="2", first=first, last=last)
    op = create_limit(plan, [BatchSource("1", batches)], ExecContext())
    return [i for b in FragmentExecutor(op).batches() for i in b.column(0).to_pylist()]


def numbered(*sizes: int) -> list[pa.RecordBatch]:
    out, start = [], 0
    for size in sizes:
        out.append(pa.record_batch({"i": pa.array(range(start, start + size), pa.int64())}))
        start += size
    return out


@pytest.mark.parametrize(
    ("first", "last", "expected"),
    [
        (0, 2, [0, 1]),  # T07
        (1, 2, [1]),  # T08
        (3, 10, [3]),  # T09
        (1, 1, []),  # T10
        (0, 0, []),  # D16
        (2, None, [2, 3]),  # D17
    ],
)
def test_limit_keeps_first_up_to_last(first: int, last: int | None, expected: list[int]) -> None:
    assert run_limit(first, last, numbered(4)) == expected


def test_limit_spans_batches() -> None:
    assert run_limit(2, 7, numbered(3, 0, 1, 4, 5)) == [2, 3, 4, 5, 6]


def test_limit_stops_reading_its_input_past_last() -> None:
    pulled: list[int] = []
    op = create_limit(
        Limit(id="2", last=4), [counting_source(numbered(3, 3, 3, 3), pulled)], ExecContext()
    )
    out = [i for b in FragmentExecutor(op).batches() for i in b.column(0).to_pylist()]
    assert out == [0, 1, 2, 3]
    assert pulled == [3, 3]


def test_limit_zero_reads_nothing() -> None:
    pulled: list[int] = []
    op = create_limit(Limit(id="2", last=0), [counting_source(numbered(3), pulled)], ExecContext())
    assert FragmentExecutor(op).run().num_rows == 0
    assert pulled == []


def test_limit_passes_schema_changes_through() -> None:
    batches = [pa.record_batch({"a": [1, 2]}), pa.record_batch({"a": [3], "b": ["x"]})]
    op = create_limit(Limit(id="2", first=1), [BatchSource("1", batches)], ExecContext())
    assert FragmentExecutor(op).run().to_pylist() == [{"a": 2, "b": None}, {"a": 3, "b": "x"}]


@given(
    sizes=st.lists(st.integers(0, 6), max_size=6),
    first=st.integers(0, 20),
    last=st.one_of(st.none(), st.integers(0, 20)),
)
def test_limit_is_a_slice(sizes: list[int], first: int, last: int | None) -> None:
    everything = list(range(sum(sizes)))
    assert run_limit(first, last, numbered(*sizes)) == everything[first:last]


# -- corpus ---------------------------------------------------------------------------------

CASES = {case["id"]: case for case in load_cases()}


@pytest.mark.parametrize(
    "case_id", ["T07", "T08", "T09", "T10", "D16", "D17", "D19", "D21", "T18", "T19", "T20"]
)
def test_corpus_case(case_id: str) -> None:
    check_case(CASES[case_id], executor="local")
