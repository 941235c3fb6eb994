"""check_expression: unknown functions, arity, where aggregates may appear, nesting."""

from __future__ import annotations

import pytest

from engine.expr import check_expression, parse_expression


@pytest.mark.parametrize(
    ("text", "context"),
    [
        ("a.b > 1 && isnotnull(c)", "scalar"),
        ("sum(a)", "aggregate"),
        ("sum(a) / count(a)", "aggregate"),
        ("countDistinct(donuts.type)", "aggregate"),
        ("sum(donuts.ppu * quantity)", "aggregate"),
        ("sum(a)", "running"),
        ("row_number()", "running"),
        ("max(a) - min(a)", "running"),
        ("donuts.ppu", "aggregate"),
        ("coalesce(a, b, c, d)", "scalar"),
    ],
)
def test_valid_expressions_have_no_messages(text: str, context: str) -> None:
    assert check_expression(parse_expression(text), context) == []


@pytest.mark.parametrize(
    ("text", "context", "messages"),
    [
        ("sume(x)", "aggregate", ["unknown function 'sume' at column 1; did you mean 'sum'?"]),
        ("zzz(x)", "scalar", ["unknown function 'zzz' at column 1"]),
        (
            "substr(a)",
            "scalar",
            ["function 'substr' takes 2 to 3 arguments, got 1 at column 1"],
        ),
        ("sum(a, b)", "aggregate", ["function 'sum' takes 1 argument, got 2 at column 1"]),
        (
            "a + sum(b)",
            "scalar",
            [
                "aggregate function 'sum' is only allowed in collapsingaggregate/runningaggregate "
                "at column 5"
            ],
        ),
        (
            "count_distinct(a)",
            "running",
            [
                "aggregate function 'count_distinct' is only allowed in collapsingaggregate at column 1"
            ],
        ),
        (
            "row_number()",
            "aggregate",
            ["running function 'row_number' is only allowed in runningaggregate at column 1"],
        ),
        (
            "sum(count(x))",
            "aggregate",
            ["aggregate 'count' nested inside aggregate 'sum' at column 5"],
        ),
        (
            "sum(1 + max(x))",
            "running",
            ["aggregate 'max' nested inside aggregate 'sum' at column 9"],
        ),
    ],
)
def test_problems_are_reported(text: str, context: str, messages: list[str]) -> None:
    assert check_expression(parse_expression(text), context) == messages


def test_every_problem_is_reported_not_only_the_first() -> None:
    messages = check_expression("nope(sum(count(x)))", "scalar")
    assert messages[0] == "unknown function 'nope' at column 1"
    assert "aggregate 'count' nested inside aggregate 'sum' at column 10" in messages
    assert sum("only allowed" in m for m in messages) == 2


def test_cast_function_typo_names_the_cast_forms() -> None:
    (message,) = check_expression("castBIGNT(x)", "scalar")
    assert "write cast(x as TYPE) or castTYPE(x)" in message


def test_text_is_parsed_and_trees_built_by_hand_have_no_position() -> None:
    from engine.expr import Call, FieldRef

    assert check_expression("sum(a)", "scalar") == check_expression(
        parse_expression("sum(a)"), "scalar"
    )
    tree = Call("sum", (Call("count", (FieldRef(("x",)),)),))
    assert check_expression(tree, "aggregate") == [
        "aggregate 'count' nested inside aggregate 'sum'"
    ]


def test_unknown_context_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="context is one of"):
        check_expression("a", "window")
