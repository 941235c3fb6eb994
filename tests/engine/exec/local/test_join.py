"""The local join operator: types, conditions, null handling, order, deep merge, batching."""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from corpus import check_case, load_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import ExecutionError
from engine.exec.local import join as join_module
from engine.exec.local.join import KeyIndex, create_join, holds, merge_records
from engine.exec.local.registry import ExecContext
from engine.exec.protocol import BatchSource, FragmentExecutor
from engine.plan.operators import Join


def run_join(
    plan: dict[str, Any],
    left: list[pa.RecordBatch],
    right: list[pa.RecordBatch],
    **context: Any,
) -> list[pa.RecordBatch]:
    op = Join.model_validate({"@id": 3, "op": "join", "left": 1, "right": 2, **plan})
    inputs = [BatchSource("1", left), BatchSource("2", right)]
    return list(FragmentExecutor(create_join(op, inputs, ExecContext(**context))).batches())


def joined(
    plan: dict[str, Any], left: list[pa.RecordBatch], right: list[pa.RecordBatch], **context: Any
) -> list[dict[str, Any]]:
    return [r for b in run_join(plan, left, right, **context) for r in b.to_pylist()]


def on(left: str, right: str, relationship: str = "==") -> dict[str, str]:
    return {"relationship": relationship, "left": left, "right": right}


LEFT = pa.record_batch(
    {
        "l": [
            {"k": 1, "a": "L1"},
            {"k": 2, "a": "L2"},
            {"k": 3, "a": "L3"},
            {"k": 2, "a": "L4"},
            {"a": "L5"},
        ]
    }
)
RIGHT = pa.record_batch(
    {
        "r": [
            {"k": 2, "b": "R1"},
            {"k": 5, "b": "R2"},
            {"k": 2, "b": "R3"},
            {"k": 1, "b": "R4"},
            {"b": "R5"},
        ]
    }
)


def pairs(rows: list[dict[str, Any]]) -> list[tuple[str | None, str | None]]:
    return [((r.get("l") or {}).get("a"), (r.get("r") or {}).get("b")) for r in rows]


def test_inner_join_is_left_major_with_matches_in_right_order() -> None:
    out = joined({"conditions": [on("l.k", "r.k")]}, [LEFT], [RIGHT])
    assert pairs(out) == [("L1", "R4"), ("L2", "R1"), ("L2", "R3"), ("L4", "R1"), ("L4", "R3")]


def test_left_join_keeps_unmatched_left_records_in_place() -> None:
    out = joined({"type": "left", "conditions": [on("l.k", "r.k")]}, [LEFT], [RIGHT])
    assert pairs(out) == [
        ("L1", "R4"), ("L2", "R1"), ("L2", "R3"), ("L3", None),
        ("L4", "R1"), ("L4", "R3"), ("L5", None),
    ]  # fmt: skip
    assert out[3] == {"l": {"k": 3, "a": "L3"}, "r": None}


def test_outer_join_appends_unmatched_right_records() -> None:
    out = joined({"type": "outer", "conditions": [on("l.k", "r.k")]}, [LEFT], [RIGHT])
    assert pairs(out)[-2:] == [(None, "R2"), (None, "R5")]
    assert len(out) == 9


def test_all_conditions_must_hold() -> None:
    left = pa.record_batch({"l": [{"x": 1}, {"x": 5}]})
    right = pa.record_batch({"r": [{"y": 3, "z": 1}, {"y": 6, "z": 2}]})
    conditions = [on("l.x", "r.y", "<"), on("l.x", "r.z", "!=")]
    out = joined({"conditions": conditions}, [left], [right])
    assert out == [{"l": {"x": 1}, "r": {"y": 6, "z": 2}}, {"l": {"x": 5}, "r": {"y": 6, "z": 2}}]


def test_equality_and_another_condition_together() -> None:
    conditions = [on("l.k", "r.k"), on("l.a", "r.b", "<")]
    left = pa.record_batch({"l": [{"k": 1, "a": "m"}, {"k": 1, "a": "a"}]})
    right = pa.record_batch({"r": [{"k": 1, "b": "b"}, {"k": 1, "b": "z"}]})
    out = joined({"type": "left", "conditions": conditions}, [left], [right])
    assert [(r["l"]["a"], (r["r"] or {}).get("b")) for r in out] == [
        ("m", "z"),
        ("a", "b"),
        ("a", "z"),
    ]


def test_no_conditions_is_a_cartesian_join() -> None:
    left = pa.record_batch({"a": [1, 2]})
    right = pa.record_batch({"b": ["x", "y", "z"]})
    out = joined({}, [left], [right])
    assert [(r["a"], r["b"]) for r in out] == list(itertools.product([1, 2], ["x", "y", "z"]))


def test_numbers_compare_by_value_and_other_types_never_match() -> None:
    left = pa.record_batch({"k": [1, 2]})
    right = pa.record_batch({"f": [1.0, 2.5], "s": ["1", "2"]})
    assert [r["f"] for r in joined({"conditions": [on("k", "f")]}, [left], [right])] == [1.0]
    assert joined({"conditions": [on("k", "s")]}, [left], [right]) == []
    assert joined({"conditions": [on("k", "s", "<")]}, [left], [right]) == []


def test_maps_compare_deeply_in_conditions() -> None:
    left = pa.record_batch({"l": [{"m": {"a": 1}}, {"m": {"a": 2}}]})
    right = pa.record_batch({"r": [{"m": {"a": 2}}]})
    out = joined({"conditions": [on("l.m", "r.m")]}, [left], [right])
    assert out == [{"l": {"m": {"a": 2}}, "r": {"m": {"a": 2}}}]


def test_records_merge_deeply_and_the_right_value_wins_unless_null() -> None:
    left = pa.record_batch({"m": [{"x": 1, "s": {"p": 1}}, {"x": 2, "s": {"p": 2}}], "v": [1, 2]})
    right = pa.record_batch({"m": [{"y": 9, "s": {"q": 9}}, {"y": 8, "s": None}], "v": [None, 20]})
    assert merge_records(left, right).to_pylist() == [
        {"m": {"x": 1, "s": {"p": 1, "q": 9}, "y": 9}, "v": 1},
        {"m": {"x": 2, "s": {"p": 2, "q": None}, "y": 8}, "v": 20},
    ]


def test_a_field_of_two_kinds_cannot_merge() -> None:
    left = pa.record_batch({"v": [{"a": 1}]})
    right = pa.record_batch({"v": ["text"]})
    with pytest.raises(ExecutionError, match="field 'v'") as raised:
        joined({}, [left], [right])
    assert "rename" in (raised.value.hint or "")


def test_empty_sides() -> None:
    empty_right = pa.record_batch({"r": pa.array([], pa.struct([("k", pa.int64())]))})
    out = joined({"type": "left", "conditions": [on("l.k", "r.k")]}, [LEFT], [empty_right])
    assert pairs(out) == [("L1", None), ("L2", None), ("L3", None), ("L4", None), ("L5", None)]
    out = joined({"type": "outer", "conditions": [on("l.k", "r.k")]}, [], [RIGHT])
    assert pairs(out) == [(None, b) for b in ("R1", "R2", "R3", "R4", "R5")]
    batches = run_join({"conditions": [on("l.k", "r.k")]}, [LEFT], [empty_right])
    assert sum(b.num_rows for b in batches) == 0 and set(batches[0].schema.names) == {"l", "r"}


def test_many_batches_with_a_schema_change_on_both_sides() -> None:
    left = [
        LEFT.slice(0, 2),
        pa.record_batch({"l": [{"k": 3, "a": "L3", "extra": True}]}),
        LEFT.slice(3),
    ]
    right = [RIGHT.slice(0, 3), RIGHT.slice(3)]
    out = joined({"type": "outer", "conditions": [on("l.k", "r.k")]}, left, right)
    whole = joined({"type": "outer", "conditions": [on("l.k", "r.k")]}, [LEFT], [RIGHT])
    assert pairs(out) == pairs(whole)


def test_output_batches_hold_at_most_batch_rows() -> None:
    left = pa.record_batch({"a": list(range(7))})
    right = pa.record_batch({"b": list(range(5))})
    batches = run_join({}, [left], [right], batch_rows=4)
    assert all(b.num_rows <= 4 for b in batches) and sum(b.num_rows for b in batches) == 35


def test_nested_loop_blocks_keep_the_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(join_module, "PAIR_BLOCK", 3)
    left = pa.record_batch({"a": [1, 5, 2, 9]})
    right = pa.record_batch({"b": [3, 1, 4]})
    out = joined({"type": "left", "conditions": [on("a", "b", "<")]}, [left], [right])
    assert [(r["a"], r.get("b")) for r in out] == [
        (1, 3),
        (1, 4),
        (5, None),
        (2, 3),
        (2, 4),
        (9, None),
    ]


def test_a_right_side_beyond_the_buffer_limit_is_an_error() -> None:
    right = [pa.record_batch({"b": list(range(200))}) for _ in range(2)]
    with pytest.raises(ExecutionError) as raised:
        joined({}, [LEFT], right, max_buffered_bytes=2000)
    assert raised.value.operator_kind == "join" and raised.value.operator_id == "3"


def test_holds_treats_null_and_incomparable_as_false() -> None:
    assert holds("!=", pa.array([1, None, 1]), pa.array([2, 2, None])).tolist() == [
        True,
        False,
        False,
    ]
    assert holds(">=", pa.array(["b"]), pa.array(["a"])).tolist() == [True]
    assert holds("<", pa.array([{"a": 1}]), pa.array([{"a": 2}])).tolist() == [False]


RELATIONSHIPS = ["==", "!=", "<", "<=", ">", ">="]
_PY = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def reference(
    kind: str,
    conditions: list[tuple[str, str, str]],
    left: list[dict[str, Any]],
    right: list[dict[str, Any]],
) -> list[tuple[int | None, int | None]]:
    """The join by definition, as (left index, right index) pairs in R-JOIN-ORDER."""

    def match(lrow: dict[str, Any], rrow: dict[str, Any]) -> bool:
        for rel, lf, rf in conditions:
            a, b = lrow[lf], rrow[rf]
            if a is None or b is None or not _PY[rel](a, b):
                return False
        return True

    out: list[tuple[int | None, int | None]] = []
    matched: set[int] = set()
    for i, lrow in enumerate(left):
        found = [j for j, rrow in enumerate(right) if match(lrow, rrow)]
        matched.update(found)
        out += [(i, j) for j in found]
        if not found and kind in ("left", "outer"):
            out.append((i, None))
    if kind == "outer":
        out += [(None, j) for j in range(len(right)) if j not in matched]
    return out


small = st.none() | st.integers(0, 3)


@given(
    st.sampled_from(["inner", "left", "outer"]),
    st.lists(
        st.tuples(
            st.sampled_from(RELATIONSHIPS), st.sampled_from(["x", "y"]), st.sampled_from(["x", "y"])
        ),
        max_size=3,
    ),
    st.lists(st.fixed_dictionaries({"x": small, "y": small}), max_size=8),
    st.lists(st.fixed_dictionaries({"x": small, "y": small}), max_size=8),
    st.integers(1, 4),
)
@settings(max_examples=80, deadline=None)
def test_joins_match_the_definition(
    kind: str,
    conditions: list[tuple[str, str, str]],
    left: list[dict[str, Any]],
    right: list[dict[str, Any]],
    left_batch: int,
) -> None:
    schema = pa.schema([("x", pa.int64()), ("y", pa.int64())])
    lrows = [{"id": i, **row} for i, row in enumerate(left)]
    rrows = [{"id": j, **row} for j, row in enumerate(right)]
    lbatch = pa.RecordBatch.from_pylist(
        [{"l": r} for r in lrows],
        schema=pa.schema([("l", pa.struct([("id", pa.int64()), *schema]))]),
    )
    rbatch = pa.RecordBatch.from_pylist(
        [{"r": r} for r in rrows],
        schema=pa.schema([("r", pa.struct([("id", pa.int64()), *schema]))]),
    )
    lparts = [lbatch.slice(i, left_batch) for i in range(0, max(len(left), 1), left_batch)]
    plan = {
        "type": kind,
        "conditions": [on(f"l.{lf}", f"r.{rf}", rel) for rel, lf, rf in conditions],
    }
    out = joined(plan, lparts, [rbatch])
    got = [((r.get("l") or {}).get("id"), (r.get("r") or {}).get("id")) for r in out]
    assert got == reference(kind, conditions, left, right)


CASES = {case["id"]: case for case in load_cases()}


@pytest.mark.parametrize(
    "case_id", ["U04", "U05", "U06", "U07", "T21", "T22", "T23", "D09", "D11", "D12"]
)
def test_corpus_case(case_id: str) -> None:
    check_case(CASES[case_id], executor="local")


class _CountingSource(BatchSource):
    """A batch source that counts how many batches were pulled from it."""

    def __init__(self, operator_id: str, batches: list[pa.RecordBatch]) -> None:
        super().__init__(operator_id, batches)
        self.pulled = 0

    def produce(self) -> pa.RecordBatch | None:
        batch = super().produce()
        self.pulled += batch is not None
        return batch


def test_the_right_side_is_read_and_indexed_once_for_many_left_batches() -> None:
    op = Join.model_validate(
        {"@id": 3, "op": "join", "left": 1, "right": 2, "conditions": [on("l.k", "r.k")]}
    )
    left = [LEFT.slice(i, 1) for i in range(LEFT.num_rows)]
    right = _CountingSource("2", [RIGHT.slice(0, 2), RIGHT.slice(2)])
    operator = create_join(op, [BatchSource("1", left), right], ExecContext())
    out = [r for b in FragmentExecutor(operator).batches() for r in b.to_pylist()]
    assert pairs(out) == pairs(joined({"conditions": [on("l.k", "r.k")]}, [LEFT], [RIGHT]))
    assert right.pulled == 2 and operator.index_builds == 1


@pytest.mark.parametrize(
    ("left_keys", "right_keys"),
    [
        ([1, 2, None, 4, 2], [2, 2, 7, None, 1]),
        ([1.5, 2.0, None], [2, 1, 2]),
        (["b", "a", None, "c"], ["a", "a", "c", None]),
        ([True, False, None], [False, True, True]),
    ],
)
def test_the_key_index_matches_a_nested_loop(left_keys: list[Any], right_keys: list[Any]) -> None:
    left = pa.record_batch({"k": left_keys, "i": list(range(len(left_keys)))})
    right = pa.record_batch({"k2": right_keys, "j": list(range(len(right_keys)))})
    out = joined({"conditions": [on("k", "k2")]}, [left], [right])
    expected = [
        (i, j)
        for i, a in enumerate(left_keys)
        for j, b in enumerate(right_keys)
        if a is not None and b is not None and a == b
    ]
    assert [(r["i"], r["j"]) for r in out] == expected


def test_decimal_keys_match_by_value() -> None:
    # DECIMAL keys are indexed as their units (a sliced array starts at its offset); decimals of
    # two scales compare by value.
    cents = pa.decimal128(15, 2)
    keys = [Decimal(v) if v else None for v in ["-1.50", "2.00", None, "0.01", "2.00", "9.99"]]
    left = pa.record_batch({"k": pa.array(keys, cents), "i": range(6)}).slice(1)
    right = pa.record_batch(
        {"k2": pa.array([Decimal("2"), Decimal("0.01"), None, Decimal("-1.5")]), "j": range(4)}
    )
    for right_keys in (right, right.set_column(0, "k2", right["k2"].cast(cents))):
        out = joined({"conditions": [on("k", "k2")]}, [left], [right_keys])
        assert [(r["i"], r["j"]) for r in out] == [(1, 0), (3, 1), (4, 0)]


def test_two_equality_keys_use_one_index() -> None:
    left = pa.record_batch({"a": [1, 1, 2, 2], "b": ["x", "y", "x", "y"], "i": [0, 1, 2, 3]})
    right = pa.record_batch({"c": [2, 1, 1, 2], "d": ["y", "y", "x", "z"], "j": [0, 1, 2, 3]})
    out = joined({"conditions": [on("a", "c"), on("b", "d")]}, [left], [right])
    assert [(r["i"], r["j"]) for r in out] == [(0, 2), (1, 1), (3, 0)]


_KEY = st.one_of(
    st.none(),
    st.integers(-3, 3),
    st.sampled_from([2**62, -(2**63), 2**63 - 1, 10**6]),  # far apart: no lookup table
)


@settings(max_examples=200, deadline=None)
@given(
    left=st.lists(st.tuples(_KEY, st.integers(0, 2)), max_size=12),
    right=st.lists(st.tuples(_KEY, st.integers(0, 2)), min_size=1, max_size=12),
    two_keys=st.booleans(),
    narrow=st.booleans(),
    tables=st.booleans(),
)
def test_the_key_index_probe_is_a_nested_loop(
    left: list[tuple[Any, int]],
    right: list[tuple[Any, int]],
    two_keys: bool,
    narrow: bool,
    tables: bool,
) -> None:
    # One key or two, int64 or (small values) int8 on the left against int64 on the right.
    def columns(rows: list[tuple[Any, int]], small: bool) -> list[pa.Array]:
        first = [k for k, _ in rows]
        fits = small and all(k is None or -3 <= k <= 3 for k in first)
        keys = [pa.array(first, pa.int8() if fits else pa.int64())]
        return [*keys, pa.array([s for _, s in rows], pa.int64())] if two_keys else keys

    width = 2 if two_keys else 1
    dense = join_module._DENSE
    join_module._DENSE = dense if tables else -(2**62)  # no lookup tables: binary search
    try:
        index = KeyIndex(columns(right, False))
    finally:
        join_module._DENSE = dense
    li, ri = index.probe(columns(left, narrow), len(left))
    expected = [
        (i, j)
        for i, a in enumerate(left)
        for j, b in enumerate(right)
        if a[0] is not None and b[0] is not None and a[:width] == b[:width]
    ]
    assert list(zip(li.tolist(), ri.tolist(), strict=True)) == expected
