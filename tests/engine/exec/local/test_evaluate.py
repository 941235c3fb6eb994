"""The evaluator: literals, field paths, if/case, casts, predicates and the errors it reports."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import DrillError, EvaluationError
from engine.expr import parse_expression
from engine.expr.arrow.evaluate import evaluate, evaluate_predicate

NESTED = pa.RecordBatch.from_pylist(
    [
        {"r": {"id": 1, "items": [{"sku": "a", "q": 2}, {"sku": "b", "q": 5}]}, "v": "10"},
        {"r": {"id": 2, "items": []}, "v": "x7"},
        {"r": None, "v": None},
    ]
)


def values(expression: str, batch: pa.RecordBatch = NESTED) -> list:
    return evaluate(parse_expression(expression), batch).to_pylist()


def test_literals_broadcast_to_the_batch_length() -> None:
    assert values("1 + 2") == [3, 3, 3]
    assert values("'x'") == ["x", "x", "x"]
    assert values("null") == [None, None, None]
    assert (
        evaluate(
            parse_expression("true"), pa.record_batch({"a": pa.array([], pa.int64())})
        ).to_pylist()
        == []
    )


def test_field_paths_read_nested_values_and_missing_is_null() -> None:
    assert values("r.id") == [1, 2, None]
    assert values("r.items[1].sku") == ["b", None, None]
    assert values("r.nothere") == [None, None, None]
    assert values("nothere.at.all") == [None, None, None]


def test_a_path_through_a_list_without_an_index_projects_the_list() -> None:
    assert values("r.items.sku") == [["a", "b"], [], None]


def test_if_else_takes_the_first_true_branch_and_a_null_condition_is_not_true() -> None:
    assert values("if r.id == 1 then 'one' elseif r.id == 2 then 'two' else 'other' end") == [
        "one",
        "two",
        "other",
    ]
    assert values("case when r.id > 1 then r.id * 1.5 else 0 end") == [0.0, 3.0, 0.0]


def test_if_else_condition_must_be_boolean() -> None:
    with pytest.raises(EvaluationError, match="condition must be true or false"):
        values("if r.id then 1 else 2 end")


def test_cast_reads_strings_and_names_the_bad_value() -> None:
    batch = pa.record_batch({"v": ["10", " 3", None]})
    with pytest.raises(EvaluationError, match="' 3'") as raised:
        values("castBIGINT(v)", batch)
    assert "cast(v as BIGINT)" in str(raised.value)
    assert values("cast(v as BIGINT)", pa.record_batch({"v": ["10", None]})) == [10, None]
    assert values("cast(v as DOUBLE)", pa.record_batch({"v": ["1e3", "-0.5"]})) == [1000.0, -0.5]
    assert values("cast(v as BOOLEAN)", pa.record_batch({"v": ["true", "FALSE"]})) == [True, False]
    assert values("castVARCHAR(r.id)") == ["1", "2", None]
    assert values("castFLOAT8(r.id) / 4") == [0.25, 0.5, None]


def test_cast_rounds_numbers_half_away_from_zero_into_integers_like_drill() -> None:
    floats = pa.record_batch({"x": [2.9, -2.5, 2.49, None]})
    assert values("cast(x as INT)", floats) == [3, -3, 2, None]
    decimals = pa.record_batch(
        {"x": pa.array([Decimal("2.50"), Decimal("-1.49")], pa.decimal128(5, 2))}
    )
    assert values("cast(x as BIGINT)", decimals) == [3, -1]


def test_cast_of_a_map_is_an_error() -> None:
    with pytest.raises(EvaluationError, match="cannot cast a MAP"):
        values("cast(r as BIGINT)")


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("v > 3", "cannot compare VARCHAR with BIGINT"),
        ("r.id + v", "expected a number, got VARCHAR"),
        ("r > 1", "cannot compare a MAP"),
        ("r.id && true", "expected a boolean, got BIGINT"),
        ("lower(r.id)", "expected a string, got BIGINT"),
        ("r.id % 0", "division by zero"),
        ("regex_like(v, '(?<=a)b')", "invalid regular expression"),
        ("date_trunc('fortnight', to_date('2020-01-01'))", "no unit 'fortnight'"),
        ("date_trunc('day', v)", "needs a date or time"),
        ("to_date(v, 'yyyy-MM-dd')", "cannot read '10' with the pattern"),
        ("to_date(v, 'yyyy-QQ')", "pattern letter 'Q'"),
        ("sum(r.id)", "aggregate function"),
        ("coalesce(v, 1)", "incompatible types"),
    ],
)
def test_errors_are_evaluation_errors_naming_the_expression(expression: str, message: str) -> None:
    with pytest.raises(EvaluationError, match=message) as raised:
        values(expression)
    assert isinstance(raised.value, DrillError)
    assert "`" in str(raised.value)  # the expression text is quoted in the message


def test_an_error_in_a_subexpression_names_the_whole_expression_too() -> None:
    with pytest.raises(EvaluationError) as raised:
        values("r.id > 0 && v > 3")
    message = str(raised.value)
    assert "`v > 3`" in message and "`r.id > 0 && v > 3`" in message


def test_integer_overflow_is_an_error_not_a_wrap() -> None:
    with pytest.raises(EvaluationError, match="overflow"):
        values("9223372036854775807 + r.id")


def test_predicate_treats_null_as_false() -> None:
    predicate = evaluate_predicate(parse_expression("r.id > 1"), NESTED)
    assert isinstance(predicate, pa.BooleanArray)
    assert predicate.to_pylist() == [False, True, False]
    assert evaluate_predicate(parse_expression("nothere"), NESTED).to_pylist() == [False] * 3


def test_predicate_rejects_non_boolean_values() -> None:
    with pytest.raises(EvaluationError, match="must be true or false"):
        evaluate_predicate(parse_expression("r.id + 1"), NESTED)


def test_strings_compare_with_dates_by_reading_the_string() -> None:
    batch = pa.record_batch({"s": ["2021-01-02", "2020-12-31"]})
    assert values("to_date(s) >= '2021-01-01'", batch) == [True, False]
    assert values("'2021-01-01' < to_timestamp(s)", batch) == [True, False]


@given(
    st.lists(st.integers(-(10**9), 10**9), min_size=1, max_size=20),
    st.integers(-1000, 1000).filter(lambda d: d != 0),
)
def test_modulo_follows_java_truncated_division(numbers: list[int], divisor: int) -> None:
    batch = pa.record_batch({"a": pa.array(numbers, pa.int64())})
    got = values(f"a % ({divisor})", batch)
    expected = [a - int(a / divisor) * divisor for a in numbers]
    assert got == expected
    assert all(r == 0 or (r > 0) == (a > 0) for a, r in zip(numbers, got, strict=True))


@given(
    st.lists(st.one_of(st.none(), st.booleans()), min_size=1, max_size=10),
    st.one_of(st.none(), st.booleans()),
)
def test_and_or_are_kleene(left: list[bool | None], right: bool | None) -> None:
    batch = pa.record_batch(
        {"a": pa.array(left, pa.bool_()), "b": pa.array([right] * len(left), pa.bool_())}
    )

    def kleene_and(x: bool | None, y: bool | None) -> bool | None:
        if x is False or y is False:
            return False
        return None if x is None or y is None else True

    def kleene_or(x: bool | None, y: bool | None) -> bool | None:
        if x is True or y is True:
            return True
        return None if x is None or y is None else False

    assert values("a && b", batch) == [kleene_and(x, right) for x in left]
    assert values("a || b", batch) == [kleene_or(x, right) for x in left]
